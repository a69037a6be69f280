//! Event snapshots: where a scenario set keeps them, the comparison, and their review.
//!
//! A scenario set is a directory of scenario files; its snapshots live beside it, in
//! `<set>/expectations/<platform>/<scenario>.snap`. faultlab's own set (`scenarios/` at the workspace
//! root) keeps `<root>/expectations/`. `--expectations DIR` (or `FAULTLAB_EXPECTATIONS`) puts them in
//! `DIR/<platform>/` instead; a set that is not faultlab's own is refused faultlab's `expectations/`.
//!
//! The files are insta's format (a `---` header with `source` and `description`, then the events as
//! YAML, written exactly as insta writes them), so `cargo insta review` still works on them. faultlab
//! reads and writes them itself rather than through insta's assertion macro, whose outcome depends on
//! the environment (`INSTA_UPDATE=always` or `INSTA_FORCE_PASS=1` would accept or pass events nobody
//! read; `CI` stops the `.snap.new` file being written), which reports a mismatch by panicking, and
//! which asks `cargo metadata` for a workspace an installed binary does not have. A run whose events
//! differ from the reviewed `.snap` (or that has none) writes `<scenario>.snap.new` beside it, in CI
//! too, and never touches the `.snap`: that takes a person (`faultlab snapshots review` or `accept`).
//! Snapshots record what a real cluster did: never accept one you have not read.
//!
//! The comparison's outcome is the scenario's snapshot status ([`SnapshotStatus`]), apart from its
//! verdict (gates, fix and recovery): `matched`; `changed`, which fails the run; `new` (no reviewed
//! snapshot on the platform), which passes it with a notice, unless `--strict-snapshots`.
//! Pending snapshots written elsewhere (a CI run's artefact: `<platform>/<scenario>.snap.new`) are
//! reviewed and accepted from there with `--from DIR` ([`Store::pending_from`], [`Store::accept_from`]).
//! Every pending file is read back checked ([`read_back`], [`read_pending`]) and written whole or not
//! at all, never through a link.

use std::io::{BufRead, Write};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use thiserror::Error;

use crate::events::{Normalised, Withheld};

/// A scenario's snapshot status: how the events of a run whose gates, fix and recovery held compare
/// with the reviewed snapshot of its platform. `changed` fails the run; `new` passes it with a notice
/// (and fails it under `--strict-snapshots`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, serde::Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum SnapshotStatus {
    /// Equal to the reviewed snapshot.
    Matched,
    /// Differs from the reviewed snapshot (or that file cannot be read as one).
    Changed,
    /// No reviewed snapshot of this scenario on this platform yet.
    New,
}

impl SnapshotStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            SnapshotStatus::Matched => "matched",
            SnapshotStatus::Changed => "changed",
            SnapshotStatus::New => "new",
        }
    }
}

/// What the snapshot comparison found. In JSON it is two fields of the scenario's report:
/// `"snapshot": "matched" | "changed" | "new" | null` (null: not compared) and `"snapshot_detail"`, the
/// paragraph of a `changed` or `new` one or why it was not compared.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, serde::Deserialize)]
#[serde(into = "SnapshotFields", from = "SnapshotFields")]
pub enum SnapshotResult {
    Matched,
    /// Differs from the reviewed snapshot: one paragraph saying what differs and where the
    /// `.snap.new` file to review is.
    Changed(String),
    /// There is no reviewed snapshot: one paragraph saying where the `.snap.new` file to review is.
    New(String),
    /// Not compared (a plan, or the run failed before the events were complete).
    Skipped(String),
}

impl SnapshotResult {
    /// The status; none when the events were not compared.
    pub fn status(&self) -> Option<SnapshotStatus> {
        match self {
            SnapshotResult::Matched => Some(SnapshotStatus::Matched),
            SnapshotResult::Changed(_) => Some(SnapshotStatus::Changed),
            SnapshotResult::New(_) => Some(SnapshotStatus::New),
            SnapshotResult::Skipped(_) => None,
        }
    }

    /// The paragraph of a `changed` or `new` snapshot, or why it was not compared.
    pub fn detail(&self) -> Option<&str> {
        match self {
            SnapshotResult::Matched => None,
            SnapshotResult::Changed(d) | SnapshotResult::New(d) | SnapshotResult::Skipped(d) => Some(d),
        }
    }
}

/// [`SnapshotResult`] as the fields of a report (flattened into it).
#[derive(Clone, Serialize, Deserialize)]
struct SnapshotFields {
    #[serde(default)]
    snapshot: Option<StatusField>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    snapshot_detail: Option<String>,
}

/// The `snapshot` field: a status, or in a report of an older faultlab an object (`{"result":
/// "matched" | "mismatched" | "skipped", "detail": ...}`), read as the status it meant.
#[derive(Clone, Serialize, Deserialize)]
#[serde(untagged)]
enum StatusField {
    Status(SnapshotStatus),
    Older { result: String, detail: Option<String> },
}

/// The fields as faultlab writes them, for the report's JSON Schema (`faultlab schema --report`).
#[derive(schemars::JsonSchema)]
#[allow(dead_code)] // read by the schema only
struct SnapshotFieldsWritten {
    /// How the events compare with the reviewed snapshot; null: not compared.
    snapshot: Option<SnapshotStatus>,
    /// The paragraph of a `changed` or `new` snapshot, or why it was not compared.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    snapshot_detail: Option<String>,
}

impl schemars::JsonSchema for SnapshotResult {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "SnapshotResult".into()
    }

    fn json_schema(generator: &mut schemars::SchemaGenerator) -> schemars::Schema {
        SnapshotFieldsWritten::json_schema(generator)
    }
}

impl From<SnapshotResult> for SnapshotFields {
    fn from(r: SnapshotResult) -> SnapshotFields {
        SnapshotFields { snapshot: r.status().map(StatusField::Status), snapshot_detail: r.detail().map(str::to_owned) }
    }
}

impl From<SnapshotFields> for SnapshotResult {
    fn from(f: SnapshotFields) -> SnapshotResult {
        let (status, detail) = match f.snapshot {
            Some(StatusField::Status(s)) => (Some(s), f.snapshot_detail),
            Some(StatusField::Older { result, detail }) => {
                // An older faultlab failed a first run with a paragraph that began so.
                let first = detail.as_deref().is_some_and(|d| d.starts_with("no reviewed snapshot yet"));
                let status = match result.as_str() {
                    "matched" => Some(SnapshotStatus::Matched),
                    "mismatched" if first => Some(SnapshotStatus::New),
                    "mismatched" => Some(SnapshotStatus::Changed),
                    _ => None,
                };
                (status, detail)
            }
            None => (None, f.snapshot_detail),
        };
        let detail = detail.unwrap_or_default();
        match status {
            Some(SnapshotStatus::Matched) => SnapshotResult::Matched,
            Some(SnapshotStatus::Changed) => SnapshotResult::Changed(detail),
            Some(SnapshotStatus::New) => SnapshotResult::New(detail),
            None => SnapshotResult::Skipped(detail),
        }
    }
}

#[derive(Debug, Error)]
pub enum SnapshotError {
    #[error(
        "refusing to keep the snapshots of scenario set {} in faultlab's own {}: that directory holds the reviewed snapshots of faultlab's scenarios. Leave --expectations (and FAULTLAB_EXPECTATIONS) out to keep them in {}, or name another directory",
        set.display(), own.display(), beside.display()
    )]
    OwnTree { set: PathBuf, own: PathBuf, beside: PathBuf },
    #[error("reading {}: {source}", path.display())]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{}: not a snapshot file (a `---` header, then a YAML list of events); it is left as it is", path.display())]
    Format { path: PathBuf },
    #[error("writing {}: {source}", path.display())]
    Write {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{what} {value:?} is not a plain name (lowercase letters, digits, '-', '_' and '.', starting with a letter or digit, no '..'), so it cannot name a snapshot file")]
    Name { what: &'static str, value: String },
    #[error("writing the snapshot {}: {source}", path.display())]
    Install {
        path: PathBuf,
        #[source]
        source: crate::atomic::AtomicError,
    },
    #[error("no snapshot of {name} waits for review in {}{}", dir.display(), if pending.is_empty() { String::new() } else { format!(" (waiting: {})", pending.join(", ")) })]
    NoPending { name: String, dir: PathBuf, pending: Vec<String> },
    #[error("{name} has snapshots waiting for review on several platforms ({}); pass --platform with one of them", platforms.join(", "))]
    Ambiguous { name: String, platforms: Vec<String> },
    #[error("reading the answer: {0}")]
    Answer(#[source] std::io::Error),
    #[error("--from {}: {why}", dir.display())]
    FromDir { dir: PathBuf, why: String },
    #[error("{}: not a pending snapshot: {why}", path.display())]
    NotPending { path: PathBuf, why: String },
    #[error("{}: not read back: it is {why}", path.display())]
    ReadBack { path: PathBuf, why: String },
    #[error("{}: its header says it holds the events of {header}, but its place says {place}: a snapshot renamed or moved to another platform's directory is not accepted", path.display())]
    Misplaced { path: PathBuf, header: String, place: String },
    #[error("{} holds no snapshot waiting for platform {wanted}, only for {}: pass --platform with the platform the run reported (each file lies in its platform's directory)", dir.display(), found.join(", "))]
    PlatformMismatch { dir: PathBuf, wanted: String, found: Vec<String> },
}

/// Where one scenario set's snapshots live.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Store {
    /// `<dir>/<platform>/<scenario>.snap`.
    pub dir: PathBuf,
    /// The scenario set's directory.
    pub set: PathBuf,
    /// The directory came from `--expectations` or `FAULTLAB_EXPECTATIONS`.
    pub overridden: bool,
}

/// faultlab's own scenario set: `scenarios/` at the workspace root.
pub fn own_set_dir() -> PathBuf {
    crate::scenario::workspace_root().join("scenarios")
}

/// faultlab's own snapshots: `expectations/` at the workspace root.
pub fn own_expectations_dir() -> PathBuf {
    crate::scenario::workspace_root().join("expectations")
}

/// `path` made absolute with symbolic links resolved, as far as it exists (the rest appended as is).
fn resolved(path: &Path) -> PathBuf {
    let absolute = if path.is_absolute() { path.to_path_buf() } else { std::env::current_dir().unwrap_or_default().join(path) };
    let mut existing = absolute.as_path();
    let mut rest = Vec::new();
    loop {
        if let Ok(real) = existing.canonicalize() {
            return rest.iter().rev().fold(real, |p, c| p.join(c));
        }
        match (existing.parent(), existing.file_name()) {
            (Some(parent), Some(name)) => {
                rest.push(name.to_owned());
                existing = parent;
            }
            _ => return absolute,
        }
    }
}

impl Store {
    /// The store of the set in `set` (a directory of scenario files). `expectations` (`--expectations`)
    /// overrides the location, else `FAULTLAB_EXPECTATIONS`; a set other than faultlab's own may not
    /// use faultlab's own `expectations/`.
    pub fn for_set(set: &Path, expectations: Option<&Path>) -> Result<Store, SnapshotError> {
        let env = std::env::var_os("FAULTLAB_EXPECTATIONS").filter(|v| !v.is_empty()).map(PathBuf::from);
        let chosen = expectations.map(Path::to_path_buf).or(env);
        Self::with(set, chosen, &own_set_dir(), &own_expectations_dir())
    }

    /// The store of the set a scenario file belongs to (its directory).
    pub fn for_scenario(file: &Path, expectations: Option<&Path>) -> Result<Store, SnapshotError> {
        let set = file.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."));
        Self::for_set(set, expectations)
    }

    fn with(set: &Path, chosen: Option<PathBuf>, own_set: &Path, own_expectations: &Path) -> Result<Store, SnapshotError> {
        let own = resolved(set) == resolved(own_set);
        let beside = if own { own_expectations.to_path_buf() } else { set.join("expectations") };
        let overridden = chosen.is_some();
        let dir = chosen.unwrap_or_else(|| beside.clone());
        if !own && resolved(&dir).starts_with(resolved(own_expectations)) {
            return Err(SnapshotError::OwnTree { set: set.to_path_buf(), own: own_expectations.to_path_buf(), beside });
        }
        Ok(Store { dir, set: set.to_path_buf(), overridden })
    }

    /// The reviewed snapshot of `scenario` on `platform`.
    pub fn path(&self, platform: &str, scenario: &str) -> PathBuf {
        self.dir.join(platform).join(format!("{scenario}.snap"))
    }

    /// The snapshot waiting for review beside it.
    pub fn new_path(&self, platform: &str, scenario: &str) -> PathBuf {
        self.dir.join(platform).join(format!("{scenario}.snap.new"))
    }

    /// The command a person runs to accept `scenario`'s snapshot: the flags that find this store.
    pub fn accept_command(&self, scenario: &str) -> String {
        format!("faultlab snapshots accept {scenario}{}", self.flags())
    }

    /// The command that reviews this store's snapshots.
    pub fn review_command(&self) -> String {
        format!("faultlab snapshots review{}", self.flags())
    }

    /// The command that accepts snapshots waiting in `from` (without NAME: every one of the platform).
    pub fn accept_from_command(&self, from: &Path) -> String {
        format!("faultlab snapshots accept [NAME] --platform PLATFORM --from {}{}", quote(from), self.flags())
    }

    /// The command that reviews the snapshots waiting in `from`.
    pub fn review_from_command(&self, from: &Path) -> String {
        format!("faultlab snapshots review --from {}{}", quote(from), self.flags())
    }

    /// `--scenarios` and `--expectations` as this store needs them, beyond what the environment says.
    fn flags(&self) -> String {
        let mut out = String::new();
        if resolved(&self.set) != resolved(&crate::scenario::default_dir()) {
            out.push_str(&format!(" --scenarios {}", quote(&self.set)));
        }
        let env = std::env::var_os("FAULTLAB_EXPECTATIONS").filter(|v| !v.is_empty()).map(PathBuf::from);
        if self.overridden && env.is_none_or(|e| resolved(&e) != resolved(&self.dir)) {
            out.push_str(&format!(" --expectations {}", quote(&self.dir)));
        }
        out
    }

    /// Compare `events` with the reviewed snapshot. On a difference (or without a reviewed snapshot)
    /// the events are written to `<scenario>.snap.new` for review; on a match a stale `.snap.new` is
    /// removed. The `.snap` itself is never written here.
    pub fn check(&self, platform: &str, scenario: &str, events: &[Normalised]) -> SnapshotResult {
        self.check_held_back(platform, scenario, events, &[]).0
    }

    /// [`Store::check`], where the events `withheld` names may have been held back by their source's
    /// event recorder (its spam filter: [`crate::events::SPAM_BURST`]). A snapshot whose only
    /// difference is such events missing matches, with a note naming them and why.
    pub fn check_held_back(&self, platform: &str, scenario: &str, events: &[Normalised], withheld: &[Withheld]) -> (SnapshotResult, Option<String>) {
        // The platform comes from what the cluster's nodes report: checked before it is a path.
        if let Err(e) = plain("platform", platform).and_then(|()| plain("scenario", scenario)) {
            return (SnapshotResult::Changed(format!("not compared: {}", crate::terminal::field(&e.to_string()))), None);
        }
        let snap = self.path(platform, scenario);
        let new = self.new_path(platform, scenario);
        let stored = match std::fs::read_to_string(&snap) {
            Ok(text) => Some(stored_events(&text).ok_or(())),
            // Not there (a file where the platform's directory should be: writing will say so).
            Err(e) if matches!(e.kind(), std::io::ErrorKind::NotFound | std::io::ErrorKind::NotADirectory) => None,
            Err(e) => return (SnapshotResult::Changed(format!("cannot read the reviewed snapshot {}: {e}", snap.display())), None),
        };
        if let Some(Ok(stored)) = &stored {
            let note = held_back_note(scenario, platform, stored, events, withheld);
            if stored == events || note.is_some() {
                let _ = std::fs::remove_file(&new);
                return (SnapshotResult::Matched, note);
            }
        }
        let next = match write_snapshot(&new, scenario, platform, events) {
            Ok(()) => format!("wrote {}; read it and accept it with `{}` (or review with `{}`)", new.display(), self.accept_command(scenario), self.review_command()),
            Err(e) => format!("and {e}: the events are in the run's report (`--output json`)"),
        };
        let result = match stored {
            None => SnapshotResult::New(format!("no reviewed snapshot yet for {scenario} on {platform}: {next}")),
            Some(Err(())) => SnapshotResult::Changed(format!(
                "the reviewed snapshot {} is not a snapshot file (a `---` header, then a YAML list of events) and was left as it is: {next}",
                snap.display()
            )),
            Some(Ok(stored)) => SnapshotResult::Changed(changed_paragraph(scenario, platform, &snap, &stored, events, &next)),
        };
        (result, None)
    }

    /// The snapshots waiting for review (`*.snap.new` under every platform), sorted.
    pub fn pending(&self) -> Result<Vec<Pending>, SnapshotError> {
        let mut out = Vec::new();
        let platforms = match std::fs::read_dir(&self.dir) {
            Ok(entries) => entries,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(out),
            Err(source) => return Err(SnapshotError::Read { path: self.dir.clone(), source }),
        };
        for platform in platforms.filter_map(|e| e.ok()) {
            if !platform.file_type().is_ok_and(|t| t.is_dir()) {
                continue;
            }
            let Some(platform_name) = platform.file_name().to_str().map(str::to_owned) else { continue };
            let files = std::fs::read_dir(platform.path()).map_err(|source| SnapshotError::Read { path: platform.path(), source })?;
            for file in files.filter_map(|e| e.ok()) {
                let file_name = file.file_name();
                let Some(name) = file_name.to_str().and_then(|n| n.strip_suffix(".snap.new")) else { continue };
                // Not a directory: anything else (a link, a FIFO) is listed, and refused when it is read.
                if name.is_empty() || file.file_type().is_ok_and(|t| t.is_dir()) {
                    continue;
                }
                out.push(Pending {
                    name: name.to_string(),
                    platform: platform_name.clone(),
                    new: file.path(),
                    snap: self.path(&platform_name, name),
                    from: None,
                });
            }
        }
        out.sort_by(|a, b| (&a.platform, &a.name).cmp(&(&b.platform, &b.name)));
        Ok(out)
    }

    /// Accept the snapshot of `scenario` waiting for review (on `platform`, needed when it waits on
    /// several): its `.snap.new` replaces the `.snap`. A file that does not read as events is refused.
    pub fn accept(&self, scenario: &str, platform: Option<&str>) -> Result<Pending, SnapshotError> {
        plain("scenario", scenario)?;
        if let Some(p) = platform {
            plain("platform", p)?;
        }
        let all = self.pending()?;
        let mut found: Vec<Pending> = all.iter().filter(|p| p.name == scenario && platform.is_none_or(|want| p.platform == want)).cloned().collect();
        match found.len() {
            0 => Err(SnapshotError::NoPending {
                name: match platform {
                    Some(p) => format!("{scenario} on {p}"),
                    None => scenario.to_string(),
                },
                dir: self.dir.clone(),
                pending: all.iter().map(|p| format!("{} on {}", p.name, p.platform)).collect(),
            }),
            1 => {
                let p = found.remove(0);
                p.accept()?;
                Ok(p)
            }
            _ => Err(SnapshotError::Ambiguous { name: scenario.to_string(), platforms: found.into_iter().map(|p| p.platform).collect() }),
        }
    }
}

/// Taking snapshots in from elsewhere (`--from DIR`): a directory of pending snapshots laid out as a
/// store's, `<DIR>/<platform>/<scenario>.snap.new`. That is what the CI workflow's artefact holds (it
/// uploads `expectations/**/*.snap.new`, which keeps the path after `expectations/`), downloaded and
/// unpacked. `DIR` is only read.
impl Store {
    /// The pending snapshots in `from`, each checked ([`read_pending`]), sorted. Anything else there is
    /// an error naming it: a file that is not a pending snapshot, one outside a platform's directory,
    /// a symbolic link, a header naming another scenario or platform.
    pub fn pending_from(&self, from: &Path) -> Result<Vec<Pending>, SnapshotError> {
        let dir_error = |why: String| SnapshotError::FromDir { dir: from.to_path_buf(), why };
        match std::fs::metadata(from) {
            Ok(m) if m.is_dir() => {}
            Ok(_) => return Err(dir_error("not a directory: name the directory that holds a directory per platform (the artefact, unpacked)".into())),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Err(dir_error("no such directory".into())),
            Err(e) => return Err(dir_error(e.to_string())),
        }
        let mut out = Vec::new();
        for (path, name, kind) in entries(from)? {
            if kind.is_dir() {
                out.extend(self.pending_in(from, &path, &name)?);
                continue;
            }
            let why = match name.ends_with(".snap.new") {
                true => "it lies outside a platform's directory; pending snapshots lie in <DIR>/<platform>/<scenario>.snap.new: if this is one platform's directory, pass --from the directory above it",
                false => "--from DIR holds a directory per platform, each with <scenario>.snap.new files (the layout of expectations/ and of the CI workflow's artefact)",
            };
            return Err(SnapshotError::NotPending { path, why: why.into() });
        }
        out.sort_by(|a, b| (&a.platform, &a.name).cmp(&(&b.platform, &b.name)));
        Ok(out)
    }

    /// The pending snapshots of one platform's directory in `from`.
    fn pending_in(&self, from: &Path, dir: &Path, platform: &str) -> Result<Vec<Pending>, SnapshotError> {
        if plain("platform", platform).is_err() {
            return Err(SnapshotError::NotPending { path: dir.to_path_buf(), why: format!("{platform:?} is not a platform's name (lowercase letters, digits, '-', '_' and '.')") });
        }
        let mut out = Vec::new();
        for (path, file, kind) in entries(dir)? {
            let name = file.strip_suffix(".snap.new").filter(|n| plain("scenario", n).is_ok());
            let Some(name) = name.filter(|_| !kind.is_dir()) else {
                let why = "a platform's directory holds only <scenario>.snap.new files, each a scenario's pending snapshot";
                return Err(SnapshotError::NotPending { path, why: why.into() });
            };
            read_pending(&path, name, platform)?;
            out.push(Pending { name: name.to_string(), platform: platform.to_string(), snap: self.path(platform, name), new: path, from: Some(from.to_path_buf()) });
        }
        Ok(out)
    }

    /// Accept the snapshots waiting in `from` ([`Store::pending_from`]) for `platform`: `scenario`'s,
    /// or every one there. Every file in `from` is checked before any is accepted; each accepted one is
    /// copied to this store's `<platform>/<scenario>.snap` (whole or not at all) and left in `from`.
    pub fn accept_from(&self, from: &Path, platform: &str, scenario: Option<&str>) -> Result<Vec<Pending>, SnapshotError> {
        plain("platform", platform)?;
        if let Some(s) = scenario {
            plain("scenario", s)?;
        }
        let all = self.pending_from(from)?;
        let mut platforms: Vec<String> = all.iter().map(|p| p.platform.clone()).collect();
        platforms.dedup();
        if !all.is_empty() && !platforms.iter().any(|p| p == platform) {
            return Err(SnapshotError::PlatformMismatch { dir: from.to_path_buf(), wanted: platform.to_string(), found: platforms });
        }
        let chosen: Vec<Pending> = all.iter().filter(|p| p.platform == platform && scenario.is_none_or(|s| p.name == s)).cloned().collect();
        if chosen.is_empty() {
            return Err(SnapshotError::NoPending {
                name: format!("{} on {platform}", scenario.unwrap_or("any scenario")),
                dir: from.to_path_buf(),
                pending: all.iter().map(|p| format!("{} on {}", p.name, p.platform)).collect(),
            });
        }
        for p in &chosen {
            p.accept()?;
        }
        Ok(chosen)
    }
}

/// A directory's entries, sorted by name: each path, its name and its type (a symbolic link is one,
/// not what it points to). A name that is not UTF-8 is an error naming it.
fn entries(dir: &Path) -> Result<Vec<(PathBuf, String, std::fs::FileType)>, SnapshotError> {
    let read = |source| SnapshotError::Read { path: dir.to_path_buf(), source };
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).map_err(read)? {
        let entry = entry.map_err(read)?;
        let kind = entry.file_type().map_err(|source| SnapshotError::Read { path: entry.path(), source })?;
        let Some(name) = entry.file_name().to_str().map(str::to_owned) else {
            return Err(SnapshotError::NotPending { path: entry.path(), why: "its name is not UTF-8".into() });
        };
        out.push((entry.path(), name, kind));
    }
    out.sort_by(|a, b| a.1.cmp(&b.1));
    Ok(out)
}

/// Read a pending snapshot of `scenario` on `platform` back ([`read_back`]) and check it: events after
/// a `---` header whose description names this scenario and platform (a file renamed, or moved to
/// another platform's directory, is refused). Its text and events.
pub fn read_pending(path: &Path, scenario: &str, platform: &str) -> Result<(String, Vec<Normalised>), SnapshotError> {
    let text = read_back(path)?;
    let events = stored_events(&text).ok_or_else(|| SnapshotError::Format { path: path.to_path_buf() })?;
    match header_names(&text) {
        Some((s, p)) if s == scenario && p == platform => Ok((text, events)),
        Some((s, p)) => Err(SnapshotError::Misplaced { path: path.to_path_buf(), header: format!("{s} on {p}"), place: format!("{scenario} on {platform}") }),
        None => Err(SnapshotError::NotPending {
            path: path.to_path_buf(),
            why: "its header's description does not say whose events it holds (`Events of scenario NAME on PLATFORM, normalised (faultlab)`)".into(),
        }),
    }
}

/// The scenario and platform a snapshot file's header names (its `description`, as [`file_text`]
/// writes it).
fn header_names(text: &str) -> Option<(String, String)> {
    #[derive(Deserialize)]
    struct Header {
        description: String,
    }
    let text = text.replace("\r\n", "\n");
    let header = text.strip_prefix("---\n")?.split_once("\n---\n")?.0;
    let header: Header = serde_saphyr::from_str(header).ok()?;
    let names = header.description.strip_prefix("Events of scenario ")?.strip_suffix(", normalised (faultlab)")?;
    let (scenario, platform) = names.split_once(" on ")?;
    Some((scenario.to_string(), platform.to_string()))
}

/// The most a snapshot file read back may hold (a snapshot is a few kilobytes).
pub const MAX_SNAPSHOT_BYTES: u64 = 1 << 20;

/// Read a snapshot file back: a regular file, never through a symbolic link (nor a FIFO, socket or
/// device: looked at before it is opened, and opened without blocking), at most
/// [`MAX_SNAPSHOT_BYTES`] of UTF-8; and when faultlab runs as root, owned by root or by the user who
/// invoked it (`SUDO_UID`, else the real user), so that a file another local user planted is not taken.
pub fn read_back(path: &Path) -> Result<String, SnapshotError> {
    let invoking = crate::home::invoking_uid();
    read_back_as(path, unsafe { libc::geteuid() }, invoking)
}

fn read_back_as(path: &Path, euid: u32, invoking: u32) -> Result<String, SnapshotError> {
    use std::io::Read;
    use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
    let refused = |why: String| SnapshotError::ReadBack { path: path.to_path_buf(), why };
    let read = |source| SnapshotError::Read { path: path.to_path_buf(), source };
    if let Some(what) = not_regular(&std::fs::symlink_metadata(path).map_err(read)?) {
        return Err(refused(format!("{what}; only regular files are read back")));
    }
    let file = std::fs::OpenOptions::new().read(true).custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK).open(path).map_err(read)?;
    let meta = file.metadata().map_err(read)?;
    if let Some(what) = not_regular(&meta) {
        return Err(refused(format!("{what}; only regular files are read back")));
    }
    if let Some(why) = owner_refusal(meta.uid(), euid, invoking) {
        return Err(refused(why));
    }
    let mut bytes = Vec::new();
    file.take(MAX_SNAPSHOT_BYTES + 1).read_to_end(&mut bytes).map_err(read)?;
    if bytes.len() as u64 > MAX_SNAPSHOT_BYTES {
        return Err(refused(format!("larger than the {MAX_SNAPSHOT_BYTES} bytes a snapshot may have")));
    }
    String::from_utf8(bytes).map_err(|_| refused("not UTF-8 text".into()))
}

/// What a file that is not a regular one is, for messages (`meta` from `lstat`: a link is one).
fn not_regular(meta: &std::fs::Metadata) -> Option<&'static str> {
    match meta.file_type().is_symlink() {
        true => Some("a symbolic link"),
        false => crate::datafile::file_kind(meta),
    }
}

/// Why a file owned by `owner` is not read back by a process of effective user `euid` invoked by user
/// `invoking`: as root, only root's files and the invoking user's are trusted.
fn owner_refusal(owner: u32, euid: u32, invoking: u32) -> Option<String> {
    (euid == 0 && owner != 0 && owner != invoking)
        .then(|| format!("owned by uid {owner}: running as root, faultlab reads back only files owned by root or by the user who invoked it (uid {invoking})"))
}

/// Write `text` to `path` whole or not at all, never through a link ([`crate::atomic::write`]).
fn install(path: &Path, text: &str) -> Result<(), SnapshotError> {
    crate::atomic::write(path, text.as_bytes()).map_err(|source| SnapshotError::Install { path: path.to_path_buf(), source })
}

/// When the only difference from the reviewed snapshot is events missing that their source may have
/// held back (its event recorder's spam filter), the note that says which and why.
fn held_back_note(scenario: &str, platform: &str, stored: &[Normalised], events: &[Normalised], withheld: &[Withheld]) -> Option<String> {
    let (missing, unexpected) = difference(stored, events);
    let held = |e: &Normalised| withheld.iter().find(|w| w.object == e.object && w.source == e.source);
    if !unexpected.is_empty() || missing.is_empty() || !missing.iter().all(|e| held(e).is_some()) {
        return None;
    }
    let mut note = format!(
        "the events of {scenario} on {platform} match the reviewed snapshot but for {} event(s) their source held back: client-go's event recorder sends at most {} events about one object, then one every {} s, and this run saw them used up",
        missing.len(),
        crate::events::SPAM_BURST,
        crate::events::SPAM_REFILL.as_secs()
    );
    for e in missing {
        let w = held(e)?;
        note.push_str(&format!("\n    held back:  {} ({} sent about it by {} in the run)", one_line(e), w.sent, w.source));
    }
    Some(note)
}

/// The paragraph of a changed snapshot: the counts, each missing and unexpected event on a line of
/// its own, then `next` (where the file to review is).
fn changed_paragraph(scenario: &str, platform: &str, snap: &Path, stored: &[Normalised], events: &[Normalised], next: &str) -> String {
    let (missing, unexpected) = difference(stored, events);
    let mut text = format!(
        "events of {scenario} on {platform} differ from the reviewed snapshot {}: {} missing, {} unexpected{}",
        snap.display(),
        missing.len(),
        unexpected.len(),
        if missing.is_empty() && unexpected.is_empty() { " (the same events, in another order or number)" } else { "" }
    );
    for e in missing {
        text.push_str(&format!("\n    missing:    {}", one_line(e)));
    }
    for e in unexpected {
        text.push_str(&format!("\n    unexpected: {}", one_line(e)));
    }
    text.push_str(&format!("\n    {next}"));
    text
}

fn quote(path: &Path) -> String {
    shell_words::quote(&path.display().to_string()).into_owned()
}

/// A scenario or platform name used as a file name: nothing that leaves its directory.
fn plain(what: &'static str, value: &str) -> Result<(), SnapshotError> {
    let lower = |c: char| c.is_ascii_lowercase() || c.is_ascii_digit();
    let ok = value.starts_with(lower) && value.chars().all(|c| lower(c) || matches!(c, '-' | '_' | '.')) && !value.contains("..");
    if ok {
        Ok(())
    } else {
        Err(SnapshotError::Name { what, value: value.to_string() })
    }
}

/// A snapshot waiting for review.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Pending {
    pub name: String,
    pub platform: String,
    /// The `.snap.new` file.
    pub new: PathBuf,
    /// The reviewed `.snap` it would replace (it may not exist yet).
    pub snap: PathBuf,
    /// The directory it was read from when that is not the store (`--from`): accepting copies it and
    /// leaves it there, and nothing in that directory is ever deleted.
    pub from: Option<PathBuf>,
}

/// What a pending snapshot changes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Change {
    /// The reviewed events, if there is a reviewed snapshot.
    pub stored: Option<Vec<Normalised>>,
    pub new: Vec<Normalised>,
}

impl Pending {
    /// Read the new events (checked: [`read_pending`]) and the reviewed ones.
    pub fn change(&self) -> Result<Change, SnapshotError> {
        let (_, new) = read_pending(&self.new, &self.name, &self.platform)?;
        let stored = match std::fs::read_to_string(&self.snap) {
            Ok(text) => Some(stored_events(&text).ok_or_else(|| SnapshotError::Format { path: self.snap.clone() })?),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
            Err(source) => return Err(SnapshotError::Read { path: self.snap.clone(), source }),
        };
        Ok(Change { stored, new })
    }

    /// Put the pending snapshot in the `.snap`'s place (after checking it: [`read_pending`]), whole or
    /// not at all; the `.snap.new` is then removed, unless it was read from another directory.
    pub fn accept(&self) -> Result<(), SnapshotError> {
        let (text, _) = read_pending(&self.new, &self.name, &self.platform)?;
        install(&self.snap, &text)?;
        match self.from {
            Some(_) => Ok(()),
            None => std::fs::remove_file(&self.new).map_err(|source| SnapshotError::Write { path: self.new.clone(), source }),
        }
    }

    /// Delete the `.snap.new`; the reviewed `.snap` stays as it is. One read from another directory is
    /// left there: it is only not taken.
    pub fn reject(&self) -> Result<(), SnapshotError> {
        match self.from {
            Some(_) => Ok(()),
            None => std::fs::remove_file(&self.new).map_err(|source| SnapshotError::Write { path: self.new.clone(), source }),
        }
    }

    /// The difference, for a person: a heading, then `-` for each event the reviewed snapshot has and
    /// the new one lacks, `+` for each new one (every event when there is no reviewed snapshot).
    pub fn render(&self, colour: bool) -> Result<String, SnapshotError> {
        let change = self.change()?;
        let paint = |code: &str, text: String| if colour { format!("\x1b[{code}m{text}\x1b[0m") } else { text };
        let mut out = String::new();
        // Names and paths as the directories spell them: escaped too.
        let (name, platform) = (crate::terminal::field(&self.name), crate::terminal::field(&self.platform));
        let (snap, new) = (self.snap.display().to_string(), self.new.display().to_string());
        let (snap, new) = (crate::terminal::field(&snap), crate::terminal::field(&new));
        match &change.stored {
            None => {
                out.push_str(&paint("1", format!("{name} on {platform}: new, no reviewed snapshot yet")));
                out.push_str(&format!("\n  {new} ({} events)\n", change.new.len()));
                for e in &change.new {
                    out.push_str(&paint("32", format!("  + {}", one_line(e))));
                    out.push('\n');
                }
            }
            // Another machine's first run on a platform this set has reviewed since (a CI artefact).
            Some(stored) if *stored == change.new => {
                out.push_str(&paint("1", format!("{name} on {platform}: the same as the reviewed snapshot ({} event(s)); accepting it changes nothing", stored.len())));
                out.push_str(&format!("\n  = {snap}\n  = {new}\n"));
            }
            Some(stored) => {
                let (missing, unexpected) = difference(stored, &change.new);
                out.push_str(&paint("1", format!("{name} on {platform}: differs from the reviewed snapshot")));
                out.push_str(&format!("\n  - {snap}\n  + {new}\n"));
                for e in &missing {
                    out.push_str(&paint("31", format!("  - {}", one_line(e))));
                    out.push('\n');
                }
                for e in &unexpected {
                    out.push_str(&paint("32", format!("  + {}", one_line(e))));
                    out.push('\n');
                }
                let same = change.new.iter().filter(|e| stored.contains(e)).count();
                if missing.is_empty() && unexpected.is_empty() {
                    out.push_str("  the same events, in another order or number\n");
                }
                out.push_str(&format!("  {same} event(s) unchanged\n"));
            }
        }
        Ok(out)
    }
}

/// What `review` did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Reviewed {
    pub accepted: Vec<Pending>,
    pub rejected: Vec<Pending>,
    pub skipped: Vec<Pending>,
}

/// Review every snapshot waiting in `store` (with `from`, those waiting in that directory instead:
/// [`Store::pending_from`]): show each difference on `out` and ask on `input` to accept (it takes the
/// `.snap`'s place), reject (the `.snap.new` is deleted; one in `from` is only not taken) or skip it.
/// The end of the input skips the rest.
pub fn review(store: &Store, from: Option<&Path>, input: &mut dyn BufRead, out: &mut dyn Write, colour: bool) -> Result<Reviewed, SnapshotError> {
    let pending = waiting(store, from)?;
    let mut done = Reviewed::default();
    if pending.is_empty() {
        writeln!(out, "no snapshots waiting for review in {}", from.unwrap_or(&store.dir).display()).map_err(to_stdout)?;
        return Ok(done);
    }
    let total = pending.len();
    let mut rest = pending.into_iter().enumerate();
    while let Some((i, p)) = rest.next() {
        write!(out, "\n[{}/{total}] {}", i + 1, p.render(colour)?).map_err(to_stdout)?;
        match ask(input, out)? {
            Some(Answer::Accept) => {
                p.accept()?;
                writeln!(out, "accepted: {}", p.snap.display()).map_err(to_stdout)?;
                done.accepted.push(p);
            }
            Some(Answer::Reject) => {
                p.reject()?;
                let what = if p.from.is_some() { "not taken (left where it is)" } else { "deleted" };
                writeln!(out, "rejected: {} {what}", p.new.display()).map_err(to_stdout)?;
                done.rejected.push(p);
            }
            Some(Answer::Skip) => done.skipped.push(p),
            None => {
                done.skipped.push(p);
                done.skipped.extend(rest.by_ref().map(|(_, p)| p));
            }
        }
    }
    writeln!(out, "\n{} accepted, {} rejected, {} skipped", done.accepted.len(), done.rejected.len(), done.skipped.len()).map_err(to_stdout)?;
    Ok(done)
}

/// The pending snapshots of `store`, or of `from`.
fn waiting(store: &Store, from: Option<&Path>) -> Result<Vec<Pending>, SnapshotError> {
    match from {
        Some(dir) => store.pending_from(dir),
        None => store.pending(),
    }
}

fn to_stdout(source: std::io::Error) -> SnapshotError {
    SnapshotError::Write { path: PathBuf::from("<stdout>"), source }
}

enum Answer {
    Accept,
    Reject,
    Skip,
}

/// Ask until the answer is one of accept, reject or skip; none at the end of the input.
fn ask(input: &mut dyn BufRead, out: &mut dyn Write) -> Result<Option<Answer>, SnapshotError> {
    loop {
        write!(out, "accept (a), reject (r) or skip (s)? ").map_err(to_stdout)?;
        out.flush().map_err(to_stdout)?;
        let mut line = String::new();
        if input.read_line(&mut line).map_err(SnapshotError::Answer)? == 0 {
            writeln!(out).map_err(to_stdout)?;
            return Ok(None);
        }
        match line.trim().to_ascii_lowercase().as_str() {
            "a" | "accept" => return Ok(Some(Answer::Accept)),
            "r" | "reject" => return Ok(Some(Answer::Reject)),
            "s" | "skip" | "" => return Ok(Some(Answer::Skip)),
            other => writeln!(out, "{other:?}: answer a, r or s").map_err(to_stdout)?,
        }
    }
}

/// Without a terminal to ask on: show every snapshot waiting in `store` (or in `from`) and how to
/// review it. Returns how many wait.
pub fn list_pending(store: &Store, from: Option<&Path>, out: &mut dyn Write, colour: bool) -> Result<usize, SnapshotError> {
    let pending = waiting(store, from)?;
    let place = from.unwrap_or(&store.dir);
    if pending.is_empty() {
        writeln!(out, "no snapshots waiting for review in {}", place.display()).map_err(to_stdout)?;
        return Ok(0);
    }
    for p in &pending {
        writeln!(out, "{}", p.render(colour)?).map_err(to_stdout)?;
    }
    let how = match from {
        Some(dir) => format!("accept them with `{}` (without NAME: every one of the platform), or run `{}` on a terminal", store.accept_from_command(dir), store.review_from_command(dir)),
        None => format!("accept it with `{}` (--platform P when it waits on several), or run `{}` on a terminal", store.accept_command("NAME"), store.review_command()),
    };
    let n = pending.len();
    writeln!(out, "{n} snapshot(s) wait for review in {}. Read each, then {how}", place.display()).map_err(to_stdout)?;
    Ok(n)
}

/// The file insta would write for these events: its header, then the events as insta's YAML.
pub fn file_text(scenario: &str, platform: &str, events: &[Normalised]) -> String {
    let description = format!("Events of scenario {scenario} on {platform}, normalised (faultlab)");
    let mut out = format!("---\nsource: harness/src/snapshot.rs\ndescription: {}\n---\n", yaml_scalar(&description));
    if events.is_empty() {
        out.push_str("[]\n");
    }
    for e in events {
        for (i, (key, value)) in [("object", &e.object), ("type", &e.type_), ("reason", &e.reason), ("source", &e.source), ("message", &e.message)].into_iter().enumerate() {
            out.push_str(if i == 0 { "- " } else { "  " });
            out.push_str(&format!("{key}: {}\n", yaml_scalar(value)));
        }
    }
    out
}

fn write_snapshot(path: &Path, scenario: &str, platform: &str, events: &[Normalised]) -> Result<(), SnapshotError> {
    install(path, &file_text(scenario, platform, events))
}

/// A string as insta's YAML emitter writes it: plain when that reads back as the same string,
/// otherwise double-quoted with escapes (its `need_quotes` and `escape_str`, for every control
/// character).
fn yaml_scalar(s: &str) -> String {
    let needs_quotes = s.is_empty()
        || s.starts_with(' ')
        || s.ends_with(' ')
        || s.starts_with(['&', '*', '?', '|', '-', '<', '>', '=', '!', '%', '@'])
        // insta leaves a few control characters (BEL, BS, VT, FF, ESC, DEL) plain, which does not
        // read back: any control character is quoted here.
        || s.contains(|c: char| matches!(c, ':' | '{' | '}' | '[' | ']' | ',' | '#' | '`' | '"' | '\'' | '\\') || c.is_control())
        || [
            "yes", "Yes", "YES", "no", "No", "NO", "True", "TRUE", "true", "False", "FALSE", "false", "on", "On", "ON", "off", "Off", "OFF", "null", "Null", "NULL", "~",
        ]
        .contains(&s)
        || s.starts_with('.')
        || s.starts_with("0x")
        || s.parse::<i64>().is_ok()
        || s.parse::<f64>().is_ok();
    if !needs_quotes {
        return s.to_string();
    }
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\x08' => out.push_str("\\b"),
            '\t' => out.push_str("\\t"),
            '\n' => out.push_str("\\n"),
            '\x0c' => out.push_str("\\f"),
            '\r' => out.push_str("\\r"),
            c if c.is_control() => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// The events of a snapshot file (the YAML list after the `---` header).
pub fn stored_events(text: &str) -> Option<Vec<Normalised>> {
    let text = text.replace("\r\n", "\n");
    let body = text.strip_prefix("---\n")?.split_once("\n---\n")?.1;
    serde_saphyr::from_str(body).ok()
}

/// What the stored list has that the new one lacks, and the other way round.
pub fn difference<'a>(stored: &'a [Normalised], new: &'a [Normalised]) -> (Vec<&'a Normalised>, Vec<&'a Normalised>) {
    let missing = stored.iter().filter(|e| !new.contains(e)).collect();
    let unexpected = new.iter().filter(|e| !stored.contains(e)).collect();
    (missing, unexpected)
}

/// An event on one line, each field terminal-safe ([`crate::terminal::field`]): its text is the
/// cluster's.
fn one_line(e: &Normalised) -> String {
    use crate::terminal::field;
    format!("{} {} {} ({}): {}", field(&e.object), field(&e.type_), field(&e.reason), field(&e.source), field(&e.message))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ev(reason: &str, message: &str) -> Normalised {
        Normalised { object: "Pod/web-<id>".into(), type_: "Normal".into(), reason: reason.into(), source: "kubelet".into(), message: message.into() }
    }

    /// A store for a set in a temporary directory, with faultlab's own set and expectations elsewhere.
    fn store(tmp: &Path) -> Store {
        let set = tmp.join("set");
        std::fs::create_dir_all(&set).unwrap();
        Store::with(&set, None, &tmp.join("faultlab/scenarios"), &tmp.join("faultlab/expectations")).unwrap()
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

    /// The files are written exactly as insta wrote them: every reviewed snapshot in the repository
    /// (written by insta's `assert_yaml_snapshot!`) comes out byte for byte the same.
    #[test]
    fn files_are_written_as_insta_writes_them() {
        let mut checked = 0;
        for platform in std::fs::read_dir(own_expectations_dir()).unwrap() {
            let platform = platform.unwrap();
            for file in std::fs::read_dir(platform.path()).unwrap() {
                let path = file.unwrap().path();
                if path.extension().is_none_or(|e| e != "snap") {
                    continue;
                }
                let text = std::fs::read_to_string(&path).unwrap();
                let events = stored_events(&text).unwrap_or_else(|| panic!("{} reads", path.display()));
                let name = path.file_stem().unwrap().to_str().unwrap();
                let written = file_text(name, platform.file_name().to_str().unwrap(), &events);
                let body = |t: &str| t.split_once("\n---\n").unwrap().1.to_string();
                assert_eq!(body(&written), body(&text), "{}", path.display());
                let header = |t: &str| t.lines().filter(|l| !l.starts_with("assertion_line:")).take(4).collect::<Vec<_>>().join("\n");
                assert_eq!(header(&written), header(&text), "{}", path.display());
                checked += 1;
            }
        }
        assert!(checked >= 8, "found {checked} snapshots");
    }

    #[test]
    fn awkward_strings_are_quoted_and_read_back() {
        let odd = [
            "", " lead", "trail ", "- dash", "a: b", "# not a comment", "yes", "null", "~", "123", "1.5", "0x1F", ".hidden", "tab\there",
            "line\nbreak", "quote \" and \\ backslash", "bell \x07 del \x7f esc \x1b c1 \u{85}", "plain text", "ünïcödé: ok", "{braces}", "'single'", "inf", "NaN",
        ];
        let events: Vec<Normalised> = odd.iter().map(|s| ev("Odd", s)).collect();
        let text = file_text("x", "p", &events);
        assert_eq!(stored_events(&text).unwrap(), events, "{text}");
        assert!(text.contains("  message: plain text\n"), "plain stays plain: {text}");
        assert!(text.contains("  message: \"yes\"\n"), "{text}");
        assert_eq!(stored_events(&file_text("x", "p", &[])).unwrap(), vec![]);
    }

    #[test]
    fn a_set_keeps_its_snapshots_beside_it_and_never_in_faultlabs_own() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().join("faultlab");
        let (own_set, own_exp) = (root.join("scenarios"), root.join("expectations"));
        std::fs::create_dir_all(&own_set).unwrap();
        std::fs::create_dir_all(&own_exp).unwrap();
        let set = tmp.path().join("mine");
        std::fs::create_dir_all(&set).unwrap();

        let s = Store::with(&set, None, &own_set, &own_exp).unwrap();
        assert_eq!(s.dir, set.join("expectations"));
        assert_eq!(s.path("k8s-1.20-containerd-1.6-amd64", "web"), set.join("expectations/k8s-1.20-containerd-1.6-amd64/web.snap"));
        assert_eq!(s.new_path("p", "web"), set.join("expectations/p/web.snap.new"));
        assert!(!s.overridden);

        // faultlab's own set, however it is named, keeps <root>/expectations.
        assert_eq!(Store::with(&own_set, None, &own_set, &own_exp).unwrap().dir, own_exp);
        assert_eq!(Store::with(&root.join("scenarios/../scenarios"), None, &own_set, &own_exp).unwrap().dir, own_exp);

        // --expectations elsewhere is taken as given.
        let elsewhere = tmp.path().join("snaps");
        let s = Store::with(&set, Some(elsewhere.clone()), &own_set, &own_exp).unwrap();
        assert_eq!((s.dir.clone(), s.overridden), (elsewhere, true));

        // Never faultlab's own expectations/ (or below it) for another set, nor for a set that is the root.
        for dir in [own_exp.clone(), own_exp.join("k8s-1.20-containerd-1.6-amd64"), root.join("scenarios/../expectations")] {
            let err = Store::with(&set, Some(dir.clone()), &own_set, &own_exp).unwrap_err();
            assert!(err.to_string().starts_with(&format!("refusing to keep the snapshots of scenario set {} in faultlab's own {}", set.display(), own_exp.display())), "{err}");
            assert!(err.to_string().contains(&format!("to keep them in {}", set.join("expectations").display())), "{err}");
        }
        assert!(matches!(Store::with(&root, None, &own_set, &own_exp), Err(SnapshotError::OwnTree { .. })));
        // faultlab's own set may use another directory (the kind contract tests do).
        assert!(Store::with(&own_set, Some(tmp.path().join("x")), &own_set, &own_exp).is_ok());
    }

    #[test]
    fn a_missing_snapshot_is_one_paragraph_and_a_new_file_to_review() {
        let tmp = tempfile::tempdir().unwrap();
        let s = store(tmp.path());
        let events = vec![ev("Pulled", "Container image \"x\" already present"), ev("Killing", "Stopping container app")];
        let SnapshotResult::New(text) = s.check("k8s-1.20-containerd-1.6-amd64", "web", &events) else { panic!("new expected") };
        let new = s.new_path("k8s-1.20-containerd-1.6-amd64", "web");
        assert_eq!(
            text,
            format!(
                "no reviewed snapshot yet for web on k8s-1.20-containerd-1.6-amd64: wrote {}; read it and accept it with `faultlab snapshots accept web --scenarios {}` (or review with `faultlab snapshots review --scenarios {}`)",
                new.display(),
                s.set.display(),
                s.set.display()
            )
        );
        assert!(!text.contains('\n'), "one paragraph: {text}");
        assert_eq!(stored_events(&std::fs::read_to_string(&new).unwrap()).unwrap(), events);
        assert!(!s.path("k8s-1.20-containerd-1.6-amd64", "web").exists(), "the .snap is never written by a run");

        // Accepted, the same events match, and nothing waits any more.
        let accepted = s.accept("web", None).unwrap();
        assert_eq!(accepted.snap, s.path("k8s-1.20-containerd-1.6-amd64", "web"));
        assert!(!new.exists());
        assert_eq!(s.check("k8s-1.20-containerd-1.6-amd64", "web", &events), SnapshotResult::Matched);
        assert!(!new.exists());
    }

    #[test]
    fn a_changed_snapshot_names_each_difference_on_a_line_and_where_the_new_file_is() {
        let tmp = tempfile::tempdir().unwrap();
        let s = store(tmp.path());
        let old = vec![ev("Pulled", "already present"), ev("Killing", "Stopping container app")];
        std::fs::create_dir_all(s.dir.join("p")).unwrap();
        std::fs::write(s.path("p", "web"), file_text("web", "p", &old)).unwrap();
        let new = vec![ev("Pulled", "already present"), ev("BackOff", "Back-off restarting")];
        let SnapshotResult::Changed(text) = s.check("p", "web", &new) else { panic!("changed expected") };
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines[0], format!("events of web on p differ from the reviewed snapshot {}: 1 missing, 1 unexpected", s.path("p", "web").display()));
        assert_eq!(lines[1], "    missing:    Pod/web-<id> Normal Killing (kubelet): Stopping container app");
        assert_eq!(lines[2], "    unexpected: Pod/web-<id> Normal BackOff (kubelet): Back-off restarting");
        assert!(lines[3].starts_with(&format!("    wrote {}; read it and accept it with `faultlab snapshots accept web", s.new_path("p", "web").display())), "{text}");
        assert_eq!(lines.len(), 4);
        assert!(!text.contains("panicked") && !text.contains("assertion"), "{text}");
        // The reviewed file is untouched.
        assert_eq!(stored_events(&std::fs::read_to_string(s.path("p", "web")).unwrap()).unwrap(), old);
        // A stale .snap.new goes once the events match again.
        assert_eq!(s.check("p", "web", &old), SnapshotResult::Matched);
        assert!(!s.new_path("p", "web").exists());
    }

    #[test]
    fn events_their_source_held_back_are_a_note_and_nothing_else_is() {
        let tmp = tempfile::tempdir().unwrap();
        let s = store(tmp.path());
        let old = vec![ev("BackOff", "Back-off pulling image"), ev("Pulled", "Successfully pulled"), ev("Started", "Started container app")];
        std::fs::create_dir_all(s.dir.join("p")).unwrap();
        std::fs::write(s.path("p", "web"), file_text("web", "p", &old)).unwrap();
        let held = [Withheld { object: "Pod/web-<id>".into(), source: "kubelet".into(), sent: 25 }];
        let short = vec![ev("BackOff", "Back-off pulling image")];
        let (result, note) = s.check_held_back("p", "web", &short, &held);
        assert_eq!(result, SnapshotResult::Matched);
        let note = note.expect("a note");
        assert!(note.contains("but for 2 event(s) their source held back"), "{note}");
        assert!(note.contains("held back:  Pod/web-<id> Normal Pulled (kubelet): Successfully pulled (25 sent about it by kubelet in the run)"), "{note}");
        assert!(!s.new_path("p", "web").exists());
        // Another object's budget, or another source's, excuses nothing.
        let other = [Withheld { object: "Pod/db-<id>".into(), source: "kubelet".into(), sent: 25 }];
        assert!(matches!(s.check_held_back("p", "web", &short, &other), (SnapshotResult::Changed(_), None)));
        let other = [Withheld { object: "Pod/web-<id>".into(), source: "default-scheduler".into(), sent: 25 }];
        assert!(matches!(s.check_held_back("p", "web", &short, &other), (SnapshotResult::Changed(_), None)));
        // An unexpected event is a difference whatever was held back.
        let extra = vec![ev("BackOff", "Back-off pulling image"), ev("Failed", "x509")];
        assert!(matches!(s.check_held_back("p", "web", &extra, &held), (SnapshotResult::Changed(_), None)));
        // Equal is equal, without a note.
        assert_eq!(s.check_held_back("p", "web", &old, &held), (SnapshotResult::Matched, None));
    }

    /// The status: `new` only where there is no reviewed snapshot; a reviewed file that does not read
    /// as one is `changed` (it fails), never taken for a missing one.
    #[test]
    fn a_reviewed_snapshot_that_does_not_read_is_changed_not_new() {
        let tmp = tempfile::tempdir().unwrap();
        let s = store(tmp.path());
        std::fs::create_dir_all(s.dir.join("p")).unwrap();
        std::fs::write(s.path("p", "web"), "garbage").unwrap();
        let result = s.check("p", "web", &[ev("A", "b")]);
        assert_eq!(result.status(), Some(SnapshotStatus::Changed));
        assert!(result.detail().is_some_and(|d| d.starts_with(&format!("the reviewed snapshot {} is not a snapshot file", s.path("p", "web").display()))), "{result:?}");
        assert_eq!(std::fs::read_to_string(s.path("p", "web")).unwrap(), "garbage", "left as it is");
        assert!(s.new_path("p", "web").is_file());
        assert_eq!(s.check("q", "web", &[ev("A", "b")]).status(), Some(SnapshotStatus::New));
        assert_eq!(SnapshotResult::Skipped("x".into()).status(), None);
    }

    #[test]
    fn an_unwritable_store_says_so_in_the_paragraph() {
        let tmp = tempfile::tempdir().unwrap();
        let s = store(tmp.path());
        // The platform directory cannot be made: a file is in its way.
        std::fs::create_dir_all(&s.dir).unwrap();
        std::fs::write(s.dir.join("p"), "not a directory").unwrap();
        let SnapshotResult::New(text) = s.check("p", "web", &[ev("A", "b")]) else { panic!() };
        assert!(text.starts_with("no reviewed snapshot yet for web on p: and writing "), "{text}");
        assert!(text.ends_with("the events are in the run's report (`--output json`)"), "{text}");
    }

    #[test]
    fn accept_picks_the_platform_and_refuses_what_is_not_a_snapshot() {
        let tmp = tempfile::tempdir().unwrap();
        let s = store(tmp.path());
        assert!(matches!(s.accept("web", None), Err(SnapshotError::NoPending { .. })));
        s.check("a", "web", &[ev("A", "1")]);
        s.check("b", "web", &[ev("B", "2")]);
        s.check("b", "db", &[ev("C", "3")]);
        assert_eq!(s.pending().unwrap().iter().map(|p| format!("{}/{}", p.platform, p.name)).collect::<Vec<_>>(), ["a/web", "b/db", "b/web"]);
        let err = s.accept("web", None).unwrap_err();
        assert_eq!(err.to_string(), "web has snapshots waiting for review on several platforms (a, b); pass --platform with one of them");
        s.accept("web", Some("b")).unwrap();
        assert_eq!(stored_events(&std::fs::read_to_string(s.path("b", "web")).unwrap()).unwrap(), vec![ev("B", "2")]);
        let err = s.accept("nothing", None).unwrap_err().to_string();
        assert!(err.starts_with("no snapshot of nothing waits for review in ") && err.ends_with("(waiting: web on a, db on b)"), "{err}");
        for bad in ["../web", "", ".hidden", "a/b"] {
            assert!(matches!(s.accept(bad, None), Err(SnapshotError::Name { .. })), "{bad}");
        }
        assert!(matches!(s.accept("db", Some("..")), Err(SnapshotError::Name { .. })));
        // A .snap.new that is not a snapshot is not accepted, and the reviewed file stays.
        std::fs::write(s.new_path("b", "db"), "garbage").unwrap();
        assert!(matches!(s.accept("db", None), Err(SnapshotError::Format { .. })));
        assert!(!s.path("b", "db").exists());
    }

    #[test]
    fn review_accepts_rejects_and_skips_as_answered() {
        let tmp = tempfile::tempdir().unwrap();
        let s = store(tmp.path());
        std::fs::create_dir_all(s.dir.join("p")).unwrap();
        std::fs::write(s.path("p", "changed"), file_text("changed", "p", &[ev("Old", "gone"), ev("Same", "kept")])).unwrap();
        s.check("p", "changed", &[ev("Same", "kept"), ev("New", "came")]);
        s.check("p", "fresh", &[ev("A", "first")]);
        s.check("p", "kept", &[ev("B", "second")]);
        s.check("p", "later", &[ev("C", "third")]);

        let mut listed = Vec::new();
        assert_eq!(list_pending(&s, None, &mut listed, false).unwrap(), 4);
        let listed = String::from_utf8(listed).unwrap();
        assert!(listed.contains("changed on p: differs from the reviewed snapshot\n"), "{listed}");
        assert!(listed.contains("  - Pod/web-<id> Normal Old (kubelet): gone\n  + Pod/web-<id> Normal New (kubelet): came\n  1 event(s) unchanged\n"), "{listed}");
        assert!(listed.contains("fresh on p: new, no reviewed snapshot yet\n"), "{listed}");
        assert!(listed.contains("  + Pod/web-<id> Normal A (kubelet): first\n"), "{listed}");
        assert!(listed.contains("4 snapshot(s) wait for review in "), "{listed}");
        assert!(!listed.contains('\x1b'), "no colour unless asked");

        // Sorted by name: changed, fresh, kept, later. An unknown answer is asked again; the end of
        // the input skips the rest.
        let mut input = std::io::Cursor::new("a\nr\nwhat\ns\n");
        let mut out = Vec::new();
        let done = review(&s, None, &mut input, &mut out, true).unwrap();
        let out = String::from_utf8(out).unwrap();
        assert_eq!(done.accepted.iter().map(|p| p.name.as_str()).collect::<Vec<_>>(), ["changed"]);
        assert_eq!(done.rejected.iter().map(|p| p.name.as_str()).collect::<Vec<_>>(), ["fresh"]);
        assert_eq!(done.skipped.iter().map(|p| p.name.as_str()).collect::<Vec<_>>(), ["kept", "later"]);
        assert!(out.contains("\"what\": answer a, r or s"), "{out}");
        assert!(out.contains("\x1b[31m  - Pod/web-<id> Normal Old (kubelet): gone\x1b[0m"), "coloured: {out}");
        assert!(out.contains("1 accepted, 1 rejected, 2 skipped"), "{out}");
        assert_eq!(stored_events(&std::fs::read_to_string(s.path("p", "changed")).unwrap()).unwrap(), vec![ev("Same", "kept"), ev("New", "came")]);
        assert!(!s.new_path("p", "fresh").exists() && !s.path("p", "fresh").exists());
        assert!(s.new_path("p", "kept").exists() && s.new_path("p", "later").exists());

        let mut out = Vec::new();
        review(&s, None, &mut std::io::Cursor::new("a\na\n"), &mut out, false).unwrap();
        assert!(s.pending().unwrap().is_empty());
        let mut out = Vec::new();
        assert_eq!(list_pending(&s, None, &mut out, false).unwrap(), 0);
        assert!(String::from_utf8(out).unwrap().starts_with("no snapshots waiting for review in "));
    }

    const KIND: &str = "kind-1.32-containerd-2.0-cgroup2-amd64";

    /// What a CI run leaves to download: its own store's `.snap.new` files, `<platform>/<scenario>.snap.new`
    /// under its `expectations/` (the artefact's root), here for web and db on [`KIND`].
    fn artefact(tmp: &Path) -> PathBuf {
        let ci = tmp.join("ci");
        std::fs::create_dir_all(ci.join("set")).unwrap();
        let run = Store::with(&ci.join("set"), None, &tmp.join("faultlab/scenarios"), &tmp.join("faultlab/expectations")).unwrap();
        assert!(matches!(run.check(KIND, "web", &[ev("Pulled", "web's image")]), SnapshotResult::New(_)));
        assert!(matches!(run.check(KIND, "db", &[ev("Started", "db")]), SnapshotResult::New(_)));
        run.dir
    }

    /// Every file under `dir`, relative to it, sorted.
    fn files(dir: &Path) -> Vec<String> {
        let mut out = Vec::new();
        for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            match e.file_type().unwrap().is_dir() {
                true => out.extend(files(&e.path()).into_iter().map(|f| format!("{name}/{f}"))),
                false => out.push(name),
            }
        }
        out.sort();
        out
    }

    #[test]
    fn snapshots_from_a_ci_artefact_are_listed_and_accepted_into_the_store_which_only_reads_it() {
        let tmp = tempfile::tempdir().unwrap();
        let s = store(tmp.path());
        let from = artefact(tmp.path());
        let before = files(&from);
        assert_eq!(before, [format!("{KIND}/db.snap.new"), format!("{KIND}/web.snap.new")]);

        let pending = s.pending_from(&from).unwrap();
        assert_eq!(pending.iter().map(|p| (p.name.as_str(), p.snap.clone(), p.from.clone())).collect::<Vec<_>>(), [
            ("db", s.path(KIND, "db"), Some(from.clone())),
            ("web", s.path(KIND, "web"), Some(from.clone()))
        ]);
        let mut listed = Vec::new();
        assert_eq!(list_pending(&s, Some(&from), &mut listed, false).unwrap(), 2);
        let listed = String::from_utf8(listed).unwrap();
        assert!(listed.contains(&format!("web on {KIND}: new, no reviewed snapshot yet\n  {}", from.join(KIND).join("web.snap.new").display())), "{listed}");
        assert!(listed.contains("  + Pod/web-<id> Normal Pulled (kubelet): web's image\n"), "{listed}");
        assert!(listed.contains(&format!("2 snapshot(s) wait for review in {}. Read each, then accept them with `faultlab snapshots accept [NAME] --platform PLATFORM --from {}", from.display(), from.display())), "{listed}");

        let accepted = s.accept_from(&from, KIND, Some("web")).unwrap();
        assert_eq!(accepted.iter().map(|p| p.name.as_str()).collect::<Vec<_>>(), ["web"]);
        assert_eq!(std::fs::read(s.path(KIND, "web")).unwrap(), std::fs::read(from.join(KIND).join("web.snap.new")).unwrap(), "copied byte for byte");
        assert_eq!(files(&s.dir), [format!("{KIND}/web.snap")], "nothing else, no temporary file");
        // Every one of the platform; the store's reviewed one now matches a run's events.
        assert_eq!(s.accept_from(&from, KIND, None).unwrap().len(), 2);
        assert_eq!(files(&s.dir), [format!("{KIND}/db.snap"), format!("{KIND}/web.snap")]);
        assert_eq!(s.check(KIND, "db", &[ev("Started", "db")]), SnapshotResult::Matched);
        assert_eq!(files(&from), before, "the artefact is only read");
    }

    #[test]
    fn review_from_a_directory_accepts_into_the_store_and_leaves_the_directory_as_it_is() {
        let tmp = tempfile::tempdir().unwrap();
        let s = store(tmp.path());
        let from = artefact(tmp.path());
        let mut out = Vec::new();
        let done = review(&s, Some(&from), &mut std::io::Cursor::new("r\na\n"), &mut out, false).unwrap();
        let out = String::from_utf8(out).unwrap();
        assert_eq!((done.accepted.len(), done.rejected.len(), done.skipped.len()), (1, 1, 0), "{out}");
        assert!(out.contains(&format!("[1/2] db on {KIND}: new, no reviewed snapshot yet")), "{out}");
        assert!(out.contains(&format!("rejected: {} not taken (left where it is)", from.join(KIND).join("db.snap.new").display())), "{out}");
        assert!(out.contains(&format!("accepted: {}", s.path(KIND, "web").display())), "{out}");
        assert_eq!(files(&s.dir), [format!("{KIND}/web.snap")]);
        assert_eq!(files(&from).len(), 2, "nothing deleted from it");
        // Reviewed again, the accepted one is the same as the reviewed snapshot, and said so (as a
        // CI artefact's first-run snapshots are once this set has reviewed the platform).
        let mut out = Vec::new();
        list_pending(&s, Some(&from), &mut out, false).unwrap();
        let out = String::from_utf8(out).unwrap();
        assert!(out.contains(&format!("web on {KIND}: the same as the reviewed snapshot (1 event(s)); accepting it changes nothing")), "{out}");
        assert!(!out.contains(&format!("web on {KIND}: differs")), "{out}");
        // An empty directory waits for nothing.
        let empty = tmp.path().join("empty");
        std::fs::create_dir(&empty).unwrap();
        let mut out = Vec::new();
        assert_eq!(list_pending(&s, Some(&empty), &mut out, false).unwrap(), 0);
        assert_eq!(String::from_utf8(out).unwrap(), format!("no snapshots waiting for review in {}\n", empty.display()));
    }

    fn make_fifo(path: &Path) {
        let c = std::ffi::CString::new(path.as_os_str().as_encoded_bytes()).unwrap();
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o644) }, 0);
    }

    /// Bad input: a clear error naming the file (or directory) and what is wrong, and nothing written
    /// into the store.
    #[rstest::rstest]
    #[case::missing(|d: &Path| { std::fs::remove_dir_all(d).unwrap(); }, "", "--from {DIR}: no such directory")]
    #[case::a_file(|d: &Path| { std::fs::remove_dir_all(d).unwrap(); std::fs::write(d, "zip").unwrap(); }, "", "--from {DIR}: not a directory")]
    #[case::flat(|d: &Path| { std::fs::rename(d.join(KIND).join("web.snap.new"), d.join("web.snap.new")).unwrap(); }, "web.snap.new", ": not a pending snapshot: it lies outside a platform's directory")]
    #[case::stray_file(|d: &Path| { std::fs::write(d.join("README"), "hi").unwrap(); }, "README", ": not a pending snapshot: --from DIR holds a directory per platform")]
    #[case::reviewed_not_pending(|d: &Path| { std::fs::rename(d.join(KIND).join("web.snap.new"), d.join(KIND).join("web.snap")).unwrap(); }, "{KIND}/web.snap", ": not a pending snapshot: a platform's directory holds only <scenario>.snap.new files")]
    #[case::too_deep(|d: &Path| { std::fs::create_dir(d.join(KIND).join("more")).unwrap(); }, "{KIND}/more", ": not a pending snapshot: a platform's directory holds only")]
    #[case::not_a_platform(|d: &Path| { std::fs::create_dir(d.join(".hidden")).unwrap(); }, ".hidden", ": not a pending snapshot: \".hidden\" is not a platform's name")]
    #[case::garbage(|d: &Path| { std::fs::write(d.join(KIND).join("web.snap.new"), "garbage").unwrap(); }, "{KIND}/web.snap.new", ": not a snapshot file (a `---` header, then a YAML list of events)")]
    #[case::renamed(|d: &Path| { std::fs::rename(d.join(KIND).join("web.snap.new"), d.join(KIND).join("api.snap.new")).unwrap(); }, "{KIND}/api.snap.new", &format!(": its header says it holds the events of web on {KIND}, but its place says api on {KIND}"))]
    #[case::other_platform(|d: &Path| { std::fs::create_dir(d.join("kind-1.32-containerd-2.0-cgroup2-arm64")).unwrap(); std::fs::rename(d.join(KIND).join("web.snap.new"), d.join("kind-1.32-containerd-2.0-cgroup2-arm64/web.snap.new")).unwrap(); }, "kind-1.32-containerd-2.0-cgroup2-arm64/web.snap.new", &format!(": its header says it holds the events of web on {KIND}, but its place says web on kind-1.32-containerd-2.0-cgroup2-arm64"))]
    #[case::no_header(|d: &Path| { std::fs::write(d.join(KIND).join("web.snap.new"), "---\nsource: x\n---\n[]\n").unwrap(); }, "{KIND}/web.snap.new", ": not a pending snapshot: its header's description does not say whose events it holds")]
    #[case::symlink(|d: &Path| { let f = d.join(KIND).join("web.snap.new"); let away = d.parent().unwrap().join("elsewhere"); std::fs::rename(&f, &away).unwrap(); std::os::unix::fs::symlink(away, &f).unwrap(); }, "{KIND}/web.snap.new", ": not read back: it is a symbolic link; only regular files are read back")]
    #[case::fifo(|d: &Path| { let f = d.join(KIND).join("web.snap.new"); std::fs::remove_file(&f).unwrap(); make_fifo(&f); }, "{KIND}/web.snap.new", ": not read back: it is a FIFO (named pipe)")]
    fn bad_input_is_named_and_nothing_is_written(#[case] plant: fn(&Path), #[case] file: &str, #[case] says: &str) {
        let tmp = tempfile::tempdir().unwrap();
        let s = store(tmp.path());
        let from = artefact(tmp.path());
        plant(&from);
        let named = if file.is_empty() { String::new() } else { from.join(file.replace("{KIND}", KIND)).display().to_string() };
        let expected = format!("{named}{}", says.replace("{DIR}", &from.display().to_string()));
        for err in [s.pending_from(&from).unwrap_err(), s.accept_from(&from, KIND, None).unwrap_err()] {
            assert!(err.to_string().starts_with(&expected), "{err}\nexpected: {expected}");
        }
        let mut out = Vec::new();
        assert!(review(&s, Some(&from), &mut std::io::Cursor::new("a\na\n"), &mut out, false).is_err());
        assert!(files(&s.dir).is_empty(), "nothing written: {:?}", files(&s.dir));
    }

    #[test]
    fn accept_from_names_a_platform_or_a_scenario_that_is_not_there() {
        let tmp = tempfile::tempdir().unwrap();
        let s = store(tmp.path());
        let from = artefact(tmp.path());
        let err = s.accept_from(&from, "kind-1.32-containerd-2.0-cgroup2-arm64", None).unwrap_err().to_string();
        assert_eq!(
            err,
            format!("{} holds no snapshot waiting for platform kind-1.32-containerd-2.0-cgroup2-arm64, only for {KIND}: pass --platform with the platform the run reported (each file lies in its platform's directory)", from.display())
        );
        let err = s.accept_from(&from, KIND, Some("api")).unwrap_err().to_string();
        assert_eq!(err, format!("no snapshot of api on {KIND} waits for review in {} (waiting: db on {KIND}, web on {KIND})", from.display()));
        assert!(matches!(s.accept_from(&from, "../x", None), Err(SnapshotError::Name { .. })));
        assert!(matches!(s.accept_from(&from, KIND, Some("../web")), Err(SnapshotError::Name { .. })));
        assert!(files(&s.dir).is_empty());
    }

    /// As root, a file read back must be root's or the invoking user's; otherwise anyone's will do.
    #[rstest::rstest]
    #[case::root_reads_roots(0, 0, 0, true)]
    #[case::root_reads_the_invoking_users(1000, 0, 1000, true)]
    #[case::root_refuses_another_users(1001, 0, 1000, false)]
    #[case::root_alone_refuses_any_user(1000, 0, 0, false)]
    #[case::a_user_reads_anyones(1001, 1000, 1000, true)]
    fn files_read_back_as_root_are_roots_or_the_invoking_users(#[case] owner: u32, #[case] euid: u32, #[case] invoking: u32, #[case] read: bool) {
        assert_eq!(owner_refusal(owner, euid, invoking).is_none(), read);
        // The same on a real file, where this process may give it away (as root).
        let tmp = tempfile::tempdir().unwrap();
        let f = tmp.path().join("web.snap.new");
        std::fs::write(&f, file_text("web", "p", &[])).unwrap();
        if std::os::unix::fs::chown(&f, Some(owner), None).is_ok() {
            let got = read_back_as(&f, euid, invoking);
            assert_eq!(got.is_ok(), read, "{got:?}");
            if !read {
                let err = got.unwrap_err().to_string();
                assert!(err.starts_with(&format!("{}: not read back: it is owned by uid {owner}: running as root", f.display())), "{err}");
            }
        }
    }

    #[test]
    fn a_snapshot_is_written_whole_and_never_through_a_link() {
        let tmp = tempfile::tempdir().unwrap();
        let s = store(tmp.path());
        let outside = tmp.path().join("outside");
        std::fs::write(&outside, "keep me").unwrap();
        std::fs::create_dir_all(s.dir.join("p")).unwrap();
        std::os::unix::fs::symlink(&outside, s.new_path("p", "web")).unwrap();
        let result = s.check("p", "web", &[ev("A", "b")]);
        let detail = result.detail().unwrap_or_default();
        assert!(matches!(result, SnapshotResult::New(_)), "{result:?}");
        assert!(
            detail.contains(&format!("refusing to write {}: it is a symbolic link", s.new_path("p", "web").display())),
            "the refusal names the link: {detail}"
        );
        assert_eq!(std::fs::read_to_string(&outside).unwrap(), "keep me", "not written through the link");
        assert!(std::fs::symlink_metadata(s.new_path("p", "web")).unwrap().file_type().is_symlink(), "the link is left as it was");
        assert_eq!(files(&s.dir), ["p/web.snap.new"], "no temporary file left");
        // A pending snapshot that is a link is not accepted, and the reviewed one is not written.
        let err = s.accept("web", None);
        assert!(matches!(&err, Err(SnapshotError::ReadBack { .. })), "{err:?}");
        assert!(!s.path("p", "web").exists());
        // A reviewed snapshot that is a link is not written through when a pending one is accepted.
        std::fs::remove_file(s.new_path("p", "web")).unwrap();
        assert!(matches!(s.check("p", "web", &[ev("A", "b")]), SnapshotResult::New(_)));
        std::os::unix::fs::symlink(&outside, s.path("p", "web")).unwrap();
        let err = s.accept("web", None).unwrap_err();
        assert!(matches!(&err, SnapshotError::Install { source: crate::atomic::AtomicError::Symlink { .. }, .. }), "{err:?}");
        assert_eq!(std::fs::read_to_string(&outside).unwrap(), "keep me");
    }

    /// The platform is what the cluster's nodes say and the scenario a file's name: neither may leave
    /// the expectations directory, or name a file no person would look for.
    #[rstest::rstest]
    #[case::parent("../../outside", "web", "platform \"../../outside\"")]
    #[case::slash("k8s/1.20", "web", "platform \"k8s/1.20\"")]
    #[case::dots("k8s..1", "web", "platform \"k8s..1\"")]
    #[case::hidden(".k8s", "web", "platform \".k8s\"")]
    #[case::option("-k8s", "web", "platform \"-k8s\"")]
    #[case::upper("K8S-1.20", "web", "platform \"K8S-1.20\"")]
    #[case::escape("k8s\u{1b}[2J", "web", "platform \"k8s\\u{1b}[2J\"")]
    #[case::empty("", "web", "platform \"\"")]
    #[case::scenario("k8s-1.20-containerd-1.6-amd64", "../web", "scenario \"../web\"")]
    fn a_name_that_is_not_plain_forms_no_path(#[case] platform: &str, #[case] scenario: &str, #[case] named: &str) {
        let tmp = tempfile::tempdir().unwrap();
        let s = store(tmp.path());
        let result = s.check(platform, scenario, &[ev("A", "b")]);
        let detail = result.detail().unwrap_or_default().to_string();
        assert!(matches!(result, SnapshotResult::Changed(_)), "{result:?}");
        assert!(detail.starts_with(&format!("not compared: {named} is not a plain name")), "{detail}");
        assert!(!detail.contains('\x1b'), "{detail:?}");
        assert_eq!(files(tmp.path()), Vec::<String>::new(), "nothing written");
    }

    /// `snapshots review` shows the cluster's text: an escape sequence or a newline in an event is shown
    /// as an escape, on the event's own line.
    #[test]
    fn review_shows_an_events_controls_as_escapes() {
        let tmp = tempfile::tempdir().unwrap();
        let s = store(tmp.path());
        let hostile = Normalised { object: "Pod/web\u{9b}31m".into(), ..ev("Bad\x1b]0;owned\x07", "line\n+ Pod/forged Normal Started (kubelet): ok\x1b[2J\x7f") };
        assert!(matches!(s.check("p", "web", &[hostile]), SnapshotResult::New(_)));
        let mut out = Vec::new();
        assert_eq!(list_pending(&s, None, &mut out, false).unwrap(), 1);
        let text = String::from_utf8(out).unwrap();
        assert!(!text.chars().any(|c| c.is_control() && c != '\n'), "{text:?}");
        let line = text.lines().find(|l| l.starts_with("  + ")).unwrap();
        assert_eq!(line, r"  + Pod/web\u{9b}31m Normal Bad\u{1b}]0;owned\u{7} (kubelet): line\n+ Pod/forged Normal Started (kubelet): ok\u{1b}[2J\u{7f}");
        assert_eq!(text.lines().filter(|l| l.starts_with("  + ")).count(), 1, "{text}");
    }
}
