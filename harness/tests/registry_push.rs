//! The registry of the image pull scenarios, for real, without a cluster: Debian's docker-registry and
//! nginx started as the faults start them (`Registry::start`, on 127.0.0.1), a base image uploaded,
//! then image-pull-slow's larger image pushed by `Registry::push_with_filler` through the registry's
//! API. distribution checks every digest and that a manifest's blobs exist, so a wrong digest or a
//! missing blob fails here; each blob read back must hash to its digest. Then nginx's answers:
//! `Answer::Slowly` must slow a blob down, `Answer::All` let it through.
//!
//! The node's side (its containerd config, trusting the registry, `ctr images push`) answers from a
//! script (`registry::plan_answers`, as `faultlab plan` uses): the scenarios test it on a node.
//! Reported ignored, with the reason, where docker-registry, nginx, curl or openssl is missing.

use std::path::Path;
use std::process::{Command, ExitCode};
use std::sync::Arc;
use std::time::{Duration, Instant};

use faultlab::faults::registry::{filler_layer, Answer, Registry, Spec, DOCKER_MANIFEST};
use faultlab::faults::Ctx;
use faultlab::gates::Target;
use faultlab::journal::Journal;
use faultlab::kube_ops::Kube;
use faultlab::node::{HostExecutor, Node, NodeProfile, RegistryProfile, ScriptedExecutor};
use faultlab::observe::Planned;
use faultlab::record::Recorder;
use faultlab::testbed::TestBed;
use faultlab::vars::Vars;
use libtest_mimic::{Arguments, Failed, Trial};
use sha2::{Digest, Sha256};

fn main() -> ExitCode {
    let args = Arguments::from_args();
    let missing: Vec<&str> = ["docker-registry", "nginx", "curl", "openssl", "ss"].into_iter().filter(|p| !on_path(p)).collect();
    let trial = Trial::test("larger-image-pushed-whole-and-served-slowly", push_and_serve);
    let trial = if missing.is_empty() {
        trial
    } else {
        eprintln!("registry trial ignored: this machine lacks {} (Debian: docker-registry nginx-light curl openssl iproute2)", missing.join(", "));
        trial.with_kind("no registry programs").with_ignored_flag(true)
    };
    libtest_mimic::run(&args, vec![trial]).exit_code()
}

fn on_path(program: &str) -> bool {
    std::env::var_os("PATH").is_some_and(|paths| std::env::split_paths(&paths).any(|d| d.join(program).is_file()))
}

/// Two free TCP ports of 127.0.0.1, not the same one (the kernel's choice, released at once): nginx's
/// and the registry's behind it. Not the scenarios' 5446 and 5447, which a run beside this test may hold
/// (CI's kind suite runs image-pull-slow while ci/test runs this).
fn free_ports() -> (u16, u16) {
    let a = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let b = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    (a.local_addr().unwrap().port(), b.local_addr().unwrap().port())
}

fn profile() -> NodeProfile {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/testbed/valid.yaml");
    let text = std::fs::read_to_string(&path).unwrap();
    let mut bed: TestBed = faultlab::datafile::decode(&path, &text).unwrap();
    let mut node = bed.nodes.remove(0);
    node.registry = Some(RegistryProfile { listen: "127.0.0.1".into(), address: "127.0.0.1".into(), hosts_dir: "/nonexistent/certs.d".into() });
    node
}

fn ctx(namespace: &str) -> Ctx {
    let profile = profile();
    let rec = Recorder::default();
    let node = Node::new(profile.clone(), profile.access().unwrap(), Arc::new(ScriptedExecutor::new(faultlab::faults::registry::plan_answers(&profile))));
    Ctx {
        vars: Vars::new(namespace, &profile),
        node,
        host: Arc::new(HostExecutor),
        kube: Kube::scripted(rec.clone(), Vec::new()),
        observe: Arc::new(Planned { rec }),
        journal: Journal::in_memory("registry-push"),
        namespace: namespace.into(),
        target: Target { selector: "app=web".into(), claim: None },
    }
}

fn sha256(bytes: &[u8]) -> String {
    format!("sha256:{:x}", Sha256::digest(bytes))
}

/// `curl` of `url` trusting `ca` (the registry's directory's `ca.crt`), with the run's login (its
/// `netrc`), its body and the time it took.
fn get(ca: &Path, url: &str, accept: Option<&str>) -> Result<(Vec<u8>, Duration), Failed> {
    let mut cmd = Command::new("curl");
    cmd.args(["-sS", "-f", "--max-time", "60", "--netrc-file"]).arg(ca.with_file_name("netrc")).arg("--cacert").arg(ca);
    if let Some(accept) = accept {
        cmd.args(["-H", &format!("Accept: {accept}")]);
    }
    let started = Instant::now();
    let out = cmd.arg(url).output()?;
    if !out.status.success() {
        return Err(format!("curl {url}: {} {}", out.status, String::from_utf8_lossy(&out.stderr)).into());
    }
    Ok((out.stdout, started.elapsed()))
}

fn push_and_serve() -> Result<(), Failed> {
    let rt = tokio::runtime::Runtime::new()?;
    let state = tempfile::tempdir()?;
    let ctx = ctx("fl-registry-push-test");
    let (port, backend_port) = free_ports();
    let spec = Spec { port, backend_port, proxy: true, ..Spec::main(false) };
    let reg = Registry { dir: state.path().join("registry"), spec, profile: ctx.node.profile.registry.clone().unwrap() };
    let result = rt.block_on(async {
        reg.start(&ctx).await.map_err(|e| format!("start: {e}"))?;
        check(&ctx, &reg).await
    });
    // The undo the fault journals: stop what runs (each PID file's process, checked to be the run's
    // own first), remove the directory; every process is gone after it.
    let pids: Vec<String> = ["registry.pid", "nginx.pid"].iter().filter_map(|f| std::fs::read_to_string(reg.dir.join(f)).ok()).map(|p| p.trim().to_string()).collect();
    let stop = reg.stop();
    let status = Command::new(&stop.argv[0]).args(&stop.argv[1..]).status()?;
    result?;
    if !status.success() || reg.dir.exists() {
        return Err(format!("stopping the registry: {status}, directory left: {}", reg.dir.exists()).into());
    }
    if pids.len() != 2 {
        return Err(format!("the registry and nginx wrote {} PID file(s), not 2", pids.len()).into());
    }
    std::thread::sleep(Duration::from_millis(300));
    let left: Vec<&String> = pids.iter().filter(|p| Path::new(&format!("/proc/{p}/cmdline")).exists() && std::fs::read(format!("/proc/{p}/cmdline")).is_ok_and(|c| !c.is_empty())).collect();
    if !left.is_empty() {
        return Err(format!("processes left running after the stop: {left:?}").into());
    }
    Ok(())
}

async fn check(ctx: &Ctx, reg: &Registry) -> Result<(), Failed> {
    // A base image of one layer, as `ctr images push` would have put the node's busybox.
    let base = filler_layer("base", 2048);
    let config = serde_json::json!({"architecture": "amd64", "os": "linux", "config": {}, "rootfs": {"type": "layers", "diff_ids": [base.digest]}, "history": [{"created_by": "base"}]});
    let config = config.to_string();
    let manifest = serde_json::json!({
        "schemaVersion": 2, "mediaType": DOCKER_MANIFEST,
        "config": {"mediaType": "application/vnd.docker.container.image.v1+json", "size": config.len(), "digest": sha256(config.as_bytes())},
        "layers": [{"mediaType": "application/vnd.docker.image.rootfs.diff.tar", "size": base.size, "digest": base.digest}]
    });
    for (name, body) in [("base.tar", base.tar.as_str()), ("base-config.json", config.as_str()), ("base-manifest.json", &manifest.to_string())] {
        std::fs::write(reg.dir.join(name), body)?;
    }
    let run = |cmd: faultlab::cmd::Cmd| -> Result<(), String> {
        let out = Command::new(&cmd.argv[0]).args(&cmd.argv[1..]).output().unwrap();
        if out.status.success() { Ok(()) } else { Err(format!("{}: {}", cmd.shell_line(), String::from_utf8_lossy(&out.stderr))) }
    };
    run(reg.upload("base.tar", &base.digest))?;
    run(reg.upload("base-config.json", &sha256(config.as_bytes())))?;
    let body = format!("@{}", reg.dir.join("base-manifest.json").display());
    run(reg.curl("PUT", "manifests/1", &["-H", &format!("Content-Type: {DOCKER_MANIFEST}"), "--data-binary", &body]))?;
    // A wrong digest is refused: the upload is checked.
    if run(reg.upload("base.tar", &sha256(b"something else"))).is_ok() {
        return Err("the registry took a blob under a digest that is not its own".into());
    }

    let image = reg.push_with_filler(ctx, "push-larger-image", "2", "the test's run", 64 * 1024).await.map_err(|e| format!("push_with_filler: {e}"))?;
    if image != format!("127.0.0.1:{}/faultlab/busybox:2", reg.spec.port) {
        return Err(format!("the new image's reference: {image}").into());
    }

    let ca = reg.dir.join("ca.crt");
    let front = format!("https://{}/v2/faultlab/busybox", reg.endpoint());
    // Without the login, neither a pull nor a push: nginx passes both on, and distribution refuses.
    for (method, path) in [("GET", "manifests/2"), ("POST", "blobs/uploads/")] {
        let out = Command::new("curl").args(["-sS", "-o", "/dev/null", "-w", "%{http_code}", "--max-time", "10", "-X", method, "--cacert"]).arg(&ca).arg(format!("{front}/{path}")).output()?;
        if String::from_utf8_lossy(&out.stdout) != "401" {
            return Err(format!("{method} {front}/{path} without the login answered {}, not 401", String::from_utf8_lossy(&out.stdout)).into());
        }
    }
    let netrc = std::fs::metadata(reg.dir.join("netrc"))?;
    let htpasswd = std::fs::metadata(reg.dir.join("htpasswd"))?;
    use std::os::unix::fs::PermissionsExt;
    if netrc.permissions().mode() & 0o077 != 0 || htpasswd.permissions().mode() & 0o077 != 0 {
        return Err(format!("the login's files are open to others: netrc {:o}, htpasswd {:o}", netrc.permissions().mode(), htpasswd.permissions().mode()).into());
    }
    let (body, _) = get(&ca, &format!("{front}/manifests/2"), Some(DOCKER_MANIFEST))?;
    let larger: serde_json::Value = serde_json::from_slice(&body)?;
    let layers = larger["layers"].as_array().cloned().unwrap_or_default();
    if layers.len() != 2 || layers[0]["digest"] != base.digest {
        return Err(format!("manifest 2 should hold the base layer and one more: {larger}").into());
    }
    let filler = layers[1]["digest"].as_str().unwrap_or_default().to_string();
    let config_digest = larger["config"]["digest"].as_str().unwrap_or_default().to_string();
    for digest in [&filler, &config_digest, &base.digest] {
        let (blob, _) = get(&ca, &format!("{front}/blobs/{digest}"), None)?;
        if sha256(&blob) != *digest {
            return Err(format!("blob {digest} read back hashes to {}", sha256(&blob)).into());
        }
    }
    let (config, _) = get(&ca, &format!("{front}/blobs/{config_digest}"), None)?;
    let config: serde_json::Value = serde_json::from_slice(&config)?;
    if config["rootfs"]["diff_ids"] != serde_json::json!([base.digest, filler]) {
        return Err(format!("the configuration's diff IDs: {}", config["rootfs"]["diff_ids"]).into());
    }

    // nginx in front: 64 KiB (and the tar's headers) at 16 KiB a second take about 4 s; unslowed, a blink.
    reg.answer(ctx, "slow-registry", &Answer::Slowly("16k".into())).await.map_err(|e| format!("answer slowly: {e}"))?;
    let (_, slow) = get(&ca, &format!("{front}/blobs/{filler}"), None)?;
    reg.answer(ctx, "answer-all", &Answer::All).await.map_err(|e| format!("answer all: {e}"))?;
    let (_, fast) = get(&ca, &format!("{front}/blobs/{filler}"), None)?;
    eprintln!("the 64 KiB layer through nginx: {slow:.1?} at 16k, {fast:.2?} unslowed");
    if slow < Duration::from_millis(2500) || fast >= slow {
        return Err(format!("limit_rate 16k should take about 4 s for 64 KiB: took {slow:?} (unslowed {fast:?})").into());
    }
    Ok(())
}
