//! Provider detection with a Docker that hangs: `docker info` has a time limit, so `faultlab plan`
//! says Docker does not answer instead of hanging with it. The `kind` and `docker` on PATH are
//! stand-ins (as in `tests/kind_contract.rs`); this `docker` sleeps, with a child of its own that
//! must be killed too.

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

fn stand_in(dir: &Path, name: &str, text: &str) {
    use std::os::unix::fs::PermissionsExt;
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
}

#[test]
fn plan_does_not_hang_on_a_docker_that_hangs() {
    let tmp = tempfile::tempdir().unwrap();
    let bin = tmp.path().join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    let pidfile = tmp.path().join("sleeper.pid");
    stand_in(&bin, "kind", "#!/bin/sh\nexit 0\n");
    stand_in(&bin, "docker", &format!("#!/bin/sh\nsleep 300 &\necho $! > {}\nwait\n", pidfile.display()));
    let path = std::env::join_paths(std::iter::once(bin.clone()).chain(std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default()))).unwrap();
    let started = Instant::now();
    let out = Command::new(env!("CARGO_BIN_EXE_faultlab"))
        .args(["plan", "pause-missing"])
        .env("PATH", path)
        .env("FAULTLAB_STATE_DIR", tmp.path().join("state"))
        .env("FAULTLAB_SCENARIOS", faultlab::scenario::default_dir())
        .env("FAULTLAB_TESTBED", tmp.path().join("no-testbed.yaml"))
        .env_remove("FAULTLAB_PROVIDER")
        .output()
        .unwrap();
    let took = started.elapsed();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{stderr}");
    assert!(took < faultlab::suite::DOCKER_INFO_TIMEOUT + Duration::from_secs(20), "took {took:?}");
    assert!(
        stderr.contains(&format!("kind is installed but Docker does not answer (`docker info` did not finish within {:?})", faultlab::suite::DOCKER_INFO_TIMEOUT)),
        "{stderr}"
    );
    let pid: i32 = std::fs::read_to_string(&pidfile).unwrap().trim().parse().unwrap();
    let alive = std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|s| !s.rsplit(')').next().unwrap_or("").trim_start().starts_with('Z'));
    if alive {
        kill_left_over(pid);
    }
    assert!(!alive, "the stand-in's child {pid} outlived the time limit");
}

fn kill_left_over(pid: i32) {
    let _ = Command::new("kill").arg("-9").arg(pid.to_string()).status();
}
