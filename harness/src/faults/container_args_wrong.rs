//! container-args-wrong: the image is right, the container's command line is not.
//!
//! Source: imroc's Kubernetes troubleshooting guide, "Pod 一直处于 ContainerCreating 或 Waiting 状态 /
//! Pod 配置错误": "检查是否打包了正确的镜像; 检查配置了正确的容器参数" (check that the right image was
//! packaged; check that the container's parameters are right). image-address-wrong covers the first
//! half; this fault the second.
//!
//! How: the workload runs and is ready. The fault edits the Deployment as a release with a mistyped
//! parameter would: the container's `args` (and/or `command`) become the scenario's wrong ones, the
//! right ones kept in the run's journal first. The new pod's process exits at once and the kubelet
//! backs off restarting it (Waiting: CrashLoopBackOff). The fix writes the right parameters back; a
//! container that had none gets none (`null` in the strategic merge patch removes the field).

use async_trait::async_trait;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::json;

use super::api::{Ctx, Fault, FaultError, Fix, Presence, Reach, WorkloadRef};
use super::registry;
use crate::check::{dns_label, dns_subdomain, Problem};
use crate::gates::Target;

#[derive(Clone, Debug, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ContainerArgsWrong {
    /// The Deployment whose container gets the wrong parameters; it must be part of the workload.
    pub deployment: String,
    /// The container of its pod template.
    pub container: String,
    /// The wrong `command` the fault writes (the image's entrypoint replaced), if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub command: Option<Vec<String>>,
    /// The wrong `args` the fault writes, if any. One of `command` and `args` at least.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub args: Option<Vec<String>>,
}

/// The document's fix (scenario files name it in `fix[].step`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Step {
    CorrectContainerArgs,
}

/// A container's command line as the pod template has it: `command` and `args`, each absent or a list.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CommandLine {
    pub command: Option<Vec<String>>,
    pub args: Option<Vec<String>>,
}

impl CommandLine {
    /// The container `name`'s command line in a Deployment, or `None` if it has no such container.
    pub fn of(deployment: &serde_json::Value, name: &str) -> Option<CommandLine> {
        let c = registry::containers(deployment).iter().find(|c| c["name"].as_str() == Some(name))?;
        let list = |v: &serde_json::Value| v.as_array().map(|a| a.iter().filter_map(|s| s.as_str().map(String::from)).collect());
        Some(CommandLine { command: list(&c["command"]), args: list(&c["args"]) })
    }

    /// The strategic merge patch that writes it to container `name` (an absent list as `null`: removed).
    pub fn patch(&self, name: &str) -> serde_json::Value {
        json!({"spec": {"template": {"spec": {"containers": [{"name": name, "command": self.command, "args": self.args}]}}}})
    }

    /// As a person reads it: `command... args...`.
    pub fn shown(&self) -> String {
        let words: Vec<&str> = self.command.iter().chain(self.args.iter()).flatten().map(String::as_str).collect();
        crate::cmd::shell_join(&words)
    }
}

const KEPT: &str = "command-line";

impl ContainerArgsWrong {
    /// The wrong command line: the scenario's `command` and `args`, each as the template had it where
    /// the scenario leaves it out.
    fn wrong(&self, right: &CommandLine) -> CommandLine {
        CommandLine { command: self.command.clone().or_else(|| right.command.clone()), args: self.args.clone().or_else(|| right.args.clone()) }
    }

    async fn current(&self, ctx: &Ctx, step: &str) -> Result<CommandLine, FaultError> {
        let d = registry::deployment(ctx, &self.deployment, step).await?;
        CommandLine::of(&d, &self.container).ok_or_else(|| FaultError::Check {
            step: step.into(),
            message: format!("Deployment {} has no container {:?}; `container` must name one of its pod template's", self.deployment, self.container),
        })
    }

    async fn write(&self, ctx: &Ctx, step: &str, line: &CommandLine) -> Result<(), FaultError> {
        ctx.kube.patch_object("apps/v1", "Deployment", Some(&ctx.namespace), &self.deployment, &line.patch(&self.container)).await.map_err(Ctx::api_err(step))
    }
}

#[async_trait]
impl Fault for ContainerArgsWrong {
    /// It edits a Deployment of the run's namespace through the API, and runs nothing on the node.
    fn reach(&self) -> Reach {
        Reach::Namespace
    }

    fn check(&self) -> Vec<Problem> {
        let mut problems: Vec<Problem> = dns_subdomain("deployment", &self.deployment).into_iter().collect();
        problems.extend(dns_label("container", &self.container));
        match (&self.command, &self.args) {
            (None, None) => problems.push(Problem::new("args", "the fault writes wrong parameters: give `args`, `command` or both")),
            (Some(c), _) if c.is_empty() => problems.push(Problem::new("command", "is empty: the image's entrypoint would run, which is not a wrong command; give one")),
            _ => {}
        }
        problems
    }

    fn workload_refs(&self) -> Vec<WorkloadRef> {
        vec![WorkloadRef { field: "deployment", kind: "Deployment", name: self.deployment.clone() }]
    }

    /// A plan's workload has made its Deployment, whose container runs `httpd -f` (a plan does not know
    /// the real command line).
    fn plan_api_answers(&self, _target: &Target) -> Vec<(String, serde_json::Value)> {
        let container = json!({"name": self.container, "command": ["httpd"], "args": ["-f"]});
        vec![(format!("/deployments/{}", self.deployment), json!({"metadata": {"name": self.deployment}, "spec": {"template": {"spec": {"containers": [container]}}}}))]
    }

    /// Keep the right command line in the journal, then write the wrong one (the Deployment replaces
    /// its pod).
    async fn inject(&self, ctx: &Ctx) -> Result<(), FaultError> {
        self.refuse_bad_parameters("read-deployment")?;
        let right = self.current(ctx, "read-deployment").await?;
        let wrong = self.wrong(&right);
        if wrong == right {
            return Err(FaultError::Check { step: "read-deployment".into(), message: format!("container {} runs `{}` already: the scenario's wrong parameters are its right ones", self.container, right.shown()) });
        }
        ctx.keep(KEPT, &right)?;
        ctx.note(format!("container {} runs `{}`; a release mistypes its parameters: `{}`", self.container, right.shown(), wrong.shown()));
        self.write(ctx, "write-wrong-args", &wrong).await
    }

    async fn present(&self, ctx: &Ctx) -> Result<Presence, FaultError> {
        let now = self.current(ctx, "check-args").await?;
        let Some(right) = ctx.kept::<CommandLine>(KEPT) else {
            return Ok(Presence::Unknown);
        };
        Ok(if now == right {
            Presence::Absent(format!("container {} runs `{}`, its right parameters", self.container, now.shown()))
        } else if now == self.wrong(&right) {
            Presence::Present(format!("container {} runs `{}`, the wrong parameters", self.container, now.shown()))
        } else {
            Presence::Absent(format!("container {} runs `{}`, other parameters than the fault's", self.container, now.shown()))
        })
    }
}

#[async_trait]
impl Fix for ContainerArgsWrong {
    type Step = Step;

    /// The same patch each time: idempotent.
    async fn fix(&self, which: Step, ctx: &Ctx) -> Result<(), FaultError> {
        let step = super::steps::Steps::name(which);
        self.refuse_bad_parameters(step)?;
        match which {
            Step::CorrectContainerArgs => {
                let Some(right) = ctx.kept::<CommandLine>(KEPT) else {
                    return Err(FaultError::Check { step: step.into(), message: "the run's journal has no command line the fault changed".into() });
                };
                ctx.note(format!("write the right parameters again: `{}` (correct the YAML, as the document says)", right.shown()));
                self.write(ctx, step, &right).await
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::faults::testing::plan_ctx;
    use crate::record::Channel;

    fn fault(args: Option<&[&str]>, command: Option<&[&str]>) -> ContainerArgsWrong {
        let own = |l: &[&str]| l.iter().map(|s| s.to_string()).collect();
        ContainerArgsWrong { deployment: "web".into(), container: "app".into(), args: args.map(own), command: command.map(own) }
    }

    #[tokio::test]
    async fn plan_keeps_the_right_line_writes_the_wrong_one_and_back() {
        let f = fault(Some(&["-f", "--port", "8080"]), None);
        let (ctx, fake) = plan_ctx(&f);
        f.inject(&ctx).await.unwrap();
        f.fix(Step::CorrectContainerArgs, &ctx).await.unwrap();
        let patches: Vec<String> = ctx.rec().entries().into_iter().filter(|e| e.channel == Channel::Api && e.line.starts_with("PATCH")).map(|e| e.line).collect();
        assert_eq!(patches.len(), 2, "{patches:?}");
        assert!(patches[0].contains(r#""args":["-f","--port","8080"],"command":["httpd"],"name":"app""#), "{patches:?}");
        assert!(patches[1].contains(r#""args":["-f"],"command":["httpd"],"name":"app""#), "{patches:?}");
        assert_eq!(ctx.kept::<CommandLine>(KEPT), Some(CommandLine { command: Some(vec!["httpd".into()]), args: Some(vec!["-f".into()]) }));
        assert!(fake.lines().is_empty(), "nothing on the node");
    }

    #[test]
    fn an_absent_list_is_removed_by_the_patch() {
        let line = CommandLine { command: None, args: Some(vec!["x".into()]) };
        assert_eq!(line.patch("app"), json!({"spec": {"template": {"spec": {"containers": [{"name": "app", "command": null, "args": ["x"]}]}}}}));
        assert_eq!(line.shown(), "x");
    }

    #[test]
    fn the_command_line_is_read_from_the_named_container() {
        let d = json!({"spec": {"template": {"spec": {"containers": [{"name": "side", "args": ["a"]}, {"name": "app", "command": ["sh", "-c", "echo hi"]}]}}}});
        assert_eq!(CommandLine::of(&d, "app"), Some(CommandLine { command: Some(vec!["sh".into(), "-c".into(), "echo hi".into()]), args: None }));
        assert_eq!(CommandLine::of(&d, "nope"), None);
    }

    #[rstest::rstest]
    #[case::neither(None, None, "args", "give `args`, `command` or both")]
    #[case::empty_command(None, Some(&[][..]), "command", "is empty")]
    fn bad_parameters_are_problems(#[case] args: Option<&[&str]>, #[case] command: Option<&[&str]>, #[case] field: &str, #[case] message: &str) {
        let problems = fault(args, command).check();
        assert_eq!(problems.len(), 1, "{problems:?}");
        assert_eq!(problems[0].field, field);
        assert!(problems[0].message.contains(message), "{}", problems[0].message);
    }

    #[tokio::test]
    async fn the_right_line_as_the_wrong_one_is_refused_before_any_change() {
        let f = fault(Some(&["-f"]), Some(&["httpd"]));
        let (ctx, _) = plan_ctx(&f);
        let err = f.inject(&ctx).await.unwrap_err();
        assert!(err.to_string().contains("the scenario's wrong parameters are its right ones"), "{err}");
        assert!(ctx.journal.snapshot().entries.is_empty());
        assert!(!ctx.rec().entries().iter().any(|e| e.line.starts_with("PATCH")));
    }
}
