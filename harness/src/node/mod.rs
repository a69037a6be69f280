//! Nodes: what faultlab knows about a node, and how a command reaches it.
//!
//! A node is a thing you can run a command on. [`NodeAccess`] says how: `docker exec` into a kind node
//! container, or `ip netns exec` into the test bed's node namespace. Either way the command is wrapped
//! with `timeout` *inside* the node as well, because killing `docker exec` on the host leaves the command
//! running in the node. [`NodeProfile`] carries the node's facts (containerd socket, kubelet dirs, how to
//! restart each daemon, which images stand for pause and busybox) so faults never guess paths.
//! [`runtime`] reads what the node's runtime really is: containerd's version and config (whose keys
//! differ by config version), the cgroup version and the kubelet's cgroup driver.

mod exec;
pub mod profile;
pub mod runtime;

#[cfg(test)]
pub use exec::FakeExecutor;
pub use exec::{Executor, HostExecutor, Node, ScriptedExecutor, TimedExecutor};
pub use runtime::{CgroupDriver, CgroupVersion, ConfigVersion, ContainerdConfig, ContainerdVersion, RuntimeError, RuntimeFacts, Setting, SettingValue};
pub use profile::{CommandsOn, ComponentControl, ContainerdProfile, CsiProfile, ControlPlaneProfile, DiskProfile, ImageSet, KubeletProfile, NodeAccess, NodeProfile, RegistryProfile, SshAccess};
