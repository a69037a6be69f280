use std::path::PathBuf;
use std::time::Duration;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::cmd::{Cmd, DEFAULT_TIMEOUT};

/// How commands reach a node.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub enum NodeAccess {
    /// `docker exec <container> ...` (kind nodes are containers).
    Docker { container: String },
    /// `ip netns exec <netns> ...` (the test bed's node lives in its own network namespace).
    Netns { netns: String },
}

impl NodeAccess {
    /// The host argv that runs `cmd` on the node, with `timeout` inside the node too.
    pub fn wrap(&self, cmd: &Cmd) -> Vec<String> {
        let mut argv: Vec<String> = match self {
            NodeAccess::Docker { container } => {
                let mut v = vec!["docker".to_string(), "exec".to_string()];
                if cmd.stdin.is_some() {
                    v.push("-i".to_string());
                }
                v.push(container.clone());
                v
            }
            NodeAccess::Netns { netns } => {
                vec!["ip".into(), "netns".into(), "exec".into(), netns.clone()]
            }
        };
        // `timeout -k 5 N`: TERM after N seconds, KILL five seconds later, inside the node.
        argv.extend(["timeout".to_string(), "-k".to_string(), "5".to_string(), cmd.timeout.as_secs().max(1).to_string()]);
        argv.extend(cmd.argv.iter().cloned());
        argv
    }

    /// How long the host waits: the inner timeout plus the kill grace and some slack.
    pub fn host_timeout(cmd: &Cmd) -> Duration {
        cmd.timeout + Duration::from_secs(15)
    }
}

/// containerd on the node.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ContainerdProfile {
    /// The containerd socket.
    pub address: String,
    /// The containerd namespace the CRI plugin uses.
    pub namespace: String,
    /// containerd's root directory.
    pub root: String,
    /// containerd's config file.
    pub config: String,
    /// The sandbox (pause) image the CRI plugin is configured with.
    pub sandbox_image: String,
    /// Node argv that restarts containerd and waits until it answers.
    pub restart: Vec<String>,
}

/// kubelet on the node.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct KubeletProfile {
    /// kubelet's --root-dir.
    pub root_dir: String,
    /// The KubeletConfiguration file.
    pub config: String,
    /// A file of extra kubelet flags, one a line, read on restart (absent: none).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub extra_flags_file: Option<String>,
    /// Node argv that restarts kubelet and waits until it is healthy.
    pub restart: Vec<String>,
}

/// The size-limited filesystem under containerd's root.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct DiskProfile {
    pub mountpoint: String,
    pub backing_file: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub device: Option<String>,
    #[serde(rename = "sizeMiB")]
    pub size_mib: u64,
}

/// Images the node has locally, by role. Scenario manifests refer to them as `${images.busybox}`.
/// (Any further key is a role, so there is no unknown field here.)
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ImageSet {
    pub pause: String,
    pub busybox: String,
    /// Further images by role (for example `tools`).
    #[serde(flatten)]
    pub more: std::collections::BTreeMap<String, String>,
}

/// What faultlab knows of one node.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct NodeProfile {
    /// The Kubernetes node name.
    pub name: String,
    /// The network namespace the node runs in (test bed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub netns: Option<String>,
    /// The docker container that is the node (kind).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub container: Option<String>,
    /// The node's address.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub address: Option<String>,
    /// The node's default gateway.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gateway: Option<String>,
    /// The device the default route goes through.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gateway_device: Option<String>,
    pub containerd: ContainerdProfile,
    pub kubelet: KubeletProfile,
    /// The argv of a crictl-compatible CRI client on the node, flags included (absent: `crictl`, as on
    /// kind nodes; the test bed has `faultlab-cri`, because Debian has no crictl).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub crictl: Option<Vec<String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub disk: Option<DiskProfile>,
    /// The node package tarball that holds the pause image.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_package: Option<String>,
    pub images: ImageSet,
}

impl NodeProfile {
    /// How commands reach this node.
    pub fn access(&self) -> Option<NodeAccess> {
        match (&self.container, &self.netns) {
            (Some(container), _) => Some(NodeAccess::Docker { container: container.clone() }),
            (None, Some(netns)) => Some(NodeAccess::Netns { netns: netns.clone() }),
            (None, None) => None,
        }
    }

    /// `crictl ARGS...` with this node's CRI client.
    pub fn crictl<I, S>(&self, args: I) -> Cmd
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        let mut argv = self.crictl.clone().unwrap_or_else(|| vec!["crictl".into()]);
        argv.extend(args.into_iter().map(Into::into));
        Cmd::new(argv)
    }

    /// `ctr --address <socket> -n <namespace> ARGS...` for this node's containerd.
    pub fn ctr<I, S>(&self, args: I) -> Cmd
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        let mut argv: Vec<String> = vec![
            "ctr".into(),
            "--address".into(),
            self.containerd.address.clone(),
            "-n".into(),
            self.containerd.namespace.clone(),
        ];
        argv.extend(args.into_iter().map(Into::into));
        Cmd { argv, timeout: DEFAULT_TIMEOUT, stdin: None }
    }

    pub fn restart_kubelet(&self) -> Cmd {
        Cmd::new(self.kubelet.restart.clone()).timeout(Duration::from_secs(120))
    }

    pub fn restart_containerd(&self) -> Cmd {
        Cmd::new(self.containerd.restart.clone()).timeout(Duration::from_secs(120))
    }

    /// Where kubelet keeps its CPU manager checkpoint.
    pub fn cpu_manager_state(&self) -> PathBuf {
        PathBuf::from(&self.kubelet.root_dir).join("cpu_manager_state")
    }
}
