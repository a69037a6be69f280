//! A small CRI client: the pod-sandbox calls of `runtime.v1.RuntimeService` and the image queries of
//! `runtime.v1.ImageService` (`ListImages`, `ImageStatus`), over the runtime's unix socket, and the
//! crictl-compatible command line of `faultlab-cri` built on them.
//!
//! Why it exists: the duplicate-container fault creates, lists and removes pod sandboxes through CRI,
//! as `crictl runp/pods/rmp` do. kind nodes carry crictl; the test bed cannot (crictl is not packaged
//! in Debian, and nothing may be downloaded there), so it runs `faultlab-cri` instead, with the same
//! sub-commands, flags, config files and JSON output for the part faultlab uses. A fault therefore
//! sends one argv to either node, with only the program prefix taken from the node profile.
//! faultlab's own kind node image installs it as `crictl` too, so it also answers what kind itself
//! runs in a node: `crictl images` (`kind export logs`) and `crictl inspecti IMAGE` (`kind load`,
//! which reads `status.id` and `status.repoTags` of the JSON).
//!
//! The messages are written by hand with prost's derive, field numbers as in
//! `k8s.io/cri-api/pkg/apis/runtime/v1/api.proto` (Kubernetes 1.20; unchanged since for these
//! messages, later fields noted where they are declared). That keeps protoc out of the build.
//! containerd serves `runtime.v1` from 1.6 on. Output that crictl produces with Go's libraries
//! (sizes, tables, JSON through Go maps, YAML, templates) is reproduced in [`gofmt`] and [`template`].

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::{Deserialize, Serialize};
use thiserror::Error;

pub mod gofmt;
pub mod proxy;
pub mod relay;
pub mod template;

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

    // `runtime.v1.ImageService`: the listing and status calls (`crictl images`, `crictl inspecti`).
    // Field numbers as in api.proto since Kubernetes 1.20 (ImageSpec 1-2, Image 1-7); later fields are
    // decoded when a newer runtime sends them (Image.pinned 8 since 1.27; ImageSpec 18-20 since 1.29-1.31)
    // and are never sent: an older runtime sees nothing it does not know.

    /// An image reference as the runtime takes it: a name, a digest reference or an image ID.
    #[derive(Clone, PartialEq, Eq, ::prost::Message)]
    pub struct ImageSpec {
        #[prost(string, tag = "1")]
        pub image: String,
        #[prost(btree_map = "string, string", tag = "2")]
        pub annotations: BTreeMap<String, String>,
        #[prost(string, tag = "18")]
        pub user_specified_image: String,
        #[prost(string, tag = "19")]
        pub runtime_handler: String,
        #[prost(string, tag = "20")]
        pub image_ref: String,
    }

    #[derive(Clone, PartialEq, Eq, ::prost::Message)]
    pub struct ImageFilter {
        #[prost(message, optional, tag = "1")]
        pub image: Option<ImageSpec>,
    }

    #[derive(Clone, PartialEq, Eq, ::prost::Message)]
    pub struct ListImagesRequest {
        #[prost(message, optional, tag = "1")]
        pub filter: Option<ImageFilter>,
    }

    #[derive(Clone, PartialEq, Eq, ::prost::Message)]
    pub struct ListImagesResponse {
        #[prost(message, repeated, tag = "1")]
        pub images: Vec<Image>,
    }

    /// `PullImage`: the image only (no login, no sandbox config: fields 2 and 3 are not sent).
    #[derive(Clone, PartialEq, Eq, ::prost::Message)]
    pub struct PullImageRequest {
        #[prost(message, optional, tag = "1")]
        pub image: Option<ImageSpec>,
    }

    #[derive(Clone, PartialEq, Eq, ::prost::Message)]
    pub struct PullImageResponse {
        /// The reference of the pulled image (its ID on containerd).
        #[prost(string, tag = "1")]
        pub image_ref: String,
    }

    /// A wrapped int64, so that "unset" differs from 0 (the image's UID).
    #[derive(Clone, Copy, PartialEq, Eq, ::prost::Message)]
    pub struct Int64Value {
        #[prost(int64, tag = "1")]
        pub value: i64,
    }

    #[derive(Clone, PartialEq, Eq, ::prost::Message)]
    pub struct Image {
        #[prost(string, tag = "1")]
        pub id: String,
        #[prost(string, repeated, tag = "2")]
        pub repo_tags: Vec<String>,
        #[prost(string, repeated, tag = "3")]
        pub repo_digests: Vec<String>,
        #[prost(uint64, tag = "4")]
        pub size: u64,
        #[prost(message, optional, tag = "5")]
        pub uid: Option<Int64Value>,
        #[prost(string, tag = "6")]
        pub username: String,
        #[prost(message, optional, tag = "7")]
        pub spec: Option<ImageSpec>,
        #[prost(bool, tag = "8")]
        pub pinned: bool,
    }

    #[derive(Clone, PartialEq, Eq, ::prost::Message)]
    pub struct ImageStatusRequest {
        #[prost(message, optional, tag = "1")]
        pub image: Option<ImageSpec>,
        #[prost(bool, tag = "2")]
        pub verbose: bool,
    }

    /// `image` is unset when the runtime does not have the image (not an error in CRI).
    #[derive(Clone, PartialEq, Eq, ::prost::Message)]
    pub struct ImageStatusResponse {
        #[prost(message, optional, tag = "1")]
        pub image: Option<Image>,
        #[prost(btree_map = "string, string", tag = "2")]
        pub info: BTreeMap<String, String>,
    }
}

const RUNTIME_SERVICE: &str = "/runtime.v1.RuntimeService/";
const IMAGE_SERVICE: &str = "/runtime.v1.ImageService/";
const MAX_MESSAGE: usize = 16 * 1024 * 1024;

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
    #[error("no such image {image:?} present")]
    NoSuchImage { image: String },
    #[error("--output {format:?}: expected one of {expected}")]
    Output { format: String, expected: &'static str },
    #[error("--template: {0}")]
    Template(#[source] template::TemplateError),
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
        // 16 MiB answers, as crictl allows (tonic's default is 4 MiB; a node's image list can be larger).
        let grpc = tonic::client::Grpc::new(channel).max_decoding_message_size(MAX_MESSAGE);
        Ok(Self { grpc, endpoint: endpoint.to_string(), timeout })
    }

    async fn unary<Req, Resp>(&mut self, method: &'static str, request: Req) -> Result<Resp, CriError>
    where
        Req: prost::Message + Send + Sync + 'static,
        Resp: prost::Message + Default + Send + Sync + 'static,
    {
        self.call(RUNTIME_SERVICE, method, request).await
    }

    async fn call<Req, Resp>(&mut self, service: &'static str, method: &'static str, request: Req) -> Result<Resp, CriError>
    where
        Req: prost::Message + Send + Sync + 'static,
        Resp: prost::Message + Default + Send + Sync + 'static,
    {
        let timeout = self.timeout;
        self.call_within(service, method, request, timeout).await
    }

    async fn call_within<Req, Resp>(&mut self, service: &'static str, method: &'static str, request: Req, timeout: Duration) -> Result<Resp, CriError>
    where
        Req: prost::Message + Send + Sync + 'static,
        Resp: prost::Message + Default + Send + Sync + 'static,
    {
        let endpoint = self.endpoint.clone();
        let call = async {
            self.grpc.ready().await.map_err(|e| tonic::Status::unavailable(e.to_string()))?;
            let path = tonic::codegen::http::uri::PathAndQuery::try_from(format!("{service}{method}")).map_err(|e| tonic::Status::internal(e.to_string()))?;
            let codec = tonic_prost::ProstCodec::<Req, Resp>::default();
            self.grpc.unary(tonic::Request::new(request), path, codec).await
        };
        match tokio::time::timeout(timeout, call).await {
            Ok(Ok(response)) => Ok(response.into_inner()),
            Ok(Err(source)) => Err(CriError::Call { method, endpoint, source }),
            Err(_) => Err(CriError::Timeout { method, endpoint, timeout }),
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

    /// `ImageService.ListImages`, with `name` as the filter's image, as crictl sends it (an empty name
    /// lists everything). containerd ignores the filter and always answers with every image; see
    /// [`ImageRef::matches`] for the filter applied to the answer.
    pub async fn list_images(&mut self, name: &str) -> Result<Vec<api::Image>, CriError> {
        let request = api::ListImagesRequest { filter: Some(api::ImageFilter { image: Some(api::ImageSpec { image: name.into(), ..Default::default() }) }) };
        let response: api::ListImagesResponse = self.call(IMAGE_SERVICE, "ListImages", request).await?;
        Ok(response.images)
    }

    /// `ImageService.PullImage` of a name, as `crictl pull` sends it; the runtime's reference of the
    /// image. A pull takes as long as the download: the call waits up to `within` (crictl's pull has no
    /// deadline of its own either; the per-call timeout is for the quick calls).
    pub async fn pull_image(&mut self, image: &str, within: Duration) -> Result<String, CriError> {
        let request = api::PullImageRequest { image: Some(api::ImageSpec { image: image.into(), ..Default::default() }) };
        let response: api::PullImageResponse = self.call_within(IMAGE_SERVICE, "PullImage", request, within).await?;
        Ok(response.image_ref)
    }

    /// `ImageService.ImageStatus` of a name, digest reference or (short) image ID. An image the runtime
    /// does not have is `Ok` with `image: None`, as CRI answers it.
    pub async fn image_status(&mut self, image: &str, verbose: bool) -> Result<api::ImageStatusResponse, CriError> {
        let request = api::ImageStatusRequest { image: Some(api::ImageSpec { image: image.into(), ..Default::default() }), verbose };
        self.call(IMAGE_SERVICE, "ImageStatus", request).await
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

/// An image as `crictl images -o json` prints it: protobuf JSON with default values (camelCase,
/// 64-bit numbers as strings, empty lists and strings written out; `uid` and `spec` only when the
/// runtime set them, as protojson leaves out unset messages).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ImageJson {
    pub id: String,
    #[serde(default)]
    pub repo_tags: Vec<String>,
    #[serde(default)]
    pub repo_digests: Vec<String>,
    #[serde(default)]
    pub size: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub uid: Option<Int64Json>,
    #[serde(default)]
    pub username: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spec: Option<ImageSpecJson>,
    #[serde(default)]
    pub pinned: bool,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Int64Json {
    pub value: String,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ImageSpecJson {
    pub image: String,
    pub annotations: BTreeMap<String, String>,
    pub user_specified_image: String,
    pub runtime_handler: String,
    pub image_ref: String,
}

/// `{"images": [...]}`, the shape of `crictl images -o json`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ImageListJson {
    #[serde(default)]
    pub images: Vec<ImageJson>,
}

/// One image of `crictl inspecti -o json`: `{"info": ..., "status": {...}}`, the runtime's verbose
/// info entries beside the status (containerd: `info`, the image's config and chain ID).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ImageInspectJson {
    pub status: ImageJson,
    #[serde(flatten)]
    pub info: BTreeMap<String, serde_json::Value>,
}

impl ImageJson {
    pub fn from_api(image: &api::Image) -> Self {
        ImageJson {
            id: image.id.clone(),
            repo_tags: image.repo_tags.clone(),
            repo_digests: image.repo_digests.clone(),
            size: image.size.to_string(),
            uid: image.uid.map(|u| Int64Json { value: u.value.to_string() }),
            username: image.username.clone(),
            spec: image.spec.as_ref().map(|s| ImageSpecJson {
                image: s.image.clone(),
                annotations: s.annotations.clone(),
                user_specified_image: s.user_specified_image.clone(),
                runtime_handler: s.runtime_handler.clone(),
                image_ref: s.image_ref.clone(),
            }),
            pinned: image.pinned,
        }
    }
}

/// crictl's order for `images`: by first repo tag when both images have one, else by first repo
/// digest when both have one, else by ID. That is not a total order when tagged and untagged images
/// mix (Rust's sort may panic on such a comparison); this is the insertion sort Go's `slices.SortFunc`
/// uses for up to 12 elements, so small lists come out exactly as crictl prints them.
pub fn sort_images(images: &mut [api::Image]) {
    let less = |a: &api::Image, b: &api::Image| match (a.repo_tags.first(), b.repo_tags.first(), a.repo_digests.first(), b.repo_digests.first()) {
        (Some(x), Some(y), _, _) => x < y,
        (_, _, Some(x), Some(y)) => x < y,
        _ => a.id < b.id,
    };
    for i in 1..images.len() {
        let mut j = i;
        while j > 0 && less(&images[j], &images[j - 1]) {
            images.swap(j, j - 1);
            j -= 1;
        }
    }
}

/// The `REPOSITORY[:TAG]` argument of `images` (also `repo@digest` or an image ID).
///
/// crictl sends it to the runtime as the list filter and prints what comes back; containerd ignores
/// that filter and returns every image (cri-tools#2008), so faultlab-cri sends it too and also keeps
/// only the images it names: all tags of a repository given without a tag, one tag, one digest, or
/// the image whose ID is (or starts with) a hex ID. Names are compared as given and in Docker's
/// normal form (`busybox` is `docker.io/library/busybox`), which is how containerd stores tags.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ImageRef {
    given: String,
    names: Vec<String>,
    tag: Option<String>,
    digest: Option<String>,
}

impl ImageRef {
    pub fn parse(text: &str) -> Self {
        let (rest, digest) = match text.split_once('@') {
            Some((name, digest)) => (name, Some(digest.to_string())),
            None => (text, None),
        };
        let (name, tag) = match rest.rfind(':') {
            Some(i) if !rest[i + 1..].contains('/') => (&rest[..i], Some(rest[i + 1..].to_string())),
            _ => (rest, None),
        };
        let mut names = vec![name.to_string()];
        let normal = docker_normal_name(name);
        if normal != name {
            names.push(normal);
        }
        ImageRef { given: text.to_string(), names, tag, digest }
    }

    pub fn matches(&self, image: &api::Image) -> bool {
        let hex = self.given.strip_prefix("sha256:").unwrap_or(&self.given);
        if image.id == self.given || (!hex.is_empty() && hex.bytes().all(|b| b.is_ascii_hexdigit()) && image.id.trim_start_matches("sha256:").starts_with(hex)) {
            return true;
        }
        if let Some(digest) = &self.digest {
            return image.repo_digests.iter().any(|d| d.split_once('@').is_some_and(|(n, dg)| dg == digest && self.names.iter().any(|x| x == n)));
        }
        image.repo_tags.iter().any(|t| {
            let (name, tag) = split_repo_tag(t);
            self.names.iter().any(|n| n == name) && self.tag.as_ref().is_none_or(|want| want == tag)
        })
    }
}

/// `name:tag` split at the last colon that is not part of a registry's port.
fn split_repo_tag(repo_tag: &str) -> (&str, &str) {
    match repo_tag.rfind(':') {
        Some(i) if !repo_tag[i + 1..].contains('/') => (&repo_tag[..i], &repo_tag[i + 1..]),
        _ => (repo_tag, ""),
    }
}

/// Docker's normal form of a repository name: `docker.io/` when the first part is no registry,
/// `library/` for an official image.
fn docker_normal_name(name: &str) -> String {
    match name.split_once('/') {
        Some((first, _)) if first.contains('.') || first.contains(':') || first == "localhost" || first.chars().any(|c| c.is_ascii_uppercase()) => name.to_string(),
        Some(_) => format!("docker.io/{name}"),
        None => format!("docker.io/library/{name}"),
    }
}

/// crictl's ID column: without `prefix`, at most 13 characters.
pub fn truncated_id(id: &str, prefix: &str) -> String {
    id.strip_prefix(prefix).unwrap_or(id).chars().take(13).collect()
}

/// The (IMAGE, TAG) rows of one image, as crictl derives them: one per repo tag, the repository of
/// the first repo digest and `<none>` for an image without tags.
pub fn repo_tag_pairs(image: &api::Image) -> Vec<(String, String)> {
    let (image_name, _) = repo_digest(image);
    if image.repo_tags.is_empty() {
        return vec![(image_name, "<none>".into())];
    }
    image
        .repo_tags
        .iter()
        .map(|t| match t.rfind(':') {
            None => ("errorRepoTag".into(), "errorRepoTag".into()),
            Some(i) => {
                let name = if &t[..i] == "<none>" { image_name.clone() } else { t[..i].to_string() };
                (name, t[i + 1..].to_string())
            }
        })
        .collect()
}

/// The repository and digest of an image's first repo digest (`<none>` for none).
pub fn repo_digest(image: &api::Image) -> (String, String) {
    match image.repo_digests.first() {
        None => ("<none>".into(), "<none>".into()),
        Some(d) => match d.split('@').collect::<Vec<_>>().as_slice() {
            [name, digest] => (name.to_string(), digest.to_string()),
            _ => ("errorName".into(), "errorRepoDigest".into()),
        },
    }
}

/// Columns of `crictl images` beyond IMAGE, TAG, IMAGE ID and SIZE.
#[derive(Clone, Copy, Debug, Default)]
pub struct ImageColumns {
    pub digests: bool,
    pub pinned: bool,
    pub no_trunc: bool,
}

/// `crictl images` as a table: header, then one row per repo tag.
pub fn images_table(images: &[api::Image], columns: ImageColumns) -> String {
    let mut header = vec!["IMAGE".to_string(), "TAG".into()];
    if columns.digests {
        header.push("DIGEST".into());
    }
    header.extend(["IMAGE ID".to_string(), "SIZE".into()]);
    if columns.pinned {
        header.push("PINNED".into());
    }
    let mut rows = vec![header];
    for image in images {
        let (_, mut digest) = repo_digest(image);
        let mut id = image.id.clone();
        if !columns.no_trunc {
            id = truncated_id(&id, "sha256:");
            digest = truncated_id(&digest, "sha256:");
        }
        let size = gofmt::human_size(image.size);
        for (name, tag) in repo_tag_pairs(image) {
            let mut row = vec![name, tag];
            if columns.digests {
                row.push(digest.clone());
            }
            row.extend([id.clone(), size.clone()]);
            if columns.pinned {
                row.push(image.pinned.to_string());
            }
            rows.push(row);
        }
    }
    gofmt::tabwriter(&rows, 20, 3)
}

/// `crictl images --verbose`: a block of `Key: value` lines per image.
pub fn images_verbose(images: &[api::Image]) -> String {
    let mut out = String::new();
    for image in images {
        out.push_str(&format!("ID: {}\n", image.id));
        image.repo_tags.iter().for_each(|t| out.push_str(&format!("RepoTags: {t}\n")));
        image.repo_digests.iter().for_each(|d| out.push_str(&format!("RepoDigests: {d}\n")));
        if image.size != 0 {
            out.push_str(&format!("Size: {}\n", image.size));
        }
        if let Some(uid) = image.uid {
            out.push_str(&format!("Uid: value:{}\n", uid.value));
        }
        if !image.username.is_empty() {
            out.push_str(&format!("Username: {}\n", image.username));
        }
        if image.pinned {
            out.push_str("Pinned: true\n");
        }
        out.push('\n');
    }
    out
}

/// What `crictl inspecti` prints for its answers, as a JSON value: per image its status and the
/// runtime's info entries (an entry whose text is a JSON object is included as that object, any
/// other text as a string without its quotes); one image on its own, several as an array.
pub fn inspect_value(answers: &[(api::Image, BTreeMap<String, String>)]) -> Result<serde_json::Value, serde_json::Error> {
    let mut all = Vec::new();
    for (image, info) in answers {
        let mut entry = serde_json::Map::new();
        entry.insert("status".into(), serde_json::to_value(ImageJson::from_api(image))?);
        for (key, text) in info {
            let value = if text.starts_with('{') { serde_json::from_str(text)? } else { serde_json::Value::String(text.trim_matches('"').to_string()) };
            entry.insert(key.clone(), value);
        }
        all.push(serde_json::Value::Object(entry));
    }
    Ok(if all.len() == 1 { all.pop().expect("one") } else { serde_json::Value::Array(all) })
}

/// `inspecti`'s output of [`inspect_value`] in a format crictl offers for it: `json` (Go's
/// `encoding/json`, keys sorted), `yaml` or `go-template` with `template`.
pub fn render_status(value: &serde_json::Value, format: &str, template: &str) -> Result<String, CriError> {
    match format {
        "json" => Ok(gofmt::json(value, Some("  "))),
        "yaml" => Ok(gofmt::yaml(value)),
        "go-template" => template::Template::parse(template).and_then(|t| t.execute(value)).map_err(CriError::Template),
        other => Err(CriError::Output { format: other.to_string(), expected: "json, yaml, go-template, table" }),
    }
}

/// `crictl inspecti -o table`: ID, tags, digests, size and (verbose) the info map.
pub fn image_status_table(image: &api::Image, info: &BTreeMap<String, String>, verbose: bool) -> String {
    let mut out = format!("ID: {}\n", image.id);
    image.repo_tags.iter().for_each(|t| out.push_str(&format!("Tag: {t}\n")));
    image.repo_digests.iter().for_each(|d| out.push_str(&format!("Digest: {d}\n")));
    out.push_str(&format!("Size: {}\n", gofmt::human_size(image.size)));
    if verbose {
        let entries: Vec<String> = info.iter().map(|(k, v)| format!("{k}:{v}")).collect();
        out.push_str(&format!("Info: map[{}]\n", entries.join(" ")));
    }
    out
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

    #[test]
    fn image_messages_encode_with_the_proto_field_numbers() {
        // ListImagesRequest{filter(1){image(1){image(1) "busybox"}}}
        let request = api::ListImagesRequest { filter: Some(api::ImageFilter { image: Some(api::ImageSpec { image: "busybox".into(), ..Default::default() }) }) };
        let mut expected = vec![0x0a, 11, 0x0a, 9, 0x0a, 7];
        expected.extend_from_slice(b"busybox");
        assert_eq!(request.encode_to_vec(), expected);
        // An empty filter image is still a present ImageFilter and ImageSpec, as crictl sends it.
        let all = api::ListImagesRequest { filter: Some(api::ImageFilter { image: Some(api::ImageSpec::default()) }) };
        assert_eq!(all.encode_to_vec(), [0x0a, 2, 0x0a, 0]);

        // ImageStatusRequest{image(1){image "x"}, verbose(2) true}
        let status = api::ImageStatusRequest { image: Some(api::ImageSpec { image: "x".into(), ..Default::default() }), verbose: true };
        assert_eq!(status.encode_to_vec(), [0x0a, 3, 0x0a, 1, b'x', 0x10, 1]);

        // ImageSpec: annotations (2) are a map entry {key 1, value 2}; user_specified_image is field 18
        // (key 18<<3|2 = 146, a two-byte varint), runtime_handler 19, image_ref 20.
        let spec = api::ImageSpec {
            image: String::new(),
            annotations: [("k".to_string(), "v".to_string())].into(),
            user_specified_image: "u".into(),
            runtime_handler: "r".into(),
            image_ref: "i".into(),
        };
        assert_eq!(spec.encode_to_vec(), [0x12, 6, 0x0a, 1, b'k', 0x12, 1, b'v', 0x92, 0x01, 1, b'u', 0x9a, 0x01, 1, b'r', 0xa2, 0x01, 1, b'i']);
    }

    #[test]
    fn image_answers_decode_from_the_wire() {
        // Image{id 1, repo_tags 2, repo_digests 3, size 4 (300 = ac 02), uid 5 (Int64Value{0}: an empty
        // but present message), username 6, spec 7, pinned 8}, inside ListImagesResponse.images (1).
        let image: Vec<u8> = vec![
            0x0a, 1, b'i', 0x12, 3, b't', b':', b'1', 0x1a, 3, b'd', b'@', b's', 0x20, 0xac, 0x02, 0x2a, 0, 0x32, 1, b'u', 0x3a, 3, 0x0a, 1, b's', 0x40, 1,
        ];
        let mut wire = vec![0x0a, image.len() as u8];
        wire.extend_from_slice(&image);
        let list = api::ListImagesResponse::decode(wire.as_slice()).unwrap();
        let expected = api::Image {
            id: "i".into(),
            repo_tags: vec!["t:1".into()],
            repo_digests: vec!["d@s".into()],
            size: 300,
            uid: Some(api::Int64Value { value: 0 }),
            username: "u".into(),
            spec: Some(api::ImageSpec { image: "s".into(), ..Default::default() }),
            pinned: true,
        };
        assert_eq!(list.images, std::slice::from_ref(&expected));
        assert_eq!(api::ListImagesResponse { images: vec![expected.clone()] }.encode_to_vec(), wire);

        // ImageStatusResponse: image (1) and info (2), a map<string, string>.
        let mut wire = vec![0x0a, image.len() as u8];
        wire.extend_from_slice(&image);
        wire.extend_from_slice(&[0x12, 10, 0x0a, 4, b'i', b'n', b'f', b'o', 0x12, 2, b'{', b'}']);
        let status = api::ImageStatusResponse::decode(wire.as_slice()).unwrap();
        assert_eq!(status.image, Some(expected));
        assert_eq!(status.info, [("info".to_string(), "{}".to_string())].into());
        // An image the runtime does not have: an empty answer, image unset.
        assert_eq!(api::ImageStatusResponse::decode(&[][..]).unwrap().image, None);
        // An Image from a runtime older than `pinned` (field 8) decodes with pinned false.
        assert!(!api::Image::decode(&image[..image.len() - 2]).unwrap().pinned);
    }

    fn image(id: &str, tags: &[&str], digests: &[&str], size: u64) -> api::Image {
        api::Image {
            id: id.into(),
            repo_tags: tags.iter().map(|t| t.to_string()).collect(),
            repo_digests: digests.iter().map(|d| d.to_string()).collect(),
            size,
            ..Default::default()
        }
    }

    #[test]
    fn images_print_as_crictl_prints_them() {
        let busybox = image(
            "sha256:a3ab598d21bd9a0d7b443221d7720cf2a208387e10b322635131aec413b096f0",
            &["faultlab.invalid/busybox:1.35", "faultlab.invalid/busybox:latest"],
            &["faultlab.invalid/busybox@sha256:3148afe475305a519b31a76794528c319c5d3cd00e176d9ab891971a88a4c581"],
            2_130_745,
        );
        let untagged = image("sha256:0bc750b47d82b33c2fcd8ed80df16bc1e33ebb0f42d9bf3f56c537cdcff389a5", &[], &["registry.k8s.io/pause@sha256:2b9f"], 697_081);
        let table = images_table(&[busybox.clone(), untagged.clone()], ImageColumns::default());
        assert_eq!(
            table,
            "IMAGE                      TAG                 IMAGE ID            SIZE\n\
             faultlab.invalid/busybox   1.35                a3ab598d21bd9       2.13MB\n\
             faultlab.invalid/busybox   latest              a3ab598d21bd9       2.13MB\n\
             registry.k8s.io/pause      <none>              0bc750b47d82b       697kB\n"
        );
        let wide = images_table(std::slice::from_ref(&busybox), ImageColumns { digests: true, pinned: true, no_trunc: true });
        let header = wide.lines().next().unwrap();
        assert_eq!(header.split_whitespace().collect::<Vec<_>>(), ["IMAGE", "TAG", "DIGEST", "IMAGE", "ID", "SIZE", "PINNED"]);
        let row: Vec<&str> = wide.lines().nth(1).unwrap().split_whitespace().collect();
        assert_eq!(row[2], "sha256:3148afe475305a519b31a76794528c319c5d3cd00e176d9ab891971a88a4c581");
        assert_eq!(row[3], busybox.id);
        assert_eq!(row[5], "false");
        let short = images_table(std::slice::from_ref(&busybox), ImageColumns { digests: true, ..Default::default() });
        assert!(short.lines().nth(1).unwrap().ends_with("   1.35                3148afe475305       a3ab598d21bd9       2.13MB"), "{short}");

        // -o json: protobuf JSON with defaults, uid and spec only when set.
        let json = serde_json::to_value(ImageJson::from_api(&busybox)).unwrap();
        assert_eq!(
            json,
            serde_json::json!({"id": busybox.id, "repoTags": busybox.repo_tags, "repoDigests": busybox.repo_digests,
                               "size": "2130745", "username": "", "pinned": false})
        );
        let mut with_uid = untagged.clone();
        with_uid.uid = Some(api::Int64Value { value: 0 });
        with_uid.spec = Some(api::ImageSpec { image: "x".into(), ..Default::default() });
        let json = serde_json::to_value(ImageJson::from_api(&with_uid)).unwrap();
        assert_eq!(json["uid"], serde_json::json!({"value": "0"}));
        assert_eq!(json["spec"], serde_json::json!({"image": "x", "annotations": {}, "userSpecifiedImage": "", "runtimeHandler": "", "imageRef": ""}));
        assert_eq!(json["repoTags"], serde_json::json!([]));
        let keys: Vec<String> = serde_json::to_string(&ImageJson::from_api(&with_uid)).unwrap().split("\":").map(|k| k.rsplit('"').next().unwrap().to_string()).collect();
        assert_eq!(keys[..8], ["id", "repoTags", "repoDigests", "size", "uid", "value", "username", "spec"]);

        let verbose = images_verbose(&[with_uid]);
        assert_eq!(verbose, format!("ID: {}\nRepoDigests: registry.k8s.io/pause@sha256:2b9f\nSize: 697081\nUid: value:0\n\n", untagged.id));
    }

    #[test]
    fn images_are_sorted_and_filtered_as_crictl_means_it() {
        let mut images = vec![
            image("sha256:c", &["b/x:1"], &[], 1),
            image("sha256:b", &[], &["z@sha256:1"], 1),
            image("sha256:a", &["a/x:1"], &[], 1),
            image("sha256:d", &[], &["y@sha256:2"], 1),
        ];
        sort_images(&mut images);
        let order: Vec<&str> = images.iter().map(|i| i.id.as_str()).collect();
        // What Go's insertion sort (slices.SortFunc below 13 elements) makes of crictl's comparison.
        assert_eq!(order, ["sha256:a", "sha256:b", "sha256:c", "sha256:d"]);
        let mut tagged = vec![image("3", &["c:1"], &[], 1), image("1", &["a:1"], &[], 1), image("2", &["b:1"], &[], 1)];
        sort_images(&mut tagged);
        assert_eq!(tagged.iter().map(|i| i.id.as_str()).collect::<Vec<_>>(), ["1", "2", "3"]);

        let busybox = image("sha256:a3ab598d21bd9a0d", &["docker.io/library/busybox:1.36", "faultlab.invalid/busybox:1.35"], &["docker.io/library/busybox@sha256:77"], 1);
        let pause = image("sha256:0bc750b47d82", &["faultlab.invalid/cce-pause:3.1", "localhost:5000/pause:3.1"], &[], 1);
        for (arg, busybox_matches, pause_matches) in [
            ("busybox", true, false),
            ("busybox:1.36", true, false),
            ("busybox:1.35", false, false),
            ("docker.io/library/busybox", true, false),
            ("faultlab.invalid/busybox", true, false),
            ("faultlab.invalid/busybox:1.35", true, false),
            ("faultlab.invalid/busybox:9", false, false),
            ("busybox@sha256:77", true, false),
            ("busybox@sha256:78", false, false),
            ("a3ab598d", true, false),
            ("sha256:0bc750b47d82", false, true),
            ("localhost:5000/pause", false, true),
            ("localhost:5000/pause:3.1", false, true),
            ("pause", false, false),
        ] {
            let r = ImageRef::parse(arg);
            assert_eq!((r.matches(&busybox), r.matches(&pause)), (busybox_matches, pause_matches), "{arg}");
        }
        assert_eq!(repo_tag_pairs(&image("i", &["<none>:<none>"], &["r@sha256:1"], 1)), [("r".to_string(), "<none>".to_string())]);
        assert_eq!(repo_tag_pairs(&image("i", &["notag"], &[], 1)), [("errorRepoTag".to_string(), "errorRepoTag".to_string())]);
        assert_eq!(truncated_id("sha256:0123456789abcdef", "sha256:"), "0123456789abc");
    }

    #[test]
    fn inspecti_prints_status_and_info_as_crictl_does() {
        let busybox = image("sha256:a3ab", &["faultlab.invalid/busybox:1.35"], &[], 2_130_745);
        let info: BTreeMap<String, String> = [("info".to_string(), r#"{"chainID":"sha256:33","imageSpec":{"os":"linux"}}"#.to_string()), ("note".to_string(), "\"plain\"".to_string())].into();
        let value = inspect_value(&[(busybox.clone(), info.clone())]).unwrap();
        let json = render_status(&value, "json", "").unwrap();
        assert_eq!(
            json,
            "{\n  \"info\": {\n    \"chainID\": \"sha256:33\",\n    \"imageSpec\": {\n      \"os\": \"linux\"\n    }\n  },\n  \"note\": \"plain\",\n  \"status\": {\n    \"id\": \"sha256:a3ab\",\n    \"pinned\": false,\n    \"repoDigests\": [],\n    \"repoTags\": [\n      \"faultlab.invalid/busybox:1.35\"\n    ],\n    \"size\": \"2130745\",\n    \"username\": \"\"\n  }\n}"
        );
        // What kind decodes from `crictl inspecti`: {"status": {"id", "repoTags"}}.
        let parsed: ImageInspectJson = serde_json::from_str(&json).unwrap();
        assert_eq!((parsed.status.id.as_str(), parsed.status.repo_tags.as_slice()), ("sha256:a3ab", &["faultlab.invalid/busybox:1.35".to_string()][..]));
        assert_eq!(parsed.info["note"], "plain");

        let two = inspect_value(&[(busybox.clone(), BTreeMap::new()), (busybox.clone(), BTreeMap::new())]).unwrap();
        assert_eq!(two.as_array().map(Vec::len), Some(2));
        assert!(render_status(&two, "yaml", "").unwrap().starts_with("- status:\n    id: sha256:a3ab\n"));
        assert_eq!(render_status(&value, "go-template", "{{.status.id}} {{.info.imageSpec.os}}").unwrap(), "sha256:a3ab linux");
        let err = render_status(&value, "go-template", "{{.status.nope}}").unwrap_err().to_string();
        assert!(err.contains("map has no entry for key \"nope\""), "{err}");
        assert!(render_status(&value, "xml", "").unwrap_err().to_string().contains("--output \"xml\""));
        assert_eq!(CriError::NoSuchImage { image: "x:1".into() }.to_string(), "no such image \"x:1\" present");
        let table = image_status_table(&busybox, &info, false);
        assert_eq!(table, "ID: sha256:a3ab\nTag: faultlab.invalid/busybox:1.35\nSize: 2.13MB\n");
    }
}
