//! The training sandbox: break a cluster, show the symptom as an on-call engineer would see it, let a
//! person diagnose and fix it by hand, then check and time the fix.
//!
//! A session lives in one file (`<state dir>/training/<id>.json`), so the commands work across shells;
//! several people can train at once, each in their own namespace (faults that act on the node take the
//! node for themselves). Teardown goes through the same journal as any run.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use k8s_openapi::api::apps::v1::{DaemonSet, Deployment, ReplicaSet, StatefulSet};
use k8s_openapi::api::core::v1::{Event, Pod, PodSpec, PodTemplateSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{Api, ListParams};
use serde::{Deserialize, Serialize};
use thiserror::Error;

use crate::gates::Gates;
use crate::datafile::ApiVersion;
use crate::faults::Presence;
use crate::html::{self, Debrief, DebriefCheck, DebriefCommand, DebriefHint};
use crate::journal::{self, ClusterRef, Journal, JournalError};
use crate::node::NodeProfile;
use crate::provider::existing::Existing;
use crate::provider::{check_safety, Provider};
use crate::record::Recorder;
use crate::runner::{Run, RunError};
use crate::scenario::{self, Loaded, Scenario};
use crate::score::{Answer, Played, Rubric, Score, Stage};
use crate::suite::ProviderChoice;
use crate::wait;

#[derive(Debug, Error)]
pub enum TrainingError {
    #[error("no training session: start one with `faultlab train <scenario>`")]
    NoSession,
    #[error("taking this machine's locks (beside other faultlab processes) to break the cluster")]
    MachineLock(#[source] crate::machine_lock::MachineLockError),
    #[error("several training sessions are open ({}); name one with --session or FAULTLAB_SESSION", .0.join(", "))]
    WhichSession(Vec<String>),
    #[error("no training session {0:?} (open: {1})")]
    UnknownSession(String, String),
    #[error("session {other} is already training on node {node} of context {context}; reset it first, or train on another cluster")]
    NodeBusy { other: String, node: String, context: String },
    #[error("cannot read or write session file {}: {source}", path.display())]
    File {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("session: {source}")]
    State {
        #[source]
        source: crate::statefile::StateFileError,
    },
    #[error("{0:?} cannot name a training session: an id is 1 to 128 letters, digits, '.', '_' or '-', not starting with '.' or '-'")]
    BadSessionId(String),
    #[error("session file {} is damaged: {source}", path.display())]
    Decode {
        path: PathBuf,
        #[source]
        source: serde_json::Error,
    },
    #[error("cannot create the debrief's directory {}: {source}", path.display())]
    DebriefDir {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("cannot write debrief page {}: {source}", path.display())]
    DebriefWrite {
        path: PathBuf,
        #[source]
        source: crate::atomic::AtomicError,
    },
    #[error("cannot write the scoreboard {}: {source}", path.display())]
    ScoreboardWrite {
        path: PathBuf,
        #[source]
        source: crate::atomic::AtomicError,
    },
    #[error("training needs a cluster: the test bed, one already there (--provider existing), or kind: {0}")]
    Provider(#[source] crate::provider::ProviderError),
    #[error(transparent)]
    Safety(#[from] crate::provider::SafetyError),
    #[error("context {context} lists no node")]
    NoNode { context: String },
    #[error("the scenario could not be set up for training: {source}{}", teardown.iter().map(|u| format!("\n  teardown: {u}")).collect::<String>())]
    Break {
        #[source]
        source: Box<RunError>,
        /// What teardown could not undo.
        teardown: Vec<JournalError>,
    },
    #[error(transparent)]
    Run(#[from] RunError),
    #[error(transparent)]
    Scenario(#[from] scenario::ScenarioError),
    #[error(transparent)]
    Api(#[from] crate::kube_ops::KubeError),
    #[error("the {0} stage is answered already")]
    Answered(&'static str),
    #[error(
        "session {id} is being undone by another faultlab process (`faultlab reset`, `faultlab cleanup --sessions`), or still broken by its `faultlab train`: it holds {}; nothing was undone",
        lock.display()
    )]
    Busy { id: String, lock: PathBuf },
    #[error(transparent)]
    Terminal(#[from] crate::webterm::WebTermError),
}

/// A controller of the workload, as it was when the session began (the fault in place).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Controller {
    pub kind: String,
    pub name: String,
    pub uid: String,
    /// Its replicas (Deployment, StatefulSet).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replicas: Option<i32>,
    /// Each container's probes, `<container>/<probe>` to the probe as JSON: what decides whether the
    /// pod is ready, which the gate reads.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub probes: BTreeMap<String, String>,
}

impl Controller {
    fn of(kind: &str, meta: ObjectMeta, replicas: Option<i32>, template: Option<&PodTemplateSpec>) -> Controller {
        let probes = template.and_then(|t| t.spec.as_ref()).map(probes_of).unwrap_or_default();
        Controller { kind: kind.into(), name: meta.name.unwrap_or_default(), uid: meta.uid.unwrap_or_default(), replicas, probes }
    }
}

/// Each container's readiness, liveness and startup probes, as JSON, by `<container>/<probe>`.
fn probes_of(spec: &PodSpec) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    for c in spec.init_containers.iter().flatten().chain(&spec.containers) {
        for (what, probe) in [("readinessProbe", &c.readiness_probe), ("livenessProbe", &c.liveness_probe), ("startupProbe", &c.startup_probe)] {
            if let Some(p) = probe {
                out.insert(format!("{}/{what}", c.name), serde_json::to_string(p).expect("a probe serialises"));
            }
        }
    }
    out
}

/// What a trainee changed that hides the symptom rather than fixing the fault: a controller scaled
/// away from its replicas, or a probe removed or changed (so a broken pod would read ready). The
/// documented fixes change neither (they correct an image, arguments, a limit, a file, a node).
pub fn hidden_symptom(before: &[Controller], now: &[Controller]) -> Vec<String> {
    let mut out = Vec::new();
    for b in before {
        let Some(n) = now.iter().find(|n| n.kind == b.kind && n.uid == b.uid) else { continue };
        if b.replicas != n.replicas {
            let show = |r: Option<i32>| r.map_or("unset".to_string(), |r| r.to_string());
            out.push(format!("{} {} was scaled from {} to {} replicas; the workload must run as it did", b.kind, b.name, show(b.replicas), show(n.replicas)));
        }
        for (key, probe) in &b.probes {
            let (container, what) = key.split_once('/').unwrap_or((key, ""));
            match n.probes.get(key) {
                None => out.push(format!("{} {}: container {container}'s {what} was removed; a probe says whether the pod works, it must stay", b.kind, b.name)),
                Some(p) if p != probe => out.push(format!("{} {}: container {container}'s {what} was changed; a probe says whether the pod works, it must stay as it was", b.kind, b.name)),
                _ => {}
            }
        }
    }
    out
}

/// Which controller a pod belongs to: the uid of its controlling owner, through its ReplicaSet to the
/// Deployment (`replica_sets`: a ReplicaSet's uid to its Deployment's).
fn owning_controller(pod: &Pod, replica_sets: &BTreeMap<String, String>) -> Option<String> {
    let owner = pod.metadata.owner_references.iter().flatten().find(|o| o.controller == Some(true))?;
    match owner.kind.as_str() {
        "ReplicaSet" => replica_sets.get(&owner.uid).cloned(),
        _ => Some(owner.uid.clone()),
    }
}

/// Pods the gate's selector matches that none of the session's controllers owns: a pod made to look
/// like the workload (the gate would read it) is not a fix.
pub fn impostors(pods: &[Pod], replica_sets: &BTreeMap<String, String>, controllers: &[Controller], selector: &str) -> Vec<String> {
    pods.iter()
        .filter(|p| owning_controller(p, replica_sets).is_none_or(|uid| !controllers.iter().any(|c| c.uid == uid)))
        .map(|p| format!("pod {} matches the workload's selector ({selector}) but is not the workload's; the workload must be fixed, not stood in for", p.metadata.name.as_deref().unwrap_or("<unnamed>")))
        .collect()
}

/// A solved session.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Solved {
    pub seconds: f64,
    pub hints_used: usize,
    pub solution_shown: bool,
}

/// Everything a training session needs, in one file.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Session {
    pub api_version: ApiVersion,
    pub kind: String,
    pub id: String,
    pub scenario: String,
    pub scenario_path: PathBuf,
    pub namespace: String,
    pub cluster: ClusterRef,
    pub node: NodeProfile,
    pub journal: PathBuf,
    /// When the symptom was shown: the clock starts here (unix seconds).
    pub started: f64,
    pub hints_used: usize,
    pub solution_shown: bool,
    pub controllers: Vec<Controller>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub solved: Option<Solved>,
    /// When each hint was asked, in seconds from `started` (the debrief's timeline).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub hints_at: Vec<f64>,
    /// Each `faultlab check`: when, and what still failed.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub checks: Vec<CheckAttempt>,
    /// When the solution was shown, in seconds from `started`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub solution_at: Option<f64>,
    /// How the cluster was broken: the run's setup, inject and symptom phases, their waits and events
    /// (seconds from the run's start, which ends where `started` begins).
    #[serde(default, skip_serializing_if = "crate::runner::Timeline::is_empty")]
    pub broke: crate::runner::Timeline,
    /// What each stage is worth and the time limit (a session from before scoring: the defaults).
    #[serde(default)]
    pub rubric: Rubric,
    /// Each answer given (`faultlab answer`), in order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub answers: Vec<Answer>,
    /// A blind challenge: what the trainee is shown does not name the scenario until it is fixed.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub blind: bool,
    /// The trainee's own kubeconfig ([`trainee_access`]): the session's namespace and reading nodes,
    /// nothing else.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trainee_kubeconfig: Option<PathBuf>,
    /// A blind challenge's variant ([`variant_of`]): each name or value of the scenario's file and
    /// what it is in this session (`web` -> `billing`, `8080` -> `9090`); the scenario is read
    /// through it.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub variant: BTreeMap<String, String>,
}

impl Session {
    /// A blind challenge not yet fixed: nothing shown to the trainee names its scenario.
    fn hides_its_scenario(&self) -> bool {
        self.blind && self.solved.is_none()
    }

    /// The session as `faultlab sessions -o json` shows it: whole, except that a blind challenge not
    /// yet fixed hides its scenario and where its file is.
    pub fn listed(&self) -> serde_json::Value {
        let mut v = serde_json::to_value(self).expect("a session serialises");
        if self.hides_its_scenario() {
            v["scenario"] = serde_json::Value::String(self.shown_as());
            if let Some(o) = v.as_object_mut() {
                o.remove("scenarioPath");
            }
        }
        v
    }

    /// What the trainee may be told the session is: the scenario, or for a blind challenge not yet
    /// fixed, `a blind challenge`.
    pub fn shown_as(&self) -> String {
        if self.hides_its_scenario() {
            "a blind challenge".into()
        } else {
            self.scenario.clone()
        }
    }
}

/// A blind challenge's pick: one of `candidates` at random.
pub fn pick(candidates: &[String]) -> Option<&String> {
    (!candidates.is_empty()).then(|| &candidates[fastrand::usize(..candidates.len())])
}

/// One `faultlab check` of a session.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CheckAttempt {
    /// Seconds from the session's start.
    pub at: f64,
    pub fixed: bool,
    /// What still failed, one line each.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub failing: Vec<String>,
}

fn now() -> f64 {
    SystemTime::now().duration_since(UNIX_EPOCH).unwrap_or_default().as_secs_f64()
}

pub fn sessions_dir() -> PathBuf {
    journal::state_dir().join("training")
}

/// [`sessions_dir`], made private ([`journal::private_state_dir`]).
fn private_sessions_dir() -> Result<PathBuf, TrainingError> {
    journal::private_state_dir("training").map_err(|source| TrainingError::State { source })
}

impl Session {
    /// Seconds since the symptom was shown, to a tenth.
    pub fn elapsed(&self) -> f64 {
        ((now() - self.started) * 10.0).round() / 10.0
    }

    pub fn path(&self) -> PathBuf {
        sessions_dir().join(format!("{}.json", self.id))
    }

    pub fn save(&self) -> Result<(), TrainingError> {
        if !crate::statefile::valid_id(&self.id) {
            return Err(TrainingError::BadSessionId(self.id.clone()));
        }
        private_sessions_dir()?;
        let text = serde_json::to_string_pretty(self).expect("session serialises");
        crate::statefile::write(&self.path(), text.as_bytes()).map_err(|source| TrainingError::State { source })
    }

    /// A session file read back: one of this user's, checked as every state file is
    /// ([`crate::statefile::read`]), whose id is valid and is its file's name.
    fn read(path: &Path) -> Result<Session, TrainingError> {
        let text = crate::statefile::read(path).map_err(|source| TrainingError::State { source })?;
        let session: Session = serde_json::from_str(&text).map_err(|source| TrainingError::Decode { path: path.to_owned(), source })?;
        if !crate::statefile::valid_id(&session.id) || path.file_stem().and_then(|s| s.to_str()) != Some(session.id.as_str()) {
            return Err(TrainingError::BadSessionId(session.id));
        }
        Ok(session)
    }

    /// Every open session (files that fail the checks are left out; [`Session::problems`] names them).
    pub fn all() -> Vec<Session> {
        let Ok(dir) = private_sessions_dir() else { return Vec::new() };
        let mut v: Vec<Session> = crate::statefile::list(&dir, "json").iter().filter_map(|p| Session::read(p).ok()).collect();
        v.sort_by(|a, b| a.id.cmp(&b.id));
        v
    }

    /// Why the session directory or its files cannot be read back, one line each.
    pub fn problems() -> Vec<String> {
        match private_sessions_dir() {
            Err(e) => vec![e.to_string()],
            Ok(dir) => crate::statefile::list(&dir, "json").iter().filter_map(|p| Session::read(p).err()).map(|e| e.to_string()).collect(),
        }
    }

    /// The session named (by `--session` or `FAULTLAB_SESSION`), or the only one open.
    pub fn find(id: Option<&str>) -> Result<Session, TrainingError> {
        if let Some(id) = id.filter(|id| !crate::statefile::valid_id(id)) {
            return Err(TrainingError::BadSessionId(id.into()));
        }
        let all = Session::all();
        let ids: Vec<String> = all.iter().map(|s| s.id.clone()).collect();
        match id {
            Some(id) => all.into_iter().find(|s| s.id == id).ok_or_else(|| TrainingError::UnknownSession(id.into(), ids.join(", "))),
            None => match all.len() {
                0 => Err(TrainingError::NoSession),
                1 => Ok(all.into_iter().next().expect("one")),
                _ => Err(TrainingError::WhichSession(ids)),
            },
        }
    }

    fn loaded(&self) -> Result<Loaded, TrainingError> {
        match self.variant.is_empty() {
            true => Ok(scenario::load(&self.scenario_path)?),
            false => load_variant(&self.scenario_path, &self.variant),
        }
    }

    async fn client(&self) -> Result<kube::Client, TrainingError> {
        Ok(crate::kube_ops::connect(&self.cluster.kubeconfig, &self.cluster.context).await?)
    }

    /// A run over the session's namespace and journal, for checks and fixes.
    async fn resume(&self, rec: Recorder) -> Result<(Run, kube::Client), TrainingError> {
        let client = self.client().await?;
        let journal = Journal::open(&self.journal).map_err(RunError::from)?;
        let run = Run::resume(self.loaded()?, self.namespace.clone(), self.node.clone(), client.clone(), journal, rec);
        Ok((run, client))
    }
}

/// `faultlab train`: set up, inject, wait for the symptom, record the session, and leave it broken.
/// Break the cluster for a trainee. `rec` records the run (its phase drives a progress display).
/// How a session is started: its time limit, and whether it is blind (the scenario not named to the
/// trainee until the session ends: its namespace is `fl-challenge-<random>`).
#[derive(Clone, Copy, Debug)]
pub struct Start {
    pub time_limit: Duration,
    pub blind: bool,
}

/// A blind challenge's renaming: each name of the scenario's file, and the name it has in the session.
pub type Variant = BTreeMap<String, String>;

/// The names a blind challenge's workload may take in place of the scenario's `web`.
const WORKLOAD_NAMES: [&str; 12] = ["api", "shop", "cart", "billing", "search", "orders", "catalog", "payments", "accounts", "inventory", "checkout", "reviews"];

/// `text` with each whole word of `variant`'s keys replaced by its value, in one pass (a value is
/// never read again as a word to replace), except where the file speaks of the document or of its
/// variants: in the top-level `metadata:` block (the description, the quoted fix) only the names
/// every blind challenge renames ([`scenario::RENAMED_BY_TRAINING`]) change, so that nothing shown
/// names the workload as written, and values stay as the document has them. The `variants:` block
/// is left out: a variant has none of its own (its words are gone, so the file read through it would
/// not be a valid scenario with them).
pub fn apply_variant(text: &str, variant: &BTreeMap<String, String>) -> String {
    if variant.is_empty() {
        return text.to_string();
    }
    let all = scenario::words_pattern(variant.keys().map(String::as_str));
    let names: Vec<&str> = variant.keys().map(String::as_str).filter(|w| scenario::RENAMED_BY_TRAINING.contains(w)).collect();
    let names = (!names.is_empty()).then(|| scenario::words_pattern(names));
    let mut out = String::with_capacity(text.len());
    let mut block = "";
    for line in text.split_inclusive('\n') {
        // A top-level key begins at the line's start (the scenario files are block YAML).
        if line.starts_with(|c: char| !c.is_whitespace() && c != '#') {
            block = line.split(':').next().unwrap_or_default();
        }
        let words = match block {
            "variants" => continue,
            "metadata" => names.as_ref(),
            _ => Some(&all),
        };
        match words {
            Some(words) => out.push_str(&words.replace_all(line, |m: &regex::Captures| variant[&m[0]].clone())),
            None => out.push_str(line),
        }
    }
    out
}

/// The scenario at `path`, read through `variant` ([`apply_variant`]).
fn load_variant(path: &Path, variant: &BTreeMap<String, String>) -> Result<Loaded, TrainingError> {
    let text = crate::datafile::read_text(path).map_err(scenario::ScenarioError::from)?;
    Ok(scenario::load_str(path, &apply_variant(&text, variant))?)
}

/// A blind challenge's variant of `loaded`: its workload's name, `web` in its names, labels,
/// selectors, gates, fault and hints alike, replaced by one of [`WORKLOAD_NAMES`] at random, and its
/// ConfigMap's, `app-config`, by one made from it; and for each entry of the scenario's `variants`
/// (values: a port, a memory limit) one of its alternatives at random, or the value as written; so
/// that the second time is diagnosis again, not memory. `None` where the variant would still name
/// `web` (a fault whose default names the workload, which the file does not spell out): that
/// scenario keeps its names and values.
pub fn variant_of(loaded: &Loaded) -> Result<Option<(Loaded, Variant)>, TrainingError> {
    let name = WORKLOAD_NAMES[fastrand::usize(..WORKLOAD_NAMES.len())];
    let settings = ["settings", "conf", "options", "env"][fastrand::usize(..4)];
    let mut variant = BTreeMap::from([("web".to_string(), name.to_string()), ("app-config".to_string(), format!("{name}-{settings}"))]);
    for alternatives in &loaded.scenario.variants {
        // One more choice than alternatives: the file as written.
        if let Some(alternative) = alternatives.get(fastrand::usize(..=alternatives.len())) {
            variant.extend(alternative.clone());
        }
    }
    let changed = load_variant(&loaded.path, &variant)?;
    let old = scenario::words_pattern(scenario::RENAMED_BY_TRAINING);
    Ok((!old.is_match(&format!("{changed:?}"))).then_some((changed, variant)))
}

/// The provider a session trains on: the test bed or a cluster already there, a kind cluster of the
/// user's (`--cluster NAME`), or a kind cluster made for this session alone, which `reset` deletes.
/// A blind challenge's cluster is `faultlab-challenge-<random>`: a name made from the scenario's would
/// tell it.
fn training_provider(loaded: &Loaded, choice: &ProviderChoice, blind: bool) -> Box<dyn Provider> {
    match choice {
        ProviderChoice::Existing { description, target } => Box::new(Existing { description: description.clone(), target: target.clone() }),
        ProviderChoice::Kind { arch, node_image, cluster, .. } => {
            let mut kind = crate::suite::kind_provider(loaded, *arch, false, node_image.clone());
            if blind {
                kind = crate::suite::named(kind, &crate::provider::kind::Kind::new_name("challenge"));
            }
            Box::new(crate::suite::on_existing(kind, cluster.as_deref()))
        }
    }
}

/// On a kind cluster made for the session: its deletion (and its directory's), journalled first, so
/// that `reset` and `faultlab cleanup --sessions` delete it last, after every other undo.
fn journal_cluster_deletion(journal: &Journal, cluster: &crate::provider::Cluster) -> Result<(), JournalError> {
    let crate::provider::Ownership::Created { kind_cluster } = &cluster.ownership else { return Ok(()) };
    let dir = crate::provider::kind::run_dir(kind_cluster);
    let rm = crate::cmd::Cmd::new(["rm".to_string(), "-rf".into(), "--".into(), dir.display().to_string()]);
    journal.record(format!("remove kind cluster {kind_cluster}'s directory {}", dir.display()), journal::Undo::Host { cmd: rm })?;
    let delete = crate::cmd::Cmd::new(crate::provider::kind::delete_argv(kind_cluster, None)).timeout(Duration::from_secs(300));
    journal.record(format!("delete kind cluster {kind_cluster}, made for this session"), journal::Undo::Host { cmd: delete })
}

/// On the cluster `provision` gave: the session's node and a run on it, whose journal holds the
/// cluster's deletion if it was made for the session.
async fn start_run(loaded: &Loaded, cluster: &crate::provider::Cluster, allow_existing: Option<&str>, blind: bool, rec: &Recorder) -> Result<(Run, NodeProfile, kube::Client), TrainingError> {
    check_safety(cluster, allow_existing)?;
    // A blind challenge's node is any of the cluster's, at random; a named one's the first.
    let pick = if blind { fastrand::usize(..cluster.nodes.len().max(1)) } else { 0 };
    let node = cluster.nodes.get(pick).cloned().ok_or_else(|| TrainingError::NoNode { context: cluster.context.clone() })?;
    if loaded.scenario.fault.fault().touches_node() {
        for other in Session::all() {
            let other_touches = scenario::load(&other.scenario_path).map(|s| s.scenario.fault.fault().touches_node()).unwrap_or(true);
            if other.cluster.context == cluster.context && other.node.name == node.name && other_touches {
                return Err(TrainingError::NodeBusy { other: other.id, node: node.name, context: cluster.context.clone() });
            }
        }
    }
    let client = crate::kube_ops::connect(&cluster.kubeconfig, &cluster.context).await?;
    let journals = journal::journal_dir().map_err(|e| TrainingError::Break { source: Box::new(e.into()), teardown: vec![] })?;
    let label = if blind { "challenge" } else { loaded.name() };
    let run = Run::new_in(loaded.clone(), label, cluster, node.clone(), client.clone(), &journals, rec.clone())?;
    journal_cluster_deletion(run.journal(), cluster).map_err(|e| TrainingError::Break { source: Box::new(e.into()), teardown: vec![] })?;
    Ok((run, node, client))
}

pub async fn train(loaded: &Loaded, choice: &ProviderChoice, allow_existing: Option<&str>, start: Start, rec: Recorder) -> Result<Session, TrainingError> {
    let (loaded, variant) = match start.blind {
        true => variant_of(loaded)?.unwrap_or_else(|| (loaded.clone(), BTreeMap::new())),
        false => (loaded.clone(), BTreeMap::new()),
    };
    let loaded = &loaded;
    // Making the cluster and breaking it hold what a run of the scenario holds on this machine (a kind
    // node's systemd, starting while another process's fault lowers the host's inotify limit, fails).
    // The trainee's time holds nothing: its cluster is then as exposed as a shared cluster between runs.
    let machine = crate::suite::machine_claim(loaded, choice);
    let held = crate::machine_lock::acquire(crate::machine_lock::dir(), machine.clone()).await.map_err(TrainingError::MachineLock)?;
    if let Some(note) = held.waited_note(&machine) {
        rec.push(crate::record::Channel::Note, note);
    }
    let provider = training_provider(loaded, choice, start.blind);
    let cluster = provider.provision(&rec).await.map_err(TrainingError::Provider)?;
    let (mut run, node, client) = match start_run(loaded, &cluster, allow_existing, start.blind, &rec).await {
        Ok(started) => started,
        Err(e) => {
            // A kind cluster made for the session goes with it.
            let _ = provider.release(&cluster, &rec).await;
            return Err(e);
        }
    };
    let broken = async {
        run.setup().await?;
        run.inject().await?;
        run.await_symptom().await
    }
    .await;
    if let Err(source) = broken {
        let teardown = run.teardown().await;
        return Err(TrainingError::Break { source: Box::new(source), teardown });
    }
    if let Some(log) = &run.events {
        log.stop();
    }
    let controllers = controllers(&client, &run.namespace).await?;
    let session = Session {
        api_version: ApiVersion::V1alpha1,
        kind: "TrainingSession".into(),
        id: run.namespace.clone(),
        scenario: loaded.name().into(),
        scenario_path: loaded.path.canonicalize().unwrap_or_else(|_| loaded.path.clone()),
        namespace: run.namespace.clone(),
        cluster: run.journal().snapshot().cluster,
        node,
        journal: run.journal().path().map(Path::to_path_buf).unwrap_or_default(),
        started: now(),
        hints_used: 0,
        solution_shown: false,
        controllers,
        solved: None,
        hints_at: Vec::new(),
        checks: Vec::new(),
        solution_at: None,
        broke: run.timeline(),
        rubric: Rubric { time_limit: start.time_limit.as_secs_f64(), ..Rubric::default() },
        answers: Vec::new(),
        blind: start.blind,
        trainee_kubeconfig: None,
        variant,
    };
    session.save()?;
    let valid = start.time_limit + Duration::from_secs(3600);
    let kubeconfig = trainee_access(&client, run.journal(), &session, valid).await?;
    let session = Session { trainee_kubeconfig: Some(kubeconfig), ..session };
    session.save()?;
    Ok(session)
}

/// The name of the trainee's ServiceAccount, in the session's namespace.
pub const TRAINEE: &str = "trainee";

/// What the trainee may do outside their namespace: read nodes (`kubectl get nodes`, `describe node`).
fn trainee_cluster_role(name: &str) -> serde_json::Value {
    serde_json::json!({
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": {"name": name},
        "rules": [{"apiGroups": [""], "resources": ["nodes"], "verbs": ["get", "list", "watch"]}]
    })
}

/// The trainee's access, and a kubeconfig for it (`<sessions dir>/<id>.kubeconfig`, 0600): a
/// ServiceAccount in the session's namespace, bound there to the built-in ClusterRole `admin` (all of
/// that namespace, nothing of another's), plus a ClusterRole of the session's own to read nodes, whose
/// binding and role are journalled before they are made (the namespace's deletion takes the rest); its
/// token from the TokenRequest API, valid for `valid`. The token is written to the file only.
async fn trainee_access(client: &kube::Client, journal: &Journal, session: &Session, valid: Duration) -> Result<PathBuf, TrainingError> {
    use k8s_openapi::api::authentication::v1::TokenRequest;
    use k8s_openapi::api::core::v1::ServiceAccount;
    use kube::api::{DynamicObject, PostParams};
    let ns = session.namespace.as_str();
    let call = |verb: &'static str, what: String| move |source| crate::kube_ops::KubeError::Call { verb, what: what.into(), source };
    let pp = PostParams::default();
    let sa: ServiceAccount = serde_json::from_value(serde_json::json!({"metadata": {"name": TRAINEE}})).expect("a ServiceAccount");
    Api::<ServiceAccount>::namespaced(client.clone(), ns).create(&pp, &sa).await.map_err(call("create", format!("serviceaccount {ns}/{TRAINEE}")))?;
    let subject = serde_json::json!([{"kind": "ServiceAccount", "name": TRAINEE, "namespace": ns}]);
    let role = format!("faultlab-trainee-{ns}");
    let objects = [
        (Some(ns), serde_json::json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding", "metadata": {"name": "trainee-admin"},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "admin"}, "subjects": subject})),
        (None, trainee_cluster_role(&role)),
        (None, serde_json::json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding", "metadata": {"name": role},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role}, "subjects": subject})),
    ];
    for (namespace, object) in objects {
        let kind = object["kind"].as_str().unwrap_or_default().to_string();
        let name = object["metadata"]["name"].as_str().unwrap_or_default().to_string();
        if namespace.is_none() {
            let undo = journal::Undo::DeleteObject { api_version: "rbac.authorization.k8s.io/v1".into(), kind: kind.clone(), namespace: None, name: name.clone() };
            journal.record(format!("delete {kind} {name}"), undo).map_err(RunError::from)?;
        }
        let ar = crate::kube_ops::resource("rbac.authorization.k8s.io/v1", &kind);
        let api: Api<DynamicObject> = match namespace {
            Some(ns) => Api::namespaced_with(client.clone(), ns, &ar),
            None => Api::all_with(client.clone(), &ar),
        };
        let object: DynamicObject = serde_json::from_value(object).expect("an RBAC object");
        api.create(&pp, &object).await.map_err(call("create", format!("{kind} {name}")))?;
    }
    let request: TokenRequest = serde_json::from_value(serde_json::json!({"spec": {"audiences": [], "expirationSeconds": valid.as_secs()}})).expect("a TokenRequest");
    let token: TokenRequest = Api::<ServiceAccount>::namespaced(client.clone(), ns)
        .create_subresource("token", TRAINEE, &pp, &request)
        .await
        .map_err(call("create", format!("token for serviceaccount {ns}/{TRAINEE}")))?;
    let token = token.status.and_then(|s| s.token).unwrap_or_default();
    let path = private_sessions_dir()?.join(format!("{}.kubeconfig", session.id));
    let text = trainee_kubeconfig(&session.cluster.kubeconfig, &session.cluster.context, ns, &token)?;
    crate::statefile::write(&path, text.as_bytes()).map_err(|source| TrainingError::State { source })?;
    Ok(path)
}

/// A kubeconfig for `token` on the cluster of `context` in the kubeconfig at `admin` (its server and
/// CA, nothing of its user), whose context's namespace is `ns`.
fn trainee_kubeconfig(admin: &Path, context: &str, ns: &str, token: &str) -> Result<String, TrainingError> {
    use kube::config::Kubeconfig;
    let kc = Kubeconfig::read_from(admin).map_err(|source| crate::kube_ops::KubeError::Kubeconfig { path: admin.display().to_string(), source: Box::new(source) })?;
    let cluster_name = kc.contexts.iter().find(|c| c.name == context).and_then(|c| c.context.as_ref()).map(|c| c.cluster.clone()).unwrap_or_default();
    let cluster = kc.clusters.iter().find(|c| c.name == cluster_name).and_then(|c| c.cluster.clone());
    let Some(mut cluster) = cluster else {
        return Err(TrainingError::NoNode { context: format!("{context} (its cluster {cluster_name:?} is not in {})", admin.display()) });
    };
    // A CA given as a file becomes data, so that the kubeconfig stands alone.
    if let (None, Some(file)) = (&cluster.certificate_authority_data, &cluster.certificate_authority) {
        let pem = std::fs::read(file).map_err(|source| TrainingError::File { path: file.into(), source })?;
        use base64::Engine;
        cluster.certificate_authority_data = Some(base64::engine::general_purpose::STANDARD.encode(pem));
        cluster.certificate_authority = None;
    }
    let name = format!("trainee@{context}");
    let doc = serde_json::json!({
        "apiVersion": "v1", "kind": "Config", "current-context": name,
        "clusters": [{"name": cluster_name, "cluster": cluster}],
        "users": [{"name": name, "user": {"token": token}}],
        "contexts": [{"name": name, "context": {"cluster": cluster_name, "user": name, "namespace": ns}}],
    });
    Ok(serde_json::to_string_pretty(&doc).expect("a kubeconfig serialises") + "\n")
}

/// The pods `selector` matches, and each ReplicaSet's Deployment (by uid), in `ns`.
async fn pods_and_replica_sets(client: &kube::Client, ns: &str, selector: &str) -> Result<(Vec<Pod>, BTreeMap<String, String>), TrainingError> {
    let err = |what: &'static str| move |source| crate::kube_ops::KubeError::Call { verb: "list", what: what.into(), source };
    let pods = Api::<Pod>::namespaced(client.clone(), ns).list(&ListParams::default().labels(selector)).await.map_err(err("pods"))?.items;
    let mut replica_sets = BTreeMap::new();
    for rs in Api::<ReplicaSet>::namespaced(client.clone(), ns).list(&ListParams::default()).await.map_err(err("replicasets"))? {
        let owner = rs.metadata.owner_references.iter().flatten().find(|o| o.controller == Some(true) && o.kind == "Deployment").map(|o| o.uid.clone());
        if let (Some(uid), Some(owner)) = (rs.metadata.uid.clone(), owner) {
            replica_sets.insert(uid, owner);
        }
    }
    Ok((pods, replica_sets))
}

async fn controllers(client: &kube::Client, ns: &str) -> Result<Vec<Controller>, TrainingError> {
    let mut out = Vec::new();
    let lp = ListParams::default();
    let err = |what: &'static str| move |source| crate::kube_ops::KubeError::Call { verb: "list", what: what.into(), source };
    for d in Api::<Deployment>::namespaced(client.clone(), ns).list(&lp).await.map_err(err("deployments"))? {
        out.push(Controller::of("Deployment", d.metadata, d.spec.replicas.or(Some(1)), Some(&d.spec.template)));
    }
    for d in Api::<StatefulSet>::namespaced(client.clone(), ns).list(&lp).await.map_err(err("statefulsets"))? {
        out.push(Controller::of("StatefulSet", d.metadata, d.spec.replicas.or(Some(1)), Some(&d.spec.template)));
    }
    for d in Api::<DaemonSet>::namespaced(client.clone(), ns).list(&lp).await.map_err(err("daemonsets"))? {
        out.push(Controller::of("DaemonSet", d.metadata, None, Some(&d.spec.template)));
    }
    out.sort_by(|a, b| (&a.kind, &a.name).cmp(&(&b.kind, &b.name)));
    Ok(out)
}

fn age(ts: Option<&k8s_openapi::jiff::Timestamp>) -> String {
    let Some(ts) = ts else { return "<unknown>".into() };
    let secs = (k8s_openapi::jiff::Timestamp::now().as_second() - ts.as_second()).max(0) as u64;
    match secs {
        0..=119 => format!("{secs}s"),
        120..=7199 => format!("{}m", secs / 60),
        _ => format!("{}h", secs / 3600),
    }
}

fn pod_status(p: &Pod) -> String {
    if p.metadata.deletion_timestamp.is_some() {
        return "Terminating".into();
    }
    let st = p.status.clone().unwrap_or_default();
    for c in st.container_statuses.iter().flatten() {
        if let Some(w) = c.state.as_ref().and_then(|s| s.waiting.as_ref()).and_then(|w| w.reason.clone()) {
            return w;
        }
        if let Some(t) = c.state.as_ref().and_then(|s| s.terminated.as_ref()).and_then(|t| t.reason.clone()) {
            return t;
        }
    }
    if let Some(c) = st.conditions.iter().flatten().find(|c| c.type_ == "PodScheduled" && c.status == "False") {
        return c.reason.clone().unwrap_or_else(|| "Pending".into());
    }
    st.phase.unwrap_or_default()
}

/// What a person on call would see: `kubectl get pods` and the events of `kubectl describe pod`.
pub async fn on_call_view(session: &Session) -> Result<String, TrainingError> {
    use crate::terminal::field;
    let client = session.client().await?;
    let loaded = session.loaded()?;
    let ns = &session.namespace;
    let selector = &loaded.scenario.workload.target.selector;
    let pods = Api::<Pod>::namespaced(client.clone(), ns).list(&ListParams::default().labels(selector)).await.map_err(|source| crate::kube_ops::KubeError::Call { verb: "list", what: "pods".into(), source })?;
    let mut out = String::new();
    if session.blind {
        out.push_str(&format!("A page: something in namespace {ns} on context {} is not working (session {}; a blind challenge).\n", session.cluster.context, session.id));
    } else {
        out.push_str(&format!("Scenario {} is broken on context {} (session {}).\n", session.scenario, session.cluster.context, session.id));
    }
    out.push_str("Find out what is wrong and fix it. The fix is not shown unless you ask (`faultlab solution`).\n\n");
    match &session.trainee_kubeconfig {
        Some(own) => out.push_str(&format!("  export KUBECONFIG={}      # yours: this namespace, and reading nodes\n", own.display())),
        None => out.push_str(&format!("  export KUBECONFIG={}\n  kubectl config use-context {}\n", session.cluster.kubeconfig.display(), session.cluster.context)),
    }
    match session.node.access() {
        Some(crate::node::NodeAccess::Netns { netns }) => out.push_str(&format!("  ip netns exec {netns} bash      # a shell on node {}\n", session.node.name)),
        Some(crate::node::NodeAccess::Docker { container }) => out.push_str(&format!("  docker exec -it {container} bash      # a shell on node {}\n", session.node.name)),
        Some(crate::node::NodeAccess::Ssh(ssh)) => {
            let port = ssh.port.map(|p| format!("-p {p} ")).unwrap_or_default();
            out.push_str(&format!("  ssh {port}{}      # a shell on node {}\n", ssh.destination, session.node.name))
        }
        None => {}
    }
    // A node whose CRI client is not plain `crictl` (the test bed's faultlab-cri): say how to call it there.
    if let Some(crictl) = &session.node.crictl {
        out.push_str(&format!("  alias crictl='{}'      # the node's crictl\n", crate::cmd::shell_join(crictl)));
    }
    out.push_str(&format!("\n$ kubectl -n {ns} get pods -l {selector}\n"));
    out.push_str(&format!("{:<40} {:<7} {:<26} {:<9} {}\n", "NAME", "READY", "STATUS", "RESTARTS", "AGE"));
    for p in pods.items.iter() {
        let cs = p.status.as_ref().and_then(|s| s.container_statuses.clone()).unwrap_or_default();
        let total = p.spec.as_ref().map(|s| s.containers.len()).unwrap_or(cs.len());
        let ready = cs.iter().filter(|c| c.ready).count();
        let restarts: i32 = cs.iter().map(|c| c.restart_count).sum();
        let created = p.metadata.creation_timestamp.as_ref().map(|t| &t.0);
        let (name, status) = (p.metadata.name.clone().unwrap_or_default(), pod_status(p));
        out.push_str(&format!("{:<40} {:<7} {:<26} {:<9} {}\n", field(&name), format!("{ready}/{total}"), field(&status), restarts, age(created)));
    }
    let events = Api::<Event>::namespaced(client.clone(), ns).list(&ListParams::default()).await.map_err(|source| crate::kube_ops::KubeError::Call { verb: "list", what: "events".into(), source })?;
    for p in pods.items.iter().filter(|p| p.metadata.deletion_timestamp.is_none()) {
        let name = p.metadata.name.clone().unwrap_or_default();
        out.push_str(&format!("\n$ kubectl -n {ns} describe pod {}\n...\nEvents:\n", field(&name)));
        out.push_str(&format!("  {:<8} {:<24} {:<6} {:<18} {}\n", "Type", "Reason", "Age", "From", "Message"));
        let mut evs: Vec<&Event> = events.items.iter().filter(|e| e.involved_object.name.as_deref() == Some(name.as_str())).collect();
        // Events written through events.k8s.io (the scheduler's) carry eventTime, not lastTimestamp.
        let last = |e: &Event| e.last_timestamp.as_ref().map(|t| t.0).or(e.event_time.as_ref().map(|t| t.0));
        evs.sort_by_key(|e| last(e).map(|t| t.as_second()).unwrap_or_default());
        for e in evs {
            let count = e.count.unwrap_or(1);
            let age_text = if count > 1 {
                format!("{} (x{count} over {})", age(last(e).as_ref()), age(e.first_timestamp.as_ref().map(|t| &t.0)))
            } else {
                age(last(e).as_ref())
            };
            let from = e.source.as_ref().and_then(|s| s.component.clone()).unwrap_or_default();
            out.push_str(&event_row(e.type_.as_deref().unwrap_or_default(), e.reason.as_deref().unwrap_or_default(), &age_text, &from, e.message.as_deref().unwrap_or_default()));
        }
    }
    out.push_str("\nWhen you think it is fixed: `faultlab check`. Stuck: `faultlab hint`. Give up: `faultlab reset`.\n");
    Ok(out)
}

/// One row of `kubectl describe`'s events, each field terminal-safe: the text is the cluster's, and one
/// event must not print as more.
fn event_row(type_: &str, reason: &str, age: &str, from: &str, message: &str) -> String {
    use crate::terminal::field;
    format!("  {:<8} {:<24} {:<6} {:<18} {}\n", field(type_), field(reason), age, field(from), field(message))
}

/// `faultlab hint`'s line for hint `n`: the scenario's text, which a set of someone else's may hold
/// controls in, shown terminal-safe.
pub fn hint_text(n: usize, hint: &str) -> String {
    format!("hint {n}: {}", crate::terminal::lines(hint))
}

/// `faultlab check`'s list of what still fails, one item each, continued lines indented under it.
/// The items quote the cluster (a pod's state, an event): terminal-safe.
pub fn failing_text(failing: &[String]) -> String {
    failing.iter().map(|f| format!("  - {}\n", crate::terminal::lines(f).replace('\n', "\n    "))).collect()
}

/// The next hint, and the count used.
pub fn hint(session: &mut Session) -> Result<Option<String>, TrainingError> {
    let loaded = session.loaded()?;
    let hints = &loaded.scenario.hints;
    if session.hints_used >= hints.len() {
        return Ok(None);
    }
    let h = hints[session.hints_used].clone();
    session.hints_used += 1;
    session.hints_at.push(session.elapsed());
    session.save()?;
    Ok(Some(h))
}

/// What `check` found.
#[derive(Clone, Debug)]
pub struct Verdict {
    pub fixed: bool,
    /// What still fails, one line each.
    pub failing: Vec<String>,
    pub seconds: f64,
}

/// Evaluate the recovery condition now (or wait up to `wait` for it), and check the fix is real.
pub async fn check(session: &mut Session, wait: Option<Duration>) -> Result<Verdict, TrainingError> {
    let (run, client) = session.resume(Recorder::default()).await?;
    let loaded = session.loaded()?;
    // What the fault brought that the cluster needs to recover runs while this check does.
    loaded.scenario.fault.fault().resume(&run.ctx);
    // Every recovery gate (named one by one, so that a gate the format gains cannot be left out here:
    // the Deployment's was, until issue 30's Gates), evaluated on the current state (a watch that ends
    // at once), or waited for.
    let Gates { pod, node, claim, deployment } = loaded.scenario.recovery.gates();
    let ns = &session.namespace;
    let mut failing = Vec::new();
    let within = wait.unwrap_or(Duration::ZERO).max(Duration::from_millis(1500));
    if let Some(gate) = node {
        if let Err(e) = wait::node(&client, &session.node.name, gate, within).await {
            failing.push(e.to_string());
        }
    }
    if let Some(gate) = claim {
        let name = loaded.scenario.workload.target.claim.clone().unwrap_or_default();
        if let Err(e) = wait::claim(&client, ns, &name, gate, within).await {
            failing.push(e.to_string());
        }
    }
    if let Some(gate) = deployment {
        if let Err(e) = wait::deployment(&client, ns, gate, within).await {
            failing.push(e.to_string());
        }
    }
    if let Some(gate) = pod {
        if let Err(e) = wait::pod_gate(&client, ns, &loaded.scenario.workload.target.selector, gate, within).await {
            failing.push(e.to_string());
        }
    }
    // The fix is real: the workload's controllers are the ones the session began with (not deleted and
    // recreated), and the fault itself is gone (not just its symptom).
    let now_controllers = controllers(&client, ns).await?;
    for c in &session.controllers {
        match now_controllers.iter().find(|n| n.kind == c.kind && n.name == c.name) {
            None => failing.push(format!("{} {} was deleted; the workload must be fixed, not replaced", c.kind, c.name)),
            Some(n) if n.uid != c.uid => failing.push(format!("{} {} was deleted and created again; the workload must be fixed, not replaced", c.kind, c.name)),
            _ => {}
        }
    }
    failing.extend(hidden_symptom(&session.controllers, &now_controllers));
    let selector = &loaded.scenario.workload.target.selector;
    if !selector.is_empty() {
        let (pods, replica_sets) = pods_and_replica_sets(&client, ns, selector).await?;
        failing.extend(impostors(&pods, &replica_sets, &session.controllers, selector));
    }
    match loaded.scenario.fault.fault().present(&run.ctx).await {
        // A blind challenge's check does not say what the fault is (the answer of its localise stage).
        Ok(Presence::Present(_)) if session.blind => failing.push("the cause is still there (a blind challenge: `faultlab hint` narrows it down, at a cost)".into()),
        Ok(Presence::Present(what)) => failing.push(format!("the fault is still there: {what}")),
        Ok(Presence::Absent(_) | Presence::Unknown) => {}
        Err(e) => failing.push(format!("cannot tell whether the fault is gone: {e}")),
    }
    let seconds = session.elapsed();
    let fixed = failing.is_empty();
    session.checks.push(CheckAttempt { at: seconds, fixed, failing: failing.clone() });
    if fixed && session.solved.is_none() {
        session.solved = Some(Solved { seconds, hints_used: session.hints_used, solution_shown: session.solution_shown });
    }
    session.save()?;
    let seconds = session.solved.as_ref().map(|s| s.seconds).unwrap_or(seconds);
    Ok(Verdict { fixed, failing, seconds })
}

/// Is `answer` right for `stage` of this session: the detect stage names one of the workload's
/// controllers (`web`, or `Deployment/web`, any case), the localise stage the scenario's fault (its
/// name as `faultlab list` gives it).
fn is_right(session: &Session, fault: &str, stage: Stage, answer: &str) -> bool {
    let answer = answer.trim();
    match stage {
        Stage::Detect => session.controllers.iter().any(|c| answer.eq_ignore_ascii_case(&c.name) || answer.eq_ignore_ascii_case(&format!("{}/{}", c.kind, c.name))),
        Stage::Localise => answer.eq_ignore_ascii_case(fault),
    }
}

/// Record an answer to `stage`; whether it was right. A stage already answered right takes no more.
pub fn answer(session: &mut Session, stage: Stage, text: &str) -> Result<bool, TrainingError> {
    if session.answers.iter().any(|a| a.stage == stage && a.correct) {
        return Err(TrainingError::Answered(stage.as_str()));
    }
    let fault = session.loaded()?.scenario.fault.name().to_string();
    let correct = is_right(session, &fault, stage, text);
    session.answers.push(Answer { stage, at: session.elapsed(), answer: text.trim().to_string(), correct });
    session.save()?;
    Ok(correct)
}

/// The session's score so far.
pub fn score(session: &Session) -> Score {
    crate::score::score(
        &session.rubric,
        &Played { answers: &session.answers, hints: session.hints_used, solution_shown: session.solution_shown, fixed_at: session.solved.as_ref().map(|s| s.seconds) },
    )
}

/// The instructor's scoreboard of `sessions` ([`html::scoreboard_page`]): each session's stages, time,
/// hints and score so far. A blind challenge not yet fixed shows what its trainee is shown, not its
/// scenario; nothing on it is a path or a credential.
pub fn scoreboard(sessions: &[Session], refresh: Option<u32>) -> html::Scoreboard {
    let rows = sessions
        .iter()
        .map(|s| {
            let first = |stage: Stage| s.answers.iter().find(|a| a.stage == stage && a.correct).map(|a| a.at);
            html::ScoreboardRow {
                session: s.id.clone(),
                challenge: s.shown_as(),
                namespace: s.namespace.clone(),
                context: s.cluster.context.clone(),
                // A fixed session's clock stops at the fix.
                elapsed: s.solved.as_ref().map_or_else(|| s.elapsed(), |x| x.seconds),
                time_limit: s.rubric.time_limit,
                detected: first(Stage::Detect),
                localised: first(Stage::Localise),
                fixed: s.solved.as_ref().map(|x| x.seconds),
                hints: s.hints_used,
                solution_shown: s.solution_shown,
                score: score(s),
            }
        })
        .collect();
    html::Scoreboard { made: rfc3339(now()), refresh, rows }
}

/// Write the scoreboard of the open sessions to `path` (atomically: a browser never reads half a page).
pub fn write_scoreboard(path: &Path, refresh: Option<u32>) -> Result<(), TrainingError> {
    let page = html::scoreboard_page(&scoreboard(&Session::all(), refresh));
    crate::atomic::write(path, page.as_bytes()).map_err(|source| TrainingError::ScoreboardWrite { path: path.to_owned(), source })
}

/// The documented fix and its source; with `apply`, carry it out.
pub async fn solution(session: &mut Session, apply: bool) -> Result<String, TrainingError> {
    let loaded = session.loaded()?;
    let sc = &loaded.scenario;
    let mut out = format!("Source: {} — {}\n", sc.metadata.source.document, sc.metadata.source.title);
    if let Some(section) = &sc.metadata.source.section {
        out.push_str(&format!("Section: {section}\n"));
    }
    if let Some(fix) = &sc.metadata.source.fix {
        out.push_str(&format!("\nThe document's fix:\n{}\n", fix.trim_end().lines().map(|l| format!("  {l}")).collect::<Vec<_>>().join("\n")));
    }
    out.push_str("\nSteps, in the document's order:\n");
    for (i, f) in sc.fix.iter().enumerate() {
        out.push_str(&format!("  {}. {} — {}\n", i + 1, f.step, f.doc.trim().replace('\n', "\n     ")));
    }
    session.solution_shown = true;
    session.solution_at.get_or_insert(session.elapsed());
    session.save()?;
    if apply {
        let rec = Recorder::default();
        let (run, _) = session.resume(rec.clone()).await?;
        for f in &sc.fix {
            sc.fault.fix(&f.step, &run.ctx).await.map_err(|source| RunError::Fix { step: f.step.clone(), source })?;
        }
        out.push_str("\nApplied:\n");
        for e in rec.entries() {
            out.push_str(&format!("  {}\n", e.line));
        }
    }
    Ok(out)
}

/// Where the session's web terminal records the lines typed ([`crate::webterm::Recording`]).
pub fn commands_path(session: &Session) -> PathBuf {
    sessions_dir().join(format!("{}.commands", session.id))
}

/// Where a trainee whose shell runs as another user keeps what the terminal gives them: their
/// private directory (also their HOME), their copy of the session's kubeconfig, and the broker's
/// socket ([`crate::webterm::Broker`]) through which their `faultlab` reaches the session.
pub struct TraineeHome<'a> {
    pub user: &'a crate::webterm::User,
    pub dir: &'a Path,
    pub kubeconfig: Option<PathBuf>,
    pub broker: PathBuf,
}

/// The shell `faultlab terminal` gives the session's trainee: `program` (an interactive shell without
/// startup files) with the trainee's kubeconfig, the session selected, faultlab on the PATH, and
/// nothing else of the instructor's environment (no credential of theirs reaches the shell). With
/// `home`, it runs as that user, whose `faultlab` calls go through the broker.
pub fn terminal_shell(session: &Session, program: &Path, home: Option<TraineeHome<'_>>) -> crate::webterm::Shell {
    let inherit = |k: &str| std::env::var(k).ok().map(|v| (k.to_string(), v));
    let mut path = std::env::current_exe().ok().and_then(|e| e.parent().map(|d| d.display().to_string())).unwrap_or_default();
    path.push(':');
    path.push_str(&std::env::var("PATH").unwrap_or_else(|_| "/usr/local/bin:/usr/bin:/bin".into()));
    let mut env = vec![
        ("PATH".to_string(), path),
        ("TERM".to_string(), "xterm-256color".to_string()),
        ("LANG".to_string(), "C.UTF-8".to_string()),
        ("FAULTLAB_SESSION".to_string(), session.id.clone()),
        ("PS1".to_string(), format!("{}$ ", session.namespace)),
    ];
    let (dir, user, kubeconfig) = match home {
        Some(h) => {
            env.extend([("USER", h.user.name.clone()), ("LOGNAME", h.user.name.clone()), ("HOME", h.dir.display().to_string())].map(|(k, v)| (k.to_string(), v)));
            env.push(("FAULTLAB_BROKER".to_string(), h.broker.display().to_string()));
            (h.dir.to_owned(), Some(h.user.clone()), h.kubeconfig)
        }
        None => {
            env.extend(["HOME", "USER", "LOGNAME", "FAULTLAB_STATE_DIR", "FAULTLAB_TESTBED", "FAULTLAB_SCENARIOS"].into_iter().filter_map(inherit));
            (PathBuf::from(std::env::var("HOME").unwrap_or_else(|_| "/".into())), None, session.trainee_kubeconfig.clone())
        }
    };
    if let Some(kc) = kubeconfig {
        env.push(("KUBECONFIG".to_string(), kc.display().to_string()));
    }
    crate::webterm::Shell { program: program.to_owned(), args: vec!["--noprofile".into(), "--norc".into(), "-i".into()], env, dir, user }
}

/// The commands a trainee may run through the broker: the session's own training commands, the
/// catalogue (`list`, `show`: every scenario, not which one this session is), and `node`, a command on
/// the session's own node. Not `sessions`: a class shares the instructor's state, and it would list
/// the other trainees'.
const BROKERED: [&str; 7] = ["answer", "hint", "check", "solution", "list", "show", "node"];

/// What the broker runs for a trainee's `args` (as they typed them after `faultlab`), for `session`,
/// as an argv; or why not. faultlab's commands run as `exe`, and the session's get `--session` of
/// this session: a trainee cannot name another. `node CMD ARGS...` runs CMD, as root, on the
/// session's node (`docker exec` into a kind node, ssh to a VM or a node of the user's) when
/// `node_commands` allows it, and only there: a test bed node on this machine (a network namespace)
/// would be root on the instructor's machine, and is refused. A kind node is a privileged container,
/// whose root can reach the machine it runs on: `node_commands` is for trainees trusted with that.
pub fn brokered(session: &Session, exe: &Path, args: &[String], node_commands: bool) -> Result<Vec<String>, String> {
    let refuse = |why: String| Err(format!("{why}; in this terminal faultlab runs {} (for this session)", BROKERED.join(", ")));
    let Some(first) = args.first() else {
        return refuse("no command".into());
    };
    let faultlab = |rest: &[String]| std::iter::once(exe.display().to_string()).chain(rest.iter().cloned()).collect::<Vec<_>>();
    if matches!(first.as_str(), "-h" | "--help" | "help" | "-V" | "--version") {
        return Ok(faultlab(&args[..1]));
    }
    if !BROKERED.contains(&first.as_str()) {
        return refuse(format!("`faultlab {first}` is the instructor's"));
    }
    if args.len() > 32 || args.iter().any(|a| a.len() > 1024) {
        return refuse("too many or too long arguments".into());
    }
    if first == "node" {
        let cmd = &args[1..];
        if cmd.is_empty() {
            return refuse("`faultlab node CMD ARGS...` runs CMD on your node: no CMD".into());
        }
        if !node_commands {
            return refuse("commands on the node are not allowed in this terminal (the instructor's `faultlab terminal --node-commands`)".into());
        }
        return match session.node.access() {
            Some(access @ (crate::node::NodeAccess::Docker { .. } | crate::node::NodeAccess::Ssh(_))) => Ok(access.wrap(&crate::cmd::Cmd::new(cmd.to_vec()))),
            _ => refuse(format!("node {} is on the instructor's machine (the test bed): a command there would be root on it, so it is not a trainee's", session.node.name)),
        };
    }
    if let Some(a) = args.iter().find(|a| a.starts_with("--session")) {
        return refuse(format!("{a}: the session is this terminal's"));
    }
    let mut out = faultlab(args);
    if matches!(first.as_str(), "answer" | "hint" | "check" | "solution") {
        out.extend(["--session".to_string(), session.id.clone()]);
    }
    Ok(out)
}

/// What [`reset`] did: the undo steps that failed (the session then stays open), and a note on the
/// machine's lock if taking it waited or was given up.
#[derive(Debug, Default)]
pub struct Reset {
    pub errors: Vec<String>,
    pub note: Option<String>,
}

/// Undo everything the session did, through its journal, and close it.
pub async fn reset(session: &Session) -> Result<Reset, TrainingError> {
    let mut out = Reset::default();
    // Its lock held while it is replayed, as `faultlab cleanup` holds it: never two undos at once.
    let claimed = match session.journal.is_file() {
        true => Journal::claim(&session.journal).map_err(RunError::from)?,
        false => None,
    };
    if claimed.is_none() && session.journal.is_file() {
        return Err(TrainingError::Busy { id: session.id.clone(), lock: journal::lock_path(&session.journal) });
    }
    if let Some(journal) = claimed {
        // Its undo (a kind cluster deleted, a kubelet restarted) ends processes that share this kernel,
        // on kind and on a test bed of network namespaces: it holds the host shared, as a run does.
        let (_held, note) = match session.node.ssh {
            None => crate::machine_lock::hold_for_teardown().await,
            Some(_) => (None, None),
        };
        out.note = note;
        out.errors = journal::replay_for_real(&journal).await.into_iter().map(|e| e.to_string()).collect();
    }
    if out.errors.is_empty() {
        if let Some(kubeconfig) = &session.trainee_kubeconfig {
            let _ = std::fs::remove_file(kubeconfig);
        }
        let _ = std::fs::remove_file(commands_path(session));
        let path = session.path();
        std::fs::remove_file(&path).map_err(|source| TrainingError::File { path, source })?;
    }
    Ok(out)
}


/// The session's debrief: the scenario and its source, how the cluster was broken, each hint asked
/// (with the scenario's text), each check, the solution and the fix. Reads the scenario for its hints.
pub fn debrief(session: &Session) -> Result<Debrief, TrainingError> {
    let mut d = debrief_of(session, &session.loaded()?.scenario);
    d.commands = crate::webterm::Recording::read(&commands_path(session))?.into_iter().map(|t| DebriefCommand { at: t.at, line: t.line }).collect();
    Ok(d)
}

fn debrief_of(session: &Session, sc: &Scenario) -> Debrief {
    let source = &sc.metadata.source;
    // A session from before hints were timed counts them without times.
    let asked = session.hints_used.max(session.hints_at.len());
    let hints = (0..asked)
        .map(|i| DebriefHint { at: session.hints_at.get(i).copied(), text: sc.hints.get(i).cloned().unwrap_or_else(|| format!("(hint {} is no longer in the scenario)", i + 1)) })
        .collect();
    Debrief {
        scenario: session.scenario.clone(),
        document: source.document.clone(),
        title: source.title.clone(),
        section: source.section.clone(),
        session: session.id.clone(),
        namespace: session.namespace.clone(),
        started: rfc3339(session.started),
        broke: session.broke.clone(),
        hints,
        hints_available: sc.hints.len(),
        checks: session.checks.iter().map(|c| DebriefCheck { at: c.at, fixed: c.fixed, failing: c.failing.clone() }).collect(),
        solution_shown: session.solution_shown || session.solution_at.is_some(),
        solution_at: session.solution_at,
        fixed_at: session.solved.as_ref().map(|s| rfc3339(session.started + s.seconds)),
        time_to_fix: session.solved.as_ref().map(|s| s.seconds),
        reset_unfixed: None,
        score: Some(score(session)),
        commands: Vec::new(),
    }
}

/// Unix seconds as RFC 3339 (UTC), to the second.
fn rfc3339(unix: f64) -> String {
    jiff::Timestamp::from_second(unix.round() as i64).map(|t| t.to_string()).unwrap_or_default()
}

/// Write the session's debrief page, `<sessions dir>/<id>.html` (it stays after a reset); its path.
/// `reset_unfixed`: the session is being reset before it was fixed (the page says when; ignored once
/// it is fixed).
pub fn write_debrief(session: &Session, reset_unfixed: bool) -> Result<PathBuf, TrainingError> {
    let mut d = debrief(session)?;
    if reset_unfixed && session.solved.is_none() {
        d.reset_unfixed = Some(session.elapsed());
    }
    write_page(&sessions_dir(), &session.id, &d)
}

fn write_page(dir: &Path, id: &str, d: &Debrief) -> Result<PathBuf, TrainingError> {
    std::fs::create_dir_all(dir).map_err(|source| TrainingError::DebriefDir { path: dir.to_owned(), source })?;
    let path = dir.join(format!("{id}.html"));
    crate::atomic::write(&path, html::debrief_page(d).as_bytes()).map_err(|source| TrainingError::DebriefWrite { path: path.clone(), source })?;
    Ok(path)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_blind_variant_renames_the_workload_everywhere_or_not_at_all() {
        let dir = crate::scenario::default_dir();
        let set = crate::scenario::load_set(&dir).unwrap();
        let web = regex::Regex::new(r"\b(web|app-config)\b").unwrap();
        let only_web = regex::Regex::new(r"\bweb\b").unwrap();
        let mut kept = Vec::new();
        for (name, loaded) in &set.good {
            match variant_of(loaded).unwrap() {
                Some((v, map)) => {
                    let shown = format!("{v:?}");
                    // (A scenario whose workload is not `web` has nothing to rename.)
                    let had_web = only_web.is_match(&format!("{loaded:?}"));
                    assert!(!web.is_match(&shown) && (!had_web || shown.contains(map["web"].as_str())), "{name}: {map:?}");
                    assert_eq!(v.scenario.fault.name(), loaded.scenario.fault.name());
                }
                None => kept.push(name.clone()),
            }
        }
        // The class trials' challenges vary; a scenario whose fault names `web` by default keeps it.
        for name in ["configmap-missing", "container-args-wrong", "memory-limit-unit"] {
            assert!(!kept.contains(&name.to_string()), "{name} keeps its names: {kept:?}");
        }
        let text = "name: web\nselector: app=web\npod: web-0\nclaim: data-web-0\nwebhook: webserver\n";
        let map = BTreeMap::from([("web".to_string(), "shop".to_string())]);
        assert_eq!(apply_variant(text, &map), "name: shop\nselector: app=shop\npod: shop-0\nclaim: data-shop-0\nwebhook: webserver\n");
        // `$` in a replacement is text, not a group.
        assert_eq!(apply_variant("web", &BTreeMap::from([("web".to_string(), "a$1".to_string())])), "a$1");
    }

    #[test]
    fn a_blind_variant_takes_each_value_s_alternative_or_the_value_as_written() {
        let set = crate::scenario::load_set(&crate::scenario::default_dir()).unwrap();
        // The class trials' challenges with values to vary.
        for name in ["container-args-wrong", "memory-limit-unit"] {
            assert!(!set.good[name].scenario.variants.is_empty(), "{name} has no values to vary");
        }
        // What a run reads (not the document's words in metadata, not the variants themselves).
        let run = |l: &Loaded| {
            let s = &l.scenario;
            format!("{:?}", (&s.workload, &s.fault, &s.symptom, &s.fix, &s.recovery, &s.hints, l.manifest_texts().unwrap()))
        };
        for (name, loaded) in &set.good {
            for (i, alternatives) in loaded.scenario.variants.iter().enumerate() {
                for alternative in alternatives {
                    let changed = load_variant(&loaded.path, alternative).unwrap_or_else(|e| panic!("{name}: variants[{i}] {alternative:?}: {e}"));
                    let words = crate::scenario::words_pattern(alternative.keys().map(String::as_str));
                    assert!(!words.is_match(&run(&changed)), "{name}: {alternative:?} left a word as written");
                    for by in alternative.values() {
                        assert!(run(&changed).contains(by.as_str()), "{name}: {by} is nowhere in the run");
                    }
                    // The document's words stay as the document has them; a variant has no variants.
                    assert_eq!(format!("{:?}", changed.scenario.metadata), format!("{:?}", loaded.scenario.metadata), "{name}");
                    assert!(changed.scenario.variants.is_empty(), "{name}");
                }
            }
        }
        // Drawn many times: every alternative, and the value as written, come up.
        let loaded = &set.good["container-args-wrong"];
        let mut seen = std::collections::BTreeSet::new();
        for _ in 0..200 {
            let (_, variant) = variant_of(loaded).unwrap().expect("container-args-wrong varies");
            seen.insert(variant.get("8080").cloned().unwrap_or_else(|| "8080".into()));
        }
        assert_eq!(seen.into_iter().collect::<Vec<_>>(), ["8000", "8080", "8443", "9090"]);
        // One pass: a value is not read again as a word.
        let swap = BTreeMap::from([("80".to_string(), "81".to_string()), ("81".to_string(), "80".to_string())]);
        assert_eq!(apply_variant("ports: [80, 81]\n", &swap), "ports: [81, 80]\n");
    }

    #[test]
    fn the_broker_runs_this_session_s_training_commands_only() {
        let mut s = session();
        let exe = Path::new("/opt/faultlab");
        let args = |a: &[&str]| a.iter().map(|x| x.to_string()).collect::<Vec<_>>();
        let id = s.id.clone();
        assert_eq!(brokered(&s, exe, &args(&["answer", "detect", "web"]), true).unwrap(), args(&["/opt/faultlab", "answer", "detect", "web", "--session", &id]));
        assert_eq!(brokered(&s, exe, &args(&["check", "--wait", "2m"]), true).unwrap(), args(&["/opt/faultlab", "check", "--wait", "2m", "--session", &id]));
        assert_eq!(brokered(&s, exe, &args(&["list"]), true).unwrap(), args(&["/opt/faultlab", "list"]));
        assert_eq!(brokered(&s, exe, &args(&["--help"]), true).unwrap(), args(&["/opt/faultlab", "--help"]));
        for (bad, why) in [
            (&["reset"][..], "`faultlab reset` is the instructor's"),
            (&["sessions"], "`faultlab sessions` is the instructor's"),
            (&["train", "pause-missing"], "`faultlab train` is the instructor's"),
            (&["hint", "--session", "other"], "--session: the session is this terminal's"),
            (&["hint", "--session=other"], "--session=other: the session is this terminal's"),
            (&["node"], "`faultlab node CMD ARGS...` runs CMD on your node: no CMD"),
            (&[], "no command"),
        ] {
            let e = brokered(&s, exe, &args(bad), true).unwrap_err();
            assert!(e.starts_with(why) && e.contains("answer, hint, check, solution, list, show, node"), "{bad:?}: {e}");
        }
        // A node command: on the session's own kind node, as argv; never on a test bed node of this machine.
        s.node.netns = Some("faultlab-node".into());
        s.node.container = None;
        let e = brokered(&s, exe, &args(&["node", "crictl", "ps"]), true).unwrap_err();
        assert!(e.contains("is on the instructor's machine"), "{e}");
        s.node.container = Some("class-1-control-plane".into());
        let e = brokered(&s, exe, &args(&["node", "crictl", "ps"]), false).unwrap_err();
        assert!(e.starts_with("commands on the node are not allowed in this terminal"), "{e}");
        assert_eq!(brokered(&s, exe, &args(&["node", "crictl", "ps", "--name", "a b"]), true).unwrap()[..3], args(&["docker", "exec", "class-1-control-plane"])[..]);
        // (inside the node, with the node commands' time limit)
        assert!(brokered(&s, exe, &args(&["node", "crictl", "ps", "--name", "a b"]), true).unwrap().ends_with(&args(&["crictl", "ps", "--name", "a b"])));
    }

    fn deployment(replicas: Option<i32>, probes: &[(&str, &str)]) -> Controller {
        Controller {
            kind: "Deployment".into(),
            name: "web".into(),
            uid: "d1".into(),
            replicas,
            probes: probes.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect(),
        }
    }

    /// Scaling away, or removing or changing a probe, hides the symptom; the fix's own changes (which
    /// touch neither) and an added probe do not count.
    #[test]
    fn scaling_away_or_dropping_a_probe_is_not_a_fix() {
        let before = [deployment(Some(1), &[("app/readinessProbe", r#"{"tcpSocket":{"port":8080}}"#)])];
        assert!(hidden_symptom(&before, &before).is_empty());
        let added = [deployment(Some(1), &[("app/readinessProbe", r#"{"tcpSocket":{"port":8080}}"#), ("app/startupProbe", "{}")])];
        assert!(hidden_symptom(&before, &added).is_empty(), "a probe added hides nothing");
        let scaled = [deployment(Some(0), &[("app/readinessProbe", r#"{"tcpSocket":{"port":8080}}"#)])];
        assert_eq!(hidden_symptom(&before, &scaled), ["Deployment web was scaled from 1 to 0 replicas; the workload must run as it did"]);
        let removed = [deployment(Some(1), &[])];
        assert_eq!(hidden_symptom(&before, &removed), ["Deployment web: container app's readinessProbe was removed; a probe says whether the pod works, it must stay"]);
        let changed = [deployment(Some(1), &[("app/readinessProbe", r#"{"exec":{"command":["true"]}}"#)])];
        assert!(hidden_symptom(&before, &changed)[0].contains("container app's readinessProbe was changed"));
        // A controller replaced is said by the uid check, not here.
        let replaced = [Controller { uid: "d2".into(), ..deployment(Some(0), &[]) }];
        assert!(hidden_symptom(&before, &replaced).is_empty());
    }

    /// The detect stage takes a controller's name, alone or with its kind, in any case; the localise
    /// stage the fault's name.
    #[test]
    fn answers_name_the_workload_or_the_fault() {
        let session: Session = serde_json::from_value(serde_json::json!({
            "apiVersion": "faultlab.dev/v1alpha1", "kind": "TrainingSession", "id": "s", "scenario": "pause-missing",
            "scenarioPath": "/x.yaml", "namespace": "ns", "cluster": {"context": "c", "kubeconfig": "/k"},
            "node": crate::testbed::tests::sample_profile(), "journal": "/j", "started": 0.0, "hintsUsed": 0,
            "solutionShown": false, "controllers": [deployment(Some(1), &[])]
        }))
        .unwrap();
        assert_eq!(session.rubric, Rubric::default(), "a session from before scoring gets the defaults");
        for right in ["web", "WEB", "Deployment/web", " deployment/web "] {
            assert!(is_right(&session, "pause-missing", Stage::Detect, right), "{right}");
        }
        for wrong in ["web-6d4cf56db6-x", "StatefulSet/web", "coredns", ""] {
            assert!(!is_right(&session, "pause-missing", Stage::Detect, wrong), "{wrong}");
        }
        assert!(is_right(&session, "pause-missing", Stage::Localise, "pause-missing"));
        assert!(!is_right(&session, "pause-missing", Stage::Localise, "web"));

        // A blind challenge names its scenario nowhere the trainee looks until it is fixed.
        let mut blind = Session { blind: true, ..session };
        assert_eq!(blind.shown_as(), "a blind challenge");
        let listed = blind.listed();
        assert_eq!(listed["scenario"], "a blind challenge");
        assert!(listed.get("scenarioPath").is_none() && !listed.to_string().contains("pause-missing"), "{listed}");
        blind.solved = Some(Solved { seconds: 1.0, hints_used: 0, solution_shown: false });
        assert_eq!(blind.shown_as(), "pause-missing");
        assert_eq!(blind.listed()["scenarioPath"], "/x.yaml");
    }

    #[test]
    fn a_blind_pick_is_one_of_the_candidates() {
        assert_eq!(pick(&[]), None);
        let candidates = ["a".to_string(), "b".to_string(), "c".to_string()];
        let picked: std::collections::BTreeSet<&String> = (0..200).filter_map(|_| pick(&candidates)).collect();
        assert_eq!(picked.len(), 3, "every candidate comes up: {picked:?}");
    }

    /// The probes are read from the pod template, init containers too.
    #[test]
    fn probes_are_read_per_container() {
        let spec: PodSpec = serde_json::from_value(serde_json::json!({"containers": [
            {"name": "app", "readinessProbe": {"tcpSocket": {"port": 8080}}, "livenessProbe": {"exec": {"command": ["true"]}}},
            {"name": "side"}
        ]}))
        .unwrap();
        let probes = probes_of(&spec);
        assert_eq!(probes.keys().collect::<Vec<_>>(), ["app/livenessProbe", "app/readinessProbe"]);
        assert_eq!(probes["app/readinessProbe"], r#"{"tcpSocket":{"port":8080}}"#);
    }

    fn pod(name: &str, owner: Option<(&str, &str)>) -> Pod {
        let refs = owner.map(|(kind, uid)| serde_json::json!([{"apiVersion": "apps/v1", "kind": kind, "name": "x", "uid": uid, "controller": true}]));
        serde_json::from_value(serde_json::json!({"metadata": {"name": name, "ownerReferences": refs.unwrap_or(serde_json::json!([]))}})).unwrap()
    }

    /// A pod the selector matches must be the workload's: through its ReplicaSet to a session's
    /// Deployment, or a session's StatefulSet or DaemonSet directly.
    #[test]
    fn a_pod_that_only_looks_like_the_workload_is_not_a_fix() {
        let controllers = [deployment(Some(1), &[]), Controller { kind: "StatefulSet".into(), name: "db".into(), uid: "s1".into(), ..Default::default() }];
        let replica_sets: BTreeMap<String, String> = [("rs1".to_string(), "d1".to_string()), ("rs9".to_string(), "d9".to_string())].into();
        let pods = [
            pod("web-1", Some(("ReplicaSet", "rs1"))),
            pod("db-0", Some(("StatefulSet", "s1"))),
            pod("impostor", None),
            pod("other-web", Some(("ReplicaSet", "rs9"))),
            pod("orphan-rs", Some(("ReplicaSet", "rs-gone"))),
        ];
        let found = impostors(&pods, &replica_sets, &controllers, "app=web");
        assert_eq!(found.len(), 3, "{found:?}");
        assert_eq!(found[0], "pod impostor matches the workload's selector (app=web) but is not the workload's; the workload must be fixed, not stood in for");
        assert!(found[1].starts_with("pod other-web ") && found[2].starts_with("pod orphan-rs "));
    }

    /// What `train`, `hint` and `check` print quotes the cluster and the scenario: shown with every
    /// control as an escape, and an event's text on its own row only.
    #[test]
    fn training_text_is_terminal_safe() {
        let row = event_row("Warning", "Failed\x1b[2J", "5s", "kubelet", "pull failed\n  Normal   Pulled   1s   kubelet   forged\u{9b}31m");
        assert_eq!(row, "  Warning  Failed\\u{1b}[2J          5s     kubelet            pull failed\\n  Normal   Pulled   1s   kubelet   forged\\u{9b}31m\n");
        assert_eq!(hint_text(2, "look at\x1b]0;x\x07 the node\nthen crictl"), "hint 2: look at\\u{1b}]0;x\\u{7} the node\nthen crictl");
        let failing = failing_text(&["pod: not met; last: <Waiting \x1b[8mhidden>\nmore".into(), "the fault is still there".into()]);
        assert_eq!(failing, "  - pod: not met; last: <Waiting \\u{1b}[8mhidden>\n    more\n  - the fault is still there\n");
    }

    /// A session of pause-missing (faultlab's own scenario, for its hints) as its file holds it: two
    /// hints asked, a check not fixed, then one fixed.
    fn session() -> Session {
        let json = serde_json::json!({
            "apiVersion": "faultlab.dev/v1alpha1",
            "kind": "TrainingSession",
            "id": "faultlab-pause-missing-x1",
            "scenario": "pause-missing",
            "scenarioPath": scenario::default_dir().join("pause-missing.yaml"),
            "namespace": "faultlab-pause-missing-x1",
            "cluster": {"kubeconfig": "/tmp/kubeconfig", "context": "testbed"},
            "node": {
                "name": "node-1",
                "containerd": {"address": "/run/containerd/containerd.sock", "namespace": "k8s.io", "root": "/var/lib/containerd", "config": "/etc/containerd/config.toml", "sandboxImage": "pause:3.2", "restart": ["true"]},
                "kubelet": {"rootDir": "/var/lib/kubelet", "config": "/var/lib/kubelet/config.yaml", "restart": ["true"]},
                "images": {"pause": "pause:3.2", "busybox": "busybox:1.35"}
            },
            "journal": "/tmp/journal.json",
            "started": 1_777_629_607.4,
            "hintsUsed": 2,
            "solutionShown": false,
            "controllers": [],
            "hintsAt": [12.5, 80.0],
            "checks": [
                {"at": 60.0, "fixed": false, "failing": ["pod -l app=web phase=Running ready=true: not met"]},
                {"at": 252.3, "fixed": true}
            ],
            "solved": {"seconds": 252.3, "hintsUsed": 2, "solutionShown": false},
            "broke": {"started": "2026-05-01T09:59:58Z", "phases": [{"phase": "setup", "start": 0.0, "end": 3.0}, {"phase": "inject", "start": 3.0, "end": 3.5}, {"phase": "symptom", "start": 3.5, "end": 9.4}]}
        });
        serde_json::from_value(json).expect("a session")
    }

    #[tokio::test]
    async fn a_reset_leaves_a_session_another_process_is_undoing() {
        let dir = tempfile::tempdir().unwrap();
        let mut s = session();
        // The journal's lock is held, as another reset or `faultlab cleanup --sessions` holds it.
        let held = Journal::create(dir.path(), "faultlab-pause-missing-x1", "pause-missing", crate::journal::ClusterRef::default()).unwrap();
        s.journal = held.path().unwrap().to_owned();
        let err = reset(&s).await.unwrap_err();
        assert!(matches!(&err, TrainingError::Busy { lock, .. } if *lock == dir.path().join("faultlab-pause-missing-x1.lock")), "{err}");
        assert!(s.journal.is_file(), "nothing undone");
        drop(held);
    }

    #[test]
    fn the_training_debrief_is_built_from_the_session_and_its_scenario() {
        let s = session();
        let sc = scenario::load(&s.scenario_path).expect("pause-missing loads").scenario;
        let d = debrief_of(&s, &sc);
        assert_eq!(d.scenario, "pause-missing");
        assert_eq!(d.document, sc.metadata.source.document);
        assert_eq!(d.started, "2026-05-01T10:00:07Z");
        assert_eq!(d.fixed_at.as_deref(), Some("2026-05-01T10:04:20Z"), "07.4 s + 252.3 s, to the second");
        assert_eq!(d.time_to_fix, Some(252.3));
        assert_eq!(d.hints.len(), 2);
        assert_eq!(d.hints_available, sc.hints.len());
        assert_eq!(d.hints[1], DebriefHint { at: Some(80.0), text: sc.hints[1].clone() }, "the scenario's second hint");
        assert_eq!(d.checks.len(), 2);
        assert!(!d.checks[0].fixed && d.checks[0].failing.len() == 1 && d.checks[1].fixed);
        assert!(!d.solution_shown && d.solution_at.is_none() && d.reset_unfixed.is_none());
        assert_eq!(d.broke.phases.len(), 3);

        // A session from before hints were timed, its scenario since shortened to one hint.
        let mut old = s.clone();
        old.hints_at.clear();
        old.solution_shown = true;
        let mut short = sc.clone();
        short.hints.truncate(1);
        let d = debrief_of(&old, &short);
        assert_eq!(d.hints, vec![DebriefHint { at: None, text: sc.hints[0].clone() }, DebriefHint { at: None, text: "(hint 2 is no longer in the scenario)".into() }]);
        assert!(d.solution_shown && d.solution_at.is_none());
    }

    #[test]
    fn the_training_debrief_page_is_written_and_its_errors_name_the_path() {
        let s = session();
        let sc = scenario::load(&s.scenario_path).expect("pause-missing loads").scenario;
        let d = debrief_of(&s, &sc);
        let dir = tempfile::tempdir().unwrap();
        let training = dir.path().join("training");
        let path = write_page(&training, &s.id, &d).expect("written");
        assert_eq!(path, training.join("faultlab-pause-missing-x1.html"));
        let page = std::fs::read_to_string(&path).unwrap();
        assert!(page.contains("Debrief: pause-missing") && page.contains(r#"<g class="check" data-fixed="true">"#));
        assert_eq!(page.matches(r#"<g class="hint">"#).count(), 2);
        assert_eq!(std::fs::read_dir(&training).unwrap().count(), 1, "no temporary file is left");

        // The directory cannot be made (a file is in the way), or the page cannot be written there.
        let blocked = dir.path().join("file");
        std::fs::write(&blocked, "").unwrap();
        let e = write_page(&blocked.join("training"), &s.id, &d).unwrap_err();
        assert!(matches!(e, TrainingError::DebriefDir { .. }) && e.to_string().contains(&blocked.join("training").display().to_string()), "{e}");
        assert!(std::error::Error::source(&e).is_some(), "the cause is the source");
        std::fs::create_dir(training.join("faultlab-taken.html")).unwrap();
        let e = write_page(&training, "faultlab-taken", &d).unwrap_err();
        assert!(matches!(e, TrainingError::DebriefWrite { .. }) && e.to_string().contains("faultlab-taken.html"), "{e}");
    }
}
