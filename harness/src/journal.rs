//! The undo journal: what a run changed, written to disk *before* each change.
//!
//! Every fault records how to undo itself before it acts. Teardown replays the journal in reverse on
//! success, error, panic and signal alike; `faultlab cleanup` replays journals a crashed run left.
//! Undo actions are data (argv, object references), so a later process can replay them.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use serde::{Deserialize, Serialize};
use thiserror::Error;

use crate::cmd::{Cmd, CmdError};
use crate::datafile::ApiVersion;
use crate::node::{Executor, HostExecutor, NodeAccess};

#[derive(Debug, Error)]
pub enum JournalError {
    /// The journal, its directory or its temporary file failed the state files' checks, or could not
    /// be written ([`crate::statefile`]).
    #[error("journal: {source}")]
    State {
        #[source]
        source: crate::statefile::StateFileError,
    },
    #[error("journal {} is not a faultlab journal: {source}", path.display())]
    Decode {
        path: PathBuf,
        #[source]
        source: serde_json::Error,
    },
    #[error("taking the journal's lock {} (flock)", path.display())]
    Lock {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("undo {what:?} failed: {source}")]
    Undo {
        what: String,
        #[source]
        source: Box<UndoError>,
    },
}

/// Why one undo could not be carried out.
#[derive(Debug, Error)]
pub enum UndoError {
    #[error(transparent)]
    Command(#[from] CmdError),
    #[error(transparent)]
    Api(#[from] crate::kube_ops::KubeError),
    #[error("the cluster of context {context:?} is unreachable")]
    Unreachable { context: String },
}

/// How to reach the cluster for API undos.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ClusterRef {
    pub kubeconfig: PathBuf,
    pub context: String,
    /// Set when faultlab created this kind cluster.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind_cluster: Option<String>,
}

/// One undo action.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", tag = "type")]
pub enum Undo {
    /// Run a command on a node.
    Node { access: NodeAccess, cmd: Cmd },
    /// Run a command on this machine.
    Host { cmd: Cmd },
    /// Delete an API object (namespace, storage class, volume).
    DeleteObject {
        api_version: String,
        kind: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        namespace: Option<String>,
        name: String,
    },
    /// Create an API object again (one the run deleted, such as a cluster's StorageClass). The object is
    /// kept whole (apiVersion, kind, metadata.name, spec); AlreadyExists counts as done.
    CreateObject {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        namespace: Option<String>,
        object: serde_json::Value,
    },
}

impl Undo {
    /// `POST <path> (<Kind> <name>)`: the object an API undo acts on, for records and plans.
    pub fn describe_object(&self) -> Option<String> {
        match self {
            Undo::DeleteObject { api_version, kind, namespace, name } => Some(format!(
                "DELETE {}",
                crate::kube_ops::path(&crate::kube_ops::resource(api_version, kind), namespace.as_deref(), Some(name))
            )),
            Undo::CreateObject { namespace, object } => {
                let field = |f: &str| object.get(f).and_then(|v| v.as_str()).unwrap_or_default().to_string();
                let kind = field("kind");
                let name = object.get("metadata").and_then(|m| m.get("name")).and_then(|v| v.as_str()).unwrap_or_default();
                let ar = crate::kube_ops::resource(&field("apiVersion"), &kind);
                Some(format!("POST {} ({kind} {name})", crate::kube_ops::path(&ar, namespace.as_deref(), None)))
            }
            Undo::Node { .. } | Undo::Host { .. } => None,
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Entry {
    pub what: String,
    pub undo: Undo,
    #[serde(default)]
    pub done: bool,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct JournalFile {
    pub api_version: ApiVersion,
    pub kind: String,
    pub run_id: String,
    pub scenario: String,
    pub pid: u32,
    /// The run holds its journal's lock file ([`lock_path`]) while it lives: whether it is alive is
    /// whether that lock is held, not whether some process has its pid (a pid is reused, after a reboot
    /// at the latest, and the journal outlives both). Journals of older faultlab versions have no lock:
    /// for them the pid is all there is.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub locked: bool,
    pub cluster: ClusterRef,
    pub entries: Vec<Entry>,
    /// What the run's fault learnt and needs again later, in this process or another (`faultlab
    /// solution --apply`, `faultlab cleanup`): the fault's own serialisable state, by name.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub fault_state: BTreeMap<String, serde_json::Value>,
}

/// The state directory: `$FAULTLAB_STATE_DIR`, else `/var/lib/faultlab/runs` as root, else
/// `$XDG_STATE_HOME/faultlab`, else `~/.local/state/faultlab` (the home from `$HOME` or the password
/// database). Never a shared directory such as /tmp: a user with no home at all gets
/// `/run/user/<uid>/faultlab` (the user's runtime directory, which the checks of
/// [`crate::statefile::private_dir`] refuse unless it is theirs).
pub fn state_dir() -> PathBuf {
    if let Some(d) = std::env::var_os("FAULTLAB_STATE_DIR") {
        return PathBuf::from(d);
    }
    let uid = unsafe { libc::geteuid() };
    if uid == 0 {
        return PathBuf::from("/var/lib/faultlab/runs");
    }
    let base = std::env::var_os("XDG_STATE_HOME")
        .map(PathBuf::from)
        .filter(|p| p.is_absolute())
        .or_else(|| std::env::home_dir().filter(|h| h.is_absolute()).map(|h| h.join(".local/state")))
        .unwrap_or_else(|| PathBuf::from(format!("/run/user/{uid}")));
    base.join("faultlab")
}

/// `state_dir()/sub`, made private: the state directory and `sub` are this user's own, mode 0700
/// ([`crate::statefile::private_dir`]).
pub fn private_state_dir(sub: &str) -> Result<PathBuf, crate::statefile::StateFileError> {
    let root = state_dir();
    crate::statefile::private_dir(&root)?;
    let dir = root.join(sub);
    crate::statefile::private_dir(&dir)?;
    Ok(dir)
}

/// Where runs keep their journals: `state_dir()/journal`, private ([`private_state_dir`]).
pub fn journal_dir() -> Result<PathBuf, JournalError> {
    private_state_dir("journal").map_err(|source| JournalError::State { source })
}

/// A run's journal, kept on disk. A journal without a path records in memory only (plans).
#[derive(Clone, Debug)]
pub struct Journal {
    path: Option<PathBuf>,
    file: Arc<Mutex<JournalFile>>,
    /// Its lock file, held (`flock`, alone) by this process while the journal lives in it: the run
    /// that made it, or the cleanup that replays it.
    lock: Option<Arc<std::fs::File>>,
}

/// The lock file beside journal `path`: `<run id>.lock`.
pub fn lock_path(path: &Path) -> PathBuf {
    path.with_extension("lock")
}

/// Take the lock file at `path` alone without waiting: `None` if another open file holds it (in this
/// process or another). The file is checked as every state file is ([`crate::statefile::open_append`]).
fn try_lock(path: &Path) -> Result<Option<std::fs::File>, JournalError> {
    let file = crate::statefile::open_append(path).map_err(|source| JournalError::State { source })?;
    match file.try_lock() {
        Ok(()) => Ok(Some(file)),
        Err(std::fs::TryLockError::WouldBlock) => Ok(None),
        Err(std::fs::TryLockError::Error(e)) => Err(JournalError::Lock { path: path.to_owned(), source: e }),
    }
}

impl Journal {
    /// Open a new journal on disk for a run.
    pub fn create(dir: &Path, run_id: &str, scenario: &str, cluster: ClusterRef) -> Result<Journal, JournalError> {
        crate::statefile::private_dir(dir).map_err(|source| JournalError::State { source })?;
        let path = dir.join(format!("{run_id}.json"));
        // Taken before the journal is written, so no cleanup can find the journal with its lock free.
        let lock_file = lock_path(&path);
        let lock = try_lock(&lock_file)?.ok_or_else(|| JournalError::Lock {
            path: lock_file,
            source: std::io::Error::other("another process holds it: a run of the same id is still running"),
        })?;
        let journal = Journal {
            path: Some(path),
            file: Arc::new(Mutex::new(JournalFile {
                api_version: ApiVersion::V1alpha1,
                kind: "Journal".into(),
                run_id: run_id.into(),
                scenario: scenario.into(),
                pid: std::process::id(),
                locked: true,
                cluster,
                entries: Vec::new(),
                fault_state: BTreeMap::new(),
            })),
            lock: Some(Arc::new(lock)),
        };
        journal.save()?;
        Ok(journal)
    }

    /// A journal that writes nothing (plans).
    pub fn in_memory(scenario: &str) -> Journal {
        Journal {
            path: None,
            file: Arc::new(Mutex::new(JournalFile {
                api_version: ApiVersion::V1alpha1,
                kind: "Journal".into(),
                run_id: "plan".into(),
                scenario: scenario.into(),
                pid: std::process::id(),
                locked: false,
                cluster: ClusterRef::default(),
                entries: Vec::new(),
                fault_state: BTreeMap::new(),
            })),
            lock: None,
        }
    }

    /// Load a journal a run left behind.
    pub fn open(path: &Path) -> Result<Journal, JournalError> {
        let text = crate::statefile::read(path).map_err(|source| JournalError::State { source })?;
        let file: JournalFile = serde_json::from_str(&text).map_err(|source| JournalError::Decode { path: path.to_owned(), source })?;
        Ok(Journal { path: Some(path.to_owned()), file: Arc::new(Mutex::new(file)), lock: None })
    }

    /// Load a journal a run left behind and hold its lock, to replay it: `None` if its lock is held (its
    /// run is alive, or another cleanup is replaying it) or if the journal went while the lock was
    /// taken (the one that held it finished it).
    pub fn claim(path: &Path) -> Result<Option<Journal>, JournalError> {
        let lock_file = lock_path(path);
        let Some(lock) = try_lock(&lock_file)? else { return Ok(None) };
        if std::fs::symlink_metadata(path).is_err() {
            let _ = std::fs::remove_file(&lock_file);
            return Ok(None);
        }
        let mut journal = Journal::open(path).inspect_err(|_| {
            let _ = std::fs::remove_file(&lock_file);
        })?;
        journal.lock = Some(Arc::new(lock));
        Ok(Some(journal))
    }

    /// Every journal in `dir`.
    pub fn list(dir: &Path) -> Vec<PathBuf> {
        crate::statefile::list(dir, "json")
    }

    pub fn path(&self) -> Option<&Path> {
        self.path.as_deref()
    }

    pub fn snapshot(&self) -> JournalFile {
        self.file.lock().unwrap().clone()
    }

    /// The objects of `kind` that the undos re-create (each was journalled before it was deleted), with
    /// their namespaces (none: cluster-wide), in the order they were recorded.
    pub fn recreated(&self, kind: &str) -> Vec<(Option<String>, serde_json::Value)> {
        let file = self.file.lock().unwrap();
        file.entries
            .iter()
            .filter_map(|e| match &e.undo {
                Undo::CreateObject { object, namespace } if object["kind"] == kind => Some((namespace.clone(), object.clone())),
                _ => None,
            })
            .collect()
    }

    /// Keep a piece of the fault's state under `key` (on disk, with the undos).
    pub fn set_state(&self, key: &str, value: serde_json::Value) -> Result<(), JournalError> {
        self.file.lock().unwrap().fault_state.insert(key.to_string(), value);
        self.save()
    }

    /// The fault's state kept under `key`.
    pub fn state(&self, key: &str) -> Option<serde_json::Value> {
        self.file.lock().unwrap().fault_state.get(key).cloned()
    }

    /// Record an undo. Call this *before* making the change it undoes.
    pub fn record(&self, what: impl Into<String>, undo: Undo) -> Result<(), JournalError> {
        self.file.lock().unwrap().entries.push(Entry { what: what.into(), undo, done: false });
        self.save()
    }

    fn save(&self) -> Result<(), JournalError> {
        let Some(path) = &self.path else { return Ok(()) };
        let text = serde_json::to_string_pretty(&*self.file.lock().unwrap()).expect("journal serialises");
        crate::statefile::write(path, text.as_bytes()).map_err(|source| JournalError::State { source })
    }

    /// Undo everything not yet undone, newest first. Keeps going past failures and returns them; the
    /// file is removed once every entry is done.
    pub async fn replay(&self, executor: &dyn Executor) -> Vec<JournalError> {
        let (entries, cluster) = {
            let f = self.file.lock().unwrap();
            (f.entries.clone(), f.cluster.clone())
        };
        let mut errors = Vec::new();
        let mut client: Option<Option<kube::Client>> = None;
        for (i, entry) in entries.iter().enumerate().rev() {
            if entry.done {
                continue;
            }
            let result: Result<(), UndoError> = match &entry.undo {
                Undo::Node { access, cmd } => {
                    let argv = access.wrap(cmd);
                    executor.run(&argv, cmd, false).await.map(drop).map_err(UndoError::from)
                }
                Undo::Host { cmd } => executor.run(&cmd.argv, cmd, false).await.map(drop).map_err(UndoError::from),
                Undo::DeleteObject { .. } | Undo::CreateObject { .. } => {
                    if client.is_none() {
                        client = Some(crate::kube_ops::connect(&cluster.kubeconfig, &cluster.context).await.ok());
                    }
                    match client.as_ref().and_then(|c| c.clone()) {
                        Some(c) => {
                            let kube = crate::kube_ops::Kube::new(c, crate::record::Recorder::default());
                            api_undo(&kube, &entry.undo).await
                        }
                        None => Err(UndoError::Unreachable { context: cluster.context.clone() }),
                    }
                }
            };
            match result {
                Ok(()) => {
                    self.file.lock().unwrap().entries[i].done = true;
                    if let Err(e) = self.save() {
                        errors.push(e);
                    }
                }
                Err(source) => errors.push(JournalError::Undo { what: entry.what.clone(), source: Box::new(source) }),
            }
        }
        if errors.is_empty() {
            if let Some(path) = &self.path {
                let _ = std::fs::remove_file(path);
                self.remove_lock_file(path);
            }
        }
        errors
    }

    /// With the journal gone, its lock file goes too, by whoever holds it: this process if it does,
    /// else nobody else may (a training session's journal, replayed by `faultlab reset` after the
    /// run that made it ended).
    fn remove_lock_file(&self, path: &Path) {
        let lock_file = lock_path(path);
        let held_here = self.lock.is_some();
        if held_here || (std::fs::symlink_metadata(&lock_file).is_ok_and(|m| m.is_file()) && matches!(try_lock(&lock_file), Ok(Some(_)))) {
            let _ = std::fs::remove_file(&lock_file);
        }
    }
}

/// Carry out an API undo (delete or re-create an object) with `kube`.
async fn api_undo(kube: &crate::kube_ops::Kube, undo: &Undo) -> Result<(), UndoError> {
    match undo {
        Undo::DeleteObject { api_version, kind, namespace, name } => {
            let ar = crate::kube_ops::resource(api_version, kind);
            Ok(kube.delete_dynamic(&ar, namespace.as_deref(), name).await?)
        }
        Undo::CreateObject { namespace, object } => {
            kube.create_object(namespace.as_deref(), object.clone()).await.map(drop).map_err(UndoError::from)
        }
        Undo::Node { .. } | Undo::Host { .. } => Ok(()),
    }
}

/// Replay with real processes.
pub async fn replay_for_real(journal: &Journal) -> Vec<JournalError> {
    journal.replay(&HostExecutor).await
}

/// Is the process that wrote a journal still alive?
pub fn pid_alive(pid: u32) -> bool {
    pid != 0 && unsafe { libc::kill(pid as i32, 0) } == 0
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::node::FakeExecutor;

    #[tokio::test]
    async fn replays_newest_first_and_removes_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let j = Journal::create(dir.path(), "run1", "demo", ClusterRef::default()).unwrap();
        let access = NodeAccess::Netns { netns: "n".into() };
        j.record("first", Undo::Node { access: access.clone(), cmd: Cmd::new(["echo", "1"]) }).unwrap();
        j.record("second", Undo::Host { cmd: Cmd::new(["echo", "2"]) }).unwrap();
        // What is on disk is what a crashed run would leave.
        let reopened = Journal::open(&dir.path().join("run1.json")).unwrap();
        assert_eq!(reopened.snapshot().entries.len(), 2);
        let fake = FakeExecutor::new();
        assert!(reopened.replay(fake.as_ref()).await.is_empty());
        assert_eq!(fake.lines(), vec!["echo 2", "ip netns exec n timeout -k 5 60 echo 1"]);
        assert!(!dir.path().join("run1.json").exists());
    }

    #[test]
    fn fault_state_is_on_disk_for_another_process() {
        let dir = tempfile::tempdir().unwrap();
        let j = Journal::create(dir.path(), "run4", "demo", ClusterRef::default()).unwrap();
        assert_eq!(j.state("route"), None);
        j.set_state("route", serde_json::json!({"gateway": "198.18.0.1", "device": "eth0"})).unwrap();
        let reopened = Journal::open(&dir.path().join("run4.json")).unwrap();
        assert_eq!(reopened.state("route"), Some(serde_json::json!({"gateway": "198.18.0.1", "device": "eth0"})));
        // A journal without state (an older file) still opens, and writes none.
        let k = Journal::create(dir.path(), "run5", "demo", ClusterRef::default()).unwrap();
        assert!(!std::fs::read_to_string(k.path().unwrap()).unwrap().contains("faultState"));
    }

    #[tokio::test]
    async fn recreating_an_object_is_journalled_as_data_and_planned_as_a_post() {
        let dir = tempfile::tempdir().unwrap();
        let j = Journal::create(dir.path(), "run3", "demo", ClusterRef::default()).unwrap();
        let sc = serde_json::json!({"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass", "metadata": {"name": "standard"}, "provisioner": "rancher.io/local-path"});
        j.record("re-create StorageClass standard", Undo::CreateObject { namespace: None, object: sc.clone() }).unwrap();
        let back = Journal::open(&dir.path().join("run3.json")).unwrap().snapshot();
        assert_eq!(back.entries[0].undo, Undo::CreateObject { namespace: None, object: sc });
        assert_eq!(back.entries[0].undo.describe_object().unwrap(), "POST /apis/storage.k8s.io/v1/storageclasses (StorageClass standard)");
        // A dry API records the call and succeeds.
        let rec = crate::record::Recorder::default();
        api_undo(&crate::kube_ops::Kube::dry(rec.clone()), &back.entries[0].undo).await.unwrap();
        assert_eq!(rec.entries().last().unwrap().line, "POST /apis/storage.k8s.io/v1/storageclasses (StorageClass standard)");
    }

    #[tokio::test]
    async fn a_failed_undo_is_kept_for_cleanup() {
        let dir = tempfile::tempdir().unwrap();
        let j = Journal::create(dir.path(), "run2", "demo", ClusterRef::default()).unwrap();
        j.record("ok", Undo::Host { cmd: Cmd::new(["true"]) }).unwrap();
        j.record("fails", Undo::Host { cmd: Cmd::new(["restore-thing"]) }).unwrap();
        let fake = FakeExecutor::new();
        fake.respond("restore-thing", crate::cmd::Output { status: 1, stdout: String::new(), stderr: "busy".into() });
        let errors = j.replay(fake.as_ref()).await;
        assert_eq!(errors.len(), 1);
        assert!(errors[0].to_string().contains("undo \"fails\" failed"));
        let left = Journal::open(&dir.path().join("run2.json")).unwrap().snapshot();
        assert_eq!(left.entries.iter().map(|e| e.done).collect::<Vec<_>>(), vec![true, false]);
    }

    #[tokio::test]
    async fn a_live_run_s_journal_is_not_claimed_and_a_dead_one_s_is_claimed_once() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("run6.json");
        let run = Journal::create(dir.path(), "run6", "demo", ClusterRef::default()).unwrap();
        run.record("undo", Undo::Host { cmd: Cmd::new(["true"]) }).unwrap();
        assert!(run.snapshot().locked);
        // The run holds its lock (another open file, as another process's would be).
        assert!(Journal::claim(&path).unwrap().is_none(), "a live run's journal");
        drop(run);
        // The run is gone (a process's locks go with it): one cleanup claims it, a second one cannot.
        let first = Journal::claim(&path).unwrap().expect("the dead run's journal");
        assert!(Journal::claim(&path).unwrap().is_none(), "claimed by the first cleanup");
        let fake = FakeExecutor::new();
        assert!(first.replay(fake.as_ref()).await.is_empty());
        assert_eq!(fake.lines(), vec!["true"]);
        assert!(!path.exists() && !lock_path(&path).exists(), "the journal and its lock file go together");
        drop(first);
        // A cleanup that took the lock as the journal went finds nothing, and leaves no lock file.
        assert!(Journal::claim(&path).unwrap().is_none());
        assert!(!lock_path(&path).exists());
    }

    #[tokio::test]
    async fn a_journal_opened_without_its_lock_takes_the_free_lock_file_with_it() {
        // faultlab reset replays a training session's journal, whose run ended long before.
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("run7.json");
        drop(Journal::create(dir.path(), "run7", "demo", ClusterRef::default()).unwrap());
        assert!(lock_path(&path).exists());
        assert!(Journal::open(&path).unwrap().replay(FakeExecutor::new().as_ref()).await.is_empty());
        assert!(!path.exists() && !lock_path(&path).exists());
    }

    #[test]
    fn a_second_run_of_the_same_id_cannot_take_a_live_run_s_journal() {
        let dir = tempfile::tempdir().unwrap();
        let _run = Journal::create(dir.path(), "run8", "demo", ClusterRef::default()).unwrap();
        let err = Journal::create(dir.path(), "run8", "demo", ClusterRef::default()).unwrap_err();
        assert!(err.to_string().contains("run8.lock"), "{err}");
    }

    #[test]
    fn an_older_journal_without_a_lock_reads_as_unlocked() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("old.json");
        let text = r#"{"apiVersion": "faultlab.dev/v1alpha1", "kind": "Journal", "runId": "old", "scenario": "demo", "pid": 1, "cluster": {"kubeconfig": "", "context": ""}, "entries": []}"#;
        crate::statefile::write(&path, text.as_bytes()).unwrap();
        assert!(!Journal::open(&path).unwrap().snapshot().locked);
    }
}
