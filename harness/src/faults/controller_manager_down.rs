//! controller-manager-down: kube-controller-manager is not running, so nothing makes the pods a
//! Deployment asks for.
//!
//! Source: imroc's Kubernetes troubleshooting guide, "Pod 一直处于 ContainerCreating 或 Waiting 状态",
//! "controller-manager 异常": 查看 master 上 kube-controller-manager 状态,异常的话尝试重启 (check
//! kube-controller-manager's state on the master; if it is abnormal, restart it).
//!
//! How: the fault stops kube-controller-manager as the platform's description says (the test bed: its
//! supervisor, `ci/testbed/control-plane stop`; kind: the static pod's manifest moved out of the
//! kubelet's manifest directory), having journalled its start, and deletes the workload's pod, as a
//! person restarting it would: its ReplicaSet's controller is down, so no pod replaces it. The fix
//! starts it again.

use async_trait::async_trait;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::api::{Ctx, Fault, FaultError, Fix, Presence, Reach};
use crate::cmd::{Ask, Cmd, Output};
use crate::journal::Undo;
use crate::node::{CommandsOn, ComponentControl, NodeProfile};

/// The component the fault stops.
pub const COMPONENT: &str = "kube-controller-manager";

#[derive(Clone, Debug, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ControllerManagerDown {}

/// The document's fix, step by step (scenario files name them in `fix[].step`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Step {
    RestartControllerManager,
}

impl ControllerManagerDown {
    /// The component's commands and where they run, or why the platform has none.
    fn control(ctx: &Ctx, step: &str) -> Result<(CommandsOn, ComponentControl), FaultError> {
        let cp = ctx.node.profile.control_plane.as_ref().ok_or_else(|| FaultError::Check {
            step: step.into(),
            message: format!("node {} has no controlPlane in its description: this platform does not let faults stop the control plane", ctx.node.name()),
        })?;
        let c = cp.components.get(COMPONENT).ok_or_else(|| FaultError::Check {
            step: step.into(),
            message: format!("the description's controlPlane has no {COMPONENT} (it has: {})", cp.components.keys().cloned().collect::<Vec<_>>().join(", ")),
        })?;
        Ok((cp.on, c.clone()))
    }

    async fn exec(ctx: &Ctx, on: CommandsOn, step: &str, argv: &[String]) -> Result<Output, FaultError> {
        Self::exec_cmd(ctx, on, step, Cmd::new(argv.iter().cloned())).await
    }

    async fn exec_cmd(ctx: &Ctx, on: CommandsOn, step: &str, cmd: Cmd) -> Result<Output, FaultError> {
        let cmd = cmd.timeout(std::time::Duration::from_secs(150));
        match on {
            CommandsOn::Host => ctx.run_on_host(step, cmd).await,
            CommandsOn::Node => ctx.run(step, cmd).await,
        }
    }
}

/// What the status command asks: whether the component runs (a plan answers it).
const STATUS: Ask = Ask("controller-manager-status");

#[async_trait]
impl Fault for ControllerManagerDown {
    /// The control plane serves the whole cluster: while it is down no controller acts on anything.
    fn reach(&self) -> Reach {
        Reach::Cluster
    }

    fn plan_answers(&self, _node: &NodeProfile, _namespace: &str) -> Vec<(Ask, Output)> {
        vec![(STATUS, Output::ok("stopped\n"))]
    }

    /// Journal its start, stop it, then delete the workload's pod.
    async fn inject(&self, ctx: &Ctx) -> Result<(), FaultError> {
        let (on, control) = Self::control(ctx, "stop-controller-manager")?;
        let start = Cmd::new(control.start.iter().cloned()).timeout(std::time::Duration::from_secs(150));
        let undo = match on {
            CommandsOn::Host => Undo::Host { cmd: start },
            CommandsOn::Node => Undo::Node { access: ctx.node.access.clone(), cmd: start },
        };
        ctx.journal.record(format!("start {COMPONENT} again"), undo)?;
        ctx.note(format!("stop {COMPONENT}: no controller makes pods, Deployments' or any"));
        Self::exec(ctx, on, "stop-controller-manager", &control.stop).await?;
        ctx.note("delete the workload's pod, as a person restarting it would: nothing makes a new one");
        ctx.restart_target("delete-pod").await
    }

    async fn present(&self, ctx: &Ctx) -> Result<Presence, FaultError> {
        let (on, control) = Self::control(ctx, "check-controller-manager")?;
        let out = Self::exec_cmd(ctx, on, "check-controller-manager", Cmd::new(control.status.iter().cloned()).asks(STATUS)).await?;
        Ok(if out.stdout.trim() == "running" {
            Presence::Absent(format!("{COMPONENT} runs"))
        } else {
            Presence::Present(format!("{COMPONENT} is {}", out.stdout.trim()))
        })
    }
}

#[async_trait]
impl Fix for ControllerManagerDown {
    type Step = Step;

    /// Starting a component that runs does nothing: idempotent.
    async fn fix(&self, which: Step, ctx: &Ctx) -> Result<(), FaultError> {
        let step = super::steps::Steps::name(which);
        match which {
            Step::RestartControllerManager => {
                let (on, control) = Self::control(ctx, step)?;
                ctx.note(format!("start {COMPONENT} again, as the document says (异常的话尝试重启)"));
                Self::exec(ctx, on, step, &control.start).await.map(drop)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::faults::testing::plan_ctx;
    use crate::record::Channel;

    #[tokio::test]
    async fn plan_journals_the_start_stops_and_starts_on_the_host_of_the_test_bed() {
        let fault = ControllerManagerDown::default();
        let (ctx, _) = plan_ctx(&fault);
        fault.inject(&ctx).await.unwrap();
        assert!(matches!(fault.present(&ctx).await.unwrap(), Presence::Present(_)));
        fault.fix(Step::RestartControllerManager, &ctx).await.unwrap();
        let host: Vec<String> = ctx.rec().entries().into_iter().filter(|e| e.channel == Channel::Host).map(|e| e.line).collect();
        assert_eq!(
            host,
            [
                "/opt/faultlab/ci/testbed/control-plane stop kube-controller-manager",
                "/opt/faultlab/ci/testbed/control-plane status kube-controller-manager",
                "/opt/faultlab/ci/testbed/control-plane start kube-controller-manager",
            ]
        );
        let journal = ctx.journal.snapshot();
        assert_eq!(journal.entries[0].what, "start kube-controller-manager again");
        assert!(matches!(&journal.entries[0].undo, Undo::Host { cmd } if cmd.argv[1] == "start"));
    }

    #[tokio::test]
    async fn a_platform_without_a_control_plane_says_so() {
        let fault = ControllerManagerDown::default();
        let (mut ctx, _) = plan_ctx(&fault);
        ctx.node.profile.control_plane = None;
        let err = fault.inject(&ctx).await.unwrap_err().to_string();
        assert!(err.contains("has no controlPlane in its description"), "{err}");
        assert!(ctx.journal.snapshot().entries.is_empty(), "nothing journalled, nothing done");
    }

    /// kind's commands run through a real shell: stopping moves the manifest away and waits for the
    /// process to be gone (here: a name no process has).
    #[test]
    fn kinds_stop_moves_the_manifest_out() {
        let dir = tempfile::tempdir().unwrap();
        let (manifest, parked) = (dir.path().join("m.yaml"), dir.path().join("parked.yaml"));
        std::fs::write(&manifest, "kind: Pod\n").unwrap();
        let control = crate::provider::kind::control_plane().components[COMPONENT].clone();
        let mut argv = control.stop.clone();
        let n = argv.len();
        argv[n - 3] = manifest.display().to_string();
        argv[n - 2] = parked.display().to_string();
        argv[n - 1] = "no-such-proc-x".into();
        assert!(std::process::Command::new(&argv[0]).args(&argv[1..]).status().unwrap().success());
        assert!(!manifest.exists() && parked.exists());
        let status = &control.status;
        assert_eq!(status[..2], ["sh".to_string(), "-c".to_string()]);
        assert_eq!(status.last().unwrap(), "kube-controller");
    }
}
