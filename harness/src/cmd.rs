//! Commands as plain data.
//!
//! A [`Cmd`] is an argv plus a timeout and optional standard input. It is what faults build and what
//! node executors wrap (`docker exec ...`, `ip netns exec ...`), so every command can be printed, planned
//! and unit-tested without a node. [`run_host`] runs an argv on this machine with a hard timeout and
//! returns an error that carries the full command line and its output.

use std::fmt;
use std::process::Stdio;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use thiserror::Error;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt};

/// Default time a node command may take, inside the node and outside.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(60);

/// The most bytes kept of what a command prints on each of its outputs. A node command's output is
/// the node's (and through its logs, anyone's who can run a pod there); what faultlab reads of it is
/// short, and a command that prints without end must not fill this machine's memory. The rest is read
/// and dropped (so the command is not blocked on a full pipe), and its size said.
pub const MAX_OUTPUT: usize = 4 << 20;

/// What a command asks of a node or host, for a plan to answer it by ([`Cmd::asks`]; a plan's
/// scripted executor): a fault names each command whose output it reads, and its plan
/// answers are keyed by these names, never by what the command line happens to contain.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Ask(pub &'static str);

impl fmt::Display for Ask {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.0)
    }
}

/// A command: argv, timeout and optional standard input, and what it asks (for plans).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Cmd {
    pub argv: Vec<String>,
    #[serde(with = "crate::duration::serde_secs")]
    pub timeout: Duration,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stdin: Option<Stdin>,
    /// What the command asks, if a fault reads its output ([`Ask`]); not journalled (an undo's output
    /// is never read).
    #[serde(skip)]
    pub ask: Option<Ask>,
}

/// What a command reads on its standard input.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum Stdin {
    Text(String),
    /// An image tarball, made as it is read (never stored on this machine).
    Image(crate::image::ImageStream),
}

impl Stdin {
    /// In words, for records and plans.
    pub fn describe(&self) -> String {
        match self {
            Stdin::Text(t) => format!("{} bytes of text", t.len()),
            Stdin::Image(i) => i.describe(),
        }
    }

    /// The text, if the input is text.
    pub fn text(&self) -> Option<&str> {
        match self {
            Stdin::Text(t) => Some(t),
            Stdin::Image(_) => None,
        }
    }
}

impl Cmd {
    /// A command from its argv, with the default timeout.
    pub fn new<I, S>(argv: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        Cmd { argv: argv.into_iter().map(Into::into).collect(), timeout: DEFAULT_TIMEOUT, stdin: None, ask: None }
    }

    /// `sh -c SCRIPT` for the rare step that needs a shell (globs, pipes), as a document writes it.
    pub fn shell(script: impl Into<String>) -> Self {
        Cmd::new(["sh".to_string(), "-c".to_string(), script.into()])
    }

    /// `sh -c SCRIPT sh ARGS...`: a script whose arguments are data (`$1`, `$2`, ...), never spliced
    /// into its text.
    pub fn script<I, S>(script: impl Into<String>, args: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        Cmd::new(["sh".to_string(), "-c".to_string(), script.into(), "sh".to_string()]).args(args)
    }

    /// One more argument.
    pub fn arg(mut self, arg: impl Into<String>) -> Self {
        self.argv.push(arg.into());
        self
    }

    /// More arguments.
    pub fn args<I, S>(mut self, args: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.argv.extend(args.into_iter().map(Into::into));
        self
    }

    /// Name what the command asks ([`Ask`]): a plan answers it by that name.
    pub fn asks(mut self, ask: Ask) -> Self {
        self.ask = Some(ask);
        self
    }

    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    pub fn stdin(mut self, input: impl Into<String>) -> Self {
        self.stdin = Some(Stdin::Text(input.into()));
        self
    }

    /// Feed the command an image tarball made as it reads it.
    pub fn stdin_image(mut self, image: crate::image::ImageStream) -> Self {
        self.stdin = Some(Stdin::Image(image));
        self
    }

    /// The argv quoted for pasting into a POSIX shell.
    pub fn shell_line(&self) -> String {
        shell_join(&self.argv)
    }
}

impl fmt::Display for Cmd {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.shell_line())
    }
}

/// Quote an argv for a POSIX shell.
pub fn shell_join<S: AsRef<str>>(argv: &[S]) -> String {
    shell_words::join(argv.iter().map(|s| s.as_ref()))
}

/// What a finished command printed.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Output {
    pub status: i32,
    pub stdout: String,
    pub stderr: String,
}

impl Output {
    /// A command that succeeded and printed `stdout`.
    pub fn ok(stdout: impl Into<String>) -> Output {
        Output { status: 0, stdout: stdout.into(), stderr: String::new() }
    }

    /// A command that failed with `status`.
    pub fn failed(status: i32) -> Output {
        Output { status, ..Output::default() }
    }

    pub fn success(&self) -> bool {
        self.status == 0
    }
}

/// A command that could not run or did not succeed. `Display` prints the command line ready to paste
/// into a shell, followed by what it printed.
#[derive(Debug, Error)]
pub enum CmdError {
    #[error("could not start `{line}`: {source}")]
    Spawn {
        line: String,
        #[source]
        source: std::io::Error,
    },
    #[error("`{line}` did not finish within {timeout:?}{}", tail(.stdout, .stderr))]
    Timeout { line: String, timeout: Duration, stdout: String, stderr: String },
    #[error("`{line}` exited with status {status}{}", tail(.stdout, .stderr))]
    Failed { line: String, status: i32, stdout: String, stderr: String },
}

impl CmdError {
    /// The output of a command that ran and failed, if it ran.
    pub fn output(&self) -> Option<Output> {
        match self {
            CmdError::Failed { status, stdout, stderr, .. } => {
                Some(Output { status: *status, stdout: stdout.clone(), stderr: stderr.clone() })
            }
            _ => None,
        }
    }
}

fn tail(stdout: &str, stderr: &str) -> String {
    let mut s = String::new();
    for (name, text) in [("stdout", stdout), ("stderr", stderr)] {
        let text = text.trim_end();
        if !text.is_empty() {
            let lines: Vec<&str> = text.lines().collect();
            let start = lines.len().saturating_sub(20);
            s.push_str(&format!("\n--- {name} ---\n{}", lines[start..].join("\n")));
        }
    }
    s
}

/// A writer that hands what it is given to a channel, for a thread that makes a command's input.
struct ChunkSender(tokio::sync::mpsc::Sender<Vec<u8>>);

impl std::io::Write for ChunkSender {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.blocking_send(buf.to_vec()).map_err(|_| std::io::Error::new(std::io::ErrorKind::BrokenPipe, "the command stopped reading"))?;
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// Run `argv` on this machine. The process is killed (with its process group) when `timeout` expires.
/// A non-zero exit is an error unless `allow_failure` is set, in which case the output is returned.
pub async fn run_host(
    argv: &[String],
    stdin: Option<&Stdin>,
    timeout: Duration,
    allow_failure: bool,
) -> Result<Output, CmdError> {
    let line = shell_join(argv);
    let (program, args) = argv.split_first().ok_or_else(|| CmdError::Spawn {
        line: line.clone(),
        source: std::io::Error::new(std::io::ErrorKind::InvalidInput, "empty argv"),
    })?;
    let mut command = tokio::process::Command::new(program);
    command
        .args(args)
        .stdin(if stdin.is_some() { Stdio::piped() } else { Stdio::null() })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .process_group(0);
    let mut child = command.spawn().map_err(|source| CmdError::Spawn { line: line.clone(), source })?;
    if let (Some(input), Some(mut pipe)) = (stdin, child.stdin.take()) {
        match input.clone() {
            Stdin::Text(text) => {
                tokio::spawn(async move {
                    let _ = pipe.write_all(text.as_bytes()).await;
                });
            }
            // Made in a thread of its own, in chunks handed to the pipe as they come; a reader that
            // stops early ends it (the chunks have nowhere to go).
            Stdin::Image(image) => {
                let (tx, mut rx) = tokio::sync::mpsc::channel::<Vec<u8>>(4);
                tokio::task::spawn_blocking(move || image.write(std::io::BufWriter::with_capacity(1 << 20, ChunkSender(tx))));
                tokio::spawn(async move {
                    while let Some(chunk) = rx.recv().await {
                        if pipe.write_all(&chunk).await.is_err() {
                            break;
                        }
                    }
                });
            }
        }
    }
    // If this future is dropped before the command ends (the caller was cancelled, for example by
    // Ctrl-C while `kind create cluster` runs), the whole process group is killed, not only the child:
    // kind's own `docker` children must not go on creating containers after faultlab gave up.
    let mut group = GroupGuard(child.id());
    let (stdout, stderr) = (child.stdout.take(), child.stderr.take());
    let waited = tokio::time::timeout(timeout, async {
        let (stdout, stderr, status) = tokio::join!(read_bounded(stdout, MAX_OUTPUT), read_bounded(stderr, MAX_OUTPUT), child.wait());
        Ok::<_, std::io::Error>((stdout?, stderr?, status?))
    })
    .await;
    let pid = group.0.take();
    match waited {
        Ok(Ok((stdout, stderr, status))) => {
            let output = Output { status: status.code().unwrap_or(128 + status.signal_number()), stdout, stderr };
            if output.success() || allow_failure {
                Ok(output)
            } else {
                Err(CmdError::Failed { line, status: output.status, stdout: output.stdout, stderr: output.stderr })
            }
        }
        Ok(Err(source)) => Err(CmdError::Spawn { line, source }),
        Err(_) => {
            if let Some(pid) = pid {
                // Kill the whole process group: the child and anything it started on this machine.
                unsafe { libc::kill(-(pid as i32), libc::SIGKILL) };
            }
            Err(CmdError::Timeout { line, timeout, stdout: String::new(), stderr: String::new() })
        }
    }
}

/// Everything `pipe` gives until its end, of which the first `max` bytes are kept (as text) and the
/// rest counted: `... (N bytes more dropped)` ends the text then.
async fn read_bounded(pipe: Option<impl AsyncRead + Unpin>, max: usize) -> std::io::Result<String> {
    let Some(mut pipe) = pipe else { return Ok(String::new()) };
    let mut kept = Vec::new();
    let mut dropped: u64 = 0;
    let mut buf = vec![0u8; 64 << 10];
    loop {
        let n = pipe.read(&mut buf).await?;
        if n == 0 {
            break;
        }
        let take = n.min(max - kept.len());
        kept.extend_from_slice(&buf[..take]);
        dropped += (n - take) as u64;
    }
    let mut text = String::from_utf8_lossy(&kept).into_owned();
    if dropped > 0 {
        text.push_str(&format!("\n... ({dropped} bytes more dropped)"));
    }
    Ok(text)
}

/// Run `argv` on this machine, from code that cannot wait asynchronously (provider detection), with
/// nothing on its standard input and its output discarded: killed with its process group when
/// `timeout` expires. Its exit status.
pub fn status_within(argv: &[String], timeout: Duration) -> Result<i32, CmdError> {
    use std::os::unix::process::CommandExt;
    let line = shell_join(argv);
    let (program, args) = argv.split_first().ok_or_else(|| CmdError::Spawn {
        line: line.clone(),
        source: std::io::Error::new(std::io::ErrorKind::InvalidInput, "empty argv"),
    })?;
    let mut child = std::process::Command::new(program)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .process_group(0)
        .spawn()
        .map_err(|source| CmdError::Spawn { line: line.clone(), source })?;
    let deadline = std::time::Instant::now() + timeout;
    loop {
        match child.try_wait() {
            Ok(Some(status)) => return Ok(status.code().unwrap_or(128 + status.signal_number())),
            Ok(None) if std::time::Instant::now() < deadline => std::thread::sleep(Duration::from_millis(20)),
            Ok(None) => {
                unsafe { libc::kill(-(child.id() as i32), libc::SIGKILL) };
                let _ = child.wait();
                return Err(CmdError::Timeout { line, timeout, stdout: String::new(), stderr: String::new() });
            }
            Err(source) => return Err(CmdError::Spawn { line, source }),
        }
    }
}

/// Kills a process group when dropped while armed.
struct GroupGuard(Option<u32>);

impl Drop for GroupGuard {
    fn drop(&mut self) {
        if let Some(pid) = self.0.take() {
            unsafe { libc::kill(-(pid as i32), libc::SIGKILL) };
        }
    }
}

trait SignalNumber {
    fn signal_number(&self) -> i32;
}

impl SignalNumber for std::process::ExitStatus {
    fn signal_number(&self) -> i32 {
        use std::os::unix::process::ExitStatusExt;
        self.signal().unwrap_or(0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shell_line_quotes_what_needs_quoting() {
        let cmd = Cmd::new(["sh", "-c", "echo 'a b' > /tmp/x"]);
        assert_eq!(cmd.shell_line(), r#"sh -c 'echo '\''a b'\'' > /tmp/x'"#);
        assert_eq!(Cmd::new(["ctr", "-n", "k8s.io", "images", "ls"]).to_string(), "ctr -n k8s.io images ls");
    }

    #[tokio::test]
    async fn failure_carries_command_line_and_output() {
        let argv: Vec<String> = ["sh", "-c", "echo out; echo err >&2; exit 3"].map(String::from).to_vec();
        let err = run_host(&argv, None, Duration::from_secs(5), false).await.unwrap_err();
        let text = err.to_string();
        assert!(text.starts_with("`sh -c 'echo out; echo err >&2; exit 3'` exited with status 3"), "{text}");
        assert!(text.contains("--- stdout ---\nout") && text.contains("--- stderr ---\nerr"), "{text}");
        assert_eq!(err.output().unwrap().status, 3);
    }

    #[tokio::test]
    async fn timeout_kills_the_process_group() {
        let argv: Vec<String> = ["sh", "-c", "sleep 30 & sleep 30"].map(String::from).to_vec();
        let started = std::time::Instant::now();
        let err = run_host(&argv, None, Duration::from_millis(300), false).await.unwrap_err();
        assert!(matches!(err, CmdError::Timeout { .. }), "{err}");
        assert!(started.elapsed() < Duration::from_secs(5));
    }

    #[tokio::test]
    async fn dropping_the_future_kills_the_process_group() {
        let dir = tempfile::tempdir().unwrap();
        let pidfile = dir.path().join("grandchild.pid");
        // The grandchild writes its pid and sleeps; the child waits for it.
        let script = format!("sleep 30 & echo $! > {}; wait", pidfile.display());
        let argv: Vec<String> = vec!["sh".into(), "-c".into(), script];
        let run = run_host(&argv, None, Duration::from_secs(60), false);
        let _ = tokio::time::timeout(Duration::from_millis(500), run).await;
        let pid: i32 = std::fs::read_to_string(&pidfile).unwrap().trim().parse().unwrap();
        let deadline = std::time::Instant::now() + Duration::from_secs(5);
        // Killed processes linger as zombies until reaped by init; /proc/<pid>/stat says which.
        let alive = |pid: i32| {
            std::fs::read_to_string(format!("/proc/{pid}/stat"))
                .map(|s| !s.rsplit(')').next().unwrap_or("").trim_start().starts_with('Z'))
                .unwrap_or(false)
        };
        while alive(pid) && std::time::Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(50));
        }
        assert!(!alive(pid), "the grandchild {pid} outlived the dropped command");
    }

    #[tokio::test]
    async fn stdin_is_fed() {
        let argv: Vec<String> = ["cat"].map(String::from).to_vec();
        let out = run_host(&argv, Some(&Stdin::Text("hello".into())), Duration::from_secs(5), false).await.unwrap();
        assert_eq!(out.stdout, "hello");
    }

    #[tokio::test]
    async fn an_image_is_made_as_the_command_reads_it() {
        let image = crate::image::ImageStream {
            config: crate::image::ImageConfig { reference: "faultlab.invalid/filler:1".into(), arch: "amd64".into(), created_by: "test".into(), ..Default::default() },
            path: "srv/release.bin".into(),
            size: 3 << 20,
        };
        let argv: Vec<String> = ["sh", "-c", "tar -tvf - | awk '{print $3, $6}'"].map(String::from).to_vec();
        let out = run_host(&argv, Some(&Stdin::Image(image)), Duration::from_secs(30), false).await.unwrap();
        let lines: Vec<&str> = out.stdout.lines().collect();
        // Two headers (the directory, the file), the data, and the end of the tar.
        assert_eq!(lines[0], format!("{} layer.tar", (3 << 20) + 2 * 512 + 1024));
        assert!(lines[1].ends_with(".json") && lines[2].ends_with(" manifest.json"), "{lines:?}");
    }

    /// A command that prints without end (or more than faultlab keeps) is read to its end, and what is
    /// kept is the first [`MAX_OUTPUT`] bytes and the size of the rest.
    #[tokio::test]
    async fn output_is_kept_up_to_a_bound_and_the_rest_counted() {
        let more = 3 << 20;
        let script = format!("head -c {} /dev/zero | tr '\\0' a; head -c {} /dev/zero | tr '\\0' b >&2", MAX_OUTPUT + more, MAX_OUTPUT + 1);
        let argv: Vec<String> = vec!["sh".into(), "-c".into(), script];
        let out = run_host(&argv, None, Duration::from_secs(30), false).await.unwrap();
        assert_eq!(out.stdout.len(), MAX_OUTPUT + format!("\n... ({more} bytes more dropped)").len());
        assert!(out.stdout.starts_with("aaaa") && out.stdout.ends_with(&format!("a\n... ({more} bytes more dropped)")), "{}", &out.stdout[MAX_OUTPUT - 4..]);
        assert!(out.stderr.ends_with("b\n... (1 bytes more dropped)"), "{}", &out.stderr[MAX_OUTPUT - 4..]);
        let small = run_host(&["echo".to_string(), "hi".to_string()], None, Duration::from_secs(5), false).await.unwrap();
        assert_eq!(small.stdout, "hi\n");
    }

    #[test]
    fn a_blocking_command_is_killed_at_its_time_limit() {
        let argv: Vec<String> = ["sh", "-c", "sleep 30 & sleep 30"].map(String::from).to_vec();
        let started = std::time::Instant::now();
        let err = status_within(&argv, Duration::from_millis(300)).unwrap_err();
        assert!(matches!(err, CmdError::Timeout { .. }), "{err}");
        assert!(started.elapsed() < Duration::from_secs(5));
        assert_eq!(status_within(&["sh".into(), "-c".into(), "exit 4".into()], Duration::from_secs(5)).unwrap(), 4);
    }

    #[test]
    fn journalled_text_input_still_reads_as_text() {
        let cmd: Cmd = serde_json::from_str(r#"{"argv": ["cat"], "timeout": 5, "stdin": "x"}"#).unwrap();
        assert_eq!(cmd.stdin, Some(Stdin::Text("x".into())));
    }
}
