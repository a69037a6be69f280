//! image-address-wrong: the workload's image names a registry host that does not resolve.
//!
//! Source: 001 (`cce_faq_00015.html`), Table 1 and "Check Item 2: Whether the Image Address Is Correct
//! When a Third-Party Image Is Used": `Failed to pull image "nginx:v1.1": rpc error: code = Unknown desc
//! = Error response from daemon: Get https://registry-1.docker.io/v2/: dial tcp: lookup
//! registry-1.docker.io: no such host`. Fix: "edit your YAML file to change the image address".
//!
//! How: `prepare` starts the run's registry (see [`super::registry`]) and pushes the node's busybox
//! image; the workload pulls it and runs. The fault then edits the Deployment as a person mistyping the
//! registry's address would: the image's registry host becomes [`WRONG_HOST`] (`.invalid` never
//! resolves, RFC 2606), the rest of the reference kept; the right address is kept in the run's journal.
//! The fix writes it back. What the lookup says depends on the node's name service: each platform's
//! snapshot records its words.

use async_trait::async_trait;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::json;

use super::registry::{self, Spec};
use super::api::{Ctx, Fault, FaultError, Fix, Presence};
use crate::check::Problem;
use crate::cmd::{Ask, Output};
use crate::node::NodeProfile;

/// The registry host the wrong address names: `.invalid` is reserved never to resolve.
pub const WRONG_HOST: &str = "registry.faultlab.invalid";

#[derive(Clone, Debug, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ImageAddressWrong {
    /// The Deployment whose image address the fault gets wrong; it must be part of the workload, pull
    /// `Always` and replace its pods by `Recreate`.
    pub deployment: String,
}

impl Default for ImageAddressWrong {
    fn default() -> Self {
        ImageAddressWrong { deployment: "web".into() }
    }
}

/// The document's fix, step by step (scenario files name them in `fix[].step`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Step {
    CorrectImageAddress,
}

/// The image addresses of the Deployment's containers before the fault, by container, as the journal
/// keeps them.
pub type Addresses = Vec<(String, String)>;

/// The same reference with [`WRONG_HOST`] for its registry host (`host[:port]/path:tag`); a reference
/// without a registry host (`nginx:v1.1`) gets it in front.
pub fn wrong_address(image: &str) -> String {
    match image.split_once('/') {
        Some((host, path)) if host.contains('.') || host.contains(':') || host == "localhost" => format!("{WRONG_HOST}/{path}"),
        _ => format!("{WRONG_HOST}/{image}"),
    }
}

#[async_trait]
impl Fault for ImageAddressWrong {
    registry::pulling!(deployment, behind_nginx: None);

    fn check(&self) -> Vec<Problem> {
        registry::check(&self.deployment)
    }

    fn plan_answers(&self, node: &NodeProfile, _namespace: &str) -> Vec<(Ask, Output)> {
        registry::plan_answers(node)
    }

    async fn prepare(&self, ctx: &Ctx) -> Result<(), FaultError> {
        self.refuse_bad_parameters("start-registry")?;
        registry::serve(ctx, Spec::main(false)).await.map(drop)
    }

    /// Keep the right addresses in the journal, then write the wrong ones.
    async fn inject(&self, ctx: &Ctx) -> Result<(), FaultError> {
        let deployment = registry::pulling_deployment(ctx, &self.deployment).await?;
        let right: Addresses = containers(&deployment);
        ctx.keep("addresses", &right)?;
        let wrong: Addresses = right.iter().map(|(c, image)| (c.clone(), wrong_address(image))).collect();
        ctx.note(format!("the Deployment's image address with a registry host that does not resolve: {}", wrong.iter().map(|(_, i)| i.as_str()).collect::<Vec<_>>().join(", ")));
        set_images(ctx, &self.deployment, "write-wrong-address", &wrong).await
    }

    async fn present(&self, ctx: &Ctx) -> Result<Presence, FaultError> {
        let deployment = registry::deployment(ctx, &self.deployment, "check-image").await?;
        let images = registry::images(&deployment);
        Ok(match images.iter().find(|i| i.starts_with(&format!("{WRONG_HOST}/"))) {
            Some(i) => Presence::Present(format!("Deployment {} pulls {i}, whose registry host does not resolve", self.deployment)),
            None => Presence::Absent(format!("Deployment {} pulls {}", self.deployment, images.join(", "))),
        })
    }
}

/// (container, image) of each container of a Deployment.
fn containers(deployment: &serde_json::Value) -> Addresses {
    deployment["spec"]["template"]["spec"]["containers"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|c| Some((c["name"].as_str()?.to_string(), c["image"].as_str()?.to_string())))
        .collect()
}

async fn set_images(ctx: &Ctx, deployment: &str, step: &str, images: &Addresses) -> Result<(), FaultError> {
    let containers: Vec<serde_json::Value> = images.iter().map(|(c, i)| json!({"name": c, "image": i})).collect();
    let patch = json!({"spec": {"template": {"spec": {"containers": containers}}}});
    ctx.kube.patch_object("apps/v1", "Deployment", Some(&ctx.namespace), deployment, &patch).await.map_err(Ctx::api_err(step))
}

#[async_trait]
impl Fix for ImageAddressWrong {
    type Step = Step;

    /// Writing the right addresses again is the same patch each time: idempotent.
    async fn fix(&self, which: Step, ctx: &Ctx) -> Result<(), FaultError> {
        let step = super::steps::Steps::name(which);
        self.refuse_bad_parameters(step)?;
        match which {
            Step::CorrectImageAddress => {
                let Some(right) = ctx.kept::<Addresses>("addresses") else {
                    return Err(FaultError::Check { step: step.into(), message: "the run's journal has no image address the fault changed".into() });
                };
                ctx.note("write the right image address again (edit the YAML, as the document says)");
                set_images(ctx, &self.deployment, step, &right).await
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::faults::testing::plan_ctx;
    use crate::record::Channel;

    #[rstest::rstest]
    #[case::registry_port("198.18.213.1:5443/faultlab/busybox:1", "registry.faultlab.invalid/faultlab/busybox:1")]
    #[case::registry_name("registry.example/app:2", "registry.faultlab.invalid/app:2")]
    #[case::docker_hub_short("nginx:v1.1", "registry.faultlab.invalid/nginx:v1.1")]
    #[case::docker_hub_path("bitnami/nginx:1.22", "registry.faultlab.invalid/bitnami/nginx:1.22")]
    fn the_wrong_address_keeps_the_path(#[case] right: &str, #[case] wrong: &str) {
        assert_eq!(wrong_address(right), wrong);
    }

    #[tokio::test]
    async fn plan_keeps_the_right_address_and_writes_it_back() {
        let fault = ImageAddressWrong::default();
        let (ctx, _) = plan_ctx(&fault);
        fault.prepare(&ctx).await.unwrap();
        fault.inject(&ctx).await.unwrap();
        fault.fix(Step::CorrectImageAddress, &ctx).await.unwrap();
        let patches: Vec<String> = ctx.rec().entries().into_iter().filter(|e| e.channel == Channel::Api && e.line.starts_with("PATCH")).map(|e| e.line).collect();
        assert_eq!(patches.len(), 2);
        assert!(patches[0].contains(r#""image":"registry.faultlab.invalid/faultlab/busybox:1""#), "{patches:?}");
        assert!(patches[1].contains(r#""image":"<registry-address>:5443/faultlab/busybox:1""#), "{patches:?}");
        let kept: Addresses = ctx.kept("addresses").unwrap();
        assert_eq!(kept, [("app".to_string(), "<registry-address>:5443/faultlab/busybox:1".to_string())]);
    }
}
