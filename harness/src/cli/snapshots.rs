//! `faultlab snapshots review|accept`: the snapshots a run wrote, reviewed without Rust tools.

use std::io::IsTerminal;
use std::path::Path;

use anyhow::Result;

use crate::cli::out::{exit, status};
use crate::SnapshotsCommand;

pub fn snapshots(dir: &Path, expectations: Option<&Path>, command: SnapshotsCommand) -> Result<()> {
    let store = faultlab::snapshot::Store::for_set(dir, expectations)?;
    match command {
        SnapshotsCommand::Review { from } => review_snapshots(&store, from.as_deref())?,
        SnapshotsCommand::Accept { name, platform, from: Some(from) } => {
            let platform = platform.expect("clap requires --platform with --from");
            for p in store.accept_from(&from, &platform, name.as_deref())? {
                out!("accepted {} on {} from {}: {}", p.name, p.platform, p.new.display(), p.snap.display());
            }
        }
        SnapshotsCommand::Accept { name, platform, from: None } => {
            let name = name.expect("clap requires NAME without --from");
            let accepted = store.accept(&name, platform.as_deref())?;
            out!("accepted {} on {}: {}", accepted.name, accepted.platform, accepted.snap.display());
        }
    }
    Ok(())
}

/// `faultlab snapshots review [--from DIR]`: on a terminal ask about each; otherwise list them, exit
/// status 1 if any wait.
fn review_snapshots(store: &faultlab::snapshot::Store, from: Option<&std::path::Path>) -> Result<()> {
    let colour = std::io::stdout().is_terminal() && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty());
    let mut out = std::io::stdout().lock();
    if std::io::stdin().is_terminal() {
        faultlab::snapshot::review(store, from, &mut std::io::stdin().lock(), &mut out, colour)?;
        return Ok(());
    }
    let waiting = faultlab::snapshot::list_pending(store, from, &mut out, colour)?;
    drop(out);
    if waiting > 0 {
        exit(status::FAILED);
    }
    Ok(())
}
