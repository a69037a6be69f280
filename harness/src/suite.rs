//! Running scenarios on a provider: what the CLI and the test suite share.

use std::path::PathBuf;
use std::time::Duration;

use thiserror::Error;

use crate::journal;
use crate::node::NodeProfile;
use crate::provider::existing::Existing;
use crate::needs::Needs;
use crate::provider::kind::{Arch, Kind, KindNeeds};
use crate::provider::{check_safety, Provider};
use crate::record::{Phase, Recorder};
use crate::report::{ScenarioReport, Status};
use crate::runner::{self, Run};
use crate::scenario::Loaded;
use crate::snapshot::{self, SnapshotResult};

/// Which provider to use.
#[derive(Clone, Debug)]
pub enum ProviderChoice {
    /// `cluster`: a kind cluster of the user's (`--cluster NAME`), used as it is; else faultlab makes one.
    Kind { arch: Arch, keep: bool, node_image: Option<String>, cluster: Option<String> },
    Existing { description: PathBuf, target: crate::provider::existing::KubeTarget },
}

impl ProviderChoice {
    pub fn name(&self) -> &'static str {
        match self {
            ProviderChoice::Kind { .. } => "kind",
            ProviderChoice::Existing { .. } => "existing",
        }
    }
}

/// How long `docker info` may take when looking for a cluster: a Docker daemon that hangs must not
/// hang `faultlab plan` with it.
pub const DOCKER_INFO_TIMEOUT: Duration = Duration::from_secs(10);

/// Why there is no cluster to run on, or no test bed for trials that need one.
#[derive(Debug, Error)]
pub enum SuiteError {
    #[error("no cluster: no test-bed description at {} (run ci/testbed/up) and no kind + Docker on PATH", bed.display())]
    NoCluster { bed: PathBuf },
    #[error("no cluster: no test-bed description at {} and kind is installed but Docker does not answer ({why})", bed.display())]
    DockerSilent { bed: PathBuf, why: String },
    #[error("no cluster: no test-bed description at {}, and this host's architecture has no kind node image", bed.display())]
    NoKindImage { bed: PathBuf },
    #[error("{what} run on the test bed or an existing cluster; kind is not covered")]
    NotOnKind { what: String },
}

/// Find a cluster to run on: the test bed's description if present, else kind with Docker. The error
/// says why there is none (the test suite reports it as the reason a scenario is ignored).
pub fn detect() -> Result<ProviderChoice, SuiteError> {
    let bed = crate::testbed::path();
    if bed.is_file() {
        return Ok(ProviderChoice::Existing { description: bed, target: Default::default() });
    }
    let on_path = |p: &str| std::env::var_os("PATH").is_some_and(|path| std::env::split_paths(&path).any(|d| d.join(p).is_file()));
    if !(on_path("kind") && on_path("docker")) {
        return Err(SuiteError::NoCluster { bed });
    }
    match crate::cmd::status_within(&["docker".into(), "info".into()], DOCKER_INFO_TIMEOUT) {
        Ok(0) => {
            let arch = Arch::host().ok_or(SuiteError::NoKindImage { bed })?;
            let node_image = std::env::var("FAULTLAB_KIND_NODE_IMAGE").ok().filter(|i| !i.is_empty());
            Ok(ProviderChoice::Kind { arch, keep: false, node_image, cluster: None })
        }
        Ok(status) => Err(SuiteError::DockerSilent { bed, why: format!("`docker info` exited with status {status}") }),
        Err(e) => Err(SuiteError::DockerSilent { bed, why: e.to_string() }),
    }
}

/// The kind provider for one run of `scenario`: its own cluster name, directory and logs directory.
pub fn kind_provider(scenario: &Loaded, arch: Arch, keep: bool, node_image: Option<String>) -> Kind {
    kind_provider_on(scenario, arch, keep, node_image, std::sync::Arc::new(crate::provider::LocalHost))
}

/// [`kind_provider`] for a cluster made for `needs` (a shared cluster's, see [`kind_cluster_groups`]).
fn kind_provider_for(scenario: &Loaded, needs: &Needs, arch: Arch, keep: bool, node_image: Option<String>) -> Kind {
    Kind { needs: KindNeeds::of(needs), ..kind_provider(scenario, arch, keep, node_image) }
}

/// `kind` on the user's own cluster `name` instead of one it makes (`--cluster NAME`): its own run
/// directory, the cluster's name, nothing created or deleted.
pub fn on_existing(mut kind: Kind, cluster: Option<&str>) -> Kind {
    if let Some(name) = cluster {
        let dir = format!("existing-{name}-{}", crate::names::random_suffix(5));
        kind.workdir = journal::state_dir().join("kind").join(&dir);
        kind.logs_dir = journal::state_dir().join("logs").join(&dir);
        kind.name = name.to_string();
        kind.existing = true;
    }
    kind
}

/// [`kind_provider`] on another host (a plan's).
fn kind_provider_on(scenario: &Loaded, arch: Arch, keep: bool, node_image: Option<String>, host: std::sync::Arc<dyn crate::provider::Host>) -> Kind {
    let name = Kind::new_name(scenario.name());
    let kind = Kind {
        host,
        workdir: PathBuf::new(),
        logs_dir: PathBuf::new(),
        name: String::new(),
        arch,
        configs_dir: crate::scenario::workspace_root().join("kind-configs"),
        keep,
        needs: KindNeeds::of(&scenario.scenario.fault.fault().needs()),
        node_image,
        image_info: Default::default(),
        existing: false,
        network_gateway: Default::default(),
        owner: Default::default(),
    };
    named(kind, &name)
}

/// `kind` making the cluster `name` instead: its name, its run directory and its logs directory.
pub fn named(mut kind: Kind, name: &str) -> Kind {
    kind.workdir = journal::state_dir().join("kind").join(name);
    kind.logs_dir = journal::state_dir().join("logs").join(name);
    kind.name = name.to_string();
    kind
}

pub use crate::lease::{node_state, node_state_of, state_difference, SharedClusters};
use crate::lease::{failed, pick_node, refused, Held, Lease, Stopped};
pub use crate::signals::interrupted;
use crate::signals::Interrupts;

/// Print what a run would do, without doing it.
/// What stopped a plan.
#[derive(Debug, thiserror::Error)]
pub enum PlanError {
    #[error(transparent)]
    Provider(#[from] crate::provider::ProviderError),
    #[error("planning {scenario}: {source}")]
    Body {
        scenario: String,
        #[source]
        source: Box<crate::runner::RunError>,
    },
}

pub async fn plan(scenario: &Loaded, choice: &ProviderChoice) -> Result<String, PlanError> {
    let rec = Recorder::default();
    rec.set_phase(Phase::Setup);
    let (node, teardown): (NodeProfile, Option<(Kind, crate::provider::Cluster)>) = match choice {
        ProviderChoice::Kind { arch, keep, node_image, cluster } => {
            if let Some(reach) = scenario.scenario.fault.fault().host_wide_on_kind() {
                rec.push(crate::record::Channel::Note, format!("on kind this fault reaches past the node container into the host: {reach}; a run needs --allow-host-wide"));
            }
            let mut kind = on_existing(kind_provider_on(scenario, *arch, *keep, node_image.clone(), std::sync::Arc::new(crate::provider::LocalHost)), cluster.as_deref());
            kind.host = std::sync::Arc::new(crate::provider::PlannedHost::new(kind.plan_answers()));
            let cluster = kind.provision(&rec).await?;
            rec.push(crate::record::Channel::Note, format!("platform {}: every node's status.nodeInfo names it (GET /api/v1/nodes, once the run has a client); events are compared with expectations/<platform>/<scenario>.snap", kind.planned_platform()));
            let node = pick_node(&cluster.nodes, None).expect("a plan's kind cluster has the node its host answers");
            (node, Some((kind, cluster)))
        }
        ProviderChoice::Existing { description, target } => {
            let node = if description.is_file() {
                let existing = Existing { description: description.clone(), target: target.clone() };
                let cluster = existing.provision(&rec).await?;
                pick_node(&cluster.nodes, None).unwrap_or_else(crate::testbed::placeholder_profile)
            } else {
                rec.push(crate::record::Channel::Note, format!("no description at {}: showing the test bed's layout", description.display()));
                crate::testbed::placeholder_profile()
            };
            (node, None)
        }
    };
    if let Some(why) = scenario.scenario.fault.fault().refusal(&node) {
        rec.push(crate::record::Channel::Note, format!("a run is refused here, before anything is made in the cluster: {why}"));
    } else {
        let mut run = Run::plan(scenario.clone(), node, rec.clone());
        run.body().await.map_err(|source| PlanError::Body { scenario: scenario.name().to_string(), source: Box::new(source) })?;
        run.teardown().await;
    }
    if let Some((kind, cluster)) = teardown {
        rec.push(crate::record::Channel::Note, "if the run failed (not when interrupted): export the cluster's logs".to_string());
        kind.collect_logs(&cluster, &kind.logs_dir, &rec).await?;
        kind.release(&cluster, &rec).await?;
    }
    Ok(format!("## {} ({})\n{}", scenario.name(), choice.name(), rec.render()))
}

/// How a run goes, beyond the scenario and the provider.
#[derive(Clone, Debug, Default)]
pub struct RunOptions {
    /// A context faultlab did not create, which the user allows (`--allow-existing`).
    pub allow_existing: Option<String>,
    /// Keep the fault in place this long after the symptom, before the fix (`--hold`).
    pub hold: Option<std::time::Duration>,
    /// On kind, run faults that reach past the node container into the host (`--allow-host-wide`).
    pub allow_host_wide: bool,
    /// Where the snapshots are (`--expectations`), instead of beside the scenario's set (see
    /// [`snapshot::Store`]); `FAULTLAB_EXPECTATIONS` when not given.
    pub expectations: Option<PathBuf>,
    /// The node to work on, by name (`faultlab run --jobs` gives each scenario one on a cluster of
    /// several nodes); none: the cluster's first node.
    pub node: Option<String>,
    /// The second node a run whose node fails holds (`faultlab run --jobs` on a shared cluster): its
    /// workload may move there only ([`crate::schedule::Scope::NodeFailure`]).
    pub spare_node: Option<String>,
    /// On kind, the needs of the cluster the scenario shares with others ([`kind_cluster_groups`]); none:
    /// its fault's own.
    pub cluster_needs: Option<Needs>,
    /// A scenario with no reviewed snapshot on the platform (`new`) fails instead of passing with a
    /// notice (`--strict-snapshots`, `FAULTLAB_STRICT_SNAPSHOTS`).
    pub strict_snapshots: bool,
}

/// The refusal of a fault that reaches past the node container on kind, unless `--allow-host-wide`.
/// Why a cluster of `nodes` nodes cannot run the scenario, if it cannot: a workload that moves to
/// another node needs one ([`crate::needs::Needs::moves_between_nodes`]).
pub fn nodes_refusal(scenario: &Loaded, nodes: usize) -> Option<String> {
    (scenario.scenario.fault.fault().needs().moves_between_nodes && nodes < 2).then(|| {
        format!(
            "fault {} moves the workload off its node to another, and the cluster lists {nodes} node{}: it needs two or more (the test bed: ci/testbed/up --nodes 2)",
            scenario.scenario.fault.name(),
            if nodes == 1 { "" } else { "s" }
        )
    })
}

pub fn host_wide_refusal(scenario: &Loaded, choice: &ProviderChoice, allow_host_wide: bool) -> Option<String> {
    let reach = scenario.scenario.fault.fault().host_wide_on_kind()?;
    match choice {
        ProviderChoice::Kind { .. } if !allow_host_wide => Some(format!(
            "refusing to run {} on kind: fault {} reaches past the node container into this host: {reach}. Pass --allow-host-wide if this host is yours to change, or run it on the test bed",
            scenario.name(),
            scenario.scenario.fault.name()
        )),
        _ => None,
    }
}

/// One part of a suite split into `of` parts (`--shard INDEX/OF`, from 1): with the scenarios in name
/// order, the part holds every `of`-th one from the `index`-th on. The split depends on the names only,
/// so every job of a CI matrix computes the same parts, and together they hold every scenario once.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Shard {
    pub index: usize,
    pub of: usize,
}

impl std::str::FromStr for Shard {
    type Err = String;

    fn from_str(text: &str) -> Result<Shard, String> {
        let form = || format!("{text:?} is not a shard: write INDEX/COUNT, for example 1/2 (the first of two parts)");
        let (i, n) = text.split_once('/').ok_or_else(form)?;
        let (index, of): (usize, usize) = (i.trim().parse().map_err(|_| form())?, n.trim().parse().map_err(|_| form())?);
        if of == 0 || index == 0 || index > of {
            return Err(format!("shard {text}: the index counts from 1 to the number of parts ({}), which is at least 1", of.max(1)));
        }
        Ok(Shard { index, of })
    }
}

impl Shard {
    /// This part of `scenarios` (in name order).
    pub fn take(self, mut scenarios: Vec<Loaded>) -> Vec<Loaded> {
        scenarios.sort_by(|a, b| a.name().cmp(b.name()));
        scenarios.into_iter().enumerate().filter(|(k, _)| k % self.of == self.index - 1).map(|(_, s)| s).collect()
    }
}

/// `faultlab run --budget`: why a scenario is not started once `elapsed` has reached the run's `budget`
/// (none while time is left). A scenario already running is never cut short: the budget says when to stop
/// starting new ones, so a caller with a hard deadline leaves room for the longest scenario after it.
pub fn over_budget(elapsed: std::time::Duration, budget: std::time::Duration) -> Option<String> {
    (elapsed >= budget).then(|| {
        format!(
            "not started: the run's time budget (--budget {}) was used up after {}",
            crate::duration::format(budget),
            crate::duration::format(std::time::Duration::from_secs(elapsed.as_secs()))
        )
    })
}

/// What `scenario` holds while it runs on `choice` ([`crate::schedule`]): its fault's reach and host
/// ports; on kind, the cluster it can share is the one made for the same needs: `cluster_needs` (its
/// group's, [`kind_cluster_groups`]) or its fault's own.
pub fn claim(scenario: &Loaded, choice: &ProviderChoice, cluster_needs: Option<&Needs>) -> crate::schedule::Claim {
    let fault = scenario.scenario.fault.fault();
    let mut claim = fault.claim();
    claim.budget = scenario.scenario.symptom.within.0 + scenario.scenario.recovery.within.0;
    // The host's disk only where the node's disk is a file of this machine's (not a VM's or an ssh node's).
    claim.host_disk = machine_claim(scenario, choice).host_disk;
    if let ProviderChoice::Kind { .. } = choice {
        let needs = cluster_needs.cloned().unwrap_or_else(|| fault.needs());
        claim.cluster_key = format!("{:?}", KindNeeds::of(&needs));
    }
    claim
}

/// What `scenario` holds on this machine beside other faultlab processes ([`crate::machine_lock`]): on
/// kind, and on a test bed whose nodes are network namespaces, the host's kernel (alone if the fault
/// lowers one of its limits), and the host's disk for the other faults that reach past the node (kind's
/// loop files, bounded and checked); its helpers' ports on 127.0.0.1 everywhere. Nodes in VMs or over ssh have
/// kernels of their own. A description that cannot be read counts as sharing this kernel.
pub fn machine_claim(scenario: &Loaded, choice: &ProviderChoice) -> crate::machine_lock::MachineClaim {
    let fault = scenario.scenario.fault.fault();
    let shares_kernel = match choice {
        ProviderChoice::Kind { .. } => true,
        ProviderChoice::Existing { description, .. } => crate::testbed::TestBed::read(description)
            .map(|bed| bed.nodes.iter().any(|n| !matches!(n.access(), Some(crate::node::NodeAccess::Ssh(_)))))
            .unwrap_or(true),
    };
    let needs = fault.needs();
    crate::machine_lock::MachineClaim {
        shares_kernel,
        host_wide: shares_kernel && needs.host_kernel,
        host_disk: shares_kernel && fault.fills_host_disk(),
        ports: needs.host_ports.iter().filter(|p| !p.on_node_address).map(|p| p.port).collect(),
    }
}

/// The places `faultlab run --jobs` spreads scenarios over: the test bed's nodes (from its description),
/// or on kind clusters of their own. A description that cannot be read gives one place of no name:
/// each run then says what is wrong with it, as without `--jobs`.
pub fn places(choice: &ProviderChoice) -> crate::schedule::Places {
    match choice {
        ProviderChoice::Kind { .. } => crate::schedule::Places::Clusters(1),
        ProviderChoice::Existing { description, .. } => {
            let nodes = crate::testbed::TestBed::read(description)
                .map(|bed| bed.nodes.into_iter().map(|n| crate::schedule::NodePlace { registry_address: n.registry.map(|r| r.listen), name: n.name }).collect())
                .unwrap_or_default();
            crate::schedule::Places::Nodes(nodes)
        }
    }
}

/// `--jobs` left out: what the platform allows. The test bed: one scenario per node (the namespace-only
/// ones double up on a node beside each other); kind: one cluster at a time per core and 8 GiB of
/// memory, at most 4 (a node container takes about one core while it starts and 1-2 GiB, but its
/// scenarios mostly wait on the cluster: every scenario on 2 cores, 2026-11-29, took 1015 s with two
/// clusters at once, against 1344 s of clusters and phases one after the other).
pub fn default_jobs(places: &crate::schedule::Places) -> usize {
    match places {
        crate::schedule::Places::Nodes(n) => n.len().max(1) * 2,
        crate::schedule::Places::Clusters(_) => {
            let cores = std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1);
            let mem_gib = std::fs::read_to_string("/proc/meminfo")
                .ok()
                .and_then(|m| m.lines().find(|l| l.starts_with("MemAvailable:")).and_then(|l| l.split_whitespace().nth(1)).and_then(|k| k.parse::<u64>().ok()))
                .map(|kib| kib / (1024 * 1024))
                .unwrap_or(0) as usize;
            cores.min(mem_gib / 8).clamp(1, 4)
        }
    }
}

/// The kind clusters of one `faultlab run --all`: the scenarios, reordered so that the members of a group
/// are next to each other (stable: the first scenario of each group keeps the group's place), each with
/// the needs of the cluster its group shares, so that [`SharedClusters`] creates one cluster per group.
/// - Scenarios whose faults need nothing of the cluster (see [`Needs::shapes_cluster`]) share a plain
///   one: no setting made for another fault touches what they show.
/// - Those that need it made differently (a local sandbox image, the static CPU manager, containerd on
///   a disk of its own, no image GC) share one made for all of them, as long as no two ask for the same
///   setting two ways ([`Needs::merged`]); a scenario that conflicts starts another group.
///
/// `--fresh-cluster`, and a run of one scenario, give each its own cluster made for its needs alone.
pub fn kind_cluster_groups(scenarios: Vec<Loaded>) -> Vec<(Loaded, Needs)> {
    let mut groups: Vec<(Needs, Vec<Loaded>)> = Vec::new();
    for s in scenarios {
        let own = s.scenario.fault.fault().needs();
        let joined = groups.iter_mut().find_map(|(cluster, members)| {
            let merged = (cluster.shapes_cluster() == own.shapes_cluster()).then(|| cluster.merged(&own)).flatten()?;
            Some((cluster, members, merged))
        });
        match joined {
            Some((cluster, members, merged)) => {
                *cluster = merged;
                members.push(s);
            }
            None => {
                let cluster = Needs { host_ports: Vec::new(), host_kernel: false, ..own };
                groups.push((cluster, vec![s]));
            }
        }
    }
    groups.into_iter().flat_map(|(cluster, members)| members.into_iter().map(move |s| (s, cluster.clone()))).collect()
}

/// Run one scenario end to end and report it, on a cluster of its own (kind) or the existing one.
pub async fn run(scenario: &Loaded, choice: &ProviderChoice, options: &RunOptions, rec: Recorder) -> ScenarioReport {
    run_with(scenario, choice, options, rec, None).await
}

/// [`run`], where a kind run may use (and leave) a shared cluster: take a [`Lease`] on a cluster,
/// connect, run the life cycle, give the lease back.
pub async fn run_with(scenario: &Loaded, choice: &ProviderChoice, options: &RunOptions, rec: Recorder, shared: Option<&mut SharedClusters>) -> ScenarioReport {
    let mut report = ScenarioReport::ignored(scenario.name(), "");
    report.provider = choice.name().into();
    report.status = Status::Failed;
    report.error = None;
    if let Some(refusal) = host_wide_refusal(scenario, choice, options.allow_host_wide) {
        return refused(report, Phase::Setup, refusal);
    }
    // Where the snapshots are, settled before anything is created.
    let store = match snapshot::Store::for_scenario(&scenario.path, options.expectations.as_deref()) {
        Ok(store) => store,
        Err(e) => return failed(report, Phase::Setup, e.to_string()),
    };
    let mut interrupts = Interrupts::listen();
    // What it holds on this machine beside other faultlab processes: the host shared while its cluster
    // is made (a kubelet that starts during another's host-wide fault would meet it too); a host-wide
    // fault then lets go and waits to hold it alone, so that others' runs do not wait out the making.
    let machine = machine_claim(scenario, choice);
    let making = crate::machine_lock::MachineClaim { host_wide: false, ..machine.clone() };
    let held = match hold_machine(&making, &rec, &mut interrupts).await {
        Ok(held) => held,
        Err(why) => return failed(report, Phase::Setup, why),
    };
    let (lease, shared) = match take_lease(scenario, choice, options, &rec, &mut interrupts, &mut report, shared).await {
        Ok(taken) => taken,
        Err(r) => return r,
    };
    report.platform = lease.cluster.platform.clone();
    report.node = pick_node(&lease.cluster.nodes, options.node.as_deref()).map(|n| n.name).unwrap_or_default();
    report.cluster_seconds = Some(lease.seconds);
    // On a shared cluster, the first node, and the safety check is kind's own (faultlab made it).
    let connecting = match shared {
        Some(_) => RunOptions { allow_existing: None, node: None, spare_node: None, ..options.clone() },
        None => options.clone(),
    };
    let moves = scenario.scenario.fault.fault().needs().moves_between_nodes;
    let held = if machine.host_wide {
        drop(held);
        hold_machine(&machine, &rec, &mut interrupts).await
    } else {
        Ok(held)
    };
    let (mut report, held) = match held {
        Err(why) => (failed(report, Phase::Setup, why), None),
        Ok(held) => match connect(lease.provider(), &lease.cluster, &connecting, moves, &rec, &mut interrupts).await {
            Ok((ready, platform)) => {
                drop(interrupts);
                report.platform = platform;
                (execute_on(scenario, ready, options, &rec, report, &store).await, Some(held))
            }
            Err(e) => (e.report(report, Phase::Setup), Some(held)),
        },
    };
    // Held until the cluster is given back: deleting it ends kubelets that share this kernel
    // ([`crate::machine_lock::tearing_down`]). A run that failed to take it holds nothing, as before.
    lease.end(scenario.name(), &mut report, shared, &rec).await;
    drop(held);
    report.record = rec.entries();
    report
}

/// Take what `claim` holds on this machine ([`crate::machine_lock`]), saying in the record how long it
/// waited if it did; or why not (interrupted, or the lock directory is not to be trusted).
async fn hold_machine(claim: &crate::machine_lock::MachineClaim, rec: &Recorder, interrupts: &mut Interrupts) -> Result<crate::machine_lock::Held, String> {
    let held = tokio::select! {
        held = crate::machine_lock::acquire(crate::machine_lock::dir(), claim.clone()) => held.map_err(|e| crate::home::error_chain(&e))?,
        name = interrupts.recv() => return Err(format!("interrupted by {name} while waiting for another faultlab process on this machine ({})", claim.describe())),
    };
    if let Some(note) = held.waited_note(claim) {
        rec.push(crate::record::Channel::Note, note);
    }
    Ok(held)
}

/// The lease for `scenario` on `choice`: on kind with a pool, the shared cluster of its needs; else a
/// cluster of its own. The pool comes back for [`Lease::end`].
async fn take_lease<'p>(
    scenario: &Loaded,
    choice: &ProviderChoice,
    options: &RunOptions,
    rec: &Recorder,
    interrupts: &mut Interrupts,
    report: &mut ScenarioReport,
    shared: Option<&'p mut SharedClusters>,
) -> Result<(Lease, Option<&'p mut SharedClusters>), ScenarioReport> {
    match (choice, shared) {
        (ProviderChoice::Kind { arch, keep, node_image, cluster: None }, Some(pool)) => {
            let needs = options.cluster_needs.clone().unwrap_or_else(|| scenario.scenario.fault.fault().needs());
            let make = || {
                let kind = kind_provider_for(scenario, &needs, *arch, *keep, node_image.clone());
                if KindNeeds::of(&needs) != KindNeeds::of(&scenario.scenario.fault.fault().needs()) {
                    rec.push(crate::record::Channel::Note, format!("kind cluster {} is made for every scenario of its group (shared): {}", kind.name, needs.describe()));
                }
                kind
            };
            let lease = Lease::shared(pool, &needs, make, rec, interrupts, report).await?;
            report.cluster = lease.kind_cluster();
            Ok((lease, Some(pool)))
        }
        (ProviderChoice::Kind { arch, keep, node_image, cluster }, _) => {
            let kind = on_existing(kind_provider(scenario, *arch, *keep, node_image.clone()), cluster.as_deref());
            report.cluster = Some(kind.name.clone());
            Ok((Lease::own(Held::Kind(Box::new(kind)), rec, interrupts, report).await?, None))
        }
        (ProviderChoice::Existing { description, target }, _) => {
            let existing = Existing { description: description.clone(), target: target.clone() };
            Ok((Lease::own(Held::Existing(existing), rec, interrupts, report).await?, None))
        }
    }
}

/// A cluster to run on, connected: what [`execute_on`] needs.
struct Ready {
    cluster: crate::provider::Cluster,
    client: kube::Client,
    node: NodeProfile,
}

/// Check that faults may go into the cluster, connect, ask the platform and pick the node.
/// `scenario_moves`: the scenario's workload moves off its node ([`Needs::moves_between_nodes`]).
async fn connect(provider: &dyn Provider, cluster: &crate::provider::Cluster, options: &RunOptions, scenario_moves: bool, rec: &Recorder, interrupts: &mut Interrupts) -> Result<(Ready, String), Stopped> {
    check_safety(cluster, options.allow_existing.as_deref()).map_err(|e| Stopped::refusal(e.to_string()))?;
    let client = tokio::select! {
        c = crate::kube_ops::connect(&cluster.kubeconfig, &cluster.context) => c.map_err(|e| e.to_string())?,
        name = interrupts.recv() => return Err(format!("interrupted by {name} while connecting to the cluster").into()),
    };
    // The platform names the snapshot directory: kind's comes from what the nodes report.
    let kube = crate::kube_ops::Kube::new(client.clone(), rec.clone());
    let platform = tokio::select! {
        p = provider.platform(cluster, &kube) => p.map_err(|e| e.to_string())?,
        name = interrupts.recv() => return Err(format!("interrupted by {name} while asking the nodes for the platform").into()),
    };
    let node = match &options.node {
        Some(name) => pick_node(&cluster.nodes, Some(name)).ok_or_else(|| format!("cluster of context {} has no node {name} (its nodes: {})", cluster.context, cluster.nodes.iter().map(|n| n.name.as_str()).collect::<Vec<_>>().join(", ")))?,
        // A workload that moves goes from the last node (kind: a worker, not the control plane) to another.
        None if scenario_moves => cluster.nodes.last().cloned().ok_or_else(|| format!("cluster of context {} lists no node", cluster.context))?,
        None => pick_node(&cluster.nodes, None).ok_or_else(|| format!("cluster of context {} lists no node", cluster.context))?,
    };
    Ok((Ready { cluster: cluster.clone(), client, node }, platform))
}

/// The life cycle on a connected cluster, and the snapshot.
async fn execute_on(scenario: &Loaded, ready: Ready, options: &RunOptions, rec: &Recorder, mut report: ScenarioReport, store: &snapshot::Store) -> ScenarioReport {
    let Ready { cluster, client, node } = ready;
    report.node = node.name.clone();
    if let Some(why) = scenario.scenario.fault.fault().refusal(&node) {
        return refused(report, Phase::Setup, format!("refusing to run {} on node {}: {why}", scenario.name(), node.name));
    }
    if let Some(why) = nodes_refusal(scenario, cluster.nodes.len()) {
        return refused(report, Phase::Setup, format!("refusing to run {}: {why}", scenario.name()));
    }
    let journals = match journal::journal_dir() {
        Ok(dir) => dir,
        Err(e) => return failed(report, Phase::Setup, e.to_string()),
    };
    let run = match Run::new(scenario.clone(), &cluster, node, client, &journals, rec.clone()) {
        Ok(mut r) => {
            r.hold = options.hold;
            r.spare = options.spare_node.clone().filter(|n| cluster.nodes.iter().any(|c| &c.name == n));
            r
        }
        Err(e) => return failed(report, Phase::Setup, e.to_string()),
    };
    report.namespace = run.namespace.clone();
    if let Some(name) = interrupted() {
        return failed(report, Phase::Setup, format!("interrupted by {name} before the run started"));
    }
    // A signal the runner received is the process's (crate::signals::interrupted) from here on.
    let (run, outcome) = runner::execute(run).await;
    report.timings = run.timings.clone();
    report.events = run.normalised_events();
    let withheld = run.withheld_events();
    report.timeline = run.timeline();
    report.notes.extend(run.dropped_notes());
    report.teardown_errors = outcome.teardown_errors.iter().map(|e| e.to_string()).collect();
    match outcome.result {
        Ok(()) => {
            let (snapshot, note) = store.check_held_back(&report.platform, scenario.name(), &report.events, &withheld);
            report.snapshot = snapshot;
            report.notes.extend(note);
            let teardown_ok = report.teardown_errors.is_empty();
            match verdict(&report.snapshot, teardown_ok, options.strict_snapshots, scenario.name(), &report.platform) {
                Ok(()) => report.status = Status::Passed,
                Err((phase, error)) => {
                    report.status = Status::Failed;
                    report.failed_phase = Some(phase);
                    report.error = Some(error);
                }
            }
            report
        }
        Err(e) => failed(report, outcome.phase, e.to_string()),
    }
}

/// The verdict of a run whose gates, fix and recovery held: a changed snapshot fails it (its error is
/// the snapshot's paragraph, which says what differs and where the file to review is); a new one passes
/// it, unless `strict`; then what teardown left behind fails it. The failure's phase and error.
pub fn verdict(snapshot: &SnapshotResult, teardown_ok: bool, strict: bool, scenario: &str, platform: &str) -> Result<(), (Phase, String)> {
    match snapshot {
        SnapshotResult::Changed(d) => return Err((Phase::Recovery, d.clone())),
        SnapshotResult::New(_) if strict => {
            return Err((Phase::Recovery, format!("no reviewed snapshot of {scenario} on {platform}, and --strict-snapshots fails a run without one")));
        }
        SnapshotResult::Matched | SnapshotResult::New(_) | SnapshotResult::Skipped(_) => {}
    }
    match teardown_ok {
        true => Ok(()),
        false => Err((Phase::Teardown, "teardown left something behind; run `faultlab cleanup`".into())),
    }
}

/// The test bed's description for trials that need it, or why there is none (the trial is then reported
/// ignored with this reason).
pub fn require_testbed(what: &str) -> Result<PathBuf, SuiteError> {
    match detect()? {
        ProviderChoice::Existing { description, .. } => Ok(description),
        ProviderChoice::Kind { .. } => Err(SuiteError::NotOnKind { what: what.to_string() }),
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn state_difference_names_each_changed_section_and_its_lines() {
        let made = "# routes\ndefault via 198.18.232.1 dev eth0\n# cpu_manager_state\n{\"policyName\":\"static\"}\n# images\na\nb\n";
        let now = "# routes\ndefault via 198.18.232.1 dev eth0\n# cpu_manager_state\n# images\na\nc\n# extra\nx\n";
        assert_eq!(
            state_difference(made, now),
            "# cpu_manager_state\n- {\"policyName\":\"static\"}\n# images\n- b\n+ c\n# extra (new section)\n+ x\n"
        );
        assert_eq!(state_difference(made, made), "");
        assert_eq!(state_difference("# a\n1\n", ""), "# a (section gone)\n- 1\n");
    }

    #[test]
    fn over_budget_stops_starting_scenarios_once_the_budget_is_used() {
        use std::time::Duration;
        assert_eq!(over_budget(Duration::from_secs(599), Duration::from_secs(600)), None);
        let why = over_budget(Duration::from_millis(600_400), Duration::from_secs(600)).unwrap();
        assert_eq!(why, "not started: the run's time budget (--budget 10m) was used up after 10m");
        assert!(over_budget(Duration::from_secs(0), Duration::ZERO).is_some(), "a zero budget starts nothing");
    }

    use super::*;

    fn scenario(name: &str) -> Loaded {
        crate::scenario::find(&crate::scenario::default_dir(), name).unwrap()
    }

    fn kind() -> ProviderChoice {
        ProviderChoice::Kind { arch: Arch::Amd64, keep: false, node_image: None, cluster: None }
    }

    #[test]
    fn node_state_is_every_faults_footprint_once() {
        let node = crate::testbed::tests::sample_profile();
        let probes = crate::faults::FaultSpec::footprint(&node);
        let titles: Vec<&str> = probes.iter().map(|p| p.title).collect();
        assert_eq!(
            titles,
            ["leaked CNI addresses", "CNI plugins moved aside", "kubelet extra flags", "cpu_manager_state", "routes", "images", "containerd disk", "duplicate sandboxes", "fs.inotify.max_user_instances", "registry drop rules", "local CAs", "runc moved aside"],
            "disk-full and pause-missing both look at the images: once"
        );
        let images = &probes[5].script;
        assert!(images.starts_with("ctr --address /run/faultlab/containerd/containerd.sock -n k8s.io images ls -q | sort"), "{images}");
    }

    #[test]
    fn faults_that_reach_the_host_are_refused_on_kind_unless_allowed() {
        for (name, touches) in [
            ("inotify-limit", "fs.inotify.max_user_instances is a limit per user namespace, and a kind node runs in the host's"),
            ("disk-full", "loop file in the node's /var, which is a Docker volume on the host's disk"),
        ] {
            let s = scenario(name);
            let refusal = host_wide_refusal(&s, &kind(), false).unwrap_or_else(|| panic!("{name} is refused on kind"));
            assert!(refusal.starts_with(&format!("refusing to run {name} on kind: fault {name} reaches past the node container into this host: ")), "{refusal}");
            assert!(refusal.contains(touches), "says what would be touched: {refusal}");
            assert!(refusal.contains("Pass --allow-host-wide if this host is yours to change"), "names the flag: {refusal}");
            assert_eq!(host_wide_refusal(&s, &kind(), true), None, "{name} runs with --allow-host-wide");
            // On the test bed (an existing cluster's description) nothing changes.
            let bed = ProviderChoice::Existing { description: "/var/lib/faultlab/testbed/testbed.yaml".into(), target: Default::default() };
            assert_eq!(host_wide_refusal(&s, &bed, false), None);
        }
    }

    #[test]
    fn a_run_holds_the_host_where_its_nodes_share_this_kernel_and_its_ports_everywhere() {
        use crate::machine_lock::MachineClaim;
        let fixtures = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/testbed");
        let bed = |file: &str| ProviderChoice::Existing { description: fixtures.join(file), target: Default::default() };
        let claim = |name: &str, choice: &ProviderChoice| machine_claim(&scenario(name), choice);
        let host = |host_wide, host_disk| MachineClaim { shares_kernel: true, host_wide, host_disk, ports: vec![] };
        assert_eq!(claim("inotify-limit", &kind()), host(true, false));
        assert_eq!(claim("inotify-limit", &bed("valid.yaml")), host(true, false));
        assert_eq!(claim("disk-full", &kind()), host(false, true), "a bounded file on the host's disk, one such at a time");
        assert_eq!(claim("configmap-missing", &kind()), host(false, false));
        // A node in a VM reached over ssh has a kernel of its own: only 127.0.0.1's ports are this machine's.
        assert_eq!(claim("inotify-limit", &bed("valid-ssh.yaml")), MachineClaim::default());
        let slow = claim("image-pull-slow", &bed("valid-ssh.yaml"));
        assert_eq!(slow.ports, vec![crate::faults::registry::BACKEND_PORT], "{slow:?}");
        assert!(!slow.shares_kernel);
        // A description that cannot be read is taken to share this kernel (the run then says what is wrong).
        assert!(claim("configmap-missing", &bed("no-such.yaml")).shares_kernel);
    }

    #[test]
    fn shards_split_by_name_order_and_together_hold_every_scenario_once() {
        let all: Vec<Loaded> = ["storageclass-missing", "cni-broken", "pause-missing", "configmap-missing", "cpu-count"].iter().map(|n| scenario(n)).collect();
        let names = |v: Vec<Loaded>| v.iter().map(|s| s.name().to_string()).collect::<Vec<_>>();
        let one: Shard = "1/2".parse().unwrap();
        let two: Shard = "2/2".parse().unwrap();
        assert_eq!(names(one.take(all.clone())), ["cni-broken", "cpu-count", "storageclass-missing"]);
        assert_eq!(names(two.take(all.clone())), ["configmap-missing", "pause-missing"]);
        assert_eq!(names("1/1".parse::<Shard>().unwrap().take(all.clone())).len(), 5);
        assert!(names("5/5".parse::<Shard>().unwrap().take(all.clone())) == ["storageclass-missing"]);
        assert!("6/5".parse::<Shard>().is_err() && "6/5".parse::<Shard>().unwrap_err().contains("from 1 to the number of parts (5)"));
        for bad in ["0/2", "1/0", "a/b", "1", "", "1/2/3", "-1/2"] {
            assert!(bad.parse::<Shard>().is_err(), "{bad:?}");
        }
        assert_eq!("1/x".parse::<Shard>().unwrap_err(), "\"1/x\" is not a shard: write INDEX/COUNT, for example 1/2 (the first of two parts)");
    }

    #[test]
    fn kind_groups_a_plain_cluster_and_one_made_for_every_fault_that_needs_it_made_differently() {
        let names = ["cni-broken", "cpu-count", "configmap-missing", "pause-missing", "default-route", "disk-full", "storageclass-missing", "memory-limit-unit"];
        let grouped = kind_cluster_groups(names.iter().map(|n| scenario(n)).collect());
        let order: Vec<&str> = grouped.iter().map(|(s, _)| s.name()).collect();
        assert_eq!(
            order,
            ["cni-broken", "configmap-missing", "default-route", "storageclass-missing", "memory-limit-unit", "cpu-count", "pause-missing", "disk-full"],
            "each group where its first member was, its members in their order"
        );
        let (plain, special) = grouped.split_at(5);
        for (s, needs) in plain {
            assert!(!needs.shapes_cluster(), "{}: a plain cluster, not one made for another fault ({})", s.name(), needs.describe());
        }
        // A static CPU manager, a local sandbox image and a containerd disk: one cluster made for the three.
        let made = &special[0].1;
        for (s, needs) in special {
            assert_eq!(needs, made, "{}: the group's cluster", s.name());
            let own = s.scenario.fault.fault().needs();
            assert_eq!(own.merged(made).as_ref(), Some(made), "{}: the cluster meets its own needs", s.name());
        }
        assert!(made.static_cpu_manager.is_some() && made.local_sandbox_image.is_some() && made.containerd_disk_mib.is_some() && made.no_image_gc, "{}", made.describe());
        // One claim key per group: the scheduler keeps a slot's cluster for the next of its group.
        let keys: std::collections::BTreeSet<String> = grouped.iter().map(|(s, n)| claim(s, &kind(), Some(n)).cluster_key).collect();
        assert_eq!(keys.len(), 2);
        // Without a group (--fresh-cluster, one scenario) a scenario's cluster is made for its own needs.
        assert_ne!(claim(&scenario("cpu-count"), &kind(), None).cluster_key, claim(&scenario("disk-full"), &kind(), None).cluster_key);
        // A single group stays in its order.
        let same: Vec<String> = kind_cluster_groups(vec![scenario("storageclass-missing"), scenario("configmap-missing")]).iter().map(|(s, _)| s.name().to_string()).collect();
        assert_eq!(same, ["storageclass-missing", "configmap-missing"]);
    }

    #[test]
    fn faults_that_stay_in_the_node_are_not_refused() {
        for name in ["pause-missing", "configmap-missing", "storageclass-missing", "default-route", "cpu-count", "duplicate-container"] {
            let s = scenario(name);
            assert_eq!(s.scenario.fault.fault().host_wide_on_kind(), None, "{name}");
            assert_eq!(host_wide_refusal(&s, &kind(), false), None, "{name}");
        }
    }

    /// The verdict: gates, fix and recovery held (they are not in question here); a changed snapshot
    /// fails, a new one passes unless strict (then it fails naming the scenario and the platform), and
    /// what teardown left behind fails.
    #[rstest::rstest]
    #[case::matched(SnapshotResult::Matched, true, false, None)]
    #[case::matched_strict(SnapshotResult::Matched, true, true, None)]
    #[case::new(SnapshotResult::New("none yet".into()), true, false, None)]
    #[case::new_strict(SnapshotResult::New("none yet".into()), true, true, Some((Phase::Recovery, "no reviewed snapshot of web on p, and --strict-snapshots fails a run without one")))]
    #[case::changed(SnapshotResult::Changed("differs".into()), true, false, Some((Phase::Recovery, "differs")))]
    #[case::changed_strict(SnapshotResult::Changed("differs".into()), true, true, Some((Phase::Recovery, "differs")))]
    #[case::changed_and_teardown(SnapshotResult::Changed("differs".into()), false, false, Some((Phase::Recovery, "differs")))]
    #[case::new_and_teardown(SnapshotResult::New("none yet".into()), false, false, Some((Phase::Teardown, "teardown left something behind; run `faultlab cleanup`")))]
    #[case::matched_and_teardown(SnapshotResult::Matched, false, true, Some((Phase::Teardown, "teardown left something behind; run `faultlab cleanup`")))]
    fn the_verdict_takes_the_snapshots_status_and_strict(#[case] snapshot: SnapshotResult, #[case] teardown_ok: bool, #[case] strict: bool, #[case] failed: Option<(Phase, &str)>) {
        let got = verdict(&snapshot, teardown_ok, strict, "web", "p");
        assert_eq!(got.as_ref().err().map(|(p, e)| (*p, e.as_str())), failed);
    }
}
