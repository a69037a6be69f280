use std::sync::Arc;
#[cfg(test)]
use std::sync::Mutex;

use async_trait::async_trait;

use super::{NodeAccess, NodeProfile};
use crate::cmd::{self, Ask, Cmd, CmdError, Output};
use crate::record::{Recorder, Work};

/// Runs host argv. The real one spawns processes; a plan's answers from a script (tests' records them).
#[async_trait]
pub trait Executor: Send + Sync {
    /// Run `argv` on this machine; a non-zero exit is an error unless `allow_failure`.
    async fn run(&self, argv: &[String], cmd: &Cmd, allow_failure: bool) -> Result<Output, CmdError>;
}

/// Spawns real processes on this machine.
#[derive(Clone, Copy, Debug, Default)]
pub struct HostExecutor;

#[async_trait]
impl Executor for HostExecutor {
    async fn run(&self, argv: &[String], cmd: &Cmd, allow_failure: bool) -> Result<Output, CmdError> {
        cmd::run_host(argv, cmd.stdin.as_ref(), NodeAccess::host_timeout(cmd), allow_failure).await
    }
}

/// Another executor, with the time each command takes counted as [`Work::Commands`] in `rec`'s
/// current phase (a run's own time, as opposed to waiting on the cluster).
pub struct TimedExecutor {
    pub inner: Arc<dyn Executor>,
    pub rec: Recorder,
}

#[async_trait]
impl Executor for TimedExecutor {
    async fn run(&self, argv: &[String], cmd: &Cmd, allow_failure: bool) -> Result<Output, CmdError> {
        self.rec.timed(Work::Commands, self.inner.run(argv, cmd, allow_failure)).await
    }
}

/// A scripted output as a real command's: a failure is an error unless `allow_failure`.
fn as_from_a_command(answer: Output, argv: &[String], allow_failure: bool) -> Result<Output, CmdError> {
    if answer.success() || allow_failure {
        Ok(answer)
    } else {
        Err(CmdError::Failed { line: cmd::shell_join(argv), status: answer.status, stdout: answer.stdout, stderr: answer.stderr })
    }
}

/// A plan's executor: runs nothing, and answers each command by what it asks ([`Ask`], a fault's plan
/// answers; the last answer for an ask wins). A command that asks nothing, or nothing the script
/// answers, succeeds with no output.
pub struct ScriptedExecutor {
    script: Vec<(Ask, Output)>,
}

impl ScriptedExecutor {
    pub fn new(script: Vec<(Ask, Output)>) -> Self {
        ScriptedExecutor { script }
    }
}

#[async_trait]
impl Executor for ScriptedExecutor {
    async fn run(&self, argv: &[String], cmd: &Cmd, allow_failure: bool) -> Result<Output, CmdError> {
        let answer = cmd.ask.and_then(|ask| self.script.iter().rev().find(|(a, _)| *a == ask)).map(|(_, o)| o.clone()).unwrap_or_default();
        as_from_a_command(answer, argv, allow_failure)
    }
}

/// A test's executor: records every argv and answers from a script it can add to as it goes.
#[cfg(test)]
#[derive(Default)]
pub struct FakeExecutor {
    pub calls: Mutex<Vec<Vec<String>>>,
    /// (needle, answer, how many more times it answers: None for always).
    script: Mutex<Vec<(String, Output, Option<usize>)>>,
    asked: Mutex<Vec<(Ask, Output)>>,
}

#[cfg(test)]
impl FakeExecutor {
    pub fn new() -> Arc<Self> {
        Arc::new(Self::default())
    }

    /// Answer commands whose shell line contains `needle` with `output`.
    pub fn respond(&self, needle: &str, output: Output) {
        self.script.lock().unwrap().push((needle.to_owned(), output, None));
    }

    /// Answer the next command whose shell line contains `needle` with `output`, once; later ones as
    /// before (a sequence: the last answer given once comes first).
    pub fn respond_once(&self, needle: &str, output: Output) {
        self.script.lock().unwrap().push((needle.to_owned(), output, Some(1)));
    }

    /// Answer commands that ask `ask` with `output`, as a plan does (before any needle).
    pub fn answer(&self, ask: Ask, output: Output) {
        self.asked.lock().unwrap().push((ask, output));
    }

    /// Every recorded call as a shell line.
    pub fn lines(&self) -> Vec<String> {
        self.calls.lock().unwrap().iter().map(|a| cmd::shell_join(a)).collect()
    }
}

#[cfg(test)]
#[async_trait]
impl Executor for FakeExecutor {
    async fn run(&self, argv: &[String], cmd: &Cmd, allow_failure: bool) -> Result<Output, CmdError> {
        self.calls.lock().unwrap().push(argv.to_vec());
        let line = cmd::shell_join(argv);
        let asked = cmd.ask.and_then(|ask| self.asked.lock().unwrap().iter().rev().find(|(a, _)| *a == ask).map(|(_, o)| o.clone()));
        let scripted = || {
            let mut script = self.script.lock().unwrap();
            let (_, output, left) = script.iter_mut().rev().find(|(needle, _, left)| line.contains(needle.as_str()) && *left != Some(0))?;
            if let Some(n) = left {
                *n -= 1;
            }
            Some(output.clone())
        };
        let answer = asked.or_else(scripted).unwrap_or_default();
        as_from_a_command(answer, argv, allow_failure)
    }
}

/// A node you can run a command on.
#[derive(Clone)]
pub struct Node {
    pub profile: NodeProfile,
    pub access: NodeAccess,
    executor: Arc<dyn Executor>,
}

impl std::fmt::Debug for Node {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Node").field("name", &self.profile.name).field("access", &self.access).finish()
    }
}

impl Node {
    pub fn new(profile: NodeProfile, access: NodeAccess, executor: Arc<dyn Executor>) -> Self {
        Node { profile, access, executor }
    }

    pub fn name(&self) -> &str {
        &self.profile.name
    }

    /// The host argv for `cmd`: what `plan` prints and what errors carry.
    pub fn host_argv(&self, cmd: &Cmd) -> Vec<String> {
        self.access.wrap(cmd)
    }

    /// Run `cmd` on the node; a non-zero exit is an error carrying the full command line and output.
    pub async fn run(&self, cmd: &Cmd) -> Result<Output, CmdError> {
        let argv = self.access.wrap(cmd);
        tracing::debug!(node = %self.name(), cmd = %cmd::shell_join(&argv), "exec");
        self.executor.run(&argv, cmd, false).await
    }

    /// Run `cmd` on the node and return its output whatever its exit status.
    pub async fn probe(&self, cmd: &Cmd) -> Result<Output, CmdError> {
        let argv = self.access.wrap(cmd);
        tracing::debug!(node = %self.name(), cmd = %cmd::shell_join(&argv), "probe");
        self.executor.run(&argv, cmd, true).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::node::NodeAccess;

    #[test]
    fn docker_exec_carries_an_inner_timeout() {
        let access = NodeAccess::Docker { container: "faultlab-x-control-plane".into() };
        let cmd = Cmd::new(["ctr", "-n", "k8s.io", "images", "ls"]).timeout(std::time::Duration::from_secs(30));
        assert_eq!(
            cmd::shell_join(&access.wrap(&cmd)),
            "docker exec faultlab-x-control-plane timeout -k 5 30 ctr -n k8s.io images ls"
        );
        let with_input = Cmd::new(["ctr", "images", "import", "-"]).stdin("x");
        assert!(cmd::shell_join(&access.wrap(&with_input)).starts_with("docker exec -i faultlab-x-control-plane"));
    }

    #[test]
    fn netns_exec_carries_an_inner_timeout() {
        let access = NodeAccess::Netns { netns: "faultlab-node".into() };
        let cmd = Cmd::new(["ip", "route", "del", "default"]);
        assert_eq!(cmd::shell_join(&access.wrap(&cmd)), "ip netns exec faultlab-node timeout -k 5 60 ip route del default");
    }

    #[tokio::test]
    async fn fake_executor_records_and_fails_as_scripted() {
        let fake = FakeExecutor::new();
        fake.respond("images rm", Output { status: 1, stdout: String::new(), stderr: "not found".into() });
        let profile = crate::testbed::tests::sample_profile();
        let node = Node::new(profile.clone(), profile.access().unwrap(), fake.clone());
        node.run(&Cmd::new(["true"])).await.unwrap();
        let err = node.run(&profile.ctr(["images", "rm", "x"])).await.unwrap_err();
        assert!(err.to_string().contains("ip netns exec faultlab-node timeout -k 5 60 ctr --address"), "{err}");
        assert!(err.to_string().contains("not found"));
        assert_eq!(fake.lines().len(), 2);
    }
}

#[cfg(test)]
mod timed_tests {
    use super::*;
    use crate::record::Phase;
    use std::time::Duration;

    struct Slow;

    #[async_trait]
    impl Executor for Slow {
        async fn run(&self, _argv: &[String], _cmd: &Cmd, _allow_failure: bool) -> Result<Output, CmdError> {
            tokio::time::sleep(Duration::from_secs(4)).await;
            Ok(Output::default())
        }
    }

    #[tokio::test(start_paused = true)]
    async fn each_command_counts_as_the_runs_own_work_in_its_phase() {
        let rec = Recorder::default();
        let timed = TimedExecutor { inner: Arc::new(Slow), rec: rec.clone() };
        let cmd = Cmd::new(["true"]);
        rec.set_phase(Phase::Inject);
        timed.run(&cmd.argv, &cmd, false).await.unwrap();
        rec.set_phase(Phase::Teardown);
        timed.run(&cmd.argv, &cmd, true).await.unwrap();
        let spent = rec.spent();
        assert_eq!(spent.on(Work::Commands, &[Phase::Inject]), Duration::from_secs(4));
        assert_eq!(spent.on(Work::Commands, &Phase::ALL), Duration::from_secs(8));
        assert_eq!(spent.on(Work::Api, &Phase::ALL), Duration::ZERO);
    }
}
