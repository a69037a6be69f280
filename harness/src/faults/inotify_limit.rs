//! inotify-limit: fs.inotify.max_user_instances is too low for a workload that needs inotify.
//!
//! Source: DaoCloud mspider troubleshooting "创建网格时一直处于“创建中”", case 4: "inotify watcher limit
//! problems", the remote-ckube log says `panic: too many open files`. Fix: 修改
//! fs.inotify.max_user_instances = 65535.
//!
//! The limit is per user and host-wide: pods, kubelet, containerd and the controllers all run as root in
//! the init user namespace, on kind as on the test bed. So the fault reads the value and the number of
//! inotify instances root holds on the node, journals the original value first, and sets the limit
//! just above what is in use (`headroom` more), so the workload's instances fail and the node's daemons
//! keep theirs (at 2, a kubelet restart dies; testbed notes). Teardown writes the original value back
//! whatever happens.

use async_trait::async_trait;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::{Ctx, Fault, FaultError};
use crate::cmd::Cmd;

pub const SYSCTL: &str = "fs.inotify.max_user_instances";
const PROC_PATH: &str = "/proc/sys/fs/inotify/max_user_instances";

fn default_value() -> u64 {
    65535
}

fn default_headroom() -> u64 {
    2
}

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
    /// Instances root held before the workload started (counted in `prepare`): the budget the lowered
    /// limit leaves is counted from these, not from what the workload's old pod holds and gives back.
    #[serde(skip)]
    baseline: std::sync::Arc<std::sync::Mutex<Option<u64>>>,
}

impl Default for InotifyLimit {
    fn default() -> Self {
        InotifyLimit { value: default_value(), headroom: default_headroom(), baseline: Default::default() }
    }
}

/// `sysctl -w fs.inotify.max_user_instances=N`.
pub fn set(value: u64) -> Cmd {
    Cmd::new(["sysctl".to_string(), "-w".to_string(), format!("{SYSCTL}={value}")])
}

/// How many inotify instances root's processes hold: their `anon_inode:inotify` descriptors. (On kind
/// this sees the node container's processes only; root's instances elsewhere on the host are not
/// counted, which makes the limit lower, never higher, than intended.)
pub fn count_in_use() -> Cmd {
    Cmd::shell(
        "n=0; for p in /proc/[0-9]*; do [ \"$(stat -c %u \"$p\" 2>/dev/null)\" = 0 ] || continue; \
         c=$(find \"$p/fd\" -lname 'anon_inode:inotify' 2>/dev/null | wc -l); n=$((n + c)); done; echo \"$n\"",
    )
}

fn number(step: &str, text: &str) -> Result<u64, FaultError> {
    text.trim().parse().map_err(|_| FaultError::Check { step: step.into(), message: format!("expected a number, the node printed {:?}", text.trim()) })
}

impl InotifyLimit {
    /// The lowered limit: what is in use plus the headroom.
    pub fn lowered(&self, in_use: u64) -> u64 {
        in_use + self.headroom
    }
}

#[async_trait]
impl Fault for InotifyLimit {
    fn fix_steps(&self) -> &'static [&'static str] {
        &["raise-max-user-instances"]
    }

    /// Count the instances root holds before the workload exists.
    async fn prepare(&self, ctx: &Ctx) -> Result<(), FaultError> {
        let out = ctx.run("count-inotify-instances", count_in_use()).await?;
        let in_use = if ctx.dry_run { 6 } else { number("count-inotify-instances", &out.stdout)? };
        *self.baseline.lock().unwrap() = Some(in_use);
        Ok(())
    }

    async fn inject(&self, ctx: &Ctx) -> Result<(), FaultError> {
        let out = ctx.run("read-limit", Cmd::new(["cat", PROC_PATH])).await?;
        // A plan has no node: show the commands with a sample value.
        let original = if ctx.dry_run { 128 } else { number("read-limit", &out.stdout)? };
        ctx.undo_on_node(&format!("restore {SYSCTL}={original}"), set(original))?;
        let counted = *self.baseline.lock().unwrap();
        let in_use = match counted {
            Some(n) => n,
            None => {
                let out = ctx.run("count-inotify-instances", count_in_use()).await?;
                if ctx.dry_run { 6 } else { number("count-inotify-instances", &out.stdout)? }
            }
        };
        let lowered = self.lowered(in_use);
        if lowered >= original && !ctx.dry_run {
            return Err(FaultError::Check {
                step: "lower-limit".into(),
                message: format!("root holds {in_use} inotify instances and the limit is {original}: lowering it to {lowered} would not lower it"),
            });
        }
        ctx.note(format!("root held {in_use} inotify instances before the workload: lower {SYSCTL} from {original} to {lowered}, so only {} more can be made", self.headroom));
        ctx.run("lower-limit", set(lowered)).await?;
        ctx.note("the workload's new pod needs more instances than are left: restart it");
        ctx.restart_target("restart-workload").await
    }

    async fn verify_injected(&self, ctx: &Ctx) -> Result<(), FaultError> {
        let out = ctx.run("check-limit", Cmd::new(["cat", PROC_PATH])).await?;
        if !ctx.dry_run && number("check-limit", &out.stdout)? >= self.value {
            return Err(FaultError::Check { step: "check-limit".into(), message: format!("{SYSCTL} is {} already", out.stdout.trim()) });
        }
        Ok(())
    }

    async fn fix(&self, step: &str, ctx: &Ctx) -> Result<(), FaultError> {
        match step {
            // Setting the value it has already succeeds: the step is idempotent.
            "raise-max-user-instances" => ctx.run(step, set(self.value)).await.map(|_| ()),
            _ => Err(FaultError::UnknownStep { fault: "inotify-limit", step: step.into() }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cmd::Output;
    use crate::faults::testing::ctx;
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
        fault.fix("raise-max-user-instances", &ctx).await.unwrap();
        assert_eq!(fake.lines(), vec!["ip netns exec faultlab-node timeout -k 5 60 sysctl -w 'fs.inotify.max_user_instances=65535'"]);
        assert!(fault.fix("reboot", &ctx).await.is_err());
    }

    #[tokio::test]
    async fn verify_fails_when_the_limit_is_high() {
        let (ctx, fake) = ctx();
        fake.respond("cat /proc/sys", out("65535\n"));
        assert!(InotifyLimit::default().verify_injected(&ctx).await.is_err());
        fake.respond("cat /proc/sys", out("8\n"));
        InotifyLimit::default().verify_injected(&ctx).await.unwrap();
    }
}
