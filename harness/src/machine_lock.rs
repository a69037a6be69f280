//! What several faultlab processes on one machine must not do at once: a fault that reaches past its
//! node into the host (a sysctl, the host's disk) while another process runs anything on nodes that
//! share this machine's kernel, and two helpers on one port of 127.0.0.1. Within one process the
//! scheduler keeps them apart ([`crate::schedule`]); across processes (CI's kind suite beside the
//! test bed's, a user's two runs) these locks do.
//!
//! The host is a readers-writer lock made of two `flock(2)` files in one directory ([`dir`]):
//! - a run whose nodes share this kernel holds `host.lock` shared; a host-wide fault holds it alone;
//! - both pass `gate.lock` first: a host-wide fault keeps the gate while it waits, so runs that start
//!   after it wait behind it, and it is not starved by runs that keep overlapping.
//!
//! The host's disk (a fault that writes a bounded file there) is `host-disk.lock`, and a port of
//! 127.0.0.1 `port-N.lock`, each held alone. Locks are taken host first, then the disk, then ports in
//! ascending order, so two processes never wait on each other in a circle. The kernel drops a lock
//! when its holder dies: a killed run leaves nothing to clean up (the empty files stay, as in
//! /run/lock).

use std::fs::File;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use thiserror::Error;

use crate::statefile::{self, StateFileError};

/// The directory of root's locks (the same as `FL_LOCK_DIR` in ci/testbed/lib.sh).
pub const ROOT_DIR: &str = "/run/faultlab-locks";

#[derive(Debug, Error)]
pub enum MachineLockError {
    #[error("the machine's lock directory")]
    Dir(#[source] StateFileError),
    #[error("opening lock file {}", path.display())]
    Open {
        path: PathBuf,
        #[source]
        source: StateFileError,
    },
    #[error("taking lock {} (flock)", path.display())]
    Lock {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

/// Where the locks are: `$FAULTLAB_LOCK_DIR`, else [`ROOT_DIR`] as root (shared by every root run on
/// the machine), else `$XDG_RUNTIME_DIR/faultlab-locks`, else `locks` in the state directory (a user's
/// runs reach the host only through their own kind nodes).
pub fn dir() -> PathBuf {
    if let Some(d) = std::env::var_os("FAULTLAB_LOCK_DIR").filter(|d| !d.is_empty()) {
        return PathBuf::from(d);
    }
    // SAFETY: geteuid has no preconditions and cannot fail.
    if unsafe { libc::geteuid() } == 0 {
        return PathBuf::from(ROOT_DIR);
    }
    match std::env::var_os("XDG_RUNTIME_DIR").map(PathBuf::from).filter(|d| d.is_absolute()) {
        Some(d) => d.join("faultlab-locks"),
        None => crate::journal::state_dir().join("locks"),
    }
}

/// What a run holds on this machine while it runs.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct MachineClaim {
    /// Its nodes share this machine's kernel (kind's containers, the test bed's network namespaces),
    /// so a host-wide fault elsewhere reaches them: it holds the host lock, shared.
    pub shares_kernel: bool,
    /// Its fault lowers a limit of the host's kernel for every process (its needs' `host_kernel`):
    /// it holds the host lock alone.
    pub host_wide: bool,
    /// Its fault writes a file of bounded size to the host's disk, checking the free space first (kind's
    /// disk faults): it holds `host-disk.lock`, so that no other such fault fills the disk between its
    /// check and its writes.
    pub host_disk: bool,
    /// Ports of 127.0.0.1 its helpers listen on.
    pub ports: Vec<u16>,
}

impl MachineClaim {
    /// Does it hold anything?
    pub fn is_empty(&self) -> bool {
        !self.shares_kernel && !self.host_wide && !self.host_disk && self.ports.is_empty()
    }

    /// In words, for a run's record: `the host, alone; port 5446 of 127.0.0.1`.
    pub fn describe(&self) -> String {
        let mut parts = Vec::new();
        if self.host_wide {
            parts.push("the host, alone".to_string());
        } else if self.shares_kernel {
            parts.push("the host, shared".to_string());
        }
        if self.host_disk {
            parts.push("the host's disk".to_string());
        }
        for p in &self.ports {
            parts.push(format!("port {p} of 127.0.0.1"));
        }
        if parts.is_empty() { "nothing".to_string() } else { parts.join("; ") }
    }
}

/// Locks held; dropped, they are given back.
#[derive(Debug)]
pub struct Held {
    _files: Vec<File>,
    /// How long taking them waited.
    pub waited: Duration,
}

impl Held {
    /// For a run's record, if taking `claim` waited a second or more: `waited 25.7 s for another
    /// faultlab process on this machine (the host, shared)`.
    pub fn waited_note(&self, claim: &MachineClaim) -> Option<String> {
        (self.waited >= Duration::from_secs(1))
            .then(|| format!("waited {:.1} s for another faultlab process on this machine ({})", self.waited.as_secs_f64(), claim.describe()))
    }
}

fn open(dir: &Path, name: &str) -> Result<(PathBuf, File), MachineLockError> {
    let path = dir.join(name);
    let file = statefile::open_append(&path).map_err(|source| MachineLockError::Open { path: path.clone(), source })?;
    Ok((path, file))
}

fn lock(path: &Path, file: &File, shared: bool) -> Result<(), MachineLockError> {
    let taken = if shared { file.lock_shared() } else { file.lock() };
    taken.map_err(|source| MachineLockError::Lock { path: path.to_owned(), source })
}

/// Take what `claim` holds in `dir`, waiting as long as it takes (blocking: call it off the async
/// runtime, [`acquire`]).
pub fn acquire_blocking(dir: &Path, claim: &MachineClaim) -> Result<Held, MachineLockError> {
    let began = Instant::now();
    let mut files = Vec::new();
    if claim.is_empty() {
        return Ok(Held { _files: files, waited: Duration::ZERO });
    }
    statefile::private_dir(dir).map_err(MachineLockError::Dir)?;
    if claim.shares_kernel || claim.host_wide {
        let (gate_path, gate) = open(dir, "gate.lock")?;
        lock(&gate_path, &gate, false)?;
        let (host_path, host) = open(dir, "host.lock")?;
        lock(&host_path, &host, !claim.host_wide)?;
        drop(gate);
        files.push(host);
    }
    let mut ports = claim.ports.clone();
    ports.sort_unstable();
    ports.dedup();
    let alone = claim.host_disk.then(|| "host-disk.lock".to_string()).into_iter().chain(ports.iter().map(|p| format!("port-{p}.lock")));
    for name in alone {
        let (path, file) = open(dir, &name)?;
        lock(&path, &file, false)?;
        files.push(file);
    }
    Ok(Held { _files: files, waited: began.elapsed() })
}

/// What tearing down on this kernel holds outside a run: the host, shared. Deleting a kind cluster,
/// replaying a training session's undo or stopping a test bed ends kubelets, node containers and their
/// inotify instances, so a host-wide fault of another process that counted them (inotify-limit) would
/// find its lowered limit no longer reached: its workload starts again and the symptom goes (CI, stop
/// 44: the test bed's inotify-limit while the kind suite beside it deleted its clusters).
pub fn tearing_down() -> MachineClaim {
    MachineClaim { shares_kernel: true, ..MachineClaim::default() }
}

/// Hold [`tearing_down`]'s claim for a teardown that must happen whatever: it waits for another
/// process's host-wide fault to end, but not once this process is interrupted (a cluster left behind is
/// worse than another run's fault weakened), and a lock directory that cannot be used does not stop
/// it. The locks if taken, and what to note: how long it waited, or why it went on without them.
pub async fn hold_for_teardown() -> (Option<Held>, Option<String>) {
    hold_for_teardown_in(dir()).await
}

/// [`hold_for_teardown`] with the locks in `dir`.
pub async fn hold_for_teardown_in(dir: PathBuf) -> (Option<Held>, Option<String>) {
    let claim = tearing_down();
    if let Some(signal) = crate::signals::interrupted() {
        return (None, Some(format!("interrupted by {signal}: not waiting for another faultlab process on this machine ({})", claim.describe())));
    }
    let mut interrupts = crate::signals::Interrupts::listen();
    tokio::select! {
        held = acquire(dir, claim.clone()) => match held {
            Ok(held) => {
                let note = held.waited_note(&claim);
                (Some(held), note)
            }
            Err(e) => (None, Some(format!("tearing down without the machine's lock: {}", crate::home::error_chain(&e)))),
        },
        signal = interrupts.recv() => (None, Some(format!("interrupted by {signal} while waiting for another faultlab process on this machine ({}): going on without it", claim.describe()))),
    }
}

/// [`acquire_blocking`] on a blocking thread. Dropping the future before it ends leaves the thread to
/// take the locks and give them back at once.
pub async fn acquire(dir: PathBuf, claim: MachineClaim) -> Result<Held, MachineLockError> {
    match tokio::task::spawn_blocking(move || acquire_blocking(&dir, &claim)).await {
        Ok(held) => held,
        Err(e) => std::panic::resume_unwind(e.into_panic()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::mpsc;

    fn claim(shares_kernel: bool, host_wide: bool, ports: &[u16]) -> MachineClaim {
        MachineClaim { shares_kernel, host_wide, host_disk: false, ports: ports.to_vec() }
    }

    /// Take `c` in a thread of its own (a lock held through this thread's other open file would not
    /// block it): what it holds comes on the channel once taken.
    fn spawn(dir: &Path, c: MachineClaim) -> mpsc::Receiver<Held> {
        let (tx, rx) = mpsc::channel();
        let dir = dir.to_owned();
        std::thread::spawn(move || {
            let held = acquire_blocking(&dir, &c).unwrap();
            let _ = tx.send(held);
        });
        rx
    }

    const SOON: Duration = Duration::from_millis(300);
    const LONG: Duration = Duration::from_secs(5);

    #[test]
    fn runs_share_the_host_and_a_host_wide_fault_holds_it_alone() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("locks");
        let a = acquire_blocking(&dir, &claim(true, false, &[])).unwrap();
        let b = spawn(&dir, claim(true, false, &[])).recv_timeout(SOON).expect("two runs share the host");
        let w = spawn(&dir, claim(true, true, &[]));
        assert!(w.recv_timeout(SOON).is_err(), "a host-wide fault waits for the runs to end");
        // A run that starts after it waits behind it (the gate), though the host is only shared now.
        let c = spawn(&dir, claim(true, false, &[]));
        assert!(c.recv_timeout(SOON).is_err(), "a later run waits behind the host-wide fault");
        drop(a);
        assert!(w.recv_timeout(SOON).is_err(), "and for every one of them");
        drop(b);
        let w = w.recv_timeout(LONG).expect("the host-wide fault runs once the runs ended");
        assert!(c.recv_timeout(SOON).is_err(), "nothing runs beside it");
        drop(w);
        c.recv_timeout(LONG).expect("the later run starts after it");
    }

    #[tokio::test]
    async fn a_teardown_waits_for_a_host_wide_fault_and_then_holds_the_host_shared() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("locks");
        let fault = acquire_blocking(&dir, &claim(true, true, &[])).unwrap();
        let releaser = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(1200));
            drop(fault);
        });
        let (held, note) = hold_for_teardown_in(dir.clone()).await;
        releaser.join().unwrap();
        assert!(held.is_some());
        let note = note.expect("a note of the wait");
        assert!(note.starts_with("waited 1.") && note.ends_with("(the host, shared)"), "{note}");
        // Shared: a run beside it goes on, a host-wide fault waits.
        let beside = spawn(&dir, claim(true, false, &[]));
        assert!(beside.recv_timeout(LONG).is_ok());
        let host_wide = spawn(&dir, claim(true, true, &[]));
        assert!(host_wide.recv_timeout(SOON).is_err());
        drop(held);
    }

    #[test]
    fn a_run_on_other_kernels_does_not_wait_for_the_host() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("locks");
        let _w = acquire_blocking(&dir, &claim(true, true, &[])).unwrap();
        let _h = spawn(&dir, claim(false, false, &[5446])).recv_timeout(SOON).expect("nodes in VMs or over ssh are not the host's");
        let nothing = acquire_blocking(&dir, &MachineClaim::default()).unwrap();
        assert_eq!(nothing.waited, Duration::ZERO);
        assert_eq!(nothing.waited_note(&MachineClaim::default()), None);
        let waited = Held { _files: Vec::new(), waited: Duration::from_millis(25_740) };
        assert_eq!(waited.waited_note(&claim(true, false, &[])).as_deref(), Some("waited 25.7 s for another faultlab process on this machine (the host, shared)"));
    }

    #[test]
    fn a_port_is_held_by_one_run() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("locks");
        let a = acquire_blocking(&dir, &claim(false, false, &[5446, 5446])).unwrap();
        let _o = spawn(&dir, claim(false, false, &[5447])).recv_timeout(SOON).expect("another port is free");
        let same = spawn(&dir, claim(false, false, &[5446]));
        assert!(same.recv_timeout(SOON).is_err(), "the same port waits");
        drop(a);
        same.recv_timeout(LONG).expect("taken once given back");
    }

    #[test]
    fn one_fault_at_a_time_fills_the_host_s_disk_and_runs_beside_others() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("locks");
        let disk = MachineClaim { shares_kernel: true, host_disk: true, ..Default::default() };
        let _a = acquire_blocking(&dir, &disk).unwrap();
        let _run = spawn(&dir, claim(true, false, &[])).recv_timeout(SOON).expect("an ordinary run beside it");
        assert!(spawn(&dir, disk.clone()).recv_timeout(SOON).is_err(), "a second disk fault waits");
        assert_eq!(disk.describe(), "the host, shared; the host's disk");
    }

    #[test]
    fn a_lock_directory_of_another_user_or_open_to_others_is_refused() {
        use std::os::unix::fs::PermissionsExt;
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("locks");
        std::fs::create_dir(&dir).unwrap();
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o777)).unwrap();
        let e = acquire_blocking(&dir, &claim(true, false, &[])).unwrap_err();
        assert!(matches!(e, MachineLockError::Dir(_)), "{e:?}");
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o700)).unwrap();
        std::os::unix::fs::symlink("/dev/null", dir.join("host.lock")).unwrap();
        let e = acquire_blocking(&dir, &claim(true, false, &[])).unwrap_err();
        assert!(e.to_string().contains("host.lock"), "{e}");
        assert!(matches!(e, MachineLockError::Open { .. }), "{e:?}");
    }

    #[test]
    fn root_s_directory_is_the_test_bed_s() {
        let lib = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../ci/testbed/lib.sh")).unwrap();
        assert!(lib.lines().any(|l| l == format!("FL_LOCK_DIR={ROOT_DIR}")), "ci/testbed/lib.sh sets FL_LOCK_DIR={ROOT_DIR}");
    }
}
