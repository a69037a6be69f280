//! A small CRI client: the pod-sandbox calls of `runtime.v1.RuntimeService` and the image calls of
//! `runtime.v1.ImageService` (`ListImages`, `ImageStatus`, `PullImage`), over the runtime's unix
//! socket, and the crictl-compatible command line of `faultlab-cri` built on them.
//!
//! Why it exists: the faults work a node's runtime through crictl (the duplicate-container fault
//! creates, lists and removes pod sandboxes, as `crictl runp/pods/rmp` do). kind nodes carry crictl;
//! the test bed cannot (crictl is not packaged in Debian, and nothing may be downloaded there), so it
//! runs `faultlab-cri` instead, with the same argv and output. A fault therefore sends one argv to
//! either node, with only the program prefix taken from the node profile. faultlab's own kind node
//! image installs it as `crictl` too (`ci/kind/node-image`), so it also answers what kind itself runs
//! in a node.
//!
//! # What calls it, and so what it does
//!
//! Each sub-command, flag and output format here has a caller; crictl's others are left out, and an
//! output format that is left out is refused by name ([`check_output`]).
//!
//! | sub-command | flags, output | caller |
//! | --- | --- | --- |
//! | `version` | text | `ci/testbed/lib/node-images.sh:71` (the client reaches containerd); `ci/testbed/lib/supervisor.sh:292` (`--timeout 3`, the VM's proxy) |
//! | `pods` | `-q` (IDs) | `harness/src/faults/cni_broken.rs:309` |
//! | `pods` | `-q --label K=V` | `harness/src/faults/duplicate_container.rs:144` (the undo) |
//! | `pods` | `--name RE --namespace RE -o json` | `harness/src/faults/duplicate_container.rs:138` (through `Ctx::sandboxes`, `harness/src/faults/api.rs:115`) |
//! | `pods` | `-o json` | `harness/src/faults/duplicate_container.rs:178` (the footprint probe) |
//! | `pods` | `[--name RE]`, table | a trainee, on the test bed through the alias `harness/src/training.rs:379` prints: the hints `scenarios/cni-broken.yaml:85`, `scenarios/duplicate-container.yaml:89` |
//! | `runp` | `FILE` (crictl's JSON config) | `harness/src/faults/duplicate_container.rs:151` |
//! | `stopp` | `ID...` | `harness/src/faults/duplicate_container.rs:208` |
//! | `rmp` | `-f ID...` | `harness/src/faults/duplicate_container.rs:96` and `:145`; the hint `scenarios/duplicate-container.yaml:90` |
//! | `pull` | `--pull-timeout Ns IMAGE` | `harness/src/faults/image_pull_slow.rs:187` |
//! | `images` | table | kind v0.27.0 `pkg/cluster/internal/providers/common/logs.go:45` (`kind export logs` writes it to `images.log`; faultlab runs that at `harness/src/provider/kind.rs:934`) |
//! | `inspecti` | `IMAGE` (a name or an image ID), JSON with the runtime's info | kind v0.27.0 `pkg/cluster/nodeutils/util.go:131` (`ImageID`: reads `status.id`) and `:151` (`ImageTags`: reads `status.repoTags`), from `kind load docker-image` (`pkg/cmd/kind/load/docker-image/docker-image.go:139`, `:156`; faultlab runs it at `harness/src/provider/kind.rs:741`) |
//! | `proxy` | `--listen --upstream` | `ci/testbed/lib/components.sh:133`, `ci/testbed/test-lib:251`, `ci/kind/node-containerd2/etc/systemd/system/faultlab-cri-proxy.service:12` (not crictl's: see [`proxy`]) |
//! | `csi-node` | `--node-id --driver --kubelet-root --disks` | `ci/testbed/lib/components.sh` (`fl_start_csi_node`: every test bed node; not crictl's: see [`csi`]) |
//! | (all) | `--runtime-endpoint` | `harness/src/testbed.rs:197` (the test bed's node profile) |
//! | (all) | `--timeout` | `harness/src/testbed.rs:199` (`50` on an emulated node), `ci/testbed/lib/supervisor.sh:292` |
//!
//! Nothing else runs crictl in faultlab's nodes. kind v0.27.0 runs it only in the two places above.
//! kubeadm 1.20 would (`cmd/kubeadm/app/util/runtime/runtime.go`: `crictl -r SOCKET` with `info`,
//! `pods -q`, `stopp`, `rmp`, `pull`, `inspecti`) from its preflight checks, `config images pull` and
//! `reset`; kind runs `kubeadm init` and `join` with `--skip-phases=preflight` below 1.23
//! (`pkg/cluster/internal/create/actions/kubeadminit/init.go:83-90`, `kubeadmjoin/join.go:138-141`)
//! and neither of the others, so `info` is not here. No caller uses crictl's other formats (`yaml`,
//! `go-template`, `-o json` of `images`, `inspecti -o table`), so crictl's Go formatting is reproduced
//! only for the `images` table ([`images_table`]: go-units' sizes, tabwriter's columns).
//!
//! The messages are written by hand with prost's derive, field numbers as in
//! `k8s.io/cri-api/pkg/apis/runtime/v1/api.proto` (Kubernetes 1.20; unchanged since for these
//! messages, later fields noted where they are declared). That keeps protoc out of the build.
//! containerd serves `runtime.v1` from 1.6 on.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::{Deserialize, Serialize};
use thiserror::Error;

pub mod csi;
pub mod proxy;
pub mod relay;

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
    #[error("no such image {image:?} present")]
    NoSuchImage { image: String },
    #[error("{command} --output {format:?}: faultlab-cri prints {command} only as {} (crictl's other formats have no caller here)", .offered.join(" or "))]
    Output { command: &'static str, format: String, offered: &'static [&'static str] },
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

    /// `RunPodSandbox` with the runtime's default handler (crictl's `runp` without `--runtime`).
    pub async fn run_pod_sandbox(&mut self, config: api::PodSandboxConfig) -> Result<String, CriError> {
        let request = api::RunPodSandboxRequest { config: Some(config), runtime_handler: String::new() };
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

    /// `ImageService.ListImages` of every image, as `crictl images` sends it (a present filter with an
    /// empty image).
    pub async fn list_images(&mut self) -> Result<Vec<api::Image>, CriError> {
        let request = api::ListImagesRequest { filter: Some(api::ImageFilter { image: Some(api::ImageSpec::default()) }) };
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

/// An image as `crictl inspecti` prints its status: protobuf JSON with default values (camelCase,
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

/// `crictl inspecti IMAGE`: `{"info": ..., "status": {...}}`, the runtime's verbose info entries
/// beside the status (containerd: `info`, the image's config and chain ID). kind reads `status.id`
/// and `status.repoTags`.
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

/// crictl's order for `images` (so only [`images_table`]'s): by first repo tag when both images have one, else by first repo
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

/// crictl's IMAGE ID column: without `sha256:`, at most 13 characters.
fn truncated_id(id: &str) -> String {
    id.strip_prefix("sha256:").unwrap_or(id).chars().take(13).collect()
}

/// The (IMAGE, TAG) rows of one image, as crictl derives them: one per repo tag, the repository of
/// the first repo digest and `<none>` for an image without tags.
fn repo_tag_pairs(image: &api::Image) -> Vec<(String, String)> {
    let digest_repository = match image.repo_digests.first().map(|d| d.split('@').collect::<Vec<_>>()) {
        None => "<none>".to_string(),
        Some(parts) => match parts.as_slice() {
            [name, _] => name.to_string(),
            _ => "errorName".into(),
        },
    };
    if image.repo_tags.is_empty() {
        return vec![(digest_repository, "<none>".into())];
    }
    image
        .repo_tags
        .iter()
        .map(|t| match t.rfind(':') {
            None => ("errorRepoTag".into(), "errorRepoTag".into()),
            Some(i) => {
                let name = if &t[..i] == "<none>" { digest_repository.clone() } else { t[..i].to_string() };
                (name, t[i + 1..].to_string())
            }
        })
        .collect()
}

/// `crictl images` (kind's `images.log`): a header, then a row per repo tag, in crictl's columns.
pub fn images_table(images: &[api::Image]) -> String {
    let mut rows = vec![["IMAGE", "TAG", "IMAGE ID", "SIZE"].map(String::from)];
    for image in images {
        let (id, size) = (truncated_id(&image.id), human_size(image.size));
        rows.extend(repo_tag_pairs(image).into_iter().map(|(name, tag)| [name, tag, id.clone(), size.clone()]));
    }
    tabwriter(&rows)
}

/// Go's `text/tabwriter` as crictl's tables set it up (minimum width 20, padding 3, spaces): every
/// cell but a row's last is padded to its column's width, the widest cell plus 3, at least 20.
/// Widths count characters, as tabwriter counts runes.
fn tabwriter(rows: &[[String; 4]]) -> String {
    let mut widths = [20; 3];
    for row in rows {
        for (width, cell) in widths.iter_mut().zip(row) {
            *width = (*width).max(cell.chars().count() + 3);
        }
    }
    let mut out = String::new();
    for row in rows {
        for (width, cell) in widths.iter().zip(row) {
            out.push_str(cell);
            out.extend(std::iter::repeat_n(' ', width - cell.chars().count()));
        }
        out.push_str(&row[3]);
        out.push('\n');
    }
    out
}

/// The SIZE column: docker/go-units' `HumanSizeWithPrecision(size, 3)`, decimal units and Go's
/// `%.3g` (so 999 999 bytes is `1e+03kB`, as crictl prints it).
pub fn human_size(bytes: u64) -> String {
    const UNITS: [&str; 9] = ["B", "kB", "MB", "GB", "TB", "PB", "EB", "ZB", "YB"];
    let mut size = bytes as f64;
    let mut unit = 0;
    while size >= 1000.0 && unit < UNITS.len() - 1 {
        size /= 1000.0;
        unit += 1;
    }
    // `%.3g` of a size that is 0 or at least 1: three significant digits, rounded as Go rounds them
    // (half to even, as Rust's `{:e}` does), trailing zeros dropped; the exponent form from 1000 on.
    let text = format!("{size:.2e}");
    let (mantissa, exponent) = text.split_once('e').expect("{:e} writes an exponent");
    let exponent: usize = exponent.parse().expect("not negative: the size is 0 or at least 1");
    let trim = |s: &str| s.trim_end_matches('0').trim_end_matches('.').to_string();
    let number = if exponent >= 3 {
        format!("{}e+{exponent:02}", trim(mantissa))
    } else {
        let digits = mantissa.replace('.', "");
        trim(&format!("{}.{}", &digits[..=exponent], &digits[exponent + 1..]))
    };
    format!("{number}{}", UNITS[unit])
}

/// What `crictl inspecti IMAGE` prints: [`ImageInspectJson`] as JSON, keys sorted as crictl's Go map
/// writes them (an info entry whose text is a JSON object is included as that object, any other text
/// as a string without its quotes).
pub fn inspect_json(image: &api::Image, info: &BTreeMap<String, String>) -> Result<String, serde_json::Error> {
    let mut entry = serde_json::Map::new();
    entry.insert("status".into(), serde_json::to_value(ImageJson::from_api(image))?);
    for (key, text) in info {
        let value = if text.starts_with('{') { serde_json::from_str(text)? } else { serde_json::Value::String(text.trim_matches('"').to_string()) };
        entry.insert(key.clone(), value);
    }
    serde_json::to_string_pretty(&serde_json::Value::Object(entry))
}

/// `--output` of `command`: one of the formats it `offers` (the ones its callers read, in the table
/// of this crate's documentation), or an error that says so before anything is sent.
pub fn check_output(command: &'static str, format: &str, offers: &'static [&'static str]) -> Result<(), CriError> {
    if offers.contains(&format) {
        return Ok(());
    }
    Err(CriError::Output { command, format: format.to_string(), offered: offers })
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
    fn endpoints_labels_and_name_filters() {
        assert_eq!(socket_path("unix:///run/c.sock").unwrap(), PathBuf::from("/run/c.sock"));
        assert_eq!(socket_path("/run/c.sock").unwrap(), PathBuf::from("/run/c.sock"));
        assert!(socket_path("tcp://1.2.3.4:5").is_err());
        assert_eq!(parse_label("a=b=c").unwrap(), ("a".into(), "b=c".into()));
        assert!(parse_label("novalue").is_err());
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
        assert_eq!(
            images_table(&[busybox, untagged]),
            "IMAGE                      TAG                 IMAGE ID            SIZE\n\
             faultlab.invalid/busybox   1.35                a3ab598d21bd9       2.13MB\n\
             faultlab.invalid/busybox   latest              a3ab598d21bd9       2.13MB\n\
             registry.k8s.io/pause      <none>              0bc750b47d82b       697kB\n"
        );
        assert_eq!(images_table(&[]), "IMAGE               TAG                 IMAGE ID            SIZE\n");
        assert_eq!(repo_tag_pairs(&image("i", &["<none>:<none>"], &["r@sha256:1"], 1)), [("r".to_string(), "<none>".to_string())]);
        assert_eq!(repo_tag_pairs(&image("i", &["notag"], &[], 1)), [("errorRepoTag".to_string(), "errorRepoTag".to_string())]);
        assert_eq!(repo_tag_pairs(&image("i", &[], &[], 1)), [("<none>".to_string(), "<none>".to_string())]);
        assert_eq!(truncated_id("sha256:0123456789abcdef"), "0123456789abc");
    }

    #[test]
    fn sizes_read_as_crictl_prints_them() {
        // HumanSizeWithPrecision(x, 3) = fmt.Sprintf("%.3g%s", ...), values checked against Go's %g rules.
        let cases = [
            (0, "0B"),
            (5, "5B"),
            (999, "999B"),
            (1000, "1kB"),
            (1125, "1.12kB"), // a tie, rounded to even as Go does
            (1536, "1.54kB"),
            (12_345, "12.3kB"),
            (100_000, "100kB"),
            (999_499, "999kB"),
            (999_999, "1e+03kB"),
            (2_097_152, "2.1MB"),
            (696_832, "697kB"),
            (1_234_567_890, "1.23GB"),
            (u64::MAX, "18.4EB"),
        ];
        for (bytes, text) in cases {
            assert_eq!(human_size(bytes), text, "{bytes}");
        }
    }

    #[test]
    fn images_are_sorted_as_crictl_sorts_them() {
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
    }

    #[test]
    fn inspecti_prints_status_and_info_as_crictl_does() {
        let busybox = image("sha256:a3ab", &["faultlab.invalid/busybox:1.35"], &[], 2_130_745);
        let info: BTreeMap<String, String> = [("info".to_string(), r#"{"chainID":"sha256:33","imageSpec":{"os":"linux"}}"#.to_string()), ("note".to_string(), "\"plain\"".to_string())].into();
        let json = inspect_json(&busybox, &info).unwrap();
        assert_eq!(
            json,
            "{\n  \"info\": {\n    \"chainID\": \"sha256:33\",\n    \"imageSpec\": {\n      \"os\": \"linux\"\n    }\n  },\n  \"note\": \"plain\",\n  \"status\": {\n    \"id\": \"sha256:a3ab\",\n    \"pinned\": false,\n    \"repoDigests\": [],\n    \"repoTags\": [\n      \"faultlab.invalid/busybox:1.35\"\n    ],\n    \"size\": \"2130745\",\n    \"username\": \"\"\n  }\n}"
        );
        // What kind decodes from `crictl inspecti`: {"status": {"id", "repoTags"}}.
        let parsed: ImageInspectJson = serde_json::from_str(&json).unwrap();
        assert_eq!((parsed.status.id.as_str(), parsed.status.repo_tags.as_slice()), ("sha256:a3ab", &["faultlab.invalid/busybox:1.35".to_string()][..]));
        assert_eq!(parsed.info["note"], "plain");

        // protobuf JSON: uid and spec only when the runtime set them.
        let mut with_uid = busybox.clone();
        with_uid.uid = Some(api::Int64Value { value: 0 });
        with_uid.spec = Some(api::ImageSpec { image: "x".into(), ..Default::default() });
        let status = serde_json::to_value(ImageJson::from_api(&with_uid)).unwrap();
        assert_eq!(status["uid"], serde_json::json!({"value": "0"}));
        assert_eq!(status["spec"], serde_json::json!({"image": "x", "annotations": {}, "userSpecifiedImage": "", "runtimeHandler": "", "imageRef": ""}));
        assert_eq!(CriError::NoSuchImage { image: "x:1".into() }.to_string(), "no such image \"x:1\" present");
    }

    #[test]
    fn an_output_format_no_caller_reads_is_refused_by_name() {
        assert!(check_output("inspecti", "json", &["json"]).is_ok());
        assert!(check_output("pods", "table", &["table", "json"]).is_ok());
        let err = check_output("inspecti", "go-template", &["json"]).unwrap_err().to_string();
        assert_eq!(err, "inspecti --output \"go-template\": faultlab-cri prints inspecti only as json (crictl's other formats have no caller here)");
        let err = check_output("pods", "yaml", &["table", "json"]).unwrap_err().to_string();
        assert!(err.contains("only as table or json"), "{err}");
    }
}
