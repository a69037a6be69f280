//! faultlab's CSI driver on a real cluster: the attach/detach path a Multi-Attach scenario stands on
//! (issue 31, "Pod 漂移没有正常解挂之前的磁盘").
//!
//! On the test bed (each node runs `faultlab-cri csi-node`, `ci/testbed/up`), with the driver's
//! controller half ([`faultlab::attacher`]) running in this test: a pod's ReadWriteOnce volume is
//! attached to its node by the controller manager's attach/detach controller and published into the
//! pod by the node's kubelet through the node plugin; then that node's kubelet stops (a node that
//! fails), the pod is evicted and its replacement, on the other node, meets the documented symptom:
//! `FailedAttachVolume` "Multi-Attach error ..."; then the kubelet starts again, the old pod goes,
//! the volume is detached and attached to the new node, and the new pod runs with the old pod's data.
//!
//! Needs the test bed with two nodes or more; without it the trial is reported ignored.

use std::collections::BTreeMap;
use std::process::{Command, ExitCode};
use std::time::{Duration, Instant};

use faultlab::attacher;
use faultlab::suite;
use faultlab::testbed::TestBed;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{Event, Namespace, PersistentVolume, PersistentVolumeClaim, Pod};
use k8s_openapi::api::storage::v1::VolumeAttachment;
use kube::api::{Api, DeleteParams, ListParams, PostParams};
use kube::Client;
use libtest_mimic::{Arguments, Failed, Trial};

fn main() -> ExitCode {
    let mut args = Arguments::from_args();
    args.test_threads = Some(1);
    let bed = suite::require_testbed("this trial")
        .map_err(|e| e.to_string())
        .and_then(|path| TestBed::read(&path).map_err(|e| e.to_string()))
        .and_then(|bed| {
            if bed.nodes.len() < 2 {
                Err(format!(
                    "the test bed has {} node; this trial needs two",
                    bed.nodes.len()
                ))
            } else if bed.nodes.iter().any(|n| n.netns.is_none()) {
                // The trial reads the volume's directory on this machine, where a network-namespace
                // node keeps it (a VM node keeps it inside the VM).
                Err("the test bed's nodes are not network namespaces of this machine".to_string())
            } else {
                Ok(bed)
            }
        });
    if let Err(reason) = &bed {
        eprintln!("volume attach trial ignored: {reason}");
    }
    let ignored = bed.is_err();
    let t = Trial::test(
        "volume-moves-only-once-detached-from-a-failed-node",
        move || trial(bed.map_err(Failed::from)?),
    );
    let t = if ignored {
        t.with_kind("no test bed with two nodes")
            .with_ignored_flag(true)
    } else {
        t
    };
    libtest_mimic::run(&args, vec![t]).exit_code()
}

/// The kubelet's `restart` argv of the test bed's node, as `stop` or `start`.
fn kubelet(bed: &TestBed, node: usize, verb: &str) -> Result<(), Failed> {
    let mut argv = bed.nodes[node].kubelet.restart.clone();
    if argv.get(1).map(String::as_str) != Some("restart") {
        return Err(format!(
            "the kubelet's restart command {argv:?} is not the test bed's `node restart kubelet`"
        )
        .into());
    }
    argv[1] = verb.to_string();
    let out = Command::new(&argv[0]).args(&argv[1..]).output()?;
    if !out.status.success() {
        return Err(format!(
            "{}: {}",
            argv.join(" "),
            String::from_utf8_lossy(&out.stderr)
        )
        .into());
    }
    Ok(())
}

async fn wait_for<T, F, Fut>(what: &str, within: Duration, mut f: F) -> Result<T, Failed>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    let start = Instant::now();
    loop {
        if let Some(t) = f().await {
            eprintln!("  {what}: {:.0} s", start.elapsed().as_secs_f64());
            return Ok(t);
        }
        if start.elapsed() > within {
            return Err(format!("{what}: not within {within:?}").into());
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
}

fn trial(bed: TestBed) -> Result<(), Failed> {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    // It stops and starts a kubelet that shares this machine's kernel, so it holds the host shared
    // meanwhile (faultlab::machine_lock), as a faultlab run does: a host-wide fault of another faultlab
    // process (CI's kind suite runs inotify-limit beside this test bed) waits for it. A kubelet stopped
    // under inotify-limit's fault gives back the inotify instances the fault counted (its symptom then
    // fails to come: CI's inotify-limit on the test bed once failed so while the kind suite's clusters
    // went down beside it), and one started under the lowered limit may find none to take.
    let shared = faultlab::machine_lock::MachineClaim {
        shares_kernel: true,
        ..Default::default()
    };
    let _held = rt
        .block_on(faultlab::machine_lock::acquire(
            faultlab::machine_lock::dir(),
            shared,
        ))
        .map_err(|e| e.to_string())?;
    let suffix = format!("{:x}", std::process::id());
    let ns = format!("fl-attach-{suffix}");
    let pv = format!("fl-attach-{suffix}");
    let first = bed.nodes[1].name.clone();
    let result = rt.block_on(async {
        let client = faultlab::kube_ops::connect(&bed.kubeconfig, &bed.context)
            .await
            .map_err(|e| e.to_string())?;
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let attaching = tokio::spawn(attacher::run(
            client.clone(),
            attacher::DRIVER,
            Duration::from_secs(1),
            async move {
                let _ = stopped.await;
            },
            |name| eprintln!("  attacher: marked {name} attached"),
        ));
        let r = moves(&bed, &client, &ns, &pv, &first).await;
        // Whatever happened: the kubelet back, then the objects gone (the attacher still running, so
        // a detach and the deletes go through).
        let restored = kubelet(&bed, 1, "start");
        let cleaned = clean(&client, &ns, &pv).await;
        let _ = stop.send(());
        let _ = attaching.await;
        r.and(restored).and(cleaned)
    });
    result
}

async fn moves(
    bed: &TestBed,
    client: &Client,
    ns: &str,
    pv: &str,
    first: &str,
) -> Result<(), Failed> {
    let pods: Api<Pod> = Api::namespaced(client.clone(), ns);
    let vas: Api<VolumeAttachment> = Api::all(client.clone());
    let events: Api<Event> = Api::namespaced(client.clone(), ns);
    Api::<Namespace>::all(client.clone())
        .create(
            &PostParams::default(),
            &serde_json::from_value(serde_json::json!({"metadata": {"name": ns}}))?,
        )
        .await?;
    let volume_id = format!("vol-{pv}");
    Api::<PersistentVolume>::all(client.clone())
        .create(
            &PostParams::default(),
            &serde_json::from_value(serde_json::json!({
                "metadata": {"name": pv},
                "spec": {"capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"], "persistentVolumeReclaimPolicy": "Retain",
                         "storageClassName": "", "claimRef": {"namespace": ns, "name": "data"},
                         "csi": {"driver": attacher::DRIVER, "volumeHandle": volume_id}},
            }))?,
        )
        .await?;
    Api::<PersistentVolumeClaim>::namespaced(client.clone(), ns)
        .create(
            &PostParams::default(),
            &serde_json::from_value(serde_json::json!({
                "metadata": {"name": "data"},
                "spec": {"accessModes": ["ReadWriteOnce"], "storageClassName": "", "volumeName": pv, "resources": {"requests": {"storage": "1Gi"}}},
            }))?,
        )
        .await?;
    // Evicted 5 s after its node is unreachable (the default is 300 s); first on `first`, which it
    // prefers.
    let prefer = serde_json::json!({"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
        {"weight": 100, "preference": {"matchExpressions": [{"key": "kubernetes.io/hostname", "operator": "In", "values": [first]}]}}]}});
    Api::<Deployment>::namespaced(client.clone(), ns)
        .create(
            &PostParams::default(),
            &serde_json::from_value(serde_json::json!({
                "metadata": {"name": "db"},
                "spec": {"replicas": 1, "strategy": {"type": "Recreate"}, "selector": {"matchLabels": {"app": "db"}},
                  "template": {"metadata": {"labels": {"app": "db"}}, "spec": {
                    "terminationGracePeriodSeconds": 2, "automountServiceAccountToken": false, "affinity": prefer,
                    "tolerations": [
                      {"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 5},
                      {"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 5}],
                    "containers": [{"name": "db", "image": "faultlab.invalid/busybox:1.35", "imagePullPolicy": "IfNotPresent",
                      "command": ["sh", "-c", "hostname >> /data/hosts; exec sleep 100000"],
                      "volumeMounts": [{"name": "data", "mountPath": "/data"}]}],
                    "volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": "data"}}]}}},
            }))?,
        )
        .await?;

    let running_on = |node: String| {
        let pods = pods.clone();
        move || {
            let pods = pods.clone();
            let node = node.clone();
            async move {
                let list = pods
                    .list(&ListParams::default().labels("app=db"))
                    .await
                    .ok()?;
                list.items.into_iter().find(|p| {
                    p.metadata.deletion_timestamp.is_none()
                        && p.spec.as_ref().and_then(|s| s.node_name.as_deref())
                            == Some(node.as_str())
                        && p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running")
                })
            }
        }
    };
    let attached_to = |node: String| {
        let vas = vas.clone();
        let pv = pv.to_string();
        move || {
            let vas = vas.clone();
            let (node, pv) = (node.clone(), pv.clone());
            async move {
                let list = vas.list(&ListParams::default()).await.ok()?;
                list.items.into_iter().find(|va| {
                    va.spec.source.persistent_volume_name.as_deref() == Some(pv.as_str())
                        && va.spec.node_name == node
                        && va.status.as_ref().is_some_and(|s| s.attached)
                })
            }
        }
    };
    let old = wait_for(
        &format!("the pod running on {first}, its volume attached there"),
        Duration::from_secs(120),
        running_on(first.to_string()),
    )
    .await?;
    wait_for(
        "its VolumeAttachment attached",
        Duration::from_secs(10),
        attached_to(first.to_string()),
    )
    .await?;

    eprintln!("  stopping the kubelet of {first}");
    kubelet(bed, 1, "stop")?;
    let old_name = old.metadata.name.clone().unwrap_or_default();
    let multi = wait_for(
        "the new pod's Multi-Attach error",
        Duration::from_secs(180),
        || {
            let events = events.clone();
            async move {
                let list = events.list(&ListParams::default()).await.ok()?;
                list.items.into_iter().find(|e| {
                    e.reason.as_deref() == Some("FailedAttachVolume")
                        && e.message
                            .as_deref()
                            .is_some_and(|m| m.starts_with("Multi-Attach error"))
                })
            }
        },
    )
    .await?;
    let message = multi.message.clone().unwrap_or_default();
    let expected = format!(
        "Multi-Attach error for volume \"{pv}\" Volume is already used by pod(s) {old_name}"
    );
    if message != expected {
        return Err(format!("the Multi-Attach event reads {message:?}, not {expected:?}").into());
    }
    let new_pod = multi.involved_object.name.clone().unwrap_or_default();
    let new = pods.get(&new_pod).await?;
    let second = new
        .spec
        .as_ref()
        .and_then(|s| s.node_name.clone())
        .unwrap_or_default();
    if second == first || second.is_empty() {
        return Err(format!(
            "the new pod {new_pod} is on {second:?}, not on another node than {first}"
        )
        .into());
    }
    let still: BTreeMap<String, bool> = vas
        .list(&ListParams::default())
        .await?
        .items
        .into_iter()
        .filter(|va| va.spec.source.persistent_volume_name.as_deref() == Some(pv))
        .map(|va| (va.spec.node_name, va.status.is_some_and(|s| s.attached)))
        .collect();
    if still != BTreeMap::from([(first.to_string(), true)]) {
        return Err(format!("with the Multi-Attach error the volume's attachments are {still:?}, not only {first}'s").into());
    }

    eprintln!("  starting the kubelet of {first} again");
    kubelet(bed, 1, "start")?;
    let moved = wait_for(
        &format!("the new pod running on {second}"),
        Duration::from_secs(300),
        running_on(second.clone()),
    )
    .await?;
    wait_for(
        "the volume attached to the new node only",
        Duration::from_secs(10),
        attached_to(second.clone()),
    )
    .await?;
    let log = tokio::fs::read_to_string(format!("/var/lib/faultlab/csi-disks/{volume_id}/hosts"))
        .await
        .unwrap_or_default();
    let lines: Vec<&str> = log.lines().collect();
    let want = [
        old_name.as_str(),
        moved.metadata.name.as_deref().unwrap_or(""),
    ];
    if lines != want {
        return Err(format!("the volume holds {lines:?}, not each pod's line {want:?}: the new pod did not get the old pod's volume").into());
    }
    Ok(())
}

async fn clean(client: &Client, ns: &str, pv: &str) -> Result<(), Failed> {
    let _ = Api::<Namespace>::all(client.clone())
        .delete(ns, &DeleteParams::default())
        .await;
    let namespaces: Api<Namespace> = Api::all(client.clone());
    wait_for("the namespace gone", Duration::from_secs(180), || {
        let namespaces = namespaces.clone();
        async move {
            namespaces
                .get_opt(ns)
                .await
                .ok()
                .and_then(|n| n.is_none().then_some(()))
        }
    })
    .await?;
    let vas: Api<VolumeAttachment> = Api::all(client.clone());
    wait_for("the volume detached", Duration::from_secs(120), || {
        let vas = vas.clone();
        async move {
            let list = vas.list(&ListParams::default()).await.ok()?;
            (!list
                .items
                .iter()
                .any(|va| va.spec.source.persistent_volume_name.as_deref() == Some(pv)))
            .then_some(())
        }
    })
    .await?;
    let _ = Api::<PersistentVolume>::all(client.clone())
        .delete(pv, &DeleteParams::default())
        .await;
    Ok(())
}
