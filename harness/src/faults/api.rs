//! The Fault API: what a fault is ([`Fault`], [`Fix`]), what it works with ([`Ctx`]), and what it
//! says of itself ([`Reach`], [`Presence`], [`Probe`], [`WorkloadRef`]). Each fault's file uses this
//! module, never the list of faults above it (`faults/mod.rs`).

use std::sync::Arc;

use async_trait::async_trait;
use thiserror::Error;

use super::steps;
use crate::check::Problem;
use crate::cmd::{Ask, Cmd, CmdError, Output};
use crate::cri::SandboxListJson;
use crate::gates::Target;
use crate::journal::{Journal, JournalError, Undo};
use crate::kube_ops::{Kube, KubeError};
use crate::node::{ContainerdConfig, Executor, Node, NodeProfile};
use crate::observe::Observe;
use crate::record::{Channel, Recorder};
use crate::vars::Vars;

#[derive(Debug, Error)]
pub enum FaultError {
    #[error("{step}: {source}")]
    Node {
        step: String,
        #[source]
        source: Box<CmdError>,
    },
    #[error("{step}: {source}")]
    Api {
        step: String,
        // Boxed, as the command's error is: every step's result carries this type.
        #[source]
        source: Box<KubeError>,
    },
    #[error("recording the undo failed, so the fault was not injected: {0}")]
    Journal(#[from] JournalError),
    #[error("fault {fault} has no fix step {step:?}; it offers: {}", offered.join(", "))]
    UnknownStep { fault: &'static str, step: String, offered: &'static [&'static str] },
    #[error("{step}: {message}")]
    Check { step: String, message: String },
}

/// `crictl pods -o json` output, read; anything else is a check error naming `step`.
pub fn parse_sandboxes(step: &str, stdout: &str) -> Result<SandboxListJson, FaultError> {
    serde_json::from_str(stdout)
        .map_err(|e| FaultError::Check { step: step.into(), message: format!("cannot read `crictl pods -o json` output ({e}): {:?}", stdout.trim()) })
}

/// What [`Ctx::containerd_config`] asks: the node's containerd config (a plan answers it).
pub const CONTAINERD_CONFIG: Ask = Ask("containerd-config");

/// The root-only directory on a node under which faults keep their work directories (pause-missing
/// unpacks its node package there, a registry push keeps its login there): never /tmp (on the test bed
/// node 1 shares the host's /tmp, where any local user could plant a `*.tar` for root to import). Each
/// use makes a directory of its own in it, fresh, and removes it after; the directory itself stays (runs
/// side by side use it; `ci/testbed/down` removes it from the test bed's host).
pub const WORK_PARENT: &str = "/var/lib/faultlab-work";

/// The shell that makes `dir` (in `parent`) fresh and private, and fails if `parent` is not root's own
/// directory of mode 0700 (a symbolic link or another owner's directory is refused).
pub fn fresh_private_dir(parent: &str, dir: &str) -> String {
    format!(
        "mkdir -p -m 0700 {parent} && test ! -L {parent} && test \"$(stat -c %u:%a {parent})\" = 0:700 \
         || {{ echo \"{parent} is not root's own directory of mode 0700: not using it\" >&2; exit 1; }}; \
         rm -rf {dir} && mkdir -m 0700 {dir}"
    )
}

/// What a fault works with: the node, this host, the API, the gates, the journal, the run's namespace
/// and target. A plan gives the same context over scripted backends, so faults have no plan branches.
pub struct Ctx {
    pub node: Node,
    /// Runs commands on this machine (on kind, the Docker host the node containers share).
    pub host: Arc<dyn Executor>,
    pub kube: Kube,
    /// Waits on the cluster's nodes, claims and pods.
    pub observe: Arc<dyn Observe>,
    pub journal: Journal,
    pub namespace: String,
    pub target: Target,
    pub vars: Vars,
}

impl Ctx {
    pub fn rec(&self) -> &Recorder {
        self.kube.recorder()
    }

    /// A note in the record: what the next commands are for.
    pub fn note(&self, text: impl Into<String>) {
        self.rec().push(Channel::Note, text);
    }

    /// Sleep `d` between two looks of a polling loop at the cluster or the node: the run counts it as
    /// waiting on the cluster, not as its own time (see [`Observe::pause`]).
    pub async fn pause(&self, d: std::time::Duration) {
        self.observe.pause(d).await;
    }

    /// Run a command on the node; failure is an error naming `step`.
    pub async fn run(&self, step: &str, cmd: Cmd) -> Result<Output, FaultError> {
        self.rec().push(Channel::Node, crate::cmd::shell_join(&self.node.host_argv(&cmd)));
        self.node.run(&cmd).await.map_err(|source| FaultError::Node { step: step.into(), source: Box::new(source) })
    }

    /// The node's containerd config, read from the node (`cat` of the file its profile names) and
    /// parsed in the file's own version; a file that does not parse is a check error naming `step`,
    /// the file and the field. Every fault that acts on containerd's settings reads them here.
    pub async fn containerd_config(&self, step: &str) -> Result<ContainerdConfig, FaultError> {
        let file = &self.node.profile.containerd.config;
        let text = self.run(step, Cmd::new(["cat", "--", file.as_str()]).asks(CONTAINERD_CONFIG)).await?.stdout;
        ContainerdConfig::parse(file, &text).map_err(|e| FaultError::Check { step: step.into(), message: e.to_string() })
    }

    /// The node's pod sandboxes as `crictl pods ARGS... -o json` lists them (`ask`: what a plan
    /// answers in the runtime's place); output that does not read as that list is a check error naming
    /// `step`. Every fault that looks at the node's sandboxes reads them here.
    pub async fn sandboxes(&self, step: &str, args: &[&str], ask: Ask) -> Result<SandboxListJson, FaultError> {
        let cmd = self.node.profile.crictl(args.iter().copied().chain(["-o", "json"])).asks(ask);
        parse_sandboxes(step, &self.run(step, cmd).await?.stdout)
    }

    /// Run a command on the node and return its output whatever its exit status.
    pub async fn probe(&self, step: &str, cmd: Cmd) -> Result<Output, FaultError> {
        self.rec().push(Channel::Node, crate::cmd::shell_join(&self.node.host_argv(&cmd)));
        self.node.probe(&cmd).await.map_err(|source| FaultError::Node { step: step.into(), source: Box::new(source) })
    }

    /// Run a command on this machine rather than on the node; failure is an error naming `step`.
    pub async fn run_on_host(&self, step: &str, cmd: Cmd) -> Result<Output, FaultError> {
        self.rec().push(Channel::Host, cmd.shell_line());
        self.host.run(&cmd.argv, &cmd, false).await.map_err(|source| FaultError::Node { step: step.into(), source: Box::new(source) })
    }

    /// Keep what the fault learnt (a route, a count) in the run's journal, so every phase and every
    /// process that opens the run (`faultlab solution --apply`) sees the same value. `key` names it
    /// within the fault.
    pub fn keep<T: serde::Serialize>(&self, key: &str, state: &T) -> Result<(), FaultError> {
        let value = serde_json::to_value(state).expect("fault state serialises");
        self.journal.set_state(key, value)?;
        Ok(())
    }

    /// What the fault kept under `key`, if anything (and if it still reads as `T`).
    pub fn kept<T: serde::de::DeserializeOwned>(&self, key: &str) -> Option<T> {
        self.journal.state(key).and_then(|v| serde_json::from_value(v).ok())
    }

    /// Record, before the change, a node command that undoes it.
    pub fn undo_on_node(&self, what: &str, cmd: Cmd) -> Result<(), FaultError> {
        self.journal.record(what, Undo::Node { access: self.node.access.clone(), cmd })?;
        Ok(())
    }

    /// Record, before creating it, that a cluster-wide object must be deleted at teardown.
    pub fn undo_by_deleting(&self, api_version: &str, kind: &str, name: &str) -> Result<(), FaultError> {
        let undo = Undo::DeleteObject { api_version: api_version.into(), kind: kind.into(), namespace: None, name: name.into() };
        self.journal.record(format!("delete {kind} {name}"), undo)?;
        Ok(())
    }

    /// Delete `object` (as read from the API) from namespace `ns`, or the cluster, after journalling
    /// its re-creation: the undo at teardown, and what [`Ctx::recreate`] writes again (in any process).
    pub async fn delete_restorably(&self, step: &str, ns: Option<&str>, object: &serde_json::Value) -> Result<(), FaultError> {
        let copy = crate::kube_ops::restorable(object);
        let (api_version, kind) = (copy["apiVersion"].as_str().unwrap_or_default(), copy["kind"].as_str().unwrap_or_default());
        let name = copy["metadata"]["name"].as_str().unwrap_or_default().to_string();
        let ar = crate::kube_ops::resource(api_version, kind);
        self.journal.record(format!("re-create {kind} {name}"), Undo::CreateObject { namespace: ns.map(str::to_owned), object: copy.clone() })?;
        self.kube.delete_dynamic(&ar, ns, &name).await.map_err(Ctx::api_err(step))
    }

    /// Create again the objects of `kind` that [`Ctx::delete_restorably`] deleted (those named `name`,
    /// if given), as they were; creating one that exists succeeds.
    pub async fn recreate(&self, step: &str, kind: &str, name: Option<&str>) -> Result<(), FaultError> {
        for (ns, object) in self.journal.recreated(kind) {
            if name.is_none_or(|n| object["metadata"]["name"] == n) {
                self.kube.create_object(ns.as_deref(), object).await.map_err(Ctx::api_err(step))?;
            }
        }
        Ok(())
    }

    /// Delete the target pods so their controller makes new ones (a restart, as `kubectl delete pod` does).
    pub async fn restart_target(&self, step: &str) -> Result<(), FaultError> {
        self.kube
            .delete_pods(&self.namespace, &self.target.selector)
            .await
            .map_err(|source| FaultError::Api { step: step.into(), source: Box::new(source) })
    }

    pub fn api_err(step: &str) -> impl FnOnce(KubeError) -> FaultError + '_ {
        move |source| FaultError::Api { step: step.into(), source: Box::new(source) }
    }
}

/// An object a fault acts on, which the workload's manifests must create.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WorkloadRef {
    /// The fault parameter that names it (`configMap`), or empty if the fault picks it itself.
    pub field: &'static str,
    /// Its kind (`ConfigMap`).
    pub kind: &'static str,
    pub name: String,
}

/// A documented fault.
#[async_trait]
pub trait Fault: Send + Sync {
    /// Check the fault's parameters before anything runs: each out of its real range (kernel limits,
    /// CPU counts, quantities) is a [`Problem`] at the parameter's field name (`headroom`), which the
    /// scenario loader places under `fault.<name>` and locates in the file. Default: nothing to check.
    fn check(&self) -> Vec<Problem> {
        Vec::new()
    }

    /// The parameters' problems as the error of `step`: a run refuses what [`Fault::check`] refuses,
    /// so a fault built without the loader (a test, a library user) cannot write a value the node,
    /// the kernel or the API cannot take. Faults call it first in each step that uses a parameter.
    fn refuse_bad_parameters(&self, step: &str) -> Result<(), FaultError> {
        let problems = self.check();
        if problems.is_empty() {
            return Ok(());
        }
        let message = problems.iter().map(ToString::to_string).collect::<Vec<_>>().join("; ");
        Err(FaultError::Check { step: step.into(), message })
    }

    /// Objects the fault acts on that the scenario's workload must create (the ConfigMap it deletes):
    /// the loader checks that the workload's manifests have them, once `check` finds the parameters
    /// sound. Default: none.
    fn workload_refs(&self) -> Vec<WorkloadRef> {
        Vec::new()
    }

    /// What the fault needs from the platform (a local sandbox image, the static CPU manager, a disk of
    /// containerd's own, ...), which each platform provides in its own way (default: nothing).
    fn needs(&self) -> crate::needs::Needs {
        Default::default()
    }

    /// Why the fault cannot run on `node` as its platform made it (a part the node lacks), if it cannot:
    /// the run is reported refused before anything is made in the cluster, and a plan stops there with
    /// the reason (default: it can).
    fn refusal(&self, _node: &NodeProfile) -> Option<String> {
        None
    }

    /// Get the node ready before the workload starts (default: nothing).
    async fn prepare(&self, _ctx: &Ctx) -> Result<(), FaultError> {
        Ok(())
    }

    /// Journal the undo, then break the node or the workload.
    async fn inject(&self, ctx: &Ctx) -> Result<(), FaultError>;

    /// What a later process of a training session (`faultlab check`) runs for the fault while it lives,
    /// started before it waits on the recovery: the part of the platform the fault brought with it that
    /// the cluster needs to recover (volume-multi-attach: its CSI driver's controller half, without
    /// which no volume is attached). Default: nothing.
    fn resume(&self, _ctx: &Ctx) {}

    /// The run's teardown has undone what the fault did: stop what [`Fault::prepare`], `inject`, a fix
    /// or [`Fault::resume`] started for the run in this process (volume-multi-attach: its CSI driver's
    /// controller half), which would otherwise go on against a cluster that may be deleted next.
    /// Default: nothing.
    fn end(&self, _ctx: &Ctx) {}

    /// Is the fault itself in place, on the node or in the API (not its symptom)? One check, read both
    /// ways: after `inject` it must be [`Presence::Present`], and `faultlab check` tells a real fix from
    /// a workaround by it not being so. Default: [`Presence::Unknown`] (the scenario's gates decide).
    async fn present(&self, _ctx: &Ctx) -> Result<Presence, FaultError> {
        Ok(Presence::Unknown)
    }

    /// How far the fault reaches beyond the run's namespace (default: the node). A kind node shares the
    /// host's kernel and, without user namespaces, its init user namespace: a per-user-namespace sysctl
    /// is the host's own, a file the node writes lands on the host's disk. A fault that reaches past
    /// the node container into the host says how ([`Reach::Host`]); it runs on kind only with
    /// `--allow-host-wide`, and `show` and `plan` say so.
    fn reach(&self) -> Reach {
        Reach::Node
    }

    /// What the node answers in a plan, where nothing runs: (what a command asks, its output), for a
    /// run in `namespace`. Each command whose output the fault reads names what it asks
    /// (`Cmd::asks(ASK)`, an [`Ask`] constant of the fault's), and its answer is keyed by that, never by
    /// what the command line contains. A plan runs the same code as a run against these answers
    /// (default: every command succeeds with no output), so the fault needs no branch of its own for plans.
    fn plan_answers(&self, _node: &NodeProfile, _namespace: &str) -> Vec<(Ask, Output)> {
        Vec::new()
    }

    /// What the API answers a plan's reads: (the end of an object's or a collection's path, the object,
    /// or for a list the objects), so a plan runs the same code as a run (default: nothing exists).
    fn plan_api_answers(&self, _target: &Target) -> Vec<(String, serde_json::Value)> {
        Vec::new()
    }

    /// What the fault may change on a node, as probes whose output must be the same before and after a
    /// run (the scenario trials compare them: equal means the node was restored). Default: nothing on
    /// the node (a fault that acts through the API only).
    fn footprint(_node: &NodeProfile) -> Vec<Probe>
    where
        Self: Sized,
    {
        Vec::new()
    }

}

/// How far a fault reaches beyond the run's own namespace.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Reach {
    /// Objects in the run's namespace only, through the API.
    Namespace,
    /// The node: its files, processes, runtime and network namespace (on kind: the node container).
    Node,
    /// The node fails (not Ready for minutes): the node, the pods the node lifecycle controller evicts
    /// from it (on a shared cluster only the run's own, since the scheduler keeps the node for it), and
    /// the node the workload moves to.
    NodeFailure,
    /// Objects of the whole cluster (every StorageClass), and the node.
    Cluster,
    /// On kind, past the node container into the host, and how.
    Host(String),
}

impl dyn Fault + '_ {
    /// On kind, how the fault reaches past the node container into the host, if it does.
    pub fn host_wide_on_kind(&self) -> Option<String> {
        match self.reach() {
            Reach::Host(how) => Some(how),
            _ => None,
        }
    }

    /// Does it reach the host only through a file of bounded size on the host's disk (kind's disk
    /// faults: containerd's disk is a loop file), not through a limit of the host's kernel?
    pub fn fills_host_disk(&self) -> bool {
        matches!(self.reach(), Reach::Host(_)) && !self.needs().host_kernel
    }

    /// What a run of this fault holds while it runs, for `faultlab run --jobs` ([`crate::schedule`]):
    /// its reach and its host ports (the cluster key is the platform's to say: kind's needs). One that
    /// lowers a limit of the host's kernel is host-wide; one that fills a disk that is a file on the
    /// host breaks only its node, and holds the host's disk ([`crate::schedule::Claim::host_disk`]).
    pub fn claim(&self) -> crate::schedule::Claim {
        use crate::schedule::Scope;
        let needs = self.needs();
        let host_disk = self.fills_host_disk();
        let scope = match self.reach() {
            Reach::Namespace => Scope::Namespace,
            Reach::Node => Scope::Node,
            Reach::NodeFailure => Scope::NodeFailure,
            Reach::Cluster => Scope::Cluster,
            Reach::Host(_) if host_disk => Scope::Node,
            Reach::Host(_) => Scope::Host,
        };
        crate::schedule::Claim { scope, host_ports: needs.host_ports, host_disk, cluster_key: String::new(), budget: std::time::Duration::ZERO }
    }

    /// Does the fault act on more than its namespace (so one training session at a time per node)?
    pub fn touches_node(&self) -> bool {
        self.reach() != Reach::Namespace
    }
}

/// A read-only look at part of a node: a title and a shell command whose output is compared.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Probe {
    pub title: &'static str,
    pub script: String,
}

impl Probe {
    pub fn new(title: &'static str, script: impl Into<String>) -> Probe {
        Probe { title, script: script.into() }
    }
}

/// What [`Fault::present`] found, with what it saw, in words for the record and for trainees.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Presence {
    /// The fault cannot tell: the scenario's gates decide.
    Unknown,
    /// The fault is in place (`the node has no default route`).
    Present(String),
    /// The fault is gone (`the node has default via 198.18.213.1 dev fl-node`).
    Absent(String),
}

/// A fault's documented fix, step by step.
#[async_trait]
pub trait Fix: Fault {
    /// The steps, in the document's order: an enum whose serde names scenario files give in
    /// `fix[].step` (see [`steps`]).
    type Step: steps::Steps;

    /// Apply one documented fix step. Idempotent: a step whose effect is already there succeeds.
    async fn fix(&self, step: Self::Step, ctx: &Ctx) -> Result<(), FaultError>;
}

#[cfg(test)]
pub(crate) mod testing {
    //! A context over a fake executor and a dry API, for argv-plan tests.
    use super::*;
    use crate::node::FakeExecutor;

    pub fn ctx() -> (Ctx, Arc<FakeExecutor>) {
        let fake = FakeExecutor::new();
        let profile = crate::testbed::tests::sample_profile();
        let node = Node::new(profile.clone(), profile.access().unwrap(), fake.clone());
        let rec = Recorder::default();
        let ctx = Ctx {
            vars: Vars::new("fl-test", &profile),
            node,
            host: fake.clone(),
            kube: Kube::dry(rec.clone()),
            observe: Arc::new(crate::observe::Planned { rec }),
            journal: Journal::in_memory("test"),
            namespace: "fl-test".into(),
            target: Target { selector: "app=web".into(), claim: None },
        };
        (ctx, fake)
    }

    /// A plan's context for `fault`: nothing runs, and the node and the API answer from the fault's
    /// plan answers, as in `faultlab plan`.
    pub fn plan_ctx(fault: &dyn Fault) -> (Ctx, Arc<FakeExecutor>) {
        let (mut ctx, fake) = ctx();
        for (ask, output) in fault.plan_answers(&ctx.node.profile, &ctx.namespace) {
            fake.answer(ask, output);
        }
        ctx.kube = Kube::scripted(ctx.rec().clone(), fault.plan_api_answers(&ctx.target));
        (ctx, fake)
    }
}
