//! Faults: one file each. A fault acts on one node and one workload; the runner picks them.
//!
//! Writing a fault means implementing [`Fault`]: `inject` (record the undo in the journal first, then
//! break things); and [`Fix`]: an enum of the documented steps and `fix` for each (idempotent: already
//! fixed is success). `check`, `prepare`, `present`, `needs`, `reach`, `footprint` and the plan
//! answers have defaults; a fault that on kind reaches past the node container into the host says how
//! in `reach`, and one that does not says why in a comment. Then add one line to [`faults!`] below
//! (`"<name>" => <file>::<Type>`: it declares the file's module too), and the scenario format, the
//! schema, `faultlab new` and the CLI know it.
//!
//! This module is the list of faults ([`FaultSpec`]); the API each fault's file uses is [`api`], below
//! it (re-exported here).

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::check::Problem;
use crate::node::NodeProfile;

pub mod api;
pub mod registry;
pub mod steps;

pub use api::{fresh_private_dir, Ctx, Fault, FaultError, Fix, Presence, Probe, Reach, WorkloadRef, WORK_PARENT};
#[cfg(test)]
pub(crate) use api::testing;

macro_rules! faults {
    ($($name:literal => $module:ident::$variant:ident),+ $(,)?) => {
        $(pub mod $module;)+

        /// The fault of a scenario, keyed by its name, with its parameters.
        #[derive(Clone, Debug, Serialize, Deserialize, JsonSchema)]
        #[serde(deny_unknown_fields)]
        pub enum FaultSpec {
            $(#[serde(rename = $name)] $variant($module::$variant),)+
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
                match self { $(FaultSpec::$variant(_) => steps::names::<<$module::$variant as Fix>::Step>(),)+ }
            }

            /// Apply the fix step named `step` (a name [`FaultSpec::fix_steps`] gives).
            pub async fn fix(&self, step: &str, ctx: &Ctx) -> Result<(), FaultError> {
                match self { $(FaultSpec::$variant(f) => f.fix(steps::parse($name, step)?, ctx).await,)+ }
            }

            /// What this fault may change on `node`: its own footprint.
            pub fn own_footprint(&self, node: &NodeProfile) -> Vec<Probe> {
                match self { $(FaultSpec::$variant(_) => <$module::$variant as Fault>::footprint(node),)+ }
            }

            /// What any fault may change on `node`: every fault's footprint, each title once.
            pub fn footprint(node: &NodeProfile) -> Vec<Probe> {
                let mut probes: Vec<Probe> = Vec::new();
                $(for p in <$module::$variant as Fault>::footprint(node) {
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
    "cni-broken" => cni_broken::CniBroken,
    "cni-plugin-missing" => cni_plugin_missing::CniPluginMissing,
    "configmap-missing" => configmap_missing::ConfigmapMissing,
    "configmap-subpath-restart" => configmap_subpath_restart::ConfigmapSubpathRestart,
    "container-args-wrong" => container_args_wrong::ContainerArgsWrong,
    "controller-manager-down" => controller_manager_down::ControllerManagerDown,
    "cpu-count" => cpu_count::CpuCount,
    "default-route" => default_route::DefaultRoute,
    "disk-full" => disk_full::DiskFull,
    "duplicate-container" => duplicate_container::DuplicateContainer,
    "image-address-wrong" => image_address_wrong::ImageAddressWrong,
    "image-pull-disk-full" => image_pull_disk_full::ImagePullDiskFull,
    "image-pull-secret-missing" => image_pull_secret_missing::ImagePullSecretMissing,
    "image-pull-secret-wrong" => image_pull_secret_wrong::ImagePullSecretWrong,
    "image-pull-slow" => image_pull_slow::ImagePullSlow,
    "inotify-limit" => inotify_limit::InotifyLimit,
    "memory-limit-unit" => memory_limit_unit::MemoryLimitUnit,
    "pause-missing" => pause_missing::PauseMissing,
    "registry-rate-limited" => registry_rate_limited::RegistryRateLimited,
    "registry-unreachable" => registry_unreachable::RegistryUnreachable,
    "registry-x509" => registry_x509::RegistryX509,
    "runtime-parts-mismatch" => runtime_parts_mismatch::RuntimePartsMismatch,
    "storageclass-missing" => storageclass_missing::StorageclassMissing,
    "volume-multi-attach" => volume_multi_attach::VolumeMultiAttach,
}
