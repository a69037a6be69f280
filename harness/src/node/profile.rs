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
    /// `ssh [options] <destination> -- '<command line>'`: any machine you can log in to (a VM, your
    /// own cluster's nodes), as root or a user for whom the node's commands work.
    Ssh(SshAccess),
}

/// How to reach a node by ssh. Authentication is ssh's own (keys, agent, `~/.ssh/config`): faultlab
/// runs `ssh` in batch mode and never answers a prompt.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SshAccess {
    /// `[user@]host`, as ssh takes it.
    pub destination: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub port: Option<u16>,
    /// A private key file (`ssh -i`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub identity_file: Option<String>,
    /// More ssh arguments, before the destination (for example `-o UserKnownHostsFile=...`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub options: Vec<String>,
}

impl SshAccess {
    /// Why `destination` cannot be one, if it cannot: one that begins with `-` would be read by ssh as
    /// an option (`-oProxyCommand=...` runs a command on this machine), and whitespace or a control
    /// character is no host's name and would be split or shown falsely where it is printed.
    pub fn destination_problem(&self) -> Option<String> {
        let d = &self.destination;
        let why = if d.is_empty() {
            "it is empty"
        } else if d.starts_with('-') {
            "it begins with '-', so ssh would read it as an option"
        } else if d.chars().any(char::is_whitespace) {
            "it has whitespace in it"
        } else if d.chars().any(char::is_control) {
            "it has a control character in it"
        } else {
            return None;
        };
        Some(format!("{:?} is not an ssh destination ([user@]host): {why}", crate::terminal::field(d)))
    }
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
            NodeAccess::Ssh(ssh) => {
                // ssh hands the remote side one command line, which the login shell splits again: the
                // argv goes quoted, so the node runs exactly these words.
                let mut v: Vec<String> = vec!["ssh".into(), "-T".into(), "-o".into(), "BatchMode=yes".into(), "-o".into(), "ConnectTimeout=15".into()];
                if let Some(port) = ssh.port {
                    v.extend(["-p".into(), port.to_string()]);
                }
                if let Some(key) = &ssh.identity_file {
                    v.extend(["-i".into(), key.clone()]);
                }
                v.extend(ssh.options.iter().cloned());
                // `--` before the destination: nothing after it is read as an option, whatever the
                // destination says (OpenSSH then takes the next word as the destination, the rest as
                // the command).
                v.extend(["--".into(), ssh.destination.clone(), crate::cmd::shell_join(&Self::inner(cmd))]);
                return v;
            }
        };
        argv.extend(Self::inner(cmd));
        argv
    }

    /// `timeout -k 5 N ARGV...`: TERM after N seconds, KILL five seconds later, inside the node.
    fn inner(cmd: &Cmd) -> Vec<String> {
        let mut argv = vec!["timeout".to_string(), "-k".to_string(), "5".to_string(), cmd.timeout.as_secs().max(1).to_string()];
        argv.extend(cmd.argv.iter().cloned());
        argv
    }

    /// How long the host waits: the inner timeout plus the kill grace and some slack.
    pub fn host_timeout(cmd: &Cmd) -> Duration {
        cmd.timeout + Duration::from_secs(15)
    }
}

/// The label of a node image (kind) that names its runc of another release, by its path on the node
/// ([`ContainerdProfile::foreign_runc`]).
pub const FOREIGN_RUNC_LABEL: &str = "dev.faultlab.foreign-runc";

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
    /// containerd's own `ctr` on the node, where it is not the one on the node's PATH (the test bed's
    /// containerd 2 nodes: sid's ctr beside its containerd, bookworm's 1.6 on PATH).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ctr: Option<String>,
    /// A runc from another release than the node's, on the node, that the node cannot run (Debian
    /// sid's, which needs a newer C library than a bookworm node has): the part runtime-parts-mismatch
    /// puts where containerd takes runc from, as a reinstall from the wrong release would. Absent: the
    /// node has none, and that fault says so before changing anything.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub foreign_runc: Option<String>,
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
    /// Node argv that stop the kubelet and keep it stopped, start it again and print `running` while it
    /// runs: a node whose kubelet is gone, as a failed node's is (absent: the platform does not let
    /// faults stop it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub control: Option<ComponentControl>,
}

/// faultlab's CSI driver on a node: its node plugin (`faultlab-cri csi-node`) runs there, registered
/// with the kubelet, and a volume is a directory in `disks`, which every node of the cluster shares
/// (a disk on a network, attached to one node at a time by the controller manager).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CsiProfile {
    /// The driver's name (`disk.faultlab.dev`).
    pub driver: String,
    /// Where the node plugin keeps its volumes, a directory each (on the node).
    pub disks: String,
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
    /// How to reach the node by ssh (a VM, a machine of your own).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ssh: Option<SshAccess>,
    /// The node's CPU architecture as Go and OCI name it (`amd64`, `arm64`); absent: this machine's
    /// (kind's nodes and the test bed's own node share the host's CPU).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub arch: Option<String>,
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
    /// Where an image registry that a scenario starts for this node lives (absent: the platform has
    /// none, and scenarios that pull from one cannot run on it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub registry: Option<RegistryProfile>,
    /// How faults stop and start the cluster's control plane (absent: the platform does not let them).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub control_plane: Option<ControlPlaneProfile>,
    /// faultlab's CSI driver on the node, if the platform runs it there.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub csi: Option<CsiProfile>,
}

/// How faults stop and start the control plane's components: argv data, run on this machine (the test
/// bed's control plane is processes of the host) or on the node (kind's static pods).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ControlPlaneProfile {
    /// Where the commands run.
    pub on: CommandsOn,
    /// By component (`kube-controller-manager`).
    pub components: std::collections::BTreeMap<String, ComponentControl>,
}

/// Where a platform's commands run.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub enum CommandsOn {
    /// This machine.
    Host,
    /// The node, as every node command.
    Node,
}

/// The commands of one control-plane component.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ComponentControl {
    /// Stops it and keeps it stopped; returns once it is gone.
    pub stop: Vec<String>,
    /// Starts it again (nothing if it runs); returns once it runs.
    pub start: Vec<String>,
    /// Prints `running` while it runs.
    pub status: Vec<String>,
}

/// Where a registry a scenario starts (on this machine, the host) listens, and how the node reaches
/// it. Ports are fixed (the scenario's registry and a private one; the faults' registry module).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RegistryProfile {
    /// The host address the registry listens on (the host's end of the node's link, the kind
    /// network's gateway, or 127.0.0.1 where QEMU's user network forwards the node to it).
    pub listen: String,
    /// The address the node reaches it at (what image references name).
    pub address: String,
    /// containerd's registry hosts directory on the node (the CRI plugin's `registry.config_path`),
    /// where a registry's `hosts.toml` and CA go.
    pub hosts_dir: String,
}

impl RegistryProfile {
    /// The port of a scenario's registry: what `${registry}` names.
    pub const PORT: u16 = 5443;
    /// The port of a second registry, a private one a fix moves the image to: `${registry.private}`.
    pub const PRIVATE_PORT: u16 = 5444;

    /// `address:port`, as image references name a registry.
    pub fn endpoint(&self, port: u16) -> String {
        format!("{}:{port}", self.address)
    }
}

impl NodeProfile {
    /// How commands reach this node.
    pub fn access(&self) -> Option<NodeAccess> {
        match (&self.container, &self.netns, &self.ssh) {
            (Some(container), _, _) => Some(NodeAccess::Docker { container: container.clone() }),
            (None, Some(netns), _) => Some(NodeAccess::Netns { netns: netns.clone() }),
            (None, None, Some(ssh)) => Some(NodeAccess::Ssh(ssh.clone())),
            (None, None, None) => None,
        }
    }

    /// The node's CPU architecture: what images made for it must say.
    pub fn arch(&self) -> &str {
        match &self.arch {
            Some(arch) => arch,
            None => crate::image::host_arch(),
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
            self.containerd.ctr.clone().unwrap_or_else(|| "ctr".into()),
            "--address".into(),
            self.containerd.address.clone(),
            "-n".into(),
            self.containerd.namespace.clone(),
        ];
        argv.extend(args.into_iter().map(Into::into));
        Cmd { argv, timeout: DEFAULT_TIMEOUT, stdin: None, ask: None }
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

#[cfg(test)]
mod tests {
    use super::*;

    fn ssh() -> NodeAccess {
        NodeAccess::Ssh(SshAccess {
            destination: "root@127.0.0.1".into(),
            port: Some(2222),
            identity_file: Some("/var/lib/faultlab/arm64/id_ed25519".into()),
            options: vec!["-o".into(), "UserKnownHostsFile=/var/lib/faultlab/arm64/known_hosts".into()],
        })
    }

    #[test]
    fn ssh_runs_the_command_line_quoted_with_the_inner_timeout() {
        let cmd = Cmd::new(["sh", "-c", "echo \"it's\" $HOME"]).timeout(Duration::from_secs(30));
        let argv = ssh().wrap(&cmd);
        assert_eq!(
            argv[..12],
            ["ssh", "-T", "-o", "BatchMode=yes", "-o", "ConnectTimeout=15", "-p", "2222", "-i", "/var/lib/faultlab/arm64/id_ed25519", "-o", "UserKnownHostsFile=/var/lib/faultlab/arm64/known_hosts"]
        );
        assert_eq!(argv[12..14], ["--", "root@127.0.0.1"]);
        // One remote command line: the inner timeout and the argv, each word quoted for the node's shell.
        assert_eq!(argv[14], "timeout -k 5 30 sh -c 'echo \"it'\\''s\" $HOME'");
        assert_eq!(argv.len(), 15);
        let plain = NodeAccess::Ssh(SshAccess { destination: "node-1".into(), port: None, identity_file: None, options: vec![] });
        assert_eq!(plain.wrap(&Cmd::new(["ip", "route"])), ["ssh", "-T", "-o", "BatchMode=yes", "-o", "ConnectTimeout=15", "--", "node-1", "timeout -k 5 60 ip route"]);
    }

    /// What the remote login shell does with ssh's one command line: split it again. A stand-in for
    /// ssh runs its last argument with `sh -c`, so the words the node's command gets are checked
    /// for real, without a network.
    #[test]
    fn the_node_gets_exactly_the_words_of_the_argv() {
        let dir = tempfile::tempdir().unwrap();
        let stand_in = dir.path().join("ssh");
        std::fs::write(&stand_in, "#!/bin/sh\nfor last; do :; done\nexec sh -c \"$last\"\n").unwrap();
        std::fs::set_permissions(&stand_in, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
        let words = ["a b", "it's", "$HOME", "\"q\"", "*", "x;y", "new\nline"];
        let mut argv = vec!["printf".to_string(), "[%s]".into()];
        argv.extend(words.iter().map(|w| w.to_string()));
        let wrapped = ssh().wrap(&Cmd::new(argv));
        let out = std::process::Command::new(&stand_in).args(&wrapped[1..]).output().unwrap();
        assert!(out.status.success(), "{out:?}");
        let want: String = words.iter().map(|w| format!("[{w}]")).collect();
        assert_eq!(String::from_utf8(out.stdout).unwrap(), want);
    }

    #[test]
    fn a_profile_with_ssh_is_reached_by_ssh() {
        let mut p = crate::testbed::tests::sample_profile();
        p.netns = None;
        p.ssh = Some(SshAccess { destination: "n".into(), port: None, identity_file: None, options: vec![] });
        assert!(matches!(p.access(), Some(NodeAccess::Ssh(s)) if s.destination == "n"));
        let text = "destination: root@vm\nport: 2222\nidentityFile: /k\noptions: [-o, A=b]\n";
        let decoded: SshAccess = crate::datafile::decode(std::path::Path::new("ssh.yaml"), text).unwrap();
        assert_eq!(decoded.port, Some(2222));
        let err = crate::datafile::decode::<SshAccess>(std::path::Path::new("ssh.yaml"), "destination: x\nuser: y\n").unwrap_err().to_string();
        assert!(err.contains("user"), "{err}");
    }
}
