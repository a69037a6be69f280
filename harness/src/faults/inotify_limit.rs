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

use async_trait::async_trait;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::api::{Ctx, Fault, FaultError, Fix, Presence, Probe, Reach};
use crate::check::{range, Problem, SYSCTL_INT_MAX};
use crate::cmd::{Ask, Cmd, Output};
use crate::node::NodeProfile;

pub const SYSCTL: &str = "fs.inotify.max_user_instances";
const PROC_PATH: &str = "/proc/sys/fs/inotify/max_user_instances";

// What the fault reads (a plan answers these): the instances root holds, and the limit.
const INSTANCES: Ask = Ask("inotify-instances");
const LIMIT: Ask = Ask("inotify-limit");

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
}

/// The journal's key for the instances root held before the workload started (counted in `prepare`):
/// the budget the lowered limit leaves is counted from these, not from what the workload's old pod
/// holds and gives back.
const BASELINE: &str = "baseline";

impl Default for InotifyLimit {
    fn default() -> Self {
        InotifyLimit { value: default_value(), headroom: default_headroom() }
    }
}

/// `sysctl -w fs.inotify.max_user_instances=N`.
pub fn set(value: u64) -> Cmd {
    Cmd::new(["sysctl".to_string(), "-w".to_string(), format!("{SYSCTL}={value}")])
}

/// How many inotify instances root's processes hold where the command runs: their `anon_inode:inotify`
/// descriptors. (On kind the node container sees its own processes only: it runs on the host instead.)
pub fn count_in_use() -> Cmd {
    count_in("/proc")
}

/// [`count_in_use`] over the process tree at `proc`.
fn count_in(proc: &str) -> Cmd {
    Cmd::shell(format!(
        "n=0; for p in {proc}/[0-9]*; do [ \"$(stat -c %u \"$p\" 2>/dev/null)\" = 0 ] || continue; \
         c=$(find \"$p/fd\" -lname 'anon_inode:inotify' 2>/dev/null | wc -l); n=$((n + c)); done; echo \"$n\""
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
        let step = "count-inotify-instances";
        let out = match ctx.node.profile.container {
            None => ctx.run(step, count_in_use()).await?,
            Some(_) => ctx.run_on_host(step, count_in_use()).await?,
        };
        number(step, &out.stdout)
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

    /// Count the instances root holds before the workload exists (on kind: on the host, see `in_use`).
    async fn prepare(&self, ctx: &Ctx) -> Result<(), FaultError> {
        let in_use = self.in_use(ctx).await?;
        ctx.keep(BASELINE, &in_use)
    }

    async fn inject(&self, ctx: &Ctx) -> Result<(), FaultError> {
        self.refuse_bad_parameters("lower-limit")?;
        let out = ctx.run("read-limit", Cmd::new(["cat", PROC_PATH]).asks(LIMIT)).await?;
        let original = number("read-limit", &out.stdout)?;
        ctx.undo_on_node(&format!("restore {SYSCTL}={original}"), set(original))?;
        let in_use = match ctx.kept::<u64>(BASELINE) {
            Some(n) => n,
            None => self.in_use(ctx).await?,
        };
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
        ctx.note(format!("root held {in_use} inotify instances before the workload: lower {SYSCTL} from {original} to {lowered}, so only {} more can be made", self.headroom));
        ctx.run("lower-limit", set(lowered)).await?;
        ctx.note("the workload's new pod needs more instances than are left: restart it");
        ctx.restart_target("restart-workload").await
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
        InotifyLimit::default().inject(&ctx).await.unwrap();
        let lines = fake.lines();
        assert_eq!(lines.len(), 3, "{lines:?}");
        assert_eq!(lines[0], "ip netns exec faultlab-node timeout -k 5 60 cat /proc/sys/fs/inotify/max_user_instances");
        assert!(lines[1].contains("anon_inode:inotify"), "{}", lines[1]);
        assert_eq!(lines[2], "ip netns exec faultlab-node timeout -k 5 60 sysctl -w 'fs.inotify.max_user_instances=8'");
        let entries = ctx.journal.snapshot().entries;
        assert_eq!(entries.len(), 1);
        assert!(matches!(&entries[0].undo, Undo::Node { cmd, .. } if cmd.argv == ["sysctl", "-w", "fs.inotify.max_user_instances=128"]));
        let api: Vec<String> = ctx.rec().entries().into_iter().map(|e| e.line).collect();
        assert!(api.last().unwrap().starts_with("DELETE /api/v1/namespaces/fl-test/pods?labelSelector=app=web"), "{api:?}");
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
        assert!(lines[0].starts_with("sh -c 'n=0; for p in /proc/[0-9]*;"), "on this host, not through docker exec: {}", lines[0]);
        let entries = ctx.rec().entries();
        assert_eq!((entries[0].channel, entries[0].line.clone()), (Channel::Host, lines[0].clone()));
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
        InotifyLimit { value, headroom }
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
