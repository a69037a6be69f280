//! `faultlab run`: a batch of scenarios ([`faultlab::batch`]), shown as it goes (a spinner a scenario
//! on a terminal, plain lines otherwise, a line per scenario as it ends), its reports written, and
//! one exit status for the whole.

use std::collections::BTreeMap;
use std::io::IsTerminal;
use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use faultlab::batch::{self, Batch};
use faultlab::record::Recorder;
use faultlab::report::{ScenarioReport, SuiteReport};
use faultlab::signals::interrupted;
use faultlab::suite::RunOptions;

use crate::cli::docs::write_html;
use crate::cli::out::{exit_verdict, status};
use crate::cli::select::{choose, targets};
use crate::{Output, RunArgs};

/// `faultlab run`: select, run, report; exits with the run's verdict.
pub async fn run(dir: &Path, expectations: Option<&Path>, args: RunArgs) -> Result<()> {
    let mut broken = 0;
    let scenarios = targets(dir, &args.target, &mut broken)?;
    let choice = choose(&args.provider, args.keep)?;
    let options = batch::Options {
        run: RunOptions {
            allow_existing: args.allow_existing.clone(),
            hold: args.hold,
            allow_host_wide: args.allow_host_wide,
            expectations: expectations.map(Path::to_path_buf),
            strict_snapshots: args.strict_snapshots,
            ..Default::default()
        },
        jobs: args.jobs.map(usize::from),
        fresh_cluster: args.fresh_cluster,
        budget: args.budget,
    };
    let batch = Batch::new(scenarios, &choice, &options);
    let started = Instant::now();
    let mut shown = Shown { output: args.output, bars: (batch.jobs() > 1).then(indicatif::MultiProgress::new), tickers: BTreeMap::new() };
    let outcome = batch.run(&options, &mut shown).await?;
    for name in outcome.shared_clusters.iter().filter(|_| args.keep) {
        eprintln!("note: --keep: kind cluster {name} is kept; delete it with `kind delete cluster --name {name}` or `faultlab cleanup`");
    }
    for e in &outcome.release_errors {
        eprintln!("error: {e}");
    }
    let suite = SuiteReport::new(started.elapsed().as_secs_f64(), outcome.reports);
    write_reports(&suite, &args)?;
    exit_verdict(verdict(&suite, broken, dir))
}

/// The report on standard output (`-o`), the notice of new snapshots, `--junit` and `--html`.
fn write_reports(suite: &SuiteReport, args: &RunArgs) -> Result<()> {
    match args.output {
        Output::Json => out!("{}", suite.json()),
        Output::Yaml => outp!("{}", serde_saphyr::to_string(suite).context("writing YAML")?),
        Output::Text => out!("suite: {:.1}s wall", suite.wall_seconds),
    }
    if let Some(notice) = new_snapshots_notice(suite, args.strict_snapshots) {
        eprintln!("{notice}");
    }
    if let Some(path) = &args.junit {
        faultlab::atomic::write(path, suite.junit().as_bytes()).context("--junit")?;
    }
    if let Some(dir) = &args.html {
        let page = write_html(dir, suite, "faultlab run")?;
        eprintln!("wrote {}", page.display());
    }
    Ok(())
}

/// The run's exit status: the signal's, else failed, else broken files (usage), else refused
/// scenarios (the environment), else 0.
fn verdict(suite: &SuiteReport, broken: usize, dir: &Path) -> u8 {
    if let Some(signal) = interrupted() {
        return signal.exit_status();
    }
    if !suite.passed() {
        return status::FAILED;
    }
    if broken > 0 {
        eprintln!("error: {broken} scenario file(s) of {} are broken (above) and were not run", dir.display());
        return status::USAGE;
    }
    let refused: Vec<&str> = suite.refused().iter().map(|r| r.scenario.as_str()).collect();
    if !refused.is_empty() {
        eprintln!("error: {} scenario(s) refused on this platform and not run (the reasons are above): {}", refused.len(), refused.join(", "));
        return status::ENVIRONMENT;
    }
    0
}

/// After a run: the scenarios that had no reviewed snapshot on their platform (they passed, unless
/// --strict-snapshots failed them), and what to do with what they wrote.
fn new_snapshots_notice(suite: &SuiteReport, strict: bool) -> Option<String> {
    let new = suite.new_snapshots();
    if new.is_empty() {
        return None;
    }
    let names: Vec<String> = new.iter().map(|r| format!("{} on {}", r.scenario, r.platform)).collect();
    let verdict = if strict { "failed by --strict-snapshots" } else { "passed; --strict-snapshots would fail them" };
    Some(format!(
        "notice: {} scenario(s) with no reviewed snapshot yet ({verdict}): {}. Their events wait for review in .snap.new files (each scenario's report says where): read them, then accept them with `faultlab snapshots review` or `faultlab snapshots accept`",
        new.len(),
        names.join(", ")
    ))
}

/// What the run shows as it goes: each running scenario's phase, and a line as each ends.
struct Shown {
    output: Output,
    bars: Option<indicatif::MultiProgress>,
    tickers: BTreeMap<String, tokio::task::JoinHandle<()>>,
}

impl batch::Watch for Shown {
    fn started(&mut self, scenario: &str, rec: &Recorder) {
        self.tickers.insert(scenario.to_string(), progress(rec.clone(), scenario.to_string(), self.bars.clone()));
    }

    fn ended(&mut self, report: &ScenarioReport, ended: usize, total: usize, running: usize) {
        if let Some(ticker) = self.tickers.remove(&report.scenario) {
            ticker.abort();
        }
        if self.output == Output::Text {
            out!("{}", report.line());
        } else {
            for n in &report.notes {
                eprintln!("note: {}", faultlab::terminal::lines(n));
            }
        }
        if let Some(signal) = interrupted() {
            eprintln!("{signal}: stopped after {ended} of {total} scenario(s) ({running} still tearing down)");
        }
    }
}

/// Phase progress: a spinner on a terminal, plain lines otherwise.
pub fn progress(rec: Recorder, scenario: String, bars: Option<indicatif::MultiProgress>) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let terminal = std::io::stderr().is_terminal();
        let bar = terminal.then(|| {
            let b = match &bars {
                Some(m) => m.add(indicatif::ProgressBar::new_spinner()),
                None => indicatif::ProgressBar::new_spinner(),
            };
            b.enable_steady_tick(Duration::from_millis(120));
            b
        });
        let mut last = None;
        let started = Instant::now();
        loop {
            let phase = rec.phase();
            if last != Some(phase) {
                match &bar {
                    Some(b) => b.set_message(format!("{scenario}: {}", phase.as_str())),
                    None => eprintln!("[{:>6.1}s] {scenario}: {}", started.elapsed().as_secs_f64(), phase.as_str()),
                }
                last = Some(phase);
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    })
}
