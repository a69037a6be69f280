//! pause-missing: the sandbox (pause) image is deleted from the node's containerd.
//!
//! Source: CCE FAQ "What Should I Do If a Workload Remains in the Creating State?", check item 1.
//! Symptom: FailedCreatePodSandBox `failed to get sandbox image "cce-pause:3.1"`. Fix: unpack the node
//! package and `ctr -n k8s.io image import` the pause image tar from it.

use async_trait::async_trait;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::api::{fresh_private_dir, Ctx, Fault, FaultError, Fix, Probe, Presence, WORK_PARENT};
use crate::check::Problem;
use crate::cmd::{Ask, Cmd, Output};
use crate::image_archive::{check_listing, Archive, LIST_TAR_SH};
use crate::node::{ContainerdVersion, NodeProfile, Setting};

/// What the prepare step's node commands ask (a plan answers them): the node package's listing
/// (`absent`, or [`LIST_TAR_SH`]'s sections), `ctr --version`, and an export's listing.
const PACKAGE_LISTING: Ask = Ask("node-package-listing");
const CTR_VERSION: Ask = Ask("ctr-version");
const EXPORT_LISTING: Ask = Ask("sandbox-image-export-listing");

/// How many times prepare exports the sandbox image before it gives up on a whole archive.
const EXPORT_ATTEMPTS: u32 = 3;

/// The local-only sandbox image name on kind, as unpullable as the documented `cce-pause:3.1`.
pub const KIND_SANDBOX_IMAGE: &str = "faultlab.invalid/cce-pause:3.1";

#[derive(Clone, Debug, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PauseMissing {
    /// The node package tarball; default: the node profile's `nodePackage`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub package: Option<String>,
}

/// Why `package` cannot be the node package's path, if it cannot. `prepare` writes the package there
/// when no file is, and the fix unpacks it with `tar -xzvf` from another directory, so it must be an
/// absolute path to a gzip tarball (`.tgz`, `.tar.gz`), without `..`, control characters or NUL, and
/// within the kernel's 4096-byte path limit.
fn package_problem(package: &str) -> Option<String> {
    let why = if package.trim().is_empty() {
        "it is empty"
    } else if !package.starts_with('/') {
        "it is not an absolute path (the fix unpacks it from its own work directory)"
    } else if package.len() > 4095 {
        "it is longer than the kernel's path limit of 4095 bytes"
    } else if package.chars().any(char::is_control) {
        "it has a control character"
    } else if package.split('/').any(|part| part == "..") {
        "it has a '..' part"
    } else if !(package.ends_with(".tgz") || package.ends_with(".tar.gz")) {
        "it does not end in .tgz or .tar.gz (the fix unpacks it with tar -xzvf, a gzip tarball)"
    } else {
        return None;
    };
    // A path too long to be one is shown by its start only.
    let shown = if package.chars().count() > 100 { format!("{:?}... ({} bytes)", package.chars().take(60).collect::<String>(), package.len()) } else { format!("{package:?}") };
    Some(format!(
        "{shown} is not a usable node package path: {why}; it must be an absolute path on the node to a gzip tarball \
         (.tgz or .tar.gz), which prepare makes from the node's sandbox image if it is not there"
    ))
}

impl PauseMissing {
    fn package(&self, ctx: &Ctx) -> Result<String, FaultError> {
        self.refuse_bad_parameters("node-package")?;
        self.package.clone().or_else(|| ctx.node.profile.node_package.clone()).ok_or_else(|| FaultError::Check {
            step: "node-package".into(),
            message: format!("node {} has no nodePackage in its profile and the scenario names none", ctx.node.name()),
        })
    }

    /// The sandbox image the node's containerd runs pods with, read from its config on the node (at
    /// the key of the file's version: `sandbox_image` in version 2, `pinned_images.sandbox` in 3); the
    /// profile's when the file sets none (containerd's default for its release, which the profile
    /// names). Where the two differ, the node's is the one a sandbox needs.
    async fn image(ctx: &Ctx) -> Result<String, FaultError> {
        let file = &ctx.node.profile.containerd.config;
        let config = ctx.containerd_config("read-containerd-config").await?;
        let profile = &ctx.node.profile.containerd.sandbox_image;
        Ok(match config.configured_sandbox_image() {
            Some(image) if image != profile => {
                ctx.note(format!("{file} sets the sandbox image {image} ({}), not {profile} as the node's profile says: the fault acts on the node's", config.field(Setting::SandboxImage)));
                image.to_string()
            }
            Some(image) => image.to_string(),
            None => profile.clone(),
        })
    }

    /// This run's work directory on the node: named by the run's namespace, in [`WORK_PARENT`].
    fn workdir(ctx: &Ctx) -> String {
        format!("{WORK_PARENT}/pause-missing.{}", ctx.namespace)
    }

    /// `tar -xzvf <package>` into a fresh, private work directory, as the document does.
    fn unpack(&self, ctx: &Ctx) -> Result<Cmd, FaultError> {
        let package = self.package(ctx)?;
        let dir = Self::workdir(ctx);
        Ok(Cmd::shell(format!("{} && cd {dir} && tar -xzvf {}", fresh_private_dir(WORK_PARENT, &dir), shell_words::quote(&package))))
    }

    /// `ctr -n k8s.io image import` of every image tar the package held (only what the unpack step put
    /// in the run's own directory), then the directory removed.
    fn import(ctx: &Ctx) -> Cmd {
        let ctr = ctx.node.profile.ctr(["image", "import"]).argv;
        let ctr = crate::cmd::shell_join(&ctr);
        let dir = Self::workdir(ctx);
        Cmd::shell(format!(
            "cd {dir} && for t in $(find . -name '*.tar' | sort); do {ctr} \"$t\" || exit 1; done; cd / && rm -rf {dir}"
        ))
        .timeout(std::time::Duration::from_secs(120))
    }

    /// The archive among `archives` that holds `image`, or why none is the one to import it from.
    fn holding<'a>(package: &str, image: &str, archives: &'a [Archive]) -> Result<&'a Archive, String> {
        archives.iter().find(|a| a.holds(image)).ok_or_else(|| {
            format!(
                "the node package {package} does not hold the sandbox image {image} ({}): importing it would not bring the sandbox image back, so the fault deletes nothing",
                Self::described(archives)
            )
        })
    }

    fn described(archives: &[Archive]) -> String {
        let each: Vec<String> = archives
            .iter()
            .map(|a| format!("{} names {}, {} digests checked", a.path, if a.images.is_empty() { "no image".into() } else { a.images.join(", ") }, a.digests_checked))
            .collect();
        each.join("; ")
    }

    /// kind's nodes: export the sandbox image (ctr's own export where ctr has the transfer API, whose
    /// export can end early), check the archive, export again up to [`EXPORT_ATTEMPTS`] times while it
    /// is not whole, then write the package in one rename.
    async fn make_package(ctx: &Ctx, package: &str, image: &str, dir: &str) -> Result<(), FaultError> {
        let mut args = vec!["image".to_string(), "export".into()];
        if Self::export_needs_local(ctx).await? {
            args.push("--local".into());
        }
        args.extend(["pause.tar".into(), image.to_string()]);
        let export = crate::cmd::shell_join(&ctx.node.profile.ctr(args).argv);
        let script = format!("{LIST_TAR_SH}; {} && cd {dir} && {export} >/dev/null && fl_list_tar pause.tar || {{ s=$?; cd / && rm -rf {dir}; exit $s; }}", fresh_private_dir(WORK_PARENT, dir));
        for attempt in 1..=EXPORT_ATTEMPTS {
            let listing = ctx.run("export-sandbox-image", Cmd::shell(script.clone()).asks(EXPORT_LISTING)).await?.stdout;
            let why = match check_listing(&listing) {
                Ok(archives) => match Self::holding(package, image, &archives) {
                    Ok(_) => {
                        let pkg = shell_words::quote(package);
                        let write = format!("cd {dir} && mkdir -p \"$(dirname {pkg})\" && tar -czf {pkg}.part pause.tar && mv -f {pkg}.part {pkg}; s=$?; cd / && rm -rf {dir}; exit $s");
                        ctx.note(format!("the export of {image} is whole ({}): write it as the node package {package}", Self::described(&archives)));
                        return ctx.run("write-node-package", Cmd::shell(write)).await.map(drop);
                    }
                    Err(why) => why,
                },
                Err(e) => e.to_string(),
            };
            if attempt == EXPORT_ATTEMPTS {
                ctx.run("remove-work-directory", Cmd::new(["rm", "-rf", "--", dir])).await?;
                return Err(FaultError::Check {
                    step: "export-sandbox-image".into(),
                    message: format!("{EXPORT_ATTEMPTS} exports of {image} were not whole, the last: {why}; nothing was written or deleted"),
                });
            }
            ctx.note(format!("export {attempt} of {image} is not whole ({why}): export again"));
        }
        unreachable!("the last attempt returns")
    }

    /// Whether `ctr image export` needs `--local` to write its file itself: from containerd 2.0 it goes
    /// through the transfer API by default (1.7 has the flag, on by default; 1.6 neither).
    async fn export_needs_local(ctx: &Ctx) -> Result<bool, FaultError> {
        let ctr = ctx.node.profile.containerd.ctr.clone().unwrap_or_else(|| "ctr".into());
        let out = ctx.run("ctr-version", Cmd::new([ctr.as_str(), "--version"]).asks(CTR_VERSION)).await?.stdout;
        let version = ContainerdVersion::parse_ctr(&out).map_err(|e| FaultError::Check { step: "ctr-version".into(), message: e.to_string() })?;
        Ok(version.major >= 2)
    }
}

/// The document's fix, step by step, in its order (scenario files name them in `fix[].step`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Step {
    UnpackNodePackage,
    ImportImage,
}

#[async_trait]
impl Fault for PauseMissing {
    /// The node's images (the sandbox image is removed, then imported again).
    fn footprint(node: &NodeProfile) -> Vec<Probe> {
        vec![Probe::new("images", format!("{} | sort", crate::cmd::shell_join(&node.ctr(["images", "ls", "-q"]).argv)))]
    }

    // On kind this stays within the node container, so `reach` keeps its default (the node):
    // it tags, exports and deletes images in the node's own containerd (`ctr` in the node), and the
    // node package it makes is one small tarball in the node's /opt. Nothing of the host's is named.

    /// The package path, if the scenario names one (else the node profile's). The sandbox image is the
    /// node's own (its containerd configuration), not a parameter.
    fn check(&self) -> Vec<Problem> {
        self.package.as_deref().and_then(package_problem).map(|m| Problem::new("package", m)).into_iter().collect()
    }

    /// A plan's node: no package yet (kind's), ctr of containerd 2, and a whole export of the sandbox
    /// image (the listing [`LIST_TAR_SH`] prints, its digests standing in for real ones).
    fn plan_answers(&self, node: &NodeProfile, _namespace: &str) -> Vec<(Ask, Output)> {
        let image = &node.containerd.sandbox_image;
        let (layer, config, manifest) = ("1".repeat(64), "2".repeat(64), "3".repeat(64));
        let listing = format!(
            "== pause.tar\ntar-status 0\nmanifest [{{\"Config\":\"blobs/sha256/{config}\",\"RepoTags\":[\"{image}\"],\"Layers\":[\"blobs/sha256/{layer}\"]}}]\n\
             index {{\"manifests\":[{{\"digest\":\"sha256:{manifest}\",\"annotations\":{{\"io.containerd.image.name\":\"{image}\"}}}}]}}\n\
             {layer}  ./blobs/sha256/{layer}\n{config}  ./blobs/sha256/{config}\n{manifest}  ./blobs/sha256/{manifest}\n\
             {}  ./index.json\n{}  ./manifest.json\n{}  ./oci-layout\n",
            "4".repeat(64),
            "5".repeat(64),
            "6".repeat(64)
        );
        vec![
            (PACKAGE_LISTING, Output::ok("absent\n")),
            (CTR_VERSION, Output::ok("ctr github.com/containerd/containerd/v2 2.1.9\n")),
            (EXPORT_LISTING, Output::ok(listing)),
        ]
    }

    /// On kind a deleted sandbox image would simply be pulled again. As the documented `cce-pause:3.1`
    /// is, make it unpullable: point containerd at a local-only name, and tag the node's bundled pause
    /// image with it as soon as the node container exists (before kubelet needs a sandbox).
    fn needs(&self) -> crate::needs::Needs {
        crate::needs::Needs { local_sandbox_image: Some(KIND_SANDBOX_IMAGE.into()), ..Default::default() }
    }

    /// The node package must hold the sandbox image, whole, before inject deletes it: the fix and the
    /// undo import it from there. A package the node has is checked and never replaced; kind nodes have
    /// none, so one is made from the sandbox image the node holds (exported, checked, and only then
    /// written in the package's place), and the document's fix runs as written.
    async fn prepare(&self, ctx: &Ctx) -> Result<(), FaultError> {
        let package = self.package(ctx)?;
        let image = Self::image(ctx).await?;
        let dir = format!("{}.prepare", Self::workdir(ctx));
        let pkg = shell_words::quote(&package);
        let look = format!(
            "{LIST_TAR_SH}; {} && cd {dir} && if test -s {pkg}; then tar -xzf {pkg} && find . -name '*.tar' | sort >.fl-tars && \
             while read -r t; do fl_list_tar \"$t\"; done <.fl-tars; else echo absent; fi; s=$?; cd / && rm -rf {dir}; exit $s",
            fresh_private_dir(WORK_PARENT, &dir)
        );
        let listing = ctx.run("check-node-package", Cmd::shell(look).asks(PACKAGE_LISTING)).await?.stdout;
        if listing.trim() == "absent" {
            return Self::make_package(ctx, &package, &image, &dir).await;
        }
        let archives = check_listing(&listing).map_err(|e| FaultError::Check {
            step: "check-node-package".into(),
            message: format!("the node package {package} is not one the fix can import the sandbox image {image} from: {e}; the fault deletes nothing it cannot import again (replace the package, or name another in fault.pause-missing.package)"),
        })?;
        Self::holding(&package, &image, &archives).map_err(|message| FaultError::Check { step: "check-node-package".into(), message })?;
        ctx.note(format!("the node package {package} holds {image}, whole ({})", Self::described(&archives)));
        Ok(())
    }

    async fn inject(&self, ctx: &Ctx) -> Result<(), FaultError> {
        // The undo is the documented fix itself: unpack and import again.
        let restore = format!("{} && {}", self.unpack(ctx)?.argv[2], Self::import(ctx).argv[2]);
        let image = Self::image(ctx).await?;
        ctx.undo_on_node(&format!("re-import sandbox image {image}"), Cmd::shell(restore).timeout(std::time::Duration::from_secs(180)))?;
        ctx.note(format!("delete the sandbox image {image} from the node's containerd"));
        ctx.run("delete-sandbox-image", ctx.node.profile.ctr(["images", "rm", image.as_str()])).await?;
        ctx.note("a new pod needs a sandbox: restart the workload");
        ctx.restart_target("restart-workload").await
    }

    /// In place while the node's sandbox image is missing from its containerd.
    async fn present(&self, ctx: &Ctx) -> Result<Presence, FaultError> {
        let image = Self::image(ctx).await?;
        let out = ctx.run("check-image", ctx.node.profile.ctr(["images", "ls", "-q"])).await?;
        Ok(if out.stdout.lines().any(|l| l.trim() == image) {
            Presence::Absent(format!("the sandbox image {image} is on the node"))
        } else {
            Presence::Present(format!("the sandbox image {image} is missing from the node"))
        })
    }

}

#[async_trait]
impl Fix for PauseMissing {
    type Step = Step;

    async fn fix(&self, which: Step, ctx: &Ctx) -> Result<(), FaultError> {
        let step = super::steps::Steps::name(which);
        match which {
            Step::UnpackNodePackage => ctx.run(step, self.unpack(ctx)?).await.map(|_| ()),
            // Importing an image that is already there succeeds: the step is idempotent.
            Step::ImportImage => ctx.run(step, Self::import(ctx)).await.map(|_| ()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::faults::testing::ctx;

    #[tokio::test]
    async fn inject_journals_then_deletes_then_restarts() {
        let (ctx, fake) = ctx();
        PauseMissing::default().inject(&ctx).await.unwrap();
        let journal = ctx.journal.snapshot();
        assert_eq!(journal.entries.len(), 1, "the undo is journalled");
        assert_eq!(
            fake.lines(),
            vec![
                "ip netns exec faultlab-node timeout -k 5 60 cat -- /var/lib/faultlab/testbed/containerd.toml",
                "ip netns exec faultlab-node timeout -k 5 60 ctr --address /run/faultlab/containerd/containerd.sock -n k8s.io images rm faultlab.invalid/cce-pause:3.1"
            ]
        );
        let api: Vec<String> = ctx.rec().entries().into_iter().map(|e| e.line).collect();
        assert!(api.last().unwrap().starts_with("DELETE /api/v1/namespaces/fl-test/pods?labelSelector=app=web"), "{api:?}");
    }

    #[tokio::test]
    async fn fix_runs_the_documented_commands() {
        let (ctx, fake) = ctx();
        let fault = PauseMissing::default();
        for step in crate::faults::steps::all::<Step>() {
            fault.fix(step, &ctx).await.unwrap();
        }
        let lines = fake.lines();
        assert!(lines[0].contains("tar -xzvf /opt/cloud/cce/package/node-package/pause-3.1.tgz"), "{}", lines[0]);
        assert!(lines[1].contains("ctr --address /run/faultlab/containerd/containerd.sock -n k8s.io image import"), "{}", lines[1]);
    }

    /// The unpack step's directory, run for real here with `sh`: made fresh (what was planted in it
    /// before is gone), 0700, and refused under a parent that is a symbolic link or not root's 0700.
    #[test]
    fn the_work_directory_is_fresh_and_private_and_its_parent_checked() {
        let sh = |script: &str| std::process::Command::new("sh").arg("-c").arg(script).output().unwrap();
        let tmp = tempfile::tempdir().unwrap();
        let parent = tmp.path().join("work");
        let (p, d) = (parent.to_str().unwrap().to_string(), parent.join("run").to_str().unwrap().to_string());
        let root = unsafe { libc::geteuid() } == 0;
        let out = sh(&fresh_private_dir(&p, &d));
        assert_eq!(out.status.success(), root, "root owns the parent it makes: {out:?}");
        if !root {
            return;
        }
        std::fs::write(parent.join("run/planted.tar"), "not ours").unwrap();
        assert!(sh(&fresh_private_dir(&p, &d)).status.success());
        assert_eq!(std::fs::read_dir(&d).unwrap().count(), 0, "made fresh: the planted tar is gone");
        use std::os::unix::fs::PermissionsExt;
        assert_eq!(std::fs::metadata(&d).unwrap().permissions().mode() & 0o777, 0o700);
        std::fs::set_permissions(&parent, std::fs::Permissions::from_mode(0o755)).unwrap();
        let out = sh(&fresh_private_dir(&p, &d));
        assert!(!out.status.success() && String::from_utf8_lossy(&out.stderr).contains("is not root's own directory of mode 0700: not using it"), "{out:?}");
        let link = tmp.path().join("link");
        std::os::unix::fs::symlink(&parent, &link).unwrap();
        std::fs::set_permissions(&parent, std::fs::Permissions::from_mode(0o700)).unwrap();
        let out = sh(&fresh_private_dir(link.to_str().unwrap(), &format!("{}/run", link.display())));
        assert!(!out.status.success(), "a symbolic link for the parent is refused: {out:?}");
    }

    #[test]
    fn the_fix_never_unpacks_under_tmp_and_removes_its_directory() {
        let (ctx, _) = ctx();
        let unpack = PauseMissing::default().unpack(&ctx).unwrap().argv[2].clone();
        let import = PauseMissing::import(&ctx).argv[2].clone();
        let dir = format!("{WORK_PARENT}/pause-missing.{}", ctx.namespace);
        assert!(!unpack.contains("/tmp") && !import.contains("/tmp"), "{unpack}\n{import}");
        assert!(unpack.contains(&format!("rm -rf {dir} && mkdir -m 0700 {dir} && cd {dir} && tar -xzvf")), "{unpack}");
        assert!(import.starts_with(&format!("cd {dir} && ")) && import.contains(&format!("cd / && rm -rf {dir}")), "{import}");
    }

    #[tokio::test]
    async fn present_while_the_image_is_not_listed() {
        let (ctx, fake) = ctx();
        fake.respond("images ls -q", crate::cmd::Output { status: 0, stdout: "faultlab.invalid/cce-pause:3.1\n".into(), stderr: String::new() });
        assert!(matches!(PauseMissing::default().present(&ctx).await.unwrap(), Presence::Absent(_)));
        fake.respond("images ls -q", crate::cmd::Output::default());
        assert!(matches!(PauseMissing::default().present(&ctx).await.unwrap(), Presence::Present(w) if w.contains("is missing from the node")));
    }

    #[tokio::test]
    async fn the_sandbox_image_is_the_one_the_nodes_containerd_config_sets() {
        let (ctx, fake) = ctx();
        fake.respond("cat -- ", crate::cmd::Output::ok("version = 3\n[plugins.'io.containerd.cri.v1.images'.pinned_images]\n  sandbox = 'registry.k8s.io/pause:3.10'\n"));
        PauseMissing::default().inject(&ctx).await.unwrap();
        assert!(fake.lines()[1].ends_with("images rm registry.k8s.io/pause:3.10"), "{:?}", fake.lines());
        let notes: Vec<String> = ctx.rec().entries().into_iter().map(|e| e.line).collect();
        assert!(notes.iter().any(|n| n.contains("sets the sandbox image registry.k8s.io/pause:3.10 (plugins.\"io.containerd.cri.v1.images\".pinned_images.sandbox), not faultlab.invalid/cce-pause:3.1")), "{notes:?}");
        fake.respond("cat -- ", crate::cmd::Output::ok("not = [toml"));
        let err = PauseMissing::default().inject(&ctx).await.unwrap_err().to_string();
        assert!(err.starts_with("read-containerd-config: containerd's config /var/lib/faultlab/testbed/containerd.toml is not TOML"), "{err}");
    }

    /// A listing of one archive holding `image`, whole (the digests stand in for real ones; the
    /// listing's own judge is tested in `image_archive`).
    fn whole(path: &str, image: &str) -> Output {
        let h = "ab".repeat(32);
        Output::ok(format!("== {path}\ntar-status 0\nmanifest [{{\"Config\":\"{h}.json\",\"RepoTags\":[\"{image}\"],\"Layers\":[\"l/layer.tar\"]}}]\n{h}  ./{h}.json\n{h}  ./l/layer.tar\n{h}  ./manifest.json\n"))
    }

    /// The export of stop 48's CI: cut inside its layer (tar's status 2).
    fn cut(path: &str) -> Output {
        Output::ok(format!("== {path}\ntar-status 2\ntar-error tar: Unexpected EOF in archive\ntar-error tar: Error is not recoverable: exiting now\n"))
    }

    fn notes(ctx: &Ctx) -> Vec<String> {
        ctx.rec().entries().into_iter().filter(|e| e.channel == crate::record::Channel::Note).map(|e| e.line).collect()
    }

    #[tokio::test]
    async fn a_package_the_node_has_is_checked_and_never_replaced() {
        let (ctx, fake) = ctx();
        fake.respond("if test -s", whole("./pause/package/image/cce-pause-3.1.tar", "faultlab.invalid/cce-pause:3.1"));
        PauseMissing::default().prepare(&ctx).await.unwrap();
        let lines = fake.lines();
        assert_eq!(lines.len(), 2, "the config, then the package's check: {lines:?}");
        assert!(lines[1].contains("tar -xzf /opt/cloud/cce/package/node-package/pause-3.1.tgz") && lines[1].contains("fl_list_tar"), "{}", lines[1]);
        assert!(lines[1].contains("cd / && rm -rf /var/lib/faultlab-work/pause-missing.fl-test.prepare"), "its directory goes: {}", lines[1]);
        assert!(notes(&ctx).iter().any(|n| n.starts_with("the node package /opt/cloud/cce/package/node-package/pause-3.1.tgz holds faultlab.invalid/cce-pause:3.1, whole")), "{:?}", notes(&ctx));
    }

    #[rstest::rstest]
    #[case::cut_short(cut("./pause/package/image/cce-pause-3.1.tar"), "is not one the fix can import the sandbox image faultlab.invalid/cce-pause:3.1 from: \"./pause/package/image/cce-pause-3.1.tar\": tar could not read it to its end (status 2)")]
    #[case::another_image(whole("./pause.tar", "registry.k8s.io/pause:3.10"), "does not hold the sandbox image faultlab.invalid/cce-pause:3.1 (./pause.tar names registry.k8s.io/pause:3.10, 1 digests checked)")]
    #[case::no_image_tar(Output::ok(""), "it holds no image archive (no *.tar)")]
    #[tokio::test]
    async fn a_package_that_could_not_restore_the_image_stops_prepare(#[case] listing: Output, #[case] why: &str) {
        let (ctx, fake) = ctx();
        fake.respond("if test -s", listing);
        let err = PauseMissing::default().prepare(&ctx).await.unwrap_err().to_string();
        assert!(err.starts_with("check-node-package: the node package /opt/cloud/cce/package/node-package/pause-3.1.tgz ") && err.contains(why), "{err}");
        assert_eq!(fake.lines().len(), 2, "nothing exported or written: {:?}", fake.lines());
        assert!(ctx.journal.snapshot().entries.is_empty());
    }

    #[tokio::test]
    async fn an_export_cut_short_is_made_again_and_only_a_whole_one_written() {
        let (ctx, fake) = ctx();
        fake.respond("if test -s", Output::ok("absent\n"));
        fake.respond("--version", Output::ok("ctr github.com/containerd/containerd/v2 2.1.9+unknown\n"));
        fake.respond("image export", whole("pause.tar", "faultlab.invalid/cce-pause:3.1"));
        fake.respond_once("image export", cut("pause.tar"));
        PauseMissing::default().prepare(&ctx).await.unwrap();
        let lines = fake.lines();
        let exports: Vec<&String> = lines.iter().filter(|l| l.contains("image export")).collect();
        assert_eq!(exports.len(), 2, "{lines:?}");
        assert!(exports[0].contains("image export --local pause.tar faultlab.invalid/cce-pause:3.1 >/dev/null && fl_list_tar pause.tar"), "containerd 2's ctr writes the file itself: {}", exports[0]);
        let write = lines.last().unwrap();
        assert!(write.contains("tar -czf /opt/cloud/cce/package/node-package/pause-3.1.tgz.part pause.tar && mv -f /opt/cloud/cce/package/node-package/pause-3.1.tgz.part /opt/cloud/cce/package/node-package/pause-3.1.tgz"), "{write}");
        let notes = notes(&ctx);
        assert!(notes.iter().any(|n| n.starts_with("export 1 of faultlab.invalid/cce-pause:3.1 is not whole (\"pause.tar\": tar could not read it to its end (status 2): tar: Unexpected EOF in archive")), "{notes:?}");
    }

    #[tokio::test]
    async fn exports_never_whole_write_nothing_and_leave_no_directory() {
        let (ctx, fake) = ctx();
        fake.respond("if test -s", Output::ok("absent\n"));
        fake.respond("--version", Output::ok("ctr github.com/containerd/containerd 1.6.20~ds1\n"));
        fake.respond("image export", cut("pause.tar"));
        let err = PauseMissing::default().prepare(&ctx).await.unwrap_err().to_string();
        assert!(err.starts_with("export-sandbox-image: 3 exports of faultlab.invalid/cce-pause:3.1 were not whole, the last: \"pause.tar\": tar could not read it to its end"), "{err}");
        let lines = fake.lines();
        assert_eq!(lines.iter().filter(|l| l.contains("image export pause.tar")).count(), 3, "containerd 1.6's ctr has no --local: {lines:?}");
        assert!(lines.iter().all(|l| !l.contains(".tgz.part")), "{lines:?}");
        assert!(lines.last().unwrap().ends_with("rm -rf -- /var/lib/faultlab-work/pause-missing.fl-test.prepare"), "{lines:?}");
    }

    #[tokio::test]
    async fn the_plan_makes_a_package_from_a_whole_export() {
        let fault = PauseMissing::default();
        let (ctx, fake) = crate::faults::testing::plan_ctx(&fault);
        fault.prepare(&ctx).await.unwrap();
        assert!(fake.lines().last().unwrap().contains("tar -czf"), "{:?}", fake.lines());
    }

    fn fault(package: &str) -> PauseMissing {
        PauseMissing { package: Some(package.into()) }
    }

    #[rstest::rstest]
    #[case::the_documents("/opt/cloud/cce/package/node-package/pause-3.1.tgz")]
    #[case::tar_gz("/var/tmp/node package.tar.gz")]
    fn package_paths_that_pass(#[case] package: &str) {
        assert_eq!(fault(package).check(), vec![]);
        assert_eq!(PauseMissing::default().check(), vec![], "none named: the profile's");
    }

    #[rstest::rstest]
    #[case::empty("", "it is empty")]
    #[case::relative("node-package/pause.tgz", "it is not an absolute path")]
    #[case::parent("/opt/../etc/cron.d/x.tgz", "it has a '..' part")]
    #[case::newline("/opt/pause.tgz\nrm -rf /", "it has a control character")]
    #[case::not_gzip("/etc/passwd", "it does not end in .tgz or .tar.gz")]
    #[case::too_long(&format!("/{}.tgz", "a".repeat(4096)), "it is longer than the kernel's path limit of 4095 bytes")]
    fn bad_package_paths_are_problems_at_package(#[case] package: &str, #[case] why: &str) {
        let problems = fault(package).check();
        assert_eq!(problems.len(), 1, "{problems:?}");
        assert_eq!(problems[0].field, "package");
        assert!(problems[0].message.contains(&format!("is not a usable node package path: {why}")), "{}", problems[0].message);
        assert!(problems[0].message.contains("it must be an absolute path on the node to a gzip tarball (.tgz or .tar.gz)"), "{}", problems[0].message);
        assert!(problems[0].message.len() < 600, "a long path is shown by its start: {}", problems[0].message.len());
        assert_eq!(crate::faults::FaultSpec::PauseMissing(fault(package)).check()[0].field, "fault.pause-missing.package");
    }

    #[tokio::test]
    async fn a_bad_package_path_is_never_written_or_unpacked() {
        let (ctx, fake) = ctx();
        let bad = fault("/etc/passwd");
        assert!(bad.prepare(&ctx).await.unwrap_err().to_string().starts_with("node-package: package: \"/etc/passwd\" is not a usable"));
        assert!(bad.inject(&ctx).await.is_err());
        assert!(bad.fix(Step::UnpackNodePackage, &ctx).await.is_err());
        assert!(fake.lines().is_empty(), "{:?}", fake.lines());
        assert!(ctx.journal.snapshot().entries.is_empty());
    }
}
