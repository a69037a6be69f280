//! The Kubernetes API calls faultlab makes, each recorded, then made against the cluster or, in a
//! plan, answered from a script.

use k8s_openapi::api::core::v1::{Namespace, Pod};
use kube::api::{Api, DeleteParams, DynamicObject, ListParams, Patch, PatchParams, PostParams};
use kube::core::{ApiResource, GroupVersionKind};
use kube::Client;
use serde::de::DeserializeOwned;
use serde::Serialize;
use thiserror::Error;

use crate::record::{Channel, Recorder, Work};

#[derive(Debug, Error)]
pub enum KubeError {
    #[error("manifest is not valid YAML: {message}")]
    ManifestYaml { message: String },
    #[error("manifest document {index} has no apiVersion/kind/metadata.name")]
    ManifestShape { index: usize },
    #[error("{verb} {what} failed: {source}")]
    Call {
        verb: &'static str,
        /// A boxed `str`, not a `String`: every fault's error holds a `KubeError`, kept small.
        what: Box<str>,
        #[source]
        source: kube::Error,
    },
    // The sources of the connection steps are boxed: they are rare, and inline they made every
    // `KubeError` (and every fault's error) larger than the API calls need.
    #[error("cannot read kubeconfig {path}: {source}")]
    Kubeconfig {
        path: String,
        #[source]
        source: Box<kube::config::KubeconfigError>,
    },
    #[error("cannot use context {context:?} of {path}: {source}")]
    Context {
        path: String,
        context: String,
        #[source]
        source: Box<kube::config::KubeconfigError>,
    },
    #[error("cannot build a client for context {context:?}: {source}")]
    Client {
        context: String,
        #[source]
        source: Box<kube::Error>,
    },
    #[error("the cluster of context {context:?} at {server} did not answer: {source}")]
    Unreachable {
        context: String,
        server: String,
        #[source]
        source: Box<kube::Error>,
    },
    /// A delete whose name, namespace or selector would reach more than one named object: refused
    /// before it is recorded or sent, in plans too.
    #[error("refusing to {what}: {why}")]
    Refused { what: String, why: String },
}

/// Kinds faultlab applies that are not namespaced.
const CLUSTER_SCOPED: &[&str] = &["Namespace", "Node", "PersistentVolume", "StorageClass", "ClusterRole", "ClusterRoleBinding"];

/// The API calls a run makes, below the record: the live cluster ([`kube::Client`]) or a plan's
/// [`Scripted`] answers. Creating what exists and deleting what is gone are success for both.
#[async_trait::async_trait]
pub trait ApiBackend: Send + Sync {
    async fn create(&self, ar: &ApiResource, ns: Option<&str>, obj: &DynamicObject) -> Result<(), KubeError>;
    async fn delete(&self, ar: &ApiResource, ns: Option<&str>, name: &str) -> Result<(), KubeError>;
    /// Change `name` by a strategic merge patch (as `kubectl patch` does by default).
    async fn patch(&self, ar: &ApiResource, ns: Option<&str>, name: &str, patch: &serde_json::Value) -> Result<(), KubeError>;
    /// Delete the pods of `ns` that `selector` selects.
    async fn delete_pods(&self, ns: &str, selector: &str) -> Result<(), KubeError>;
    /// Delete pod `name` at once, not waiting for its kubelet to confirm (`kubectl delete pod
    /// --grace-period=0 --force`).
    async fn force_delete_pod(&self, ns: &str, name: &str) -> Result<(), KubeError>;
    /// The cluster's client, for what runs beside a run (a plan has none).
    fn client(&self) -> Option<Client> {
        None
    }
    /// The objects of `ns` (all namespaces if `None`) that the label and field selectors select.
    async fn list(&self, ar: &ApiResource, ns: Option<&str>, labels: Option<&str>, fields: Option<&str>) -> Result<Vec<serde_json::Value>, KubeError>;
    async fn get(&self, ar: &ApiResource, ns: Option<&str>, name: &str) -> Result<Option<serde_json::Value>, KubeError>;
}

fn dynamic_api(client: &Client, ar: &ApiResource, ns: Option<&str>) -> Api<DynamicObject> {
    match ns {
        Some(ns) => Api::namespaced_with(client.clone(), ns, ar),
        None => Api::all_with(client.clone(), ar),
    }
}

fn as_value(obj: DynamicObject) -> Result<serde_json::Value, KubeError> {
    serde_json::to_value(obj).map_err(|e| KubeError::ManifestYaml { message: e.to_string() })
}

#[async_trait::async_trait]
impl ApiBackend for Client {
    async fn create(&self, ar: &ApiResource, ns: Option<&str>, obj: &DynamicObject) -> Result<(), KubeError> {
        match dynamic_api(self, ar, ns).create(&PostParams::default(), obj).await {
            Ok(_) => Ok(()),
            // Already there: creating is idempotent for fixes that recreate what was deleted.
            Err(kube::Error::Api(s)) if s.code == 409 => Ok(()),
            Err(source) => Err(KubeError::Call { verb: "create", what: format!("{} {}", ar.kind, obj.metadata.name.as_deref().unwrap_or_default()).into(), source }),
        }
    }

    async fn delete(&self, ar: &ApiResource, ns: Option<&str>, name: &str) -> Result<(), KubeError> {
        match dynamic_api(self, ar, ns).delete(name, &DeleteParams::default()).await {
            Ok(_) => Ok(()),
            Err(kube::Error::Api(s)) if s.code == 404 => Ok(()),
            Err(source) => Err(KubeError::Call { verb: "delete", what: format!("{} {name}", ar.kind).into(), source }),
        }
    }

    async fn patch(&self, ar: &ApiResource, ns: Option<&str>, name: &str, patch: &serde_json::Value) -> Result<(), KubeError> {
        dynamic_api(self, ar, ns)
            .patch(name, &PatchParams::default(), &Patch::Strategic(patch))
            .await
            .map(drop)
            .map_err(|source| KubeError::Call { verb: "patch", what: format!("{} {name}", ar.kind).into(), source })
    }

    async fn delete_pods(&self, ns: &str, selector: &str) -> Result<(), KubeError> {
        let api: Api<Pod> = Api::namespaced(self.clone(), ns);
        api.delete_collection(&DeleteParams::default(), &ListParams::default().labels(selector))
            .await
            .map(|_| ())
            .map_err(|source| KubeError::Call { verb: "delete", what: format!("pods -l {selector}").into(), source })
    }

    async fn force_delete_pod(&self, ns: &str, name: &str) -> Result<(), KubeError> {
        let api: Api<Pod> = Api::namespaced(self.clone(), ns);
        match api.delete(name, &DeleteParams { grace_period_seconds: Some(0), ..DeleteParams::default() }).await {
            Ok(_) => Ok(()),
            Err(kube::Error::Api(s)) if s.code == 404 => Ok(()),
            Err(source) => Err(KubeError::Call { verb: "force-delete", what: format!("Pod {name}").into(), source }),
        }
    }

    fn client(&self) -> Option<Client> {
        Some(self.clone())
    }

    async fn list(&self, ar: &ApiResource, ns: Option<&str>, labels: Option<&str>, fields: Option<&str>) -> Result<Vec<serde_json::Value>, KubeError> {
        let mut lp = ListParams::default();
        if let Some(s) = labels {
            lp = lp.labels(s);
        }
        if let Some(f) = fields {
            lp = lp.fields(f);
        }
        let list = dynamic_api(self, ar, ns).list(&lp).await.map_err(|source| KubeError::Call { verb: "list", what: ar.plural.clone().into(), source })?;
        list.items.into_iter().map(as_value).collect()
    }

    async fn get(&self, ar: &ApiResource, ns: Option<&str>, name: &str) -> Result<Option<serde_json::Value>, KubeError> {
        let found = dynamic_api(self, ar, ns)
            .get_opt(name)
            .await
            .map_err(|source| KubeError::Call { verb: "get", what: format!("{} {name}", ar.kind).into(), source })?;
        found.map(as_value).transpose()
    }
}

/// A plan's API: writes succeed and change nothing; reads answer from a script, each answer a path
/// (or the end of one) and the object, or for a list the objects, found there. Whatever the script
/// does not name is absent or empty.
#[derive(Default)]
pub struct Scripted {
    answers: Vec<(String, serde_json::Value)>,
}

impl Scripted {
    pub fn new(answers: Vec<(String, serde_json::Value)>) -> Self {
        Scripted { answers }
    }

    fn answer(&self, path: &str) -> Option<serde_json::Value> {
        self.answers.iter().rev().find(|(p, _)| path.ends_with(p.as_str())).map(|(_, v)| v.clone())
    }
}

/// Another backend, with the time each call takes counted as [`Work::Api`] in `rec`'s current phase.
struct Timed<B> {
    inner: B,
    rec: Recorder,
}

#[async_trait::async_trait]
impl<B: ApiBackend> ApiBackend for Timed<B> {
    async fn create(&self, ar: &ApiResource, ns: Option<&str>, obj: &DynamicObject) -> Result<(), KubeError> {
        self.rec.timed(Work::Api, self.inner.create(ar, ns, obj)).await
    }
    async fn delete(&self, ar: &ApiResource, ns: Option<&str>, name: &str) -> Result<(), KubeError> {
        self.rec.timed(Work::Api, self.inner.delete(ar, ns, name)).await
    }
    async fn patch(&self, ar: &ApiResource, ns: Option<&str>, name: &str, patch: &serde_json::Value) -> Result<(), KubeError> {
        self.rec.timed(Work::Api, self.inner.patch(ar, ns, name, patch)).await
    }
    async fn delete_pods(&self, ns: &str, selector: &str) -> Result<(), KubeError> {
        self.rec.timed(Work::Api, self.inner.delete_pods(ns, selector)).await
    }
    async fn force_delete_pod(&self, ns: &str, name: &str) -> Result<(), KubeError> {
        self.rec.timed(Work::Api, self.inner.force_delete_pod(ns, name)).await
    }
    fn client(&self) -> Option<Client> {
        self.inner.client()
    }
    async fn list(&self, ar: &ApiResource, ns: Option<&str>, labels: Option<&str>, fields: Option<&str>) -> Result<Vec<serde_json::Value>, KubeError> {
        self.rec.timed(Work::Api, self.inner.list(ar, ns, labels, fields)).await
    }
    async fn get(&self, ar: &ApiResource, ns: Option<&str>, name: &str) -> Result<Option<serde_json::Value>, KubeError> {
        self.rec.timed(Work::Api, self.inner.get(ar, ns, name)).await
    }
}

#[async_trait::async_trait]
impl ApiBackend for Scripted {
    async fn create(&self, _: &ApiResource, _: Option<&str>, _: &DynamicObject) -> Result<(), KubeError> {
        Ok(())
    }

    async fn delete(&self, _: &ApiResource, _: Option<&str>, _: &str) -> Result<(), KubeError> {
        Ok(())
    }

    async fn patch(&self, _: &ApiResource, _: Option<&str>, _: &str, _: &serde_json::Value) -> Result<(), KubeError> {
        Ok(())
    }

    async fn delete_pods(&self, _: &str, _: &str) -> Result<(), KubeError> {
        Ok(())
    }

    async fn force_delete_pod(&self, _: &str, _: &str) -> Result<(), KubeError> {
        Ok(())
    }

    async fn list(&self, ar: &ApiResource, ns: Option<&str>, _: Option<&str>, _: Option<&str>) -> Result<Vec<serde_json::Value>, KubeError> {
        let at = path(ar, ns, None);
        match self.answer(&at) {
            Some(serde_json::Value::Array(items)) => Ok(items),
            Some(other) => Err(KubeError::ManifestYaml { message: format!("the plan's answer for {at} is not a list: {other}") }),
            None => Ok(Vec::new()),
        }
    }

    async fn get(&self, ar: &ApiResource, ns: Option<&str>, name: &str) -> Result<Option<serde_json::Value>, KubeError> {
        Ok(self.answer(&path(ar, ns, Some(name))))
    }
}

/// The API as faults and the runner use it: each call is written to the record, then made through
/// the [`ApiBackend`] below (the cluster, or a plan's script).
#[derive(Clone)]
pub struct Kube {
    api: std::sync::Arc<dyn ApiBackend>,
    rec: Recorder,
}

impl Kube {
    /// The API of `client`, each call's time counted as [`Work::Api`] in `rec`.
    pub fn new(client: Client, rec: Recorder) -> Self {
        Kube { api: std::sync::Arc::new(Timed { inner: client, rec: rec.clone() }), rec }
    }

    /// A plan's API that answers nothing (tests).
    #[cfg(test)]
    pub fn dry(rec: Recorder) -> Self {
        Self::scripted(rec, Vec::new())
    }

    /// A plan's API: records every call and answers reads from `answers` (path suffix, value).
    pub fn scripted(rec: Recorder, answers: Vec<(String, serde_json::Value)>) -> Self {
        Kube { api: std::sync::Arc::new(Scripted::new(answers)), rec }
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
        self.api.create(ar, ns, obj).await
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

    /// Delete by kind and name; NotFound is success. A name or namespace that is empty, blank or not a
    /// single path segment is refused before anything is recorded or sent ([`guard_delete`]).
    pub async fn delete_dynamic(&self, ar: &ApiResource, ns: Option<&str>, name: &str) -> Result<(), KubeError> {
        guard_delete(ar, ns, name)?;
        self.note(format!("DELETE {}", path(ar, ns, Some(name))));
        self.api.delete(ar, ns, name).await
    }

    /// Change an object by a strategic merge patch; the record shows the patch.
    pub async fn patch_object(&self, api_version: &str, kind: &str, ns: Option<&str>, name: &str, patch: &serde_json::Value) -> Result<(), KubeError> {
        let ar = resource(api_version, kind);
        // A Secret's patch holds its data: records, reports and plans say only which keys it sets.
        let shown = if kind == "Secret" { redacted(patch) } else { patch.to_string() };
        self.note(format!("PATCH {} {shown}", path(&ar, ns, Some(name))));
        self.api.patch(&ar, ns, name, patch).await
    }

    /// Delete the pods matching `selector`, so that their controller makes new ones. An empty or
    /// unusable selector, or a blank namespace, is refused before anything is recorded or sent
    /// ([`guard_delete_pods`]).
    pub async fn delete_pods(&self, ns: &str, selector: &str) -> Result<(), KubeError> {
        guard_delete_pods(ns, selector)?;
        let ar = resource("v1", "Pod");
        self.note(format!("DELETE {}?labelSelector={selector}", path(&ar, Some(ns), None)));
        self.api.delete_pods(ns, selector).await
    }

    /// Delete pod `name` of `ns` at once, as `kubectl delete pod --grace-period=0 --force` does: the
    /// API forgets it without its kubelet's word (a name that is not one object's is refused first).
    pub async fn force_delete_pod(&self, ns: &str, name: &str) -> Result<(), KubeError> {
        let ar = resource("v1", "Pod");
        guard_delete(&ar, Some(ns), name)?;
        self.note(format!("DELETE {} gracePeriodSeconds=0", path(&ar, Some(ns), Some(name))));
        self.api.force_delete_pod(ns, name).await
    }

    /// The cluster's client, for a helper that runs beside the run (None in a plan, where nothing runs).
    pub fn client(&self) -> Option<Client> {
        self.api.client()
    }

    /// List typed objects (in a plan, what its script answers).
    pub async fn list<K>(&self, ns: Option<&str>, selector: Option<&str>) -> Result<Vec<K>, KubeError>
    where
        K: kube::Resource<DynamicType = ()> + DeserializeOwned,
    {
        self.list_where(ns, selector, None).await
    }

    /// List typed objects that a label selector and a field selector (`spec.nodeName=NODE`) select,
    /// so the server filters them rather than faultlab (in a plan, what its script answers).
    pub async fn list_where<K>(&self, ns: Option<&str>, labels: Option<&str>, fields: Option<&str>) -> Result<Vec<K>, KubeError>
    where
        K: kube::Resource<DynamicType = ()> + DeserializeOwned,
    {
        let ar = ApiResource::erase::<K>(&());
        let at = path(&ar, ns, None);
        self.note(format!("GET {at}{}", list_query(labels, fields)));
        self.api.list(&ar, ns, labels, fields).await?.into_iter().map(|o| typed(o, &ar)).collect()
    }

    /// Get an object of any kind, whole; None if absent (in a plan, unless its script answers).
    pub async fn get_object(&self, api_version: &str, kind: &str, ns: Option<&str>, name: &str) -> Result<Option<serde_json::Value>, KubeError> {
        let ar = resource(api_version, kind);
        self.note(format!("GET {}", path(&ar, ns, Some(name))));
        let mut found = self.api.get(&ar, ns, name).await?;
        if let Some(o) = found.as_mut() {
            o["apiVersion"] = api_version.into();
            o["kind"] = kind.into();
        }
        Ok(found)
    }

    /// Get a typed object; None if absent (in a plan, unless its script answers).
    pub async fn get<K>(&self, ns: Option<&str>, name: &str) -> Result<Option<K>, KubeError>
    where
        K: kube::Resource<DynamicType = ()> + DeserializeOwned,
    {
        let ar = ApiResource::erase::<K>(&());
        let at = path(&ar, ns, Some(name));
        self.note(format!("GET {at}"));
        self.api.get(&ar, ns, name).await?.map(|o| typed(o, &ar)).transpose()
    }
}

/// An object as it can be created again: its apiVersion, kind, name, labels and annotations and its
/// own fields (`data`, `spec`, a class's `provisioner`), without its status and what the server set
/// (uid, resourceVersion, timestamps, managed fields).
pub fn restorable(object: &serde_json::Value) -> serde_json::Value {
    let mut v = object.clone();
    if let Some(o) = v.as_object_mut() {
        o.remove("status");
        let meta = &object["metadata"];
        let mut kept = serde_json::Map::new();
        for key in ["name", "labels", "annotations"] {
            if let Some(x) = meta.get(key).filter(|x| !x.is_null()) {
                kept.insert(key.into(), x.clone());
            }
        }
        o.insert("metadata".into(), kept.into());
        o.retain(|_, x| !x.is_null());
    }
    v
}

/// Why `value`, not blank, cannot be the one path segment that names an object or a namespace, if it
/// cannot: `.` or `..`, or a character that would change the request's path or query. No Kubernetes
/// name has any of these.
fn not_one_segment(value: &str) -> Option<String> {
    if value == "." || value == ".." {
        return Some(format!("{value:?} is a relative path, not a name"));
    }
    let c = value.chars().find(|c| c.is_whitespace() || c.is_control() || matches!(c, '/' | '?' | '#' | '%' | '\\'))?;
    Some(format!("it has {c:?}, which no Kubernetes name has and which would change the request's path"))
}

/// "an empty name", or "a name of only whitespace (\"  \")".
fn blank(what: &str, value: &str) -> String {
    if value.is_empty() {
        format!("an empty {what}")
    } else {
        format!("a {what} of only whitespace ({value:?})")
    }
}

/// Where a collection is, in words: "in namespace X" or "in the cluster".
fn scope(ns: Option<&str>) -> String {
    match ns {
        Some(ns) => format!("in namespace {ns}"),
        None => "in the cluster".into(),
    }
}

/// A delete of one object must name one object: its name and namespace must each be a single path
/// segment, else `DELETE .../configmaps/` (the collection) or a path elsewhere would go out.
pub fn guard_delete(ar: &ApiResource, ns: Option<&str>, name: &str) -> Result<(), KubeError> {
    let kind = &ar.kind;
    if let Some(ns) = ns {
        if ns.trim().is_empty() {
            return Err(KubeError::Refused {
                what: format!("delete {kind} {name:?} with {}", blank("namespace", ns)),
                why: format!("the request would have no namespace in its path ({})", path(ar, Some(ns), Some(name))),
            });
        }
        if let Some(why) = not_one_segment(ns) {
            return Err(KubeError::Refused { what: format!("delete {kind} {name:?} in namespace {ns:?}"), why: format!("the namespace is not a namespace name: {why}") });
        }
    }
    if name.trim().is_empty() {
        return Err(KubeError::Refused {
            what: format!("delete a {kind} with {}", blank("name", name)),
            why: format!("the request would go to {}/, the collection of every {kind} {}, not to one object", path(ar, ns, None), scope(ns)),
        });
    }
    if let Some(why) = not_one_segment(name) {
        return Err(KubeError::Refused { what: format!("delete {kind} {name:?} {}", scope(ns)), why: format!("the name is not an object name: {why}") });
    }
    Ok(())
}

/// Deleting pods by selector must select some pods only: a blank selector selects every pod in the
/// namespace, and one that does not parse as a label selector might be read as blank or as another.
pub fn guard_delete_pods(ns: &str, selector: &str) -> Result<(), KubeError> {
    if ns.trim().is_empty() {
        return Err(KubeError::Refused {
            what: format!("delete pods with label selector {selector:?} and {}", blank("namespace", ns)),
            why: "the request would have no namespace in its path, and might select pods in every namespace".into(),
        });
    }
    if let Some(why) = not_one_segment(ns) {
        return Err(KubeError::Refused { what: format!("delete pods with label selector {selector:?} in namespace {ns:?}"), why: format!("the namespace is not a namespace name: {why}") });
    }
    if selector.trim().is_empty() {
        return Err(KubeError::Refused {
            what: format!("delete pods with {}", blank("label selector", selector)),
            why: format!("it would select every pod in namespace {ns}"),
        });
    }
    if let Some(problem) = crate::check::label_selector("", selector) {
        return Err(KubeError::Refused { what: format!("delete pods in namespace {ns} by label selector"), why: problem.message });
    }
    Ok(())
}

fn typed<K: DeserializeOwned>(mut value: serde_json::Value, ar: &ApiResource) -> Result<K, KubeError> {
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

/// A Secret's patch as records show it: the keys of its `data` and `stringData`, their values not.
fn redacted(patch: &serde_json::Value) -> String {
    let mut shown = patch.clone();
    for field in ["data", "stringData"] {
        if let Some(map) = shown.get_mut(field).and_then(|v| v.as_object_mut()) {
            for v in map.values_mut() {
                *v = serde_json::Value::String("<redacted>".into());
            }
        }
    }
    shown.to_string()
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

/// A list's query string for records and plans (`?labelSelector=...&fieldSelector=...`, or nothing).
fn list_query(labels: Option<&str>, fields: Option<&str>) -> String {
    let parts: Vec<String> = [("labelSelector", labels), ("fieldSelector", fields)].into_iter().filter_map(|(k, v)| v.map(|v| format!("{k}={v}"))).collect();
    if parts.is_empty() { String::new() } else { format!("?{}", parts.join("&")) }
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
    let kc = Kubeconfig::read_from(path).map_err(|source| KubeError::Kubeconfig { path: shown.clone(), source: Box::new(source) })?;
    let opts = KubeConfigOptions { context: Some(context.to_string()), ..Default::default() };
    let config = kube::Config::from_custom_kubeconfig(kc, &opts)
        .await
        .map_err(|source| KubeError::Context { path: shown, context: context.into(), source: Box::new(source) })?;
    let server = config.cluster_url.to_string();
    let client = Client::try_from(config).map_err(|source| KubeError::Client { context: context.into(), source: Box::new(source) })?;
    match tokio::time::timeout(std::time::Duration::from_secs(15), client.apiserver_version()).await {
        Ok(Ok(_)) => Ok(client),
        Ok(Err(source)) => Err(KubeError::Unreachable { context: context.into(), server, source: Box::new(source) }),
        Err(_) => Err(KubeError::Unreachable {
            context: context.into(),
            server,
            source: Box::new(kube::Error::Service("no answer within 15s".into())),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_lists_record_line_shows_both_selectors() {
        assert_eq!(list_query(None, None), "");
        assert_eq!(list_query(Some("app=web"), None), "?labelSelector=app=web");
        assert_eq!(list_query(None, Some("spec.nodeName=n1")), "?fieldSelector=spec.nodeName=n1");
        assert_eq!(list_query(Some("app=web"), Some("spec.nodeName=n1")), "?labelSelector=app=web&fieldSelector=spec.nodeName=n1");
    }

    #[test]
    fn a_restorable_copy_keeps_the_content_and_drops_what_the_server_set() {
        let live = serde_json::json!({
            "apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "cfg", "namespace": "ns", "uid": "u", "resourceVersion": "7", "labels": {"a": "b"}, "annotations": null, "managedFields": []},
            "data": {"k": "v"}, "binaryData": null, "status": {}
        });
        let want = serde_json::json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cfg", "labels": {"a": "b"}}, "data": {"k": "v"}});
        assert_eq!(restorable(&live), want);
    }

    #[test]
    fn a_secrets_patch_is_recorded_without_its_values() {
        let patch = serde_json::json!({"stringData": {".dockerconfigjson": "{\"auths\":{\"r\":{\"password\":\"hunter2\"}}}"}, "data": {"k": "aHVudGVyMg=="}});
        let shown = redacted(&patch);
        assert!(!shown.contains("hunter2") && !shown.contains("aHVudGVyMg=="), "{shown}");
        assert!(shown.contains("\".dockerconfigjson\":\"<redacted>\"") && shown.contains("\"k\":\"<redacted>\""), "{shown}");
    }

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

    fn refused(result: Result<(), KubeError>) -> String {
        match result {
            Err(e @ KubeError::Refused { .. }) => e.to_string(),
            other => panic!("expected a refusal, got {other:?}"),
        }
    }

    fn recorded(kube: &Kube) -> Vec<String> {
        kube.recorder().entries().into_iter().map(|e| e.line).collect()
    }

    #[tokio::test]
    async fn a_delete_without_a_selector_is_refused_before_it_is_recorded() {
        let kube = Kube::dry(Recorder::default());
        assert_eq!(
            refused(kube.delete_pods("fl-x", "").await),
            "refusing to delete pods with an empty label selector: it would select every pod in namespace fl-x"
        );
        assert_eq!(
            refused(kube.delete_pods("fl-x", " \t").await),
            "refusing to delete pods with a label selector of only whitespace (\" \\t\"): it would select every pod in namespace fl-x"
        );
        let msg = refused(kube.delete_pods("fl-x", "app=web,").await);
        assert!(msg.starts_with("refusing to delete pods in namespace fl-x by label selector: \"app=web,\" is not a usable label selector"), "{msg}");
        let msg = refused(kube.delete_pods("", "app=web").await);
        assert!(msg.starts_with("refusing to delete pods with label selector \"app=web\" and an empty namespace: "), "{msg}");
        refused(kube.delete_pods("  ", "app=web").await);
        refused(kube.delete_pods("fl-x/../kube-system", "app=web").await);
        assert!(recorded(&kube).is_empty(), "nothing refused is recorded: {:?}", recorded(&kube));
        kube.delete_pods("fl-x", "app=web").await.unwrap();
        assert_eq!(recorded(&kube), ["DELETE /api/v1/namespaces/fl-x/pods?labelSelector=app=web"]);
    }

    #[rstest::rstest]
    #[case::empty_name(Some("fl-x"), "", "refusing to delete a ConfigMap with an empty name: the request would go to /api/v1/namespaces/fl-x/configmaps/, the collection of every ConfigMap in namespace fl-x, not to one object")]
    #[case::blank_name(Some("fl-x"), "  ", "refusing to delete a ConfigMap with a name of only whitespace (\"  \"): the request would go to /api/v1/namespaces/fl-x/configmaps/")]
    #[case::cluster_wide(None, "", "refusing to delete a ConfigMap with an empty name: the request would go to /api/v1/configmaps/, the collection of every ConfigMap in the cluster")]
    #[case::empty_namespace(Some(""), "app-config", "refusing to delete ConfigMap \"app-config\" with an empty namespace: the request would have no namespace in its path (/api/v1/namespaces//configmaps/app-config)")]
    #[case::blank_namespace(Some(" "), "app-config", "refusing to delete ConfigMap \"app-config\" with a namespace of only whitespace")]
    #[case::slash(Some("fl-x"), "../secrets/token", "refusing to delete ConfigMap \"../secrets/token\" in namespace fl-x: the name is not an object name: it has '/'")]
    #[case::dot_dot(Some("fl-x"), "..", "the name is not an object name: \"..\" is a relative path")]
    #[case::query(Some("fl-x"), "x?dryRun=All", "it has '?'")]
    #[case::namespace_slash(Some("a/b"), "x", "refusing to delete ConfigMap \"x\" in namespace \"a/b\": the namespace is not a namespace name: it has '/'")]
    #[tokio::test]
    async fn a_delete_by_name_needs_one_name(#[case] ns: Option<&str>, #[case] name: &str, #[case] expected: &str) {
        let kube = Kube::dry(Recorder::default());
        let msg = refused(kube.delete_dynamic(&resource("v1", "ConfigMap"), ns, name).await);
        assert!(msg.contains(expected), "{msg}");
        assert!(recorded(&kube).is_empty(), "{:?}", recorded(&kube));
    }

    #[tokio::test]
    async fn names_that_are_names_go_through() {
        let kube = Kube::dry(Recorder::default());
        kube.delete_dynamic(&resource("v1", "ConfigMap"), Some("fl-x"), "app-config.v1").await.unwrap();
        kube.delete_dynamic(&resource("storage.k8s.io/v1", "StorageClass"), None, "standard").await.unwrap();
        kube.delete_namespace("fl-x").await.unwrap();
        assert_eq!(
            recorded(&kube),
            [
                "DELETE /api/v1/namespaces/fl-x/configmaps/app-config.v1",
                "DELETE /apis/storage.k8s.io/v1/storageclasses/standard",
                "DELETE /api/v1/namespaces/fl-x",
            ]
        );
    }

    #[tokio::test]
    async fn deleting_a_namespace_needs_its_name() {
        let kube = Kube::dry(Recorder::default());
        assert_eq!(
            refused(kube.delete_namespace("").await),
            "refusing to delete a Namespace with an empty name: the request would go to /api/v1/namespaces/, the collection of every Namespace in the cluster, not to one object"
        );
        refused(kube.delete_namespace(" ").await);
        assert!(recorded(&kube).is_empty());
    }

    /// Over a client whose transport is a mock: a refused delete sends no request at all, and an
    /// accepted one does (the control: the mock sees what a cluster would).
    #[tokio::test]
    async fn a_refused_delete_sends_no_request() {
        use http::{Request, Response};
        use kube::client::Body;
        let (service, mut handle) = tower_test::mock::pair::<Request<Body>, Response<Body>>();
        let kube = Kube::new(Client::new(service, "default"), Recorder::default());
        // Were a refused delete sent, nothing would answer it: a deadline turns that into a failure.
        async fn within<T>(f: impl std::future::Future<Output = T>) -> T {
            tokio::time::timeout(std::time::Duration::from_secs(2), f).await.expect("refused at once, not sent and left waiting")
        }
        refused(within(kube.delete_pods("fl-x", "")).await);
        refused(within(kube.delete_dynamic(&resource("v1", "ConfigMap"), Some("fl-x"), "")).await);
        refused(within(kube.delete_namespace("")).await);
        let answer = tokio::spawn(async move {
            let (request, send) = handle.next_request().await.expect("a request");
            let line = format!("{} {}", request.method(), request.uri());
            let body = r#"{"apiVersion":"v1","kind":"PodList","metadata":{},"items":[]}"#;
            send.send_response(Response::builder().status(200).body(Body::from(body.as_bytes().to_vec())).unwrap());
            line
        });
        within(kube.delete_pods("fl-x", "app=web")).await.unwrap();
        let first = within(answer).await.unwrap();
        assert_eq!(first, "DELETE /api/v1/namespaces/fl-x/pods?&labelSelector=app%3Dweb", "the first request the transport saw is the accepted delete");
    }
}
