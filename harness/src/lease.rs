//! The cluster a scenario runs on, for as long as it runs: a [`Lease`]. Taken ([`Lease::own`] or
//! [`Lease::shared`]) before the scenario, given back ([`Lease::end`]) after it, by one teardown path:
//! a failed run's logs exported, then the cluster released (kind: deleted, or kept with `--keep`),
//! unless it is the batch's shared cluster and the run left it as it was made, which stays for the
//! next scenario of its group ([`SharedClusters`]).

use std::path::PathBuf;
use std::time::Instant;

use crate::needs::Needs;
use crate::node::NodeProfile;
use crate::provider::existing::Existing;
use crate::provider::kind::{Kind, KindNeeds};
use crate::provider::{Cluster, Provider};
use crate::record::{Channel, Phase, Recorder};
use crate::report::{ScenarioReport, Status};
use crate::signals::{interrupted, Interrupts};
use crate::snapshot::SnapshotResult;

/// A report of a run that failed in `phase` with `e`.
pub fn failed(mut r: ScenarioReport, phase: Phase, e: String) -> ScenarioReport {
    r.status = Status::Failed;
    r.failed_phase = Some(phase);
    r.error = Some(e);
    r.snapshot = SnapshotResult::Skipped("the run failed".into());
    r
}

/// Not run: this platform cannot or may not run it ([`Status::Refused`]).
pub fn refused(mut r: ScenarioReport, phase: Phase, why: String) -> ScenarioReport {
    r.status = Status::Refused;
    r.failed_phase = Some(phase);
    r.error = Some(why);
    r.snapshot = SnapshotResult::Skipped("the platform refused the run".into());
    r
}

/// Why a run ended before its scenario started: a step failed, or the platform refused it.
pub struct Stopped {
    pub message: String,
    pub refused: bool,
}

impl From<String> for Stopped {
    fn from(message: String) -> Self {
        Stopped { message, refused: false }
    }
}

impl Stopped {
    pub fn refusal(message: String) -> Self {
        Stopped { message, refused: true }
    }

    pub fn report(self, r: ScenarioReport, phase: Phase) -> ScenarioReport {
        if self.refused {
            refused(r, phase, self.message)
        } else {
            failed(r, phase, self.message)
        }
    }
}

/// The node the scenario acts on: the one named (the runner's choice on a cluster of several nodes),
/// else the first node the provider found.
pub fn pick_node(nodes: &[NodeProfile], wanted: Option<&str>) -> Option<NodeProfile> {
    match wanted {
        Some(name) => nodes.iter().find(|n| n.name == name).cloned(),
        None => nodes.first().cloned(),
    }
}

/// Kind clusters kept between the scenarios of one `faultlab run --all` (`--fresh-cluster` turns it off):
/// a scenario whose kind needs (config patches, node bootstrap, disk) equal the kept cluster's runs on it;
/// one that needs another deletes it and creates its own, which is kept in turn. A cluster is kept only
/// while every run on it passed and left its node as it found it (the node's state, every fault's
/// footprint, equal to the state right after creation); otherwise its logs are exported (failed runs) and
/// it is deleted, so the next scenario starts on a new one. [`SharedClusters::release`] deletes the last.
#[derive(Default)]
pub struct SharedClusters {
    current: Option<Shared>,
}

struct Shared {
    needs: KindNeeds,
    kind: Kind,
    cluster: Cluster,
    /// The node's state right after the cluster was created.
    clean: String,
    /// The scenarios that ran on it so far.
    ran: Vec<String>,
}

impl SharedClusters {
    /// Does it keep a cluster (for [`SharedClusters::release`] to delete)?
    pub fn keeps_one(&self) -> bool {
        self.current.is_some()
    }

    /// Delete the kept cluster, if any (the end of a suite; with `--keep` only say how).
    pub async fn release(&mut self, rec: &Recorder) -> Result<Option<String>, crate::provider::ProviderError> {
        match self.current.take() {
            Some(s) => s.kind.release(&s.cluster, rec).await.map(|()| Some(s.kind.name.clone())),
            None => Ok(None),
        }
    }
}

/// What provides a leased cluster: kind (faultlab's cluster, or the user's), or the existing cluster.
pub enum Held {
    Kind(Box<Kind>),
    Existing(Existing),
}

impl Held {
    fn provider(&self) -> &dyn Provider {
        match self {
            Held::Kind(k) => k.as_ref(),
            Held::Existing(e) => e,
        }
    }

    fn kind(&self) -> Option<&Kind> {
        match self {
            Held::Kind(k) => Some(k),
            Held::Existing(_) => None,
        }
    }
}

/// A cluster held for one scenario's run.
pub struct Lease {
    held: Held,
    pub cluster: Cluster,
    /// On kind: where a failed run's logs go, and what `--keep` tells the user.
    logs: Option<PathBuf>,
    keep_note: Option<String>,
    /// The batch's shared cluster: the node's state as made, and the scenarios that ran on it.
    shared: Option<(KindNeeds, String, Vec<String>)>,
    /// How long taking it took (creating a kind cluster, or connecting).
    pub seconds: f64,
}

impl Lease {
    pub fn provider(&self) -> &dyn Provider {
        self.held.provider()
    }

    /// The kind cluster's name, on kind.
    pub fn kind_cluster(&self) -> Option<String> {
        self.held.kind().map(|k| k.name.clone())
    }

    /// A cluster of the run's own: kind's, made for it (or the user's, `--cluster`), or the existing
    /// one; `report` says why not, with what kind exported and, if interrupted, what it made deleted.
    pub async fn own(held: Held, rec: &Recorder, interrupts: &mut Interrupts, report: &ScenarioReport) -> Result<Lease, ScenarioReport> {
        let started = Instant::now();
        let logs = held.kind().map(|k| k.logs_dir.clone());
        let keep_note = held.kind().filter(|k| k.keep).map(Kind::keep_message);
        let planned = held.kind().map(Kind::cluster);
        let cluster = provision(held.provider(), planned.as_ref(), logs.as_ref(), rec, interrupts, report).await.map_err(|mut r| {
            r.notes.extend(keep_note.clone());
            r
        })?;
        Ok(Lease { held, cluster, logs, keep_note, shared: None, seconds: since(started) })
    }

    /// The shared cluster of `needs` from `pool`, or (another group's deleted first) one made for them.
    pub async fn shared(pool: &mut SharedClusters, needs: &Needs, make: impl FnOnce() -> Kind, rec: &Recorder, interrupts: &mut Interrupts, report: &mut ScenarioReport) -> Result<Lease, ScenarioReport> {
        let started = Instant::now();
        let key = KindNeeds::of(needs);
        let s = match pool.current.take() {
            Some(s) if s.needs == key => {
                rec.push(Channel::Note, format!("on kind cluster {} (shared; created for {}, ran {} since)", s.kind.name, s.ran[0], s.ran.len()));
                s
            }
            other => {
                if let Some(old) = other {
                    // Another group's cluster: deleted before this one is created (one cluster at a time).
                    if let Err(e) = old.kind.release(&old.cluster, rec).await {
                        report.notes.push(format!("deleting the shared cluster {} failed: {e}", old.kind.name));
                    }
                }
                let kind = make();
                report.cluster = Some(kind.name.clone());
                make_shared(kind, key, rec, interrupts, report).await?
            }
        };
        let logs = Some(s.kind.logs_dir.clone());
        let keep_note = s.kind.keep.then(|| s.kind.keep_message());
        Ok(Lease { held: Held::Kind(Box::new(s.kind)), cluster: s.cluster, logs, keep_note, shared: Some((s.needs, s.clean, s.ran)), seconds: since(started) })
    }

    /// Give the cluster back after `scenario`'s run: the shared one kept in `pool` if the run passed and
    /// left the node as it was made; otherwise a failed run's logs exported and the cluster released.
    pub async fn end(self, scenario: &str, report: &mut ScenarioReport, pool: Option<&mut SharedClusters>, rec: &Recorder) {
        let Lease { held, cluster, logs, keep_note, shared, .. } = self;
        let held = match (shared, pool, held) {
            (Some((needs, clean, mut ran)), Some(pool), Held::Kind(kind)) => {
                ran.push(scenario.to_string());
                match still_clean(&cluster, &clean, report).await {
                    Ok(()) => {
                        pool.current = Some(Shared { needs, kind: *kind, cluster, clean, ran });
                        return;
                    }
                    // The run passed and its undo did what it journals, but the node is not as it was (a
                    // file the kubelet writes again only later, as cpu_manager_state on kind): said, and it goes.
                    Err(why) if report.status == Status::Passed => report.notes.push(format!("shared kind cluster {} deleted, not used again: {why}", kind.name)),
                    Err(_) => {}
                }
                Held::Kind(kind)
            }
            (_, _, held) => held,
        };
        let provider = held.provider();
        if let Some(dir) = logs.filter(|_| report.status == Status::Failed && interrupted().is_none()) {
            match provider.collect_logs(&cluster, &dir, rec).await {
                Ok(()) => report.logs = Some(dir.display().to_string()),
                Err(e) => report.teardown_errors.push(e.to_string()),
            }
        }
        if let Err(e) = provider.release(&cluster, rec).await {
            report.teardown_errors.push(e.to_string());
        }
        report.notes.extend(keep_note);
    }
}

fn since(started: Instant) -> f64 {
    (started.elapsed().as_secs_f64() * 1000.0).round() / 1000.0
}

/// Is the shared cluster's node as it was made, after a run that passed?
async fn still_clean(cluster: &Cluster, clean: &str, report: &ScenarioReport) -> Result<(), String> {
    if report.status != Status::Passed || interrupted().is_some() {
        return Err("the run did not pass".into());
    }
    let node = pick_node(&cluster.nodes, None).ok_or("no node")?;
    match node_state(&node).await {
        Ok(now) if now == clean => Ok(()),
        Ok(now) => Err(format!("the node is not as the cluster was made:\n{}", state_difference(clean, &now))),
        Err(e) => Err(format!("reading the node's state failed: {e}")),
    }
}

/// Create a cluster for a group to share, and read its node's state once its system pods run.
async fn make_shared(kind: Kind, needs: KindNeeds, rec: &Recorder, interrupts: &mut Interrupts, report: &ScenarioReport) -> Result<Shared, ScenarioReport> {
    let planned = kind.cluster();
    let cluster = provision(&kind, Some(&planned), Some(&kind.logs_dir), rec, interrupts, report).await?;
    // The node's state once the cluster's own pods have their sandboxes: the first pod network (the
    // bridge and its route) comes with them, and would otherwise count as a change the first run made.
    let clean = match pick_node(&cluster.nodes, None) {
        Some(n) => {
            let settled = tokio::select! {
                s = settle(&cluster) => s,
                signal = interrupts.recv() => Err(format!("interrupted by {signal} while the new cluster's system pods started")),
            };
            match settled {
                Ok(()) => node_state(&n).await.map_err(|e| format!("reading the new node's state (to compare after each run): {e}")),
                Err(e) => Err(e),
            }
        }
        None => Err(format!("cluster {} lists no node", kind.name)),
    };
    match clean {
        Ok(clean) => Ok(Shared { needs, kind, cluster, clean, ran: vec![] }),
        Err(e) => {
            let mut r = failed(report.clone(), Phase::Setup, e);
            if let Err(e) = kind.release(&cluster, rec).await {
                r.teardown_errors.push(e.to_string());
            }
            r.record = rec.entries();
            Err(r)
        }
    }
}

/// Create (or connect to) the cluster, or say why not in a report: with the logs kind exported, and,
/// if interrupted, what kind made so far (`planned`) deleted.
async fn provision(provider: &dyn Provider, planned: Option<&Cluster>, logs: Option<&PathBuf>, rec: &Recorder, interrupts: &mut Interrupts, report: &ScenarioReport) -> Result<Cluster, ScenarioReport> {
    let created = tokio::select! {
        c = provider.provision(rec) => c.map_err(|e| (Stopped { refused: e.is_refusal(), message: e.to_string() }, false)),
        signal = interrupts.recv() => Err((Stopped::from(format!("interrupted by {signal} while creating the cluster")), true)),
    };
    let (e, interrupted) = match created {
        Ok(c) => return Ok(c),
        Err(e) => e,
    };
    let mut r = e.report(report.clone(), Phase::Setup);
    if let Some(dir) = logs.filter(|d| d.is_dir()) {
        r.logs = Some(dir.display().to_string());
    }
    // Interrupted: kind and its children were killed; delete what they made so far.
    if let Some(cluster) = planned.filter(|_| interrupted) {
        if let Err(e) = provider.release(cluster, rec).await {
            r.teardown_errors.push(e.to_string());
        }
    }
    r.record = rec.entries();
    Err(r)
}

/// Until every pod of a new cluster's kube-system has its network (the first pod sandbox makes the
/// node's pod network).
async fn settle(cluster: &Cluster) -> Result<(), String> {
    let client = crate::kube_ops::connect(&cluster.kubeconfig, &cluster.context).await.map_err(|e| e.to_string())?;
    crate::wait::all_settled(&client, "kube-system", std::time::Duration::from_secs(180))
        .await
        .map_err(|e| format!("the new cluster's system pods: {e}"))
}

/// What differs between two [`node_state`] texts, section by section (a section starts at a `# title`
/// line): each changed section's title, then its lines only in `before` as `- line` and only in `after`
/// as `+ line`. Empty when they are equal.
pub fn state_difference(before: &str, after: &str) -> String {
    fn sections(text: &str) -> Vec<(&str, Vec<&str>)> {
        let mut out: Vec<(&str, Vec<&str>)> = Vec::new();
        for line in text.lines() {
            match (line.starts_with("# "), out.last_mut()) {
                (true, _) => out.push((line, Vec::new())),
                (false, Some((_, lines))) => lines.push(line),
                (false, None) => out.push(("#", vec![line])),
            }
        }
        out
    }
    let (b, a) = (sections(before), sections(after));
    let mut titles: Vec<&str> = b.iter().map(|(t, _)| *t).collect();
    titles.extend(a.iter().map(|(t, _)| *t).filter(|t| !b.iter().any(|(bt, _)| bt == t)));
    fn lines_of<'a>(s: &[(&str, Vec<&'a str>)], t: &str) -> Option<Vec<&'a str>> {
        s.iter().find(|(st, _)| *st == t).map(|(_, l)| l.clone())
    }
    let mut out = String::new();
    for t in titles {
        let (old, new) = (lines_of(&b, t), lines_of(&a, t));
        if old == new {
            continue;
        }
        out.push_str(t);
        match (&old, &new) {
            (Some(_), None) => out.push_str(" (section gone)"),
            (None, Some(_)) => out.push_str(" (new section)"),
            _ => {}
        }
        out.push('\n');
        let (old, new) = (old.unwrap_or_default(), new.unwrap_or_default());
        for l in old.iter().filter(|l| !new.contains(l)) {
            out.push_str(&format!("- {l}\n"));
        }
        for l in new.iter().filter(|l| !old.contains(l)) {
            out.push_str(&format!("+ {l}\n"));
        }
    }
    out
}

/// What any scenario may touch on a node, as text: every fault's footprint (images, routes, the
/// inotify limit, the kubelet's flags and CPU manager state, containerd's disk, faultlab's duplicate
/// sandboxes). Equal before and after a run means the node was restored.
pub async fn node_state(node: &NodeProfile) -> Result<String, crate::cmd::CmdError> {
    node_state_of(node, crate::faults::FaultSpec::footprint(node)).await
}

/// The node's state as `probes` see it (one fault's own footprint: what a run beside others compares,
/// since on the test bed the nodes share the host's files, where another run's fault may be at work).
pub async fn node_state_of(node: &NodeProfile, probes: Vec<crate::faults::Probe>) -> Result<String, crate::cmd::CmdError> {
    let access = node.access().expect("validated");
    let script: Vec<String> = probes
        .into_iter()
        .map(|p| format!("echo {}; {}", shell_words::quote(&format!("# {}", p.title)), p.script))
        .collect();
    let cmd = crate::cmd::Cmd::shell(script.join("; "));
    let out = crate::cmd::run_host(&access.wrap(&cmd), None, crate::node::NodeAccess::host_timeout(&cmd), false).await?;
    Ok(out.stdout)
}
