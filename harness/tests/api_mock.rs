//! The API calls faultlab makes, checked against a kube mock (tower-test): paths, verbs, and the
//! idempotence rules (AlreadyExists on create and NotFound on delete are success).

use faultlab::kube_ops::{resource, Kube};
use faultlab::record::Recorder;
use http::{Request, Response};
use kube::client::Body;
use tower_test::mock;

type Handle = mock::Handle<Request<Body>, Response<Body>>;

fn client() -> (Kube, Handle) {
    let (service, handle) = mock::pair::<Request<Body>, Response<Body>>();
    let client = kube::Client::new(service, "default");
    (Kube::new(client, Recorder::default()), handle)
}

fn status(code: u16, reason: &str) -> Response<Body> {
    let body = serde_json::json!({"kind": "Status", "apiVersion": "v1", "status": "Failure", "reason": reason, "code": code, "message": reason});
    Response::builder().status(code).body(Body::from(serde_json::to_vec(&body).unwrap())).unwrap()
}

async fn body_json(req: Request<Body>) -> serde_json::Value {
    let bytes = req.into_body().collect_bytes().await.unwrap();
    serde_json::from_slice(&bytes).unwrap()
}

#[tokio::test]
async fn namespace_is_created_with_our_labels() {
    let (kube, mut handle) = client();
    let server = tokio::spawn(async move {
        let (req, send) = handle.next_request().await.unwrap();
        assert_eq!(req.method(), "POST");
        assert_eq!(req.uri().path(), "/api/v1/namespaces");
        let body = body_json(req).await;
        assert_eq!(body["metadata"]["name"], "fl-demo-x");
        assert_eq!(body["metadata"]["labels"]["app.kubernetes.io/managed-by"], "faultlab");
        send.send_response(Response::builder().status(201).body(Body::from(serde_json::to_vec(&body).unwrap())).unwrap());
    });
    kube.create_namespace("fl-demo-x", "demo").await.unwrap();
    server.await.unwrap();
}

#[tokio::test]
async fn recreating_what_exists_and_deleting_what_is_gone_succeed() {
    let (kube, mut handle) = client();
    let server = tokio::spawn(async move {
        let (req, send) = handle.next_request().await.unwrap();
        assert_eq!((req.method().as_str(), req.uri().path()), ("POST", "/api/v1/namespaces/ns/configmaps"));
        send.send_response(status(409, "AlreadyExists"));
        let (req, send) = handle.next_request().await.unwrap();
        assert_eq!((req.method().as_str(), req.uri().path()), ("DELETE", "/apis/storage.k8s.io/v1/storageclasses/local"));
        send.send_response(status(404, "NotFound"));
        let (req, send) = handle.next_request().await.unwrap();
        assert_eq!((req.method().as_str(), req.uri().path()), ("DELETE", "/api/v1/namespaces/ns/configmaps/cfg"));
        send.send_response(status(403, "Forbidden"));
    });
    let cm: k8s_openapi::api::core::v1::ConfigMap = serde_json::from_value(serde_json::json!({"metadata": {"name": "cfg"}})).unwrap();
    kube.create(Some("ns"), &cm, "cfg").await.unwrap();
    kube.delete_dynamic(&resource("storage.k8s.io/v1", "StorageClass"), None, "local").await.unwrap();
    let err = kube.delete_dynamic(&resource("v1", "ConfigMap"), Some("ns"), "cfg").await.unwrap_err();
    assert!(err.to_string().starts_with("delete ConfigMap cfg failed"), "{err}");
    server.await.unwrap();
}

#[tokio::test]
async fn restart_deletes_the_pods_by_selector_and_manifests_go_to_their_kinds() {
    let (kube, mut handle) = client();
    let server = tokio::spawn(async move {
        let (req, send) = handle.next_request().await.unwrap();
        assert_eq!(req.method(), "DELETE");
        assert_eq!(req.uri().path(), "/api/v1/namespaces/ns/pods");
        assert!(req.uri().query().unwrap().contains("labelSelector=app%3Dweb"), "{:?}", req.uri());
        let list = serde_json::json!({"kind": "PodList", "apiVersion": "v1", "metadata": {}, "items": []});
        send.send_response(Response::builder().status(200).body(Body::from(serde_json::to_vec(&list).unwrap())).unwrap());
        for want in ["/apis/apps/v1/namespaces/ns/deployments", "/apis/storage.k8s.io/v1/storageclasses"] {
            let (req, send) = handle.next_request().await.unwrap();
            assert_eq!((req.method().as_str(), req.uri().path()), ("POST", want));
            let body = body_json(req).await;
            send.send_response(Response::builder().status(201).body(Body::from(serde_json::to_vec(&body).unwrap())).unwrap());
        }
    });
    kube.delete_pods("ns", "app=web").await.unwrap();
    let created = kube
        .apply_manifest("ns", "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web}\nspec: {}\n---\napiVersion: storage.k8s.io/v1\nkind: StorageClass\nmetadata: {name: local}\nprovisioner: kubernetes.io/no-provisioner\n")
        .await
        .unwrap();
    assert_eq!(created, vec![("Deployment".to_string(), "web".to_string()), ("StorageClass".to_string(), "local".to_string())]);
    server.await.unwrap();
}
