//! registry-rate-limited: the registry the workload pulls from limits pulls, and the limit is reached:
//! it answers 429 `toomanyrequests`.
//!
//! Source: 001 (`cce_faq_00015.html`), Table 1's last row and "Check Item 8: Whether the Number of
//! Public Image Pull Times Reaches the Upper Limit": `ERROR: toomanyrequests: Too Many Requests.` (Docker
//! Hub's pull rate limit). Fix: "Push the frequently used image to SWR and then pull the image from SWR"
//! (a registry of your own).
//!
//! How: `prepare` starts two registries (see [`super::registry`]): the public one, Debian's
//! docker-registry behind Debian's nginx, which holds the node's busybox image, and an empty private one.
//! The workload pulls from the public one and runs. The fault then uses up the registry's pull limit: nginx
//! answers every manifest request (the first request of any pull) 429 with Docker Hub's
//! `TOOMANYREQUESTS` error, as Docker Hub does until a client's window ends, and the fault replaces the
//! workload's pod, whose pull (`imagePullPolicy: Always`) then runs into it. (A rate, nginx's
//! `limit_req`, cannot be the limit here: its lowest, one request a minute, lets a pull through each
//! minute, and containerd needs one request for an image whose content the node holds.) The fix
//! pushes the image to the private registry from the node and points the Deployment at it.

use async_trait::async_trait;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::registry::{self, Registry, Spec};
use super::api::{Ctx, Fault, FaultError, Fix, Presence};
use crate::check::Problem;
use crate::cmd::{Ask, Output};
use crate::node::NodeProfile;

#[derive(Clone, Debug, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RegistryRateLimited {
    /// The Deployment that pulls from the public registry; it must be part of the workload, pull
    /// `Always`, and replace its pods by `Recreate`.
    pub deployment: String,
}

impl Default for RegistryRateLimited {
    fn default() -> Self {
        RegistryRateLimited { deployment: "web".into() }
    }
}

/// The document's fix, step by step (scenario files name them in `fix[].step`): the image to the
/// run's private registry, and pulled from there.
pub use super::registry::ToPrivate as Step;

fn public() -> Spec {
    Spec { proxy: true, backend_port: registry::RATE_LIMITED_BACKEND_PORT, ..Spec::main(false) }
}

#[async_trait]
impl Fault for RegistryRateLimited {
    registry::pulling!(deployment, behind_nginx: Some(registry::RATE_LIMITED_BACKEND_PORT));

    fn check(&self) -> Vec<Problem> {
        registry::check(&self.deployment)
    }

    fn plan_answers(&self, node: &NodeProfile, _namespace: &str) -> Vec<(Ask, Output)> {
        registry::plan_answers(node)
    }

    async fn prepare(&self, ctx: &Ctx) -> Result<(), FaultError> {
        self.refuse_bad_parameters("start-registry")?;
        registry::serve(ctx, public()).await?;
        Registry::of(ctx, Spec::private())?.start(ctx).await
    }

    /// Limit the public registry's pulls, then replace the workload's pod so that it pulls again.
    async fn inject(&self, ctx: &Ctx) -> Result<(), FaultError> {
        registry::pulling_deployment(ctx, &self.deployment).await?;
        let public = Registry::of(ctx, public())?;
        ctx.note(format!("the registry {}'s pull limit is used up: nginx answers every manifest request 429 toomanyrequests", public.endpoint()));
        public.answer(ctx, "limit-pulls", &registry::Answer::TooManyRequests).await?;
        ctx.restart_target("restart-workload").await
    }

    /// In place while the Deployment pulls from the limited registry.
    async fn present(&self, ctx: &Ctx) -> Result<Presence, FaultError> {
        let deployment = registry::deployment(ctx, &self.deployment, "check-image").await?;
        let limited = Registry::of(ctx, public())?.endpoint();
        let images = registry::images(&deployment);
        Ok(match images.iter().find(|i| i.starts_with(&format!("{limited}/"))) {
            Some(image) => Presence::Present(format!("Deployment {} pulls {image} from the rate-limited registry", self.deployment)),
            None => Presence::Absent(format!("Deployment {} pulls {}", self.deployment, images.join(", "))),
        })
    }
}

#[async_trait]
impl Fix for RegistryRateLimited {
    type Step = Step;

    /// See [`registry::to_private`]: idempotent.
    async fn fix(&self, which: Step, ctx: &Ctx) -> Result<(), FaultError> {
        self.refuse_bad_parameters(super::steps::Steps::name(which))?;
        registry::to_private(which, ctx, &self.deployment).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use crate::faults::testing::plan_ctx;
    use crate::record::Channel;

    #[tokio::test]
    async fn plan_limits_the_public_registry_and_moves_the_image_to_the_private_one() {
        let fault = RegistryRateLimited::default();
        let (ctx, fake) = plan_ctx(&fault);
        fault.prepare(&ctx).await.unwrap();
        fault.inject(&ctx).await.unwrap();
        fault.fix(Step::PushToPrivateRegistry, &ctx).await.unwrap();
        fault.fix(Step::PullFromPrivateRegistry, &ctx).await.unwrap();
        let host: Vec<String> = ctx.rec().entries().into_iter().filter(|e| e.channel == Channel::Host).map(|e| e.line).collect();
        assert!(host.iter().any(|l| l.contains("nginx -c") && l.ends_with("-s reload")), "{host:?}");
        let pushes: Vec<String> = fake.lines().into_iter().filter(|l| l.contains("images push")).collect();
        assert_eq!(pushes.len(), 2, "{pushes:?}");
        assert!(pushes[0].contains("10.213.0.1:5443/faultlab/busybox:1") && pushes[1].contains("10.213.0.1:5444/faultlab/busybox:1"), "{pushes:?}");
        let api: Vec<String> = ctx.rec().entries().into_iter().filter(|e| e.channel == Channel::Api).map(|e| e.line).collect();
        assert!(api.iter().any(|l| l.starts_with("DELETE") && l.contains("pods")), "{api:?}");
        assert_eq!(
            api.last().unwrap(),
            r#"PATCH /apis/apps/v1/namespaces/fl-test/deployments/web {"spec":{"template":{"spec":{"containers":[{"image":"10.213.0.1:5444/faultlab/busybox:1","name":"app"}]}}}}"#
        );
    }

    #[test]
    fn only_images_of_another_registry_move() {
        let d = json!({"spec": {"template": {"spec": {"containers": [
            {"name": "a", "image": "198.18.213.1:5443/faultlab/busybox:1"},
            {"name": "b", "image": "198.18.213.1:5444/faultlab/busybox:1"},
            {"name": "c", "image": "busybox"}
        ]}}}});
        assert_eq!(registry::to_registry(&d, "198.18.213.1:5444"), [json!({"name": "a", "image": "198.18.213.1:5444/faultlab/busybox:1"})]);
    }
}
