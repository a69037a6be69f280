//! `faultlab cleanup`: undo what crashed runs left, and delete stale faultlab kind clusters.

use std::time::Duration;

use thiserror::Error;

use crate::cmd;
use crate::journal::{self, Journal};
use crate::provider::kind::{delete_argv, CLUSTER_LABEL, NAME_PREFIX};

#[derive(Debug, Error)]
pub enum CleanupError {
    #[error(transparent)]
    Journal(#[from] journal::JournalError),
    #[error("listing kind clusters failed: {0}")]
    ListClusters(#[source] cmd::CmdError),
    #[error("deleting kind cluster {name} failed: {source}")]
    DeleteCluster {
        name: String,
        #[source]
        source: cmd::CmdError,
    },
}

/// What cleanup did.
#[derive(Debug, Default)]
pub struct Cleaned {
    pub journals_replayed: Vec<String>,
    pub journals_skipped: Vec<String>,
    pub clusters_deleted: Vec<String>,
    pub clusters_skipped: Vec<String>,
    /// Why kind clusters were not looked for (Docker does not answer), if they were not.
    pub clusters_unchecked: Option<String>,
    pub errors: Vec<CleanupError>,
}

/// `docker version --format '{{.Server.Version}}'`: does a Docker daemon answer?
pub fn docker_ping_argv() -> Vec<String> {
    ["docker", "version", "--format", "{{.Server.Version}}"].map(String::from).to_vec()
}

/// Replay every journal whose run is gone (or all, with `force`).
pub async fn journals(force: bool, out: &mut Cleaned) {
    for path in Journal::list(&journal::journal_dir()) {
        let journal = match Journal::open(&path) {
            Ok(j) => j,
            Err(e) => {
                out.errors.push(e.into());
                continue;
            }
        };
        let file = journal.snapshot();
        if !force && file.pid != std::process::id() && journal::pid_alive(file.pid) {
            out.journals_skipped.push(format!("{} (run {} still running as pid {})", path.display(), file.run_id, file.pid));
            continue;
        }
        let errors = journal::replay_for_real(&journal).await;
        if errors.is_empty() {
            out.journals_replayed.push(format!("{} ({} undo step(s))", file.run_id, file.entries.iter().filter(|e| !e.done).count()));
        }
        out.errors.extend(errors.into_iter().map(CleanupError::from));
    }
}

/// The `docker inspect --format` template cleanup lists clusters with: kind's cluster label and the
/// container's creation time. Docker reports `Created` as an RFC 3339 string with nanoseconds (it is
/// not a time value, so `.Created.Unix` does not work with Docker).
pub fn inspect_format() -> String {
    format!("{{{{index .Config.Labels \"{CLUSTER_LABEL}\"}}}}\t{{{{.Created}}}}")
}

/// Parse `docker inspect` lines of `<cluster>\t<created, RFC 3339>` into the faultlab clusters whose
/// newest node is at least `age` old. Lines that do not parse are skipped.
pub fn stale_clusters(listing: &str, now_unix: i64, age: Duration) -> Vec<String> {
    let mut newest: std::collections::BTreeMap<String, i64> = Default::default();
    for line in listing.lines() {
        let Some((name, created)) = line.split_once('\t') else { continue };
        let Ok(created) = created.trim().parse::<jiff::Timestamp>() else { continue };
        if !name.starts_with(NAME_PREFIX) {
            continue;
        }
        let e = newest.entry(name.to_string()).or_insert(i64::MIN);
        *e = (*e).max(created.as_second());
    }
    newest
        .into_iter()
        .filter(|(_, created)| now_unix.saturating_sub(*created) >= age.as_secs() as i64)
        .map(|(name, _)| name)
        .collect()
}

/// The pid of the live faultlab process that created `cluster`, if it still runs (its `owner` file).
pub fn live_owner(cluster: &str) -> Option<u32> {
    let owner = journal::state_dir().join("kind").join(cluster).join("owner");
    let pid: u32 = std::fs::read_to_string(owner).ok()?.trim().parse().ok()?;
    (pid != std::process::id() && journal::pid_alive(pid)).then_some(pid)
}

/// Delete faultlab's kind clusters (found by kind's label on node containers) older than `age`. A
/// cluster whose run is still alive is skipped unless `force`.
pub async fn clusters(age: Duration, force: bool, out: &mut Cleaned) {
    let on_path = |p: &str| std::env::var_os("PATH").is_some_and(|path| std::env::split_paths(&path).any(|d| d.join(p).is_file()));
    if !on_path("docker") || !on_path("kind") {
        return;
    }
    // kind and a Docker client without a daemon (or with DOCKER_HOST pointing at one that is down):
    // there is nothing cleanup could delete, which is not an error of the cleanup.
    if let Err(e) = cmd::run_host(&docker_ping_argv(), None, Duration::from_secs(30), false).await {
        let why = e.to_string().lines().rfind(|l| !l.trim().is_empty()).unwrap_or_default().trim().to_string();
        out.clusters_unchecked = Some(format!("Docker does not answer ({why}): no kind cluster was looked for"));
        return;
    }
    let list: Vec<String> = ["docker", "ps", "-aq", "--filter", CLUSTER_LABEL_FILTER].iter().map(|s| s.to_string()).collect();
    let ids = match cmd::run_host(&list, None, Duration::from_secs(30), false).await {
        Ok(o) => o.stdout.split_whitespace().map(str::to_owned).collect::<Vec<_>>(),
        Err(e) => {
            out.errors.push(CleanupError::ListClusters(e));
            return;
        }
    };
    if ids.is_empty() {
        return;
    }
    let mut inspect: Vec<String> = vec!["docker".into(), "inspect".into(), "--format".into(), inspect_format()];
    inspect.extend(ids);
    let listing = match cmd::run_host(&inspect, None, Duration::from_secs(30), false).await {
        Ok(o) => o.stdout,
        Err(e) => {
            out.errors.push(CleanupError::ListClusters(e));
            return;
        }
    };
    let now = jiff::Timestamp::now().as_second();
    for name in stale_clusters(&listing, now, age) {
        if !force {
            if let Some(pid) = live_owner(&name) {
                out.clusters_skipped.push(format!("{name} (its run is still running as pid {pid}; --force deletes it anyway)"));
                continue;
            }
        }
        match cmd::run_host(&delete_argv(&name, None), None, Duration::from_secs(300), false).await {
            Ok(_) => {
                let _ = std::fs::remove_dir_all(journal::state_dir().join("kind").join(&name));
                out.clusters_deleted.push(name)
            }
            Err(source) => out.errors.push(CleanupError::DeleteCluster { name, source }),
        }
    }
}

const CLUSTER_LABEL_FILTER: &str = "label=io.x-k8s.kind.cluster";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_old_faultlab_clusters_are_stale() {
        // One line per node container, as `docker inspect --format "<inspect_format()>"` prints them.
        let listing = "faultlab-pause-missing-x7k2p\t1970-01-01T00:16:40.123456789Z\n\
                       faultlab-pause-missing-x7k2p\t1970-01-01T00:16:40Z\n\
                       my-dev-cluster\t1970-01-01T00:00:10Z\n\
                       faultlab-disk-full-b4c5d\t1970-01-01T01:06:40.5Z\n\
                       faultlab-garbled\tyesterday\n";
        assert_eq!(stale_clusters(listing, 4600, Duration::from_secs(3600)), vec!["faultlab-pause-missing-x7k2p"]);
        assert_eq!(stale_clusters(listing, 4600, Duration::ZERO), vec!["faultlab-disk-full-b4c5d", "faultlab-pause-missing-x7k2p"]);
    }

    #[test]
    fn a_cluster_is_as_young_as_its_newest_node() {
        let listing = "faultlab-a-11111\t1970-01-01T00:00:00Z\nfaultlab-a-11111\t1970-01-01T01:00:00Z\n";
        assert!(stale_clusters(listing, 3600 + 60, Duration::from_secs(3600)).is_empty());
        assert_eq!(stale_clusters(listing, 7200, Duration::from_secs(3600)), vec!["faultlab-a-11111"]);
    }

    #[test]
    fn the_inspect_template_reads_the_label_and_the_creation_string() {
        assert_eq!(inspect_format(), "{{index .Config.Labels \"io.x-k8s.kind.cluster\"}}\t{{.Created}}");
        assert_eq!(CLUSTER_LABEL_FILTER, format!("label={CLUSTER_LABEL}"));
    }
}
