//! The test bed's description file: how the harness reaches the project's own cluster and each of its
//! nodes (one by default; `ci/testbed/up --nodes N`).
//!
//! `ci/testbed/up` writes it (default `/var/lib/faultlab/testbed/testbed.yaml`, or `$FAULTLAB_TESTBED`).
//! Its presence declares that the context it names belongs to the test bed, so faults may be injected.
//!
//! What the test bed's scripts compute is here too, each printed by a hidden `faultlab testbed`
//! command: the nodes' names, addresses and places ([`nodes`]), their configuration files
//! ([`configs`]), the platform name ([`PlatformFacts`]) and the VM node's initramfs modules ([`initrd`]).

pub mod configs;
pub mod cpu;
pub mod initrd;
pub mod nodes;

use std::path::{Path, PathBuf};

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::datafile::{self, ApiVersion, DataFileError};
use crate::node::runtime::{self, ContainerdVersion, RuntimeError};
use crate::node::{CommandsOn, ComponentControl, ContainerdProfile, ControlPlaneProfile, CsiProfile, DiskProfile, ImageSet, KubeletProfile, NodeProfile, RegistryProfile, SshAccess};

pub const DEFAULT_PATH: &str = "/var/lib/faultlab/testbed/testbed.yaml";

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum TestBedKind {
    /// Written by `ci/testbed/up`: the context belongs to the test bed, faults may be injected.
    TestBed,
    /// Written by a user for a cluster of their own: faults need `--allow-existing <context>`.
    Cluster,
}

/// The test bed's description.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TestBed {
    pub api_version: ApiVersion,
    pub kind: TestBedKind,
    /// Platform name used for expectations, e.g. `k8s-1.20-containerd-1.6-amd64`. The nodes name it
    /// (`k8s-<kubelet minor>-<runtime>-<runtime minor>[-cgroup2]-<arch>`: the existing provider reads
    /// it from them); when given it must be the same (kept for the descriptions that have it). Optional.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub platform: String,
    pub kubeconfig: PathBuf,
    pub context: String,
    pub nodes: Vec<NodeProfile>,
}

/// Where the description is looked for: `$FAULTLAB_TESTBED`, else the default path.
pub fn path() -> PathBuf {
    std::env::var_os("FAULTLAB_TESTBED").map(PathBuf::from).unwrap_or_else(|| PathBuf::from(DEFAULT_PATH))
}

impl TestBed {
    pub fn read(path: &Path) -> Result<TestBed, DataFileError> {
        let bed: TestBed = datafile::read(path)?;
        if bed.nodes.is_empty() {
            return Err(DataFileError::Invalid {
                path: path.to_owned(),
                field: "nodes".into(),
                message: "the test bed lists no node".into(),
            });
        }
        for (i, node) in bed.nodes.iter().enumerate() {
            if node.access().is_none() {
                return Err(DataFileError::Invalid {
                    path: path.to_owned(),
                    field: format!("nodes[{i}]"),
                    message: "a node needs `netns`, `container` or `ssh` so commands can reach it".into(),
                });
            }
            if let Some(message) = node.ssh.as_ref().and_then(SshAccess::destination_problem) {
                return Err(DataFileError::Invalid { path: path.to_owned(), field: format!("nodes[{i}].ssh.destination"), message });
            }
        }
        Ok(bed)
    }
}

/// What `ci/testbed/up` knows of the test bed it made, as `faultlab testbed describe` takes it: the
/// description is written from these through [`TestBed`], so its shape lives in the Rust types only
/// and the values in the test bed's scripts only.
#[derive(Clone, Debug, clap::Args)]
pub struct Facts {
    /// The platform name, for the expectations directory (`k8s-1.20-containerd-1.6-amd64`).
    #[arg(long)]
    pub platform: String,
    #[arg(long)]
    pub kubeconfig: PathBuf,
    #[arg(long)]
    pub context: String,
    /// The node's name, which is also its network namespace (unless it is reached by ssh).
    #[arg(long)]
    pub node: String,
    /// Reach the node by ssh (`[user@]host`) instead of through its network namespace: the emulated
    /// VM node (`ci/testbed/up --arch arm64`).
    #[arg(long)]
    pub ssh_destination: Option<String>,
    #[arg(long, requires = "ssh_destination")]
    pub ssh_port: Option<u16>,
    #[arg(long, requires = "ssh_destination")]
    pub ssh_identity: Option<String>,
    /// One more ssh argument, before the destination (repeatable: `--ssh-option=-o --ssh-option=X=Y`).
    #[arg(long = "ssh-option", requires = "ssh_destination", allow_hyphen_values = true)]
    pub ssh_options: Vec<String>,
    /// The node's CPU architecture (Go's name), when it is not this machine's.
    #[arg(long)]
    pub arch: Option<String>,
    #[arg(long)]
    pub address: String,
    /// The host's end of the node's link: the node's default gateway.
    #[arg(long)]
    pub gateway: String,
    /// The node's end of the link, its default route's device.
    #[arg(long)]
    pub gateway_device: String,
    /// containerd's socket.
    #[arg(long)]
    pub containerd_socket: String,
    #[arg(long)]
    pub containerd_root: String,
    #[arg(long)]
    pub containerd_config: String,
    #[arg(long)]
    pub sandbox_image: String,
    #[arg(long)]
    pub kubelet_root: String,
    #[arg(long)]
    pub kubelet_config: String,
    #[arg(long)]
    pub kubelet_extra_flags: String,
    /// `ci/testbed/node`, which restarts the kubelet and containerd (`node restart kubelet`).
    #[arg(long)]
    pub node_script: String,
    /// One more argument of the node script, after `restart <component>` (repeatable): the node's name,
    /// on the test bed's nodes after the first (`node restart kubelet faultlab-node-2`).
    #[arg(long = "node-script-arg", allow_hyphen_values = true)]
    pub node_script_args: Vec<String>,
    /// The node's CRI client (faultlab-cri).
    #[arg(long)]
    pub cri_client: String,
    /// containerd's own ctr, where it is not the `ctr` on the node's PATH.
    #[arg(long)]
    pub ctr: Option<String>,
    /// A runc of another release on the node, which it cannot run (sid's; runtime-parts-mismatch's).
    #[arg(long)]
    pub foreign_runc: Option<String>,
    /// faultlab's CSI driver, whose node plugin runs on the node (`faultlab-cri csi-node`), and the
    /// directory of its volumes there, which the test bed's nodes share.
    #[arg(long, requires = "csi_disks")]
    pub csi_driver: Option<String>,
    #[arg(long, requires = "csi_driver")]
    pub csi_disks: Option<String>,
    /// The loop file under containerd's root, its device (if attached) and size.
    #[arg(long)]
    pub disk_file: String,
    #[arg(long)]
    pub disk_device: Option<String>,
    #[arg(long)]
    pub disk_mib: u64,
    #[arg(long)]
    pub node_package: String,
    /// The host address a registry a scenario starts listens on, and the address the node reaches it
    /// at (the same on a node in a network namespace; 127.0.0.1 and QEMU's alias of it for the VM).
    #[arg(long, requires = "registry_address")]
    pub registry_listen: Option<String>,
    #[arg(long, requires = "registry_hosts_dir")]
    pub registry_address: Option<String>,
    /// containerd's registry hosts directory on the node (`registry.config_path`).
    #[arg(long, requires = "registry_listen")]
    pub registry_hosts_dir: Option<String>,
    /// `ci/testbed/control-plane`, which stops and starts the control plane's components on this
    /// machine (`control-plane stop kube-controller-manager`).
    #[arg(long)]
    pub control_plane_script: Option<String>,
    /// An image the node holds, by role: `ROLE=REF`, once per image (`pause` and `busybox` at least).
    #[arg(long = "image", value_name = "ROLE=REF")]
    pub images: Vec<String>,
    /// A description written before (by `testbed describe`, of the same cluster) whose nodes this one
    /// lists after its own node, in order (repeatable): the test bed's nodes 2..N (`up --nodes N`).
    #[arg(long = "add-nodes-from", value_name = "FILE")]
    pub add_nodes_from: Vec<PathBuf>,
}

/// Facts that make no description.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum FactsError {
    #[error("--image {value:?}: expected ROLE=REF, for example busybox=faultlab.invalid/busybox:1.35")]
    ImageNotRoleRef { value: String },
    #[error("--image: role {role} is given twice")]
    RoleTwice { role: String },
    #[error("--image: no {role}=REF given (the node needs a {role} image)")]
    RoleMissing { role: &'static str },
    #[error("--add-nodes-from {}: {message}", path.display())]
    NodesFrom { path: PathBuf, message: String },
    #[error("node {name} is described twice (--node, --add-nodes-from)")]
    NodeTwice { name: String },
}

impl Facts {
    /// The node's CRI client command. A node reached by ssh (the emulated arm64 node) answers slowly:
    /// a CI run saw StopPodSandbox take more than faultlab-cri's 10 s per call there, so its calls get
    /// 50 s, inside the 60 s every node command has.
    fn cri_argv(&self, emulated: bool) -> Vec<String> {
        let mut argv = vec![self.cri_client.clone(), "--runtime-endpoint".into(), format!("unix://{}", self.containerd_socket)];
        if emulated {
            argv.extend(["--timeout".into(), "50".into()]);
        }
        argv
    }

    /// The description these facts make; an image given twice, or `pause` or `busybox` missing, is an
    /// error naming the flag.
    pub fn testbed(&self) -> Result<TestBed, FactsError> {
        let mut images = std::collections::BTreeMap::new();
        for image in &self.images {
            let Some((role, reference)) = image.split_once('=').filter(|(r, v)| !r.is_empty() && !v.is_empty()) else {
                return Err(FactsError::ImageNotRoleRef { value: image.clone() });
            };
            if images.insert(role.to_string(), reference.to_string()).is_some() {
                return Err(FactsError::RoleTwice { role: role.into() });
            }
        }
        let mut take = |role: &'static str| images.remove(role).ok_or(FactsError::RoleMissing { role });
        let (pause, busybox) = (take("pause")?, take("busybox")?);
        let node_script = |verb: &str, what: &str| {
            let mut argv = vec![self.node_script.clone(), verb.into(), what.into()];
            argv.extend(self.node_script_args.iter().cloned());
            argv
        };
        let restart = |what: &str| node_script("restart", what);
        let ssh = self.ssh_destination.as_ref().map(|destination| SshAccess {
            destination: destination.clone(),
            port: self.ssh_port,
            identity_file: self.ssh_identity.clone(),
            options: self.ssh_options.clone(),
        });
        let emulated = ssh.is_some();
        let node = NodeProfile {
            name: self.node.clone(),
            netns: if ssh.is_some() { None } else { Some(self.node.clone()) },
            container: None,
            ssh,
            arch: self.arch.clone(),
            address: Some(self.address.clone()),
            gateway: Some(self.gateway.clone()),
            gateway_device: Some(self.gateway_device.clone()),
            containerd: ContainerdProfile {
                address: self.containerd_socket.clone(),
                namespace: "k8s.io".into(),
                root: self.containerd_root.clone(),
                config: self.containerd_config.clone(),
                sandbox_image: self.sandbox_image.clone(),
                restart: restart("containerd"),
                ctr: self.ctr.clone(),
                foreign_runc: self.foreign_runc.clone(),
            },
            kubelet: KubeletProfile {
                root_dir: self.kubelet_root.clone(),
                config: self.kubelet_config.clone(),
                extra_flags_file: Some(self.kubelet_extra_flags.clone()),
                restart: restart("kubelet"),
                control: Some(ComponentControl {
                    stop: node_script("stop", "kubelet"),
                    start: node_script("start", "kubelet"),
                    status: node_script("status", "kubelet"),
                }),
            },
            crictl: Some(self.cri_argv(emulated)),
            disk: Some(DiskProfile {
                mountpoint: self.containerd_root.clone(),
                backing_file: self.disk_file.clone(),
                device: self.disk_device.clone().filter(|d| !d.is_empty()),
                size_mib: self.disk_mib,
            }),
            node_package: Some(self.node_package.clone()),
            images: ImageSet { pause, busybox, more: images },
            registry: match (&self.registry_listen, &self.registry_address, &self.registry_hosts_dir) {
                (Some(listen), Some(address), Some(hosts_dir)) => {
                    Some(RegistryProfile { listen: listen.clone(), address: address.clone(), hosts_dir: hosts_dir.clone() })
                }
                _ => None,
            },
            control_plane: self.control_plane_script.as_ref().map(|script| ControlPlaneProfile {
                on: CommandsOn::Host,
                components: ["kube-controller-manager", "kube-scheduler"]
                    .into_iter()
                    .map(|c| {
                        let argv = |verb: &str| vec![script.clone(), verb.to_string(), c.to_string()];
                        (c.to_string(), ComponentControl { stop: argv("stop"), start: argv("start"), status: argv("status") })
                    })
                    .collect(),
            }),
            csi: match (&self.csi_driver, &self.csi_disks) {
                (Some(driver), Some(disks)) => Some(CsiProfile { driver: driver.clone(), disks: disks.clone() }),
                _ => None,
            },
        };
        let mut nodes = vec![node];
        for path in &self.add_nodes_from {
            let more = TestBed::read(path).map_err(|e| FactsError::NodesFrom { path: path.clone(), message: e.to_string() })?;
            if (&more.platform, &more.kubeconfig, &more.context) != (&self.platform, &self.kubeconfig, &self.context) {
                return Err(FactsError::NodesFrom {
                    path: path.clone(),
                    message: format!(
                        "describes another cluster (platform {}, kubeconfig {}, context {}), not this one's",
                        more.platform,
                        more.kubeconfig.display(),
                        more.context
                    ),
                });
            }
            for node in more.nodes {
                if nodes.iter().any(|n| n.name == node.name) {
                    return Err(FactsError::NodeTwice { name: node.name });
                }
                nodes.push(node);
            }
        }
        Ok(TestBed {
            api_version: ApiVersion::V1alpha1,
            kind: TestBedKind::TestBed,
            platform: self.platform.clone(),
            kubeconfig: self.kubeconfig.clone(),
            context: self.context.clone(),
            nodes,
        })
    }
}

impl TestBed {
    /// The description as its file holds it.
    pub fn to_yaml(&self) -> String {
        serde_saphyr::to_string(self).expect("a test bed description serialises")
    }
}

/// What `ci/testbed/up` reads on a node for the description's platform name, as `faultlab testbed
/// platform` takes it: the name is `k8s-1.20-containerd-<major.minor>[-cgroup2]-<arch>`, read from them as
/// faultlab reads them on any node ([`ContainerdVersion::parse`], [`runtime::parse_cgroup`]).
#[derive(Clone, Debug, clap::Args)]
pub struct PlatformFacts {
    /// What `containerd --version` printed on the node.
    #[arg(long, required_unless_present = "containerd_minor", conflicts_with = "containerd_minor")]
    pub containerd_version: Option<String>,
    /// containerd's `major.minor` where it is known without asking the node (the VM node's image
    /// carries bookworm's 1.6).
    #[arg(long)]
    pub containerd_minor: Option<String>,
    /// What `stat -fc %T /sys/fs/cgroup` printed on the node (`cgroup2fs`: the unified hierarchy).
    #[arg(long)]
    pub cgroup_fs: String,
    /// The node's architecture (Go's name).
    #[arg(long)]
    pub arch: String,
}

/// Facts that make no platform name: each error names the flag or the text.
#[derive(Debug, thiserror::Error)]
pub enum PlatformError {
    #[error("--containerd-version: {0}")]
    Version(RuntimeError),
    #[error("--cgroup-fs: {0}")]
    Cgroup(RuntimeError),
    #[error("--containerd-minor {0:?}: not <major>.<minor>")]
    Minor(String),
    #[error("--arch {0:?}: not an architecture's name (amd64, arm64)")]
    Arch(String),
}

impl PlatformFacts {
    /// The platform name.
    pub fn name(&self) -> Result<String, PlatformError> {
        let minor = match (&self.containerd_version, &self.containerd_minor) {
            (Some(output), _) => ContainerdVersion::parse(output).map_err(PlatformError::Version)?.minor_version(),
            (None, Some(minor)) => {
                let number = |s: &str| !s.is_empty() && s.chars().all(|c| c.is_ascii_digit());
                match minor.split_once('.') {
                    Some((a, b)) if number(a) && number(b) => minor.clone(),
                    _ => return Err(PlatformError::Minor(minor.clone())),
                }
            }
            (None, None) => return Err(PlatformError::Minor(String::new())),
        };
        let cgroup = runtime::parse_cgroup(&self.cgroup_fs).map_err(PlatformError::Cgroup)?;
        if self.arch.is_empty() || !self.arch.chars().all(|c| c.is_ascii_alphanumeric()) {
            return Err(PlatformError::Arch(self.arch.clone()));
        }
        Ok(format!("k8s-1.20-containerd-{minor}{}-{}", cgroup.platform_part(), self.arch))
    }
}

/// A node profile with placeholders, for plans that have no test bed to read.
pub fn placeholder_profile() -> NodeProfile {
    crate::datafile::decode::<TestBed>(Path::new("placeholder"), PLACEHOLDER).expect("static").nodes.remove(0)
}

const PLACEHOLDER: &str = include_str!("../tests/fixtures/testbed/valid.yaml");

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    pub const SAMPLE: &str = include_str!("../tests/fixtures/testbed/valid.yaml");

    pub fn sample() -> TestBed {
        datafile::decode(Path::new("valid.yaml"), SAMPLE).unwrap()
    }

    pub fn sample_profile() -> NodeProfile {
        sample().nodes.remove(0)
    }

    #[test]
    fn valid_description_decodes() {
        let bed = sample();
        assert_eq!(bed.platform, "k8s-1.20-containerd-1.6-amd64");
        assert_eq!(bed.nodes[0].netns.as_deref(), Some("faultlab-node"));
        assert_eq!(bed.nodes[0].images.more.get("tools").map(String::as_str), Some("faultlab.invalid/tools:1"));
    }

    /// `platform` is optional: the nodes name it. Without it, it is not written either.
    #[test]
    fn a_description_without_a_platform_decodes() {
        let text = SAMPLE.replace("platform: k8s-1.20-containerd-1.6-amd64\n", "");
        assert_ne!(text, SAMPLE);
        let bed: TestBed = datafile::decode(Path::new("bed.yaml"), &text).unwrap();
        assert_eq!(bed.platform, "");
        assert!(!bed.to_yaml().contains("platform"), "{}", bed.to_yaml());
    }

    #[test]
    fn unknown_field_names_file_line_and_field() {
        let text = SAMPLE.replace("    netns: faultlab-node\n", "    netns: faultlab-node\n    netnss: typo\n");
        let err = datafile::decode::<TestBed>(Path::new("bed.yaml"), &text).unwrap_err().to_string();
        assert!(err.starts_with("bed.yaml:"), "{err}");
        assert!(err.contains("netnss"), "{err}");
    }

    /// The registry and control-plane sections decode strictly too: a wrong `on`, a missing command.
    #[rstest::rstest]
    #[case::where_commands_run("      on: host\n", "      on: everywhere\n", "everywhere")]
    #[case::missing_status("          status: [/opt/faultlab/ci/testbed/control-plane, status, kube-controller-manager]\n", "", "status")]
    #[case::registry_field("      hostsDir: /var/lib/faultlab/testbed/containerd/certs.d\n", "      hostDir: /x\n", "hostDir")]
    fn the_platform_sections_decode_strictly(#[case] from: &str, #[case] to: &str, #[case] named: &str) {
        assert!(SAMPLE.contains(from), "{from:?}");
        let text = SAMPLE.replacen(from, to, 1);
        let err = datafile::decode::<TestBed>(Path::new("bed.yaml"), &text).unwrap_err().to_string();
        assert!(err.starts_with("bed.yaml:"), "{err}");
        assert!(err.contains(named), "{err}");
    }

    #[test]
    fn the_sample_has_a_registry_and_a_control_plane() {
        let node = sample_profile();
        assert_eq!(node.registry.as_ref().map(|r| r.endpoint(crate::node::RegistryProfile::PORT)).as_deref(), Some("10.213.0.1:5443"));
        let cp = node.control_plane.unwrap();
        assert_eq!(cp.on, CommandsOn::Host);
        assert_eq!(cp.components["kube-controller-manager"].stop[1], "stop");
    }

    /// The facts `ci/testbed/up` would give for the sample's node.
    fn sample_facts() -> Facts {
        Facts {
            platform: "k8s-1.20-containerd-1.6-amd64".into(),
            kubeconfig: "/var/lib/faultlab/testbed/kubeconfig".into(),
            context: "faultlab-testbed".into(),
            node: "faultlab-node".into(),
            ssh_destination: None,
            ssh_port: None,
            ssh_identity: None,
            ssh_options: vec![],
            arch: None,
            address: "10.213.0.2".into(),
            gateway: "10.213.0.1".into(),
            gateway_device: "fl-node".into(),
            containerd_socket: "/run/faultlab/containerd/containerd.sock".into(),
            containerd_root: "/var/lib/faultlab/containerd".into(),
            containerd_config: "/var/lib/faultlab/testbed/containerd.toml".into(),
            sandbox_image: "faultlab.invalid/cce-pause:3.1".into(),
            kubelet_root: "/var/lib/faultlab/kubelet".into(),
            kubelet_config: "/var/lib/faultlab/testbed/kubelet-config.yaml".into(),
            kubelet_extra_flags: "/var/lib/faultlab/testbed/kubelet.extra-flags".into(),
            node_script: "/opt/faultlab/ci/testbed/node".into(),
            node_script_args: vec![],
            cri_client: "/var/lib/faultlab/testbed/bin/faultlab-cri".into(),
            ctr: None,
            foreign_runc: Some("/var/cache/faultlab/sid-runc/1.3.6+ds1-1-amd64/usr/sbin/runc".into()),
            csi_driver: Some("disk.faultlab.dev".into()),
            csi_disks: Some("/var/lib/faultlab/csi-disks".into()),
            disk_file: "/var/cache/faultlab/containerd.img".into(),
            disk_device: Some("/dev/loop0".into()),
            disk_mib: 1024,
            node_package: "/opt/cloud/cce/package/node-package/pause-3.1.tgz".into(),
            registry_listen: Some("10.213.0.1".into()),
            registry_address: Some("10.213.0.1".into()),
            registry_hosts_dir: Some("/var/lib/faultlab/testbed/containerd/certs.d".into()),
            control_plane_script: Some("/opt/faultlab/ci/testbed/control-plane".into()),
            images: ["tools=faultlab.invalid/tools:1", "busybox=faultlab.invalid/busybox:1.35", "pause=faultlab.invalid/cce-pause:3.1"].map(String::from).to_vec(),
            add_nodes_from: vec![],
        }
    }

    /// The facts `ci/testbed/up --nodes 2` gives for its second node (fl_node_select 2 in ci/testbed/lib.sh).
    fn second_node_facts() -> Facts {
        let dir = "/var/lib/faultlab/nodes/faultlab-node-2";
        let tb = "/var/lib/faultlab/testbed/nodes/faultlab-node-2";
        let sock = "/run/faultlab/nodes/faultlab-node-2/containerd/containerd.sock";
        Facts {
            node: "faultlab-node-2".into(),
            address: "198.18.213.6".into(),
            gateway: "198.18.213.5".into(),
            gateway_device: "fl-node1".into(),
            containerd_socket: sock.into(),
            containerd_root: format!("{dir}/containerd"),
            containerd_config: format!("{tb}/containerd/config.toml"),
            kubelet_root: format!("{dir}/kubelet"),
            kubelet_config: format!("{tb}/kubelet/config.yaml"),
            kubelet_extra_flags: format!("{tb}/kubelet/extra-flags"),
            node_script_args: vec!["faultlab-node-2".into()],
            disk_file: format!("{dir}/disk/containerd.ext4"),
            disk_device: Some("/dev/loop1".into()),
            registry_listen: Some("198.18.213.5".into()),
            registry_address: Some("198.18.213.5".into()),
            registry_hosts_dir: Some(format!("{tb}/containerd/certs.d")),
            ..sample_facts()
        }
    }

    /// Two nodes: the second described into a file of its own first, then listed after the first, each
    /// with its own complete profile; the first's exactly as with one node.
    #[test]
    fn a_two_node_description_lists_each_node_with_its_own_profile() {
        let dir = tempfile::tempdir().unwrap();
        let second = dir.path().join("node.yaml");
        std::fs::write(&second, second_node_facts().testbed().unwrap().to_yaml()).unwrap();
        let facts = Facts { add_nodes_from: vec![second.clone()], ..sample_facts() };
        let bed = facts.testbed().unwrap();
        assert_eq!(bed.nodes.len(), 2);
        assert_eq!(bed.nodes[0], sample_profile(), "node 1 is described as the single node always was");
        let node = &bed.nodes[1];
        assert_eq!((node.name.as_str(), node.netns.as_deref()), ("faultlab-node-2", Some("faultlab-node-2")));
        assert!(matches!(node.access(), Some(crate::node::NodeAccess::Netns { netns }) if netns == "faultlab-node-2"));
        assert_eq!(node.kubelet.restart, ["/opt/faultlab/ci/testbed/node", "restart", "kubelet", "faultlab-node-2"], "the restart names its node");
        assert_eq!(node.containerd.restart, ["/opt/faultlab/ci/testbed/node", "restart", "containerd", "faultlab-node-2"]);
        assert_eq!(node.crictl.as_ref().unwrap()[2], "unix:///run/faultlab/nodes/faultlab-node-2/containerd/containerd.sock");
        assert_eq!(node.ctr(["images", "ls"]).argv[2], "/run/faultlab/nodes/faultlab-node-2/containerd/containerd.sock");
        assert_eq!(node.disk.as_ref().unwrap().mountpoint, "/var/lib/faultlab/nodes/faultlab-node-2/containerd");
        assert_eq!(node.cpu_manager_state(), Path::new("/var/lib/faultlab/nodes/faultlab-node-2/kubelet/cpu_manager_state"));
        assert_eq!(node.registry.as_ref().unwrap().endpoint(crate::node::RegistryProfile::PORT), "198.18.213.5:5443");
        assert_eq!(node.images, bed.nodes[0].images);
        assert_eq!(node.control_plane, bed.nodes[0].control_plane);
        // Written and read back strictly, in order.
        let path = dir.path().join("testbed.yaml");
        std::fs::write(&path, bed.to_yaml()).unwrap();
        let read = TestBed::read(&path).unwrap();
        assert_eq!(read, bed);
        assert_eq!(read.nodes.iter().map(|n| n.name.as_str()).collect::<Vec<_>>(), ["faultlab-node", "faultlab-node-2"]);
        // A node listed twice, another cluster's node, or a file that is no description: errors naming the file.
        let twice = Facts { add_nodes_from: vec![second.clone(), second.clone()], ..sample_facts() };
        assert_eq!(twice.testbed().unwrap_err(), FactsError::NodeTwice { name: "faultlab-node-2".into() });
        let other = Facts { context: "other".into(), add_nodes_from: vec![second.clone()], ..sample_facts() };
        assert!(other.testbed().unwrap_err().to_string().contains("describes another cluster"));
        let missing = Facts { add_nodes_from: vec![dir.path().join("absent.yaml")], ..sample_facts() };
        assert!(missing.testbed().unwrap_err().to_string().starts_with(&format!("--add-nodes-from {}", dir.path().join("absent.yaml").display())));
    }

    #[test]
    fn the_description_is_written_from_the_types_and_reads_back_strictly() {
        let bed = sample_facts().testbed().unwrap();
        assert_eq!(bed, sample(), "the facts of the sample's node make the sample");
        let text = bed.to_yaml();
        assert_eq!(datafile::decode::<TestBed>(Path::new("written.yaml"), &text).unwrap(), bed, "{text}");
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("testbed.yaml");
        std::fs::write(&path, &text).unwrap();
        assert_eq!(TestBed::read(&path).unwrap(), bed);
    }

    /// The VM node: reached by ssh, not by a network namespace, with its architecture.
    #[test]
    fn a_vm_node_is_described_with_ssh_and_its_arch() {
        let mut facts = sample_facts();
        facts.ssh_destination = Some("root@127.0.0.1".into());
        facts.ssh_port = Some(22622);
        facts.ssh_identity = Some("/var/cache/faultlab/vm-arm64/id_ed25519".into());
        facts.ssh_options = vec!["-o".into(), "UserKnownHostsFile=/var/cache/faultlab/vm-arm64/known_hosts".into()];
        facts.arch = Some("arm64".into());
        let bed = facts.testbed().unwrap();
        let node = &bed.nodes[0];
        assert_eq!(node.netns, None);
        assert_eq!(node.arch.as_deref(), Some("arm64"));
        let Some(crate::node::NodeAccess::Ssh(ssh)) = node.access() else { panic!("{:?}", node.access()) };
        assert_eq!((ssh.destination.as_str(), ssh.port), ("root@127.0.0.1", Some(22622)));
        let cri = node.crictl(["stopp", "x"]).argv;
        assert_eq!(cri[cri.len() - 4..], ["--timeout", "50", "stopp", "x"], "an emulated node's CRI calls get 50 s");
        assert!(!sample_facts().testbed().unwrap().nodes[0].crictl(["x"]).argv.contains(&"--timeout".to_string()), "the host's node keeps the client's 10 s");
        let text = bed.to_yaml();
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("testbed.yaml");
        std::fs::write(&path, &text).unwrap();
        assert_eq!(TestBed::read(&path).unwrap(), bed, "{text}");
    }

    /// A destination ssh would read as an option, or that is no host's name, is refused when the
    /// description is read: the error names the file and the field.
    #[rstest::rstest]
    #[case::option("-oProxyCommand=touch /tmp/x", "it begins with '-', so ssh would read it as an option")]
    #[case::option_after_space("root@vm -oProxyCommand=x", "it has whitespace in it")]
    #[case::newline("vm\nx", "it has whitespace in it")]
    #[case::escape("vm\x1b[2J", "it has a control character in it")]
    #[case::empty("", "it is empty")]
    fn a_hostile_ssh_destination_is_refused_when_read(#[case] destination: &str, #[case] why: &str) {
        let mut facts = sample_facts();
        facts.ssh_destination = Some("root@127.0.0.1".into());
        let mut bed = facts.testbed().unwrap();
        bed.nodes[0].ssh.as_mut().unwrap().destination = destination.into();
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("testbed.yaml");
        std::fs::write(&path, bed.to_yaml()).unwrap();
        let err = TestBed::read(&path).unwrap_err().to_string();
        assert!(err.starts_with(&format!("{}: nodes[0].ssh.destination: ", path.display())), "{err}");
        assert!(err.ends_with(&format!("is not an ssh destination ([user@]host): {why}")), "{err}");
        assert!(!err.contains('\x1b'), "{err:?}");
    }

    /// `faultlab testbed describe` takes the ssh options from the command line, `-o` values included.
    #[test]
    fn ssh_facts_parse_from_the_command_line() {
        use clap::Parser;
        #[derive(Parser)]
        struct Cli {
            #[command(flatten)]
            facts: Facts,
        }
        let base = ["x", "--platform", "p", "--kubeconfig", "k", "--context", "c", "--node", "n", "--address", "a", "--gateway", "g", "--gateway-device", "d",
            "--containerd-socket", "s", "--containerd-root", "r", "--containerd-config", "cc", "--sandbox-image", "i", "--kubelet-root", "kr", "--kubelet-config", "kc",
            "--kubelet-extra-flags", "ke", "--node-script", "ns", "--cri-client", "cri", "--disk-file", "df", "--disk-mib", "1", "--node-package", "np"];
        let cli = Cli::try_parse_from(base.iter().copied().chain(["--ssh-destination", "root@h", "--ssh-option", "-o", "--ssh-option", "A=B"])).unwrap();
        assert_eq!(cli.facts.ssh_options, ["-o", "A=B"]);
        let cli = Cli::try_parse_from(base.iter().copied().chain(["--node-script-arg", "faultlab-node-2", "--add-nodes-from", "/n2.yaml", "--add-nodes-from", "/n3.yaml"])).unwrap();
        assert_eq!(cli.facts.node_script_args, ["faultlab-node-2"]);
        assert_eq!(cli.facts.add_nodes_from, [PathBuf::from("/n2.yaml"), PathBuf::from("/n3.yaml")]);
        let err = Cli::try_parse_from(base.iter().copied().chain(["--ssh-port", "22"])).err().unwrap().to_string();
        assert!(err.contains("--ssh-destination"), "{err}");
    }

    #[test]
    fn images_must_name_pause_and_busybox_once_each() {
        let mut facts = sample_facts();
        facts.images.retain(|i| !i.starts_with("busybox="));
        assert_eq!(facts.testbed().unwrap_err().to_string(), "--image: no busybox=REF given (the node needs a busybox image)");
        facts.images.push("pause=other:1".into());
        assert_eq!(facts.testbed().unwrap_err(), FactsError::RoleTwice { role: "pause".into() });
        facts.images = vec!["busybox".into()];
        assert!(facts.testbed().unwrap_err().to_string().starts_with("--image \"busybox\": expected ROLE=REF"));
    }
    fn platform(version: Option<&str>, minor: Option<&str>, fs: &str, arch: &str) -> Result<String, PlatformError> {
        PlatformFacts { containerd_version: version.map(String::from), containerd_minor: minor.map(String::from), cgroup_fs: fs.into(), arch: arch.into() }.name()
    }

    /// The platform name from what `containerd --version` and `stat -fc %T /sys/fs/cgroup` print on the
    /// node: sid's containerd 2.1.9 and bookworm's 1.6.20, cgroup v1 (tmpfs) and v2 (cgroup2fs).
    #[rstest::rstest]
    #[case("containerd github.com/containerd/containerd/v2 2.1.9+unknown ", "tmpfs", "amd64", "k8s-1.20-containerd-2.1-amd64")]
    #[case("containerd github.com/containerd/containerd 1.6.20~ds1 1.6.20~ds1-1+deb12u3\n", "tmpfs", "amd64", "k8s-1.20-containerd-1.6-amd64")]
    #[case("containerd github.com/containerd/containerd 1.6.20~ds1 1.6.20~ds1-1+b1", "cgroup2fs\n", "arm64", "k8s-1.20-containerd-1.6-cgroup2-arm64")]
    fn the_platform_name_is_read_from_the_node(#[case] version: &str, #[case] fs: &str, #[case] arch: &str, #[case] want: &str) {
        assert_eq!(platform(Some(version), None, fs, arch).unwrap(), want);
    }

    /// The VM node's containerd 1.6 is known without asking it.
    #[test]
    fn a_known_containerd_minor_is_taken_as_it_is() {
        assert_eq!(platform(None, Some("1.6"), "cgroup2fs", "amd64").unwrap(), "k8s-1.20-containerd-1.6-cgroup2-amd64");
        assert_eq!(platform(None, Some("1.6.20"), "tmpfs", "amd64").unwrap_err().to_string(), "--containerd-minor \"1.6.20\": not <major>.<minor>");
    }

    /// A version, a cgroup file system or an architecture that does not read is an error naming it.
    #[test]
    fn what_does_not_read_is_an_error_naming_it() {
        let err = platform(Some("containerd github.com/containerd/containerd weird"), None, "tmpfs", "amd64").unwrap_err().to_string();
        assert!(err.starts_with("--containerd-version: "), "{err}");
        assert!(err.contains("\"containerd github.com/containerd/containerd weird\""), "{err}");
        let err = platform(Some("bash: containerd: command not found"), None, "tmpfs", "amd64").unwrap_err().to_string();
        assert!(err.contains("bash: containerd: command not found"), "{err}");
        let err = platform(Some("containerd x 2.1.9"), None, "sysfs", "amd64").unwrap_err().to_string();
        assert!(err.starts_with("--cgroup-fs: cannot tell the cgroup version: `stat -fc %T /sys/fs/cgroup` printed \"sysfs\""), "{err}");
        let err = platform(Some("containerd x 2.1.9"), None, "tmpfs", "").unwrap_err().to_string();
        assert_eq!(err, "--arch \"\": not an architecture's name (amd64, arm64)");
    }

    /// `faultlab testbed platform` takes the version or the minor, not both, and one of them.
    #[test]
    fn platform_facts_parse_from_the_command_line() {
        use clap::Parser;
        #[derive(Parser)]
        struct Cli {
            #[command(flatten)]
            facts: PlatformFacts,
        }
        let base = ["x", "--cgroup-fs", "tmpfs", "--arch", "amd64"];
        let cli = Cli::try_parse_from(base.iter().copied().chain(["--containerd-version", "containerd m 2.1.9"])).unwrap();
        assert_eq!(cli.facts.name().unwrap(), "k8s-1.20-containerd-2.1-amd64");
        assert!(Cli::try_parse_from(base).is_err(), "neither");
        assert!(Cli::try_parse_from(base.iter().copied().chain(["--containerd-version", "v", "--containerd-minor", "1.6"])).is_err(), "both");
    }
}
