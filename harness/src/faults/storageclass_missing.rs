//! storageclass-missing: the cluster has no StorageClass, so a StatefulSet's claim never binds.
//!
//! Source: DaoCloud mspider troubleshooting "创建网格时一直处于“创建中”", case 1: the control-plane
//! cluster had no StorageClass deployed, the etcd PVC stays Pending and so does the etcd pod. Fix, in
//! the document's order: deploy hwameistor or localPath (a StorageClass), delete the pending PVC,
//! restart the pod. On Kubernetes before 1.28 a claim made without a class never gets the default class
//! later, which is why the PVC must be deleted and made again.
//!
//! Where the cluster has StorageClasses (kind ships `standard`, a rancher local-path class), `prepare`
//! saves each, journals its re-creation, and deletes it; the fix then re-creates them, which on kind is
//! the document's "deploy localPath". Where there are none and no provisioner (the test bed), the fix
//! deploys a local class (`kubernetes.io/no-provisioner`, marked default) with a static hostPath
//! PersistentVolume of that class, on a directory made on the node.

use async_trait::async_trait;
use k8s_openapi::api::storage::v1::StorageClass;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

use super::api::{Ctx, Fault, FaultError, Fix, Presence, Reach};
use crate::check::{dns_subdomain, quantity_milli, Problem};
use crate::cmd::Cmd;

/// The annotation that makes a class the default one new claims get.
pub const DEFAULT_CLASS_ANNOTATION: &str = "storageclass.kubernetes.io/is-default-class";

fn default_class() -> String {
    "local-storage".into()
}

fn default_capacity() -> String {
    "1Gi".into()
}

/// The largest capacity, in bytes (1 PiB): the volume is a directory on one node's disk.
pub const MAX_CAPACITY_BYTES: u128 = 1 << 50;

/// The volume's capacity: a Kubernetes quantity of whole bytes, from 1 byte to 1 PiB, without spaces
/// around it (it goes into the PersistentVolume as written).
fn check_capacity(field: &str, value: &str) -> Option<Problem> {
    if value.trim() != value {
        return Some(Problem::new(field, format!("{value:?} has spaces around it: it goes into the PersistentVolume's capacity as written (for example 1Gi)")));
    }
    let milli = match quantity_milli(field, value) {
        Ok(m) => m,
        Err(problem) => return Some(problem),
    };
    let why = "the capacity of the static volume the fix makes for the claim: more than zero and a whole number of bytes, and at most 1Pi, \
               as the volume is a directory on one node's disk; it must also be at least what the claim requests";
    if milli == 0 || milli > MAX_CAPACITY_BYTES * 1000 {
        return Some(Problem::new(field, format!("{value:?} is out of range: it must be 1 to 1Pi bytes ({why})")));
    }
    if milli % 1000 != 0 {
        return Some(Problem::new(field, format!("{value:?} is not a whole number of bytes: it must be 1 to 1Pi bytes ({why})")));
    }
    None
}

#[derive(Clone, Debug, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct StorageclassMissing {
    /// The local class the fix deploys where the cluster had none (default `local-storage`).
    #[serde(default = "default_class")]
    pub storage_class: String,
    /// Capacity of the static PersistentVolume that goes with it (default `1Gi`).
    #[serde(default = "default_capacity")]
    pub capacity: String,
}

impl Default for StorageclassMissing {
    fn default() -> Self {
        StorageclassMissing { storage_class: default_class(), capacity: default_capacity() }
    }
}

impl StorageclassMissing {
    /// The classes `prepare` found and deleted, as the fix re-creates them: the journal's undos that
    /// re-create a StorageClass (recorded before each delete), so a fix in another process
    /// (`faultlab solution --apply`) re-creates the same ones.
    fn saved(ctx: &Ctx) -> Vec<Value> {
        ctx.journal.recreated("StorageClass").into_iter().map(|(_, object)| object).collect()
    }

    /// The static volume's directory on the node, one per run.
    pub fn volume_dir(ctx: &Ctx) -> String {
        format!("/var/lib/faultlab/pv-{}", ctx.namespace)
    }

    /// The static volume's name (cluster-wide, so named for the run).
    pub fn volume_name(ctx: &Ctx) -> String {
        format!("{}-data", ctx.namespace)
    }

    /// The local class the document's "deploy a StorageClass" means where nothing provisions: static
    /// volumes, bound as soon as a claim exists, and the default, so the re-made claim gets it.
    pub fn local_class(&self) -> Value {
        json!({
            "apiVersion": "storage.k8s.io/v1",
            "kind": "StorageClass",
            "metadata": {"name": self.storage_class, "annotations": {DEFAULT_CLASS_ANNOTATION: "true"}},
            "provisioner": "kubernetes.io/no-provisioner",
            "reclaimPolicy": "Retain",
            "volumeBindingMode": "Immediate",
        })
    }

    /// A hostPath volume of the local class, on the run's directory on the node.
    pub fn local_volume(&self, ctx: &Ctx) -> Value {
        self.static_volume(ctx, &self.storage_class)
    }

    /// A hostPath volume of class `class`, on the run's directory on the node.
    pub fn static_volume(&self, ctx: &Ctx, class: &str) -> Value {
        json!({
            "apiVersion": "v1",
            "kind": "PersistentVolume",
            "metadata": {"name": Self::volume_name(ctx), "labels": {"app.kubernetes.io/managed-by": "faultlab"}},
            "spec": {
                "capacity": {"storage": self.capacity},
                "accessModes": ["ReadWriteOnce"],
                "persistentVolumeReclaimPolicy": "Retain",
                "storageClassName": class,
                "hostPath": {"path": Self::volume_dir(ctx), "type": "Directory"},
            },
        })
    }

    fn claim(ctx: &Ctx) -> Result<String, FaultError> {
        ctx.target.claim.clone().ok_or_else(|| FaultError::Check {
            step: "claim".into(),
            message: "the scenario's workload.target.claim names no claim; storageclass-missing needs the StatefulSet's claim".into(),
        })
    }

    async fn deploy_class(&self, step: &str, ctx: &Ctx) -> Result<(), FaultError> {
        let saved = Self::saved(ctx);
        if !saved.is_empty() {
            // The cluster's own classes (kindest/node: `standard`, rancher local-path): deploying them
            // again is the document's "deploy localPath". Their provisioner is still running.
            for sc in &saved {
                ctx.kube.create_object(None, sc.clone()).await.map_err(Ctx::api_err(step))?;
            }
            // Classes that provision nothing (faultlab's own kind node image ships a `standard` of
            // `kubernetes.io/no-provisioner`) bind only volumes made by hand: make one for the default.
            if let Some(class) = Self::static_only_default(&saved) {
                Self::journal_static_volume(ctx)?;
                self.make_static_volume(step, ctx, &class).await?;
            }
            return Ok(());
        }
        // Nothing provisions here: a local class and a static volume on the node. Undo first.
        Self::journal_static_volume(ctx)?;
        ctx.undo_by_deleting("storage.k8s.io/v1", "StorageClass", &self.storage_class)?;
        // Creating what exists already succeeds: the step is idempotent.
        ctx.kube.create_object(None, self.local_class()).await.map_err(Ctx::api_err(step))?;
        self.make_static_volume(step, ctx, &self.storage_class).await
    }

    /// The name of the class the re-made claim gets (the default one, else the first) when none of
    /// `classes` provisions volumes; `None` when one does.
    fn static_only_default(classes: &[Value]) -> Option<String> {
        let provisions = |c: &Value| c["provisioner"].as_str().is_some_and(|p| p != "kubernetes.io/no-provisioner");
        if classes.iter().any(provisions) {
            return None;
        }
        let is_default = |c: &&Value| c["metadata"]["annotations"][DEFAULT_CLASS_ANNOTATION].as_str() == Some("true");
        classes.iter().find(is_default).or(classes.first()).and_then(|c| c["metadata"]["name"].as_str()).map(str::to_owned)
    }

    /// Journal the removal of the static volume and its directory, before either is made.
    fn journal_static_volume(ctx: &Ctx) -> Result<(), FaultError> {
        let dir = Self::volume_dir(ctx);
        ctx.undo_on_node(&format!("remove the volume directory {dir}"), Cmd::new(["rm", "-rf", dir.as_str()]))?;
        ctx.undo_by_deleting("v1", "PersistentVolume", &Self::volume_name(ctx))
    }

    /// A static hostPath volume of `class` on a directory made on the node (journalled already).
    async fn make_static_volume(&self, step: &str, ctx: &Ctx, class: &str) -> Result<(), FaultError> {
        let dir = Self::volume_dir(ctx);
        ctx.run(step, Cmd::new(["mkdir", "-p", dir.as_str()])).await?;
        ctx.kube.create_object(None, self.static_volume(ctx, class)).await.map_err(Ctx::api_err(step))?;
        Ok(())
    }
}

/// The document's fix, step by step, in its order (scenario files name them in `fix[].step`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Step {
    DeployStorageclass,
    DeletePendingPvc,
    RestartPod,
}

/// How long `delete-pending-pvc` waits for the claim to be gone.
const CLAIM_GONE_WITHIN: std::time::Duration = std::time::Duration::from_secs(120);

#[async_trait]
impl Fault for StorageclassMissing {
    /// Every StorageClass of the cluster is deleted (and re-created at teardown). On kind it stays within
    /// the node container otherwise: StorageClasses and the static PersistentVolume go through the API,
    /// and the volume's directory is made in the node container's /var, where kind keeps every pod's
    /// volumes anyway (the kubelet mounts it into the pod there); no host path is named.
    fn reach(&self) -> Reach {
        Reach::Cluster
    }

    /// The class is a Kubernetes object name (a DNS-1123 subdomain) and the capacity a positive
    /// quantity of bytes. (The claim it watches is the workload's `target.claim`, which the loader
    /// checks against the manifests: the fault itself names no object the workload makes.)
    fn check(&self) -> Vec<Problem> {
        let mut problems = Vec::new();
        problems.extend(
            dns_subdomain("storageClass", &self.storage_class)
                .map(|p| Problem::new(p.field, format!("{}; it names the StorageClass the fix deploys where the cluster has none", p.message))),
        );
        problems.extend(check_capacity("capacity", &self.capacity));
        problems
    }

    /// Make "no StorageClass" true before the workload exists: save each class, journal its
    /// re-creation, delete it. (kind ships `standard`; the test bed has none.)
    async fn prepare(&self, ctx: &Ctx) -> Result<(), FaultError> {
        self.refuse_bad_parameters("list-storageclasses")?;
        let classes: Vec<StorageClass> = ctx.kube.list(None, None).await.map_err(Ctx::api_err("list-storageclasses"))?;
        ctx.note("every StorageClass listed here is saved, journalled for re-creation and deleted; the fix then re-creates those instead of a local class");
        for sc in &classes {
            let name = sc.metadata.name.clone().unwrap_or_default();
            ctx.note(format!("the cluster must have no StorageClass: delete {name} (re-created at teardown)"));
            let mut object = serde_json::to_value(sc).unwrap_or_default();
            (object["apiVersion"], object["kind"]) = ("storage.k8s.io/v1".into(), "StorageClass".into());
            ctx.delete_restorably("delete-storageclass", None, &object).await?;
        }
        Ok(())
    }

    /// Nothing more to break: `prepare` left the cluster without a class and the StatefulSet made its
    /// claim in it. (The pod is not restarted here: deleting a pending pod races the scheduler, which
    /// then reports `skip schedule deleting pod` instead of the documented message. The claim's
    /// FailedBinding repeats on every 15 s sync, the pod's FailedScheduling on the scheduler's retry.)
    async fn inject(&self, ctx: &Ctx) -> Result<(), FaultError> {
        let claim = Self::claim(ctx)?;
        ctx.note(format!("the StatefulSet made claim {claim} while the cluster had no StorageClass: it stays Pending"));
        Ok(())
    }

    /// In place while the cluster has no StorageClass.
    async fn present(&self, ctx: &Ctx) -> Result<Presence, FaultError> {
        let classes: Vec<StorageClass> = ctx.kube.list(None, None).await.map_err(Ctx::api_err("check-storageclass"))?;
        let names: Vec<String> = classes.iter().filter_map(|c| c.metadata.name.clone()).collect();
        Ok(if names.is_empty() {
            Presence::Present("the cluster has no StorageClass".into())
        } else {
            Presence::Absent(format!("the cluster has StorageClass {}", names.join(", ")))
        })
    }
}

#[async_trait]
impl Fix for StorageclassMissing {
    type Step = Step;

    async fn fix(&self, which: Step, ctx: &Ctx) -> Result<(), FaultError> {
        let step = super::steps::Steps::name(which);
        match which {
            Step::DeployStorageclass => {
                self.refuse_bad_parameters(step)?;
                self.deploy_class(step, ctx).await
            }
            // Deleting a claim that is gone already succeeds. Then, as `kubectl delete` does, wait until
            // it is gone: the pending pod is not scheduled, so the claim's protection finalizer lets it
            // go, but not always at once (11 s once on kind). A pod the StatefulSet makes again while the
            // claim is still there gets no new claim, and waits for the one that went, for ever.
            Step::DeletePendingPvc => {
                let claim = Self::claim(ctx)?;
                let ar = crate::kube_ops::resource("v1", "PersistentVolumeClaim");
                ctx.kube.delete_dynamic(&ar, Some(&ctx.namespace), &claim).await.map_err(Ctx::api_err(step))?;
                let deadline = std::time::Instant::now() + CLAIM_GONE_WITHIN;
                loop {
                    let left = ctx.kube.get_object("v1", "PersistentVolumeClaim", Some(&ctx.namespace), &claim).await.map_err(Ctx::api_err(step))?;
                    let Some(left) = left else { return Ok(()) };
                    if std::time::Instant::now() >= deadline {
                        return Err(FaultError::Check {
                            step: step.into(),
                            message: format!(
                                "claim {claim} is still there {} s after its deletion (finalizers: {})",
                                CLAIM_GONE_WITHIN.as_secs(),
                                left["metadata"]["finalizers"]
                            ),
                        });
                    }
                    ctx.pause(std::time::Duration::from_secs(1)).await;
                }
            }
            // The StatefulSet makes the pod again, and first its claim from the template, which now
            // gets the default class.
            Step::RestartPod => ctx.restart_target(step).await,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_static_volume_goes_with_classes_that_provision_nothing() {
        let class = |name: &str, provisioner: &str, default: bool| {
            let mut c = json!({"metadata": {"name": name}, "provisioner": provisioner});
            if default {
                c["metadata"]["annotations"] = json!({DEFAULT_CLASS_ANNOTATION: "true"});
            }
            c
        };
        let local_path = class("standard", "rancher.io/local-path", true);
        let none_a = class("a", "kubernetes.io/no-provisioner", false);
        let none_std = class("standard", "kubernetes.io/no-provisioner", true);
        assert_eq!(StorageclassMissing::static_only_default(std::slice::from_ref(&local_path)), None, "kindest/node's class provisions");
        assert_eq!(StorageclassMissing::static_only_default(&[none_a.clone(), none_std.clone()]).as_deref(), Some("standard"), "the default");
        assert_eq!(StorageclassMissing::static_only_default(std::slice::from_ref(&none_a)).as_deref(), Some("a"), "else the first");
        assert_eq!(StorageclassMissing::static_only_default(&[none_a, local_path]), None);
    }
    use crate::faults::testing::ctx;
    use crate::journal::Undo;
    use crate::record::Channel;

    fn api(ctx: &Ctx) -> Vec<String> {
        ctx.rec().entries().into_iter().filter(|e| e.channel == Channel::Api).map(|e| e.line).collect()
    }

    #[tokio::test]
    async fn plan_on_a_cluster_without_classes_deploys_a_local_class_and_volume() {
        let (mut ctx, fake) = ctx();
        ctx.target.claim = Some("data-web-0".into());
        let fault = StorageclassMissing::default();
        fault.prepare(&ctx).await.unwrap();
        fault.inject(&ctx).await.unwrap();
        // A plan's API answers nothing: no class, so the fault is in place.
        assert_eq!(fault.present(&ctx).await.unwrap(), Presence::Present("the cluster has no StorageClass".into()));
        for step in crate::faults::steps::all::<Step>() {
            fault.fix(step, &ctx).await.unwrap();
        }
        assert_eq!(
            api(&ctx),
            vec![
                "GET /apis/storage.k8s.io/v1/storageclasses",
                "GET /apis/storage.k8s.io/v1/storageclasses",
                "POST /apis/storage.k8s.io/v1/storageclasses (StorageClass local-storage)",
                "POST /api/v1/persistentvolumes (PersistentVolume fl-test-data)",
                "DELETE /api/v1/namespaces/fl-test/persistentvolumeclaims/data-web-0",
                // Until the claim is gone (here at once), and only then the pod.
                "GET /api/v1/namespaces/fl-test/persistentvolumeclaims/data-web-0",
                "DELETE /api/v1/namespaces/fl-test/pods?labelSelector=app=web",
            ]
        );
        assert_eq!(fake.lines(), vec!["ip netns exec faultlab-node timeout -k 5 60 mkdir -p /var/lib/faultlab/pv-fl-test"]);
        // The undos were journalled before anything was made, and come back in reverse.
        let entries = ctx.journal.snapshot().entries;
        let whats: Vec<&str> = entries.iter().map(|e| e.what.as_str()).collect();
        assert_eq!(whats, vec!["remove the volume directory /var/lib/faultlab/pv-fl-test", "delete PersistentVolume fl-test-data", "delete StorageClass local-storage"]);
        assert!(matches!(&entries[0].undo, Undo::Node { cmd, .. } if cmd.argv == ["rm", "-rf", "/var/lib/faultlab/pv-fl-test"]));
    }

    #[test]
    fn the_local_class_is_the_default_and_the_volume_is_of_it() {
        let (ctx, _) = ctx();
        let fault = StorageclassMissing::default();
        let sc = fault.local_class();
        assert_eq!(sc["metadata"]["annotations"][DEFAULT_CLASS_ANNOTATION], "true");
        assert_eq!(sc["provisioner"], "kubernetes.io/no-provisioner");
        let pv = fault.local_volume(&ctx);
        assert_eq!(pv["spec"]["storageClassName"], "local-storage");
        assert_eq!(pv["spec"]["hostPath"]["path"], "/var/lib/faultlab/pv-fl-test");
        // Both decode as the API types they are.
        let _: StorageClass = serde_json::from_value(sc).unwrap();
        let _: k8s_openapi::api::core::v1::PersistentVolume = serde_json::from_value(pv).unwrap();
    }

    #[tokio::test]
    async fn classes_found_are_journalled_then_recreated_by_the_fix() {
        let (mut ctx, fake) = ctx();
        let standard = json!({
            "metadata": {"name": "standard", "uid": "u-1", "resourceVersion": "7", "annotations": {DEFAULT_CLASS_ANNOTATION: "true"}},
            "provisioner": "rancher.io/local-path", "volumeBindingMode": "WaitForFirstConsumer", "reclaimPolicy": "Delete"
        });
        ctx.kube = crate::kube_ops::Kube::scripted(ctx.rec().clone(), vec![("/storageclasses".into(), json!([standard]))]);
        StorageclassMissing::default().prepare(&ctx).await.unwrap();
        let Undo::CreateObject { namespace: None, object } = &ctx.journal.snapshot().entries[0].undo else { panic!("a cluster-wide re-create") };
        assert_eq!(object["metadata"], json!({"name": "standard", "annotations": {DEFAULT_CLASS_ANNOTATION: "true"}}), "no uid or resourceVersion");
        assert_eq!((object["kind"].clone(), object["provisioner"].clone()), (json!("StorageClass"), json!("rancher.io/local-path")));
        assert_eq!(api(&ctx), vec!["GET /apis/storage.k8s.io/v1/storageclasses", "DELETE /apis/storage.k8s.io/v1/storageclasses/standard"]);
        // The fix, by another instance of the fault (as in another process), re-creates it from the journal.
        let before = api(&ctx).len();
        StorageclassMissing::default().fix(Step::DeployStorageclass, &ctx).await.unwrap();
        assert_eq!(api(&ctx)[before..], ["POST /apis/storage.k8s.io/v1/storageclasses (StorageClass standard)"]);
        assert!(fake.lines().is_empty(), "no local volume where a provisioner exists");
    }

    #[tokio::test]
    async fn needs_the_claim_and_knows_its_steps() {
        let (ctx, _) = ctx();
        let fault = StorageclassMissing::default();
        let err = fault.inject(&ctx).await.unwrap_err();
        assert!(err.to_string().contains("workload.target.claim"), "{err}");
    }

    fn fault(class: &str, capacity: &str) -> StorageclassMissing {
        StorageclassMissing { storage_class: class.into(), capacity: capacity.into() }
    }

    #[rstest::rstest]
    #[case::defaults("local-storage", "1Gi")]
    #[case::dotted("local.storage.example.com", "512Mi")]
    #[case::one_byte("x", "1")]
    #[case::a_pebibyte("x", "1Pi")]
    #[case::decimal_suffix("x", "1.5G")]
    fn parameters_in_range_pass(#[case] class: &str, #[case] capacity: &str) {
        assert_eq!(fault(class, capacity).check(), vec![]);
        assert!(fault(class, capacity).workload_refs().is_empty());
    }

    #[rstest::rstest]
    #[case::empty_class("", "1Gi", "storageClass", "\"\" is not a valid Kubernetes object name: it is empty (a DNS-1123 subdomain); it names the StorageClass the fix deploys")]
    #[case::upper_class("Local", "1Gi", "storageClass", "\"Local\" is not a valid Kubernetes object name: it has a character other than")]
    #[case::negative("local-storage", "-1Gi", "capacity", "\"-1Gi\" is not a Kubernetes quantity (a non-negative number")]
    #[case::zero("local-storage", "0", "capacity", "\"0\" is out of range: it must be 1 to 1Pi bytes (the capacity of the static volume the fix makes for the claim")]
    #[case::zero_gi("local-storage", "0Gi", "capacity", "\"0Gi\" is out of range: it must be 1 to 1Pi bytes")]
    #[case::too_big("local-storage", "2Pi", "capacity", "\"2Pi\" is out of range: it must be 1 to 1Pi bytes")]
    #[case::exa("local-storage", "1E", "capacity", "\"1E\" is out of range")]
    #[case::milli_bytes("local-storage", "500m", "capacity", "\"500m\" is not a whole number of bytes: it must be 1 to 1Pi bytes")]
    #[case::words("local-storage", "lots", "capacity", "\"lots\" is not a Kubernetes quantity")]
    #[case::spaces("local-storage", "1Gi ", "capacity", "\"1Gi \" has spaces around it")]
    fn parameters_out_of_range_say_the_range(#[case] class: &str, #[case] capacity: &str, #[case] field: &str, #[case] message: &str) {
        let problems = fault(class, capacity).check();
        assert_eq!(problems.len(), 1, "{problems:?}");
        assert_eq!(problems[0].field, field);
        assert!(problems[0].message.starts_with(message), "{}", problems[0].message);
        assert_eq!(crate::faults::FaultSpec::StorageclassMissing(fault(class, capacity)).check()[0].field, format!("fault.storageclass-missing.{field}"));
    }

    #[tokio::test]
    async fn bad_parameters_change_nothing_even_unchecked() {
        let (mut ctx, fake) = ctx();
        ctx.target.claim = Some("data-web-0".into());
        let bad = fault("", "-1Gi");
        let err = bad.prepare(&ctx).await.unwrap_err();
        assert!(err.to_string().starts_with("list-storageclasses: storageClass: \"\" is not a valid Kubernetes object name"), "{err}");
        assert!(err.to_string().contains("; capacity: \"-1Gi\" is not a Kubernetes quantity"), "{err}");
        assert!(bad.fix(Step::DeployStorageclass, &ctx).await.is_err());
        assert!(api(&ctx).is_empty(), "{:?}", api(&ctx));
        assert!(fake.lines().is_empty());
        assert!(ctx.journal.snapshot().entries.is_empty());
    }
}
