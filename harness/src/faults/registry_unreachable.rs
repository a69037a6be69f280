//! registry-unreachable: the node cannot connect to the registry the workload pulls from: its
//! connections get no answer, and each pull gives up when its connect times out.
//!
//! Source: 001 (`cce_faq_00015.html`), Table 1 and "Check Item 7: Connection to the Image Repository":
//! `Failed to pull image "docker.io/bitnami/nginx:1.22.0-debian-11-r3": rpc error: code = Unknown desc
//! = Error response from daemon: Get https://registry-1.docker.io/v2/: net/http: request canceled
//! while waiting for connection (Client.Timeout exceeded while awaiting headers)`. Cause: the node's
//! network does not reach the registry. Fix: "Upload the image to SWR and then pull the image from
//! SWR" (a registry the node reaches), or give the node a way out (a public address).
//!
//! How: `prepare` starts two registries (see [`super::registry`]), the workload's, which holds the
//! node's busybox image, and an empty private one; the workload pulls from the first and runs. The
//! fault then drops, in the node's own network namespace, every packet the node sends to the first
//! registry's port (an iptables rule, its removal journalled first), as a firewall or a route that
//! swallows the traffic does, and replaces the workload's pod, whose pull (`imagePullPolicy: Always`)
//! waits for a connection that never comes. The fix is the document's: the image pushed to the private
//! registry, which the node reaches, and the Deployment pointed at it. The rule stays: the fix does not
//! mend the network, as the document's does not.

use async_trait::async_trait;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::registry::{self, Registry, Spec};
use super::api::{Ctx, Fault, FaultError, Fix, Presence, Probe};
use crate::check::Problem;
use crate::cmd::{Ask, Cmd, Output};
use crate::node::{NodeProfile, RegistryProfile};

/// The comment of the fault's rule: the undo and the footprint find it by it.
pub const COMMENT: &str = "faultlab-registry-unreachable";

#[derive(Clone, Debug, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RegistryUnreachable {
    /// The Deployment that pulls from the registry; it must be part of the workload, pull `Always`,
    /// and replace its pods by `Recreate`.
    pub deployment: String,
}

impl Default for RegistryUnreachable {
    fn default() -> Self {
        RegistryUnreachable { deployment: "web".into() }
    }
}

/// The document's fix, step by step (scenario files name them in `fix[].step`): the image to the
/// run's private registry, and pulled from there.
pub use super::registry::ToPrivate as Step;

/// The rule's match: TCP from the node to the registry's address and port, with the fault's comment.
pub fn rule(address: &str, port: u16) -> Vec<String> {
    ["OUTPUT", "-p", "tcp", "-d", address, "--dport", &port.to_string(), "-m", "comment", "--comment", COMMENT, "-j", "DROP"].map(String::from).to_vec()
}

/// `iptables -w <op> <rule>` on the node.
pub fn iptables(op: &str, address: &str, port: u16) -> Cmd {
    Cmd::new(["iptables", "-w", op]).args(rule(address, port))
}

/// Remove every copy of the rule (the undo; idempotent).
pub fn remove_rule(address: &str, port: u16) -> Cmd {
    let line = crate::cmd::shell_join(&iptables("-D", address, port).argv);
    Cmd::new(["sh", "-c", &format!("while {line} 2>/dev/null; do :; done")])
}

#[async_trait]
impl Fault for RegistryUnreachable {
    registry::pulling!(deployment, behind_nginx: None);

    fn check(&self) -> Vec<Problem> {
        registry::check(&self.deployment)
    }

    fn plan_answers(&self, node: &NodeProfile, _namespace: &str) -> Vec<(Ask, Output)> {
        registry::plan_answers(node)
    }

    fn footprint(_node: &NodeProfile) -> Vec<Probe> {
        vec![Probe::new("registry drop rules", format!("iptables -w -S OUTPUT 2>/dev/null | grep -c -- '{COMMENT}' || true"))]
    }

    async fn prepare(&self, ctx: &Ctx) -> Result<(), FaultError> {
        self.refuse_bad_parameters("start-registry")?;
        registry::serve(ctx, Spec::main(false)).await?;
        Registry::of(ctx, Spec::private())?.start(ctx).await
    }

    /// Journal the rule's removal, drop the node's packets to the registry, replace the workload's pod.
    async fn inject(&self, ctx: &Ctx) -> Result<(), FaultError> {
        registry::pulling_deployment(ctx, &self.deployment).await?;
        let reg = Registry::of(ctx, Spec::main(false))?;
        let address = reg.profile.address.clone();
        ctx.undo_on_node(&format!("remove the node's rule dropping packets to {}", reg.endpoint()), remove_rule(&address, RegistryProfile::PORT))?;
        ctx.note(format!("the node's packets to {} are dropped (iptables, the node's own network namespace)", reg.endpoint()));
        ctx.run("drop-packets", iptables("-I", &address, RegistryProfile::PORT)).await?;
        ctx.restart_target("restart-workload").await
    }

    /// In place while the rule is there and the Deployment pulls from the registry it cuts off.
    async fn present(&self, ctx: &Ctx) -> Result<Presence, FaultError> {
        let reg = Registry::of(ctx, Spec::main(false))?;
        let deployment = registry::deployment(ctx, &self.deployment, "check-image").await?;
        let cut_off = format!("{}/", reg.endpoint());
        let pulls_there = registry::images(&deployment).iter().any(|i| i.starts_with(&cut_off));
        let rule = ctx.probe("check-rule", iptables("-C", &reg.profile.address, RegistryProfile::PORT)).await?.success();
        Ok(match (rule, pulls_there) {
            (true, true) => Presence::Present(format!("the node drops its packets to {} and Deployment {} pulls from it", reg.endpoint(), self.deployment)),
            (false, _) => Presence::Absent(format!("the node reaches {} (no rule drops its packets)", reg.endpoint())),
            (true, false) => Presence::Absent(format!("Deployment {} pulls from another registry", self.deployment)),
        })
    }
}

#[async_trait]
impl Fix for RegistryUnreachable {
    type Step = Step;

    /// See [`registry::to_private`]: idempotent.
    async fn fix(&self, which: Step, ctx: &Ctx) -> Result<(), FaultError> {
        self.refuse_bad_parameters(super::steps::Steps::name(which))?;
        registry::to_private(which, ctx, &self.deployment).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::faults::testing::plan_ctx;

    #[test]
    fn the_rule_drops_tcp_to_the_registry_port_and_the_undo_removes_every_copy() {
        assert_eq!(
            iptables("-I", "198.18.213.1", 5443).shell_line(),
            "iptables -w -I OUTPUT -p tcp -d 198.18.213.1 --dport 5443 -m comment --comment faultlab-registry-unreachable -j DROP"
        );
        let undo = remove_rule("198.18.213.1", 5443);
        assert_eq!(undo.argv[..2], ["sh".to_string(), "-c".to_string()]);
        assert!(undo.argv[2].starts_with("while iptables -w -D OUTPUT -p tcp -d 198.18.213.1 --dport 5443"), "{}", undo.argv[2]);
    }

    #[tokio::test]
    async fn plan_journals_the_rules_removal_before_the_rule() {
        let fault = RegistryUnreachable::default();
        let (ctx, fake) = plan_ctx(&fault);
        fault.prepare(&ctx).await.unwrap();
        let before = fake.lines().len();
        fault.inject(&ctx).await.unwrap();
        let journal = ctx.journal.snapshot();
        assert_eq!(journal.entries.last().unwrap().what, "remove the node's rule dropping packets to 10.213.0.1:5443");
        let lines = fake.lines();
        assert!(lines[before..].iter().any(|l| l.contains("iptables -w -I OUTPUT")), "{lines:?}");
        fault.fix(Step::PushToPrivateRegistry, &ctx).await.unwrap();
        fault.fix(Step::PullFromPrivateRegistry, &ctx).await.unwrap();
        assert!(fake.lines().iter().any(|l| l.contains("10.213.0.1:5444/faultlab/busybox:1")));
    }
}
