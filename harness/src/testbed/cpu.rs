//! Where a machine's CPU goes while a command runs (`faultlab testbed cpu-profile -- COMMAND...`, which
//! `ci/suite` wraps around its side-by-side run): every process's CPU time, sampled from
//! `/proc/PID/stat` each interval, summed per part of the test bed (the API server, etcd, each node's
//! kubelet and containerd, the shims, the pods, faultlab and its commands, the registries and their
//! proxies, the rest), beside the machine's own busy time from `/proc/stat`. A node is named by its
//! network namespace: the test bed's by its name under `/run/netns`, a kind node (`ci/kind-suite` wraps
//! its run too) by its container's name, which Docker gives for the container's process. What ran between two
//! samples and exited before the second is the machine's but no part's: it is shown as such, not
//! guessed. From it, the lower bound of the command's wall time on this machine: the busy CPU time
//! over the cores, since the same work cannot take less.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::time::{Duration, Instant};

/// One process as one sample of `/proc` saw it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Proc {
    pub pid: u32,
    pub ppid: u32,
    pub comm: String,
    /// Its start, in clock ticks after boot: a pid reused by another process has another.
    pub start: u64,
    /// utime + stime, in clock ticks.
    pub ticks: u64,
    /// Its network namespace (the test bed's nodes each have one), by inode.
    pub netns: Option<u64>,
    /// Whether its cgroup is a pod's (`kubepods` in its path).
    pub in_pod: bool,
}

/// Parse `/proc/PID/stat`: the command name is between the first `(` and the last `)` (it may hold
/// spaces and parentheses); fields 4 (ppid), 14 and 15 (utime, stime) and 22 (starttime) follow.
pub fn parse_stat(text: &str) -> Option<(u32, String, u32, u64, u64)> {
    let open = text.find('(')?;
    let close = text.rfind(')')?;
    let pid = text[..open].trim().parse().ok()?;
    let comm = text.get(open + 1..close)?.to_string();
    let rest: Vec<&str> = text.get(close + 1..)?.split_whitespace().collect();
    // rest[0] is field 3 (state); field N is rest[N - 3].
    let field = |n: usize| rest.get(n - 3).and_then(|v| v.parse::<u64>().ok());
    let ppid = field(4)? as u32;
    let ticks = field(14)? + field(15)?;
    let start = field(22)?;
    Some((pid, comm, ppid, ticks, start))
}

/// The machine's busy and total time from `/proc/stat`'s `cpu` line, in ticks: busy is everything
/// but idle and iowait.
pub fn parse_cpu_line(text: &str) -> Option<(u64, u64)> {
    let line = text.lines().find(|l| l.starts_with("cpu "))?;
    let v: Vec<u64> = line.split_whitespace().skip(1).filter_map(|f| f.parse().ok()).collect();
    if v.len() < 4 {
        return None;
    }
    // user nice system idle iowait irq softirq steal (guest time is within user already).
    let total: u64 = v.iter().take(8).sum();
    let idle = v[3] + v.get(4).copied().unwrap_or(0);
    Some((total - idle, total))
}

/// What part of the machine a process is, from its name, its network namespace's name and its
/// cgroup; a process that is none of them is its nearest named ancestor's (a shell faultlab runs is
/// faultlab's commands; a runc a shim runs is the shims').
pub fn part_of(p: &Proc, node: Option<&str>) -> Option<String> {
    let at = |name: &str| match node {
        Some(n) => format!("{name}@{n}"),
        None => name.to_string(),
    };
    // On the host (the test bed's control plane) as they are; in a kind node, where they are static
    // pods, that node's (its cluster's).
    let control_plane = match p.comm.as_str() {
        "kube-apiserver" => Some(at("kube-apiserver")),
        "etcd" => Some(at("etcd")),
        "kube-controller" | "kube-controller-manager" => Some(at("kube-controller-manager")),
        "kube-scheduler" => Some(at("kube-scheduler")),
        "kube-proxy" => Some(at("kube-proxy")),
        _ => None,
    };
    if control_plane.is_some() {
        return control_plane;
    }
    if p.in_pod {
        return Some("pods (their containers)".into());
    }
    Some(match p.comm.as_str() {
        "kubelet" => at("kubelet"),
        // A node's, or this machine's own (the one Docker starts, under kind).
        "containerd" if node.is_none() => "containerd (this machine's)".into(),
        "containerd" => at("containerd"),
        "faultlab-cri" => at("cri-proxy"),
        c if c.starts_with("containerd-shim") => "containerd shims (and their runc)".into(),
        "faultlab" => "faultlab".into(),
        "docker-registry" | "registry" => "registries".into(),
        "nginx" => "nginx (registry proxies)".into(),
        "qemu-system-x86" | "qemu-system-aar" => "VM (qemu)".into(),
        "dockerd" | "docker" | "containerd-shim-runc-v2" => "docker".into(),
        _ => return None,
    })
}

/// The CPU time of each part over a run.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Profile {
    pub wall: Duration,
    pub cores: usize,
    pub tick_hz: u64,
    /// Machine-wide busy and total ticks.
    pub busy: u64,
    pub total: u64,
    /// Ticks per part.
    pub parts: BTreeMap<String, u64>,
    pub samples: usize,
    /// The sampler's own process (`faultlab testbed cpu-profile`) and the command it profiles, its
    /// child: the sampler (and anything it starts that has no part of its own) is [`SAMPLER`], not
    /// faultlab, whose name it shares; the command's processes are their own parts.
    pub sampler: Option<(u32, u32)>,
}

/// The part of the sampler's own reading of `/proc`.
pub const SAMPLER: &str = "this profile's sampling of /proc";

/// One sample: every process, and the machine's counters.
#[derive(Clone, Debug, Default)]
pub struct Sample {
    pub procs: Vec<Proc>,
    pub busy: u64,
    pub total: u64,
}

/// The name of each network namespace under `/run/netns`, by inode.
pub fn netns_names(dir: &Path) -> BTreeMap<u64, String> {
    use std::os::unix::fs::MetadataExt;
    let mut out = BTreeMap::new();
    if let Ok(entries) = std::fs::read_dir(dir) {
        for e in entries.flatten() {
            if let Ok(m) = std::fs::metadata(e.path()) {
                out.insert(m.ino(), e.file_name().to_string_lossy().into_owned());
            }
        }
    }
    out
}

/// The nodes' network namespaces, by inode: the test bed's (named under `/run/netns`) and containers'
/// (kind's nodes, named by Docker). The inodes looked up and found nameless (a pod's, inside a kind
/// node; or a node container Docker did not list yet, as it was starting) are asked about again only
/// after [`Namespaces::RETRY`].
#[derive(Clone, Debug, Default)]
pub struct Namespaces {
    pub names: BTreeMap<u64, String>,
    /// Of those, the containers'.
    pub containers: BTreeSet<u64>,
    nameless: BTreeSet<u64>,
    refreshed: Option<Instant>,
}

impl Namespaces {
    /// How long a namespace found nameless stays so before Docker is asked again.
    pub const RETRY: Duration = Duration::from_secs(5);

    /// Whether `sample` has a process in a namespace not looked up yet, or in one found nameless
    /// [`Namespaces::RETRY`] ago or more.
    pub fn stale(&self, sample: &Sample) -> bool {
        let retry = self.refreshed.is_none_or(|t| t.elapsed() >= Self::RETRY);
        sample.procs.iter().filter_map(|p| p.netns).any(|i| !self.names.contains_key(&i) && (retry || !self.nameless.contains(&i)))
    }

    /// Name the namespaces again: `/run/netns`'s, then Docker's containers' (`containers`: name, pid);
    /// the inodes of `sample` still without a name are nameless from now on.
    pub fn refresh(&mut self, run_netns: &Path, proc_dir: &Path, containers: &[(String, u32)], sample: &Sample) {
        use std::os::unix::fs::MetadataExt;
        self.names = netns_names(run_netns);
        self.containers.clear();
        for (name, pid) in containers {
            if let Ok(m) = std::fs::metadata(proc_dir.join(pid.to_string()).join("ns/net")) {
                // This machine's own namespace, the profiler's (a container with --network host), is
                // nobody's node.
                if self.names.contains_key(&m.ino()) || proc_dir.join("self/ns/net").metadata().is_ok_and(|h| h.ino() == m.ino()) {
                    continue;
                }
                self.names.insert(m.ino(), name.clone());
                self.containers.insert(m.ino());
            }
        }
        self.nameless = sample.procs.iter().filter_map(|p| p.netns).filter(|i| !self.names.contains_key(i)).collect();
        self.refreshed = Some(Instant::now());
    }
}

/// The running containers of the Docker `docker` reaches (DOCKER_HOST as set), with their main
/// process: `docker ps` then `docker inspect`. None where there is no Docker (the test bed's runs).
pub fn docker_containers() -> Vec<(String, u32)> {
    let run = |args: &[&str]| -> Option<String> {
        let out = std::process::Command::new("docker").args(args).stdin(std::process::Stdio::null()).stderr(std::process::Stdio::null()).output().ok()?;
        out.status.success().then(|| String::from_utf8_lossy(&out.stdout).into_owned())
    };
    let Some(ids) = run(&["ps", "--quiet", "--no-trunc"]) else { return Vec::new() };
    let ids: Vec<&str> = ids.split_whitespace().collect();
    if ids.is_empty() {
        return Vec::new();
    }
    let mut args = vec!["inspect", "--format", "{{.Name}} {{.State.Pid}}"];
    args.extend(ids);
    run(&args).map(|text| parse_docker_pids(&text)).unwrap_or_default()
}

/// `docker inspect --format '{{.Name}} {{.State.Pid}}'`'s lines: name (without Docker's leading `/`)
/// and pid, for the containers that have a process.
pub fn parse_docker_pids(text: &str) -> Vec<(String, u32)> {
    text.lines()
        .filter_map(|l| {
            let (name, pid) = l.trim().rsplit_once(' ')?;
            let pid: u32 = pid.parse().ok().filter(|&p| p > 0)?;
            let name = name.trim_start_matches('/');
            (!name.is_empty() && name.chars().all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c))).then(|| (name.to_string(), pid))
        })
        .collect()
}

/// Read a sample of this machine's `/proc`, every file of every process (the tests' reader; a
/// profile reads through [`Known`]).
pub fn sample(proc_dir: &Path) -> Sample {
    sample_with(proc_dir, &mut Known::default())
}

/// What a process's network namespace and cgroup were when first read, by pid and start, with its
/// command name then: read again only when that name changes. A process changes namespace or cgroup
/// as it becomes something else (`ip netns exec` running its command, runc's init the container's
/// program), and that is an exec, which renames it; reading only `stat` of the others keeps the
/// sampler's own share of the CPU small (three reads a process a sample were about 0.04 CPU-s a second
/// with 670 processes, 2026-11-30).
#[derive(Clone, Debug, Default)]
pub struct Known(BTreeMap<(u32, u64), (String, Option<u64>, bool)>);

/// Read a sample of this machine's `/proc`: each process's `stat`, and its namespace and cgroup unless
/// `known` has them; `known` keeps only this sample's processes.
pub fn sample_with(proc_dir: &Path, known: &mut Known) -> Sample {
    use std::os::unix::fs::MetadataExt;
    let (busy, total) = std::fs::read_to_string(proc_dir.join("stat")).ok().and_then(|t| parse_cpu_line(&t)).unwrap_or_default();
    let mut procs = Vec::new();
    let mut seen = BTreeMap::new();
    if let Ok(entries) = std::fs::read_dir(proc_dir) {
        for e in entries.flatten() {
            let Some(pid) = e.file_name().to_str().and_then(|n| n.parse::<u32>().ok()) else { continue };
            let dir = e.path();
            let Some((pid2, comm, ppid, ticks, start)) = std::fs::read_to_string(dir.join("stat")).ok().and_then(|t| parse_stat(&t)) else { continue };
            if pid2 != pid {
                continue;
            }
            let (netns, in_pod) = match known.0.remove(&(pid, start)) {
                Some((name, netns, in_pod)) if name == comm => (netns, in_pod),
                _ => {
                    let netns = std::fs::metadata(dir.join("ns/net")).ok().map(|m| m.ino());
                    let in_pod = std::fs::read_to_string(dir.join("cgroup")).is_ok_and(|c| c.contains("kubepods"));
                    (netns, in_pod)
                }
            };
            seen.insert((pid, start), (comm.clone(), netns, in_pod));
            procs.push(Proc { pid, ppid, comm, start, ticks, netns, in_pod });
        }
    }
    known.0 = seen;
    Sample { procs, busy, total }
}

impl Profile {
    /// Add what happened between two samples: each process seen in both (the same start) gives its
    /// delta, one first seen in `now` its whole time (it started since), to its part.
    pub fn add(&mut self, before: &Sample, now: &Sample, netns: &Namespaces) {
        self.busy += now.busy.saturating_sub(before.busy);
        self.total += now.total.saturating_sub(before.total);
        self.samples += 1;
        let prev: BTreeMap<u32, &Proc> = before.procs.iter().map(|p| (p.pid, p)).collect();
        let by_pid: BTreeMap<u32, &Proc> = now.procs.iter().map(|p| (p.pid, p)).collect();
        for p in &now.procs {
            let delta = match prev.get(&p.pid) {
                Some(old) if old.start == p.start => p.ticks.saturating_sub(old.ticks),
                _ => p.ticks,
            };
            if delta == 0 {
                continue;
            }
            let part = Self::part(p, &by_pid, netns, self.sampler);
            *self.parts.entry(part).or_default() += delta;
        }
    }

    /// The part of `p`, or of its nearest ancestor that has one; kernel threads (children of kthreadd,
    /// pid 2) are the kernel's; in a container's node, what has no part up to the container's edge is
    /// that node's other processes (its init and journal, `docker exec`'s commands); anything else is
    /// "other".
    fn part(p: &Proc, by_pid: &BTreeMap<u32, &Proc>, netns: &Namespaces, sampler: Option<(u32, u32)>) -> String {
        let mut at = p;
        let mut from = p;
        for _ in 0..32 {
            if let Some((me, profiled)) = sampler {
                if at.pid == me {
                    // Up from the profiled command, a process no part claimed is the command's own (a
                    // script's shell): "other", as it would be without the sampler above it.
                    return if std::ptr::eq(at, p) || from.pid != profiled { SAMPLER.into() } else { "other".into() };
                }
            }
            let node = at.netns.and_then(|i| netns.names.get(&i)).map(String::as_str);
            if let Some(part) = part_of(at, node) {
                return if std::ptr::eq(at, p) || part.contains('(') { part } else { format!("{part} (its commands)") };
            }
            if at.pid == 2 || at.ppid == 2 {
                return "kernel threads".into();
            }
            let container = at.netns.filter(|i| netns.containers.contains(i));
            match by_pid.get(&at.ppid) {
                Some(parent) if parent.pid != at.pid => {
                    if let (Some(i), Some(name)) = (container, node) {
                        if parent.netns != Some(i) {
                            return format!("other processes@{name}");
                        }
                    }
                    from = at;
                    at = parent
                }
                _ => break,
            }
        }
        "other".into()
    }

    fn secs(&self, ticks: u64) -> f64 {
        ticks as f64 / self.tick_hz.max(1) as f64
    }

    /// The table: each part's CPU seconds and share of the busy time, largest first; what no sampled
    /// process accounts for; and the lower bound of the wall time.
    pub fn render(&self) -> String {
        let busy = self.secs(self.busy);
        let capacity = self.wall.as_secs_f64() * self.cores as f64;
        let mut out = format!(
            "CPU profile: {:.1} s wall on {} cores ({:.1} CPU-s), {:.1} CPU-s busy ({:.0} %), {} samples\n",
            self.wall.as_secs_f64(),
            self.cores,
            capacity,
            busy,
            if capacity > 0.0 { 100.0 * busy / capacity } else { 0.0 },
            self.samples
        );
        let mut parts: Vec<(&String, &u64)> = self.parts.iter().collect();
        parts.sort_by(|a, b| b.1.cmp(a.1).then(a.0.cmp(b.0)));
        let attributed: u64 = parts.iter().map(|(_, t)| **t).sum();
        let width = parts.iter().map(|(n, _)| n.len()).max().unwrap_or(0).max(40);
        // Parts under a twentieth of a second read as 0.0: left out (their time is in the total).
        for (name, ticks) in parts.into_iter().filter(|(_, t)| self.secs(**t) >= 0.05) {
            let s = self.secs(*ticks);
            out.push_str(&format!("  {name:<width$} {s:>8.1} CPU-s {:>4.0} %\n", if busy > 0.0 { 100.0 * s / busy } else { 0.0 }));
        }
        let rest = self.secs(self.busy.saturating_sub(attributed));
        out.push_str(&format!("  {:<width$} {rest:>8.1} CPU-s {:>4.0} %\n", "not seen (exited between samples)", if busy > 0.0 { 100.0 * rest / busy } else { 0.0 }));
        out.push_str(&format!(
            "lower bound of the wall time on this machine: {:.1} s (the busy CPU time over {} cores; the same work cannot take less)\n",
            busy / self.cores.max(1) as f64,
            self.cores
        ));
        out
    }

    /// As JSON, for reports: seconds per part.
    pub fn json(&self) -> serde_json::Value {
        let parts: serde_json::Map<String, serde_json::Value> = self.parts.iter().map(|(k, v)| (k.clone(), serde_json::json!(self.secs(*v)))).collect();
        serde_json::json!({
            "wallSeconds": self.wall.as_secs_f64(),
            "cores": self.cores,
            "busyCpuSeconds": self.secs(self.busy),
            "parts": parts,
            "lowerBoundSeconds": self.secs(self.busy) / self.cores.max(1) as f64,
        })
    }
}

/// Run `argv`, sampling this machine's `/proc` every `every` until it exits; its exit status and the
/// profile.
pub fn profile_command(argv: &[String], every: Duration) -> std::io::Result<(std::process::ExitStatus, Profile)> {
    let (program, args) = argv.split_first().ok_or_else(|| std::io::Error::new(std::io::ErrorKind::InvalidInput, "no command to profile"))?;
    let proc_dir = Path::new("/proc");
    let netns_dir = Path::new("/run/netns");
    let started = Instant::now();
    let mut child = std::process::Command::new(program).args(args).spawn()?;
    let mut profile = Profile {
        cores: std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1),
        tick_hz: clock_ticks(),
        sampler: Some((std::process::id(), child.id())),
        ..Default::default()
    };
    let mut known = Known::default();
    let mut before = sample_with(proc_dir, &mut known);
    let mut netns = Namespaces::default();
    netns.refresh(netns_dir, proc_dir, &docker_containers(), &before);
    let status = loop {
        let waited = child.try_wait()?;
        let now = sample_with(proc_dir, &mut known);
        // Namespaces come with the nodes: named again when a new one is seen.
        if netns.stale(&now) {
            netns.refresh(netns_dir, proc_dir, &docker_containers(), &now);
        }
        profile.add(&before, &now, &netns);
        before = now;
        if let Some(status) = waited {
            break status;
        }
        std::thread::sleep(every);
    };
    profile.wall = started.elapsed();
    Ok((status, profile))
}

/// The kernel's clock ticks per second (USER_HZ): 100 on every Linux architecture this project runs.
fn clock_ticks() -> u64 {
    100
}

#[cfg(test)]
mod tests {
    use super::*;

    fn proc(pid: u32, ppid: u32, comm: &str, ticks: u64) -> Proc {
        Proc { pid, ppid, comm: comm.into(), start: 1000 + u64::from(pid), ticks, netns: None, in_pod: false }
    }

    #[test]
    fn stat_lines_parse_with_odd_command_names() {
        let line = "4242 (kube (x) y) S 1 4242 4242 0 -1 4194560 100 0 0 0 150 50 0 0 20 0 12 0 98765 1000 100 18446744073709551615";
        assert_eq!(parse_stat(line), Some((4242, "kube (x) y".to_string(), 1, 200, 98765)));
        assert_eq!(parse_stat("garbage"), None);
    }

    #[test]
    fn the_machines_busy_time_leaves_out_idle_and_iowait() {
        let text = "cpu  100 5 50 1000 20 3 2 0 0 0\ncpu0 50 2 25 500 10 1 1 0 0 0\n";
        assert_eq!(parse_cpu_line(text), Some((160, 1180)));
    }

    #[test]
    fn deltas_go_to_parts_and_commands_to_their_ancestors() {
        let netns = Namespaces { names: [(7, "faultlab-node-2".to_string())].into(), ..Default::default() };
        let mut kubelet = proc(10, 1, "kubelet", 100);
        kubelet.netns = Some(7);
        let before = Sample { procs: vec![proc(5, 1, "kube-apiserver", 1000), kubelet.clone(), proc(20, 1, "faultlab", 10)], busy: 1000, total: 4000 };
        let mut kubelet2 = kubelet.clone();
        kubelet2.ticks = 130;
        let mut pod = proc(40, 30, "sh", 7);
        pod.in_pod = true;
        let now = Sample {
            procs: vec![proc(5, 1, "kube-apiserver", 1200), kubelet2, proc(20, 1, "faultlab", 15), proc(21, 20, "sh", 4), proc(30, 1, "containerd-shim", 2), pod, proc(50, 2, "kworker/0:1", 3)],
            busy: 1300,
            total: 4400,
        };
        let mut p = Profile { cores: 2, tick_hz: 100, wall: Duration::from_secs(2), ..Default::default() };
        p.add(&before, &now, &netns);
        assert_eq!(p.parts["kube-apiserver"], 200);
        assert_eq!(p.parts["kubelet@faultlab-node-2"], 30);
        assert_eq!(p.parts["faultlab"], 5);
        assert_eq!(p.parts["faultlab (its commands)"], 4, "a shell faultlab started is faultlab's commands");
        assert_eq!(p.parts["pods (their containers)"], 7);
        assert_eq!(p.parts["containerd shims (and their runc)"], 2);
        assert_eq!(p.parts["kernel threads"], 3);
        assert_eq!((p.busy, p.total), (300, 400));
        let text = p.render();
        assert!(text.contains("3.0 CPU-s busy (75 %)"), "{text}");
        assert!(text.contains("not seen (exited between samples)"), "{text}");
        assert!(text.contains("lower bound of the wall time on this machine: 1.5 s"), "{text}");
    }

    /// The sampler shares faultlab's name: its own time is the sampling's; the profiled command's
    /// processes are theirs.
    #[test]
    fn the_samplers_own_time_is_not_faultlabs() {
        let before = Sample {
            procs: vec![proc(20, 1, "faultlab", 10), proc(21, 20, "bash", 0), proc(22, 21, "faultlab", 0), proc(23, 20, "docker", 0), proc(24, 21, "sleep", 0)],
            busy: 0,
            total: 0,
        };
        let bump = |p: &Proc, t: u64| Proc { ticks: p.ticks + t, ..p.clone() };
        let now = Sample { procs: before.procs.iter().zip([1, 2, 3, 4, 5]).map(|(p, t)| bump(p, t)).collect(), busy: 15, total: 30 };
        let mut p = Profile { tick_hz: 100, cores: 2, sampler: Some((20, 21)), ..Default::default() };
        p.add(&before, &now, &Namespaces::default());
        assert_eq!(p.parts[SAMPLER], 1, "the sampler's own reading");
        assert_eq!(p.parts["docker"], 4, "its docker ps is Docker's, as anyone's is");
        assert_eq!(p.parts["faultlab"], 3, "the profiled run");
        assert_eq!(p.parts["other"], 2 + 5, "the profiled script's shell and what it ran");
        let mut plain = Profile { tick_hz: 100, cores: 2, ..Default::default() };
        plain.add(&before, &now, &Namespaces::default());
        assert_eq!(plain.parts["faultlab"], 1 + 3, "without knowing the sampler, it read as faultlab");
    }

    #[test]
    fn a_reused_pid_counts_from_zero() {
        let before = Sample { procs: vec![proc(9, 1, "etcd", 500)], busy: 0, total: 0 };
        let mut again = proc(9, 1, "etcd", 40);
        again.start += 1;
        let now = Sample { procs: vec![again], busy: 0, total: 0 };
        let mut p = Profile { tick_hz: 100, ..Default::default() };
        p.add(&before, &now, &Namespaces::default());
        assert_eq!(p.parts["etcd"], 40);
    }

    #[test]
    fn a_kind_nodes_processes_are_its_own_and_its_clusters() {
        // Node container "kind-a-control-plane" (netns 9) under Docker's shim (host netns 1).
        let ns = |p: &mut Proc, i: u64| p.netns = Some(i);
        let netns = Namespaces { names: [(9, "kind-a-control-plane".to_string())].into(), containers: [9].into(), ..Default::default() };
        let mut shim = proc(100, 1, "containerd-shim", 0);
        ns(&mut shim, 1);
        let mut init = proc(101, 100, "systemd", 0);
        ns(&mut init, 9);
        let mut journal = proc(102, 101, "systemd-journal", 0);
        ns(&mut journal, 9);
        let mut api = proc(103, 101, "kube-apiserver", 0);
        ns(&mut api, 9);
        api.in_pod = true; // a static pod's
        let mut kubelet = proc(104, 101, "kubelet", 0);
        ns(&mut kubelet, 9);
        let mut mount = proc(105, 104, "mount", 0);
        ns(&mut mount, 9);
        let mut exec = proc(106, 100, "sh", 0);
        ns(&mut exec, 9);
        let before = Sample { procs: vec![shim.clone(), init.clone(), journal.clone(), api.clone(), kubelet.clone(), mount.clone(), exec.clone()], busy: 0, total: 0 };
        let bump = |p: &Proc, t: u64| Proc { ticks: p.ticks + t, ..p.clone() };
        let now = Sample { procs: vec![bump(&shim, 1), bump(&init, 2), bump(&journal, 3), bump(&api, 4), bump(&kubelet, 5), bump(&mount, 6), bump(&exec, 7)], busy: 28, total: 56 };
        let mut p = Profile { tick_hz: 100, cores: 2, ..Default::default() };
        p.add(&before, &now, &netns);
        assert_eq!(p.parts["containerd shims (and their runc)"], 1);
        assert_eq!(p.parts["other processes@kind-a-control-plane"], 2 + 3 + 7, "init, journal and docker exec's command");
        assert_eq!(p.parts["kube-apiserver@kind-a-control-plane"], 4);
        assert_eq!(p.parts["kubelet@kind-a-control-plane"], 5);
        assert_eq!(p.parts["kubelet@kind-a-control-plane (its commands)"], 6);
    }

    #[test]
    fn docker_names_its_containers_processes() {
        let text = "/kind-a-control-plane 4242\n/stopped 0\n/odd name; rm 7\n/kind-b-worker 17\n";
        assert_eq!(parse_docker_pids(text), vec![("kind-a-control-plane".to_string(), 4242), ("kind-b-worker".to_string(), 17)]);
        // This process's own namespace is the host's: never a node's.
        let me = std::process::id();
        let mut ns = Namespaces::default();
        let s = sample(Path::new("/proc"));
        ns.refresh(Path::new("/nonexistent"), Path::new("/proc"), &[("self".to_string(), me)], &s);
        assert!(ns.containers.is_empty() && !ns.names.values().any(|n| n == "self"), "{ns:?}");
        assert!(!ns.stale(&s), "every namespace of the sample was looked up");
        // One found nameless is asked about again later (a node container Docker did not list yet).
        let mut other = s.clone();
        other.procs.push(Proc { pid: 1, ppid: 0, comm: "init".into(), start: 1, ticks: 0, netns: Some(u64::MAX), in_pod: false });
        assert!(ns.stale(&other), "a namespace not seen before");
        ns.refresh(Path::new("/nonexistent"), Path::new("/proc"), &[], &other);
        assert!(!ns.stale(&other));
        ns.refreshed = ns.refreshed.and_then(|t| t.checked_sub(Namespaces::RETRY));
        assert!(ns.stale(&other), "nameless for RETRY: asked again");
    }

    /// What `Known` keeps is what a full read gives, and a renamed process (an exec) is read again.
    #[test]
    fn a_known_process_is_read_again_only_when_renamed() {
        let mut known = Known::default();
        let first = sample_with(Path::new("/proc"), &mut known);
        let again = sample_with(Path::new("/proc"), &mut known);
        let me = std::process::id();
        let find = |s: &Sample| s.procs.iter().find(|p| p.pid == me).cloned().unwrap();
        assert_eq!((find(&first).netns, find(&first).in_pod), (find(&again).netns, find(&again).in_pod));
        assert_eq!(find(&again).netns, sample(Path::new("/proc")).procs.iter().find(|p| p.pid == me).unwrap().netns);
        // A cached entry under another name is not trusted.
        let mine = find(&again);
        known.0.insert((me, mine.start), ("renamed".into(), Some(1), true));
        let third = sample_with(Path::new("/proc"), &mut known);
        assert_eq!(find(&third).netns, mine.netns, "read again, not taken from the stale entry");
        assert!(known.0.keys().all(|(pid, _)| third.procs.iter().any(|p| p.pid == *pid)), "only this sample's processes are kept");
    }

    /// This machine's own /proc reads: at least this process, with a command name.
    #[test]
    fn this_machines_proc_reads() {
        let s = sample(Path::new("/proc"));
        assert!(s.total > 0 && s.busy <= s.total);
        let me = std::process::id();
        assert!(s.procs.iter().any(|p| p.pid == me && !p.comm.is_empty()), "this process is in its own sample");
    }
}
