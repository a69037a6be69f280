//! image-pull-secret-missing: the registry requires a login and the workload names no
//! `imagePullSecrets`.
//!
//! Source: 001 (`cce_faq_00015.html`), Table 1's first row and "Check Item 1: Whether imagePullSecret
//! Is Specified When You Use kubectl to Create a Workload". Symptom: `Failed to pull image "xxx": rpc
//! error: code = Unknown desc = Error response from daemon: Get xxx: denied: You may not login yet`.
//! Fix: the workload's `imagePullSecrets` names the registry's secret.
//!
//! How: `prepare` starts the run's registry with a login (see [`super::registry`]), pushes the node's
//! busybox image to it and creates the pull secret; the workload pulls with it (`imagePullPolicy:
//! Always`, as the document's example) and runs. The fault then edits the Deployment as a person would
//! who drops the field: a patch that removes `imagePullSecrets` from its pod template, so the new pod
//! pulls without a login. The fix puts the secret back in the template.

use async_trait::async_trait;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::json;

use super::registry;
use super::api::{Ctx, Fault, FaultError, Fix, Presence};
use crate::check::{dns_subdomain, Problem};
use crate::cmd::{Ask, Output};
use crate::node::NodeProfile;

#[derive(Clone, Debug, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ImagePullSecretMissing {
    /// The Deployment that pulls from the registry; it must be part of the workload, name the secret in
    /// `imagePullSecrets`, and replace its pods by `Recreate`.
    pub deployment: String,
    /// The pull secret the fault creates for the registry's login (default `registry-login`).
    #[serde(default = "default_secret")]
    pub secret: String,
}

fn default_secret() -> String {
    "registry-login".into()
}

impl Default for ImagePullSecretMissing {
    fn default() -> Self {
        ImagePullSecretMissing { deployment: "web".into(), secret: default_secret() }
    }
}

/// The document's fix, step by step (scenario files name them in `fix[].step`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Step {
    AddImagePullSecret,
}

#[async_trait]
impl Fault for ImagePullSecretMissing {
    registry::pulling!(deployment, behind_nginx: None, secret: secret);

    fn check(&self) -> Vec<Problem> {
        let mut p = registry::check(&self.deployment);
        p.extend(dns_subdomain("secret", &self.secret));
        p
    }

    fn plan_answers(&self, node: &NodeProfile, _namespace: &str) -> Vec<(Ask, Output)> {
        registry::plan_answers(node)
    }

    async fn prepare(&self, ctx: &Ctx) -> Result<(), FaultError> {
        self.refuse_bad_parameters("start-registry")?;
        registry::start_with_login(ctx, &self.secret).await.map(drop)
    }

    /// Remove `imagePullSecrets` from the Deployment's pod template.
    async fn inject(&self, ctx: &Ctx) -> Result<(), FaultError> {
        let step = "remove-image-pull-secrets";
        let deployment = registry::pulling_deployment(ctx, &self.deployment).await?;
        if !registry::pull_secrets(&deployment).contains(&self.secret) {
            return Err(FaultError::Check {
                step: "read-deployment".into(),
                message: format!("Deployment {} does not name the pull secret {} in imagePullSecrets, so there is none to leave out", self.deployment, self.secret),
            });
        }
        ctx.note(format!("the Deployment {} without imagePullSecrets: its pods pull without the registry's login", self.deployment));
        let patch = json!({"spec": {"template": {"spec": {"imagePullSecrets": null}}}});
        ctx.kube.patch_object("apps/v1", "Deployment", Some(&ctx.namespace), &self.deployment, &patch).await.map_err(Ctx::api_err(step))
    }

    async fn present(&self, ctx: &Ctx) -> Result<Presence, FaultError> {
        let deployment = registry::deployment(ctx, &self.deployment, "check-pull-secrets").await?;
        let secrets = registry::pull_secrets(&deployment);
        Ok(if secrets.is_empty() {
            Presence::Present(format!("Deployment {} names no imagePullSecrets", self.deployment))
        } else {
            Presence::Absent(format!("Deployment {} names imagePullSecrets {}", self.deployment, secrets.join(", ")))
        })
    }
}

#[async_trait]
impl Fix for ImagePullSecretMissing {
    type Step = Step;

    /// Naming the secret in the template again is the same patch each time: idempotent.
    async fn fix(&self, which: Step, ctx: &Ctx) -> Result<(), FaultError> {
        let step = super::steps::Steps::name(which);
        self.refuse_bad_parameters(step)?;
        match which {
            Step::AddImagePullSecret => {
                ctx.note(format!("imagePullSecrets: [{{name: {}}}] in the Deployment's pod template, as the document's example has", self.secret));
                let patch = json!({"spec": {"template": {"spec": {"imagePullSecrets": [{"name": self.secret}]}}}});
                ctx.kube.patch_object("apps/v1", "Deployment", Some(&ctx.namespace), &self.deployment, &patch).await.map_err(Ctx::api_err(step))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::faults::testing::plan_ctx;
    use crate::record::Channel;

    #[tokio::test]
    async fn plan_starts_the_registry_then_drops_and_restores_the_secret() {
        let fault = ImagePullSecretMissing::default();
        let (ctx, fake) = plan_ctx(&fault);
        fault.prepare(&ctx).await.unwrap();
        fault.inject(&ctx).await.unwrap();
        fault.fix(Step::AddImagePullSecret, &ctx).await.unwrap();
        let api: Vec<String> = ctx.rec().entries().into_iter().filter(|e| e.channel == Channel::Api).map(|e| e.line).collect();
        assert!(api[0].starts_with("POST /api/v1/namespaces/fl-test/secrets"), "{api:?}");
        assert!(api.contains(&r#"PATCH /apis/apps/v1/namespaces/fl-test/deployments/web {"spec":{"template":{"spec":{"imagePullSecrets":null}}}}"#.to_string()), "{api:?}");
        assert_eq!(api.last().unwrap(), r#"PATCH /apis/apps/v1/namespaces/fl-test/deployments/web {"spec":{"template":{"spec":{"imagePullSecrets":[{"name":"registry-login"}]}}}}"#);
        let node = fake.lines().join("\n");
        assert!(node.contains("images push --hosts-dir /var/lib/faultlab-work/push.fl-test-registry"), "{node}");
        assert!(!node.contains("--user") && !node.contains(&crate::faults::registry::password(&ctx).unwrap()), "the login is in the push's hosts directory, not its command line: {node}");
        let undo: Vec<String> = ctx.journal.snapshot().entries.iter().map(|e| e.what.clone()).collect();
        assert!(undo.iter().any(|w| w.starts_with("stop the registry")), "{undo:?}");
        assert!(undo.iter().any(|w| w.starts_with("remove the node's settings for registry")), "{undo:?}");
    }

    #[test]
    fn bad_names_are_problems_at_their_field() {
        let f = ImagePullSecretMissing { deployment: "Web".into(), secret: "".into() };
        let fields: Vec<String> = crate::faults::FaultSpec::ImagePullSecretMissing(f).check().into_iter().map(|p| p.field).collect();
        assert_eq!(fields, ["fault.image-pull-secret-missing.deployment", "fault.image-pull-secret-missing.secret"]);
    }
}
