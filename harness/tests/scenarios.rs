//! Every scenario, end to end, against a real cluster.
//!
//! `cargo test --test scenarios -- --scenario pause-missing`, `SCENARIO=pause-missing cargo test --test
//! scenarios`, `cargo scenario pause-missing`, or a plain name filter. The cluster is the test bed (its
//! description file) or kind with Docker; with neither, every scenario is reported ignored, and the
//! reason is printed. Scenarios run side by side where their faults' reach allows (as `faultlab run
//! --jobs`: on a test bed of several nodes each gets a node; `FAULTLAB_JOBS=N` caps how many at once,
//! 1 runs them one after the other; `--test-threads` is set from it). On a cluster faultlab did not
//! create, the node's state is compared before and after each run. A scenario with no reviewed snapshot
//! on the platform passes with a notice (its `.snap.new` waits for review); `FAULTLAB_STRICT_SNAPSHOTS=1`
//! fails it instead, as `faultlab run --strict-snapshots` does. `FAULTLAB_REPORT_DIR=DIR` keeps each
//! scenario's report, `DIR/<name>.json`, and the set's, `DIR/suite.json` (for `ci/phase-table`).

use std::process::ExitCode;

use faultlab::provider::kind::Arch;
use faultlab::record::Recorder;
use faultlab::report::Status;
use faultlab::scenario;
use faultlab::suite::{self, ProviderChoice};
use libtest_mimic::{Arguments, Failed, Trial};

/// Take `--scenario NAME` / `--scenario=NAME` out of the arguments libtest-mimic sees.
fn split_args() -> (Option<String>, Vec<String>) {
    let mut wanted = std::env::var("SCENARIO").ok().filter(|s| !s.is_empty());
    let mut rest = Vec::new();
    let mut args = std::env::args();
    while let Some(a) = args.next() {
        if a == "--scenario" {
            wanted = args.next();
        } else if let Some(v) = a.strip_prefix("--scenario=") {
            wanted = Some(v.to_string());
        } else {
            rest.push(a);
        }
    }
    (wanted, rest)
}

fn main() -> ExitCode {
    let (wanted, rest) = split_args();
    let mut args = Arguments::from_iter(rest);
    let dir = scenario::default_dir();
    let (all, gaps) = match scenario::load_set(&dir) {
        Ok(mut set) if !set.broken.is_empty() => {
            eprintln!("error: {}", set.broken.remove(0).1);
            return ExitCode::FAILURE;
        }
        Ok(set) => (set.good, set.gaps),
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::FAILURE;
        }
    };
    // The documented causes not reproduced are trials too, reported ignored with their reason.
    for (name, (_, gap)) in &gaps {
        if wanted.as_ref().is_none_or(|w| w == name) {
            eprintln!("scenario {name} ignored: not reproducible: {}", gap.reason.split_whitespace().collect::<Vec<_>>().join(" "));
        }
    }
    if let Some(name) = &wanted {
        if !all.contains_key(name) && !gaps.contains_key(name) {
            eprintln!("error: no scenario named {name:?}; known: {}", all.keys().cloned().collect::<Vec<_>>().join(", "));
            return ExitCode::FAILURE;
        }
        args.filter = Some(name.clone());
        args.exact = true;
    }
    let choice = match std::env::var("FAULTLAB_PROVIDER").as_deref() {
        Ok("kind") => Arch::host().map(|arch| ProviderChoice::Kind { arch, keep: false, node_image: std::env::var("FAULTLAB_KIND_NODE_IMAGE").ok(), cluster: None }).ok_or_else(|| "no kind node image for this architecture".to_string()),
        _ => suite::detect().map_err(|e| e.to_string()),
    };
    if let Err(reason) = &choice {
        eprintln!("scenarios ignored: {reason}");
    }
    // FAULTLAB_SKIP_SCENARIOS: names (space-separated) left out of this run, reported ignored: CI's
    // rotation of its slowest scenario between platforms (.ci/run). Taken out before the scheduler
    // orders the trials, so that none waits for one that never starts.
    let mut all = all;
    let skipped: Vec<String> = std::env::var("FAULTLAB_SKIP_SCENARIOS").unwrap_or_default().split_whitespace().map(str::to_owned).collect();
    for name in &skipped {
        if all.remove(name).is_none() {
            eprintln!("error: FAULTLAB_SKIP_SCENARIOS names {name:?}, which no reproducible scenario is; known: {}", all.keys().cloned().collect::<Vec<_>>().join(", "));
            return ExitCode::FAILURE;
        }
        eprintln!("scenario {name} ignored: left out of this run by FAULTLAB_SKIP_SCENARIOS");
    }
    let report_dir = std::env::var_os("FAULTLAB_REPORT_DIR").map(std::path::PathBuf::from);
    // Where and how many at once: the scheduler of `faultlab run --jobs`, shared by the trials' threads.
    let places = choice.as_ref().map(suite::places).unwrap_or(faultlab::schedule::Places::Clusters(1));
    let jobs = match std::env::var("FAULTLAB_JOBS").ok().filter(|j| !j.is_empty()) {
        Some(j) => match j.parse::<usize>() {
            Ok(n) if n > 0 => n,
            _ => {
                eprintln!("error: FAULTLAB_JOBS={j:?} is not a number of scenarios at once (1 or more)");
                return ExitCode::FAILURE;
            }
        },
        None => suite::default_jobs(&places),
    };
    args.test_threads = Some(jobs);
    // The trials in the order `faultlab run --jobs` offers them (those that run alone, then the longest
    // deadlines first): the test threads take them in this order.
    let scheduler = faultlab::schedule::Scheduler::new(places, jobs);
    let mut all: Vec<scenario::Loaded> = all.into_values().collect();
    if let Ok(choice) = &choice {
        let claims: Vec<_> = all.iter().map(|l| suite::claim(l, choice, None)).collect();
        let order = scheduler.order(&claims);
        let mut slots: Vec<Option<scenario::Loaded>> = all.into_iter().map(Some).collect();
        all = order.into_iter().filter_map(|i| slots[i].take()).collect();
    }
    // The slots are made once the trials are, from the ids of those that will run (not filtered out,
    // not ignored): the slots take them in their order, whichever thread asks first.
    let slots: std::sync::Arc<std::sync::OnceLock<faultlab::schedule::Slots>> = Default::default();
    // With FAULTLAB_REPORT_DIR, each scenario's report (`<name>.json`) and, once all have run, the
    // set's (`suite.json`: every report with the set's wall time, as `faultlab run --output json`
    // writes it), for ci/phase-table.
    let reports: Reports = Reports::default();
    let mut ids = Vec::new();
    let trials: Vec<Trial> = all
        .into_iter()
        .enumerate()
        .map(|(id, loaded)| {
            let name = loaded.name().to_string();
            let choice = choice.clone();
            let report_dir = report_dir.clone();
            let ignored = choice.is_err();
            let slots = slots.clone();
            let reports = reports.clone();
            let trial = Trial::test(name, move || {
                let slots = slots.get().ok_or("the trials' slots were not made")?;
                run_one(loaded, choice, report_dir, &reports, slots, id, jobs)
            });
            let trial = if ignored { trial.with_kind("no cluster").with_ignored_flag(true) } else { trial };
            if !args.is_filtered_out(&trial) && !args.is_ignored(&trial) {
                ids.push(id);
            }
            trial
        })
        .chain(gaps.into_keys().map(|name| Trial::test(name, || Ok(())).with_kind("not reproducible").with_ignored_flag(true)))
        .chain(skipped.into_iter().map(|name| Trial::test(name, || Ok(())).with_kind("FAULTLAB_SKIP_SCENARIOS").with_ignored_flag(true)))
        .collect();
    let _ = slots.set(faultlab::schedule::Slots::new(scheduler, ids));
    let started = std::time::Instant::now();
    let conclusion = libtest_mimic::run(&args, trials);
    let reports = std::mem::take(&mut *reports.lock().unwrap_or_else(|p| p.into_inner()));
    if let (Some(dir), false) = (&report_dir, reports.is_empty()) {
        let suite = faultlab::report::SuiteReport::new(started.elapsed().as_secs_f64(), reports);
        if let Err(e) = std::fs::write(dir.join("suite.json"), suite.json()) {
            eprintln!("error: writing {}: {e}", dir.join("suite.json").display());
            return ExitCode::FAILURE;
        }
    }
    conclusion.exit_code()
}

/// The reports of the scenarios run so far, in the order they ended.
type Reports = std::sync::Arc<std::sync::Mutex<Vec<faultlab::report::ScenarioReport>>>;

fn run_one(loaded: scenario::Loaded, choice: Result<ProviderChoice, String>, report_dir: Option<std::path::PathBuf>, reports: &Reports, slots: &faultlab::schedule::Slots, id: usize, jobs: usize) -> Result<(), Failed> {
    let choice = choice.map_err(|reason| Failed::from(format!("no cluster to run on: {reason}")))?;
    // Waits until its fault's reach lets it start; the node it gets is its own while the lease lasts.
    let lease = slots.acquire(id, suite::claim(&loaded, &choice, None));
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().map_err(|e| e.to_string())?;
    rt.block_on(async {
        let node = match &choice {
            ProviderChoice::Existing { description, .. } => {
                let bed = faultlab::testbed::TestBed::read(description).map_err(|e| e.to_string())?;
                match &lease.node {
                    Some(name) => bed.nodes.into_iter().find(|n| &n.name == name),
                    None => bed.nodes.into_iter().next(),
                }
            }
            ProviderChoice::Kind { .. } => None,
        };
        // One at a time, every fault's footprint is compared; side by side only this fault's own, since
        // the test bed's nodes share the host's files (another run's node package or CA may come and go).
        let state = |n: &faultlab::node::NodeProfile| {
            let probes = if jobs > 1 { loaded.scenario.fault.own_footprint(n) } else { faultlab::faults::FaultSpec::footprint(n) };
            let n = n.clone();
            async move { suite::node_state_of(&n, probes).await }
        };
        let before = match &node {
            Some(n) => Some(state(n).await.map_err(|e| format!("reading the node's state before the run: {e}"))?),
            None => None,
        };
        // On kind, faults that reach into the host run only when FAULTLAB_ALLOW_HOST_WIDE=1 says so.
        // FAULTLAB_STRICT_SNAPSHOTS=1 fails a scenario with no reviewed snapshot on the platform, as
        // `faultlab run --strict-snapshots` does; without it that scenario passes with a notice.
        let flag = |name: &str| std::env::var(name).is_ok_and(|v| v == "1" || v == "true");
        let options = suite::RunOptions {
            allow_host_wide: flag("FAULTLAB_ALLOW_HOST_WIDE"),
            strict_snapshots: flag("FAULTLAB_STRICT_SNAPSHOTS"),
            node: lease.node.clone(),
            spare_node: lease.spare.clone(),
            ..Default::default()
        };
        let report = suite::run(&loaded, &choice, &options, Recorder::default()).await;
        eprintln!("{}", report.line());
        if let Some(dir) = &report_dir {
            let _ = std::fs::create_dir_all(dir);
            let suite = faultlab::report::SuiteReport::new(0.0, vec![report.clone()]);
            let _ = std::fs::write(dir.join(format!("{}.json", report.scenario)), suite.json());
            reports.lock().unwrap_or_else(|p| p.into_inner()).push(report.clone());
        }
        if report.status != Status::Passed {
            return Err(Failed::from(report.line()));
        }
        if let (Some(n), Some(before)) = (&node, before) {
            let after = state(n).await.map_err(|e| format!("reading the node's state after the run: {e}"))?;
            if after != before {
                return Err(Failed::from(format!("the node was not restored.\n--- before\n{before}\n--- after\n{after}")));
            }
        }
        Ok(())
    })
}
