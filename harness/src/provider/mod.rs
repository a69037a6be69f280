//! Cluster providers: where a scenario runs.
//!
//! `kind` creates a cluster of its own per run and deletes it afterwards (unless `--keep`); `existing`
//! uses a kubeconfig context plus a node-access description, such as the one the test bed writes.
//! Nodes are found by label, never by guessed names.

use std::path::{Path, PathBuf};

use async_trait::async_trait;
use thiserror::Error;

use crate::cmd::{self, CmdError, Output};
use crate::datafile::DataFileError;
use crate::kube_ops::{Kube, KubeError};
use crate::node::{NodeProfile, RuntimeError};
use crate::record::{Channel, Recorder};

pub mod existing;
pub mod kind;

#[derive(Debug, Error)]
pub enum ProviderError {
    #[error("{what} is not installed or not on PATH ({program}); {hint}")]
    MissingBinary { what: &'static str, program: String, hint: &'static str },
    #[error("creating kind cluster {name} failed: {source}")]
    Create {
        name: String,
        #[source]
        source: CmdError,
    },
    #[error("listing kind clusters failed: {source}")]
    ListClusters {
        #[source]
        source: CmdError,
    },
    #[error("listing the nodes of {name} failed: {source}")]
    ListNodes {
        name: String,
        #[source]
        source: CmdError,
    },
    #[error("{source}\nthen, cleaning up after it:\n{}", .errors.join("\n"))]
    CleanupAfterCreate {
        #[source]
        source: Box<ProviderError>,
        errors: Vec<String>,
    },
    #[error("loading workload images into the nodes of {name} failed: {source}")]
    LoadImages {
        name: String,
        #[source]
        source: CmdError,
    },
    #[error("kind cluster {name} (yours, --cluster): {why}")]
    Existing { name: String, why: String },
    /// A scenario refused on a kind cluster of the user's: its fault needs a cluster made for it.
    #[error("kind cluster {name} (yours, --cluster): {why}")]
    RefusedOnExisting { name: String, why: String },
    /// Nodes of another architecture than the host's, which kind cannot run.
    #[error("{message}")]
    OtherArchitecture { message: String },
    /// The node image lacks a part the scenario needs of every node (faultlab's CSI node plugin):
    /// found from its labels, before any cluster is made.
    #[error("node image {image}: {why}")]
    ImageLacks { image: String, why: String },
    /// `--cluster NAME` names a kind cluster that is not there: nothing to run on.
    #[error("kind cluster {name} (yours, --cluster): `kind get clusters` does not list it (it lists: {known})")]
    NoSuchCluster { name: String, known: String },
    #[error("cluster {name} has no node labelled {label}")]
    NoNodes { name: String, label: String },
    #[error("exporting logs of {name} failed: {source}")]
    ExportLogs {
        name: String,
        #[source]
        source: CmdError,
    },
    #[error("deleting kind cluster {name} failed: {source}")]
    Delete {
        name: String,
        #[source]
        source: CmdError,
    },
    #[error(transparent)]
    Description(#[from] DataFileError),
    #[error("no cluster is configured: {reason}")]
    NotConfigured { reason: String },
    #[error("kind config: {message}")]
    KindConfig { message: String },
    #[error("node image {image}: {message}")]
    NodeImageLabels { image: String, message: String },
    #[error("cannot tell the cluster's platform: {message}")]
    Platform { message: String },
    #[error("cannot tell the cluster's platform: asking the API for the nodes' info failed: {source}")]
    NodeInfo {
        #[source]
        source: KubeError,
    },
    #[error("cannot tell the cluster's platform: reading the cgroup version of node {node} failed: {source}")]
    ReadCgroup {
        node: String,
        #[source]
        source: CmdError,
    },
    #[error("cannot tell the cluster's platform: node {node}: {source}")]
    CgroupVersion {
        node: String,
        #[source]
        source: RuntimeError,
    },
    #[error("{} names platform {described}, but its nodes report {detected} ({nodes}): correct its `platform`, or remove it and the nodes name the platform", description.display())]
    PlatformMismatch { description: PathBuf, described: String, detected: String, nodes: String },
    #[error("not enough room on the host's disk: {message}")]
    HostDisk { message: String },
    #[error("asking Docker for its root directory (to check the host's free space) failed: {source}")]
    DockerRoot {
        #[source]
        source: CmdError,
    },
    #[error("cannot read the free space of {} (Docker's root): {source}", path.display())]
    FreeSpace {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("cannot write {}: {source}", path.display())]
    Write {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

/// Who says faults may be injected into this cluster.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Ownership {
    /// faultlab created it (kind), and deletes it.
    Created { kind_cluster: String },
    /// The test bed's description declares it.
    TestBed,
    /// A cluster faultlab did not create; allowed only by `--allow-existing <context>`.
    Foreign,
    /// A kind cluster of the user's, named on the command line (`--cluster NAME`, `--context
    /// kind-NAME`): faults go into it, faultlab creates and deletes nothing of it.
    Named { kind_cluster: String },
}

/// A cluster to run on.
#[derive(Clone, Debug)]
pub struct Cluster {
    pub kubeconfig: PathBuf,
    pub context: String,
    /// Names the expectations directory, e.g. `k8s-1.20-containerd-1.6-amd64`. A kind cluster has none until
    /// [`Provider::platform`] has asked its nodes (a plan shows what decides it); an existing one has
    /// what its description says (if anything), which [`Provider::platform`] checks against its nodes.
    pub platform: String,
    pub nodes: Vec<NodeProfile>,
    pub ownership: Ownership,
}

/// This machine as a provider uses it: the commands it runs here (kind, docker) and what it reads and
/// writes of this host. [`LocalHost`] does it; [`PlannedHost`] is a plan's, which runs and writes
/// nothing and answers from a script, so a provider has no plan branches.
#[async_trait]
pub trait Host: Send + Sync {
    /// Run `cmd` here (its argv, within its timeout), written to `rec` first.
    async fn run(&self, rec: &Recorder, cmd: cmd::Cmd) -> Result<Output, CmdError>;
    /// Is `program` on PATH? (a plan needs none)
    fn has(&self, program: &str) -> bool;
    /// Free MiB of the file system holding `path`; `None` in a plan, which does not look.
    fn free_mib(&self, path: &Path) -> std::io::Result<Option<u64>>;
    /// Write a file (a plan writes nothing).
    fn write(&self, path: &Path, contents: &str) -> Result<(), ProviderError>;
    /// Remove a directory and what it holds, if it is there (a plan removes nothing).
    fn remove_dir_all(&self, path: &Path);
    /// Make the lock file at `path` (its directories private, as [`Host::write`] makes them), take it
    /// alone and write this process's pid into it: held while the file lives ([`kind::owner_lock`]).
    /// `None` in a plan, which holds nothing; an error if another process holds it.
    fn hold(&self, path: &Path) -> Result<Option<std::fs::File>, ProviderError>;
    /// A refusal about this host (a node architecture it cannot run): a run stops on it, a plan notes
    /// it and goes on, since it only shows what a run would do.
    fn refuse(&self, rec: &Recorder, err: ProviderError) -> Result<(), ProviderError>;
}

/// This machine.
pub struct LocalHost;

#[async_trait]
impl Host for LocalHost {
    async fn run(&self, rec: &Recorder, cmd: cmd::Cmd) -> Result<Output, CmdError> {
        rec.push(Channel::Host, cmd::shell_join(&cmd.argv));
        cmd::run_host(&cmd.argv, cmd.stdin.as_ref(), cmd.timeout, false).await
    }

    fn has(&self, program: &str) -> bool {
        std::env::var_os("PATH").is_some_and(|p| std::env::split_paths(&p).any(|d| d.join(program).is_file()))
    }

    fn free_mib(&self, path: &Path) -> std::io::Result<Option<u64>> {
        kind::free_mib(path).map(Some)
    }

    /// The file readable by its owner only (a kubeconfig holds a client key), its directories too.
    fn write(&self, path: &Path, contents: &str) -> Result<(), ProviderError> {
        use std::io::Write;
        use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
        if let Some(dir) = path.parent() {
            std::fs::DirBuilder::new().recursive(true).mode(0o700).create(dir).map_err(|source| ProviderError::Write { path: dir.to_owned(), source })?;
        }
        let _ = std::fs::remove_file(path);
        std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(path)
            .and_then(|mut f| f.write_all(contents.as_bytes()))
            .map_err(|source| ProviderError::Write { path: path.to_owned(), source })
    }

    fn remove_dir_all(&self, path: &Path) {
        let _ = std::fs::remove_dir_all(path);
    }

    fn hold(&self, path: &Path) -> Result<Option<std::fs::File>, ProviderError> {
        use std::io::Write;
        use std::os::unix::fs::DirBuilderExt;
        let err = |source: std::io::Error| ProviderError::Write { path: path.to_owned(), source };
        if let Some(dir) = path.parent() {
            std::fs::DirBuilder::new().recursive(true).mode(0o700).create(dir).map_err(|source| ProviderError::Write { path: dir.to_owned(), source })?;
        }
        let mut file = crate::statefile::open_append(path).map_err(|e| err(std::io::Error::other(e.to_string())))?;
        match file.try_lock() {
            Ok(()) => {}
            Err(std::fs::TryLockError::WouldBlock) => return Err(err(std::io::Error::other("another faultlab process holds it"))),
            Err(std::fs::TryLockError::Error(e)) => return Err(err(e)),
        }
        file.set_len(0).and_then(|()| writeln!(file, "{}", std::process::id())).map_err(err)?;
        Ok(Some(file))
    }

    fn refuse(&self, _rec: &Recorder, err: ProviderError) -> Result<(), ProviderError> {
        Err(err)
    }
}

/// A plan's host: commands are written to the record and answered from a script by what they ask
/// ([`cmd::Ask`]; the last answer for an ask wins; by default success with no output).
pub struct PlannedHost {
    exec: crate::node::ScriptedExecutor,
}

impl PlannedHost {
    pub fn new(answers: Vec<(cmd::Ask, Output)>) -> Self {
        PlannedHost { exec: crate::node::ScriptedExecutor::new(answers) }
    }
}

#[async_trait]
impl Host for PlannedHost {
    async fn run(&self, rec: &Recorder, cmd: cmd::Cmd) -> Result<Output, CmdError> {
        use crate::node::Executor;
        rec.push(Channel::Host, cmd::shell_join(&cmd.argv));
        self.exec.run(&cmd.argv, &cmd, false).await
    }

    fn has(&self, _program: &str) -> bool {
        true
    }

    fn free_mib(&self, _path: &Path) -> std::io::Result<Option<u64>> {
        Ok(None)
    }

    fn write(&self, _path: &Path, _contents: &str) -> Result<(), ProviderError> {
        Ok(())
    }

    fn remove_dir_all(&self, _path: &Path) {}

    fn hold(&self, _path: &Path) -> Result<Option<std::fs::File>, ProviderError> {
        Ok(None)
    }

    fn refuse(&self, rec: &Recorder, err: ProviderError) -> Result<(), ProviderError> {
        rec.push(Channel::Note, format!("plan only: {}", err.to_string().trim_start_matches("kind config: ")));
        Ok(())
    }
}

/// Where scenarios run: provisions a cluster (or connects to one), lists its nodes, collects its logs
/// and releases it. Its commands on this machine go through its [`Host`].
#[async_trait]
pub trait Provider: Send + Sync {
    fn name(&self) -> &'static str;

    /// Create or connect. Host commands are written to `rec`.
    async fn provision(&self, rec: &Recorder) -> Result<Cluster, ProviderError>;

    /// The cluster's nodes, found by label.
    async fn nodes(&self, cluster: &Cluster, rec: &Recorder) -> Result<Vec<NodeProfile>, ProviderError>;

    /// The platform name (the expectations directory), once a client can reach the cluster. Default:
    /// the one `provision` found; kind and existing ask the nodes (their `status.nodeInfo` through the
    /// API, and a node's cgroup version: `-cgroup2` before the architecture on cgroup v2).
    async fn platform(&self, cluster: &Cluster, _kube: &Kube) -> Result<String, ProviderError> {
        Ok(cluster.platform.clone())
    }

    /// Collect the cluster's logs into `dir` (default: nothing to collect).
    async fn collect_logs(&self, _cluster: &Cluster, _dir: &Path, _rec: &Recorder) -> Result<(), ProviderError> {
        Ok(())
    }

    /// Release what `provision` made (default: nothing).
    async fn release(&self, _cluster: &Cluster, _rec: &Recorder) -> Result<(), ProviderError> {
        Ok(())
    }
}

impl ProviderError {
    /// Whether this is the platform refusing the scenario (it cannot or may not run it here, or the
    /// cluster named is not there), not a step that failed: the scenario is reported `refused`.
    pub fn is_refusal(&self) -> bool {
        matches!(self, ProviderError::RefusedOnExisting { .. } | ProviderError::OtherArchitecture { .. } | ProviderError::ImageLacks { .. } | ProviderError::NoSuchCluster { .. })
    }
}

/// Context names that look like production.
pub fn looks_like_production(context: &str) -> bool {
    let lower = context.to_ascii_lowercase();
    lower.split(|c: char| !c.is_ascii_alphanumeric()).any(|w| matches!(w, "prod" | "production" | "prd" | "live"))
}

#[derive(Debug, Error, PartialEq, Eq)]
pub enum SafetyError {
    #[error("refusing to inject faults into context {context:?}: faultlab did not create it and no test-bed description declares it; pass --allow-existing {context} if it is yours to break")]
    NotOurs { context: String },
    #[error("refusing context {context:?}: it looks like production (its name says so); faultlab never injects faults there. If it is not production, give it another name")]
    Production { context: String },
    #[error("--allow-existing names {allowed:?}, but the context is {context:?}")]
    WrongContext { allowed: String, context: String },
}

/// May faults be injected into this cluster?
pub fn check_safety(cluster: &Cluster, allow_existing: Option<&str>) -> Result<(), SafetyError> {
    let context = cluster.context.clone();
    if looks_like_production(&context) {
        return Err(SafetyError::Production { context });
    }
    match (&cluster.ownership, allow_existing) {
        (Ownership::Created { .. }, _) | (Ownership::TestBed, _) | (Ownership::Named { .. }, _) => Ok(()),
        (Ownership::Foreign, Some(allowed)) if allowed == context => Ok(()),
        (Ownership::Foreign, Some(allowed)) => Err(SafetyError::WrongContext { allowed: allowed.into(), context }),
        (Ownership::Foreign, None) => Err(SafetyError::NotOurs { context }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cluster(context: &str, ownership: Ownership) -> Cluster {
        Cluster { kubeconfig: "k".into(), context: context.into(), platform: "p".into(), nodes: vec![], ownership }
    }

    #[test]
    fn safety() {
        assert!(check_safety(&cluster("faultlab-testbed", Ownership::TestBed), None).is_ok());
        assert!(check_safety(&cluster("kind-faultlab-ab12", Ownership::Created { kind_cluster: "faultlab-ab12".into() }), None).is_ok());
        assert_eq!(check_safety(&cluster("dev", Ownership::Foreign), None), Err(SafetyError::NotOurs { context: "dev".into() }));
        assert!(check_safety(&cluster("dev", Ownership::Foreign), Some("dev")).is_ok());
        assert!(matches!(check_safety(&cluster("dev", Ownership::Foreign), Some("stage")), Err(SafetyError::WrongContext { .. })));
        for prod in ["prod", "gke_acme_europe-west1_prod-cluster", "arn:aws:eks:us-east-1:1:cluster/production", "live-eu"] {
            assert!(matches!(check_safety(&cluster(prod, Ownership::Foreign), Some(prod)), Err(SafetyError::Production { .. })), "{prod}");
        }
        assert!(!looks_like_production("product-catalog-dev") && !looks_like_production("olive"));
    }
}
