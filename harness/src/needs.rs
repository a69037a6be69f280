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
    /// The workload moves off the run's node to another, as a failed node's pods do once evicted: the
    /// cluster needs a second node the workload may run on, and the run prefers its node for the
    /// workload rather than pinning it there (on a cluster of one node the run is refused).
    pub moves_between_nodes: bool,
    /// faultlab's CSI driver (`disk.faultlab.dev`): its node plugin on every node, its volumes in a
    /// directory the nodes share (the test bed runs it always; kind starts it on nodes whose image
    /// carries faultlab-cri).
    pub csi_driver: bool,
    /// Ports of this machine that the fault's helpers listen on (a run's registry and its proxy): two
    /// scenarios naming the same port on the same address never run at once (`faultlab run --jobs`).
    pub host_ports: Vec<crate::schedule::HostPort>,
    /// The fault lowers a limit of the host's kernel for every process on it (a sysctl that is not
    /// namespaced for the nodes): on nodes that share this machine's kernel (kind's, the test bed's), no
    /// other run, of this faultlab process or another, may run beside it ([`crate::machine_lock`]).
    pub host_kernel: bool,
}

impl Needs {
    /// Whether a platform made for these needs is made differently from a default one (kind: a cluster
    /// created with config patches, a node bootstrap or without its CNI). Ports and disk writes are
    /// not: they are the run's, not the cluster's.
    pub fn shapes_cluster(&self) -> bool {
        self.local_sandbox_image.is_some() || self.static_cpu_manager.is_some() || self.containerd_disk_mib.is_some() || self.no_image_gc || self.no_default_cni || self.moves_between_nodes || self.csi_driver
    }

    /// The settings these needs make a platform with, in words ("nothing" for none).
    pub fn describe(&self) -> String {
        let mut parts: Vec<String> = Vec::new();
        if let Some(tag) = &self.local_sandbox_image {
            parts.push(format!("the local sandbox image {tag}"));
        }
        if let Some(reserved) = &self.static_cpu_manager {
            parts.push(format!("the static CPU manager policy ({reserved} CPU reserved)"));
        }
        if let Some(mib) = self.containerd_disk_mib {
            parts.push(format!("containerd on a {mib} MiB disk of its own"));
        }
        if self.no_image_gc {
            parts.push("no image garbage collection or disk eviction".into());
        }
        if self.no_default_cni {
            parts.push("no default CNI".into());
        }
        if self.moves_between_nodes {
            parts.push("a second node the workload can move to".into());
        }
        if self.csi_driver {
            parts.push("faultlab's CSI driver on every node".into());
        }
        if parts.is_empty() {
            "nothing".into()
        } else {
            parts.join(", ")
        }
    }

    /// Needs that one cluster can meet for a scenario of either `self` or `other`, one after the
    /// other: each setting either asks for is set, and none is set two ways (two sandbox images, two
    /// reservations, two disk sizes, a CNI and none). `None` when they conflict. Disk writes take the
    /// larger (one scenario runs on a cluster at a time, and its undo removes them); ports go with the
    /// run, not the cluster, and are left out.
    pub fn merged(&self, other: &Needs) -> Option<Needs> {
        fn either<T: Clone + PartialEq>(a: &Option<T>, b: &Option<T>) -> Option<Option<T>> {
            match (a, b) {
                (Some(x), Some(y)) if x != y => None,
                _ => Some(a.clone().or_else(|| b.clone())),
            }
        }
        if self.no_default_cni != other.no_default_cni {
            return None;
        }
        // A cluster of two nodes pins every other scenario's workload to a node: one of its own.
        if self.moves_between_nodes != other.moves_between_nodes {
            return None;
        }
        Some(Needs {
            local_sandbox_image: either(&self.local_sandbox_image, &other.local_sandbox_image)?,
            static_cpu_manager: either(&self.static_cpu_manager, &other.static_cpu_manager)?,
            containerd_disk_mib: either(&self.containerd_disk_mib, &other.containerd_disk_mib)?,
            no_image_gc: self.no_image_gc || other.no_image_gc,
            no_default_cni: self.no_default_cni,
            moves_between_nodes: self.moves_between_nodes,
            csi_driver: self.csi_driver || other.csi_driver,
            disk_writes_mib: self.disk_writes_mib.max(other.disk_writes_mib),
            host_ports: Vec::new(),
            host_kernel: false,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sandbox(tag: &str) -> Needs {
        Needs { local_sandbox_image: Some(tag.into()), ..Default::default() }
    }

    #[test]
    fn settings_of_different_kinds_merge_into_one_cluster() {
        let cpu = Needs { static_cpu_manager: Some("500m".into()), ..Default::default() };
        let disk = Needs { containerd_disk_mib: Some(3072), no_image_gc: true, disk_writes_mib: 600, ..Default::default() };
        let all = cpu.merged(&disk).and_then(|n| n.merged(&sandbox("faultlab.invalid/pause:local"))).expect("no conflict");
        assert_eq!(all.static_cpu_manager.as_deref(), Some("500m"));
        assert_eq!(all.containerd_disk_mib, Some(3072));
        assert!(all.no_image_gc && !all.no_default_cni);
        assert_eq!(all.local_sandbox_image.as_deref(), Some("faultlab.invalid/pause:local"));
        assert_eq!(all.disk_writes_mib, 600);
        assert!(all.shapes_cluster());
        assert_eq!(
            all.describe(),
            "the local sandbox image faultlab.invalid/pause:local, the static CPU manager policy (500m CPU reserved), containerd on a 3072 MiB disk of its own, no image garbage collection or disk eviction"
        );
        assert_eq!(Needs::default().describe(), "nothing");
        // Merging is symmetric, and merging the same needs changes nothing.
        assert_eq!(disk.merged(&cpu), cpu.merged(&disk));
        assert_eq!(all.merged(&all), Some(all.clone()));
    }

    #[test]
    fn a_setting_asked_for_two_ways_is_a_conflict() {
        assert_eq!(sandbox("a/pause:1").merged(&sandbox("b/pause:1")), None);
        let reserved = |r: &str| Needs { static_cpu_manager: Some(r.into()), ..Default::default() };
        assert_eq!(reserved("500m").merged(&reserved("1")), None);
        let disk = |mib| Needs { containerd_disk_mib: Some(mib), ..Default::default() };
        assert_eq!(disk(1024).merged(&disk(3072)), None);
        let no_cni = Needs { no_default_cni: true, ..Default::default() };
        assert_eq!(no_cni.merged(&Needs::default()), None, "a cluster has its CNI or has none");
        assert_eq!(no_cni.merged(&no_cni), Some(no_cni.clone()));
    }

    #[test]
    fn a_second_node_shapes_the_cluster_and_is_its_own() {
        let moves = Needs { moves_between_nodes: true, ..Default::default() };
        assert!(moves.shapes_cluster());
        assert_eq!(moves.describe(), "a second node the workload can move to");
        let cpu = Needs { static_cpu_manager: Some("500m".into()), ..Default::default() };
        assert_eq!(cpu.merged(&moves), None, "a cluster of two nodes is not shared with a scenario of one");
        assert!(moves.merged(&moves).is_some_and(|n| n.moves_between_nodes));
        let csi = Needs { csi_driver: true, ..Default::default() };
        assert!(csi.shapes_cluster());
        assert!(cpu.merged(&csi).is_some_and(|n| n.csi_driver && n.static_cpu_manager.is_some()), "the driver harms no other scenario");
    }

    #[test]
    fn ports_and_disk_writes_do_not_shape_a_cluster() {
        let run = Needs { disk_writes_mib: 100, host_ports: vec![crate::schedule::HostPort { port: 5443, on_node_address: true }], ..Default::default() };
        assert!(!run.shapes_cluster());
        assert!(Needs::default().merged(&run).is_some_and(|n| n.host_ports.is_empty() && n.disk_writes_mib == 100));
    }
}
