//! Exit statuses, one meaning each (`faultlab --help` and the README list them): a test per status, a
//! closed pipe, and errors that are one line whatever `RUST_BACKTRACE` says. Nothing here needs a
//! cluster; 130 and 143 (interrupted) are tested with kind stand-ins in tests/kind_contract.rs.

use std::path::Path;
use std::process::{Command, Output, Stdio};

fn faultlab(args: &[&str], state: &Path) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_faultlab"));
    c.args(args)
        .env("FAULTLAB_STATE_DIR", state)
        // Machine locks of their own: a real run elsewhere on this machine (CI's kind suite) holds the host.
        .env("FAULTLAB_LOCK_DIR", state.join("locks"))
        .env_remove("FAULTLAB_SCENARIOS")
        .env_remove("FAULTLAB_EXPECTATIONS")
        .env_remove("FAULTLAB_STRICT_SNAPSHOTS")
        .env("RUST_BACKTRACE", "1")
        .env("RUST_LIB_BACKTRACE", "1")
        .stdin(Stdio::null());
    c
}

fn run(args: &[&str]) -> (Option<i32>, String, String) {
    let state = tempfile::tempdir().unwrap();
    let Output { status, stdout, stderr } = faultlab(args, state.path()).output().unwrap();
    (status.code(), String::from_utf8_lossy(&stdout).into_owned(), String::from_utf8_lossy(&stderr).into_owned())
}

#[test]
fn zero_when_done() {
    for args in [&["list"][..], &["validate"], &["show", "pause-missing"], &["plan", "pause-missing", "--provider", "kind", "--arch", "amd64"]] {
        let (code, _, err) = run(args);
        assert_eq!(code, Some(0), "{args:?}: {err}");
    }
}

#[test]
fn one_when_snapshots_wait_for_review() {
    let from = tempfile::tempdir().unwrap();
    let platform = "kind-1.20-containerd-2.1-amd64";
    let reviewed = Path::new(env!("CARGO_MANIFEST_DIR")).join("../expectations").join(platform).join("pause-missing.snap");
    std::fs::create_dir(from.path().join(platform)).unwrap();
    std::fs::copy(&reviewed, from.path().join(platform).join("pause-missing.snap.new")).unwrap();
    let (code, out, err) = run(&["snapshots", "review", "--from", from.path().to_str().unwrap()]);
    assert_eq!(code, Some(1), "{out}{err}");
    assert!(out.contains("pause-missing"), "{out}");
}

#[test]
fn two_for_usage_errors_and_scenarios_that_do_not_exist_or_load() {
    let (code, _, err) = run(&["run", "no-such-scenario", "--provider", "kind"]);
    assert_eq!(code, Some(2), "{err}");
    let (code, _, err) = run(&["run", "pause-missing", "--jobs", "0"]);
    assert_eq!(code, Some(2), "{err}");
    let (code, _, err) = run(&["frobnicate"]);
    assert_eq!(code, Some(2), "{err}");
    let (code, _, err) = run(&["plan", "pause-missing", "--provider", "existing", "--kubeconfig", "/nonexistent/kubeconfig"]);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("--kubeconfig /nonexistent/kubeconfig: no such file"), "{err}");
    let (code, _, err) = run(&["plan", "pause-missing", "--provider", "kind", "--context", "staging"]);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("on kind, faultlab makes the cluster it runs on, or runs on one of yours named by --cluster NAME"), "{err}");

    let set = tempfile::tempdir().unwrap();
    let dir = set.path().to_str().unwrap();
    let (code, _, err) = run(&["list", "--scenarios", dir]);
    assert_eq!(code, Some(2), "an empty set: {err}");
    assert!(err.contains("no scenario files (*.yaml, *.yml)"), "{err}");
    std::fs::write(set.path().join("broken.yml"), "apiVersion: faultlab.dev/v1\nkind: Nonsense\n").unwrap();
    let (code, out, err) = run(&["validate", dir]);
    assert_eq!(code, Some(2), "{out}{err}");
    assert!(out.contains("broken.yml"), ".yml files are scenario files too: {out}");
}

#[test]
fn three_for_the_environment() {
    let (code, _, err) = run(&["report", "--html", "/nonexistent/out", "/nonexistent/suite.json"]);
    assert_eq!(code, Some(3), "{err}");
    assert!(err.starts_with("error: reading /nonexistent/suite.json"), "{err}");
    // A scenario the platform refuses: a fault that reaches past a kind node into the host, refused
    // before anything runs. Reported `refused`, and the run exits 3 when nothing failed.
    let (code, out, err) = run(&["run", "inotify-limit", "--provider", "kind", "--arch", "amd64", "--output", "json"]);
    assert_eq!(code, Some(3), "{out}{err}");
    let report: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(report["scenarios"][0]["status"], "refused", "{out}");
    assert!(report["scenarios"][0]["error"].as_str().unwrap().starts_with("refusing to run inotify-limit on kind"), "{out}");
    assert!(err.contains("error: 1 scenario(s) refused on this platform and not run"), "{err}");
}

#[test]
fn errors_are_one_line_whatever_rust_backtrace_says() {
    let (code, out, err) = run(&["run", "no-such-scenario", "--provider", "kind"]);
    assert_eq!(code, Some(2));
    assert!(out.is_empty(), "{out}");
    assert_eq!(err.lines().count(), 1, "one line, no backtrace: {err}");
    assert!(err.starts_with("error: no scenario named \"no-such-scenario\""), "{err}");
}

#[test]
fn a_closed_pipe_ends_quietly() {
    let state = tempfile::tempdir().unwrap();
    let mut child = faultlab(&["plan", "--all", "--provider", "kind", "--arch", "amd64"], state.path()).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap();
    // The reader goes away before reading anything, as `| head -0` would.
    drop(child.stdout.take());
    let out = child.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!err.contains("panicked") && err.trim().is_empty(), "{err}");
    assert_eq!(out.status.code(), Some(141), "{err}");
}
