//! `ci/merge-reports`, which CI's last job runs on the reports of a suite run in parts (`faultlab run
//! --all --shard I/N`): the parts' JSON and JUnit reports, as faultlab writes them, merged into one.

use std::path::{Path, PathBuf};
use std::process::Command;

use faultlab::report::{ScenarioReport, Status, SuiteReport};

fn script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../ci/merge-reports")
}

fn part(dir: &Path, name: &str, wall: f64, scenarios: &[(&str, Status)]) -> (PathBuf, PathBuf) {
    let reports = scenarios
        .iter()
        .map(|(n, status)| {
            let mut r = ScenarioReport::ignored(n, "");
            r.status = *status;
            r.platform = "kind-1.20-containerd-1.6-amd64".into();
            r.error = (*status == Status::Failed).then(|| "it failed".into());
            r
        })
        .collect();
    let suite = SuiteReport::new(wall, reports);
    let (json, xml) = (dir.join(format!("{name}.json")), dir.join(format!("{name}.xml")));
    std::fs::write(&json, suite.json()).unwrap();
    std::fs::write(&xml, suite.junit()).unwrap();
    (json, xml)
}

fn merge(args: &[&Path]) -> std::process::Output {
    Command::new("python3").arg(script()).args(args).output().unwrap()
}

#[test]
fn parts_merge_into_one_report_and_an_overlap_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let (a_json, a_xml) = part(d, "a", 100.0, &[("pause-missing", Status::Passed), ("cni-broken", Status::Failed)]);
    let (b_json, b_xml) = part(d, "b", 140.0, &[("configmap-missing", Status::Passed)]);
    let (out_json, out_xml) = (d.join("merged.json"), d.join("merged.xml"));

    let out = merge(&[Path::new("--json"), &out_json, &a_json, &b_json]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let merged: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&out_json).unwrap()).unwrap();
    assert_eq!(merged["wall_seconds"], 140.0, "the parts ran side by side: the longest");
    assert_eq!(merged["parts"], 2);
    assert_eq!(merged["schemaVersion"], faultlab::report::SCHEMA_VERSION, "the parts' layout version is kept");
    let names: Vec<&str> = merged["scenarios"].as_array().unwrap().iter().map(|s| s["scenario"].as_str().unwrap()).collect();
    assert_eq!(names, ["cni-broken", "configmap-missing", "pause-missing"]);
    assert_eq!(merged["scenarios"][0]["status"], "failed");

    let out = merge(&[Path::new("--junit"), &out_xml, &a_xml, &b_xml]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let xml = std::fs::read_to_string(&out_xml).unwrap();
    assert!(xml.contains(r#"<testsuites name="faultlab""#) && xml.contains(r#"tests="3""#) && xml.contains(r#"failures="1""#), "{xml}");
    assert_eq!(xml.matches("<testcase ").count(), 3, "{xml}");
    assert_eq!(xml.matches("<testsuite ").count(), 2, "{xml}");

    // The same scenario in two parts: not parts of one split.
    let out = merge(&[Path::new("--json"), &out_json, &a_json, &a_json]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && err.contains("pause-missing (kind-1.20-containerd-1.6-amd64) is in"), "{err}");
    let out = merge(&[Path::new("--junit"), &out_xml, &a_xml, &a_xml]);
    assert!(!out.status.success() && String::from_utf8_lossy(&out.stderr).contains("test case"), "{}", String::from_utf8_lossy(&out.stderr));
}
