//! `-o json|yaml` on list, show, plan and sessions: whole documents a program can read, the same data
//! as the text. (`run -o json|yaml` is the report, tested with the runs; `check -o` needs a session.)

use std::process::{Command, Stdio};

fn faultlab(args: &[&str]) -> String {
    let state = tempfile::tempdir().unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_faultlab")).args(args).env("FAULTLAB_STATE_DIR", state.path()).env_remove("FAULTLAB_SCENARIOS").stdin(Stdio::null()).output().unwrap();
    assert!(out.status.success(), "{args:?}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).unwrap()
}

#[test]
fn list_as_json_names_every_scenario_the_text_lists() {
    let text = faultlab(&["list"]);
    let json: serde_json::Value = serde_json::from_str(&faultlab(&["list", "-o", "json"])).unwrap();
    let names: Vec<&str> = json["scenarios"].as_array().unwrap().iter().map(|s| s["name"].as_str().unwrap()).collect();
    let (runnable, gaps) = text.split_once("\n\nnot reproducible (").expect("the set has documented causes it does not reproduce");
    let text_names: Vec<&str> = runnable.lines().map(|l| l.split_whitespace().next().unwrap()).collect();
    assert_eq!(names, text_names);
    let gap_names: Vec<&str> = json["notReproducible"].as_array().unwrap().iter().map(|s| s["name"].as_str().unwrap()).collect();
    let text_gaps: Vec<&str> = gaps.lines().skip(1).map(|l| l.split_whitespace().next().unwrap()).collect();
    assert_eq!(gap_names, text_gaps);
    assert!(gap_names.contains(&"loadbalancer-pending"), "{gap_names:?}");
    assert!(json["notReproducible"][0]["reason"].as_str().unwrap().len() > 80, "each says why");
    assert!(!names.iter().any(|n| gap_names.contains(n)), "a cause is runnable or not, never both");
    assert!(json["broken"].as_array().unwrap().is_empty());
    assert!(json["scenarios"][0]["path"].as_str().unwrap().ends_with(".yaml"));
}

#[test]
fn show_as_yaml_is_the_scenario_with_its_reach() {
    let yaml: serde_json::Value = serde_saphyr::from_str(&faultlab(&["show", "pause-missing", "-o", "yaml"])).unwrap();
    assert_eq!(yaml["scenario"]["metadata"]["name"], "pause-missing");
    assert_eq!(yaml["reach"], "the node");
    let json: serde_json::Value = serde_json::from_str(&faultlab(&["show", "pause-missing", "--output", "json"])).unwrap();
    assert_eq!(json, yaml, "the same document either way");
}

#[test]
fn plan_as_json_has_the_texts_lines() {
    let args = ["plan", "configmap-missing", "--provider", "kind", "--arch", "amd64"];
    let text = faultlab(&args);
    let json: serde_json::Value = serde_json::from_str(&faultlab(&[&args[..], &["-o", "json"]].concat())).unwrap();
    assert_eq!(json[0]["scenario"], "configmap-missing");
    let lines: Vec<&str> = json[0]["lines"].as_array().unwrap().iter().map(|l| l.as_str().unwrap()).collect();
    // The kind cluster's generated name and the state directory differ from one plan to the next; the
    // rest is the same.
    let name = regex::Regex::new("faultlab-configmap-missing-[a-z0-9]{5}").unwrap();
    let state = regex::Regex::new(&format!(r"{}/\.tmp[A-Za-z0-9]+", regex::escape(&std::env::temp_dir().display().to_string()))).unwrap();
    let shape = |l: &str| state.replace_all(&name.replace_all(l, "NAME"), "STATE").into_owned();
    assert_eq!(lines.iter().map(|l| shape(l)).collect::<Vec<_>>(), text.trim_end().lines().map(shape).collect::<Vec<_>>());
}

#[test]
fn sessions_as_json_is_a_list() {
    assert_eq!(serde_json::from_str::<serde_json::Value>(&faultlab(&["sessions", "-o", "json"])).unwrap(), serde_json::json!([]));
}
