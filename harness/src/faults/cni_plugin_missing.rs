//! cni-plugin-missing: the pod network cannot be configured: the plugin the node's CNI configuration
//! names is not where the runtime looks for it.
//!
//! Source: imroc's Kubernetes troubleshooting guide, "Pod 一直处于 ContainerCreating 或 Waiting 状态",
//! "CNI 网络错误": "如果发生 CNI 网络错误通常需要检查下网络插件的配置和运行状态,如果没有正确配置或正常
//! 运行通常表现为: 无法配置 Pod 网络; 无法分配 Pod IP" (check the network plugin's configuration and state;
//! when it is not set up right: the pod network cannot be configured, or no pod IP can be allocated).
//! cni-broken is the second half (the exhausted range); this fault is the first: a node whose CNI
//! configuration names a plugin binary it does not have, as after a plugin package removed or never
//! installed. Nothing heals it: the configuration stays (a network daemon such as kindnetd rewrites
//! configuration, never binaries), and every new sandbox fails with FailedCreatePodSandBox `failed to
//! find plugin "<type>" in path [...]`.
//!
//! How: the fault reads where containerd's CRI plugin takes its CNI configuration and plugins from
//! (containerd's config, at the keys of its version: `conf_dir`, `bin_dirs`/`bin_dir`), the network
//! that configuration names and the type of its first plugin (the one that makes the pod's interface:
//! the test bed's `bridge`, kindnet's `ptp`), and moves that plugin's file aside in its directory
//! (`.<type>.faultlab-aside`, the undo journalled first), then restarts the workload.
//!
//! On kind the directory is the node container's own (`/opt/cni/bin`; this project's 1.6 image
//! `/usr/lib/cni`), and on the test bed each node's own directory of links to /usr/lib/cni (`up` makes
//! it), so the host's plugins are never touched. Fix: `reinstall-cni-plugin` puts the plugin back.

use async_trait::async_trait;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::api::{Ctx, Fault, FaultError, Fix, Presence, Probe};
use super::cni_broken::{first_conf, CNI_CONF, CNI_CONF_DIR};
use crate::cmd::{Ask, Cmd, Output};
use crate::node::NodeProfile;

/// The name a plugin is moved to, in its own directory: libcni looks for the type's exact name.
pub const ASIDE_SUFFIX: &str = ".faultlab-aside";

#[derive(Clone, Debug, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CniPluginMissing {}

/// The document's fix (scenario files name it in `fix[].step`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Step {
    ReinstallCniPlugin,
}

/// The plugin the fault takes away, as the journal keeps it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Plugin {
    /// The CNI configuration file containerd uses, and the network it names.
    pub file: String,
    pub network: String,
    /// The plugin's type (its binary's name).
    pub kind: String,
    /// Each of containerd's plugin directories that has it (libcni takes the first; all go, or the
    /// next would serve).
    pub dirs: Vec<String>,
}

impl Plugin {
    /// (where the plugin is, where it goes) in each of its directories.
    pub fn places(&self) -> Vec<(String, String)> {
        self.dirs
            .iter()
            .map(|d| {
                let d = d.trim_end_matches('/');
                (format!("{d}/{}", self.kind), format!("{d}/.{}{ASIDE_SUFFIX}", self.kind))
            })
            .collect()
    }

    fn paths(&self) -> String {
        self.places().into_iter().map(|(p, _)| p).collect::<Vec<_>>().join(", ")
    }
}

/// The network a CNI configuration names and the type of its first plugin (a .conflist's `plugins[0]`,
/// a .conf's own `type`). A type that is not a plain file name is refused: it becomes a path.
pub fn first_plugin(file: &str, text: &str) -> Result<(String, String), String> {
    let conf: serde_json::Value = serde_json::from_str(text).map_err(|e| format!("{file} is not JSON: {e}"))?;
    let name = conf["name"].as_str().filter(|n| !n.is_empty()).ok_or_else(|| format!("{file} names no network"))?;
    let first = match conf["plugins"].as_array() {
        Some(list) => list.first().ok_or_else(|| format!("network {name} of {file} has no plugins"))?,
        None => &conf,
    };
    let kind = first["type"].as_str().unwrap_or_default();
    if kind.is_empty() || kind.contains('/') || kind.starts_with('.') {
        return Err(format!("network {name} of {file}: its first plugin's type {kind:?} is not a plugin's file name"));
    }
    Ok((name.into(), kind.into()))
}

/// `sh -c SCRIPT sh ARGS...` ([`Cmd::script`]).
fn script(text: &str, args: &[&str]) -> Cmd {
    Cmd::script(text, args.iter().copied())
}

/// Each of `dirs` that has plugin `kind`, a line each.
fn find_plugin(kind: &str, dirs: &[String]) -> Cmd {
    let mut args = vec![kind];
    args.extend(dirs.iter().map(String::as_str));
    script(r#"t=$1; shift; for d; do if [ -e "$d/$t" ]; then printf '%s\n' "$d"; fi; done; exit 0"#, &args).asks(PLUGIN_DIRS)
}

/// What [`find_plugin`] asks (a plan answers it).
const PLUGIN_DIRS: Ask = Ask("cni-plugin-dirs");

/// `PATH ASIDE PATH ASIDE ...` of every place.
fn pairs(p: &Plugin) -> Vec<String> {
    p.places().into_iter().flat_map(|(path, aside)| [path, aside]).collect()
}

fn script_over_pairs(text: &str, p: &Plugin) -> Cmd {
    let args = pairs(p);
    script(text, &args.iter().map(String::as_str).collect::<Vec<_>>())
}

/// Move the plugin aside in each directory; refuses (status 1, before moving any) to overwrite an
/// earlier aside copy.
fn take_away(p: &Plugin) -> Cmd {
    script_over_pairs(
        r#"i=0; for a; do i=$((i+1)); if [ $((i % 2)) = 0 ] && { [ -e "$a" ] || [ -L "$a" ]; }; then echo "$a exists already" >&2; exit 1; fi; done; while [ $# -ge 2 ]; do mv -- "$1" "$2" || exit 1; shift 2; done"#,
        p,
    )
}

/// Put it back in each directory: the aside copy to its place; if something is in its place already
/// (a reinstall), the aside copy goes. Nothing aside: nothing to do (idempotent, and the undo of a
/// fault that never moved it).
pub fn put_back(p: &Plugin) -> Cmd {
    script_over_pairs(
        r#"while [ $# -ge 2 ]; do if [ -e "$2" ] || [ -L "$2" ]; then if [ -e "$1" ] || [ -L "$1" ]; then rm -f -- "$2"; else mv -- "$2" "$1"; fi; fi; shift 2; done"#,
        p,
    )
}

/// How many of the plugin's places have it (printed).
fn count_present(p: &Plugin) -> Cmd {
    script_over_pairs(r#"n=0; while [ $# -ge 2 ]; do if [ -e "$1" ]; then n=$((n+1)); fi; shift 2; done; echo "$n""#, p)
}

#[async_trait]
impl Fault for CniPluginMissing {
    // On kind this stays within the node container: the plugin directory is the node image's own.

    /// A plan's node: containerd's config empty (its default directories), one bridge network, its
    /// plugin in /opt/cni/bin.
    fn plan_answers(&self, _node: &NodeProfile, _namespace: &str) -> Vec<(Ask, Output)> {
        vec![
            (CNI_CONF_DIR, Output::ok("10-bridge.conflist\n")),
            (CNI_CONF, Output::ok(r#"{"name":"pods","plugins":[{"type":"bridge","ipam":{"type":"host-local"}},{"type":"portmap"}]}"#)),
            (PLUGIN_DIRS, Output::ok("/opt/cni/bin\n")),
        ]
    }

    /// Plugins faultlab left aside, in every platform's plugin directory: containerd's default, this
    /// project's kind image's, and the test bed's nodes'.
    fn footprint(_node: &NodeProfile) -> Vec<Probe> {
        vec![Probe::new(
            "CNI plugins moved aside",
            format!("find {} /usr/lib/cni /var/lib/faultlab/testbed -maxdepth 5 -name '.*{ASIDE_SUFFIX}' 2>/dev/null | wc -l", crate::node::runtime::DEFAULT_CNI_BIN_DIR),
        )]
    }

    async fn inject(&self, ctx: &Ctx) -> Result<(), FaultError> {
        let plugin = self.find(ctx, "find-plugin").await?;
        ctx.keep("plugin", &plugin)?;
        ctx.undo_on_node(&format!("put CNI plugin {} back", plugin.paths()), put_back(&plugin))?;
        ctx.note(format!("network {} ({}) starts with plugin {}: move {} aside, as if its package were gone", plugin.network, plugin.file, plugin.kind, plugin.paths()));
        ctx.run("remove-plugin", take_away(&plugin)).await?;
        ctx.note("new pods of this node now get no network: restart the workload");
        ctx.restart_target("restart-workload").await
    }

    /// In place while the plugin is not where containerd looks for it.
    async fn present(&self, ctx: &Ctx) -> Result<Presence, FaultError> {
        let plugin = match ctx.kept::<Plugin>("plugin") {
            Some(p) => p,
            None => self.find(ctx, "check-plugin").await?,
        };
        let there = ctx.run("check-plugin", count_present(&plugin)).await?.stdout;
        Ok(match there.trim() {
            "0" => Presence::Present(format!("CNI plugin {} is missing ({}): network {} names it", plugin.kind, plugin.paths(), plugin.network)),
            n => Presence::Absent(format!("CNI plugin {} is there ({n} of {})", plugin.kind, plugin.paths())),
        })
    }
}

impl CniPluginMissing {
    /// The network containerd's CRI plugin sets pods up with, its first plugin, and the directory of
    /// containerd's plugin directories that has it.
    async fn find(&self, ctx: &Ctx, step: &str) -> Result<Plugin, FaultError> {
        let check = |message: String| FaultError::Check { step: step.into(), message };
        let config = ctx.containerd_config(step).await?;
        let dir = config.cni_conf_dir().to_string();
        let listing = ctx.run(step, Cmd::new(["ls", "-1", "--", dir.as_str()]).asks(CNI_CONF_DIR)).await?.stdout;
        let conf = first_conf(&listing).ok_or_else(|| check(format!("{dir} has no CNI configuration (.conf, .conflist, .json)")))?;
        let path = format!("{dir}/{conf}");
        let (network, kind) = first_plugin(&path, &ctx.run(step, Cmd::new(["cat", "--", path.as_str()]).asks(CNI_CONF)).await?.stdout).map_err(check)?;
        let bins = config.cni_bin_dirs();
        let found = ctx.run(step, find_plugin(&kind, &bins)).await?.stdout;
        let dirs: Vec<String> = found.lines().map(str::trim).filter(|d| bins.iter().any(|b| b == d)).map(String::from).collect();
        if dirs.is_empty() {
            return Err(check(format!("plugin {kind} of network {network} is in none of containerd's CNI plugin directories ({}): the node's network is broken already", bins.join(", "))));
        }
        Ok(Plugin { file: path, network, kind, dirs })
    }
}

#[async_trait]
impl Fix for CniPluginMissing {
    type Step = Step;

    /// Puts the plugin back; with it in place already, does nothing (idempotent).
    async fn fix(&self, which: Step, ctx: &Ctx) -> Result<(), FaultError> {
        let step = super::steps::Steps::name(which);
        match which {
            Step::ReinstallCniPlugin => {
                let Some(plugin) = ctx.kept::<Plugin>("plugin") else {
                    return Err(FaultError::Check { step: step.into(), message: "the run's journal has no CNI plugin the fault moved".into() });
                };
                ctx.note(format!("reinstall CNI plugin {} (faultlab puts back the file it moved aside)", plugin.paths()));
                ctx.run(step, put_back(&plugin)).await.map(|_| ())
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
    #[case::conflist("x.conflist", r#"{"name":"kindnet","plugins":[{"type":"ptp"},{"type":"portmap"}]}"#, ("kindnet", "ptp"))]
    #[case::conf("x.conf", r#"{"name":"pods","type":"bridge"}"#, ("pods", "bridge"))]
    fn the_first_plugin_is_the_one_taken(#[case] file: &str, #[case] text: &str, #[case] want: (&str, &str)) {
        assert_eq!(first_plugin(file, text), Ok((want.0.to_string(), want.1.to_string())));
    }

    #[rstest::rstest]
    #[case::not_json("{", "x.conflist is not JSON")]
    #[case::no_name(r#"{"plugins":[{"type":"ptp"}]}"#, "names no network")]
    #[case::no_plugins(r#"{"name":"n","plugins":[]}"#, "has no plugins")]
    #[case::path_type(r#"{"name":"n","plugins":[{"type":"../../bin/sh"}]}"#, "is not a plugin's file name")]
    #[case::hidden_type(r#"{"name":"n","type":".x"}"#, "is not a plugin's file name")]
    fn bad_configurations_are_refused(#[case] text: &str, #[case] message: &str) {
        let err = first_plugin("x.conflist", text).unwrap_err();
        assert!(err.contains(message), "{err}");
    }

    #[tokio::test]
    async fn plan_journals_the_undo_then_moves_the_plugin_and_puts_it_back() {
        let fault = CniPluginMissing {};
        let (ctx, fake) = plan_ctx(&fault);
        fault.inject(&ctx).await.unwrap();
        let kept: Plugin = ctx.kept("plugin").unwrap();
        assert_eq!(kept.places(), [("/opt/cni/bin/bridge".to_string(), "/opt/cni/bin/.bridge.faultlab-aside".to_string())]);
        let journal = ctx.journal.snapshot();
        assert!(matches!(&journal.entries[0].undo, Undo::Node { cmd, .. } if cmd.argv.ends_with(&["/opt/cni/bin/bridge".to_string(), "/opt/cni/bin/.bridge.faultlab-aside".to_string()])), "{journal:?}");
        fault.fix(Step::ReinstallCniPlugin, &ctx).await.unwrap();
        let node: Vec<String> = fake.lines();
        let moved = node.iter().position(|l| l.contains(r#"mv -- "$1" "$2""#)).expect("moved aside");
        let back = node.iter().rposition(|l| l.contains(r#"mv -- "$2" "$1""#)).expect("put back");
        assert!(moved < back, "{node:#?}");
        assert!(ctx.rec().entries().iter().any(|e| e.channel == Channel::Api && e.line.starts_with("DELETE") && e.line.contains("/pods?labelSelector=app=web")));
    }

    #[test]
    fn every_directory_that_has_the_plugin_loses_it() {
        let p = Plugin { file: "f".into(), network: "n".into(), kind: "bridge".into(), dirs: vec!["/usr/lib/cni/".into(), "/opt/cni/bin".into()] };
        assert_eq!(pairs(&p), ["/usr/lib/cni/bridge", "/usr/lib/cni/.bridge.faultlab-aside", "/opt/cni/bin/bridge", "/opt/cni/bin/.bridge.faultlab-aside"]);
        assert_eq!(p.paths(), "/usr/lib/cni/bridge, /opt/cni/bin/bridge");
    }

    /// The scripts, run for real in a directory of this machine: take away, refuse a second time, put
    /// back, put back again (nothing to do), and a reinstall meanwhile.
    #[test]
    fn the_scripts_move_and_restore_for_real() {
        let tmp = tempfile::tempdir().unwrap();
        let (a, b) = (tmp.path().join("a"), tmp.path().join("b"));
        for d in [&a, &b] {
            std::fs::create_dir(d).unwrap();
            std::fs::write(d.join("ptp"), "plugin").unwrap();
        }
        let p = Plugin { file: "f".into(), network: "n".into(), kind: "ptp".into(), dirs: vec![a.display().to_string(), b.display().to_string()] };
        let run = |cmd: Cmd| std::process::Command::new(&cmd.argv[0]).args(&cmd.argv[1..]).output().unwrap();
        let count = || String::from_utf8(run(count_present(&p)).stdout).unwrap().trim().to_string();
        assert_eq!(count(), "2");
        assert!(run(take_away(&p)).status.success());
        assert_eq!(count(), "0");
        assert!(a.join(".ptp.faultlab-aside").exists() && b.join(".ptp.faultlab-aside").exists());
        std::fs::write(a.join("ptp"), "reinstalled").unwrap();
        assert!(!run(take_away(&p)).status.success(), "an aside copy is never overwritten");
        assert_eq!(std::fs::read_to_string(a.join("ptp")).unwrap(), "reinstalled", "nothing moved");
        assert!(run(put_back(&p)).status.success());
        assert!(run(put_back(&p)).status.success());
        assert_eq!(count(), "2");
        assert_eq!(std::fs::read_to_string(a.join("ptp")).unwrap(), "reinstalled", "a reinstalled plugin stays");
        assert_eq!(std::fs::read_to_string(b.join("ptp")).unwrap(), "plugin");
        let left: Vec<_> = [&a, &b].iter().flat_map(|d| std::fs::read_dir(d).unwrap()).map(|e| e.unwrap().file_name()).collect();
        assert_eq!(left.len(), 2, "no aside copy left: {left:?}");
    }

    #[tokio::test]
    async fn a_plugin_in_no_directory_is_refused_before_any_change() {
        let fault = CniPluginMissing {};
        let (ctx, fake) = crate::faults::testing::ctx();
        fake.respond("ls -1 --", Output::ok("10-bridge.conflist\n"));
        fake.respond(".conflist", Output::ok(r#"{"name":"pods","plugins":[{"type":"bridge"}]}"#));
        let err = fault.inject(&ctx).await.unwrap_err();
        assert!(err.to_string().contains("plugin bridge of network pods is in none of containerd's CNI plugin directories (/opt/cni/bin)"), "{err}");
        assert!(ctx.journal.snapshot().entries.is_empty());
    }
}
