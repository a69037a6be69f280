//! `ci/phase-table --strict`, which the CI suites end with: a scenario that `faultlab run --budget` did
//! not start is named and does not fail the suite; any other skipped or failed one does.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use faultlab::report::{ScenarioReport, Status, SuiteReport};

fn script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../ci/phase-table")
}

fn table(dir: &Path, scenarios: Vec<ScenarioReport>) -> (bool, String) {
    let path = dir.join("suite.json");
    std::fs::write(&path, SuiteReport::new(60.0, scenarios).json()).unwrap();
    let out = Command::new("python3").arg(script()).arg("--strict").arg(&path).output().unwrap();
    assert!(out.stderr.is_empty(), "{}", String::from_utf8_lossy(&out.stderr));
    (out.status.success(), String::from_utf8(out.stdout).unwrap())
}

fn passed(name: &str) -> ScenarioReport {
    let mut r = ScenarioReport::ignored(name, "");
    r.status = Status::Passed;
    r.error = None;
    r
}

#[test]
fn scenarios_the_budget_did_not_start_are_named_and_do_not_fail_the_suite() {
    let dir = tempfile::tempdir().unwrap();
    let why = faultlab::suite::over_budget(Duration::from_secs(1500), Duration::from_secs(1500)).unwrap();
    let (ok, out) = table(dir.path(), vec![passed("cni-broken"), ScenarioReport::ignored("pause-missing", &why), ScenarioReport::ignored("storageclass-missing", &why)]);
    assert!(ok, "{out}");
    assert!(out.contains("not started, the time budget used up: 2 (pause-missing, storageclass-missing)\n"), "{out}");
    assert!(out.ends_with("1 passed, 0 failed, 2 skipped\n"), "{out}");
}

#[test]
fn other_skipped_or_failed_scenarios_fail_the_suite() {
    let dir = tempfile::tempdir().unwrap();
    let (ok, out) = table(dir.path(), vec![passed("cni-broken"), ScenarioReport::ignored("pause-missing", "no cluster")]);
    assert!(!ok, "{out}");
    assert!(!out.contains("not started"), "{out}");
    let mut failed = passed("cni-broken");
    failed.status = Status::Failed;
    let why = faultlab::suite::over_budget(Duration::from_secs(9), Duration::from_secs(1)).unwrap();
    let (ok, out) = table(dir.path(), vec![failed, ScenarioReport::ignored("pause-missing", &why)]);
    assert!(!ok, "{out}");
    assert!(out.ends_with("0 passed, 1 failed, 1 skipped\n"), "{out}");
    // A scenario the platform refused was not run: CI passes the flags that let each one run.
    let mut refused = passed("inotify-limit");
    refused.status = Status::Refused;
    refused.error = Some("refusing to run inotify-limit on kind: ...".into());
    let (ok, out) = table(dir.path(), vec![passed("cni-broken"), refused]);
    assert!(!ok, "{out}");
    assert!(out.ends_with("1 passed, 0 failed, 1 refused by the platform, 0 skipped\n"), "{out}");
}

#[test]
fn failures_names_each_failed_scenario_with_its_phase_error_and_snapshot_difference() {
    let dir = tempfile::tempdir().unwrap();
    let mut failed = passed("duplicate-container");
    failed.status = Status::Failed;
    failed.platform = "k8s-1.20-containerd-1.6-arm64".into();
    failed.node = "faultlab-node".into();
    failed.failed_phase = Some(faultlab::record::Phase::Symptom);
    failed.error = Some("timed out after 2m waiting for the symptom\nseen: Pulled".into());
    failed.snapshot = faultlab::snapshot::SnapshotResult::Changed("events differ\n  missing: Warning BackOff".into());
    failed.teardown_errors = vec!["undo 1 failed: exit 1\nstderr".into()];
    let path = dir.path().join("arm64-suite.json");
    std::fs::write(&path, SuiteReport::new(60.0, vec![passed("cni-broken"), failed]).json()).unwrap();
    let absent = dir.path().join("kind-suite.json");
    let out = Command::new("python3").arg(script()).arg("--failures").arg(&absent).arg(&path).output().unwrap();
    assert!(out.status.success() && out.stderr.is_empty(), "{}", String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8(out.stdout).unwrap();
    let expected = format!(
        "FAILED {}: duplicate-container on k8s-1.20-containerd-1.6-arm64 (faultlab-node), in symptom\n    timed out after 2m waiting for the symptom\n    seen: Pulled\n    snapshot: events differ\n    snapshot:   missing: Warning BackOff\n    teardown: undo 1 failed: exit 1\n",
        path.display()
    );
    assert_eq!(text, expected);
    // A new snapshot failed by --strict-snapshots: its paragraph (where the events wait) too; a report
    // of an older faultlab (`"snapshot": {"result": "mismatched", ...}`) still shows its difference.
    let mut strict = passed("cni-broken");
    strict.status = Status::Failed;
    strict.platform = "p".into();
    strict.failed_phase = Some(faultlab::record::Phase::Recovery);
    strict.error = Some("no reviewed snapshot of cni-broken on p, and --strict-snapshots fails a run without one".into());
    strict.snapshot = faultlab::snapshot::SnapshotResult::New("no reviewed snapshot yet for cni-broken on p: wrote x.snap.new".into());
    let mut older: serde_json::Value = serde_json::from_str(&SuiteReport::new(1.0, vec![strict.clone()]).json()).unwrap();
    older["scenarios"][0]["snapshot"] = serde_json::json!({"result": "mismatched", "detail": "events differ"});
    let older_path = dir.path().join("older.json");
    std::fs::write(&older_path, older.to_string()).unwrap();
    std::fs::write(&path, SuiteReport::new(60.0, vec![strict]).json()).unwrap();
    let out = Command::new("python3").arg(script()).arg("--failures").arg(&path).arg(&older_path).output().unwrap();
    assert!(out.status.success() && out.stderr.is_empty(), "{}", String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8(out.stdout).unwrap();
    let expected = format!(
        "FAILED {}: cni-broken on p (-), in recovery\n    no reviewed snapshot of cni-broken on p, and --strict-snapshots fails a run without one\n    snapshot: no reviewed snapshot yet for cni-broken on p: wrote x.snap.new\nFAILED {}: cni-broken on p (-), in recovery\n    no reviewed snapshot of cni-broken on p, and --strict-snapshots fails a run without one\n    snapshot: events differ\n",
        path.display(),
        older_path.display()
    );
    assert_eq!(text, expected);
    // Nothing failed: nothing printed.
    std::fs::write(&path, SuiteReport::new(60.0, vec![passed("cni-broken")]).json()).unwrap();
    let out = Command::new("python3").arg(script()).arg("--failures").arg(&path).output().unwrap();
    assert!(out.status.success() && out.stdout.is_empty());
}

#[test]
fn a_report_that_is_not_there_or_not_json_is_named_without_a_traceback() {
    let dir = tempfile::tempdir().unwrap();
    let present = dir.path().join("suite.json");
    std::fs::write(&present, SuiteReport::new(60.0, vec![passed("cni-broken")]).json()).unwrap();
    let absent = dir.path().join("suite-sequential.json");
    let out = Command::new("python3").arg(script()).arg("--walls").arg(&absent).arg(&present).output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert_eq!(err, format!("ci/phase-table: cannot read the report {}: No such file or directory\n", absent.display()));
    std::fs::write(&absent, "{\n  \"wall_seconds\": 1,\n  oops\n}").unwrap();
    let out = Command::new("python3").arg(script()).arg("--walls").arg(&absent).arg(&present).output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(err.starts_with(&format!("ci/phase-table: {} line 3: not a faultlab JSON report", absent.display())) && !err.contains("Traceback"), "{err}");
}

#[test]
fn walls_break_faultlabs_own_time_down_by_what_it_went_to() {
    use faultlab::runner::{OwnTime, Timings};
    let dir = tempfile::tempdir().unwrap();
    let timed = |name: &str, own: Option<OwnTime>| {
        let mut r = passed(name);
        r.timings = Timings { setup: Some(10.0), inject: Some(20.0), symptom: Some(30.0), fix: Some(10.0), recovery: Some(20.0), teardown: Some(10.0), waiting: Some(70.0), own };
        r
    };
    let own = OwnTime { commands: 20.0, fault_commands: 15.0, api: 4.0, settling: 3.0, undoing: 2.0 };
    let seq = dir.path().join("seq.json");
    let par = dir.path().join("par.json");
    std::fs::write(&seq, SuiteReport::new(200.0, vec![timed("a", Some(own.clone())), timed("b", Some(own))]).json()).unwrap();
    // A report from before the breakdown: the share alone.
    std::fs::write(&par, SuiteReport::new(120.0, vec![timed("a", None), timed("b", None)]).json()).unwrap();
    let out = Command::new("python3").arg(script()).arg("--walls").arg(&seq).arg(&par).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8(out.stdout).unwrap();
    let expected = "wall time, --jobs 1: 200.0s; side by side: 120.0s (1.67x faster)\n\
        longest single scenario: a 100.0s; side by side = 1.20x it (target: at most 1.5x)\n\
        faultlab's own time, --jobs 1: 60.0s of 200.0s of phases (30.0 %; target: under 5 %)\n\
        \x20   commands 40.0s (of which the faults' own, in inject and fix: 30.0s), API calls 8.0s, settling 6.0s, undoing 4.0s, the rest 2.0s\n\
        \x20   without the faults' own commands: 30.0s (15.0 %; target: under 5 %)\n\
        faultlab's own time, side by side: 60.0s of 200.0s of phases (30.0 %; target: under 5 %)\n";
    assert_eq!(text, expected);
}

/// A kind report: the table breaks faultlab's own time down too, and weighs the shared clusters against a
/// cluster for each scenario at the mean creation time (each cluster's creation its longest cluster
/// time: the others only reached it).
#[test]
fn a_kind_table_weighs_sharing_clusters_and_breaks_own_time_down() {
    use faultlab::runner::{OwnTime, Timings};
    let dir = tempfile::tempdir().unwrap();
    let on = |name: &str, cluster: &str, seconds: f64| {
        let mut r = passed(name);
        r.cluster = Some(cluster.into());
        r.cluster_seconds = Some(seconds);
        r.timings = Timings { setup: Some(10.0), recovery: Some(10.0), waiting: Some(15.0), own: Some(OwnTime { commands: 2.0, fault_commands: 1.0, api: 0.5, settling: 2.0, undoing: 0.0 }), ..Default::default() };
        r
    };
    let (ok, out) = table(dir.path(), vec![on("a", "c1", 60.0), on("b", "c1", 0.02), on("c", "c1", 0.02), on("d", "c2", 40.0)]);
    assert!(ok, "{out}");
    // Clusters 60.04 + 40 s, phases 80 s; four clusters at a mean 50 s would be 200 + 80 s.
    assert!(out.contains("kind clusters shared: 180.0s of clusters and phases; a cluster for each of the 4 scenarios (mean creation 50.0s) about 280.0s: 1.56x (target: 3x; one cluster for all: 2.15x)\n"), "{out}");
    assert!(out.contains("    commands 8.0s (of which the faults' own, in inject and fix: 4.0s), API calls 2.0s, settling 8.0s, undoing 0.0s, the rest 2.0s\n"), "{out}");
    assert!(out.contains("    without the faults' own commands: 16.0s (20.0 %; target: under 5 %)\n"), "{out}");
}
