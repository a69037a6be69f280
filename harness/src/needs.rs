//! What a fault needs from the platform, as data: the fault states it, the platform turns it into its
//! own configuration (kind composes its cluster config and node bootstrap from it). Faults depend on
//! this module, never on a provider.

use serde_json::Value;

use crate::cmd::Cmd;

/// What a scenario needs from a kind cluster. Faults declare it; the provider composes the config.
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
    /// Room the fault takes on the host's disk, in MiB, under Docker's root (a loop file in a node's
    /// volume): checked before the cluster is created.
    pub host_disk_mib: u64,
}
