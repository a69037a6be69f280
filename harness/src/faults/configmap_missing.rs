//! configmap-missing: a ConfigMap that pods mount is gone.
//!
//! Source: DaoCloud mspider troubleshooting "创建网格时一直处于“创建中”", case 3. Symptom: FailedMount
//! `configmap "..." not found`; the pod stays ContainerCreating. Fix: restart the controller that owns
//! the ConfigMap, which recreates it. faultlab recreates it as that controller would on start.

use std::sync::Mutex;

use async_trait::async_trait;
use k8s_openapi::api::core::v1::ConfigMap;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::{Ctx, Fault, FaultError};

#[derive(Debug, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ConfigmapMissing {
    /// The ConfigMap to delete; it must be part of the workload.
    pub config_map: String,
    /// The copy the owning controller would write again.
    #[serde(skip)]
    saved: Mutex<Option<ConfigMap>>,
}

impl Clone for ConfigmapMissing {
    fn clone(&self) -> Self {
        ConfigmapMissing { config_map: self.config_map.clone(), saved: Mutex::new(self.saved.lock().unwrap().clone()) }
    }
}

#[async_trait]
impl Fault for ConfigmapMissing {
    fn fix_steps(&self) -> &'static [&'static str] {
        &["recreate-configmap"]
    }

    async fn inject(&self, ctx: &Ctx) -> Result<(), FaultError> {
        // Keep what the controller would write, then delete it. The namespace is journalled for deletion
        // at setup, so nothing outside it needs an undo.
        let current: Option<ConfigMap> = ctx.kube.get(Some(&ctx.namespace), &self.config_map).await.map_err(Ctx::api_err("save-configmap"))?;
        if current.is_none() && !ctx.dry_run {
            return Err(FaultError::Check {
                step: "save-configmap".into(),
                message: format!("ConfigMap {} is not in namespace {}; the workload must create it", self.config_map, ctx.namespace),
            });
        }
        *self.saved.lock().unwrap() = current.map(|mut cm| {
            cm.metadata = kube::api::ObjectMeta {
                name: cm.metadata.name.take(),
                labels: cm.metadata.labels.take(),
                annotations: cm.metadata.annotations.take(),
                ..Default::default()
            };
            cm
        });
        let ar = crate::kube_ops::resource("v1", "ConfigMap");
        ctx.kube.delete_dynamic(&ar, Some(&ctx.namespace), &self.config_map).await.map_err(Ctx::api_err("delete-configmap"))?;
        ctx.note("pods started from now on cannot mount it: restart the workload");
        ctx.restart_target("restart-workload").await
    }

    async fn fix(&self, step: &str, ctx: &Ctx) -> Result<(), FaultError> {
        match step {
            "recreate-configmap" => {
                let saved = self.saved.lock().unwrap().clone();
                let cm = saved.unwrap_or_else(|| ConfigMap {
                    metadata: kube::api::ObjectMeta { name: Some(self.config_map.clone()), ..Default::default() },
                    ..Default::default()
                });
                // Creating a ConfigMap that exists already succeeds: the step is idempotent.
                ctx.kube
                    .create(Some(&ctx.namespace), &cm, &self.config_map)
                    .await
                    .map_err(Ctx::api_err(step))
            }
            _ => Err(FaultError::UnknownStep { fault: "configmap-missing", step: step.into() }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::faults::testing::ctx;

    #[tokio::test]
    async fn plan_deletes_restarts_and_recreates() {
        let (mut ctx, fake) = ctx();
        ctx.dry_run = true;
        let fault = ConfigmapMissing { config_map: "app-config".into(), ..Default::default() };
        fault.inject(&ctx).await.unwrap();
        fault.fix("recreate-configmap", &ctx).await.unwrap();
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
    }

    #[tokio::test]
    async fn refuses_when_the_workload_has_no_such_configmap() {
        let (ctx, _) = ctx();
        // Not a dry run, and the API has nothing: a scenario mistake, reported as such.
        let err = ConfigmapMissing { config_map: "nope".into(), ..Default::default() }.inject(&ctx).await.unwrap_err();
        assert!(err.to_string().contains("ConfigMap nope is not in namespace fl-test"), "{err}");
    }
}
