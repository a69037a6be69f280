//! volume-multi-attach: a node fails with a pod's ReadWriteOnce volume attached to it; the pod is
//! evicted, and its replacement on another node cannot have the volume (Multi-Attach) until the
//! controller manager gives up on the failed node and detaches it by force.
//!
//! Source: imroc's Kubernetes troubleshooting guide, "Pod 一直处于 ContainerCreating 或 Waiting 状态",
//! "挂载 Volume 失败" / "Pod 漂移没有正常解挂之前的磁盘": a node dies (kubelet 无法正常运行或与 apiserver 通信),
//! its pods are evicted after a threshold and start on other nodes (Pod 漂移), but the dead node never
//! unmounts, so the disk stays attached to it; after a threshold the controller detaches it by force
//! and attaches it where the pod now is. ContainerCreating lasts longer, but the pod starts in the end.
//!
//! How: the volume is one of faultlab's CSI driver (`disk.faultlab.dev`: `faultlab-cri csi-node` on
//! each node, the controller half [`crate::attacher`] run by this fault for the run), attached and
//! detached by kube-controller-manager's attach/detach controller, as a cloud disk is. The fault stops
//! the node's kubelet (its undo, journalled first, starts it again): the node stops posting its
//! status, the node lifecycle controller taints it, and the workload's pod, which tolerates that for
//! 5 s, is evicted. The kubelet being gone, the pod stays Terminating on the node and the volume
//! attached there; the ReplicaSet's new pod on another node meets the attach/detach controller's
//! Multi-Attach check. The fix is what the failed node cannot do: the evicted pod is deleted from the
//! API without the kubelet's word (`kubectl delete pod --grace-period=0 --force`, what removing a dead
//! cloud node's object leads to); the controller then detaches the volume by force once its maximum
//! wait for the node to unmount has passed (6 minutes in Kubernetes 1.20), and attaches it to the new
//! node.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use k8s_openapi::api::core::v1::Pod;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::json;

use super::api::{Ctx, Fault, FaultError, Fix, Presence, Reach, WorkloadRef};
use crate::check::{dns_subdomain, Problem};
use crate::cmd::{Ask, Cmd, Output};
use crate::gates::Target;
use crate::node::{ComponentControl, NodeProfile};

#[derive(Clone, Debug, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct VolumeMultiAttach {
    /// The workload's PersistentVolumeClaim the disk is made for: the fault makes the disk (a
    /// PersistentVolume named after the run's namespace, bound to this claim), as an administrator
    /// provisions a cloud disk, and the claim names it (`volumeName: ${namespace}`).
    pub claim: String,
    /// The driver's controller half of each run going on in this process, by the run's namespace: a
    /// run's stops at its end ([`Fault::end`]: its sender dropped), or with the process. The fault is
    /// the scenario's, shared by every run of it in a batch, so that dropping the fault would be too late.
    #[serde(skip)]
    #[schemars(skip)]
    attacher: Arc<Mutex<BTreeMap<String, tokio::sync::oneshot::Sender<()>>>>,
}

/// The document's fix, step by step (scenario files name them in `fix[].step`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Step {
    ForceDeleteEvictedPod,
}

/// What the kubelet's status command asks: whether it runs (a plan answers it).
const STATUS: Ask = Ask("kubelet-status");

/// How often the controller half looks for attachments to mark attached.
const ATTACH_PERIOD: Duration = Duration::from_secs(1);

impl VolumeMultiAttach {
    /// The kubelet's commands on the node, or why the platform has none.
    fn control(ctx: &Ctx, step: &str) -> Result<ComponentControl, FaultError> {
        ctx.node.profile.kubelet.control.clone().ok_or_else(|| FaultError::Check {
            step: step.into(),
            message: format!("node {} has no kubelet.control in its description: this platform does not let faults stop its kubelet", ctx.node.name()),
        })
    }

    /// Start the driver's controller half for this run, once (a plan has no cluster: nothing runs).
    fn ensure_attacher(&self, ctx: &Ctx) {
        let mut running = self.attacher.lock().unwrap_or_else(|p| p.into_inner());
        if running.get(&ctx.namespace).is_some_and(|tx| !tx.is_closed()) {
            return;
        }
        let Some(client) = ctx.kube.client() else { return };
        let driver = Self::driver(ctx);
        let (tx, rx) = tokio::sync::oneshot::channel::<()>();
        tokio::spawn(async move {
            crate::attacher::run(client, &driver, ATTACH_PERIOD, async move { let _ = rx.await; }, |name| tracing::info!("attacher: VolumeAttachment {name} marked attached")).await;
        });
        running.insert(ctx.namespace.clone(), tx);
    }

    /// The CSI driver of the node's description (faultlab's).
    fn driver(ctx: &Ctx) -> String {
        ctx.node.profile.csi.as_ref().map(|c| c.driver.clone()).unwrap_or_else(|| crate::attacher::DRIVER.into())
    }

    /// The evicted pods the failed node cannot confirm: the workload's pods being deleted.
    async fn stuck_pods(ctx: &Ctx, step: &str) -> Result<Vec<String>, FaultError> {
        let pods: Vec<Pod> = ctx.kube.list(Some(&ctx.namespace), Some(&ctx.target.selector)).await.map_err(Ctx::api_err(step))?;
        Ok(pods.into_iter().filter(|p| p.metadata.deletion_timestamp.is_some()).filter_map(|p| p.metadata.name).collect())
    }
}

#[async_trait]
impl Fault for VolumeMultiAttach {
    /// The node fails: the node lifecycle controller taints it and evicts every pod there that does not
    /// tolerate it, and the workload moves to another node. With `faultlab run --jobs` on a shared
    /// cluster the scheduler keeps both nodes for the run, so no other run's pods are evicted.
    fn reach(&self) -> Reach {
        Reach::NodeFailure
    }

    fn check(&self) -> Vec<Problem> {
        let why = "it names the workload's PersistentVolumeClaim the fault's disk is bound to";
        dns_subdomain("claim", &self.claim).map(|p| Problem::new(p.field, format!("{}; {why}", p.message))).into_iter().collect()
    }

    fn workload_refs(&self) -> Vec<WorkloadRef> {
        vec![WorkloadRef { field: "claim", kind: "PersistentVolumeClaim", name: self.claim.clone() }]
    }

    fn needs(&self) -> crate::needs::Needs {
        crate::needs::Needs { moves_between_nodes: true, csi_driver: true, ..Default::default() }
    }

    /// The volume is faultlab's CSI driver's: the node must run its node plugin, and its kubelet must
    /// be one the platform lets faults stop.
    fn refusal(&self, node: &NodeProfile) -> Option<String> {
        if node.kubelet.control.is_none() {
            return Some(format!("node {} has no kubelet.control in its description: this platform does not let faults stop its kubelet", node.name));
        }
        match &node.csi {
            None => Some(format!(
                "node {} does not run faultlab's CSI node plugin ({}), whose volume the workload uses: the test bed's nodes run it (ci/testbed/up), and kind's where the node image carries faultlab-cri (this project's, ci/kind/node-image; not kindest/node)",
                node.name,
                crate::attacher::DRIVER
            )),
            Some(csi) if csi.driver != crate::attacher::DRIVER => {
                Some(format!("node {} runs CSI driver {}, not {}, which the workload's volume names", node.name, csi.driver, crate::attacher::DRIVER))
            }
            Some(_) => None,
        }
    }

    fn plan_answers(&self, _node: &NodeProfile, _namespace: &str) -> Vec<(Ask, Output)> {
        vec![(STATUS, Output::ok("stopped\n"))]
    }

    /// A plan's workload has one pod left Terminating on the failed node (named as the test bed's
    /// first node: a plan for another node shows the fault's check finding none there).
    fn plan_api_answers(&self, target: &Target) -> Vec<(String, serde_json::Value)> {
        let labels: serde_json::Map<String, serde_json::Value> =
            target.selector.split(',').filter_map(|kv| kv.split_once('=')).map(|(k, v)| (k.trim().to_string(), json!(v.trim()))).collect();
        let pod = json!({"metadata": {"name": "evicted-pod", "labels": labels, "deletionTimestamp": "2026-01-01T00:00:00Z"}, "spec": {"nodeName": "faultlab-node", "containers": []}});
        vec![("/pods".into(), json!([pod]))]
    }

    /// The controller half runs from before the workload is made; then the disk, its deletion
    /// journalled first: a PersistentVolume of the driver, ReadWriteOnce, bound to the workload's claim,
    /// its volume a directory of the run's own (the volume handle, the namespace's name).
    async fn prepare(&self, ctx: &Ctx) -> Result<(), FaultError> {
        self.refuse_bad_parameters("make-disk")?;
        let driver = Self::driver(ctx);
        ctx.note(format!("run {driver}'s controller half for the run, in faultlab: it marks attached the VolumeAttachments the attach/detach controller makes for the driver (its node plugin runs on each node)"));
        self.ensure_attacher(ctx);
        let name = ctx.namespace.clone();
        ctx.undo_by_deleting("v1", "PersistentVolume", &name)?;
        ctx.note(format!("make the disk: PersistentVolume {name} of {driver}, ReadWriteOnce, for claim {} (Retain: the data outlives the pods)", self.claim));
        let disk = json!({
            "apiVersion": "v1",
            "kind": "PersistentVolume",
            "metadata": {"name": name, "labels": {"app.kubernetes.io/managed-by": "faultlab"}},
            "spec": {
                "capacity": {"storage": "64Mi"},
                "accessModes": ["ReadWriteOnce"],
                "persistentVolumeReclaimPolicy": "Retain",
                "storageClassName": "",
                "claimRef": {"namespace": ctx.namespace, "name": self.claim},
                "csi": {"driver": driver, "volumeHandle": name},
            },
        });
        ctx.kube.create_object(None, disk).await.map(drop).map_err(Ctx::api_err("make-disk"))
    }

    /// A training session's `check` (another process than the one that broke the cluster, which has
    /// ended) runs the controller half while it lives: it attaches the volume to the new node after a
    /// fix made by hand (`faultlab check --wait`: the whole wait).
    fn resume(&self, ctx: &Ctx) {
        self.ensure_attacher(ctx);
    }

    /// The run's controller half stops: before, it went on for the rest of the process, and against a
    /// kind cluster deleted after the run it logged a failed connection every few seconds (CI's kind
    /// suite: 94 lines over 7 minutes, after volume-multi-attach ran first).
    fn end(&self, ctx: &Ctx) {
        self.attacher.lock().unwrap_or_else(|p| p.into_inner()).remove(&ctx.namespace);
    }

    /// Journal the kubelet's start, then stop it.
    async fn inject(&self, ctx: &Ctx) -> Result<(), FaultError> {
        let control = Self::control(ctx, "stop-kubelet")?;
        self.ensure_attacher(ctx);
        ctx.undo_on_node(&format!("start the kubelet of node {} again", ctx.node.name()), Cmd::new(control.start.iter().cloned()).timeout(Duration::from_secs(150)))?;
        ctx.note(format!(
            "stop the kubelet of node {}: the node fails as the document's does (kubelet 无法正常运行或与 apiserver 通信), with the workload's volume attached to it",
            ctx.node.name()
        ));
        ctx.run("stop-kubelet", Cmd::new(control.stop.iter().cloned()).timeout(Duration::from_secs(150))).await.map(drop)
    }

    /// In place while the node's kubelet is stopped and the node still holds a pod of the workload
    /// (running, or evicted and Terminating): the volume cannot leave it. Gone once the kubelet runs
    /// again (the node came back) or no pod of the workload is left on the node (the documented fix:
    /// the evicted pod deleted), though the node stays down: a training check tells the fix by this.
    async fn present(&self, ctx: &Ctx) -> Result<Presence, FaultError> {
        let control = Self::control(ctx, "check-kubelet")?;
        let out = ctx.run("check-kubelet", Cmd::new(control.status.iter().cloned()).asks(STATUS).timeout(Duration::from_secs(60))).await?;
        let node = ctx.node.name();
        let state = out.stdout.trim();
        if state == "running" {
            return Ok(Presence::Absent(format!("the kubelet of node {node} runs")));
        }
        let pods: Vec<Pod> = ctx.kube.list(Some(&ctx.namespace), Some(&ctx.target.selector)).await.map_err(Ctx::api_err("check-kubelet"))?;
        let held: Vec<String> = pods.into_iter().filter(|p| p.spec.as_ref().and_then(|s| s.node_name.as_deref()) == Some(node)).filter_map(|p| p.metadata.name).collect();
        Ok(if held.is_empty() {
            Presence::Absent(format!("the kubelet of node {node} is {state}, but no pod of the workload is left on it: its volume can be detached"))
        } else {
            Presence::Present(format!("the kubelet of node {node} is {state}, and it still holds pod {}", held.join(", ")))
        })
    }
}

#[async_trait]
impl Fix for VolumeMultiAttach {
    type Step = Step;

    /// Deleting a pod that is gone succeeds: idempotent.
    async fn fix(&self, which: Step, ctx: &Ctx) -> Result<(), FaultError> {
        let step = super::steps::Steps::name(which);
        match which {
            Step::ForceDeleteEvictedPod => {
                // A fix from another process (a training session's) needs the controller half too.
                self.ensure_attacher(ctx);
                let stuck = Self::stuck_pods(ctx, step).await?;
                if stuck.is_empty() {
                    ctx.note("no pod of the workload is left Terminating: nothing to delete");
                }
                for name in stuck {
                    ctx.note(format!(
                        "delete pod {name} without its node's word (kubectl delete pod {name} --grace-period=0 --force): its node is gone and cannot; the attach/detach controller then detaches the volume by force once its maximum wait for the unmount has passed"
                    ));
                    ctx.kube.force_delete_pod(&ctx.namespace, &name).await.map_err(Ctx::api_err(step))?;
                }
                Ok(())
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::faults::testing::plan_ctx;
    use crate::journal::Undo;
    use crate::record::Channel;

    #[tokio::test]
    async fn plan_journals_the_start_stops_the_kubelet_and_force_deletes_the_evicted_pod() {
        let fault = fault();
        let (ctx, fake) = plan_ctx(&fault);
        fault.prepare(&ctx).await.unwrap();
        assert!(fault.attacher.lock().unwrap().is_empty(), "a plan starts no controller half");
        fault.inject(&ctx).await.unwrap();
        assert!(matches!(fault.present(&ctx).await.unwrap(), Presence::Present(p) if p == "the kubelet of node faultlab-node is stopped, and it still holds pod evicted-pod"));
        fault.fix(Step::ForceDeleteEvictedPod, &ctx).await.unwrap();
        let lines = fake.lines();
        assert_eq!(lines.len(), 2, "{lines:?}");
        assert!(lines[0].ends_with("/opt/faultlab/ci/testbed/node stop kubelet"), "{lines:?}");
        assert!(lines[1].ends_with("/opt/faultlab/ci/testbed/node status kubelet"), "{lines:?}");
        let journal = ctx.journal.snapshot();
        assert_eq!(journal.entries[0].what, "delete PersistentVolume fl-test", "the disk's deletion before the disk");
        assert_eq!(journal.entries[1].what, "start the kubelet of node faultlab-node again");
        assert!(matches!(&journal.entries[1].undo, Undo::Node { cmd, .. } if cmd.argv[1..] == ["start".to_string(), "kubelet".to_string()]));
        let api: Vec<String> = ctx.rec().entries().into_iter().filter(|e| e.channel == Channel::Api).map(|e| e.line).collect();
        assert_eq!(
            api,
            [
                "POST /api/v1/persistentvolumes (PersistentVolume fl-test)",
                "GET /api/v1/namespaces/fl-test/pods?labelSelector=app=web",
                "GET /api/v1/namespaces/fl-test/pods?labelSelector=app=web",
                "DELETE /api/v1/namespaces/fl-test/pods/evicted-pod gracePeriodSeconds=0",
            ]
        );
    }

    #[tokio::test]
    async fn a_node_without_kubelet_control_or_the_csi_plugin_is_refused_before_anything() {
        let fault = fault();
        let (mut ctx, fake) = plan_ctx(&fault);
        assert_eq!(fault.refusal(&ctx.node.profile), None, "the test bed's node has both");
        ctx.node.profile.csi = None;
        assert!(fault.refusal(&ctx.node.profile).is_some_and(|r| r.contains("does not run faultlab's CSI node plugin (disk.faultlab.dev)")));
        ctx.node.profile.kubelet.control = None;
        assert!(fault.refusal(&ctx.node.profile).is_some_and(|r| r.contains("no kubelet.control")));
        let err = fault.inject(&ctx).await.unwrap_err().to_string();
        assert!(err.contains("no kubelet.control in its description"), "{err}");
        assert!(ctx.journal.snapshot().entries.is_empty() && fake.lines().is_empty(), "nothing journalled, nothing run");
    }

    /// The documented fix takes the fault away though the node stays down: with no pod of the workload
    /// left on the node, the check finds it gone; with the kubelet back, too.
    #[tokio::test]
    async fn the_fault_is_gone_once_the_node_holds_no_pod_or_runs_again() {
        let fault = fault();
        let (mut ctx, fake) = plan_ctx(&fault);
        ctx.kube = crate::kube_ops::Kube::scripted(ctx.rec().clone(), vec![("/pods".into(), json!([{"metadata": {"name": "db-2"}, "spec": {"nodeName": "faultlab-node-2", "containers": []}}]))]);
        assert!(matches!(fault.present(&ctx).await.unwrap(), Presence::Absent(p) if p.ends_with("no pod of the workload is left on it: its volume can be detached")));
        fake.answer(STATUS, Output::ok("running\n"));
        assert!(matches!(fault.present(&ctx).await.unwrap(), Presence::Absent(p) if p == "the kubelet of node faultlab-node runs"));
    }

    #[test]
    fn the_workload_moves_so_it_is_preferred_not_pinned() {
        assert!(fault().needs().moves_between_nodes);
    }

    #[tokio::test]
    async fn a_claim_that_is_no_object_name_is_refused_before_the_disk_is_made() {
        let bad = VolumeMultiAttach { claim: "Data/x".into(), ..fault() };
        assert_eq!(bad.check().len(), 1);
        let (ctx, _) = plan_ctx(&bad);
        assert!(bad.prepare(&ctx).await.is_err());
        assert!(ctx.journal.snapshot().entries.is_empty(), "nothing journalled");
    }

    /// The controller half a run starts lists attachments every second until the run's end, then stops
    /// and lets go of the client: no request after that (against a mock API server).
    #[tokio::test]
    async fn the_run_s_controller_half_stops_at_its_end() {
        use http::{Request, Response};
        use kube::client::Body;
        let fault = fault();
        let (mut ctx, _) = plan_ctx(&fault);
        let (service, mut handle) = tower_test::mock::pair::<Request<Body>, Response<Body>>();
        ctx.kube = crate::kube_ops::Kube::new(kube::Client::new(service, "default"), ctx.rec().clone());
        fault.resume(&ctx);
        fault.resume(&ctx);
        let empty = || Response::builder().body(Body::from(br#"{"apiVersion":"storage.k8s.io/v1","kind":"VolumeAttachmentList","metadata":{},"items":[]}"#.to_vec())).unwrap();
        for _ in 0..2 {
            let (req, send) = tokio::time::timeout(Duration::from_secs(5), handle.next_request()).await.expect("a pass every second").expect("a request");
            assert_eq!(req.uri().path(), "/apis/storage.k8s.io/v1/volumeattachments");
            send.send_response(empty());
        }
        fault.end(&ctx);
        drop(ctx);
        let after = tokio::time::timeout(Duration::from_secs(3), handle.next_request()).await.expect("the client is let go");
        assert!(after.is_none(), "a request after the run's end: {:?}", after.map(|(r, _)| r.uri().to_string()));
        assert!(fault.attacher.lock().unwrap().is_empty());
    }

    fn fault() -> VolumeMultiAttach {
        VolumeMultiAttach { claim: "data".into(), ..Default::default() }
    }
}
