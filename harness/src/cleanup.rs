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
    pub errors: Vec<CleanupError>,
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

/// Parse `docker ps` lines of `<cluster>\t<created unix seconds>` into faultlab clusters older than `age`.
pub fn stale_clusters(listing: &str, now_unix: u64, age: Duration) -> Vec<String> {
    let mut names: Vec<String> = listing
        .lines()
        .filter_map(|l| {
            let (name, created) = l.split_once('\t')?;
            let created: u64 = created.trim().parse().ok()?;
            (name.starts_with(NAME_PREFIX) && now_unix.saturating_sub(created) >= age.as_secs()).then(|| name.to_string())
        })
        .collect();
    names.sort();
    names.dedup();
    names
}

/// Delete faultlab's kind clusters (found by kind's label on node containers) older than `age`.
pub async fn clusters(age: Duration, out: &mut Cleaned) {
    let on_path = |p: &str| std::env::var_os("PATH").is_some_and(|path| std::env::split_paths(&path).any(|d| d.join(p).is_file()));
    if !on_path("docker") || !on_path("kind") {
        return;
    }
    // Container creation times come from `docker inspect`, as unix seconds.
    let list: Vec<String> = ["docker", "ps", "-aq", "--filter", &format!("label={CLUSTER_LABEL}")].iter().map(|s| s.to_string()).collect();
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
    let mut inspect: Vec<String> = vec!["docker".into(), "inspect".into(), "--format".into(), format!("{{{{index .Config.Labels \"{CLUSTER_LABEL}\"}}}}\t{{{{.Created.Unix}}}}")];
    inspect.extend(ids);
    let listing = match cmd::run_host(&inspect, None, Duration::from_secs(30), false).await {
        Ok(o) => o.stdout,
        Err(e) => {
            out.errors.push(CleanupError::ListClusters(e));
            return;
        }
    };
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default().as_secs();
    for name in stale_clusters(&listing, now, age) {
        match cmd::run_host(&delete_argv(&name, None), None, Duration::from_secs(300), false).await {
            Ok(_) => out.clusters_deleted.push(name),
            Err(source) => out.errors.push(CleanupError::DeleteCluster { name, source }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_old_faultlab_clusters_are_stale() {
        let listing = "faultlab-pause-missing-x7k2p\t1000\nfaultlab-pause-missing-x7k2p\t1000\nmy-dev-cluster\t10\nfaultlab-disk-full-b4c5d\t4000\n";
        assert_eq!(stale_clusters(listing, 4600, Duration::from_secs(3600)), vec!["faultlab-pause-missing-x7k2p"]);
        assert_eq!(stale_clusters(listing, 4600, Duration::ZERO).len(), 2);
    }
}
