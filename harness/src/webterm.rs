//! `faultlab terminal`: a shell in the browser, for a trainee.
//!
//! One HTTP server on a loopback address serves one page (xterm.js as npm ships it, built into the
//! binary: `assets/xterm/`) and one WebSocket, `/ws`, that carries a shell on a pseudo-terminal.
//!
//! Who may use it: whoever holds the token, 32 random bytes made when the server starts. The address
//! given out is `http://127.0.0.1:PORT/#TOKEN`: the fragment never leaves the browser in a request
//! line, the page takes it off the address bar and sends it as the WebSocket's first message, and the
//! server compares it in constant time. Until then no shell runs. Beyond the token:
//! - the server listens only on a loopback address (a plain-HTTP token must not cross a network; a
//!   class on other machines reaches it through `ssh -L`);
//! - a request whose `Host` is not this address, or a WebSocket whose `Origin` is not this page's, is
//!   refused (DNS rebinding, another site's page opening the socket);
//! - one shell at a time: a second connection, token or not, is refused while one runs;
//! - the page may not be framed, caches nothing and sends no referrer.
//!
//! What the trainee types is recorded for the debrief ([`Recording`]): each line as the trainee
//! entered it (Enter), with its time on the session's clock, in a file of the session's own.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use futures::{SinkExt, StreamExt};
use http_body_util::Full;
use hyper::body::Bytes;
use hyper::header::{HeaderValue, CACHE_CONTROL, CONTENT_SECURITY_POLICY, CONTENT_TYPE, HOST};
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use serde::{Deserialize, Serialize};
use thiserror::Error;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;
use tokio_tungstenite::tungstenite::protocol::{CloseFrame, Role};
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::WebSocketStream;

const PAGE: &str = include_str!("../assets/webterm/index.html");
const SCRIPT: &str = include_str!("../assets/webterm/terminal.js");
const STYLE: &str = include_str!("../assets/webterm/terminal.css");
const XTERM_JS: &str = include_str!("../assets/xterm/xterm.js");
const XTERM_CSS: &str = include_str!("../assets/xterm/xterm.css");

/// How long a connection may take to send the token.
const AUTH_WITHIN: Duration = Duration::from_secs(10);

#[derive(Debug, Error)]
pub enum WebTermError {
    #[error("the terminal listens only on a loopback address, not on {addr}: its token would cross the network in plain HTTP (reach it from elsewhere through `ssh -L PORT:{addr}`)")]
    NotLoopback { addr: SocketAddr },
    #[error("cannot listen on {addr}: {source}")]
    Listen {
        addr: SocketAddr,
        #[source]
        source: std::io::Error,
    },
    #[error("cannot read the terminal's token from /dev/urandom: {source}")]
    Token {
        #[source]
        source: std::io::Error,
    },
    #[error("the terminal's recording {}: {source}", path.display())]
    Recording {
        path: PathBuf,
        #[source]
        source: crate::statefile::StateFileError,
    },
    #[error("no user {name:?} on this machine (--user names a local account the trainee's shell runs as)")]
    NoUser { name: String },
    #[error("--user {name}: uid 0 is the instructor's; a trainee's shell runs as another user")]
    RootUser { name: String },
    #[error("--user needs faultlab to run as root, to start the shell as that user")]
    NotRoot,
    #[error("the trainee's private directory {}: {source}", path.display())]
    Home {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("the broker's socket {}: {source}", path.display())]
    Broker {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("--user {user}: that user cannot run faultlab at {} (a directory above it is closed to them, or the file is not theirs to run), and the trainee's `faultlab` is that program; put faultlab where every user can run it (for example `cargo install --path harness --root /usr/local`)", exe.display())]
    ExeUnreachable {
        user: String,
        exe: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("the terminal's recording {}, line {line}: {source}", path.display())]
    RecordingLine {
        path: PathBuf,
        line: usize,
        #[source]
        source: serde_json::Error,
    },
}

/// The shell each connection gets: the program, its arguments, its whole environment (nothing else
/// of the server's is passed on), its directory, and the user it runs as (`None`: the server's own).
#[derive(Clone, Debug)]
pub struct Shell {
    pub program: PathBuf,
    pub args: Vec<String>,
    pub env: Vec<(String, String)>,
    pub dir: PathBuf,
    pub user: Option<User>,
}

/// A local user a trainee's shell runs as.
#[derive(Clone, Debug, PartialEq)]
pub struct User {
    pub name: String,
    pub uid: u32,
    pub gid: u32,
}

impl User {
    /// The user `name` from the password database.
    pub fn named(name: &str) -> Result<User, WebTermError> {
        let unknown = || WebTermError::NoUser { name: name.to_string() };
        let c = std::ffi::CString::new(name).map_err(|_| unknown())?;
        let mut pw: libc::passwd = unsafe { std::mem::zeroed() };
        let mut buf = vec![0 as libc::c_char; 16 * 1024];
        let mut found: *mut libc::passwd = std::ptr::null_mut();
        // SAFETY: getpwnam_r writes only into pw and buf (of the length given) and sets found.
        let rc = unsafe { libc::getpwnam_r(c.as_ptr(), &mut pw, buf.as_mut_ptr(), buf.len(), &mut found) };
        if rc != 0 || found.is_null() {
            return Err(unknown());
        }
        if pw.pw_uid == 0 {
            return Err(WebTermError::RootUser { name: name.to_string() });
        }
        Ok(User { name: name.to_string(), uid: pw.pw_uid, gid: pw.pw_gid })
    }
}

/// One line the trainee entered, at `at` seconds on the session's clock.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Typed {
    pub at: f64,
    pub line: String,
}

/// Lines as a person types them into a terminal: bytes in, each line out when Enter comes. Backspace,
/// Ctrl-U (erase the line) and Ctrl-C (abandon it) are applied; escape sequences (arrow keys, function
/// keys) and other control keys are dropped, so a line edited with the arrows or completed with Tab
/// reads as it was typed, not as the shell ran it.
#[derive(Debug, Default)]
pub struct LineEditor {
    line: String,
    escape: Escape,
    pending: Vec<u8>,
}

#[derive(Debug, Default, PartialEq)]
enum Escape {
    #[default]
    None,
    Start,
    /// A control sequence (`ESC [` or `ESC O`), ended by a byte in 0x40..=0x7e.
    Sequence,
}

impl LineEditor {
    /// Feed what the terminal sent; the lines it completed (empty ones left out).
    pub fn feed(&mut self, bytes: &[u8]) -> Vec<String> {
        let mut done = Vec::new();
        self.pending.extend_from_slice(bytes);
        let pending = std::mem::take(&mut self.pending);
        let text = match std::str::from_utf8(&pending) {
            Ok(t) => t.to_string(),
            Err(e) if e.error_len().is_none() => {
                // A character split between two messages: keep its start for the next.
                let (good, rest) = pending.split_at(e.valid_up_to());
                self.pending = rest.to_vec();
                String::from_utf8_lossy(good).into_owned()
            }
            Err(_) => String::from_utf8_lossy(&pending).into_owned(),
        };
        for c in text.chars() {
            match (&self.escape, c) {
                (Escape::Start, '[' | 'O') => self.escape = Escape::Sequence,
                (Escape::Start, _) => self.escape = Escape::None,
                (Escape::Sequence, c) if ('\u{40}'..='\u{7e}').contains(&c) => self.escape = Escape::None,
                (Escape::Sequence, _) => {}
                (Escape::None, '\u{1b}') => self.escape = Escape::Start,
                (Escape::None, '\r' | '\n') => {
                    let line = std::mem::take(&mut self.line);
                    if !line.trim().is_empty() {
                        done.push(line.trim().to_string());
                    }
                }
                (Escape::None, '\u{7f}' | '\u{8}') => {
                    self.line.pop();
                }
                (Escape::None, '\u{15}' | '\u{3}') => self.line.clear(),
                (Escape::None, '\t') => self.line.push(' '),
                (Escape::None, c) if c.is_control() => {}
                (Escape::None, c) => self.line.push(c),
            }
        }
        done
    }
}

/// Where the lines typed are kept: one JSON object per line ([`Typed`]), appended to a file in the
/// session's private directory, with times on the session's clock (`started`, unix seconds).
pub struct Recording {
    path: PathBuf,
    file: std::fs::File,
    started: f64,
}

fn unix_now() -> f64 {
    SystemTime::now().duration_since(UNIX_EPOCH).unwrap_or_default().as_secs_f64()
}

impl Recording {
    pub fn open(path: &Path, started: f64) -> Result<Recording, WebTermError> {
        let file = crate::statefile::open_append(path).map_err(|source| WebTermError::Recording { path: path.to_owned(), source })?;
        Ok(Recording { path: path.to_owned(), file, started })
    }

    fn write(&mut self, line: String) {
        use std::io::Write;
        let typed = Typed { at: ((unix_now() - self.started) * 10.0).round() / 10.0, line };
        let mut text = serde_json::to_string(&typed).expect("a typed line serialises");
        text.push('\n');
        if let Err(e) = self.file.write_all(text.as_bytes()) {
            tracing::warn!("cannot record a typed line in {}: {e}", self.path.display());
        }
    }

    /// The lines recorded in `path` (none if it is not there).
    pub fn read(path: &Path) -> Result<Vec<Typed>, WebTermError> {
        if !path.exists() {
            return Ok(Vec::new());
        }
        let text = crate::statefile::read(path).map_err(|source| WebTermError::Recording { path: path.to_owned(), source })?;
        text.lines()
            .enumerate()
            .filter(|(_, l)| !l.trim().is_empty())
            .map(|(i, l)| serde_json::from_str(l).map_err(|source| WebTermError::RecordingLine { path: path.to_owned(), line: i + 1, source }))
            .collect()
    }
}

/// The credential: 32 random bytes, as 64 hex digits.
#[derive(Clone)]
struct Token(String);

impl Token {
    fn new() -> Result<Token, WebTermError> {
        let mut bytes = [0u8; 32];
        std::fs::File::open("/dev/urandom").and_then(|mut f| std::io::Read::read_exact(&mut f, &mut bytes)).map_err(|source| WebTermError::Token { source })?;
        Ok(Token(bytes.iter().map(|b| format!("{b:02x}")).collect()))
    }

    /// Whether `given` is the token, in time that does not depend on where they differ.
    fn is(&self, given: &str) -> bool {
        let (a, b) = (self.0.as_bytes(), given.as_bytes());
        a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
    }
}

impl std::fmt::Debug for Token {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Token(..)")
    }
}

struct State {
    addr: SocketAddr,
    token: Token,
    shell: Shell,
    busy: AtomicBool,
    recording: Option<Mutex<Recording>>,
}

/// A terminal server, bound and not yet serving.
pub struct Server {
    listener: TcpListener,
    state: Arc<State>,
}

impl Server {
    /// Listen on `addr` (a loopback address; port 0 picks a free one).
    pub async fn bind(addr: SocketAddr, shell: Shell, recording: Option<Recording>) -> Result<Server, WebTermError> {
        if !addr.ip().is_loopback() {
            return Err(WebTermError::NotLoopback { addr });
        }
        let listener = TcpListener::bind(addr).await.map_err(|source| WebTermError::Listen { addr, source })?;
        let addr = listener.local_addr().map_err(|source| WebTermError::Listen { addr, source })?;
        let state = State { addr, token: Token::new()?, shell, busy: AtomicBool::new(false), recording: recording.map(Mutex::new) };
        Ok(Server { listener, state: Arc::new(state) })
    }

    /// The address to open, with the token in its fragment. It is a credential: give it only to the
    /// trainee.
    pub fn url(&self) -> String {
        format!("http://{}/#{}", self.state.addr, self.state.token.0)
    }

    /// Serve until `stop` ends; a shell running then is hung up.
    pub async fn serve(self, stop: impl std::future::Future<Output = ()>) {
        let mut stop = std::pin::pin!(stop);
        let mut connections = tokio::task::JoinSet::new();
        loop {
            let stream = tokio::select! {
                accepted = self.listener.accept() => match accepted {
                    Ok((stream, _)) => stream,
                    Err(e) => {
                        tracing::warn!("terminal: accept: {e}");
                        tokio::time::sleep(Duration::from_millis(100)).await;
                        continue;
                    }
                },
                () = &mut stop => break,
            };
            let state = self.state.clone();
            connections.spawn(async move {
                let service = hyper::service::service_fn(move |req| {
                    let state = state.clone();
                    async move { Ok::<_, std::convert::Infallible>(respond(state, req)) }
                });
                let _ = hyper::server::conn::http1::Builder::new().serve_connection(TokioIo::new(stream), service).with_upgrades().await;
            });
        }
        connections.shutdown().await;
    }
}

fn plain(status: StatusCode, text: &str) -> Response<Full<Bytes>> {
    let mut r = Response::new(Full::new(Bytes::from(format!("{text}\n"))));
    *r.status_mut() = status;
    r.headers_mut().insert(CONTENT_TYPE, HeaderValue::from_static("text/plain; charset=utf-8"));
    r
}

/// Whether `host` (a request's Host header) names this server: its loopback address or `localhost`,
/// with its port.
fn host_is_ours(host: &str, addr: SocketAddr) -> bool {
    let port = addr.port();
    host == addr.to_string() || host == format!("localhost:{port}") || (addr.ip().is_ipv4() && host == format!("127.0.0.1:{port}"))
}

fn respond(state: Arc<State>, mut req: Request<hyper::body::Incoming>) -> Response<Full<Bytes>> {
    let host = req.headers().get(HOST).and_then(|h| h.to_str().ok()).unwrap_or_default().to_string();
    if !host_is_ours(&host, state.addr) {
        return plain(StatusCode::MISDIRECTED_REQUEST, "this terminal answers only at its own address");
    }
    if req.method() != Method::GET {
        return plain(StatusCode::METHOD_NOT_ALLOWED, "only GET");
    }
    let (body, kind): (&'static str, &'static str) = match req.uri().path() {
        "/" => (PAGE, "text/html; charset=utf-8"),
        "/terminal.js" => (SCRIPT, "text/javascript; charset=utf-8"),
        "/terminal.css" => (STYLE, "text/css; charset=utf-8"),
        "/xterm.js" => (XTERM_JS, "text/javascript; charset=utf-8"),
        "/xterm.css" => (XTERM_CSS, "text/css; charset=utf-8"),
        "/ws" => return upgrade(state, &host, &mut req),
        _ => return plain(StatusCode::NOT_FOUND, "not here"),
    };
    let mut r = Response::new(Full::new(Bytes::from_static(body.as_bytes())));
    let h = r.headers_mut();
    h.insert(CONTENT_TYPE, HeaderValue::from_static(kind));
    h.insert(CACHE_CONTROL, HeaderValue::from_static("no-store"));
    h.insert("x-content-type-options", HeaderValue::from_static("nosniff"));
    h.insert("referrer-policy", HeaderValue::from_static("no-referrer"));
    // xterm.js sets its colours and cell sizes in a <style> element of its own: styles may be inline,
    // scripts may not.
    let csp = format!("default-src 'none'; script-src 'self'; style-src 'self' 'unsafe-inline'; connect-src ws://{host}; base-uri 'none'; form-action 'none'; frame-ancestors 'none'");
    if let Ok(v) = HeaderValue::from_str(&csp) {
        h.insert(CONTENT_SECURITY_POLICY, v);
    }
    r
}

/// `/ws`: the WebSocket handshake, when the page is this server's own and no shell runs.
fn upgrade(state: Arc<State>, host: &str, req: &mut Request<hyper::body::Incoming>) -> Response<Full<Bytes>> {
    let header = |name: &str| req.headers().get(name).and_then(|v| v.to_str().ok()).unwrap_or_default().to_string();
    if header("origin") != format!("http://{host}") {
        return plain(StatusCode::FORBIDDEN, "a WebSocket from another page");
    }
    let key = header("sec-websocket-key");
    if !header("upgrade").eq_ignore_ascii_case("websocket") || key.is_empty() || header("sec-websocket-version") != "13" {
        return plain(StatusCode::BAD_REQUEST, "not a WebSocket handshake");
    }
    if state.busy.load(Ordering::SeqCst) {
        return plain(StatusCode::CONFLICT, "a shell of this terminal is in use");
    }
    let upgrading = hyper::upgrade::on(req);
    tokio::spawn(async move {
        match upgrading.await {
            Ok(upgraded) => {
                let ws = WebSocketStream::from_raw_socket(TokioIo::new(upgraded), Role::Server, None).await;
                connection(state, ws).await;
            }
            Err(e) => tracing::warn!("terminal: upgrade: {e}"),
        }
    });
    let mut r = Response::new(Full::new(Bytes::new()));
    *r.status_mut() = StatusCode::SWITCHING_PROTOCOLS;
    let h = r.headers_mut();
    h.insert("upgrade", HeaderValue::from_static("websocket"));
    h.insert("connection", HeaderValue::from_static("Upgrade"));
    if let Ok(v) = HeaderValue::from_str(&tokio_tungstenite::tungstenite::handshake::derive_accept_key(key.as_bytes())) {
        h.insert("sec-websocket-accept", v);
    }
    r
}

/// The page's first message, and later ones that resize the terminal.
#[derive(Debug, Deserialize)]
struct Hello {
    #[serde(default)]
    token: Option<String>,
    cols: u16,
    rows: u16,
}

type Ws = WebSocketStream<TokioIo<hyper::upgrade::Upgraded>>;

async fn close(ws: &mut Ws, code: CloseCode, why: &str) {
    let _ = ws.send(Message::Close(Some(CloseFrame { code, reason: why.to_string().into() }))).await;
}

/// One connection: the token first, then the shell until either side ends.
async fn connection(state: Arc<State>, mut ws: Ws) {
    let hello = match tokio::time::timeout(AUTH_WITHIN, ws.next()).await {
        Ok(Some(Ok(Message::Text(t)))) => serde_json::from_str::<Hello>(&t).ok(),
        _ => None,
    };
    let Some(hello) = hello.filter(|h| h.token.as_deref().is_some_and(|t| state.token.is(t))) else {
        return close(&mut ws, CloseCode::Policy, "not this terminal's token: open the address you were given").await;
    };
    if state.busy.swap(true, Ordering::SeqCst) {
        return close(&mut ws, CloseCode::Policy, "a shell of this terminal is in use").await;
    }
    if let Err(why) = shell(&state, &mut ws, &hello).await {
        close(&mut ws, CloseCode::Error, &why).await;
    }
    state.busy.store(false, Ordering::SeqCst);
}

/// Whether what is typed now is hidden, as at a password prompt: the terminal does not echo, yet reads
/// whole lines (a line editor such as bash's turns echo off too, but reads key by key, and echoes
/// itself). Such lines are not recorded.
fn hidden_input(terminal: std::os::fd::RawFd) -> bool {
    // SAFETY: tcgetattr fills the termios it is given, of an fd that stays open while the shell runs.
    let mut t: libc::termios = unsafe { std::mem::zeroed() };
    if unsafe { libc::tcgetattr(terminal, &mut t) } != 0 {
        return false;
    }
    t.c_lflag & libc::ECHO == 0 && t.c_lflag & libc::ICANON != 0
}

/// Kills the shell's process group when dropped.
struct Reaper(Option<u32>);

impl Drop for Reaper {
    fn drop(&mut self) {
        if let Some(pid) = self.0 {
            // SAFETY: killpg on the shell's own process group (pty-process makes it a session leader).
            unsafe { libc::killpg(pid as libc::pid_t, libc::SIGKILL) };
        }
    }
}

fn size(cols: u16, rows: u16) -> pty_process::Size {
    pty_process::Size::new(rows.clamp(2, 500), cols.clamp(2, 1000))
}

/// The shell on a pseudo-terminal, its output to the page and the page's keys to it, until the shell
/// ends (the page is told) or the page goes (the shell's process group is hung up).
async fn shell(state: &State, ws: &mut Ws, hello: &Hello) -> Result<(), String> {
    let (pty, pts) = pty_process::open().map_err(|e| format!("cannot open a pseudo-terminal: {e}"))?;
    pty.resize(size(hello.cols, hello.rows)).map_err(|e| format!("cannot size the pseudo-terminal: {e}"))?;
    let sh = &state.shell;
    let mut cmd = pty_process::Command::new(&sh.program)
        .args(&sh.args)
        .env_clear()
        .envs(sh.env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
        .current_dir(&sh.dir)
        .kill_on_drop(true);
    if let Some(u) = &sh.user {
        // The standard library drops root's supplementary groups when it sets the uid.
        cmd = cmd.uid(u.uid).gid(u.gid);
    }
    let mut child = cmd
        .spawn(pts)
        .map_err(|e| format!("cannot start {}: {e}", sh.program.display()))?;
    let group = child.id();
    // However this ends (the connection's task aborted when the server stops included), nothing the
    // shell started outlives it.
    let _reaper = Reaper(group);
    // Valid while either half lives (they share the pseudo-terminal).
    let terminal = std::os::fd::AsRawFd::as_raw_fd(&pty);
    let (mut from_shell, mut to_shell) = pty.into_split();
    let mut editor = LineEditor::default();
    let mut buf = vec![0u8; 16 * 1024];
    let ended = loop {
        tokio::select! {
            n = from_shell.read(&mut buf) => match n {
                // EIO once the shell and everything it started have closed the terminal.
                Ok(0) | Err(_) => break "the shell ended",
                Ok(n) => if ws.send(Message::Binary(Bytes::copy_from_slice(&buf[..n]))).await.is_err() { break "" },
            },
            m = ws.next() => match m {
                Some(Ok(Message::Binary(keys))) => {
                    if let Some(rec) = &state.recording {
                        let lines = editor.feed(&keys);
                        if !hidden_input(terminal) {
                            let mut rec = rec.lock().unwrap_or_else(|p| p.into_inner());
                            lines.into_iter().for_each(|l| rec.write(l));
                        }
                    }
                    if to_shell.write_all(&keys).await.is_err() { break "the shell ended" }
                }
                Some(Ok(Message::Text(t))) => {
                    if let Ok(h) = serde_json::from_str::<Hello>(&t) {
                        let _ = to_shell.resize(size(h.cols, h.rows));
                    }
                }
                Some(Ok(Message::Close(_))) | None | Some(Err(_)) => break "",
                Some(Ok(_)) => {}
            },
        }
    };
    if let Some(pid) = group {
        // SAFETY: killpg on the shell's own process group (pty-process makes it a session leader).
        unsafe { libc::killpg(pid as libc::pid_t, libc::SIGHUP) };
    }
    let _ = tokio::time::timeout(Duration::from_secs(5), child.wait()).await;
    if !ended.is_empty() {
        close(ws, CloseCode::Normal, ended).await;
    }
    Ok(())
}

/// A directory of the trainee's own for the terminal's time: a fresh one of a random name in the
/// system's temporary directory, made 0700 and given to `user`. It holds the trainee's kubeconfig and
/// the broker's socket; only the trainee (and root) can enter it. Removed when dropped.
pub fn private_home(user: &User) -> Result<tempfile::TempDir, WebTermError> {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::Builder::new().prefix("faultlab-trainee-").permissions(std::fs::Permissions::from_mode(0o700)).tempdir().map_err(|source| WebTermError::Home { path: std::env::temp_dir(), source })?;
    let err = |source| WebTermError::Home { path: dir.path().to_owned(), source };
    // Whatever the umask made of it: the trainee's alone.
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o700)).map_err(err)?;
    std::os::unix::fs::chown(dir.path(), Some(user.uid), Some(user.gid)).map_err(err)?;
    Ok(dir)
}

/// Check that `user` can run `exe` (faultlab itself, which the trainee's shell finds on its PATH): run
/// `exe --version` as that user. Started as root only (as [`Shell`]'s user is).
pub fn check_runs_as(user: &User, exe: &Path) -> Result<(), WebTermError> {
    use std::os::unix::process::CommandExt;
    let unreachable = |source| WebTermError::ExeUnreachable { user: user.name.clone(), exe: exe.to_owned(), source };
    let status = std::process::Command::new(exe)
        .arg("--version")
        .uid(user.uid)
        .gid(user.gid)
        .env_clear()
        .current_dir("/")
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()
        .map_err(unreachable)?;
    if status.success() {
        Ok(())
    } else {
        Err(unreachable(std::io::Error::other(format!("`{} --version` as {} ended with {status}", exe.display(), user.name))))
    }
}

/// Write `bytes` to a new file `name` in `home` (a [`private_home`]), 0600 and `user`'s.
pub fn give_file(home: &Path, name: &str, bytes: &[u8], user: &User) -> Result<PathBuf, WebTermError> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let path = home.join(name);
    let err = |source| WebTermError::Home { path: path.clone(), source };
    let mut f = std::fs::OpenOptions::new().write(true).create_new(true).mode(0o600).custom_flags(libc::O_NOFOLLOW).open(&path).map_err(err)?;
    f.write_all(bytes).map_err(err)?;
    std::os::unix::fs::fchown(&f, Some(user.uid), Some(user.gid)).map_err(err)?;
    Ok(path)
}

/// The broker: faultlab's training commands for a trainee whose shell runs as another user, who
/// cannot read the session. The trainee's `faultlab` (with `FAULTLAB_BROKER` set) sends its arguments
/// over a Unix socket in the trainee's [`private_home`]; the broker takes a call only from that user
/// (the socket's peer credentials), asks `allow` what to run for those arguments, runs it as its own
/// user, and sends back the output and the exit status.
pub struct Broker {
    listener: tokio::net::UnixListener,
    uid: u32,
}

/// A call's request and answers: one JSON object a line.
#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
enum BrokerMessage {
    Args(Vec<String>),
    Out(String),
    Exit(i32),
}

/// The most a call may send: arguments are short.
const MAX_CALL: usize = 16 * 1024;

impl Broker {
    /// Listen on `path`, a socket `user` may connect to.
    pub fn bind(path: &Path, user: &User) -> Result<Broker, WebTermError> {
        let err = |source| WebTermError::Broker { path: path.to_owned(), source };
        let listener = tokio::net::UnixListener::bind(path).map_err(err)?;
        std::os::unix::fs::chown(path, Some(user.uid), Some(user.gid)).map_err(err)?;
        Ok(Broker { listener, uid: user.uid })
    }

    /// Serve calls until `stop` ends. `allow` turns a call's arguments into the command to run, or
    /// into why not (exit status 2).
    pub async fn serve<F>(self, allow: F, stop: impl std::future::Future<Output = ()>)
    where
        F: Fn(&[String]) -> Result<tokio::process::Command, String> + Send + Sync + 'static,
    {
        let allow = Arc::new(allow);
        let mut stop = std::pin::pin!(stop);
        let mut calls = tokio::task::JoinSet::new();
        loop {
            let stream = tokio::select! {
                accepted = self.listener.accept() => match accepted { Ok((s, _)) => s, Err(_) => continue },
                () = &mut stop => break,
            };
            if stream.peer_cred().map(|c| c.uid()).ok() != Some(self.uid) {
                continue;
            }
            let allow = allow.clone();
            calls.spawn(async move {
                let _ = broker_call(stream, allow.as_ref()).await;
            });
        }
        calls.shutdown().await;
    }
}

async fn broker_call<F>(stream: tokio::net::UnixStream, allow: &F) -> std::io::Result<()>
where
    F: Fn(&[String]) -> Result<tokio::process::Command, String>,
{
    use tokio::io::AsyncBufReadExt;
    let (read, mut write) = stream.into_split();
    let mut line = String::new();
    tokio::io::BufReader::new(read).take(MAX_CALL as u64).read_line(&mut line).await?;
    let send = |m: BrokerMessage| serde_json::to_string(&m).expect("a broker message serialises") + "\n";
    let Ok(BrokerMessage::Args(args)) = serde_json::from_str(&line) else {
        return write.write_all(send(BrokerMessage::Exit(2)).as_bytes()).await;
    };
    let mut cmd = match allow(&args) {
        Ok(cmd) => cmd,
        Err(why) => {
            write.write_all(send(BrokerMessage::Out(format!("error: {why}\n"))).as_bytes()).await?;
            return write.write_all(send(BrokerMessage::Exit(2)).as_bytes()).await;
        }
    };
    // Output and errors interleaved as they come, on one pipe, as a terminal would show them.
    let (reader, writer) = std::io::pipe()?;
    let child = cmd.stdin(std::process::Stdio::null()).stdout(writer.try_clone()?).stderr(writer).kill_on_drop(true).spawn();
    drop(cmd);
    let mut child = child?;
    let mut reader = tokio::net::unix::pipe::Receiver::from_owned_fd(reader.into())?;
    let mut buf = vec![0u8; 8192];
    loop {
        match reader.read(&mut buf).await {
            Ok(0) | Err(_) => break,
            Ok(n) => write.write_all(send(BrokerMessage::Out(String::from_utf8_lossy(&buf[..n]).into_owned())).as_bytes()).await?,
        }
    }
    let status = child.wait().await?;
    write.write_all(send(BrokerMessage::Exit(status.code().unwrap_or(1))).as_bytes()).await
}

/// A trainee's call to the broker at `socket` (blocking): `args` sent, the output printed as it
/// comes; the exit status to leave with.
pub fn call_broker(socket: &Path, args: Vec<String>) -> Result<i32, WebTermError> {
    call_broker_to(socket, args, &mut std::io::stdout())
}

fn call_broker_to(socket: &Path, args: Vec<String>, out: &mut impl std::io::Write) -> Result<i32, WebTermError> {
    use std::io::BufRead;
    let err = |source| WebTermError::Broker { path: socket.to_owned(), source };
    let mut stream = std::os::unix::net::UnixStream::connect(socket).map_err(err)?;
    let mut request = serde_json::to_string(&BrokerMessage::Args(args)).expect("a broker message serialises");
    request.push('\n');
    std::io::Write::write_all(&mut stream, request.as_bytes()).map_err(err)?;
    for line in std::io::BufReader::new(stream).lines() {
        match serde_json::from_str::<BrokerMessage>(&line.map_err(err)?) {
            Ok(BrokerMessage::Out(text)) => {
                let _ = out.write_all(text.as_bytes()).and_then(|()| out.flush());
            }
            Ok(BrokerMessage::Exit(code)) => return Ok(code),
            _ => break,
        }
    }
    Err(err(std::io::Error::new(std::io::ErrorKind::UnexpectedEof, "the broker ended the call without an exit status")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_trainee_who_cannot_reach_faultlab_is_told_before_the_terminal_starts() {
        // Runs a program as another user: root only (CI's and this project's machines run tests as root).
        if unsafe { libc::geteuid() } != 0 {
            eprintln!("not root: running a program as nobody needs root");
            return;
        }
        let nobody = User::named("nobody").unwrap();
        check_runs_as(&nobody, Path::new("/bin/true")).unwrap();
        let closed = tempfile::tempdir().unwrap();
        let exe = closed.path().join("faultlab");
        std::fs::copy("/bin/true", &exe).unwrap();
        // A checkout in root's home, or a clone in a directory made 0700, as the instructor left it.
        std::fs::set_permissions(closed.path(), std::os::unix::fs::PermissionsExt::from_mode(0o700)).unwrap();
        let e = check_runs_as(&nobody, &exe).unwrap_err();
        let text = e.to_string();
        assert!(text.starts_with(&format!("--user nobody: that user cannot run faultlab at {}", exe.display())), "{text}");
        assert!(text.contains("cargo install --path harness --root /usr/local"), "{text}");
    }

    #[test]
    fn the_line_editor_keeps_what_was_entered() {
        let mut e = LineEditor::default();
        assert_eq!(e.feed(b"kubectl get po"), Vec::<String>::new());
        assert_eq!(e.feed(b"ds\r"), vec!["kubectl get pods"]);
        // Backspace, an arrow key's sequence, Ctrl-U and Ctrl-C.
        assert_eq!(e.feed(b"kubectl dscribe\x7f\x7f\x7f\x7f\x7f\x7fescribe pod\x1b[A\r"), vec!["kubectl describe pod"]);
        assert_eq!(e.feed(b"rm -rf /\x15echo ok\r"), vec!["echo ok"]);
        assert_eq!(e.feed(b"sleep 100\x03\r\r  \n"), Vec::<String>::new());
        assert_eq!(e.feed(b"\x1bOPfaultlab hint\r"), vec!["faultlab hint"]);
        // A character split between two messages, and two lines in one.
        assert_eq!(e.feed(b"echo \xc3"), Vec::<String>::new());
        assert_eq!(e.feed(b"\xa9\rls\r"), vec!["echo é", "ls"]);
    }

    #[test]
    fn the_token_is_compared_whole() {
        let t = Token::new().unwrap();
        assert_eq!(t.0.len(), 64);
        assert!(t.is(&t.0.clone()));
        assert!(!t.is(&t.0[..63]));
        assert!(!t.is(""));
        let mut other = t.0.clone().into_bytes();
        other[40] = if other[40] == b'0' { b'1' } else { b'0' };
        assert!(!t.is(std::str::from_utf8(&other).unwrap()));
        assert_ne!(Token::new().unwrap().0, t.0);
        assert_eq!(format!("{t:?}"), "Token(..)");
    }

    #[test]
    fn only_its_own_address_is_answered() {
        let addr: SocketAddr = "127.0.0.1:4321".parse().unwrap();
        assert!(host_is_ours("127.0.0.1:4321", addr));
        assert!(host_is_ours("localhost:4321", addr));
        for other in ["evil.example:4321", "127.0.0.1:4322", "127.0.0.1", "", "localhost"] {
            assert!(!host_is_ours(other, addr), "{other}");
        }
    }

    #[tokio::test]
    async fn it_listens_only_on_a_loopback_address() {
        let shell = Shell { program: "/bin/sh".into(), args: vec![], env: vec![], dir: "/".into(), user: None };
        let err = Server::bind("0.0.0.0:0".parse().unwrap(), shell, None).await.err().expect("refused");
        assert!(matches!(err, WebTermError::NotLoopback { .. }), "{err}");
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn the_broker_runs_what_it_allows_for_its_user_only() {
        let dir = tempfile::tempdir().unwrap();
        // SAFETY: no preconditions.
        let me = User { name: "me".into(), uid: unsafe { libc::geteuid() }, gid: unsafe { libc::getegid() } };
        let socket = dir.path().join("broker.sock");
        let broker = Broker::bind(&socket, &me).unwrap();
        let allow = |args: &[String]| match args {
            [say, word] if say == "say" => {
                let mut c = tokio::process::Command::new("sh");
                c.args(["-c", "echo \"$0\"; echo to-stderr >&2; exit 3", word]);
                Ok(c)
            }
            _ => Err(format!("not {args:?}")),
        };
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let served = tokio::spawn(broker.serve(allow, async move {
            let _ = stopped.await;
        }));
        let call = |args: Vec<&str>, socket: PathBuf| {
            let args: Vec<String> = args.into_iter().map(String::from).collect();
            tokio::task::spawn_blocking(move || {
                let mut out = Vec::new();
                let code = call_broker_to(&socket, args, &mut out);
                (code.map_err(|e| e.to_string()), String::from_utf8(out).unwrap())
            })
        };
        let (code, out) = call(vec!["say", "hello; rm -rf /"], socket.clone()).await.unwrap();
        assert_eq!(code, Ok(3));
        assert_eq!(out, "hello; rm -rf /\nto-stderr\n");
        let (code, out) = call(vec!["run", "x"], socket.clone()).await.unwrap();
        assert_eq!((code, out.as_str()), (Ok(2), "error: not [\"run\", \"x\"]\n"));
        stop.send(()).unwrap();
        served.await.unwrap();

        // A broker for another user hangs up on this one.
        let other = User { uid: me.uid + 4242, ..me.clone() };
        let socket = dir.path().join("other.sock");
        let broker = Broker::bind(&socket, &other).unwrap();
        let served = tokio::spawn(broker.serve(|_: &[String]| Err(String::new()), std::future::pending()));
        let (code, _) = call(vec!["say", "x"], socket).await.unwrap();
        // Closed without an answer (as the close lands: a reset or broken pipe, or an end without an
        // exit status).
        assert!(code.as_ref().is_err_and(|e| e.starts_with("the broker's socket")), "{code:?}");
        served.abort();
    }

    #[test]
    fn the_trainee_s_directory_is_theirs_alone() {
        use std::os::unix::fs::{MetadataExt, PermissionsExt};
        // SAFETY: no preconditions.
        let me = User { name: "me".into(), uid: unsafe { libc::geteuid() }, gid: unsafe { libc::getegid() } };
        let home = private_home(&me).unwrap();
        let meta = std::fs::symlink_metadata(home.path()).unwrap();
        assert_eq!((meta.permissions().mode() & 0o777, meta.uid()), (0o700, me.uid));
        assert!(home.path().file_name().unwrap().to_str().unwrap().starts_with("faultlab-trainee-"));
        let kc = give_file(home.path(), "kubeconfig", b"k", &me).unwrap();
        assert_eq!(std::fs::metadata(&kc).unwrap().permissions().mode() & 0o777, 0o600);
        // A file already there (planted) is never written through.
        assert!(give_file(home.path(), "kubeconfig", b"other", &me).is_err());
        assert_eq!(std::fs::read(&kc).unwrap(), b"k");
        let path = home.path().to_owned();
        drop(home);
        assert!(!path.exists());
    }

    #[test]
    fn a_recording_is_read_back_line_by_line() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.commands");
        let mut rec = Recording::open(&path, unix_now() - 5.0).unwrap();
        rec.write("kubectl get pods".into());
        rec.write("faultlab check".into());
        let lines = Recording::read(&path).unwrap();
        assert_eq!(lines.iter().map(|t| t.line.as_str()).collect::<Vec<_>>(), ["kubectl get pods", "faultlab check"]);
        assert!(lines.iter().all(|t| (4.0..60.0).contains(&t.at)), "{lines:?}");
        std::fs::write(&path, "{\"at\": 1, \"line\": \"ok\"}\nnot json\n").unwrap();
        let err = Recording::read(&path).unwrap_err().to_string();
        assert!(err.contains("s.commands, line 2"), "{err}");
        assert!(Recording::read(&dir.path().join("none")).unwrap().is_empty());
    }

    /// A server on a free port with `/bin/sh` as the shell, recording into `dir`; its address and URL.
    async fn serving(dir: &Path) -> (SocketAddr, String, tokio::task::JoinHandle<()>) {
        let shell = Shell { program: "/bin/sh".into(), args: vec!["-i".into()], env: vec![("PS1".into(), "$ ".into())], dir: "/".into(), user: None };
        let rec = Recording::open(&dir.join("t.commands"), unix_now()).unwrap();
        let server = Server::bind("127.0.0.1:0".parse().unwrap(), shell, Some(rec)).await.unwrap();
        let (addr, url) = (server.state.addr, server.url());
        (addr, url, tokio::spawn(server.serve(std::future::pending())))
    }

    async fn socket(addr: SocketAddr, origin: &str) -> Result<WebSocketStream<tokio::net::TcpStream>, tokio_tungstenite::tungstenite::Error> {
        use tokio_tungstenite::tungstenite::client::IntoClientRequest;
        let mut req = format!("ws://{addr}/ws").into_client_request().unwrap();
        req.headers_mut().insert("origin", HeaderValue::from_str(origin).unwrap());
        let tcp = tokio::net::TcpStream::connect(addr).await.unwrap();
        tokio_tungstenite::client_async(req, tcp).await.map(|(ws, _)| ws)
    }

    /// What the shell prints until `want` appears (or 10 s pass).
    async fn until(ws: &mut WebSocketStream<tokio::net::TcpStream>, want: &str) -> String {
        let mut seen = String::new();
        let _ = tokio::time::timeout(Duration::from_secs(10), async {
            while let Some(Ok(m)) = ws.next().await {
                if let Message::Binary(b) = m {
                    seen.push_str(&String::from_utf8_lossy(&b));
                }
                if seen.contains(want) {
                    break;
                }
            }
        })
        .await;
        seen
    }

    #[tokio::test]
    async fn a_shell_for_the_token_and_nothing_without_it() {
        let dir = tempfile::tempdir().unwrap();
        let (addr, url, server) = serving(dir.path()).await;
        let token = url.split_once('#').unwrap().1.to_string();
        let origin = format!("http://{addr}");
        assert!(url.starts_with(&format!("http://{addr}/#")) && token.len() == 64, "{url}");

        // Another site's page cannot open the socket.
        let refused = socket(addr, "http://evil.example").await.unwrap_err().to_string();
        assert!(refused.contains("403"), "{refused}");
        // A wrong token gets no shell: the connection is closed, with why.
        let mut ws = socket(addr, &origin).await.unwrap();
        ws.send(Message::text(r#"{"token": "00", "cols": 80, "rows": 24}"#)).await.unwrap();
        match ws.next().await {
            Some(Ok(Message::Close(Some(f)))) => assert!(f.code == CloseCode::Policy && f.reason.contains("not this terminal's token"), "{f:?}"),
            other => panic!("a wrong token got {other:?}"),
        }

        // The token: a shell, that runs what is typed.
        let mut ws = socket(addr, &origin).await.unwrap();
        ws.send(Message::text(format!(r#"{{"token": "{token}", "cols": 80, "rows": 24}}"#))).await.unwrap();
        ws.send(Message::binary(b"echo fault$((20+22))lab\r".to_vec())).await.unwrap();
        let out = until(&mut ws, "fault42lab").await;
        assert!(out.contains("fault42lab"), "the shell printed: {out:?}");
        // What is typed at a prompt that does not echo (a password's) is not recorded.
        // Each step waits for what only that step prints (a sum the shell works out), not for a
        // prompt: a prompt still unread from the step before would send the next line early.
        ws.send(Message::binary(b"stty -echo; echo quiet$((1+1))\r".to_vec())).await.unwrap();
        let out = until(&mut ws, "quiet2").await;
        assert!(out.contains("quiet2"), "the shell printed: {out:?}");
        ws.send(Message::binary(b"hunter2\r".to_vec())).await.unwrap();
        until(&mut ws, "not found").await;
        ws.send(Message::binary(b"stty echo; echo loud$((2+1))\r".to_vec())).await.unwrap();
        let out = until(&mut ws, "loud3").await;
        assert!(out.contains("loud3"), "the shell printed: {out:?}");
        // One shell at a time: a second connection is refused while it runs.
        let busy = socket(addr, &origin).await.unwrap_err().to_string();
        assert!(busy.contains("409"), "{busy}");
        // `exit` ends the shell, and the page is told.
        ws.send(Message::binary(b"exit\r".to_vec())).await.unwrap();
        let closed = tokio::time::timeout(Duration::from_secs(10), async {
            loop {
                match ws.next().await {
                    Some(Ok(Message::Close(f))) => return f.map(|f| f.reason.to_string()),
                    None | Some(Err(_)) => return None,
                    _ => {}
                }
            }
        })
        .await
        .unwrap();
        assert_eq!(closed.as_deref(), Some("the shell ended"));
        let typed: Vec<String> = Recording::read(&dir.path().join("t.commands")).unwrap().into_iter().map(|t| t.line).collect();
        assert_eq!(typed, ["echo fault$((20+22))lab", "stty -echo; echo quiet$((1+1))", "exit"]);
        server.abort();
    }

    #[tokio::test]
    async fn the_page_is_served_only_at_its_own_address() {
        let dir = tempfile::tempdir().unwrap();
        let (addr, _url, server) = serving(dir.path()).await;
        let get = |host: String, path: &'static str| async move {
            let mut tcp = tokio::net::TcpStream::connect(addr).await.unwrap();
            tcp.write_all(format!("GET {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n").as_bytes()).await.unwrap();
            let mut text = String::new();
            tcp.read_to_string(&mut text).await.unwrap();
            text
        };
        let page = get(addr.to_string(), "/").await;
        assert!(page.starts_with("HTTP/1.1 200") && page.contains("<script src=\"/xterm.js\">"), "{page}");
        assert!(page.contains("frame-ancestors 'none'") && page.contains(&format!("connect-src ws://{addr};")), "{page}");
        assert!(get(addr.to_string(), "/xterm.js").await.contains("e.Terminal="));
        assert!(get(addr.to_string(), "/etc/passwd").await.starts_with("HTTP/1.1 404"));
        // DNS rebinding: a name that resolved to this address is not this server's.
        assert!(get(format!("rebound.example:{}", addr.port()), "/").await.starts_with("HTTP/1.1 421"));
        server.abort();
    }
}
