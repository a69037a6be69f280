//! `faultlab cleanup`: undo what crashed runs left, and delete stale faultlab kind clusters.

use std::time::Duration;

use thiserror::Error;

use crate::journal::{self, Journal};

#[derive(Debug, Error)]
pub enum CleanupError {
    #[error(transparent)]
    Journal(#[from] journal::JournalError),
    #[error(transparent)]
    Clusters(#[from] crate::provider::ProviderError),
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

/// Replay every journal whose run is gone (its lock free; or all, with `force`), except those in
/// `keep` (the journals of open training sessions: a person is working on what they broke).
pub async fn journals(force: bool, keep: &[std::path::PathBuf], out: &mut Cleaned) {
    let dir = match journal::journal_dir() {
        Ok(dir) => dir,
        Err(e) => {
            out.errors.push(e.into());
            return;
        }
    };
    for path in Journal::list(&dir) {
        if keep.contains(&path) {
            out.journals_skipped.push(format!("{} (an open training session's: `faultlab cleanup --sessions` undoes it too)", path.display()));
            continue;
        }
        // Its lock held while it is replayed, so two cleanups never replay one journal at once.
        let journal = match Journal::claim(&path) {
            Ok(Some(j)) => j,
            // Held: its run is alive (or another cleanup is at it). `--force` replays it anyway.
            Ok(None) if force => match Journal::open(&path) {
                Ok(j) => j,
                Err(_) if !path.exists() => continue,
                Err(e) => {
                    out.errors.push(e.into());
                    continue;
                }
            },
            Ok(None) => {
                if path.exists() {
                    out.journals_skipped.push(format!("{} (its run is still running: it holds {})", path.display(), journal::lock_path(&path).display()));
                }
                continue;
            }
            Err(e) => {
                out.errors.push(e.into());
                continue;
            }
        };
        let file = journal.snapshot();
        // A journal of an older faultlab, which held no lock: its pid is all there is to go by.
        if !force && !file.locked && file.pid != std::process::id() && journal::pid_alive(file.pid) {
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

/// Delete faultlab's kind clusters older than `age` whose runs are gone (or all of them, with
/// `force`), except those in `keep` (open training sessions'): the kind provider's sweep, on this
/// machine.
pub async fn clusters(age: Duration, force: bool, keep: &[String], out: &mut Cleaned) {
    let swept = crate::provider::kind::sweep(&crate::provider::LocalHost, &crate::record::Recorder::default(), age, force, keep).await;
    out.clusters_deleted.extend(swept.deleted);
    out.clusters_skipped.extend(swept.skipped);
    out.clusters_unchecked = swept.unchecked;
    out.errors.extend(swept.errors.into_iter().map(CleanupError::from));
}
