//! duplicate-container: the runtime already holds the name the kubelet needs for the pod's sandbox.
//!
//! Source: "Kubernetes 问题定位技巧" / "Pod 一直处于 ContainerCreating 或 Waiting 状态", cause "存在同名容器":
//! if the node already has a container of the same name, creating the sandbox fails:
//! `Failed create pod sandbox: ... Conflict. The container name "/k8s_POD_<pod>_<ns>_<uid>_0" is already
//! in use by container "<id>". You have to remove (or rename) that container to be able to reuse that
//! name.` That was Docker; containerd says `failed to reserve sandbox name "<pod>_<ns>_<uid>_<attempt>":
//! name "..." is reserved for "<id>"`. Fix: remove the duplicate.
//!
//! How: the fault runs, through CRI (`crictl runp`), a sandbox with the pod's metadata (name,
//! namespace, UID) and the attempt number the kubelet will use next, but without the kubelet's
//! `io.kubernetes.*` labels, then stops the pod's real sandbox (as when its pause process dies), so
//! the kubelet must create the next one and finds the name taken. The duplicate is left running on
//! purpose: the kubelet finds a pod's sandboxes by label, so it never sees this one as the pod's,
//! and its garbage collection only removes sandboxes that are not ready (a stopped or created-only
//! duplicate, as in the trial, is collected within about 20 s and the fault heals by itself). Only
//! the documented fix, removing it, brings the pod back.
//!
//! The duplicate carries the label `faultlab.dev/duplicate-of=<pod uid>`, and the journal's undo
//! removes every sandbox with that label (recorded before it is created). The fix does what a person
//! would: list the pod's sandboxes and remove those the kubelet did not create (no
//! `io.kubernetes.pod.uid` label); already none is success.

use async_trait::async_trait;
use k8s_openapi::api::core::v1::Pod;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::api::{Ctx, Fault, FaultError, Fix, Probe, Presence};
use crate::node::NodeProfile;
use crate::cmd::{shell_join, Ask, Cmd, Output};
use crate::cri::{SandboxJson, SandboxListJson};

/// The label the kubelet puts on every sandbox it creates, and finds them by.
pub const KUBELET_UID_LABEL: &str = "io.kubernetes.pod.uid";
/// The label faultlab puts on the duplicate, for the undo.
pub const DUPLICATE_LABEL: &str = "faultlab.dev/duplicate-of";

/// What the sandbox listing asks: the pod's sandboxes (a plan answers it).
const POD_SANDBOXES: Ask = Ask("pod-sandboxes");

#[derive(Clone, Debug, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct DuplicateContainer {}

/// The target pod: name, namespace, UID.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PodRef {
    pub name: String,
    pub namespace: String,
    pub uid: String,
}

impl PodRef {
    /// The sandbox name the runtime reserves: `<pod>_<namespace>_<uid>_<attempt>`.
    pub fn sandbox_name(&self, attempt: u32) -> String {
        format!("{}_{}_{}_{attempt}", self.name, self.namespace, self.uid)
    }
}

/// The sandbox config of the duplicate (crictl's JSON format): the pod's metadata with `attempt`,
/// host network (it needs no address from the CNI), and faultlab's label only.
pub fn duplicate_config(pod: &PodRef, attempt: u32) -> serde_json::Value {
    serde_json::json!({
        "metadata": {"name": pod.name, "namespace": pod.namespace, "uid": pod.uid, "attempt": attempt},
        "labels": {DUPLICATE_LABEL: pod.uid},
        "linux": {"security_context": {"namespace_options": {"network": 2}}},
    })
}

/// Sandboxes of `pod` (by metadata) that the kubelet did not create.
pub fn foreign<'a>(list: &'a SandboxListJson, pod: &PodRef) -> Vec<&'a SandboxJson> {
    list.items
        .iter()
        .filter(|s| s.metadata.uid == pod.uid && s.metadata.name == pod.name && s.metadata.namespace == pod.namespace)
        .filter(|s| !s.labels.contains_key(KUBELET_UID_LABEL))
        .collect()
}

/// The attempt the kubelet's next sandbox of a pod takes, given the pod's own sandboxes: the one after
/// the latest (0 for none). `None` when the latest is the last number the runtime has (the attempt is
/// the runtime's number, read from its output: an error, not an overflow).
pub fn next_attempt<'a>(own: impl IntoIterator<Item = &'a SandboxJson>) -> Option<u32> {
    match own.into_iter().map(|s| s.metadata.attempt).max() {
        None => Some(0),
        Some(a) => a.checked_add(1),
    }
}

/// `crictl rmp -f` of the pod's foreign sandboxes, or nothing when there is none.
pub fn removal(profile: &crate::node::NodeProfile, list: &SandboxListJson, pod: &PodRef) -> Option<Cmd> {
    let ids: Vec<&str> = foreign(list, pod).iter().map(|s| s.id.as_str()).collect();
    if ids.is_empty() {
        return None;
    }
    let mut args = vec!["rmp", "-f"];
    args.extend(ids);
    Some(profile.crictl(args))
}

/// What a plan shows in place of the runtime's answer: the kubelet's ready sandbox and a duplicate.
fn placeholder_list(pod: &PodRef) -> SandboxListJson {
    let sandbox = |id: &str, attempt: u32, labels: &[(&str, &str)]| SandboxJson {
        id: id.into(),
        metadata: crate::cri::MetadataJson { name: pod.name.clone(), uid: pod.uid.clone(), namespace: pod.namespace.clone(), attempt },
        state: "SANDBOX_READY".into(),
        created_at: String::new(),
        labels: labels.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect(),
        annotations: Default::default(),
        runtime_handler: String::new(),
    };
    SandboxListJson { items: vec![sandbox("<sandbox-id>", 0, &[(KUBELET_UID_LABEL, &pod.uid)]), sandbox("<duplicate-id>", 1, &[(DUPLICATE_LABEL, &pod.uid)])] }
}

impl DuplicateContainer {
    /// The one pod of the workload on this node.
    async fn pod(&self, ctx: &Ctx, step: &str) -> Result<PodRef, FaultError> {
        let pods: Vec<Pod> = ctx.kube.list(Some(&ctx.namespace), Some(&ctx.target.selector)).await.map_err(Ctx::api_err(step))?;
        let live: Vec<&Pod> = pods.iter().filter(|p| p.metadata.deletion_timestamp.is_none()).collect();
        match live.as_slice() {
            [pod] => Ok(PodRef {
                name: pod.metadata.name.clone().unwrap_or_default(),
                namespace: ctx.namespace.clone(),
                uid: pod.metadata.uid.clone().unwrap_or_default(),
            }),
            _ => Err(FaultError::Check {
                step: step.into(),
                message: format!("expected one pod matching {} in {}, found {}", ctx.target.selector, ctx.namespace, live.len()),
            }),
        }
    }

    /// The pod's sandboxes as the runtime lists them (all of them, the kubelet's and others).
    async fn sandboxes(&self, ctx: &Ctx, step: &str, pod: &PodRef) -> Result<SandboxListJson, FaultError> {
        // crictl matches these as regular expressions; Kubernetes names have only `.` to escape.
        let name = format!("^{}$", pod.name.replace('.', "\\."));
        let namespace = format!("^{}$", pod.namespace.replace('.', "\\."));
        ctx.sandboxes(step, &["pods", "--name", &name, "--namespace", &namespace], POD_SANDBOXES).await
    }

    /// `crictl rmp -f` of every sandbox faultlab made as a duplicate of `uid` (the undo).
    pub fn remove_labelled(ctx: &Ctx, uid: &str) -> Cmd {
        let selector = format!("{DUPLICATE_LABEL}={uid}");
        let list = shell_join(&ctx.node.profile.crictl(["pods", "-q", "--label", selector.as_str()]).argv);
        let rmp = shell_join(&ctx.node.profile.crictl(["rmp", "-f"]).argv);
        Cmd::shell(format!("for id in $({list}); do {rmp} \"$id\" || exit 1; done"))
    }

    /// `crictl runp` of a config given on stdin (crictl reads configs from files only).
    pub fn runp(ctx: &Ctx, config: &serde_json::Value) -> Cmd {
        let runp = shell_join(&ctx.node.profile.crictl(["runp"]).argv);
        Cmd::shell(format!("f=$(mktemp) && cat > \"$f\" && {runp} \"$f\"; rc=$?; rm -f \"$f\"; exit $rc")).stdin(format!("{config}\n"))
    }
}

/// The document's fix, step by step, in its order (scenario files name them in `fix[].step`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Step {
    RemoveDuplicate,
}

#[async_trait]
impl Fault for DuplicateContainer {
    /// A plan's runtime lists the pod's own sandbox and a duplicate, of placeholders.
    fn plan_answers(&self, _node: &NodeProfile, namespace: &str) -> Vec<(Ask, Output)> {
        let pod = PodRef { name: "<pod>".into(), namespace: namespace.into(), uid: "<pod-uid>".into() };
        vec![(POD_SANDBOXES, Output::ok(serde_json::to_string(&placeholder_list(&pod)).expect("serialises")))]
    }

    /// A plan's workload has one pod, of placeholders.
    fn plan_api_answers(&self, _target: &crate::gates::Target) -> Vec<(String, serde_json::Value)> {
        vec![("/pods".into(), serde_json::json!([{"metadata": {"name": "<pod>", "uid": "<pod-uid>"}}]))]
    }

    /// How many sandboxes faultlab made as duplicates the runtime still holds.
    fn footprint(node: &NodeProfile) -> Vec<Probe> {
        let pods = crate::cmd::shell_join(&node.crictl(["pods", "-o", "json"]).argv);
        vec![Probe::new("duplicate sandboxes", format!("{pods} | grep -c '\"{DUPLICATE_LABEL}\"' || true"))]
    }

    // On kind this stays within the node container, so `reach` keeps its default (the node):
    // the duplicate sandbox is made and removed through the node's own containerd (its CRI socket in
    // the node), so its pause process, cgroup and network namespace are the node container's children.

    // `check` and `workload_refs` keep their defaults: the fault has no parameters, and the pod it
    // duplicates is the workload's target (`workload.target.selector`), which the loader checks.

    async fn inject(&self, ctx: &Ctx) -> Result<(), FaultError> {
        let pod = self.pod(ctx, "find-pod").await?;
        let list = self.sandboxes(ctx, "list-sandboxes", &pod).await?;
        let own: Vec<&SandboxJson> = list.items.iter().filter(|s| s.labels.get(KUBELET_UID_LABEL) == Some(&pod.uid)).collect();
        if own.iter().all(|s| !s.ready()) {
            return Err(FaultError::Check {
                step: "list-sandboxes".into(),
                message: format!("pod {} has no ready sandbox on node {}", pod.name, ctx.node.name()),
            });
        }
        let next = next_attempt(own.iter().copied()).ok_or_else(|| FaultError::Check {
            step: "list-sandboxes".into(),
            message: format!("pod {}'s latest sandbox is attempt {}: the kubelet has no next attempt to take", pod.name, u32::MAX),
        })?;
        ctx.undo_on_node(&format!("remove the duplicate sandbox {}", pod.sandbox_name(next)), Self::remove_labelled(ctx, &pod.uid))?;
        let config = duplicate_config(&pod, next);
        ctx.note(format!("take the name {} (the pod's next sandbox) with a sandbox the kubelet did not create: {config}", pod.sandbox_name(next)));
        ctx.run("run-duplicate-sandbox", Self::runp(ctx, &config)).await?;
        ctx.note("stop the pod's sandbox, as when its pause process dies: the kubelet must create the next one");
        let mut args = vec!["stopp"];
        args.extend(own.iter().filter(|s| s.ready()).map(|s| s.id.as_str()));
        ctx.run("stop-pod-sandbox", ctx.node.profile.crictl(args)).await?;
        Ok(())
    }

    /// In place while the runtime holds a sandbox of the pod that the kubelet did not make.
    async fn present(&self, ctx: &Ctx) -> Result<Presence, FaultError> {
        let pod = self.pod(ctx, "check-duplicate").await?;
        let list = self.sandboxes(ctx, "check-duplicate", &pod).await?;
        let left: Vec<String> = foreign(&list, &pod).iter().map(|s| format!("{} ({})", s.id, pod.sandbox_name(s.metadata.attempt))).collect();
        Ok(if left.is_empty() {
            Presence::Absent(format!("no duplicate sandbox of pod {}", pod.name))
        } else {
            Presence::Present(format!("the runtime holds {}", left.join(", ")))
        })
    }

}

#[async_trait]
impl Fix for DuplicateContainer {
    type Step = Step;

    async fn fix(&self, which: Step, ctx: &Ctx) -> Result<(), FaultError> {
        let step = super::steps::Steps::name(which);
        match which {
            Step::RemoveDuplicate => {
                let pod = self.pod(ctx, step).await?;
                let list = self.sandboxes(ctx, step, &pod).await?;
                match removal(&ctx.node.profile, &list, &pod) {
                    Some(cmd) => ctx.run(step, cmd).await.map(|_| ()),
                    // None left is success: the step is idempotent.
                    None => Ok(()),
                }
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

    const CRI: &str = "/var/lib/faultlab/testbed/bin/faultlab-cri --runtime-endpoint unix:///run/faultlab/containerd/containerd.sock";

    fn pod() -> PodRef {
        PodRef { name: "web-1".into(), namespace: "fl-test".into(), uid: "u-1".into() }
    }

    fn listing() -> String {
        serde_json::json!({"items": [
            {"id": "kubelet0", "metadata": {"name": "web-1", "uid": "u-1", "namespace": "fl-test", "attempt": 0},
             "state": "SANDBOX_READY", "createdAt": "1", "labels": {"io.kubernetes.pod.uid": "u-1", "app": "web"}},
            {"id": "dup1", "metadata": {"name": "web-1", "uid": "u-1", "namespace": "fl-test", "attempt": 1},
             "state": "SANDBOX_READY", "createdAt": "2", "labels": {"faultlab.dev/duplicate-of": "u-1"}},
            {"id": "other", "metadata": {"name": "web-1", "uid": "u-0", "namespace": "fl-test", "attempt": 0},
             "state": "SANDBOX_NOTREADY", "createdAt": "0", "labels": {}}
        ]})
        .to_string()
    }

    #[test]
    fn names_configs_and_foreign_sandboxes() {
        assert_eq!(pod().sandbox_name(1), "web-1_fl-test_u-1_1");
        let config = duplicate_config(&pod(), 1);
        // The config is one faultlab-cri (and crictl) reads.
        let parsed = crate::cri::parse_sandbox_config(std::path::Path::new("dup.json"), &config.to_string()).unwrap();
        assert_eq!(parsed.metadata.unwrap().attempt, 1);
        assert!(!parsed.labels.contains_key(KUBELET_UID_LABEL));
        let list = crate::faults::api::parse_sandboxes("x", &listing()).unwrap();
        let ids: Vec<&str> = foreign(&list, &pod()).iter().map(|s| s.id.as_str()).collect();
        assert_eq!(ids, ["dup1"], "not the kubelet's, not another pod's");
        assert!(crate::faults::api::parse_sandboxes("x", "not json").unwrap_err().to_string().contains("crictl pods -o json"));
    }

    #[test]
    fn the_undo_and_runp_are_node_shell_commands_over_the_profile_client() {
        let (ctx, _) = ctx();
        let undo = DuplicateContainer::remove_labelled(&ctx, "u-1");
        assert_eq!(undo.argv[2], format!("for id in $({CRI} pods -q --label 'faultlab.dev/duplicate-of=u-1'); do {CRI} rmp -f \"$id\" || exit 1; done"));
        let runp = DuplicateContainer::runp(&ctx, &duplicate_config(&pod(), 1));
        assert!(runp.argv[2].contains(&format!("{CRI} runp \"$f\"")), "{}", runp.argv[2]);
        assert!(runp.stdin.as_ref().and_then(|s| s.text()).unwrap().contains("\"attempt\":1"));
        // On kind the node's own crictl.
        let mut kind = crate::testbed::tests::sample_profile();
        kind.crictl = None;
        assert_eq!(kind.crictl(["pods"]).argv, ["crictl", "pods"]);
    }

    #[tokio::test]
    async fn a_plan_runs_every_step_with_placeholders() {
        let fault = DuplicateContainer::default();
        let (ctx, fake) = crate::faults::testing::plan_ctx(&fault);
        fault.inject(&ctx).await.unwrap();
        fault.fix(Step::RemoveDuplicate, &ctx).await.unwrap();
        let lines = fake.lines();
        assert!(lines[0].ends_with("pods --name '^<pod>$' --namespace '^fl-test$' -o json"), "{lines:?}");
        assert!(lines[1].contains("runp"), "{lines:?}");
        assert!(lines[2].ends_with("stopp '<sandbox-id>'"), "{lines:?}");
        assert!(lines.last().unwrap().ends_with("rmp -f '<duplicate-id>'"), "{lines:?}");
        let entries = ctx.journal.snapshot().entries;
        assert!(matches!(&entries[0].undo, Undo::Node { cmd, .. } if cmd.argv[2].contains("duplicate-of=<pod-uid>")), "{:?}", entries[0].undo);
    }

    #[tokio::test]
    async fn fix_removes_only_foreign_sandboxes_and_is_idempotent() {
        let (ctx, fake) = ctx();
        let fault = DuplicateContainer::default();
        fake.respond(" pods --name", Output { status: 0, stdout: listing(), stderr: String::new() });
        let list = fault.sandboxes(&ctx, "remove-duplicate", &pod()).await.unwrap();
        assert_eq!(fake.lines()[0], format!("ip netns exec faultlab-node timeout -k 5 60 {CRI} pods --name '^web-1$' --namespace '^fl-test$' -o json"));
        let cmd = removal(&ctx.node.profile, &list, &pod()).unwrap();
        assert_eq!(shell_join(&cmd.argv), format!("{CRI} rmp -f dup1"));
        // Already removed: nothing to run.
        assert!(removal(&ctx.node.profile, &SandboxListJson::default(), &pod()).is_none());
    }

    #[test]
    fn no_parameters_nothing_to_check() {
        assert!(DuplicateContainer::default().check().is_empty());
        assert!(DuplicateContainer::default().workload_refs().is_empty());
        let unknown: Result<DuplicateContainer, _> = serde_json::from_value(serde_json::json!({"attempt": 1}));
        assert!(unknown.is_err(), "no parameters at all");
    }

    #[test]
    fn the_next_attempt_follows_the_latest_without_overflowing() {
        let list = crate::faults::api::parse_sandboxes("x", &listing()).unwrap();
        assert_eq!(next_attempt(&list.items[..1]), Some(1));
        assert_eq!(next_attempt(&list.items[..0]), Some(0));
        let mut last = list.items[0].clone();
        last.metadata.attempt = u32::MAX;
        assert_eq!(next_attempt([&last]), None, "the runtime's last number: no next, no panic");
    }
}
