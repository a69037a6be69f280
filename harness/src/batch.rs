//! A batch: the scenarios of one `faultlab run`, as data, and their run. The command line selects
//! them (names, `--all`, `--skip`, `--shard`, `--rotate`); the batch gives each an [`Entry`] (on kind,
//! grouped so that scenarios with the same cluster needs share one cluster; each with its claim on
//! the platform), the scheduler spreads the entries over its slots as their claims allow, the budget
//! stops new starts, and [`Batch::run`] returns one report an entry, in the entries' order, each naming
//! the scenarios it ran beside. What the run shows as it goes (progress, a line per scenario) is the
//! caller's, through [`Watch`].

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use futures::StreamExt;
use thiserror::Error;

use crate::needs::Needs;
use crate::record::Recorder;
use crate::report::{ScenarioReport, Status};
use crate::scenario::Loaded;
use crate::schedule::{Claim, Scheduler};
use crate::signals::interrupted;
use crate::suite::{self, ProviderChoice, RunOptions, SharedClusters};

#[derive(Debug, Error)]
pub enum BatchError {
    #[error("internal: {0} scenario(s) could not be scheduled (no slot ever fits their claims)")]
    Unschedulable(usize),
}

/// One scenario of the batch, with what it holds while it runs.
pub struct Entry {
    pub scenario: Loaded,
    pub claim: Claim,
    /// On kind, the needs of the cluster its group shares; none: a cluster made for its own.
    pub cluster_needs: Option<Needs>,
}

/// How the batch runs, beyond its scenarios.
#[derive(Clone, Debug, Default)]
pub struct Options {
    /// Each run's options; the node and the cluster's needs are each entry's own.
    pub run: RunOptions,
    /// Scenarios at a time (`--jobs`); none: what the platform allows ([`suite::default_jobs`]).
    pub jobs: Option<usize>,
    /// On kind, a cluster of its own for every scenario (`--fresh-cluster`).
    pub fresh_cluster: bool,
    /// Start no scenario once this much time has passed (`--budget`). Those left out are the last in
    /// the order given (`--rotate` chooses it): with a budget the batch keeps that order instead of the
    /// scheduler's, whose longest deadlines first would leave out the same short ones every time.
    pub budget: Option<Duration>,
}

/// What the caller shows while the batch runs.
pub trait Watch {
    /// `scenario` starts; its phases are told through `rec`.
    fn started(&mut self, scenario: &str, rec: &Recorder);
    /// A scenario ended (or was not started: the budget). `ended` of `total` have, and `running` still run.
    fn ended(&mut self, report: &ScenarioReport, ended: usize, total: usize, running: usize);
}

/// What a batch's run gives back.
pub struct Outcome {
    /// One an entry that ended or was not started, in the entries' order.
    pub reports: Vec<ScenarioReport>,
    /// The kind clusters the batch shared and left at its end: kept with `--keep`, else deleted.
    pub shared_clusters: Vec<String>,
    /// Shared clusters that could not be deleted (each also fails the last report).
    pub release_errors: Vec<String>,
}

/// `--jobs` left out on shared kind clusters: what the machine allows (`default`), but a second cluster
/// of one group only for at least three scenarios more. A cluster costs about what the phases of one or
/// two scenarios do (2026-11-29, 2 cores: 65-88 s to create two at once, 61 s of phases on average),
/// and two at once each take longer: two scenarios of one group took 117 s on two clusters, where one
/// cluster would have taken about 80 s; all 24 scenarios took 1067 s on two at once, against 1773 s.
pub fn shared_jobs(default: usize, groups: usize, entries: usize) -> usize {
    default.min(groups.max(entries / 3)).max(1)
}

pub struct Batch<'a> {
    choice: &'a ProviderChoice,
    entries: Vec<Entry>,
    /// On kind, the slots keep a cluster between their scenarios ([`SharedClusters`]).
    sharing: bool,
    jobs: usize,
}

impl<'a> Batch<'a> {
    /// The batch of `scenarios` on `choice`: on kind (not a cluster of the user's, not
    /// `--fresh-cluster`, more than one scenario) in groups that share a cluster, each entry with its claim.
    pub fn new(scenarios: Vec<Loaded>, choice: &'a ProviderChoice, options: &Options) -> Batch<'a> {
        // A kind cluster of the user's is one place, used by one scenario at a time, never shared out.
        let users_kind = matches!(choice, ProviderChoice::Kind { cluster: Some(_), .. });
        let sharing = matches!(choice, ProviderChoice::Kind { .. }) && !users_kind && !options.fresh_cluster && scenarios.len() > 1;
        let grouped: Vec<(Loaded, Option<Needs>)> = match sharing {
            true => suite::kind_cluster_groups(scenarios).into_iter().map(|(s, n)| (s, Some(n))).collect(),
            false => scenarios.into_iter().map(|s| (s, None)).collect(),
        };
        let entries: Vec<Entry> = grouped
            .into_iter()
            .map(|(scenario, cluster_needs)| Entry { claim: suite::claim(&scenario, choice, cluster_needs.as_ref()), scenario, cluster_needs })
            .collect();
        let groups = entries.iter().map(|e| e.claim.cluster_key.as_str()).collect::<std::collections::BTreeSet<_>>().len();
        let jobs = match (users_kind, options.jobs) {
            (true, _) => 1,
            (false, Some(jobs)) => jobs,
            (false, None) if sharing => shared_jobs(suite::default_jobs(&suite::places(choice)), groups, entries.len()),
            (false, None) => suite::default_jobs(&suite::places(choice)),
        }
        .min(entries.len().max(1));
        Batch { choice, entries, sharing, jobs }
    }

    pub fn entries(&self) -> &[Entry] {
        &self.entries
    }

    /// Scenarios at a time.
    pub fn jobs(&self) -> usize {
        self.jobs
    }

    /// Run the batch in the scheduler's order (cluster-wide ones first, host-wide ones last; with a
    /// budget, the order given), side by side as the slots and their claims allow, until every entry
    /// ended, the budget stops new starts, or a signal does.
    pub async fn run(&self, options: &Options, watch: &mut dyn Watch) -> Result<Outcome, BatchError> {
        let mut state = State::new(self, options.budget.is_none());
        let started = Instant::now();
        let mut running = futures::stream::FuturesUnordered::new();
        loop {
            while interrupted().is_none() {
                let Some((i, place)) = state.next_start() else { break };
                let entry = &self.entries[i];
                if let Some(why) = options.budget.and_then(|b| suite::over_budget(started.elapsed(), b)) {
                    state.not_started(i, ScenarioReport::ignored(entry.scenario.name(), &why), watch, running.len());
                    continue;
                }
                let run_options = state.start(i, place, options);
                let mut pool = if self.sharing { state.pools[place].take() } else { None };
                let rec = Recorder::default();
                watch.started(entry.scenario.name(), &rec);
                running.push(async move {
                    let report = suite::run_with(&entry.scenario, self.choice, &run_options, rec, pool.as_mut()).await;
                    (i, place, pool, report)
                });
            }
            let Some((i, place, pool, report)) = running.next().await else {
                if !state.pending.is_empty() && interrupted().is_none() {
                    return Err(BatchError::Unschedulable(state.pending.len()));
                }
                break;
            };
            state.finished(i, place, pool, report, watch, running.len());
        }
        drop(running);
        Ok(state.outcome().await)
    }
}

/// A batch's run as it goes: the scheduler, what waits, the slots' shared clusters, what ended.
struct State<'b> {
    batch: &'b Batch<'b>,
    sched: Scheduler,
    pending: Vec<usize>,
    pools: Vec<Option<SharedClusters>>,
    done: Vec<Option<ScenarioReport>>,
    beside: Vec<BTreeSet<String>>,
}

impl<'b> State<'b> {
    /// `reorder`: in the scheduler's order ([`Scheduler::order`]); else in the batch's own.
    fn new(batch: &'b Batch<'b>, reorder: bool) -> Self {
        let sched = Scheduler::new(suite::places(batch.choice), batch.jobs).keeping_clusters(batch.sharing);
        let claims: Vec<Claim> = batch.entries.iter().map(|e| e.claim.clone()).collect();
        let n = batch.entries.len();
        State {
            pending: if reorder { sched.order(&claims) } else { (0..n).collect() },
            sched,
            pools: (0..batch.jobs).map(|_| Some(SharedClusters::default())).collect(),
            done: (0..n).map(|_| None).collect(),
            beside: vec![BTreeSet::new(); n],
            batch,
        }
    }

    /// The next entry that can start now, and its slot, taken from those waiting.
    fn next_start(&mut self) -> Option<(usize, usize)> {
        let waiting: Vec<&Claim> = self.pending.iter().map(|&i| &self.batch.entries[i].claim).collect();
        let start = self.sched.next(&waiting)?;
        Some((self.pending.remove(start.pending), start.place))
    }

    /// Entry `i` starts in slot `place`: beside those running; its run's options.
    fn start(&mut self, i: usize, place: usize, options: &Options) -> RunOptions {
        let name = self.batch.entries[i].scenario.name().to_string();
        for r in self.sched.running() {
            self.beside[r].insert(name.clone());
            let other = self.batch.entries[r].scenario.name().to_string();
            self.beside[i].insert(other);
        }
        self.sched.start(i, place, self.batch.entries[i].claim.clone());
        RunOptions {
            node: self.sched.node(place).map(String::from),
            spare_node: self.sched.spare_node(i).map(String::from),
            cluster_needs: self.batch.entries[i].cluster_needs.clone(),
            ..options.run.clone()
        }
    }

    fn not_started(&mut self, i: usize, report: ScenarioReport, watch: &mut dyn Watch, running: usize) {
        self.done[i] = Some(report);
        self.tell(i, watch, running);
    }

    fn finished(&mut self, i: usize, place: usize, pool: Option<SharedClusters>, report: ScenarioReport, watch: &mut dyn Watch, running: usize) {
        self.sched.finish(i);
        if let Some(p) = pool {
            self.pools[place] = Some(p);
        }
        self.done[i] = Some(report);
        self.tell(i, watch, running);
    }

    fn tell(&self, i: usize, watch: &mut dyn Watch, running: usize) {
        let ended = self.done.iter().filter(|r| r.is_some()).count();
        if let Some(report) = &self.done[i] {
            watch.ended(report, ended, self.done.len(), running);
        }
    }

    /// The reports in the entries' order, each with the scenarios it ran beside; the shared clusters
    /// released (a failure to delete one fails the last report).
    async fn outcome(self) -> Outcome {
        let mut reports: Vec<ScenarioReport> = Vec::new();
        for (r, beside) in self.done.into_iter().zip(self.beside) {
            let Some(mut r) = r else { continue };
            r.ran_beside = beside.into_iter().collect();
            reports.push(r);
        }
        // Those the budget did not start name the platform the others ran on.
        if let Some(ran) = reports.iter().find(|r| !r.provider.is_empty()).map(|r| (r.provider.clone(), r.platform.clone())) {
            for r in reports.iter_mut().filter(|r| r.provider.is_empty()) {
                (r.provider, r.platform) = ran.clone();
            }
        }
        let (mut shared_clusters, mut release_errors) = (Vec::new(), Vec::new());
        // Deleting the shared clusters holds the host shared ([`crate::machine_lock::tearing_down`]).
        let pools: Vec<_> = self.pools.into_iter().flatten().collect();
        let (_held, note) = match pools.iter().any(SharedClusters::keeps_one) {
            true => crate::machine_lock::hold_for_teardown().await,
            false => (None, None),
        };
        if let (Some(note), Some(last)) = (note, reports.last_mut()) {
            last.notes.push(format!("deleting the shared kind clusters: {note}"));
        }
        for mut pool in pools {
            match pool.release(&Recorder::default()).await {
                Ok(Some(name)) => shared_clusters.push(name),
                Ok(None) => {}
                Err(e) => {
                    let error = format!("deleting a shared kind cluster: {e}");
                    if let Some(last) = reports.last_mut() {
                        last.teardown_errors.push(error.clone());
                        last.status = Status::Failed;
                    }
                    release_errors.push(error);
                }
            }
        }
        Outcome { reports, shared_clusters, release_errors }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn with_a_budget_the_batch_keeps_the_order_given() {
        let names = ["configmap-missing", "image-pull-slow", "inotify-limit", "controller-manager-down"];
        let scenarios: Vec<Loaded> = names.iter().map(|n| crate::scenario::find(&crate::scenario::default_dir(), n).unwrap()).collect();
        // A description that cannot be read: one place, two jobs.
        let choice = ProviderChoice::Existing { description: "/nonexistent/testbed.yaml".into(), target: Default::default() };
        let batch = Batch::new(scenarios, &choice, &Options { jobs: Some(2), ..Default::default() });
        let order = |s: State| s.pending.iter().map(|&i| batch.entries[i].scenario.name().to_string()).collect::<Vec<_>>();
        assert_eq!(order(State::new(&batch, false)), names, "with a budget: as given (--rotate's order)");
        let reordered = order(State::new(&batch, true));
        assert_eq!(reordered.first().map(String::as_str), Some("controller-manager-down"), "without one: cluster-wide first, {reordered:?}");
        assert_eq!(reordered.last().map(String::as_str), Some("inotify-limit"), "host-wide last, {reordered:?}");
    }

    #[test]
    fn a_second_shared_cluster_only_for_enough_scenarios_or_another_group() {
        assert_eq!(shared_jobs(2, 1, 2), 1, "two scenarios of one group share one cluster");
        assert_eq!(shared_jobs(2, 2, 2), 2, "two groups need two clusters anyway");
        assert_eq!(shared_jobs(2, 1, 6), 2);
        assert_eq!(shared_jobs(2, 4, 24), 2, "no more than the machine allows");
        assert_eq!(shared_jobs(1, 4, 24), 1);
        assert_eq!(shared_jobs(4, 1, 9), 3);
        assert_eq!(shared_jobs(4, 1, 0), 1);
    }
}
