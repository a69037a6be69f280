//! The Kubernetes API calls faultlab makes, each recorded, and skipped in a dry run.

use k8s_openapi::api::core::v1::{Namespace, Pod};
use kube::api::{Api, DeleteParams, DynamicObject, ListParams, PostParams};
use kube::core::{ApiResource, GroupVersionKind};
use kube::Client;
use serde::de::DeserializeOwned;
use serde::Serialize;
use thiserror::Error;

use crate::record::{Channel, Recorder};

#[derive(Debug, Error)]
pub enum KubeError {
    #[error("manifest is not valid YAML: {message}")]
    ManifestYaml { message: String },
    #[error("manifest document {index} has no apiVersion/kind/metadata.name")]
    ManifestShape { index: usize },
    #[error("{verb} {what} failed: {source}")]
    Call {
        verb: &'static str,
        what: String,
        #[source]
        source: kube::Error,
    },
    #[error("cannot read kubeconfig {path}: {source}")]
    Kubeconfig {
        path: String,
        #[source]
        source: kube::config::KubeconfigError,
    },
    #[error("cannot use context {context:?} of {path}: {source}")]
    Context {
        path: String,
        context: String,
        #[source]
        source: kube::config::KubeconfigError,
    },
    #[error("cannot build a client for context {context:?}: {source}")]
    Client {
        context: String,
        #[source]
        source: kube::Error,
    },
    #[error("the cluster of context {context:?} at {server} did not answer: {source}")]
    Unreachable {
        context: String,
        server: String,
        #[source]
        source: kube::Error,
    },
}

/// Kinds faultlab applies that are not namespaced.
const CLUSTER_SCOPED: &[&str] = &["Namespace", "Node", "PersistentVolume", "StorageClass", "ClusterRole", "ClusterRoleBinding"];

/// A client that records each call; without a client (dry run) it only records.
#[derive(Clone)]
pub struct Kube {
    client: Option<Client>,
    rec: Recorder,
}

impl Kube {
    pub fn new(client: Client, rec: Recorder) -> Self {
        Kube { client: Some(client), rec }
    }

    pub fn dry(rec: Recorder) -> Self {
        Kube { client: None, rec }
    }

    pub fn client(&self) -> Option<&Client> {
        self.client.as_ref()
    }

    pub fn recorder(&self) -> &Recorder {
        &self.rec
    }

    fn note(&self, line: String) {
        self.rec.push(Channel::Api, line);
    }

    /// Create the run's namespace, labelled as faultlab's.
    pub async fn create_namespace(&self, name: &str, scenario: &str) -> Result<(), KubeError> {
        let ns: Namespace = serde_json::from_value(serde_json::json!({
            "apiVersion": "v1", "kind": "Namespace",
            "metadata": {"name": name, "labels": {"app.kubernetes.io/managed-by": "faultlab", "faultlab.dev/scenario": scenario}}
        }))
        .expect("static namespace");
        self.create(None, &ns, name).await
    }

    /// Delete a namespace (not waiting for it to go).
    pub async fn delete_namespace(&self, name: &str) -> Result<(), KubeError> {
        self.delete_dynamic(&resource("v1", "Namespace"), None, name).await
    }

    /// Create every document of a manifest in `namespace` (namespaced kinds) or cluster-wide.
    pub async fn apply_manifest(&self, namespace: &str, text: &str) -> Result<Vec<(String, String)>, KubeError> {
        let docs = parse_manifest(text)?;
        let mut created = Vec::new();
        for (index, doc) in docs.into_iter().enumerate() {
            let (api_version, kind, name) = identity(&doc).ok_or(KubeError::ManifestShape { index })?;
            let ar = resource(&api_version, &kind);
            let ns = (!CLUSTER_SCOPED.contains(&kind.as_str())).then_some(namespace);
            let obj: DynamicObject = serde_json::from_value(doc).map_err(|e| KubeError::ManifestYaml { message: e.to_string() })?;
            self.create_dynamic(&ar, ns, &obj, &name).await?;
            created.push((kind, name));
        }
        Ok(created)
    }

    /// Create one object given whole (apiVersion, kind, metadata.name), in `namespace` if its kind is
    /// namespaced; AlreadyExists is success. Returns its kind and name.
    pub async fn create_object(&self, namespace: Option<&str>, object: serde_json::Value) -> Result<(String, String), KubeError> {
        let (api_version, kind, name) = identity(&object).ok_or(KubeError::ManifestShape { index: 0 })?;
        let ar = resource(&api_version, &kind);
        let ns = if CLUSTER_SCOPED.contains(&kind.as_str()) { None } else { namespace };
        let obj: DynamicObject = serde_json::from_value(object).map_err(|e| KubeError::ManifestYaml { message: e.to_string() })?;
        self.create_dynamic(&ar, ns, &obj, &name).await?;
        Ok((kind, name))
    }

    async fn create_dynamic(&self, ar: &ApiResource, ns: Option<&str>, obj: &DynamicObject, name: &str) -> Result<(), KubeError> {
        self.note(format!("POST {} ({} {name})", path(ar, ns, None), ar.kind));
        let Some(client) = &self.client else { return Ok(()) };
        let api = self.dynamic_api(client, ar, ns);
        match api.create(&PostParams::default(), obj).await {
            Ok(_) => Ok(()),
            // Already there: creating is idempotent for fixes that recreate what was deleted.
            Err(kube::Error::Api(s)) if s.code == 409 => Ok(()),
            Err(source) => Err(KubeError::Call { verb: "create", what: format!("{} {name}", ar.kind), source }),
        }
    }

    /// Create a typed object named `name`; AlreadyExists is success.
    pub async fn create<K>(&self, ns: Option<&str>, obj: &K, name: &str) -> Result<(), KubeError>
    where
        K: kube::Resource<DynamicType = ()> + Serialize,
    {
        let ar = ApiResource::erase::<K>(&());
        let mut value = serde_json::to_value(obj).map_err(|e| KubeError::ManifestYaml { message: e.to_string() })?;
        value["apiVersion"] = ar.api_version.clone().into();
        value["kind"] = ar.kind.clone().into();
        let dynamic: DynamicObject = serde_json::from_value(value).map_err(|e| KubeError::ManifestYaml { message: e.to_string() })?;
        self.create_dynamic(&ar, ns, &dynamic, name).await
    }

    fn dynamic_api(&self, client: &Client, ar: &ApiResource, ns: Option<&str>) -> Api<DynamicObject> {
        match ns {
            Some(ns) => Api::namespaced_with(client.clone(), ns, ar),
            None => Api::all_with(client.clone(), ar),
        }
    }

    /// Delete by kind and name; NotFound is success.
    pub async fn delete_dynamic(&self, ar: &ApiResource, ns: Option<&str>, name: &str) -> Result<(), KubeError> {
        self.note(format!("DELETE {}", path(ar, ns, Some(name))));
        let Some(client) = &self.client else { return Ok(()) };
        let api = self.dynamic_api(client, ar, ns);
        match api.delete(name, &DeleteParams::default()).await {
            Ok(_) => Ok(()),
            Err(kube::Error::Api(s)) if s.code == 404 => Ok(()),
            Err(source) => Err(KubeError::Call { verb: "delete", what: format!("{} {name}", ar.kind), source }),
        }
    }

    /// Delete the pods matching `selector`, so that their controller makes new ones.
    pub async fn delete_pods(&self, ns: &str, selector: &str) -> Result<(), KubeError> {
        let ar = resource("v1", "Pod");
        self.note(format!("DELETE {}?labelSelector={selector}", path(&ar, Some(ns), None)));
        let Some(client) = &self.client else { return Ok(()) };
        let api: Api<Pod> = Api::namespaced(client.clone(), ns);
        api.delete_collection(&DeleteParams::default(), &ListParams::default().labels(selector))
            .await
            .map(|_| ())
            .map_err(|source| KubeError::Call { verb: "delete", what: format!("pods -l {selector}"), source })
    }

    /// List typed objects; empty in a dry run.
    pub async fn list<K>(&self, ns: Option<&str>, selector: Option<&str>) -> Result<Vec<K>, KubeError>
    where
        K: kube::Resource<DynamicType = ()> + DeserializeOwned,
    {
        let ar = ApiResource::erase::<K>(&());
        let query = selector.map(|s| format!("?labelSelector={s}")).unwrap_or_default();
        self.note(format!("GET {}{query}", path(&ar, ns, None)));
        let Some(client) = &self.client else { return Ok(Vec::new()) };
        let mut lp = ListParams::default();
        if let Some(s) = selector {
            lp = lp.labels(s);
        }
        let list = self
            .dynamic_api(client, &ar, ns)
            .list(&lp)
            .await
            .map_err(|source| KubeError::Call { verb: "list", what: ar.plural.clone(), source })?;
        list.items.into_iter().map(|o| typed(o, &ar)).collect()
    }

    /// Get a typed object; None if absent or in a dry run.
    pub async fn get<K>(&self, ns: Option<&str>, name: &str) -> Result<Option<K>, KubeError>
    where
        K: kube::Resource<DynamicType = ()> + DeserializeOwned,
    {
        let ar = ApiResource::erase::<K>(&());
        self.note(format!("GET {}", path(&ar, ns, Some(name))));
        let Some(client) = &self.client else { return Ok(None) };
        let found = self
            .dynamic_api(client, &ar, ns)
            .get_opt(name)
            .await
            .map_err(|source| KubeError::Call { verb: "get", what: format!("{} {name}", ar.kind), source })?;
        found.map(|o| typed(o, &ar)).transpose()
    }
}

fn typed<K: DeserializeOwned>(obj: DynamicObject, ar: &ApiResource) -> Result<K, KubeError> {
    let mut value = serde_json::to_value(obj).map_err(|e| KubeError::ManifestYaml { message: e.to_string() })?;
    value["apiVersion"] = ar.api_version.clone().into();
    value["kind"] = ar.kind.clone().into();
    serde_json::from_value(value).map_err(|e| KubeError::ManifestYaml { message: format!("{} from the API: {e}", ar.kind) })
}

/// The API resource for an apiVersion and kind.
pub fn resource(api_version: &str, kind: &str) -> ApiResource {
    let (group, version) = match api_version.split_once('/') {
        Some((g, v)) => (g, v),
        None => ("", api_version),
    };
    ApiResource::from_gvk(&GroupVersionKind::gvk(group, version, kind))
}

/// The REST path of a resource, for records and plans.
pub fn path(ar: &ApiResource, ns: Option<&str>, name: Option<&str>) -> String {
    let mut p = if ar.group.is_empty() { format!("/api/{}", ar.version) } else { format!("/apis/{}/{}", ar.group, ar.version) };
    if let Some(ns) = ns {
        p.push_str(&format!("/namespaces/{ns}"));
    }
    p.push('/');
    p.push_str(&ar.plural);
    if let Some(name) = name {
        p.push('/');
        p.push_str(name);
    }
    p
}

/// Split a manifest into its documents.
pub fn parse_manifest(text: &str) -> Result<Vec<serde_json::Value>, KubeError> {
    let options = serde_saphyr::options! { with_snippet: false };
    let docs: Vec<serde_json::Value> = serde_saphyr::from_str_multiple_with_options::<serde_json::Value, Vec<_>>(text, options)
        .map_err(|e| KubeError::ManifestYaml { message: e.to_string() })?;
    Ok(docs.into_iter().filter(|d| !d.is_null()).collect())
}

fn identity(doc: &serde_json::Value) -> Option<(String, String, String)> {
    Some((
        doc.get("apiVersion")?.as_str()?.to_string(),
        doc.get("kind")?.as_str()?.to_string(),
        doc.get("metadata")?.get("name")?.as_str()?.to_string(),
    ))
}

/// A client for `context` of the kubeconfig at `path`, checked by asking the server for its version.
pub async fn connect(path: &std::path::Path, context: &str) -> Result<Client, KubeError> {
    use kube::config::{KubeConfigOptions, Kubeconfig};
    // kube's rustls has no provider selected by features alone; ring is the one we build with.
    let _ = rustls::crypto::ring::default_provider().install_default();
    let shown = path.display().to_string();
    let kc = Kubeconfig::read_from(path).map_err(|source| KubeError::Kubeconfig { path: shown.clone(), source })?;
    let opts = KubeConfigOptions { context: Some(context.to_string()), ..Default::default() };
    let config = kube::Config::from_custom_kubeconfig(kc, &opts)
        .await
        .map_err(|source| KubeError::Context { path: shown, context: context.into(), source })?;
    let server = config.cluster_url.to_string();
    let client = Client::try_from(config).map_err(|source| KubeError::Client { context: context.into(), source })?;
    match tokio::time::timeout(std::time::Duration::from_secs(15), client.apiserver_version()).await {
        Ok(Ok(_)) => Ok(client),
        Ok(Err(source)) => Err(KubeError::Unreachable { context: context.into(), server, source }),
        Err(_) => Err(KubeError::Unreachable {
            context: context.into(),
            server,
            source: kube::Error::Service("no answer within 15s".into()),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_of_core_and_grouped_resources() {
        assert_eq!(path(&resource("v1", "ConfigMap"), Some("ns"), Some("cfg")), "/api/v1/namespaces/ns/configmaps/cfg");
        assert_eq!(path(&resource("apps/v1", "Deployment"), Some("ns"), None), "/apis/apps/v1/namespaces/ns/deployments");
        assert_eq!(path(&resource("storage.k8s.io/v1", "StorageClass"), None, Some("x")), "/apis/storage.k8s.io/v1/storageclasses/x");
        assert_eq!(resource("v1", "PersistentVolumeClaim").plural, "persistentvolumeclaims");
    }

    #[test]
    fn manifests_split_into_documents() {
        let docs = parse_manifest("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\n---\n---\napiVersion: v1\nkind: Pod\nmetadata: {name: b}\n").unwrap();
        assert_eq!(docs.len(), 2);
        assert_eq!(identity(&docs[1]).unwrap(), ("v1".into(), "Pod".into(), "b".into()));
    }
}
