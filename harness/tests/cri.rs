//! `faultlab-cri`, the test bed's crictl, against the test bed's real containerd: a pod sandbox run,
//! listed, stopped and removed, as the duplicate-container fault does. Bad input is checked without a
//! runtime. Without the test bed the runtime trial is reported ignored.

use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode, Output};

use faultlab::cri::SandboxListJson;
use faultlab::testbed::TestBed;
use libtest_mimic::{Arguments, Failed, Trial};

fn main() -> ExitCode {
    let mut args = Arguments::from_args();
    args.test_threads = Some(1);
    let bed = faultlab::suite::require_testbed("CRI client trials");
    if let Err(reason) = &bed {
        eprintln!("CRI client runtime trial ignored: {reason}");
    }
    let ignored = bed.is_err();
    let life_cycle = Trial::test("sandbox-run-list-stop-remove", move || sandbox_life_cycle(&bed.map_err(Failed::from)?));
    let trials = vec![
        if ignored { life_cycle.with_kind("no test bed").with_ignored_flag(true) } else { life_cycle },
        Trial::test("bad-config-is-refused-before-connecting", bad_config),
        Trial::test("unreachable-runtime-names-the-endpoint", unreachable),
    ];
    libtest_mimic::run(&args, trials).exit_code()
}

fn cri(endpoint: &str, args: &[&str]) -> Result<Output, Failed> {
    Command::new(env!("CARGO_BIN_EXE_faultlab-cri")).arg("--runtime-endpoint").arg(endpoint).args(args).output().map_err(|e| Failed::from(e.to_string()))
}

fn ok(endpoint: &str, args: &[&str]) -> Result<String, Failed> {
    let out = cri(endpoint, args)?;
    if !out.status.success() {
        return Err(format!("faultlab-cri {} failed ({}): {}", args.join(" "), out.status, String::from_utf8_lossy(&out.stderr)).into());
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

fn listed(endpoint: &str, label: &str) -> Result<SandboxListJson, Failed> {
    let text = ok(endpoint, &["pods", "--label", label, "-o", "json"])?;
    serde_json::from_str(&text).map_err(|e| Failed::from(format!("pods -o json: {e}: {text}")))
}

fn sandbox_life_cycle(description: &Path) -> Result<(), Failed> {
    let bed = TestBed::read(description).map_err(|e| e.to_string())?;
    let endpoint = format!("unix://{}", bed.nodes[0].containerd.address);
    let version = ok(&endpoint, &["version"])?;
    if !version.contains("RuntimeName:  containerd") || !version.contains("RuntimeApiVersion:  v1") {
        return Err(format!("unexpected version answer: {version}").into());
    }
    let uid = format!("faultlab-cri-test-{}", std::process::id());
    let label = format!("faultlab.dev/cri-test={uid}");
    let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
    let config: PathBuf = dir.path().join("sandbox.json");
    let json = serde_json::json!({
        "metadata": {"name": "cri-test", "namespace": "faultlab-cri-test", "uid": uid, "attempt": 3},
        "labels": {"faultlab.dev/cri-test": uid},
        "linux": {"security_context": {"namespace_options": {"network": 2}}},
    });
    std::fs::write(&config, json.to_string()).map_err(|e| e.to_string())?;

    let id = ok(&endpoint, &["runp", config.to_str().unwrap()])?.trim().to_string();
    let result = (|| -> Result<(), Failed> {
        if id.len() != 64 {
            return Err(format!("runp printed {id:?}, not a sandbox ID").into());
        }
        // A second sandbox with the same metadata: the name is reserved (what the fault relies on).
        let again = cri(&endpoint, &["runp", config.to_str().unwrap()])?;
        let err = String::from_utf8_lossy(&again.stderr);
        let name = format!("cri-test_faultlab-cri-test_{uid}_3");
        if again.status.success() || !err.contains(&format!("failed to reserve sandbox name \"{name}\"")) || !err.contains(&id) {
            return Err(format!("a second runp of {name} should fail as reserved for {id}: {err}").into());
        }
        let list = listed(&endpoint, &label)?;
        match list.items.as_slice() {
            // The kubelet may already have stopped it (no pod has this UID), so its state is either.
            [s] if s.id == id && s.metadata.name == "cri-test" && s.metadata.uid == uid && s.metadata.attempt == 3 => {}
            other => return Err(format!("pods --label {label} listed {other:?}").into()),
        }
        let quiet = ok(&endpoint, &["pods", "-q", "--label", &label, "--name", "^cri-test$", "--namespace", "^faultlab-cri-test$"])?;
        if quiet.trim() != id {
            return Err(format!("pods -q printed {quiet:?}").into());
        }
        if !ok(&endpoint, &["pods", "-q", "--label", &label, "--name", "^other$"])?.trim().is_empty() {
            return Err("--name did not filter".into());
        }
        ok(&endpoint, &["stopp", &id])?;
        let list = listed(&endpoint, &label)?;
        if list.items.iter().any(|s| s.ready()) {
            return Err(format!("still ready after stopp: {list:?}").into());
        }
        Ok(())
    })();
    // Removed whatever happened above.
    let removed = ok(&endpoint, &["rmp", "-f", &id]);
    result?;
    removed?;
    if !listed(&endpoint, &label)?.items.is_empty() {
        return Err("the sandbox is still listed after rmp".into());
    }
    Ok(())
}

fn bad_config() -> Result<(), Failed> {
    let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
    let config = dir.path().join("bad.json");
    std::fs::write(&config, "{\n  \"metadata\": {\"name\": \"x\", \"uid\": \"u\", \"namespace\": \"n\"},\n  \"dns_config\": {}\n}\n")
        .map_err(|e| e.to_string())?;
    // No runtime at this endpoint: the file is refused before any connection is tried.
    let out = cri("unix:///nonexistent/faultlab.sock", &["runp", config.to_str().unwrap()])?;
    let err = String::from_utf8_lossy(&out.stderr);
    if out.status.success() || !err.contains("bad.json, line 3") || !err.contains("dns_config") || err.contains("connecting") {
        return Err(format!("expected the file, line and field: {err}").into());
    }
    Ok(())
}

fn unreachable() -> Result<(), Failed> {
    let out = cri("unix:///nonexistent/faultlab.sock", &["pods"])?;
    let err = String::from_utf8_lossy(&out.stderr);
    if out.status.success() || !err.contains("unix:///nonexistent/faultlab.sock") || !err.contains("No such file or directory") {
        return Err(format!("expected the endpoint and the cause: {err}").into());
    }
    let out = cri("tcp://127.0.0.1:1", &["pods"])?;
    if out.status.success() || !String::from_utf8_lossy(&out.stderr).contains("only unix:///path sockets") {
        return Err(format!("tcp endpoint: {}", String::from_utf8_lossy(&out.stderr)).into());
    }
    Ok(())
}
