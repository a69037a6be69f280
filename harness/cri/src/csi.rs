//! `faultlab-cri csi-node`: the node half of faultlab's own CSI driver, for a volume that must be
//! attached to a node before a pod there can mount it (the Multi-Attach scenario of issue 31: a real
//! attach and detach path, with the controller manager's attach/detach controller deciding).
//!
//! What a node needs for it, and so what this serves, on two unix sockets made 0600 before any client
//! can reach them ([`crate::proxy`]'s binding), each in a directory of the kubelet's:
//! - the kubelet's plugin registration (`pluginregistration.Registration`, `GetInfo` and
//!   `NotifyRegistrationStatus`) at `<kubelet root>/plugins_registry/<driver>-reg.sock`: the kubelet's
//!   plugin watcher finds the socket there, asks what it is (a `CSIPlugin`, its name, the CSI
//!   socket, CSI `1.0.0`) and says whether it registered it. It is what kubernetes-csi's
//!   node-driver-registrar does in a sidecar; the nodes here have no such image.
//! - CSI's Identity and Node services (`csi.v1`) at `<kubelet root>/plugins/<driver>/csi.sock`: the
//!   kubelet asks the node's ID (`NodeGetInfo`, at registration), then for each pod publishes the
//!   volume at the pod's target path (`NodePublishVolume`) once the volume is attached, and
//!   unpublishes it when the pod goes. No staging (`NodeGetCapabilities` offers none).
//!
//! The volume itself is a directory, `<disks>/<volume id>`, bind-mounted at the target path: on the
//! test bed every node sees the same host directory (a disk on a network, as a cloud's block volume
//! is). Attaching (a `VolumeAttachment` marked attached) is the controller half's, in faultlab
//! itself; the kubelet publishes only a volume its `VolumeAttachment` says is attached to its node.
//!
//! The messages are written by hand with prost's derive, field numbers as in the CSI spec's
//! `csi.proto` (v1.x, package `csi.v1`) and the kubelet's `pluginregistration/v1/api.proto`
//! (package `pluginregistration`), only the messages and fields used here.

use std::convert::Infallible;
use std::future::Future;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use hyper::body::Incoming;
use hyper_util::rt::{TokioExecutor, TokioIo};
use thiserror::Error;
use tokio::net::UnixListener;
use tonic::codegen::http;
use tonic::{Code, Status};

use crate::proxy::{bind_private, ProxyError, SocketFile};

/// The messages, as in `pluginregistration/v1/api.proto` and CSI's `csi.proto`.
pub mod api {
    /// `pluginregistration.InfoRequest`.
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct InfoRequest {}

    /// `pluginregistration.PluginInfo`.
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct PluginInfo {
        /// `CSIPlugin` for a CSI driver.
        #[prost(string, tag = "1")]
        pub r#type: String,
        #[prost(string, tag = "2")]
        pub name: String,
        /// The CSI socket's path, on the node.
        #[prost(string, tag = "3")]
        pub endpoint: String,
        #[prost(string, repeated, tag = "4")]
        pub supported_versions: Vec<String>,
    }

    /// `pluginregistration.RegistrationStatus`.
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct RegistrationStatus {
        #[prost(bool, tag = "1")]
        pub plugin_registered: bool,
        #[prost(string, tag = "2")]
        pub error: String,
    }

    /// `pluginregistration.RegistrationStatusResponse`.
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct RegistrationStatusResponse {}

    /// `csi.v1.GetPluginInfoRequest` (and the other empty requests).
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct Empty {}

    /// `csi.v1.GetPluginInfoResponse`.
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct GetPluginInfoResponse {
        #[prost(string, tag = "1")]
        pub name: String,
        #[prost(string, tag = "2")]
        pub vendor_version: String,
    }

    /// `csi.v1.GetPluginCapabilitiesResponse`: none offered (no controller service over CSI; the
    /// controller half is faultlab's, talking to the API server).
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct GetPluginCapabilitiesResponse {}

    /// `google.protobuf.BoolValue`.
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct BoolValue {
        #[prost(bool, tag = "1")]
        pub value: bool,
    }

    /// `csi.v1.ProbeResponse`.
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct ProbeResponse {
        #[prost(message, optional, tag = "1")]
        pub ready: Option<BoolValue>,
    }

    /// `csi.v1.NodeGetInfoResponse`.
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct NodeGetInfoResponse {
        #[prost(string, tag = "1")]
        pub node_id: String,
        #[prost(int64, tag = "2")]
        pub max_volumes_per_node: i64,
    }

    /// `csi.v1.NodeGetCapabilitiesResponse`: none (no staging, no stats).
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct NodeGetCapabilitiesResponse {}

    /// `csi.v1.VolumeCapability.AccessMode`.
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct AccessMode {
        /// 1 SINGLE_NODE_WRITER, 2 SINGLE_NODE_READER_ONLY, 3 MULTI_NODE_READER_ONLY, ...
        #[prost(int32, tag = "1")]
        pub mode: i32,
    }

    /// `csi.v1.VolumeCapability.MountVolume`.
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct MountVolume {
        #[prost(string, tag = "1")]
        pub fs_type: String,
        #[prost(string, repeated, tag = "2")]
        pub mount_flags: Vec<String>,
    }

    /// `csi.v1.VolumeCapability.BlockVolume`.
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct BlockVolume {}

    /// `csi.v1.VolumeCapability`: `access_type` is a oneof of `block` (1) and `mount` (2).
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct VolumeCapability {
        #[prost(message, optional, tag = "1")]
        pub block: Option<BlockVolume>,
        #[prost(message, optional, tag = "2")]
        pub mount: Option<MountVolume>,
        #[prost(message, optional, tag = "3")]
        pub access_mode: Option<AccessMode>,
    }

    /// `csi.v1.NodePublishVolumeRequest` (secrets, 7, left out: never read, never logged).
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct NodePublishVolumeRequest {
        #[prost(string, tag = "1")]
        pub volume_id: String,
        #[prost(map = "string, string", tag = "2")]
        pub publish_context: std::collections::HashMap<String, String>,
        #[prost(string, tag = "3")]
        pub staging_target_path: String,
        #[prost(string, tag = "4")]
        pub target_path: String,
        #[prost(message, optional, tag = "5")]
        pub volume_capability: Option<VolumeCapability>,
        #[prost(bool, tag = "6")]
        pub readonly: bool,
        #[prost(map = "string, string", tag = "8")]
        pub volume_context: std::collections::HashMap<String, String>,
    }

    /// `csi.v1.NodeUnpublishVolumeRequest`.
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct NodeUnpublishVolumeRequest {
        #[prost(string, tag = "1")]
        pub volume_id: String,
        #[prost(string, tag = "2")]
        pub target_path: String,
    }
}

/// The CSI version the kubelet is offered (1.20's kubelet takes any 1.x).
pub const CSI_VERSION: &str = "1.0.0";

#[derive(Debug, Error)]
pub enum CsiError {
    #[error("the driver name {name:?} is not a DNS subdomain (lower-case letters, digits, '-' and '.', at most 63 characters)")]
    DriverName { name: String },
    #[error("creating the directory {}: {source}", .path.display())]
    Dir {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("binding the {what} socket: {source}")]
    Bind {
        what: &'static str,
        #[source]
        source: ProxyError,
    },
    #[error("waiting for SIGTERM and SIGINT: {source}")]
    Signal {
        #[source]
        source: std::io::Error,
    },
    #[error("removing the sockets on shutdown: {source}")]
    Cleanup {
        #[source]
        source: ProxyError,
    },
}

/// What the node plugin serves.
#[derive(Clone, Debug)]
pub struct NodeOptions {
    /// The CSI driver's name (`CSIDriver` object, `PersistentVolume.spec.csi.driver`).
    pub driver: String,
    /// The node's ID as the kubelet reports it to the attach/detach controller (the Node's name).
    pub node_id: String,
    /// The kubelet's `--root-dir`.
    pub kubelet_root: PathBuf,
    /// Where the volumes' directories are.
    pub disks: PathBuf,
}

impl NodeOptions {
    /// The registration socket the kubelet's plugin watcher finds.
    pub fn registration_socket(&self) -> PathBuf {
        self.kubelet_root
            .join("plugins_registry")
            .join(format!("{}-reg.sock", self.driver))
    }

    /// The CSI socket the kubelet calls.
    pub fn csi_socket(&self) -> PathBuf {
        self.kubelet_root
            .join("plugins")
            .join(&self.driver)
            .join("csi.sock")
    }
}

/// A driver name as CSI and Kubernetes take it: a DNS-1123 subdomain of at most 63 characters.
pub fn check_driver_name(name: &str) -> Result<(), CsiError> {
    let ok = !name.is_empty()
        && name.len() <= 63
        && name.split('.').all(|label| {
            !label.is_empty()
                && label
                    .bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
                && !label.starts_with('-')
                && !label.ends_with('-')
        });
    if ok {
        Ok(())
    } else {
        Err(CsiError::DriverName {
            name: name.to_string(),
        })
    }
}

/// What the plugin has been told and asked, for its log and its tests.
#[derive(Debug, Default)]
struct State {
    registered: Option<api::RegistrationStatus>,
}

/// The node plugin, its two sockets bound.
pub struct NodePlugin {
    options: NodeOptions,
    registration: (UnixListener, SocketFile),
    csi: (UnixListener, SocketFile),
    state: Arc<Mutex<State>>,
    log: bool,
}

impl NodePlugin {
    /// Make the directories (0700 where they are new) and bind both sockets, the CSI one first: the
    /// kubelet finds the registration socket only once the CSI one answers.
    pub fn bind(options: NodeOptions) -> Result<Self, CsiError> {
        check_driver_name(&options.driver)?;
        let csi_path = options.csi_socket();
        let reg_path = options.registration_socket();
        for dir in [
            csi_path.parent(),
            reg_path.parent(),
            Some(options.disks.as_path()),
        ]
        .into_iter()
        .flatten()
        {
            make_dir(dir)?;
        }
        let csi = bind_private(&csi_path).map_err(|source| CsiError::Bind {
            what: "CSI",
            source,
        })?;
        let registration = bind_private(&reg_path).map_err(|source| CsiError::Bind {
            what: "registration",
            source,
        })?;
        Ok(NodePlugin {
            options,
            registration,
            csi,
            state: Arc::default(),
            log: false,
        })
    }

    /// Print a line per call to stderr.
    pub fn log_calls(mut self, on: bool) -> Self {
        self.log = on;
        self
    }

    /// Serve until SIGTERM or SIGINT.
    pub async fn serve_until_signal(self) -> Result<(), CsiError> {
        let signalled = crate::proxy::term_or_int().map_err(|source| CsiError::Signal { source })?;
        self.serve(signalled).await
    }

    /// Serve both sockets until `shutdown`; then remove them (the registration socket first, so the
    /// kubelet deregisters the driver) and stop. Volumes stay mounted: the kubelet unpublishes them
    /// when their pods go, through the next plugin that registers.
    pub async fn serve(self, shutdown: impl Future<Output = ()>) -> Result<(), CsiError> {
        let NodePlugin {
            options,
            registration,
            csi,
            state,
            log,
        } = self;
        let handler = Arc::new(Handler {
            options,
            state,
            log,
        });
        let (reg_listener, mut reg_socket) = registration;
        let (csi_listener, mut csi_socket) = csi;
        tokio::pin!(shutdown);
        let mut connections = tokio::task::JoinSet::new();
        loop {
            let stream = tokio::select! {
                _ = &mut shutdown => break,
                accepted = reg_listener.accept() => accepted,
                accepted = csi_listener.accept() => accepted,
                Some(_) = connections.join_next(), if !connections.is_empty() => continue,
            };
            let stream = match stream {
                Ok((stream, _)) => stream,
                Err(e) => {
                    eprintln!("faultlab-cri csi-node: accepting a connection: {e}");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    continue;
                }
            };
            let handler = handler.clone();
            connections.spawn(async move {
                // The 1.20 kubelet's gRPC names the socket's path as the authority, which hyper's
                // HTTP/2 server refuses (PROTOCOL_ERROR): its header blocks pass through the CRI
                // proxy's frame relay first, which makes that authority `localhost` (crate::relay).
                let (outer, inner) = tokio::io::duplex(1 << 16);
                let service =
                    hyper::service::service_fn(move |request: http::Request<Incoming>| {
                        let handler = handler.clone();
                        async move { Ok::<_, Infallible>(handler.call(request).await) }
                    });
                let server = hyper::server::conn::http2::Builder::new(TokioExecutor::new())
                    .serve_connection(TokioIo::new(inner), service);
                let _ = tokio::join!(crate::relay::relay(stream, outer, None), server);
            });
        }
        let removed = reg_socket.remove().and(csi_socket.remove());
        connections.shutdown().await;
        removed.map_err(|source| CsiError::Cleanup { source })
    }
}

fn make_dir(dir: &Path) -> Result<(), CsiError> {
    make_dir_mode(dir, 0o700)
}

fn make_dir_mode(dir: &Path, mode: u32) -> Result<(), CsiError> {
    use std::os::unix::fs::DirBuilderExt;
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(mode)
        .create(dir)
        .map_err(|source| CsiError::Dir {
            path: dir.to_path_buf(),
            source,
        })
}

struct Handler {
    options: NodeOptions,
    state: Arc<Mutex<State>>,
    log: bool,
}

/// One unary call: decode `M1`, answer with `f`, encode `M2` (gRPC's status in the trailers).
async fn unary<M1, M2, F, Fut>(
    request: http::Request<Incoming>,
    f: F,
) -> http::Response<tonic::body::Body>
where
    M1: prost::Message + Default + Send + 'static,
    M2: prost::Message + Send + 'static,
    F: FnOnce(M1) -> Fut + Clone + Send + 'static,
    Fut: Future<Output = Result<M2, Status>> + Send + 'static,
{
    let mut grpc = tonic::server::Grpc::new(tonic_prost::ProstCodec::<M2, M1>::default());
    let service = tower::service_fn(move |r: tonic::Request<M1>| {
        let f = f.clone();
        async move { f(r.into_inner()).await.map(tonic::Response::new) }
    });
    grpc.unary(service, request).await
}

impl Handler {
    async fn call(
        self: Arc<Self>,
        request: http::Request<Incoming>,
    ) -> http::Response<tonic::body::Body> {
        let path = request.uri().path().to_string();
        if self.log {
            eprintln!("faultlab-cri csi-node: {path}");
        }
        let me = self.clone();
        match path.as_str() {
            "/pluginregistration.Registration/GetInfo" => {
                unary(request, move |_: api::InfoRequest| async move {
                    Ok(me.plugin_info())
                })
                .await
            }
            "/pluginregistration.Registration/NotifyRegistrationStatus" => {
                unary(request, move |status: api::RegistrationStatus| async move {
                    if !status.plugin_registered {
                        eprintln!(
                            "faultlab-cri csi-node: the kubelet did not register {}: {}",
                            me.options.driver, status.error
                        );
                    }
                    me.state.lock().unwrap().registered = Some(status);
                    Ok(api::RegistrationStatusResponse {})
                })
                .await
            }
            "/csi.v1.Identity/GetPluginInfo" => {
                unary(request, move |_: api::Empty| async move {
                    Ok(api::GetPluginInfoResponse {
                        name: me.options.driver.clone(),
                        vendor_version: env!("CARGO_PKG_VERSION").into(),
                    })
                })
                .await
            }
            "/csi.v1.Identity/GetPluginCapabilities" => {
                unary(request, |_: api::Empty| async {
                    Ok(api::GetPluginCapabilitiesResponse {})
                })
                .await
            }
            "/csi.v1.Identity/Probe" => {
                unary(request, |_: api::Empty| async {
                    Ok(api::ProbeResponse {
                        ready: Some(api::BoolValue { value: true }),
                    })
                })
                .await
            }
            "/csi.v1.Node/NodeGetInfo" => {
                unary(request, move |_: api::Empty| async move {
                    Ok(api::NodeGetInfoResponse {
                        node_id: me.options.node_id.clone(),
                        max_volumes_per_node: 0,
                    })
                })
                .await
            }
            "/csi.v1.Node/NodeGetCapabilities" => {
                unary(request, |_: api::Empty| async {
                    Ok(api::NodeGetCapabilitiesResponse {})
                })
                .await
            }
            "/csi.v1.Node/NodePublishVolume" => {
                unary(
                    request,
                    move |r: api::NodePublishVolumeRequest| async move {
                        let disks = me.options.disks.clone();
                        blocking(move || publish(&disks, &r)).await
                    },
                )
                .await
            }
            "/csi.v1.Node/NodeUnpublishVolume" => {
                unary(
                    request,
                    move |r: api::NodeUnpublishVolumeRequest| async move {
                        blocking(move || unpublish(&r)).await
                    },
                )
                .await
            }
            other => Status::new(
                Code::Unimplemented,
                format!("faultlab-cri csi-node serves no {other}"),
            )
            .into_http(),
        }
    }

    fn plugin_info(&self) -> api::PluginInfo {
        api::PluginInfo {
            r#type: "CSIPlugin".into(),
            name: self.options.driver.clone(),
            endpoint: self.options.csi_socket().display().to_string(),
            supported_versions: vec![CSI_VERSION.into()],
        }
    }
}

/// A volume ID as a directory name under the disks: one path component, no dot files.
pub fn check_volume_id(id: &str) -> Result<(), Status> {
    let ok = !id.is_empty()
        && id.len() <= 128
        && !id.starts_with('.')
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-_.".contains(&b));
    if ok {
        Ok(())
    } else {
        Err(Status::invalid_argument(format!(
            "volume id {id:?}: not a name of letters, digits, '-', '_' and '.'"
        )))
    }
}

/// A target path the kubelet gives: absolute, with no `..`.
fn check_target(path: &str) -> Result<PathBuf, Status> {
    let p = PathBuf::from(path);
    if !p.is_absolute()
        || p.components()
            .any(|c| matches!(c, std::path::Component::ParentDir))
    {
        return Err(Status::invalid_argument(format!(
            "target path {path:?}: not an absolute path without '..'"
        )));
    }
    Ok(p)
}

/// The mount (or unmount) `f` makes, off the server's thread: CSI's empty answer, or its status.
async fn blocking(f: impl FnOnce() -> Result<(), Status> + Send + 'static) -> Result<api::Empty, Status> {
    tokio::task::spawn_blocking(f).await.map_err(|e| Status::internal(e.to_string()))??;
    Ok(api::Empty {})
}

/// Whether `path` is a mount point: /proc/self/mountinfo (this process's mount namespace, the
/// kubelet's) lists it. Not by device numbers: a bind mount within one file system keeps the device.
pub fn is_mount_point(path: &Path) -> bool {
    let Ok(info) = std::fs::read_to_string("/proc/self/mountinfo") else {
        return false;
    };
    let wanted = path.to_string_lossy();
    info.lines().any(|line| {
        line.split(' ').nth(4).map(unescape_mountinfo).as_deref() == Some(wanted.as_ref())
    })
}

/// mountinfo's octal escapes (`\040` for a space, ...).
fn unescape_mountinfo(field: &str) -> String {
    let bytes = field.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'\\'
            && i + 3 < bytes.len()
            && bytes[i + 1..i + 4]
                .iter()
                .all(|b| (b'0'..=b'7').contains(b))
        {
            out.push(
                (bytes[i + 1] - b'0') * 64 + (bytes[i + 2] - b'0') * 8 + (bytes[i + 3] - b'0'),
            );
            i += 4;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

fn run(argv: &[&str]) -> Result<(), Status> {
    let out = Command::new(argv[0])
        .args(&argv[1..])
        .output()
        .map_err(|e| Status::internal(format!("running {}: {e}", argv.join(" "))))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(Status::internal(format!(
            "{}: {}: {}",
            argv.join(" "),
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        )))
    }
}

/// NodePublishVolume: the volume's directory (made if new) bind-mounted at the target path
/// (read-only if asked). Idempotent: a target already mounted is left as it is.
fn publish(disks: &Path, r: &api::NodePublishVolumeRequest) -> Result<(), Status> {
    check_volume_id(&r.volume_id)?;
    let target = check_target(&r.target_path)?;
    if r.volume_capability
        .as_ref()
        .is_some_and(|c| c.block.is_some())
    {
        return Err(Status::invalid_argument(
            "a block volume: this driver publishes only file system volumes",
        ));
    }
    let source = disks.join(&r.volume_id);
    make_dir_mode(&source, 0o755).map_err(|e| Status::internal(e.to_string()))?;
    make_dir_mode(&target, 0o750).map_err(|e| Status::internal(e.to_string()))?;
    if is_mount_point(&target) {
        return Ok(());
    }
    let (src, dst) = (
        source.to_string_lossy().into_owned(),
        target.to_string_lossy().into_owned(),
    );
    run(&["mount", "--bind", &src, &dst])?;
    if r.readonly {
        run(&["mount", "-o", "remount,bind,ro", &dst])?;
    }
    Ok(())
}

/// NodeUnpublishVolume: the target unmounted and removed. Idempotent: a target gone or not mounted
/// is fine.
fn unpublish(r: &api::NodeUnpublishVolumeRequest) -> Result<(), Status> {
    check_volume_id(&r.volume_id)?;
    let target = check_target(&r.target_path)?;
    if is_mount_point(&target) {
        run(&["umount", &target.to_string_lossy()])?;
    }
    match std::fs::remove_dir(&target) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(Status::internal(format!(
            "removing {}: {e}",
            target.display()
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn driver_names() {
        assert!(check_driver_name("disk.faultlab.dev").is_ok());
        for bad in [
            "",
            "Disk.faultlab.dev",
            "disk..dev",
            "-disk.dev",
            "disk/x",
            &"a".repeat(64),
        ] {
            assert!(check_driver_name(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn volume_ids_and_targets() {
        assert!(check_volume_id("vol-1").is_ok());
        for bad in ["", "..", ".hidden", "a/b", "a b"] {
            assert!(check_volume_id(bad).is_err(), "{bad:?}");
        }
        assert!(check_target("/var/lib/kubelet/pods/x/volumes/kubernetes.io~csi/pv/mount").is_ok());
        assert!(check_target("relative/mount").is_err());
        assert!(check_target("/var/lib/../../etc").is_err());
    }

    #[test]
    fn mountinfo_escapes() {
        assert_eq!(unescape_mountinfo(r"/a\040b"), "/a b");
        assert_eq!(unescape_mountinfo(r"/plain"), "/plain");
        assert_eq!(unescape_mountinfo(r"/end\04"), r"/end\04");
    }

    /// A client as the kubelet is one: a gRPC channel over the unix socket.
    async fn client(path: PathBuf) -> tonic::client::Grpc<tonic::transport::Channel> {
        let connector = tower::service_fn(move |_: http::Uri| {
            let path = path.clone();
            async move {
                Ok::<_, std::io::Error>(TokioIo::new(tokio::net::UnixStream::connect(path).await?))
            }
        });
        let channel = tonic::transport::Endpoint::from_static("http://localhost")
            .connect_with_connector(connector)
            .await
            .unwrap();
        tonic::client::Grpc::new(channel)
    }

    async fn call<M1, M2>(
        grpc: &mut tonic::client::Grpc<tonic::transport::Channel>,
        path: &'static str,
        m: M1,
    ) -> Result<M2, Status>
    where
        M1: prost::Message + Send + Sync + 'static,
        M2: prost::Message + Default + Send + Sync + 'static,
    {
        grpc.ready().await.unwrap();
        let codec = tonic_prost::ProstCodec::<M1, M2>::default();
        grpc.unary(
            tonic::Request::new(m),
            http::uri::PathAndQuery::from_static(path),
            codec,
        )
        .await
        .map(|r| r.into_inner())
    }

    fn is_root() -> bool {
        std::fs::read_to_string("/proc/self/status").is_ok_and(|s| {
            s.lines()
                .any(|l| l.starts_with("Uid:") && l.split_whitespace().nth(1) == Some("0"))
        })
    }

    /// The plugin on real sockets, called as the kubelet calls it: registration, the node's ID, and a
    /// volume published (a real bind mount, as root) and unpublished.
    #[tokio::test]
    async fn serves_registration_and_node_calls() {
        use std::os::unix::fs::{FileTypeExt, PermissionsExt};
        let dir = tempfile::tempdir().unwrap();
        let options = NodeOptions {
            driver: "disk.faultlab.dev".into(),
            node_id: "faultlab-node-2".into(),
            kubelet_root: dir.path().join("kubelet"),
            disks: dir.path().join("disks"),
        };
        let plugin = NodePlugin::bind(options.clone()).unwrap();
        let state = plugin.state.clone();
        for sock in [options.registration_socket(), options.csi_socket()] {
            let meta = std::fs::symlink_metadata(&sock).unwrap();
            assert!(meta.file_type().is_socket(), "{}", sock.display());
            assert_eq!(
                meta.permissions().mode() & 0o777,
                0o600,
                "{}",
                sock.display()
            );
        }
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let server = tokio::spawn(plugin.serve(async move {
            let _ = stopped.await;
        }));

        let mut reg = client(options.registration_socket()).await;
        let info: api::PluginInfo = call(
            &mut reg,
            "/pluginregistration.Registration/GetInfo",
            api::InfoRequest {},
        )
        .await
        .unwrap();
        assert_eq!(info.r#type, "CSIPlugin");
        assert_eq!(info.name, "disk.faultlab.dev");
        assert_eq!(info.endpoint, options.csi_socket().display().to_string());
        assert_eq!(info.supported_versions, vec!["1.0.0".to_string()]);
        let _: api::RegistrationStatusResponse = call(
            &mut reg,
            "/pluginregistration.Registration/NotifyRegistrationStatus",
            api::RegistrationStatus {
                plugin_registered: true,
                error: String::new(),
            },
        )
        .await
        .unwrap();
        assert_eq!(
            state
                .lock()
                .unwrap()
                .registered
                .as_ref()
                .map(|s| s.plugin_registered),
            Some(true)
        );

        let mut csi = client(options.csi_socket()).await;
        let node: api::NodeGetInfoResponse =
            call(&mut csi, "/csi.v1.Node/NodeGetInfo", api::Empty {})
                .await
                .unwrap();
        assert_eq!(node.node_id, "faultlab-node-2");
        let probe: api::ProbeResponse = call(&mut csi, "/csi.v1.Identity/Probe", api::Empty {})
            .await
            .unwrap();
        assert_eq!(probe.ready, Some(api::BoolValue { value: true }));
        let none: Result<api::Empty, _> = call(
            &mut csi,
            "/csi.v1.Controller/ControllerPublishVolume",
            api::Empty {},
        )
        .await;
        assert_eq!(none.unwrap_err().code(), Code::Unimplemented);
        let bad: Result<api::Empty, _> = call(
            &mut csi,
            "/csi.v1.Node/NodePublishVolume",
            api::NodePublishVolumeRequest {
                volume_id: "../etc".into(),
                target_path: "/x".into(),
                ..Default::default()
            },
        )
        .await;
        assert_eq!(bad.unwrap_err().code(), Code::InvalidArgument);

        if is_root() {
            let target = options
                .kubelet_root
                .join("pods/uid/volumes/kubernetes.io~csi/pv-1/mount");
            std::fs::create_dir_all(target.parent().unwrap()).unwrap();
            let publish = api::NodePublishVolumeRequest {
                volume_id: "vol-1".into(),
                target_path: target.display().to_string(),
                ..Default::default()
            };
            for _ in 0..2 {
                let _: api::Empty =
                    call(&mut csi, "/csi.v1.Node/NodePublishVolume", publish.clone())
                        .await
                        .unwrap();
            }
            assert!(is_mount_point(&target));
            std::fs::write(target.join("written-in-the-pod"), "x").unwrap();
            assert!(
                options.disks.join("vol-1/written-in-the-pod").exists(),
                "the volume's directory holds what the pod wrote"
            );
            let unpublish = api::NodeUnpublishVolumeRequest {
                volume_id: "vol-1".into(),
                target_path: target.display().to_string(),
            };
            for _ in 0..2 {
                let _: api::Empty = call(
                    &mut csi,
                    "/csi.v1.Node/NodeUnpublishVolume",
                    unpublish.clone(),
                )
                .await
                .unwrap();
            }
            assert!(!target.exists());
            assert!(
                options.disks.join("vol-1/written-in-the-pod").exists(),
                "the volume keeps its data"
            );
        } else {
            eprintln!("not root: NodePublishVolume's bind mount not tried");
        }

        stop.send(()).unwrap();
        server.await.unwrap().unwrap();
        assert!(
            !options.registration_socket().exists() && !options.csi_socket().exists(),
            "sockets removed on shutdown"
        );
    }

    #[test]
    fn sockets_are_under_the_kubelets_root() {
        let o = NodeOptions {
            driver: "disk.faultlab.dev".into(),
            node_id: "n".into(),
            kubelet_root: "/var/lib/k".into(),
            disks: "/d".into(),
        };
        assert_eq!(
            o.registration_socket(),
            Path::new("/var/lib/k/plugins_registry/disk.faultlab.dev-reg.sock")
        );
        assert_eq!(
            o.csi_socket(),
            Path::new("/var/lib/k/plugins/disk.faultlab.dev/csi.sock")
        );
    }
}
