//! runtime-parts-mismatch: a reinstall left the node's container runtime with a part from another
//! release, which does not work with the rest: every new pod's sandbox fails to start.
//!
//! Source: imroc's Kubernetes troubleshooting guide, "Pod 一直处于 ContainerCreating 或 Waiting 状态",
//! "安装 docker 没删干净旧版本": docker installed again over one not cleanly removed; "可能是因为重复安装
//! docker 版本不一致导致一些组件之间不兼容,从而导致 dockerd 无法正常创建容器" (the versions of a repeated
//! install differ, some components are then incompatible, and no container can be created); the
//! events are FailedCreatePodSandBox over and over, with SandboxChanged.
//!
//! The document's part was docker's shim. The part here is runc, the one every runtime release runs
//! for every container, and the mismatch is a real one: Debian sid's runc (the release containerd 2
//! comes with in sid) needs a newer C library than a bookworm node has (`GLIBC_2.38`), so on the
//! node it cannot even start. (The other release's shim was tried too: under containerd 1.6,
//! containerd 2.1's shim fails every sandbox, but containerd 2 runs 1.6's shim, so on the platform
//! users run the shim is no mismatch; runc is one on every platform this project runs.)
//!
//! How: the fault finds the runc containerd's runc runtime runs (its config's `BinaryName`, else
//! `runc` on the PATH of the containerd that runs with the node's config), moves it aside in its
//! directory (`.runc.faultlab-aside`; the undo journalled first), installs the node's foreign runc
//! there (the node profile's `containerd.foreignRunc`: kind images of this project carry sid's, the
//! test bed puts it on each node), and restarts the workload. On the test bed the runc is each
//! node's own link to bookworm's (`up` makes it), so the host's runc is never touched. The fix
//! reinstalls the node's own runc (faultlab puts back the file it moved aside).

use async_trait::async_trait;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::api::{Ctx, Fault, FaultError, Fix, Presence, Probe};
use crate::cmd::{Ask, Cmd, Output};
use crate::node::runtime::PICK_CONTAINERD;
use crate::node::NodeProfile;

/// The name the node's own runc is moved to, in its own directory.
pub const ASIDE: &str = ".runc.faultlab-aside";

/// containerd's PATH when its environment has none (systemd's default for services).
// What the fault reads on the node (a plan answers these): where containerd takes runc from, and
// what a runc says of its version.
const RUNC_PATH: Ask = Ask("containerds-runc");
const RUNC_VERSION: Ask = Ask("runc-version");

const DEFAULT_PATH: &str = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

#[derive(Clone, Debug, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RuntimePartsMismatch {}

/// The document's fix (scenario files name it in `fix[].step`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Step {
    ReinstallMatchingRuntime,
}

/// The part the fault replaces, as the journal keeps it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Part {
    /// Where containerd's runc runtime takes runc from.
    pub path: String,
    /// The runc of another release the node has, which goes there.
    pub foreign: String,
}

impl Part {
    /// Where the node's own runc waits while the fault is in place: beside it.
    pub fn aside(&self) -> String {
        match self.path.rsplit_once('/') {
            Some((dir, _)) => format!("{dir}/{ASIDE}"),
            None => ASIDE.to_string(),
        }
    }
}

/// Why a node without a foreign runc cannot have the fault.
fn no_foreign_runc(node: &str) -> String {
    format!(
        "node {node} has no runc of another release (its profile's containerd.foreignRunc): this project's kind node images carry Debian sid's (label {}; ci/kind/node-image) and the test bed puts it on each node, but stock kindest/node images have none",
        crate::node::profile::FOREIGN_RUNC_LABEL
    )
}

/// `sh -c SCRIPT sh ARGS...` ([`Cmd::script`]).
fn script(text: &str, args: &[&str]) -> Cmd {
    Cmd::script(text, args.iter().copied())
}

/// Print the runc containerd's runc runtime runs: `$2` (the config's `BinaryName`) when it is a path;
/// else that name (`runc` when none) on the PATH of the containerd that runs with config `$1`.
fn find_runc(config: &str, binary: Option<&str>) -> Cmd {
    let text = format!(
        r#"case $2 in /*) printf '%s\n' "$2"; exit 0 ;; esac
name=${{2:-runc}}
{PICK_CONTAINERD}
[ -n "$pick" ] || {{ echo "no containerd runs with config $1 (and not exactly one containerd runs)" >&2; exit 1; }}
p=$(tr '\0' '\n' <"$pick/environ" | sed -n 's/^PATH=//p' | head -n 1)
[ -n "$p" ] || p={DEFAULT_PATH}
IFS=:
for d in $p; do
  if [ -n "$d" ] && [ -x "$d/$name" ] && [ ! -d "$d/$name" ]; then printf '%s\n' "$d/$name"; exit 0; fi
done
echo "no $name on containerd's PATH ($p)" >&2; exit 1"#
    );
    script(&text, &[config, binary.unwrap_or_default()]).asks(RUNC_PATH)
}

/// Check the foreign runc before anything changes: a regular file that is not the node's runc itself,
/// and, since containerd's shim runs what is installed as root, root's and writable by no one else, in
/// directories that are root's and writable by no one else but sticky ones such as /tmp, where no one
/// else can replace root's entries (else another user could have put any program there). Then move the node's runc aside (refusing, status 1, to overwrite an earlier aside
/// copy) and install the foreign one in its place, through a temporary file beside it.
fn install_foreign(p: &Part) -> Cmd {
    script(
        r#"[ -f "$2" ] && [ ! -L "$2" ] || { echo "the foreign runc $2 is not a regular file on the node" >&2; exit 1; }
[ ! "$1" -ef "$2" ] || { echo "the foreign runc $2 is the node's runc $1 itself" >&2; exit 1; }
f=$2
while :; do
  set -- "$1" "$2" "$3" $(stat -L -c '%u %a' -- "$f") || exit 1
  if [ "$4" != 0 ] || { [ $((0$5 & 022)) != 0 ] && [ $((0$5 & 01000)) = 0 ]; }; then echo "the foreign runc $2: $f is not root's alone (owner uid $4, mode $5): not installing it" >&2; exit 1; fi
  set -- "$1" "$2" "$3"
  [ "$f" = / ] && break
  f=$(dirname -- "$f")
done
if [ -e "$3" ] || [ -L "$3" ]; then echo "$3 exists already" >&2; exit 1; fi
mv -- "$1" "$3" || exit 1
cp -- "$2" "$1.faultlab-new" && chmod 0755 "$1.faultlab-new" && mv -f -- "$1.faultlab-new" "$1""#,
        &[&p.path, &p.foreign, &p.aside()],
    )
}

/// Put the node's own runc back: while its aside copy is there, whatever is in its place goes, unless
/// it is a reinstall (not the foreign runc's bytes), which stays and the aside copy goes (with the
/// foreign runc gone, what is in place is taken for it: the node's own comes back). Nothing aside:
/// nothing to do (idempotent, and the undo of a fault that never moved it).
pub fn put_back(p: &Part) -> Cmd {
    script(
        r#"rm -f -- "$1.faultlab-new"
[ -e "$3" ] || [ -L "$3" ] || exit 0
if [ -e "$1" ] && [ -r "$2" ] && [ "$(cksum <"$1")" != "$(cksum <"$2")" ]; then rm -f -- "$3"; exit 0; fi
rm -f -- "$1" && mv -- "$3" "$1""#,
        &[&p.path, &p.foreign, &p.aside()],
    )
}

/// Whether the runc in place starts: `--version`, its status and first line.
fn try_runc(p: &Part) -> Cmd {
    script(r#"out=$("$1" --version 2>&1); s=$?; printf '%s %s\n' "$s" "$(printf '%s' "$out" | head -n 1)""#, &[&p.path]).asks(RUNC_VERSION)
}

#[async_trait]
impl Fault for RuntimePartsMismatch {
    // On kind this stays within the node container: the runc is the node image's own.

    /// A plan's node: runc where the platform has it (the test bed's node link; Debian's on a kind node),
    /// running.
    fn plan_answers(&self, node: &NodeProfile, _namespace: &str) -> Vec<(Ask, Output)> {
        let runc = if node.netns.is_some() { "/var/lib/faultlab/testbed/runtime/runc\n" } else { "/usr/sbin/runc\n" };
        vec![(RUNC_PATH, Output::ok(runc)), (RUNC_VERSION, Output::ok("0 runc version 1.1.5+ds1\n"))]
    }

    /// The node's runc moved aside, in every platform's runc directory: Debian's, kind's and the test
    /// bed's nodes'.
    fn footprint(_node: &NodeProfile) -> Vec<Probe> {
        vec![Probe::new("runc moved aside", format!("find /usr/sbin /usr/local/sbin /usr/bin /usr/local/bin /var/lib/faultlab/testbed -maxdepth 5 -name '{ASIDE}' 2>/dev/null | wc -l"))]
    }

    /// A node without a runc of another release cannot have this fault: stock kindest/node images have
    /// none (this project's kind images and the test bed's nodes do).
    fn refusal(&self, node: &NodeProfile) -> Option<String> {
        node.containerd.foreign_runc.is_none().then(|| no_foreign_runc(&node.name))
    }

    async fn inject(&self, ctx: &Ctx) -> Result<(), FaultError> {
        let part = self.find(ctx, "find-runc").await?;
        let runs = ctx.run("find-runc", try_runc(&part)).await?.stdout;
        if !runs.starts_with("0 ") {
            return Err(FaultError::Check { step: "find-runc".into(), message: format!("the node's runc {} does not run already: {}", part.path, runs.trim()) });
        }
        ctx.keep("part", &part)?;
        ctx.undo_on_node(&format!("put the node's own runc back at {}", part.path), put_back(&part))?;
        ctx.note(format!("containerd runs runc from {}: move it aside and install {} there, a runc of another release, as a reinstall from the wrong release would", part.path, part.foreign));
        ctx.run("install-foreign-runc", install_foreign(&part)).await?;
        ctx.note("no new container can start on this node now: restart the workload");
        ctx.restart_target("restart-workload").await
    }

    /// In place while the node's own runc is aside and the runc in its place does not run.
    async fn present(&self, ctx: &Ctx) -> Result<Presence, FaultError> {
        let part = match ctx.kept::<Part>("part") {
            Some(p) => p,
            None => self.find(ctx, "check-runc").await?,
        };
        let runs = ctx.run("check-runc", try_runc(&part)).await?.stdout;
        let runs = runs.trim();
        Ok(match runs.split_once(' ') {
            Some(("0", version)) => Presence::Absent(format!("the runc at {} runs ({version})", part.path)),
            _ => Presence::Present(format!("the runc at {} does not run on this node: {}", part.path, runs.split_once(' ').map_or(runs, |(_, w)| w))),
        })
    }
}

impl RuntimePartsMismatch {
    /// The runc containerd's runc runtime runs on this node, and the node's foreign runc.
    async fn find(&self, ctx: &Ctx, step: &str) -> Result<Part, FaultError> {
        let check = |message: String| FaultError::Check { step: step.into(), message };
        let profile = &ctx.node.profile;
        let foreign = profile.containerd.foreign_runc.clone().ok_or_else(|| check(format!("{}: nothing changed", no_foreign_runc(&profile.name))))?;
        let file = &profile.containerd.config;
        let config = ctx.containerd_config(step).await?;
        let path = ctx.run(step, find_runc(file, config.runc_binary())).await?.stdout.trim().to_string();
        if !path.starts_with('/') || path.contains('\n') {
            return Err(check(format!("where containerd takes runc from reads {path:?}, not one absolute path")));
        }
        // A test bed node shares this host's files: its runc must be its own (`up` makes the link).
        if profile.netns.is_some() && !path.starts_with("/var/lib/faultlab/") {
            return Err(check(format!("containerd on test bed node {} runs {path}, this host's runc, not the node's own: run ci/testbed/up again (it gives each node its own runc)", profile.name)));
        }
        Ok(Part { path, foreign })
    }
}

#[async_trait]
impl Fix for RuntimePartsMismatch {
    type Step = Step;

    /// Puts the node's own runc back; with it in place already, does nothing (idempotent).
    async fn fix(&self, which: Step, ctx: &Ctx) -> Result<(), FaultError> {
        let step = super::steps::Steps::name(which);
        match which {
            Step::ReinstallMatchingRuntime => {
                let Some(part) = ctx.kept::<Part>("part") else {
                    return Err(FaultError::Check { step: step.into(), message: "the run's journal has no runc the fault replaced".into() });
                };
                ctx.note(format!("remove the runc of the other release and reinstall the node's own at {} (faultlab puts back the file it moved aside)", part.path));
                ctx.run(step, put_back(&part)).await.map(|_| ())
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

    fn run(cmd: &Cmd) -> std::process::Output {
        std::process::Command::new(&cmd.argv[0]).args(&cmd.argv[1..]).output().unwrap()
    }

    #[test]
    fn the_aside_copy_is_beside_the_runc() {
        let p = Part { path: "/usr/sbin/runc".into(), foreign: "/x/runc".into() };
        assert_eq!(p.aside(), "/usr/sbin/.runc.faultlab-aside");
    }

    /// The lookup, run for real: a named path stands; else `runc` on the PATH of the containerd that
    /// runs with the config (here none runs with that config, so more than one or none: refused).
    #[test]
    fn a_runc_named_by_path_is_taken_as_it_is() {
        let out = run(&find_runc("/nonexistent/config.toml", Some("/var/lib/faultlab/testbed/runtime/runc")));
        assert!(out.status.success());
        assert_eq!(String::from_utf8_lossy(&out.stdout), "/var/lib/faultlab/testbed/runtime/runc\n");
    }

    /// The scripts, run for real in a directory of this machine: install, refuse a second time, put
    /// back, put back again (nothing to do), and a reinstall meanwhile, which stays.
    #[test]
    fn the_scripts_install_and_restore_for_real() {
        let tmp = tempfile::tempdir().unwrap();
        let (bin, foreign) = (tmp.path().join("bin"), tmp.path().join("foreign"));
        std::fs::create_dir(&bin).unwrap();
        std::fs::write(bin.join("real-runc"), "#!/bin/sh\necho runc version 1.1.5\n").unwrap();
        std::os::unix::fs::symlink(bin.join("real-runc"), bin.join("runc")).unwrap();
        std::fs::write(&foreign, "#!/bin/sh\necho 'runc: version GLIBC_2.38 not found' >&2; exit 1\n").unwrap();
        use std::os::unix::fs::PermissionsExt;
        for f in [bin.join("real-runc"), foreign.clone()] {
            std::fs::set_permissions(&f, std::fs::Permissions::from_mode(0o755)).unwrap();
        }
        let p = Part { path: bin.join("runc").display().to_string(), foreign: foreign.display().to_string() };
        let status = || String::from_utf8(run(&try_runc(&p)).stdout).unwrap();
        assert_eq!(status(), "0 runc version 1.1.5\n");
        assert!(run(&install_foreign(&p)).status.success());
        assert_eq!(status(), "1 runc: version GLIBC_2.38 not found\n");
        assert!(std::fs::symlink_metadata(p.aside()).unwrap().file_type().is_symlink(), "the node's link moved aside as a link");
        assert!(!run(&install_foreign(&p)).status.success(), "an aside copy is never overwritten");
        assert!(run(&put_back(&p)).status.success());
        assert!(run(&put_back(&p)).status.success());
        assert_eq!(status(), "0 runc version 1.1.5\n");
        assert!(std::fs::symlink_metadata(&p.path).unwrap().file_type().is_symlink(), "the link itself is back");
        // A reinstall while the fault is in place stays; the aside copy goes.
        assert!(run(&install_foreign(&p)).status.success());
        std::fs::write(&p.path, "#!/bin/sh\necho runc version 1.1.5 reinstalled\n").unwrap();
        assert!(run(&put_back(&p)).status.success());
        assert_eq!(status(), "0 runc version 1.1.5 reinstalled\n");
        assert!(std::fs::symlink_metadata(p.aside()).is_err(), "no aside copy left");
    }

    #[test]
    fn a_foreign_runc_others_could_write_is_refused_before_any_change() {
        let tmp = tempfile::tempdir().unwrap();
        let (runc, foreign) = (tmp.path().join("runc"), tmp.path().join("foreign"));
        std::fs::write(&runc, "own").unwrap();
        std::fs::write(&foreign, "x").unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&foreign, std::fs::Permissions::from_mode(0o666)).unwrap();
        let p = Part { path: runc.display().to_string(), foreign: foreign.display().to_string() };
        let out = run(&install_foreign(&p));
        assert!(!out.status.success());
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains("is not root's alone") || err.contains("owner uid"), "{err}");
        assert!(runc.exists() && std::fs::symlink_metadata(p.aside()).is_err(), "nothing moved");
    }

    #[test]
    fn a_foreign_runc_that_is_the_nodes_own_is_refused_before_any_change() {
        let tmp = tempfile::tempdir().unwrap();
        let runc = tmp.path().join("runc");
        std::fs::write(&runc, "x").unwrap();
        let p = Part { path: runc.display().to_string(), foreign: runc.display().to_string() };
        let out = run(&install_foreign(&p));
        assert!(!out.status.success());
        assert!(String::from_utf8_lossy(&out.stderr).contains("is the node's runc"), "{out:?}");
        assert!(runc.exists() && std::fs::symlink_metadata(p.aside()).is_err(), "nothing moved");
    }

    #[tokio::test]
    async fn plan_journals_the_undo_then_installs_and_puts_back() {
        let fault = RuntimePartsMismatch {};
        let (ctx, fake) = plan_ctx(&fault);
        fault.inject(&ctx).await.unwrap();
        let kept: Part = ctx.kept("part").unwrap();
        assert_eq!(kept.path, "/var/lib/faultlab/testbed/runtime/runc", "the test bed node's own");
        let journal = ctx.journal.snapshot();
        assert!(matches!(&journal.entries[0].undo, Undo::Node { cmd, .. } if cmd.argv.last().map(String::as_str) == Some("/var/lib/faultlab/testbed/runtime/.runc.faultlab-aside")), "{journal:?}");
        fault.fix(Step::ReinstallMatchingRuntime, &ctx).await.unwrap();
        let node: Vec<String> = fake.lines();
        let installed = node.iter().position(|l| l.contains("faultlab-new")).expect("installed");
        let back = node.iter().rposition(|l| l.contains(r#"mv -- "$3" "$1""#)).expect("put back");
        assert!(installed < back, "{node:#?}");
        assert!(ctx.rec().entries().iter().any(|e| e.channel == Channel::Api && e.line.starts_with("DELETE") && e.line.contains("/pods?labelSelector=app=web")));
    }

    #[tokio::test]
    async fn the_hosts_runc_on_a_test_bed_node_is_refused_before_any_change() {
        let fault = RuntimePartsMismatch {};
        let (ctx, fake) = crate::faults::testing::ctx();
        fake.respond("name=${2:-runc}", Output::ok("/usr/sbin/runc\n"));
        fake.respond("--version 2>&1", Output::ok("0 runc version 1.1.5+ds1\n"));
        let err = fault.inject(&ctx).await.unwrap_err().to_string();
        assert!(err.contains("runs /usr/sbin/runc, this host's runc, not the node's own"), "{err}");
        assert!(ctx.journal.snapshot().entries.is_empty());
    }

    #[tokio::test]
    async fn a_node_without_a_foreign_runc_is_refused_before_any_change() {
        let fault = RuntimePartsMismatch {};
        let (mut ctx, _fake) = crate::faults::testing::ctx();
        ctx.node.profile.containerd.foreign_runc = None;
        assert!(fault.refusal(&ctx.node.profile).is_some_and(|why| why.contains("stock kindest/node images have none")));
        let err = fault.inject(&ctx).await.unwrap_err().to_string();
        assert!(err.contains("has no runc of another release") && err.contains("nothing changed"), "{err}");
        assert!(ctx.journal.snapshot().entries.is_empty());
    }
}
