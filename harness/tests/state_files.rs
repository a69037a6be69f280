//! The files `faultlab cleanup` reads back and acts on as root: a journal planted or opened to others
//! is refused and its undo commands never run; a planted session id cannot leave the state directory.
//! No cluster: the undos are commands on this machine.

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::{Command, Output};

use faultlab::cmd::Cmd;
use faultlab::journal::{ClusterRef, Journal, Undo};

fn faultlab(state: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_faultlab"))
        .args(args)
        .env("FAULTLAB_STATE_DIR", state)
        .env_remove("FAULTLAB_SESSION")
        // No kind here: cleanup's cluster sweep says so and goes on.
        .env("PATH", "/nonexistent")
        .output()
        .unwrap()
}

/// A journal whose undo would create `marker`.
fn journal(dir: &Path, run: &str, marker: &Path) -> std::path::PathBuf {
    let j = Journal::create(dir, run, "demo", ClusterRef::default()).unwrap();
    j.record("leave a mark", Undo::Host { cmd: Cmd::new(["/usr/bin/touch", marker.to_str().unwrap()]) }).unwrap();
    j.path().unwrap().to_owned()
}

#[test]
fn a_journal_others_may_write_is_never_replayed_and_ours_is() {
    let tmp = tempfile::tempdir().unwrap();
    let state = tmp.path().join("state");
    let journals = state.join("journal");
    let marker = tmp.path().join("undone");

    // Written by faultlab, then opened to everyone: anyone could have put their own undo in it.
    let path = journal(&journals, "opened", &marker);
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o666)).unwrap();
    let out = faultlab(&state, &["cleanup", "--force"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(3), "{err}");
    assert!(err.contains(&format!("not reading {}: others may write it (mode 666)", path.display())), "{err}");
    assert!(!marker.exists(), "its undo never ran");

    // A link to it: not even listed.
    std::fs::remove_file(&path).unwrap();
    let elsewhere = journal(&tmp.path().join("elsewhere"), "linked", &marker);
    std::os::unix::fs::symlink(&elsewhere, journals.join("linked.json")).unwrap();
    let out = faultlab(&state, &["cleanup", "--force"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(!marker.exists(), "a journal reached through a link is not replayed");
    std::fs::remove_file(journals.join("linked.json")).unwrap();

    // Its own, as faultlab wrote it: replayed.
    let path = journal(&journals, "ours", &marker);
    assert_eq!(std::fs::metadata(&path).unwrap().permissions().mode() & 0o777, 0o600);
    let out = faultlab(&state, &["cleanup", "--force"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(marker.exists(), "{}", String::from_utf8_lossy(&out.stdout));
    assert_eq!(std::fs::metadata(&journals).unwrap().permissions().mode() & 0o777, 0o700, "the journal directory is private");
}

/// Rewrite the pid a journal names (as a reused or a dead one would be).
fn set_pid(path: &Path, pid: u32) {
    let mut file: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    file["pid"] = pid.into();
    faultlab::statefile::write(path, file.to_string().as_bytes()).unwrap();
}

#[test]
fn cleanup_goes_by_the_run_s_lock_not_by_its_pid() {
    let tmp = tempfile::tempdir().unwrap();
    let state = tmp.path().join("state");
    let journals = state.join("journal");
    let marker = tmp.path().join("undone");

    // A live run (this test holds its journal's lock) whose pid is no process's any more: skipped.
    let run = Journal::create(&journals, "live", "demo", ClusterRef::default()).unwrap();
    run.record("leave a mark", Undo::Host { cmd: Cmd::new(["/usr/bin/touch", marker.to_str().unwrap()]) }).unwrap();
    let mut gone = Command::new("/bin/true").spawn().unwrap();
    let gone_pid = gone.id();
    gone.wait().unwrap();
    let path = run.path().unwrap().to_owned();
    set_pid(&path, gone_pid);
    let out = faultlab(&state, &["cleanup"]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(text.contains(&format!("skipped: {} (its run is still running: it holds", path.display())), "{text}");
    assert!(!marker.exists() && path.exists(), "a live run's journal is left to it");
    assert!(!text.contains("nothing to clean up"), "{text}");

    // The run is gone, and its pid is a live process's now (reused; here this test's own): replayed.
    drop(run);
    set_pid(&path, std::process::id());
    let out = faultlab(&state, &["cleanup"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(marker.exists(), "{}", String::from_utf8_lossy(&out.stdout));
    assert!(!path.exists() && !faultlab::journal::lock_path(&path).exists(), "the journal and its lock file are gone");
}

#[test]
fn a_state_directory_others_may_write_is_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let state = tmp.path().join("state");
    std::fs::create_dir(&state).unwrap();
    std::fs::set_permissions(&state, std::fs::Permissions::from_mode(0o1777)).unwrap();
    let out = faultlab(&state, &["cleanup"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(3), "{err}");
    assert!(err.contains(&format!("state directory {}: others may write it (mode 1777)", state.display())), "{err}");
}

#[test]
fn a_session_id_that_would_leave_the_state_directory_is_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let state = tmp.path().join("state");
    for id in ["../../etc/passwd", "-rf", ".hidden"] {
        let out = faultlab(&state, &["hint", &format!("--session={id}")]);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains("cannot name a training session"), "{id}: {err}");
        assert_eq!(out.status.code(), Some(2), "a usage error: {err}");
    }
}
