//! disk-full: the disk under containerd's root is full, largely of images nothing uses any more.
//!
//! Source: imroc's Kubernetes troubleshooting guide, "Pod 一直处于 ContainerCreating 或 Waiting 状态 /
//! 磁盘爆满" (the runtime's data disk is full: FailedCreatePodSandBox `... no space left on device`),
//! and its "处理实践: 磁盘爆满" (find what fills the disk, clean it up; or give the runtime more disk).
//!
//! Disks fill in real life with old releases' images: `inject` imports `images` images of
//! incompressible random data (docker-save tarballs that faultlab makes as the node's `ctr images
//! import -` reads them, [`crate::image::ImageStream`], unpacked as a pull would), together about 80 %
//! of the free space, and tops the rest up with a file, until not one block is free. Then the workload is restarted: its new pod needs a
//! sandbox snapshot directory, which containerd cannot create.
//!
//! Fix steps: `remove-unused-images` (`ctr -n k8s.io images rm` of the images no pod uses: the old
//! releases) or `expand-disk` (grow the loop disk's backing file, `losetup -c`, `resize2fs`). Either
//! alone recovers the pod.
//!
//! The disk: the node profile's `disk` (the test bed's loop mount: 1 GiB, 192 MiB on the emulated arm64 node), else containerd's root (kind:
//! made a loop mount of its own when the node boots, from the fault's `needs`).

use async_trait::async_trait;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::time::Duration;

use super::api::{Ctx, Fault, FaultError, Fix, Presence, Probe, Reach};
use crate::check::{range, Problem};
use crate::cmd::{Ask, Cmd, Output};
use crate::image::{ImageConfig, ImageStream};
use crate::node::NodeProfile;

/// The name prefix of the unused images the fault imports: old releases of an app.
pub const IMAGE_PREFIX: &str = "faultlab.invalid/disk-full/old-release";
/// The keeper ([`DiskFull::keeper`]): how long it keeps the disk full after the restart, in rounds of
/// [`KEEPER_FAST_MS`] for the first [`KEEPER_FAST_ROUNDS`] (while the old pod's container and sandbox
/// go), then of [`KEEPER_SLOW_MS`]: about 5 minutes, the symptom's wait and the fix's.
pub const KEEPER_FAST_ROUNDS: u32 = 300;
pub const KEEPER_FAST_MS: u32 = 100;
pub const KEEPER_SLOW_ROUNDS: u32 = 540;
pub const KEEPER_SLOW_MS: u32 = 500;
/// The most the keeper takes back, in bytes (8 MiB): what the churn of a full disk frees and takes
/// again, not what a fix frees (the unused images are 80 % of the disk's free space).
pub const KEEPER_MAX_BYTES: u64 = 8 << 20;
/// The size of every append to the top-up file: no ext4 block is smaller, so none is left over. With
/// 4096-byte appends (a page), a disk of 1 KiB blocks (mke2fs's choice for the VM nodes' small disks:
/// 174 MiB on the cgroup v2 node) kept up to 3 blocks free, enough for a directory: the check after
/// inject found room there in CI and in two runs here, while the file could not grow.
pub const APPEND_BYTES: u64 = 512;
/// How many times [`DiskFull::present`] tries to make a directory, 0.6 s apart: on a full disk some
/// process may hold a block for a moment before giving it back, and the keeper takes it again.
pub const PROBE_TRIES: u32 = 3;

/// The top-up file, at the top of the disk.
pub const FILL_FILE: &str = "faultlab-disk-full.fill";
/// The size of the containerd disk the fault needs where the platform makes one (kind; the test bed
/// has its own: 1 GiB, 192 MiB on the emulated arm64 node).
pub const KIND_DISK_MIB: u64 = 3072;

fn default_images() -> u32 {
    4
}

fn default_expand_mib() -> u64 {
    512
}

/// The most unused images: each is made of random data and imported on the node one after another
/// (up to 5 minutes each), and the undo and the fix name them all in one command line.
pub const MAX_IMAGES: u32 = 100;

/// The least `expand-disk` may grow the disk by: ext4 holds back up to 4096 blocks (16 MiB) of new
/// space for its own metadata, and the new pod's sandbox and container need room beyond that.
pub const MIN_EXPAND_MIB: u64 = 64;

/// The most: the disk is a loop file on the node's disk (on kind a Docker volume on the host's), grown
/// for one pod to start again, not a disk to fill anew.
pub const MAX_EXPAND_MIB: u64 = 16 << 10;

#[derive(Clone, Debug, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct DiskFull {
    /// How many unused images fill the disk (default 4). Together they take about 80 % of the free
    /// space (each costs twice its layer: the blob in the content store and its unpacked snapshot).
    #[serde(default = "default_images")]
    pub images: u32,
    /// How much `expand-disk` grows the disk by, in MiB (default 512).
    #[serde(default = "default_expand_mib", rename = "expandMiB")]
    pub expand_mib: u64,
}

impl Default for DiskFull {
    fn default() -> Self {
        DiskFull { images: default_images(), expand_mib: default_expand_mib() }
    }
}

/// The disk under containerd: mountpoint, backing file, loop device, size.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Disk {
    pub mountpoint: String,
    pub backing_file: String,
    pub device: Option<String>,
    pub size_mib: u64,
}

impl Disk {
    /// The node's own containerd disk (the test bed's loop disk, or the one kind's bootstrap makes for
    /// this fault's needs). A node without one is refused: filling containerd's root there would fill
    /// whatever disk it is on.
    pub fn of(ctx: &Ctx) -> Result<Disk, FaultError> {
        match &ctx.node.profile.disk {
            Some(d) => Ok(Disk { mountpoint: d.mountpoint.clone(), backing_file: d.backing_file.clone(), device: d.device.clone(), size_mib: d.size_mib }),
            None => Err(FaultError::Check {
                step: "find-disk".into(),
                message: format!(
                    "node {} has no disk of its own for containerd (its profile names none): disk-full fills only such a disk, never the one containerd's root happens to be on",
                    ctx.node.name()
                ),
            }),
        }
    }

    /// A directory the checks try to make: what containerd must do for a new sandbox.
    fn probe_dir(&self) -> String {
        format!("{}/.faultlab-disk-full-probe", self.mountpoint.trim_end_matches('/'))
    }

    pub fn fill_file(&self) -> String {
        format!("{}/{FILL_FILE}", self.mountpoint.trim_end_matches('/'))
    }
}

/// Free space as root sees it: `stat -f` free blocks and block size.
pub fn free_space(mountpoint: &str) -> Cmd {
    Cmd::new(["stat", "-f", "-c", "%f %S", mountpoint]).asks(FREE_SPACE)
}

/// What [`free_space`] asks (a plan answers it).
pub const FREE_SPACE: Ask = Ask("free-space");

/// Parse `free-blocks block-size` into bytes.
pub fn parse_free(text: &str) -> Option<(u64, u64)> {
    let mut it = text.split_whitespace();
    let blocks: u64 = it.next()?.parse().ok()?;
    let bsize: u64 = it.next()?.parse().ok()?;
    Some((blocks, bsize))
}

impl DiskFull {
    pub fn image_ref(i: u32) -> String {
        format!("{IMAGE_PREFIX}:r{i}")
    }

    /// What the fault may write to a kind host's disk, in MiB: the loop file, grown by `expand-disk`.
    /// (The images are streamed into containerd, so no tarball is stored anywhere.)
    pub fn host_disk_mib(&self) -> u64 {
        KIND_DISK_MIB.saturating_add(self.expand_mib)
    }

    /// The images' references. Never more than [`MAX_IMAGES`], whatever `images` says: `inject` and
    /// the fix refuse a count out of range before they get here, and a count from a careless file must
    /// not make a list of billions (`images: 4294967295` once tried to allocate 103 GB).
    fn refs(&self) -> Vec<String> {
        (1..=self.images.min(MAX_IMAGES)).map(Self::image_ref).collect()
    }

    /// Layer size per image for `free` bytes: 80 % of them over the images, each stored twice.
    pub fn layer_mib(&self, free_bytes: u64) -> u64 {
        let per = u128::from(free_bytes) * 8 / 10 / (2 * u128::from(self.images.max(1)));
        u64::try_from(per >> 20).unwrap_or(u64::MAX).max(1)
    }

    /// Import an image of one layer of `mib` MiB of random data into the node's containerd (which stores
    /// the blob and unpacks it), streamed from here into `ctr images import -`.
    pub fn import(ctx: &Ctx, image: &str, mib: u64) -> Cmd {
        let config = ImageConfig { reference: image.into(), arch: ctx.node.profile.arch().into(), created_by: "faultlab disk-full".into(), ..Default::default() };
        let stream = ImageStream { config, path: "srv/release.bin".into(), size: mib << 20 };
        ctx.node.profile.ctr(["images", "import", "-"]).stdin_image(stream).timeout(Duration::from_secs(300))
    }

    /// Top the disk up with a file until no block is free (fallocate the bulk, then write until
    /// ENOSPC, a few rounds, since ext4 hands back blocks it had reserved when it syncs).
    pub fn top_up(disk: &Disk) -> Cmd {
        let fill = shell_words::quote(&disk.fill_file()).into_owned();
        let mp = shell_words::quote(&disk.mountpoint).into_owned();
        Cmd::shell(format!(
            "set -- $(stat -f -c '%f %S' {mp}); n=$(( ($1 > 256 ? $1 - 256 : 0) * $2 )); \
             [ \"$n\" -gt 0 ] && fallocate -l \"$n\" {fill}; \
             for i in 1 2 3 4 5; do dd if=/dev/zero of={fill} bs={APPEND_BYTES} oflag=append conv=notrunc status=none 2>/dev/null; sync; \
             if mkdir {probe} 2>/dev/null; then rmdir {probe}; else break; fi; done; stat -f -c '%f free blocks of %b' {mp}",
            probe = shell_words::quote(&disk.probe_dir())
        ))
        .timeout(Duration::from_secs(180))
    }

    /// The keeper: a process left on the node that keeps the disk full after the workload's restart,
    /// as whatever filled a disk goes on writing to it. Blocks are freed on a full disk for minutes: the
    /// old pod's container and sandbox go (the new sandbox took their blocks when it came first: on the
    /// containerd 2 test bed its `/sys` mount point failed instead of its first write, and in CI the
    /// sandbox started and its container failed, so the documented FailedCreatePodSandBox never came);
    /// a kubelet's attempt at the new sandbox that found a block free gives it back when it fails; on
    /// the cgroup v2 node (containerd 2) the old container's stop hung on the full disk for the
    /// kubelet's 2 minutes, and blocks were freed when it gave up. Keeping it full for 15 s in the
    /// foreground, as before, ended long before that. (CI's failure on that node, `the fault is not in
    /// place after inject`, came from blocks the appends could not take: [`APPEND_BYTES`].)
    ///
    /// So the keeper appends to the top-up file whatever is free, every 100 ms for 30 s, then every
    /// 500 ms, for about 5 minutes, each append written out (fsync: ext4 holds blocks back for data not
    /// yet written and gives them back once it is), [`APPEND_BYTES`] at a time. It never takes more than [`KEEPER_MAX_BYTES`]
    /// (so a fix that frees the images' room wins), never makes the file (`nocreat`), and ends as soon
    /// as the file is gone: the undo, which removes it first, ends the keeper too. It runs in a session
    /// of its own, its output to /dev/null, so that the command that starts it returns at once.
    pub fn keeper(disk: &Disk) -> Cmd {
        let fill = shell_words::quote(&disk.fill_file()).into_owned();
        let script = format!(
            "start=$(stat -c %s {fill}) || exit 0; i=0; \
             while [ \"$i\" -lt {rounds} ]; do i=$((i + 1)); \
             size=$(stat -c %s {fill} 2>/dev/null) || exit 0; left=$(( ({max} - (size - start)) / {APPEND_BYTES} )); [ \"$left\" -gt 0 ] || exit 0; \
             dd if=/dev/zero of={fill} bs={APPEND_BYTES} count=$left oflag=append conv=notrunc,nocreat,fsync status=none 2>/dev/null; \
             if [ \"$i\" -le {fast} ]; then sleep {fast_s}; else sleep {slow_s}; fi; done",
            rounds = KEEPER_FAST_ROUNDS + KEEPER_SLOW_ROUNDS,
            max = KEEPER_MAX_BYTES,
            fast = KEEPER_FAST_ROUNDS,
            fast_s = f64::from(KEEPER_FAST_MS) / 1000.0,
            slow_s = f64::from(KEEPER_SLOW_MS) / 1000.0,
        );
        Cmd::shell(format!("setsid sh -c {} </dev/null >/dev/null 2>&1 &", shell_words::quote(&script)))
    }

    /// Try to make a directory on the disk, [`PROBE_TRIES`] times 0.6 s apart until one fails: prints
    /// mkdir's error, or `made` each time (and removes it again).
    pub fn mkdir_probe(disk: &Disk) -> Cmd {
        let probe = shell_words::quote(&disk.probe_dir()).into_owned();
        Cmd::shell(format!(
            "i=0; while [ \"$i\" -lt {PROBE_TRIES} ]; do i=$((i + 1)); if mkdir {probe} 2>&1; then rmdir {probe}; echo made; else break; fi; \
             [ \"$i\" -lt {PROBE_TRIES} ] && sleep 0.6; done; true"
        ))
    }

    /// Remove the listed images that are there, with every other reference to the same image (the CRI
    /// plugin adds one named by the image ID, `sha256:<config digest>`, which would keep its content);
    /// absent ones are skipped: idempotent.
    pub fn remove_images(ctx: &Ctx, refs: &[String]) -> Cmd {
        let ls = crate::cmd::shell_join(&ctx.node.profile.ctr(["images", "ls"]).argv);
        let rm = crate::cmd::shell_join(&ctx.node.profile.ctr(["images", "rm", "--sync"]).argv);
        let awk = "BEGIN{n=split(names,a,\" \"); for(i=1;i<=n;i++) want[a[i]]=1} \
                   NR>1 {ref[NR]=$1; dig[NR]=$3; if ($1 in want) keep[$3]=1} END{for (i in ref) if (dig[i] in keep) print ref[i]}";
        Cmd::shell(format!(
            "{ls} | awk -v names={} {} | xargs -r {rm}",
            shell_words::quote(&refs.join(" ")),
            shell_words::quote(awk)
        ))
        .timeout(Duration::from_secs(120))
    }

    /// The undo: the filler images and the top-up file go.
    fn undo(&self, ctx: &Ctx, disk: &Disk) -> Cmd {
        let images = Self::remove_images(ctx, &self.refs());
        Cmd::shell(format!("rm -f {}; {}", shell_words::quote(&disk.fill_file()), images.argv[2])).timeout(Duration::from_secs(180))
    }

    /// Grow the backing file to `target_mib`, make the loop device see it, grow ext4 online. Each part
    /// is a no-op when already done: idempotent.
    pub fn expand(disk: &Disk, target_mib: u64) -> Cmd {
        let file = shell_words::quote(&disk.backing_file).into_owned();
        let dev = match &disk.device {
            Some(d) => shell_words::quote(d).into_owned(),
            None => format!("\"$(losetup -j {file} -n -O NAME | head -n1)\""),
        };
        Cmd::shell(format!(
            "set -e; want=$(({target_mib} * 1048576)); [ \"$(stat -c %s {file})\" -ge \"$want\" ] || truncate -s \"$want\" {file}; \
             losetup -c {dev}; resize2fs {dev}; df -h {mp}",
            mp = shell_words::quote(&disk.mountpoint),
        ))
        .timeout(Duration::from_secs(180))
    }
}

/// The document's fix, step by step, in its order (scenario files name them in `fix[].step`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Step {
    RemoveUnusedImages,
    ExpandDisk,
}

#[async_trait]
impl Fault for DiskFull {
    /// The node's images (unused ones are imported, then removed) and containerd's disk: its size and
    /// what lies at its top (the fill file).
    fn footprint(node: &NodeProfile) -> Vec<Probe> {
        let disk = shell_words::quote(node.disk.as_ref().map(|d| d.mountpoint.as_str()).unwrap_or(node.containerd.root.as_str())).into_owned();
        vec![
            Probe::new("images", format!("{} | sort", crate::cmd::shell_join(&node.ctr(["images", "ls", "-q"]).argv))),
            Probe::new("containerd disk", format!("stat -f -c '%b blocks of %S bytes' {disk}; ls -A {disk}")),
        ]
    }


    fn check(&self) -> Vec<Problem> {
        let mut problems = Vec::new();
        problems.extend(range(
            "images",
            self.images.into(),
            1,
            MAX_IMAGES.into(),
            "how many unused images fill the disk: at least 1 for remove-unused-images to remove, and at most 100, as each is made \
             of random data and imported on the node in turn, up to 5 minutes each",
        ));
        problems.extend(range(
            "expandMiB",
            self.expand_mib,
            MIN_EXPAND_MIB,
            MAX_EXPAND_MIB,
            "the MiB expand-disk adds to the disk: at least 64, as ext4 keeps up to 16 MiB of new space for itself and the pod needs \
             room beyond it, and at most 16 GiB, as the disk is a loop file on the node's disk (on kind, the host's) grown for one pod to start",
        ));
        problems
    }

    /// On kind the node's /var is a Docker volume on the host's disk, and loop devices are the host's.
    fn reach(&self) -> Reach {
        Reach::Host(format!(
            "containerd's root is moved onto a {KIND_DISK_MIB} MiB loop file in the node's /var, which is a Docker volume on the \
             host's disk, and the loop mount takes one of the host's loop devices; filling it writes that file to the host's disk \
             (and expand-disk grows the file by {} MiB), so faultlab first checks that Docker's root directory has {} MiB free and \
             1 GiB to spare",
            self.expand_mib,
            self.host_disk_mib(),
        ))
    }

    /// A disk of containerd's own (on kind: a loop-mounted ext4 file in the node, made before kubeadm
    /// starts containers), so that filling it fills only that disk and `expand-disk` has a loop disk to
    /// grow; the kubelet's disk thresholds at the levels the scenario explains (no imagefs eviction,
    /// image GC off); and what the fault writes beside it (expand-disk's growth).
    fn needs(&self) -> crate::needs::Needs {
        crate::needs::Needs {
            containerd_disk_mib: Some(KIND_DISK_MIB),
            no_image_gc: true,
            disk_writes_mib: self.expand_mib,
            ..Default::default()
        }
    }

    /// A plan's disk has 245000 free blocks of 4 KiB (about 957 MiB, the test bed's empty disk).
    fn plan_answers(&self, _node: &NodeProfile, _namespace: &str) -> Vec<(Ask, Output)> {
        vec![(FREE_SPACE, Output::ok("245000 4096\n"))]
    }

    async fn inject(&self, ctx: &Ctx) -> Result<(), FaultError> {
        self.refuse_bad_parameters("fill")?;
        let disk = Disk::of(ctx)?;
        let out = ctx.run("read-free-space", free_space(&disk.mountpoint)).await?;
        let (blocks, bsize) = parse_free(&out.stdout).ok_or_else(|| FaultError::Check {
            step: "read-free-space".into(),
            message: format!("cannot read free blocks from {:?}", out.stdout.trim()),
        })?;
        let free = blocks.checked_mul(bsize).ok_or_else(|| FaultError::Check {
            step: "read-free-space".into(),
            message: format!("{blocks} free blocks of {bsize} bytes is more than any disk has: {:?}", out.stdout.trim()),
        })?;
        let mib = self.layer_mib(free);
        ctx.undo_on_node("remove the unused images and the file that filled containerd's disk", self.undo(ctx, &disk))?;
        ctx.note(format!(
            "{} MiB free on {}: import {} unused images of {mib} MiB of random data each (stored twice: blob and snapshot)",
            free >> 20,
            disk.mountpoint,
            self.images
        ));
        for image in self.refs() {
            let import = Self::import(ctx, &image, mib);
            if let Some(stdin) = &import.stdin {
                ctx.note(format!("stream {} into the node's containerd", stdin.describe()));
            }
            ctx.run("import-unused-image", import).await?;
        }
        ctx.note(format!("top the disk up with {} until no block is free", disk.fill_file()));
        ctx.run("top-up", Self::top_up(&disk)).await?;
        ctx.note("a new pod needs a sandbox snapshot on that disk: restart the workload");
        ctx.restart_target("restart-workload").await?;
        ctx.note(format!(
            "keep the disk full while blocks are freed (the old pod's container and sandbox going, a failed sandbox's directories): \
             a process on the node appends to {} whatever is free, up to {} MiB, for about 5 minutes or until the file is removed",
            disk.fill_file(),
            KEEPER_MAX_BYTES >> 20
        ));
        ctx.run("keep-full", Self::keeper(&disk)).await?;
        Ok(())
    }

    /// In place while containerd's disk has no room for a directory (in one of [`PROBE_TRIES`] tries).
    async fn present(&self, ctx: &Ctx) -> Result<Presence, FaultError> {
        let disk = Disk::of(ctx)?;
        let out = ctx.probe("check-disk-full", Self::mkdir_probe(&disk)).await?;
        Ok(if out.stdout.contains("No space left on device") {
            Presence::Present(format!("{} has no room: {}", disk.mountpoint, out.stdout.trim()))
        } else {
            Presence::Absent(format!("a directory can still be made on {}: {}", disk.mountpoint, out.stdout.trim()))
        })
    }
}

#[async_trait]
impl Fix for DiskFull {
    type Step = Step;

    async fn fix(&self, which: Step, ctx: &Ctx) -> Result<(), FaultError> {
        let step = super::steps::Steps::name(which);
        let disk = Disk::of(ctx)?;
        match which {
            Step::RemoveUnusedImages => {
                self.refuse_bad_parameters(step)?;
                ctx.note(format!("images no pod uses (old releases): {}", self.refs().join(" ")));
                ctx.run(step, Self::remove_images(ctx, &self.refs())).await.map(drop)
            }
            Step::ExpandDisk => {
                self.refuse_bad_parameters(step)?;
                let target = disk.size_mib.checked_add(self.expand_mib).ok_or_else(|| FaultError::Check {
                    step: step.into(),
                    message: format!("the disk's {} MiB and expandMiB {} add up to more than any disk has", disk.size_mib, self.expand_mib),
                })?;
                ctx.run(step, Self::expand(&disk, target)).await.map(drop)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cmd::Output;
    use crate::faults::testing::ctx;
    use crate::journal::Undo;

    fn out(stdout: &str) -> Output {
        Output { status: 0, stdout: stdout.into(), stderr: String::new() }
    }

    #[test]
    fn sizes_split_the_free_space_over_the_images() {
        let f = DiskFull::default();
        // 960 MiB free: 80 % over 4 images stored twice = 96 MiB each.
        assert_eq!(f.layer_mib(960 << 20), 96);
        assert_eq!(parse_free("245000 4096\n"), Some((245000, 4096)));
        assert_eq!(parse_free("x"), None);
    }

    #[tokio::test]
    async fn inject_journals_then_fills_with_images_then_a_file() {
        let (ctx, fake) = ctx();
        fake.respond("stat -f -c", out("245760 4096\n"));
        DiskFull::default().inject(&ctx).await.unwrap();
        let journal = ctx.journal.snapshot();
        assert_eq!(journal.entries.len(), 1, "the undo is journalled before anything changes");
        let Undo::Node { cmd, .. } = &journal.entries[0].undo else { panic!("a node undo") };
        assert!(cmd.argv[2].starts_with("rm -f /var/lib/faultlab/containerd/faultlab-disk-full.fill; ctr "), "{}", cmd.argv[2]);
        assert!(cmd.argv[2].contains("-n k8s.io images ls | awk -v names='faultlab.invalid/disk-full/old-release:r1 faultlab.invalid/disk-full/old-release:r2 \
             faultlab.invalid/disk-full/old-release:r3 faultlab.invalid/disk-full/old-release:r4'"), "{}", cmd.argv[2]);
        assert!(cmd.argv[2].ends_with("| xargs -r ctr --address /run/faultlab/containerd/containerd.sock -n k8s.io images rm --sync"), "{}", cmd.argv[2]);
        let lines = fake.lines();
        assert_eq!(lines.len(), 7, "{lines:#?}");
        assert_eq!(lines[0], "ip netns exec faultlab-node timeout -k 5 60 stat -f -c '%f %S' /var/lib/faultlab/containerd");
        // 960 MiB free: four images of 96 MiB.
        for line in &lines[1..5] {
            assert_eq!(line, "ip netns exec faultlab-node timeout -k 5 300 ctr --address /run/faultlab/containerd/containerd.sock -n k8s.io images import -");
        }
        // Each streams its own image, of 96 MiB of random data, into that command.
        let notes: Vec<String> = ctx.rec().entries().into_iter().map(|e| e.line).filter(|l| l.starts_with("stream ")).collect();
        assert_eq!(notes.len(), 4);
        assert_eq!(notes[1], "stream an image faultlab.invalid/disk-full/old-release:r2 of one layer: srv/release.bin of 96 MiB random bytes into the node's containerd");
        assert!(lines[5].contains("fallocate -l \"$n\" /var/lib/faultlab/containerd/faultlab-disk-full.fill"), "{}", lines[5]);
        // The restart, then the keeper started, in a session of its own, returning at once.
        let entries: Vec<String> = ctx.rec().entries().into_iter().map(|e| e.line).collect();
        let delete = entries.iter().position(|l| l.starts_with("DELETE /api/v1/namespaces/fl-test/pods?labelSelector=app=web")).expect("the restart");
        let keep = entries.iter().position(|l| l.contains("setsid sh -c")).expect("keep-full");
        assert!(delete < keep, "{entries:#?}");
        assert!(lines[6].starts_with("ip netns exec faultlab-node timeout -k 5 60 sh -c 'setsid sh -c '"), "{}", lines[6]);
        assert!(lines[6].ends_with(" </dev/null >/dev/null 2>&1 &'"), "{}", lines[6]);
        assert!(lines[6].contains("of=/var/lib/faultlab/containerd/faultlab-disk-full.fill bs=512 count=$left oflag=append conv=notrunc,nocreat,fsync"), "{}", lines[6]);
    }

    /// The keeper's inner script and the line that starts it, for a disk at `dir`, its rounds, sleeps
    /// and most scaled down (`rounds` in all, every 10 ms, at most `max` appends).
    fn keeper_for(dir: &std::path::Path, rounds: u32, max: u64) -> (Disk, String, String) {
        let disk = Disk { mountpoint: dir.display().to_string(), backing_file: String::new(), device: None, size_mib: 1 };
        let line = DiskFull::keeper(&disk).argv[2].clone();
        let total = (KEEPER_FAST_ROUNDS + KEEPER_SLOW_ROUNDS).to_string();
        let scale = |t: &str| {
            let mut t = t.to_string();
            for (from, to) in [(format!("-lt {total} ]"), format!("-lt {rounds} ]")), (format!("({KEEPER_MAX_BYTES} - "), format!("({} - ", max * APPEND_BYTES)), ("sleep 0.1;".into(), "sleep 0.01;".into()), ("sleep 0.5;".into(), "sleep 0.01;".into())] {
                assert!(t.contains(&from), "{from}: {t}");
                t = t.replace(&from, &to);
            }
            t
        };
        let words = shell_words::split(&line).unwrap();
        assert_eq!(&words[..3], ["setsid", "sh", "-c"], "{line}");
        (disk, scale(&line), scale(&words[3]))
    }

    /// Run for real by sh on a directory that is not full: it takes no more than its most, never makes
    /// the file, ends once the file is gone, and the line that starts it returns at once.
    #[test]
    fn the_keeper_takes_what_is_free_up_to_its_most_and_ends_with_its_file() {
        // An empty file on a roomy disk: the most (5 appends), then it ends by itself.
        let dir = tempfile::tempdir().unwrap();
        let (disk, _, script) = keeper_for(dir.path(), 100_000, 5);
        std::fs::write(disk.fill_file(), b"").unwrap();
        let started = std::time::Instant::now();
        assert!(std::process::Command::new("sh").arg("-c").arg(&script).status().unwrap().success());
        assert!(started.elapsed() < std::time::Duration::from_secs(20), "ended at its most, not after its rounds");
        assert_eq!(std::fs::metadata(disk.fill_file()).unwrap().len(), 5 * APPEND_BYTES);
        // No file (the undo removed it): it ends at once, making none.
        std::fs::remove_file(disk.fill_file()).unwrap();
        assert!(std::process::Command::new("sh").arg("-c").arg(&script).status().unwrap().success());
        assert!(!std::path::Path::new(&disk.fill_file()).exists());
        // Started as a node command: returns at once, runs on, ends when the file is removed (one
        // append a round here, not the roomy disk's whole most at once).
        let (disk, line, _) = keeper_for(dir.path(), 100_000, 100_000);
        let line = line.replace("count=$left", "count=1");
        std::fs::write(disk.fill_file(), b"").unwrap();
        let started = std::time::Instant::now();
        let out = std::process::Command::new("sh").arg("-c").arg(&line).output().unwrap();
        assert!(out.status.success() && started.elapsed() < std::time::Duration::from_secs(5), "{out:?}");
        std::thread::sleep(std::time::Duration::from_millis(300));
        let grown = std::fs::metadata(disk.fill_file()).unwrap().len();
        assert!(grown > 0, "the keeper runs on after the line returned");
        std::fs::remove_file(disk.fill_file()).unwrap();
        std::thread::sleep(std::time::Duration::from_millis(500));
        assert!(!std::path::Path::new(&disk.fill_file()).exists(), "the keeper ended without making the file again");
    }

    #[test]
    fn the_probe_says_made_only_when_every_try_made_one() {
        let dir = tempfile::tempdir().unwrap();
        let disk = Disk { mountpoint: dir.path().display().to_string(), backing_file: String::new(), device: None, size_mib: 1 };
        let out = std::process::Command::new("sh").arg("-c").arg(&DiskFull::mkdir_probe(&disk).argv[2]).output().unwrap();
        assert_eq!(String::from_utf8_lossy(&out.stdout), "made\nmade\nmade\n");
        assert!(out.status.success());
        // The directory cannot be made (a file in its place): the first try's error, then no more.
        std::fs::write(format!("{}/.faultlab-disk-full-probe", disk.mountpoint), b"").unwrap();
        let out = std::process::Command::new("sh").arg("-c").arg(&DiskFull::mkdir_probe(&disk).argv[2]).output().unwrap();
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(text.contains("File exists") && !text.contains("made"), "{text}");
    }

    #[tokio::test]
    async fn present_while_no_directory_can_be_made_on_the_disk() {
        let (ctx, fake) = ctx();
        fake.respond("mkdir /var/lib/faultlab/containerd/.faultlab-disk-full-probe", out("made\n"));
        assert!(matches!(DiskFull::default().present(&ctx).await.unwrap(), Presence::Absent(_)));
        fake.respond(
            "mkdir /var/lib/faultlab/containerd/.faultlab-disk-full-probe",
            out("mkdir: cannot create directory '/var/lib/faultlab/containerd/.faultlab-disk-full-probe': No space left on device\n"),
        );
        assert!(matches!(DiskFull::default().present(&ctx).await.unwrap(), Presence::Present(w) if w.contains("No space left on device")));
    }

    #[tokio::test]
    async fn fixes_remove_the_old_images_or_grow_the_disk() {
        let (ctx, fake) = ctx();
        let fault = DiskFull { images: 2, ..Default::default() };
        fault.fix(Step::RemoveUnusedImages, &ctx).await.unwrap();
        fault.fix(Step::ExpandDisk, &ctx).await.unwrap();
        let lines = fake.lines();
        assert_eq!(
            lines[0],
            "ip netns exec faultlab-node timeout -k 5 120 sh -c 'ctr --address /run/faultlab/containerd/containerd.sock -n k8s.io images ls \
             | awk -v names='\\''faultlab.invalid/disk-full/old-release:r1 faultlab.invalid/disk-full/old-release:r2'\\'' '\\''BEGIN{n=split(names,a,\" \"); \
             for(i=1;i<=n;i++) want[a[i]]=1} NR>1 {ref[NR]=$1; dig[NR]=$3; if ($1 in want) keep[$3]=1} END{for (i in ref) if (dig[i] in keep) print ref[i]}'\\'' \
             | xargs -r ctr --address /run/faultlab/containerd/containerd.sock -n k8s.io images rm --sync'"
        );
        // 1024 MiB + 512 MiB, on the profile's loop device.
        assert!(lines[1].contains("want=$((1536 * 1048576))"), "{}", lines[1]);
        assert!(lines[1].contains("truncate -s \"$want\" /var/cache/faultlab/containerd.img"), "{}", lines[1]);
        assert!(lines[1].contains("losetup -c /dev/loop0; resize2fs /dev/loop0"), "{}", lines[1]);
    }

    #[tokio::test]
    async fn a_node_without_a_disk_of_its_own_is_refused_before_anything_runs() {
        let (mut ctx, fake) = ctx();
        ctx.node.profile.disk = None;
        let err = DiskFull::default().inject(&ctx).await.unwrap_err().to_string();
        assert!(err.starts_with("find-disk: node faultlab-node has no disk of its own for containerd"), "{err}");
        assert!(fake.lines().is_empty() && ctx.journal.snapshot().entries.is_empty());
    }

    #[test]
    fn needs_a_containerd_disk_of_its_own_with_gc_and_eviction_off() {
        let needs = DiskFull::default().needs();
        assert_eq!(needs, crate::needs::Needs { containerd_disk_mib: Some(3072), no_image_gc: true, disk_writes_mib: 512, ..Default::default() });
    }

    #[test]
    fn on_kind_it_says_what_it_writes_to_the_hosts_disk_and_asks_for_that_room() {
        // 3072 MiB loop file, grown by 512; the images are streamed, so no tarball is stored.
        let fault = DiskFull::default();
        assert_eq!(fault.host_disk_mib(), 3072 + 512);
        let needs = fault.needs();
        assert_eq!(needs.containerd_disk_mib.unwrap() + needs.disk_writes_mib, fault.host_disk_mib());
        let reach = (&fault as &dyn Fault).host_wide_on_kind().expect("disk-full reaches the host on kind");
        assert!(reach.starts_with("containerd's root is moved onto a 3072 MiB loop file in the node's /var, which is a Docker volume on the host's disk"), "{reach}");
        assert!(reach.contains("by 512 MiB") && reach.contains("has 3584 MiB free and 1 GiB to spare"), "{reach}");
        let bigger = DiskFull { images: 1, expand_mib: 1024 };
        assert_eq!(bigger.host_disk_mib(), 3072 + 1024);
    }

    fn disk_full(images: u32, expand_mib: u64) -> DiskFull {
        DiskFull { images, expand_mib }
    }

    #[rstest::rstest]
    #[case::defaults(4, 512)]
    #[case::lowest(1, 64)]
    #[case::highest(100, 16384)]
    fn parameters_in_range_pass(#[case] images: u32, #[case] expand_mib: u64) {
        assert_eq!(disk_full(images, expand_mib).check(), vec![]);
    }

    #[rstest::rstest]
    #[case::no_images(0, 512, "images", "0 is out of range: it must be 1 to 100 (how many unused images fill the disk: at least 1")]
    #[case::too_many_images(101, 512, "images", "101 is out of range: it must be 1 to 100")]
    #[case::the_issues_images(u32::MAX, 512, "images", "4294967295 is out of range: it must be 1 to 100")]
    #[case::no_growth(4, 0, "expandMiB", "0 is out of range: it must be 64 to 16384 (the MiB expand-disk adds to the disk: at least 64, as ext4 keeps")]
    #[case::too_little_growth(4, 63, "expandMiB", "63 is out of range: it must be 64 to 16384")]
    #[case::too_much_growth(4, 16385, "expandMiB", "16385 is out of range: it must be 64 to 16384")]
    #[case::growth_u64_max(4, u64::MAX, "expandMiB", "18446744073709551615 is out of range: it must be 64 to 16384")]
    fn parameters_out_of_range_say_the_range(#[case] images: u32, #[case] expand_mib: u64, #[case] field: &str, #[case] message: &str) {
        let problems = disk_full(images, expand_mib).check();
        assert_eq!(problems.len(), 1, "{problems:?}");
        assert_eq!(problems[0].field, field);
        assert!(problems[0].message.starts_with(message), "{}", problems[0].message);
        assert_eq!(crate::faults::FaultSpec::DiskFull(disk_full(images, expand_mib)).check()[0].field, format!("fault.disk-full.{field}"));
    }

    #[test]
    fn sizes_never_overflow_or_allocate_by_the_count() {
        let huge = disk_full(u32::MAX, u64::MAX);
        assert_eq!(huge.refs().len(), MAX_IMAGES as usize, "bounded, not 4294967295 strings");
        assert_eq!(huge.host_disk_mib(), u64::MAX, "saturates");
        assert!((&huge as &dyn Fault).host_wide_on_kind().is_some());
        assert_eq!(huge.needs().disk_writes_mib, u64::MAX);
        // 80 % over 4 images stored twice is a tenth, computed without overflowing.
        assert_eq!(DiskFull::default().layer_mib(u64::MAX), (u64::MAX / 10) >> 20);
        assert_eq!(disk_full(u32::MAX, 512).layer_mib(960 << 20), 1, "at least 1 MiB");
    }

    #[tokio::test]
    async fn out_of_range_parameters_change_nothing_even_unchecked() {
        let (ctx, fake) = ctx();
        fake.respond("stat -f -c", out("245760 4096\n"));
        let err = disk_full(u32::MAX, 512).inject(&ctx).await.unwrap_err();
        assert!(err.to_string().starts_with("fill: images: 4294967295 is out of range: it must be 1 to 100"), "{err}");
        let err = disk_full(0, 512).inject(&ctx).await.unwrap_err();
        assert!(err.to_string().starts_with("fill: images: 0 is out of range"), "{err}");
        for step in crate::faults::steps::all::<Step>() {
            let err = disk_full(4, u64::MAX).fix(step, &ctx).await.unwrap_err();
            assert!(err.to_string().starts_with(&format!("{}: expandMiB: 18446744073709551615 is out of range", crate::faults::steps::Steps::name(step))), "{err}");
        }
        assert!(fake.lines().is_empty(), "{:?}", fake.lines());
        assert!(ctx.journal.snapshot().entries.is_empty());
    }

    #[tokio::test]
    async fn a_free_space_no_disk_has_is_an_error() {
        let (ctx, fake) = ctx();
        fake.respond("stat -f -c", out("18446744073709551615 4096\n"));
        let err = DiskFull::default().inject(&ctx).await.unwrap_err();
        assert!(err.to_string().contains("is more than any disk has"), "{err}");
        assert!(ctx.journal.snapshot().entries.is_empty());
    }
}
