//! image-pull-slow: the workload's new image is so slow to download that the rollout misses its
//! deadline while the pod waits on the pull.
//!
//! Source: 001 (`cce_faq_00015.html`), Table 1 and "Check Item 6: Whether the Image Size Is Too Large":
//! `Failed to pull image "XXX": rpc error: code = Unknown desc = context canceled` ("If the image pulling
//! progress is not updated within a certain period of time, the download will be canceled"). Fix
//! (solution 1): "Log in to the node and manually pull the image" (`crictl pull`), then run the workload
//! with `imagePullPolicy: IfNotPresent` so that it uses the image pulled to the node.
//!
//! How: `prepare` starts the run's registry (see [`super::registry`]) behind Debian's nginx and pushes
//! the node's busybox image; the workload pulls it and runs. The fault then releases a new version:
//! the same busybox with one more layer of [`ImagePullSlow::size_kib`] KiB of the run's own content
//! (pushed with the registry's API, so no node holds it), nginx sends blobs at most [`ImagePullSlow::rate`]
//! bytes a second (`limit_rate`), and the Deployment's image becomes the new version. The cancellation the
//! document shows is dockershim's (`--image-pull-progress-deadline`, one minute without progress) and
//! containerd 1.7's (`image_pull_progress_timeout`, five minutes without progress); a download that is
//! slow but never stalls trips neither, and containerd 1.6 (the test bed) has no such deadline at all.
//! What every platform shows is the nearest real behaviour: the pod stays `ContainerCreating` after
//! `Pulling image`, and the Deployment's rollout misses its `progressDeadlineSeconds`
//! (`ProgressDeadlineExceeded`). The fix pulls the image on the node with the node's CRI client (it waits
//! for the rest of the download) and sets `imagePullPolicy: IfNotPresent`.

use std::time::Duration;

use async_trait::async_trait;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::json;

use super::registry::{self, Answer, Registry, Spec};
use super::api::{Ctx, Fault, FaultError, Fix, Presence};
use crate::check::{range, Problem};
use crate::cmd::{Ask, Output};
use crate::node::NodeProfile;

/// The tag of the new version the fault releases.
pub const TAG: &str = "2";

/// How long the fix's pull on the node may take.
pub const PULL_TIMEOUT: Duration = Duration::from_secs(600);

#[derive(Clone, Debug, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ImagePullSlow {
    /// The Deployment whose image becomes the slow one; it must be part of the workload, pull `Always`
    /// and replace its pods by `Recreate`.
    #[serde(default = "default_deployment")]
    pub deployment: String,
    /// How fast the registry sends blobs, bytes a second, as nginx's `limit_rate` takes it: a number,
    /// `k` or `m` after it (default `8k`).
    #[serde(default = "default_rate")]
    pub rate: String,
    /// The size of the layer the new version adds, in KiB (default 512: about a minute at 8k).
    #[serde(default = "default_size")]
    pub size_kib: u64,
}

fn default_deployment() -> String {
    "web".into()
}

fn default_rate() -> String {
    "8k".into()
}

fn default_size() -> u64 {
    512
}

impl Default for ImagePullSlow {
    fn default() -> Self {
        ImagePullSlow { deployment: default_deployment(), rate: default_rate(), size_kib: default_size() }
    }
}

/// The document's fix, step by step (scenario files name them in `fix[].step`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Step {
    /// Log in to the node and pull the image by hand (`crictl pull`).
    PullImageOnNode,
    /// `imagePullPolicy: IfNotPresent` for the workload's containers (those that pull `Always`): it uses
    /// the image on the node.
    UseIfNotPresent,
}

/// The rate in bytes a second, if nginx's `limit_rate` can read it (`8k`, `1m`, `4096`).
pub fn rate_bytes(rate: &str) -> Option<u64> {
    let (number, unit) = match rate.strip_suffix(['k', 'K']) {
        Some(n) => (n, 1024),
        None => match rate.strip_suffix(['m', 'M']) {
            Some(n) => (n, 1024 * 1024),
            None => (rate, 1),
        },
    };
    if number.is_empty() || !number.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    // A number too large for a byte count (`18446744073709551615k`, found by tests/hostile.rs) is no
    // rate either.
    number.parse::<u64>().ok().and_then(|n| n.checked_mul(unit))
}

fn registry_spec() -> Spec {
    Spec { proxy: true, ..Spec::main(false) }
}

#[async_trait]
impl Fault for ImagePullSlow {
    registry::pulling!(deployment, behind_nginx: Some(registry::BACKEND_PORT));

    fn check(&self) -> Vec<Problem> {
        let mut problems = registry::check(&self.deployment);
        match rate_bytes(&self.rate) {
            None => problems.push(Problem::new("rate", format!("{:?} is not a rate nginx's limit_rate takes: a number of bytes a second, `k` or `m` after it (8k)", self.rate))),
            Some(bytes) => problems.extend(range("rate", bytes, 1024, 1024 * 1024, "bytes a second: at least 1k (below, nginx's timing makes the pull take far longer than planned) and at most 1m (above, the pull ends before the rollout's deadline)")),
        }
        problems.extend(range("sizeKib", self.size_kib, 64, 64 * 1024, "KiB of the new layer: at least 64 so the pull lasts, at most 64 MiB (it is written to this machine and the node)"));
        problems
    }

    fn plan_answers(&self, node: &NodeProfile, _namespace: &str) -> Vec<(Ask, Output)> {
        let mut answers = registry::plan_answers(node);
        answers.extend(registry::plan_filler_answers());
        answers
    }

    async fn prepare(&self, ctx: &Ctx) -> Result<(), FaultError> {
        self.refuse_bad_parameters("start-registry")?;
        registry::serve(ctx, registry_spec()).await.map(drop)
    }

    /// Push the new version, slow the registry's blobs down, and roll the Deployment out to it.
    async fn inject(&self, ctx: &Ctx) -> Result<(), FaultError> {
        self.refuse_bad_parameters("push-larger-image")?;
        let deployment = registry::pulling_deployment(ctx, &self.deployment).await?;
        let reg = Registry::of(ctx, registry_spec())?;
        let seed = format!("faultlab image-pull-slow {}", ctx.namespace);
        let image = reg.push_with_filler(ctx, "push-larger-image", TAG, &seed, (self.size_kib * 1024) as usize).await?;
        ctx.keep("image", &image)?;
        ctx.note(format!("the registry {} sends blobs at {} bytes a second at most (nginx's limit_rate)", reg.endpoint(), self.rate));
        reg.answer(ctx, "slow-registry", &Answer::Slowly(self.rate.clone())).await?;
        registry::roll_out(ctx, &self.deployment, &deployment, &image, "roll-out-new-version").await
    }

    /// In place while a container of the Deployment pulls the slow registry's image `Always`: each new
    /// pod waits on the download again (a pull that ended by itself is a workaround, not the fix).
    async fn present(&self, ctx: &Ctx) -> Result<Presence, FaultError> {
        let deployment = registry::deployment(ctx, &self.deployment, "check-image").await?;
        let slow = format!("{}/", Registry::of(ctx, registry_spec())?.endpoint());
        let always: Vec<String> = pulling_slowly(&deployment, &slow).into_iter().filter(|(_, _, policy)| policy == "Always").map(|(_, image, _)| image).collect();
        Ok(match always.first() {
            Some(image) => Presence::Present(format!("Deployment {} pulls {image} from the slow registry at each new pod (imagePullPolicy: Always)", self.deployment)),
            None => Presence::Absent(format!("no container of Deployment {} pulls the slow registry's image Always", self.deployment)),
        })
    }
}

/// (container, image, pull policy) of each container whose image starts with `prefix`.
fn pulling_slowly(deployment: &serde_json::Value, prefix: &str) -> Vec<(String, String, String)> {
    let text = |c: &serde_json::Value, field: &str| c[field].as_str().unwrap_or_default().to_string();
    registry::containers(deployment).iter().filter(|c| text(c, "image").starts_with(prefix)).map(|c| (text(c, "name"), text(c, "image"), text(c, "imagePullPolicy"))).collect()
}

#[async_trait]
impl Fix for ImagePullSlow {
    type Step = Step;

    /// A second pull of an image the node holds ends at once, and the same patch again changes nothing:
    /// idempotent.
    async fn fix(&self, which: Step, ctx: &Ctx) -> Result<(), FaultError> {
        let step = super::steps::Steps::name(which);
        self.refuse_bad_parameters(step)?;
        let slow = format!("{}/", Registry::of(ctx, registry_spec())?.endpoint());
        let deployment = registry::deployment(ctx, &self.deployment, step).await?;
        let containers = pulling_slowly(&deployment, &slow);
        match which {
            Step::PullImageOnNode => {
                let mut images: Vec<String> = containers.into_iter().map(|(_, image, _)| image).collect();
                images.dedup();
                if images.is_empty() {
                    images.extend(ctx.kept::<String>("image"));
                }
                for image in images {
                    ctx.note(format!("pull {image} on the node by hand (crictl pull): it waits for the rest of the download"));
                    let timeout = format!("{}s", PULL_TIMEOUT.as_secs());
                    let pull = ctx.node.profile.crictl(["pull", "--pull-timeout", &timeout, &image]).timeout(PULL_TIMEOUT + Duration::from_secs(30));
                    ctx.run(step, pull).await?;
                }
                Ok(())
            }
            Step::UseIfNotPresent => {
                let patch: Vec<serde_json::Value> = pulling_slowly(&deployment, "")
                    .into_iter()
                    .filter(|(_, _, policy)| !matches!(policy.as_str(), "IfNotPresent" | "Never"))
                    .map(|(name, _, _)| json!({"name": name, "imagePullPolicy": "IfNotPresent"}))
                    .collect();
                if patch.is_empty() {
                    return Ok(());
                }
                ctx.note("imagePullPolicy: IfNotPresent: the workload uses the image on the node");
                let patch = json!({"spec": {"template": {"spec": {"containers": patch}}}});
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

    #[rstest::rstest]
    #[case("8k", Some(8192))]
    #[case("1M", Some(1 << 20))]
    #[case("4096", Some(4096))]
    #[case("k", None)]
    #[case("8kb", None)]
    #[case("-8k", None)]
    #[case("", None)]
    #[case("18446744073709551615k", None)]
    #[case("18446744073709551615", Some(u64::MAX))]
    fn rates_as_nginx_reads_them(#[case] rate: &str, #[case] bytes: Option<u64>) {
        assert_eq!(rate_bytes(rate), bytes);
    }

    #[test]
    fn parameters_out_of_range_are_named() {
        let bad = ImagePullSlow { rate: "fast".into(), size_kib: 8, ..Default::default() };
        let fields: Vec<String> = bad.check().into_iter().map(|p| p.field).collect();
        assert_eq!(fields, ["rate", "sizeKib"]);
        assert!(ImagePullSlow { rate: "100".into(), ..Default::default() }.check()[0].message.contains("at least 1k"));
        assert!(ImagePullSlow::default().check().is_empty());
    }

    #[tokio::test]
    async fn plan_pushes_a_larger_image_slows_blobs_and_fixes_by_pulling_on_the_node() {
        let fault = ImagePullSlow::default();
        let (ctx, fake) = plan_ctx(&fault);
        fault.prepare(&ctx).await.unwrap();
        fault.inject(&ctx).await.unwrap();
        fault.fix(Step::PullImageOnNode, &ctx).await.unwrap();
        fault.fix(Step::UseIfNotPresent, &ctx).await.unwrap();
        let host: Vec<String> = ctx.rec().entries().into_iter().filter(|e| e.channel == Channel::Host).map(|e| e.line).collect();
        let uploads: Vec<&String> = host.iter().filter(|l| l.contains(" upload-blob ")).collect();
        assert_eq!(uploads.len(), 2, "the layer and the configuration: {host:#?}");
        assert!(host.iter().any(|l| l.contains("-X PUT") && l.ends_with("/v2/faultlab/busybox/manifests/2")), "{host:#?}");
        assert!(host.iter().any(|l| l.contains("nginx -c") && l.ends_with("-s reload")), "{host:#?}");
        let image = "10.213.0.1:5443/faultlab/busybox:2";
        let pulls: Vec<String> = fake.lines().into_iter().filter(|l| l.contains(" pull ")).collect();
        assert_eq!(pulls.len(), 1, "{pulls:?}");
        assert!(pulls[0].ends_with(&format!("pull --pull-timeout 600s {image}")), "{pulls:?}");
        let patches: Vec<String> = ctx.rec().entries().into_iter().filter(|e| e.channel == Channel::Api && e.line.starts_with("PATCH")).map(|e| e.line).collect();
        assert_eq!(patches.len(), 2, "{patches:?}");
        assert!(patches[0].contains(&format!(r#""image":"{image}""#)), "{patches:?}");
        assert!(patches[1].ends_with(r#"{"spec":{"template":{"spec":{"containers":[{"imagePullPolicy":"IfNotPresent","name":"app"}]}}}}"#), "{patches:?}");
    }

    #[test]
    fn only_the_slow_registrys_containers_count() {
        let d = json!({"spec": {"template": {"spec": {"containers": [
            {"name": "a", "image": "198.18.213.1:5443/faultlab/busybox:2", "imagePullPolicy": "Always"},
            {"name": "b", "image": "198.18.213.1:5444/faultlab/busybox:1", "imagePullPolicy": "Always"},
        ]}}}});
        assert_eq!(pulling_slowly(&d, "198.18.213.1:5443/"), [("a".to_string(), "198.18.213.1:5443/faultlab/busybox:2".to_string(), "Always".to_string())]);
    }
}
