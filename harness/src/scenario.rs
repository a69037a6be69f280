//! Scenario files: one YAML file per documented fault under `scenarios/`.
//!
//! A scenario names its workload, its fault and the fault's parameters, the documented symptom (pod,
//! node and claim gates plus expected events), the documented fix as steps in the document's order, the
//! recovery condition with its deadline, its source document, and hints for trainees. Files are decoded
//! strictly: unknown fields are errors reported with file:line:column.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use thiserror::Error;

use crate::check::Problem;
use crate::datafile::{self, ApiVersion, DataFileError};
use crate::manifest;
use crate::duration::Span;
use crate::faults::FaultSpec;
pub use crate::gates::{ClaimGate, ConditionGate, DeploymentGate, EventGate, Gates, NodeGate, PodGate, Target};

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum ScenarioKind {
    Scenario,
}

/// A documented fault, reproduced end to end.
#[derive(Clone, Debug, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Scenario {
    pub api_version: ApiVersion,
    pub kind: ScenarioKind,
    pub metadata: Metadata,
    pub workload: Workload,
    /// The fault, keyed by its name, with its parameters.
    pub fault: FaultSpec,
    pub symptom: Symptom,
    /// The documented fix, as steps in the document's own order.
    pub fix: Vec<FixStep>,
    pub recovery: Recovery,
    /// Progressive hints for trainees, each closer to the answer.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub hints: Vec<String>,
    #[serde(default)]
    pub snapshot: SnapshotOptions,
    /// Values a blind challenge may change (`faultlab train --blind`), so that the second time is
    /// diagnosis, not memory (a port, a memory limit). Each entry is a list of alternatives; an
    /// alternative maps whole words of this file to what replaces them wherever they occur (the
    /// workload, the fault's parameters, the gates, the fix's words and the hints alike). A challenge
    /// takes, for each entry, one of its alternatives at random or the file as written. `faultlab run`
    /// never does: the snapshots are of the file as written.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub variants: Vec<Vec<BTreeMap<String, String>>>,
}

/// A documented cause faultlab does not reproduce, and why: a file of the set like a scenario's, with
/// `reproducible: false` and the reason in place of the workload, fault, symptom, fix and recovery.
/// `faultlab list` shows it, so the gap is visible and searchable; nothing runs it.
#[derive(Clone, Debug, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Gap {
    pub api_version: ApiVersion,
    pub kind: ScenarioKind,
    pub metadata: Metadata,
    /// `false`: this cause is not reproduced (a scenario that is leaves the field out).
    pub reproducible: bool,
    /// Why not: what a faithful reproduction needs that faultlab's platforms lack, and what would
    /// close the gap.
    pub reason: String,
}

/// What a file of the scenario set is: a scenario, or a documented cause it does not reproduce.
#[derive(Clone, Debug, Serialize, Deserialize, JsonSchema)]
#[serde(untagged)]
pub enum ScenarioFile {
    Scenario(Box<Scenario>),
    Gap(Gap),
}

#[derive(Clone, Debug, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Metadata {
    /// The scenario's name; equals the file name without `.yaml`.
    pub name: String,
    /// What happens, for people.
    pub description: String,
    pub source: Source,
}

/// The document the fault, its symptom and its fix come from.
#[derive(Clone, Debug, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Source {
    /// The document's name (for example `cce_faq_00140.html`).
    pub document: String,
    pub title: String,
    /// The section of the document this scenario follows.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub section: Option<String>,
    /// The document's fix, quoted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fix: Option<String>,
    /// For a documented bug that upstream fixed: the first release with the fix and the change that
    /// fixed it. The scenario is then a regression guard: on that release and later its symptom is the
    /// fixed behaviour, and the bug's own symptom must not occur.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fixed_upstream: Option<String>,
}

#[derive(Clone, Debug, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Workload {
    /// Manifests applied into the scenario's namespace, in order.
    pub manifests: Vec<Manifest>,
    /// The pods that show the symptom and must recover.
    pub target: Target,
    /// How long the workload may take to be ready before the fault.
    #[serde(default = "default_ready_within")]
    pub ready_within: Span,
    /// Do not wait for the workload before injecting (it is created broken on purpose). Its events are
    /// recorded from before it is created, since its symptom's first events come at once.
    #[serde(default)]
    pub start_broken: bool,
    /// Cluster-scoped objects the manifests create, as `Kind/name` (`StorageClass/fast`). Anything
    /// else a manifest creates is namespaced and lives in the run's namespace; a cluster-scoped object
    /// not named here is refused. Each is journalled and deleted at teardown, and `show` and `plan`
    /// list them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub cluster_objects: Vec<String>,
}

fn default_ready_within() -> Span {
    Span(std::time::Duration::from_secs(120))
}

/// A manifest: inline YAML (one or more documents) or a path relative to the scenario file.
#[derive(Clone, Debug, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub enum Manifest {
    Inline(String),
    Path(PathBuf),
}


/// The documented symptom. The gates are the pass/fail test; the events must be seen too.
#[derive(Clone, Debug, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Symptom {
    pub within: Span,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pod: Option<PodGate>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node: Option<NodeGate>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub claim: Option<ClaimGate>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deployment: Option<DeploymentGate>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub events: Vec<EventGate>,
}

impl Symptom {
    pub fn gates(&self) -> Gates<'_> {
        Gates { pod: self.pod.as_ref(), node: self.node.as_ref(), claim: self.claim.as_ref(), deployment: self.deployment.as_ref() }
    }
}

impl Recovery {
    pub fn gates(&self) -> Gates<'_> {
        Gates { pod: self.pod.as_ref(), node: self.node.as_ref(), claim: self.claim.as_ref(), deployment: self.deployment.as_ref() }
    }
}

/// One documented fix step.
#[derive(Clone, Debug, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct FixStep {
    /// The step, one of the fault's fix steps (`faultlab show` lists them).
    pub step: String,
    /// What the document says for this step.
    pub doc: String,
}

/// The workload is back: gates that must hold within the deadline.
#[derive(Clone, Debug, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Recovery {
    pub within: Span,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pod: Option<PodGate>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node: Option<NodeGate>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub claim: Option<ClaimGate>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deployment: Option<DeploymentGate>,
}

/// What the event snapshot leaves out.
#[derive(Clone, Debug, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SnapshotOptions {
    /// Event reasons whose appearance depends on timing, left out of the snapshot (say why in a comment).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ignore_reasons: Vec<String>,
    /// Parts of messages that differ from run to run for a reason the platform gives (say which in a
    /// comment), written the same way in every run: applied to each normalised message, in order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub rewrite: Vec<Rewrite>,
}

/// One rewrite of snapshot messages: every match of `pattern` becomes `with`.
#[derive(Clone, Debug, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Rewrite {
    #[schemars(with = "String")]
    pub pattern: crate::pattern::Pattern,
    pub with: String,
}

impl SnapshotOptions {
    /// The message as the snapshot keeps it.
    pub fn rewritten(&self, message: &str) -> String {
        self.rewrite.iter().fold(message.to_string(), |m, r| r.pattern.replace_all(&m, &r.with))
    }
}

#[derive(Debug, Error)]
pub enum ScenarioError {
    #[error(transparent)]
    Decode(#[from] DataFileError),
    /// Values the schema lets through but a run must not get: every one found, one per line.
    #[error("{}", problems.iter().map(|p| p.to_string()).collect::<Vec<_>>().join("\n"))]
    Invalid { problems: Vec<Located> },
    #[error("no scenario named {name:?} in {}; {}", dir.display(), if known.is_empty() { "it has no scenario files".to_string() } else { format!("known: {}", known.join(", ")) })]
    NotFound { name: String, dir: PathBuf, known: Vec<String> },
    /// The file is a [`Gap`]: a documented cause with the reason it is not reproduced.
    #[error("scenario {:?} ({}) is not reproducible: {}", gap.metadata.name, path.display(), gap.reason.trim())]
    NotReproducible { path: PathBuf, gap: Box<Gap> },
    #[error("another file of the set has the same scenario name: {}; rename or remove one", other.display())]
    SameName { other: PathBuf },
    #[error("scenario {name:?} is in two files, {}; rename or remove one", paths.iter().map(|p| p.display().to_string()).collect::<Vec<_>>().join(" and "))]
    Ambiguous { name: String, paths: Vec<PathBuf> },
    #[error("cannot list scenarios in {}: {source}", dir.display())]
    List {
        dir: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

/// A problem at a file's line and column (the scenario file, or a manifest file it names).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Located {
    pub path: PathBuf,
    pub line: u64,
    pub column: u64,
    pub problem: Problem,
}

impl std::fmt::Display for Located {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}:{}:{}: {}", self.path.display(), self.line, self.column, self.problem)
    }
}

/// A scenario with the path it was read from, and its workload's manifests as checked.
#[derive(Clone, Debug)]
pub struct Loaded {
    pub path: PathBuf,
    pub scenario: Scenario,
    /// The manifests' text, in order, as read and checked when the scenario was loaded (a run applies
    /// exactly these, never a file read again later).
    manifests: Vec<String>,
}

impl Loaded {
    pub fn name(&self) -> &str {
        &self.scenario.metadata.name
    }

    /// The manifests as YAML text, in order.
    pub fn manifest_texts(&self) -> Result<Vec<String>, ScenarioError> {
        Ok(self.manifests.clone())
    }

    /// The objects the workload creates, in order, with `vars` substituted: each with whether it is
    /// cluster-scoped (then `workload.clusterObjects` names it; the runner journals its deletion).
    pub fn objects(&self, vars: &crate::vars::Vars) -> Result<Vec<Object>, ScenarioError> {
        let mut out = Vec::new();
        for text in &self.manifests {
            let docs = manifest::split(&vars.text(text)).map_err(|p| ScenarioError::Invalid {
                problems: vec![Located { path: self.path.clone(), line: p.line, column: p.column, problem: p.problem }],
            })?;
            for doc in docs {
                let cluster_scoped = manifest::is_cluster_scoped(doc.api_version(), doc.kind());
                out.push(Object { value: doc.value, cluster_scoped });
            }
        }
        Ok(out)
    }

    /// The cluster-scoped objects the workload creates (`Kind/name`).
    pub fn cluster_objects(&self) -> &[String] {
        &self.scenario.workload.cluster_objects
    }
}

/// An object of the workload.
#[derive(Clone, Debug)]
pub struct Object {
    pub value: serde_json::Value,
    pub cluster_scoped: bool,
}

impl Object {
    pub fn api_version(&self) -> &str {
        self.value.get("apiVersion").and_then(|v| v.as_str()).unwrap_or_default()
    }
    pub fn kind(&self) -> &str {
        self.value.get("kind").and_then(|v| v.as_str()).unwrap_or_default()
    }
    pub fn name(&self) -> &str {
        self.value.pointer("/metadata/name").and_then(|v| v.as_str()).unwrap_or_default()
    }
}

/// Read, strictly decode and check one scenario file: every value, every manifest, before anything
/// runs. All problems found are reported at once, each at its file, line and column.
pub fn load(path: &Path) -> Result<Loaded, ScenarioError> {
    let text = datafile::read_text(path)?;
    load_text(path, &text)
}

/// [`load`] of `text` in place of the file's (a variant of it: a blind challenge's); manifest paths
/// resolve beside `path`.
pub fn load_str(path: &Path, text: &str) -> Result<Loaded, ScenarioError> {
    load_text(path, text)
}

/// Decode and check scenario text (fixtures, tests); manifest paths resolve beside `path`.
pub fn parse(path: &Path, text: &str) -> Result<Scenario, ScenarioError> {
    load_text(path, text).map(|l| l.scenario)
}

fn load_text(path: &Path, text: &str) -> Result<Loaded, ScenarioError> {
    if datafile::FieldLocations::of(text).get("reproducible").is_some() {
        return Err(load_gap(path, text));
    }
    let scenario: Scenario = datafile::decode(path, text)?;
    let (manifests, problems) = validate(path, text, &scenario);
    if !problems.is_empty() {
        return Err(ScenarioError::Invalid { problems });
    }
    Ok(Loaded { path: path.to_owned(), scenario, manifests })
}

/// A file with a top-level `reproducible`: a [`Gap`], checked (its name is its file's, it says
/// `false`, it gives a reason) and returned as [`ScenarioError::NotReproducible`]; or why it is broken.
fn load_gap(path: &Path, text: &str) -> ScenarioError {
    let gap: Gap = match datafile::decode(path, text) {
        Ok(g) => g,
        Err(e) => return e.into(),
    };
    let mut problems = Vec::new();
    let stem = path.file_stem().and_then(|s| s.to_str()).unwrap_or_default();
    if gap.metadata.name != stem {
        problems.push(Problem::new("metadata.name", format!("is {:?} but the file is named {:?}; they must match", gap.metadata.name, path.file_name().and_then(|f| f.to_str()).unwrap_or_default())));
    }
    if gap.reproducible {
        problems.push(Problem::new("reproducible", "is true: a scenario that is reproduced leaves the field out and gives its workload, fault, symptom, fix and recovery"));
    }
    if gap.reason.trim().is_empty() {
        problems.push(Problem::new("reason", "is empty: say what a faithful reproduction needs that is missing"));
    }
    if gap.metadata.source.fix.as_deref().is_none_or(|f| f.trim().is_empty()) {
        problems.push(Problem::new("metadata.source.fix", "is missing: quote the document's fix, as every scenario does"));
    }
    if problems.is_empty() {
        return ScenarioError::NotReproducible { path: path.to_owned(), gap: Box::new(gap) };
    }
    let locations = datafile::FieldLocations::of(text);
    let problems = problems
        .into_iter()
        .map(|problem| {
            let (line, column) = locations.locate(&problem.field);
            Located { path: path.to_owned(), line, column, problem }
        })
        .collect();
    ScenarioError::Invalid { problems }
}

/// Words a blind challenge renames in every scenario (training's own variant); an alternative of
/// `variants` must leave them to it.
pub const RENAMED_BY_TRAINING: [&str; 2] = ["web", "app-config"];

/// `variants`: each alternative names words the rest of the file has (as whole words), replaces
/// each by something else that is not empty, and leaves training's own words alone.
fn check_variants(s: &Scenario) -> Vec<Problem> {
    let mut problems = Vec::new();
    // What a run reads of this file: not the document's words (metadata), not the variants.
    let rest = serde_json::to_string(&(&s.workload, &s.fault, &s.symptom, &s.fix, &s.recovery, &s.hints)).unwrap_or_default();
    for (i, alternatives) in s.variants.iter().enumerate() {
        if alternatives.is_empty() {
            problems.push(Problem::new(format!("variants[{i}]"), "has no alternative: leave the entry out, or give it one or more"));
        }
        for (j, alternative) in alternatives.iter().enumerate() {
            let field = format!("variants[{i}][{j}]");
            if alternative.is_empty() {
                problems.push(Problem::new(&field, "replaces no word"));
            }
            for (word, by) in alternative {
                if RENAMED_BY_TRAINING.contains(&word.as_str()) {
                    problems.push(Problem::new(&field, format!("{word:?} is renamed by every blind challenge already; vary other words")));
                } else if !(word.starts_with(|c: char| c.is_alphanumeric()) && word.ends_with(|c: char| c.is_alphanumeric())) {
                    problems.push(Problem::new(&field, format!("{word:?}: a word to replace begins and ends with a letter or a digit")));
                } else if !words_pattern([word.as_str()]).is_match(&rest) {
                    problems.push(Problem::new(&field, format!("{word:?} is nowhere in what a run reads of this file (workload, fault, gates, fix, hints) as a whole word, so the alternative would change nothing")));
                }
                if by.trim().is_empty() || by == word {
                    problems.push(Problem::new(&field, format!("{word:?} is replaced by {by:?}: give another value")));
                }
            }
        }
    }
    problems
}

/// `words` as whole words (`\b`: not inside a longer run of letters, digits and `_`; `1024` is not a
/// word of `1024Mi`, `web` is one of `web-6d4`), longest first.
pub fn words_pattern<'a>(words: impl IntoIterator<Item = &'a str>) -> regex::Regex {
    let mut words: Vec<&str> = words.into_iter().collect();
    words.sort_by_key(|w| std::cmp::Reverse(w.len()));
    let alternation = words.iter().map(|w| regex::escape(w)).collect::<Vec<_>>().join("|");
    regex::Regex::new(&format!(r"\b(?:{alternation})\b")).expect("escaped words are a pattern")
}

/// The longest scenario name: the run's namespace is `fl-<name>-<5 characters>`, a DNS label of at
/// most 63.
pub const MAX_NAME_LEN: usize = 63 - "fl-".len() - "-xxxxx".len();

/// Pod phases, container waiting reasons are free text; claim phases and condition statuses are not.
const POD_PHASES: &[&str] = &["Pending", "Running", "Succeeded", "Failed", "Unknown"];
const CLAIM_PHASES: &[&str] = &["Pending", "Bound", "Lost"];
const CONDITION_STATUSES: &[&str] = &["True", "False", "Unknown"];
const EVENT_TYPES: &[&str] = &["Normal", "Warning"];
/// Check every value of a decoded scenario. Returns the manifests' texts and every problem, placed.
fn validate(path: &Path, text: &str, s: &Scenario) -> (Vec<String>, Vec<Located>) {
    let locations = datafile::FieldLocations::of(text);
    let mut problems: Vec<Problem> = Vec::new();
    let mut placed: Vec<Located> = Vec::new();

    // The name makes the run's namespace.
    let stem = path.file_stem().and_then(|s| s.to_str()).unwrap_or_default();
    let name = &s.metadata.name;
    if name != stem {
        let file = path.file_name().and_then(|f| f.to_str()).unwrap_or_default();
        problems.push(Problem::new("metadata.name", format!("is {name:?} but the file is named {file:?}; they must match")));
    }
    if let Some(p) = crate::check::dns_label("metadata.name", name) {
        problems.push(p);
    } else if name.len() > MAX_NAME_LEN {
        problems.push(Problem::new("metadata.name", format!("{name:?} is {} characters; at most {MAX_NAME_LEN}, so that the run's namespace fl-<name>-<5 characters> is a valid name", name.len())));
    }

    // Deadlines: long enough to mean something (the upper bound is in the duration type).
    for (field, span) in [("symptom.within", s.symptom.within), ("recovery.within", s.recovery.within), ("workload.readyWithin", s.workload.ready_within)] {
        if span.0 < std::time::Duration::from_secs(1) {
            problems.push(Problem::new(field, format!("{} is too short: at least 1s (nothing on a cluster happens sooner)", crate::duration::format(span.0))));
        }
    }

    // The target: a selector that selects something, never everything.
    if let Some(p) = crate::check::label_selector("workload.target.selector", &s.workload.target.selector) {
        problems.push(p);
    }
    if let Some(claim) = &s.workload.target.claim {
        if let Some(p) = crate::check::dns_subdomain("workload.target.claim", claim) {
            problems.push(p);
        }
    }

    // The fix: steps the fault offers.
    if s.fix.is_empty() {
        problems.push(Problem::new("fix", "the scenario has no fix step; `faultlab show` lists the fault's steps"));
    }
    let offered = s.fault.fix_steps();
    for (index, step) in s.fix.iter().enumerate() {
        if !offered.contains(&step.step.as_str()) {
            problems.push(Problem::new(format!("fix[{index}].step"), format!("{:?} is not a fix step of fault {}; it offers: {}", step.step, s.fault.name(), offered.join(", "))));
        }
    }

    // Gates.
    for (field, gates) in [("symptom", s.symptom.gates()), ("recovery", s.recovery.gates())] {
        let Gates { pod, node, claim, deployment } = gates;
        if gates.is_empty() {
            problems.push(Problem::new(field, "needs at least one of pod, node, claim or deployment (the gate that decides the phase)"));
        }
        if let Some(d) = deployment {
            problems.extend(check_condition(&format!("{field}.deployment.condition"), &d.condition));
        }
        if let Some(pod) = pod {
            if let Some(phase) = &pod.phase {
                problems.extend(crate::check::one_of(&format!("{field}.pod.phase"), phase, POD_PHASES));
            }
            if pod.waiting.as_ref().is_some_and(|w| w.trim().is_empty()) {
                problems.push(Problem::new(format!("{field}.pod.waiting"), "is empty: name the waiting reason (ContainerCreating, CrashLoopBackOff, ...)"));
            }
            if let Some(c) = &pod.condition {
                problems.extend(check_condition(&format!("{field}.pod.condition"), c));
            }
            let has_state = pod.phase.is_some() || pod.ready.is_some() || pod.waiting.is_some() || pod.condition.is_some() || pod.termination_message.is_some();
            match pod.none {
                Some(true) if has_state => problems.push(Problem::new(format!("{field}.pod.none"), "is true: no pod is there, so no phase, readiness, waiting reason, condition or message can be asked of one")),
                Some(false) => problems.push(Problem::new(format!("{field}.pod.none"), "is false: leave it out (a pod gate asks for a pod unless none is true)")),
                _ => {}
            }
        }
        if let Some(node) = node {
            problems.extend(check_condition(&format!("{field}.node.condition"), &node.condition));
        }
        if let Some(claim) = claim {
            problems.extend(crate::check::one_of(&format!("{field}.claim.phase"), &claim.phase, CLAIM_PHASES));
        }
        if claim.is_some() && s.workload.target.claim.is_none() {
            problems.push(Problem::new(format!("{field}.claim"), "a claim gate needs workload.target.claim, the claim it watches"));
        }
    }

    // Events.
    for (i, e) in s.symptom.events.iter().enumerate() {
        let field = format!("symptom.events[{i}]");
        if e.reason.trim().is_empty() || e.reason.contains(char::is_whitespace) {
            problems.push(Problem::new(format!("{field}.reason"), format!("{:?}: an event reason is one word (FailedMount, BackOff, ...)", e.reason)));
        }
        if let Some(t) = &e.type_ {
            problems.extend(crate::check::one_of(&format!("{field}.type"), t, EVENT_TYPES));
        }
        for (_, var) in crate::vars::unknown_names(&e.message) {
            problems.push(unknown_variable(&format!("{field}.message"), &var));
        }
        // Variables are substituted with escaped values, so a placeholder stands for a literal here.
        if let Err(err) = crate::pattern::compile(&crate::vars::Vars::placeholder().regex(&e.message)) {
            problems.push(Problem::new(format!("{field}.message"), err));
        }
    }
    for (i, r) in s.snapshot.ignore_reasons.iter().enumerate() {
        if r.trim().is_empty() {
            problems.push(Problem::new(format!("snapshot.ignoreReasons[{i}]"), "is empty"));
        }
    }

    // The fault's parameters.
    problems.extend(s.fault.check());

    problems.extend(check_variants(s));

    // The workload's manifests.
    let (manifests, docs) = check_manifests(path, s, &locations, &mut problems, &mut placed);
    if !docs.is_empty() {
        check_workload_refs(s, &docs, &mut problems);
    }

    let mut out: Vec<Located> = problems
        .into_iter()
        .map(|problem| {
            let (line, column) = locations.locate(&problem.field);
            Located { path: path.to_owned(), line, column, problem }
        })
        .collect();
    out.extend(placed);
    out.sort_by(|a, b| (&a.path, a.line, a.column).cmp(&(&b.path, b.line, b.column)));
    out.dedup();
    (manifests, out)
}

fn unknown_variable(field: &str, var: &str) -> Problem {
    let known = crate::vars::known_names();
    let close = known.iter().min_by_key(|k| crate::check::edit_distance(k, var)).filter(|k| crate::check::edit_distance(k, var) <= 3);
    let hint = close.map(|c| format!(" (did you mean ${{{c}}}?)")).unwrap_or_default();
    Problem::new(field, format!("unknown variable ${{{var}}}{hint}; known: {}", known.iter().map(|k| format!("${{{k}}}")).collect::<Vec<_>>().join(", ")))
}

fn check_condition(field: &str, c: &ConditionGate) -> Vec<Problem> {
    let mut out = Vec::new();
    if c.type_.trim().is_empty() {
        out.push(Problem::new(format!("{field}.type"), "is empty: name the condition (Ready, PodScheduled, ...)"));
    }
    for alt in c.status.split('|') {
        out.extend(crate::check::one_of(&format!("{field}.status"), alt, CONDITION_STATUSES));
    }
    if c.reason.as_ref().is_some_and(|r| r.split('|').any(|a| a.trim().is_empty())) {
        out.push(Problem::new(format!("{field}.reason"), "has an empty alternative"));
    }
    out
}

/// Read (inside the scenario's directory only), place and check every manifest; returns the texts
/// and the decoded documents (empty if any manifest could not be read or split).
fn check_manifests(path: &Path, s: &Scenario, locations: &datafile::FieldLocations, problems: &mut Vec<Problem>, placed: &mut Vec<Located>) -> (Vec<String>, Vec<manifest::Doc>) {
    let base = path.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."));
    let placeholder = crate::vars::Vars::placeholder();
    let mut texts = Vec::new();
    let mut docs = Vec::new();
    let mut complete = true;
    if s.workload.manifests.is_empty() {
        problems.push(Problem::new("workload.manifests", "is empty: the workload needs at least one manifest"));
    }
    for (index, m) in s.workload.manifests.iter().enumerate() {
        let (text, file, first_line) = match m {
            Manifest::Inline(text) => {
                let field = format!("workload.manifests[{index}].inline");
                let (line, _) = locations.locate(&field);
                (text.clone(), path.to_owned(), line)
            }
            Manifest::Path(p) => {
                let field = format!("workload.manifests[{index}].path");
                match read_manifest(base, p) {
                    Ok((file, text)) => (text, file, 1),
                    Err(message) => {
                        problems.push(Problem::new(field, message));
                        complete = false;
                        continue;
                    }
                }
            }
        };
        let place = |line: u64, column: u64, problem: Problem| {
            let problem = Problem { field: format!("workload.manifests[{index}]{}", if problem.field.is_empty() { String::new() } else { format!(" {}", problem.field) }), message: problem.message };
            Located { path: file.clone(), line: first_line + line.max(1) - 1, column, problem }
        };
        for (offset, var) in crate::vars::unknown_names(&text) {
            let before = &text[..offset];
            let line = before.matches('\n').count() as u64 + 1;
            let column = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) as u64 + 1;
            let p = unknown_variable("", &var);
            placed.push(place(line, column, p));
        }
        match manifest::split(&placeholder.text(&text)) {
            Err(p) => {
                placed.push(place(p.line, p.column, p.problem));
                complete = false;
            }
            Ok(found) => {
                if found.is_empty() {
                    placed.push(place(1, 1, Problem::new("", "has no object")));
                }
                for doc in found {
                    for p in manifest::check_doc(&doc, "<namespace>") {
                        placed.push(place(p.line, p.column, p.problem));
                        // What the workload makes is uncertain: leave out the checks that rely on it.
                        complete = false;
                    }
                    if !manifest::is_cluster_scoped(doc.api_version(), doc.kind()) || s.workload.cluster_objects.contains(&doc.id()) {
                        // fine: namespaced, or declared
                    } else {
                        placed.push(place(doc.line, 1, Problem::new("", format!(
                            "{} is cluster-scoped: it would outlive the run's namespace and touch every workload of the cluster; if the scenario needs it, declare it in workload.clusterObjects (\"{}\") so that it is journalled and deleted at teardown",
                            doc.id(), doc.id()
                        ))));
                    }
                    docs.push(doc);
                }
            }
        }
        texts.push(text);
    }
    // Duplicates and declarations.
    let mut seen = std::collections::BTreeSet::new();
    for doc in &docs {
        if !doc.kind().is_empty() && !seen.insert(doc.id()) {
            problems.push(Problem::new("workload.manifests", format!("{} is created twice", doc.id())));
        }
    }
    for (i, declared) in s.workload.cluster_objects.iter().enumerate() {
        let field = format!("workload.clusterObjects[{i}]");
        match docs.iter().find(|d| d.id() == *declared) {
            Some(d) if !manifest::is_cluster_scoped(d.api_version(), d.kind()) => {
                problems.push(Problem::new(field, format!("{declared} is namespaced: it lives in the run's namespace; declare only cluster-scoped objects")));
            }
            None if complete => problems.push(Problem::new(field, format!("{declared:?}: no manifest creates it (write Kind/name, as StorageClass/fast)"))),
            _ => {}
        }
    }
    if !complete {
        docs.clear();
    }
    (texts, docs)
}

/// A manifest file named by a scenario: relative, inside the scenario's directory (after symlinks),
/// a regular file of sane size.
fn read_manifest(base: &Path, p: &Path) -> Result<(PathBuf, String), String> {
    if p.is_absolute() {
        return Err(format!("{}: a manifest path is relative to the scenario's directory; an absolute path is refused", p.display()));
    }
    let file = base.join(p);
    let root = base.canonicalize().map_err(|e| format!("cannot resolve the scenario's directory {}: {e}", base.display()))?;
    let real = file.canonicalize().map_err(|e| format!("cannot read {}: {e}", file.display()))?;
    if !real.starts_with(&root) {
        return Err(format!("{} is outside the scenario's directory {} (it resolves to {}); manifests must stay inside it", p.display(), root.display(), real.display()));
    }
    let text = datafile::read_text(&real).map_err(|e| e.to_string())?;
    Ok((file, text))
}

/// What the fault and the target name must be in the workload.
fn check_workload_refs(s: &Scenario, docs: &[manifest::Doc], problems: &mut Vec<Problem>) {
    let selector = &s.workload.target.selector;
    let wanted = crate::check::selector_equalities(selector);
    let pod_labels: Vec<_> = docs.iter().filter_map(|d| d.pod_labels()).collect();
    if !wanted.is_empty() && crate::check::label_selector("", selector).is_none() {
        let matches = pod_labels.iter().any(|labels| wanted.iter().all(|(k, v)| labels.get(k).and_then(|l| l.as_str()) == Some(v.as_str())));
        if !matches {
            problems.push(Problem::new("workload.target.selector", format!("{selector:?} matches no pod the workload makes (the pods' labels: {})", if pod_labels.is_empty() { "none".to_string() } else { pod_labels.iter().map(|l| serde_json::Value::Object((*l).clone()).to_string()).collect::<Vec<_>>().join(", ") })));
        }
    }
    if let Some(claim) = &s.workload.target.claim {
        let claims: Vec<String> = docs.iter().flat_map(|d| d.claim_names()).collect();
        if !claims.contains(claim) {
            problems.push(Problem::new("workload.target.claim", format!("{claim:?}: the workload makes no such claim (it makes: {})", if claims.is_empty() { "none".to_string() } else { claims.join(", ") })));
        }
    }
    for (field, gate) in [("symptom.deployment.name", s.symptom.gates().deployment), ("recovery.deployment.name", s.recovery.gates().deployment)] {
        if let Some(d) = gate {
            let made: Vec<&str> = docs.iter().filter(|doc| doc.kind() == "Deployment").map(|doc| doc.name()).collect();
            if !made.contains(&d.name.as_str()) {
                problems.push(Problem::new(field, format!("{:?}: the workload makes no such Deployment (it makes: {})", d.name, if made.is_empty() { "none".to_string() } else { made.join(", ") })));
            }
        }
    }
    // A parameter that is no name at all is reported once, by the fault's check.
    let refs = if s.fault.check().is_empty() { s.fault.fault().workload_refs() } else { Vec::new() };
    for r in refs {
        if !docs.iter().any(|d| d.kind() == r.kind && d.name() == r.name) {
            let field = if r.field.is_empty() { format!("fault.{}", s.fault.name()) } else { format!("fault.{}.{}", s.fault.name(), r.field) };
            problems.push(Problem::new(field, format!("{} {:?}: the fault acts on it, but no manifest of the workload creates it", r.kind, r.name)));
        }
    }
}

/// The scenarios directory: `$FAULTLAB_SCENARIOS`, else faultlab's own `scenarios/` ([`crate::home`]:
/// the checkout the current directory is in, else the copy built into the binary).
pub fn default_dir() -> PathBuf {
    if let Some(dir) = std::env::var_os("FAULTLAB_SCENARIOS").filter(|d| !d.is_empty()) {
        return PathBuf::from(dir);
    }
    workspace_root().join("scenarios")
}

/// The root of faultlab's own files ([`crate::home::root`]): `scenarios/`, `expectations/`,
/// `kind-configs/`.
pub fn workspace_root() -> PathBuf {
    crate::home::root()
}

/// The extensions of scenario files, in the order a name is looked up.
pub const EXTENSIONS: [&str; 2] = ["yaml", "yml"];

/// The scenario files of a set: every `*.yaml` and `*.yml` entry of `dir` (whatever its file type:
/// `load` refuses what is not a regular file, so a FIFO is reported instead of read), sorted.
pub fn files(dir: &Path) -> Result<Vec<PathBuf>, ScenarioError> {
    let entries = std::fs::read_dir(dir).map_err(|source| ScenarioError::List { dir: dir.to_owned(), source })?;
    let mut paths: Vec<PathBuf> = entries
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().and_then(|e| e.to_str()).is_some_and(|e| EXTENSIONS.contains(&e)))
        .collect();
    paths.sort();
    Ok(paths)
}

/// A scenario set as found: the scenarios that load, and each broken file with its error.
#[derive(Debug, Default)]
pub struct Set {
    pub good: BTreeMap<String, Loaded>,
    pub broken: Vec<(PathBuf, ScenarioError)>,
    /// The documented causes not reproduced, by name, with their files.
    pub gaps: BTreeMap<String, (PathBuf, Gap)>,
}

/// Load every scenario file of `dir`; one broken file does not hide the others.
/// Two files of one name (`x.yaml` and `x.yml`) are both broken: neither is chosen silently.
pub fn load_set(dir: &Path) -> Result<Set, ScenarioError> {
    let mut set = Set::default();
    let paths = files(dir)?;
    for path in &paths {
        let stem = path.file_stem();
        if let Some(other) = paths.iter().find(|p| *p != path && p.file_stem() == stem) {
            set.broken.push((path.clone(), ScenarioError::SameName { other: other.clone() }));
            continue;
        }
        match load(path) {
            Ok(loaded) => {
                set.good.insert(loaded.name().to_string(), loaded);
            }
            Err(ScenarioError::NotReproducible { path, gap }) => {
                set.gaps.insert(gap.metadata.name.clone(), (path, *gap));
            }
            Err(e) => set.broken.push((path.clone(), e)),
        }
    }
    Ok(set)
}

/// Every scenario in `dir`, by name; the first broken file is an error.
pub fn load_all(dir: &Path) -> Result<BTreeMap<String, Loaded>, ScenarioError> {
    let mut set = load_set(dir)?;
    match set.broken.is_empty() {
        true => Ok(set.good),
        false => Err(set.broken.remove(0).1),
    }
}

/// One scenario by name: the file `<dir>/<name>.yaml`, whatever it is (a file that is there but
/// cannot be read says why, rather than "no scenario named").
pub fn find(dir: &Path, name: &str) -> Result<Loaded, ScenarioError> {
    let plain = !name.is_empty() && !name.contains(['/', '\\']) && name != "." && name != "..";
    let found: Vec<PathBuf> = EXTENSIONS.iter().map(|e| dir.join(format!("{name}.{e}"))).filter(|p| plain && std::fs::symlink_metadata(p).is_ok()).collect();
    match found.as_slice() {
        [one] => return load(one),
        [first, other, ..] => return Err(ScenarioError::Ambiguous { name: name.into(), paths: vec![first.clone(), other.clone()] }),
        [] => {}
    }
    let known = load_set(dir).map(|set| set.good.into_keys().collect()).unwrap_or_default();
    Err(ScenarioError::NotFound { name: name.into(), dir: dir.to_owned(), known })
}

/// The JSON Schema of the scenario format, generated from these types.
pub fn json_schema() -> String {
    let schema = schemars::schema_for!(ScenarioFile);
    serde_json::to_string_pretty(&schema).expect("schema serialises") + "\n"
}

#[cfg(test)]
mod snapshot_tests {
    use super::*;

    #[test]
    fn rewrites_apply_in_order_and_a_bad_pattern_is_a_decode_error() {
        let options: SnapshotOptions = serde_json::from_value(serde_json::json!({"rewrite": [
            {"pattern": "code = (Unknown|DeadlineExceeded) desc", "with": "code = <Unknown|DeadlineExceeded> desc"},
            {"pattern": "<Unknown\\|DeadlineExceeded>", "with": "$0"}
        ]}))
        .unwrap();
        assert_eq!(options.rewritten("rpc error: code = DeadlineExceeded desc = x"), "rpc error: code = <Unknown|DeadlineExceeded> desc = x");
        assert_eq!(options.rewritten("rpc error: code = Unknown desc = x"), "rpc error: code = <Unknown|DeadlineExceeded> desc = x");
        assert_eq!(options.rewritten("no match"), "no match");
        let bad: Result<SnapshotOptions, _> = serde_json::from_value(serde_json::json!({"rewrite": [{"pattern": "(", "with": ""}]}));
        assert!(bad.unwrap_err().to_string().contains("invalid regular expression"));
    }

    /// registry-unreachable's rewrite reads the three forms of a timed-out pull as one: containerd's
    /// code Unknown or DeadlineExceeded, and kubelet 1.28's message without the Unknown part
    /// (scenarios/platform-wording.md, S1), as its reviewed snapshots have it.
    #[test]
    fn registry_unreachables_rewrite_reads_every_kubelets_wording_as_one() {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../scenarios/registry-unreachable.yaml");
        let scenario = parse(&path, &std::fs::read_to_string(&path).unwrap()).unwrap();
        let reviewed = r#"Failed to pull image "x": rpc error: code = <Unknown|DeadlineExceeded> desc = failed to pull and unpack image "x": dial tcp <ip>:<port>: i/o timeout"#;
        for code in ["rpc error: code = Unknown desc = ", "rpc error: code = DeadlineExceeded desc = ", ""] {
            let message = format!(r#"Failed to pull image "x": {code}failed to pull and unpack image "x": dial tcp <ip>:<port>: i/o timeout"#);
            assert_eq!(scenario.snapshot.rewritten(&message), reviewed, "{message}");
        }
        assert_eq!(scenario.snapshot.rewritten("Error: ErrImagePull"), "Error: ErrImagePull");
    }

    /// volume-multi-attach's rewrite: the new pod's node is any but the failed one.
    #[test]
    fn volume_multi_attachs_rewrite_reads_any_other_test_bed_node_as_one() {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../scenarios/volume-multi-attach.yaml");
        let scenario = parse(&path, &std::fs::read_to_string(&path).unwrap()).unwrap();
        for node in ["<node>", "<node>-2", "<node>-3"] {
            let message = format!("Successfully assigned <namespace>/db-<hash>-<id> to {node}");
            assert_eq!(scenario.snapshot.rewritten(&message), "Successfully assigned <namespace>/db-<hash>-<id> to <another node>");
        }
        assert_eq!(scenario.snapshot.rewritten("Node <node> status is now: NodeNotReady"), "Node <node> status is now: NodeNotReady");
    }
}
