//! `faultlab-cri`, the test bed's crictl, against the test bed's real containerd: a pod sandbox run,
//! listed, stopped and removed, as the duplicate-container fault does; the test bed's images listed
//! and inspected, as kind runs `crictl images` and `crictl inspecti` in its nodes; a pull that the
//! runtime fails. Bad input (a config, an output format no caller reads) is checked without a
//! runtime. Without the test bed the runtime trials are reported ignored.

use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode, Output};

use faultlab::testbed::TestBed;
use faultlab_cri::{ImageInspectJson, SandboxListJson};
use libtest_mimic::{Arguments, Failed, Trial};

fn main() -> ExitCode {
    let mut args = Arguments::from_args();
    args.test_threads = Some(1);
    // The trials run this host's faultlab-cri against the node's containerd socket: a node reached by
    // ssh (the emulated arm64 node) has its socket on another machine.
    let bed = faultlab::suite::require_testbed("CRI client trials").map_err(|e| e.to_string()).and_then(|path| match TestBed::read(&path) {
        Ok(bed) if bed.nodes.iter().any(|n| n.ssh.is_some()) => {
            Err(format!("the test bed's node is reached by ssh (an emulated node): its containerd socket is not on this host ({})", path.display()))
        }
        _ => Ok(path),
    });
    if let Err(reason) = &bed {
        eprintln!("CRI client runtime trial ignored: {reason}");
    }
    let ignored = bed.is_err();
    let on_bed = |name: &str, trial: fn(&Path) -> Result<(), Failed>| {
        let bed = bed.clone();
        let t = Trial::test(name, move || trial(&bed.map_err(Failed::from)?));
        if ignored { t.with_kind("no test bed").with_ignored_flag(true) } else { t }
    };
    let trials = vec![
        on_bed("sandbox-run-list-stop-remove", sandbox_life_cycle),
        on_bed("images-table", images_listed),
        on_bed("inspecti-by-name-id-and-missing", images_inspected),
        on_bed("pull-of-an-unknown-host-fails-naming-it", pull_fails),
        Trial::test("bad-config-is-refused-before-connecting", bad_config),
        Trial::test("bad-output-is-refused-before-connecting", bad_output),
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

/// The test bed's endpoint and its busybox and pause images (from its description).
fn bed_images(description: &Path) -> Result<(String, String, String), Failed> {
    let bed = TestBed::read(description).map_err(|e| e.to_string())?;
    let node = &bed.nodes[0];
    Ok((format!("unix://{}", node.containerd.address), node.images.busybox.clone(), node.images.pause.clone()))
}

/// `inspecti IMAGE`, as kind reads it.
fn inspected(endpoint: &str, image: &str) -> Result<ImageInspectJson, Failed> {
    let text = ok(endpoint, &["inspecti", image])?;
    serde_json::from_str(&text).map_err(|e| Failed::from(format!("inspecti {image}: {e}: {text}")))
}

/// `images`: crictl's header, a row per tag with the 13-character ID and a size (kind's `images.log`).
fn images_listed(description: &Path) -> Result<(), Failed> {
    let (endpoint, busybox, pause) = bed_images(description)?;
    let table = ok(&endpoint, &["images"])?;
    let header: Vec<&str> = table.lines().next().unwrap_or("").split_whitespace().collect();
    if header != ["IMAGE", "TAG", "IMAGE", "ID", "SIZE"] {
        return Err(format!("images: not crictl's header:\n{table}").into());
    }
    for image in [&busybox, &pause] {
        let id = inspected(&endpoint, image)?.status.id;
        let (repo, tag) = image.rsplit_once(':').ok_or_else(|| format!("{image} has no tag"))?;
        let short = id.strip_prefix("sha256:").unwrap_or(&id).get(..13).ok_or_else(|| format!("{image}: image ID {id:?}"))?;
        let row = table.lines().map(|l| l.split_whitespace().collect::<Vec<_>>()).find(|r| r.first() == Some(&repo) && r.get(1) == Some(&tag));
        if !matches!(row.as_deref(), Some([_, _, i, size]) if i == &short && size.ends_with('B') && size.starts_with(|c: char| c.is_ascii_digit())) {
            return Err(format!("images: no row {repo} {tag} {short} SIZE:\n{table}").into());
        }
    }
    Ok(())
}

fn images_inspected(description: &Path) -> Result<(), Failed> {
    let (endpoint, busybox, _) = bed_images(description)?;
    // What kind's `ImageID` reads: {"status": {"id": ...}}, by name.
    let by_name = inspected(&endpoint, &busybox)?;
    let id = by_name.status.id.clone();
    let hex = id.strip_prefix("sha256:").unwrap_or("");
    if hex.len() != 64 || !hex.bytes().all(|b| b.is_ascii_hexdigit()) || !by_name.status.repo_tags.contains(&busybox) {
        return Err(format!("inspecti {busybox}: status {:?}", by_name.status).into());
    }
    // containerd's verbose info: the image config and its chain ID.
    if !by_name.info.get("info").is_some_and(|i| i["imageSpec"]["rootfs"]["type"] == "layers" && i["chainID"].is_string()) {
        return Err(format!("inspecti {busybox}: no verbose info from containerd: {:?}", by_name.info).into());
    }
    // What kind's `ImageTags` reads: {"status": {"repoTags": [...]}}, by the image ID Docker gives.
    let by_id = inspected(&endpoint, &id)?;
    if by_id.status != by_name.status {
        return Err(format!("inspecti {id}: {:?}, by name {:?}", by_id.status, by_name.status).into());
    }

    // A missing image: non-zero, crictl's message, nothing on stdout.
    let missing = "faultlab.invalid/no-such-image:1";
    let out = cri(&endpoint, &["inspecti", missing])?;
    let err = String::from_utf8_lossy(&out.stderr);
    if out.status.success() || !err.contains(&format!("no such image \"{missing}\" present")) || !out.stdout.is_empty() {
        return Err(format!("inspecti {missing}: {} {err:?} {:?}", out.status, String::from_utf8_lossy(&out.stdout)).into());
    }
    Ok(())
}

/// `pull` goes to the runtime, which tries the image's registry: a host that cannot resolve fails the
/// pull, and the error names the image (what the image-pull faults' fixes run, as `crictl pull`).
fn pull_fails(description: &Path) -> Result<(), Failed> {
    let (endpoint, _, _) = bed_images(description)?;
    let image = "faultlab.invalid/no-such-image:1";
    let out = cri(&endpoint, &["pull", "--pull-timeout", "60", image])?;
    let err = String::from_utf8_lossy(&out.stderr);
    if out.status.success() || !err.contains("PullImage") || !err.contains(image) || !out.stdout.is_empty() {
        return Err(format!("pull {image}: {} {err:?} {:?}", out.status, String::from_utf8_lossy(&out.stdout)).into());
    }
    Ok(())
}

/// An output format no caller reads (crictl's yaml, go-template, ...) is refused by name before any
/// connection, and so is `--template`.
fn bad_output() -> Result<(), Failed> {
    for (args, said) in [
        (&["images", "-o", "json"][..], "images --output \"json\": faultlab-cri prints images only as table"),
        (&["inspecti", "-o", "go-template", "x"], "inspecti --output \"go-template\": faultlab-cri prints inspecti only as json"),
        (&["inspecti", "-o", "yaml", "x"], "inspecti --output \"yaml\""),
        (&["pods", "-o", "wide"], "pods --output \"wide\": faultlab-cri prints pods only as table or json"),
        (&["inspecti", "-o", "go-template", "--template", "{{.status.id}}", "x"], "unexpected argument '--template'"),
    ] {
        let out = cri("unix:///nonexistent/faultlab.sock", args)?;
        let err = String::from_utf8_lossy(&out.stderr);
        if out.status.success() || err.contains("connecting") || !err.contains(said) {
            return Err(format!("faultlab-cri {}: expected {said:?} before any connection: {err}", args.join(" ")).into());
        }
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
