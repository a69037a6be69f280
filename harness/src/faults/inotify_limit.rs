//! inotify-limit: fs.inotify.max_user_instances is too low for a workload that needs inotify.
//!
//! Source: DaoCloud mspider troubleshooting "创建网格时一直处于“创建中”", case 4: "inotify watcher limit
//! problems", the remote-ckube log says `panic: too many open files`. Fix: 修改
//! fs.inotify.max_user_instances = 65535.
//!
//! The limit is per user, and the sysctl is per user namespace: pods, kubelet, containerd and the
//! controllers all run as root in the init user namespace, on kind as on the test bed, so the limit they
//! share is the host's (on kind the fault therefore needs `--allow-host-wide`). The fault reads the value
//! and the number of inotify instances root holds (on kind: every root process of the host, counted from
//! the host's /proc, where faultlab runs), journals the original value first, and sets the limit just
//! above what is in use (`headroom` more), so the workload's instances fail and the node's daemons keep
//! theirs (at 2, a kubelet restart dies; testbed notes). Teardown writes the original value back
//! whatever happens.
//!
//! Root's other processes come and go while the fault holds (on kind and on the test bed, every root
//! process of the host: another cluster's control plane restarting, a test bed stopping beside it), and
//! each instance they give back is one more for the workload: four, and its six watchers start. So a
//! keeper ([`InotifyLimit::keep`]) in faultlab's process counts again every half second and lowers the limit
//! with what was given back, never raising it, until the fix, the teardown, or someone else sets it.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::api::{Ctx, Fault, FaultError, Fix, Presence, Probe, Reach};
use crate::check::{range, Problem, SYSCTL_INT_MAX};
use crate::cmd::{Ask, Cmd, Output};
use crate::node::{Executor, Node, NodeProfile};
use crate::record::{Channel, Recorder};

pub const SYSCTL: &str = "fs.inotify.max_user_instances";
const PROC_PATH: &str = "/proc/sys/fs/inotify/max_user_instances";

// What the fault reads (a plan answers these): the instances root holds, and the limit.
const INSTANCES: Ask = Ask("inotify-instances");
const LIMIT: Ask = Ask("inotify-limit");
const LOWERED: Ask = Ask("inotify-lowered");
/// The step every count of root's instances is named by in an error.
const COUNT_STEP: &str = "count-inotify-instances";

/// How often the keeper counts root's instances again ([`InotifyLimit::keep`]).
/// Half a second: the workload's container tries its watchers a second after it starts, so a count
/// every second could miss what was given back in between (one `find` over the host's processes).
pub const KEEP_PERIOD: Duration = Duration::from_millis(500);
/// How long the keeper keeps at it at most: the symptom's wait (2 minutes in the scenario) and the
/// fix's, with room to spare. After that the limit stays as the keeper last left it.
pub const KEEP_FOR: Duration = Duration::from_secs(300);
/// After the keeper lowers the limit, how long it looks for a pod of the workload that runs Ready: one
/// whose container started its watchers with what was given back, before the lowering. It restarts the
/// workload then, so that the new pod meets the lowered limit (at most [`MAX_RESTARTS`] times).
pub const DRIFT_WATCH: Duration = Duration::from_secs(15);
/// The most times the keeper restarts the workload.
pub const MAX_RESTARTS: u32 = 3;
/// The lock, on the node, that the keeper's lowering and the undo's restore both take, so that no
/// lowering lands after the restore (one reads the limit and writes it; the other only writes): the
/// limit's own file (`flock` works on it as on any file), so no file of faultlab's is made or left.
pub const LOCK: &str = PROC_PATH;
/// Lower the limit (`$1`, the file) from `$2` to `$3` only if it still reads `$2`: `lowered`, or
/// `changed` (someone else set it: the fix, a person, the undo).
const LOWER_IF_STILL: &str = "if [ \"$(cat \"$1\")\" = \"$2\" ]; then printf '%s\\n' \"$3\" >\"$1\" && echo lowered; else echo changed; fi";

fn default_value() -> u64 {
    65535
}

fn default_headroom() -> u64 {
    2
}

/// The lowest `value` the fix may set: the kernel's own default for the sysctl. A "fix" below it would
/// leave root's daemons fewer instances than a freshly booted node gives them (at 2, a kubelet restart
/// dies; testbed notes), and on kind it is the host's limit.
pub const MIN_VALUE: u64 = 128;

/// The largest `headroom`: the lowered limit (instances in use plus the headroom) must stay below the
/// limit the node has, or lowering does not lower it; nodes raise the kernel's 128 to about 1024 at
/// most before such a fault, and a workload that needs more than 1024 instances is not one that breaks
/// for want of a few.
pub const MAX_HEADROOM: u64 = 1024;

#[derive(Clone, Debug, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct InotifyLimit {
    /// The value the documented fix sets (default 65535).
    #[serde(default = "default_value")]
    pub value: u64,
    /// Instances left free above those in use when the limit is lowered (default 2). The workload must
    /// need more than this.
    #[serde(default = "default_headroom")]
    pub headroom: u64,
    /// The keeper of each run going on in this process, by the run's namespace ([`InotifyLimit::keep`]):
    /// stopped before the fix, at the run's end ([`Fault::end`]: its sender dropped), or with the
    /// process. The fault is the scenario's, shared by every run of it in a batch.
    #[serde(skip)]
    #[schemars(skip)]
    keepers: Arc<Mutex<BTreeMap<String, Keeper>>>,
}

/// A keeper running: what stops it, and its task (awaited, so that no lowering comes after the stop).
#[derive(Debug)]
struct Keeper {
    stop: tokio::sync::oneshot::Sender<()>,
    task: tokio::task::JoinHandle<()>,
}

/// What the keeper works with: the node, where the limit is lowered, and (on kind) this host, whose
/// processes are counted instead of the node container's; the API, for the workload's pods.
#[derive(Clone)]
struct Counter {
    node: Node,
    host: Option<Arc<dyn Executor>>,
    kube: crate::kube_ops::Kube,
    namespace: String,
    selector: String,
    /// The UIDs of the workload's pods whose instances are not counted: those deleted to meet the limit
    /// (the pod inject restarted, and any the keeper restarted), which give theirs back as they go.
    gone: Vec<String>,
}

impl Counter {
    fn of(ctx: &Ctx) -> Counter {
        Counter {
            node: ctx.node.clone(),
            host: ctx.node.profile.container.as_ref().map(|_| ctx.host.clone()),
            kube: ctx.kube.clone(),
            namespace: ctx.namespace.clone(),
            selector: ctx.target.selector.clone(),
            gone: Vec::new(),
        }
    }

    /// The workload's pods: the names of those that run Ready and are not being deleted, and every UID.
    async fn pods(&self) -> (Vec<String>, Vec<String>) {
        let pods: Vec<k8s_openapi::api::core::v1::Pod> = self.kube.list(Some(&self.namespace), Some(&self.selector)).await.unwrap_or_default();
        let ready = |p: &k8s_openapi::api::core::v1::Pod| {
            let conditions = p.status.as_ref().and_then(|s| s.conditions.as_ref());
            p.metadata.deletion_timestamp.is_none() && conditions.is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
        };
        let names = pods.iter().filter(|p| ready(p)).filter_map(|p| p.metadata.name.clone()).collect();
        (names, pods.into_iter().filter_map(|p| p.metadata.uid).collect())
    }

    /// The instances root holds, counted without a line in the record (the keeper counts every half second).
    async fn count(&self) -> Result<u64, FaultError> {
        let step = COUNT_STEP;
        let cmd = count_in_use_but(&self.gone);
        let out = match &self.host {
            None => self.node.run(&cmd).await,
            Some(host) => host.run(&cmd.argv, &cmd, false).await,
        };
        let out = out.map_err(|source| FaultError::Node { step: step.into(), source: Box::new(source) })?;
        number(step, &out.stdout)
    }
}

/// What one round of the keeper did.
#[derive(Debug, PartialEq, Eq)]
enum Round {
    /// Nothing given back: the limit stays.
    Kept,
    /// Lowered to this.
    Lowered(u64),
    /// The keeper ends, for this reason.
    Ends(String),
}

/// The journal's key for the instances root held before the workload started (counted in `prepare`):
/// the budget the lowered limit leaves is counted from these, not from what the workload's old pod
/// holds and gives back.
const BASELINE: &str = "baseline";
/// The journal's key for the UIDs of the workload's pods that inject restarts: the keeper does not count
/// what they hold as they go.
const WORKLOAD_PODS: &str = "workload-pods";

impl Default for InotifyLimit {
    fn default() -> Self {
        InotifyLimit { value: default_value(), headroom: default_headroom(), keepers: Arc::default() }
    }
}

/// `sysctl -w fs.inotify.max_user_instances=N`.
pub fn set(value: u64) -> Cmd {
    Cmd::new(["sysctl".to_string(), "-w".to_string(), format!("{SYSCTL}={value}")])
}

/// The undo: [`set`] the original value under [`LOCK`], after any lowering of the keeper's.
pub fn restore(original: u64) -> Cmd {
    Cmd::new(["flock".to_string(), LOCK.to_string(), "sysctl".to_string(), "-w".to_string(), format!("{SYSCTL}={original}")])
}

/// The keeper's lowering: from `from` to `to` under [`LOCK`], only if the limit still reads `from`.
pub fn lower_if_still(from: u64, to: u64) -> Cmd {
    lower_in(LOCK, PROC_PATH, from, to)
}

/// [`lower_if_still`] with the lock and the limit's file elsewhere.
fn lower_in(lock: &str, file: &str, from: u64, to: u64) -> Cmd {
    Cmd::new(["flock", lock, "sh", "-c", LOWER_IF_STILL, "sh", file, &from.to_string(), &to.to_string()]).asks(LOWERED)
}

/// How many inotify instances root's processes hold where the command runs: their `anon_inode:inotify`
/// descriptors. (On kind the node container sees its own processes only: it runs on the host instead.)
pub fn count_in_use() -> Cmd {
    count_in("/proc")
}

/// [`count_in_use`] over the process tree at `proc`: one `find` over every process's descriptors, each
/// owned as its process is (`/proc/PID/fd/N` belongs to the process's user), so that the keeper's count
/// every second costs one process, not three for each process of the host as a loop did.
fn count_in(proc: &str) -> Cmd {
    Cmd::shell(format!("find {proc}/[0-9]*/fd -user 0 -lname 'anon_inode:inotify' 2>/dev/null | wc -l")).asks(INSTANCES)
}

/// [`count_in_use`] without the instances of the pods with these UIDs: their processes' cgroup paths name
/// the pod (`pod<uid>` under the kubelet's cgroupfs driver, with `_` for each `-` under systemd's).
pub fn count_in_use_but(pods: &[String]) -> Cmd {
    count_in_but("/proc", pods)
}

/// [`count_in_use_but`] over the process tree at `proc`. A UID that is not one (only hex digits and
/// dashes are) is left out of the pattern.
fn count_in_but(proc: &str, pods: &[String]) -> Cmd {
    let uids: Vec<String> = pods
        .iter()
        .filter(|u| !u.is_empty() && u.chars().all(|c| c.is_ascii_hexdigit() || c == '-'))
        .map(|u| format!("pod{}", u.replace('-', "[-_]")))
        .collect();
    if uids.is_empty() {
        return count_in(proc);
    }
    let pattern = shell_words::quote(&uids.join("|")).into_owned();
    Cmd::shell(format!(
        "find {proc}/[0-9]*/fd -user 0 -lname 'anon_inode:inotify' 2>/dev/null | while read -r fd; do \
         pid=${{fd#{proc}/}}; pid=${{pid%%/*}}; grep -qE {pattern} {proc}/\"$pid\"/cgroup 2>/dev/null || echo; done | wc -l"
    ))
    .asks(INSTANCES)
}

fn number(step: &str, text: &str) -> Result<u64, FaultError> {
    text.trim().parse().map_err(|_| FaultError::Check { step: step.into(), message: format!("expected a number, the node printed {:?}", text.trim()) })
}

impl InotifyLimit {
    /// The lowered limit: what is in use plus the headroom; `None` past what the sysctl takes (2^31-1).
    pub fn lowered(&self, in_use: u64) -> Option<u64> {
        in_use.checked_add(self.headroom).filter(|l| *l <= SYSCTL_INT_MAX)
    }

    /// How many inotify instances root holds where the limit applies: on the node (the test bed's node
    /// shares the host's processes), or, for a node that is a container (kind), every root process of
    /// this host, of which the node container's are only some (faultlab runs on the Docker host).
    async fn in_use(&self, ctx: &Ctx) -> Result<u64, FaultError> {
        Self::count(ctx, count_in_use()).await
    }

    /// The instances root holds now beside the workload's pods ([`count_in_use_but`]): what was given back
    /// while the workload was made (the baseline, counted before it, cannot know) is not left to it.
    async fn in_use_beside_workload(&self, ctx: &Ctx) -> Result<u64, FaultError> {
        let pods: Vec<k8s_openapi::api::core::v1::Pod> =
            ctx.kube.list(Some(&ctx.namespace), Some(&ctx.target.selector)).await.map_err(Ctx::api_err(COUNT_STEP))?;
        let uids: Vec<String> = pods.into_iter().filter_map(|p| p.metadata.uid).collect();
        let n = Self::count(ctx, count_in_use_but(&uids)).await?;
        ctx.keep(WORKLOAD_PODS, &uids)?;
        Ok(n)
    }

    /// Run counting command `cmd` where the limit applies (the node, or on kind this host; see
    /// [`InotifyLimit::in_use`]), written to the record, and read its number.
    async fn count(ctx: &Ctx, cmd: Cmd) -> Result<u64, FaultError> {
        let out = match ctx.node.profile.container {
            None => ctx.run(COUNT_STEP, cmd).await?,
            Some(_) => ctx.run_on_host(COUNT_STEP, cmd).await?,
        };
        number(COUNT_STEP, &out.stdout)
    }

    /// The keeper: root's other processes give instances back while the fault holds (CI's kind suite
    /// met it: the workload's first container failed, its restart a moment later found its six), so
    /// every [`KEEP_PERIOD`] it counts root's instances again and, if fewer are in use than the limit
    /// leaves room for, lowers the limit to the count plus the headroom ([`InotifyLimit::round`]). It
    /// never raises it: what the workload's crashing container holds counts in use while it lives, and
    /// it holds at most the headroom. It ends when stopped (before the fix, at the run's end), when the
    /// limit is not the one it set (the fix, a person, the undo), after [`KEEP_FOR`], or when a count
    /// or a lowering fails (said in the record).
    async fn keep(mut counter: Counter, rec: Recorder, headroom: u64, mut set: u64, mut stop: tokio::sync::oneshot::Receiver<()>, (period, for_at_most): (Duration, Duration)) {
        let started = tokio::time::Instant::now();
        let (mut watch_until, mut restarts) = (None, 0);
        let ends = |why: String| rec.push(Channel::Note, format!("the keeper of {SYSCTL} ends: {why}"));
        while started.elapsed() < for_at_most {
            tokio::select! {
                _ = &mut stop => return,
                () = tokio::time::sleep(period) => {}
            }
            match Self::round(&counter, &rec, headroom, set).await {
                Round::Kept => {}
                Round::Lowered(to) => (set, watch_until) = (to, Some(tokio::time::Instant::now() + DRIFT_WATCH)),
                Round::Ends(why) => return ends(why),
            }
            if watch_until.is_some_and(|t| tokio::time::Instant::now() < t) && restarts < MAX_RESTARTS {
                match Self::restart_if_got_in(&mut counter, &rec, headroom, set).await {
                    Ok(None) => {}
                    Ok(Some(now)) => (set, watch_until, restarts) = (now, None, restarts + 1),
                    Err(why) => return ends(why),
                }
            }
        }
        rec.push(Channel::Note, format!("the keeper of {SYSCTL} ends after {:.1} s; the limit stays at {set}", for_at_most.as_secs_f64()));
    }

    /// After a lowering: if a pod of the workload runs Ready, its container started its watchers with
    /// what was given back before the lowering. Lower the limit without what the workload's pods hold
    /// (they give it back as they go), then restart the workload: its new pod meets the limit. The limit
    /// then (`None`: no pod got in), or why the keeper ends.
    async fn restart_if_got_in(counter: &mut Counter, rec: &Recorder, headroom: u64, set: u64) -> Result<Option<u64>, String> {
        let (ready, uids) = counter.pods().await;
        if ready.is_empty() {
            return Ok(None);
        }
        rec.push(Channel::Note, format!(
            "{} of the workload runs Ready though the limit holds: it started its watchers with what was given back before the keeper lowered the limit; \
             lower the limit without what its pods hold, then restart the workload",
            ready.join(", ")
        ));
        counter.gone.extend(uids);
        let set = match Self::round(counter, rec, headroom, set).await {
            Round::Kept => set,
            Round::Lowered(to) => to,
            Round::Ends(why) => return Err(why),
        };
        counter.kube.delete_pods(&counter.namespace, &counter.selector).await.map_err(|e| format!("restarting the workload failed: {e}"))?;
        Ok(Some(set))
    }

    /// One round of [`InotifyLimit::keep`], with the limit at `set`.
    async fn round(counter: &Counter, rec: &Recorder, headroom: u64, set: u64) -> Round {
        let in_use = match counter.count().await {
            Ok(n) => n,
            Err(e) => return Round::Ends(format!("counting root's instances failed: {e}")),
        };
        let to = match in_use.checked_add(headroom) {
            Some(to) if to < set => to,
            _ => return Round::Kept,
        };
        let lower = lower_if_still(set, to);
        rec.push(Channel::Note, format!("root holds {in_use} inotify instances, fewer than the limit {set} leaves room for: lower it to {to}"));
        rec.push(Channel::Node, crate::cmd::shell_join(&counter.node.host_argv(&lower)));
        match counter.node.run(&lower).await {
            Ok(out) if out.stdout.trim() == "lowered" => Round::Lowered(to),
            Ok(_) => Round::Ends(format!("the limit is no longer {set}: someone else set it")),
            Err(e) => Round::Ends(format!("lowering failed: {e}")),
        }
    }

    /// Start the keeper of this run (not in a plan: nothing is running there).
    fn start_keeper(&self, ctx: &Ctx, set: u64) {
        if ctx.kube.client().is_none() {
            return;
        }
        let (stop, stopped) = tokio::sync::oneshot::channel();
        let counter = Counter { gone: ctx.kept(WORKLOAD_PODS).unwrap_or_default(), ..Counter::of(ctx) };
        let task = tokio::spawn(Self::keep(counter, ctx.rec().clone(), self.headroom, set, stopped, (KEEP_PERIOD, KEEP_FOR)));
        let old = self.keepers.lock().unwrap_or_else(|p| p.into_inner()).insert(ctx.namespace.clone(), Keeper { stop, task });
        drop(old);
    }

    /// Stop this run's keeper, if it runs, and wait for its round to end.
    async fn stop_keeper(&self, ctx: &Ctx) {
        let keeper = self.keepers.lock().unwrap_or_else(|p| p.into_inner()).remove(&ctx.namespace);
        if let Some(Keeper { stop, task }) = keeper {
            let _ = stop.send(());
            let _ = task.await;
        }
    }
}

/// The document's fix, step by step, in its order (scenario files name them in `fix[].step`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Step {
    RaiseMaxUserInstances,
}

#[async_trait]
impl Fault for InotifyLimit {
    /// The limit, as the node reads it.
    fn footprint(_node: &NodeProfile) -> Vec<Probe> {
        vec![Probe::new("fs.inotify.max_user_instances", format!("cat {PROC_PATH}"))]
    }


    fn check(&self) -> Vec<Problem> {
        let mut problems = Vec::new();
        problems.extend(range(
            "value",
            self.value,
            MIN_VALUE,
            SYSCTL_INT_MAX,
            &format!("the limit the fix sets: {SYSCTL} takes at most 2^31-1, and below the kernel's default of {MIN_VALUE} the node's daemons would be short of inotify instances"),
        ));
        problems.extend(range(
            "headroom",
            self.headroom,
            1,
            MAX_HEADROOM,
            "instances left free above those root holds: at least 1 so the node's daemons can still make one, and at most 1024, \
             since in-use plus headroom must stay below the node's current limit for the fault to lower it",
        ));
        if problems.is_empty() && self.headroom >= self.value {
            problems.push(Problem::new(
                "headroom",
                format!(
                    "{} is not below value ({}): the fault lowers the limit to the instances in use plus headroom, and the fix must raise it above that, so headroom must be less than value",
                    self.headroom, self.value
                ),
            ));
        }
        problems
    }

    fn needs(&self) -> crate::needs::Needs {
        crate::needs::Needs { host_kernel: true, ..Default::default() }
    }

    fn reach(&self) -> Reach {
        Reach::Host(format!(
            "{SYSCTL} is a limit per user namespace, and a kind node runs in the host's: lowering it lowers it for every \
             root process on the host (faultlab counts root's instances on the host, where it runs, and restores the value at teardown)"
        ))
    }

    /// A plan's node: root holds 6 instances, the limit is 128 (Debian's default).
    fn plan_answers(&self, _node: &NodeProfile, _namespace: &str) -> Vec<(Ask, Output)> {
        vec![(INSTANCES, Output::ok("6\n")), (LIMIT, Output::ok("128\n"))]
    }

    /// A plan's workload: one pod, whose processes the count at inject leaves out.
    fn plan_api_answers(&self, _target: &crate::gates::Target) -> Vec<(String, serde_json::Value)> {
        vec![("/pods".into(), serde_json::json!([{"metadata": {"name": "<pod>", "uid": "00000000-0000-0000-0000-000000000000"}}]))]
    }

        /// Count the instances root holds before the workload exists (on kind: on the host, see `in_use`).
    async fn prepare(&self, ctx: &Ctx) -> Result<(), FaultError> {
        let in_use = self.in_use(ctx).await?;
        ctx.keep(BASELINE, &in_use)
    }

    async fn inject(&self, ctx: &Ctx) -> Result<(), FaultError> {
        self.refuse_bad_parameters("lower-limit")?;
        let out = ctx.run("read-limit", Cmd::new(["cat", PROC_PATH]).asks(LIMIT)).await?;
        let original = number("read-limit", &out.stdout)?;
        ctx.undo_on_node(&format!("restore {SYSCTL}={original}"), restore(original))?;
        let now = self.in_use_beside_workload(ctx).await?;
        let in_use = ctx.kept::<u64>(BASELINE).map_or(now, |before| before.min(now));
        let Some(lowered) = self.lowered(in_use) else {
            return Err(FaultError::Check {
                step: "lower-limit".into(),
                message: format!(
                    "root holds {in_use} inotify instances: with headroom {} the limit would be above {SYSCTL_INT_MAX}, the most {SYSCTL} takes",
                    self.headroom
                ),
            });
        };
        if lowered >= original {
            return Err(FaultError::Check {
                step: "lower-limit".into(),
                message: format!("root holds {in_use} inotify instances and the limit is {original}: lowering it to {lowered} would not lower it"),
            });
        }
        if lowered >= self.value {
            return Err(FaultError::Check {
                step: "lower-limit".into(),
                message: format!(
                    "root holds {in_use} inotify instances: the lowered limit {lowered} would not be below value {}, the limit the fix sets, so the fix would not fix it",
                    self.value
                ),
            });
        }
        ctx.note(format!("root holds {in_use} inotify instances beside the workload (the fewer of before it was made and now): lower {SYSCTL} from {original} to {lowered}, so only {} more can be made", self.headroom));
        ctx.run("lower-limit", set(lowered)).await?;
        ctx.note("the workload's new pod needs more instances than are left: restart it");
        ctx.restart_target("restart-workload").await?;
        ctx.note(format!(
            "keep the limit down as root's other processes give instances back: count them every {} s for up to {} s and lower the limit to the count plus {}, never raise it",
            KEEP_PERIOD.as_secs_f64(),
            KEEP_FOR.as_secs(),
            self.headroom
        ));
        self.start_keeper(ctx, lowered);
        Ok(())
    }

    /// The run's keeper stops (the undo has restored the limit; its lowering would find it changed).
    fn end(&self, ctx: &Ctx) {
        drop(self.keepers.lock().unwrap_or_else(|p| p.into_inner()).remove(&ctx.namespace));
    }

    /// In place while the limit is below the value the fix sets.
    async fn present(&self, ctx: &Ctx) -> Result<Presence, FaultError> {
        let out = ctx.run("check-limit", Cmd::new(["cat", PROC_PATH]).asks(LIMIT)).await?;
        let limit = number("check-limit", &out.stdout)?;
        Ok(if limit < self.value {
            Presence::Present(format!("{SYSCTL} is {limit}, below {}", self.value))
        } else {
            Presence::Absent(format!("{SYSCTL} is {limit}"))
        })
    }
}

#[async_trait]
impl Fix for InotifyLimit {
    type Step = Step;

    async fn fix(&self, which: Step, ctx: &Ctx) -> Result<(), FaultError> {
        let step = super::steps::Steps::name(which);
        match which {
            // Setting the value it has already succeeds: the step is idempotent.
            Step::RaiseMaxUserInstances => {
                self.refuse_bad_parameters(step)?;
                self.stop_keeper(ctx).await;
                ctx.run(step, set(self.value)).await.map(|_| ())
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_root_inotify_instances_in_a_proc_tree() {
        let proc = tempfile::tempdir().unwrap();
        let me = proc.path().join("42");
        std::fs::create_dir_all(me.join("fd")).unwrap();
        std::os::unix::fs::symlink("anon_inode:inotify", me.join("fd/3")).unwrap();
        std::os::unix::fs::symlink("anon_inode:inotify", me.join("fd/4")).unwrap();
        std::os::unix::fs::symlink("/dev/null", me.join("fd/0")).unwrap();
        std::fs::create_dir_all(proc.path().join("self/fd")).unwrap();
        std::os::unix::fs::symlink("anon_inode:inotify", proc.path().join("self/fd/3")).unwrap();
        // Tests run as root here (the test bed needs it); as another user nothing is root's.
        let expected = if unsafe { libc::geteuid() } == 0 { 2 } else { 0 };
        let count = |dir: &std::path::Path| {
            let cmd = count_in(dir.to_str().unwrap());
            let out = std::process::Command::new(&cmd.argv[0]).args(&cmd.argv[1..]).output().unwrap();
            String::from_utf8(out.stdout).unwrap().trim().parse::<u64>().unwrap()
        };
        assert_eq!(count(proc.path()), expected, "only numbered entries, only inotify descriptors");
        assert_eq!(count(&proc.path().join("missing")), 0);
    }
    #[test]
    fn the_workload_s_pods_are_left_out_by_their_cgroup_under_either_driver() {
        let proc = tempfile::tempdir().unwrap();
        let process = |pid: &str, inotify: usize, cgroup: &str| {
            let dir = proc.path().join(pid);
            std::fs::create_dir_all(dir.join("fd")).unwrap();
            for fd in 0..inotify {
                std::os::unix::fs::symlink("anon_inode:inotify", dir.join(format!("fd/{}", fd + 3))).unwrap();
            }
            std::fs::write(dir.join("cgroup"), cgroup).unwrap();
        };
        process("40", 2, "0::/system.slice/containerd.service\n");
        process("41", 3, "12:memory:/kubepods/besteffort/pod6b1c2d3e-0000-4a5b-8c9d-0123456789ab/4f2a\n");
        process("42", 4, "0::/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod6b1c2d3e_0000_4a5b_8c9d_0123456789ab.slice/cri-containerd-4f.scope\n");
        process("43", 1, "0::/kubepods/besteffort/pod11111111-2222-3333-4444-555555555555/9e\n");
        let count = |pods: &[&str]| {
            let pods: Vec<String> = pods.iter().map(|s| s.to_string()).collect();
            let cmd = count_in_but(proc.path().to_str().unwrap(), &pods);
            let out = std::process::Command::new(&cmd.argv[0]).args(&cmd.argv[1..]).output().unwrap();
            String::from_utf8(out.stdout).unwrap().trim().parse::<u64>().unwrap()
        };
        if unsafe { libc::geteuid() } != 0 {
            return assert_eq!(count(&["6b1c2d3e-0000-4a5b-8c9d-0123456789ab"]), 0);
        }
        assert_eq!(count(&[]), 10, "no pods: every instance");
        assert_eq!(count(&["6b1c2d3e-0000-4a5b-8c9d-0123456789ab"]), 3, "the pod's, by cgroupfs's and systemd's path");
        assert_eq!(count(&["6b1c2d3e-0000-4a5b-8c9d-0123456789ab", "11111111-2222-3333-4444-555555555555"]), 2);
        assert_eq!(count(&["'; rm -rf /; '"]), 10, "not a UID: left out of the pattern");
    }

    #[test]
    fn counts_this_process_s_own_inotify_instances_in_proc() {
        if unsafe { libc::geteuid() } != 0 {
            return; // root's instances only: as another user this process holds none of them.
        }
        let count = || {
            let cmd = count_in_use();
            let out = std::process::Command::new(&cmd.argv[0]).args(&cmd.argv[1..]).output().unwrap();
            String::from_utf8(out.stdout).unwrap().trim().parse::<i64>().unwrap()
        };
        // Other processes of the host may make or end instances between two counts: try a few times.
        let mut differences = Vec::new();
        for _ in 0..5 {
            let before = count();
            let fds: Vec<i32> = (0..3).map(|_| unsafe { libc::inotify_init1(libc::IN_CLOEXEC) }).collect();
            assert!(fds.iter().all(|fd| *fd >= 0));
            let during = count();
            fds.iter().for_each(|fd| unsafe { libc::close(*fd); });
            differences.push(during - before);
            if during - before == 3 {
                return;
            }
        }
        panic!("three instances made, the count went up by {differences:?}");
    }

    #[test]
    fn the_lowering_lowers_only_the_limit_it_set_and_waits_for_the_lock() {
        let dir = tempfile::tempdir().unwrap();
        let (lock, file) = (dir.path().join("lock"), dir.path().join("limit"));
        let run = |from: u64, to: u64| {
            let cmd = lower_in(lock.to_str().unwrap(), file.to_str().unwrap(), from, to);
            std::process::Command::new(&cmd.argv[0]).args(&cmd.argv[1..]).output().unwrap()
        };
        std::fs::write(&file, "63\n").unwrap();
        assert_eq!(String::from_utf8(run(63, 61).stdout).unwrap(), "lowered\n");
        assert_eq!(std::fs::read_to_string(&file).unwrap(), "61\n");
        // Someone else set it (the fix): left as it is.
        std::fs::write(&file, "65535\n").unwrap();
        assert_eq!(String::from_utf8(run(61, 59).stdout).unwrap(), "changed\n");
        assert_eq!(std::fs::read_to_string(&file).unwrap(), "65535\n");
        // While the undo holds the lock, the lowering waits for it.
        std::fs::write(&file, "61\n").unwrap();
        let held = std::fs::File::create(&lock).unwrap();
        assert_eq!(unsafe { libc::flock(std::os::fd::AsRawFd::as_raw_fd(&held), libc::LOCK_EX) }, 0);
        let cmd = lower_in(lock.to_str().unwrap(), file.to_str().unwrap(), 61, 59);
        let mut child = std::process::Command::new(&cmd.argv[0]).args(&cmd.argv[1..]).stdout(std::process::Stdio::piped()).spawn().unwrap();
        std::thread::sleep(std::time::Duration::from_millis(300));
        assert!(child.try_wait().unwrap().is_none(), "it waits for the lock");
        assert_eq!(std::fs::read_to_string(&file).unwrap(), "61\n");
        std::fs::write(&file, "128\n").unwrap(); // the undo's restore, under the lock
        drop(held);
        let out = child.wait_with_output().unwrap();
        assert_eq!(String::from_utf8(out.stdout).unwrap(), "changed\n");
        assert_eq!(std::fs::read_to_string(&file).unwrap(), "128\n", "no lowering after the restore");
    }

    fn counter(ctx: &crate::faults::api::Ctx) -> Counter {
        Counter::of(ctx)
    }

    #[tokio::test]
    async fn a_round_lowers_the_limit_with_what_was_given_back_and_never_raises_it() {
        let (ctx, fake) = ctx();
        let rec = ctx.rec().clone();
        fake.respond("anon_inode:inotify", out("6\n"));
        assert_eq!(InotifyLimit::round(&counter(&ctx), &rec, 2, 8).await, Round::Kept);
        fake.respond("anon_inode:inotify", out("9\n"));
        assert_eq!(InotifyLimit::round(&counter(&ctx), &rec, 2, 8).await, Round::Kept, "more in use: not raised");
        assert!(!fake.lines().iter().any(|l| l.contains("flock")), "{:?}", fake.lines());
        assert!(rec.entries().is_empty(), "counting leaves no line in the record");
        fake.respond("anon_inode:inotify", out("3\n"));
        fake.respond("flock", out("lowered\n"));
        assert_eq!(InotifyLimit::round(&counter(&ctx), &rec, 2, 8).await, Round::Lowered(5));
        let last = fake.lines().pop().unwrap();
        assert_eq!(last, format!("ip netns exec faultlab-node timeout -k 5 60 flock {LOCK} sh -c '{}' sh /proc/sys/fs/inotify/max_user_instances 8 5", LOWER_IF_STILL.replace('\'', "'\\''")));
        let lines: Vec<String> = rec.entries().into_iter().map(|e| e.line).collect();
        assert_eq!(lines[0], "root holds 3 inotify instances, fewer than the limit 8 leaves room for: lower it to 5");
        assert_eq!(lines[1], last);
        fake.respond("flock", out("changed\n"));
        assert_eq!(InotifyLimit::round(&counter(&ctx), &rec, 2, 5).await, Round::Kept);
        assert!(matches!(InotifyLimit::round(&counter(&ctx), &rec, 2, 8).await, Round::Ends(why) if why == "the limit is no longer 8: someone else set it"));
        fake.respond("anon_inode:inotify", out("garbage"));
        assert!(matches!(InotifyLimit::round(&counter(&ctx), &rec, 2, 8).await, Round::Ends(why) if why.starts_with("counting root's instances failed")));
    }

    #[tokio::test]
    async fn on_kind_the_keeper_counts_on_the_host_and_lowers_in_the_node() {
        let (mut ctx, fake) = ctx();
        ctx.node.profile.container = Some("faultlab-x-control-plane".into());
        ctx.node.access = NodeAccess::Docker { container: "faultlab-x-control-plane".into() };
        fake.respond("anon_inode:inotify", out("40\n"));
        fake.respond("flock", out("lowered\n"));
        assert_eq!(InotifyLimit::round(&counter(&ctx), &ctx.rec().clone(), 2, 50).await, Round::Lowered(42));
        let lines = fake.lines();
        assert!(lines[0].starts_with("sh -c 'find /proc/"), "{lines:?}");
        assert!(lines[1].starts_with(&format!("docker exec faultlab-x-control-plane timeout -k 5 60 flock {LOCK} sh -c")), "{lines:?}");
    }

    #[tokio::test]
    async fn the_keeper_keeps_lowering_until_its_time_is_up_or_it_is_stopped() {
        let (ctx, fake) = ctx();
        let rec = ctx.rec().clone();
        fake.respond("anon_inode:inotify", out("3\n"));
        fake.respond("flock", out("lowered\n"));
        let timing = (Duration::from_millis(5), Duration::from_millis(200));
        let (_stop, stopped) = tokio::sync::oneshot::channel();
        InotifyLimit::keep(counter(&ctx), rec.clone(), 2, 8, stopped, timing).await;
        let lowerings = fake.lines().iter().filter(|l| l.contains("flock")).count();
        assert_eq!(lowerings, 1, "lowered once, to 5, then kept: {:?}", fake.lines());
        let last = rec.entries().pop().unwrap().line;
        assert!(last.starts_with("the keeper of fs.inotify.max_user_instances ends after 0.2 s; the limit stays at 5"), "{last}");
        // Stopped (the fix, the run's end): it returns at once, and says nothing.
        let (ctx, _fake) = crate::faults::testing::ctx();
        let (stop, stopped) = tokio::sync::oneshot::channel();
        drop(stop);
        let started = std::time::Instant::now();
        InotifyLimit::keep(counter(&ctx), ctx.rec().clone(), 2, 8, stopped, (Duration::from_secs(60), Duration::from_secs(600))).await;
        assert!(started.elapsed() < Duration::from_secs(5));
        assert!(ctx.rec().entries().is_empty());
    }

    #[rstest::rstest]
    #[case::ready("True", 1)]
    #[case::crash_looping("False", 0)]
    #[tokio::test]
    async fn after_a_lowering_a_pod_that_got_in_is_restarted_once(#[case] ready: &str, #[case] restarts: usize) {
        let (mut ctx, fake) = ctx();
        let pod = serde_json::json!([{"metadata": {"name": "web-1", "uid": "12345678-aaaa-bbbb-cccc-1234567890ab"}, "status": {"conditions": [{"type": "Ready", "status": ready}]}}]);
        ctx.kube = crate::kube_ops::Kube::scripted(ctx.rec().clone(), vec![("/pods".into(), pod)]);
        fake.respond("anon_inode:inotify", out("3\n"));
        fake.respond("flock", out("lowered\n"));
        let (_stop, stopped) = tokio::sync::oneshot::channel();
        InotifyLimit::keep(counter(&ctx), ctx.rec().clone(), 2, 8, stopped, (Duration::from_millis(5), Duration::from_millis(300))).await;
        let lines: Vec<String> = ctx.rec().entries().into_iter().map(|e| e.line).collect();
        let deleted = lines.iter().filter(|l| l.starts_with("DELETE /api/v1/namespaces/fl-test/pods?labelSelector=app=web")).count();
        assert_eq!(deleted, restarts, "{lines:#?}");
        assert_eq!(lines.iter().any(|l| l.starts_with("web-1 of the workload runs Ready though the limit holds")), restarts == 1);
        // Its instances are not counted from then on: they are given back as it goes.
        let counted_without = fake.lines().iter().any(|l| l.contains("pod12345678[-_]aaaa[-_]bbbb[-_]cccc[-_]1234567890ab"));
        assert_eq!(counted_without, restarts == 1);
    }

        #[tokio::test]
    async fn the_fix_stops_the_keeper_before_it_sets_the_value() {
        let (ctx, fake) = ctx();
        let fault = InotifyLimit::default();
        fake.respond("anon_inode:inotify", out("6\n"));
        let (stop, stopped) = tokio::sync::oneshot::channel();
        let task = tokio::spawn(InotifyLimit::keep(counter(&ctx), ctx.rec().clone(), 2, 8, stopped, (Duration::from_millis(5), Duration::from_secs(600))));
        fault.keepers.lock().unwrap().insert(ctx.namespace.clone(), Keeper { stop, task });
        tokio::time::sleep(Duration::from_millis(50)).await;
        fault.fix(Step::RaiseMaxUserInstances, &ctx).await.unwrap();
        assert!(fault.keepers.lock().unwrap().is_empty());
        let lines = fake.lines();
        assert_eq!(lines.last().unwrap(), "ip netns exec faultlab-node timeout -k 5 60 sysctl -w 'fs.inotify.max_user_instances=65535'");
        let counted = lines.len();
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert_eq!(fake.lines().len(), counted, "nothing runs after the fix");
    }

    use crate::cmd::Output;
    use crate::faults::testing::ctx;
    use crate::node::NodeAccess;
    use crate::record::Channel;
    use crate::journal::Undo;

    fn out(text: &str) -> Output {
        Output { status: 0, stdout: text.into(), stderr: String::new() }
    }

    #[tokio::test]
    async fn inject_journals_the_original_then_lowers_then_restarts() {
        let (ctx, fake) = ctx();
        fake.respond("cat /proc/sys/fs/inotify/max_user_instances", out("128\n"));
        fake.respond("anon_inode:inotify", out("6\n"));
        let fault = InotifyLimit::default();
        fault.inject(&ctx).await.unwrap();
        let lines = fake.lines();
        assert_eq!(lines.len(), 3, "{lines:?}");
        assert_eq!(lines[0], "ip netns exec faultlab-node timeout -k 5 60 cat /proc/sys/fs/inotify/max_user_instances");
        assert!(lines[1].contains("anon_inode:inotify"), "{}", lines[1]);
        assert_eq!(lines[2], "ip netns exec faultlab-node timeout -k 5 60 sysctl -w 'fs.inotify.max_user_instances=8'");
        let entries = ctx.journal.snapshot().entries;
        assert_eq!(entries.len(), 1);
        assert!(matches!(&entries[0].undo, Undo::Node { cmd, .. } if cmd.argv == ["flock", LOCK, "sysctl", "-w", "fs.inotify.max_user_instances=128"]));
        let api: Vec<String> = ctx.rec().entries().into_iter().map(|e| e.line).collect();
        assert!(api[api.len() - 2].starts_with("DELETE /api/v1/namespaces/fl-test/pods?labelSelector=app=web"), "{api:?}");
        assert!(api.last().unwrap().starts_with("keep the limit down"), "{api:?}");
        assert!(fault.keepers.lock().unwrap().is_empty(), "no keeper without a cluster (a plan, this test)");
    }

    #[tokio::test]
    async fn on_kind_root_is_counted_on_the_host_not_in_the_node_container() {
        let (mut ctx, fake) = ctx();
        ctx.node.profile.container = Some("faultlab-x-control-plane".into());
        ctx.node.access = NodeAccess::Docker { container: "faultlab-x-control-plane".into() };
        fake.respond("anon_inode:inotify", out("6\n"));
        InotifyLimit::default().prepare(&ctx).await.unwrap();
        assert_eq!(ctx.kept::<u64>(BASELINE), Some(6));
        let lines = fake.lines();
        assert_eq!(lines.len(), 1, "{lines:?}");
        assert!(lines[0].starts_with("sh -c 'find /proc/[0-9]*/fd -user 0"), "on this host, not through docker exec: {}", lines[0]);
        let entries = ctx.rec().entries();
        assert_eq!((entries[0].channel, entries[0].line.clone()), (Channel::Host, lines[0].clone()));
    }

    #[rstest::rstest]
    #[case::given_back_while_the_workload_was_made(10, 6, 8)]
    #[case::more_in_use_now_or_the_workload_s_own_counted(6, 12, 8)]
    #[tokio::test]
    async fn the_limit_is_lowered_from_the_fewer_of_before_the_workload_and_now(#[case] before: u64, #[case] now: u64, #[case] lowered: u64) {
        let (ctx, fake) = ctx();
        fake.respond("cat /proc/sys", out("128\n"));
        fake.respond("anon_inode:inotify", out(&format!("{before}\n")));
        let fault = InotifyLimit::default();
        fault.prepare(&ctx).await.unwrap();
        fake.respond("anon_inode:inotify", out(&format!("{now}\n")));
        fault.inject(&ctx).await.unwrap();
        let set = fake.lines().into_iter().filter(|l| l.contains("sysctl -w")).collect::<Vec<_>>();
        assert_eq!(set, vec![format!("ip netns exec faultlab-node timeout -k 5 60 sysctl -w 'fs.inotify.max_user_instances={lowered}'")]);
    }

    #[tokio::test]
    async fn refuses_when_lowering_would_not_lower() {
        let (ctx, fake) = ctx();
        fake.respond("cat /proc/sys", out("8\n"));
        fake.respond("anon_inode:inotify", out("7\n"));
        let err = InotifyLimit::default().inject(&ctx).await.unwrap_err();
        assert!(err.to_string().contains("would not lower it"), "{err}");
        assert!(!fake.lines().iter().any(|l| l.contains("sysctl -w fs.inotify.max_user_instances=9")), "nothing set");
        assert_eq!(ctx.journal.snapshot().entries.len(), 1, "the undo of an unchanged value is harmless");
    }

    #[tokio::test]
    async fn nothing_changes_when_the_value_cannot_be_read() {
        let (ctx, fake) = ctx();
        fake.respond("cat /proc/sys", out("garbage"));
        assert!(InotifyLimit::default().inject(&ctx).await.is_err());
        assert!(ctx.journal.snapshot().entries.is_empty());
        assert_eq!(fake.lines().len(), 1);
    }

    #[tokio::test]
    async fn fix_sets_the_documented_value() {
        let (ctx, fake) = ctx();
        let fault = InotifyLimit::default();
        fault.fix(Step::RaiseMaxUserInstances, &ctx).await.unwrap();
        assert_eq!(fake.lines(), vec!["ip netns exec faultlab-node timeout -k 5 60 sysctl -w 'fs.inotify.max_user_instances=65535'"]);
    }

    #[tokio::test]
    async fn present_while_the_limit_is_below_the_fixed_value() {
        let (ctx, fake) = ctx();
        fake.respond("cat /proc/sys", out("65535\n"));
        assert_eq!(InotifyLimit::default().present(&ctx).await.unwrap(), Presence::Absent("fs.inotify.max_user_instances is 65535".into()));
        fake.respond("cat /proc/sys", out("8\n"));
        assert_eq!(InotifyLimit::default().present(&ctx).await.unwrap(), Presence::Present("fs.inotify.max_user_instances is 8, below 65535".into()));
    }

    fn limit(value: u64, headroom: u64) -> InotifyLimit {
        InotifyLimit { value, headroom, ..Default::default() }
    }

    #[rstest::rstest]
    #[case::defaults(65535, 2)]
    #[case::lowest(128, 1)]
    #[case::highest(2147483647, 1024)]
    #[case::headroom_just_below_value(1024, 1023)]
    fn parameters_in_range_pass(#[case] value: u64, #[case] headroom: u64) {
        assert_eq!(limit(value, headroom).check(), vec![]);
    }

    #[rstest::rstest]
    #[case::value_zero(0, 2, "value", "0 is out of range: it must be 128 to 2147483647 (the limit the fix sets: fs.inotify.max_user_instances takes at most 2^31-1")]
    #[case::value_below_default(127, 2, "value", "127 is out of range: it must be 128 to 2147483647")]
    #[case::value_above_int(2147483648, 2, "value", "2147483648 is out of range: it must be 128 to 2147483647")]
    #[case::value_u64_max(u64::MAX, 2, "value", "18446744073709551615 is out of range: it must be 128 to 2147483647")]
    #[case::headroom_zero(65535, 0, "headroom", "0 is out of range: it must be 1 to 1024 (instances left free above those root holds: at least 1")]
    #[case::headroom_u64_max(65535, u64::MAX, "headroom", "18446744073709551615 is out of range: it must be 1 to 1024")]
    #[case::headroom_not_below_value(200, 200, "headroom", "200 is not below value (200): the fault lowers the limit to the instances in use plus headroom")]
    fn parameters_out_of_range_say_the_range(#[case] value: u64, #[case] headroom: u64, #[case] field: &str, #[case] message: &str) {
        let problems = limit(value, headroom).check();
        assert_eq!(problems.len(), 1, "{problems:?}");
        assert_eq!(problems[0].field, field);
        assert!(problems[0].message.starts_with(message), "{}", problems[0].message);
        // Under the scenario's fault, at the YAML field's path.
        let spec = crate::faults::FaultSpec::InotifyLimit(limit(value, headroom));
        assert_eq!(spec.check()[0].field, format!("fault.inotify-limit.{field}"));
    }

    #[test]
    fn lowering_never_overflows() {
        assert_eq!(limit(65535, 2).lowered(6), Some(8));
        assert_eq!(limit(65535, u64::MAX).lowered(6), None, "past u64");
        assert_eq!(limit(65535, SYSCTL_INT_MAX).lowered(1), None, "past what the sysctl takes");
        assert_eq!(limit(65535, 1).lowered(SYSCTL_INT_MAX - 1), Some(SYSCTL_INT_MAX));
    }

    #[tokio::test]
    async fn out_of_range_parameters_change_nothing_even_unchecked() {
        // The headroom: a panic at the addition before; now an error before any command.
        let (ctx, fake) = ctx();
        fake.respond("cat /proc/sys", out("128\n"));
        fake.respond("anon_inode:inotify", out("6\n"));
        let err = limit(65535, u64::MAX).inject(&ctx).await.unwrap_err();
        assert!(err.to_string().starts_with("lower-limit: headroom: 18446744073709551615 is out of range"), "{err}");
        assert!(fake.lines().is_empty(), "{:?}", fake.lines());
        assert!(ctx.journal.snapshot().entries.is_empty());
        // A fix that would set 0 (no inotify at all for root, on kind the host's root) is refused too.
        let err = limit(0, 2).fix(Step::RaiseMaxUserInstances, &ctx).await.unwrap_err();
        assert!(err.to_string().contains("value: 0 is out of range"), "{err}");
        assert!(fake.lines().is_empty());
    }

    #[tokio::test]
    async fn refuses_a_lowered_limit_the_fix_would_not_raise() {
        let (ctx, fake) = ctx();
        fake.respond("cat /proc/sys", out("8192\n"));
        fake.respond("anon_inode:inotify", out("300\n"));
        let err = limit(200, 2).inject(&ctx).await.unwrap_err();
        assert!(err.to_string().contains("the lowered limit 302 would not be below value 200"), "{err}");
        assert!(!fake.lines().iter().any(|l| l.contains("sysctl -w")), "nothing set: {:?}", fake.lines());
    }
}
