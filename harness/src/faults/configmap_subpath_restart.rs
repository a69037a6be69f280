//! configmap-subpath-restart: a ConfigMap mounted with subPath changes, and the container is then
//! restarted in place (a failed liveness probe); the kubelet bug of kubernetes/kubernetes#68211.
//!
//! Source: imroc's Kubernetes troubleshooting guide, "Pod 一直处于 ContainerCreating 或 Waiting 状态 /
//! 挂载 Volume 失败 / 命中 K8S 挂载 configmap/secret 的 subpath 的 bug": after the ConfigMap changed, the
//! restarted container never starts again (`OCI runtime create failed ... mounting
//! ".../volume-subpaths/<volume>/<container>/0" ... no such file or directory`), and the team's fix is
//! kubernetes PR 82784. That PR was closed unmerged; PR 89629 fixed the bug, first released in
//! v1.19.0 (its 1.16–1.18 backports were reverted). Every kubelet faultlab runs is newer: on them the
//! scenario is a regression guard, and its symptom is the fixed behaviour.
//!
//! The bug: a ConfigMap volume is written by the atomic writer (a new timestamped directory, the
//! `..data` link swapped to it, the old directory removed), and a subPath mount is a bind mount of the
//! file the path resolved to when the container first started. Before the fix the kubelet reused that
//! bind mount on a restart, whose source was gone by then; since the fix it resolves the path and binds
//! it again each time the container starts.
//!
//! How: the workload mounts one key of the ConfigMap with subPath and the whole ConfigMap beside it,
//! and its liveness probe fails when the two differ (the subPath file never follows an update, the
//! volume does within the kubelet's sync period): the document's "存活检查失败被 kill 然后重启拉起".
//! The fault changes the key's value, nothing else; the old value is kept in the run's journal. The
//! namespace's deletion at teardown takes the ConfigMap, so there is nothing to undo.

use async_trait::async_trait;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::json;

use super::api::{Ctx, Fault, FaultError, Fix, Presence, Reach, WorkloadRef};
use crate::check::{dns_subdomain, Problem};
use crate::gates::Target;

#[derive(Clone, Debug, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ConfigmapSubpathRestart {
    /// The ConfigMap the workload mounts with subPath; it must be part of the workload.
    pub config_map: String,
    /// The key whose value changes (the file the subPath mount names).
    pub key: String,
    /// Its new value.
    pub value: String,
}

/// The fix steps (scenario files name them in `fix[].step`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Step {
    /// Delete the pod: its replacement mounts the ConfigMap afresh (the way round the bug on a kubelet
    /// without the fix; on one with it, a fresh pod as a last check).
    RecreatePod,
}

/// A ConfigMap key: what the API accepts (`[-._a-zA-Z0-9]+`, at most 253), and not `.` or `..`.
fn key_problem(key: &str) -> Option<Problem> {
    let why = if key.is_empty() {
        "it is empty"
    } else if key.len() > 253 {
        "it is longer than 253 characters"
    } else if !key.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '.' | '_')) {
        "it has a character other than letters, digits, '-', '.' and '_'"
    } else if key == "." || key == ".." || key.starts_with("..") {
        "it starts with '..', which the atomic writer keeps for itself"
    } else {
        return None;
    };
    Some(Problem::new("key", format!("{key:?} is not a ConfigMap key: {why}")))
}

#[async_trait]
impl Fault for ConfigmapSubpathRestart {
    /// It changes a ConfigMap of the run's namespace through the API, and runs nothing on the node.
    fn reach(&self) -> Reach {
        Reach::Namespace
    }

    fn check(&self) -> Vec<Problem> {
        let mut problems: Vec<Problem> = dns_subdomain("configMap", &self.config_map).into_iter().collect();
        problems.extend(key_problem(&self.key));
        problems
    }

    fn workload_refs(&self) -> Vec<WorkloadRef> {
        vec![WorkloadRef { field: "configMap", kind: "ConfigMap", name: self.config_map.clone() }]
    }

    /// A plan's workload has made its ConfigMap, with the key at another value.
    fn plan_api_answers(&self, _target: &Target) -> Vec<(String, serde_json::Value)> {
        vec![(format!("/configmaps/{}", self.config_map), json!({"metadata": {"name": self.config_map}, "data": {self.key.clone(): "<the workload's value>"}}))]
    }

    /// Keep the key's value in the journal, then write the new one.
    async fn inject(&self, ctx: &Ctx) -> Result<(), FaultError> {
        self.refuse_bad_parameters("read-configmap")?;
        let old = self.value_now(ctx, "read-configmap").await?;
        if old.as_deref() == Some(self.value.as_str()) {
            return Err(FaultError::Check { step: "read-configmap".into(), message: format!("key {} of ConfigMap {} holds {:?} already: the change would change nothing", self.key, self.config_map, self.value) });
        }
        ctx.keep("old-value", &old)?;
        ctx.note(format!(
            "change key {} of ConfigMap {}: the volume follows within the kubelet's sync period, the subPath file does not, and the liveness probe that compares them restarts the container in place",
            self.key, self.config_map
        ));
        let patch = json!({"data": {self.key.clone(): self.value}});
        ctx.kube.patch_object("v1", "ConfigMap", Some(&ctx.namespace), &self.config_map, &patch).await.map_err(Ctx::api_err("change-configmap"))
    }

    /// In place while the key holds the changed value.
    async fn present(&self, ctx: &Ctx) -> Result<Presence, FaultError> {
        Ok(match self.value_now(ctx, "check-configmap").await? {
            Some(v) if v == self.value => Presence::Present(format!("key {} of ConfigMap {} holds the changed value", self.key, self.config_map)),
            _ => Presence::Absent(format!("key {} of ConfigMap {} does not hold the changed value", self.key, self.config_map)),
        })
    }
}

impl ConfigmapSubpathRestart {
    /// The key's value now (`None`: the ConfigMap has no such key); a missing ConfigMap is an error.
    async fn value_now(&self, ctx: &Ctx, step: &str) -> Result<Option<String>, FaultError> {
        let Some(cm) = ctx.kube.get_object("v1", "ConfigMap", Some(&ctx.namespace), &self.config_map).await.map_err(Ctx::api_err(step))? else {
            let message = format!("ConfigMap {} is not in namespace {}; the workload must create it", self.config_map, ctx.namespace);
            return Err(FaultError::Check { step: step.into(), message });
        };
        Ok(cm["data"][&self.key].as_str().map(String::from))
    }
}

#[async_trait]
impl Fix for ConfigmapSubpathRestart {
    type Step = Step;

    /// Deleting the workload's pods again is the same request: idempotent.
    async fn fix(&self, which: Step, ctx: &Ctx) -> Result<(), FaultError> {
        let step = super::steps::Steps::name(which);
        match which {
            Step::RecreatePod => {
                ctx.note("delete the pod: its replacement mounts the ConfigMap afresh");
                ctx.restart_target(step).await
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::faults::testing::plan_ctx;
    use crate::record::Channel;

    fn fault(key: &str, value: &str) -> ConfigmapSubpathRestart {
        ConfigmapSubpathRestart { config_map: "app-config".into(), key: key.into(), value: value.into() }
    }

    #[tokio::test]
    async fn plan_reads_keeps_changes_and_recreates() {
        let f = fault("app.conf", "mode=changed\n");
        let (ctx, fake) = plan_ctx(&f);
        f.inject(&ctx).await.unwrap();
        f.fix(Step::RecreatePod, &ctx).await.unwrap();
        let api: Vec<String> = ctx.rec().entries().into_iter().filter(|e| e.channel == Channel::Api).map(|e| e.line).collect();
        assert_eq!(
            api,
            [
                "GET /api/v1/namespaces/fl-test/configmaps/app-config",
                r#"PATCH /api/v1/namespaces/fl-test/configmaps/app-config {"data":{"app.conf":"mode=changed\n"}}"#,
                "DELETE /api/v1/namespaces/fl-test/pods?labelSelector=app=web",
            ]
        );
        assert_eq!(ctx.kept::<Option<String>>("old-value"), Some(Some("<the workload's value>".to_string())));
        assert!(fake.lines().is_empty(), "nothing on the node");
    }

    #[tokio::test]
    async fn the_same_value_again_is_refused_before_any_change() {
        let f = fault("app.conf", "<the workload's value>");
        let (ctx, _) = plan_ctx(&f);
        let err = f.inject(&ctx).await.unwrap_err();
        assert!(err.to_string().contains("the change would change nothing"), "{err}");
        assert!(!ctx.rec().entries().iter().any(|e| e.line.starts_with("PATCH")));
    }

    #[rstest::rstest]
    #[case::empty("", "it is empty")]
    #[case::slash("etc/app.conf", "a character other than")]
    #[case::dotdot("..data", "starts with '..'")]
    #[case::long(&"k".repeat(254), "longer than 253")]
    fn bad_keys_are_problems_at_key(#[case] key: &str, #[case] message: &str) {
        let problems = fault(key, "v").check();
        assert_eq!(problems.len(), 1, "{problems:?}");
        assert_eq!(problems[0].field, "key");
        assert!(problems[0].message.contains(message), "{}", problems[0].message);
    }

    #[test]
    fn good_keys_pass() {
        for key in ["app.conf", "application.properties", "a-b_c.d", "x"] {
            assert!(fault(key, "v").check().is_empty(), "{key}");
        }
    }
}
