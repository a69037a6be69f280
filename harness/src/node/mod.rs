//! Nodes: what faultlab knows about a node, and how a command reaches it.
//!
//! A node is a thing you can run a command on. [`NodeAccess`] says how: `docker exec` into a kind node
//! container, or `ip netns exec` into the test bed's node namespace. Either way the command is wrapped
//! with `timeout` *inside* the node as well, because killing `docker exec` on the host leaves the command
//! running in the node. [`NodeProfile`] carries the node's facts (containerd socket, kubelet dirs, how to
//! restart each daemon, which images stand for pause and busybox) so faults never guess paths.

mod exec;
mod profile;

#[cfg(test)]
pub use exec::FakeExecutor;
pub use exec::{Executor, HostExecutor, Node, ScriptedExecutor, TimedExecutor};
pub use profile::{CommandsOn, ComponentControl, ContainerdProfile, ControlPlaneProfile, DiskProfile, ImageSet, KubeletProfile, NodeAccess, NodeProfile, RegistryProfile, SshAccess};
