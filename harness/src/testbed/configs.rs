//! A test bed node's configuration files, as `ci/testbed/up` writes them (`faultlab testbed config`):
//! containerd's `config.toml` (`version = 2` for bookworm's containerd 1.6, `version = 3` for sid's 2.x),
//! the CNI network list and the kubelet's KubeletConfiguration. Their shape lives here, the values in the
//! test bed's scripts only (`ci/testbed/lib.sh`, passed as flags), as the description's do ([`super::Facts`]).
//!
//! The values go into the files as they are, so a value that would need quoting in TOML, JSON or YAML
//! (blanks, quotes, backslashes, `#`, control characters) is refused, naming its flag.

use std::fmt::Write as _;

/// The nodes' container runtime (`ci/testbed/up --runtime`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Runtime {
    /// Debian bookworm's containerd 1.6: a `version = 2` config.
    Containerd,
    /// Debian sid's containerd 2.x: a `version = 3` config, runc named by path (bookworm's).
    Containerd2,
}

/// Which of the node's files.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum ConfigFile {
    /// containerd's `config.toml`.
    Containerd,
    /// The CNI network list (`10-faultlab.conflist`): a bridge with host-local addresses, and portmap.
    Cni,
    /// The kubelet's KubeletConfiguration (`config.yaml`).
    Kubelet,
}

/// What `ci/testbed/up` knows of a node, as `faultlab testbed config` takes it (each a path, address or
/// name from `ci/testbed/lib.sh`'s `fl_node_select`).
#[derive(Clone, Debug, clap::Args)]
pub struct NodeConfig {
    /// The node's name.
    #[arg(long)]
    pub node: String,
    /// The network namespace its daemons run in.
    #[arg(long)]
    pub netns: String,
    #[arg(long, value_enum)]
    pub runtime: Runtime,
    /// containerd's root (the node's loop disk), state directory, socket and opt plugin's directory.
    #[arg(long)]
    pub containerd_root: String,
    #[arg(long)]
    pub containerd_state: String,
    #[arg(long)]
    pub containerd_socket: String,
    #[arg(long)]
    pub containerd_opt: String,
    /// The pause image every pod sandbox runs.
    #[arg(long)]
    pub sandbox_image: String,
    /// containerd's registry hosts directory (`config_path`).
    #[arg(long)]
    pub registry_hosts_dir: String,
    /// The runc binary the config names: the node's own link to bookworm's (up makes it in the node's
    /// `runtime` directory, so a fault that replaces runc, runtime-parts-mismatch, replaces this node's only;
    /// sid's runc, which containerd 2 comes with, needs a newer glibc than bookworm's).
    #[arg(long)]
    pub runc: String,
    /// Where containerd's CRI reads the CNI network list from, and host-local's address records.
    #[arg(long)]
    pub cni_conf_dir: String,
    /// Where containerd's CRI finds the CNI plugins: the node's own directory (links to the host's
    /// /usr/lib/cni, made by `up`), so a fault that takes a plugin away takes it from this node only.
    #[arg(long)]
    pub cni_bin_dir: String,
    #[arg(long)]
    pub cni_data: String,
    /// The node's pods' range and its bridge's address.
    #[arg(long)]
    pub pod_cidr: String,
    #[arg(long)]
    pub pod_gateway: String,
    /// The address the kubelet serves on (the node's).
    #[arg(long)]
    pub address: String,
    /// The CA the kubelet checks its clients' certificates with.
    #[arg(long)]
    pub client_ca: String,
    /// The cluster DNS address the kubelet gives pods (none runs; without one it warns for every pod).
    #[arg(long)]
    pub cluster_dns: String,
    #[arg(long)]
    pub kubelet_root: String,
    /// The kubelet's extra-flags file (named in the config's comment: its flags win).
    #[arg(long)]
    pub kubelet_extra_flags: String,
    /// The kubelet's cgroup root; empty (node 1): the kubelet's default.
    #[arg(long, default_value = "")]
    pub cgroup_root: String,
}

/// A value that cannot go into the files as it is.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("--{flag} {value:?}: {why}")]
pub struct BadValue {
    pub flag: &'static str,
    pub value: String,
    pub why: &'static str,
}

impl NodeConfig {
    /// The file's text; a value that would need quoting is an error naming its flag.
    pub fn render(&self, file: ConfigFile) -> Result<String, BadValue> {
        self.check()?;
        Ok(match file {
            ConfigFile::Containerd => self.containerd(),
            ConfigFile::Cni => self.cni(),
            ConfigFile::Kubelet => self.kubelet(),
        })
    }

    fn check(&self) -> Result<(), BadValue> {
        let values = [
            ("node", &self.node),
            ("netns", &self.netns),
            ("containerd-root", &self.containerd_root),
            ("containerd-state", &self.containerd_state),
            ("containerd-socket", &self.containerd_socket),
            ("containerd-opt", &self.containerd_opt),
            ("sandbox-image", &self.sandbox_image),
            ("registry-hosts-dir", &self.registry_hosts_dir),
            ("runc", &self.runc),
            ("cni-conf-dir", &self.cni_conf_dir),
            ("cni-bin-dir", &self.cni_bin_dir),
            ("cni-data", &self.cni_data),
            ("pod-cidr", &self.pod_cidr),
            ("pod-gateway", &self.pod_gateway),
            ("address", &self.address),
            ("client-ca", &self.client_ca),
            ("cluster-dns", &self.cluster_dns),
            ("kubelet-root", &self.kubelet_root),
            ("kubelet-extra-flags", &self.kubelet_extra_flags),
            ("cgroup-root", &self.cgroup_root),
        ];
        for (flag, value) in values {
            let bad = |why| Err(BadValue { flag, value: value.clone(), why });
            if value.is_empty() && flag != "cgroup-root" {
                return bad("empty");
            }
            if value.chars().any(|c| c.is_whitespace() || c.is_control() || matches!(c, '"' | '\'' | '\\' | '#')) {
                return bad("it holds a blank, a quote, a backslash, '#' or a control character, which the files would need quoted");
            }
        }
        Ok(())
    }

    /// containerd's configuration: what both versions share, then the CRI plugin's settings under the
    /// names of the runtime's version.
    fn containerd(&self) -> String {
        match self.runtime {
            Runtime::Containerd => self.containerd_head(2, "containerd", DISABLED_1_6) + &self.containerd_v2_cri(),
            Runtime::Containerd2 => self.containerd_head(3, "containerd 2", DISABLED_2) + &self.containerd_v3_cri(),
        }
    }

    /// The part both versions share: the node's paths, its socket, no other listener, up to `[plugins]`
    /// and the opt plugin.
    fn containerd_head(&self, version: u32, what: &str, disabled: &[&str]) -> String {
        let NodeConfig { node, netns, containerd_root: root, containerd_state: state, containerd_socket: socket, containerd_opt: opt, .. } = self;
        let disabled = disabled.iter().map(|p| format!("\"{p}\"")).collect::<Vec<_>>().join(", ");
        format!(
            r#"# faultlab test bed: {what} of the node {node} (runs in network namespace {netns}).
version = {version}
root = "{root}"
state = "{state}"
oom_score = 0
disabled_plugins = [{disabled}]

[grpc]
  address = "{socket}"

[ttrpc]
  address = ""

[debug]
  address = ""

[metrics]
  address = ""

[plugins]
  [plugins."io.containerd.internal.v1.opt"]
    path = "{opt}"
"#
        )
    }

    /// containerd 1.6's CRI plugin (`version = 2`).
    fn containerd_v2_cri(&self) -> String {
        let NodeConfig { sandbox_image, runc, containerd_state: state, cni_conf_dir, cni_bin_dir, registry_hosts_dir, .. } = self;
        format!(
            r#"  [plugins."io.containerd.grpc.v1.cri"]
    sandbox_image = "{sandbox_image}"
    restrict_oom_score_adj = true
    stream_server_address = "127.0.0.1"
    stream_server_port = "0"
    enable_selinux = false
    [plugins."io.containerd.grpc.v1.cri".containerd]
      snapshotter = "overlayfs"
      default_runtime_name = "runc"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
        runtime_type = "io.containerd.runc.v2"
        [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
          BinaryName = "{runc}"
          SystemdCgroup = false
          Root = "{state}/runc"
    [plugins."io.containerd.grpc.v1.cri".cni]
      bin_dir = "{cni_bin_dir}"
      conf_dir = "{cni_conf_dir}"
      max_conf_num = 1
    [plugins."io.containerd.grpc.v1.cri".registry]
      # Per-registry hosts.toml and CAs (a scenario's registry puts its own here).
      config_path = "{registry_hosts_dir}"
"#
        )
    }

    /// containerd 2's (`version = 3`): the same settings under the CRI plugin's 2.x names (images:
    /// sandbox image, snapshotter, registry hosts; runtime: runc, CNI, OOM score); the stream server
    /// stays under `io.containerd.grpc.v1.cri`.
    fn containerd_v3_cri(&self) -> String {
        let NodeConfig { sandbox_image, registry_hosts_dir, runc, containerd_state: state, cni_conf_dir, cni_bin_dir, .. } = self;
        format!(
            r#"  [plugins."io.containerd.cri.v1.images"]
    snapshotter = "overlayfs"
    [plugins."io.containerd.cri.v1.images".pinned_images]
      sandbox = "{sandbox_image}"
    [plugins."io.containerd.cri.v1.images".registry]
      # Per-registry hosts.toml and CAs (a scenario's registry puts its own here).
      config_path = "{registry_hosts_dir}"
  [plugins."io.containerd.cri.v1.runtime"]
    restrict_oom_score_adj = true
    enable_selinux = false
    [plugins."io.containerd.cri.v1.runtime".containerd]
      default_runtime_name = "runc"
      [plugins."io.containerd.cri.v1.runtime".containerd.runtimes.runc]
        runtime_type = "io.containerd.runc.v2"
        [plugins."io.containerd.cri.v1.runtime".containerd.runtimes.runc.options]
          BinaryName = "{runc}"
          SystemdCgroup = false
          Root = "{state}/runc"
    [plugins."io.containerd.cri.v1.runtime".cni]
      bin_dirs = ["{cni_bin_dir}"]
      conf_dir = "{cni_conf_dir}"
      max_conf_num = 1
  [plugins."io.containerd.grpc.v1.cri"]
    stream_server_address = "127.0.0.1"
    stream_server_port = "0"
"#
        )
    }

    /// The CNI network list: the node's bridge cni0 with the pods' range (masqueraded inside the node's
    /// network namespace), host-local addresses, and portmap.
    fn cni(&self) -> String {
        let NodeConfig { cni_data, pod_cidr, pod_gateway, .. } = self;
        format!(
            r#"{{
  "cniVersion": "0.4.0",
  "name": "faultlab",
  "plugins": [
    {{
      "type": "bridge",
      "bridge": "cni0",
      "isGateway": true,
      "ipMasq": true,
      "hairpinMode": true,
      "ipam": {{
        "type": "host-local",
        "dataDir": "{cni_data}/networks",
        "ranges": [[{{"subnet": "{pod_cidr}", "gateway": "{pod_gateway}"}}]],
        "routes": [{{"dst": "0.0.0.0/0"}}]
      }}
    }},
    {{"type": "portmap", "capabilities": {{"portMappings": true}}}}
  ]
}}
"#
        )
    }

    /// The KubeletConfiguration. (`clusterDomain` stands twice, as the file always had it; the kubelet
    /// takes the last.)
    fn kubelet(&self) -> String {
        let NodeConfig { node, kubelet_extra_flags, address, client_ca, cluster_dns, kubelet_root, cgroup_root, .. } = self;
        let mut text = format!(
            r#"# faultlab test bed: kubelet of node {node}. Command-line flags (see {kubelet_extra_flags}) override this.
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
address: {address}
port: 10250
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: 10248
authentication:
  anonymous:
    enabled: false
  webhook:
    enabled: true
  x509:
    clientCAFile: {client_ca}
authorization:
  mode: Webhook
cgroupDriver: cgroupfs
failSwapOn: false
clusterDomain: cluster.local
resolvConf: /etc/resolv.conf
# No DNS add-on runs here and no pod resolves names, but without a cluster DNS address the kubelet
# warns MissingClusterDNS for every pod it starts, which would litter every scenario's events.
clusterDNS: [{cluster_dns}]
clusterDomain: cluster.local
volumePluginDir: {kubelet_root}/volume-plugins
serializeImagePulls: false
# containerd's disk is a 1 GiB loop mount: with the default thresholds a nearly full disk evicts
# every pod at once, and image GC removes the pause image. Keep both out of the faults' way.
# nodefs is the host's own disk (the kubelet's root directory): an amount, not a share of it, so that a
# large disk with a few per cent free (here 252 GiB, of which a build tree once left 20 GiB, 8%) does
# not come near putting every node under DiskPressure.
evictionHard:
  imagefs.available: "0%"
  imagefs.inodesFree: "0%"
  nodefs.available: "1Gi"
  nodefs.inodesFree: "5%"
  memory.available: "100Mi"
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
"#
        );
        // Nodes 2..N's kubelets share the host's cgroup tree: each keeps to a root of its own, under
        // which it makes its kubepods (ci/testbed/lib/node.sh fl_setup_cgroup_root). Node 1's: nothing.
        if !cgroup_root.is_empty() {
            writeln!(text, "# Two kubelets on one cgroup tree: this one keeps to its own root.\ncgroupRoot: {cgroup_root}").expect("writing to a String");
        }
        text
    }
}

/// The plugins containerd 1.6 does not load: snapshotters the node has no use for, and tracing.
const DISABLED_1_6: &[&str] = &[
    "io.containerd.snapshotter.v1.aufs",
    "io.containerd.snapshotter.v1.btrfs",
    "io.containerd.snapshotter.v1.devmapper",
    "io.containerd.snapshotter.v1.zfs",
    "io.containerd.tracing.processor.v1.otlp",
    "io.containerd.internal.v1.tracing",
];

/// containerd 2's: also its newer snapshotters, and NRI, on by default in 2.x (it would make
/// /var/run/nri on the host).
const DISABLED_2: &[&str] = &[
    "io.containerd.snapshotter.v1.btrfs",
    "io.containerd.snapshotter.v1.devmapper",
    "io.containerd.snapshotter.v1.zfs",
    "io.containerd.snapshotter.v1.blockfile",
    "io.containerd.snapshotter.v1.erofs",
    "io.containerd.tracing.processor.v1.otlp",
    "io.containerd.internal.v1.tracing",
    "io.containerd.nri.v1.nri",
];

#[cfg(test)]
mod tests {
    use super::*;
    use crate::node::runtime::{ConfigVersion, ContainerdConfig, Setting};

    /// What `ci/testbed/up` passes for node `k` (fl_node_select K in ci/testbed/lib.sh).
    fn node(k: u32, runtime: Runtime) -> NodeConfig {
        let n = super::super::nodes::TestbedNode::of(k).unwrap();
        let (lib, tb, run) = (format!("/var/lib/faultlab{}", n.subdir), format!("/var/lib/faultlab/testbed{}", n.subdir), format!("/run/faultlab{}", n.subdir));
        NodeConfig {
            node: n.name.clone(),
            netns: n.name.clone(),
            runtime,
            containerd_root: format!("{lib}/containerd"),
            containerd_state: format!("{run}/containerd"),
            containerd_socket: format!("{run}/containerd/containerd.sock"),
            containerd_opt: format!("{lib}/containerd-opt"),
            sandbox_image: "faultlab.invalid/cce-pause:3.1".into(),
            registry_hosts_dir: format!("{tb}/containerd/certs.d"),
            runc: format!("{tb}/runtime/runc"),
            cni_conf_dir: format!("{tb}/cni/net.d"),
            cni_bin_dir: format!("{tb}/cni/bin"),
            cni_data: format!("{lib}/cni"),
            pod_cidr: format!("{}/24", n.pod_net),
            pod_gateway: n.pod_gateway.to_string(),
            address: n.node_ip.to_string(),
            client_ca: "/var/lib/faultlab/testbed/pki/ca.crt".into(),
            cluster_dns: "198.19.176.10".into(),
            kubelet_root: format!("{lib}/kubelet"),
            kubelet_extra_flags: format!("{tb}/kubelet/extra-flags"),
            cgroup_root: n.cgroup_root.clone(),
        }
    }

    fn fixture(name: &str) -> String {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/containerd").join(name);
        std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
    }

    /// Node 1's containerd configs are the samples that the runtime reader's tests read
    /// (tests/fixtures/containerd/testbed-v*.toml), byte for byte.
    #[rstest::rstest]
    #[case(Runtime::Containerd, "testbed-v2.toml")]
    #[case(Runtime::Containerd2, "testbed-v3.toml")]
    fn node_1s_containerd_config_is_the_sample(#[case] runtime: Runtime, #[case] sample: &str) {
        assert_eq!(node(1, runtime).render(ConfigFile::Containerd).unwrap(), fixture(sample));
    }

    /// Each version's file reads back, with faultlab's own reader, as the node's settings at the keys
    /// of its version.
    #[rstest::rstest]
    #[case(Runtime::Containerd, ConfigVersion::V2)]
    #[case(Runtime::Containerd2, ConfigVersion::V3)]
    fn the_containerd_config_reads_back_at_its_versions_keys(#[case] runtime: Runtime, #[case] version: ConfigVersion) {
        let facts = node(2, runtime);
        let text = facts.render(ConfigFile::Containerd).unwrap();
        let config = ContainerdConfig::parse("config.toml", &text).unwrap();
        assert_eq!(config.version(), version);
        assert_eq!(config.configured_sandbox_image(), Some("faultlab.invalid/cce-pause:3.1"));
        assert_eq!(config.cni_conf_dir(), "/var/lib/faultlab/testbed/nodes/faultlab-node-2/cni/net.d");
        assert_eq!(config.registry_config_path(), Some("/var/lib/faultlab/testbed/nodes/faultlab-node-2/containerd/certs.d"));
        assert!(!config.systemd_cgroup());
        assert!(config.ignored_keys().is_empty(), "{:?}", config.ignored_keys());
        assert!(text.contains("address = \"/run/faultlab/nodes/faultlab-node-2/containerd/containerd.sock\"\n"), "{text}");
        assert!(text.starts_with("# faultlab test bed: containerd"), "{text}");
        assert!(config.get(Setting::SandboxImage).is_some());
        // Both name the node's own runc (a link to bookworm's); containerd 2's turns NRI off.
        assert_eq!(config.runc_binary(), Some("/var/lib/faultlab/testbed/nodes/faultlab-node-2/runtime/runc"));
        assert_eq!(text.contains("\"io.containerd.nri.v1.nri\""), runtime == Runtime::Containerd2, "{text}");
    }

    /// The CNI list: node 3's range and bridge address, valid JSON.
    #[test]
    fn the_cni_list_has_the_nodes_pod_range() {
        let text = node(3, Runtime::Containerd).render(ConfigFile::Cni).unwrap();
        let json: serde_json::Value = serde_json::from_str(&text).unwrap();
        let ipam = &json["plugins"][0]["ipam"];
        assert_eq!(ipam["ranges"][0][0], serde_json::json!({"subnet": "198.19.162.0/24", "gateway": "198.19.162.1"}));
        assert_eq!(ipam["dataDir"], "/var/lib/faultlab/nodes/faultlab-node-3/cni/networks");
        assert_eq!(json["plugins"][1]["type"], "portmap");
    }

    /// The kubelet's config: node 1's with no cgroup root (the file as it was), node 2's with its own.
    #[test]
    fn the_kubelet_config_gives_nodes_after_the_first_a_cgroup_root() {
        let one = node(1, Runtime::Containerd).render(ConfigFile::Kubelet).unwrap();
        assert!(!one.contains("cgroupRoot"), "{one}");
        assert!(one.ends_with("imageGCLowThresholdPercent: 99\n"), "{one}");
        assert!(one.contains("\naddress: 198.18.213.2\n"), "{one}");
        let two = node(2, Runtime::Containerd).render(ConfigFile::Kubelet).unwrap();
        assert!(two.ends_with("imageGCLowThresholdPercent: 99\n# Two kubelets on one cgroup tree: this one keeps to its own root.\ncgroupRoot: /faultlab-node-2\n"), "{two}");
        assert!(two.starts_with("# faultlab test bed: kubelet of node faultlab-node-2. Command-line flags (see /var/lib/faultlab/testbed/nodes/faultlab-node-2/kubelet/extra-flags) override this.\n"), "{two}");
        assert!(two.contains("\nvolumePluginDir: /var/lib/faultlab/nodes/faultlab-node-2/kubelet/volume-plugins\n"), "{two}");
    }

    /// Every file ends in exactly one newline (the scripts read it through `$(...)`, which drops them,
    /// and write it with one).
    #[test]
    fn every_file_ends_in_one_newline() {
        for runtime in [Runtime::Containerd, Runtime::Containerd2] {
            for file in [ConfigFile::Containerd, ConfigFile::Cni, ConfigFile::Kubelet] {
                for k in [1, 2] {
                    let text = node(k, runtime).render(file).unwrap();
                    assert!(text.ends_with('\n') && !text.ends_with("\n\n"), "{file:?} of node {k}: {text:?}");
                }
            }
        }
    }

    /// A value the files would need quoted is refused, naming its flag; so is an empty one (but the
    /// cgroup root's).
    #[rstest::rstest]
    #[case::quote("containerd-root", "/var/lib/x\"y")]
    #[case::blank("containerd-root", "/var/lib/x y")]
    #[case::newline("containerd-root", "/x\nversion = 1")]
    #[case::empty("containerd-root", "")]
    #[case::hash("cgroup-root", "/a#b")]
    fn a_value_that_needs_quoting_is_refused(#[case] flag: &str, #[case] value: &str) {
        let mut facts = node(1, Runtime::Containerd);
        match flag {
            "containerd-root" => facts.containerd_root = value.into(),
            _ => facts.cgroup_root = value.into(),
        }
        let err = facts.render(ConfigFile::Containerd).unwrap_err();
        assert_eq!(err.flag, flag);
        assert!(err.to_string().starts_with(&format!("--{flag} {value:?}: ")), "{err}");
    }
}
