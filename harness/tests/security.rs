//! What an unprivileged local user can do to a running test bed (`ci/security`; `cargo test --test
//! security` runs it on the test bed that is up, and CI runs it inside ci/test). Each trial is one
//! attempt, made as `nobody` (setpriv), and prints one row: the attempt, what came back, and `refused`
//! or `SUCCEEDED`; a trial fails if its attempt succeeds. Without a test bed, or without root to act
//! as another user, the trials are reported ignored, with the reason.
//!
//! Attempts: etcd's client and peer ports without a certificate and in plain HTTP; the API server
//! without credentials and on the insecure port; the controller-manager's and scheduler's metrics; every node's kubelet, authenticated and read-only
//! ports; faultlab's state directory and the test bed's certificates, read and written; an ssh node's
//! forwarded port without a key, and from inside a VM node the host's loopback; the run's registries (pull and push without a login) while scenarios
//! hold their faults; a tar planted in the work directory pause-missing used to unpack into under /tmp,
//! and `.snap.new` files planted as symbolic links, during a real run.

use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode, Output, Stdio};
use std::time::{Duration, Instant};

use faultlab::testbed::TestBed;
use libtest_mimic::{Arguments, Failed, Trial};

const NOBODY: &str = "65534";

/// The running test bed: its description's path and the description.
type Bed = (PathBuf, TestBed);

/// An attempt on the test bed.
type Attempt = Box<dyn FnOnce(&Bed) -> Result<(), Failed> + Send>;

fn main() -> ExitCode {
    let mut args = Arguments::from_args();
    // One at a time: the runs share the test bed's node, and the rows read in order.
    args.test_threads = Some(1);
    let bed = faultlab::suite::require_testbed("security attempts").map_err(|e| e.to_string()).and_then(|path| {
        if unsafe { libc::geteuid() } != 0 {
            return Err("needs root, to make each attempt as the unprivileged user nobody (setpriv)".to_string());
        }
        TestBed::read(&path).map_err(|e| e.to_string()).map(|b| (path, b))
    });
    if let Err(reason) = &bed {
        eprintln!("security attempts ignored: {reason}");
    }
    let mut trials = Vec::new();
    let mut add = |name: String, f: Attempt| {
        let bed = bed.clone();
        let ignored = bed.is_err();
        let t = Trial::test(name, move || f(&bed.map_err(Failed::from)?));
        trials.push(if ignored { t.with_kind("no test bed").with_ignored_flag(true) } else { t });
    };
    add("etcd-client-port-without-a-certificate".into(), Box::new(|_| etcd("https://127.0.0.1:12379/v3/kv/range", &["-X", "POST", "-d", r#"{"key":"AA==","range_end":"AA=="}"#], "\"header\"")));
    add("etcd-client-port-in-plain-http".into(), Box::new(|_| etcd("http://127.0.0.1:12379/v3/kv/range", &["-X", "POST", "-d", r#"{"key":"AA==","range_end":"AA=="}"#], "\"header\"")));
    add("etcd-peer-port-without-a-certificate".into(), Box::new(|_| etcd("https://127.0.0.1:12380/members", &[], "peerURLs")));
    add("apiserver-without-credentials".into(), Box::new(|(_, b)| apiserver_anonymous(b)));
    add("apiserver-insecure-port".into(), Box::new(|_| http_status_is_not("apiserver insecure port", "http://127.0.0.1:8080/api/v1/secrets", &[], "200")));
    add("controller-manager-without-credentials".into(), Box::new(|_| http_status_is_not("controller-manager /metrics", "https://127.0.0.1:10257/metrics", &["-k"], "200")));
    add("scheduler-without-credentials".into(), Box::new(|_| http_status_is_not("scheduler /metrics", "https://127.0.0.1:10259/metrics", &["-k"], "200")));
    // A node reached over ssh is a VM whose address is inside QEMU's user network: nothing on this
    // host reaches it (and traffic goes only to this machine's own addresses), so only the other nodes'
    // kubelets are tried.
    let nodes: Vec<(String, String)> = bed.as_ref().map(|(_, b)| b.nodes.iter().filter(|n| n.ssh.is_none()).filter_map(|n| Some((n.name.clone(), n.address.clone()?))).collect()).unwrap_or_default();
    for (name, address) in nodes {
        let a = address.clone();
        add(format!("kubelet-{name}-without-credentials"), Box::new(move |_| http_status_is_not("kubelet :10250 /pods", &format!("https://{a}:10250/pods"), &["-k"], "200")));
        add(format!("kubelet-{name}-read-only-port"), Box::new(move |_| http_status_is_not("kubelet :10255 /pods", &format!("http://{address}:10255/pods"), &[], "200")));
    }
    add("state-directory-and-certificates".into(), Box::new(|_| state_directory()));
    add("csi-node-sockets-and-volumes".into(), Box::new(|(_, b)| csi_node(b)));
    add("ssh-node-forwarded-port-without-a-key".into(), Box::new(|(_, b)| ssh_without_key(b)));
    add("vm-guest-to-the-hosts-loopback".into(), Box::new(|(_, b)| vm_to_host(b)));
    add("registries-while-scenarios-hold-their-faults".into(), Box::new(|_| registries()));
    add("planted-tar-and-snap-new-links-during-a-run".into(), Box::new(|_| planted_files()));
    libtest_mimic::run(&args, trials).exit_code()
}

/// `argv` as nobody (no groups, no environment but PATH), with a time limit.
fn as_nobody(argv: &[&str]) -> Output {
    let mut c = Command::new("timeout");
    c.args(["-k", "2", "20", "setpriv", "--reuid", NOBODY, "--regid", NOBODY, "--clear-groups", "--"])
        .args(argv)
        .env_clear()
        .env("PATH", "/usr/sbin:/usr/bin:/sbin:/bin")
        .stdin(Stdio::null())
        .current_dir("/");
    c.output().unwrap_or_else(|e| panic!("running setpriv: {e}"))
}

/// One row: the attempt, what came back (its first line), the verdict; an error if it succeeded.
fn row(attempt: &str, answer: &str, succeeded: bool) -> Result<(), Failed> {
    let answer: String = answer.lines().find(|l| !l.trim().is_empty()).unwrap_or("(nothing)").chars().take(100).collect();
    println!("| {attempt} | {answer} | {} |", if succeeded { "SUCCEEDED" } else { "refused" });
    if succeeded {
        return Err(format!("an unprivileged local user succeeded: {attempt}: {answer}").into());
    }
    Ok(())
}

fn text(o: &Output) -> String {
    format!("{}{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr))
}

/// etcd answered with data (`marker` in its body): it succeeded.
fn etcd(url: &str, extra: &[&str], marker: &str) -> Result<(), Failed> {
    let mut argv = vec!["curl", "-sS", "-k", "--max-time", "5"];
    argv.extend_from_slice(extra);
    argv.push(url);
    let out = as_nobody(&argv);
    let body = text(&out);
    row(&format!("etcd {url} without a client certificate"), &body, body.contains(marker))
}

fn http_status_is_not(what: &str, url: &str, extra: &[&str], ok: &str) -> Result<(), Failed> {
    let mut argv = vec!["curl", "-sS", "-o", "/dev/null", "-w", "HTTP %{http_code}", "--max-time", "5"];
    argv.extend_from_slice(extra);
    argv.push(url);
    let out = as_nobody(&argv);
    let answer = text(&out);
    row(&format!("{what} ({url})"), &answer, answer.starts_with(&format!("HTTP {ok}")))
}

fn apiserver_anonymous(bed: &TestBed) -> Result<(), Failed> {
    let kubeconfig = std::fs::read_to_string(&bed.kubeconfig).map_err(|e| format!("{}: {e}", bed.kubeconfig.display()))?;
    let server = kubeconfig.lines().find_map(|l| l.trim().strip_prefix("server: ")).ok_or("no server in the kubeconfig")?.trim().to_string();
    http_status_is_not("API server without credentials, list secrets", &format!("{server}/api/v1/secrets"), &["-k"], "200")
}

/// faultlab's state as root (journals: their undos run as root) and the test bed's keys: nobody can
/// list, read or write them.
/// Each node's CSI node plugin (`faultlab-cri csi-node`, started by `ci/testbed/up`): its two sockets,
/// which publish volumes into pods as root, and the volumes' directories. A node in a VM keeps them in
/// the VM; a node with a mount namespace of its own, where the host sees them.
fn csi_node(bed: &TestBed) -> Result<(), Failed> {
    let mut failed = Vec::new();
    let mut tried = 0;
    for node in bed.nodes.iter().filter(|n| n.ssh.is_none()) {
        let root = &node.kubelet.root_dir;
        for socket in [format!("{root}/plugins_registry/disk.faultlab.dev-reg.sock"), format!("{root}/plugins/disk.faultlab.dev/csi.sock")] {
            if !std::fs::symlink_metadata(&socket).is_ok_and(|m| std::os::unix::fs::FileTypeExt::is_socket(&m.file_type())) {
                continue;
            }
            tried += 1;
            let connect = format!("import socket, sys\ntry:\n    socket.socket(socket.AF_UNIX).connect({socket:?})\nexcept OSError as e:\n    sys.exit(str(e))\nprint('connected')");
            let out = as_nobody(&["python3", "-c", &connect]);
            if let Err(e) = row(&format!("connect to {socket}"), &text(&out), out.status.success()) {
                failed.push(e);
            }
        }
    }
    if tried == 0 && bed.nodes.iter().any(|n| n.ssh.is_none()) {
        failed.push(format!("no node's CSI sockets were found under its kubelet's root ({}): is csi-node running?", bed.nodes[0].kubelet.root_dir).into());
    }
    let out = as_nobody(&["ls", "/var/lib/faultlab/csi-disks"]);
    if std::path::Path::new("/var/lib/faultlab/csi-disks").exists() {
        if let Err(e) = row("list the CSI volumes' directory /var/lib/faultlab/csi-disks", &text(&out), out.status.success()) {
            failed.push(e);
        }
    }
    failed.into_iter().next().map_or(Ok(()), Err)
}

fn state_directory() -> Result<(), Failed> {
    let mut failed = Vec::new();
    // faultlab makes its state directory as it does for any run (a directory made here would be this
    // test's, not faultlab's).
    let made = Command::new(env!("CARGO_BIN_EXE_faultlab")).args(["cleanup", "--older-than", "8000h"]).stdin(Stdio::null()).output().map_err(|e| e.to_string())?;
    if !made.status.success() {
        return Err(format!("faultlab cleanup (to make the state directory): {}", text(&made)).into());
    }
    for dir in ["/var/lib/faultlab/runs", "/var/lib/faultlab/runs/journal", "/var/lib/faultlab/testbed/pki"] {
        let out = as_nobody(&["ls", dir]);
        if let Err(e) = row(&format!("list {dir}"), &text(&out), out.status.success()) {
            failed.push(e);
        }
        let planted = format!("{dir}/planted-by-nobody.json");
        let out = as_nobody(&["sh", "-c", &format!("echo '{{}}' > {planted}")]);
        let _ = std::fs::remove_file(&planted);
        if let Err(e) = row(&format!("write {planted}"), &text(&out), out.status.success()) {
            failed.push(e);
        }
    }
    let out = as_nobody(&["cat", "/var/lib/faultlab/testbed/pki/etcd-ca.key"]);
    if let Err(e) = row("read etcd's CA key", &text(&out), out.status.success()) {
        failed.push(e);
    }
    failed.into_iter().next().map_or(Ok(()), Err)
}

fn ssh_without_key(bed: &TestBed) -> Result<(), Failed> {
    let Some(ssh) = bed.nodes.iter().find_map(|n| n.ssh.clone()) else {
        return row("ssh to a node reached over ssh", "(this test bed has no ssh node: nothing to try)", false);
    };
    let port = ssh.port.unwrap_or(22).to_string();
    let host = ssh.destination.rsplit('@').next().unwrap_or(&ssh.destination).to_string();
    let argv = ["ssh", "-F", "/dev/null", "-o", "BatchMode=yes", "-o", "StrictHostKeyChecking=no", "-o", "UserKnownHostsFile=/dev/null", "-o", "ConnectTimeout=5", "-p", &port, &format!("root@{host}"), "true"];
    let out = as_nobody(&argv);
    row(&format!("ssh root@{host} -p {port} without a key"), &text(&out), out.status.success())
}

/// From inside an ssh node (the VM: what its pods could do), connect to the host's loopback through
/// QEMU's gateway alias: etcd's port, the controller-manager's, and the API server's own port there
/// (the VM reaches the API server only at its forwarded address).
fn vm_to_host(bed: &TestBed) -> Result<(), Failed> {
    let Some(node) = bed.nodes.iter().find(|n| n.ssh.is_some()) else {
        return row("from a VM node to the host's loopback", "(this test bed has no VM node: nothing to try)", false);
    };
    let access = node.access().ok_or("the VM node has no access in its description")?;
    let mut failed = Vec::new();
    for port in ["12379", "10257", "6443"] {
        let probe = faultlab::cmd::Cmd::new(["sh", "-c", &format!("busybox nc -w 3 198.18.214.2 {port} </dev/null >/dev/null 2>&1 && echo connected || echo 'no connection'")]);
        let argv = access.wrap(&probe);
        let out = Command::new(&argv[0]).args(&argv[1..]).stdin(Stdio::null()).output().map_err(|e| e.to_string())?;
        let answer = text(&out);
        if let Err(e) = row(&format!("from VM node {} to the host's 127.0.0.1:{port} (as 198.18.214.2:{port})", node.name), &answer, answer.trim() == "connected") {
            failed.push(e);
        }
    }
    failed.into_iter().next().map_or(Ok(()), Err)
}

/// TCP listeners of faultlab's registries and their nginx: `address:port` of `ss`'s lines naming them.
fn registry_listeners() -> Vec<String> {
    let out = Command::new("ss").args(["-Hltnp"]).output().map(|o| String::from_utf8_lossy(&o.stdout).into_owned()).unwrap_or_default();
    let mut v: Vec<String> = out
        .lines()
        .filter(|l| l.contains("\"nginx\"") || l.contains("\"docker-registry\"") || l.contains("\"registry\""))
        .filter_map(|l| l.split_whitespace().nth(3).map(str::to_string))
        .collect();
    v.sort();
    v.dedup();
    v
}

/// Two scenarios hold their faults (one registry with a login, one without); nobody tries each of
/// their listeners: pull (the catalog) and push (start an upload).
fn registries() -> Result<(), Failed> {
    let before = registry_listeners();
    let tmp = tempfile::tempdir().map_err(|e| e.to_string())?;
    let mut run = Command::new(env!("CARGO_BIN_EXE_faultlab"))
        .args(["run", "image-pull-secret-wrong", "image-pull-slow", "--jobs", "2", "--hold", "45s", "-o", "json"])
        .env_remove("FAULTLAB_STRICT_SNAPSHOTS")
        .stdout(std::fs::File::create(tmp.path().join("report.json")).map_err(|e| e.to_string())?)
        .stderr(Stdio::null())
        .spawn()
        .map_err(|e| e.to_string())?;
    // Each listener is tried as soon as it appears, while its scenario holds its fault: on a test bed of
    // one node the two scenarios run one after the other (they take the same port), on more side by side.
    let started = Instant::now();
    let mut tried: Vec<String> = Vec::new();
    let mut failed = Vec::new();
    while started.elapsed() < Duration::from_secs(600) {
        let new: Vec<String> = registry_listeners().into_iter().filter(|l| !before.contains(l) && !tried.contains(l)).collect();
        if !new.is_empty() {
            // A listener is up before the registry behind it answers: give it a moment.
            std::thread::sleep(Duration::from_secs(2));
        }
        for l in new {
            failed.extend(try_registry(&l));
            tried.push(l);
        }
        if run.try_wait().ok().flatten().is_some() {
            break;
        }
        std::thread::sleep(Duration::from_millis(500));
    }
    if tried.is_empty() {
        failed.push(Failed::from("no registry listener appeared while the scenarios held their faults"));
    }
    let _ = run.wait();
    failed.into_iter().next().map_or(Ok(()), Err)
}

/// Pull (the catalog) and push (start an upload) at the listener `l`, over HTTPS and HTTP, as nobody.
fn try_registry(l: &str) -> Vec<Failed> {
    let mut failed = Vec::new();
    for scheme in ["https", "http"] {
        let pull = as_nobody(&["curl", "-sS", "-k", "-o", "/dev/null", "-w", "HTTP %{http_code}", "--max-time", "5", &format!("{scheme}://{l}/v2/_catalog")]);
        let answer = text(&pull);
        if let Err(e) = row(&format!("pull: GET {scheme}://{l}/v2/_catalog"), &answer, answer.starts_with("HTTP 200")) {
            failed.push(e);
        }
        let push = as_nobody(&["curl", "-sS", "-k", "-o", "/dev/null", "-w", "HTTP %{http_code}", "--max-time", "5", "-X", "POST", &format!("{scheme}://{l}/v2/faultlab/planted/blobs/uploads/")]);
        let answer = text(&push);
        if let Err(e) = row(&format!("push: POST {scheme}://{l}/v2/faultlab/planted/blobs/uploads/"), &answer, answer.starts_with("HTTP 202")) {
            failed.push(e);
        }
    }
    failed
}

/// pause-missing, run for real with a tar planted by nobody where its fix used to unpack (under /tmp)
/// and with `.snap.new` symbolic links planted for every test bed platform: the run names neither, the
/// planted tar is untouched, and the links' target is never written.
fn planted_files() -> Result<(), Failed> {
    let old = Path::new("/tmp/faultlab-node-package");
    // What a faultlab before the fix left there (root's) goes first: the attempt is nobody's.
    let _ = std::fs::remove_dir_all(old);
    let out = as_nobody(&["sh", "-c", &format!("mkdir -p {0} && echo planted > {0}/planted.tar", old.display())]);
    if !out.status.success() {
        return Err(format!("planting {}: {}", old.display(), text(&out)).into());
    }
    let tmp = tempfile::tempdir().map_err(|e| e.to_string())?;
    let target = tmp.path().join("target");
    std::fs::write(&target, "untouched\n").map_err(|e| e.to_string())?;
    let expectations = tmp.path().join("expectations");
    let reviewed = faultlab::scenario::workspace_root().join("expectations");
    for entry in std::fs::read_dir(&reviewed).map_err(|e| e.to_string())? {
        let name = entry.map_err(|e| e.to_string())?.file_name();
        if name.to_string_lossy().starts_with("k8s-") {
            std::fs::create_dir_all(expectations.join(&name)).map_err(|e| e.to_string())?;
            std::os::unix::fs::symlink(&target, expectations.join(&name).join("pause-missing.snap.new")).map_err(|e| e.to_string())?;
        }
    }
    let out = Command::new(env!("CARGO_BIN_EXE_faultlab"))
        .args(["run", "pause-missing", "-o", "json", "--expectations"])
        .arg(&expectations)
        .env_remove("FAULTLAB_STRICT_SNAPSHOTS")
        .stdin(Stdio::null())
        .output()
        .map_err(|e| e.to_string())?;
    let report = String::from_utf8_lossy(&out.stdout).into_owned();
    let planted = std::fs::read_to_string(old.join("planted.tar")).unwrap_or_default();
    let _ = std::fs::remove_dir_all(old);
    let mut failed = Vec::new();
    let named = report.contains(old.to_str().unwrap());
    if let Err(e) = row("a tar planted in /tmp/faultlab-node-package, during pause-missing's fix", if named { "the run's commands name it" } else { "the run never names it" }, named || planted != "planted\n") {
        failed.push(e);
    }
    let written = std::fs::read_to_string(&target).unwrap_or_default();
    if let Err(e) = row("pause-missing.snap.new planted as a link, during a first run", &format!("the link's target reads {:?}", written.trim()), written != "untouched\n") {
        failed.push(e);
    }
    if report.is_empty() {
        failed.push(Failed::from(format!("the run printed no report: {}", String::from_utf8_lossy(&out.stderr))));
    }
    failed.into_iter().next().map_or(Ok(()), Err)
}
