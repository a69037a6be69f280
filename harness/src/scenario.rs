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

use crate::datafile::{self, ApiVersion, DataFileError};
use crate::duration::Span;
use crate::faults::FaultSpec;

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
    /// Do not wait for the workload before injecting (it is created broken on purpose).
    #[serde(default)]
    pub start_broken: bool,
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

#[derive(Clone, Debug, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Target {
    /// Label selector of the target pods, e.g. `app=web`.
    pub selector: String,
    /// The claim that must bind, for storage scenarios.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub claim: Option<String>,
}

/// A condition on a pod's status. Every field given must hold.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PodGate {
    /// Pod phase (`Pending`, `Running`, ...).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phase: Option<String>,
    /// All containers ready (true) or not (false).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ready: Option<bool>,
    /// Some container is waiting with this reason (`ContainerCreating`, `CrashLoopBackOff`, ...).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub waiting: Option<String>,
    /// A pod condition.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub condition: Option<ConditionGate>,
    /// Regular expression some container's termination message matches (its current or last
    /// terminated state). With `terminationMessagePolicy: FallbackToLogsOnError` the kubelet puts the
    /// tail of the container's log there, so an error only the log shows can be a gate.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub termination_message: Option<String>,
}

/// A status condition: type, status and optionally reason.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ConditionGate {
    #[serde(rename = "type")]
    pub type_: String,
    pub status: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

/// A condition on the node.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct NodeGate {
    pub condition: ConditionGate,
}

/// A condition on the target claim.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ClaimGate {
    pub phase: String,
}

/// An expected event: reason, type, and a regular expression its message matches.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct EventGate {
    pub reason: String,
    #[serde(rename = "type", default, skip_serializing_if = "Option::is_none")]
    pub type_: Option<String>,
    /// Regular expression; `${...}` variables are substituted (escaped) first.
    pub message: String,
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
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub events: Vec<EventGate>,
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
}

/// What the event snapshot leaves out.
#[derive(Clone, Debug, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SnapshotOptions {
    /// Event reasons whose appearance depends on timing, left out of the snapshot (say why in a comment).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ignore_reasons: Vec<String>,
}

#[derive(Debug, Error)]
pub enum ScenarioError {
    #[error(transparent)]
    Decode(#[from] DataFileError),
    #[error("{}: metadata.name is {name:?} but the file is named {stem:?}; they must match", path.display())]
    NameMismatch { path: PathBuf, name: String, stem: String },
    #[error("{}: fix[{index}].step: {step:?} is not a fix step of fault {fault}; it offers: {}", path.display(), offered.join(", "))]
    UnknownFixStep { path: PathBuf, index: usize, step: String, fault: String, offered: Vec<String> },
    #[error("{}: {field}: invalid regular expression: {source}", path.display())]
    BadPattern {
        path: PathBuf,
        field: String,
        #[source]
        source: regex::Error,
    },
    #[error("{}: fix: the scenario has no fix step", path.display())]
    NoFix { path: PathBuf },
    #[error("{}: {field}: needs at least one of pod, node or claim", path.display())]
    NoGate { path: PathBuf, field: String },
    #[error("no scenario named {name:?} in {}; known: {}", dir.display(), known.join(", "))]
    NotFound { name: String, dir: PathBuf, known: Vec<String> },
    #[error("cannot list scenarios in {}: {source}", dir.display())]
    List {
        dir: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{}: workload.manifests[{index}]: cannot read {}: {source}", path.display(), manifest.display())]
    ManifestRead {
        path: PathBuf,
        index: usize,
        manifest: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

/// A scenario with the path it was read from.
#[derive(Clone, Debug)]
pub struct Loaded {
    pub path: PathBuf,
    pub scenario: Scenario,
}

impl Loaded {
    pub fn name(&self) -> &str {
        &self.scenario.metadata.name
    }

    /// The manifests as YAML text, in order.
    pub fn manifest_texts(&self) -> Result<Vec<String>, ScenarioError> {
        let base = self.path.parent().unwrap_or(Path::new("."));
        self.scenario
            .workload
            .manifests
            .iter()
            .enumerate()
            .map(|(index, m)| match m {
                Manifest::Inline(text) => Ok(text.clone()),
                Manifest::Path(p) => std::fs::read_to_string(base.join(p)).map_err(|source| ScenarioError::ManifestRead {
                    path: self.path.clone(),
                    index,
                    manifest: base.join(p),
                    source,
                }),
            })
            .collect()
    }
}

/// Read, strictly decode and validate one scenario file.
pub fn load(path: &Path) -> Result<Loaded, ScenarioError> {
    let scenario: Scenario = datafile::read(path)?;
    validate(path, &scenario)?;
    Ok(Loaded { path: path.to_owned(), scenario })
}

/// Decode and validate scenario text (fixtures, tests).
pub fn parse(path: &Path, text: &str) -> Result<Scenario, ScenarioError> {
    let scenario: Scenario = datafile::decode(path, text)?;
    validate(path, &scenario)?;
    Ok(scenario)
}

fn validate(path: &Path, s: &Scenario) -> Result<(), ScenarioError> {
    let stem = path.file_stem().and_then(|s| s.to_str()).unwrap_or_default();
    if s.metadata.name != stem {
        return Err(ScenarioError::NameMismatch { path: path.to_owned(), name: s.metadata.name.clone(), stem: stem.into() });
    }
    if s.fix.is_empty() {
        return Err(ScenarioError::NoFix { path: path.to_owned() });
    }
    let offered = s.fault.fix_steps();
    for (index, step) in s.fix.iter().enumerate() {
        if !offered.contains(&step.step.as_str()) {
            return Err(ScenarioError::UnknownFixStep {
                path: path.to_owned(),
                index,
                step: step.step.clone(),
                fault: s.fault.name().into(),
                offered: offered.iter().map(|s| s.to_string()).collect(),
            });
        }
    }
    for (i, e) in s.symptom.events.iter().enumerate() {
        // Variables are substituted with escaped values, so a placeholder stands for a literal here.
        let probe = crate::vars::Vars::placeholder().regex(&e.message);
        regex::Regex::new(&probe).map_err(|source| ScenarioError::BadPattern {
            path: path.to_owned(),
            field: format!("symptom.events[{i}].message"),
            source,
        })?;
    }
    for (field, gate) in [("symptom.pod", &s.symptom.pod), ("recovery.pod", &s.recovery.pod)] {
        if let Some(pattern) = gate.as_ref().and_then(|g| g.termination_message.as_ref()) {
            regex::Regex::new(pattern).map_err(|source| ScenarioError::BadPattern {
                path: path.to_owned(),
                field: format!("{field}.terminationMessage"),
                source,
            })?;
        }
    }
    if s.symptom.pod.is_none() && s.symptom.node.is_none() && s.symptom.claim.is_none() {
        return Err(ScenarioError::NoGate { path: path.to_owned(), field: "symptom".into() });
    }
    if s.recovery.pod.is_none() && s.recovery.node.is_none() && s.recovery.claim.is_none() {
        return Err(ScenarioError::NoGate { path: path.to_owned(), field: "recovery".into() });
    }
    Ok(())
}

/// The scenarios directory: `$FAULTLAB_SCENARIOS`, else `scenarios/` at the workspace root.
pub fn default_dir() -> PathBuf {
    if let Some(dir) = std::env::var_os("FAULTLAB_SCENARIOS") {
        return PathBuf::from(dir);
    }
    workspace_root().join("scenarios")
}

/// The workspace root (the directory above `harness/`), found from the build or the current directory.
pub fn workspace_root() -> PathBuf {
    let built = Path::new(env!("CARGO_MANIFEST_DIR")).parent().map(Path::to_path_buf);
    match built {
        Some(root) if root.join("scenarios").is_dir() => root,
        _ => std::env::current_dir().unwrap_or_else(|_| PathBuf::from(".")),
    }
}

/// Every scenario in `dir`, by name.
pub fn load_all(dir: &Path) -> Result<BTreeMap<String, Loaded>, ScenarioError> {
    let entries = std::fs::read_dir(dir).map_err(|source| ScenarioError::List { dir: dir.to_owned(), source })?;
    let mut paths: Vec<PathBuf> = entries
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|e| e == "yaml"))
        .collect();
    paths.sort();
    let mut out = BTreeMap::new();
    for path in paths {
        let loaded = load(&path)?;
        out.insert(loaded.name().to_string(), loaded);
    }
    Ok(out)
}

/// One scenario by name.
pub fn find(dir: &Path, name: &str) -> Result<Loaded, ScenarioError> {
    let path = dir.join(format!("{name}.yaml"));
    if path.is_file() {
        return load(&path);
    }
    let known = load_all(dir).map(|all| all.into_keys().collect()).unwrap_or_default();
    Err(ScenarioError::NotFound { name: name.into(), dir: dir.to_owned(), known })
}

/// The JSON Schema of the scenario format, generated from these types.
pub fn json_schema() -> String {
    let schema = schemars::schema_for!(Scenario);
    serde_json::to_string_pretty(&schema).expect("schema serialises") + "\n"
}
