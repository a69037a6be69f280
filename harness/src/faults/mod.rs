//! Faults: one file each. A fault acts on one node and one workload; the runner picks them.
//!
//! Writing a fault means implementing [`Fault`]: `inject` (record the undo in the journal first, then
//! break things); and [`Fix`]: an enum of the documented steps and `fix` for each (idempotent: already
//! fixed is success). `check`, `prepare`, `present`, `needs`, `reach`, `footprint` and the plan
//! answers have defaults; a fault that on kind reaches past the node container into the host says how
//! in `reach`, and one that does not says why in a comment. Then add one line to [`faults!`] below,
//! and the scenario format, the schema and the CLI know it.
//!
//! This module is the list of faults ([`FaultSpec`]); the API each fault's file uses is [`api`], below
//! it (re-exported here).

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::check::Problem;
use crate::node::NodeProfile;

pub mod api;
pub mod cni_broken;
pub mod configmap_missing;
pub mod controller_manager_down;
pub mod cpu_count;
pub mod default_route;
pub mod disk_full;
pub mod duplicate_container;
pub mod image_address_wrong;
pub mod image_pull_secret_missing;
pub mod image_pull_secret_wrong;
pub mod image_pull_slow;
pub mod inotify_limit;
pub mod memory_limit_unit;
pub mod pause_missing;
pub mod registry;
pub mod registry_rate_limited;
pub mod registry_unreachable;
pub mod registry_x509;
pub mod steps;
pub mod storageclass_missing;

pub use api::{fresh_private_dir, Ctx, Fault, FaultError, Fix, Presence, Probe, Reach, WorkloadRef, WORK_PARENT};
#[cfg(test)]
pub(crate) use api::testing;

macro_rules! faults {
    ($($name:literal => $variant:ident($ty:ty)),+ $(,)?) => {
        /// The fault of a scenario, keyed by its name, with its parameters.
        #[derive(Clone, Debug, Serialize, Deserialize, JsonSchema)]
        #[serde(deny_unknown_fields)]
        pub enum FaultSpec {
            $(#[serde(rename = $name)] $variant($ty),)+
        }

        impl FaultSpec {
            pub const NAMES: &'static [&'static str] = &[$($name),+];

            pub fn name(&self) -> &'static str {
                match self { $(FaultSpec::$variant(_) => $name,)+ }
            }

            pub fn fault(&self) -> &dyn Fault {
                match self { $(FaultSpec::$variant(f) => f,)+ }
            }

            /// The fix steps the fault offers, in the document's order.
            pub fn fix_steps(&self) -> &'static [&'static str] {
                match self { $(FaultSpec::$variant(_) => steps::names::<<$ty as Fix>::Step>(),)+ }
            }

            /// Apply the fix step named `step` (a name [`FaultSpec::fix_steps`] gives).
            pub async fn fix(&self, step: &str, ctx: &Ctx) -> Result<(), FaultError> {
                match self { $(FaultSpec::$variant(f) => f.fix(steps::parse($name, step)?, ctx).await,)+ }
            }

            /// What this fault may change on `node`: its own footprint.
            pub fn own_footprint(&self, node: &NodeProfile) -> Vec<Probe> {
                match self { $(FaultSpec::$variant(_) => <$ty as Fault>::footprint(node),)+ }
            }

            /// What any fault may change on `node`: every fault's footprint, each title once.
            pub fn footprint(node: &NodeProfile) -> Vec<Probe> {
                let mut probes: Vec<Probe> = Vec::new();
                $(for p in <$ty as Fault>::footprint(node) {
                    if !probes.iter().any(|q| q.title == p.title) {
                        probes.push(p);
                    }
                })+
                probes
            }

            /// The fault's parameter problems, at `fault.<name>.<parameter>`.
            pub fn check(&self) -> Vec<Problem> {
                let parent = format!("fault.{}", self.name());
                self.fault().check().into_iter().map(|p| p.under(&parent)).collect()
            }
        }
    };
}

faults! {
    "cni-broken" => CniBroken(cni_broken::CniBroken),
    "configmap-missing" => ConfigmapMissing(configmap_missing::ConfigmapMissing),
    "controller-manager-down" => ControllerManagerDown(controller_manager_down::ControllerManagerDown),
    "cpu-count" => CpuCount(cpu_count::CpuCount),
    "default-route" => DefaultRoute(default_route::DefaultRoute),
    "disk-full" => DiskFull(disk_full::DiskFull),
    "duplicate-container" => DuplicateContainer(duplicate_container::DuplicateContainer),
    "image-address-wrong" => ImageAddressWrong(image_address_wrong::ImageAddressWrong),
    "image-pull-secret-missing" => ImagePullSecretMissing(image_pull_secret_missing::ImagePullSecretMissing),
    "image-pull-secret-wrong" => ImagePullSecretWrong(image_pull_secret_wrong::ImagePullSecretWrong),
    "image-pull-slow" => ImagePullSlow(image_pull_slow::ImagePullSlow),
    "inotify-limit" => InotifyLimit(inotify_limit::InotifyLimit),
    "memory-limit-unit" => MemoryLimitUnit(memory_limit_unit::MemoryLimitUnit),
    "pause-missing" => PauseMissing(pause_missing::PauseMissing),
    "registry-rate-limited" => RegistryRateLimited(registry_rate_limited::RegistryRateLimited),
    "registry-unreachable" => RegistryUnreachable(registry_unreachable::RegistryUnreachable),
    "registry-x509" => RegistryX509(registry_x509::RegistryX509),
    "storageclass-missing" => StorageclassMissing(storageclass_missing::StorageclassMissing),
}
