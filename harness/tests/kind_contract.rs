//! The kind provider's contract, without kind or Docker: `kind` and `docker` stand-ins (shell scripts in
//! `tests/fixtures/kind/`, written into a temporary directory put first on PATH) log every invocation
//! and answer with the output the real CLIs give (see `tests/fixtures/kind/README.md` for where each
//! shape comes from). They keep the clusters they "created" in their state directory, so a test sees
//! both what faultlab asked and what is left.
//!
//! A run cannot get past the Kubernetes API with stand-ins: the kubeconfig kind "writes" points at a
//! closed port on this machine (or at a listener that never answers). So the CLI tests check the
//! provider's side of a run: create (with the composed config), node discovery by label, `docker
//! exec` with a timeout inside the node, log export and delete, on success, on kind's own failure,
//! on Ctrl-C (SIGINT) and SIGTERM, and with `--keep`; and `faultlab cleanup` by label and age. One test
//! drives the provider through the library, where every step can succeed.

use std::io::Read;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use faultlab::node::{Executor, HostExecutor, NodeAccess};
use faultlab::provider::kind::{Arch, Kind, KindNeeds};
use faultlab::provider::Provider;
use faultlab::record::Recorder;

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/kind")
}

fn host_arch() -> Arch {
    Arch::host().expect("these tests run on amd64 or arm64")
}

fn other_arch() -> Arch {
    match host_arch() {
        Arch::Amd64 => Arch::Arm64,
        Arch::Arm64 => Arch::Amd64,
    }
}

/// A port on this machine that nothing listens on (bound, then released).
fn closed_port() -> u16 {
    TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

/// One test's stand-ins, their state and faultlab's state directory.
struct Bed {
    _tmp: tempfile::TempDir,
    bin: PathBuf,
    state: PathBuf,
    faultlab_state: PathBuf,
}

impl Bed {
    fn new() -> Bed {
        let tmp = tempfile::tempdir().unwrap();
        let bin = tmp.path().join("bin");
        let state = tmp.path().join("standin");
        std::fs::create_dir_all(&bin).unwrap();
        std::fs::create_dir_all(state.join("clusters")).unwrap();
        for (script, program) in [("kind.sh", "kind"), ("docker.sh", "docker")] {
            let text = std::fs::read_to_string(fixtures().join(script))
                .unwrap()
                .replace("@STATE@", state.to_str().unwrap())
                .replace("@FIXTURES@", fixtures().to_str().unwrap());
            let path = bin.join(program);
            std::fs::write(&path, text).unwrap();
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
        }
        std::fs::write(state.join("server"), format!("https://127.0.0.1:{}", closed_port())).unwrap();
        let faultlab_state = tmp.path().join("faultlab");
        Bed { bin, state, faultlab_state, _tmp: tmp }
    }

    fn mode(&self, mode: &str) {
        std::fs::write(self.state.join("mode"), mode).unwrap();
    }

    fn path_env(&self) -> std::ffi::OsString {
        let mut dirs = vec![self.bin.clone()];
        dirs.extend(std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default()));
        std::env::join_paths(dirs).unwrap()
    }

    fn faultlab(&self, args: &[&str]) -> Command {
        let mut c = Command::new(env!("CARGO_BIN_EXE_faultlab"));
        c.args(args)
            .env("PATH", self.path_env())
            .env("FAULTLAB_STATE_DIR", &self.faultlab_state)
            // Machine locks of their own: the stand-in kind is no node of this machine's kernel, and a
            // real run elsewhere on it (CI's kind suite) holds the host.
            .env("FAULTLAB_LOCK_DIR", self.faultlab_state.join("locks"))
            .env("FAULTLAB_SCENARIOS", faultlab::scenario::default_dir())
            .env("FAULTLAB_TESTBED", self.state.join("no-testbed.yaml"))
            .env("FAULTLAB_EXPECTATIONS", self.state.join("expectations"))
            .env_remove("FAULTLAB_PROVIDER")
            // What a caller's environment may set and these trials decide for themselves.
            .env_remove("FAULTLAB_KIND_NODE_IMAGE")
            .env_remove("FAULTLAB_ALLOW_HOST_WIDE")
            .stdin(Stdio::null());
        c
    }

    fn run(&self, args: &[&str]) -> Output {
        let out = self.faultlab(args).output().unwrap();
        eprintln!("$ faultlab {}\n{}{}", args.join(" "), String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
        out
    }

    /// Every invocation of a stand-in so far, as argv.
    fn calls(&self) -> Vec<Vec<String>> {
        std::fs::read_to_string(self.state.join("calls.log"))
            .unwrap_or_default()
            .lines()
            .map(|l| l.split('\x1f').map(str::to_owned).collect())
            .collect()
    }

    /// The calls as shell-ish lines, for messages and prefix checks.
    fn call_lines(&self) -> Vec<String> {
        self.calls().iter().map(|a| a.join(" ")).collect()
    }

    /// The clusters the stand-ins hold now.
    fn clusters(&self) -> Vec<String> {
        let mut v: Vec<String> = std::fs::read_dir(self.state.join("clusters"))
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        v.sort();
        v
    }

    /// Put a cluster there, as an earlier run would have left it.
    fn seed_cluster(&self, name: &str, age: Duration) {
        let dir = self.state.join("clusters").join(name);
        std::fs::create_dir_all(&dir).unwrap();
        let created = jiff::Timestamp::now() - jiff::SignedDuration::from_secs(age.as_secs() as i64);
        let id = format!("{:012x}", name.bytes().fold(0u64, |h, b| h.wrapping_mul(31).wrapping_add(b as u64)) & 0xffff_ffff_ffff);
        std::fs::write(dir.join("nodes"), format!("{id} {name}-control-plane {created}\n")).unwrap();
    }

    /// The kind cluster faultlab named in its `kind create cluster` call.
    fn created_name(&self) -> String {
        let calls = self.calls();
        let create = calls.iter().find(|a| a[..3] == ["kind", "create", "cluster"]).unwrap_or_else(|| panic!("no kind create in {:#?}", self.call_lines()));
        flag(create, "--name").to_string()
    }
}

fn flag<'a>(argv: &'a [String], name: &str) -> &'a str {
    let i = argv.iter().position(|a| a == name).unwrap_or_else(|| panic!("{name} missing in {argv:?}"));
    &argv[i + 1]
}

fn json_report(out: &Output) -> serde_json::Value {
    let suite: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("not JSON ({e}): {}", String::from_utf8_lossy(&out.stdout)));
    suite["scenarios"][0].clone()
}

fn index_of(lines: &[String], prefix: &str) -> usize {
    lines.iter().position(|l| l.starts_with(prefix)).unwrap_or_else(|| panic!("no call starting with {prefix:?} in {lines:#?}"))
}

fn alive(pid: i32) -> bool {
    // A killed process stays a zombie until its parent reaps it; that counts as gone.
    std::fs::read_to_string(format!("/proc/{pid}/stat")).map(|s| !s.rsplit(')').next().unwrap_or("").trim_start().starts_with('Z')).unwrap_or(false)
}

/// Kills the given pids when dropped, so that a failing test leaves no stand-in process behind.
struct KillOnDrop(Vec<i32>);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        for pid in &self.0 {
            if alive(*pid) {
                unsafe { libc::kill(*pid, libc::SIGKILL) };
            }
        }
    }
}

fn wait_for(what: &str, timeout: Duration, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + timeout;
    while !done() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Wait for a child with a deadline; kill it if it does not end.
fn wait_exit(child: &mut std::process::Child, timeout: Duration) -> std::process::ExitStatus {
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("faultlab did not exit within {timeout:?} of the signal");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn a_run_creates_finds_its_node_execs_with_timeouts_then_exports_logs_and_deletes_when_the_api_fails() {
    let bed = Bed::new();
    // pause-missing: its KindNeeds carry a containerd patch and a node bootstrap command.
    let out = bed.run(&["run", "pause-missing", "--provider", "kind", "--output", "json"]);
    assert_eq!(out.status.code(), Some(1));
    let report = json_report(&out);
    let name = bed.created_name();
    assert_eq!(report["status"], "failed");
    assert_eq!(report["failed_phase"], "setup");
    // The platform is what the nodes report through the API (status.nodeInfo), which never answered.
    assert_eq!(report["platform"], "");
    let server = std::fs::read_to_string(bed.state.join("server")).unwrap();
    let error = report["error"].as_str().unwrap();
    assert!(error.contains(&format!("kind-{name}")) && error.contains(server.trim_start_matches("https://")), "the API error names context and server: {error}");

    let lines = bed.call_lines();
    let kind_dir = bed.faultlab_state.join("kind").join(&name);
    let logs_dir = bed.faultlab_state.join("logs").join(&name);
    let create = format!(
        "kind create cluster --name {name} --config {} --kubeconfig {} --wait 180s --retain",
        kind_dir.join("kind-config.yaml").display(),
        kind_dir.join("kubeconfig").display()
    );
    // The bootstrap's first `docker ps` runs alongside kind's create, so either may come first.
    assert_eq!(lines[index_of(&lines, "kind create cluster")], create);
    // First the node image's labels, before anything is created.
    assert!(lines[0].starts_with("docker image inspect --format {{json .Config.Labels}} kindest/node:v1.32.2@sha256:"), "{lines:#?}");
    assert!(lines[1..index_of(&lines, "kind create cluster")].iter().all(|l| l.starts_with("docker ps ")), "{lines:#?}");
    let list = format!("docker ps --filter label=io.x-k8s.kind.cluster={name} --format {{{{.Names}}}}");
    let node = format!("{name}-control-plane");
    // The bootstrap found the node by label while kind was creating, then ran in it with a timeout.
    let boot = index_of(&lines, &format!("docker exec {node} timeout -k 5 180 sh -c "));
    assert!(lines[..boot].contains(&list), "{lines:#?}");
    // After create: the nodes, by label; then, the run having failed, logs and delete, in that order.
    let listed = lines.iter().rposition(|l| *l == list).unwrap();
    let export = index_of(&lines, &format!("kind export logs {} --name {name}", logs_dir.display()));
    let delete = index_of(&lines, &format!("kind delete cluster --name {name} --kubeconfig {}", kind_dir.join("kubeconfig").display()));
    assert!(boot < listed && listed < export && export < delete && delete == lines.len() - 1, "{lines:#?}");
    // Every command sent to a node carries a timeout inside the node.
    for argv in bed.calls().iter().filter(|a| a[..2] == ["docker", "exec"]) {
        let at = if argv[2] == "-i" { 3 } else { 2 };
        assert_eq!(argv[at], node);
        assert_eq!(argv[at + 1..at + 4], ["timeout", "-k", "5"], "{argv:?}");
        assert!(argv[at + 4].parse::<u64>().is_ok(), "{argv:?}");
    }

    // What kind was given: the pinned image for this host's architecture with the scenario's patch.
    let config = std::fs::read_to_string(bed.state.join(format!("config-{name}.yaml"))).unwrap();
    let base = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("../kind-configs/{}.yaml", host_arch().as_str()))).unwrap();
    let image = base.lines().find_map(|l| l.trim().strip_prefix("image: ")).unwrap();
    assert!(config.contains(image), "{config}");
    assert!(config.contains("containerdConfigPatches:") && config.contains("sandbox_image = \"faultlab.invalid/cce-pause:3.1\""), "{config}");

    assert_eq!(report["node"], node.as_str());
    assert_eq!(report["logs"], logs_dir.to_str().unwrap());
    assert!(logs_dir.join(&node).join("kubelet.log").is_file() && logs_dir.join("kind-version.txt").is_file());
    assert!(bed.clusters().is_empty(), "left behind: {:?}", bed.clusters());
    assert!(!kind_dir.exists(), "the run's directory goes with the cluster");
}

#[test]
fn when_kind_fails_to_create_the_logs_are_exported_and_the_cluster_deleted() {
    let bed = Bed::new();
    bed.mode("fail");
    let out = bed.run(&["run", "configmap-missing", "--provider", "kind", "--output", "json"]);
    assert_eq!(out.status.code(), Some(1));
    let report = json_report(&out);
    let name = bed.created_name();
    let error = report["error"].as_str().unwrap();
    assert!(error.starts_with(&format!("creating kind cluster {name} failed: `kind create cluster --name {name} --config ")), "{error}");
    assert!(error.contains("exited with status 1") && error.contains("ERROR: failed to create cluster: failed to init node with kubeadm"), "kind's own words: {error}");
    let lines = bed.call_lines();
    let logs_dir = bed.faultlab_state.join("logs").join(&name);
    assert_eq!(lines.len(), 4, "labels, create, export, delete: {lines:#?}");
    assert!(lines[0].starts_with("docker image inspect "));
    assert!(lines[1].starts_with("kind create cluster"));
    assert_eq!(lines[2], format!("kind export logs {} --name {name}", logs_dir.display()));
    assert!(lines[3].starts_with(&format!("kind delete cluster --name {name}")));
    assert_eq!(report["logs"], logs_dir.to_str().unwrap());
    assert!(logs_dir.join(format!("{name}-control-plane/serial.log")).is_file());
    assert!(bed.clusters().is_empty());
}

#[test]
fn with_keep_a_failed_create_keeps_the_cluster_says_how_to_delete_it_and_cleanup_does() {
    let bed = Bed::new();
    bed.mode("fail");
    let out = bed.run(&["run", "configmap-missing", "--provider", "kind", "--keep"]);
    assert_eq!(out.status.code(), Some(1));
    let name = bed.created_name();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains(&format!("delete it with `kind delete cluster --name {name}` or `faultlab cleanup`")), "{stdout}");
    assert!(stdout.contains(&format!("logs: {}", bed.faultlab_state.join("logs").join(&name).display())), "{stdout}");
    assert!(!bed.call_lines().iter().any(|l| l.starts_with("kind delete")), "{:#?}", bed.call_lines());
    assert_eq!(bed.clusters(), vec![name.clone()]);

    // The run is over (its pid is gone), so cleanup deletes what it kept.
    let out = bed.run(&["cleanup"]);
    assert!(out.status.success());
    assert!(String::from_utf8_lossy(&out.stdout).contains(&format!("deleted kind cluster: {name}")));
    assert!(bed.clusters().is_empty());
    assert!(!bed.faultlab_state.join("kind").join(&name).exists());
}

#[test]
fn with_keep_a_run_keeps_its_cluster_and_kubeconfig() {
    let bed = Bed::new();
    let out = bed.run(&["run", "configmap-missing", "--provider", "kind", "--keep", "--output", "json"]);
    assert_eq!(out.status.code(), Some(1));
    let report = json_report(&out);
    let name = bed.created_name();
    let kubeconfig = bed.faultlab_state.join("kind").join(&name).join("kubeconfig");
    let note = report["notes"][0].as_str().unwrap();
    assert!(note.contains(&format!("kubeconfig {}", kubeconfig.display())) && note.contains(&format!("kind delete cluster --name {name}")), "{note}");
    assert!(String::from_utf8_lossy(&out.stderr).contains(&format!("note: {note}")), "JSON output says it on stderr");
    assert!(kubeconfig.is_file());
    let lines = bed.call_lines();
    assert!(lines.iter().any(|l| l.starts_with("kind export logs")), "a failed run's logs are exported, kept or not");
    assert!(!lines.iter().any(|l| l.starts_with("kind delete")), "{lines:#?}");
    assert_eq!(bed.clusters(), vec![name]);
}

#[test]
fn sigint_while_kind_creates_kills_kind_and_deletes_the_cluster() {
    let bed = Bed::new();
    bed.mode("hang");
    let mut child = bed.faultlab(&["run", "configmap-missing", "--provider", "kind"]).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap();
    let child_pid = bed.state.join("kind-create-child.pid");
    wait_for("kind create to reach the control plane", Duration::from_secs(30), || child_pid.is_file() && std::fs::metadata(&child_pid).unwrap().len() > 0);
    let kind_pid: i32 = std::fs::read_to_string(bed.state.join("kind-create.pid")).unwrap().trim().parse().unwrap();
    let sleeper: i32 = std::fs::read_to_string(&child_pid).unwrap().trim().parse().unwrap();
    let _leftovers = KillOnDrop(vec![kind_pid, sleeper]);
    let name = bed.created_name();
    assert_eq!(bed.clusters(), vec![name.clone()], "the node container exists");
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    let status = wait_exit(&mut child, Duration::from_secs(30));
    let mut stdout = String::new();
    child.stdout.take().unwrap().read_to_string(&mut stdout).unwrap();
    assert_eq!(status.code(), Some(130), "{stdout}");
    assert!(stdout.contains("interrupted by SIGINT while creating the cluster"), "{stdout}");
    let lines = bed.call_lines();
    assert!(lines.last().unwrap().starts_with(&format!("kind delete cluster --name {name}")), "{lines:#?}");
    assert!(!lines.iter().any(|l| l.starts_with("kind export logs")), "an interrupted run only tears down: {lines:#?}");
    assert!(bed.clusters().is_empty());
    // kind and what it started were killed with their process group.
    wait_for("kind and its child to be gone", Duration::from_secs(5), || !alive(kind_pid) && !alive(sleeper));
}

/// Interrupt a run while it connects to the API (a listener that accepts and never answers).
fn interrupted_while_connecting(signal: i32, name: &str, code: i32) {
    let bed = Bed::new();
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    std::fs::write(bed.state.join("server"), format!("https://{}", listener.local_addr().unwrap())).unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut held = Vec::new();
        for stream in listener.incoming().take(4) {
            held.push(stream);
            let _ = tx.send(());
        }
        std::thread::sleep(Duration::from_secs(60));
    });
    let started = Instant::now();
    let mut child = bed.faultlab(&["run", "configmap-missing", "--provider", "kind"]).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap();
    rx.recv_timeout(Duration::from_secs(30)).expect("faultlab connects to the API server");
    unsafe { libc::kill(child.id() as i32, signal) };
    let status = wait_exit(&mut child, Duration::from_secs(30));
    let mut stdout = String::new();
    child.stdout.take().unwrap().read_to_string(&mut stdout).unwrap();
    assert_eq!(status.code(), Some(code), "{stdout}");
    assert!(stdout.contains(&format!("interrupted by {name} while connecting to the cluster")), "{stdout}");
    // The connection attempt gives up after 15 s on its own; the signal ended it before that.
    assert!(started.elapsed() < Duration::from_secs(14), "{:?}", started.elapsed());
    let cluster = bed.created_name();
    let lines = bed.call_lines();
    assert!(lines.last().unwrap().starts_with(&format!("kind delete cluster --name {cluster}")), "{lines:#?}");
    assert!(!lines.iter().any(|l| l.starts_with("kind export logs")), "{lines:#?}");
    assert!(bed.clusters().is_empty());
}

#[test]
fn sigint_mid_run_deletes_the_cluster() {
    interrupted_while_connecting(libc::SIGINT, "SIGINT", 130);
}

#[test]
fn sigterm_mid_run_deletes_the_cluster() {
    interrupted_while_connecting(libc::SIGTERM, "SIGTERM", 143);
}

#[test]
fn run_all_stops_after_the_interrupted_scenario() {
    let bed = Bed::new();
    bed.mode("hang");
    let junit = bed.state.join("junit.xml");
    let mut child = bed
        // One at a time (kind's default is a cluster per core), so that "after" is one scenario.
        .faultlab(&["run", "--all", "--jobs", "1", "--provider", "kind", "--junit", junit.to_str().unwrap()])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let child_pid = bed.state.join("kind-create-child.pid");
    wait_for("the first kind create", Duration::from_secs(30), || child_pid.is_file() && std::fs::metadata(&child_pid).unwrap().len() > 0);
    let pid = |f: &str| std::fs::read_to_string(bed.state.join(f)).unwrap().trim().parse::<i32>().unwrap();
    let _leftovers = KillOnDrop(vec![pid("kind-create.pid"), pid("kind-create-child.pid")]);
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    assert_eq!(wait_exit(&mut child, Duration::from_secs(30)).code(), Some(130));
    let creates = bed.call_lines().iter().filter(|l| l.starts_with("kind create cluster")).count();
    assert_eq!(creates, 1, "no scenario starts after Ctrl-C: {:#?}", bed.call_lines());
    let xml = std::fs::read_to_string(&junit).unwrap();
    assert_eq!(xml.matches("<testcase ").count(), 1, "the report covers what ran: {xml}");
    assert!(bed.clusters().is_empty());
}

#[test]
fn cleanup_deletes_stale_faultlab_clusters_by_label_and_age() {
    let bed = Bed::new();
    let hour = Duration::from_secs(3600);
    bed.seed_cluster("faultlab-pause-missing-old01", 3 * hour);
    bed.seed_cluster("faultlab-pause-missing-new01", Duration::from_secs(600));
    bed.seed_cluster("faultlab-inotify-limit-live1", 3 * hour);
    bed.seed_cluster("faultlab-image-pull-slow-held1", 3 * hour);
    bed.seed_cluster("faultlab-cpu-count-reuse1", 3 * hour);
    bed.seed_cluster("my-dev-cluster", 3 * hour);
    // The live one's run is this test process, as an older faultlab said it: an `owner` pid file.
    let live = bed.faultlab_state.join("kind/faultlab-inotify-limit-live1");
    std::fs::create_dir_all(&live).unwrap();
    std::fs::write(live.join("owner"), format!("{}\n", std::process::id())).unwrap();
    // This one's run holds its lock (this test, as a run does from before `kind create`).
    let held = bed.faultlab_state.join("kind/faultlab-image-pull-slow-held1");
    std::fs::create_dir_all(&held).unwrap();
    std::fs::write(held.join("owner.lock"), "4000000\n").unwrap();
    let lock = std::fs::File::open(held.join("owner.lock")).unwrap();
    lock.try_lock().unwrap();
    // This one's run ended, and its pid now names another live process (this test's): its lock is
    // free, so it goes.
    let reused = bed.faultlab_state.join("kind/faultlab-cpu-count-reuse1");
    std::fs::create_dir_all(&reused).unwrap();
    std::fs::write(reused.join("owner.lock"), format!("{}\n", std::process::id())).unwrap();

    let out = bed.run(&["cleanup", "--older-than", "1h"]);
    assert!(out.status.success());
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("deleted kind cluster: faultlab-pause-missing-old01"), "{stdout}");
    assert!(stdout.contains("deleted kind cluster: faultlab-cpu-count-reuse1"), "{stdout}");
    assert!(stdout.contains(&format!("skipped kind cluster: faultlab-inotify-limit-live1 (its run is still running as pid {};", std::process::id())), "{stdout}");
    let lock_path = held.join("owner.lock");
    assert!(
        stdout.contains(&format!("skipped kind cluster: faultlab-image-pull-slow-held1 (a faultlab process holds its lock, {}: its run (pid 4000000) or a cleanup;", lock_path.display())),
        "{stdout}"
    );
    assert_eq!(bed.clusters(), vec!["faultlab-image-pull-slow-held1", "faultlab-inotify-limit-live1", "faultlab-pause-missing-new01", "my-dev-cluster"]);
    assert!(!reused.exists(), "its run directory goes with it");
    let calls = bed.calls();
    assert_eq!(calls[0], ["docker", "version", "--format", "{{.Server.Version}}"]);
    assert_eq!(calls[1], ["docker", "ps", "-aq", "--filter", "label=io.x-k8s.kind.cluster"]);
    assert_eq!(calls[2][..4], ["docker", "inspect", "--format", "{{index .Config.Labels \"io.x-k8s.kind.cluster\"}}\t{{.Created}}"]);
    assert_eq!(calls[2].len(), 4 + 6, "one ID per node container");
    assert_eq!(calls[3], ["kind", "delete", "cluster", "--name", "faultlab-cpu-count-reuse1"]);
    assert_eq!(calls[4], ["kind", "delete", "cluster", "--name", "faultlab-pause-missing-old01"]);
    assert_eq!(calls.len(), 5);

    // Without --older-than every faultlab cluster is stale; the live one still is not faultlab's to take.
    let out = bed.run(&["cleanup"]);
    assert!(out.status.success());
    assert_eq!(bed.clusters(), vec!["faultlab-image-pull-slow-held1", "faultlab-inotify-limit-live1", "my-dev-cluster"]);
    let out = bed.run(&["cleanup", "--force"]);
    assert!(out.status.success());
    assert_eq!(bed.clusters(), vec!["my-dev-cluster"], "another tool's cluster is never touched");
    assert!(!live.exists() && !held.exists());
    drop(lock);
    let out = bed.run(&["cleanup"]);
    assert!(String::from_utf8_lossy(&out.stdout).contains("nothing to clean up"));

    // kind and a Docker client, but no daemon answering (found so in CI once kind was installed): no
    // cluster can be looked for, which cleanup says, and it is no error.
    std::fs::write(bed.state.join("daemon-down"), "").unwrap();
    let out = bed.run(&["cleanup"]);
    assert!(out.status.success(), "{out:?}");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("kind clusters: Docker does not answer (Cannot connect to the Docker daemon at unix:///var/run/docker.sock. Is the docker daemon running?): no kind cluster was looked for"), "{text}");
    assert_eq!(bed.clusters(), vec!["my-dev-cluster"]);
}

#[test]
fn the_other_architecture_is_refused_for_runs_and_planned_in_full() {
    let bed = Bed::new();
    let other = other_arch().as_str();
    let out = bed.run(&["run", "configmap-missing", "--provider", "kind", "--arch", other]);
    assert_eq!(out.status.code(), Some(3), "refused by the platform: the environment's status");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.starts_with("REFUSED configmap-missing"), "{stdout}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("error: 1 scenario(s) refused on this platform and not run (the reasons are above): configmap-missing"), "{stderr}");
    assert!(stdout.contains(&format!("kind cannot run {other} nodes on it (kind does not emulate another architecture)")), "{stdout}");
    assert!(bed.calls().is_empty(), "nothing ran: {:#?}", bed.call_lines());

    let out = bed.run(&["plan", "--all", "--provider", "kind", "--arch", other]);
    assert!(out.status.success());
    let plan = String::from_utf8_lossy(&out.stdout);
    // Every runnable scenario; the documented causes not reproduced have no plan.
    let scenarios = faultlab::scenario::load_all(&faultlab::scenario::default_dir()).unwrap().len();
    assert_eq!(plan.matches(&format!("(from kind-configs/{other}.yaml)")).count(), scenarios, "{plan}");
    assert_eq!(
        plan.matches(&format!("platform kind-<kubelet minor>-<runtime>-<runtime minor>[-cgroup2]-{other} (from the nodes once they run; -cgroup2 where a node's /sys/fs/cgroup is cgroup v2)")).count(),
        scenarios
    );
    // In the config, the label look-up and its note; again in each worker's entry, and in the note
    // refusing kindest/node to a scenario that needs faultlab's CSI node plugin (which it lacks).
    let needs: Vec<_> = faultlab::scenario::load_all(&faultlab::scenario::default_dir()).unwrap().values().map(|l| l.scenario.fault.fault().needs()).collect();
    let more = needs.iter().filter(|n| n.moves_between_nodes).count() + needs.iter().filter(|n| n.csi_driver).count();
    assert_eq!(plan.matches("kindest/node:v1.32.2@sha256:").count(), 3 * scenarios + more, "{plan}");
    assert_eq!(plan.matches("\nhost kind delete cluster --name faultlab-").count(), scenarios);
    assert!(bed.calls().is_empty(), "a plan runs nothing: {:#?}", bed.call_lines());
}

/// The provider through the library, where every step succeeds: create, nodes, a node command whose
/// inner timeout ends it, log export and delete. The only test here that changes this process's PATH.
#[tokio::test]
async fn the_provider_contract_through_the_library() {
    let bed = Bed::new();
    // The other tests of this file give their children a PATH of their own, with their stand-ins first.
    std::env::set_var("PATH", bed.path_env());
    let kind = |keep: bool| Kind {
        name: "faultlab-contract-lib01".into(),
        arch: host_arch(),
        configs_dir: Path::new(env!("CARGO_MANIFEST_DIR")).join("../kind-configs"),
        workdir: bed.faultlab_state.join("kind/faultlab-contract-lib01"),
        logs_dir: bed.faultlab_state.join("logs/faultlab-contract-lib01"),
        keep,
        needs: KindNeeds { disable_default_cni: true, ..Default::default() },
        node_image: None,
        image_info: Default::default(),
        existing: false,
        network_gateway: Default::default(),
        host: std::sync::Arc::new(faultlab::provider::LocalHost),
        owner: Default::default(),
    };
    let rec = Recorder::default();
    let k = kind(false);
    let cluster = k.provision(&rec).await.unwrap();
    // The run holds its cluster's lock: a cleanup (another open file) cannot take it.
    let lock = bed.faultlab_state.join("kind/faultlab-contract-lib01/owner.lock");
    assert_eq!(std::fs::read_to_string(&lock).unwrap(), format!("{}\n", std::process::id()));
    assert!(matches!(std::fs::File::open(&lock).unwrap().try_lock(), Err(std::fs::TryLockError::WouldBlock)));
    assert!(k.owner.get().is_some());
    assert_eq!(cluster.platform, "", "the nodes name the platform through the API, once the run has a client");
    assert_eq!(cluster.context, "kind-faultlab-contract-lib01");
    let kubeconfig = std::fs::read_to_string(&cluster.kubeconfig).unwrap();
    assert!(kubeconfig.contains("current-context: kind-faultlab-contract-lib01"));
    let create = &bed.calls()[0];
    assert!(!create.iter().any(|a| a == "--wait"), "no default CNI: kind is not asked to wait for Ready: {create:?}");
    let config = std::fs::read_to_string(bed.state.join("config-faultlab-contract-lib01.yaml")).unwrap();
    assert!(config.contains("disableDefaultCNI: true"), "{config}");
    assert_eq!(cluster.nodes.len(), 1);
    let node = &cluster.nodes[0];
    assert_eq!(node.name, "faultlab-contract-lib01-control-plane");
    assert_eq!(cluster.nodes, k.nodes(&cluster, &rec).await.unwrap());

    // A node command runs with `timeout` inside the node: the stand-in runs it here.
    std::fs::write(bed.state.join("exec-runs-locally"), "").unwrap();
    let access = NodeAccess::Docker { container: node.name.clone() };
    let echo = faultlab::cmd::Cmd::new(["echo", "from the node"]);
    let out = HostExecutor.run(&access.wrap(&echo), &echo, false).await.unwrap();
    assert_eq!(out.stdout, "from the node\n");
    let slow = faultlab::cmd::Cmd::new(["sleep", "30"]).timeout(Duration::from_secs(1));
    let started = Instant::now();
    let out = HostExecutor.run(&access.wrap(&slow), &slow, true).await.unwrap();
    assert_eq!(out.status, 124, "timeout(1) ended it inside the node");
    assert!(started.elapsed() < Duration::from_secs(10));

    k.collect_logs(&cluster, &k.logs_dir, &rec).await.unwrap();
    assert!(k.logs_dir.join("faultlab-contract-lib01-control-plane/containerd.log").is_file());
    let kept = kind(true);
    kept.release(&cluster, &rec).await.unwrap();
    assert_eq!(bed.clusters(), vec!["faultlab-contract-lib01"], "--keep deletes nothing");
    assert!(rec.render().contains("delete it with `kind delete cluster --name faultlab-contract-lib01`"));
    k.release(&cluster, &rec).await.unwrap();
    assert!(bed.clusters().is_empty());
    assert!(!k.workdir.exists());
    let err = k.nodes(&cluster, &rec).await.unwrap_err();
    assert!(err.to_string().contains("has no node labelled io.x-k8s.kind.cluster=faultlab-contract-lib01"), "{err}");
}

/// A fault that reaches past the node container into the host runs on kind only with
/// --allow-host-wide: without it nothing is created and the error says what would be touched; `show`
/// and `plan` say so too. With the flag, disk-full first checks Docker's root has room for its loop file.
#[test]
fn host_wide_faults_are_refused_on_kind_unless_allowed() {
    let bed = Bed::new();
    for (scenario, says) in [("inotify-limit", "fs.inotify.max_user_instances is a limit per user namespace"), ("disk-full", "loop file in the node's /var")] {
        let out = bed.run(&["run", scenario, "--provider", "kind", "--output", "json"]);
        assert_eq!(out.status.code(), Some(3), "refused: the environment's status");
        let report = json_report(&out);
        assert_eq!(report["status"], "refused");
        let error = report["error"].as_str().unwrap();
        assert!(error.starts_with(&format!("refusing to run {scenario} on kind: fault {scenario} reaches past the node container into this host: ")), "{error}");
        assert!(error.contains(says) && error.contains("Pass --allow-host-wide"), "{error}");
        assert_eq!(report["failed_phase"], "setup");
        assert!(bed.calls().is_empty(), "nothing ran: {:#?}", bed.call_lines());

        let show = bed.run(&["show", scenario]);
        let text = String::from_utf8_lossy(&show.stdout);
        assert!(text.contains("on kind:  reaches past the node container into the host: ") && text.contains("--allow-host-wide"), "{text}");
        let plan = bed.run(&["plan", scenario, "--provider", "kind"]);
        let text = String::from_utf8_lossy(&plan.stdout);
        assert!(text.contains("on kind this fault reaches past the node container into the host") && text.contains("a run needs --allow-host-wide"), "{text}");
    }
    // Faults that stay in the node say nothing of the kind, and are not refused.
    let show = bed.run(&["show", "pause-missing"]);
    assert!(!String::from_utf8_lossy(&show.stdout).contains("on kind:"));
    // With the flag the run goes ahead: disk-full asks Docker for its root before creating anything.
    let out = bed.run(&["run", "disk-full", "--provider", "kind", "--allow-host-wide", "--output", "json"]);
    let report = json_report(&out);
    assert!(!report["error"].as_str().unwrap_or_default().starts_with("refusing"), "{report}");
    let lines = bed.call_lines();
    assert!(lines[1] == "docker info --format {{.DockerRootDir}}", "{lines:#?}");
}

/// disk-full with --allow-host-wide: when the file system under Docker's root (here the stand-in's
/// state directory, on this machine's real disk) cannot hold what the fault would write there, the run
/// stops before kind creates anything and says how much it needs and has.
#[test]
fn disk_full_is_refused_when_dockers_root_has_no_room() {
    let bed = Bed::new();
    let scenarios = bed.state.join("scenarios");
    std::fs::create_dir_all(&scenarios).unwrap();
    let text = std::fs::read_to_string(faultlab::scenario::default_dir().join("disk-full.yaml")).unwrap();
    // The most expand-disk may add (16 GiB), and Docker's root on a file system with no room at all
    // (proc's statvfs answers 0 blocks free): a real statvfs, a certain refusal.
    let text = text.replace("  disk-full: {}\n", "  disk-full: {expandMiB: 16384}\n");
    assert!(text.contains("expandMiB"), "the scenario's fault line changed: {text}");
    std::fs::write(scenarios.join("disk-full.yaml"), text).unwrap();
    std::fs::write(bed.state.join("docker-root"), "/proc\n").unwrap();
    let out = bed.faultlab(&["run", "disk-full", "--provider", "kind", "--allow-host-wide", "--output", "json"]).env("FAULTLAB_SCENARIOS", &scenarios).output().unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", String::from_utf8_lossy(&out.stderr));
    let report = json_report(&out);
    let error = report["error"].as_str().unwrap();
    let want = "not enough room on the host's disk: the fault writes up to 19456 MiB under Docker's root /proc, whose file system has 0 MiB free (it needs 20480 MiB, with 1024 MiB to spare); nothing was created";
    assert_eq!(error, want);
    let lines = bed.call_lines();
    assert!(lines.iter().all(|l| !l.starts_with("kind ")), "kind was never called: {lines:#?}");
    assert_eq!(lines.last().unwrap(), "docker info --format {{.DockerRootDir}}", "{lines:#?}");
    assert!(bed.clusters().is_empty());
}

/// A kind cluster of the user's (`--cluster NAME`, or `--context kind-NAME`): used as it is. Its
/// kubeconfig comes from `kind get kubeconfig`, nothing is created or deleted (a failed run only exports
/// its logs), and a scenario whose fault needs a cluster made for it is refused before anything runs.
#[test]
fn a_users_kind_cluster_is_used_as_it_is_never_created_or_deleted() {
    let bed = Bed::new();
    bed.seed_cluster("my-dev-cluster", Duration::from_secs(3600));
    for how in [&["--provider", "kind", "--cluster", "my-dev-cluster"][..], &["--context", "kind-my-dev-cluster"]] {
        let out = bed.run(&[&["run", "configmap-missing", "--output", "json"][..], how].concat());
        // The stand-in's API server never answers: the run fails in setup, on the user's cluster.
        assert_eq!(out.status.code(), Some(1), "{how:?}");
        let report = json_report(&out);
        assert_eq!(report["cluster"], "my-dev-cluster", "{how:?}");
        assert_eq!(report["failed_phase"], "setup");
        let lines = bed.call_lines();
        assert!(lines.iter().any(|l| l == "kind get kubeconfig --name my-dev-cluster"), "{lines:#?}");
        assert!(lines.iter().all(|l| !l.starts_with("kind create") && !l.starts_with("kind delete")), "nothing created or deleted: {lines:#?}");
        assert_eq!(bed.clusters(), vec!["my-dev-cluster"], "{how:?}");
    }
    std::fs::remove_file(bed.state.join("calls.log")).unwrap();

    // cpu-count's fault needs the kubelet made for it: refused, naming why, before any command.
    let out = bed.run(&["run", "cpu-count", "--provider", "kind", "--cluster", "my-dev-cluster", "--output", "json"]);
    assert_eq!(out.status.code(), Some(3), "refused: the environment's status");
    assert_eq!(json_report(&out)["status"], "refused");
    let error = json_report(&out)["error"].as_str().unwrap().to_string();
    assert!(error.contains("kind cluster my-dev-cluster (yours, --cluster): this scenario's fault needs a cluster made for it"), "{error}");
    assert!(bed.calls().is_empty(), "nothing ran: {:#?}", bed.call_lines());

    // A cluster kind does not have: said so, with those it has.
    let out = bed.run(&["run", "configmap-missing", "--provider", "kind", "--cluster", "no-such", "--output", "json"]);
    assert_eq!(out.status.code(), Some(3), "no cluster to run on: the environment's status");
    assert_eq!(json_report(&out)["status"], "refused");
    let error = json_report(&out)["error"].as_str().unwrap().to_string();
    assert!(error.contains("kind cluster no-such (yours, --cluster): `kind get clusters` does not list it (it lists: my-dev-cluster)"), "{error}");
    assert_eq!(bed.clusters(), vec!["my-dev-cluster"]);
}
