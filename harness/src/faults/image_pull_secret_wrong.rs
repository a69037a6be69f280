//! image-pull-secret-wrong: the workload's pull secret holds wrong credentials for the registry.
//!
//! Source: 001 (`cce_faq_00015.html`), Table 1's second row and "Check Item 3: Whether an Incorrect
//! Secret Is Used When a Third-Party Image Is Used": "If your secret is incorrect, images will fail to
//! be pulled. In this case, create a new secret." Fix: create a new, correct secret and use it.
//!
//! How: `prepare` starts the run's registry with a login (see [`super::registry`]), pushes the node's
//! busybox image and creates the pull secret; the workload pulls with it (`imagePullPolicy: Always`) and
//! runs. The fault then overwrites the secret's password with a wrong one, as a secret made with a
//! mistyped or expired password is, and deletes the workload's pod so that its replacement pulls with
//! it. The fix creates a new secret with the registry's login and points the Deployment at it; the old
//! one stays wrong, as the document leaves it.

use async_trait::async_trait;
use base64::Engine as _;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::json;

use super::registry::{self, Registry, Spec};
use super::api::{Ctx, Fault, FaultError, Fix, Presence};
use crate::check::{dns_subdomain, Problem};
use crate::cmd::{Ask, Output};
use crate::node::NodeProfile;

#[derive(Clone, Debug, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ImagePullSecretWrong {
    /// The Deployment that pulls from the registry; it must be part of the workload, name `secret` in
    /// `imagePullSecrets`, and replace its pods by `Recreate`.
    pub deployment: String,
    /// The pull secret the fault creates and then spoils (default `registry-login`).
    #[serde(default = "default_secret")]
    pub secret: String,
    /// The new secret the fix creates (default `registry-login-new`).
    #[serde(default = "default_new_secret")]
    pub new_secret: String,
}

fn default_secret() -> String {
    "registry-login".into()
}

fn default_new_secret() -> String {
    "registry-login-new".into()
}

impl Default for ImagePullSecretWrong {
    fn default() -> Self {
        ImagePullSecretWrong { deployment: "web".into(), secret: default_secret(), new_secret: default_new_secret() }
    }
}

/// The document's fix, step by step (scenario files name them in `fix[].step`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Step {
    /// Create the new secret with the registry's login.
    CreateSecret,
    /// Name it in the Deployment's `imagePullSecrets`.
    UseSecret,
}

/// The wrong password the fault writes: one that is not the login's (the right one with `-expired`
/// after it; records show no Secret's data, so neither is ever shown).
pub fn wrong_password(right: &str) -> String {
    format!("{right}-expired")
}

/// The password a `kubernetes.io/dockerconfigjson` secret (as the API gives it) holds for `endpoint`.
pub fn password_in(secret: &serde_json::Value, endpoint: &str) -> Option<String> {
    let encoded = secret["data"][".dockerconfigjson"].as_str()?;
    let bytes = base64::engine::general_purpose::STANDARD.decode(encoded).ok()?;
    let config: serde_json::Value = serde_json::from_slice(&bytes).ok()?;
    config["auths"][endpoint]["password"].as_str().map(str::to_owned)
}

#[async_trait]
impl Fault for ImagePullSecretWrong {
    registry::pulling!(deployment, behind_nginx: None, secret: secret);

    fn check(&self) -> Vec<Problem> {
        let mut p = registry::check(&self.deployment);
        p.extend(dns_subdomain("secret", &self.secret));
        p.extend(dns_subdomain("newSecret", &self.new_secret));
        if self.secret == self.new_secret {
            p.push(Problem::new("newSecret", format!("is the same as secret ({}): the fix creates a new secret beside the wrong one", self.secret)));
        }
        p
    }

    fn plan_answers(&self, node: &NodeProfile, _namespace: &str) -> Vec<(Ask, Output)> {
        registry::plan_answers(node)
    }

    async fn prepare(&self, ctx: &Ctx) -> Result<(), FaultError> {
        self.refuse_bad_parameters("start-registry")?;
        registry::start_with_login(ctx, &self.secret).await.map(drop)
    }

    /// Write a wrong password into the secret, then delete the workload's pod so that its replacement
    /// pulls with it.
    async fn inject(&self, ctx: &Ctx) -> Result<(), FaultError> {
        let deployment = registry::pulling_deployment(ctx, &self.deployment).await?;
        if !registry::pull_secrets(&deployment).contains(&self.secret) {
            return Err(FaultError::Check {
                step: "read-deployment".into(),
                message: format!("Deployment {} does not name the pull secret {} in imagePullSecrets", self.deployment, self.secret),
            });
        }
        let reg = Registry::of(ctx, Spec::main(true))?;
        ctx.note(format!("secret {} gets a wrong password for {}; the workload's pod is replaced so that it pulls again", self.secret, reg.endpoint()));
        let wrong = reg.pull_secret(&self.secret, &wrong_password(&registry::password(ctx)?));
        let patch = json!({"stringData": wrong["stringData"]});
        ctx.kube.patch_object("v1", "Secret", Some(&ctx.namespace), &self.secret, &patch).await.map_err(Ctx::api_err("spoil-secret"))?;
        ctx.restart_target("restart-workload").await
    }

    /// In place while none of the secrets the Deployment names holds the registry's password.
    async fn present(&self, ctx: &Ctx) -> Result<Presence, FaultError> {
        let deployment = registry::deployment(ctx, &self.deployment, "check-pull-secrets").await?;
        let endpoint = Registry::of(ctx, Spec::main(true))?.endpoint();
        let right = registry::password(ctx)?;
        let named = registry::pull_secrets(&deployment);
        for name in &named {
            let secret = ctx.kube.get_object("v1", "Secret", Some(&ctx.namespace), name).await.map_err(Ctx::api_err("check-pull-secrets"))?;
            if secret.as_ref().and_then(|s| password_in(s, &endpoint)).as_deref() == Some(right.as_str()) {
                return Ok(Presence::Absent(format!("Deployment {} pulls with secret {name}, which holds the registry's login", self.deployment)));
            }
        }
        Ok(Presence::Present(format!(
            "no secret Deployment {} names ({}) holds the registry's login for {endpoint}",
            self.deployment,
            if named.is_empty() { "none".to_string() } else { named.join(", ") }
        )))
    }
}

#[async_trait]
impl Fix for ImagePullSecretWrong {
    type Step = Step;

    /// Creating a secret that exists succeeds (create is idempotent here); naming it is the same patch.
    async fn fix(&self, which: Step, ctx: &Ctx) -> Result<(), FaultError> {
        let step = super::steps::Steps::name(which);
        self.refuse_bad_parameters(step)?;
        match which {
            Step::CreateSecret => {
                let reg = Registry::of(ctx, Spec::main(true))?;
                ctx.note(format!("create a new secret {} with the registry's login", self.new_secret));
                let secret = reg.pull_secret(&self.new_secret, &registry::password(ctx)?);
                ctx.kube.create_object(Some(&ctx.namespace), secret).await.map_err(Ctx::api_err(step))?;
                Ok(())
            }
            Step::UseSecret => {
                ctx.note(format!("imagePullSecrets: [{{name: {}}}] in the Deployment's pod template", self.new_secret));
                let patch = json!({"spec": {"template": {"spec": {"imagePullSecrets": [{"name": self.new_secret}]}}}});
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
    async fn plan_spoils_the_secret_restarts_and_fixes_with_a_new_one() {
        let fault = ImagePullSecretWrong::default();
        let (ctx, _) = plan_ctx(&fault);
        fault.prepare(&ctx).await.unwrap();
        fault.inject(&ctx).await.unwrap();
        fault.fix(Step::CreateSecret, &ctx).await.unwrap();
        fault.fix(Step::UseSecret, &ctx).await.unwrap();
        let api: Vec<String> = ctx.rec().entries().into_iter().filter(|e| e.channel == Channel::Api).map(|e| e.line).collect();
        let right = crate::faults::registry::password(&ctx).unwrap();
        assert!(api.iter().any(|l| l.starts_with("PATCH /api/v1/namespaces/fl-test/secrets/registry-login ") && l.contains(r#"{"stringData":{".dockerconfigjson":"<redacted>"}}"#)), "{api:?}");
        assert!(!api.iter().any(|l| l.contains(&right)), "no password in the record: {api:?}");
        assert!(api.iter().any(|l| l.starts_with("DELETE") && l.contains("pods")), "{api:?}");
        assert_eq!(api.last().unwrap(), r#"PATCH /apis/apps/v1/namespaces/fl-test/deployments/web {"spec":{"template":{"spec":{"imagePullSecrets":[{"name":"registry-login-new"}]}}}}"#);
    }

    #[test]
    fn the_password_is_read_from_the_secrets_data() {
        let config = json!({"auths": {"198.18.213.1:5443": {"username": "faultlab", "password": "pw"}}}).to_string();
        let secret = json!({"data": {".dockerconfigjson": base64::engine::general_purpose::STANDARD.encode(config)}});
        assert_eq!(password_in(&secret, "198.18.213.1:5443").as_deref(), Some("pw"));
        assert_eq!(password_in(&secret, "198.18.213.1:5444"), None);
        assert_eq!(password_in(&json!({"data": {".dockerconfigjson": "%%"}}), "x"), None);
    }

    #[test]
    fn the_new_secret_must_be_another() {
        let f = ImagePullSecretWrong { new_secret: "registry-login".into(), ..Default::default() };
        let fields: Vec<String> = crate::faults::FaultSpec::ImagePullSecretWrong(f).check().into_iter().map(|p| p.field).collect();
        assert_eq!(fields, ["fault.image-pull-secret-wrong.newSecret"]);
        assert_ne!(wrong_password("pw"), "pw");
    }
}
