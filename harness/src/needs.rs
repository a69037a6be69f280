//! What a fault needs from the platform its node runs on, as data. The fault states it; each platform
//! turns it into its own terms: kind composes its cluster config and node bootstrap from it
//! (`provider::kind`); the test bed has all of it already (its own containerd disk, a kubelet
//! flags file, local images), and a fault adjusts the test bed itself in `prepare` where it must.
//! Faults depend on this module, never on a provider.

/// A fault's needs. The default needs nothing of the platform.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Needs {
    /// The node's containerd uses this local sandbox image, made on the node from its own pause image
    /// before the workload starts (so the fault can remove it, and the fix import it again).
    pub local_sandbox_image: Option<String>,
    /// The kubelet runs the static CPU manager policy with this much CPU reserved (`500m`).
    pub static_cpu_manager: Option<String>,
    /// containerd's root is a disk of its own of this many MiB (a loop file), so that filling it fills
    /// only that disk.
    pub containerd_disk_mib: Option<u64>,
    /// The kubelet neither evicts pods for a full image disk nor collects unused images.
    pub no_image_gc: bool,
    /// No default CNI: the scenario brings its own.
    pub no_default_cni: bool,
    /// What the fault writes to the node's disk beyond the containerd disk, at most, in MiB (on kind
    /// the node's disk is the host's).
    pub disk_writes_mib: u64,
    /// Ports of this machine that the fault's helpers listen on (a run's registry and its proxy): two
    /// scenarios naming the same port on the same address never run at once (`faultlab run --jobs`).
    pub host_ports: Vec<crate::schedule::HostPort>,
}
