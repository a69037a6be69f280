//! `faultlab-cri proxy`: a CRI pass-through that lets a kubelet speaking only `runtime.v1alpha2`
//! (Kubernetes 1.20) drive a runtime serving only `runtime.v1` (containerd 2.x): the listening socket
//! and its connections. Each connection is relayed at HTTP/2's frame level by [`crate::relay`]:
//! containerd kept `runtime.v1alpha2` as a byte copy of `runtime.v1`, so the messages need no
//! translation, only each call's method path renamed. The proxy sets no deadline of its own: a call
//! with `grpc-timeout` keeps it, a call without one (the kubelet's `ImageFsInfo`) stays without.
//!
//! The listening socket is made mode 0600 before any client can reach it (bound in a private
//! directory, then renamed into place): only root's kubelet may use it.

use std::fs::{self, DirBuilder, Permissions};
use std::future::Future;
use std::os::unix::fs::{DirBuilderExt, FileTypeExt, MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use thiserror::Error;
use tokio::net::{UnixListener, UnixStream};

#[derive(Debug, Error)]
pub enum ProxyError {
    #[error("the listen path {} exists and is a {kind}, not a socket: refusing to replace it", .path.display())]
    NotASocket { path: PathBuf, kind: &'static str },
    #[error("the listen path {} names no file", .path.display())]
    ListenPath { path: PathBuf },
    #[error("inspecting the listen path {}: {source}", .path.display())]
    Inspect {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("creating the private directory {} to bind the socket in: {source}", .path.display())]
    PrivateDir {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("binding the socket {}: {source}", .path.display())]
    Bind {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("setting the mode of the socket {} to 0600: {source}", .path.display())]
    Chmod {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("moving the socket into place at {}: {source}", .path.display())]
    Place {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("accepting a connection on {}: {source}", .path.display())]
    Accept {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("waiting for SIGTERM and SIGINT: {source}")]
    Signal {
        #[source]
        source: std::io::Error,
    },
    #[error("removing the socket {} on shutdown: {source}", .path.display())]
    Cleanup {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("relaying a connection to the runtime at {}: {source}", .path.display())]
    Relay {
        path: PathBuf,
        #[source]
        source: crate::relay::RelayError,
    },
    #[error("connecting to the runtime at {}: {source}", .path.display())]
    UpstreamConnect {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}


/// Where a line per call goes (`--log-calls`): stderr in the binary, a channel in the tests.
type LogSink = crate::relay::CallLog;

/// A bound listening socket, ready to serve.
pub struct Proxy {
    listener: UnixListener,
    socket: SocketFile,
    upstream: PathBuf,
    log: Option<LogSink>,
}

impl Proxy {
    /// Bind `listen` (within a tokio runtime), mode 0600, to forward to the runtime's socket `upstream`.
    /// A socket already at `listen` (a proxy's leftover) is replaced; anything else there is refused.
    /// The upstream is not contacted until the first call.
    pub fn bind(listen: &Path, upstream: &Path) -> Result<Self, ProxyError> {
        let (listener, socket) = bind_private(listen)?;
        Ok(Self { listener, socket, upstream: upstream.to_path_buf(), log: None })
    }

    /// Print `<original path> -> <forwarded path> <grpc-status> <ms>ms` to stderr for each call
    /// (grpc-status `-` when the call ended without one, e.g. cancelled by the client).
    pub fn log_calls(mut self, on: bool) -> Self {
        self.log = on.then(|| Arc::new(|line: String| eprintln!("{line}")) as LogSink);
        self
    }

    /// Serve until SIGTERM or SIGINT, then stop as [`Proxy::serve`] does.
    pub async fn serve_until_signal(self) -> Result<(), ProxyError> {
        let signalled = term_or_int().map_err(|source| ProxyError::Signal { source })?;
        self.serve(signalled).await
    }

    /// Serve until `shutdown` completes; then remove the socket file and stop. Each connection is
    /// relayed to a connection of its own to the runtime ([`crate::relay`]), opened when the client
    /// connects: a runtime that cannot be reached closes the client's connection (as a runtime's
    /// socket that refuses it would), and a runtime that closes its side (a restart) closes the
    /// client's, which connects again. Connections still open when the proxy stops end with it.
    pub async fn serve(self, shutdown: impl Future<Output = ()>) -> Result<(), ProxyError> {
        let Proxy { listener, mut socket, upstream, log } = self;
        tokio::pin!(shutdown);
        let mut connections = tokio::task::JoinSet::new();
        loop {
            let client = tokio::select! {
                _ = &mut shutdown => break,
                accepted = listener.accept() => match accepted {
                    Ok((stream, _)) => stream,
                    Err(source) => {
                        // Out of file descriptors and the like: the kubelet retries; keep serving.
                        eprintln!("faultlab-cri proxy: {}", ProxyError::Accept { path: socket.path.clone(), source });
                        tokio::time::sleep(Duration::from_millis(100)).await;
                        continue;
                    }
                },
                // Reap finished connections.
                Some(_) = connections.join_next(), if !connections.is_empty() => continue,
            };
            let upstream = upstream.clone();
            let log = log.clone();
            connections.spawn(async move {
                let runtime = match UnixStream::connect(&upstream).await {
                    Ok(runtime) => runtime,
                    Err(source) => {
                        eprintln!("faultlab-cri proxy: {}", ProxyError::UpstreamConnect { path: upstream, source });
                        return;
                    }
                };
                if let Err(e) = crate::relay::relay(client, runtime, log).await {
                    eprintln!("faultlab-cri proxy: {}", ProxyError::Relay { path: upstream, source: e });
                }
            });
        }
        // New clients find no socket (not one that refuses them).
        let removed = socket.remove();
        drop(listener);
        connections.shutdown().await;
        removed
    }
}

/// A future that completes at the first SIGTERM or SIGINT (the handlers installed now).
pub(crate) fn term_or_int() -> std::io::Result<impl Future<Output = ()>> {
    use tokio::signal::unix::{signal, SignalKind};
    let mut term = signal(SignalKind::terminate())?;
    let mut int = signal(SignalKind::interrupt())?;
    Ok(async move {
        tokio::select! {
            _ = term.recv() => {}
            _ = int.recv() => {}
        }
    })
}

/// Bind a unix socket at `listen` (within a tokio runtime), mode 0600 before any client can reach it.
/// A socket already at `listen` (a leftover of ours) is replaced; anything else there is refused. The
/// socket file is removed when the returned [`SocketFile`] is (if it is still that socket).
pub(crate) fn bind_private(listen: &Path) -> Result<(UnixListener, SocketFile), ProxyError> {
    match fs::symlink_metadata(listen) {
        Ok(meta) if meta.file_type().is_socket() => {}
        Ok(meta) => return Err(ProxyError::NotASocket { path: listen.to_path_buf(), kind: kind_of(&meta.file_type()) }),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(source) => return Err(ProxyError::Inspect { path: listen.to_path_buf(), source }),
    }
    let name = listen.file_name().ok_or_else(|| ProxyError::ListenPath { path: listen.to_path_buf() })?;
    let parent = listen.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."));
    // Bound in a directory only its owner can enter, chmod-ed, then renamed into place (which also
    // swaps out a stale socket atomically): no one else can connect in between.
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let private = parent.join(format!(".{}.{}.{}", name.to_string_lossy(), std::process::id(), NEXT.fetch_add(1, Ordering::Relaxed)));
    DirBuilder::new().mode(0o700).create(&private).map_err(|source| ProxyError::PrivateDir { path: private.clone(), source })?;
    let inner = private.join("s");
    let bound = (|| {
        let listener = UnixListener::bind(&inner).map_err(|source| ProxyError::Bind { path: listen.to_path_buf(), source })?;
        fs::set_permissions(&inner, Permissions::from_mode(0o600)).map_err(|source| ProxyError::Chmod { path: listen.to_path_buf(), source })?;
        let meta = fs::symlink_metadata(&inner).map_err(|source| ProxyError::Inspect { path: inner.clone(), source })?;
        fs::rename(&inner, listen).map_err(|source| ProxyError::Place { path: listen.to_path_buf(), source })?;
        Ok((listener, meta))
    })();
    let _ = fs::remove_dir_all(&private);
    let (listener, meta) = bound?;
    let socket = SocketFile { path: listen.to_path_buf(), dev: meta.dev(), ino: meta.ino(), removed: false };
    Ok((listener, socket))
}

/// The socket file this proxy (or the CSI node plugin) made, removed on shutdown (or drop) only if
/// it is still that socket.
pub(crate) struct SocketFile {
    path: PathBuf,
    dev: u64,
    ino: u64,
    removed: bool,
}

impl SocketFile {
    pub(crate) fn remove(&mut self) -> Result<(), ProxyError> {
        if std::mem::replace(&mut self.removed, true) {
            return Ok(());
        }
        match fs::symlink_metadata(&self.path) {
            Ok(meta) if meta.file_type().is_socket() && meta.dev() == self.dev && meta.ino() == self.ino => {
                fs::remove_file(&self.path).map_err(|source| ProxyError::Cleanup { path: self.path.clone(), source })
            }
            // Gone, or replaced by someone else's: nothing of ours to remove.
            Ok(_) => Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
            Err(source) => Err(ProxyError::Cleanup { path: self.path.clone(), source }),
        }
    }
}

impl Drop for SocketFile {
    fn drop(&mut self) {
        let _ = self.remove();
    }
}

fn kind_of(file_type: &fs::FileType) -> &'static str {
    if file_type.is_symlink() {
        "symbolic link"
    } else if file_type.is_dir() {
        "directory"
    } else if file_type.is_file() {
        "regular file"
    } else {
        "special file"
    }
}

#[cfg(test)]
mod tests {
    use std::convert::Infallible;
    use std::sync::Mutex;

    use http_body_util::{BodyExt, Full};
    use hyper::body::{Bytes, Incoming};
    use hyper::client::conn::http2::SendRequest;
    use hyper::header::HeaderValue;
    use hyper::{HeaderMap, Request, Response};
    use hyper_util::rt::{TokioExecutor, TokioIo};
    use tokio::sync::{mpsc, oneshot};
    use tokio::task::{JoinHandle, JoinSet};

    use super::*;

    /// What the test runtime saw of one call.
    #[derive(Clone, Debug)]
    struct Seen {
        path: String,
        headers: HeaderMap,
    }

    /// A plain HTTP/2 server standing in for the runtime: records each call's path and headers and
    /// answers with the request body echoed, `x-runtime: echo`, and trailers `grpc-status: 0`.
    struct Runtime {
        seen: Arc<Mutex<Vec<Seen>>>,
        task: JoinHandle<()>,
    }

    impl Runtime {
        fn start(path: &Path) -> Runtime {
            let listener = UnixListener::bind(path).unwrap();
            let seen = Arc::new(Mutex::new(Vec::new()));
            let record = seen.clone();
            let task = tokio::spawn(async move {
                // Dropped with the task: a stopped runtime drops its connections too.
                let mut connections = JoinSet::new();
                loop {
                    let (stream, _) = listener.accept().await.unwrap();
                    let record = record.clone();
                    let service = hyper::service::service_fn(move |request: Request<Incoming>| {
                        let record = record.clone();
                        async move {
                            record.lock().unwrap().push(Seen { path: request.uri().path().to_owned(), headers: request.headers().clone() });
                            let body = request.into_body().collect().await?.to_bytes();
                            let mut trailers = HeaderMap::new();
                            trailers.insert("grpc-status", HeaderValue::from_static("0"));
                            let body = Full::new(body).with_trailers(async move { Some(Ok::<_, Infallible>(trailers)) });
                            Ok::<_, hyper::Error>(Response::builder().header("content-type", "application/grpc").header("x-runtime", "echo").body(body).unwrap())
                        }
                    });
                    connections.spawn(async move {
                        let _ = hyper::server::conn::http2::Builder::new(TokioExecutor::new()).serve_connection(TokioIo::new(stream), service).await;
                    });
                }
            });
            Runtime { seen, task }
        }

        fn seen(&self) -> Vec<Seen> {
            self.seen.lock().unwrap().clone()
        }

        /// Stop it as a runtime that exits does: its connections closed, its socket file left.
        async fn stop(self) {
            self.task.abort();
            let _ = self.task.await;
        }
    }

    /// A proxy serving in the background until `stop`.
    struct Running {
        stop: oneshot::Sender<()>,
        task: JoinHandle<Result<(), ProxyError>>,
    }

    impl Running {
        fn start(proxy: Proxy) -> Running {
            let (stop, stopped) = oneshot::channel();
            let task = tokio::spawn(proxy.serve(async {
                let _ = stopped.await;
            }));
            Running { stop, task }
        }

        async fn stop(self) -> Result<(), ProxyError> {
            self.stop.send(()).unwrap();
            self.task.await.unwrap()
        }
    }

    struct Bed {
        dir: tempfile::TempDir,
        listen: PathBuf,
        upstream: PathBuf,
    }

    fn bed() -> Bed {
        let dir = tempfile::tempdir().unwrap();
        let listen = dir.path().join("proxy.sock");
        let upstream = dir.path().join("containerd.sock");
        Bed { dir, listen, upstream }
    }

    async fn client(path: &Path) -> SendRequest<Full<Bytes>> {
        let stream = UnixStream::connect(path).await.unwrap();
        let (sender, connection) = hyper::client::conn::http2::handshake(TokioExecutor::new(), TokioIo::new(stream)).await.unwrap();
        tokio::spawn(connection);
        sender
    }

    struct Answer {
        headers: HeaderMap,
        body: Bytes,
        trailers: Option<HeaderMap>,
    }

    async fn call(client: &mut SendRequest<Full<Bytes>>, path: &str, headers: &[(&str, &str)], body: Bytes) -> Answer {
        let mut request = Request::post(format!("http://localhost{path}")).header("content-type", "application/grpc").header("te", "trailers");
        for (name, value) in headers {
            request = request.header(*name, *value);
        }
        let response = client.send_request(request.body(Full::new(body)).unwrap()).await.unwrap();
        assert_eq!(response.status(), 200);
        let headers = response.headers().clone();
        let collected = response.into_body().collect().await.unwrap();
        let trailers = collected.trailers().cloned();
        Answer { headers, body: collected.to_bytes(), trailers }
    }




    #[tokio::test]
    async fn a_v1alpha2_call_arrives_as_v1_with_body_and_trailers_intact() {
        let bed = bed();
        let runtime = Runtime::start(&bed.upstream);
        let proxy = Running::start(Proxy::bind(&bed.listen, &bed.upstream).unwrap());
        let mut client = client(&bed.listen).await;

        // Larger than HTTP/2's initial 64 KiB window, every byte value: streamed through both ways.
        let body: Bytes = (0..300_000u32).map(|i| (i % 251) as u8).collect::<Vec<u8>>().into();
        let answer = call(&mut client, "/runtime.v1alpha2.RuntimeService/Version", &[("x-faultlab", "kept")], body.clone()).await;
        assert_eq!(answer.body, body);
        assert_eq!(answer.headers.get("x-runtime").unwrap(), "echo");
        assert_eq!(answer.headers.get("content-type").unwrap(), "application/grpc");
        assert_eq!(answer.trailers.as_ref().and_then(|t| t.get("grpc-status")).unwrap(), "0");

        let seen = runtime.seen();
        assert_eq!(seen.len(), 1);
        assert_eq!(seen[0].path, "/runtime.v1.RuntimeService/Version");
        assert_eq!(seen[0].headers.get("x-faultlab").unwrap(), "kept");
        assert_eq!(seen[0].headers.get("content-type").unwrap(), "application/grpc");
        assert_eq!(seen[0].headers.get("te").unwrap(), "trailers");

        proxy.stop().await.unwrap();
        runtime.stop().await;
    }

    #[tokio::test]
    async fn other_paths_pass_unchanged() {
        let bed = bed();
        let runtime = Runtime::start(&bed.upstream);
        let proxy = Running::start(Proxy::bind(&bed.listen, &bed.upstream).unwrap());
        let mut client = client(&bed.listen).await;
        for path in ["/runtime.v1.ImageService/ListImages", "/grpc.health.v1.Health/Check"] {
            let answer = call(&mut client, path, &[], Bytes::from_static(b"\0\0\0\0\0")).await;
            assert_eq!(answer.body, Bytes::from_static(b"\0\0\0\0\0"));
        }
        let paths: Vec<String> = runtime.seen().into_iter().map(|s| s.path).collect();
        assert_eq!(paths, ["/runtime.v1.ImageService/ListImages", "/grpc.health.v1.Health/Check"]);
        proxy.stop().await.unwrap();
        runtime.stop().await;
    }

    #[tokio::test]
    async fn a_deadline_is_forwarded_and_none_is_invented() {
        let bed = bed();
        let runtime = Runtime::start(&bed.upstream);
        let proxy = Running::start(Proxy::bind(&bed.listen, &bed.upstream).unwrap());
        let mut client = client(&bed.listen).await;
        call(&mut client, "/runtime.v1alpha2.ImageService/ImageFsInfo", &[], Bytes::new()).await;
        call(&mut client, "/runtime.v1alpha2.RuntimeService/Status", &[("grpc-timeout", "5S")], Bytes::new()).await;
        let seen = runtime.seen();
        assert_eq!(seen[0].path, "/runtime.v1.ImageService/ImageFsInfo");
        assert_eq!(seen[0].headers.get("grpc-timeout"), None);
        assert_eq!(seen[1].path, "/runtime.v1.RuntimeService/Status");
        assert_eq!(seen[1].headers.get_all("grpc-timeout").iter().collect::<Vec<_>>(), ["5S"]);
        proxy.stop().await.unwrap();
        runtime.stop().await;
    }

    #[tokio::test]
    async fn an_absent_runtime_closes_the_connection_and_a_new_one_works_once_it_is_there() {
        let bed = bed();
        let proxy = Running::start(Proxy::bind(&bed.listen, &bed.upstream).unwrap());
        // As a runtime's socket that is not there: the call fails (the client connects again).
        let mut client = client(&bed.listen).await;
        let request = Request::post("http://localhost/runtime.v1alpha2.RuntimeService/Version").body(Full::new(Bytes::from_static(b"x"))).unwrap();
        assert!(client.send_request(request).await.is_err());

        let runtime = Runtime::start(&bed.upstream);
        let mut client = self::client(&bed.listen).await;
        let answer = call(&mut client, "/runtime.v1alpha2.RuntimeService/Version", &[], Bytes::from_static(b"x")).await;
        assert_eq!(answer.trailers.as_ref().and_then(|t| t.get("grpc-status")).unwrap(), "0");
        assert_eq!(runtime.seen().len(), 1);
        proxy.stop().await.unwrap();
        runtime.stop().await;
    }

    #[tokio::test]
    async fn a_restarted_runtime_closes_the_connection_and_the_client_connects_again() {
        let bed = bed();
        let runtime = Runtime::start(&bed.upstream);
        let proxy = Running::start(Proxy::bind(&bed.listen, &bed.upstream).unwrap());
        let mut client = client(&bed.listen).await;
        call(&mut client, "/runtime.v1alpha2.RuntimeService/Version", &[], Bytes::new()).await;

        runtime.stop().await;
        fs::remove_file(&bed.upstream).unwrap();
        // The client sees its connection close, as it would with the runtime itself.
        tokio::time::timeout(Duration::from_secs(5), async {
            while !client.is_closed() {
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        })
        .await
        .expect("the client's connection closes with the runtime's");
        let runtime = Runtime::start(&bed.upstream);
        let mut client = self::client(&bed.listen).await;
        let answer = call(&mut client, "/runtime.v1alpha2.RuntimeService/Version", &[], Bytes::from_static(b"again")).await;
        assert_eq!(answer.body, Bytes::from_static(b"again"));
        assert_eq!(answer.trailers.as_ref().and_then(|t| t.get("grpc-status")).unwrap(), "0");
        assert_eq!(runtime.seen().len(), 1);
        proxy.stop().await.unwrap();
        runtime.stop().await;
    }

    #[tokio::test]
    async fn calls_are_logged_with_their_status() {
        let bed = bed();
        let runtime = Runtime::start(&bed.upstream);
        let mut proxy = Proxy::bind(&bed.listen, &bed.upstream).unwrap();
        let (lines, mut logged) = mpsc::unbounded_channel();
        proxy.log = Some(Arc::new(move |line| lines.send(line).unwrap()));
        let proxy = Running::start(proxy);
        let mut client = client(&bed.listen).await;
        call(&mut client, "/runtime.v1alpha2.RuntimeService/Version", &[], Bytes::new()).await;
        let line = logged.recv().await.unwrap();
        assert!(line.starts_with("/runtime.v1alpha2.RuntimeService/Version -> /runtime.v1.RuntimeService/Version 0 "), "{line}");
        assert!(line.ends_with("ms"), "{line}");
        call(&mut client, "/grpc.health.v1.Health/Check", &[], Bytes::new()).await;
        let line = logged.recv().await.unwrap();
        assert!(line.starts_with("/grpc.health.v1.Health/Check -> /grpc.health.v1.Health/Check 0 "), "{line}");
        proxy.stop().await.unwrap();
        runtime.stop().await;
    }

    #[tokio::test]
    async fn the_socket_is_private_and_removed_on_shutdown() {
        let bed = bed();
        let proxy = Proxy::bind(&bed.listen, &bed.upstream).unwrap();
        let meta = fs::symlink_metadata(&bed.listen).unwrap();
        assert!(meta.file_type().is_socket());
        assert_eq!(meta.permissions().mode() & 0o7777, 0o600);
        // The private directory it was bound in is gone.
        let names: Vec<_> = fs::read_dir(bed.dir.path()).unwrap().map(|e| e.unwrap().file_name()).collect();
        assert_eq!(names, ["proxy.sock"]);

        let running = Running::start(proxy);
        client(&bed.listen).await;
        running.stop().await.unwrap();
        assert!(!bed.listen.exists());
        assert!(UnixStream::connect(&bed.listen).await.is_err());
    }

    #[tokio::test]
    async fn anything_but_a_socket_at_the_listen_path_is_refused_and_left() {
        let bed = bed();
        fs::write(&bed.listen, "not a socket").unwrap();
        let e = Proxy::bind(&bed.listen, &bed.upstream).err().unwrap();
        assert!(matches!(e, ProxyError::NotASocket { kind: "regular file", .. }), "{e}");
        assert!(e.to_string().contains(&bed.listen.display().to_string()), "{e}");
        assert_eq!(fs::read_to_string(&bed.listen).unwrap(), "not a socket");

        // A symbolic link, even to a socket.
        let target = bed.dir.path().join("target.sock");
        drop(std::os::unix::net::UnixListener::bind(&target).unwrap());
        let link = bed.dir.path().join("link.sock");
        std::os::unix::fs::symlink(&target, &link).unwrap();
        let e = Proxy::bind(&link, &bed.upstream).err().unwrap();
        assert!(matches!(e, ProxyError::NotASocket { kind: "symbolic link", .. }), "{e}");
        assert!(fs::symlink_metadata(&link).unwrap().file_type().is_symlink());

        let e = Proxy::bind(bed.dir.path(), &bed.upstream).err().unwrap();
        assert!(matches!(e, ProxyError::NotASocket { kind: "directory", .. }), "{e}");
        // Nothing left behind by the refusals.
        let mut names: Vec<_> = fs::read_dir(bed.dir.path()).unwrap().map(|e| e.unwrap().file_name().into_string().unwrap()).collect();
        names.sort();
        assert_eq!(names, ["link.sock", "proxy.sock", "target.sock"]);
    }

    #[tokio::test]
    async fn a_stale_socket_is_replaced() {
        let bed = bed();
        drop(std::os::unix::net::UnixListener::bind(&bed.listen).unwrap());
        let stale = fs::symlink_metadata(&bed.listen).unwrap();
        assert!(UnixStream::connect(&bed.listen).await.is_err());

        let runtime = Runtime::start(&bed.upstream);
        let proxy = Running::start(Proxy::bind(&bed.listen, &bed.upstream).unwrap());
        assert_ne!(fs::symlink_metadata(&bed.listen).unwrap().ino(), stale.ino());
        let mut client = client(&bed.listen).await;
        let answer = call(&mut client, "/runtime.v1alpha2.RuntimeService/Version", &[], Bytes::from_static(b"hi")).await;
        assert_eq!(answer.body, Bytes::from_static(b"hi"));
        proxy.stop().await.unwrap();
        runtime.stop().await;
    }

    #[tokio::test]
    async fn the_crates_own_client_goes_through() {
        let bed = bed();
        let runtime = Runtime::start(&bed.upstream);
        let proxy = Running::start(Proxy::bind(&bed.listen, &bed.upstream).unwrap());
        let endpoint = format!("unix://{}", bed.listen.display());
        let mut client = crate::RuntimeClient::connect(&endpoint, Duration::from_secs(10)).await.unwrap();
        // The echo runtime answers VersionRequest{version: "v1"}, which reads as VersionResponse{version: "v1"}.
        let version = client.version().await.unwrap();
        assert_eq!(version.version, "v1");
        assert_eq!(runtime.seen()[0].path, "/runtime.v1.RuntimeService/Version");
        proxy.stop().await.unwrap();
        runtime.stop().await;
    }
}
