//! The `faultlab` command: its arguments (clap's types, here) and a dispatch to each command's
//! module in `cli/` (what it prints and how it exits: `cli/out.rs`).

use std::path::PathBuf;
use std::time::Duration;

use anyhow::Result;
use clap::{Parser, Subcommand, ValueEnum};
use faultlab::provider::kind::Arch;
use faultlab::scenario;
use faultlab::suite;

#[macro_use]
mod cli;

use cli::out::{closed_pipe, error_status, exit, status};

#[derive(Parser)]
#[command(
    name = "faultlab",
    version,
    about = "Reproduce documented Kubernetes faults, assert their events, prove the documented fix",
    after_help = "Exit statuses: 0 done (every scenario passed); 1 a scenario failed, a training check found it not fixed, or snapshots wait for review; 2 a usage error, or a scenario that does not exist or does not load; 3 the environment (no cluster, a missing tool, a file or cluster that answers with an error); 130 / 143 interrupted by SIGINT / SIGTERM, after undoing what was done; 141 standard output closed by its reader. Errors are one line; a backtrace means a bug (please report it)."
)]
pub struct Cli {
    /// Directory of scenario files.
    #[arg(long, global = true, env = "FAULTLAB_SCENARIOS")]
    pub scenarios: Option<PathBuf>,
    /// Directory of the set's snapshots, `<DIR>/<platform>/<scenario>.snap` (default: `expectations/`
    /// beside the set; faultlab's own set keeps `expectations/` at the workspace root).
    #[arg(long, global = true, env = "FAULTLAB_EXPECTATIONS")]
    pub expectations: Option<PathBuf>,
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum ProviderArg {
    /// The test bed's description if present, else kind.
    Auto,
    Kind,
    Existing,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Output {
    Text,
    Json,
    Yaml,
}

/// The stages of a challenge a trainee answers (`faultlab answer`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum AnswerStage {
    /// Name the broken workload.
    Detect,
    /// Name the fault.
    Localise,
}

impl From<AnswerStage> for faultlab::score::Stage {
    fn from(s: AnswerStage) -> Self {
        match s {
            AnswerStage::Detect => faultlab::score::Stage::Detect,
            AnswerStage::Localise => faultlab::score::Stage::Localise,
        }
    }
}

/// `-o text|json|yaml`, as kubectl spells it.
#[derive(clap::Args, Clone, Copy)]
pub struct OutputArg {
    #[arg(short, long, value_enum, default_value = "text")]
    pub output: Output,
}

#[derive(clap::Args, Clone)]
pub struct Target {
    /// Scenario names: one, or several run as a suite, in the order given.
    #[arg(value_name = "SCENARIO")]
    pub names: Vec<String>,
    /// Every scenario.
    #[arg(long, conflicts_with = "names")]
    pub all: bool,
    /// With --all: leave this scenario out (repeatable). A name no scenario has is an error.
    #[arg(long, value_name = "SCENARIO", requires = "all")]
    pub skip: Vec<String>,
    /// With --all: only part INDEX of COUNT (from 1), the scenarios split by name order, every COUNT-th
    /// from the INDEX-th: CI's jobs each run one part (after --skip).
    #[arg(long, value_name = "INDEX/COUNT", requires = "all")]
    pub shard: Option<suite::Shard>,
    /// With --all: start at the K-th scenario of the name order (K taken modulo their number) and wrap
    /// around, so that a run cut short by --budget leaves out different scenarios each time K changes.
    #[arg(long, value_name = "K", requires = "all")]
    pub rotate: Option<usize>,
}

#[derive(clap::Args, Clone)]
pub struct ProviderOpts {
    #[arg(long, value_enum, default_value = "auto")]
    pub provider: ProviderArg,
    /// kind node architecture (default: this host's).
    #[arg(long, value_enum)]
    pub arch: Option<Arch>,
    /// Node-access description for --provider existing (default: the test bed's).
    #[arg(long)]
    pub description: Option<PathBuf>,
    /// kind node image for every node, instead of the one pinned in kind-configs/<arch>.yaml (for
    /// example one built locally, as air-gapped hosts need).
    #[arg(long, env = "FAULTLAB_KIND_NODE_IMAGE")]
    pub node_image: Option<String>,
    /// The kubeconfig file, as kubectl's flag (default: the description's). The nodes are still reached
    /// as the description says (--description).
    #[arg(long, value_name = "FILE")]
    pub kubeconfig: Option<PathBuf>,
    /// The kubeconfig context, as kubectl's flag (default: the description's). Another context than
    /// the description's is a cluster faultlab must be told is yours to break: --allow-existing CONTEXT.
    #[arg(long, value_name = "NAME")]
    pub context: Option<String>,
    /// A kind cluster of yours to run on (`kind get clusters` lists it), used as it is: faultlab creates
    /// and deletes nothing of it, and refuses the scenarios whose faults need a cluster made for them.
    /// `--context kind-NAME` says the same.
    #[arg(long, value_name = "NAME")]
    pub cluster: Option<String>,
}

#[derive(Subcommand)]
pub enum ImageCommand {
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
pub enum TestbedCommand {
    /// Write the test bed's description (what `--provider existing` reads) from what `up` made; the
    /// file is replaced only when it changes.
    Describe {
        #[command(flatten)]
        facts: Box<faultlab::testbed::Facts>,
        /// Where to write it (default: standard output).
        #[arg(long)]
        out: Option<PathBuf>,
    },
    /// The test bed's nodes, one line a node (`K KEY=value...`: each one's name, link, pods' range and
    /// places), as `ci/testbed/nodes` holds them for `ci/testbed/lib.sh`; with K, node K's line only.
    Nodes {
        /// A node's number (1 to 16).
        index: Option<u32>,
    },
    /// A node's configuration file, printed: containerd's config.toml (version 2 for containerd 1.6, 3
    /// for 2.x), the CNI network list, or the kubelet's KubeletConfiguration.
    Config {
        #[arg(value_enum)]
        file: faultlab::testbed::configs::ConfigFile,
        #[command(flatten)]
        node: Box<faultlab::testbed::configs::NodeConfig>,
    },
    /// The description's platform name (`k8s-1.20-containerd-2.1-amd64`), from what the node's containerd
    /// and cgroup file system say.
    Platform {
        #[command(flatten)]
        facts: faultlab::testbed::PlatformFacts,
    },
    /// The kernel modules (paths under DIR, one a line, in load order) the VM node's initramfs loads:
    /// each MODULE after what it needs, once each, none the kernel has built in.
    InitrdModules {
        /// The kernel's module directory (`<root>/lib/modules/<version>`: modules.dep, modules.builtin).
        #[arg(long)]
        dir: PathBuf,
        #[arg(required = true)]
        modules: Vec<String>,
    },
    /// Run COMMAND and print where this machine's CPU went meanwhile, part by part (the API server,
    /// etcd, each node's kubelet and containerd, the shims, the pods, faultlab, the registries, the
    /// rest), and the lower bound of its wall time; exits with COMMAND's status.
    CpuProfile {
        /// Seconds between two samples of /proc.
        #[arg(long, default_value_t = 1.0)]
        every: f64,
        /// Also write the profile as JSON to this file.
        #[arg(long)]
        json: Option<PathBuf>,
        /// The command, after `--`.
        #[arg(required = true, last = true)]
        command: Vec<String>,
    },
}

#[derive(Subcommand)]
pub enum Command {
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
    Run(RunArgs),
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
        /// The scenario to train on (none with --blind: one is picked at random).
        #[arg(required_unless_present = "blind", conflicts_with = "blind")]
        scenario: Option<String>,
        /// A blind challenge: a scenario picked at random (from --from, else every reproducible one),
        /// not named to the trainee until it is fixed; its namespace is `fl-challenge-<random>`.
        #[arg(long)]
        blind: bool,
        /// The scenarios a blind challenge is picked from, comma-separated.
        #[arg(long, value_delimiter = ',', requires = "blind", value_name = "NAMES")]
        from: Vec<String>,
        #[command(flatten)]
        provider: ProviderOpts,
        /// Allow training on this context, which faultlab did not create.
        #[arg(long, value_name = "CONTEXT")]
        allow_existing: Option<String>,
        /// The challenge's time limit: a stage scores only within it, from the symptom shown.
        #[arg(long, default_value = "30m", value_parser = parse_duration)]
        time_limit: Duration,
    },
    /// Training: answer a stage of the challenge, `detect WORKLOAD` (the broken Deployment or
    /// StatefulSet, by name) or `localise FAULT` (the fault's name, as `faultlab list` gives them); a wrong
    /// answer costs points (exit status 1).
    Answer {
        #[arg(value_enum)]
        stage: AnswerStage,
        answer: String,
        #[command(flatten)]
        session: SessionArg,
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
    /// Training: the instructor's scoreboard of the open sessions (each stage, time, hints and score),
    /// an HTML page.
    Scoreboard {
        /// Where to write the page.
        #[arg(long, value_name = "FILE")]
        out: PathBuf,
        /// Write it again every SECONDS (the page loads itself again as often) until interrupted.
        #[arg(long, value_name = "SECONDS", value_parser = clap::value_parser!(u32).range(1..=3600))]
        watch: Option<u32>,
    },
    /// Training: the session's shell in a browser, for its trainee: prints an address with a token (a
    /// credential: give it only to the trainee) and serves until interrupted or the session is reset.
    /// The shell has the trainee's kubeconfig and the session selected; each line typed goes into the
    /// debrief.
    Terminal {
        #[command(flatten)]
        session: SessionArg,
        /// Where to listen: a loopback address (port 0: any free port).
        #[arg(long, default_value = "127.0.0.1:0", value_name = "ADDR")]
        listen: std::net::SocketAddr,
        /// The shell to run.
        #[arg(long, default_value = "/bin/bash", value_name = "PROGRAM")]
        shell: PathBuf,
        /// Run the shell as this local user (faultlab must run as root), who cannot read the session:
        /// their `faultlab answer`, `hint`, `check`, `solution`, `list`, `show` and `node CMD...` (on
        /// the session's own node; not on the test bed) go through a broker of this terminal's, for
        /// this session only.
        #[arg(long, value_name = "NAME")]
        user: Option<String>,
        /// Let the trainee run commands as root on the session's own node (`faultlab node CMD`;
        /// never on a test bed node of this machine). A kind node is a privileged container, whose
        /// root can reach this machine: for trainees trusted with that.
        #[arg(long, requires = "user")]
        node_commands: bool,
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
pub enum SnapshotsCommand {
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
pub struct SessionArg {
    /// The training session (default: the only one open).
    #[arg(long, env = "FAULTLAB_SESSION")]
    pub session: Option<String>,
}

/// `faultlab run`'s arguments.
#[derive(clap::Args)]
pub struct RunArgs {
    #[command(flatten)]
    pub target: Target,
    #[command(flatten)]
    pub provider: ProviderOpts,
    /// Keep the kind cluster afterwards.
    #[arg(long)]
    pub keep: bool,
    /// Allow injecting faults into this context, which faultlab did not create.
    #[arg(long, value_name = "CONTEXT")]
    pub allow_existing: Option<String>,
    /// The report on standard output: one line per scenario, or the whole report as JSON or YAML
    /// (its schema: `faultlab schema --report`).
    #[arg(short, long, value_enum, default_value = "text")]
    pub output: Output,
    /// Write a JUnit XML report here.
    #[arg(long)]
    pub junit: Option<PathBuf>,
    /// Write an HTML report, DIR/index.html: a summary table and each scenario's timeline, one
    /// self-contained page.
    #[arg(long, value_name = "DIR")]
    pub html: Option<PathBuf>,
    /// Keep the fault in place this long after the symptom, before the fix (e.g. 5m).
    #[arg(long, value_parser = parse_duration)]
    pub hold: Option<Duration>,
    /// On kind, also run the faults that reach past the node container into the host (a sysctl of
    /// the host's user namespace, a loop file on the host's disk); `faultlab show` says which.
    #[arg(long, env = "FAULTLAB_ALLOW_HOST_WIDE", value_parser = env_flag)]
    pub allow_host_wide: bool,
    /// On kind, a new cluster for every scenario. By default scenarios whose kind needs are the same
    /// share one (run next to each other, faults undone between them, the node checked to be as the
    /// cluster was made before the next; a failed run's cluster is deleted).
    #[arg(long)]
    pub fresh_cluster: bool,
    /// Start no scenario after this long (for example 25m): those left are reported ignored, with
    /// the reason, instead of the whole run being killed by a CI limit. A running scenario is not cut
    /// short, so leave room for the longest one.
    #[arg(long, value_parser = parse_duration)]
    pub budget: Option<Duration>,
    /// Run up to N scenarios at once (default: what the platform allows; 1: one after the other).
    /// Each runs where its fault's reach allows: a namespace-only one beside anything on a node
    /// no other scenario breaks, a node-wide one on a node of its own (the test bed's nodes,
    /// `ci/testbed/up --nodes N`), a cluster-wide one alone on a shared cluster, a host-wide one
    /// alone everywhere, two with the same host port (a registry) never together. On kind, N
    /// clusters at once. The report names, for each scenario, those that ran beside it.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u16).range(1..))]
    pub jobs: Option<u16>,
    /// Fail a scenario that has no reviewed snapshot on the platform (`new`), naming it and the
    /// platform. Without it such a scenario passes with a notice and its `.snap.new` waits for
    /// review; a snapshot that differs from the reviewed one (`changed`) fails either way.
    #[arg(long, env = "FAULTLAB_STRICT_SNAPSHOTS", value_parser = env_flag)]
    pub strict_snapshots: bool,
}

fn parse_duration(s: &str) -> Result<Duration, String> {
    faultlab::duration::parse(s).map_err(|e| e.to_string())
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
    // A trainee's shell in `faultlab terminal --user`: the session is the broker's to reach.
    if let Some(socket) = std::env::var_os("FAULTLAB_BROKER") {
        let args = std::env::args_os().skip(1).map(|a| a.to_string_lossy().into_owned()).collect();
        match faultlab::webterm::call_broker(std::path::Path::new(&socket), args) {
            Ok(code) => std::process::exit(code),
            Err(e) => {
                eprintln!("error: {e}");
                exit(status::ENVIRONMENT)
            }
        }
    }
    let cli = Cli::parse();
    let runtime = match tokio::runtime::Runtime::new() {
        Ok(r) => r,
        Err(e) => {
            eprintln!("error: cannot start the async runtime: {e}");
            exit(status::ENVIRONMENT)
        }
    };
    match runtime.block_on(dispatch(cli)) {
        Ok(()) => exit(0),
        Err(e) if closed_pipe(&e) => exit(status::CLOSED_PIPE),
        Err(e) => {
            eprintln!("error: {}", faultlab::terminal::lines(&format!("{e:#}")));
            exit(error_status(&e))
        }
    }
}

/// Run the command the arguments name.
async fn dispatch(cli: Cli) -> Result<()> {
    // faultlab's own scenarios: the checkout the current directory is in, else the built-in copy,
    // unpacked into the data directory (faultlab::home), which can fail (a data directory that is not
    // this user's). Commands that read no scenario do without.
    let own_files = !matches!(cli.command, Command::Completions { .. } | Command::Man | Command::Schema { .. } | Command::Image { .. } | Command::Testbed { .. } | Command::Report { .. });
    if own_files && cli.scenarios.is_none() && std::env::var_os("FAULTLAB_SCENARIOS").is_none_or(|v| v.is_empty()) {
        faultlab::home::find().map_err(anyhow::Error::msg)?;
    }
    let dir = cli.scenarios.clone().unwrap_or_else(scenario::default_dir);
    let expectations = cli.expectations.as_deref();
    match cli.command {
        Command::List { output } => cli::scenarios::list(&dir, output.output),
        Command::Validate { paths } => cli::scenarios::validate(&dir, paths),
        Command::Show { scenario: name, output } => cli::scenarios::show(&dir, &name, output.output),
        Command::New { name, fault, dir: into } => cli::scenarios::new(&into.or_else(|| cli.scenarios.clone()).unwrap_or_else(|| PathBuf::from(".")), &name, &fault),
        Command::Schema { report } => cli::docs::schema(report),
        Command::Completions { shell } => cli::docs::completions(shell),
        Command::Man => cli::docs::man(),
        Command::Report { inputs, html, title } => cli::docs::report(&inputs, &html, &title),
        Command::Image { command } => cli::docs::image(command),
        Command::Testbed { command } => cli::docs::testbed(command),
        Command::Plan { target, provider, output } => cli::plan::plan(&dir, &target, &provider, output.output).await,
        Command::Run(args) => cli::run::run(&dir, expectations, args).await,
        Command::Train { scenario: name, blind, from, provider, allow_existing, time_limit } => {
            let start = faultlab::training::Start { time_limit, blind };
            cli::train::train(&dir, name.as_deref(), &from, &provider, allow_existing.as_deref(), start).await
        }
        Command::Answer { stage, answer, session } => cli::train::answer(session.session.as_deref(), stage.into(), &answer),
        Command::Hint { session } => cli::train::hint(session.session.as_deref()),
        Command::Check { session, wait, output } => cli::train::check(session.session.as_deref(), wait, output.output).await,
        Command::Solution { session, apply } => cli::train::solution(session.session.as_deref(), apply).await,
        Command::Reset { session } => cli::train::reset(session.session.as_deref()).await,
        Command::Sessions { output } => cli::train::sessions(output.output),
        Command::Scoreboard { out, watch } => cli::train::scoreboard(&out, watch).await,
        Command::Terminal { session, listen, shell, user, node_commands } => cli::train::terminal(session.session.as_deref(), listen, &shell, user.as_deref(), node_commands).await,
        Command::Snapshots { command } => cli::snapshots::snapshots(&dir, expectations, command),
        Command::Cleanup { force, older_than, sessions } => cli::cleanup::cleanup(force, older_than, sessions).await,
    }
}
