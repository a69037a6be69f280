//! `kind`: one cluster per run, from `kind-configs/<arch>.yaml` plus the scenario's patches.
//!
//! The kubeconfig goes to the run's own directory (never `~/.kube/config`); nodes are found by kind's
//! cluster label; when a run fails (kind's own create included) the logs are exported, and the cluster
//! is deleted whatever happened, unless `--keep`. Node commands go through `docker exec`, each with a
//! `timeout` inside the node. The run's directory holds an `owner` file with faultlab's pid, so that
//! `faultlab cleanup` leaves the clusters of live runs alone.
//!
//! The node image is the one pinned in the config or `--node-image`; before `kind create` its labels
//! (`docker image inspect`) say which images and CRI client it holds ([`NodeImage`]). After create,
//! the nodes' `status.nodeInfo`, read through the API, names the platform ([`platform_from_nodes`]),
//! with the cgroup version a node reads (`-cgroup2` before the architecture on cgroup v2).
//! A fault's room on the host's disk is checked under Docker's root before anything is created.

use std::path::{Path, PathBuf};
use std::time::Duration;

use async_trait::async_trait;
use k8s_openapi::api::core::v1::{Node, NodeSystemInfo};
use serde_json::{json, Value};

use super::{Cluster, Host, Ownership, Provider, ProviderError};
use crate::cmd::{self, Cmd};
use crate::kube_ops::Kube;
use crate::node::{runtime, CgroupVersion, ContainerdProfile, DiskProfile, ImageSet, KubeletProfile, NodeAccess, NodeProfile, RegistryProfile};
use crate::record::{Channel, Recorder};

// What the provider's host commands ask, for a plan's answers ([`Kind::plan_answers`]).
const ASK_DOCKER_PING: cmd::Ask = cmd::Ask("docker-ping");
const ASK_DOCKER_ROOT: cmd::Ask = cmd::Ask("docker-root");
const ASK_IMAGE_LABELS: cmd::Ask = cmd::Ask("node-image-labels");
const ASK_KIND_CLUSTERS: cmd::Ask = cmd::Ask("kind-clusters");
const ASK_NODE_IMAGE: cmd::Ask = cmd::Ask("existing-node-image");
const ASK_NODE_IMAGES: cmd::Ask = cmd::Ask("node-images");
const ASK_HOST_IMAGE_ID: cmd::Ask = cmd::Ask("host-image-id");
const ASK_KIND_NODES: cmd::Ask = cmd::Ask("kind-nodes");
const ASK_NETWORK_GATEWAY: cmd::Ask = cmd::Ask("kind-network-gateway");
const ASK_NODE_CONTAINERS: cmd::Ask = cmd::Ask("node-containers");
const ASK_NODE_LABELS: cmd::Ask = cmd::Ask("node-container-labels");

/// kind's label on node containers.
pub const CLUSTER_LABEL: &str = "io.x-k8s.kind.cluster";
/// Every cluster faultlab creates is named with this prefix.
pub const NAME_PREFIX: &str = "faultlab-";
/// Labels by which a node image describes itself to faultlab (`docker image inspect`).
pub const IMAGE_LABEL_PREFIX: &str = "dev.faultlab.image.";
pub const CRICTL_LABEL: &str = "dev.faultlab.crictl";
pub use crate::node::profile::FOREIGN_RUNC_LABEL;

/// CPU architectures kind nodes come in.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Arch {
    Amd64,
    Arm64,
}

impl Arch {
    pub fn host() -> Option<Arch> {
        match std::env::consts::ARCH {
            "x86_64" => Some(Arch::Amd64),
            "aarch64" => Some(Arch::Arm64),
            _ => None,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Arch::Amd64 => "amd64",
            Arch::Arm64 => "arm64",
        }
    }

    /// Whether kind can run nodes of this architecture here: only the host's own (no emulation).
    pub fn check_runnable(self) -> Result<(), ProviderError> {
        match Arch::host() {
            Some(host) if host == self => Ok(()),
            host => Err(ProviderError::OtherArchitecture {
                message: format!(
                    "this host is {} and kind cannot run {} nodes on it (kind does not emulate another architecture); {}",
                    std::env::consts::ARCH,
                    self.as_str(),
                    match host {
                        Some(h) => format!("run with --arch {} here, or on an {} host", h.as_str(), self.as_str()),
                        None => format!("run on an {} host", self.as_str()),
                    }
                ),
            }),
        }
    }
}

pub use crate::needs::Needs;

/// A scenario's [`Needs`] in kind's terms: config patches, node bootstrap commands, the sandbox image
/// and the room the run takes on the host's disk.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct KindNeeds {
    /// TOML fragments for containerd's config.
    pub containerd_config_patches: Vec<String>,
    /// KubeletConfiguration fields merged into the kubelet's config.
    pub kubelet_config: Option<Value>,
    /// Disable kindnet (the scenario brings its own CNI).
    pub disable_default_cni: bool,
    /// Commands to run on each node as soon as its container exists, while kind is still creating it.
    pub node_bootstrap: Vec<Cmd>,
    /// The sandbox image the node will be configured with, if the scenario changes it.
    pub sandbox_image: Option<String>,
    /// The size of containerd's own disk, in MiB, if the scenario needs one (at [`DISK_BACKING_FILE`]).
    pub containerd_disk_mib: Option<u64>,
    /// Room the run takes on the host's disk, in MiB, under Docker's root (a loop file in a node's
    /// volume, and what the fault writes): checked before the cluster is created.
    pub host_disk_mib: u64,
    /// Worker nodes beside the control plane (a workload that moves off its node needs one).
    pub workers: usize,
    /// faultlab's CSI node plugin on every node (`faultlab-cri csi-node`, where the image has
    /// faultlab-cri), its volumes in a directory of the run's that every node mounts at [`CSI_DISKS`].
    pub csi_driver: bool,
}

/// Where faultlab's CSI node plugin keeps its volumes on a kind node: a directory of the run's own on
/// this host (`<run dir>/csi-disks`), mounted into every node, as a network disk every node reaches.
pub const CSI_DISKS: &str = "/var/lib/faultlab/csi-disks";

/// kind: the loop file containerd's root is moved onto when a scenario needs a containerd disk.
pub const DISK_BACKING_FILE: &str = "/var/lib/faultlab-containerd.ext4";
/// kind: containerd's root.
/// Where kubeadm puts the control plane's static pod manifests on a control-plane node.
pub const STATIC_POD_DIR: &str = "/etc/kubernetes/manifests";

/// How a kind control-plane node's components stop and start: the kubelet runs them as static pods,
/// so moving a manifest out of its directory stops one and moving it back starts it again. The waits
/// look for the component's process (the node container sees its containers' processes; the name is
/// the kernel's, cut to 15 characters). Single-node clusters: the node is the control plane.
pub fn control_plane() -> crate::node::ControlPlaneProfile {
    let component = |name: &str| {
        let manifest = format!("{STATIC_POD_DIR}/{name}.yaml");
        let parked = format!("/etc/kubernetes/{name}.yaml.faultlab-stopped");
        let comm: String = name.chars().take(15).collect();
        let script = |move_from: &str, move_to: &str, done: &str, what: &str| {
            vec![
                "sh".to_string(),
                "-c".to_string(),
                format!(
                    "[ ! -f \"$1\" ] || mv \"$1\" \"$2\"; for i in $(seq 120); do {done} && exit 0; sleep 1; done; echo \"$3 {what} 120 s after its manifest moved\" >&2; exit 1"
                ),
                "static-pod".to_string(),
                move_from.to_string(),
                move_to.to_string(),
                comm.clone(),
            ]
        };
        crate::node::ComponentControl {
            stop: script(&manifest, &parked, "! pgrep -x \"$3\" >/dev/null", "still runs"),
            start: script(&parked, &manifest, "pgrep -x \"$3\" >/dev/null", "does not run"),
            status: vec!["sh".into(), "-c".into(), "pgrep -x \"$1\" >/dev/null && echo running || echo stopped".into(), "status".into(), comm.clone()],
        }
    };
    crate::node::ControlPlaneProfile {
        on: crate::node::CommandsOn::Node,
        components: ["kube-controller-manager", "kube-scheduler"].into_iter().map(|c| (c.to_string(), component(c))).collect(),
    }
}

/// The kubelet of a kind node, a systemd unit: stopped and started by systemctl, which returns once
/// the unit has (`start` once systemd has started it; the kubelet's own health comes later).
pub fn kubelet_control() -> crate::node::ComponentControl {
    let systemctl = |verb: &str| vec!["systemctl".to_string(), verb.to_string(), "kubelet".to_string()];
    crate::node::ComponentControl {
        stop: systemctl("stop"),
        start: systemctl("start"),
        status: vec!["sh".into(), "-c".into(), "systemctl is-active --quiet kubelet && echo running || echo stopped".into()],
    }
}

/// containerd's registry hosts directory on faultlab's kind nodes (`config_path`: set by
/// [`REGISTRY_CONFIG_PATH_PATCH`] on every cluster; kind's stock config sets none).
pub const REGISTRY_HOSTS_DIR: &str = "/etc/containerd/certs.d";

/// The containerd config patch that sets [`REGISTRY_HOSTS_DIR`] as the registry hosts directory (a
/// version 2 key, as kind's stock config is; containerd 2 migrates both).
pub const REGISTRY_CONFIG_PATH_PATCH: &str = "[plugins.\"io.containerd.grpc.v1.cri\".registry]\n  config_path = \"/etc/containerd/certs.d\"\n";

/// The docker network kind puts its nodes on (kind's default; `KIND_EXPERIMENTAL_DOCKER_NETWORK`
/// names another).
pub fn network_name() -> String {
    std::env::var("KIND_EXPERIMENTAL_DOCKER_NETWORK").ok().filter(|n| !n.is_empty()).unwrap_or_else(|| "kind".into())
}

/// `docker network inspect` printing the network's gateway addresses, one a line.
pub fn network_gateway_argv(network: &str) -> Vec<String> {
    ["docker", "network", "inspect", network, "--format", "{{range .IPAM.Config}}{{println .Gateway}}{{end}}"].map(String::from).to_vec()
}

/// The first IPv4 gateway of [`network_gateway_argv`]'s output (an IPv6 one has colons).
pub fn ipv4_gateway(output: &str) -> Option<String> {
    output.lines().map(str::trim).find(|l| !l.is_empty() && !l.contains(':')).map(str::to_owned)
}

pub const CONTAINERD_ROOT: &str = "/var/lib/containerd";

impl KindNeeds {
    /// A fault's needs in kind's terms.
    pub fn of(needs: &Needs) -> KindNeeds {
        let mut k = KindNeeds { disable_default_cni: needs.no_default_cni, ..Default::default() };
        // Every cluster: containerd reads per-registry settings from the hosts directory, where a
        // scenario's registry puts its hosts.toml and CA. kind's stock config sets no config_path (so
        // containerd would ignore them and a pull from the run's registry fail x509); this is kind's
        // own documented patch for a local registry, and changes nothing where it is set already.
        k.containerd_config_patches.push(REGISTRY_CONFIG_PATH_PATCH.to_string());
        if let Some(mib) = needs.containerd_disk_mib {
            // Before kubeadm starts containers, and first of the bootstrap (what a later command does in
            // containerd goes onto the new disk): containerd's root moves onto a loop-mounted ext4 file
            // of its own inside the node.
            let f = DISK_BACKING_FILE;
            k.node_bootstrap.push(
                Cmd::shell(format!(
                    "for i in $(seq 1 120); do systemctl is-active -q containerd && break; sleep 1; done; \
                     set -e; truncate -s {mib}M {f}; mkfs.ext4 -q -F {f}; systemctl stop containerd; \
                     mkdir -p /mnt/faultlab-disk; mount -o loop {f} /mnt/faultlab-disk; cp -a {CONTAINERD_ROOT}/. /mnt/faultlab-disk/; \
                     umount /mnt/faultlab-disk; mount -o loop {f} {CONTAINERD_ROOT}; systemctl start containerd"
                ))
                .timeout(Duration::from_secs(240)),
            );
        }
        if let Some(tag) = &needs.local_sandbox_image {
            // containerd is told to use the tag; the node makes it from its own pause image as soon as
            // containerd has one (kind's images are preloaded; a node image may import them at boot).
            k.containerd_config_patches.push(format!("[plugins.\"io.containerd.grpc.v1.cri\"]\n  sandbox_image = \"{tag}\"\n"));
            k.node_bootstrap.push(
                Cmd::shell(format!(
                    "for i in $(seq 1 170); do src=$(ctr -n k8s.io images ls -q 2>/dev/null | grep -E '/pause:' | grep -v '^{tag}$' | head -n1); \
                     if [ -n \"$src\" ] && ctr -n k8s.io images tag --force \"$src\" {tag}; then exit 0; fi; sleep 1; done; exit 1"
                ))
                .timeout(Duration::from_secs(180)),
            );
            k.sandbox_image = Some(needs.local_sandbox_image.clone().unwrap_or_default());
        }
        let mut kubelet = serde_json::Map::new();
        if let Some(reserved) = &needs.static_cpu_manager {
            kubelet.insert("cpuManagerPolicy".into(), json!("static"));
            kubelet.insert("kubeReserved".into(), json!({"cpu": reserved}));
        }
        if needs.no_image_gc {
            kubelet.insert("evictionHard".into(), json!({"imagefs.available": "0%", "nodefs.available": "0%", "nodefs.inodesFree": "0%"}));
            kubelet.insert("imageGCHighThresholdPercent".into(), json!(100));
            kubelet.insert("imageGCLowThresholdPercent".into(), json!(99));
        }
        if !kubelet.is_empty() {
            k.kubelet_config = Some(Value::Object(kubelet));
        }
        k.containerd_disk_mib = needs.containerd_disk_mib;
        k.workers = usize::from(needs.moves_between_nodes);
        k.csi_driver = needs.csi_driver;
        k.host_disk_mib = needs.containerd_disk_mib.unwrap_or(0).saturating_add(needs.disk_writes_mib);
        k
    }
}

/// `docker info --format '{{.DockerRootDir}}'`: where Docker keeps volumes, on the host.
pub fn docker_root_argv() -> Vec<String> {
    ["docker", "info", "--format", "{{.DockerRootDir}}"].map(String::from).to_vec()
}

/// Room a host must keep free beyond what a fault writes to its disk, in MiB.
pub const HOST_DISK_SPARE_MIB: u64 = 1024;

/// Whether `free` MiB under Docker's root `root` hold `need` MiB and [`HOST_DISK_SPARE_MIB`] more: a
/// note saying so, or the refusal.
pub fn host_room(root: &Path, free: u64, need: u64) -> Result<String, ProviderError> {
    let want = need.saturating_add(HOST_DISK_SPARE_MIB);
    if free < want {
        return Err(ProviderError::HostDisk {
            message: format!(
                "the fault writes up to {need} MiB under Docker's root {}, whose file system has {free} MiB free (it needs {want} MiB, with {HOST_DISK_SPARE_MIB} MiB to spare); nothing was created",
                root.display()
            ),
        });
    }
    Ok(format!("Docker's root {} has {free} MiB free; the fault writes up to {need} MiB there", root.display()))
}

/// Free MiB of the file system holding `path` (for an unprivileged user, as `df` shows them).
pub fn free_mib(path: &Path) -> std::io::Result<u64> {
    use std::os::unix::ffi::OsStrExt;
    let c = std::ffi::CString::new(path.as_os_str().as_bytes()).map_err(std::io::Error::other)?;
    let mut st: libc::statvfs = unsafe { std::mem::zeroed() };
    // SAFETY: `c` is a valid NUL-terminated path and `st` a valid out-pointer.
    if unsafe { libc::statvfs(c.as_ptr(), &mut st) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok((st.f_bavail as u64).saturating_mul(st.f_frsize as u64) / (1024 * 1024))
}

pub struct Kind {
    pub name: String,
    pub arch: Arch,
    pub configs_dir: PathBuf,
    /// The run's directory: composed config, kubeconfig, `owner.lock` (removed when the cluster is deleted).
    pub workdir: PathBuf,
    /// Where `kind export logs` writes when a run fails.
    pub logs_dir: PathBuf,
    pub keep: bool,
    pub needs: KindNeeds,
    /// `--node-image`: every node runs this image instead of the one pinned in `kind-configs/<arch>.yaml`.
    pub node_image: Option<String>,
    /// What the node image's labels say (read before `kind create`; defaults for kindest/node).
    pub image_info: std::sync::OnceLock<NodeImage>,
    /// The kind network's gateway, this machine's address on it (read when the nodes are listed): where
    /// a registry a scenario starts listens, and the nodes reach it.
    pub network_gateway: std::sync::OnceLock<String>,
    /// Where kind and docker run: this machine, or a plan's scripted host.
    pub host: std::sync::Arc<dyn Host>,
    /// A cluster of the user's (`--cluster NAME`): used as it is, neither created nor deleted.
    pub existing: bool,
    /// Its [`owner_lock`], held by this process from before `kind create` for as long as it has the
    /// cluster: `faultlab cleanup` leaves a cluster whose lock is held.
    pub owner: std::sync::OnceLock<std::fs::File>,
}

/// What a node image says of itself in its labels: the images it holds by role (`dev.faultlab.image.<role>`,
/// `pause` being the sandbox image) and its CRI client when that is not `crictl` (`dev.faultlab.crictl`).
/// An image without such labels is taken to be kindest/node, which pulls what it needs.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct NodeImage {
    pub images: std::collections::BTreeMap<String, String>,
    pub crictl: Option<String>,
    /// A runc of another release in the image (`dev.faultlab.foreign-runc`), by its path on the node.
    pub foreign_runc: Option<String>,
}

impl NodeImage {
    /// Decode `docker image inspect --format '{{json .Config.Labels}}'` output. Labels outside
    /// `dev.faultlab.` are ignored; an unknown `dev.faultlab.` label or an empty value is an error.
    pub fn from_labels_json(image: &str, text: &str) -> Result<NodeImage, ProviderError> {
        let bad = |message: String| ProviderError::NodeImageLabels { image: image.into(), message };
        let value: Value = serde_json::from_str(text.trim()).map_err(|e| bad(format!("cannot decode the labels {:?}: {e}", text.trim())))?;
        let mut info = NodeImage::default();
        let Some(labels) = value.as_object() else {
            return Ok(info); // `null`: no labels at all
        };
        for (key, v) in labels {
            if !key.starts_with("dev.faultlab.") {
                continue;
            }
            let v = v.as_str().unwrap_or_default().trim();
            if v.is_empty() {
                return Err(bad(format!("label {key} is empty")));
            }
            if key == CRICTL_LABEL {
                info.crictl = Some(v.to_string());
            } else if key == FOREIGN_RUNC_LABEL {
                if !v.starts_with('/') {
                    return Err(bad(format!("label {key} is {v:?}, not an absolute path on the node")));
                }
                info.foreign_runc = Some(v.to_string());
            } else if let Some(role) = key.strip_prefix(IMAGE_LABEL_PREFIX).filter(|r| !r.is_empty() && !r.contains('.')) {
                info.images.insert(role.to_string(), v.to_string());
            } else {
                return Err(bad(format!("unknown label {key} (known: {IMAGE_LABEL_PREFIX}<role>, {CRICTL_LABEL}, {FOREIGN_RUNC_LABEL})")));
            }
        }
        Ok(info)
    }
}

/// `docker image inspect --format '{{json .Config.Labels}}' IMAGE`.
pub fn inspect_labels_argv(image: &str) -> Vec<String> {
    ["docker", "image", "inspect", "--format", "{{json .Config.Labels}}", image].map(String::from).to_vec()
}

/// The platform name of a cluster from what its nodes report in `status.nodeInfo` and their cgroup
/// version: `<prefix>-<k8s major.minor>-<runtime>-<runtime major.minor>[-cgroup2]-<arch>`, e.g.
/// `kind-1.20-containerd-1.6-amd64` from kubelet `v1.20.2`, runtime `containerd://1.6.20`, architecture
/// `amd64` and cgroup v1 (prefix `kind` on kind, `k8s` on the test bed and other existing clusters;
/// `-cgroup2` on cgroup v2, nothing on v1, so the names of expectations recorded there stay as they
/// were). Each entry is a node's name and info. A value that does not read so is an error naming the
/// node and the value; nodes that report different platforms are an error too (one snapshot directory
/// per run).
pub fn platform_from_nodes(prefix: &str, nodes: &[(String, NodeSystemInfo)], cgroup: CgroupVersion) -> Result<String, ProviderError> {
    /// `v1.20.2`, `1.6.20`, `2.0.2-rc.1`, `1.7.0+unknown` -> `1.20`, `1.6`, `2.0`, `1.7`.
    fn minor(v: &str) -> Option<String> {
        let v = v.strip_prefix('v').unwrap_or(v);
        let mut parts = v.split(['.', '-', '+']);
        let (major, minor) = (parts.next()?, parts.next()?);
        let number = |s: &str| !s.is_empty() && s.chars().all(|c| c.is_ascii_digit());
        (number(major) && number(minor)).then(|| format!("{major}.{minor}"))
    }
    let word = |s: &str| !s.is_empty() && s.chars().all(|c| c.is_ascii_alphanumeric());
    let mut names: Vec<String> = Vec::new();
    for (node, info) in nodes {
        let bad = |what: &str, value: &str| ProviderError::Platform {
            message: format!("node {node} reports {what} {value:?}, which does not read as {}", match what {
                "kubeletVersion" => "v<major>.<minor>[.<patch>]",
                "containerRuntimeVersion" => "<runtime>://<major>.<minor>[.<patch>]",
                _ => "a name such as amd64 or arm64",
            }),
        };
        let kubelet = minor(&info.kubelet_version).ok_or_else(|| bad("kubeletVersion", &info.kubelet_version))?;
        let runtime = &info.container_runtime_version;
        let (rt, rt_minor) = match runtime.split_once("://") {
            // A runtime's name as the CRI gives it: `containerd`, `cri-o`.
            Some((rt, v)) if word(&rt.replace('-', "")) && !rt.starts_with('-') => (rt, minor(v).ok_or_else(|| bad("containerRuntimeVersion", runtime))?),
            _ => return Err(bad("containerRuntimeVersion", runtime)),
        };
        if !word(&info.architecture) {
            return Err(bad("architecture", &info.architecture));
        }
        let name = format!("{prefix}-{kubelet}-{rt}-{rt_minor}{}-{}", cgroup.platform_part(), info.architecture);
        if !names.contains(&name) {
            names.push(name);
        }
    }
    match names.as_slice() {
        [one] => Ok(one.clone()),
        [] => Err(ProviderError::Platform { message: "the API lists no nodes".into() }),
        many => {
            let each: Vec<String> = nodes.iter().map(|(n, i)| format!("{n}: kubelet {}, {}, {}", i.kubelet_version, i.container_runtime_version, i.architecture)).collect();
            Err(ProviderError::Platform { message: format!("the nodes are of different platforms ({}): {}", many.join(", "), each.join("; ")) })
        }
    }
}

/// How the kubelet reports the runtime's version while it cannot ask the runtime (a restart of
/// containerd, for one: registry-x509's fix and undo): `<runtime>://Unknown`, until a later status update
/// (every 10 s) asks again. On a shared cluster the next scenario can start inside that window.
pub const RUNTIME_VERSION_UNKNOWN: &str = "://Unknown";

/// How long [`node_infos_known`] waits for every node's runtime version to be known again.
pub const RUNTIME_VERSION_WAIT: Duration = Duration::from_secs(60);

/// Every node's name and `status.nodeInfo` as the API server has it (`GET /api/v1/nodes` through the
/// run's client), what [`platform_from_nodes`] names the platform from; only the nodes named in `of`,
/// if given (a description's). While a node reports its runtime's version as unknown
/// ([`RUNTIME_VERSION_UNKNOWN`]) the nodes are asked again, every 2 s for up to
/// [`RUNTIME_VERSION_WAIT`]; then the version as it stands is the error.
pub async fn node_infos_known(kube: &Kube, of: Option<&[String]>) -> Result<Vec<(String, NodeSystemInfo)>, ProviderError> {
    node_infos_within(kube, of, RUNTIME_VERSION_WAIT, Duration::from_secs(2)).await
}

async fn node_infos_within(kube: &Kube, of: Option<&[String]>, wait: Duration, every: Duration) -> Result<Vec<(String, NodeSystemInfo)>, ProviderError> {
    let deadline = tokio::time::Instant::now() + wait;
    let mut said = false;
    loop {
        let mut infos = node_infos(kube).await?;
        if let Some(of) = of {
            infos.retain(|(name, _)| of.contains(name));
        }
        let unknown = infos.iter().find(|(_, i)| i.container_runtime_version.ends_with(RUNTIME_VERSION_UNKNOWN));
        let Some((node, info)) = unknown else {
            return Ok(infos);
        };
        if tokio::time::Instant::now() >= deadline {
            return Err(ProviderError::Platform {
                message: format!(
                    "node {node} reports containerRuntimeVersion {:?} still after {}: its kubelet cannot ask its container runtime for its version",
                    info.container_runtime_version,
                    crate::duration::format(wait)
                ),
            });
        }
        if !said {
            kube.recorder().push(
                Channel::Note,
                format!("node {node} reports containerRuntimeVersion {:?} (its kubelet could not ask the runtime, as while containerd restarts): ask again", info.container_runtime_version),
            );
            said = true;
        }
        tokio::time::sleep(every).await;
    }
}

/// Every node's name and `status.nodeInfo`.
async fn node_infos(kube: &Kube) -> Result<Vec<(String, NodeSystemInfo)>, ProviderError> {
    let nodes: Vec<Node> = kube.list(None, None).await.map_err(|source| ProviderError::NodeInfo { source })?;
    nodes
        .into_iter()
        .map(|n| {
            let name = n.metadata.name.unwrap_or_default();
            match n.status.and_then(|s| s.node_info) {
                Some(info) => Ok((name, info)),
                None => Err(ProviderError::Platform { message: format!("node {name} reports no status.nodeInfo") }),
            }
        })
        .collect()
}

impl Kind {
    /// A new cluster name: `faultlab-<scenario>-<random>`, within kind's length limit.
    pub fn new_name(scenario: &str) -> String {
        let mut short: String = scenario.chars().filter(|c| c.is_ascii_alphanumeric() || *c == '-').take(20).collect();
        short = short.trim_end_matches('-').to_string();
        format!("{NAME_PREFIX}{short}-{}", crate::names::random_suffix(5))
    }

    pub fn kubeconfig(&self) -> PathBuf {
        self.workdir.join("kubeconfig")
    }

    /// The run's CSI volumes on this host, mounted into every node at [`CSI_DISKS`] (they go with the
    /// run's directory when the cluster is deleted).
    pub fn csi_disks_dir(&self) -> PathBuf {
        self.workdir.join("csi-disks")
    }

    /// faultlab-cri on the nodes, if the node image carries it (its CRI client label names it).
    fn faultlab_cri(&self) -> Option<String> {
        self.image_info.get().and_then(|i| i.crictl.clone()).filter(|c| c == "faultlab-cri" || c.ends_with("/faultlab-cri"))
    }

    /// Start faultlab's CSI node plugin on each node (detached, its log in the node's
    /// /var/log/faultlab-csi-node.log) and wait for its registration socket, then, with workers,
    /// restart kube-controller-manager once every node is Ready (the test bed's reason: its nodes join
    /// together, and this 1.20.2 controller manager then never taints a failed one NoExecute,
    /// kubernetes#94183).
    async fn start_csi_driver(&self, nodes: &[String], rec: &Recorder) -> Result<(), ProviderError> {
        let Some(cri) = self.faultlab_cri() else { return Ok(()) };
        let failed = |source| ProviderError::Create { name: self.name.clone(), source };
        for node in nodes {
            // The program and the node's name go in as arguments, never into the shell's text.
            let argv = csi_node_start_argv(&cri, node);
            self.host.run(rec, Cmd::new(argv).timeout(Duration::from_secs(30))).await.map_err(failed)?;
            let socket = format!("/var/lib/kubelet/plugins_registry/{}-reg.sock", crate::attacher::DRIVER);
            let wait = format!("for i in $(seq 60); do [ -S {socket} ] && exit 0; sleep 1; done; echo 'no {socket} after 60 s' >&2; tail -n 20 /var/log/faultlab-csi-node.log >&2; exit 1");
            let argv: Vec<String> = ["docker", "exec", node.as_str(), "sh", "-c", wait.as_str()].map(String::from).to_vec();
            self.host.run(rec, Cmd::new(argv).timeout(Duration::from_secs(75))).await.map_err(failed)?;
        }
        if self.needs.workers == 0 {
            return Ok(());
        }
        let Some(cp) = nodes.iter().find(|n| n.ends_with("-control-plane")) else { return Ok(()) };
        let ready = "kubectl --kubeconfig /etc/kubernetes/admin.conf wait --for=condition=Ready node --all --timeout=150s";
        let argv: Vec<String> = ["docker", "exec", cp.as_str(), "sh", "-c", ready].map(String::from).to_vec();
        self.host.run(rec, Cmd::new(argv).timeout(Duration::from_secs(170))).await.map_err(failed)?;
        rec.push(Channel::Note, "restart kube-controller-manager now that every node is Ready (kubernetes#94183: nodes that join together are never tainted NoExecute by this 1.20 controller manager once they fail)".to_string());
        let control = &control_plane().components["kube-controller-manager"];
        for step in [&control.stop, &control.start] {
            let mut argv: Vec<String> = vec!["docker".into(), "exec".into(), cp.clone()];
            argv.extend(step.iter().cloned());
            self.host.run(rec, Cmd::new(argv).timeout(Duration::from_secs(150))).await.map_err(failed)?;
        }
        Ok(())
    }

    pub fn context(&self) -> String {
        format!("kind-{}", self.name)
    }

    /// The cluster this provider creates, before its nodes are known (what teardown needs).
    pub fn cluster(&self) -> Cluster {
        Cluster {
            kubeconfig: self.kubeconfig(),
            context: self.context(),
            platform: String::new(),
            nodes: vec![],
            ownership: match self.existing {
                true => Ownership::Named { kind_cluster: self.name.clone() },
                false => Ownership::Created { kind_cluster: self.name.clone() },
            },
        }
    }

    /// What a plan names as the platform: the nodes decide it once they run.
    pub fn planned_platform(&self) -> String {
        format!("kind-<kubelet minor>-<runtime>-<runtime minor>[-cgroup2]-{} (from the nodes once they run; -cgroup2 where a node's /sys/fs/cgroup is cgroup v2)", self.arch.as_str())
    }

    /// The cgroup version of the cluster's nodes, read on the first (kind's nodes share this host's
    /// kernel and its cgroup hierarchy): [`runtime::cgroup_command`] through `docker exec`.
    async fn cgroup_version(&self, cluster: &Cluster, rec: &Recorder) -> Result<CgroupVersion, ProviderError> {
        let node = cluster.nodes.first().ok_or_else(|| ProviderError::Platform { message: "the cluster lists no node to read the cgroup version on".into() })?;
        let access = node.access().unwrap_or_else(|| NodeAccess::Docker { container: node.name.clone() });
        let cmd = runtime::cgroup_command();
        let out = self.host.run(rec, Cmd::new(access.wrap(&cmd)).timeout(NodeAccess::host_timeout(&cmd)).asks(runtime::ASK_CGROUP)).await.map_err(|source| ProviderError::ReadCgroup { node: node.name.clone(), source })?;
        runtime::parse_cgroup(&out.stdout).map_err(|source| ProviderError::CgroupVersion { node: node.name.clone(), source })
    }

    /// The node image: `--node-image`, else the one pinned in `kind-configs/<arch>.yaml`.
    pub fn image(&self) -> Result<String, ProviderError> {
        if let Some(i) = &self.node_image {
            return Ok(i.clone());
        }
        let (path, config) = self.base_config()?;
        config
            .get("nodes")
            .and_then(|n| n.as_array())
            .and_then(|n| n.iter().find_map(|node| node.get("image").and_then(|i| i.as_str())))
            .map(str::to_owned)
            .ok_or_else(|| ProviderError::KindConfig { message: format!("{}: no nodes[].image pinned", path.display()) })
    }

    /// What `--keep` tells the user.
    pub fn keep_message(&self) -> String {
        format!(
            "--keep: kind cluster {name} is kept (kubeconfig {kc}, context {ctx}); delete it with `kind delete cluster --name {name}` or `faultlab cleanup`",
            name = self.name,
            kc = self.kubeconfig().display(),
            ctx = self.context()
        )
    }

    /// The pinned config for this architecture; asking for another architecture than the host's is an
    /// error, because kind cannot emulate one (plans may still show it).
    pub fn base_config(&self) -> Result<(PathBuf, Value), ProviderError> {
        let path = self.configs_dir.join(format!("{}.yaml", self.arch.as_str()));
        let text = std::fs::read_to_string(&path)
            .map_err(|e| ProviderError::KindConfig { message: format!("cannot read {}: {e}", path.display()) })?;
        let value: Value = serde_saphyr::from_str(&text)
            .map_err(|e| ProviderError::KindConfig { message: format!("{}: {e}", path.display()) })?;
        Ok((path, value))
    }

    /// The base config with the scenario's needs composed in.
    pub fn compose(&self) -> Result<String, ProviderError> {
        let (_, mut config) = self.base_config()?;
        compose(&mut config, &self.needs);
        if self.needs.csi_driver {
            // Every node (the workers copy the control plane's entry below) mounts the run's disks.
            let mount = json!({"hostPath": self.csi_disks_dir().display().to_string(), "containerPath": CSI_DISKS});
            for node in config.get_mut("nodes").and_then(|n| n.as_array_mut()).into_iter().flatten() {
                if let Some(mounts) = node.as_object_mut().map(|n| n.entry("extraMounts").or_insert_with(|| json!([]))) {
                    if let Some(list) = mounts.as_array_mut() {
                        list.push(mount.clone());
                    }
                }
            }
        }
        add_workers(&mut config, self.needs.workers);
        if let Some(image) = &self.node_image {
            if let Some(nodes) = config.get_mut("nodes").and_then(|n| n.as_array_mut()) {
                for node in nodes {
                    if let Some(n) = node.as_object_mut() {
                        n.insert("image".into(), Value::String(image.clone()));
                    }
                }
            }
        }
        serde_saphyr::to_string(&config).map_err(|e| ProviderError::KindConfig { message: e.to_string() })
    }

    /// Where a kind node keeps things, as faults need to know. Images and the CRI client come from the
    /// node image's labels; without them, kindest/node's (which pulls busybox from Docker Hub).
    pub fn node_profile(&self, container: &str) -> NodeProfile {
        let info = self.image_info.get().cloned().unwrap_or_default();
        let mut images = info.images.clone();
        let pause = images.remove("pause").unwrap_or_else(|| "registry.k8s.io/pause:3.10".into());
        let busybox = images.remove("busybox").unwrap_or_else(|| "docker.io/library/busybox:1.36".into());
        if info.images.is_empty() {
            // Upstream busybox has the inotifyd applet (the test bed's Debian build has not).
            images.insert("inotify".to_string(), busybox.clone());
        }
        let sandbox = self.needs.sandbox_image.clone().unwrap_or_else(|| pause.clone());
        NodeProfile {
            name: container.to_string(),
            netns: None,
            container: Some(container.to_string()),
            ssh: None,
            arch: None,
            address: None,
            gateway: None,
            gateway_device: Some("eth0".into()),
            containerd: ContainerdProfile {
                address: "/run/containerd/containerd.sock".into(),
                namespace: "k8s.io".into(),
                root: CONTAINERD_ROOT.into(),
                config: "/etc/containerd/config.toml".into(),
                sandbox_image: sandbox.clone(),
                restart: vec!["systemctl".into(), "restart".into(), "containerd".into()],
                ctr: None,
                foreign_runc: info.foreign_runc.clone(),
            },
            kubelet: KubeletProfile {
                root_dir: "/var/lib/kubelet".into(),
                config: "/var/lib/kubelet/config.yaml".into(),
                extra_flags_file: None,
                restart: vec!["systemctl".into(), "restart".into(), "kubelet".into()],
                control: Some(kubelet_control()),
            },
            // kindest/node carries crictl, configured by /etc/crictl.yaml; other images say theirs.
            crictl: info.crictl.map(|c| vec![c]),
            disk: self.needs.containerd_disk_mib.map(|size_mib| DiskProfile {
                mountpoint: CONTAINERD_ROOT.into(),
                backing_file: DISK_BACKING_FILE.into(),
                device: None,
                size_mib,
            }),
            node_package: Some("/opt/cloud/cce/package/node-package/pause-3.1.tgz".into()),
            images: ImageSet { pause: sandbox, busybox, more: images },
            registry: self.network_gateway.get().map(|gateway| RegistryProfile {
                listen: gateway.clone(),
                address: gateway.clone(),
                hosts_dir: REGISTRY_HOSTS_DIR.into(),
            }),
            // A worker runs none of the control plane's static pods.
            control_plane: (!container.rsplit_once('-').is_some_and(|(_, role)| role.starts_with("worker"))).then(control_plane),
            // faultlab's CSI node plugin, where the run asks for it and the image carries faultlab-cri.
            csi: (self.needs.csi_driver && self.faultlab_cri().is_some())
                .then(|| crate::node::CsiProfile { driver: crate::attacher::DRIVER.into(), disks: CSI_DISKS.into() }),
        }
    }

    /// Refuse before creating anything when the host has no room for what the fault writes there:
    /// ask Docker for its root directory (`docker info`), where the node's volumes live, and read the
    /// free space of the file system holding it (statvfs, as this user).
    async fn check_host_disk(&self, rec: &Recorder) -> Result<(), ProviderError> {
        let need = self.needs.host_disk_mib;
        if need == 0 {
            return Ok(());
        }
        let out = self.host.run(rec, Cmd::new(docker_root_argv()).timeout(Duration::from_secs(30)).asks(ASK_DOCKER_ROOT)).await.map_err(|source| ProviderError::DockerRoot { source })?;
        let root = PathBuf::from(out.stdout.trim());
        if !root.is_absolute() {
            return Err(ProviderError::HostDisk { message: format!("Docker named {:?} as its root directory, which is not an absolute path", out.stdout.trim()) });
        }
        match self.host.free_mib(&root).map_err(|source| ProviderError::FreeSpace { path: root.clone(), source })? {
            Some(free) => rec.push(Channel::Note, host_room(&root, free, need)?),
            None => rec.push(Channel::Note, format!("the fault writes up to {need} MiB under Docker's root {}: its file system must have that much free, and {HOST_DISK_SPARE_MIB} MiB more", root.display())),
        }
        Ok(())
    }

    /// Read the node image's labels (`docker image inspect`) into `image_info`. When the image is not
    /// present locally (kind pulls it), or has no labels of ours, kindest/node's defaults stand.
    async fn read_image_labels(&self, rec: &Recorder) -> Result<(), ProviderError> {
        if self.image_info.get().is_some() {
            return Ok(());
        }
        let image = self.image()?;
        self.read_labels_of(&image, rec).await
    }

    async fn read_labels_of(&self, image: &str, rec: &Recorder) -> Result<(), ProviderError> {
        let image = image.to_string();
        match self.host.run(rec, Cmd::new(inspect_labels_argv(&image)).timeout(Duration::from_secs(30)).asks(ASK_IMAGE_LABELS)).await {
            Ok(out) => {
                let info = NodeImage::from_labels_json(&image, &out.stdout)?;
                if !info.images.is_empty() || info.crictl.is_some() {
                    rec.push(Channel::Note, format!("node image {image}: images {:?}, CRI client {}", info.images, info.crictl.as_deref().unwrap_or("crictl")));
                } else {
                    rec.push(Channel::Note, format!("node image {image} has no dev.faultlab.* labels naming its images and CRI client: taken as kindest/node, which pulls them"));
                }
                let _ = self.image_info.set(info);
            }
            Err(e) => rec.push(Channel::Note, format!("node image {image} is not present locally ({}); kind pulls it, and faultlab assumes kindest/node", e.to_string().lines().next().unwrap_or_default())),
        }
        Ok(())
    }

    /// A kind cluster of the user's (`--cluster NAME`): it must be there; its kubeconfig (`kind get
    /// kubeconfig`) goes into the run's directory, the node image's labels are read from its nodes'
    /// image, the workload images it lacks are loaded. A scenario whose fault needs the cluster made
    /// for it (containerd or kubelet settings beyond the registry hosts directory, a CNI of its own, a
    /// disk) is refused: faultlab changes nothing of how a cluster of yours was made.
    async fn provision_existing(&self, rec: &Recorder) -> Result<Cluster, ProviderError> {
        let refuse = |why: String| ProviderError::Existing { name: self.name.clone(), why };
        let common = KindNeeds::of(&crate::needs::Needs::default());
        if (KindNeeds { host_disk_mib: 0, ..self.needs.clone() }) != (KindNeeds { host_disk_mib: 0, ..common }) {
            return Err(ProviderError::RefusedOnExisting { name: self.name.clone(), why: "this scenario's fault needs a cluster made for it (containerd or kubelet settings, a CNI of its own, or a disk of containerd's own), and faultlab changes nothing of how a cluster of yours was made: run it without --cluster, on a cluster faultlab makes".into() });
        }
        let listed = self.host.run(rec, Cmd::new(["kind", "get", "clusters"]).timeout(Duration::from_secs(60)).asks(ASK_KIND_CLUSTERS)).await.map_err(|source| ProviderError::ListClusters { source })?;
        if !listed.stdout.lines().any(|l| l.trim() == self.name) {
            let known: Vec<&str> = listed.stdout.lines().map(str::trim).filter(|l| !l.is_empty()).collect();
            return Err(ProviderError::NoSuchCluster { name: self.name.clone(), known: if known.is_empty() { "none".to_string() } else { known.join(", ") } });
        }
        let argv = vec!["kind".into(), "get".into(), "kubeconfig".into(), "--name".into(), self.name.clone()];
        let kubeconfig = self.host.run(rec, Cmd::new(argv).timeout(Duration::from_secs(60))).await.map_err(|e| refuse(format!("reading its kubeconfig: {e}")))?;
        self.host.write(&self.kubeconfig(), &kubeconfig.stdout)?;
        let control_plane = format!("{}-control-plane", self.name);
        let argv = vec!["docker".into(), "inspect".into(), "--format".into(), "{{.Config.Image}}".into(), control_plane.clone()];
        let image = self.host.run(rec, Cmd::new(argv).timeout(Duration::from_secs(30)).asks(ASK_NODE_IMAGE)).await.map_err(|e| refuse(format!("reading the image of its node {control_plane}: {e}")))?;
        self.read_labels_of(image.stdout.trim(), rec).await?;
        let mut cluster = self.cluster();
        cluster.nodes = self.nodes(&cluster, rec).await?;
        let names: Vec<String> = cluster.nodes.iter().map(|n| n.name.clone()).collect();
        self.load_images(&names, rec).await?;
        Ok(cluster)
    }

    fn require(&self, program: &str, what: &'static str, hint: &'static str) -> Result<(), ProviderError> {
        if self.host.has(program) {
            Ok(())
        } else {
            Err(ProviderError::MissingBinary { what, program: program.into(), hint })
        }
    }

    /// What a plan's host answers: the node container kind will make, Docker's root, an image
    /// without labels of ours (kindest/node) whose nodes hold its own images, and no workload image in
    /// this machine's Docker (the kubelet pulls it).
    pub fn plan_answers(&self) -> Vec<(cmd::Ask, cmd::Output)> {
        let node = format!("{}-control-plane\n", self.name);
        let missing = cmd::Output { status: 1, stdout: String::new(), stderr: "Error: No such image\n".into() };
        vec![
            (ASK_KIND_NODES, cmd::Output::ok(node)),
            (ASK_DOCKER_ROOT, cmd::Output::ok("/var/lib/docker\n")),
            (ASK_IMAGE_LABELS, cmd::Output::ok("null\n")),
            (ASK_HOST_IMAGE_ID, missing),
            (ASK_NODE_IMAGES, cmd::Output::ok("registry.k8s.io/pause:3.10\n")),
            (ASK_NETWORK_GATEWAY, cmd::Output::ok("<kind-network-gateway>\n")),
            (ASK_KIND_CLUSTERS, cmd::Output::ok(format!("{}\n", self.name))),
            (ASK_NODE_IMAGE, cmd::Output::ok("<its node image>\n")),
        ]
    }

    fn node_list_argv(&self) -> Vec<String> {
        vec![
            "docker".into(),
            "ps".into(),
            "--filter".into(),
            format!("label={CLUSTER_LABEL}={}", self.name),
            "--format".into(),
            "{{.Names}}".into(),
        ]
    }

    /// The images the node image names for workloads (every role but the sandbox image's), or
    /// kindest/node's busybox.
    fn workload_images(&self) -> Vec<String> {
        let profile = self.node_profile("");
        let mut images: Vec<String> = std::iter::once(profile.images.busybox).chain(profile.images.more.into_values()).collect();
        images.sort();
        images.dedup();
        images
    }

    /// Load into the nodes, as `kind load docker-image` does, the workload images some node lacks and
    /// this machine's Docker holds: a node image that preloads only what kindest/node does (ours with
    /// containerd 2), or kindest/node itself on a machine that cannot reach Docker Hub, runs the
    /// scenarios' workloads from images the user has. An image neither has is left to the kubelet to
    /// pull, as on a stock kind cluster.
    async fn load_images(&self, nodes: &[String], rec: &Recorder) -> Result<(), ProviderError> {
        let wanted = self.workload_images();
        let mut listings = Vec::new();
        for node in nodes {
            let access = crate::node::NodeAccess::Docker { container: node.clone() };
            let list = access.wrap(&Cmd::new(["ctr", "-n", "k8s.io", "images", "ls", "-q"]));
            let out = self.host.run(rec, Cmd::new(list).timeout(Duration::from_secs(60)).asks(ASK_NODE_IMAGES)).await.map_err(|source| ProviderError::LoadImages { name: self.name.clone(), source })?;
            listings.push(out.stdout);
        }
        let missing = images_missing(&wanted, &listings);
        let mut load = Vec::new();
        for image in missing {
            let inspect = vec!["docker".to_string(), "image".into(), "inspect".into(), "--format".into(), "{{.Id}}".into(), image.clone()];
            match self.host.run(rec, Cmd::new(inspect).timeout(Duration::from_secs(30)).asks(ASK_HOST_IMAGE_ID)).await {
                Ok(_) => load.push(image),
                Err(_) => rec.push(Channel::Note, format!("workload image {image} is on no node and not in this machine's Docker: the kubelet pulls it")),
            }
        }
        if load.is_empty() {
            return Ok(());
        }
        rec.push(Channel::Note, format!("load {} into the nodes from this machine's Docker (the node image does not preload them)", load.join(", ")));
        let mut argv: Vec<String> = vec!["kind".into(), "load".into(), "docker-image".into()];
        argv.extend(load);
        argv.extend(["--name".into(), self.name.clone()]);
        self.host.run(rec, Cmd::new(argv).timeout(Duration::from_secs(300))).await.map(drop).map_err(|source| ProviderError::LoadImages { name: self.name.clone(), source })
    }

    /// Run the bootstrap commands on every node as soon as the node containers exist.
    async fn bootstrap_nodes(&self, rec: &Recorder) -> Result<(), ProviderError> {
        if self.needs.node_bootstrap.is_empty() {
            return Ok(());
        }
        let deadline = tokio::time::Instant::now() + Duration::from_secs(180);
        let nodes = loop {
            let out = self.host.run(rec, Cmd::new(self.node_list_argv()).timeout(Duration::from_secs(30)).asks(ASK_KIND_NODES)).await;
            let names: Vec<String> = out.map(|o| o.stdout.lines().map(str::to_owned).filter(|l| !l.is_empty()).collect()).unwrap_or_default();
            if !names.is_empty() {
                break names;
            }
            if tokio::time::Instant::now() > deadline {
                return Err(ProviderError::NoNodes { name: self.name.clone(), label: format!("{CLUSTER_LABEL}={}", self.name) });
            }
            tokio::time::sleep(Duration::from_secs(1)).await;
        };
        for node in nodes {
            let access = crate::node::NodeAccess::Docker { container: node.clone() };
            for c in &self.needs.node_bootstrap {
                let argv = access.wrap(c);
                self.host.run(rec, Cmd::new(argv).timeout(c.timeout + Duration::from_secs(15)))
                    .await
                    .map_err(|source| ProviderError::Create { name: self.name.clone(), source })?;
            }
        }
        Ok(())
    }
}

/// Which of `wanted` some node lacks, given each node's `ctr images ls -q` listing.
pub fn images_missing(wanted: &[String], listings: &[String]) -> Vec<String> {
    wanted.iter().filter(|w| listings.iter().any(|l| !l.lines().any(|r| r.trim() == w.as_str()))).cloned().collect()
}

/// `docker exec` starting faultlab's CSI node plugin (`cri csi-node`) detached in `node`, its log in the
/// node's /var/log/faultlab-csi-node.log: the shell's text is fixed, the program and names its arguments.
pub fn csi_node_start_argv(cri: &str, node: &str) -> Vec<String> {
    let script = format!(
        "nohup \"$0\" csi-node --node-id \"$1\" --driver {} --kubelet-root /var/lib/kubelet --disks {CSI_DISKS} >>/var/log/faultlab-csi-node.log 2>&1 &",
        crate::attacher::DRIVER
    );
    ["docker", "exec", node, "sh", "-c", script.as_str(), cri, node].map(String::from).to_vec()
}

/// Add `workers` worker nodes, each a copy of the first node's entry (its image, its mounts) in the
/// worker role.
pub fn add_workers(config: &mut Value, workers: usize) {
    let Some(nodes) = config.get_mut("nodes").and_then(|n| n.as_array_mut()) else { return };
    let Some(first) = nodes.first().cloned() else { return };
    for _ in 0..workers {
        let mut worker = first.clone();
        if let Some(w) = worker.as_object_mut() {
            w.insert("role".into(), json!("worker"));
        }
        nodes.push(worker);
    }
}

/// Compose a scenario's needs into a kind config.
pub fn compose(config: &mut Value, needs: &KindNeeds) {
    let obj = config.as_object_mut().expect("a kind config is a mapping");
    if !needs.containerd_config_patches.is_empty() {
        let patches = obj.entry("containerdConfigPatches").or_insert_with(|| json!([]));
        if let Some(list) = patches.as_array_mut() {
            list.extend(needs.containerd_config_patches.iter().map(|p| Value::String(p.clone())));
        }
    }
    if let Some(kubelet) = &needs.kubelet_config {
        let mut doc = json!({"apiVersion": "kubelet.config.k8s.io/v1beta1", "kind": "KubeletConfiguration"});
        if let (Some(d), Some(k)) = (doc.as_object_mut(), kubelet.as_object()) {
            d.extend(k.clone());
        }
        let text = serde_saphyr::to_string(&doc).unwrap_or_default();
        let patches = obj.entry("kubeadmConfigPatches").or_insert_with(|| json!([]));
        if let Some(list) = patches.as_array_mut() {
            list.push(Value::String(text));
        }
    }
    if needs.disable_default_cni {
        let networking = obj.entry("networking").or_insert_with(|| json!({}));
        if let Some(n) = networking.as_object_mut() {
            n.insert("disableDefaultCNI".into(), Value::Bool(true));
        }
    }
}

#[async_trait]
impl Provider for Kind {
    fn name(&self) -> &'static str {
        "kind"
    }

    async fn provision(&self, rec: &Recorder) -> Result<Cluster, ProviderError> {
        self.require("kind", "kind", "install kind v0.27.0 (https://kind.sigs.k8s.io) or use --provider existing")?;
        self.require("docker", "docker", "kind needs Docker")?;
        if self.existing {
            return self.provision_existing(rec).await;
        }
        if let Err(e) = self.arch.check_runnable() {
            self.host.refuse(rec, e)?;
        }
        let config = self.compose()?;
        self.read_image_labels(rec).await?;
        if self.needs.csi_driver && self.faultlab_cri().is_none() {
            // Refused before anything is made: the node plugin is faultlab-cri, which the image lacks.
            self.host.refuse(
                rec,
                ProviderError::ImageLacks {
                    image: self.image()?,
                    why: format!("the scenario needs faultlab's CSI node plugin ({}) on every node, which is faultlab-cri, and the image carries none (this project's node images do: ci/kind/node-image); nothing was created", crate::attacher::DRIVER),
                },
            )?;
        }
        self.check_host_disk(rec).await?;
        let config_path = self.workdir.join("kind-config.yaml");
        let origin = match &self.node_image {
            Some(i) => format!("kind-configs/{}.yaml with --node-image {i}", self.arch.as_str()),
            None => format!("kind-configs/{}.yaml", self.arch.as_str()),
        };
        rec.push(Channel::Note, format!("kind config {} (from {origin}):\n{}", config_path.display(), indent(&config)));
        self.host.write(&config_path, &config)?;
        if let Some(lock) = self.host.hold(&self.workdir.join(OWNER_LOCK))? {
            let _ = self.owner.set(lock);
        }
        if self.needs.csi_driver {
            // The nodes' shared disks: made here, private (0700), before kind mounts it into them.
            self.host.write(&self.csi_disks_dir().join("README"), "faultlab's CSI volumes of this run's kind cluster, a directory each; deleted with the cluster\n")?;
        }
        let mut argv: Vec<String> = vec![
            "kind".into(),
            "create".into(),
            "cluster".into(),
            "--name".into(),
            self.name.clone(),
            "--config".into(),
            config_path.display().to_string(),
            "--kubeconfig".into(),
            self.kubeconfig().display().to_string(),
        ];
        if self.needs.disable_default_cni {
            // Without a CNI the node stays NotReady until the scenario installs its own, and kind's
            // --wait would only time out (it warns and goes on): the scenario's setup gate waits instead.
            rec.push(Channel::Note, "no default CNI: kind does not wait for the node to be Ready; the scenario's setup brings its CNI".to_string());
        } else {
            argv.extend(["--wait".into(), "180s".into()]);
        }
        // --retain: a failed create keeps its nodes so that their logs can be exported; faultlab then
        // deletes them.
        argv.push("--retain".into());
        // kind creates; meanwhile the bootstrap readies each node (for example a local-only sandbox tag).
        // Whichever fails first ends the other (its processes are killed with their process group).
        let create = self.host.run(rec, Cmd::new(argv).timeout(Duration::from_secs(600)));
        let boot = self.bootstrap_nodes(rec);
        tokio::pin!(create, boot);
        let outcome: Result<(), ProviderError> = tokio::select! {
            biased;
            created = &mut create => match created {
                Ok(_) => (&mut boot).await,
                Err(source) => Err(ProviderError::Create { name: self.name.clone(), source }),
            },
            booted = &mut boot => match booted {
                Ok(()) => (&mut create).await.map(|_| ()).map_err(|source| ProviderError::Create { name: self.name.clone(), source }),
                Err(e) => Err(e),
            },
        };
        let mut cluster = self.cluster();
        if let Err(err) = outcome {
            // The nodes are still there (--retain): export their logs, then delete them (with --keep,
            // delete only says how to do it later).
            let mut cleanup = Vec::new();
            if let Err(e) = self.collect_logs(&cluster, &self.logs_dir, rec).await {
                cleanup.push(e.to_string());
            }
            if let Err(e) = self.release(&cluster, rec).await {
                cleanup.push(e.to_string());
            }
            return Err(if cleanup.is_empty() { err } else { ProviderError::CleanupAfterCreate { source: Box::new(err), errors: cleanup } });
        }
        cluster.nodes = self.nodes(&cluster, rec).await?;
        let names: Vec<String> = cluster.nodes.iter().map(|n| n.name.clone()).collect();
        if let Err(err) = self.load_images(&names, rec).await {
            let _ = self.release(&cluster, rec).await;
            return Err(err);
        }
        if self.needs.csi_driver {
            if let Err(err) = self.start_csi_driver(&names, rec).await {
                let _ = self.collect_logs(&cluster, &self.logs_dir, rec).await;
                let _ = self.release(&cluster, rec).await;
                return Err(err);
            }
        }
        // The platform is what the nodes report, asked through the API once the run has a client
        // (`Provider::platform`); until then the cluster has none.
        Ok(cluster)
    }

    /// What the nodes report through the API server ([`node_infos_known`]), and the cgroup version a
    /// node reads: see [`platform_from_nodes`]. The API first: a cluster it cannot reach fails there.
    async fn platform(&self, cluster: &Cluster, kube: &Kube) -> Result<String, ProviderError> {
        let infos = node_infos_known(kube, None).await?;
        let cgroup = self.cgroup_version(cluster, kube.recorder()).await?;
        let platform = platform_from_nodes("kind", &infos, cgroup)?;
        kube.recorder().push(
            Channel::Note,
            format!("platform {platform} (the nodes' kubelet, runtime and architecture, and their {cgroup}): events are compared with expectations/{platform}/<scenario>.snap"),
        );
        Ok(platform)
    }

    async fn nodes(&self, _cluster: &Cluster, rec: &Recorder) -> Result<Vec<NodeProfile>, ProviderError> {
        let out = self
            .host
            .run(rec, Cmd::new(self.node_list_argv()).timeout(Duration::from_secs(30)).asks(ASK_KIND_NODES))
            .await
            .map_err(|source| ProviderError::ListNodes { name: self.name.clone(), source })?;
        let mut names: Vec<String> = out.stdout.lines().map(str::trim).filter(|l| !l.is_empty()).map(str::to_owned).collect();
        names.sort();
        if names.is_empty() {
            return Err(ProviderError::NoNodes { name: self.name.clone(), label: format!("{CLUSTER_LABEL}={}", self.name) });
        }
        // Where a scenario's registry listens: without a gateway (a network of another driver), the
        // nodes have no registry, and scenarios that need one say so.
        if self.network_gateway.get().is_none() {
            if let Ok(out) = self.host.run(rec, Cmd::new(network_gateway_argv(&network_name())).timeout(Duration::from_secs(30)).asks(ASK_NETWORK_GATEWAY)).await {
                if let Some(gateway) = ipv4_gateway(&out.stdout) {
                    let _ = self.network_gateway.set(gateway);
                }
            }
        }
        Ok(names.iter().map(|n| self.node_profile(n)).collect())
    }

    async fn collect_logs(&self, _cluster: &Cluster, dir: &Path, rec: &Recorder) -> Result<(), ProviderError> {
        let argv = ["kind".into(), "export".into(), "logs".into(), dir.display().to_string(), "--name".into(), self.name.clone()];
        self.host
            .run(rec, Cmd::new(argv).timeout(Duration::from_secs(300)))
            .await
            .map(|_| ())
            .map_err(|source| ProviderError::ExportLogs { name: self.name.clone(), source })
    }

    async fn release(&self, _cluster: &Cluster, rec: &Recorder) -> Result<(), ProviderError> {
        if self.existing {
            rec.push(Channel::Note, format!("kind cluster {} is yours (--cluster): left as it is", self.name));
            self.host.remove_dir_all(&self.workdir);
            return Ok(());
        }
        if self.keep {
            rec.push(Channel::Note, self.keep_message());
            return Ok(());
        }
        let argv = delete_argv(&self.name, Some(&self.kubeconfig()));
        self.host
            .run(rec, Cmd::new(argv).timeout(Duration::from_secs(300)))
            .await
            .map_err(|source| ProviderError::Delete { name: self.name.clone(), source })?;
        // The composed config, the kubeconfig and the owner file go with the cluster.
        self.host.remove_dir_all(&self.workdir);
        Ok(())
    }
}

/// What a sweep did: the clusters deleted and those left (a live run's), or why none was looked for.
#[derive(Debug, Default)]
pub struct Swept {
    pub deleted: Vec<String>,
    pub skipped: Vec<String>,
    /// Why no cluster was looked for (Docker does not answer), if none was.
    pub unchecked: Option<String>,
    pub errors: Vec<ProviderError>,
}

/// `docker version --format '{{.Server.Version}}'`: does a Docker daemon answer?
pub fn docker_ping_argv() -> Vec<String> {
    ["docker", "version", "--format", "{{.Server.Version}}"].map(String::from).to_vec()
}

/// `docker ps -aq --filter label=<kind's cluster label>`: every kind node container, running or not.
pub fn node_containers_argv() -> Vec<String> {
    vec!["docker".into(), "ps".into(), "-aq".into(), "--filter".into(), format!("label={CLUSTER_LABEL}")]
}

/// The `docker inspect --format` template the sweep lists clusters with: kind's cluster label and the
/// container's creation time. Docker reports `Created` as an RFC 3339 string with nanoseconds (it is
/// not a time value, so `.Created.Unix` does not work with Docker).
pub fn inspect_format() -> String {
    format!("{{{{index .Config.Labels \"{CLUSTER_LABEL}\"}}}}\t{{{{.Created}}}}")
}

/// Parse `docker inspect` lines of `<cluster>\t<created, RFC 3339>` into the faultlab clusters whose
/// newest node is at least `age` old. Lines that do not parse are skipped.
pub fn stale_clusters(listing: &str, now_unix: i64, age: Duration) -> Vec<String> {
    let mut newest: std::collections::BTreeMap<String, i64> = Default::default();
    for line in listing.lines() {
        let Some((name, created)) = line.split_once('\t') else { continue };
        let Ok(created) = created.trim().parse::<jiff::Timestamp>() else { continue };
        if !name.starts_with(NAME_PREFIX) {
            continue;
        }
        let e = newest.entry(name.to_string()).or_insert(i64::MIN);
        *e = (*e).max(created.as_second());
    }
    newest
        .into_iter()
        .filter(|(_, created)| now_unix.saturating_sub(*created) >= age.as_secs() as i64)
        .map(|(name, _)| name)
        .collect()
}

/// The directory faultlab keeps for kind cluster `name` (its config, kubeconfig and `owner`).
pub fn run_dir(name: &str) -> PathBuf {
    crate::journal::state_dir().join("kind").join(name)
}

/// The lock file of kind cluster `name`'s run directory ([`Kind::owner`]).
pub const OWNER_LOCK: &str = "owner.lock";

/// The lock file faultlab's process holds while it has kind cluster `name`.
pub fn owner_lock(name: &str) -> PathBuf {
    run_dir(name).join(OWNER_LOCK)
}

/// Is `cluster` free to delete? `Err(who)` while a faultlab process holds its [`owner_lock`] (the run
/// that made it, or a cleanup deleting it); else `Ok` with the lock, held by this process until dropped
/// so that no other cleanup deletes it at the same time (`None` where the run directory has no lock).
/// A lock says whether its holder lives, where a pid, once its process has ended, may name another.
/// A cluster that an older faultlab made has an `owner` pid file instead, read as a state file.
pub fn claim_cluster(cluster: &str) -> Result<Option<std::fs::File>, String> {
    let dir = run_dir(cluster);
    let lock = dir.join(OWNER_LOCK);
    if std::fs::symlink_metadata(&lock).is_err() {
        let pid = crate::statefile::read(&dir.join("owner")).ok().and_then(|t| t.trim().parse::<u32>().ok());
        return match pid {
            Some(pid) if pid != std::process::id() && crate::journal::pid_alive(pid) => Err(format!("its run is still running as pid {pid}")),
            _ => Ok(None),
        };
    }
    let held_by = || crate::statefile::read(&lock).ok().and_then(|t| t.trim().parse::<u32>().ok());
    let file = crate::statefile::open_append(&lock).map_err(|e| format!("its lock cannot be used: {e}"))?;
    match file.try_lock() {
        Ok(()) => Ok(Some(file)),
        Err(std::fs::TryLockError::WouldBlock) => Err(match held_by() {
            Some(pid) => format!("a faultlab process holds its lock, {}: its run (pid {pid}) or a cleanup", lock.display()),
            None => format!("a faultlab process holds its lock, {}", lock.display()),
        }),
        Err(std::fs::TryLockError::Error(e)) => Err(format!("its lock {} cannot be taken: {e}", lock.display())),
    }
}

/// kind's sweep: delete faultlab's clusters (found by kind's label on node containers) whose newest
/// node is older than `age`, through `host`. A cluster whose run is still alive is left unless
/// `force`; one named in `keep` (an open training session's) is always left. Without docker and kind,
/// or without a Docker daemon, there is nothing to sweep (that is said, not an error).
pub async fn sweep(host: &dyn Host, rec: &Recorder, age: Duration, force: bool, keep: &[String]) -> Swept {
    let mut out = Swept::default();
    if !host.has("docker") || !host.has("kind") {
        return out;
    }
    if let Err(e) = host.run(rec, Cmd::new(docker_ping_argv()).timeout(Duration::from_secs(30)).asks(ASK_DOCKER_PING)).await {
        let why = e.to_string().lines().rfind(|l| !l.trim().is_empty()).unwrap_or_default().trim().to_string();
        out.unchecked = Some(format!("Docker does not answer ({why}): no kind cluster was looked for"));
        return out;
    }
    let ids = match host.run(rec, Cmd::new(node_containers_argv()).timeout(Duration::from_secs(30)).asks(ASK_NODE_CONTAINERS)).await {
        Ok(o) => o.stdout.split_whitespace().map(str::to_owned).collect::<Vec<_>>(),
        Err(source) => {
            out.errors.push(ProviderError::ListClusters { source });
            return out;
        }
    };
    if ids.is_empty() {
        return out;
    }
    let mut inspect: Vec<String> = vec!["docker".into(), "inspect".into(), "--format".into(), inspect_format()];
    inspect.extend(ids);
    let listing = match host.run(rec, Cmd::new(inspect).timeout(Duration::from_secs(30)).asks(ASK_NODE_LABELS)).await {
        Ok(o) => o.stdout,
        Err(source) => {
            out.errors.push(ProviderError::ListClusters { source });
            return out;
        }
    };
    let now = jiff::Timestamp::now().as_second();
    for name in stale_clusters(&listing, now, age) {
        if keep.contains(&name) {
            out.skipped.push(format!("{name} (an open training session's: `faultlab reset` or `faultlab cleanup --sessions` deletes it)"));
            continue;
        }
        // Held while it is deleted, so that another cleanup leaves it.
        let _claimed = match claim_cluster(&name) {
            Err(why) if !force => {
                out.skipped.push(format!("{name} ({why}; --force deletes it anyway)"));
                continue;
            }
            claimed => claimed.ok().flatten(),
        };
        match host.run(rec, Cmd::new(delete_argv(&name, None)).timeout(Duration::from_secs(300))).await {
            Ok(_) => {
                host.remove_dir_all(&run_dir(&name));
                out.deleted.push(name)
            }
            Err(source) => out.errors.push(ProviderError::Delete { name, source }),
        }
    }
    out
}

/// `kind delete cluster --name NAME [--kubeconfig PATH]`.
pub fn delete_argv(name: &str, kubeconfig: Option<&Path>) -> Vec<String> {
    let mut argv: Vec<String> = vec!["kind".into(), "delete".into(), "cluster".into(), "--name".into(), name.into()];
    if let Some(k) = kubeconfig {
        argv.push("--kubeconfig".into());
        argv.push(k.display().to_string());
    }
    argv
}

fn indent(text: &str) -> String {
    text.lines().map(|l| format!("      {l}")).collect::<Vec<_>>().join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn composes_patches_into_the_base_config() {
        let mut config: Value = serde_saphyr::from_str("kind: Cluster\napiVersion: kind.x-k8s.io/v1alpha4\nnodes:\n- role: control-plane\n").unwrap();
        let needs = KindNeeds {
            containerd_config_patches: vec!["[plugins.\"io.containerd.grpc.v1.cri\"]\n  sandbox_image = \"faultlab.invalid/cce-pause:3.1\"\n".into()],
            kubelet_config: Some(json!({"cpuManagerPolicy": "static"})),
            disable_default_cni: true,
            ..Default::default()
        };
        compose(&mut config, &needs);
        assert_eq!(config["networking"]["disableDefaultCNI"], json!(true));
        assert!(config["containerdConfigPatches"][0].as_str().unwrap().contains("sandbox_image"));
        let kubelet = config["kubeadmConfigPatches"][0].as_str().unwrap();
        assert!(kubelet.contains("kind: KubeletConfiguration") && kubelet.contains("cpuManagerPolicy: static"), "{kubelet}");
    }

    /// A workload that moves: a worker beside the control plane (a copy of its entry), and with
    /// faultlab's CSI driver every node mounting the run's disks; the driver on the node profile only
    /// where the image carries faultlab-cri, and a worker has no control plane of its own.
    #[test]
    fn a_moving_workload_gets_a_worker_and_the_csi_driver_on_every_node() {
        let needs = KindNeeds::of(&Needs { moves_between_nodes: true, csi_driver: true, ..Default::default() });
        assert_eq!((needs.workers, needs.csi_driver), (1, true));
        let k = Kind { node_image: Some("faultlab/node:1".into()), ..kind(Arch::Amd64, needs) };
        let config: Value = serde_saphyr::from_str(&k.compose().unwrap()).unwrap();
        let nodes = config["nodes"].as_array().unwrap();
        assert_eq!(nodes.iter().map(|n| n["role"].as_str().unwrap()).collect::<Vec<_>>(), ["control-plane", "worker"]);
        for n in nodes {
            assert_eq!(n["image"], json!("faultlab/node:1"));
            assert_eq!(n["extraMounts"], json!([{"hostPath": "/nonexistent/kind/faultlab-t-abcde/csi-disks", "containerPath": CSI_DISKS}]));
        }
        assert_eq!(k.node_profile("faultlab-t-abcde-worker").csi, None, "kindest/node: no faultlab-cri, no driver");
        k.image_info.set(NodeImage::from_labels_json("img", r#"{"dev.faultlab.crictl":"faultlab-cri"}"#).unwrap()).unwrap();
        let worker = k.node_profile("faultlab-t-abcde-worker");
        assert_eq!(worker.csi.map(|c| (c.driver, c.disks)), Some((crate::attacher::DRIVER.to_string(), CSI_DISKS.to_string())));
        assert!(worker.control_plane.is_none() && k.node_profile("faultlab-t-abcde-control-plane").control_plane.is_some());
        assert_eq!(worker.kubelet.control.unwrap().stop, ["systemctl", "stop", "kubelet"]);
        // The node plugin's start: a node name with shell characters stays one argument.
        let argv = csi_node_start_argv("faultlab-cri", "n;touch /x");
        assert_eq!(argv[..4], ["docker", "exec", "n;touch /x", "sh"].map(String::from));
        assert!(!argv[5].contains("touch"), "{}", argv[5]);
        assert_eq!(argv[6..], ["faultlab-cri", "n;touch /x"].map(String::from));
        let out = std::process::Command::new("sh").args(["-c", &argv[5].replace("nohup", "echo").replace(" >>/var/log/faultlab-csi-node.log 2>&1 &", ""), "cri", "a b;c"]).output().unwrap();
        assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "cri csi-node --node-id a b;c --driver disk.faultlab.dev --kubelet-root /var/lib/kubelet --disks /var/lib/faultlab/csi-disks");
        let plain = kind(Arch::Amd64, KindNeeds::of(&Needs::default()));
        let config: Value = serde_saphyr::from_str(&plain.compose().unwrap()).unwrap();
        assert_eq!(config["nodes"].as_array().unwrap().len(), 1);
        assert!(config["nodes"][0].get("extraMounts").is_none());
    }

    #[test]
    fn each_need_in_kinds_terms() {
        let registry_only = KindNeeds { containerd_config_patches: vec![REGISTRY_CONFIG_PATH_PATCH.into()], ..Default::default() };
        assert_eq!(KindNeeds::of(&Needs::default()), registry_only, "nothing needed: only the registry hosts directory");
        let patched: toml::Table = REGISTRY_CONFIG_PATH_PATCH.parse().unwrap();
        assert_eq!(patched["plugins"]["io.containerd.grpc.v1.cri"]["registry"]["config_path"].as_str(), Some(REGISTRY_HOSTS_DIR));
        let sandbox = KindNeeds::of(&Needs { local_sandbox_image: Some("faultlab.invalid/cce-pause:3.1".into()), ..Default::default() });
        assert_eq!(sandbox.containerd_config_patches, [REGISTRY_CONFIG_PATH_PATCH, "[plugins.\"io.containerd.grpc.v1.cri\"]\n  sandbox_image = \"faultlab.invalid/cce-pause:3.1\"\n"]);
        assert!(sandbox.node_bootstrap[0].argv[2].contains("ctr -n k8s.io images tag --force \"$src\" faultlab.invalid/cce-pause:3.1"), "{:?}", sandbox.node_bootstrap);
        assert_eq!(sandbox.sandbox_image.as_deref(), Some("faultlab.invalid/cce-pause:3.1"));
        let cpu = KindNeeds::of(&Needs { static_cpu_manager: Some("500m".into()), ..Default::default() });
        assert_eq!(cpu.kubelet_config, Some(json!({"cpuManagerPolicy": "static", "kubeReserved": {"cpu": "500m"}})));
        let disk = KindNeeds::of(&Needs { containerd_disk_mib: Some(3072), no_image_gc: true, disk_writes_mib: 819, ..Default::default() });
        assert!(disk.node_bootstrap[0].argv[2].contains("truncate -s 3072M /var/lib/faultlab-containerd.ext4"), "{:?}", disk.node_bootstrap);
        assert!(disk.node_bootstrap[0].argv[2].contains("mount -o loop /var/lib/faultlab-containerd.ext4 /var/lib/containerd"));
        let k = disk.kubelet_config.clone().unwrap();
        assert_eq!((k["imageGCHighThresholdPercent"].clone(), k["evictionHard"]["imagefs.available"].clone()), (json!(100), json!("0%")));
        assert_eq!(disk.host_disk_mib, 3072 + 819);
        // The node's profile names the disk, where disk-full finds it.
        let p = kind(Arch::Amd64, disk).node_profile("n");
        let d = p.disk.unwrap();
        assert_eq!((d.mountpoint.as_str(), d.backing_file.as_str(), d.size_mib), ("/var/lib/containerd", "/var/lib/faultlab-containerd.ext4", 3072));
        assert!(KindNeeds::of(&Needs { no_default_cni: true, ..Default::default() }).disable_default_cni);
    }

    fn kind(arch: Arch, needs: KindNeeds) -> Kind {
        Kind {
            name: "faultlab-t-abcde".into(),
            arch,
            configs_dir: crate::scenario::workspace_root().join("kind-configs"),
            workdir: "/nonexistent/kind/faultlab-t-abcde".into(),
            logs_dir: "/nonexistent/logs/faultlab-t-abcde".into(),
            keep: false,
            needs,
            node_image: None,
            image_info: Default::default(),
            existing: false,
            network_gateway: Default::default(),
            host: std::sync::Arc::new(crate::provider::LocalHost),
            owner: Default::default(),
        }
    }

    #[test]
    fn compose_adds_to_what_the_base_has_and_changes_nothing_else() {
        let base = "kind: Cluster\napiVersion: kind.x-k8s.io/v1alpha4\ncontainerdConfigPatches:\n- '# base'\nkubeadmConfigPatches:\n- '# base'\nnetworking:\n  podSubnet: 10.244.0.0/16\nnodes:\n- role: control-plane\n";
        let mut config: Value = serde_saphyr::from_str(base).unwrap();
        let untouched = config.clone();
        compose(&mut config, &KindNeeds::default());
        assert_eq!(config, untouched, "no needs, no change");
        let needs = KindNeeds {
            containerd_config_patches: vec!["# scenario".into()],
            kubelet_config: Some(json!({"cpuManagerPolicy": "static", "reservedSystemCPUs": "0"})),
            disable_default_cni: true,
            ..Default::default()
        };
        compose(&mut config, &needs);
        assert_eq!(config["containerdConfigPatches"], json!(["# base", "# scenario"]));
        assert_eq!(config["kubeadmConfigPatches"][0], "# base");
        let kubelet: Value = serde_saphyr::from_str(config["kubeadmConfigPatches"][1].as_str().unwrap()).unwrap();
        assert_eq!(
            kubelet,
            json!({"apiVersion": "kubelet.config.k8s.io/v1beta1", "kind": "KubeletConfiguration", "cpuManagerPolicy": "static", "reservedSystemCPUs": "0"})
        );
        assert_eq!(config["networking"], json!({"podSubnet": "10.244.0.0/16", "disableDefaultCNI": true}));
        assert_eq!(config["nodes"], untouched["nodes"]);
    }

    #[test]
    fn the_pinned_configs_compose_per_architecture_and_a_node_image_replaces_the_pinned_one() {
        for arch in [Arch::Amd64, Arch::Arm64] {
            let mut k = kind(arch, KindNeeds { containerd_config_patches: vec!["# patch".into()], ..Default::default() });
            let composed: Value = serde_saphyr::from_str(&k.compose().unwrap()).unwrap();
            let (_, base) = k.base_config().unwrap();
            assert_eq!(composed["nodes"], base["nodes"]);
            assert_eq!(composed["containerdConfigPatches"], json!(["# patch"]));
            assert!(base.get("containerdConfigPatches").is_none(), "patches are composed, not in kind-configs/{}.yaml", arch.as_str());
            assert!(k.image().unwrap().starts_with("kindest/node:v"));
            k.node_image = Some("faultlab.invalid/kind-node:v1.20.2-abc".into());
            let composed: Value = serde_saphyr::from_str(&k.compose().unwrap()).unwrap();
            assert_eq!(composed["nodes"], json!([{"role": "control-plane", "image": "faultlab.invalid/kind-node:v1.20.2-abc"}]));
            assert_eq!(k.image().unwrap(), "faultlab.invalid/kind-node:v1.20.2-abc");
        }
    }

    fn info(kubelet: &str, runtime: &str, arch: &str) -> NodeSystemInfo {
        NodeSystemInfo { kubelet_version: kubelet.into(), container_runtime_version: runtime.into(), architecture: arch.into(), ..Default::default() }
    }

    fn nodes(infos: &[(&str, &str, &str)]) -> Vec<(String, NodeSystemInfo)> {
        infos.iter().enumerate().map(|(i, (k, r, a))| (format!("node-{i}"), info(k, r, a))).collect()
    }

    /// kind's platform names on cgroup v1: what they always were.
    fn platform_from_nodes(nodes: &[(String, NodeSystemInfo)]) -> Result<String, ProviderError> {
        super::platform_from_nodes("kind", nodes, CgroupVersion::V1)
    }

    #[test]
    fn the_platform_is_what_the_nodes_report() {
        // This project's kind node image (ci/kind/), and kindest/node v1.32.2 with containerd 2.0.
        assert_eq!(platform_from_nodes(&nodes(&[("v1.20.2", "containerd://1.6.20", "amd64")])).unwrap(), "kind-1.20-containerd-1.6-amd64");
        let two = nodes(&[("v1.32.2", "containerd://2.0.2", "arm64"), ("v1.32.2", "containerd://2.0.2", "arm64")]);
        assert_eq!(platform_from_nodes(&two).unwrap(), "kind-1.32-containerd-2.0-arm64");
        // Pre-release and build suffixes, and other runtimes, read the same way.
        assert_eq!(platform_from_nodes(&nodes(&[("v1.33.0-rc.1+abc", "cri-o://1.33.1", "amd64")])).unwrap(), "kind-1.33-cri-o-1.33-amd64");
    }

    /// On cgroup v2 the name says so before the architecture; the test bed's names begin with `k8s`.
    #[test]
    fn the_platform_carries_cgroup_v2_and_the_prefix() {
        let kind = nodes(&[("v1.32.2", "containerd://2.0.2", "amd64")]);
        assert_eq!(super::platform_from_nodes("kind", &kind, CgroupVersion::V2).unwrap(), "kind-1.32-containerd-2.0-cgroup2-amd64");
        let bed = nodes(&[("v1.20.2", "containerd://1.6.20~ds1", "amd64")]);
        assert_eq!(super::platform_from_nodes("k8s", &bed, CgroupVersion::V1).unwrap(), "k8s-1.20-containerd-1.6-amd64");
        let bed2 = nodes(&[("v1.20.2", "containerd://2.1.9+unknown", "arm64")]);
        assert_eq!(super::platform_from_nodes("k8s", &bed2, CgroupVersion::V2).unwrap(), "k8s-1.20-containerd-2.1-cgroup2-arm64");
    }

    #[test]
    fn nodes_that_disagree_or_report_nonsense_are_clear_errors() {
        let mixed = nodes(&[("v1.32.2", "containerd://2.0.2", "arm64"), ("v1.32.2", "containerd://2.0.2", "amd64")]);
        let err = platform_from_nodes(&mixed).unwrap_err().to_string();
        assert!(err.starts_with("cannot tell the cluster's platform: the nodes are of different platforms (kind-1.32-containerd-2.0-arm64, kind-1.32-containerd-2.0-amd64)"), "{err}");
        assert!(err.contains("node-1: kubelet v1.32.2, containerd://2.0.2, amd64"), "{err}");
        for ((k, r, a), says) in [
            (("vX.20", "containerd://1.6.20", "amd64"), r#"node node-0 reports kubeletVersion "vX.20", which does not read as v<major>.<minor>[.<patch>]"#),
            (("v1", "containerd://1.6.20", "amd64"), r#"kubeletVersion "v1""#),
            (("", "containerd://1.6.20", "amd64"), r#"kubeletVersion """#),
            (("v1.20.2", "containerd 1.6.20", "amd64"), r#"containerRuntimeVersion "containerd 1.6.20", which does not read as <runtime>://<major>.<minor>[.<patch>]"#),
            (("v1.20.2", "containerd://x.y", "amd64"), r#"containerRuntimeVersion "containerd://x.y""#),
            (("v1.20.2", "://1.6", "amd64"), r#"containerRuntimeVersion "://1.6""#),
            (("v1.20.2", "containerd://1.6.20", "a/b"), r#"architecture "a/b", which does not read as a name such as amd64 or arm64"#),
            (("v1.20.2", "containerd://1.6.20", ""), r#"architecture """#),
        ] {
            let err = platform_from_nodes(&nodes(&[(k, r, a)])).unwrap_err().to_string();
            assert!(err.starts_with("cannot tell the cluster's platform: node node-0 reports ") && err.contains(says), "{k} {r} {a}: {err}");
        }
        assert_eq!(platform_from_nodes(&[]).unwrap_err().to_string(), "cannot tell the cluster's platform: the API lists no nodes");
    }

    /// The platform through the kube client: `GET /api/v1/nodes`, answered by a mock API server.
    #[tokio::test]
    async fn the_platform_is_asked_of_the_api_server() {
        use http::{Request, Response};
        use kube::client::Body;
        async fn answer(list: Value) -> Result<String, ProviderError> {
            let (service, mut handle) = tower_test::mock::pair::<Request<Body>, Response<Body>>();
            let kube = Kube::new(kube::Client::new(service, "default"), Recorder::default());
            let server = tokio::spawn(async move {
                let (req, send) = handle.next_request().await.unwrap();
                assert_eq!((req.method().as_str(), req.uri().path()), ("GET", "/api/v1/nodes"));
                send.send_response(Response::builder().status(200).body(Body::from(serde_json::to_vec(&list).unwrap())).unwrap());
            });
            let platform = node_infos_known(&kube, None).await.and_then(|infos| platform_from_nodes(&infos));
            server.await.unwrap();
            platform
        }
        let node = |name: &str, status: Value| json!({"metadata": {"name": name}, "status": status});
        let list = |items: Vec<Value>| json!({"apiVersion": "v1", "kind": "NodeList", "metadata": {}, "items": items});
        let reported = json!({"nodeInfo": {"kubeletVersion": "v1.20.2", "containerRuntimeVersion": "containerd://1.6.20", "architecture": "amd64",
            "machineID": "", "systemUUID": "", "bootID": "", "kernelVersion": "", "osImage": "", "kubeProxyVersion": "", "operatingSystem": "linux"}});
        let one = list(vec![node("faultlab-x-control-plane", reported.clone())]);
        assert_eq!(answer(one).await.unwrap(), "kind-1.20-containerd-1.6-amd64");
        let err = answer(list(vec![node("faultlab-x-control-plane", reported), node("faultlab-x-worker", json!({}))])).await.unwrap_err().to_string();
        assert_eq!(err, "cannot tell the cluster's platform: node faultlab-x-worker reports no status.nodeInfo");
        let err = answer(list(vec![])).await.unwrap_err().to_string();
        assert!(err.contains("the API lists no nodes"), "{err}");
    }

    /// The platform as a run asks it: the nodes through the API, then the cgroup version through
    /// `docker exec` on the first node (a plan's host answers for the node).
    #[tokio::test]
    async fn the_platform_reads_the_cgroup_version_on_a_node() {
        use http::{Request, Response};
        use kube::client::Body;
        async fn platform(cgroup: &'static str) -> (Result<String, ProviderError>, Vec<String>) {
            let (service, mut handle) = tower_test::mock::pair::<Request<Body>, Response<Body>>();
            let rec = Recorder::default();
            let kube = Kube::new(kube::Client::new(service, "default"), rec.clone());
            let server = tokio::spawn(async move {
                let (req, send) = handle.next_request().await.unwrap();
                assert_eq!(req.uri().path(), "/api/v1/nodes");
                let list = json!({"apiVersion": "v1", "kind": "NodeList", "metadata": {}, "items": [{"metadata": {"name": "faultlab-t-abcde-control-plane"}, "status": {"nodeInfo": {
                    "kubeletVersion": "v1.32.2", "containerRuntimeVersion": "containerd://2.0.2", "architecture": "amd64", "machineID": "", "systemUUID": "", "bootID": "",
                    "kernelVersion": "", "osImage": "", "kubeProxyVersion": "", "operatingSystem": "linux"}}}]});
                send.send_response(Response::builder().status(200).body(Body::from(serde_json::to_vec(&list).unwrap())).unwrap());
            });
            let mut k = kind(Arch::Amd64, KindNeeds::default());
            k.host = std::sync::Arc::new(crate::provider::PlannedHost::new(vec![(runtime::ASK_CGROUP, crate::cmd::Output::ok(cgroup))]));
            let cluster = Cluster { nodes: vec![k.node_profile("faultlab-t-abcde-control-plane")], ..k.cluster() };
            let platform = Provider::platform(&k, &cluster, &kube).await;
            server.await.unwrap();
            (platform, rec.entries().into_iter().map(|e| e.line).collect())
        }
        let (p, lines) = platform("cgroup2fs\n").await;
        assert_eq!(p.unwrap(), "kind-1.32-containerd-2.0-cgroup2-amd64");
        let exec = lines.iter().position(|l| l.starts_with("docker exec faultlab-t-abcde-control-plane timeout -k 5 60 sh -c ")).unwrap_or_else(|| panic!("{lines:?}"));
        assert!(lines[exec + 1..].iter().any(|l| l.starts_with("platform kind-1.32-containerd-2.0-cgroup2-amd64 (") && l.contains("cgroup v2")), "{lines:?}");
        assert_eq!(platform("tmpfs\n").await.0.unwrap(), "kind-1.32-containerd-2.0-amd64", "cgroup v1: the name as it always was");
        let err = platform("").await.0.unwrap_err().to_string();
        assert!(err.starts_with("cannot tell the cluster's platform: node faultlab-t-abcde-control-plane: cannot tell the cgroup version"), "{err}");
    }

    /// A node whose kubelet could not ask containerd (restarting) reports `containerd://Unknown` until
    /// its next status update: asked again, the platform is what it reports then; one that stays
    /// unknown is an error that says so.
    #[tokio::test]
    async fn an_unknown_runtime_version_is_asked_again() {
        use http::{Request, Response};
        use kube::client::Body;
        let node = |runtime: &str| {
            json!({"apiVersion": "v1", "kind": "NodeList", "metadata": {}, "items": [{"metadata": {"name": "faultlab-x-control-plane"}, "status": {"nodeInfo": {
                "kubeletVersion": "v1.20.2", "containerRuntimeVersion": runtime, "architecture": "amd64", "machineID": "", "systemUUID": "", "bootID": "",
                "kernelVersion": "", "osImage": "", "kubeProxyVersion": "", "operatingSystem": "linux"}}}]})
        };
        async fn answers(lists: Vec<Value>, wait: Duration) -> (Result<String, ProviderError>, usize, Vec<String>) {
            let (service, mut handle) = tower_test::mock::pair::<Request<Body>, Response<Body>>();
            let rec = Recorder::default();
            let kube = Kube::new(kube::Client::new(service, "default"), rec.clone());
            let server = tokio::spawn(async move {
                let mut asked = 0;
                for list in lists {
                    let Some((req, send)) = handle.next_request().await else { break };
                    assert_eq!(req.uri().path(), "/api/v1/nodes");
                    send.send_response(Response::builder().status(200).body(Body::from(serde_json::to_vec(&list).unwrap())).unwrap());
                    asked += 1;
                }
                asked
            });
            let platform = node_infos_within(&kube, None, wait, Duration::from_millis(10)).await.and_then(|infos| platform_from_nodes(&infos));
            drop(kube);
            let notes = rec.entries().into_iter().map(|e| e.line).collect();
            (platform, server.await.unwrap(), notes)
        }
        let (platform, asked, notes) = answers(vec![node("containerd://Unknown"), node("containerd://Unknown"), node("containerd://1.6.20")], Duration::from_secs(30)).await;
        assert_eq!(platform.unwrap(), "kind-1.20-containerd-1.6-amd64");
        assert_eq!(asked, 3);
        assert_eq!(notes.iter().filter(|n| n.contains("\"containerd://Unknown\"") && n.ends_with("ask again")).count(), 1, "said once: {notes:?}");
        let (platform, _, _) = answers(vec![node("containerd://Unknown"); 50], Duration::from_millis(50)).await;
        assert_eq!(
            platform.unwrap_err().to_string(),
            "cannot tell the cluster's platform: node faultlab-x-control-plane reports containerRuntimeVersion \"containerd://Unknown\" still after 50ms: its kubelet cannot ask its container runtime for its version"
        );
    }

    #[test]
    fn free_space_of_a_real_file_system_and_the_docker_root_question() {
        assert!(free_mib(Path::new("/")).unwrap() > 0);
        assert!(free_mib(Path::new("/nonexistent/faultlab")).is_err());
        assert_eq!(docker_root_argv(), ["docker", "info", "--format", "{{.DockerRootDir}}"]);
    }

    #[test]
    fn the_host_must_hold_what_the_fault_writes_and_a_gib_more() {
        let root = Path::new("/var/lib/docker");
        let ok = host_room(root, 3891 + 1024, 3891).unwrap();
        assert_eq!(ok, "Docker's root /var/lib/docker has 4915 MiB free; the fault writes up to 3891 MiB there");
        let err = host_room(root, 4914, 3891).unwrap_err().to_string();
        assert_eq!(
            err,
            "not enough room on the host's disk: the fault writes up to 3891 MiB under Docker's root /var/lib/docker, whose file system has 4914 MiB free \
             (it needs 4915 MiB, with 1024 MiB to spare); nothing was created"
        );
    }

    #[test]
    fn node_image_labels_decode_strictly() {
        let text = r#"{"maintainer":"x","dev.faultlab.image.busybox":"faultlab.invalid/busybox:1.35","dev.faultlab.image.pause":"k8s.gcr.io/pause:3.2","dev.faultlab.image.inotify":"faultlab.invalid/inotify:1","dev.faultlab.crictl":"faultlab-cri","dev.faultlab.foreign-runc":"/usr/local/lib/faultlab/sid/runc"}"#;
        let info = NodeImage::from_labels_json("img", text).unwrap();
        assert_eq!(info.crictl.as_deref(), Some("faultlab-cri"));
        assert_eq!(info.foreign_runc.as_deref(), Some("/usr/local/lib/faultlab/sid/runc"));
        assert_eq!(info.images.len(), 3);
        assert_eq!(NodeImage::from_labels_json("img", "null\n").unwrap(), NodeImage::default());
        assert_eq!(NodeImage::from_labels_json("img", r#"{"org.opencontainers.image.title":"kindest/node"}"#).unwrap(), NodeImage::default());
        for (bad, says) in [
            (r#"{"dev.faultlab.images.busybox":"x"}"#, "unknown label dev.faultlab.images.busybox"),
            (r#"{"dev.faultlab.image.":"x"}"#, "unknown label dev.faultlab.image."),
            (r#"{"dev.faultlab.image.busybox":""}"#, "label dev.faultlab.image.busybox is empty"),
            (r#"{"dev.faultlab.foreign-runc":"runc"}"#, "not an absolute path on the node"),
            ("not json", "cannot decode the labels"),
        ] {
            let err = NodeImage::from_labels_json("img", bad).unwrap_err().to_string();
            assert!(err.starts_with("node image img: ") && err.contains(says), "{bad}: {err}");
        }
        assert_eq!(inspect_labels_argv("img"), ["docker", "image", "inspect", "--format", "{{json .Config.Labels}}", "img"]);
    }

    #[test]
    fn the_node_profile_takes_images_and_crictl_from_the_labels() {
        let k = kind(Arch::Amd64, KindNeeds::default());
        let default = k.node_profile("n");
        assert_eq!(default.images.busybox, "docker.io/library/busybox:1.36");
        assert_eq!(default.images.more["inotify"], "docker.io/library/busybox:1.36");
        assert_eq!(default.crictl, None);
        k.image_info
            .set(NodeImage::from_labels_json("img", r#"{"dev.faultlab.image.busybox":"b:1","dev.faultlab.image.pause":"p:1","dev.faultlab.image.inotify":"i:1","dev.faultlab.crictl":"faultlab-cri","dev.faultlab.foreign-runc":"/x/runc"}"#).unwrap())
            .unwrap();
        let p = k.node_profile("n");
        assert_eq!((p.images.busybox.as_str(), p.images.pause.as_str(), p.images.more["inotify"].as_str()), ("b:1", "p:1", "i:1"));
        assert_eq!(p.containerd.sandbox_image, "p:1");
        assert_eq!(p.crictl, Some(vec!["faultlab-cri".to_string()]));
        assert_eq!(p.containerd.foreign_runc.as_deref(), Some("/x/runc"));
        assert_eq!(default.containerd.foreign_runc, None, "kindest/node has none");
        let k = kind(Arch::Amd64, KindNeeds { sandbox_image: Some("faultlab.invalid/x:1".into()), ..Default::default() });
        assert_eq!(k.node_profile("n").containerd.sandbox_image, "faultlab.invalid/x:1");
    }

    #[test]
    fn workload_images_a_node_lacks_are_loaded() {
        let wanted = vec!["faultlab.invalid/busybox:1.35".to_string(), "faultlab.invalid/inotify:1".to_string()];
        let both = "k8s.gcr.io/pause:3.2\nfaultlab.invalid/busybox:1.35\nfaultlab.invalid/inotify:1\n".to_string();
        assert!(images_missing(&wanted, &[both.clone(), both.clone()]).is_empty());
        let one = "k8s.gcr.io/pause:3.2\nfaultlab.invalid/busybox:1.35\n".to_string();
        assert_eq!(images_missing(&wanted, &[both, one]), ["faultlab.invalid/inotify:1"]);
        assert_eq!(images_missing(&wanted, &["faultlab.invalid/busybox:1.35.1\n".into()]), wanted, "a name is matched whole");
        let k = kind(Arch::Amd64, KindNeeds::default());
        k.image_info
            .set(NodeImage::from_labels_json("img", r#"{"dev.faultlab.image.busybox":"b:1","dev.faultlab.image.pause":"p:1","dev.faultlab.image.inotify":"i:1"}"#).unwrap())
            .unwrap();
        assert_eq!(k.workload_images(), ["b:1", "i:1"], "the sandbox image is the node's own, never loaded");
        assert_eq!(kind(Arch::Amd64, KindNeeds::default()).workload_images(), ["docker.io/library/busybox:1.36"]);
    }

    #[test]
    fn only_the_host_architecture_runs() {
        let host = Arch::host().expect("amd64 or arm64 host");
        assert!(host.check_runnable().is_ok());
        let other = if host == Arch::Amd64 { Arch::Arm64 } else { Arch::Amd64 };
        let err = other.check_runnable().unwrap_err().to_string();
        assert!(err.contains(&format!("kind cannot run {} nodes", other.as_str())) && err.contains(&format!("--arch {}", host.as_str())), "{err}");
    }

    #[tokio::test]
    async fn a_planned_provision_runs_nothing_and_notes_what_a_run_would_refuse() {
        let host = Arch::host().unwrap();
        let other = if host == Arch::Amd64 { Arch::Arm64 } else { Arch::Amd64 };
        let rec = Recorder::default();
        let mut k = kind(other, KindNeeds { disable_default_cni: true, ..Default::default() });
        k.host = std::sync::Arc::new(crate::provider::PlannedHost::new(k.plan_answers()));
        let cluster = k.provision(&rec).await.unwrap();
        assert_eq!(cluster.nodes[0].name, "faultlab-t-abcde-control-plane");
        let plan = rec.render();
        assert!(plan.contains(&format!("plan only: this host is {}", std::env::consts::ARCH)), "{plan}");
        assert!(plan.contains("disableDefaultCNI: true") && !plan.contains("--wait"), "{plan}");
        assert!(!k.workdir.exists());
    }

    #[test]
    fn only_old_faultlab_clusters_are_stale() {
        // One line per node container, as `docker inspect --format "<inspect_format()>"` prints them.
        let listing = "faultlab-pause-missing-x7k2p\t1970-01-01T00:16:40.123456789Z\n\
                       faultlab-pause-missing-x7k2p\t1970-01-01T00:16:40Z\n\
                       my-dev-cluster\t1970-01-01T00:00:10Z\n\
                       faultlab-disk-full-b4c5d\t1970-01-01T01:06:40.5Z\n\
                       faultlab-garbled\tyesterday\n";
        assert_eq!(stale_clusters(listing, 4600, Duration::from_secs(3600)), vec!["faultlab-pause-missing-x7k2p"]);
        assert_eq!(stale_clusters(listing, 4600, Duration::ZERO), vec!["faultlab-disk-full-b4c5d", "faultlab-pause-missing-x7k2p"]);
    }

    #[test]
    fn a_cluster_is_as_young_as_its_newest_node() {
        let listing = "faultlab-a-11111\t1970-01-01T00:00:00Z\nfaultlab-a-11111\t1970-01-01T01:00:00Z\n";
        assert!(stale_clusters(listing, 3600 + 60, Duration::from_secs(3600)).is_empty());
        assert_eq!(stale_clusters(listing, 7200, Duration::from_secs(3600)), vec!["faultlab-a-11111"]);
    }

    #[test]
    fn the_sweep_lists_by_label_and_reads_the_label_and_the_creation_string() {
        assert_eq!(inspect_format(), "{{index .Config.Labels \"io.x-k8s.kind.cluster\"}}\t{{.Created}}");
        assert_eq!(cmd::shell_join(&node_containers_argv()), "docker ps -aq --filter 'label=io.x-k8s.kind.cluster'");
    }

    #[tokio::test]
    async fn the_sweep_deletes_old_faultlab_clusters_only() {
        let listing = "faultlab-old-x7k2p\t2001-01-01T00:00:00Z\nfaultlab-old-x7k2p\t2001-01-01T00:00:09Z\nmine\t2001-01-01T00:00:00Z\nfaultlab-new-b4c5d\t2999-01-01T00:00:00Z\n";
        let host = crate::provider::PlannedHost::new(vec![(ASK_NODE_CONTAINERS, cmd::Output::ok("c1\nc2\nc3\nc4\n")), (ASK_NODE_LABELS, cmd::Output::ok(listing))]);
        let rec = Recorder::default();
        let swept = sweep(&host, &rec, Duration::from_secs(3600), false, &[]).await;
        assert_eq!(swept.deleted, vec!["faultlab-old-x7k2p".to_string()]);
        assert!(swept.skipped.is_empty() && swept.unchecked.is_none() && swept.errors.is_empty(), "{swept:?}");
        let lines: Vec<String> = rec.entries().into_iter().map(|e| e.line).collect();
        assert_eq!(lines.last().unwrap(), "kind delete cluster --name faultlab-old-x7k2p", "{lines:?}");
        assert!(lines[2].starts_with("docker inspect --format") && lines[2].ends_with(" c1 c2 c3 c4"), "{lines:?}");
        // An open training session's cluster stays, even with --force.
        let rec = Recorder::default();
        let swept = sweep(&host, &rec, Duration::from_secs(3600), true, &["faultlab-old-x7k2p".to_string()]).await;
        assert!(swept.deleted.is_empty() && swept.skipped[0].starts_with("faultlab-old-x7k2p (an open training session's"), "{swept:?}");
        assert!(!rec.entries().iter().any(|e| e.line.starts_with("kind delete")));
        // Docker not answering is said, and nothing more is asked.
        let down = crate::provider::PlannedHost::new(vec![(ASK_DOCKER_PING, cmd::Output::failed(1))]);
        let rec = Recorder::default();
        let swept = sweep(&down, &rec, Duration::ZERO, true, &[]).await;
        assert!(swept.unchecked.unwrap().starts_with("Docker does not answer"));
        assert_eq!(rec.entries().len(), 1);
    }

    #[test]
    fn names_are_prefixed_and_short() {
        let n = Kind::new_name("storageclass-missing-and-more");
        assert!(n.starts_with("faultlab-storageclass-missing-"), "{n}");
        assert!(n.len() <= 40);
    }
}
