//! A small CRI client: the pod-sandbox calls of `runtime.v1.RuntimeService`, over the runtime's unix
//! socket, and the crictl-compatible command line of `faultlab-cri` built on them.
//!
//! Why it exists: the duplicate-container fault creates, lists and removes pod sandboxes through CRI,
//! as `crictl runp/pods/rmp` do. kind nodes carry crictl; the test bed cannot (crictl is not packaged
//! in Debian, and nothing may be downloaded there), so it runs `faultlab-cri` instead, with the same
//! sub-commands, flags, config files and JSON output for the part faultlab uses. A fault therefore
//! sends one argv to either node, with only the program prefix taken from the node profile.
//!
//! The messages are written by hand with prost's derive, field numbers as in
//! `k8s.io/cri-api/pkg/apis/runtime/v1/api.proto` (Kubernetes 1.20; unchanged since for these
//! messages). That keeps protoc out of the build. containerd serves `runtime.v1` from 1.6 on.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::{Deserialize, Serialize};
use thiserror::Error;

/// The messages, as in cri-api's `runtime/v1/api.proto`.
pub mod api {
    use std::collections::BTreeMap;

    use serde::Deserialize;

    #[derive(Clone, PartialEq, Eq, ::prost::Message, Deserialize)]
    #[serde(default, deny_unknown_fields)]
    pub struct PodSandboxMetadata {
        #[prost(string, tag = "1")]
        pub name: String,
        #[prost(string, tag = "2")]
        pub uid: String,
        #[prost(string, tag = "3")]
        pub namespace: String,
        #[prost(uint32, tag = "4")]
        pub attempt: u32,
    }

    /// The part of `PodSandboxConfig` faultlab sets. (Port mappings, DNS and sysctls are not needed to
    /// hold a name; a config file that sets them is refused rather than half-applied.)
    #[derive(Clone, PartialEq, ::prost::Message, Deserialize)]
    #[serde(default, deny_unknown_fields)]
    pub struct PodSandboxConfig {
        #[prost(message, optional, tag = "1")]
        pub metadata: Option<PodSandboxMetadata>,
        #[prost(string, tag = "2")]
        pub hostname: String,
        #[prost(string, tag = "3")]
        pub log_directory: String,
        #[prost(btree_map = "string, string", tag = "6")]
        pub labels: BTreeMap<String, String>,
        #[prost(btree_map = "string, string", tag = "7")]
        pub annotations: BTreeMap<String, String>,
        #[prost(message, optional, tag = "8")]
        pub linux: Option<LinuxPodSandboxConfig>,
    }

    #[derive(Clone, PartialEq, ::prost::Message, Deserialize)]
    #[serde(default, deny_unknown_fields)]
    pub struct LinuxPodSandboxConfig {
        #[prost(string, tag = "1")]
        pub cgroup_parent: String,
        #[prost(message, optional, tag = "2")]
        pub security_context: Option<LinuxSandboxSecurityContext>,
    }

    #[derive(Clone, PartialEq, ::prost::Message, Deserialize)]
    #[serde(default, deny_unknown_fields)]
    pub struct LinuxSandboxSecurityContext {
        #[prost(message, optional, tag = "1")]
        pub namespace_options: Option<NamespaceOption>,
        #[prost(bool, tag = "6")]
        pub privileged: bool,
    }

    /// Namespace modes as numbers (POD 0, CONTAINER 1, NODE 2, TARGET 3), as crictl's config files write them.
    #[derive(Clone, PartialEq, Eq, ::prost::Message, Deserialize)]
    #[serde(default, deny_unknown_fields)]
    pub struct NamespaceOption {
        #[prost(enumeration = "NamespaceMode", tag = "1")]
        pub network: i32,
        #[prost(enumeration = "NamespaceMode", tag = "2")]
        pub pid: i32,
        #[prost(enumeration = "NamespaceMode", tag = "3")]
        pub ipc: i32,
    }

    #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, ::prost::Enumeration)]
    #[repr(i32)]
    pub enum NamespaceMode {
        Pod = 0,
        Container = 1,
        Node = 2,
        Target = 3,
    }

    #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, ::prost::Enumeration)]
    #[repr(i32)]
    pub enum PodSandboxState {
        SandboxReady = 0,
        SandboxNotready = 1,
    }

    impl PodSandboxState {
        /// The name crictl prints.
        pub fn proto_name(self) -> &'static str {
            match self {
                PodSandboxState::SandboxReady => "SANDBOX_READY",
                PodSandboxState::SandboxNotready => "SANDBOX_NOTREADY",
            }
        }
    }

    #[derive(Clone, PartialEq, ::prost::Message)]
    pub struct VersionRequest {
        #[prost(string, tag = "1")]
        pub version: String,
    }

    #[derive(Clone, PartialEq, ::prost::Message)]
    pub struct VersionResponse {
        #[prost(string, tag = "1")]
        pub version: String,
        #[prost(string, tag = "2")]
        pub runtime_name: String,
        #[prost(string, tag = "3")]
        pub runtime_version: String,
        #[prost(string, tag = "4")]
        pub runtime_api_version: String,
    }

    #[derive(Clone, PartialEq, ::prost::Message)]
    pub struct RunPodSandboxRequest {
        #[prost(message, optional, tag = "1")]
        pub config: Option<PodSandboxConfig>,
        #[prost(string, tag = "2")]
        pub runtime_handler: String,
    }

    #[derive(Clone, PartialEq, ::prost::Message)]
    pub struct RunPodSandboxResponse {
        #[prost(string, tag = "1")]
        pub pod_sandbox_id: String,
    }

    /// Stop and remove take the same request shape.
    #[derive(Clone, PartialEq, ::prost::Message)]
    pub struct PodSandboxIdRequest {
        #[prost(string, tag = "1")]
        pub pod_sandbox_id: String,
    }

    #[derive(Clone, PartialEq, ::prost::Message)]
    pub struct Empty {}

    #[derive(Clone, PartialEq, ::prost::Message)]
    pub struct PodSandboxStateValue {
        #[prost(enumeration = "PodSandboxState", tag = "1")]
        pub state: i32,
    }

    #[derive(Clone, PartialEq, ::prost::Message)]
    pub struct PodSandboxFilter {
        #[prost(string, tag = "1")]
        pub id: String,
        #[prost(message, optional, tag = "2")]
        pub state: Option<PodSandboxStateValue>,
        #[prost(btree_map = "string, string", tag = "3")]
        pub label_selector: BTreeMap<String, String>,
    }

    #[derive(Clone, PartialEq, ::prost::Message)]
    pub struct ListPodSandboxRequest {
        #[prost(message, optional, tag = "1")]
        pub filter: Option<PodSandboxFilter>,
    }

    #[derive(Clone, PartialEq, ::prost::Message)]
    pub struct ListPodSandboxResponse {
        #[prost(message, repeated, tag = "1")]
        pub items: Vec<PodSandbox>,
    }

    #[derive(Clone, PartialEq, ::prost::Message)]
    pub struct PodSandbox {
        #[prost(string, tag = "1")]
        pub id: String,
        #[prost(message, optional, tag = "2")]
        pub metadata: Option<PodSandboxMetadata>,
        #[prost(enumeration = "PodSandboxState", tag = "3")]
        pub state: i32,
        #[prost(int64, tag = "4")]
        pub created_at: i64,
        #[prost(btree_map = "string, string", tag = "5")]
        pub labels: BTreeMap<String, String>,
        #[prost(btree_map = "string, string", tag = "6")]
        pub annotations: BTreeMap<String, String>,
        #[prost(string, tag = "7")]
        pub runtime_handler: String,
    }
}

const SERVICE: &str = "/runtime.v1.RuntimeService/";

#[derive(Debug, Error)]
pub enum CriError {
    #[error("connecting to the container runtime at {endpoint}: {source}")]
    Connect {
        endpoint: String,
        #[source]
        source: tonic::transport::Error,
    },
    #[error("{method} on {endpoint}: {}", .source.message())]
    Call {
        method: &'static str,
        endpoint: String,
        #[source]
        source: tonic::Status,
    },
    #[error("{method} on {endpoint}: no answer within {timeout:?}")]
    Timeout { method: &'static str, endpoint: String, timeout: Duration },
    #[error("reading the sandbox config {}: {source}", .path.display())]
    ReadConfig {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("the sandbox config {}, line {line}, column {column}: {message}", .path.display())]
    ParseConfig { path: PathBuf, line: usize, column: usize, message: String },
    #[error("the sandbox config {} has no metadata (name, namespace, uid, attempt)", .path.display())]
    NoMetadata { path: PathBuf },
    #[error("unsupported runtime endpoint {0:?}: only unix:///path sockets")]
    Endpoint(String),
    #[error("--label {0:?}: expected key=value")]
    Label(String),
    #[error("--state {0:?}: expected ready or notready")]
    State(String),
    #[error("--{flag} {pattern:?}: {source}")]
    Pattern {
        flag: &'static str,
        pattern: String,
        #[source]
        source: regex::Error,
    },
}

/// A client of one runtime's `RuntimeService`.
pub struct RuntimeClient {
    grpc: tonic::client::Grpc<tonic::transport::Channel>,
    endpoint: String,
    timeout: Duration,
}

impl RuntimeClient {
    /// Connect to `unix:///path` (or a bare path). Nothing is sent until the first call.
    pub async fn connect(endpoint: &str, timeout: Duration) -> Result<Self, CriError> {
        let path = socket_path(endpoint)?;
        let connector = tower::service_fn(move |_: tonic::codegen::http::Uri| {
            let path = path.clone();
            async move { Ok::<_, std::io::Error>(hyper_util::rt::TokioIo::new(tokio::net::UnixStream::connect(path).await?)) }
        });
        // The authority is not used for a unix socket; gRPC needs one in the URI.
        let channel = tonic::transport::Endpoint::from_static("http://localhost")
            .connect_timeout(timeout)
            .connect_with_connector(connector)
            .await
            .map_err(|source| CriError::Connect { endpoint: endpoint.to_string(), source })?;
        Ok(Self { grpc: tonic::client::Grpc::new(channel), endpoint: endpoint.to_string(), timeout })
    }

    async fn unary<Req, Resp>(&mut self, method: &'static str, request: Req) -> Result<Resp, CriError>
    where
        Req: prost::Message + Send + Sync + 'static,
        Resp: prost::Message + Default + Send + Sync + 'static,
    {
        let endpoint = self.endpoint.clone();
        let call = async {
            self.grpc.ready().await.map_err(|e| tonic::Status::unavailable(e.to_string()))?;
            let path = tonic::codegen::http::uri::PathAndQuery::try_from(format!("{SERVICE}{method}")).map_err(|e| tonic::Status::internal(e.to_string()))?;
            let codec = tonic_prost::ProstCodec::<Req, Resp>::default();
            self.grpc.unary(tonic::Request::new(request), path, codec).await
        };
        match tokio::time::timeout(self.timeout, call).await {
            Ok(Ok(response)) => Ok(response.into_inner()),
            Ok(Err(source)) => Err(CriError::Call { method, endpoint, source }),
            Err(_) => Err(CriError::Timeout { method, endpoint, timeout: self.timeout }),
        }
    }

    pub async fn version(&mut self) -> Result<api::VersionResponse, CriError> {
        self.unary("Version", api::VersionRequest { version: "v1".into() }).await
    }

    pub async fn run_pod_sandbox(&mut self, config: api::PodSandboxConfig, runtime_handler: &str) -> Result<String, CriError> {
        let request = api::RunPodSandboxRequest { config: Some(config), runtime_handler: runtime_handler.into() };
        let response: api::RunPodSandboxResponse = self.unary("RunPodSandbox", request).await?;
        Ok(response.pod_sandbox_id)
    }

    pub async fn stop_pod_sandbox(&mut self, id: &str) -> Result<(), CriError> {
        let _: api::Empty = self.unary("StopPodSandbox", api::PodSandboxIdRequest { pod_sandbox_id: id.into() }).await?;
        Ok(())
    }

    pub async fn remove_pod_sandbox(&mut self, id: &str) -> Result<(), CriError> {
        let _: api::Empty = self.unary("RemovePodSandbox", api::PodSandboxIdRequest { pod_sandbox_id: id.into() }).await?;
        Ok(())
    }

    pub async fn list_pod_sandbox(&mut self, filter: api::PodSandboxFilter) -> Result<Vec<api::PodSandbox>, CriError> {
        let response: api::ListPodSandboxResponse = self.unary("ListPodSandbox", api::ListPodSandboxRequest { filter: Some(filter) }).await?;
        Ok(response.items)
    }
}

/// The socket path of `unix:///path` or `/path`.
pub fn socket_path(endpoint: &str) -> Result<PathBuf, CriError> {
    match endpoint.strip_prefix("unix://") {
        Some(path) if path.starts_with('/') => Ok(PathBuf::from(path)),
        None if endpoint.starts_with('/') => Ok(PathBuf::from(endpoint)),
        _ => Err(CriError::Endpoint(endpoint.to_string())),
    }
}

/// A sandbox config file in crictl's format: JSON, snake_case field names, namespace modes as numbers.
/// Unknown fields are refused (crictl would ignore them; a field faultlab-cri cannot send must not be
/// dropped silently).
pub fn parse_sandbox_config(path: &Path, text: &str) -> Result<api::PodSandboxConfig, CriError> {
    let config: api::PodSandboxConfig = serde_json::from_str(text).map_err(|e| CriError::ParseConfig {
        path: path.to_path_buf(),
        line: e.line(),
        column: e.column(),
        message: e.to_string(),
    })?;
    if config.metadata.is_none() {
        return Err(CriError::NoMetadata { path: path.to_path_buf() });
    }
    Ok(config)
}

/// A sandbox as `crictl pods -o json` prints it (protobuf JSON: camelCase, enum names, int64 as a string).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SandboxJson {
    pub id: String,
    #[serde(default)]
    pub metadata: MetadataJson,
    pub state: String,
    #[serde(default)]
    pub created_at: String,
    #[serde(default)]
    pub labels: BTreeMap<String, String>,
    #[serde(default)]
    pub annotations: BTreeMap<String, String>,
    #[serde(default)]
    pub runtime_handler: String,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct MetadataJson {
    #[serde(default)]
    pub name: String,
    #[serde(default)]
    pub uid: String,
    #[serde(default)]
    pub namespace: String,
    #[serde(default)]
    pub attempt: u32,
}

/// `{"items": [...]}`, the shape of `crictl pods -o json`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SandboxListJson {
    #[serde(default)]
    pub items: Vec<SandboxJson>,
}

impl SandboxJson {
    pub fn from_api(s: &api::PodSandbox) -> Self {
        let m = s.metadata.clone().unwrap_or_default();
        let state = api::PodSandboxState::try_from(s.state).map(|s| s.proto_name().to_string()).unwrap_or_else(|_| s.state.to_string());
        SandboxJson {
            id: s.id.clone(),
            metadata: MetadataJson { name: m.name, uid: m.uid, namespace: m.namespace, attempt: m.attempt },
            state,
            created_at: s.created_at.to_string(),
            labels: s.labels.clone(),
            annotations: s.annotations.clone(),
            runtime_handler: s.runtime_handler.clone(),
        }
    }

    pub fn ready(&self) -> bool {
        self.state == "SANDBOX_READY"
    }
}

/// `crictl pods` filters that the runtime does not apply itself: name and namespace are regular
/// expressions matched against the metadata, as crictl does.
#[derive(Clone, Debug, Default)]
pub struct PodsFilter {
    pub name: Option<regex::Regex>,
    pub namespace: Option<regex::Regex>,
}

impl PodsFilter {
    pub fn new(name: Option<&str>, namespace: Option<&str>) -> Result<Self, CriError> {
        let compile = |flag: &'static str, p: Option<&str>| {
            p.map(|p| regex::Regex::new(p).map_err(|source| CriError::Pattern { flag, pattern: p.to_string(), source })).transpose()
        };
        Ok(Self { name: compile("name", name)?, namespace: compile("namespace", namespace)? })
    }

    pub fn keeps(&self, s: &api::PodSandbox) -> bool {
        let m = s.metadata.clone().unwrap_or_default();
        self.name.as_ref().is_none_or(|r| r.is_match(&m.name)) && self.namespace.as_ref().is_none_or(|r| r.is_match(&m.namespace))
    }
}

/// `key=value` of `--label`.
pub fn parse_label(text: &str) -> Result<(String, String), CriError> {
    match text.split_once('=') {
        Some((k, v)) if !k.is_empty() => Ok((k.to_string(), v.to_string())),
        _ => Err(CriError::Label(text.to_string())),
    }
}

/// `ready` / `notready` of `--state` (crictl also accepts the proto names).
pub fn parse_state(text: &str) -> Result<api::PodSandboxState, CriError> {
    match text.to_ascii_lowercase().as_str() {
        "ready" | "sandbox_ready" => Ok(api::PodSandboxState::SandboxReady),
        "notready" | "sandbox_notready" => Ok(api::PodSandboxState::SandboxNotready),
        _ => Err(CriError::State(text.to_string())),
    }
}

#[cfg(test)]
mod tests {
    use prost::Message;

    use super::*;

    #[test]
    fn messages_encode_with_the_proto_field_numbers() {
        // RunPodSandboxRequest{config{metadata{name "p", uid "u", namespace "n", attempt 1}}, runtime_handler ""}
        let request = api::RunPodSandboxRequest {
            config: Some(api::PodSandboxConfig {
                metadata: Some(api::PodSandboxMetadata { name: "p".into(), uid: "u".into(), namespace: "n".into(), attempt: 1 }),
                ..Default::default()
            }),
            runtime_handler: String::new(),
        };
        // field 1 (config, len 13) > field 1 (metadata, len 11) > 1:"p" 2:"u" 3:"n" 4:1
        let expected = [0x0a, 13, 0x0a, 11, 0x0a, 1, b'p', 0x12, 1, b'u', 0x1a, 1, b'n', 0x20, 1];
        assert_eq!(request.encode_to_vec(), expected);

        // A namespace option with network NODE (2) is field 1 of NamespaceOption, under
        // security_context (2) under linux (8) of the config.
        let config = api::PodSandboxConfig {
            linux: Some(api::LinuxPodSandboxConfig {
                security_context: Some(api::LinuxSandboxSecurityContext {
                    namespace_options: Some(api::NamespaceOption { network: api::NamespaceMode::Node as i32, ..Default::default() }),
                    ..Default::default()
                }),
                ..Default::default()
            }),
            ..Default::default()
        };
        assert_eq!(config.encode_to_vec(), [0x42, 6, 0x12, 4, 0x0a, 2, 0x08, 2]);
    }

    #[test]
    fn a_listed_sandbox_decodes_and_prints_as_crictl_does() {
        let sandbox = api::PodSandbox {
            id: "abc".into(),
            metadata: Some(api::PodSandboxMetadata { name: "web-1".into(), uid: "u1".into(), namespace: "ns".into(), attempt: 2 }),
            state: api::PodSandboxState::SandboxNotready as i32,
            created_at: 1_700_000_000_000_000_000,
            labels: [("io.kubernetes.pod.uid".to_string(), "u1".to_string())].into(),
            ..Default::default()
        };
        let list = api::ListPodSandboxResponse { items: vec![sandbox.clone()] };
        let decoded = api::ListPodSandboxResponse::decode(list.encode_to_vec().as_slice()).unwrap();
        assert_eq!(decoded.items[0], sandbox);
        let json = serde_json::to_value(SandboxJson::from_api(&sandbox)).unwrap();
        assert_eq!(json["metadata"]["attempt"], 2);
        assert_eq!(json["state"], "SANDBOX_NOTREADY");
        assert_eq!(json["createdAt"], "1700000000000000000");
        assert_eq!(json["labels"]["io.kubernetes.pod.uid"], "u1");
        let back: SandboxJson = serde_json::from_value(json).unwrap();
        assert!(!back.ready());
    }

    #[test]
    fn sandbox_configs_are_read_as_crictl_reads_them_and_strictly() {
        let path = Path::new("sandbox.json");
        let text = r#"{
  "metadata": {"name": "web-1", "namespace": "ns", "uid": "u1", "attempt": 1},
  "labels": {"faultlab.dev/duplicate-of": "u1"},
  "linux": {"security_context": {"namespace_options": {"network": 2}}}
}"#;
        let config = parse_sandbox_config(path, text).unwrap();
        assert_eq!(config.metadata.as_ref().unwrap().attempt, 1);
        let ns = config.linux.unwrap().security_context.unwrap().namespace_options.unwrap();
        assert_eq!(ns.network, api::NamespaceMode::Node as i32);

        let err = parse_sandbox_config(path, "{\n  \"metadata\": {\"name\": \"x\"},\n  \"port_mappings\": []\n}").unwrap_err();
        let text = err.to_string();
        assert!(text.contains("sandbox.json, line 3") && text.contains("port_mappings"), "{text}");
        let err = parse_sandbox_config(path, "{}").unwrap_err();
        assert!(err.to_string().contains("no metadata"), "{err}");
    }

    #[test]
    fn endpoints_labels_and_states() {
        assert_eq!(socket_path("unix:///run/c.sock").unwrap(), PathBuf::from("/run/c.sock"));
        assert_eq!(socket_path("/run/c.sock").unwrap(), PathBuf::from("/run/c.sock"));
        assert!(socket_path("tcp://1.2.3.4:5").is_err());
        assert_eq!(parse_label("a=b=c").unwrap(), ("a".into(), "b=c".into()));
        assert!(parse_label("novalue").is_err());
        assert_eq!(parse_state("Ready").unwrap(), api::PodSandboxState::SandboxReady);
        assert!(parse_state("running").is_err());
        let filter = PodsFilter::new(Some("^web-"), None).unwrap();
        let mut s = api::PodSandbox { metadata: Some(api::PodSandboxMetadata { name: "web-1".into(), ..Default::default() }), ..Default::default() };
        assert!(filter.keeps(&s));
        s.metadata.as_mut().unwrap().name = "db-1".into();
        assert!(!filter.keeps(&s));
        assert!(PodsFilter::new(Some("("), None).is_err());
    }
}
