//! default-route: the node has no default route, and flannel cannot choose its interface.
//!
//! Source: "Kubernetes管控节点Pods创建 CreateContainerError" (k8s_master_pod_create_error): after a
//! reboot the node's default-route interface (wlan0) stayed down, and kube-flannel crash-looped with
//! `Failed to find any valid interface to use: failed to get default interface: Unable to find default
//! route`. Fix: bring the network back (`netplan apply`), so the default route is there again.
//!
//! The fault deletes the default route inside the node only (on the test bed the node is its own
//! network namespace; on kind the node container), never on the host. The route to restore is the node
//! profile's gateway and device where it has them (test bed), else what `ip route show default` prints
//! on the node during inject (kind); it is journalled before the route is deleted. The fix puts it back
//! with `ip route replace`, which is idempotent. The kubelet reaches the API server on-link, so the node
//! stays Ready meanwhile.

use async_trait::async_trait;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::api::{Ctx, Fault, FaultError, Fix, Probe, Presence};
use crate::cmd::{Ask, Cmd, Output};
use crate::node::NodeProfile;

#[derive(Clone, Debug, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct DefaultRoute {}

/// The default route found at inject, kept in the run's journal for the fix.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
struct Route {
    gateway: String,
    device: String,
}

/// The journal's key for [`Route`].
const ROUTE: &str = "route";

/// `ip route replace default via GATEWAY dev DEVICE`.
pub fn replace(gateway: &str, device: &str) -> Cmd {
    Cmd::new(["ip", "route", "replace", "default", "via", gateway, "dev", device])
}

/// What `ip route show default` asks: the node's default route (a plan answers it).
const DEFAULT_ROUTE: Ask = Ask("default-route");

/// Gateway and device of the first `default via G dev D ...` line of `ip route show default`.
pub fn parse_default(text: &str) -> Option<(String, String)> {
    text.lines().find_map(|line| {
        let words: Vec<&str> = line.split_whitespace().collect();
        if words.first() != Some(&"default") {
            return None;
        }
        let after = |key: &str| words.windows(2).find(|w| w[0] == key).map(|w| w[1].to_string());
        Some((after("via")?, after("dev")?))
    })
}

impl DefaultRoute {
    /// The node's default route: from the profile if it names gateway and device, else as the node shows it.
    async fn current(&self, ctx: &Ctx) -> Result<(String, String), FaultError> {
        let p = &ctx.node.profile;
        if let (Some(g), Some(d)) = (&p.gateway, &p.gateway_device) {
            return Ok((g.clone(), d.clone()));
        }
        let out = ctx.run("read-default-route", Cmd::new(["ip", "route", "show", "default"]).asks(DEFAULT_ROUTE)).await?;
        parse_default(&out.stdout).ok_or_else(|| FaultError::Check {
            step: "read-default-route".into(),
            message: format!("node {} has no `default via ... dev ...` route to take away: {:?}", ctx.node.name(), out.stdout.trim()),
        })
    }
}

/// The document's fix, step by step, in its order (scenario files name them in `fix[].step`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Step {
    RestoreDefaultRoute,
}

#[async_trait]
impl Fault for DefaultRoute {
    /// The node's routes (a link's `linkdown` flag comes and goes with its carrier, not with the fault).
    fn footprint(_node: &NodeProfile) -> Vec<Probe> {
        vec![Probe::new("routes", "ip route | sed 's/ linkdown//'")]
    }

    // On kind this stays within the node container, so `reach` keeps its default (the node):
    // `ip route` runs in the node container's own network namespace (Docker gives each container one),
    // whose default route is not the host's; the host's routes and links are never named.

    // `check` and `workload_refs` keep their defaults: the fault has no parameters (the route is the
    // node's own, read from its profile or the node), and acts on no object of the workload's.

    /// A plan's node has a default route of placeholders (through the profile's device, if it names one).
    fn plan_answers(&self, node: &NodeProfile, _namespace: &str) -> Vec<(Ask, Output)> {
        let device = node.gateway_device.as_deref().unwrap_or("<device>");
        vec![(DEFAULT_ROUTE, Output::ok(format!("default via <gateway> dev {device}\n")))]
    }

    async fn inject(&self, ctx: &Ctx) -> Result<(), FaultError> {
        let (gateway, device) = self.current(ctx).await?;
        ctx.undo_on_node(&format!("restore the default route via {gateway} dev {device}"), replace(&gateway, &device))?;
        ctx.keep(ROUTE, &Route { gateway, device })?;
        ctx.note("delete the node's default route (inside the node, not on the host)");
        ctx.run("delete-default-route", Cmd::new(["ip", "route", "del", "default"])).await?;
        ctx.note("flannel looks for the default route when it starts: restart it");
        ctx.restart_target("restart-workload").await
    }

    /// In place while the node has no default route.
    async fn present(&self, ctx: &Ctx) -> Result<Presence, FaultError> {
        let out = ctx.run("check-default-route", Cmd::new(["ip", "route", "show", "default"]).asks(DEFAULT_ROUTE)).await?;
        Ok(match out.stdout.trim() {
            "" => Presence::Present("the node has no default route".into()),
            route => Presence::Absent(format!("the node has {route:?}")),
        })
    }
}

#[async_trait]
impl Fix for DefaultRoute {
    type Step = Step;

    async fn fix(&self, which: Step, ctx: &Ctx) -> Result<(), FaultError> {
        let step = super::steps::Steps::name(which);
        match which {
            Step::RestoreDefaultRoute => {
                let (gateway, device) = match ctx.kept::<Route>(ROUTE) {
                    Some(r) => (r.gateway, r.device),
                    None => self.current(ctx).await?,
                };
                // `replace` adds the route, or leaves it as it is: the step is idempotent.
                ctx.run(step, replace(&gateway, &device)).await.map(|_| ())
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cmd::Output;
    use crate::faults::testing::ctx;
    use crate::journal::Undo;

    #[tokio::test]
    async fn inject_journals_the_profile_route_then_deletes_it_in_the_node() {
        let (ctx, fake) = ctx();
        let fault = DefaultRoute::default();
        fault.inject(&ctx).await.unwrap();
        assert_eq!(fake.lines(), vec!["ip netns exec faultlab-node timeout -k 5 60 ip route del default"]);
        let entries = ctx.journal.snapshot().entries;
        assert_eq!(entries.len(), 1);
        assert!(
            matches!(&entries[0].undo, Undo::Node { cmd, .. } if cmd.argv == ["ip", "route", "replace", "default", "via", "10.213.0.1", "dev", "fl-node"]),
            "{:?}",
            entries[0].undo
        );
        let api: Vec<String> = ctx.rec().entries().into_iter().map(|e| e.line).collect();
        assert!(api.last().unwrap().starts_with("DELETE /api/v1/namespaces/fl-test/pods?labelSelector=app=web"), "{api:?}");
        fault.fix(Step::RestoreDefaultRoute, &ctx).await.unwrap();
        assert_eq!(fake.lines()[1], "ip netns exec faultlab-node timeout -k 5 60 ip route replace default via 10.213.0.1 dev fl-node");
    }

    #[tokio::test]
    async fn without_a_profile_gateway_the_route_is_read_on_the_node() {
        let (mut ctx, fake) = ctx();
        ctx.node.profile.gateway = None;
        fake.respond("ip route show default", Output { status: 0, stdout: "default via 172.18.0.1 dev eth0 \n".into(), stderr: String::new() });
        let fault = DefaultRoute::default();
        fault.clone().inject(&ctx).await.unwrap();
        // The route came back down: the fix, by another instance of the fault (as in another process,
        // `faultlab solution --apply`), restores what was read, from the run's journal.
        fake.respond("ip route show default", Output::default());
        assert_eq!(ctx.kept::<Route>(ROUTE), Some(Route { gateway: "172.18.0.1".into(), device: "eth0".into() }));
        DefaultRoute::default().fix(Step::RestoreDefaultRoute, &ctx).await.unwrap();
        let lines = fake.lines();
        assert_eq!(lines[0], "ip netns exec faultlab-node timeout -k 5 60 ip route show default");
        assert_eq!(lines[1], "ip netns exec faultlab-node timeout -k 5 60 ip route del default");
        assert_eq!(lines[2], "ip netns exec faultlab-node timeout -k 5 60 ip route replace default via 172.18.0.1 dev eth0");
        let undo = &ctx.journal.snapshot().entries[0].undo;
        assert!(matches!(undo, Undo::Node { cmd, .. } if cmd.argv == ["ip", "route", "replace", "default", "via", "172.18.0.1", "dev", "eth0"]), "{undo:?}");
    }

    #[tokio::test]
    async fn no_route_to_take_away_is_an_error_before_any_change() {
        let (mut ctx, fake) = ctx();
        ctx.node.profile.gateway = None;
        fake.respond("ip route show default", Output::default());
        assert!(DefaultRoute::default().inject(&ctx).await.is_err());
        assert!(ctx.journal.snapshot().entries.is_empty());
        assert_eq!(fake.lines().len(), 1);
    }

    #[tokio::test]
    async fn present_while_the_node_has_no_default_route() {
        let (ctx, fake) = ctx();
        fake.respond("ip route show default", Output { status: 0, stdout: "default via 10.213.0.1 dev fl-node\n".into(), stderr: String::new() });
        let p = DefaultRoute::default().present(&ctx).await.unwrap();
        assert_eq!(p, Presence::Absent("the node has \"default via 10.213.0.1 dev fl-node\"".into()));
        fake.respond("ip route show default", Output::default());
        assert_eq!(DefaultRoute::default().present(&ctx).await.unwrap(), Presence::Present("the node has no default route".into()));
    }

    #[test]
    fn parses_default_routes() {
        assert_eq!(parse_default("default via 198.18.213.1 dev fl-node0 \n"), Some(("198.18.213.1".into(), "fl-node0".into())));
        assert_eq!(parse_default("default via 172.18.0.1 dev eth0 proto dhcp src 172.18.0.2 metric 100"), Some(("172.18.0.1".into(), "eth0".into())));
        assert_eq!(parse_default("10.0.0.0/8 dev eth0\n"), None);
        assert_eq!(parse_default("default dev wg0 scope link"), None, "no gateway: nothing this fault can restore");
    }

    #[test]
    fn no_parameters_nothing_to_check() {
        assert!(DefaultRoute::default().check().is_empty());
        assert!(DefaultRoute::default().workload_refs().is_empty());
        let unknown: Result<DefaultRoute, _> = serde_json::from_value(serde_json::json!({"gateway": "10.0.0.1"}));
        assert!(unknown.is_err(), "the route is the node's, never a parameter");
    }
}
