//! The test bed's nodes, 1 to [`MAX_NODES`] (`ci/testbed/up --nodes N`): what sets each apart on the one
//! host, computed from its number alone. Node 1 keeps the names, addresses and paths the single node
//! always had; node K (K >= 2):
//! - is named `faultlab-node-K`, which is also its network namespace's name;
//! - has the link `198.18.213.4(K-1)/30` to the host (RFC 2544's benchmarking range, never a private
//!   one: the link's host end lives in the host's own namespace), veth `fl-host(K-1)` on the host's
//!   side with `.4(K-1)+1`, `fl-node(K-1)` on the node's with `.4(K-1)+2`;
//! - runs its pods in `198.19.(159+K).0/24`, so that 16 nodes stay below the service range
//!   `198.19.176.0/20`;
//! - keeps its files under `nodes/faultlab-node-K` of each of the test bed's directories, its mount
//!   namespace in a file of that name, its kubelet's cgroups under `/faultlab-node-K`, and its kubelet's
//!   certificate as `node-faultlab-node-K`;
//! - as a VM (`ci/testbed/up --arch arm64 --nodes N`: each node a VM of its own, on QEMU's user-mode
//!   network, which is the VM's alone) has the address `198.18.214.(14+K)` in it and its ssh forwarded
//!   to the host's loopback port `22621+K` (node 1: 198.18.214.15 and 22622, as the single VM always had).
//!
//! The scripts read these from `ci/testbed/nodes`, one line a node, which `faultlab testbed nodes`
//! writes and this module's tests check: `ci/testbed/down` and the VM node's own scripts run where no
//! faultlab binary is (a host without a Rust build, a half-started test bed, the VM).

use std::fmt::Write as _;
use std::net::Ipv4Addr;

/// The most nodes a test bed has.
pub const MAX_NODES: u32 = 16;

/// Node 1's name, the single node's as it always was.
const FIRST: &str = "faultlab-node";

/// A node number the test bed does not have.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("no node {index}: the test bed's nodes are 1 to {MAX_NODES}")]
pub struct NoSuchNode {
    pub index: u32,
}

/// One node's own names, addresses and places.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TestbedNode {
    pub index: u32,
    /// Also its network namespace's name.
    pub name: String,
    pub veth_host: String,
    pub veth_node: String,
    /// The host's end of the node's link: the node's gateway (node 1's: where the API server listens).
    pub link_host_ip: Ipv4Addr,
    pub node_ip: Ipv4Addr,
    /// The pods' range (a /24) and its bridge's address.
    pub pod_net: Ipv4Addr,
    pub pod_gateway: Ipv4Addr,
    /// Where its files live below each of the test bed's directories: empty for node 1 (directly
    /// under them), `/nodes/<name>` for the others.
    pub subdir: String,
    /// Its mount namespace's file (empty: node 1 keeps the host's).
    pub mntns_file: String,
    /// Its kubelet's cgroup root (empty: node 1's kubelet keeps the default, `/`).
    pub cgroup_root: String,
    /// Its kubelet's certificate's name under the test bed's PKI.
    pub cert: String,
    /// As a VM: its address on its own user-mode network (the node's address then).
    pub vm_ip: Ipv4Addr,
    /// As a VM: the port of the host's loopback forwarded to its ssh.
    pub vm_ssh_port: u16,
}

/// Node K's name.
pub fn name_of(index: u32) -> String {
    if index == 1 { FIRST.to_string() } else { format!("{FIRST}-{index}") }
}

/// The K of a node's name, if it names one of the test bed's nodes.
pub fn index_of(name: &str) -> Option<u32> {
    (1..=MAX_NODES).find(|&k| name_of(k) == name)
}

impl TestbedNode {
    /// Node K; a K outside 1 to [`MAX_NODES`] is an error naming it.
    pub fn of(index: u32) -> Result<TestbedNode, NoSuchNode> {
        if !(1..=MAX_NODES).contains(&index) {
            return Err(NoSuchNode { index });
        }
        let name = name_of(index);
        // Both fit in a byte: at most 4 * 15 + 2 = 62 and 159 + 16 = 175.
        let link = 4 * (index - 1) as u8;
        let pods = 159 + index as u8;
        let own = |s: String| if index == 1 { String::new() } else { s };
        Ok(TestbedNode {
            index,
            veth_host: format!("fl-host{}", index - 1),
            veth_node: format!("fl-node{}", index - 1),
            link_host_ip: Ipv4Addr::new(198, 18, 213, link + 1),
            node_ip: Ipv4Addr::new(198, 18, 213, link + 2),
            pod_net: Ipv4Addr::new(198, 19, pods, 0),
            pod_gateway: Ipv4Addr::new(198, 19, pods, 1),
            subdir: own(format!("/nodes/{name}")),
            mntns_file: own(name.clone()),
            cgroup_root: own(format!("/{name}")),
            cert: if index == 1 { "node".into() } else { format!("node-{name}") },
            // At most 14 + 16 = 30 and 22621 + 16.
            vm_ip: Ipv4Addr::new(198, 18, 214, 14 + index as u8),
            vm_ssh_port: 22621 + index as u16,
            name,
        })
    }

    /// Its line of `ci/testbed/nodes`: `K KEY=value...`, each key the variable of `ci/testbed/lib.sh`
    /// that `fl_node_select K` sets from it.
    pub fn line(&self) -> String {
        let TestbedNode { index, name, veth_host, veth_node, link_host_ip, node_ip, pod_net, pod_gateway, subdir, mntns_file, cgroup_root, cert, vm_ip, vm_ssh_port } = self;
        format!(
            "{index} FL_NODE={name} FL_VETH_HOST={veth_host} FL_VETH_NODE={veth_node} FL_LINK_HOST_IP={link_host_ip} FL_NODE_IP={node_ip} \
             FL_POD_CIDR={pod_net}/24 FL_POD_GW={pod_gateway} FL_NODE_SUBDIR={subdir} FL_NODE_MNTNS_FILE={mntns_file} FL_CGROUP_ROOT={cgroup_root} FL_NODE_CERT={cert} \
             FL_VM_IP={vm_ip} FL_VM_SSH_PORT={vm_ssh_port}"
        )
    }
}

/// `ci/testbed/nodes`: every node's line, after a comment that says where they come from.
pub fn table() -> String {
    let mut text = String::from(
        "# The test bed's nodes: node K's own names, addresses and places (harness/src/testbed/nodes.rs), one line a\n\
         # node, which ci/testbed/lib.sh's fl_node_select K reads. Written by `faultlab testbed nodes >ci/testbed/nodes`;\n\
         # the tests of nodes.rs fail when it differs.\n",
    );
    for k in 1..=MAX_NODES {
        let node = TestbedNode::of(k).expect("1 to MAX_NODES are nodes");
        writeln!(text, "{}", node.line()).expect("writing to a String");
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Node 1: the single node's names, addresses and places, as they always were.
    #[test]
    fn node_1_is_the_single_node_as_it_always_was() {
        assert_eq!(
            TestbedNode::of(1).unwrap().line(),
            "1 FL_NODE=faultlab-node FL_VETH_HOST=fl-host0 FL_VETH_NODE=fl-node0 FL_LINK_HOST_IP=198.18.213.1 FL_NODE_IP=198.18.213.2 \
             FL_POD_CIDR=198.19.160.0/24 FL_POD_GW=198.19.160.1 FL_NODE_SUBDIR= FL_NODE_MNTNS_FILE= FL_CGROUP_ROOT= FL_NODE_CERT=node \
             FL_VM_IP=198.18.214.15 FL_VM_SSH_PORT=22622"
        );
    }

    /// Node 3: link 198.18.213.8/30, pods 198.19.162.0/24, its own directories, cgroup root and certificate.
    #[test]
    fn node_3_has_its_own_link_pods_and_places() {
        let node = TestbedNode::of(3).unwrap();
        assert_eq!((node.name.as_str(), node.veth_host.as_str(), node.veth_node.as_str()), ("faultlab-node-3", "fl-host2", "fl-node2"));
        assert_eq!((node.link_host_ip, node.node_ip), (Ipv4Addr::new(198, 18, 213, 9), Ipv4Addr::new(198, 18, 213, 10)));
        assert_eq!((node.pod_net, node.pod_gateway), (Ipv4Addr::new(198, 19, 162, 0), Ipv4Addr::new(198, 19, 162, 1)));
        assert_eq!(
            (node.subdir.as_str(), node.mntns_file.as_str(), node.cgroup_root.as_str(), node.cert.as_str()),
            ("/nodes/faultlab-node-3", "faultlab-node-3", "/faultlab-node-3", "node-faultlab-node-3")
        );
        let two = TestbedNode::of(2).unwrap();
        assert_eq!((two.link_host_ip, two.node_ip), (Ipv4Addr::new(198, 18, 213, 5), Ipv4Addr::new(198, 18, 213, 6)));
        assert_eq!((two.vm_ip, two.vm_ssh_port), (Ipv4Addr::new(198, 18, 214, 16), 22623));
    }

    /// The last node's link and pods stay inside 198.18.213.0/26 and below the service range.
    #[test]
    fn the_last_node_stays_below_the_service_range() {
        let node = TestbedNode::of(MAX_NODES).unwrap();
        assert_eq!((node.link_host_ip, node.node_ip), (Ipv4Addr::new(198, 18, 213, 61), Ipv4Addr::new(198, 18, 213, 62)));
        assert_eq!(node.pod_net, Ipv4Addr::new(198, 19, 175, 0), "198.19.176.0/20 is the service range");
        // As a VM: inside 198.18.214.0/24 above QEMU's own .2 to .4, each VM's port its own.
        assert_eq!((node.vm_ip, node.vm_ssh_port), (Ipv4Addr::new(198, 18, 214, 30), 22637));
    }

    #[rstest::rstest]
    #[case(0)]
    #[case(MAX_NODES + 1)]
    #[case(255)]
    fn a_node_out_of_range_is_an_error_naming_it(#[case] index: u32) {
        let err = TestbedNode::of(index).unwrap_err();
        assert_eq!(err, NoSuchNode { index });
        assert_eq!(err.to_string(), format!("no node {index}: the test bed's nodes are 1 to 16"));
    }

    /// Names and numbers are each other's inverse, and nothing else names a node.
    #[test]
    fn names_and_numbers_are_each_others_inverse() {
        for k in 1..=MAX_NODES {
            assert_eq!(index_of(&name_of(k)), Some(k));
            assert_eq!(TestbedNode::of(k).unwrap().name, name_of(k));
        }
        for name in ["faultlab-node-0", "faultlab-node-1", "faultlab-node-17", "faultlab-node-02", "faultlab-nodes", "other", ""] {
            assert_eq!(index_of(name), None, "{name}");
        }
    }

    /// `ci/testbed/nodes` is what `faultlab testbed nodes` writes (run it to write the file again).
    #[test]
    fn the_scripts_node_table_is_current() {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../ci/testbed/nodes");
        let file = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        assert!(file == table(), "{} differs from `faultlab testbed nodes`: run `cargo run -q -- testbed nodes >ci/testbed/nodes`", path.display());
        assert_eq!(table().lines().filter(|l| !l.starts_with('#')).count(), MAX_NODES as usize);
    }
}
