//! cpu-count: the node's CPUs changed under a kubelet with the static CPU manager policy.
//!
//! Source: CCE FAQ "What Should I Do If a Workload Remains in the Creating State?", check item 2
//! ("Modifying Node Specifications After the CPU Management Policy Is Enabled in the Cluster"). With
//! `cpu-manager-policy=static`, resizing the node leaves a `cpu_manager_state` checkpoint that names
//! CPUs the node no longer has; the kubelet refuses to start and workloads on the node cannot be
//! restarted or created. Fix: delete `cpu_manager_state` and restart the kubelet.
//!
//! `prepare` turns the static policy on (test bed: two lines in the kubelet's extra-flags file; kind:
//! the KubeletConfiguration at cluster creation), journalling first how to put the flags, the
//! checkpoint and the kubelet back. `inject` writes the checkpoint a node with more CPUs would have
//! left (twice the CPUs the node has: on the test bed's 2 CPUs, `"defaultCpuSet":"0-3"`; checksum 0 is
//! accepted by the 1.20 kubelet), restarts the kubelet, which exits on start, and restarts the
//! workload, whose new pod nothing can start.

use std::time::Duration;

use async_trait::async_trait;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::api::{Ctx, Fault, FaultError, Fix, Probe};
use crate::check::{quantity_milli, range, Problem};
use crate::cmd::{Ask, Cmd, Output};
use crate::node::NodeProfile;
use crate::gates::{ConditionGate, NodeGate};

/// The test bed's kubelet log (one `====` line per start); elsewhere the kubelet's journal is read.
pub const TESTBED_KUBELET_LOG: &str = "/var/log/faultlab/testbed/kubelet.log";

/// What the kubelet logs when the checkpoint's CPUs are not the node's (1.20: `static policy invalid
/// state: current set of available CPUs "0-1" doesn't match with CPUs in state "0-3"`).
pub const KUBELET_ERROR: &str = "doesn't match with CPUs in state";

fn default_reserved_cpu() -> String {
    "500m".into()
}

/// The most CPUs a node may be said to have had: more than any node Kubernetes runs on.
pub const MAX_CPUS: u32 = 4096;

// What the fault reads on the node (a plan answers these).
const ONLINE_CPUS: Ask = Ask("online-cpus");
/// A file of the kubelet's (its extra flags, its CPU manager state), if there.
const NODE_FILE: Ask = Ask("kubelet-file");
const KUBELET_LOG: Ask = Ask("kubelet-cpu-manager-error");

#[derive(Clone, Debug, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CpuCount {
    /// How many CPUs the node had before it was resized, as its checkpoint says (default: twice the
    /// CPUs it has now).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub previous_cpus: Option<u32>,
    /// CPU reserved for Kubernetes daemons (`--kube-reserved=cpu=...`); the static policy needs some.
    #[serde(default = "default_reserved_cpu")]
    pub kube_reserved_cpu: String,
}

impl Default for CpuCount {
    fn default() -> Self {
        CpuCount { previous_cpus: None, kube_reserved_cpu: default_reserved_cpu() }
    }
}

/// How many CPUs a Linux CPU list names (`0-1`, `0-3,6,8-9`).
pub fn count_cpu_list(list: &str) -> Option<u32> {
    let list = list.trim();
    if list.is_empty() {
        return None;
    }
    let mut n = 0u32;
    for part in list.split(',') {
        match part.split_once('-') {
            Some((a, b)) => {
                let (a, b): (u32, u32) = (a.trim().parse().ok()?, b.trim().parse().ok()?);
                if b < a {
                    return None;
                }
                n = n.checked_add(b - a)?.checked_add(1)?;
            }
            None => {
                part.trim().parse::<u32>().ok()?;
                n = n.checked_add(1)?;
            }
        }
    }
    Some(n)
}

/// The checkpoint a static-policy kubelet leaves on a node with `cpus` CPUs and no exclusive
/// assignments. Checksum 0 skips the 1.20 kubelet's checksum check, as the test-bed trial found.
pub fn checkpoint(cpus: u32) -> String {
    let set = if cpus <= 1 { "0".to_string() } else { format!("0-{}", cpus - 1) };
    format!(r#"{{"policyName":"static","defaultCpuSet":"{set}","checksum":0}}"#)
}

/// The CPU reserved for Kubernetes daemons: a Kubernetes quantity (`500m`, `1`), more than zero (the
/// static policy refuses to start without reserved CPU) and at most [`MAX_CPUS`] CPUs, written as is
/// into the kubelet's flags, so without spaces around it.
fn check_reserved_cpu(field: &str, value: &str) -> Option<Problem> {
    if value.trim() != value {
        return Some(Problem::new(
            field,
            format!("{value:?} has spaces around it: it goes into the kubelet's --kube-reserved flag as written (for example 500m or 1)"),
        ));
    }
    let milli = match quantity_milli(field, value) {
        Ok(m) => m,
        Err(problem) => return Some(problem),
    };
    let max = u128::from(MAX_CPUS) * 1000;
    (milli == 0 || milli > max).then(|| {
        Problem::new(
            field,
            format!(
                "{value:?} is out of range: it must be more than 0 and at most {MAX_CPUS} CPUs (1m to {MAX_CPUS}); the static CPU manager \
                 policy refuses to start without CPU reserved for the daemons, and the node must have more CPUs than are reserved"
            ),
        )
    })
}

/// Write `content` to `path` exactly, or remove `path` if `content` is `None`.
fn restore_file(path: &str, content: Option<&str>) -> String {
    match content {
        Some(c) => format!("printf %s {} > {}", shell_words::quote(c), shell_words::quote(path)),
        None => format!("rm -f {}", shell_words::quote(path)),
    }
}

impl CpuCount {
    /// The kubelet's own complaint (the fault is in place when the kubelet rejects the checkpoint), from its log, quoted in the record.
    async fn kubelet_rejected(ctx: &Ctx) -> Result<(), FaultError> {
        for attempt in 0..30 {
            let out = ctx.probe("read-kubelet-log", Self::kubelet_error(ctx.node.name())).await?;
            if let Some(line) = out.stdout.lines().find(|l| l.contains(KUBELET_ERROR)) {
                ctx.note(format!("kubelet: {}", line.trim()));
                return Ok(());
            }
            if attempt < 29 {
                ctx.pause(Duration::from_secs(1)).await;
            }
        }
        Err(FaultError::Check {
            step: "read-kubelet-log".into(),
            message: format!("the kubelet's log does not say {KUBELET_ERROR:?}: it did not reject the checkpoint"),
        })
    }

    fn flags(&self) -> [String; 2] {
        ["--cpu-manager-policy=static".into(), format!("--kube-reserved=cpu={}", self.kube_reserved_cpu)]
    }

    fn state(ctx: &Ctx) -> String {
        ctx.node.profile.cpu_manager_state().display().to_string()
    }

    /// A file's content, or `None` if it does not exist.
    async fn read(ctx: &Ctx, step: &str, path: &str) -> Result<Option<String>, FaultError> {
        let out = ctx.probe(step, Cmd::shell(format!("test -f {p} && cat {p}", p = shell_words::quote(path))).asks(NODE_FILE)).await?;
        Ok(out.success().then_some(out.stdout))
    }

    /// The kubelet's log since its last start (test bed), or its whole journal (kind: the kubelet's fatal
    /// error is followed by a dump of every goroutine, over a thousand lines, so no last-N window holds
    /// it; a node's journal lives in /run and a kind node is new for each run), filtered to the CPU
    /// manager's complaint.
    /// On the test bed node K's kubelet logs to `kubelet@<node>.log` beside node 1's `kubelet.log`
    /// (ci/testbed/lib/supervisor.sh); elsewhere (kind) the journal.
    pub fn kubelet_error(node: &str) -> Cmd {
        Cmd::shell(format!(
            "f={dir}/kubelet@{node}.log; [ -f \"$f\" ] || f={TESTBED_KUBELET_LOG}; if [ -f \"$f\" ]; then awk '/^==== /{{b=\"\"}} {{b=b $0 \"\\n\"}} END{{printf \"%s\", b}}' \"$f\"; \
             else journalctl -u kubelet --no-pager; fi | grep -F -e {pat} -e 'Failed to start ContainerManager' | tail -n 3",
            pat = shell_words::quote(KUBELET_ERROR),
            dir = TESTBED_KUBELET_LOG.rsplit_once('/').map_or("", |(d, _)| d),
            node = shell_words::quote(node),
        ))
        .asks(KUBELET_LOG)
    }
}

/// The document's fix, step by step, in its order (scenario files name them in `fix[].step`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Step {
    DeleteCpuManagerState,
    RestartKubelet,
}

#[async_trait]
impl Fault for CpuCount {
    /// The kubelet's extra flags (the static policy) and its CPU manager checkpoint.
    fn footprint(node: &NodeProfile) -> Vec<Probe> {
        let flags = node.kubelet.extra_flags_file.clone().unwrap_or_else(|| "/nonexistent".into());
        vec![
            Probe::new("kubelet extra flags", format!("cat {} 2>/dev/null", shell_words::quote(&flags))),
            Probe::new("cpu_manager_state", format!("cat {} 2>/dev/null; echo", shell_words::quote(&node.cpu_manager_state().display().to_string()))),
        ]
    }

    // On kind this stays within the node container, so `reach` keeps its default (the node):
    // the CPU manager policy is the node kubelet's configuration, the checkpoint is a file in the node's
    // /var/lib/kubelet, and the restart is the node's own systemd restarting its kubelet. It only reads
    // the kernel's online CPUs; the CPU sets the kubelet would apply are for its pods' cgroups, below
    // the node container's.

    fn check(&self) -> Vec<Problem> {
        let mut problems = Vec::new();
        if let Some(cpus) = self.previous_cpus {
            problems.extend(range(
                "previousCpus",
                cpus.into(),
                1,
                MAX_CPUS.into(),
                "how many CPUs the node had before it was resized, as the CPU manager's checkpoint names them: a node has at least 1, \
                 and 4096 is more than any node Kubernetes runs on",
            ));
        }
        problems.extend(check_reserved_cpu("kubeReservedCpu", &self.kube_reserved_cpu));
        problems
    }

    /// kind: the static policy from the start, with CPU reserved for the daemons (the policy refuses
    /// to start without), and the kubelet restarted by systemd as on a CCE node.
    fn needs(&self) -> crate::needs::Needs {
        crate::needs::Needs { static_cpu_manager: Some(self.kube_reserved_cpu.clone()), ..Default::default() }
    }

    /// A plan's node: 2 CPUs online, no flags file or checkpoint yet, and a kubelet whose log has the
    /// CPU manager's complaint once it restarts (a placeholder line, as a plan reads no log).
    fn plan_answers(&self, _node: &NodeProfile, _namespace: &str) -> Vec<(Ask, Output)> {
        vec![
            (ONLINE_CPUS, Output::ok("0-1\n")),
            (NODE_FILE, Output::failed(1)),
            (KUBELET_LOG, Output::ok(format!("<the kubelet's log line that says {KUBELET_ERROR:?}>\n"))),
        ]
    }

    /// Turn the static policy on where the kubelet reads extra flags (the test bed). The undo (put the
    /// flags file and the checkpoint back as they were, restart the kubelet) is journalled first.
    async fn prepare(&self, ctx: &Ctx) -> Result<(), FaultError> {
        self.refuse_bad_parameters("write-kubelet-flags")?;
        let Some(flags_file) = ctx.node.profile.kubelet.extra_flags_file.clone() else {
            ctx.note("the kubelet's configuration has the static CPU manager policy already (kind: set at cluster creation)");
            return Ok(());
        };
        let state = Self::state(ctx);
        let flags_before = Self::read(ctx, "read-kubelet-flags", &flags_file).await?;
        let state_before = Self::read(ctx, "read-cpu-manager-state", &state).await?;
        let restart = ctx.node.profile.restart_kubelet();
        let undo = format!(
            "{}; {}; {}",
            restore_file(&flags_file, flags_before.as_deref()),
            restore_file(&state, state_before.as_deref()),
            restart.shell_line()
        );
        ctx.undo_on_node("restore the kubelet's flags and CPU manager checkpoint, restart the kubelet", Cmd::shell(undo).timeout(restart.timeout))?;

        let mut flags = flags_before.unwrap_or_default();
        if !flags.is_empty() && !flags.ends_with('\n') {
            flags.push('\n');
        }
        flags.push_str("# faultlab cpu-count: the static CPU manager policy\n");
        for f in self.flags() {
            flags.push_str(&f);
            flags.push('\n');
        }
        ctx.note(format!("enable the static CPU manager policy: {} in {flags_file}", self.flags().join(" ")));
        ctx.run("write-kubelet-flags", Cmd::shell(restore_file(&flags_file, Some(&flags)))).await?;
        // The `none` policy's checkpoint would stop a static kubelet: drop it, as one does when
        // changing the policy.
        ctx.run("remove-none-checkpoint", Cmd::new(["rm", "-f", state.as_str()])).await?;
        ctx.run("restart-kubelet-static", restart).await?;
        Ok(())
    }

    async fn inject(&self, ctx: &Ctx) -> Result<(), FaultError> {
        self.refuse_bad_parameters("resize")?;
        let state = Self::state(ctx);
        let online = ctx.run("read-online-cpus", Cmd::new(["cat", "/sys/devices/system/cpu/online"]).asks(ONLINE_CPUS)).await?;
        let now = count_cpu_list(&online.stdout).ok_or_else(|| FaultError::Check {
            step: "read-online-cpus".into(),
            message: format!("cannot read a CPU list from {:?}", online.stdout.trim()),
        })?;
        let before = match self.previous_cpus {
            Some(n) => n,
            None => now.checked_mul(2).ok_or_else(|| FaultError::Check {
                step: "resize".into(),
                message: format!("the node reports {now} CPUs, and twice that is more than a checkpoint can name: set previousCpus"),
            })?,
        };
        if before == now {
            return Err(FaultError::Check {
                step: "resize".into(),
                message: format!("previousCpus is {before}, which the node has: the checkpoint would still match"),
            });
        }
        // Teardown: the checkpoint goes back as it was (a kubelet that has not started since reads it
        // on its next start; after the fix the kubelet wrote the same again). On the test bed prepare's
        // undo then puts the original back and restarts it; on kind this is the node as it was made,
        // so a cluster shared with the next scenario has its checkpoint (not none until a restart).
        let before_inject = Self::read(ctx, "read-cpu-manager-state", &state).await?;
        ctx.undo_on_node("put the CPU manager checkpoint back as it was before the resize", Cmd::shell(restore_file(&state, before_inject.as_deref())))?;
        ctx.note(format!("the node had {before} CPUs and has {now}: leave the checkpoint the {before}-CPU node wrote"));
        ctx.run("write-checkpoint", Cmd::shell(restore_file(&state, Some(&checkpoint(before))))).await?;
        ctx.note("restart the kubelet, as after the resize; it exits on start (a failed restart is the fault)");
        let out = ctx.probe("restart-kubelet", ctx.node.profile.restart_kubelet()).await?;
        // Where a supervisor restarts the kubelet (systemd; the kubelet's configuration is fixed at
        // creation, so there is no extra-flags file), the restart command succeeds however the kubelet
        // ends; the test bed's own fails with it.
        if out.success() && ctx.node.profile.kubelet.extra_flags_file.is_none() {
            ctx.note("the restart command reported success (systemd restarts a kubelet however it ends)");
        }
        // Where nothing restarts the kubelet (the test bed), whether the dying kubelet still posts
        // Ready=False before it exits is a matter of timing; the node controller's verdict (Unknown,
        // after 40 s without status) is not. Where systemd restarts it (kind: the kubelet's
        // configuration is fixed at creation, so there is no extra-flags file), it renews its lease on
        // every start and posts Ready=False (KubeletNotReady) until the CPU manager stops it again: the
        // node is never Unknown. Restart the workload only once that verdict is in, so its new pod
        // always meets the same node: tainted unreachable, or not-ready.
        // The controller's taint for each (1.20's nodeConditionToTaintKeyStatusMap).
        let (status, taint) = if ctx.node.profile.kubelet.extra_flags_file.is_some() {
            ("Unknown", crate::wait::TAINT_UNREACHABLE)
        } else {
            ("False", crate::wait::TAINT_NOT_READY)
        };
        let gate = NodeGate { condition: ConditionGate { type_: "Ready".into(), status: status.into(), reason: None } };
        ctx.observe
            .node(ctx.node.name(), &gate, Duration::from_secs(150))
            .await
            .map_err(|e| FaultError::Check { step: "wait-node-unknown".into(), message: e.to_string() })?;
        // The taint follows the condition on the controller's next pass (seen on kind: a pod restarted in
        // between was scheduled onto the node, and no FailedScheduling came). Wait for the verdict's own
        // taint alone: a test bed kubelet that posted Ready=False as it died leaves the node tainted
        // not-ready until a pass after Unknown swaps it (seen in CI on cgroup v2: the pod's
        // FailedScheduling named not-ready, not unreachable).
        ctx.observe
            .node_tainted(ctx.node.name(), taint, Duration::from_secs(60))
            .await
            .map_err(|e| FaultError::Check { step: "wait-node-tainted".into(), message: e.to_string() })?;
        ctx.note("workloads on the node cannot be restarted: restart the workload");
        ctx.restart_target("restart-workload").await?;
        Self::kubelet_rejected(ctx).await
    }

}

#[async_trait]
impl Fix for CpuCount {
    type Step = Step;

    async fn fix(&self, which: Step, ctx: &Ctx) -> Result<(), FaultError> {
        let step = super::steps::Steps::name(which);
        match which {
            // `rm -rf` of a file already gone succeeds: idempotent.
            Step::DeleteCpuManagerState => ctx.run(step, Cmd::new(["rm", "-rf", Self::state(ctx).as_str()])).await.map(drop),
            // Restarting a healthy kubelet is harmless: idempotent. It must come up this time.
            Step::RestartKubelet => ctx.run(step, ctx.node.profile.restart_kubelet()).await.map(drop),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cmd::Output;
    use crate::faults::testing::ctx;
    use crate::journal::Undo;

    const NS: &str = "ip netns exec faultlab-node timeout -k 5";

    fn out(status: i32, stdout: &str) -> Output {
        Output { status, stdout: stdout.into(), stderr: String::new() }
    }

    #[test]
    fn cpu_lists_and_checkpoints() {
        assert_eq!(count_cpu_list("0-1\n"), Some(2));
        assert_eq!(count_cpu_list("0-3,6,8-9"), Some(7));
        assert_eq!(count_cpu_list("0"), Some(1));
        assert_eq!(count_cpu_list(""), None);
        assert_eq!(count_cpu_list("3-1"), None);
        assert_eq!(checkpoint(4), r#"{"policyName":"static","defaultCpuSet":"0-3","checksum":0}"#);
    }

    #[tokio::test]
    async fn prepare_journals_the_restore_then_sets_the_static_policy() {
        let (ctx, fake) = ctx();
        // No flags file yet; the `none` policy's checkpoint is there.
        fake.respond("test -f /var/lib/faultlab/testbed/kubelet.extra-flags", out(1, ""));
        fake.respond("test -f /var/lib/faultlab/kubelet/cpu_manager_state", out(0, r#"{"policyName":"none","defaultCpuSet":"","checksum":1353318690}"#));
        CpuCount::default().prepare(&ctx).await.unwrap();
        let journal = ctx.journal.snapshot();
        assert_eq!(journal.entries.len(), 1);
        let Undo::Node { cmd, .. } = &journal.entries[0].undo else { panic!("a node undo") };
        assert_eq!(
            cmd.argv[2],
            "rm -f /var/lib/faultlab/testbed/kubelet.extra-flags; \
             printf %s '{\"policyName\":\"none\",\"defaultCpuSet\":\"\",\"checksum\":1353318690}' > /var/lib/faultlab/kubelet/cpu_manager_state; \
             /opt/faultlab/ci/testbed/node restart kubelet"
        );
        let lines = fake.lines();
        assert_eq!(lines.len(), 5, "{lines:#?}");
        assert_eq!(
            lines[2],
            format!("{NS} 60 sh -c 'printf %s '\\''# faultlab cpu-count: the static CPU manager policy\n--cpu-manager-policy=static\n--kube-reserved=cpu=500m\n'\\'' > /var/lib/faultlab/testbed/kubelet.extra-flags'")
        );
        assert_eq!(lines[3], format!("{NS} 60 rm -f /var/lib/faultlab/kubelet/cpu_manager_state"));
        assert_eq!(lines[4], format!("{NS} 120 /opt/faultlab/ci/testbed/node restart kubelet"));
    }

    #[tokio::test]
    async fn prepare_keeps_flags_that_were_there() {
        let (ctx, fake) = ctx();
        fake.respond("test -f /var/lib/faultlab/testbed/kubelet.extra-flags", out(0, "--v=2"));
        CpuCount::default().prepare(&ctx).await.unwrap();
        let Undo::Node { cmd, .. } = &ctx.journal.snapshot().entries[0].undo else { panic!() };
        assert!(cmd.argv[2].starts_with("printf %s '--v=2' > /var/lib/faultlab/testbed/kubelet.extra-flags; "), "{}", cmd.argv[2]);
    }

    #[tokio::test]
    async fn inject_writes_a_bigger_nodes_checkpoint_and_tolerates_the_failed_restart() {
        let (ctx, fake) = ctx();
        fake.respond("cat /sys/devices/system/cpu/online", out(0, "0-1\n"));
        fake.respond("node restart kubelet", out(1, "kubelet did not come up"));
        fake.respond("Failed to start ContainerManager", out(0, "E1122 static policy invalid state: current set of available CPUs \"0-1\" doesn't match with CPUs in state \"0-3\"\n"));
        let before = r#"{"policyName":"static","defaultCpuSet":"0-1","checksum":1636926438}"#;
        fake.respond("cat /var/lib/faultlab/kubelet/cpu_manager_state", out(0, before));
        CpuCount::default().inject(&ctx).await.unwrap();
        let journal = ctx.journal.snapshot();
        assert_eq!(journal.entries.len(), 1, "the undo is journalled");
        let Undo::Node { cmd, .. } = &journal.entries[0].undo else { panic!("a node undo") };
        assert_eq!(cmd.argv[2], format!("printf %s '{before}' > /var/lib/faultlab/kubelet/cpu_manager_state"), "the checkpoint as it was, not none");
        let lines = fake.lines();
        assert_eq!(
            lines[..4],
            [
                format!("{NS} 60 cat /sys/devices/system/cpu/online"),
                format!("{NS} 60 sh -c 'test -f /var/lib/faultlab/kubelet/cpu_manager_state && cat /var/lib/faultlab/kubelet/cpu_manager_state'"),
                format!("{NS} 60 sh -c 'printf %s '\\''{{\"policyName\":\"static\",\"defaultCpuSet\":\"0-3\",\"checksum\":0}}'\\'' > /var/lib/faultlab/kubelet/cpu_manager_state'"),
                format!("{NS} 120 /opt/faultlab/ci/testbed/node restart kubelet"),
            ]
        );
        // Last, after the workload's restart: the kubelet's own complaint, quoted (the fault is in place).
        assert_eq!(lines.len(), 5, "{lines:#?}");
        assert!(lines[4].contains("Failed to start ContainerManager"), "{}", lines[4]);
        let api: Vec<String> = ctx.rec().entries().into_iter().map(|e| e.line).collect();
        let delete = api.iter().position(|l| l.starts_with("DELETE /api/v1/namespaces/fl-test/pods?labelSelector=app=web")).expect("the workload is restarted");
        assert!(api[delete + 1..].iter().any(|l| l.starts_with("kubelet: E1122 static policy invalid state")), "{api:?}");
    }

    #[tokio::test]
    async fn inject_refuses_a_checkpoint_that_would_match() {
        let (ctx, fake) = ctx();
        fake.respond("cat /sys/devices/system/cpu/online", out(0, "0-3\n"));
        let err = CpuCount { previous_cpus: Some(4), ..Default::default() }.inject(&ctx).await.unwrap_err();
        assert!(err.to_string().contains("would still match"), "{err}");
        assert!(ctx.journal.snapshot().entries.is_empty(), "nothing changed, nothing journalled");
    }

    #[tokio::test]
    async fn inject_ends_quoting_the_kubelet_error() {
        let (ctx, fake) = ctx();
        fake.respond(
            "Failed to start ContainerManager",
            out(0, "E1122 static policy invalid state: current set of available CPUs \"0-1\" doesn't match with CPUs in state \"0-3\"\n"),
        );
        CpuCount::kubelet_rejected(&ctx).await.unwrap();
        let notes: Vec<String> = ctx.rec().entries().into_iter().map(|e| e.line).collect();
        assert!(notes.iter().any(|n| n.starts_with("kubelet: E1122 static policy invalid state")), "{notes:?}");
    }

    #[tokio::test]
    async fn fix_deletes_the_checkpoint_and_restarts_the_kubelet() {
        let (ctx, fake) = ctx();
        let fault = CpuCount::default();
        for step in crate::faults::steps::all::<Step>() {
            fault.fix(step, &ctx).await.unwrap();
        }
        assert_eq!(
            fake.lines(),
            vec![
                format!("{NS} 60 rm -rf /var/lib/faultlab/kubelet/cpu_manager_state"),
                format!("{NS} 120 /opt/faultlab/ci/testbed/node restart kubelet"),
            ]
        );
    }

    #[test]
    fn needs_the_static_policy_with_the_reserved_cpu() {
        assert_eq!(CpuCount::default().needs().static_cpu_manager.as_deref(), Some("500m"));
    }

    fn cpu_count(previous_cpus: Option<u32>, reserved: &str) -> CpuCount {
        CpuCount { previous_cpus, kube_reserved_cpu: reserved.into() }
    }

    #[rstest::rstest]
    #[case::defaults(None, "500m")]
    #[case::one_cpu(Some(1), "1m")]
    #[case::most_cpus(Some(4096), "4096")]
    #[case::whole_cpus(Some(8), "1")]
    #[case::decimal(Some(8), "1.5")]
    fn parameters_in_range_pass(#[case] previous: Option<u32>, #[case] reserved: &str) {
        assert_eq!(cpu_count(previous, reserved).check(), vec![]);
    }

    #[rstest::rstest]
    #[case::no_cpus(Some(0), "500m", "previousCpus", "0 is out of range: it must be 1 to 4096 (how many CPUs the node had before it was resized")]
    #[case::too_many_cpus(Some(4097), "500m", "previousCpus", "4097 is out of range: it must be 1 to 4096")]
    #[case::u32_max_cpus(Some(u32::MAX), "500m", "previousCpus", "4294967295 is out of range: it must be 1 to 4096")]
    #[case::not_a_quantity(None, "lots", "kubeReservedCpu", "\"lots\" is not a Kubernetes quantity (a non-negative number with an optional suffix")]
    #[case::negative(None, "-1", "kubeReservedCpu", "\"-1\" is not a Kubernetes quantity")]
    #[case::zero(None, "0", "kubeReservedCpu", "\"0\" is out of range: it must be more than 0 and at most 4096 CPUs (1m to 4096); the static CPU manager policy refuses to start without")]
    #[case::zero_milli(None, "0m", "kubeReservedCpu", "\"0m\" is out of range: it must be more than 0")]
    #[case::too_much(None, "4097", "kubeReservedCpu", "\"4097\" is out of range: it must be more than 0 and at most 4096 CPUs")]
    #[case::spaces(None, "500m\n--v=9", "kubeReservedCpu", "\"500m\\n--v=9\" is not a Kubernetes quantity")]
    #[case::spaces_around(None, " 500m\n", "kubeReservedCpu", "\" 500m\\n\" has spaces around it: it goes into the kubelet's --kube-reserved flag as written")]
    #[case::empty(None, "", "kubeReservedCpu", "\"\" is not a Kubernetes quantity")]
    fn parameters_out_of_range_say_the_range(#[case] previous: Option<u32>, #[case] reserved: &str, #[case] field: &str, #[case] message: &str) {
        let problems = cpu_count(previous, reserved).check();
        assert_eq!(problems.len(), 1, "{problems:?}");
        assert_eq!(problems[0].field, field);
        assert!(problems[0].message.starts_with(message), "{}", problems[0].message);
        assert_eq!(crate::faults::FaultSpec::CpuCount(cpu_count(previous, reserved)).check()[0].field, format!("fault.cpu-count.{field}"));
    }

    #[test]
    fn both_problems_are_reported() {
        let fields: Vec<String> = cpu_count(Some(0), "lots").check().into_iter().map(|p| p.field).collect();
        assert_eq!(fields, ["previousCpus", "kubeReservedCpu"]);
    }

    #[test]
    fn cpu_lists_too_long_to_count_are_not_counted() {
        assert_eq!(count_cpu_list("0-4294967295"), None, "one more than a u32 holds: no panic");
        assert_eq!(count_cpu_list("0-4294967294"), Some(u32::MAX));
        assert_eq!(count_cpu_list("0-4294967294,7"), None);
    }

    #[tokio::test]
    async fn out_of_range_parameters_change_nothing_even_unchecked() {
        let (ctx, fake) = ctx();
        fake.respond("cat /sys/devices/system/cpu/online", out(0, "0-1\n"));
        let err = cpu_count(Some(0), "500m").inject(&ctx).await.unwrap_err();
        assert!(err.to_string().starts_with("resize: previousCpus: 0 is out of range: it must be 1 to 4096"), "{err}");
        let err = cpu_count(None, "500m\n--cpu-manager-policy=none").prepare(&ctx).await.unwrap_err();
        assert!(err.to_string().starts_with("write-kubelet-flags: kubeReservedCpu: "), "{err}");
        assert!(fake.lines().is_empty(), "{:?}", fake.lines());
        assert!(ctx.journal.snapshot().entries.is_empty());
    }

    #[tokio::test]
    async fn a_huge_node_does_not_overflow_the_default() {
        let (ctx, fake) = ctx();
        fake.respond("cat /sys/devices/system/cpu/online", out(0, "0-4294967294\n"));
        let err = CpuCount::default().inject(&ctx).await.unwrap_err();
        assert!(err.to_string().contains("the node reports 4294967295 CPUs, and twice that is more than a checkpoint can name"), "{err}");
        assert!(ctx.journal.snapshot().entries.is_empty());
    }
}
