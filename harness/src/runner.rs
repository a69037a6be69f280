//! The life cycle every scenario runs: setup, inject, symptom, fix, recovery, teardown.
//!
//! Teardown always runs: it replays the run's journal on success, error, panic, SIGINT and SIGTERM.
//! `plan` runs the same code over scripted backends (the node, the API and the gates answer from the
//! fault's plan answers, and nothing is executed), so the plan is exactly what a run would do.

use std::sync::Arc;
use std::time::{Duration, Instant};

use serde::Serialize;
use thiserror::Error;

use crate::events::{self, EventLog, Normalised, Normaliser};
use crate::faults::{Ctx, FaultError, Presence};
use crate::journal::{ClusterRef, Journal, JournalError, Undo};
use crate::kube_ops::{Kube, KubeError};
use crate::node::{Executor, HostExecutor, Node, NodeProfile, ScriptedExecutor, TimedExecutor};
use crate::observe::{Live, Observe, Planned};
use crate::provider::Cluster;
use crate::record::{Channel, Phase, Recorder, Spent, Work};
use crate::scenario::{ConditionGate, Gates, Loaded, NodeGate, PodGate, ScenarioError};
use crate::vars::Vars;
use crate::wait::WaitError;

#[derive(Debug, Error)]
pub enum RunError {
    #[error("setup: {0}")]
    Setup(#[source] FaultError),
    #[error("the node is not ready for a workload: {0}")]
    NodeNotReady(#[source] WaitError),
    #[error("workload not ready before the fault: {0}")]
    WorkloadNotReady(#[source] WaitError),
    #[error("inject: {0}")]
    Inject(#[source] FaultError),
    #[error("recording events: {0}")]
    Events(#[source] crate::events::EventsError),
    #[error("symptom not seen: {0}")]
    Symptom(#[source] WaitError),
    #[error("symptom not seen: {0}")]
    SymptomEvents(#[source] crate::events::EventsError),
    #[error("fix step {step:?}: {source}")]
    Fix {
        step: String,
        #[source]
        source: FaultError,
    },
    #[error("no recovery: {0}")]
    Recovery(#[source] WaitError),
    #[error("interrupted by {0}")]
    Interrupted(crate::signals::Signal),
    #[error("interrupted: the run's task was cancelled")]
    Cancelled,
    #[error("the run panicked: {0}")]
    Panicked(String),
    #[error("scenario: {0}")]
    Scenario(#[from] ScenarioError),
    #[error("journal: {0}")]
    Journal(#[from] JournalError),
    #[error("api: {0}")]
    Api(#[from] KubeError),
}

/// When things happened in a run, in seconds from its start (the start of its setup phase).
#[derive(Clone, Debug, Default, PartialEq, Serialize, serde::Deserialize, schemars::JsonSchema)]
pub struct Timeline {
    /// The run's start, RFC 3339 (UTC).
    #[serde(default)]
    pub started: String,
    /// Each phase that began: when, and when it ended (`None`: it failed or was cut short; the
    /// timeline's end is then the last thing seen).
    #[serde(default)]
    pub phases: Vec<PhaseSpan>,
    /// Every event the run's watch saw (raw, not normalised), when it saw it.
    #[serde(default)]
    pub events: Vec<TimedEvent>,
    /// Each wait on the cluster (a gate): what it waited for, when it began and ended, and whether it
    /// was met (`false`: it timed out or failed).
    #[serde(default)]
    pub waits: Vec<TimedWait>,
    /// The target pods' states, each time one changed (`Pending ContainerCreating`, `Running ready`,
    /// `deleted`).
    #[serde(default)]
    pub pods: Vec<PodState>,
}

impl Timeline {
    pub fn is_empty(&self) -> bool {
        self.phases.is_empty() && self.events.is_empty() && self.waits.is_empty() && self.pods.is_empty()
    }

    /// The last second anything happened at.
    pub fn end(&self) -> f64 {
        let phases = self.phases.iter().map(|p| p.end.unwrap_or(p.start));
        let events = self.events.iter().map(|e| e.at);
        let waits = self.waits.iter().map(|w| w.end);
        let pods = self.pods.iter().map(|p| p.at);
        phases.chain(events).chain(waits).chain(pods).fold(0.0, f64::max)
    }
}

#[derive(Clone, Debug, PartialEq, Serialize, serde::Deserialize, schemars::JsonSchema)]
pub struct PhaseSpan {
    pub phase: Phase,
    pub start: f64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub end: Option<f64>,
}

#[derive(Clone, Debug, PartialEq, Serialize, serde::Deserialize, schemars::JsonSchema)]
pub struct TimedEvent {
    pub at: f64,
    /// `Pod/web-5d9c7b-x2x9q`, `Node/faultlab-node`.
    pub object: String,
    #[serde(rename = "type")]
    pub type_: String,
    pub reason: String,
    pub source: String,
    pub message: String,
}

#[derive(Clone, Debug, PartialEq, Serialize, serde::Deserialize, schemars::JsonSchema)]
pub struct TimedWait {
    pub phase: Phase,
    /// The gate, as plans write it: `pod -l app=web phase=Running ready=true`.
    pub what: String,
    pub start: f64,
    pub end: f64,
    pub met: bool,
}

#[derive(Clone, Debug, PartialEq, Serialize, serde::Deserialize, schemars::JsonSchema)]
pub struct PodState {
    pub at: f64,
    pub pod: String,
    pub state: String,
}

/// How long each phase took.
#[derive(Clone, Debug, Default, Serialize, serde::Deserialize, schemars::JsonSchema)]
pub struct Timings {
    pub setup: Option<f64>,
    pub inject: Option<f64>,
    pub symptom: Option<f64>,
    pub fix: Option<f64>,
    pub recovery: Option<f64>,
    pub teardown: Option<f64>,
    /// Of the phases' time, the seconds spent in gates: waiting on the cluster (pods, nodes, claims,
    /// Deployments, `--hold`). The rest is faultlab's own work and the latency of its calls (API calls,
    /// node commands, listing events, settling, undoing).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub waiting: Option<f64>,
    /// Of the rest, faultlab's own time, by what it went to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub own: Option<OwnTime>,
}

/// `d` in seconds, to the millisecond, as reports give every time.
fn seconds(d: Duration) -> f64 {
    (d.as_secs_f64() * 1000.0).round() / 1000.0
}

/// Seconds of a run's own time (outside the gates), by what they went to. The rest of the phases' time
/// outside the gates is the runner's own code, timers between steps (a fault's settle before it
/// checks), and scheduling.
#[derive(Clone, Debug, Default, PartialEq, Serialize, serde::Deserialize, schemars::JsonSchema)]
pub struct OwnTime {
    /// Commands on the node or this machine, in every phase.
    pub commands: f64,
    /// Of those, the commands of inject and fix: the fault's own work (filling a disk, pushing images
    /// to a registry, restarting a daemon), which the documented fault needs whoever runs it.
    pub fault_commands: f64,
    /// API calls, and listing the events already there before a watch.
    pub api: f64,
    /// Waiting for the event stream to go quiet before the record closes.
    pub settling: f64,
    /// Replaying the journal in teardown (its own commands and API calls).
    pub undoing: f64,
}

impl OwnTime {
    pub fn from_spent(spent: &Spent) -> OwnTime {
        let secs = |work: Work, phases: &[Phase]| seconds(spent.on(work, phases));
        OwnTime {
            commands: secs(Work::Commands, &Phase::ALL),
            fault_commands: secs(Work::Commands, &[Phase::Inject, Phase::Fix]),
            api: secs(Work::Api, &Phase::ALL),
            settling: secs(Work::Settling, &Phase::ALL),
            undoing: secs(Work::Undoing, &Phase::ALL),
        }
    }
}

impl Timings {
    fn set(&mut self, phase: Phase, d: Duration) {
        let v = Some(seconds(d));
        match phase {
            Phase::Setup => self.setup = v,
            Phase::Inject => self.inject = v,
            Phase::Symptom => self.symptom = v,
            Phase::Fix => self.fix = v,
            Phase::Recovery => self.recovery = v,
            Phase::Teardown => self.teardown = v,
        }
    }

    pub fn get(&self, phase: Phase) -> Option<f64> {
        match phase {
            Phase::Setup => self.setup,
            Phase::Inject => self.inject,
            Phase::Symptom => self.symptom,
            Phase::Fix => self.fix,
            Phase::Recovery => self.recovery,
            Phase::Teardown => self.teardown,
        }
    }
}

/// What a run works against: commands on this machine and its nodes, the API, and the gates.
struct Backends {
    exec: Arc<dyn Executor>,
    kube: Kube,
    observe: Arc<crate::observe::Timed>,
}

impl Backends {
    /// The real ones, with the time of each command and API call counted in `rec` ([`Recorder::spent`]).
    fn live(client: kube::Client, rec: Recorder) -> Backends {
        let exec = Arc::new(TimedExecutor { inner: Arc::new(HostExecutor), rec: rec.clone() });
        Backends { exec, kube: Kube::new(client.clone(), rec), observe: Arc::new(crate::observe::Timed::new(Arc::new(Live { client }))) }
    }
}

/// One scenario's run on one cluster and node.
pub struct Run {
    pub scenario: Loaded,
    /// The fault, one instance for the whole run: what it learns in one phase it keeps for the next.
    pub fault: Arc<crate::faults::FaultSpec>,
    /// Keep the fault in place this long after the symptom, before the fix (`faultlab run --hold`).
    pub hold: Option<Duration>,
    /// Pin the workload's pods to the run's node (`faultlab run --jobs` on a cluster of several nodes:
    /// each scenario works on the node the runner gave it). Off: the scheduler places them, as on a
    /// single-node cluster.
    pub pin: bool,
    /// The second node a workload that moves off its node may go to, and no other (the scheduler keeps
    /// it for the run beside the run's own); none: any node.
    pub spare: Option<String>,
    pub namespace: String,
    pub ctx: Arc<Ctx>,
    pub events: Option<EventLog>,
    pub timings: Timings,
    started: Option<Instant>,
    /// The time spent in gates so far ([`crate::observe::Timed`]).
    waited: Arc<std::sync::Mutex<Duration>>,
    /// For the timeline: when the run started (and the wall clock then), each phase's start and end,
    /// every wait, and the target pods' states.
    origin: Option<(Instant, String)>,
    spans: Vec<(Phase, Instant, Option<Instant>)>,
    waits: Arc<std::sync::Mutex<Vec<crate::observe::Waited>>>,
    pods: Option<crate::wait::PodLog>,
}

impl Run {
    /// A real run. The journal goes to `journal_dir` and records how to reach the cluster.
    pub fn new(scenario: Loaded, cluster: &Cluster, node: NodeProfile, client: kube::Client, journal_dir: &std::path::Path, rec: Recorder) -> Result<Run, RunError> {
        let label = scenario.name().to_string();
        Self::new_in(scenario, &label, cluster, node, client, journal_dir, rec)
    }

    /// A real run in a namespace named for `label` (`fl-<label>-<random>`), not for the scenario: a
    /// blind training challenge's namespace must not name its fault.
    pub fn new_in(scenario: Loaded, label: &str, cluster: &Cluster, node: NodeProfile, client: kube::Client, journal_dir: &std::path::Path, rec: Recorder) -> Result<Run, RunError> {
        let namespace = format!("fl-{label}-{}", crate::names::random_suffix(5));
        let cluster_ref = ClusterRef {
            kubeconfig: cluster.kubeconfig.clone(),
            context: cluster.context.clone(),
            kind_cluster: match &cluster.ownership {
                crate::provider::Ownership::Created { kind_cluster } => Some(kind_cluster.clone()),
                _ => None,
            },
        };
        let journal = Journal::create(journal_dir, &namespace, scenario.name(), cluster_ref)?;
        let mut run = Self::build(scenario, namespace, node, Backends::live(client, rec), journal);
        // On a cluster of several nodes the workload goes to the run's node, where the fault is.
        run.pin = cluster.nodes.len() > 1;
        Ok(run)
    }

    /// A run over the namespace and journal of one already under way (a training session's check and
    /// fix), against the cluster.
    pub fn resume(scenario: Loaded, namespace: String, node: NodeProfile, client: kube::Client, journal: Journal, rec: Recorder) -> Run {
        Self::build(scenario, namespace, node, Backends::live(client, rec), journal)
    }

    /// A plan: everything recorded, nothing executed. The node and the API answer from the fault's
    /// plan answers, and every wait is met at once.
    pub fn plan(scenario: Loaded, node: NodeProfile, rec: Recorder) -> Run {
        let namespace = format!("fl-{}-<id>", scenario.name());
        let journal = Journal::in_memory(scenario.name());
        let fault = scenario.scenario.fault.fault();
        let exec = Arc::new(ScriptedExecutor::new(fault.plan_answers(&node, &namespace)));
        let kube = Kube::scripted(rec.clone(), fault.plan_api_answers(&scenario.scenario.workload.target));
        Self::build(scenario, namespace, node, Backends { exec, kube, observe: Arc::new(crate::observe::Timed::new(Arc::new(Planned { rec }))) }, journal)
    }

    fn build(scenario: Loaded, namespace: String, node: NodeProfile, backends: Backends, journal: Journal) -> Run {
        let access = node.access().expect("node profiles are validated to have access");
        let vars = Vars::new(&namespace, &node);
        let waited = backends.observe.clock();
        let waits = backends.observe.waits();
        let ctx = Ctx {
            node: Node::new(node, access, backends.exec.clone()),
            host: backends.exec,
            kube: backends.kube,
            observe: backends.observe as Arc<dyn Observe>,
            journal,
            namespace: namespace.clone(),
            target: scenario.scenario.workload.target.clone(),
            vars,
        };
        let fault = Arc::new(scenario.scenario.fault.clone());
        Run {
            scenario,
            fault,
            hold: None,
            pin: false,
            spare: None,
            namespace,
            ctx: Arc::new(ctx),
            events: None,
            timings: Timings::default(),
            started: None,
            waited,
            origin: None,
            spans: Vec::new(),
            waits,
            pods: None,
        }
    }

    fn rec(&self) -> &Recorder {
        self.ctx.rec()
    }

    fn begin(&mut self, phase: Phase) {
        // A phase that failed never reached its end: its time up to here goes in the timings (the failed
        // gate's wait is already in `waiting`, and own time is the phases' less their waits). Its span
        // stays open: the timeline shows it unfinished.
        if let (Some(started), Some((open, _, _))) = (self.started.take(), self.spans.iter().rev().find(|(_, _, end)| end.is_none())) {
            self.timings.set(*open, started.elapsed());
        }
        self.rec().set_phase(phase);
        let now = Instant::now();
        self.started = Some(now);
        self.origin.get_or_insert_with(|| (now, jiff::Timestamp::now().round(jiff::Unit::Second).map(|t| t.to_string()).unwrap_or_default()));
        self.spans.push((phase, now, None));
        tracing::info!(scenario = self.scenario.name(), phase = phase.as_str(), "phase");
    }

    fn end(&mut self, phase: Phase) {
        if let Some(s) = self.started.take() {
            self.timings.set(phase, s.elapsed());
        }
        if let Some(span) = self.spans.iter_mut().rev().find(|(p, _, end)| *p == phase && end.is_none()) {
            span.2 = Some(Instant::now());
        }
        let waited = *self.waited.lock().unwrap_or_else(|p| p.into_inner());
        self.timings.waiting = Some(seconds(waited));
        self.timings.own = Some(OwnTime::from_spent(&self.rec().spent()));
    }

    pub fn journal(&self) -> &Journal {
        &self.ctx.journal
    }

    /// Namespace, node preparation, workload, and wait until it is ready.
    pub async fn setup(&mut self) -> Result<(), RunError> {
        self.begin(Phase::Setup);
        let s = self.scenario.scenario.clone();
        let ctx = self.ctx.clone();
        // Workloads start on a node the node lifecycle controller has seen Ready (no not-ready taint).
        ctx.observe.node_untainted(ctx.node.name(), Duration::from_secs(60)).await.map_err(RunError::NodeNotReady)?;
        // Journal the namespace's deletion before creating it.
        ctx.journal.record(
            format!("delete namespace {}", self.namespace),
            Undo::DeleteObject { api_version: "v1".into(), kind: "Namespace".into(), namespace: None, name: self.namespace.clone() },
        )?;
        ctx.kube.create_namespace(&self.namespace, self.scenario.name()).await?;
        self.pods = Some(ctx.observe.pod_states(&self.namespace, &ctx.target.selector));
        self.fault.fault().prepare(&ctx).await.map_err(RunError::Setup)?;
        if s.workload.start_broken {
            // A workload broken from its creation makes its symptom's first events now, and one made
            // before inject's watch lists its baseline would count as already there: storageclass-missing
            // then waited a minute for the scheduler's next try (seen once in ten runs). Record from here.
            self.start_recording().await?;
        }
        for mut object in self.scenario.objects(&ctx.vars)? {
            if self.pin {
                if self.fault.fault().needs().moves_between_nodes {
                    // It starts on the run's node and moves off it (the fault's symptom): preferred, not
                    // pinned; with `--jobs`, only to the second node the scheduler keeps for it.
                    crate::manifest::prefer_node(&mut object.value, ctx.node.name());
                    if let Some(spare) = &self.spare {
                        crate::manifest::require_nodes(&mut object.value, &[ctx.node.name(), spare]);
                    }
                } else {
                    crate::manifest::pin_to_node(&mut object.value, ctx.node.name());
                }
            }
            let ns = if object.cluster_scoped {
                // Declared in workload.clusterObjects (checked at load): journal its deletion first.
                let (api_version, kind, name) = (object.api_version().to_string(), object.kind().to_string(), object.name().to_string());
                ctx.journal.record(format!("delete {kind} {name}"), Undo::DeleteObject { api_version, kind, namespace: None, name })?;
                None
            } else {
                Some(self.namespace.as_str())
            };
            ctx.kube.create_object(ns, object.value).await?;
        }
        if !s.workload.start_broken {
            let gate = PodGate { phase: Some("Running".into()), ready: Some(true), ..Default::default() };
            self.wait_pods(&gate, s.workload.ready_within.0).await.map_err(RunError::WorkloadNotReady)?;
        }
        self.end(Phase::Setup);
        Ok(())
    }

    /// Start recording events (unless setup did, for a workload that starts broken), then inject the
    /// fault and check it is in place.
    pub async fn inject(&mut self) -> Result<(), RunError> {
        self.begin(Phase::Inject);
        if self.events.is_none() {
            self.start_recording().await?;
        }
        let fault = self.fault.clone();
        fault.fault().inject(&self.ctx).await.map_err(RunError::Inject)?;
        // The fault itself, not only its symptom, must be in place.
        let absent = match fault.fault().present(&self.ctx).await.map_err(RunError::Inject)? {
            Presence::Absent(why) => Some(why),
            Presence::Present(_) | Presence::Unknown => None,
        };
        if let Err(absent) = self.ctx.observe.fault_in_place(absent) {
            return Err(RunError::Inject(FaultError::Check { step: "check-fault".into(), message: absent.to_string() }));
        }
        self.end(Phase::Inject);
        Ok(())
    }

    /// Watch the run's namespace and node for events. Returns once the watch has listed its baseline,
    /// so nothing that follows is mistaken for what was already there.
    async fn start_recording(&mut self) -> Result<(), RunError> {
        let listed = self.rec().timed(Work::Api, self.ctx.observe.events(Some(&self.namespace), self.ctx.node.name())).await;
        self.events = Some(listed.map_err(RunError::Events)?);
        Ok(())
    }

    /// Wait for the documented symptom: the gates, then the expected events.
    pub async fn await_symptom(&mut self) -> Result<(), RunError> {
        self.begin(Phase::Symptom);
        let s = self.scenario.scenario.symptom.clone();
        let deadline = Instant::now() + s.within.0;
        self.await_gates(s.gates(), deadline).await.map_err(RunError::Symptom)?;
        let gates = events::compile(&s.events, &self.ctx.vars).map_err(RunError::SymptomEvents)?;
        if let Some(log) = &self.events {
            self.ctx.observe.events_seen(log, &gates, remaining(deadline)).await.map_err(RunError::SymptomEvents)?;
        }
        self.end(Phase::Symptom);
        Ok(())
    }

    /// Apply the documented fix, step by step in the document's order.
    pub async fn fix(&mut self) -> Result<(), RunError> {
        self.begin(Phase::Fix);
        let steps = self.scenario.scenario.fix.clone();
        let fault = self.fault.clone();
        for step in &steps {
            self.ctx.note(format!("fix {}: {}", step.step, step.doc.trim()));
            fault.fix(&step.step, &self.ctx).await.map_err(|source| RunError::Fix { step: step.step.clone(), source })?;
        }
        self.end(Phase::Fix);
        Ok(())
    }

    /// Wait until the recovery condition holds, within its deadline.
    pub async fn await_recovery(&mut self) -> Result<(), RunError> {
        self.begin(Phase::Recovery);
        let r = self.scenario.scenario.recovery.clone();
        let deadline = Instant::now() + r.within.0;
        self.await_gates(r.gates(), deadline).await.map_err(RunError::Recovery)?;
        self.end(Phase::Recovery);
        Ok(())
    }

    /// A phase's gates, each within what is left of its deadline: the node, the claim, the Deployment,
    /// then the pods.
    async fn await_gates(&self, gates: Gates<'_>, deadline: Instant) -> Result<(), WaitError> {
        let Gates { pod, node, claim, deployment } = gates;
        if let Some(gate) = node {
            self.ctx.observe.node(self.ctx.node.name(), gate, remaining(deadline)).await?;
        }
        if let Some(gate) = claim {
            let name = self.ctx.target.claim.clone().unwrap_or_default();
            self.ctx.observe.claim(&self.namespace, &name, gate, remaining(deadline)).await?;
        }
        if let Some(gate) = deployment {
            self.ctx.observe.deployment(&self.namespace, gate, remaining(deadline)).await?;
        }
        if let Some(gate) = pod {
            self.wait_pods(gate, remaining(deadline)).await?;
        }
        Ok(())
    }

    async fn wait_pods(&self, gate: &PodGate, within: Duration) -> Result<(), WaitError> {
        self.ctx.observe.pods(&self.namespace, &self.ctx.target.selector, gate, within).await
    }

    /// The events seen so far, normalised.
    pub fn normalised_events(&self) -> Vec<Normalised> {
        let seen = self.events.as_ref().map(|l| l.seen()).unwrap_or_default();
        // The symptom's own event text stands for its reason (the patterns compiled when the run loaded).
        let prefer = events::compile(&self.scenario.scenario.symptom.events, &self.ctx.vars).unwrap_or_default();
        let snapshot = &self.scenario.scenario.snapshot;
        let mut events = Normaliser::new(&self.namespace, self.ctx.node.name()).events(&seen, &snapshot.ignore_reasons, &prefer);
        for e in &mut events {
            e.message = snapshot.rewritten(&e.message);
        }
        events
    }

    /// What the report says when the run's records dropped events past [`events::MAX_EVENTS`] or pod
    /// states past [`crate::wait::MAX_POD_STATES`].
    pub fn dropped_notes(&self) -> Vec<String> {
        let events = self.events.as_ref().and_then(EventLog::dropped_note);
        let pods = self.pods.as_ref().and_then(crate::wait::PodLog::dropped_note);
        events.into_iter().chain(pods).collect()
    }

    /// The objects whose events their source may have held back during the run (its event recorder's
    /// spam filter), named as snapshots name them.
    pub fn withheld_events(&self) -> Vec<events::Withheld> {
        let seen = self.events.as_ref().map(|l| l.seen()).unwrap_or_default();
        Normaliser::new(&self.namespace, self.ctx.node.name()).withheld(&seen)
    }

    /// When things happened, in seconds from the run's start: the phases, every event the watch saw,
    /// every wait, the target pods' states (empty before the run started).
    pub fn timeline(&self) -> Timeline {
        let Some((origin, started)) = self.origin.clone() else {
            return Timeline::default();
        };
        let at = |i: Instant| seconds(i.saturating_duration_since(origin));
        let phase_at = |i: Instant| self.spans.iter().rev().find(|(_, start, _)| *start <= i).map(|(p, _, _)| *p).unwrap_or(Phase::Setup);
        let phases = self.spans.iter().map(|(phase, start, end)| PhaseSpan { phase: *phase, start: at(*start), end: end.map(at) }).collect();
        let events = self
            .events
            .as_ref()
            .map(|l| l.seen())
            .unwrap_or_default()
            .into_iter()
            .map(|e| TimedEvent { at: at(e.at), object: format!("{}/{}", e.kind, e.name), type_: e.type_, reason: e.reason, source: e.source, message: e.message })
            .collect();
        let waits = self
            .waits
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .iter()
            .map(|w| TimedWait { phase: phase_at(w.start), what: w.what.clone(), start: at(w.start), end: at(w.end), met: w.met })
            .collect();
        let pods = self.pods.as_ref().map(|l| l.seen()).unwrap_or_default().into_iter().map(|(i, pod, state)| PodState { at: at(i), pod, state }).collect();
        Timeline { started, phases, events, waits, pods }
    }

    /// Stop recording and undo everything the journal holds. Returns the undo failures.
    pub async fn teardown(&mut self) -> Vec<JournalError> {
        self.begin(Phase::Teardown);
        if let Some(log) = &self.events {
            // Let the events the recovery caused arrive before the record is closed.
            self.rec().timed(Work::Settling, log.settle(Duration::from_secs(3), Duration::from_secs(20))).await;
            log.stop();
        }
        if let Some(pods) = &self.pods {
            pods.stop();
        }
        let journal = self.ctx.journal.snapshot();
        // An undo that restarts the kubelet or containerd makes the node send events (Starting,
        // NodeHas..., NodeReady) for a while after: watch them from before the replay, so the wait
        // below can tell when they have stopped and none lands in the next run's record.
        let restarts = journal.entries.iter().any(|e| !e.done && restarts_daemon(&self.ctx.node.profile, &e.undo));
        let node_events = match restarts {
            // Teardown goes on without it: the wait below then settles on time alone.
            true => match self.rec().timed(Work::Api, self.ctx.observe.events(None, self.ctx.node.name())).await {
                Ok(log) => Some(log),
                Err(e) => {
                    tracing::warn!("teardown: {e}");
                    None
                }
            },
            false => None,
        };
        for entry in journal.entries.iter().rev().filter(|e| !e.done) {
            let line = match &entry.undo {
                Undo::Node { access, cmd } => crate::cmd::shell_join(&access.wrap(cmd)),
                Undo::Host { cmd } => cmd.shell_line(),
                api => api.describe_object().unwrap_or_default(),
            };
            let channel = match entry.undo {
                Undo::Node { .. } => Channel::Node,
                Undo::Host { .. } => Channel::Host,
                Undo::DeleteObject { .. } | Undo::CreateObject { .. } => Channel::Api,
            };
            self.rec().push(channel, line);
        }
        let errors = self.rec().timed(Work::Undoing, self.ctx.observe.undo(&self.ctx.journal)).await;
        self.fault.fault().end(&self.ctx);
        if restarts {
            self.ctx.note("the node restarted a daemon: wait until it is Ready and its events have stopped");
            let ready = NodeGate { condition: ConditionGate { type_: "Ready".into(), status: "True".into(), reason: None } };
            if let Err(e) = self.await_gates(Gates { pod: None, node: Some(&ready), claim: None, deployment: None }, Instant::now() + Duration::from_secs(90)).await {
                tracing::warn!("teardown: node {} not Ready again: {e}", self.ctx.node.name());
            }
        }
        if let Some(log) = node_events {
            self.rec().timed(Work::Settling, log.settle(Duration::from_secs(3), Duration::from_secs(30))).await;
            log.stop();
        }
        self.end(Phase::Teardown);
        errors
    }

    /// The phases from setup to recovery, in order.
    pub async fn body(&mut self) -> Result<(), RunError> {
        self.setup().await?;
        self.inject().await?;
        self.await_symptom().await?;
        if let Some(hold) = self.hold {
            // Keep the cluster broken for a while (to look at it, or to interrupt a run mid-fault).
            self.ctx.note(format!("hold the fault for {} before the fix", crate::duration::format(hold)));
            self.ctx.observe.hold(hold).await;
        }
        self.fix().await?;
        self.await_recovery().await
    }
}

fn remaining(deadline: Instant) -> Duration {
    deadline.saturating_duration_since(Instant::now())
}

/// What ended a run.
#[derive(Debug)]
pub struct Outcome {
    pub result: Result<(), RunError>,
    pub phase: Phase,
    pub teardown_errors: Vec<JournalError>,
}

/// Run the whole life cycle. Teardown runs whatever happens: error, panic, SIGINT or SIGTERM.
pub async fn execute(run: Run) -> (Run, Outcome) {
    let mut interrupts = crate::signals::Interrupts::listen();
    let rec = run.rec().clone();
    // The body runs in a task of its own, so that a panic in it is caught and a signal can abort it;
    // either way the Run comes back (tokio's Mutex does not poison) and is torn down here.
    let shared = Arc::new(tokio::sync::Mutex::new(run));
    let body = shared.clone();
    let mut handle = tokio::spawn(async move { body.lock().await.body().await });
    let abort = handle.abort_handle();
    let joined = tokio::select! {
        j = &mut handle => Ok(j),
        signal = interrupts.recv() => Err(signal),
    };
    let result = match joined {
        Ok(Ok(result)) => result,
        Ok(Err(join)) if join.is_panic() => Err(RunError::Panicked(panic_text(join.into_panic()))),
        Ok(Err(_)) => Err(RunError::Cancelled),
        Err(signal) => {
            abort.abort();
            let _ = handle.await;
            Err(RunError::Interrupted(signal))
        }
    };
    let phase = rec.phase();
    let mut run = match Arc::try_unwrap(shared) {
        Ok(m) => m.into_inner(),
        Err(_) => unreachable!("the body task has ended and released the run"),
    };
    let teardown_errors = run.teardown().await;
    (run, Outcome { result, phase, teardown_errors })
}

fn panic_text(payload: Box<dyn std::any::Any + Send>) -> String {
    payload
        .downcast_ref::<String>()
        .cloned()
        .or_else(|| payload.downcast_ref::<&str>().map(|s| s.to_string()))
        .unwrap_or_else(|| "panic".into())
}

/// Whether an undo restarts the node's kubelet or containerd (it runs the profile's restart command,
/// alone or in a script).
pub fn restarts_daemon(profile: &NodeProfile, undo: &Undo) -> bool {
    let Undo::Node { cmd, .. } = undo else { return false };
    let kubelet_start = profile.kubelet.control.as_ref().map(|c| c.start.clone()).unwrap_or_default();
    [&profile.kubelet.restart, &profile.containerd.restart, &kubelet_start]
        .iter()
        .any(|r| !r.is_empty() && (cmd.argv == **r || cmd.argv.iter().any(|a| a.contains(&crate::cmd::shell_join(r)))))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cmd::Cmd;

    /// A plan's run has a timeline too: every phase in order, each from where the last ended, and each
    /// wait in the phase it began in, met.
    #[tokio::test]
    async fn a_runs_timeline_has_its_phases_in_order_and_its_waits_in_them() {
        let scenario = crate::scenario::find(&crate::scenario::default_dir(), "configmap-missing").unwrap();
        let mut run = Run::plan(scenario, crate::testbed::tests::sample_profile(), Recorder::default());
        assert_eq!(run.timeline(), Timeline::default(), "nothing before the run starts");
        run.body().await.unwrap();
        run.teardown().await;
        let t = run.timeline();
        assert_eq!(t.phases.iter().map(|p| p.phase).collect::<Vec<_>>(), Phase::ALL);
        assert!(t.phases.windows(2).all(|w| w[0].end.is_some_and(|end| end <= w[1].start)), "{:?}", t.phases);
        assert!(t.started.ends_with('Z') && t.started.len() == 20, "RFC 3339 to the second: {}", t.started);
        let phases: Vec<(Phase, &str)> = t.waits.iter().map(|w| (w.phase, w.what.as_str())).collect();
        assert!(phases.contains(&(Phase::Setup, "pod -l app=web phase=Running ready=true (within 2m)")), "{phases:?}");
        assert!(phases.iter().any(|(p, w)| *p == Phase::Recovery && w.starts_with("pod -l app=web phase=Running")), "{phases:?}");
        // Waiting for the documented event is a wait on the cluster too, not faultlab's own time.
        assert!(phases.iter().any(|(p, w)| *p == Phase::Symptom && w.starts_with("events FailedMount matching /MountVolume")), "{phases:?}");
        assert!(t.waits.iter().all(|w| w.met && w.start <= w.end));
        assert!(t.pods.is_empty(), "a plan watches no pods");
    }

    /// A phase that fails is timed up to the teardown, so the phases' time is never less than the time
    /// waited in their gates; its span stays unfinished.
    #[tokio::test]
    async fn a_failed_phase_is_timed_up_to_the_teardown() {
        let scenario = crate::scenario::find(&crate::scenario::default_dir(), "configmap-missing").unwrap();
        let mut run = Run::plan(scenario, crate::testbed::tests::sample_profile(), Recorder::default());
        run.begin(Phase::Setup);
        run.end(Phase::Setup);
        run.begin(Phase::Inject);
        tokio::time::sleep(Duration::from_millis(20)).await;
        // inject failed here: no end(Inject).
        run.teardown().await;
        assert!(run.timings.inject.is_some_and(|t| t >= 0.02), "{:?}", run.timings);
        let t = run.timeline();
        assert_eq!(t.phases.iter().map(|p| p.phase).collect::<Vec<_>>(), [Phase::Setup, Phase::Inject, Phase::Teardown]);
        assert_eq!(t.phases.iter().map(|p| p.end.is_some()).collect::<Vec<_>>(), [true, false, true], "{:?}", t.phases);
        let phases: f64 = Phase::ALL.iter().filter_map(|p| run.timings.get(*p)).sum();
        assert!(phases >= run.timings.waiting.unwrap_or_default(), "{:?}", run.timings);
    }

    #[test]
    fn undos_that_restart_the_kubelet_or_containerd_are_recognised() {
        let profile = crate::testbed::tests::sample_profile();
        let access = profile.access().unwrap();
        let node = |cmd: Cmd| Undo::Node { access: access.clone(), cmd };
        assert!(restarts_daemon(&profile, &node(profile.restart_kubelet())));
        assert!(restarts_daemon(&profile, &node(profile.restart_containerd())));
        let start = profile.kubelet.control.clone().expect("the sample's kubelet has control").start;
        assert!(restarts_daemon(&profile, &node(Cmd::new(start))), "starting a stopped kubelet");
        let script = format!("cp /a /b; {}", profile.restart_kubelet().shell_line());
        assert!(restarts_daemon(&profile, &node(Cmd::shell(script))));
        assert!(!restarts_daemon(&profile, &node(Cmd::new(["ip", "route", "replace", "default"]))));
        assert!(!restarts_daemon(&profile, &Undo::Host { cmd: Cmd::new(["true"]) }));
    }
}
