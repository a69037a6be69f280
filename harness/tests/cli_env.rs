//! Yes/no flags also read from the environment (`FAULTLAB_STRICT_SNAPSHOTS`, `FAULTLAB_ALLOW_HOST_WIDE`)
//! take the values CI systems and shells write (`1`, `yes`, `on`, ...), and refuse anything else by
//! name. The scenario name is unknown, so a run that gets past the command line stops there (exit
//! status 2, the unknown name), before any cluster is looked for.

fn run_with(var: &str, value: &str) -> (Option<i32>, String) {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_faultlab"))
        .args(["run", "no-such-scenario", "--provider", "existing", "--description", "/nonexistent"])
        .env_remove("RUST_BACKTRACE")
        .env_remove("RUST_LIB_BACKTRACE")
        .env_remove("FAULTLAB_STRICT_SNAPSHOTS")
        .env_remove("FAULTLAB_ALLOW_HOST_WIDE")
        .env(var, value)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .output()
        .unwrap();
    (out.status.code(), String::from_utf8_lossy(&out.stderr).into_owned())
}

#[test]
fn yes_and_no_in_the_environment_are_taken_as_shells_write_them() {
    for var in ["FAULTLAB_STRICT_SNAPSHOTS", "FAULTLAB_ALLOW_HOST_WIDE"] {
        for value in ["1", "0", "true", "FALSE", "yes", "no", "on", "off", ""] {
            let (code, err) = run_with(var, value);
            assert!(code == Some(2) && err.contains("no scenario named \"no-such-scenario\""), "{var}={value:?}: exit {code:?}\n{err}");
        }
    }
}

#[test]
fn anything_else_is_a_usage_error_naming_the_flag() {
    for (var, flag) in [("FAULTLAB_STRICT_SNAPSHOTS", "--strict-snapshots"), ("FAULTLAB_ALLOW_HOST_WIDE", "--allow-host-wide")] {
        let (code, err) = run_with(var, "maybe");
        assert_eq!(code, Some(2), "{var}=maybe\n{err}");
        assert!(err.contains("'maybe'") && err.contains(flag) && err.contains("FAULTLAB_"), "{var}=maybe\n{err}");
    }
}
