//! The scenario format: valid and invalid fixtures, every shipped scenario, and the checked-in schema.

use std::path::{Path, PathBuf};

use faultlab::scenario;

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/scenarios")
}

fn yaml_files(dir: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir).unwrap().map(|e| e.unwrap().path()).filter(|p| p.extension().is_some_and(|e| e == "yaml")).collect();
    v.sort();
    v
}

#[test]
fn valid_fixtures_load() {
    for path in yaml_files(&fixtures().join("valid")) {
        let loaded = scenario::load(&path).unwrap_or_else(|e| panic!("{e}"));
        let texts = loaded.manifest_texts().unwrap();
        assert!(texts[0].contains("${images.busybox}"), "manifest read relative to the scenario file");
    }
}

#[test]
fn invalid_fixtures_fail_with_file_line_and_field() {
    let files = yaml_files(&fixtures().join("invalid"));
    assert!(files.len() >= 8, "the invalid fixtures are all here");
    for path in files {
        let text = std::fs::read_to_string(&path).unwrap();
        let expect = text.lines().next().and_then(|l| l.strip_prefix("# expect: ")).unwrap_or_else(|| panic!("{} lacks `# expect:`", path.display()));
        let err = scenario::load(&path).expect_err(&format!("{} should not load", path.display())).to_string();
        assert!(err.contains(expect), "{}:\n  expected: {expect}\n  got:      {err}", path.display());
    }
}

#[test]
fn every_shipped_scenario_loads() {
    let all = scenario::load_all(&scenario::default_dir()).unwrap_or_else(|e| panic!("{e}"));
    assert!(all.contains_key("pause-missing") && all.contains_key("configmap-missing"), "{:?}", all.keys());
    for (name, s) in all {
        assert!(!s.scenario.hints.is_empty(), "{name} has hints for trainees");
        assert!(!s.manifest_texts().unwrap().is_empty(), "{name} has a workload");
    }
}

#[test]
fn checked_in_schema_is_current() {
    let path = scenario::default_dir().join("schema.json");
    let stored = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        stored == scenario::json_schema(),
        "{} is stale: regenerate it with `cargo run -q -- schema > scenarios/schema.json`",
        path.display()
    );
}

#[test]
fn testbed_description_fixtures() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/testbed");
    faultlab::testbed::TestBed::read(&dir.join("valid.yaml")).unwrap();
    // As `ci/testbed/up --arch arm64` wrote it: the VM node, reached by ssh.
    let vm = faultlab::testbed::TestBed::read(&dir.join("valid-ssh.yaml")).unwrap();
    assert_eq!(vm.platform, "k8s-1.20-containerd-1.6-arm64");
    assert_eq!(vm.nodes[0].arch(), "arm64");
    assert!(matches!(vm.nodes[0].access(), Some(faultlab::node::NodeAccess::Ssh(s)) if s.port == Some(22622)), "{:?}", vm.nodes[0].access());
    let err = faultlab::testbed::TestBed::read(&dir.join("invalid-no-access.yaml")).unwrap_err().to_string();
    assert!(err.ends_with("invalid-no-access.yaml: nodes[0]: a node needs `netns`, `container` or `ssh` so commands can reach it"), "{err}");
    let err = faultlab::testbed::TestBed::read(&dir.join("missing.yaml")).unwrap_err().to_string();
    assert!(err.ends_with("missing.yaml: cannot read: No such file or directory (os error 2)"), "{err}");
}

/// The README's example of a cluster of one's own over ssh loads as a description.
#[test]
fn the_example_cluster_description_loads() {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/cluster-over-ssh.yaml");
    let bed = faultlab::testbed::TestBed::read(&path).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(bed.nodes[0].ssh.as_ref().map(|s| s.destination.as_str()), Some("root@worker-1.lab"));
    assert_eq!(bed.context, "staging-lab");
}
