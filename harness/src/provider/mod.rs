//! Cluster providers: where a scenario runs.
//!
//! `kind` creates a cluster of its own per run and deletes it afterwards (unless `--keep`); `existing`
//! uses a kubeconfig context plus a node-access description, such as the one the test bed writes.
//! Nodes are found by label, never by guessed names.

use std::path::{Path, PathBuf};

use async_trait::async_trait;
use thiserror::Error;

use crate::cmd::CmdError;
use crate::datafile::DataFileError;
use crate::kube_ops::{Kube, KubeError};
use crate::node::NodeProfile;
use crate::record::Recorder;

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
}

/// A cluster to run on.
#[derive(Clone, Debug)]
pub struct Cluster {
    pub kubeconfig: PathBuf,
    pub context: String,
    /// Names the expectations directory, e.g. `k8s-1.20-containerd-1.6`. A kind cluster has none until
    /// [`Provider::platform`] has asked its nodes (a plan shows what decides it).
    pub platform: String,
    pub nodes: Vec<NodeProfile>,
    pub ownership: Ownership,
}

/// Creates (or connects to), lists nodes of, exports logs of, and deletes clusters.
#[async_trait]
pub trait Provider: Send + Sync {
    fn name(&self) -> &'static str;

    /// Create or connect. Host commands are recorded in `rec` (and only recorded in a dry run).
    async fn create(&self, rec: &Recorder, dry_run: bool) -> Result<Cluster, ProviderError>;

    /// The cluster's nodes, found by label.
    async fn nodes(&self, cluster: &Cluster, rec: &Recorder, dry_run: bool) -> Result<Vec<NodeProfile>, ProviderError>;

    /// The platform name (the expectations directory), once a client can reach the cluster. Default:
    /// the one `create` found (the test bed's description names it); kind asks the nodes.
    async fn platform(&self, cluster: &Cluster, _kube: &Kube) -> Result<String, ProviderError> {
        Ok(cluster.platform.clone())
    }

    /// Export logs to `dir` (default: nothing to export).
    async fn export_logs(&self, _cluster: &Cluster, _dir: &Path, _rec: &Recorder, _dry_run: bool) -> Result<(), ProviderError> {
        Ok(())
    }

    /// Delete what `create` made (default: nothing).
    async fn delete(&self, _cluster: &Cluster, _rec: &Recorder, _dry_run: bool) -> Result<(), ProviderError> {
        Ok(())
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
        (Ownership::Created { .. }, _) | (Ownership::TestBed, _) => Ok(()),
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
