//! The controller half of faultlab's CSI driver (`disk.faultlab.dev`; the node half is
//! `faultlab-cri csi-node`, [`crate::cri::csi`]): it does what kubernetes-csi's external-attacher
//! does for a driver with no controller service of its own, with nothing to run in a sidecar.
//!
//! The attach/detach controller (kube-controller-manager's) decides: for a pod scheduled to a node
//! it creates a `VolumeAttachment` (attacher = the driver, the node, the PersistentVolume) and waits
//! for `status.attached`; to detach it deletes the object and waits for it to be gone. The Multi-Attach
//! check (a ReadWriteOnce volume attached to one node, wanted on another) is its own. This marks its
//! driver's attachments attached (a merge patch of the `status` subresource), and adds no finalizer, as
//! external-attacher's "trivial" mode does: a deleted attachment is gone at once, so nothing hangs on
//! this half when it is not running.
//!
//! What it needs of the API: list VolumeAttachments, patch `volumeattachments/status` (cluster scope).

use std::future::Future;
use std::time::Duration;

use k8s_openapi::api::storage::v1::VolumeAttachment;
use kube::api::{Api, ListParams, Patch, PatchParams};
use kube::Client;
use thiserror::Error;

/// faultlab's CSI driver's name.
pub const DRIVER: &str = "disk.faultlab.dev";

#[derive(Debug, Error)]
pub enum AttacherError {
    #[error("listing VolumeAttachments: {source}")]
    List {
        #[source]
        source: kube::Error,
    },
    #[error("marking VolumeAttachment {name} attached (PATCH .../volumeattachments/{name}/status): {source}")]
    MarkAttached {
        name: String,
        #[source]
        source: kube::Error,
    },
}

/// The attachments of `driver` to mark attached: not being deleted, and not yet attached.
pub fn to_attach<'a>(items: &'a [VolumeAttachment], driver: &str) -> Vec<&'a str> {
    items
        .iter()
        .filter(|va| va.spec.attacher == driver)
        .filter(|va| va.metadata.deletion_timestamp.is_none())
        .filter(|va| !va.status.as_ref().is_some_and(|s| s.attached))
        .filter_map(|va| va.metadata.name.as_deref())
        .collect()
}

/// One pass: list, and mark attached what [`to_attach`] picks. Returns the names marked.
pub async fn attach_pending(client: &Client, driver: &str) -> Result<Vec<String>, AttacherError> {
    let api: Api<VolumeAttachment> = Api::all(client.clone());
    let list = api
        .list(&ListParams::default())
        .await
        .map_err(|source| AttacherError::List { source })?;
    let mut marked = Vec::new();
    for name in to_attach(&list.items, driver) {
        let patch = serde_json::json!({"status": {"attached": true}});
        match api
            .patch_status(name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
        {
            Ok(_) => marked.push(name.to_string()),
            // Deleted between the list and the patch: the controller detached it meanwhile.
            Err(kube::Error::Api(e)) if e.code == 404 => {}
            Err(source) => {
                return Err(AttacherError::MarkAttached {
                    name: name.to_string(),
                    source,
                })
            }
        }
    }
    Ok(marked)
}

/// A pass every `period` until `shutdown`; a pass that fails (the API server restarting) is tried
/// again at the next. `on_marked` hears each attachment marked.
pub async fn run(
    client: Client,
    driver: &str,
    period: Duration,
    shutdown: impl Future<Output = ()>,
    mut on_marked: impl FnMut(&str),
) {
    tokio::pin!(shutdown);
    loop {
        if let Ok(marked) = attach_pending(&client, driver).await {
            for name in &marked {
                on_marked(name);
            }
        }
        tokio::select! {
            _ = &mut shutdown => return,
            _ = tokio::time::sleep(period) => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn va(name: &str, attacher: &str, attached: Option<bool>, deleting: bool) -> VolumeAttachment {
        let mut v: VolumeAttachment = serde_json::from_value(serde_json::json!({
            "metadata": {"name": name},
            "spec": {"attacher": attacher, "nodeName": "n", "source": {"persistentVolumeName": "pv"}},
        }))
        .unwrap();
        if let Some(a) = attached {
            v.status = Some(serde_json::from_value(serde_json::json!({"attached": a})).unwrap());
        }
        if deleting {
            v.metadata.deletion_timestamp =
                Some(serde_json::from_value(serde_json::json!("2026-11-28T06:00:00Z")).unwrap());
        }
        v
    }

    #[test]
    fn only_its_own_pending_attachments() {
        let items = vec![
            va("new", DRIVER, None, false),
            va("not-yet", DRIVER, Some(false), false),
            va("done", DRIVER, Some(true), false),
            va("going", DRIVER, None, true),
            va("theirs", "ebs.csi.aws.com", None, false),
        ];
        assert_eq!(to_attach(&items, DRIVER), vec!["new", "not-yet"]);
    }

    /// The pass against a mock API server: a list, then one status patch, as the API expects it.
    #[tokio::test]
    async fn a_pass_patches_the_status_subresource() {
        use http::{Request, Response};
        use kube::client::Body;
        let (service, mut handle) = tower_test::mock::pair::<Request<Body>, Response<Body>>();
        let client = Client::new(service, "default");
        let server = tokio::spawn(async move {
            let (req, send) = handle.next_request().await.unwrap();
            assert_eq!(req.method(), "GET");
            assert_eq!(
                req.uri().path(),
                "/apis/storage.k8s.io/v1/volumeattachments"
            );
            let list = serde_json::json!({"apiVersion": "storage.k8s.io/v1", "kind": "VolumeAttachmentList", "metadata": {}, "items": [
                {"metadata": {"name": "csi-1"}, "spec": {"attacher": DRIVER, "nodeName": "n", "source": {"persistentVolumeName": "pv"}}},
                {"metadata": {"name": "csi-2"}, "spec": {"attacher": DRIVER, "nodeName": "n", "source": {"persistentVolumeName": "pv"}}, "status": {"attached": true}},
            ]});
            send.send_response(Response::new(Body::from(
                serde_json::to_vec(&list).unwrap(),
            )));
            let (req, send) = handle.next_request().await.unwrap();
            assert_eq!(req.method(), "PATCH");
            assert_eq!(
                req.uri().path(),
                "/apis/storage.k8s.io/v1/volumeattachments/csi-1/status"
            );
            assert_eq!(
                req.headers()["content-type"],
                "application/merge-patch+json"
            );
            let body = req.into_body().collect_bytes().await.unwrap();
            assert_eq!(
                serde_json::from_slice::<serde_json::Value>(&body).unwrap(),
                serde_json::json!({"status": {"attached": true}})
            );
            let done = serde_json::json!({"metadata": {"name": "csi-1"}, "spec": {"attacher": DRIVER, "nodeName": "n", "source": {"persistentVolumeName": "pv"}}, "status": {"attached": true}});
            send.send_response(Response::new(Body::from(
                serde_json::to_vec(&done).unwrap(),
            )));
        });
        assert_eq!(
            attach_pending(&client, DRIVER).await.unwrap(),
            vec!["csi-1".to_string()]
        );
        server.await.unwrap();
    }
}
