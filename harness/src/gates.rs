//! What a run waits for and watches: the target of a scenario (its pods' selector, its claim) and the
//! gates on pods, nodes, claims, Deployments and events that its symptom and recovery name. Scenario files hold
//! them; `wait`, `events` and the faults read them without depending on the scenario loader.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

#[derive(Clone, Debug, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Target {
    /// Label selector of the target pods, e.g. `app=web`.
    pub selector: String,
    /// The claim that must bind, for storage scenarios.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub claim: Option<String>,
}

/// A condition on a pod's status. Every field given must hold.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PodGate {
    /// Pod phase (`Pending`, `Running`, ...).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phase: Option<String>,
    /// All containers ready (true) or not (false).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ready: Option<bool>,
    /// Some container is waiting with this reason (`ContainerCreating`, `CrashLoopBackOff`, ...), or one
    /// of several separated by `|` (`ErrImagePull|ImagePullBackOff`: the kubelet alternates them).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub waiting: Option<String>,
    /// `true`: some container of the pod was restarted in place by the kubelet (its restartCount is
    /// above 0), as after a failed liveness probe; `false`: none was.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub restarted: Option<bool>,
    /// A pod condition.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub condition: Option<ConditionGate>,
    /// Regular expression some container's termination message matches (its current or last
    /// terminated state). With `terminationMessagePolicy: FallbackToLogsOnError` the kubelet puts the
    /// tail of the container's log there, so an error only the log shows can be a gate.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub termination_message: Option<crate::pattern::Pattern>,
    /// `true`: no pod of the workload exists (none that is not being deleted), as when the controllers
    /// that make pods are down. Alone: it says nothing of a pod's state.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub none: Option<bool>,
}

/// A status condition: type, status and optionally reason. `status` and `reason` may name alternatives
/// separated by `|` (`False|Unknown`), for a symptom that platforms show in different words: a kubelet
/// that dies stays dead on the test bed (the node controller marks the node Unknown) and is restarted by
/// systemd on kind (it posts Ready=False between restarts).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ConditionGate {
    #[serde(rename = "type")]
    pub type_: String,
    pub status: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

/// A condition on the node.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct NodeGate {
    pub condition: ConditionGate,
}

/// A condition on one of the workload's Deployments, for example `Progressing` `False` with reason
/// `ProgressDeadlineExceeded`: the Deployment controller's own deadline for a rollout that makes no
/// progress (`spec.progressDeadlineSeconds`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct DeploymentGate {
    /// The Deployment's name; the workload must make it.
    pub name: String,
    pub condition: ConditionGate,
}

/// A condition on the target claim.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ClaimGate {
    pub phase: String,
}

/// An expected event: reason, type, and a regular expression its message matches.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct EventGate {
    pub reason: String,
    #[serde(rename = "type", default, skip_serializing_if = "Option::is_none")]
    pub type_: Option<String>,
    /// Regular expression; `${...}` variables are substituted (escaped) first.
    pub message: String,
}

/// The gates of a phase, the symptom's or the recovery's: each that is given must hold within the
/// phase's deadline. Both phases' files spell them the same (`pod`, `node`, `claim`, `deployment`);
/// this is the one view the runner, the checks and training read them through.
#[derive(Clone, Copy, Debug)]
pub struct Gates<'a> {
    pub pod: Option<&'a PodGate>,
    pub node: Option<&'a NodeGate>,
    pub claim: Option<&'a ClaimGate>,
    pub deployment: Option<&'a DeploymentGate>,
}

impl Gates<'_> {
    pub fn is_empty(&self) -> bool {
        self.pod.is_none() && self.node.is_none() && self.claim.is_none() && self.deployment.is_none()
    }
}
