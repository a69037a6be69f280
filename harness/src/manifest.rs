//! Workload manifests: split into documents, each decoded as a Kubernetes object of a kind faultlab
//! knows (its group, version and kind, and its scope), with every problem placed at a line of the
//! manifest's text.
//!
//! Depends on [`crate::check`] and [`crate::datafile`] only.

use std::any::TypeId;

use k8s_openapi::api::{apps, batch, core, networking, node, policy, rbac, scheduling, storage};
use k8s_openapi::{NamespaceResourceScope, Resource};
use serde::de::DeserializeOwned;

use crate::check::{self, Problem};
use crate::datafile::{self, FieldLocations};

/// A kind of object a manifest may create.
pub struct KnownKind {
    pub api_version: &'static str,
    pub kind: &'static str,
    /// Namespaced (created in the run's namespace) or cluster-scoped.
    pub namespaced: bool,
    /// Decode a document as this kind: `Err((line, column, message))`, line and column in `text`.
    decode: fn(&str) -> Result<(), Placed>,
}

/// Decode a document as `K`: the problem placed in `text`, at the field the decoder stopped at.
fn decode_as<K: DeserializeOwned>(text: &str) -> Result<(), Placed> {
    serde_saphyr::from_str_with_options::<K>(text, datafile::options()).map(drop).map_err(|e| {
        let message = datafile::plain_message(&datafile::strip_location(&e.to_string()));
        let (line, column) = e.location().filter(|l| l.line() > 0).map(|l| (l.line(), l.column())).unwrap_or((1, 1));
        let field = FieldLocations::of(text).field_at(line, column).unwrap_or_default();
        Placed { line, column, problem: Problem::new(field, message) }
    })
}

fn known<K: Resource + DeserializeOwned + 'static>() -> KnownKind {
    KnownKind {
        api_version: K::API_VERSION,
        kind: K::KIND,
        namespaced: TypeId::of::<K::Scope>() == TypeId::of::<NamespaceResourceScope>(),
        decode: decode_as::<K>,
    }
}

/// The kinds a workload may create: what pods, their configuration, storage, access and scheduling
/// need. Anything else is refused before a cluster is touched.
pub fn known_kinds() -> &'static [KnownKind] {
    static KINDS: std::sync::OnceLock<Vec<KnownKind>> = std::sync::OnceLock::new();
    KINDS.get_or_init(|| {
        vec![
            known::<core::v1::Pod>(),
            known::<core::v1::ConfigMap>(),
            known::<core::v1::Secret>(),
            known::<core::v1::Service>(),
            known::<core::v1::ServiceAccount>(),
            known::<core::v1::PersistentVolumeClaim>(),
            known::<core::v1::PersistentVolume>(),
            known::<core::v1::Endpoints>(),
            known::<core::v1::LimitRange>(),
            known::<core::v1::ResourceQuota>(),
            known::<apps::v1::Deployment>(),
            known::<apps::v1::StatefulSet>(),
            known::<apps::v1::DaemonSet>(),
            known::<apps::v1::ReplicaSet>(),
            known::<batch::v1::Job>(),
            known::<batch::v1::CronJob>(),
            known::<storage::v1::StorageClass>(),
            known::<rbac::v1::Role>(),
            known::<rbac::v1::RoleBinding>(),
            known::<rbac::v1::ClusterRole>(),
            known::<rbac::v1::ClusterRoleBinding>(),
            known::<networking::v1::NetworkPolicy>(),
            known::<networking::v1::Ingress>(),
            known::<policy::v1::PodDisruptionBudget>(),
            known::<scheduling::v1::PriorityClass>(),
            known::<node::v1::RuntimeClass>(),
        ]
    })
}

/// The known kind of `api_version` and `kind`.
pub fn find(api_version: &str, kind: &str) -> Option<&'static KnownKind> {
    known_kinds().iter().find(|k| k.api_version == api_version && k.kind == kind)
}

/// Is this kind cluster-scoped? Unknown kinds count as namespaced (they are refused before a run).
pub fn is_cluster_scoped(api_version: &str, kind: &str) -> bool {
    find(api_version, kind).is_some_and(|k| !k.namespaced)
}

/// The node label the pinning selects on (every kubelet sets it to its node's name).
pub const HOSTNAME_LABEL: &str = "kubernetes.io/hostname";

/// Pin the pods an object makes (or is) to `node`: the pod spec's `nodeSelector` gets
/// `kubernetes.io/hostname: node` (the scheduler still decides, so a node's taints show as they would).
/// What `faultlab run --jobs` does on a cluster of several nodes, where each scenario has the node the
/// runner gave it. Objects that make no pods are left as they are.
pub fn pin_to_node(object: &mut serde_json::Value, node: &str) {
    let Some(spec) = pod_spec_mut(object) else { return };
    let selector = spec.entry("nodeSelector").or_insert_with(|| serde_json::json!({}));
    if let Some(map) = selector.as_object_mut() {
        map.insert(HOSTNAME_LABEL.into(), node.into());
    }
}

/// The pod spec of an object that is or makes pods (a Pod's own, a controller's template's).
fn pod_spec_mut(object: &mut serde_json::Value) -> Option<&mut serde_json::Map<String, serde_json::Value>> {
    let kind = object.get("kind").and_then(|k| k.as_str()).unwrap_or_default();
    let at = match kind {
        "Pod" => "/spec",
        "Deployment" | "StatefulSet" | "DaemonSet" | "ReplicaSet" | "Job" => "/spec/template/spec",
        "CronJob" => "/spec/jobTemplate/spec/template/spec",
        _ => return None,
    };
    object.pointer_mut(at).and_then(|s| s.as_object_mut())
}

/// Prefer `node` for the pods an object makes (or is): a preferred node affinity for
/// `kubernetes.io/hostname: node`, so they start there and may run elsewhere when it fails (a workload
/// that moves between nodes, [`crate::needs::Needs::moves_between_nodes`]). The object's own affinity
/// terms stay; objects that make no pods are left as they are.
pub fn prefer_node(object: &mut serde_json::Value, node: &str) {
    let Some(spec) = pod_spec_mut(object) else { return };
    let term = serde_json::json!({"weight": 100, "preference": {"matchExpressions": [{"key": HOSTNAME_LABEL, "operator": "In", "values": [node]}]}});
    let affinity = spec.entry("affinity").or_insert_with(|| serde_json::json!({}));
    let Some(node_affinity) = affinity.as_object_mut().map(|a| a.entry("nodeAffinity").or_insert_with(|| serde_json::json!({}))) else { return };
    let Some(preferred) = node_affinity.as_object_mut().map(|n| n.entry("preferredDuringSchedulingIgnoredDuringExecution").or_insert_with(|| serde_json::json!([]))) else { return };
    if let Some(list) = preferred.as_array_mut() {
        list.push(term);
    }
}

/// Keep the pods an object makes (or is) on `nodes`: a required node affinity term's
/// `kubernetes.io/hostname In nodes`, added to each term the object has (terms are alternatives, so each
/// gets it), or as the only term. Objects that make no pods are left as they are.
pub fn require_nodes(object: &mut serde_json::Value, nodes: &[&str]) {
    let Some(spec) = pod_spec_mut(object) else { return };
    let expression = serde_json::json!({"key": HOSTNAME_LABEL, "operator": "In", "values": nodes});
    let affinity = spec.entry("affinity").or_insert_with(|| serde_json::json!({}));
    let Some(node_affinity) = affinity.as_object_mut().map(|a| a.entry("nodeAffinity").or_insert_with(|| serde_json::json!({}))) else { return };
    let Some(required) = node_affinity.as_object_mut().map(|n| n.entry("requiredDuringSchedulingIgnoredDuringExecution").or_insert_with(|| serde_json::json!({}))) else { return };
    let Some(terms) = required.as_object_mut().map(|r| r.entry("nodeSelectorTerms").or_insert_with(|| serde_json::json!([]))) else { return };
    let Some(terms) = terms.as_array_mut() else { return };
    if terms.is_empty() {
        terms.push(serde_json::json!({}));
    }
    for term in terms.iter_mut().filter_map(|t| t.as_object_mut()) {
        if let Some(list) = term.entry("matchExpressions").or_insert_with(|| serde_json::json!([])).as_array_mut() {
            list.push(expression.clone());
        }
    }
}

/// One document of a manifest.
#[derive(Clone, Debug)]
pub struct Doc {
    /// 1-based line of the document's first line in the manifest text.
    pub line: u64,
    pub text: String,
    pub value: serde_json::Value,
}

impl Doc {
    pub fn api_version(&self) -> &str {
        self.value.get("apiVersion").and_then(|v| v.as_str()).unwrap_or_default()
    }
    pub fn kind(&self) -> &str {
        self.value.get("kind").and_then(|v| v.as_str()).unwrap_or_default()
    }
    pub fn name(&self) -> &str {
        self.value.get("metadata").and_then(|m| m.get("name")).and_then(|v| v.as_str()).unwrap_or_default()
    }
    pub fn namespace(&self) -> Option<&str> {
        self.value.get("metadata").and_then(|m| m.get("namespace")).and_then(|v| v.as_str())
    }
    /// `Kind/name`, as `workload.clusterObjects` names cluster-scoped objects.
    pub fn id(&self) -> String {
        format!("{}/{}", self.kind(), self.name())
    }

    /// Labels of the pods this object makes (a Pod's own; a controller's pod template's).
    pub fn pod_labels(&self) -> Option<&serde_json::Map<String, serde_json::Value>> {
        let v = &self.value;
        let labels = match self.kind() {
            "Pod" => v.pointer("/metadata/labels"),
            "Deployment" | "StatefulSet" | "DaemonSet" | "ReplicaSet" | "Job" => v.pointer("/spec/template/metadata/labels"),
            "CronJob" => v.pointer("/spec/jobTemplate/spec/template/metadata/labels"),
            _ => None,
        };
        labels.and_then(|l| l.as_object())
    }

    /// Names of the claims this object makes or is: a PersistentVolumeClaim's name; a StatefulSet's
    /// `<template>-<set>-<ordinal>` for each replica.
    pub fn claim_names(&self) -> Vec<String> {
        match self.kind() {
            "PersistentVolumeClaim" => vec![self.name().to_string()],
            "StatefulSet" => {
                let replicas = self.value.pointer("/spec/replicas").and_then(|r| r.as_u64()).unwrap_or(1).min(64);
                let templates = self.value.pointer("/spec/volumeClaimTemplates").and_then(|t| t.as_array()).cloned().unwrap_or_default();
                templates
                    .iter()
                    .filter_map(|t| t.pointer("/metadata/name").and_then(|n| n.as_str()))
                    .flat_map(|t| (0..replicas).map(move |i| format!("{t}-{}-{i}", self.name())))
                    .collect()
            }
            _ => Vec::new(),
        }
    }
}

/// A problem at a line and column of the manifest text.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Placed {
    pub line: u64,
    pub column: u64,
    pub problem: Problem,
}

/// Split `text` into its documents (at lines that begin with `---`) and decode each; empty documents
/// are left out. Problems name fields relative to the document (`kind`, `metadata.name`).
pub fn split(text: &str) -> Result<Vec<Doc>, Placed> {
    let mut docs = Vec::new();
    let mut start = 1u64;
    let mut current = String::new();
    let flush = |start: u64, body: &str, docs: &mut Vec<Doc>| -> Result<(), Placed> {
        if body.lines().all(|l| l.trim().is_empty() || l.trim_start().starts_with('#')) {
            return Ok(());
        }
        let value: serde_json::Value = serde_saphyr::from_str_with_options(body, datafile::options()).map_err(|e| {
            let (line, column) = e.location().filter(|l| l.line() > 0).map(|l| (l.line(), l.column())).unwrap_or((1, 1));
            Placed { line: start + line - 1, column, problem: Problem::new("", datafile::plain_message(&datafile::strip_location(&e.to_string()))) }
        })?;
        if !value.is_null() {
            docs.push(Doc { line: start, text: body.to_string(), value });
        }
        Ok(())
    };
    for (i, line) in text.split_inclusive('\n').enumerate() {
        let is_marker = line.starts_with("---") && line[3..].chars().next().is_none_or(|c| c.is_whitespace());
        if is_marker {
            flush(start, &current, &mut docs)?;
            current.clear();
            // The marker's own line is blank in the document, so lines keep their numbers.
            current.push('\n');
            start = i as u64 + 1;
            if docs.len() > 64 {
                break;
            }
        } else {
            current.push_str(line);
        }
    }
    flush(start, &current, &mut docs)?;
    Ok(docs)
}

/// Check one document as an object a workload may create: apiVersion, kind and name present, a known
/// kind, decoded as that kind, and no namespace but the run's (`${namespace}` substituted as
/// `namespace_placeholder`). Problems are placed in the manifest text.
pub fn check_doc(doc: &Doc, namespace_placeholder: &str) -> Vec<Placed> {
    let locations = FieldLocations::of(&doc.text);
    let at = |field: &str, problem: Problem| {
        let (line, column) = locations.locate(field);
        Placed { line: doc.line + line - 1, column, problem }
    };
    let mut out = Vec::new();
    if !doc.value.is_object() {
        return vec![at("", Problem::new("", "a manifest document must be a mapping (an object with apiVersion, kind and metadata)"))];
    }
    for field in ["apiVersion", "kind"] {
        if doc.value.get(field).and_then(|v| v.as_str()).is_none_or(str::is_empty) {
            out.push(at(field, Problem::new(field, "missing: every object needs apiVersion and kind")));
        }
    }
    if !out.is_empty() {
        return out;
    }
    let (api_version, kind) = (doc.api_version(), doc.kind());
    let Some(known) = find(api_version, kind) else {
        let same_kind: Vec<&str> = known_kinds().iter().filter(|k| k.kind == kind).map(|k| k.api_version).collect();
        let problem = if !same_kind.is_empty() {
            Problem::new("apiVersion", format!("{api_version:?} does not serve kind {kind}; {kind} is {}", same_kind.join(" or ")))
        } else {
            let kinds: Vec<&str> = known_kinds().iter().map(|k| k.kind).collect();
            let mut p = check::one_of("kind", kind, &kinds).unwrap_or_else(|| Problem::new("kind", "unknown"));
            p.message = format!("{kind:?} is not a kind a workload may create{}", p.message.split_once(" (did you mean").map(|(_, d)| format!(" (did you mean{d}")).unwrap_or_default());
            p
        };
        let field = problem.field.clone();
        return vec![at(&field, problem)];
    };
    match doc.value.pointer("/metadata/name").and_then(|v| v.as_str()) {
        None => out.push(at("metadata", Problem::new("metadata.name", "missing: every object needs a name"))),
        Some(name) => {
            if let Some(p) = check::dns_subdomain("metadata.name", name) {
                out.push(at("metadata.name", p));
            }
        }
    }
    if let Some(ns) = doc.namespace() {
        if ns != namespace_placeholder {
            let why = if known.namespaced {
                format!("{ns:?}: objects are created in the run's own namespace; leave metadata.namespace out (or write ${{namespace}})")
            } else {
                format!("{ns:?}: a {kind} is cluster-scoped and has no namespace")
            };
            out.push(at("metadata.namespace", Problem::new("metadata.namespace", why)));
        }
    }
    if let Err(p) = (known.decode)(&doc.text) {
        out.push(Placed { line: doc.line + p.line - 1, column: p.column, problem: Problem::new(p.problem.field, format!("not a valid {kind}: {}", p.problem.message)) });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pins_the_pods_an_object_makes_to_a_node_and_leaves_other_objects() {
        let text = "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web}\nspec:\n  template:\n    spec:\n      nodeSelector: {disk: ssd}\n      containers: []\n---\napiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec: {containers: []}\n---\napiVersion: batch/v1beta1\nkind: CronJob\nmetadata: {name: c}\nspec: {jobTemplate: {spec: {template: {spec: {containers: []}}}}}\n---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: m}\ndata: {a: b}\n";
        let mut docs = split(text).unwrap();
        for d in &mut docs {
            pin_to_node(&mut d.value, "faultlab-node-2");
        }
        assert_eq!(docs[0].value.pointer("/spec/template/spec/nodeSelector").unwrap(), &serde_json::json!({"disk": "ssd", "kubernetes.io/hostname": "faultlab-node-2"}), "the workload's own selector stays");
        assert_eq!(docs[1].value.pointer("/spec/nodeSelector").unwrap(), &serde_json::json!({"kubernetes.io/hostname": "faultlab-node-2"}));
        assert_eq!(docs[2].value.pointer("/spec/jobTemplate/spec/template/spec/nodeSelector/kubernetes.io~1hostname").unwrap(), "faultlab-node-2");
        assert_eq!(docs[3].value, serde_json::json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "m"}, "data": {"a": "b"}}));
    }

    #[test]
    fn prefers_a_node_beside_the_objects_own_affinity() {
        let text = "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: db}\nspec:\n  template:\n    spec:\n      affinity:\n        podAntiAffinity: {}\n        nodeAffinity:\n          preferredDuringSchedulingIgnoredDuringExecution:\n            - {weight: 1, preference: {matchExpressions: [{key: disk, operator: In, values: [ssd]}]}}\n      containers: []\n---\napiVersion: v1\nkind: PersistentVolume\nmetadata: {name: pv}\nspec: {}\n";
        let mut docs = split(text).unwrap();
        for d in &mut docs {
            prefer_node(&mut d.value, "faultlab-node-2");
        }
        let affinity = docs[0].value.pointer("/spec/template/spec/affinity").unwrap();
        assert!(affinity.get("podAntiAffinity").is_some(), "{affinity}");
        let preferred = affinity.pointer("/nodeAffinity/preferredDuringSchedulingIgnoredDuringExecution").unwrap().as_array().unwrap();
        assert_eq!(preferred.len(), 2, "the object's own term stays");
        assert_eq!(preferred[1], serde_json::json!({"weight": 100, "preference": {"matchExpressions": [{"key": "kubernetes.io/hostname", "operator": "In", "values": ["faultlab-node-2"]}]}}));
        assert!(docs[0].value.pointer("/spec/template/spec/nodeSelector").is_none(), "not pinned: it may move");
        assert_eq!(docs[1].value.pointer("/spec").unwrap(), &serde_json::json!({}));
    }

    #[test]
    fn requires_two_nodes_in_each_of_the_objects_own_terms_or_its_only_one() {
        let own = "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec:\n  affinity:\n    nodeAffinity:\n      requiredDuringSchedulingIgnoredDuringExecution:\n        nodeSelectorTerms:\n          - matchExpressions: [{key: disk, operator: In, values: [ssd]}]\n          - matchFields: [{key: metadata.name, operator: In, values: [n]}]\n  containers: []\n---\napiVersion: apps/v1\nkind: Deployment\nmetadata: {name: d}\nspec: {template: {spec: {containers: []}}}\n---\napiVersion: v1\nkind: Service\nmetadata: {name: s}\nspec: {}\n";
        let mut docs = split(own).unwrap();
        for d in &mut docs {
            require_nodes(&mut d.value, &["faultlab-node-2", "faultlab-node-3"]);
        }
        let ours = serde_json::json!({"key": "kubernetes.io/hostname", "operator": "In", "values": ["faultlab-node-2", "faultlab-node-3"]});
        let terms = docs[0].value.pointer("/spec/affinity/nodeAffinity/requiredDuringSchedulingIgnoredDuringExecution/nodeSelectorTerms").unwrap().as_array().unwrap();
        assert_eq!(terms.len(), 2, "the object's terms stay alternatives");
        assert_eq!(terms[0]["matchExpressions"], serde_json::json!([{"key": "disk", "operator": "In", "values": ["ssd"]}, ours.clone()]));
        assert_eq!(terms[1]["matchExpressions"], serde_json::json!([ours.clone()]), "each term gets it: either alternative keeps to the nodes");
        assert!(terms[1].get("matchFields").is_some());
        let only = docs[1].value.pointer("/spec/template/spec/affinity/nodeAffinity/requiredDuringSchedulingIgnoredDuringExecution/nodeSelectorTerms").unwrap();
        assert_eq!(only, &serde_json::json!([{"matchExpressions": [ours]}]));
        assert_eq!(docs[2].value.pointer("/spec").unwrap(), &serde_json::json!({}), "no pods, untouched");
    }

    #[test]
    fn knows_scopes_from_the_api() {
        assert!(find("apps/v1", "Deployment").unwrap().namespaced);
        assert!(is_cluster_scoped("storage.k8s.io/v1", "StorageClass"));
        assert!(is_cluster_scoped("rbac.authorization.k8s.io/v1", "ClusterRoleBinding"));
        assert!(!is_cluster_scoped("v1", "ConfigMap"));
        assert!(find("apps/v9", "Deployment").is_none());
    }

    #[test]
    fn splits_documents_keeping_line_numbers() {
        let text = "# c\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\n---\n---\napiVersion: v1\nkind: Secret\nmetadata: {name: b}\n";
        let docs = split(text).unwrap();
        assert_eq!(docs.len(), 2);
        assert_eq!((docs[0].line, docs[0].id()), (1, "ConfigMap/a".to_string()));
        assert_eq!((docs[1].line, docs[1].id()), (6, "Secret/b".to_string()));
        let e = split("a: 1\n---\nb: [\n").unwrap_err();
        assert!(e.line >= 3, "{e:?}");
    }

    fn problems(text: &str) -> Vec<String> {
        split(text)
            .unwrap()
            .iter()
            .flat_map(|d| check_doc(d, "<namespace>"))
            .map(|p| format!("{}:{}: {}", p.line, p.column, p.problem))
            .collect()
    }

    #[test]
    fn refuses_what_a_workload_cannot_create() {
        let deploy = "apiVersion: apps/v1\nkind: Deploymnt\nmetadata:\n  name: web\n";
        assert_eq!(problems(deploy), vec![r#"2:7: kind: "Deploymnt" is not a kind a workload may create (did you mean "Deployment"?)"#]);
        let v9 = "apiVersion: apps/v9\nkind: Deployment\nmetadata: {name: web}\n";
        assert_eq!(problems(v9), vec![r#"1:13: apiVersion: "apps/v9" does not serve kind Deployment; Deployment is apps/v1"#]);
        let ns = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: c\n  namespace: kube-system\n";
        assert!(problems(ns)[0].starts_with("5:14: metadata.namespace: \"kube-system\": objects are created in the run's own namespace"), "{:?}", problems(ns));
        assert!(problems("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: c\n  namespace: <namespace>\n").is_empty());
        let typed = "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web}\nspec:\n  replicas: many\n";
        let p = problems(typed);
        assert_eq!(p.len(), 1, "{p:?}");
        assert!(p[0].starts_with("5:13: spec.replicas: not a valid Deployment: expected a whole number"), "{p:?}");
        assert!(problems("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: Bad_Name}\n")[0].contains("metadata.name: \"Bad_Name\" is not a valid Kubernetes object name"));
        assert!(problems("- a\n")[0].contains("must be a mapping"));
    }

    #[test]
    fn pod_labels_and_claims_of_controllers() {
        let sts = "apiVersion: apps/v1\nkind: StatefulSet\nmetadata: {name: web}\nspec:\n  replicas: 2\n  template:\n    metadata:\n      labels: {app: web}\n  volumeClaimTemplates:\n    - metadata: {name: data}\n";
        let d = &split(sts).unwrap()[0];
        assert_eq!(d.pod_labels().unwrap()["app"], "web");
        assert_eq!(d.claim_names(), vec!["data-web-0", "data-web-1"]);
    }
}
