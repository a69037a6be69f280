//! The `faultlab` command: list, show, plan, run and cleanup.

use std::io::IsTerminal;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use clap::{Parser, Subcommand, ValueEnum};
use faultlab::provider::kind::Arch;
use faultlab::record::Recorder;
use faultlab::report::{ScenarioReport, SuiteReport};
use faultlab::scenario::{self, Loaded};
use faultlab::suite::{self, ProviderChoice};
use faultlab::training;

/// Exit statuses, one meaning each (the README's "Exit statuses"; tests/exit_status.rs).
mod status {
    /// A scenario failed; a training check found the cluster not fixed; snapshots wait for review.
    pub const FAILED: u8 = 1;
    /// A bad flag or argument; a scenario that does not exist or does not load; an empty scenario set.
    pub const USAGE: u8 = 2;
    /// The environment: no cluster, a missing tool, a file that cannot be read or written, a cluster
    /// that answers with an error; a scenario the platform refused (and none failed).
    pub const ENVIRONMENT: u8 = 3;
    /// Interrupted by SIGINT (after undoing what the run did); SIGTERM gives 143.
    pub const SIGINT: u8 = 130;
    pub const SIGTERM: u8 = 143;
    /// Standard output was closed by its reader (`faultlab plan X | head -1`): what a process killed by
    /// SIGPIPE reports, as kubectl's does, but only once the command has finished (a run still undoes
    /// its faults).
    pub const CLOSED_PIPE: u8 = 141;
}

/// Set when a write to standard output found it closed: the rest of the output is dropped quietly.
static STDOUT_CLOSED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Write to standard output; a closed pipe sets [`STDOUT_CLOSED`] instead of panicking, and other
/// write errors are said once on standard error.
fn write_out(args: std::fmt::Arguments<'_>) {
    use std::io::Write;
    if STDOUT_CLOSED.load(std::sync::atomic::Ordering::Relaxed) {
        return;
    }
    if let Err(e) = std::io::stdout().lock().write_fmt(args) {
        STDOUT_CLOSED.store(true, std::sync::atomic::Ordering::Relaxed);
        if e.kind() != std::io::ErrorKind::BrokenPipe {
            eprintln!("error: writing to standard output: {e}; the rest of the output is lost");
        }
    }
}

macro_rules! out {
    () => { write_out(format_args!("\n")) };
    ($($t:tt)*) => { write_out(format_args!("{}\n", format_args!($($t)*))) };
}

macro_rules! outp {
    ($($t:tt)*) => { write_out(format_args!($($t)*)) };
}

/// An error in what the user asked for (exit status 2), as opposed to one of the environment (3).
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
struct Usage(String);

macro_rules! usage {
    ($($t:tt)*) => { return Err(Usage(format!($($t)*)).into()) };
}

/// The exit status of an error: a usage error or a scenario that does not load is the user's (2),
/// anything else the environment's (3).
fn error_status(e: &anyhow::Error) -> u8 {
    let bad_session_id = |c: &(dyn std::error::Error + 'static)| matches!(c.downcast_ref::<training::TrainingError>(), Some(training::TrainingError::BadSessionId(_)));
    let users = e.chain().any(|c| c.is::<Usage>() || c.is::<scenario::ScenarioError>() || c.is::<faultlab::datafile::DataFileError>() || bad_session_id(c));
    if users {
        status::USAGE
    } else {
        status::ENVIRONMENT
    }
}

/// Was this error a write to a closed pipe (a reader that went away)?
fn closed_pipe(e: &anyhow::Error) -> bool {
    e.chain().any(|c| c.downcast_ref::<std::io::Error>().is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe))
}

/// Leave with `code`, standard output flushed (a closed one turns success into [`status::CLOSED_PIPE`]).
fn exit(code: u8) -> ! {
    let closed = STDOUT_CLOSED.load(std::sync::atomic::Ordering::Relaxed);
    exit_verdict(if code == 0 && closed { status::CLOSED_PIPE } else { code })
}

/// Leave with `code` as it is: a run's verdict, which a reader that went away does not change.
fn exit_verdict(code: u8) -> ! {
    use std::io::Write;
    let _ = std::io::stdout().flush();
    std::process::exit(i32::from(code))
}

#[derive(Parser)]
#[command(
    name = "faultlab",
    version,
    about = "Reproduce documented Kubernetes faults, assert their events, prove the documented fix",
    after_help = "Exit statuses: 0 done (every scenario passed); 1 a scenario failed, a training check found it not fixed, or snapshots wait for review; 2 a usage error, or a scenario that does not exist or does not load; 3 the environment (no cluster, a missing tool, a file or cluster that answers with an error); 130 / 143 interrupted by SIGINT / SIGTERM, after undoing what was done; 141 standard output closed by its reader. Errors are one line; a backtrace means a bug (please report it)."
)]
struct Cli {
    /// Directory of scenario files.
    #[arg(long, global = true, env = "FAULTLAB_SCENARIOS")]
    scenarios: Option<PathBuf>,
    /// Directory of the set's snapshots, `<DIR>/<platform>/<scenario>.snap` (default: `expectations/`
    /// beside the set; faultlab's own set keeps `expectations/` at the workspace root).
    #[arg(long, global = true, env = "FAULTLAB_EXPECTATIONS")]
    expectations: Option<PathBuf>,
    #[command(subcommand)]
    command: Command,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
enum ProviderArg {
    /// The test bed's description if present, else kind.
    Auto,
    Kind,
    Existing,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
enum Output {
    Text,
    Json,
    Yaml,
}

/// `-o text|json|yaml`, as kubectl spells it.
#[derive(clap::Args, Clone, Copy)]
struct OutputArg {
    #[arg(short, long, value_enum, default_value = "text")]
    output: Output,
}

/// Print `value` as JSON or YAML; false for text (the caller prints it).
fn emit<T: serde::Serialize>(output: Output, value: &T) -> Result<bool> {
    match output {
        Output::Text => Ok(false),
        Output::Json => {
            out!("{}", serde_json::to_string_pretty(value).context("writing JSON")?);
            Ok(true)
        }
        Output::Yaml => {
            outp!("{}", serde_saphyr::to_string(value).context("writing YAML")?);
            Ok(true)
        }
    }
}

#[derive(clap::Args, Clone)]
struct Target {
    /// Scenario names: one, or several run as a suite, in the order given.
    #[arg(value_name = "SCENARIO")]
    names: Vec<String>,
    /// Every scenario.
    #[arg(long, conflicts_with = "names")]
    all: bool,
    /// With --all: leave this scenario out (repeatable). A name no scenario has is an error.
    #[arg(long, value_name = "SCENARIO", requires = "all")]
    skip: Vec<String>,
    /// With --all: only part INDEX of COUNT (from 1), the scenarios split by name order, every COUNT-th
    /// from the INDEX-th: CI's jobs each run one part (after --skip).
    #[arg(long, value_name = "INDEX/COUNT", requires = "all")]
    shard: Option<suite::Shard>,
    /// With --all: start at the K-th scenario of the name order (K taken modulo their number) and wrap
    /// around, so that a run cut short by --budget leaves out different scenarios each time K changes.
    #[arg(long, value_name = "K", requires = "all")]
    rotate: Option<usize>,
}

#[derive(clap::Args, Clone)]
struct ProviderOpts {
    #[arg(long, value_enum, default_value = "auto")]
    provider: ProviderArg,
    /// kind node architecture (default: this host's).
    #[arg(long, value_enum)]
    arch: Option<Arch>,
    /// Node-access description for --provider existing (default: the test bed's).
    #[arg(long)]
    description: Option<PathBuf>,
    /// kind node image for every node, instead of the one pinned in kind-configs/<arch>.yaml (for
    /// example one built locally, as air-gapped hosts need).
    #[arg(long, env = "FAULTLAB_KIND_NODE_IMAGE")]
    node_image: Option<String>,
    /// The kubeconfig file, as kubectl's flag (default: the description's). The nodes are still reached
    /// as the description says (--description).
    #[arg(long, value_name = "FILE")]
    kubeconfig: Option<PathBuf>,
    /// The kubeconfig context, as kubectl's flag (default: the description's). Another context than
    /// the description's is a cluster faultlab must be told is yours to break: --allow-existing CONTEXT.
    #[arg(long, value_name = "NAME")]
    context: Option<String>,
    /// A kind cluster of yours to run on (`kind get clusters` lists it), used as it is: faultlab creates
    /// and deletes nothing of it, and refuses the scenarios whose faults need a cluster made for them.
    /// `--context kind-NAME` says the same.
    #[arg(long, value_name = "NAME")]
    cluster: Option<String>,
}

#[derive(Subcommand)]
enum ImageCommand {
    /// Pack a root file system into a docker-save tarball of one layer (what `ctr images import` and
    /// `docker load` read), the same bytes for the same input.
    Pack {
        /// The root file system to pack.
        #[arg(long)]
        rootfs: PathBuf,
        /// The image's name (`faultlab.invalid/busybox:1.35`).
        #[arg(long = "ref")]
        reference: String,
        /// Its architecture in Go's names (default: this machine's).
        #[arg(long)]
        arch: Option<String>,
        /// An environment variable, `NAME=VALUE` (repeatable).
        #[arg(long)]
        env: Vec<String>,
        /// The entrypoint, one word per flag.
        #[arg(long, allow_hyphen_values = true)]
        entrypoint: Vec<String>,
        /// The command, one word per flag.
        #[arg(long, allow_hyphen_values = true)]
        cmd: Vec<String>,
        #[arg(long)]
        workdir: Option<String>,
        /// What made it, for the image's history.
        #[arg(long)]
        created_by: String,
        /// The tarball to write.
        #[arg(long)]
        out: PathBuf,
    },
}

#[derive(Subcommand)]
enum TestbedCommand {
    /// Write the test bed's description (what `--provider existing` reads) from what `up` made; the
    /// file is replaced only when it changes.
    Describe {
        #[command(flatten)]
        facts: Box<faultlab::testbed::Facts>,
        /// Where to write it (default: standard output).
        #[arg(long)]
        out: Option<PathBuf>,
    },
}

#[derive(Subcommand)]
enum Command {
    /// Images for nodes that pull nothing (the test bed and its kind node image build them; internal,
    /// hidden from the help).
    #[command(hide = true)]
    Image {
        #[command(subcommand)]
        command: ImageCommand,
    },
    /// The test bed's own tools (`ci/testbed/up` calls them; internal, hidden from the help).
    #[command(hide = true)]
    Testbed {
        #[command(subcommand)]
        command: TestbedCommand,
    },
    /// List scenarios: the good ones, then each broken file with its errors.
    List {
        #[command(flatten)]
        output: OutputArg,
    },
    /// Check scenario files or sets (directories) without touching a cluster: every error of every
    /// file, each at its file, line and column. Exit status 2 if any file is broken (for CI).
    Validate {
        /// Scenario files or directories (default: the scenario set, --scenarios).
        paths: Vec<PathBuf>,
    },
    /// Show a scenario: fault, symptom, documented fix, recovery.
    Show {
        scenario: String,
        #[command(flatten)]
        output: OutputArg,
    },
    /// Print every command and API call a run would make, without running anything.
    Plan {
        #[command(flatten)]
        target: Target,
        #[command(flatten)]
        provider: ProviderOpts,
        #[command(flatten)]
        output: OutputArg,
    },
    /// Run scenarios end to end. Exit status 0 when every scenario passed (one with no reviewed
    /// snapshot on the platform passes, unless --strict-snapshots), 1 when any failed, 2 when a
    /// scenario is unknown or its file broken, 3 when there is no cluster to run on, 130 or 143 when
    /// interrupted by SIGINT or SIGTERM (after undoing).
    Run {
        #[command(flatten)]
        target: Target,
        #[command(flatten)]
        provider: ProviderOpts,
        /// Keep the kind cluster afterwards.
        #[arg(long)]
        keep: bool,
        /// Allow injecting faults into this context, which faultlab did not create.
        #[arg(long, value_name = "CONTEXT")]
        allow_existing: Option<String>,
        /// The report on standard output: one line per scenario, or the whole report as JSON or YAML
        /// (its schema: `faultlab schema --report`).
        #[arg(short, long, value_enum, default_value = "text")]
        output: Output,
        /// Write a JUnit XML report here.
        #[arg(long)]
        junit: Option<PathBuf>,
        /// Write an HTML report, DIR/index.html: a summary table and each scenario's timeline, one
        /// self-contained page.
        #[arg(long, value_name = "DIR")]
        html: Option<PathBuf>,
        /// Keep the fault in place this long after the symptom, before the fix (e.g. 5m).
        #[arg(long, value_parser = parse_duration)]
        hold: Option<Duration>,
        /// On kind, also run the faults that reach past the node container into the host (a sysctl of
        /// the host's user namespace, a loop file on the host's disk); `faultlab show` says which.
        #[arg(long, env = "FAULTLAB_ALLOW_HOST_WIDE", value_parser = env_flag)]
        allow_host_wide: bool,
        /// On kind, a new cluster for every scenario. By default scenarios whose kind needs are the same
        /// share one (run next to each other, faults undone between them, the node checked to be as the
        /// cluster was made before the next; a failed run's cluster is deleted).
        #[arg(long)]
        fresh_cluster: bool,
        /// Start no scenario after this long (for example 25m): those left are reported ignored, with
        /// the reason, instead of the whole run being killed by a CI limit. A running scenario is not cut
        /// short, so leave room for the longest one.
        #[arg(long, value_parser = parse_duration)]
        budget: Option<Duration>,
        /// Run up to N scenarios at once (default: what the platform allows; 1: one after the other).
        /// Each runs where its fault's reach allows: a namespace-only one beside anything on a node
        /// no other scenario breaks, a node-wide one on a node of its own (the test bed's nodes,
        /// `ci/testbed/up --nodes N`), a cluster-wide one alone on a shared cluster, a host-wide one
        /// alone everywhere, two with the same host port (a registry) never together. On kind, N
        /// clusters at once. The report names, for each scenario, those that ran beside it.
        #[arg(long, value_name = "N", value_parser = clap::value_parser!(u16).range(1..))]
        jobs: Option<u16>,
        /// Fail a scenario that has no reviewed snapshot on the platform (`new`), naming it and the
        /// platform. Without it such a scenario passes with a notice and its `.snap.new` waits for
        /// review; a snapshot that differs from the reviewed one (`changed`) fails either way.
        #[arg(long, env = "FAULTLAB_STRICT_SNAPSHOTS", value_parser = env_flag)]
        strict_snapshots: bool,
    },
    /// Undo what crashed runs left (journals) and delete stale faultlab kind clusters.
    Cleanup {
        /// Replay journals and delete clusters even if the run that owns them still runs.
        #[arg(long)]
        force: bool,
        /// Delete faultlab kind clusters older than this (for example 2h).
        #[arg(long, default_value = "0s", value_parser = parse_duration)]
        older_than: Duration,
        /// Also undo open training sessions (by default a person may still be working on them: they
        /// are listed and kept) and close them.
        #[arg(long)]
        sessions: bool,
    },
    /// Print the scenario format's JSON Schema; --report: that of `run --output json`'s report.
    Schema {
        #[arg(long)]
        report: bool,
    },
    /// Write the HTML report (DIR/index.html) of one or more JSON reports (`run --output json`), their
    /// scenarios on one page.
    Report {
        /// JSON reports.
        #[arg(required = true)]
        inputs: Vec<PathBuf>,
        #[arg(long, value_name = "DIR")]
        html: PathBuf,
        /// The page's title.
        #[arg(long, default_value = "faultlab report")]
        title: String,
    },
    /// Training: break the cluster, show the symptom, and leave it broken for you to fix.
    Train {
        scenario: String,
        #[command(flatten)]
        provider: ProviderOpts,
        /// Allow training on this context, which faultlab did not create.
        #[arg(long, value_name = "CONTEXT")]
        allow_existing: Option<String>,
    },
    /// Training: the next hint, each closer to the answer.
    Hint {
        #[command(flatten)]
        session: SessionArg,
    },
    /// Training: is it fixed? Says what still fails; once fixed, the time it took and hints used.
    Check {
        #[command(flatten)]
        session: SessionArg,
        /// Wait up to this long for the fix to take hold (watch-based), e.g. 2m.
        #[arg(long, value_parser = parse_duration)]
        wait: Option<Duration>,
        #[command(flatten)]
        output: OutputArg,
    },
    /// Training: show the documented fix and its source; --apply carries it out.
    Solution {
        #[command(flatten)]
        session: SessionArg,
        #[arg(long)]
        apply: bool,
    },
    /// Training: restore everything the session changed, through its journal, and close it.
    Reset {
        #[command(flatten)]
        session: SessionArg,
    },
    /// Training: list open sessions.
    Sessions {
        #[command(flatten)]
        output: OutputArg,
    },
    /// Write a scenario of your own, NAME.yaml, made from faultlab's scenario for FAULT.
    New {
        /// The scenario's name (a Kubernetes name: lowercase letters, digits and '-').
        name: String,
        /// The fault (`faultlab list` shows faultlab's scenarios and their faults).
        #[arg(long)]
        fault: String,
        /// Where to write it (default: the set named by --scenarios, else the current directory).
        #[arg(long)]
        dir: Option<PathBuf>,
    },
    /// Print a shell's completion script: `faultlab completions bash > /etc/bash_completion.d/faultlab`,
    /// zsh into a directory of `$fpath` as `_faultlab`, fish into `~/.config/fish/completions/`.
    Completions {
        #[arg(value_enum)]
        shell: clap_complete::Shell,
    },
    /// Print the manual page (roff): `faultlab man > /usr/local/share/man/man1/faultlab.1`.
    Man,
    /// Review the snapshots a run wrote (`.snap.new`), or accept one, without Rust tools; `--from DIR`:
    /// those another machine's run wrote (a CI artefact).
    Snapshots {
        #[command(subcommand)]
        command: SnapshotsCommand,
    },
}

#[derive(Subcommand)]
enum SnapshotsCommand {
    /// Show each snapshot waiting for review and its difference from the reviewed one, and ask to
    /// accept, reject or skip it. Without a terminal: list them, exit status 1 if there are any.
    Review {
        /// Review the snapshots waiting in DIR instead (`DIR/<platform>/<scenario>.snap.new`: a CI
        /// run's artefact, downloaded and unpacked); DIR is only read, and rejecting one leaves it there.
        #[arg(long, value_name = "DIR")]
        from: Option<PathBuf>,
    },
    /// Accept the snapshot of a scenario waiting for review: its `.snap.new` replaces the `.snap`.
    /// With --from DIR: the ones waiting in DIR for --platform (NAME's, or every one), copied in.
    Accept {
        /// The scenario (with --from it may be left out: every one waiting for the platform).
        #[arg(required_unless_present = "from")]
        name: Option<String>,
        /// The platform, when the scenario has snapshots waiting on several (with --from: always).
        #[arg(long)]
        platform: Option<String>,
        /// Take the snapshots from DIR (`DIR/<platform>/<scenario>.snap.new`: a CI run's artefact,
        /// downloaded and unpacked) into the set's snapshots; every file in DIR is checked first, and
        /// DIR is only read.
        #[arg(long, value_name = "DIR", requires = "platform")]
        from: Option<PathBuf>,
    },
}

#[derive(clap::Args, Clone)]
struct SessionArg {
    /// The training session (default: the only one open).
    #[arg(long, env = "FAULTLAB_SESSION")]
    session: Option<String>,
}

fn parse_duration(s: &str) -> Result<Duration, String> {
    faultlab::duration::parse(s).map_err(|e| e.to_string())
}

fn choose(opts: &ProviderOpts, keep: bool) -> Result<ProviderChoice> {
    let arch = match opts.arch {
        Some(a) => a,
        None => Arch::host().context("this host's architecture has no kind node image; pass --arch")?,
    };
    let target = faultlab::provider::existing::KubeTarget { kubeconfig: opts.kubeconfig.clone(), context: opts.context.clone() };
    if let Some(k) = target.kubeconfig.as_ref().filter(|k| !k.is_file()) {
        usage!("--kubeconfig {}: no such file", k.display());
    }
    // A kind cluster of the user's: --cluster NAME, or --context kind-NAME.
    let named = opts.cluster.clone().or_else(|| opts.context.as_deref().and_then(|c| c.strip_prefix("kind-")).map(String::from));
    let kind = || -> Result<ProviderChoice> {
        if target.kubeconfig.is_some() || (target.context.is_some() && named.is_none()) {
            usage!("on kind, faultlab makes the cluster it runs on, or runs on one of yours named by --cluster NAME (or --context kind-NAME), whose kubeconfig kind gives; --kubeconfig and other contexts are for --provider existing");
        }
        Ok(ProviderChoice::Kind { arch, keep, node_image: opts.node_image.clone(), cluster: named.clone() })
    };
    Ok(match opts.provider {
        ProviderArg::Kind => kind()?,
        ProviderArg::Existing if opts.cluster.is_some() => usage!("--cluster names a kind cluster: --provider kind"),
        ProviderArg::Existing => ProviderChoice::Existing { description: opts.description.clone().unwrap_or_else(faultlab::testbed::path), target },
        ProviderArg::Auto if named.is_some() && opts.description.is_none() => kind()?,
        ProviderArg::Auto => match &opts.description {
            Some(d) => ProviderChoice::Existing { description: d.clone(), target },
            None => match suite::detect() {
                Ok(ProviderChoice::Kind { .. }) => kind()?,
                Ok(ProviderChoice::Existing { description, .. }) => ProviderChoice::Existing { description, target },
                Err(reason) => bail!("{reason}; pass --provider kind or --provider existing --description FILE"),
            },
        },
    })
}

/// The scenarios to plan or run. With --all, the good ones of the set; the broken files are printed
/// (every error) and make the command fail once the good ones are done.
fn targets(dir: &std::path::Path, target: &Target, broken: &mut usize) -> Result<Vec<Loaded>> {
    if target.all {
        let set = scenario::load_set(dir)?;
        for (path, e) in &set.broken {
            eprintln!("error: {} is broken and is left out:\n{}", path.display(), indent(&e.to_string()));
        }
        *broken = set.broken.len();
        if set.good.is_empty() && *broken == 0 {
            usage!("{}: no scenario files (*.yaml, *.yml) in this directory", dir.display());
        }
        if set.good.is_empty() && *broken > 0 {
            usage!("no scenario of {} loads", dir.display());
        }
        for name in &target.skip {
            if !set.good.contains_key(name) && !set.broken.iter().any(|(p, _)| p.file_stem().is_some_and(|s| s == name.as_str())) {
                usage!("--skip {name}: no scenario of {} has that name (see `faultlab list`)", dir.display());
            }
        }
        let kept: Vec<Loaded> = set.good.into_iter().filter(|(name, _)| !target.skip.contains(name)).map(|(_, l)| l).collect();
        let mut chosen = match target.shard {
            Some(shard) => shard.take(kept),
            None => kept,
        };
        if let (Some(k), false) = (target.rotate, chosen.is_empty()) {
            let k = k % chosen.len();
            chosen.rotate_left(k);
        }
        return Ok(chosen);
    }
    if target.names.is_empty() {
        usage!("name a scenario or pass --all (see `faultlab list`)");
    }
    let mut seen = std::collections::BTreeSet::new();
    let mut chosen = Vec::new();
    for name in &target.names {
        if seen.insert(name.as_str()) {
            chosen.push(scenario::find(dir, name)?);
        }
    }
    Ok(chosen)
}

fn indent(text: &str) -> String {
    text.lines().map(|l| format!("  {l}")).collect::<Vec<_>>().join("\n")
}

/// `faultlab validate`: every file of every path, every error. Returns how many files are broken.
fn validate(paths: &[PathBuf]) -> Result<usize> {
    let mut files = Vec::new();
    for path in paths {
        if path.is_dir() {
            let found = scenario::files(path)?;
            if found.is_empty() {
                usage!("{}: no scenario files (*.yaml, *.yml) in this directory", path.display());
            }
            files.extend(found);
        } else {
            files.push(path.clone());
        }
    }
    let mut broken = 0;
    for file in &files {
        match scenario::load(file) {
            Ok(s) => out!("ok      {} ({})", file.display(), s.scenario.fault.name()),
            Err(e) => {
                broken += 1;
                out!("broken  {}\n{}", file.display(), indent(&e.to_string()));
            }
        }
    }
    out!("{} file(s): {} valid, {broken} broken", files.len(), files.len() - broken);
    Ok(broken)
}

/// Phase progress: a spinner on a terminal, plain lines otherwise.
fn progress(rec: Recorder, scenario: String, bars: Option<indicatif::MultiProgress>) -> tokio::task::JoinHandle<()> {
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

/// How far a fault reaches, in words (`faultlab show`).
fn reach_text(reach: faultlab::faults::Reach) -> &'static str {
    match reach {
        faultlab::faults::Reach::Namespace => "the run's namespace only",
        faultlab::faults::Reach::Node => "the node",
        faultlab::faults::Reach::Cluster => "the whole cluster",
        faultlab::faults::Reach::Host(_) => "the node, and on kind the host",
    }
}

/// A yes/no flag that can also come from the environment: `1`, `true`, `yes`, `on` and `0`, `false`,
/// `no`, `off` (any case), as CI systems and shells write them. clap's own boolean parser takes only
/// `true` and `false`, so `FAULTLAB_STRICT_SNAPSHOTS=1` was refused.
fn env_flag(value: &str) -> Result<bool, String> {
    match value.trim().to_ascii_lowercase().as_str() {
        "1" | "true" | "yes" | "y" | "on" => Ok(true),
        "0" | "false" | "no" | "n" | "off" | "" => Ok(false),
        _ => Err("expected 1/0, true/false, yes/no or on/off (set on the command line or in its FAULTLAB_ environment variable)".into()),
    }
}

/// One line of error (its causes after colons), never a backtrace: a backtrace is for bugs, which
/// panic. The exit status says whose the error is ([`error_status`]).
fn main() {
    tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::try_from_env("FAULTLAB_LOG").unwrap_or_else(|_| "warn".into()))
        .with_writer(std::io::stderr)
        .init();
    let cli = Cli::parse();
    let runtime = match tokio::runtime::Runtime::new() {
        Ok(r) => r,
        Err(e) => {
            eprintln!("error: cannot start the async runtime: {e}");
            exit(status::ENVIRONMENT)
        }
    };
    match runtime.block_on(run(cli)) {
        Ok(()) => exit(0),
        Err(e) if closed_pipe(&e) => exit(status::CLOSED_PIPE),
        Err(e) => {
            eprintln!("error: {}", faultlab::terminal::lines(&format!("{e:#}")));
            exit(error_status(&e))
        }
    }
}

async fn run(cli: Cli) -> Result<()> {
    // faultlab's own scenarios: the checkout the current directory is in, else the built-in copy,
    // unpacked into the data directory (faultlab::home), which can fail (a data directory that is not
    // this user's). Commands that read no scenario do without.
    let own_files = !matches!(cli.command, Command::Completions { .. } | Command::Man | Command::Schema { .. } | Command::Image { .. } | Command::Testbed { .. } | Command::Report { .. });
    if own_files && cli.scenarios.is_none() && std::env::var_os("FAULTLAB_SCENARIOS").is_none_or(|v| v.is_empty()) {
        faultlab::home::find().map_err(anyhow::Error::msg)?;
    }
    let dir = cli.scenarios.clone().unwrap_or_else(scenario::default_dir);
    match cli.command {
        Command::List { output } => {
            let set = scenario::load_set(&dir)?;
            if set.good.is_empty() && set.broken.is_empty() {
                usage!("{}: no scenario files (*.yaml, *.yml) in this directory", dir.display());
            }
            let listed = serde_json::json!({
                "scenarios": set.good.iter().map(|(name, s)| serde_json::json!({
                    "name": name, "fault": s.scenario.fault.name(), "path": s.path, "description": s.scenario.metadata.description.trim(),
                })).collect::<Vec<_>>(),
                "broken": set.broken.iter().map(|(path, e)| serde_json::json!({"path": path, "error": e.to_string()})).collect::<Vec<_>>(),
            });
            if emit(output.output, &listed)? {
                if !set.broken.is_empty() {
                    exit(status::USAGE);
                }
                return Ok(());
            }
            // Columns as wide as the longest name and fault.
            let wn = set.good.keys().map(String::len).max().unwrap_or(0);
            let wf = set.good.values().map(|s| s.scenario.fault.name().len()).max().unwrap_or(0);
            for (name, s) in &set.good {
                let line = s.scenario.metadata.description.lines().next().unwrap_or_default().to_string();
                out!("{name:<wn$}  {:<wf$}  {line}", s.scenario.fault.name());
            }
            if !set.broken.is_empty() {
                out!("\nbroken ({}; `faultlab validate` checks files):", set.broken.len());
                for (path, e) in &set.broken {
                    out!("{}\n{}", path.display(), indent(&e.to_string()));
                }
                exit(status::USAGE);
            }
        }
        Command::Validate { paths } => {
            let paths = if paths.is_empty() { vec![dir.clone()] } else { paths };
            if validate(&paths)? > 0 {
                exit(status::USAGE);
            }
        }
        Command::Show { scenario: name, output } => {
            let s = scenario::find(&dir, &name)?;
            let sc = &s.scenario;
            let shown = serde_json::json!({
                "path": s.path,
                "reach": reach_text(sc.fault.fault().reach()),
                "hostWideOnKind": sc.fault.fault().host_wide_on_kind(),
                "scenario": sc,
            });
            if emit(output.output, &shown)? {
                return Ok(());
            }
            out!("{} ({})\n\n{}\n", sc.metadata.name, s.path.display(), sc.metadata.description.trim());
            out!("source:   {} — {}{}", sc.metadata.source.document, sc.metadata.source.title, sc.metadata.source.section.as_ref().map(|x| format!(" / {x}")).unwrap_or_default());
            out!("fault:    {} (fix steps it offers: {})", sc.fault.name(), sc.fault.fix_steps().join(", "));
            if !sc.workload.cluster_objects.is_empty() {
                out!("cluster:  creates cluster-scoped {} (deleted at teardown)", sc.workload.cluster_objects.join(", "));
            }
            out!("reach:    {}", reach_text(sc.fault.fault().reach()));
            if let Some(reach) = sc.fault.fault().host_wide_on_kind() {
                out!("on kind:  reaches past the node container into the host: {reach}; runs on kind only with --allow-host-wide");
            }
            out!("symptom:  within {}", faultlab::duration::format(sc.symptom.within.0));
            if let Some(p) = &sc.symptom.pod {
                out!("          pod {}", faultlab::wait::gate_text(p));
            }
            if let Some(d) = &sc.symptom.deployment {
                out!("          {}", faultlab::wait::deployment_text(d));
            }
            for e in &sc.symptom.events {
                out!("          event {} /{}/", e.reason, e.message);
            }
            out!("fix:");
            for (i, f) in sc.fix.iter().enumerate() {
                out!("  {}. {} — {}", i + 1, f.step, f.doc.trim());
            }
            if let Some(p) = &sc.recovery.pod {
                out!("recovery: within {}: pod {}", faultlab::duration::format(sc.recovery.within.0), faultlab::wait::gate_text(p));
            }
            if let Some(d) = &sc.recovery.deployment {
                out!("recovery: within {}: {}", faultlab::duration::format(sc.recovery.within.0), faultlab::wait::deployment_text(d));
            }
        }
        Command::Schema { report: false } => outp!("{}", scenario::json_schema()),
        Command::Schema { report: true } => outp!("{}", SuiteReport::json_schema()),
        Command::Completions { shell } => {
            let mut buf = Vec::new();
            clap_complete::generate(shell, &mut <Cli as clap::CommandFactory>::command(), "faultlab", &mut buf);
            outp!("{}", String::from_utf8_lossy(&buf));
        }
        Command::Man => {
            let mut buf = Vec::new();
            clap_mangen::Man::new(<Cli as clap::CommandFactory>::command()).render(&mut buf).context("rendering the manual page")?;
            outp!("{}", String::from_utf8_lossy(&buf));
        }
        Command::Report { inputs, html, title } => {
            let mut suite = SuiteReport::new(0.0, Vec::new());
            for path in &inputs {
                let text = std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
                let part: SuiteReport = serde_json::from_str(&text).with_context(|| format!("{}: not a faultlab JSON report (`faultlab run --output json`)", path.display()))?;
                suite.wall_seconds += part.wall_seconds;
                suite.scenarios.extend(part.scenarios);
            }
            let page = write_html(&html, &suite, &title)?;
            eprintln!("wrote {}", page.display());
        }
        Command::Plan { target, provider, output } => {
            let mut broken = 0;
            let chosen = targets(&dir, &target, &mut broken)?;
            let choice = choose(&provider, false)?;
            let mut plans = Vec::new();
            for s in chosen {
                let plan = suite::plan(&s, &choice).await?;
                match output.output {
                    Output::Text => out!("{plan}"),
                    _ => plans.push(serde_json::json!({"scenario": s.name(), "provider": choice.name(), "lines": plan.lines().collect::<Vec<_>>()})),
                }
            }
            emit(output.output, &plans)?;
            if broken > 0 {
                usage!("{broken} scenario file(s) of {} are broken (above) and were not planned", dir.display());
            }
        }
        Command::Run { target, provider, keep, allow_existing, output, junit, html, hold, allow_host_wide, fresh_cluster, budget, jobs, strict_snapshots } => {
            let mut broken = 0;
            let scenarios = targets(&dir, &target, &mut broken)?;
            let choice = choose(&provider, keep)?;
            // A kind cluster of the user's is one place, used by one scenario at a time, never shared out.
            let users_kind = matches!(choice, suite::ProviderChoice::Kind { cluster: Some(_), .. });
            let sharing = matches!(choice, suite::ProviderChoice::Kind { .. }) && !users_kind && !fresh_cluster && scenarios.len() > 1;
            // On kind, shared clusters: each scenario with the needs of the cluster its group shares.
            let (scenarios, cluster_needs): (Vec<_>, Vec<Option<faultlab::needs::Needs>>) = match sharing {
                true => suite::kind_cluster_groups(scenarios).into_iter().map(|(s, n)| (s, Some(n))).unzip(),
                false => scenarios.into_iter().map(|s| (s, None)).unzip(),
            };
            let places = suite::places(&choice);
            let jobs = if users_kind { 1 } else { jobs.map(usize::from).unwrap_or_else(|| suite::default_jobs(&places)).min(scenarios.len().max(1)) };
            let mut sched = faultlab::schedule::Scheduler::new(places, jobs);
            let claims: Vec<faultlab::schedule::Claim> = scenarios.iter().zip(&cluster_needs).map(|(s, n)| suite::claim(s, &choice, n.as_ref())).collect();
            // Those that must run alone first, while nothing else runs (with one job: as chosen).
            let mut pending: Vec<usize> = sched.order(&claims);
            // On kind, one shared cluster per slot (each slot runs its scenarios one after another).
            let mut pools: Vec<Option<suite::SharedClusters>> = (0..jobs).map(|_| Some(suite::SharedClusters::default())).collect();
            let mut done: Vec<Option<ScenarioReport>> = vec![None; scenarios.len()];
            let mut beside: Vec<std::collections::BTreeSet<String>> = vec![Default::default(); scenarios.len()];
            let bars = (jobs > 1).then(indicatif::MultiProgress::new);
            let started = Instant::now();
            let mut running = futures::stream::FuturesUnordered::new();
            let (choice_ref, scenarios_ref) = (&choice, &scenarios);
            loop {
                while suite::interrupted().is_none() {
                    let waiting: Vec<&faultlab::schedule::Claim> = pending.iter().map(|&i| &claims[i]).collect();
                    let Some(start) = sched.next(&waiting) else { break };
                    let i = pending.remove(start.pending);
                    let s = &scenarios_ref[i];
                    if let Some(why) = budget.and_then(|b| suite::over_budget(started.elapsed(), b)) {
                        eprintln!("{}: {why}", s.name());
                        done[i] = Some(ScenarioReport::ignored(s.name(), &why));
                        continue;
                    }
                    for r in sched.running() {
                        beside[r].insert(s.name().to_string());
                        beside[i].insert(scenarios_ref[r].name().to_string());
                    }
                    sched.start(i, start.place, claims[i].clone());
                    let options = suite::RunOptions {
                        allow_existing: allow_existing.clone(),
                        hold,
                        allow_host_wide,
                        expectations: cli.expectations.clone(),
                        node: sched.node(start.place).map(String::from),
                        cluster_needs: cluster_needs[i].clone(),
                        strict_snapshots,
                    };
                    let mut pool = if sharing { pools[start.place].take() } else { None };
                    let rec = Recorder::default();
                    let ticker = progress(rec.clone(), s.name().to_string(), bars.clone());
                    running.push(async move {
                        let report = suite::run_with(s, choice_ref, &options, rec, pool.as_mut()).await;
                        ticker.abort();
                        (i, start.place, pool, report)
                    });
                }
                let Some((i, place, pool, report)) = futures::StreamExt::next(&mut running).await else {
                    if !pending.is_empty() && suite::interrupted().is_none() {
                        bail!("internal: {} scenario(s) could not be scheduled", pending.len());
                    }
                    break;
                };
                sched.finish(i);
                if let Some(p) = pool {
                    pools[place] = Some(p);
                }
                if output == Output::Text {
                    out!("{}", report.line());
                } else {
                    for n in &report.notes {
                        eprintln!("note: {}", faultlab::terminal::lines(n));
                    }
                }
                done[i] = Some(report);
                if let Some(signal) = suite::interrupted() {
                    let ended = done.iter().filter(|r| r.is_some()).count();
                    eprintln!("{signal}: stopped after {ended} of {} scenario(s) ({} still tearing down)", scenarios.len(), running.len());
                }
            }
            drop(running);
            let mut reports: Vec<ScenarioReport> = Vec::new();
            for (i, r) in done.into_iter().enumerate() {
                let Some(mut r) = r else { continue };
                r.ran_beside = beside[i].iter().cloned().collect();
                reports.push(r);
            }
            // Those the budget did not start name the platform the others ran on.
            if let Some(ran) = reports.iter().find(|r| !r.provider.is_empty()).map(|r| (r.provider.clone(), r.platform.clone())) {
                for r in reports.iter_mut().filter(|r| r.provider.is_empty()) {
                    (r.provider, r.platform) = ran.clone();
                }
            }
            for mut pool in pools.into_iter().flatten() {
                let rec = Recorder::default();
                match pool.release(&rec).await {
                    Ok(Some(name)) if keep => eprintln!("note: --keep: kind cluster {name} is kept; delete it with `kind delete cluster --name {name}` or `faultlab cleanup`"),
                    Ok(_) => {}
                    Err(e) => {
                        eprintln!("error: deleting a shared kind cluster: {e}");
                        if let Some(last) = reports.last_mut() {
                            last.teardown_errors.push(e.to_string());
                            last.status = faultlab::report::Status::Failed;
                        }
                    }
                }
            }
            let suite = SuiteReport::new(started.elapsed().as_secs_f64(), reports);
            match output {
                Output::Json => out!("{}", suite.json()),
                Output::Yaml => outp!("{}", serde_saphyr::to_string(&suite).context("writing YAML")?),
                Output::Text => out!("suite: {:.1}s wall", suite.wall_seconds),
            }
            if let Some(notice) = new_snapshots_notice(&suite, strict_snapshots) {
                eprintln!("{notice}");
            }
            if let Some(path) = junit {
                faultlab::atomic::write(&path, suite.junit().as_bytes()).context("--junit")?;
            }
            if let Some(dir) = html {
                let page = write_html(&dir, &suite, "faultlab run")?;
                eprintln!("wrote {}", page.display());
            }
            match suite::interrupted() {
                Some("SIGTERM") => exit_verdict(status::SIGTERM),
                Some(_) => exit_verdict(status::SIGINT),
                None if !suite.passed() => exit_verdict(status::FAILED),
                None if broken > 0 => {
                    eprintln!("error: {broken} scenario file(s) of {} are broken (above) and were not run", dir.display());
                    exit_verdict(status::USAGE)
                }
                None if !suite.refused().is_empty() => {
                    let names: Vec<&str> = suite.refused().iter().map(|r| r.scenario.as_str()).collect();
                    eprintln!("error: {} scenario(s) refused on this platform and not run (the reasons are above): {}", names.len(), names.join(", "));
                    exit_verdict(status::ENVIRONMENT)
                }
                None => exit_verdict(0),
            }
        }
        Command::Train { scenario: name, provider, allow_existing } => {
            let s = scenario::find(&dir, &name)?;
            let choice = choose(&provider, true)?;
            let rec_phase = Recorder::default();
            let ticker = progress(rec_phase.clone(), format!("{name} (breaking the cluster)"), None);
            let session = training::train(&s, &choice, allow_existing.as_deref(), rec_phase).await;
            ticker.abort();
            let session = session?;
            outp!("{}", faultlab::terminal::lines(&training::on_call_view(&session).await?));
            out!("\nsession: {} (FAULTLAB_SESSION={} selects it when several are open)", session.id, session.id);
        }
        Command::Hint { session } => {
            let mut s = training::Session::find(session.session.as_deref())?;
            match training::hint(&mut s)? {
                Some(h) => out!("{}", training::hint_text(s.hints_used, &h)),
                None => out!("no more hints; `faultlab solution` shows the documented fix"),
            }
        }
        Command::Check { session, wait, output } => {
            let mut s = training::Session::find(session.session.as_deref())?;
            let verdict = training::check(&mut s, wait).await?;
            let shown = serde_json::json!({
                "session": s.id, "scenario": s.scenario, "fixed": verdict.fixed, "seconds": verdict.seconds,
                "failing": verdict.failing, "solved": s.solved,
            });
            if emit(output.output, &shown)? {
                if verdict.fixed {
                    let _ = training::write_debrief(&s, false);
                    return Ok(());
                }
                exit(status::FAILED);
            }
            if verdict.fixed {
                let solved = s.solved.clone().expect("recorded when fixed");
                out!(
                    "FIXED: {} recovered in {} ({:.1}s) with {} hint(s){}",
                    s.scenario,
                    faultlab::duration::format(Duration::from_secs(solved.seconds as u64)),
                    solved.seconds,
                    solved.hints_used,
                    if solved.solution_shown { " and the solution shown" } else { "" }
                );
                match training::write_debrief(&s, false) {
                    Ok(path) => out!("debrief: {}", path.display()),
                    Err(e) => eprintln!("warning: no debrief page: {e}"),
                }
                out!("`faultlab reset` restores the cluster and closes the session.");
            } else {
                out!("NOT FIXED yet ({:.0}s since the symptom). Still wrong:", verdict.seconds);
                outp!("{}", training::failing_text(&verdict.failing));
                exit(status::FAILED);
            }
        }
        Command::Solution { session, apply } => {
            let mut s = training::Session::find(session.session.as_deref())?;
            outp!("{}", faultlab::terminal::lines(&training::solution(&mut s, apply).await?));
        }
        Command::Reset { session } => {
            let s = training::Session::find(session.session.as_deref())?;
            // Written before the session file goes; the page stays.
            let debrief = training::write_debrief(&s, s.solved.is_none());
            let errors = training::reset(&s).await?;
            match debrief {
                Ok(path) => out!("debrief: {}", path.display()),
                Err(e) => eprintln!("warning: no debrief page: {e}"),
            }
            if errors.is_empty() {
                out!("session {} reset: everything it changed is restored", s.id);
            } else {
                for e in &errors {
                    eprintln!("error: {e}");
                }
                bail!("reset left {} undo step(s) failing; the session stays open (run `faultlab reset` again)", errors.len());
            }
        }
        Command::Sessions { output } => {
            let all = training::Session::all();
            if emit(output.output, &all)? {
                return Ok(());
            }
            for s in all {
                let state = match &s.solved {
                    Some(x) => format!("fixed in {:.0}s", x.seconds),
                    None => "open".into(),
                };
                out!("{:<36} {:<22} {:<16} {}", s.id, s.scenario, s.cluster.context, state);
            }
        }
        Command::New { name, fault, dir: into } => {
            let into = into.or_else(|| cli.scenarios.clone()).unwrap_or_else(|| PathBuf::from("."));
            let path = faultlab::scaffold::create(&into, &name, &fault)?;
            out!("wrote {} (from faultlab's scenario {fault}); `faultlab validate {}` checks it", path.display(), into.display());
        }
        Command::Image { command: ImageCommand::Pack { rootfs, reference, arch, env, entrypoint, cmd, workdir, created_by, out } } => {
            let arch = arch.unwrap_or_else(|| faultlab::image::host_arch().to_string());
            let config = faultlab::image::ImageConfig { reference, arch, env, entrypoint, cmd, workdir, created_by };
            faultlab::image::pack(&rootfs, &config, &out).with_context(|| format!("packing {} into {}", rootfs.display(), out.display()))?;
        }
        Command::Testbed { command: TestbedCommand::Describe { facts, out } } => {
            let text = facts.testbed().context("testbed describe")?.to_yaml();
            match out {
                None => outp!("{text}"),
                Some(path) if std::fs::read_to_string(&path).is_ok_and(|old| old == text) => {}
                Some(path) => {
                    faultlab::atomic::write(&path, text.as_bytes()).context("testbed describe --out")?;
                    eprintln!("wrote {}", path.display());
                }
            }
        }
        Command::Snapshots { command } => {
            let store = faultlab::snapshot::Store::for_set(&dir, cli.expectations.as_deref())?;
            match command {
                SnapshotsCommand::Review { from } => review_snapshots(&store, from.as_deref())?,
                SnapshotsCommand::Accept { name, platform, from: Some(from) } => {
                    let platform = platform.expect("clap requires --platform with --from");
                    for p in store.accept_from(&from, &platform, name.as_deref())? {
                        out!("accepted {} on {} from {}: {}", p.name, p.platform, p.new.display(), p.snap.display());
                    }
                }
                SnapshotsCommand::Accept { name, platform, from: None } => {
                    let name = name.expect("clap requires NAME without --from");
                    let accepted = store.accept(&name, platform.as_deref())?;
                    out!("accepted {} on {}: {}", accepted.name, accepted.platform, accepted.snap.display());
                }
            }
        }
        Command::Cleanup { force, older_than, sessions } => {
            let mut out = faultlab::cleanup::Cleaned::default();
            let open = faultlab::training::Session::all();
            let keep: Vec<PathBuf> = if sessions { Vec::new() } else { open.iter().map(|s| s.journal.clone()).collect() };
            faultlab::cleanup::journals(force, &keep, &mut out).await;
            for s in open.iter().filter(|_| sessions) {
                // Its journal replayed in full (the file is gone): the session has nothing left to train on.
                if !s.journal.exists() {
                    match std::fs::remove_file(s.path()) {
                        Ok(()) => out!("closed training session {}", s.id),
                        Err(e) => eprintln!("error: closing training session {}: removing {}: {e}", s.id, s.path().display()),
                    }
                }
            }
            for problem in faultlab::training::Session::problems() {
                eprintln!("warning: {problem}");
            }
            faultlab::cleanup::clusters(older_than, force, &mut out).await;
            for j in &out.journals_replayed {
                out!("undone: {j}");
            }
            for j in &out.journals_skipped {
                out!("skipped: {j}");
            }
            for c in &out.clusters_deleted {
                out!("deleted kind cluster: {c}");
            }
            for c in &out.clusters_skipped {
                out!("skipped kind cluster: {c}");
            }
            if let Some(why) = &out.clusters_unchecked {
                out!("kind clusters: {why}");
            }
            if out.journals_replayed.is_empty() && out.clusters_deleted.is_empty() && out.clusters_skipped.is_empty() && out.errors.is_empty() {
                out!("nothing to clean up");
            }
            if !out.errors.is_empty() {
                for e in &out.errors {
                    eprintln!("error: {e}");
                }
                exit(status::ENVIRONMENT);
            }
        }
    }
    Ok(())
}

/// `faultlab snapshots review [--from DIR]`: on a terminal ask about each; otherwise list them, exit
/// status 1 if any wait.
fn review_snapshots(store: &faultlab::snapshot::Store, from: Option<&std::path::Path>) -> Result<()> {
    let colour = std::io::stdout().is_terminal() && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty());
    let mut out = std::io::stdout().lock();
    if std::io::stdin().is_terminal() {
        faultlab::snapshot::review(store, from, &mut std::io::stdin().lock(), &mut out, colour)?;
        return Ok(());
    }
    let waiting = faultlab::snapshot::list_pending(store, from, &mut out, colour)?;
    drop(out);
    if waiting > 0 {
        exit(status::FAILED);
    }
    Ok(())
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

/// Write `suite`'s HTML report to DIR/index.html; its path.
fn write_html(dir: &std::path::Path, suite: &SuiteReport, title: &str) -> Result<PathBuf> {
    let page = dir.join("index.html");
    faultlab::atomic::write(&page, faultlab::html::suite_page(suite, title).as_bytes()).context("--html")?;
    Ok(page)
}
