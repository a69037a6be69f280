//! Event snapshots, asserted with insta under `expectations/<platform>/<scenario>.snap`.
//!
//! Review new or changed snapshots with `cargo insta review` (or read the `.snap.new` file and move it
//! over the `.snap`). Snapshots record what a real cluster did: never accept one you have not read.

use std::path::PathBuf;

use serde::Serialize;

use crate::events::Normalised;

/// What the snapshot comparison found.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase", tag = "result", content = "detail")]
pub enum SnapshotResult {
    Matched,
    /// Differs from the stored snapshot, or there is none: insta printed the diff and, outside CI,
    /// wrote `<scenario>.snap.new` for review.
    Mismatched(String),
    /// Not compared (dry run, or the run failed before the events were complete).
    Skipped(String),
}

/// `expectations/` at the workspace root (or `$FAULTLAB_EXPECTATIONS`).
pub fn expectations_dir() -> PathBuf {
    std::env::var_os("FAULTLAB_EXPECTATIONS")
        .map(PathBuf::from)
        .unwrap_or_else(|| crate::scenario::workspace_root().join("expectations"))
}

/// Where a scenario's snapshot lives.
pub fn path(platform: &str, scenario: &str) -> PathBuf {
    expectations_dir().join(platform).join(format!("{scenario}.snap"))
}

/// Compare events with the stored snapshot.
pub fn check(platform: &str, scenario: &str, events: &[Normalised]) -> SnapshotResult {
    let mut settings = insta::Settings::clone_current();
    settings.set_snapshot_path(expectations_dir().join(platform));
    settings.set_prepend_module_to_snapshot(false);
    settings.set_omit_expression(true);
    settings.set_description(format!("Events of scenario {scenario} on {platform}, normalised (faultlab)"));
    let name = scenario.to_string();
    let events = events.to_vec();
    let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        settings.bind(|| insta::assert_yaml_snapshot!(name, events));
    }));
    match outcome {
        Ok(()) => SnapshotResult::Matched,
        Err(payload) => {
            let text = payload
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| payload.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_else(|| "snapshot assertion failed".into());
            SnapshotResult::Mismatched(format!("{text} ({})", path(platform, scenario).display()))
        }
    }
}
