//! `faultlab cleanup`: replay what crashed runs left (their journals), close training sessions with
//! `--sessions`, and delete stale faultlab kind clusters.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::Result;

use crate::cli::out::{exit, status};

pub async fn cleanup(force: bool, older_than: Duration, sessions: bool) -> Result<()> {
    let mut out = faultlab::cleanup::Cleaned::default();
    let open = faultlab::training::Session::all();
    let keep: Vec<PathBuf> = if sessions { Vec::new() } else { open.iter().map(|s| s.journal.clone()).collect() };
    faultlab::cleanup::journals(force, &keep, &mut out).await;
    for s in open.iter().filter(|_| sessions) {
        // Its journal replayed in full (the file is gone): the session has nothing left to train on.
        if !s.journal.exists() {
            match std::fs::remove_file(s.path()) {
                Ok(()) => out!("closed training session {}", s.id),
                Err(e) => eprintln!("error: closing training session {}: removing {}: {e}", s.id, s.path().display()),
            }
        }
    }
    for problem in faultlab::training::Session::problems() {
        eprintln!("warning: {problem}");
    }
    // The kind clusters of sessions still open (after --sessions closed what it could).
    let training: Vec<String> = faultlab::training::Session::all().into_iter().filter_map(|s| s.cluster.kind_cluster).collect();
    faultlab::cleanup::clusters(older_than, force, &training, &mut out).await;
    for j in &out.journals_replayed {
        out!("undone: {j}");
    }
    for j in &out.journals_skipped {
        out!("skipped: {j}");
    }
    for c in &out.clusters_deleted {
        out!("deleted kind cluster: {c}");
    }
    for c in &out.clusters_skipped {
        out!("skipped kind cluster: {c}");
    }
    if let Some(why) = &out.clusters_unchecked {
        out!("kind clusters: {why}");
    }
    let skipped = !out.journals_skipped.is_empty() || !out.clusters_skipped.is_empty();
    if out.journals_replayed.is_empty() && out.clusters_deleted.is_empty() && !skipped && out.errors.is_empty() {
        out!("nothing to clean up");
    }
    if !out.errors.is_empty() {
        for e in &out.errors {
            eprintln!("error: {e}");
        }
        exit(status::ENVIRONMENT);
    }
    Ok(())
}
