//! Headless Chromium driven through the DevTools protocol over a pipe (`--remote-debugging-pipe`: the
//! browser reads commands on its fd 3 and answers on its fd 4, each message JSON ended by a NUL). No
//! debugging port is opened, so no other local user can drive the browser, and the addresses it is
//! sent to (a terminal's, with its token) never appear on a command line.

use std::io::{BufRead, BufReader, Write};
use std::os::fd::{FromRawFd, OwnedFd, RawFd};
use std::os::unix::process::CommandExt;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

pub struct Browser {
    child: Child,
    to: std::fs::File,
    from: Receiver<Value>,
    next: u64,
    _profile: tempfile::TempDir,
}

/// A tab, attached: its DevTools session.
pub struct Page {
    session: String,
    target: String,
}

/// A new pipe, both ends close-on-exec and numbered 10 or above (so that neither is fd 3 or 4 when the
/// child's are set).
fn pipe() -> Result<(OwnedFd, OwnedFd), String> {
    let mut fds = [0 as RawFd; 2];
    // SAFETY: pipe2 fills two fds on success; each is then owned once.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return Err(format!("pipe2: {}", std::io::Error::last_os_error()));
    }
    let high = |fd: RawFd| -> Result<OwnedFd, String> {
        // SAFETY: fd is ours; F_DUPFD_CLOEXEC returns a new fd or -1.
        let new = unsafe { libc::fcntl(fd, libc::F_DUPFD_CLOEXEC, 10) };
        unsafe { libc::close(fd) };
        if new < 0 {
            return Err(format!("fcntl: {}", std::io::Error::last_os_error()));
        }
        // SAFETY: a fresh fd of ours.
        Ok(unsafe { OwnedFd::from_raw_fd(new) })
    };
    Ok((high(fds[0])?, high(fds[1])?))
}

impl Browser {
    pub fn launch(program: &str) -> Result<Browser, String> {
        use std::os::fd::AsRawFd;
        let profile = tempfile::tempdir().map_err(|e| e.to_string())?;
        let (browser_reads, we_write) = pipe()?;
        let (we_read, browser_writes) = pipe()?;
        let (r, w) = (browser_reads.as_raw_fd(), browser_writes.as_raw_fd());
        let mut cmd = Command::new(program);
        cmd.args(["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--remote-debugging-pipe", "--window-size=1280,900"])
            .arg(format!("--user-data-dir={}", profile.path().display()))
            // Chromium's own scratch directory (org.chromium.Chromium.XXXXXX, left behind) goes in the
            // profile, which is removed with the browser.
            .env("TMPDIR", profile.path())
            .arg("about:blank")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        // SAFETY: dup2 is async-signal-safe; it gives the child the pipe ends as fds 3 and 4 (without
        // close-on-exec).
        unsafe {
            cmd.pre_exec(move || {
                if libc::dup2(r, 3) < 0 || libc::dup2(w, 4) < 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
        let child = cmd.spawn().map_err(|e| format!("{program}: {e}"))?;
        drop((browser_reads, browser_writes));
        let (tx, from) = std::sync::mpsc::channel();
        let reader = std::fs::File::from(we_read);
        std::thread::spawn(move || {
            let mut reader = BufReader::new(reader);
            let mut buf = Vec::new();
            while reader.read_until(0, &mut buf).is_ok_and(|n| n > 0) {
                buf.pop_if(|b| *b == 0);
                if let Ok(v) = serde_json::from_slice::<Value>(&buf) {
                    if tx.send(v).is_err() {
                        break;
                    }
                }
                buf.clear();
            }
        });
        Ok(Browser { child, to: std::fs::File::from(we_write), from, next: 0, _profile: profile })
    }

    /// A DevTools call (in a tab's session, or the browser's); its result.
    fn call(&mut self, session: Option<&str>, method: &str, params: Value) -> Result<Value, String> {
        self.next += 1;
        let id = self.next;
        let mut msg = json!({"id": id, "method": method, "params": params});
        if let Some(s) = session {
            msg["sessionId"] = json!(s);
        }
        let mut bytes = serde_json::to_vec(&msg).map_err(|e| e.to_string())?;
        bytes.push(0);
        self.to.write_all(&bytes).map_err(|e| format!("{method}: writing to the browser: {e}"))?;
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.from.recv_timeout(left) {
                Ok(v) if v["id"] == json!(id) => {
                    if let Some(e) = v.get("error") {
                        return Err(format!("{method}: {e}"));
                    }
                    return Ok(v["result"].clone());
                }
                Ok(_) => {}
                Err(RecvTimeoutError::Timeout) => return Err(format!("{method}: no answer from the browser in 30 s")),
                Err(RecvTimeoutError::Disconnected) => return Err(format!("{method}: the browser went away")),
            }
        }
    }

    /// A new tab at `url`.
    pub fn open(&mut self, url: &str) -> Result<Page, String> {
        let target = self.call(None, "Target.createTarget", json!({"url": url}))?["targetId"].as_str().ok_or("no targetId")?.to_string();
        let session = self.call(None, "Target.attachToTarget", json!({"targetId": target, "flatten": true}))?["sessionId"].as_str().ok_or("no sessionId")?.to_string();
        Ok(Page { session, target })
    }

    pub fn close(&mut self, page: Page) -> Result<(), String> {
        self.call(None, "Target.closeTarget", json!({"targetId": page.target})).map(|_| ())
    }

    /// `expression`'s value in the tab (a promise awaited).
    pub fn eval(&mut self, page: &Page, expression: &str) -> Result<Value, String> {
        let r = self.call(Some(&page.session), "Runtime.evaluate", json!({"expression": expression, "returnByValue": true, "awaitPromise": true}))?;
        if let Some(e) = r.get("exceptionDetails") {
            return Err(format!("{expression}: {e}"));
        }
        Ok(r["result"]["value"].clone())
    }

    /// Wait until `expression` is true in the tab; its last value otherwise.
    pub fn wait_for(&mut self, page: &Page, expression: &str, within: Duration) -> Result<(), String> {
        let deadline = Instant::now() + within;
        loop {
            if self.eval(page, expression)? == json!(true) {
                return Ok(());
            }
            if Instant::now() > deadline {
                return Err(format!("not true within {within:?}: {expression}"));
            }
            std::thread::sleep(Duration::from_millis(200));
        }
    }

    /// A PNG of the tab, written to `path`.
    pub fn screenshot(&mut self, page: &Page, path: &std::path::Path) -> Result<(), String> {
        use base64::Engine;
        let shot = self.call(Some(&page.session), "Page.captureScreenshot", json!({"format": "png"}))?;
        let png = base64::engine::general_purpose::STANDARD.decode(shot["data"].as_str().unwrap_or_default()).map_err(|e| e.to_string())?;
        std::fs::write(path, png).map_err(|e| format!("{}: {e}", path.display()))
    }

    /// Type `text` into what has the focus, as a keyboard's input, then press Enter.
    pub fn type_line(&mut self, page: &Page, text: &str) -> Result<(), String> {
        self.call(Some(&page.session), "Input.insertText", json!({"text": text}))?;
        for kind in ["keyDown", "keyUp"] {
            let mut key = json!({"type": kind, "key": "Enter", "code": "Enter", "windowsVirtualKeyCode": 13, "nativeVirtualKeyCode": 13});
            if kind == "keyDown" {
                key["text"] = json!("\r");
            }
            self.call(Some(&page.session), "Input.dispatchKeyEvent", key)?;
        }
        Ok(())
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
