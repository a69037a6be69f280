//! Teardown under fire: a run killed with SIGINT in the middle of its fault leaves nothing behind once
//! it exits; one killed with SIGKILL leaves nothing behind after `faultlab cleanup`.
//!
//! Needs the test bed (its description file); without it both trials are reported ignored.

use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode, Stdio};
use std::time::{Duration, Instant};

use faultlab::journal::Journal;
use faultlab::node::NodeProfile;
use faultlab::suite;
use faultlab::testbed::TestBed;
use libtest_mimic::{Arguments, Failed, Trial};

const SCENARIO: &str = "pause-missing";

fn main() -> ExitCode {
    let mut args = Arguments::from_args();
    args.test_threads = Some(1);
    let bed = suite::require_testbed("these trials").map_err(|e| e.to_string());
    if let Err(reason) = &bed {
        eprintln!("teardown trials ignored: {reason}");
    }
    let trials = [("sigint-mid-fault", libc::SIGINT), ("sigkill-then-cleanup", libc::SIGKILL)]
        .into_iter()
        .map(|(name, signal)| {
            let bed = bed.clone();
            let ignored = bed.is_err();
            let t = Trial::test(name, move || trial(bed.map_err(Failed::from)?, signal));
            if ignored {
                t.with_kind("no test bed").with_ignored_flag(true)
            } else {
                t
            }
        })
        .collect();
    libtest_mimic::run(&args, trials).exit_code()
}

fn faultlab(state: &Path) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_faultlab"));
    c.env("FAULTLAB_STATE_DIR", state).env("FAULTLAB_SCENARIOS", faultlab::scenario::default_dir());
    c
}

/// Wait until the run has journalled its fault (it is then in the middle of it) and return the journal.
fn wait_for_fault(state: &Path, child: &mut std::process::Child) -> Result<PathBuf, Failed> {
    let deadline = Instant::now() + Duration::from_secs(180);
    loop {
        if let Some(status) = child.try_wait().map_err(|e| e.to_string())? {
            return Err(format!("the run ended ({status}) before its fault was injected").into());
        }
        for path in Journal::list(&state.join("journal")) {
            let file = Journal::open(&path).map_err(|e| e.to_string())?.snapshot();
            if file.entries.iter().any(|e| e.what.starts_with("re-import sandbox image")) {
                return Ok(path);
            }
        }
        if Instant::now() > deadline {
            return Err("the fault was not injected within 180s".into());
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn node_state(node: &NodeProfile, rt: &tokio::runtime::Runtime) -> Result<String, Failed> {
    rt.block_on(suite::node_state(node)).map_err(|e| Failed::from(e.to_string()))
}

fn namespace_gone(bed: &TestBed, ns: &str, rt: &tokio::runtime::Runtime) -> Result<bool, Failed> {
    rt.block_on(async {
        let client = faultlab::kube_ops::connect(&bed.kubeconfig, &bed.context).await.map_err(|e| e.to_string())?;
        let api: kube::Api<k8s_openapi::api::core::v1::Namespace> = kube::Api::all(client);
        let found = api.get_opt(ns).await.map_err(|e| e.to_string())?;
        Ok(found.is_none_or(|n| n.metadata.deletion_timestamp.is_some()))
    })
}

fn trial(description: PathBuf, signal: i32) -> Result<(), Failed> {
    let bed = TestBed::read(&description).map_err(|e| e.to_string())?;
    let node = bed.nodes[0].clone();
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().map_err(|e| e.to_string())?;
    let state = tempfile::tempdir().map_err(|e| e.to_string())?;
    let before = node_state(&node, &rt)?;

    let mut child = faultlab(state.path())
        // Held after the symptom, so the kill lands while the fault is in place, whatever the timings.
        .args(["run", SCENARIO, "--provider", "existing", "--hold", "5m"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .map_err(|e| e.to_string())?;
    let journal = wait_for_fault(state.path(), &mut child)?;
    let namespace = Journal::open(&journal).map_err(|e| e.to_string())?.snapshot().run_id;
    // In the middle of the fault: wait until the node shows it (the image is gone), then kill.
    let deadline = Instant::now() + Duration::from_secs(60);
    while node_state(&node, &rt)? == before {
        if Instant::now() > deadline {
            let _ = child.kill();
            return Err("the fault never showed on the node".into());
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    unsafe { libc::kill(child.id() as i32, signal) };
    let status = child.wait().map_err(|e| e.to_string())?;

    if signal == libc::SIGKILL {
        if !journal.exists() {
            return Err("after SIGKILL the journal should still be on disk for cleanup".into());
        }
        if node_state(&node, &rt)? == before {
            return Err("after SIGKILL the fault should still be in place (nothing undid it yet)".into());
        }
        if faultlab::journal::pid_alive(child.id()) {
            return Err("the killed run is still alive".into());
        }
        let out = faultlab(state.path()).arg("cleanup").output().map_err(|e| e.to_string())?;
        if !out.status.success() {
            return Err(format!("faultlab cleanup failed:\n{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr)).into());
        }
    } else if status.success() {
        return Err("an interrupted run must not exit 0".into());
    }

    let mut left: Vec<PathBuf> = Journal::list(&state.path().join("journal"));
    // A journal's lock file goes with it (faultlab::journal::lock_path).
    left.extend(faultlab::statefile::list(&state.path().join("journal"), "lock"));
    if !left.is_empty() {
        return Err(format!("journals or their lock files left behind: {left:?}").into());
    }
    let after = node_state(&node, &rt)?;
    if after != before {
        return Err(format!("the node was not restored\n--- before\n{before}\n--- after\n{after}").into());
    }
    if !namespace_gone(&bed, &namespace, &rt)? {
        return Err(format!("namespace {namespace} was not deleted").into());
    }
    Ok(())
}
