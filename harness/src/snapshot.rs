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

use std::io::{BufRead, Write};
use std::path::{Path, PathBuf};

use serde::Serialize;
use thiserror::Error;

use crate::events::{Normalised, Withheld};

/// What the snapshot comparison found.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase", tag = "result", content = "detail")]
pub enum SnapshotResult {
    Matched,
    /// Differs from the reviewed snapshot, or there is none: one paragraph saying what differs and
    /// where the `.snap.new` file to review is.
    Mismatched(String),
    /// Not compared (a plan, or the run failed before the events were complete).
    Skipped(String),
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
    #[error("{what} {value:?} is not a plain name (letters, digits, '-', '_' and '.', not starting with '.')")]
    Name { what: &'static str, value: String },
    #[error("no snapshot of {name} waits for review in {}{}", dir.display(), if pending.is_empty() { String::new() } else { format!(" (waiting: {})", pending.join(", ")) })]
    NoPending { name: String, dir: PathBuf, pending: Vec<String> },
    #[error("{name} has snapshots waiting for review on several platforms ({}); pass --platform with one of them", platforms.join(", "))]
    Ambiguous { name: String, platforms: Vec<String> },
    #[error("reading the answer: {0}")]
    Answer(#[source] std::io::Error),
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
        let snap = self.path(platform, scenario);
        let new = self.new_path(platform, scenario);
        let stored = match std::fs::read_to_string(&snap) {
            Ok(text) => Some(stored_events(&text).ok_or(())),
            // Not there (a file where the platform's directory should be: writing will say so).
            Err(e) if matches!(e.kind(), std::io::ErrorKind::NotFound | std::io::ErrorKind::NotADirectory) => None,
            Err(e) => return (SnapshotResult::Mismatched(format!("cannot read the reviewed snapshot {}: {e}", snap.display())), None),
        };
        if let Some(Ok(stored)) = &stored {
            if stored == events {
                let _ = std::fs::remove_file(&new);
                return (SnapshotResult::Matched, None);
            }
            let (missing, unexpected) = difference(stored, events);
            let held = |e: &Normalised| withheld.iter().find(|w| w.object == e.object && w.source == e.source);
            if unexpected.is_empty() && !missing.is_empty() && missing.iter().all(|e| held(e).is_some()) {
                let _ = std::fs::remove_file(&new);
                let mut note = format!(
                    "the events of {scenario} on {platform} match the reviewed snapshot but for {} event(s) their source held back: client-go's event recorder sends at most {} events about one object, then one every {} s, and this run saw them used up",
                    missing.len(),
                    crate::events::SPAM_BURST,
                    crate::events::SPAM_REFILL.as_secs()
                );
                for e in missing {
                    let w = held(e).expect("checked above");
                    note.push_str(&format!("\n    held back:  {} ({} sent about it by {} in the run)", one_line(e), w.sent, w.source));
                }
                return (SnapshotResult::Matched, Some(note));
            }
        }
        let written = write_snapshot(&new, scenario, platform, events);
        let next = match &written {
            Ok(()) => format!(
                "wrote {}; read it and accept it with `{}` (or review with `{}`)",
                new.display(),
                self.accept_command(scenario),
                self.review_command()
            ),
            Err(e) => format!("and {e}: the events are in the run's report (`--output json`)"),
        };
        let paragraph = match stored {
            None => format!("no reviewed snapshot yet for {scenario} on {platform}: {next}"),
            Some(Err(())) => format!(
                "the reviewed snapshot {} is not a snapshot file (a `---` header, then a YAML list of events) and was left as it is: {next}",
                snap.display()
            ),
            Some(Ok(stored)) => {
                let (missing, unexpected) = difference(&stored, events);
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
        };
        (SnapshotResult::Mismatched(paragraph), None)
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
                if name.is_empty() || !file.file_type().is_ok_and(|t| t.is_file()) {
                    continue;
                }
                out.push(Pending {
                    name: name.to_string(),
                    platform: platform_name.clone(),
                    new: file.path(),
                    snap: self.path(&platform_name, name),
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

fn quote(path: &Path) -> String {
    shell_words::quote(&path.display().to_string()).into_owned()
}

/// A scenario or platform name used as a file name: nothing that leaves its directory.
fn plain(what: &'static str, value: &str) -> Result<(), SnapshotError> {
    let ok = !value.is_empty() && !value.starts_with('.') && value.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'));
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
}

/// What a pending snapshot changes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Change {
    /// The reviewed events, if there is a reviewed snapshot.
    pub stored: Option<Vec<Normalised>>,
    pub new: Vec<Normalised>,
}

impl Pending {
    /// Read the new events and the reviewed ones.
    pub fn change(&self) -> Result<Change, SnapshotError> {
        let read = |path: &Path| std::fs::read_to_string(path).map_err(|source| SnapshotError::Read { path: path.to_path_buf(), source });
        let new = stored_events(&read(&self.new)?).ok_or_else(|| SnapshotError::Format { path: self.new.clone() })?;
        let stored = match std::fs::read_to_string(&self.snap) {
            Ok(text) => Some(stored_events(&text).ok_or_else(|| SnapshotError::Format { path: self.snap.clone() })?),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
            Err(source) => return Err(SnapshotError::Read { path: self.snap.clone(), source }),
        };
        Ok(Change { stored, new })
    }

    /// Move the `.snap.new` over the `.snap` (after checking that it reads as events).
    pub fn accept(&self) -> Result<(), SnapshotError> {
        let text = std::fs::read_to_string(&self.new).map_err(|source| SnapshotError::Read { path: self.new.clone(), source })?;
        stored_events(&text).ok_or_else(|| SnapshotError::Format { path: self.new.clone() })?;
        std::fs::rename(&self.new, &self.snap).map_err(|source| SnapshotError::Write { path: self.snap.clone(), source })
    }

    /// Delete the `.snap.new`; the reviewed `.snap` stays as it is.
    pub fn reject(&self) -> Result<(), SnapshotError> {
        std::fs::remove_file(&self.new).map_err(|source| SnapshotError::Write { path: self.new.clone(), source })
    }

    /// The difference, for a person: a heading, then `-` for each event the reviewed snapshot has and
    /// the new one lacks, `+` for each new one (every event when there is no reviewed snapshot).
    pub fn render(&self, colour: bool) -> Result<String, SnapshotError> {
        let change = self.change()?;
        let paint = |code: &str, text: String| if colour { format!("\x1b[{code}m{text}\x1b[0m") } else { text };
        let mut out = String::new();
        match &change.stored {
            None => {
                out.push_str(&paint("1", format!("{} on {}: new, no reviewed snapshot yet", self.name, self.platform)));
                out.push_str(&format!("\n  {} ({} events)\n", self.new.display(), change.new.len()));
                for e in &change.new {
                    out.push_str(&paint("32", format!("  + {}", one_line(e))));
                    out.push('\n');
                }
            }
            Some(stored) => {
                let (missing, unexpected) = difference(stored, &change.new);
                out.push_str(&paint("1", format!("{} on {}: differs from the reviewed snapshot", self.name, self.platform)));
                out.push_str(&format!("\n  - {}\n  + {}\n", self.snap.display(), self.new.display()));
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

/// Review every snapshot waiting in `store`: show each difference on `out` and ask on `input` to
/// accept (the `.snap.new` replaces the `.snap`), reject (it is deleted) or skip it (it stays). The
/// end of the input skips the rest.
pub fn review(store: &Store, input: &mut dyn BufRead, out: &mut dyn Write, colour: bool) -> Result<Reviewed, SnapshotError> {
    let io = |source: std::io::Error| SnapshotError::Write { path: PathBuf::from("<stdout>"), source };
    let pending = store.pending()?;
    let mut done = Reviewed::default();
    if pending.is_empty() {
        writeln!(out, "no snapshots waiting for review in {}", store.dir.display()).map_err(io)?;
        return Ok(done);
    }
    let total = pending.len();
    let mut rest = pending.into_iter().enumerate();
    while let Some((i, p)) = rest.next() {
        write!(out, "\n[{}/{total}] {}", i + 1, p.render(colour)?).map_err(io)?;
        let answer = loop {
            write!(out, "accept (a), reject (r) or skip (s)? ").map_err(io)?;
            out.flush().map_err(io)?;
            let mut line = String::new();
            if input.read_line(&mut line).map_err(SnapshotError::Answer)? == 0 {
                writeln!(out).map_err(io)?;
                break None;
            }
            match line.trim().to_ascii_lowercase().as_str() {
                "a" | "accept" => break Some('a'),
                "r" | "reject" => break Some('r'),
                "s" | "skip" | "" => break Some('s'),
                other => writeln!(out, "{other:?}: answer a, r or s").map_err(io)?,
            }
        };
        match answer {
            Some('a') => {
                p.accept()?;
                writeln!(out, "accepted: {}", p.snap.display()).map_err(io)?;
                done.accepted.push(p);
            }
            Some('r') => {
                p.reject()?;
                writeln!(out, "rejected: {} deleted", p.new.display()).map_err(io)?;
                done.rejected.push(p);
            }
            Some(_) => done.skipped.push(p),
            None => {
                done.skipped.push(p);
                done.skipped.extend(rest.by_ref().map(|(_, p)| p));
            }
        }
    }
    writeln!(out, "\n{} accepted, {} rejected, {} skipped", done.accepted.len(), done.rejected.len(), done.skipped.len()).map_err(io)?;
    Ok(done)
}

/// Without a terminal to ask on: show every snapshot waiting in `store` and how to review it.
/// Returns how many wait.
pub fn list_pending(store: &Store, out: &mut dyn Write, colour: bool) -> Result<usize, SnapshotError> {
    let io = |source: std::io::Error| SnapshotError::Write { path: PathBuf::from("<stdout>"), source };
    let pending = store.pending()?;
    if pending.is_empty() {
        writeln!(out, "no snapshots waiting for review in {}", store.dir.display()).map_err(io)?;
        return Ok(0);
    }
    for p in &pending {
        writeln!(out, "{}", p.render(colour)?).map_err(io)?;
    }
    writeln!(
        out,
        "{} snapshot(s) wait for review in {}. Read each, then accept it with `{}` (--platform P when it waits on several), or run `{}` on a terminal",
        pending.len(),
        store.dir.display(),
        store.accept_command("NAME"),
        store.review_command()
    )
    .map_err(io)?;
    Ok(pending.len())
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
    let write = || {
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir)?;
        }
        std::fs::write(path, file_text(scenario, platform, events))
    };
    write().map_err(|source| SnapshotError::Write { path: path.to_path_buf(), source })
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

fn one_line(e: &Normalised) -> String {
    format!("{} {} {} ({}): {}", e.object, e.type_, e.reason, e.source, e.message)
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
        let SnapshotResult::Mismatched(text) = s.check("k8s-1.20-containerd-1.6-amd64", "web", &events) else { panic!("mismatch expected") };
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
        let SnapshotResult::Mismatched(text) = s.check("p", "web", &new) else { panic!("mismatch expected") };
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
        assert!(matches!(s.check_held_back("p", "web", &short, &other), (SnapshotResult::Mismatched(_), None)));
        let other = [Withheld { object: "Pod/web-<id>".into(), source: "default-scheduler".into(), sent: 25 }];
        assert!(matches!(s.check_held_back("p", "web", &short, &other), (SnapshotResult::Mismatched(_), None)));
        // An unexpected event is a difference whatever was held back.
        let extra = vec![ev("BackOff", "Back-off pulling image"), ev("Failed", "x509")];
        assert!(matches!(s.check_held_back("p", "web", &extra, &held), (SnapshotResult::Mismatched(_), None)));
        // Equal is equal, without a note.
        assert_eq!(s.check_held_back("p", "web", &old, &held), (SnapshotResult::Matched, None));
    }

    #[test]
    fn an_unwritable_store_says_so_in_the_paragraph() {
        let tmp = tempfile::tempdir().unwrap();
        let s = store(tmp.path());
        // The platform directory cannot be made: a file is in its way.
        std::fs::create_dir_all(&s.dir).unwrap();
        std::fs::write(s.dir.join("p"), "not a directory").unwrap();
        let SnapshotResult::Mismatched(text) = s.check("p", "web", &[ev("A", "b")]) else { panic!() };
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
        assert_eq!(list_pending(&s, &mut listed, false).unwrap(), 4);
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
        let done = review(&s, &mut input, &mut out, true).unwrap();
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
        review(&s, &mut std::io::Cursor::new("a\na\n"), &mut out, false).unwrap();
        assert!(s.pending().unwrap().is_empty());
        let mut out = Vec::new();
        assert_eq!(list_pending(&s, &mut out, false).unwrap(), 0);
        assert!(String::from_utf8(out).unwrap().starts_with("no snapshots waiting for review in "));
    }
}
