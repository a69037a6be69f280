//! configmap-missing: a ConfigMap that pods mount is gone.
//!
//! Source: DaoCloud mspider troubleshooting "创建网格时一直处于“创建中”", case 3. Symptom: FailedMount
//! `configmap "..." not found`; the pod stays ContainerCreating. Fix: restart the controller that owns
//! the ConfigMap, which recreates it. faultlab recreates it as that controller would on start.

use async_trait::async_trait;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::json;

use super::api::{Ctx, Fault, FaultError, Fix, Presence, Reach, WorkloadRef};
use crate::check::{dns_subdomain, Problem};
use crate::gates::Target;

#[derive(Clone, Debug, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ConfigmapMissing {
    /// The ConfigMap to delete; it must be part of the workload.
    pub config_map: String,
}

/// The document's fix, step by step, in its order (scenario files name them in `fix[].step`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Step {
    RecreateConfigmap,
}

#[async_trait]
impl Fault for ConfigmapMissing {
    /// It deletes and re-creates a ConfigMap of the run's namespace through the API, and runs nothing
    /// on the node or the host.
    fn reach(&self) -> Reach {
        Reach::Namespace
    }

    /// The ConfigMap's name is a Kubernetes object name (a DNS-1123 subdomain): an empty one would
    /// make the delete address every ConfigMap of the namespace.
    fn check(&self) -> Vec<Problem> {
        let why = "it names the ConfigMap the fault deletes, which the workload's manifests create";
        dns_subdomain("configMap", &self.config_map).map(|p| Problem::new(p.field, format!("{}; {why}", p.message))).into_iter().collect()
    }

    fn workload_refs(&self) -> Vec<WorkloadRef> {
        vec![WorkloadRef { field: "configMap", kind: "ConfigMap", name: self.config_map.clone() }]
    }

    /// A plan's workload has made its ConfigMap (with no data: a plan does not know it).
    fn plan_api_answers(&self, _target: &Target) -> Vec<(String, serde_json::Value)> {
        vec![(format!("/configmaps/{}", self.config_map), json!({"metadata": {"name": self.config_map}}))]
    }

    /// Journal a copy (the undo, and what the fix writes again), delete it, restart the workload.
    async fn inject(&self, ctx: &Ctx) -> Result<(), FaultError> {
        self.refuse_bad_parameters("save-configmap")?;
        let Some(current) = self.get(ctx, "save-configmap").await? else {
            let message = format!("ConfigMap {} is not in namespace {}; the workload must create it", self.config_map, ctx.namespace);
            return Err(FaultError::Check { step: "save-configmap".into(), message });
        };
        ctx.delete_restorably("delete-configmap", Some(&ctx.namespace), &current).await?;
        ctx.note("pods started from now on cannot mount it: restart the workload");
        ctx.restart_target("restart-workload").await
    }

    /// In place while the workload's ConfigMap is missing.
    async fn present(&self, ctx: &Ctx) -> Result<Presence, FaultError> {
        Ok(match self.get(ctx, "check-configmap").await? {
            Some(_) => Presence::Absent(format!("ConfigMap {} exists", self.config_map)),
            None => Presence::Present(format!("ConfigMap {} is still missing", self.config_map)),
        })
    }
}

impl ConfigmapMissing {
    async fn get(&self, ctx: &Ctx, step: &str) -> Result<Option<serde_json::Value>, FaultError> {
        ctx.kube.get_object("v1", "ConfigMap", Some(&ctx.namespace), &self.config_map).await.map_err(Ctx::api_err(step))
    }
}

#[async_trait]
impl Fix for ConfigmapMissing {
    type Step = Step;

    /// Creating a ConfigMap that exists already succeeds: the step is idempotent.
    async fn fix(&self, which: Step, ctx: &Ctx) -> Result<(), FaultError> {
        let step = super::steps::Steps::name(which);
        self.refuse_bad_parameters(step)?;
        match which {
            Step::RecreateConfigmap => ctx.recreate(step, "ConfigMap", Some(&self.config_map)).await,
        }
    }
}
#[cfg(test)]
mod tests {
    use super::*;
    use crate::journal::Undo;
    use crate::faults::testing::ctx;

    #[tokio::test]
    async fn plan_deletes_restarts_and_recreates() {
        let fault = ConfigmapMissing { config_map: "app-config".into() };
        let (ctx, fake) = crate::faults::testing::plan_ctx(&fault);
        fault.inject(&ctx).await.unwrap();
        fault.fix(Step::RecreateConfigmap, &ctx).await.unwrap();
        let api: Vec<String> = ctx.rec().entries().into_iter().filter(|e| e.channel == crate::record::Channel::Api).map(|e| e.line).collect();
        assert_eq!(
            api,
            vec![
                "GET /api/v1/namespaces/fl-test/configmaps/app-config",
                "DELETE /api/v1/namespaces/fl-test/configmaps/app-config",
                "DELETE /api/v1/namespaces/fl-test/pods?labelSelector=app=web",
                "POST /api/v1/namespaces/fl-test/configmaps (ConfigMap app-config)",
            ]
        );
        assert!(fake.lines().is_empty(), "no node command");
        let journal = ctx.journal.snapshot();
        assert!(matches!(&journal.entries[0].undo, Undo::CreateObject { namespace: Some(ns), .. } if ns == "fl-test"), "the copy is journalled first");
    }

    #[tokio::test]
    async fn refuses_when_the_workload_has_no_such_configmap() {
        let (ctx, _) = ctx();
        // The API has nothing: a scenario mistake, reported as such.
        let err = ConfigmapMissing { config_map: "nope".into() }.inject(&ctx).await.unwrap_err();
        assert!(err.to_string().contains("ConfigMap nope is not in namespace fl-test"), "{err}");
    }

    fn fault(name: &str) -> ConfigmapMissing {
        ConfigmapMissing { config_map: name.into() }
    }

    #[rstest::rstest]
    #[case::plain("app-config")]
    #[case::dotted("app-config.v1")]
    #[case::longest(&"a".repeat(253))]
    fn names_pass_and_are_workload_refs(#[case] name: &str) {
        assert_eq!(fault(name).check(), vec![]);
        assert_eq!(fault(name).workload_refs(), vec![WorkloadRef { field: "configMap", kind: "ConfigMap", name: name.into() }]);
    }

    #[rstest::rstest]
    #[case::empty("", "\"\" is not a valid Kubernetes object name: it is empty (a DNS-1123 subdomain)")]
    #[case::blank(" ", "\" \" is not a valid Kubernetes object name: it has a character other than")]
    #[case::upper("App-Config", "\"App-Config\" is not a valid Kubernetes object name: it has a character other than a-z, 0-9, '-' and '.'")]
    #[case::path("../secrets", "\"../secrets\" is not a valid Kubernetes object name")]
    #[case::too_long(&"a".repeat(254), "is not a valid Kubernetes object name: it is longer than 253 characters")]
    fn bad_names_are_problems_at_config_map(#[case] name: &str, #[case] message: &str) {
        let problems = fault(name).check();
        assert_eq!(problems.len(), 1, "{problems:?}");
        assert_eq!(problems[0].field, "configMap");
        assert!(problems[0].message.contains(message), "{}", problems[0].message);
        assert!(problems[0].message.ends_with("; it names the ConfigMap the fault deletes, which the workload's manifests create"), "{}", problems[0].message);
        assert_eq!(crate::faults::FaultSpec::ConfigmapMissing(fault(name)).check()[0].field, "fault.configmap-missing.configMap");
    }

    #[tokio::test]
    async fn an_empty_name_deletes_nothing_even_unchecked() {
        let (ctx, _) = ctx();
        let err = fault("").inject(&ctx).await.unwrap_err();
        assert!(err.to_string().starts_with("save-configmap: configMap: \"\" is not a valid Kubernetes object name"), "{err}");
        assert!(fault("").fix(Step::RecreateConfigmap, &ctx).await.is_err());
        assert!(ctx.rec().entries().is_empty(), "no API call, not even in a plan");
        assert!(ctx.journal.snapshot().entries.is_empty());
    }
}
