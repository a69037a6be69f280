//! `faultlab run --all --jobs N` on a test bed of two nodes whose API does not answer: every run fails
//! at once, but the runner still schedules them, so the report shows where each one went and what ran
//! beside it. Whatever the timing, the rules hold: a scenario that must run alone ran beside none,
//! two on the same host port never together, a node-wide one never beside another on its node.

use std::collections::BTreeMap;
use std::path::Path;

use faultlab::report::SuiteReport;

fn fixture() -> String {
    std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/testbed/valid.yaml")).unwrap()
}

/// A description of two nodes (the fixture's node and a copy named faultlab-node-2) whose kubeconfig
/// names a port where nothing listens.
fn two_node_bed(dir: &Path) -> std::path::PathBuf {
    let kubeconfig = dir.join("kubeconfig");
    std::fs::write(
        &kubeconfig,
        "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster: {server: \"https://127.0.0.1:9\", insecure-skip-tls-verify: true}\nusers:\n- name: u\n  user: {token: x}\ncontexts:\n- name: faultlab-testbed\n  context: {cluster: c, user: u}\ncurrent-context: faultlab-testbed\n",
    )
    .unwrap();
    let text = fixture().replace("kubeconfig: /var/lib/faultlab/testbed/kubeconfig", &format!("kubeconfig: {}", kubeconfig.display()));
    let (head, nodes) = text.split_once("nodes:\n").unwrap();
    let second = nodes.replacen("name: faultlab-node", "name: faultlab-node-2", 1).replacen("netns: faultlab-node", "netns: faultlab-node-2", 1);
    let bed = dir.join("testbed.yaml");
    std::fs::write(&bed, format!("{head}nodes:\n{nodes}{second}")).unwrap();
    bed
}

fn run(dir: &Path, jobs: &str) -> SuiteReport {
    let bed = two_node_bed(dir);
    let out = duct::cmd!(env!("CARGO_BIN_EXE_faultlab"), "run", "--all", "--jobs", jobs, "--provider", "existing", "--output", "json")
        .env("FAULTLAB_TESTBED", &bed)
        .env("FAULTLAB_STATE_DIR", dir.join("state"))
        // Machine locks of their own: a real run elsewhere on this machine (CI's kind suite) holds the host.
        .env("FAULTLAB_LOCK_DIR", dir.join("locks"))
        .env("RUST_LOG", "off")
        .stdout_capture()
        .stderr_capture()
        .unchecked()
        .run()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "every run fails: {}", String::from_utf8_lossy(&out.stderr));
    serde_json::from_slice(&out.stdout).unwrap()
}

#[test]
fn side_by_side_runs_keep_to_their_reach() {
    let dir = tempfile::tempdir().unwrap();
    let suite = run(dir.path(), "4");
    let names: Vec<&str> = suite.scenarios.iter().map(|s| s.scenario.as_str()).collect();
    assert!(names.windows(2).all(|w| w[0] < w[1]) && names.len() > 10, "every scenario once, reported in name order: {names:?}");
    let by_name: BTreeMap<&str, _> = suite.scenarios.iter().map(|s| (s.scenario.as_str(), s)).collect();
    let reach = |name: &str| {
        let loaded = faultlab::scenario::find(&faultlab::scenario::default_dir(), name).unwrap();
        loaded.scenario.fault.fault().claim()
    };
    for s in &suite.scenarios {
        assert!(["faultlab-node", "faultlab-node-2"].contains(&s.node.as_str()), "{}: node {:?}", s.scenario, s.node);
        let claim = reach(&s.scenario);
        use faultlab::schedule::Scope;
        if matches!(claim.scope, Scope::Cluster | Scope::Host) {
            assert!(s.ran_beside.is_empty(), "{} must run alone, ran beside {:?}", s.scenario, s.ran_beside);
        }
        if claim.scope == Scope::NodeFailure {
            assert!(s.ran_beside.is_empty(), "{}: a node's failure holds both nodes of two, ran beside {:?}", s.scenario, s.ran_beside);
        }
        for other in &s.ran_beside {
            let o = by_name[other.as_str()];
            assert!(o.ran_beside.contains(&s.scenario), "beside is mutual: {} / {other}", s.scenario);
            let oc = reach(other);
            assert!(!claim.host_ports.iter().any(|p| oc.host_ports.contains(p)), "{} and {other} share a host port", s.scenario);
            assert!(!(claim.host_disk && oc.host_disk), "{} and {other} filled this machine's disk at once", s.scenario);
            if claim.scope == Scope::Node || oc.scope == Scope::Node {
                assert_ne!(s.node, o.node, "{} and {other} broke the same node at once", s.scenario);
            }
        }
    }
}

#[test]
fn one_job_runs_one_after_the_other() {
    let dir = tempfile::tempdir().unwrap();
    let suite = run(dir.path(), "1");
    assert!(suite.scenarios.iter().all(|s| s.ran_beside.is_empty()));
    assert!(suite.scenarios.iter().all(|s| s.node == "faultlab-node"), "one at a time: the first node each time");
}
