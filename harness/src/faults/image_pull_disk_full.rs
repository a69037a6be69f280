//! image-pull-disk-full: the node's image disk has too little room left to store a new image, so the
//! pull fails.
//!
//! Source: 001 (`cce_faq_00015.html`), "Check Item 4: Whether the Node Disk Space Is Insufficient": "If
//! the Kubernetes event contains information "no space left on device", there is no disk space left
//! for storing the image. As a result, the image will fail to be pulled. In this case, clear the image
//! or expand the disk space". Solution 1, for containerd nodes: `crictl images -v`, then `crictl rmi`
//! the images that are not required (never the pause image).
//!
//! disk-full fills the disk to the last block, so the runtime cannot even make a sandbox; this fault
//! leaves a little room ([`ImagePullDiskFull::free_mib`]), enough for a sandbox and too little for the
//! new release's image, so the sandbox starts and the pull is what fails.
//!
//! How: `prepare` starts the run's registry (see [`super::registry`]) and pushes the node's busybox
//! image; the workload pulls it and runs. The fault then releases a new version, the same busybox with
//! one more layer of [`ImagePullDiskFull::release_mib`] MiB of the run's own content (pushed with the
//! registry's API, so no node holds it), fills containerd's disk as disk-full does (old releases'
//! images nobody uses, of random data, imported and unpacked as a pull would, then a file on top) until
//! only `freeMiB` is left, and rolls the Deployment out to the new version. The fix removes the unused
//! images (the document's `crictl rmi`), and the kubelet's next pull has room.
//!
//! The disk: the node profile's (the test bed's loop disk), or on kind one made for the fault as for
//! disk-full ([`DiskFull`]'s `needs`), with the kubelet's image GC and imagefs eviction off as there.

use async_trait::async_trait;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::api::{Ctx, Fault, FaultError, Fix, Presence, Probe, Reach, WorkloadRef};
use super::disk_full::{parse_free, Disk, DiskFull, KIND_DISK_MIB};
use super::registry::{self, Registry, Spec};
use crate::check::{range, Problem};
use crate::cmd::{Ask, Cmd, Output};
use crate::gates::Target;
use crate::node::NodeProfile;

/// The name prefix of the unused images the fault imports: old releases of an app.
pub const IMAGE_PREFIX: &str = "faultlab.invalid/image-pull-disk-full/old-release";
/// The new release's tag in the run's registry.
pub const TAG: &str = "2";
/// A shell function `usable` printing `FREE-BLOCKS BLOCK-SIZE` of the disk at `MP` as root can fill
/// it: the free blocks less ext4's reserved clusters (`/sys/fs/ext4/<device>/reserved_clusters`, 4096
/// blocks by default, kept for its own metadata: neither a write nor fallocate gets them), 0 if the
/// file system has none.
const USABLE: &str = "usable() { dev=$(awk -v m=MP '$2 == m { d = $1 } END { print d }' /proc/mounts); \
    r=$(cat \"/sys/fs/ext4/${dev##*/}/reserved_clusters\" 2>/dev/null || echo 0); set -- $(stat -f -c '%f %S' MP); \
    echo $(( $1 > r ? $1 - r : 0 )) $2; }";

/// `usable` of the disk at `mountpoint`, run.
pub fn usable_free(mountpoint: &str) -> Cmd {
    Cmd::shell(format!("{}; usable", USABLE.replace("MP", &shell_words::quote(mountpoint)))).asks(USABLE_FREE)
}

/// What [`usable_free`] asks (a plan answers it).
const USABLE_FREE: Ask = Ask("usable-free-space");

/// The largest unused image's layer: enough to make room for any release this fault takes.
const MAX_IMAGE_MIB: u64 = 64;

fn default_deployment() -> String {
    "web".into()
}
fn default_images() -> u32 {
    2
}
fn default_release_mib() -> u64 {
    16
}
fn default_free_mib() -> u64 {
    4
}

#[derive(Clone, Debug, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ImagePullDiskFull {
    /// The Deployment rolled out to the new release; it must be part of the workload and pull from the
    /// run's registry (`${registry}/faultlab/busybox:1`), replacing its pods by `Recreate`.
    #[serde(default = "default_deployment")]
    pub deployment: String,
    /// How many unused images (old releases) take the disk (default 2).
    #[serde(default = "default_images")]
    pub images: u32,
    /// The size of the new release's own layer, in MiB (default 16): more than `freeMiB`, so that it
    /// cannot be stored.
    #[serde(default = "default_release_mib", rename = "releaseMiB")]
    pub release_mib: u64,
    /// How much of the disk is left free, in MiB (default 4): room for the new pod's sandbox, not for
    /// the new release's layer.
    #[serde(default = "default_free_mib", rename = "freeMiB")]
    pub free_mib: u64,
}

impl Default for ImagePullDiskFull {
    fn default() -> Self {
        ImagePullDiskFull { deployment: default_deployment(), images: default_images(), release_mib: default_release_mib(), free_mib: default_free_mib() }
    }
}

/// The document's fix (scenario files name it in `fix[].step`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Step {
    RemoveUnusedImages,
}

/// How the fault fills a disk with `free` MiB free: each unused image's layer, and the file on top.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Plan {
    pub image_mib: u64,
    pub fill_mib: u64,
}

impl ImagePullDiskFull {
    fn image_ref(i: u32) -> String {
        format!("{IMAGE_PREFIX}:r{i}")
    }

    fn refs(&self) -> Vec<String> {
        (1..=self.images.min(10)).map(Self::image_ref).collect()
    }

    /// The fill for a disk with `free_mib` free. The unused images (each stored twice: blob and
    /// snapshot) must give back, once removed, room for the new release twice over (blob and
    /// snapshot) and 16 MiB besides; they take 40 % of the free space where that is more, up to
    /// [`MAX_IMAGE_MIB`] each. A disk too small for that is an error.
    pub fn plan(&self, free_mib: u64) -> Result<Plan, String> {
        let images = u64::from(self.images.max(1));
        let least = (2 * self.release_mib + 16).div_ceil(2 * images);
        let image_mib = least.max((free_mib * 4 / 10 / (2 * images)).min(MAX_IMAGE_MIB));
        let taken = 2 * images * image_mib + self.free_mib;
        if taken > free_mib {
            return Err(format!(
                "containerd's disk has {free_mib} MiB free; {images} unused images of {image_mib} MiB (stored twice) and {} MiB left free need {taken} MiB",
                self.free_mib
            ));
        }
        Ok(Plan { image_mib, fill_mib: free_mib - taken })
    }

    /// Top the disk up with the fill file until `keep_mib` MiB of what root can write are left
    /// ([`usable_free`]): fallocate that much more at the file's end, sync, and again while more than
    /// 1 MiB too much is free (ext4 gives back blocks it held for data not yet written once that data
    /// is written); a fallocate refused for lack of room is tried once at half the size.
    fn top_up_leaving(disk: &Disk, keep_mib: u64) -> Cmd {
        let fill = shell_words::quote(&disk.fill_file()).into_owned();
        let mp = shell_words::quote(&disk.mountpoint).into_owned();
        let usable = USABLE.replace("MP", &mp);
        Cmd::shell(format!(
            "{usable}; for i in 1 2 3 4 5 6 7 8; do sync; set -- $(usable); n=$(( $1 * $2 - {keep} )); \
             [ \"$n\" -gt 1048576 ] || break; s=$(stat -c %s {fill} 2>/dev/null || echo 0); \
             fallocate -o \"$s\" -l \"$n\" {fill} 2>/dev/null || fallocate -o \"$s\" -l $((n / 2)) {fill} || break; done; \
             set -- $(usable); echo \"$1 usable free blocks of $2 bytes\"",
            keep = keep_mib << 20
        ))
        .timeout(std::time::Duration::from_secs(180))
    }

    /// The undo: the fill file and the unused images go.
    fn undo(&self, ctx: &Ctx, disk: &Disk) -> Cmd {
        let images = DiskFull::remove_images(ctx, &self.refs());
        Cmd::shell(format!("rm -f {}; {}", shell_words::quote(&disk.fill_file()), images.argv[2])).timeout(std::time::Duration::from_secs(180))
    }

    async fn free_mib_now(ctx: &Ctx, disk: &Disk, step: &str) -> Result<u64, FaultError> {
        let out = ctx.probe(step, usable_free(&disk.mountpoint)).await?;
        let (blocks, bsize) = parse_free(&out.stdout).ok_or_else(|| FaultError::Check { step: step.into(), message: format!("cannot read free blocks from {:?}", out.stdout.trim()) })?;
        Ok(blocks.saturating_mul(bsize) >> 20)
    }
}

#[async_trait]
impl Fault for ImagePullDiskFull {
    fn check(&self) -> Vec<Problem> {
        let mut problems = registry::check(&self.deployment);
        problems.extend(range("images", self.images.into(), 1, 10, "how many unused images fill the disk: at least 1 for the fix to remove, at most 10"));
        problems.extend(range("releaseMiB", self.release_mib, 2, 256, "MiB of the new release's layer: at least 2, at most 256 (it is made here and pushed to the run's registry)"));
        if self.free_mib == 0 || self.free_mib * 2 > self.release_mib {
            problems.push(Problem::new("freeMiB", format!("{} MiB left free: at least 1 (room for the new pod's sandbox) and at most half of releaseMiB {}, so that the layer cannot be stored", self.free_mib, self.release_mib)));
        }
        problems
    }

    fn workload_refs(&self) -> Vec<WorkloadRef> {
        registry::workload(&self.deployment)
    }

    fn plan_api_answers(&self, _target: &Target) -> Vec<(String, serde_json::Value)> {
        registry::plan_api(&self.deployment, None)
    }

    /// The run's registry; and as disk-full: a disk of containerd's own (on kind: a loop-mounted ext4
    /// file in the node), the kubelet's image GC and imagefs eviction off.
    fn needs(&self) -> crate::needs::Needs {
        crate::needs::Needs { containerd_disk_mib: Some(KIND_DISK_MIB), no_image_gc: true, ..registry::needs(None) }
    }

    /// On kind the node's /var is a Docker volume on the host's disk, and loop devices are the host's.
    fn reach(&self) -> Reach {
        Reach::Host(format!(
            "containerd's root is moved onto a {KIND_DISK_MIB} MiB loop file in the node's /var, which is a Docker volume on the host's \
             disk, and the loop mount takes one of the host's loop devices; filling it writes that file to the host's disk"
        ))
    }

    /// The node's images and containerd's disk, as disk-full's footprint has them (the same titles:
    /// counted once).
    fn footprint(node: &NodeProfile) -> Vec<Probe> {
        DiskFull::footprint(node)
    }

    /// A plan's registry answers as a real one; its disk has 245000 free blocks of 4 KiB (about 957 MiB).
    fn plan_answers(&self, node: &NodeProfile, _namespace: &str) -> Vec<(Ask, Output)> {
        let mut answers = registry::plan_answers(node);
        answers.extend(registry::plan_filler_answers());
        answers.push((USABLE_FREE, Output::ok("245000 4096\n")));
        answers
    }

    async fn prepare(&self, ctx: &Ctx) -> Result<(), FaultError> {
        self.refuse_bad_parameters("start-registry")?;
        registry::serve(ctx, Spec::main(false)).await.map(drop)
    }

    async fn inject(&self, ctx: &Ctx) -> Result<(), FaultError> {
        self.refuse_bad_parameters("push-new-release")?;
        let deployment = registry::pulling_deployment(ctx, &self.deployment).await?;
        let disk = Disk::of(ctx)?;
        let reg = Registry::of(ctx, Spec::main(false))?;
        let seed = format!("faultlab image-pull-disk-full {}", ctx.namespace);
        let image = reg.push_with_filler(ctx, "push-new-release", TAG, &seed, (self.release_mib << 20) as usize).await?;
        let free = Self::free_mib_now(ctx, &disk, "read-free-space").await?;
        let plan = self.plan(free).map_err(|message| FaultError::Check { step: "read-free-space".into(), message })?;
        ctx.undo_on_node("remove the unused images and the file that filled containerd's disk", self.undo(ctx, &disk))?;
        ctx.note(format!("{free} MiB free on {}: import {} unused images of {} MiB of random data each (stored twice)", disk.mountpoint, self.images, plan.image_mib));
        for r in self.refs() {
            ctx.run("import-unused-image", DiskFull::import(ctx, &r, plan.image_mib)).await?;
        }
        ctx.note(format!("top the disk up with {} until {} MiB are left: room for a sandbox, not for the new release's {} MiB layer", disk.fill_file(), self.free_mib, self.release_mib));
        ctx.run("top-up", Self::top_up_leaving(&disk, self.free_mib)).await?;
        ctx.keep("image", &image)?;
        registry::roll_out(ctx, &self.deployment, &deployment, &image, "roll-out-new-release").await
    }

    /// In place while the disk has less room (as root can fill it) than the new release's layer.
    async fn present(&self, ctx: &Ctx) -> Result<Presence, FaultError> {
        let disk = Disk::of(ctx)?;
        let free = Self::free_mib_now(ctx, &disk, "check-free-space").await?;
        Ok(if free < self.release_mib {
            Presence::Present(format!("{} has {free} MiB free, less than the new release's {} MiB layer", disk.mountpoint, self.release_mib))
        } else {
            Presence::Absent(format!("{} has {free} MiB free, room for the new release's {} MiB layer", disk.mountpoint, self.release_mib))
        })
    }
}

#[async_trait]
impl Fix for ImagePullDiskFull {
    type Step = Step;

    /// Removing images that are gone already does nothing: idempotent.
    async fn fix(&self, which: Step, ctx: &Ctx) -> Result<(), FaultError> {
        let step = super::steps::Steps::name(which);
        self.refuse_bad_parameters(step)?;
        match which {
            Step::RemoveUnusedImages => {
                ctx.note(format!("images no pod uses (old releases; never the pause image): {}", self.refs().join(" ")));
                ctx.run(step, DiskFull::remove_images(ctx, &self.refs())).await.map(drop)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::faults::testing::plan_ctx;
    use crate::journal::Undo;
    use crate::record::Channel;

    #[rstest::rstest]
    // The test bed's empty 1 GiB disk: 40 % over 2 images stored twice, 64 MiB at most each.
    #[case::test_bed(957, Plan { image_mib: 64, fill_mib: 957 - 256 - 4 })]
    // The emulated arm64 node's 192 MiB disk, some of it taken.
    #[case::arm64(150, Plan { image_mib: 15, fill_mib: 150 - 60 - 4 })]
    // Just room for the least: (2 x 16 + 16) / 4 = 12 MiB each.
    #[case::least(52, Plan { image_mib: 12, fill_mib: 0 })]
    fn the_fill_fits_the_disk(#[case] free: u64, #[case] plan: Plan) {
        assert_eq!(ImagePullDiskFull::default().plan(free), Ok(plan));
    }

    #[test]
    fn a_disk_too_small_is_refused() {
        let err = ImagePullDiskFull::default().plan(51).unwrap_err();
        assert_eq!(err, "containerd's disk has 51 MiB free; 2 unused images of 12 MiB (stored twice) and 4 MiB left free need 52 MiB");
    }

    #[rstest::rstest]
    #[case::no_room(0, 16, "freeMiB")]
    #[case::room_for_the_layer(9, 16, "freeMiB")]
    #[case::tiny_release(1, 1, "releaseMiB")]
    fn bad_sizes_are_problems(#[case] free: u64, #[case] release: u64, #[case] field: &str) {
        let f = ImagePullDiskFull { free_mib: free, release_mib: release, ..Default::default() };
        assert!(f.check().iter().any(|p| p.field == field), "{:?}", f.check());
    }

    #[tokio::test]
    async fn plan_pushes_journals_fills_leaving_room_then_rolls_out() {
        let fault = ImagePullDiskFull::default();
        let (ctx, fake) = plan_ctx(&fault);
        fault.prepare(&ctx).await.unwrap();
        fault.inject(&ctx).await.unwrap();
        let journal = ctx.journal.snapshot();
        let undo = journal.entries.iter().find_map(|e| match &e.undo {
            Undo::Node { cmd, .. } if cmd.argv[2].contains("old-release") => Some(cmd.argv[2].clone()),
            _ => None,
        });
        assert!(undo.expect("the fill's undo").starts_with("rm -f /var/lib/faultlab/containerd/faultlab-disk-full.fill; "));
        let node = fake.lines();
        let imports = node.iter().filter(|l| l.contains("images import -")).count();
        assert_eq!(imports, 2, "{node:#?}");
        let top_up = node.iter().find(|l| l.contains("fallocate")).expect("a top-up");
        assert!(top_up.contains(&format!("- {} ))", 4u64 << 20)), "{top_up}");
        let patch = ctx.rec().entries().into_iter().find(|e| e.channel == Channel::Api && e.line.starts_with("PATCH")).expect("the roll-out");
        assert!(patch.line.contains("/faultlab/busybox:2"), "{}", patch.line);
        fault.fix(Step::RemoveUnusedImages, &ctx).await.unwrap();
        assert!(fake.lines().last().unwrap().contains("faultlab.invalid/image-pull-disk-full/old-release:r1 faultlab.invalid/image-pull-disk-full/old-release:r2"));
    }
}
