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
            let file = path(platform, scenario);
            let mut detail = format!("{text} ({})", file.display());
            // The diff insta printed can scroll away in a long log: name the differing events here too.
            if let Some(stored) = std::fs::read_to_string(&file).ok().and_then(|t| stored_events(&t)) {
                let (missing, unexpected) = difference(&stored, &events);
                for e in missing {
                    detail.push_str(&format!("\n    missing:    {}", one_line(e)));
                }
                for e in unexpected {
                    detail.push_str(&format!("\n    unexpected: {}", one_line(e)));
                }
            }
            SnapshotResult::Mismatched(detail)
        }
    }
}

/// The events of a stored snapshot (the YAML list after insta's header).
pub fn stored_events(text: &str) -> Option<Vec<Normalised>> {
    let body = text.strip_prefix("---\n")?.split_once("\n---\n")?.1;
    serde_saphyr::from_str(body).ok()
}

/// What the stored list has that the new one lacks, and the other way round.
pub fn difference<'a>(stored: &'a [Normalised], new: &'a [Normalised]) -> (Vec<&'a Normalised>, Vec<&'a Normalised>) {
    let missing = stored.iter().filter(|e| !new.contains(e)).collect();
    let unexpected = new.iter().filter(|e| !stored.contains(e)).collect();
    (missing, unexpected)
}

fn one_line(e: &Normalised) -> String {
    format!("{} {} {} ({}): {}", e.object, e.type_, e.reason, e.source, e.message)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ev(reason: &str, message: &str) -> Normalised {
        Normalised { object: "Pod/web-<id>".into(), type_: "Normal".into(), reason: reason.into(), source: "kubelet".into(), message: message.into() }
    }

    #[test]
    fn a_stored_snapshot_is_read_back_and_compared_event_by_event() {
        let text = "---\nsource: harness/src/snapshot.rs\ndescription: x\n---\n- object: Pod/web-<id>\n  type: Normal\n  reason: Pulled\n  source: kubelet\n  message: \"Container image \\\"x\\\" already present\"\n- object: Pod/web-<id>\n  type: Normal\n  reason: Killing\n  source: kubelet\n  message: Stopping container app\n";
        let stored = stored_events(text).unwrap();
        assert_eq!(stored, vec![ev("Pulled", "Container image \"x\" already present"), ev("Killing", "Stopping container app")]);
        let new = vec![ev("Pulled", "Container image \"x\" already present"), ev("BackOff", "Back-off")];
        let (missing, unexpected) = difference(&stored, &new);
        assert_eq!(missing, vec![&ev("Killing", "Stopping container app")]);
        assert_eq!(unexpected, vec![&ev("BackOff", "Back-off")]);
        assert!(stored_events("no header").is_none());
    }
}
