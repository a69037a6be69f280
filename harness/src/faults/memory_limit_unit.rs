//! memory-limit-unit: a container's memory limit written with CPU's unit, `m` (thousandths), so
//! `1024Mi` becomes `1024m`: 1.024 bytes.
//!
//! Source: imroc's Kubernetes troubleshooting guide, "Pod 一直处于 ContainerCreating 或 Waiting 状态",
//! "limit 设置太小或者单位不对" (the limit too small or in the wrong unit). Symptom: the sandbox or the
//! container is killed as it starts, so the pod never runs (`Pod sandbox changed, it will be killed and
//! re-created`; the runtime's `signal: killed`). Fix: the right unit (`Mi` or `M`).
//!
//! How: the fault patches the workload's Deployment as a person editing it would (a strategic merge
//! patch of the one container's `resources.limits.memory`), keeping the right value in the run's journal
//! for the fix; the namespace's deletion at teardown takes the Deployment with it. The Deployment must
//! replace its pods with `strategy: Recreate`: with a rolling update its old pod would go on running
//! beside the broken one, and nobody would see a symptom (nor could the recovery gate tell).

use async_trait::async_trait;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::json;

use super::api::{Ctx, Fault, FaultError, Fix, Presence, Reach, WorkloadRef};
use crate::check::{dns_label, dns_subdomain, Problem};
use crate::gates::Target;

#[derive(Clone, Debug, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct MemoryLimitUnit {
    /// The Deployment whose container gets the wrong unit; it must be part of the workload.
    pub deployment: String,
    /// The container, by name (default: the Deployment's first container).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub container: Option<String>,
}

/// The document's fix, step by step (scenario files name them in `fix[].step`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Step {
    CorrectUnit,
}

/// The limit before and after the fault, as the journal keeps it for the fix.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Limits {
    pub container: String,
    pub right: String,
    pub wrong: String,
}

/// The same number in the wrong unit: `1024Mi` → `1024m` (the document's example), `512M` → `512m`.
/// Only a plain whole number with a byte unit (Ki, Mi, Gi, Ti, K, M, G, T) has a "wrong unit" twin;
/// anything else is refused with why. Gi and Ti are read in Mi first: the API server writes a
/// manifest's `1024Mi` as `1Gi`, and a person who mistakes the unit writes the number they wrote,
/// `1024m`, not `1m` (which the fault wrote on real clusters until a blind challenge's scripted
/// trainee, reading the limit back, set it to 1Mi).
pub fn wrong_unit(right: &str) -> Result<String, String> {
    const UNITS: &[&str] = &["Ki", "Mi", "Gi", "Ti", "K", "M", "G", "T"];
    let Some(unit) = UNITS.iter().find(|u| right.ends_with(**u)) else {
        return Err(format!("{right:?} has no byte unit (Ki, Mi, Gi, Ti, K, M, G or T) whose letter could be mistaken for CPU's m"));
    };
    let number = &right[..right.len() - unit.len()];
    if number.is_empty() || !number.bytes().all(|b| b.is_ascii_digit()) || number.len() > 12 {
        return Err(format!("{right:?} is not a whole number of {unit} (at most 12 digits)"));
    }
    let in_mi = match *unit {
        "Gi" => number.parse::<u64>().ok().and_then(|n| n.checked_mul(1 << 10)),
        "Ti" => number.parse::<u64>().ok().and_then(|n| n.checked_mul(1 << 20)),
        _ => None,
    }
    .map(|n| n.to_string());
    let number = in_mi.as_deref().unwrap_or(number);
    // 2000m is 2 bytes exactly, and the API server writes it as 2: the m the fault wrote is gone, and
    // with it the fault, as `present` reads it (a blind variant of 2000Mi failed so on the test bed).
    if number.parse::<u64>().is_ok_and(|n| n % 1000 == 0) {
        return Err(format!("{right:?} in thousandths ({number}m) is a whole number of bytes, which the API server writes without the m: the wrong unit would not show; take a number that is not a multiple of 1000"));
    }
    Ok(format!("{number}m"))
}

#[async_trait]
impl Fault for MemoryLimitUnit {
    /// It patches a Deployment of the run's namespace through the API, and runs nothing on the node.
    fn reach(&self) -> Reach {
        Reach::Namespace
    }

    fn check(&self) -> Vec<Problem> {
        let mut problems: Vec<Problem> = dns_subdomain("deployment", &self.deployment)
            .map(|p| Problem::new(p.field, format!("{}; it names the Deployment whose memory limit the fault changes", p.message)))
            .into_iter()
            .collect();
        if let Some(c) = &self.container {
            problems.extend(dns_label("container", c));
        }
        problems
    }

    fn workload_refs(&self) -> Vec<WorkloadRef> {
        vec![WorkloadRef { field: "deployment", kind: "Deployment", name: self.deployment.clone() }]
    }

    /// A plan's workload: the Deployment with one container limited to the document's 1024Mi, replaced by
    /// Recreate (a plan does not read the workload's own value).
    fn plan_api_answers(&self, _target: &Target) -> Vec<(String, serde_json::Value)> {
        let container = self.container.clone().unwrap_or_else(|| "<container>".into());
        vec![(
            format!("/deployments/{}", self.deployment),
            json!({
                "metadata": {"name": self.deployment},
                "spec": {"strategy": {"type": "Recreate"}, "template": {"spec": {"containers": [
                    {"name": container, "resources": {"limits": {"memory": "1024Mi"}}}
                ]}}}
            }),
        )]
    }

    /// Keep the right limit in the journal, then write the wrong one.
    async fn inject(&self, ctx: &Ctx) -> Result<(), FaultError> {
        self.refuse_bad_parameters("read-deployment")?;
        let deployment = self.get(ctx, "read-deployment").await?;
        let limits = self.limits_of(&deployment).map_err(|message| FaultError::Check { step: "read-deployment".into(), message })?;
        ctx.keep("limits", &limits)?;
        ctx.note(format!(
            "write limits.memory {} (thousandths of a byte, as CPU's m) instead of {} in container {}",
            limits.wrong, limits.right, limits.container
        ));
        self.set_limit(ctx, "write-wrong-unit", &limits.container, &limits.wrong).await
    }

    /// In place while the container's limit is the wrong one.
    async fn present(&self, ctx: &Ctx) -> Result<Presence, FaultError> {
        let Some(limits) = ctx.kept::<Limits>("limits") else {
            return Ok(Presence::Unknown);
        };
        let deployment = self.get(ctx, "check-limit").await?;
        let now = container(&deployment, Some(&limits.container))
            .and_then(|c| c["resources"]["limits"]["memory"].as_str().map(str::to_owned))
            .unwrap_or_default();
        Ok(if now.ends_with('m') {
            Presence::Present(format!("container {} has limits.memory {now}: {} of a byte", limits.container, thousandths(&now)))
        } else {
            Presence::Absent(format!("container {} has limits.memory {now:?}", limits.container))
        })
    }
}

/// `1024m` in words: `1.024`.
fn thousandths(quantity: &str) -> String {
    let n: u128 = quantity.trim_end_matches('m').parse().unwrap_or(0);
    format!("{}.{:03}", n / 1000, n % 1000)
}

/// The named container of a Deployment (or its first).
fn container<'a>(deployment: &'a serde_json::Value, name: Option<&str>) -> Option<&'a serde_json::Value> {
    let containers = deployment["spec"]["template"]["spec"]["containers"].as_array()?;
    match name {
        Some(n) => containers.iter().find(|c| c["name"] == n),
        None => containers.first(),
    }
}

impl MemoryLimitUnit {
    async fn get(&self, ctx: &Ctx, step: &str) -> Result<serde_json::Value, FaultError> {
        match ctx.kube.get_object("apps/v1", "Deployment", Some(&ctx.namespace), &self.deployment).await.map_err(Ctx::api_err(step))? {
            Some(d) => Ok(d),
            None => Err(FaultError::Check {
                step: step.into(),
                message: format!("Deployment {} is not in namespace {}; the workload must create it", self.deployment, ctx.namespace),
            }),
        }
    }

    /// What the fault will change, or why it cannot.
    fn limits_of(&self, deployment: &serde_json::Value) -> Result<Limits, String> {
        let name = &self.deployment;
        let strategy = deployment["spec"]["strategy"]["type"].as_str().unwrap_or("RollingUpdate");
        if strategy != "Recreate" {
            return Err(format!(
                "Deployment {name} replaces its pods by {strategy}: its old pod would keep running beside the broken one, \
                 so give it `strategy: {{type: Recreate}}`"
            ));
        }
        let Some(c) = container(deployment, self.container.as_deref()) else {
            return Err(match &self.container {
                Some(n) => format!("Deployment {name} has no container {n}"),
                None => format!("Deployment {name} has no container"),
            });
        };
        let cname = c["name"].as_str().unwrap_or_default().to_string();
        let Some(right) = c["resources"]["limits"]["memory"].as_str() else {
            return Err(format!("container {cname} of Deployment {name} has no resources.limits.memory to write in the wrong unit"));
        };
        if c["resources"]["requests"]["memory"].is_string() {
            return Err(format!(
                "container {cname} of Deployment {name} sets resources.requests.memory: the API would refuse a limit below it, \
                 so set only limits.memory (the request defaults to the limit)"
            ));
        }
        let wrong = wrong_unit(right).map_err(|why| format!("limits.memory of container {cname}: {why}"))?;
        Ok(Limits { container: cname, right: right.to_string(), wrong })
    }

    async fn set_limit(&self, ctx: &Ctx, step: &str, container: &str, memory: &str) -> Result<(), FaultError> {
        let patch = json!({"spec": {"template": {"spec": {"containers": [
            {"name": container, "resources": {"limits": {"memory": memory}}}
        ]}}}});
        ctx.kube.patch_object("apps/v1", "Deployment", Some(&ctx.namespace), &self.deployment, &patch).await.map_err(Ctx::api_err(step))
    }
}

#[async_trait]
impl Fix for MemoryLimitUnit {
    type Step = Step;

    /// Writing the right limit again is the same patch each time: idempotent.
    async fn fix(&self, which: Step, ctx: &Ctx) -> Result<(), FaultError> {
        let step = super::steps::Steps::name(which);
        self.refuse_bad_parameters(step)?;
        match which {
            Step::CorrectUnit => {
                let Some(limits) = ctx.kept::<Limits>("limits") else {
                    return Err(FaultError::Check { step: step.into(), message: "the run's journal has no limit the fault changed".into() });
                };
                ctx.note(format!("write limits.memory {} again: the unit the document says (Mi)", limits.right));
                self.set_limit(ctx, step, &limits.container, &limits.right).await
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::faults::testing::{ctx, plan_ctx};
    use crate::record::Channel;

    fn fault() -> MemoryLimitUnit {
        MemoryLimitUnit { deployment: "web".into(), container: Some("app".into()) }
    }

    #[rstest::rstest]
    #[case::document("1024Mi", "1024m")]
    #[case::decimal("512M", "512m")]
    #[case::gibi("1Gi", "1024m")]
    #[case::tebi("2Ti", "2097152m")]
    #[case::kibi("65536Ki", "65536m")]
    fn the_wrong_unit_keeps_the_number(#[case] right: &str, #[case] wrong: &str) {
        assert_eq!(wrong_unit(right).unwrap(), wrong);
    }

    #[rstest::rstest]
    #[case::no_unit("1073741824", "has no byte unit")]
    #[case::already_wrong("1024m", "has no byte unit")]
    #[case::fraction("1.5Gi", "is not a whole number of Gi")]
    #[case::exponent("1e3Mi", "is not a whole number of Mi")]
    #[case::empty("Mi", "is not a whole number of Mi")]
    #[case::thousands("2000Mi", "is a whole number of bytes")]
    #[case::zero("0Mi", "is a whole number of bytes")]
    fn what_has_no_wrong_unit_twin_is_refused(#[case] right: &str, #[case] why: &str) {
        let err = wrong_unit(right).unwrap_err();
        assert!(err.contains(why), "{err}");
    }

    #[tokio::test]
    async fn plan_reads_patches_and_patches_back() {
        let fault = fault();
        let (ctx, fake) = plan_ctx(&fault);
        fault.inject(&ctx).await.unwrap();
        assert_eq!(fault.present(&ctx).await.unwrap(), Presence::Absent("container app has limits.memory \"1024Mi\"".into()), "a plan's API does not change");
        fault.fix(Step::CorrectUnit, &ctx).await.unwrap();
        let api: Vec<String> = ctx.rec().entries().into_iter().filter(|e| e.channel == Channel::Api).map(|e| e.line).collect();
        let patch = |m: &str| format!(r#"PATCH /apis/apps/v1/namespaces/fl-test/deployments/web {{"spec":{{"template":{{"spec":{{"containers":[{{"name":"app","resources":{{"limits":{{"memory":"{m}"}}}}}}]}}}}}}}}"#);
        assert_eq!(
            api,
            vec![
                "GET /apis/apps/v1/namespaces/fl-test/deployments/web".to_string(),
                patch("1024m"),
                "GET /apis/apps/v1/namespaces/fl-test/deployments/web".to_string(),
                patch("1024Mi"),
            ]
        );
        assert!(fake.lines().is_empty(), "no node command");
        let kept: Limits = ctx.kept("limits").unwrap();
        assert_eq!(kept, Limits { container: "app".into(), right: "1024Mi".into(), wrong: "1024m".into() });
    }

    fn deployment(strategy: &str, resources: serde_json::Value) -> serde_json::Value {
        json!({"spec": {"strategy": {"type": strategy}, "template": {"spec": {"containers": [{"name": "app", "resources": resources}]}}}})
    }

    #[rstest::rstest]
    #[case::rolling("RollingUpdate", json!({"limits": {"memory": "64Mi"}}), "replaces its pods by RollingUpdate")]
    #[case::no_limit("Recreate", json!({}), "has no resources.limits.memory")]
    #[case::request("Recreate", json!({"limits": {"memory": "64Mi"}, "requests": {"memory": "32Mi"}}), "sets resources.requests.memory")]
    #[case::bytes("Recreate", json!({"limits": {"memory": "67108864"}}), "limits.memory of container app: \"67108864\" has no byte unit")]
    fn workloads_it_cannot_break_as_documented_are_refused(#[case] strategy: &str, #[case] resources: serde_json::Value, #[case] why: &str) {
        let err = fault().limits_of(&deployment(strategy, resources)).unwrap_err();
        assert!(err.contains(why), "{err}");
    }

    #[test]
    fn another_container_is_named_in_the_refusal() {
        let f = MemoryLimitUnit { deployment: "web".into(), container: Some("sidecar".into()) };
        let err = f.limits_of(&deployment("Recreate", json!({"limits": {"memory": "64Mi"}}))).unwrap_err();
        assert_eq!(err, "Deployment web has no container sidecar");
        let first = MemoryLimitUnit { deployment: "web".into(), container: None };
        assert_eq!(first.limits_of(&deployment("Recreate", json!({"limits": {"memory": "64Mi"}}))).unwrap().container, "app");
    }

    #[test]
    fn bad_names_are_problems_at_their_field() {
        let f = MemoryLimitUnit { deployment: "".into(), container: Some("App".into()) };
        let fields: Vec<String> = crate::faults::FaultSpec::MemoryLimitUnit(f).check().into_iter().map(|p| p.field).collect();
        assert_eq!(fields, ["fault.memory-limit-unit.deployment", "fault.memory-limit-unit.container"]);
    }

    #[tokio::test]
    async fn the_fix_without_a_kept_limit_says_so_and_writes_nothing() {
        let (ctx, _) = ctx();
        let err = fault().fix(Step::CorrectUnit, &ctx).await.unwrap_err();
        assert_eq!(err.to_string(), "correct-unit: the run's journal has no limit the fault changed");
        assert!(ctx.rec().entries().iter().all(|e| !e.line.starts_with("PATCH")));
    }

    #[test]
    fn thousandths_read_as_a_person_would() {
        assert_eq!(thousandths("1024m"), "1.024");
        assert_eq!(thousandths("64m"), "0.064");
    }
}
