//! cni-broken: the node's pod network cannot give a new pod an address: every address of the CNI
//! network's range is held by a reservation of a container that no longer exists (leaked addresses).
//!
//! Source: imroc's Kubernetes troubleshooting guide, "Pod 一直处于 ContainerCreating 或 Waiting 状态",
//! "CNI 网络错误": 无法配置 Pod 网络 / 无法分配 Pod IP (the pod network cannot be set up, no pod IP can be
//! allocated); check the network plugin's configuration and state. Symptom: FailedCreatePodSandBox
//! `failed to setup network for sandbox ... no IP addresses available in range set`. Fix: release the
//! addresses reserved for containers that are gone, and let the kubelet retry.
//!
//! How: the fault reads where containerd's CRI plugin takes its CNI configuration from (containerd's
//! config, `conf_dir` at the key of the file's version: `ContainerdConfig`), the network that
//! configuration names and its `host-local` address range (its reservations under the network's
//! `ipam.dataDir`, host-local's default `/var/lib/cni/networks` if unset), then writes a reservation, as
//! host-local writes them (one file per address, named by the address, holding a container ID), for
//! every free address and for the target pod's own, with an ID no container has:
//! when the pod is deleted its network teardown finds no reservation of its own to release, so its
//! address stays taken too, exactly as a leak happens. Before that it waits for the pods of other
//! namespaces being deleted on the node (a scenario that ran there just before) to go, since each gives
//! its address back only then. The undo (journalled first) removes every
//! reservation with that ID. Nothing else of the node changes: the CNI configuration stays as it is.

use std::collections::BTreeSet;
use std::net::Ipv4Addr;
use std::time::Duration;

use async_trait::async_trait;
use k8s_openapi::api::core::v1::{Namespace, Pod};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::api::{Ctx, Fault, FaultError, Fix, Presence, Probe};
use crate::cmd::{Ask, Cmd, Output};
use crate::node::NodeProfile;

/// The container ID of the leaked reservations: no container has it, and the undo finds them by it.
pub const LEAK_ID: &str = "faultlab-leaked-address";

/// containerd's default CNI configuration directory (when its config does not set `conf_dir`).
pub const DEFAULT_CONF_DIR: &str = crate::node::runtime::DEFAULT_CNI_CONF_DIR;

/// host-local's default data directory (when the network's `ipam.dataDir` is not set).
pub const DEFAULT_DATA_DIR: &str = "/var/lib/cni/networks";

/// Where the test bed's network keeps them (its `ipam.dataDir`), for the footprint.
pub const TESTBED_DATA_DIR: &str = "/var/lib/faultlab/cni/networks";

/// Where kind's network, kindnet, keeps them (the `ipam.dataDir` of the conflist kindnetd writes,
/// `images/kindnetd/cmd/kindnetd/cni.go` in kind v0.27), for the footprint.
pub const KINDNET_DATA_DIR: &str = "/run/cni-ipam-state";

/// The most addresses the fault will reserve: a range larger than this is not a node's pod range.
pub const MAX_ADDRESSES: usize = 4096;

#[derive(Clone, Debug, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CniBroken {}

/// The document's fix, step by step (scenario files name them in `fix[].step`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Step {
    ReleaseLeakedAddresses,
}

/// The CNI network whose addresses the fault takes, as the journal keeps it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Network {
    /// The configuration file containerd uses.
    pub file: String,
    pub name: String,
    /// host-local's reservations of this network: `<dataDir>/<name>`.
    pub reservations: String,
    /// Every address host-local may give out, in order.
    pub addresses: Vec<Ipv4Addr>,
    /// The range in words (`198.19.160.1-198.19.160.254`).
    pub range: String,
}

/// The file containerd loads from a `ls -1` of the configuration directory: the first, by name, of
/// those ending in .conf, .conflist or .json (as libcni orders them).
pub fn first_conf(listing: &str) -> Option<String> {
    let mut files: Vec<&str> = listing.lines().map(str::trim).filter(|f| [".conf", ".conflist", ".json"].iter().any(|e| f.ends_with(e))).collect();
    files.sort_unstable();
    files.first().map(|f| f.to_string())
}

/// The network a CNI configuration (a .conflist, or a single plugin's .conf) names, with the addresses
/// of its host-local IPv4 range.
pub fn network(file: &str, text: &str) -> Result<Network, String> {
    let conf: serde_json::Value = serde_json::from_str(text).map_err(|e| format!("{file} is not JSON: {e}"))?;
    let name = conf["name"].as_str().filter(|n| !n.is_empty()).ok_or_else(|| format!("{file} names no network"))?;
    let plugins: Vec<&serde_json::Value> = match conf["plugins"].as_array() {
        Some(list) => list.iter().collect(),
        None => vec![&conf],
    };
    let ipam = plugins
        .iter()
        .map(|p| &p["ipam"])
        .find(|i| i["type"] == "host-local")
        .ok_or_else(|| format!("network {name} of {file} has no host-local address management (the fault takes host-local's addresses)"))?;
    let data_dir = ipam["dataDir"].as_str().unwrap_or(DEFAULT_DATA_DIR).trim_end_matches('/');
    if !data_dir.starts_with('/') || name.contains('/') {
        return Err(format!("network {name} of {file}: its reservations {data_dir}/{name} are not an absolute directory"));
    }
    // `ranges` is a list of range sets, each a list of ranges; the older form is one range in `ipam`.
    let ranges: Vec<&serde_json::Value> = match ipam["ranges"].as_array() {
        Some(sets) => sets.iter().filter_map(|s| s.as_array()).flatten().collect(),
        None => vec![ipam],
    };
    let mut addresses = Vec::new();
    let mut words = Vec::new();
    for r in ranges {
        let Some(subnet) = r["subnet"].as_str() else { continue };
        let Some((base, prefix)) = parse_v4_subnet(subnet) else { continue };
        let (first, last) = host_span(base, prefix).ok_or_else(|| format!("subnet {subnet} of network {name} has no host addresses"))?;
        let start = r["rangeStart"].as_str().and_then(|a| a.parse::<Ipv4Addr>().ok()).map(u32::from).unwrap_or(first);
        let end = r["rangeEnd"].as_str().and_then(|a| a.parse::<Ipv4Addr>().ok()).map(u32::from).unwrap_or(last);
        let gateway = r["gateway"].as_str().and_then(|a| a.parse::<Ipv4Addr>().ok()).map(u32::from).unwrap_or(first);
        if end < start || (end - start) as usize >= MAX_ADDRESSES {
            return Err(format!("the range {subnet} of network {name} has more than {MAX_ADDRESSES} addresses (or none): not a node's pod range"));
        }
        addresses.extend((start..=end).filter(|a| *a != gateway).map(Ipv4Addr::from));
        words.push(format!("{}-{}", Ipv4Addr::from(start), Ipv4Addr::from(end)));
    }
    if addresses.is_empty() {
        return Err(format!("network {name} of {file} has no IPv4 range"));
    }
    if addresses.len() > MAX_ADDRESSES {
        return Err(format!("network {name} of {file} has {} addresses, more than {MAX_ADDRESSES}", addresses.len()));
    }
    Ok(Network { file: file.into(), name: name.into(), reservations: format!("{data_dir}/{name}"), addresses, range: words.join(",") })
}

fn parse_v4_subnet(subnet: &str) -> Option<(u32, u32)> {
    let (addr, prefix) = subnet.split_once('/')?;
    let addr: Ipv4Addr = addr.parse().ok()?;
    let prefix: u32 = prefix.parse().ok().filter(|p| *p <= 32)?;
    Some((u32::from(addr), prefix))
}

/// The first and last host address of a subnet (without its network and broadcast addresses).
fn host_span(base: u32, prefix: u32) -> Option<(u32, u32)> {
    let mask = if prefix == 0 { 0 } else { u32::MAX << (32 - prefix) };
    let network = base & mask;
    let broadcast = network | !mask;
    (broadcast - network >= 2).then(|| (network + 1, broadcast - 1))
}

/// Reservations from the listing script: `ADDRESS CONTAINER-ID` a line (other files are not addresses).
pub fn reservations(listing: &str) -> Vec<(Ipv4Addr, String)> {
    listing
        .lines()
        .filter_map(|l| {
            let (addr, id) = l.trim().split_once(' ')?;
            Some((addr.parse().ok()?, id.trim().to_string()))
        })
        .collect()
}

/// The reservations no live sandbox holds: leaked addresses.
pub fn leaked(held: &[(Ipv4Addr, String)], live: &BTreeSet<String>) -> Vec<Ipv4Addr> {
    held.iter().filter(|(_, id)| !live.contains(id)).map(|(a, _)| *a).collect()
}

/// How long inject waits for the pods being deleted on the node to give their addresses back: their
/// grace period (the scenarios' workloads take 2 s at most) and the kubelet's stopping their sandboxes.
const GOING_AWAY_WITHIN: Duration = Duration::from_secs(90);

/// The pods on `node`, outside `namespace`, being deleted, or in a namespace being deleted, whose
/// controller marks them deleted a moment later (`namespace/name`): each holds its address until its
/// sandbox stops, and the kubelet deletes the pod only after that.
pub fn going_away(pods: &[Pod], namespaces: &[Namespace], node: &str, namespace: &str) -> Vec<String> {
    let ending: BTreeSet<&str> = namespaces.iter().filter(|n| n.metadata.deletion_timestamp.is_some()).filter_map(|n| n.metadata.name.as_deref()).collect();
    pods.iter()
        .filter(|p| p.spec.as_ref().and_then(|s| s.node_name.as_deref()) == Some(node))
        .filter(|p| {
            let ns = p.metadata.namespace.as_deref().unwrap_or_default();
            ns != namespace && (p.metadata.deletion_timestamp.is_some() || ending.contains(ns))
        })
        .map(|p| format!("{}/{}", p.metadata.namespace.as_deref().unwrap_or_default(), p.metadata.name.as_deref().unwrap_or_default()))
        .collect()
}

/// `sh -c SCRIPT sh ARGS...` ([`Cmd::script`]).
fn script(text: &str, args: impl IntoIterator<Item = String>) -> Cmd {
    Cmd::script(text, args)
}

// What the fault reads on the node (a plan answers these).
/// The CNI configuration directory's listing.
pub const CNI_CONF_DIR: Ask = Ask("cni-conf-dir");
/// The network's configuration file.
pub const CNI_CONF: Ask = Ask("cni-conf");
const RESERVATIONS: Ask = Ask("host-local-reservations");
const LIVE_SANDBOXES: Ask = Ask("live-sandboxes");

/// How long the scripts over a network's reservations may take: a /24 has 254 files, and on an emulated
/// node (the arm64 VM, QEMU TCG) every process costs tens of milliseconds.
const RESERVATIONS_TIMEOUT: Duration = Duration::from_secs(240);

/// Each reservation of `dir` as `ADDRESS CONTAINER-ID` (host-local ends the ID with `\r\n`): one grep
/// for every file's first line (a process per file took over a minute on the emulated arm64 node).
fn list_reservations(dir: &str) -> Cmd {
    script(
        r#"cd -- "$1" 2>/dev/null || exit 0; set -- *; [ -e "$1" ] || exit 0; grep -H -m 1 '' -- "$@" | sed -e 's/:/ /' -e 's/\r$//'; exit 0"#,
        [dir.to_string()],
    )
    .timeout(RESERVATIONS_TIMEOUT)
    .asks(RESERVATIONS)
}

/// Remove every reservation of `dir` held by `id` (whose first line is the ID, with or without the `\r`).
pub fn remove_held_by(dir: &str, id: &str) -> Cmd {
    script(
        r#"id=$2; cd -- "$1" 2>/dev/null || exit 0; set -- *; [ -e "$1" ] || exit 0; cr=$(printf '\r'); for f in $(grep -l -x -F -e "$id" -e "$id$cr" -- "$@"); do rm -f -- "$f"; done; exit 0"#,
        [dir.to_string(), id.to_string()],
    )
    .timeout(RESERVATIONS_TIMEOUT)
}

/// Reserve every address given for `id`, as host-local does (`ID\r\nIFNAME`), without touching one
/// that is reserved already (noclobber: a pod that takes one meanwhile keeps it); prints how many.
fn reserve_free(dir: &str, id: &str, addresses: &[Ipv4Addr]) -> Cmd {
    let mut args = vec![dir.to_string(), id.to_string()];
    args.extend(addresses.iter().map(ToString::to_string));
    script(
        r#"mkdir -p -- "$1" && cd -- "$1" || exit 1; id=$2; shift 2; set -C; n=0; for a; do if printf '%s\r\neth0' "$id" 2>/dev/null >"$a"; then n=$((n+1)); fi; done; echo "$n""#,
        args,
    )
}

/// Take over the reservation of `address` (a live pod's) for `id`: its own release will not find it.
fn take_over(dir: &str, id: &str, address: Ipv4Addr) -> Cmd {
    script(r#"cd -- "$1" && [ -f "$3" ] && printf '%s\r\neth0' "$2" >"$3""#, [dir.to_string(), id.to_string(), address.to_string()])
}

#[async_trait]
impl Fault for CniBroken {
    // On kind this stays within the node container: host-local's reservations are files under the
    // node's /var/lib/cni, and containerd's config and CNI configuration are read, never written.

    /// A plan's node: containerd's config empty (so its default CNI directory) holding one bridge network of a /24, no
    /// reservation yet but the pod's own, and one live sandbox.
    fn plan_answers(&self, _node: &NodeProfile, _namespace: &str) -> Vec<(Ask, Output)> {
        vec![
            (CNI_CONF_DIR, Output::ok("10-bridge.conflist\n")),
            (CNI_CONF, Output::ok(r#"{"name":"pods","plugins":[{"type":"bridge","ipam":{"type":"host-local","ranges":[[{"subnet":"198.18.0.0/24"}]]}}]}"#)),
            (RESERVATIONS, Output::ok("198.18.0.2 <sandbox-id>\n")),
            (LIVE_SANDBOXES, Output::ok("<sandbox-id>\n")),
        ]
    }

    /// A plan's workload has one pod, with the address 198.18.0.2.
    fn plan_api_answers(&self, _target: &crate::gates::Target) -> Vec<(String, serde_json::Value)> {
        vec![("/pods".into(), serde_json::json!([{"metadata": {"name": "<pod>"}, "status": {"podIP": "198.18.0.2"}}]))]
    }

    /// How many addresses faultlab left reserved, wherever host-local keeps them on a platform: its
    /// default directory, the test bed's, and kindnet's (kind).
    fn footprint(_node: &NodeProfile) -> Vec<Probe> {
        vec![Probe::new(
            "leaked CNI addresses",
            format!("grep -rlsx -e '{LEAK_ID}' -e '{LEAK_ID}\r' {DEFAULT_DATA_DIR} {TESTBED_DATA_DIR} {KINDNET_DATA_DIR} 2>/dev/null | wc -l"),
        )]
    }

    async fn inject(&self, ctx: &Ctx) -> Result<(), FaultError> {
        let net = self.find_network(ctx, "find-network").await?;
        ctx.keep("network", &net)?;
        self.wait_for_pods_going_away(ctx, "wait-for-pods-going-away").await?;
        let pods: Vec<Pod> = ctx.kube.list(Some(&ctx.namespace), Some(&ctx.target.selector)).await.map_err(Ctx::api_err("find-pod"))?;
        let own: Vec<Ipv4Addr> = pods.iter().filter_map(|p| p.status.as_ref()?.pod_ip.as_deref()?.parse().ok()).collect();
        ctx.undo_on_node(&format!("release the addresses of network {} reserved for {LEAK_ID}", net.name), remove_held_by(&net.reservations, LEAK_ID))?;
        ctx.note(format!("reserve every free address of network {} ({}) in {} for a container that does not exist", net.name, net.range, net.reservations));
        let out = ctx.run("reserve-free-addresses", reserve_free(&net.reservations, LEAK_ID, &net.addresses)).await?;
        if let Ok(n) = out.stdout.trim().parse::<usize>() {
            ctx.note(format!("{n} addresses reserved"));
        }
        for address in own.into_iter().filter(|a| net.addresses.contains(a)) {
            ctx.note(format!("take over the pod's own reservation of {address}: when the pod goes, its release finds nothing of its own"));
            ctx.run("leak-pod-address", take_over(&net.reservations, LEAK_ID, address)).await?;
        }
        ctx.note("new pods of this node now get no address: restart the workload");
        ctx.restart_target("restart-workload").await
    }

    /// In place while some address is reserved for a container that does not exist and none is free.
    async fn present(&self, ctx: &Ctx) -> Result<Presence, FaultError> {
        let net = self.network(ctx, "check-addresses").await?;
        let (held, live) = self.held_and_live(ctx, &net, "check-addresses").await?;
        let lost = leaked(&held, &live);
        let taken: BTreeSet<Ipv4Addr> = held.iter().map(|(a, _)| *a).collect();
        let free = net.addresses.iter().filter(|a| !taken.contains(a)).count();
        Ok(if free == 0 && !lost.is_empty() {
            Presence::Present(format!(
                "all {} addresses of network {} ({}) are reserved, {} of them for containers that no longer exist",
                net.addresses.len(),
                net.name,
                net.range,
                lost.len()
            ))
        } else {
            Presence::Absent(format!("network {} has {free} free addresses, {} reserved for containers that no longer exist", net.name, lost.len()))
        })
    }
}

impl CniBroken {
    /// The network containerd's CRI plugin sets pods up with, read from the node.
    async fn find_network(&self, ctx: &Ctx, step: &str) -> Result<Network, FaultError> {
        let check = |message: String| FaultError::Check { step: step.into(), message };
        let dir = ctx.containerd_config(step).await?.cni_conf_dir().to_string();
        let listing = ctx.run(step, Cmd::new(["ls", "-1", "--", dir.as_str()]).asks(CNI_CONF_DIR)).await?.stdout;
        let file = first_conf(&listing).ok_or_else(|| check(format!("{dir} has no CNI configuration (.conf, .conflist, .json)")))?;
        let path = format!("{dir}/{file}");
        let conf = ctx.run(step, Cmd::new(["cat", "--", path.as_str()]).asks(CNI_CONF)).await?.stdout;
        network(&path, &conf).map_err(check)
    }

    /// The network the fault took (from the journal), or the node's, read again.
    async fn network(&self, ctx: &Ctx, step: &str) -> Result<Network, FaultError> {
        match ctx.kept::<Network>("network") {
            Some(net) => Ok(net),
            None => self.find_network(ctx, step).await,
        }
    }

    /// Wait (at most [`GOING_AWAY_WITHIN`]) until no pod of another namespace on the run's node is being
    /// deleted: its sandbox holds an address until it is gone, and one it gives back after the
    /// reservation is free for the restarted pod, which then starts (CI, 2026-11-29: a scenario that had
    /// just ended on the node, its namespace deleted, gave back 2 addresses and the symptom never came).
    async fn wait_for_pods_going_away(&self, ctx: &Ctx, step: &str) -> Result<(), FaultError> {
        let deadline = tokio::time::Instant::now() + GOING_AWAY_WITHIN;
        let mut noted = false;
        loop {
            let namespaces: Vec<Namespace> = ctx.kube.list(None, None).await.map_err(Ctx::api_err(step))?;
            let on_node = format!("spec.nodeName={}", ctx.node.name());
            let pods: Vec<Pod> = ctx.kube.list_where(None, None, Some(&on_node)).await.map_err(Ctx::api_err(step))?;
            let going = going_away(&pods, &namespaces, ctx.node.name(), &ctx.namespace);
            if going.is_empty() {
                return Ok(());
            }
            if !noted {
                ctx.note(format!("wait for the pods being deleted on the node to give their addresses back: {}", going.join(", ")));
                noted = true;
            }
            if tokio::time::Instant::now() >= deadline {
                ctx.note(format!("pods on the node still being deleted after {GOING_AWAY_WITHIN:?}, their addresses not reserved: {}", going.join(", ")));
                return Ok(());
            }
            ctx.pause(Duration::from_secs(1)).await;
        }
    }

    /// The network's reservations, and the IDs of the sandboxes the runtime holds.
    async fn held_and_live(&self, ctx: &Ctx, net: &Network, step: &str) -> Result<(Vec<(Ipv4Addr, String)>, BTreeSet<String>), FaultError> {
        let held = reservations(&ctx.run(step, list_reservations(&net.reservations)).await?.stdout);
        let live = ctx.run(step, ctx.node.profile.crictl(["pods", "-q"]).asks(LIVE_SANDBOXES)).await?.stdout.lines().map(|l| l.trim().to_string()).filter(|l| !l.is_empty()).collect();
        Ok((held, live))
    }
}

#[async_trait]
impl Fix for CniBroken {
    type Step = Step;

    /// Releases the reservations no live sandbox holds; with none left, it does nothing (idempotent).
    async fn fix(&self, which: Step, ctx: &Ctx) -> Result<(), FaultError> {
        let step = super::steps::Steps::name(which);
        match which {
            Step::ReleaseLeakedAddresses => {
                let net = self.network(ctx, step).await?;
                let (held, live) = self.held_and_live(ctx, &net, step).await?;
                let lost = leaked(&held, &live);
                if lost.is_empty() {
                    return Ok(());
                }
                ctx.note(format!("release {} addresses reserved for containers the runtime does not have", lost.len()));
                let mut argv = vec!["rm".to_string(), "-f".into(), "--".into()];
                argv.extend(lost.iter().map(|a| format!("{}/{a}", net.reservations)));
                ctx.run(step, Cmd::new(argv)).await.map(drop)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::faults::testing::plan_ctx;
    use crate::node::ContainerdConfig;

    const BRIDGE: &str = r#"{"cniVersion":"0.4.0","name":"faultlab","plugins":[{"type":"bridge","bridge":"cni0",
        "ipam":{"type":"host-local","dataDir":"/var/lib/faultlab/cni/networks","ranges":[[{"subnet":"198.19.160.0/24","gateway":"198.19.160.1"}]]}},
        {"type":"portmap","capabilities":{"portMappings":true}}]}"#;

    #[test]
    fn the_test_beds_network_has_253_addresses_in_its_own_data_dir() {
        let net = network("/x/10-faultlab.conflist", BRIDGE).unwrap();
        assert_eq!(net.name, "faultlab");
        assert_eq!(net.reservations, "/var/lib/faultlab/cni/networks/faultlab");
        assert_eq!(net.addresses.len(), 253);
        assert_eq!(net.addresses.first(), Some(&Ipv4Addr::new(198, 19, 160, 2)));
        assert_eq!(net.addresses.last(), Some(&Ipv4Addr::new(198, 19, 160, 254)));
        assert_eq!(net.range, "198.19.160.1-198.19.160.254");
    }

    #[test]
    fn a_single_plugin_conf_with_the_old_range_and_default_data_dir() {
        let conf = r#"{"name":"net","type":"ptp","ipam":{"type":"host-local","subnet":"198.18.5.0/29","rangeStart":"198.18.5.3"}}"#;
        let net = network("a.conf", conf).unwrap();
        assert_eq!(net.reservations, "/var/lib/cni/networks/net");
        // .3 to .6: the gateway (.1 by default) is outside the range anyway.
        assert_eq!(net.addresses, ["198.18.5.3", "198.18.5.4", "198.18.5.5", "198.18.5.6"].map(|a| a.parse::<Ipv4Addr>().unwrap()));
    }

    #[rstest::rstest]
    #[case::not_json("{", "is not JSON")]
    #[case::no_name(r#"{"plugins":[]}"#, "names no network")]
    #[case::no_host_local(r#"{"name":"n","plugins":[{"type":"bridge","ipam":{"type":"dhcp"}}]}"#, "has no host-local address management")]
    #[case::ipv6_only(r#"{"name":"n","plugins":[{"ipam":{"type":"host-local","ranges":[[{"subnet":"fd00::/64"}]]}}]}"#, "has no IPv4 range")]
    #[case::too_large(r#"{"name":"n","plugins":[{"ipam":{"type":"host-local","ranges":[[{"subnet":"198.18.0.0/16"}]]}}]}"#, "more than 4096 addresses")]
    #[case::relative_dir(r#"{"name":"n","plugins":[{"ipam":{"type":"host-local","dataDir":"x","ranges":[[{"subnet":"198.18.0.0/24"}]]}}]}"#, "not an absolute directory")]
    fn networks_it_cannot_fill_are_refused(#[case] conf: &str, #[case] why: &str) {
        let err = network("f.conflist", conf).unwrap_err();
        assert!(err.contains(why), "{err}");
    }

    /// containerd's CNI configuration directory, from its config `file` (`config`, its text): the key of
    /// the file's version (`plugins."io.containerd.grpc.v1.cri".cni.conf_dir` in version 2,
    /// `plugins."io.containerd.cri.v1.runtime".cni.conf_dir` in version 3), else containerd's default. An
    /// error names the file and the field.
    fn conf_dir(file: &str, config: &str) -> Result<String, String> {
        ContainerdConfig::parse(file, config).map(|c| c.cni_conf_dir().to_string()).map_err(|e| e.to_string())
    }

    #[test]
    fn containerds_conf_dir_or_its_default() {
        let file = "/etc/containerd/config.toml";
        assert_eq!(conf_dir(file, "version = 2\n").unwrap(), "/etc/cni/net.d");
        assert_eq!(conf_dir(file, "version = 3\n").unwrap(), "/etc/cni/net.d");
        assert_eq!(conf_dir(file, "").unwrap(), "/etc/cni/net.d");
        let tb = "version = 2\n[plugins]\n  [plugins.\"io.containerd.grpc.v1.cri\"]\n    [plugins.\"io.containerd.grpc.v1.cri\".cni]\n      conf_dir = \"/var/lib/faultlab/testbed/cni/net.d\"\n";
        assert_eq!(conf_dir(file, tb).unwrap(), "/var/lib/faultlab/testbed/cni/net.d");
        let err = conf_dir(file, "[plugins").unwrap_err();
        assert!(err.starts_with("containerd's config /etc/containerd/config.toml is not TOML"), "{err}");
        let err = conf_dir(file, "version = 2\n[plugins.\"io.containerd.grpc.v1.cri\".cni]\nconf_dir = 3\n").unwrap_err();
        assert_eq!(err, "containerd's config /etc/containerd/config.toml: plugins.\"io.containerd.grpc.v1.cri\".cni.conf_dir is 3, not an absolute path");
    }

    /// containerd 2's own config (`version = 3`, the test bed's containerd 2 node's): the directory is
    /// under the CRI runtime plugin; version 2's key in such a file is ignored, by containerd and here.
    #[test]
    fn containerd_2s_conf_dir_in_a_version_3_config() {
        let file = "/var/lib/faultlab/testbed/containerd/config.toml";
        let v3 = include_str!("../../tests/fixtures/containerd/testbed-v3.toml");
        assert_eq!(conf_dir(file, v3).unwrap(), "/var/lib/faultlab/testbed/cni/net.d");
        let v3 = "version = 3\n[plugins.'io.containerd.cri.v1.runtime'.cni]\n  conf_dir = '/etc/kubernetes/cni/net.d'\n";
        assert_eq!(conf_dir(file, v3).unwrap(), "/etc/kubernetes/cni/net.d");
        let v2_key = "version = 3\n[plugins.\"io.containerd.grpc.v1.cri\".cni]\n  conf_dir = \"/x\"\n";
        assert_eq!(conf_dir(file, v2_key).unwrap(), "/etc/cni/net.d");
        let err = conf_dir(file, "version = 3\n[plugins.\"io.containerd.cri.v1.runtime\".cni]\n  conf_dir = \"net.d\"\n").unwrap_err();
        assert_eq!(err, format!("containerd's config {file}: plugins.\"io.containerd.cri.v1.runtime\".cni.conf_dir is \"net.d\", not an absolute path"));
    }

    #[test]
    fn containerd_loads_the_first_configuration_by_name() {
        assert_eq!(first_conf("99-z.conf\n10-kindnet.conflist\nREADME\n").as_deref(), Some("10-kindnet.conflist"));
        assert_eq!(first_conf("README\n"), None);
    }

    #[test]
    fn leaked_are_the_reservations_no_live_sandbox_holds() {
        let held = reservations("198.18.0.2 abc\n198.18.0.3 faultlab-leaked-address\nlock \nlast_reserved_ip.0 198.18.0.3\n");
        assert_eq!(held.len(), 2, "only files named by an address");
        let live: BTreeSet<String> = ["abc".to_string()].into();
        assert_eq!(leaked(&held, &live), [Ipv4Addr::new(198, 18, 0, 3)]);
    }

    #[test]
    fn the_pods_going_away_are_another_namespace_s_being_deleted_on_the_node() {
        let pod = |ns: &str, name: &str, node: &str, deleted: bool| -> Pod {
            serde_json::from_value(serde_json::json!({
                "metadata": {"namespace": ns, "name": name, "deletionTimestamp": deleted.then_some("2026-11-29T22:40:28Z")},
                "spec": {"nodeName": node, "containers": []},
            }))
            .unwrap()
        };
        let namespace = |name: &str, deleted: bool| -> Namespace {
            serde_json::from_value(serde_json::json!({"metadata": {"name": name, "deletionTimestamp": deleted.then_some("2026-11-29T22:40:28Z")}})).unwrap()
        };
        let pods = [
            pod("fl-before", "web-1", "node-1", true),
            pod("fl-before", "web-2", "node-2", true),
            pod("fl-before", "web-3", "node-1", false),
            pod("fl-run", "web-4", "node-1", true),
            pod("fl-ended", "web-5", "node-1", false),
        ];
        let namespaces = [namespace("fl-before", false), namespace("fl-run", false), namespace("fl-ended", true)];
        assert_eq!(
            going_away(&pods, &namespaces, "node-1", "fl-run"),
            ["fl-before/web-1", "fl-ended/web-5"],
            "a pod being deleted, or in a namespace being deleted; not the run's own, not another node's"
        );
    }

    /// Pods of another run that never go: inject waits out [`GOING_AWAY_WITHIN`], and the run counts
    /// those pauses as waiting on the cluster, not as its own time.
    #[tokio::test(start_paused = true)]
    async fn waiting_for_pods_going_away_is_waiting_on_the_cluster() {
        let (mut ctx, _) = crate::faults::testing::ctx();
        let node = ctx.node.name().to_string();
        let pod = serde_json::json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"namespace": "fl-before", "name": "web-1", "deletionTimestamp": "2026-11-29T22:40:28Z"}, "spec": {"nodeName": node, "containers": []}});
        ctx.kube = crate::kube_ops::Kube::scripted(ctx.rec().clone(), vec![("/api/v1/pods".into(), serde_json::json!([pod]))]);
        let timed = crate::observe::Timed::new(ctx.observe.clone());
        let clock = timed.clock();
        ctx.observe = std::sync::Arc::new(timed);
        CniBroken::default().wait_for_pods_going_away(&ctx, "wait-for-pods-going-away").await.unwrap();
        let waited = *clock.lock().unwrap();
        assert!(waited >= GOING_AWAY_WITHIN - Duration::from_secs(1) && waited <= GOING_AWAY_WITHIN, "{waited:?}");
        let lines: Vec<String> = ctx.rec().entries().into_iter().map(|e| e.line).collect();
        assert!(lines.contains(&format!("GET /api/v1/pods?fieldSelector=spec.nodeName={node}")), "the server filters the node's pods: {lines:?}");
        assert!(lines.iter().any(|l| l.starts_with("pods on the node still being deleted after 90s") && l.ends_with("fl-before/web-1")), "{lines:?}");
    }

    #[test]
    fn node_scripts_are_argv_data() {
        let cmd = reserve_free("/var/lib/cni/networks/n", LEAK_ID, &[Ipv4Addr::new(198, 18, 0, 2), Ipv4Addr::new(198, 18, 0, 3)]);
        assert_eq!(&cmd.argv[3..], ["sh", "/var/lib/cni/networks/n", LEAK_ID, "198.18.0.2", "198.18.0.3"]);
        assert!(cmd.argv[2].contains("set -C"), "an address taken meanwhile is not overwritten");
        let undo = remove_held_by("/d", LEAK_ID);
        assert_eq!(&undo.argv[3..], ["sh", "/d", LEAK_ID]);
    }

    /// The scripts, run by a real shell on a directory of this machine, as host-local lays it out.
    #[test]
    fn reserve_list_and_remove_on_a_real_directory() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path().join("net");
        std::fs::create_dir(&d).unwrap();
        std::fs::write(d.join("198.18.0.2"), "live-id\r\neth0").unwrap();
        std::fs::write(d.join("last_reserved_ip.0"), "198.18.0.2").unwrap();
        std::fs::write(d.join("lock"), "").unwrap();
        // A reservation written without the \r is its holder's too.
        std::fs::write(d.join("198.18.0.9"), format!("{LEAK_ID}\neth0")).unwrap();
        let run = |cmd: Cmd| {
            let out = std::process::Command::new(&cmd.argv[0]).args(&cmd.argv[1..]).output().unwrap();
            assert!(out.status.success(), "{cmd:?}: {}", String::from_utf8_lossy(&out.stderr));
            String::from_utf8(out.stdout).unwrap()
        };
        let ds = d.to_str().unwrap();
        let all = [2, 3, 4].map(|n| Ipv4Addr::new(198, 18, 0, n));
        assert_eq!(run(reserve_free(ds, LEAK_ID, &all)).trim(), "2", "198.18.0.2 is the live pod's");
        assert_eq!(std::fs::read_to_string(d.join("198.18.0.2")).unwrap(), "live-id\r\neth0");
        assert_eq!(std::fs::read_to_string(d.join("198.18.0.3")).unwrap(), format!("{LEAK_ID}\r\neth0"));
        let held = reservations(&run(list_reservations(ds)));
        assert_eq!(held, vec![(all[0], "live-id".into()), (all[1], LEAK_ID.into()), (all[2], LEAK_ID.into()), (Ipv4Addr::new(198, 18, 0, 9), LEAK_ID.into())]);
        run(take_over(ds, LEAK_ID, all[0]));
        run(remove_held_by(ds, LEAK_ID));
        let mut left: Vec<String> = std::fs::read_dir(&d).unwrap().map(|e| e.unwrap().file_name().into_string().unwrap()).collect();
        left.sort();
        assert_eq!(left, ["last_reserved_ip.0", "lock"]);
        let empty = dir.path().join("empty");
        std::fs::create_dir(&empty).unwrap();
        assert_eq!(run(list_reservations(empty.to_str().unwrap())), "", "no file, no reservation");
        run(remove_held_by(empty.to_str().unwrap(), LEAK_ID));
        assert_eq!(run(list_reservations("/nonexistent/faultlab")), "", "no directory, no reservation");
    }

    #[tokio::test]
    async fn plan_reads_the_network_reserves_leaks_the_pods_address_and_restarts() {
        let fault = CniBroken {};
        let (ctx, fake) = plan_ctx(&fault);
        fault.inject(&ctx).await.unwrap();
        let lines = fake.lines();
        assert!(lines[0].ends_with("cat -- /var/lib/faultlab/testbed/containerd.toml"), "containerd's config, from the node profile: {lines:?}");
        assert!(lines[1].ends_with("ls -1 -- /etc/cni/net.d"), "{lines:?}");
        assert!(lines[2].ends_with("cat -- /etc/cni/net.d/10-bridge.conflist"), "{lines:?}");
        assert!(lines[3].contains("set -C") && lines[3].contains("198.18.0.254"), "{lines:?}");
        assert!(lines[4].ends_with(&format!("/var/lib/cni/networks/pods {LEAK_ID} 198.18.0.2")), "{lines:?}");
        assert_eq!(lines.len(), 5);
        let journal = ctx.journal.snapshot();
        assert_eq!(journal.entries.len(), 1, "the undo is journalled before the first write");
        assert_eq!(ctx.kept::<Network>("network").unwrap().addresses.len(), 253);
        // The plan's node still lists the pod's reservation as its live sandbox's: nothing leaked there.
        assert!(matches!(fault.present(&ctx).await.unwrap(), Presence::Absent(_)));
        fault.fix(Step::ReleaseLeakedAddresses, &ctx).await.unwrap();
        assert!(!fake.lines().iter().any(|l| l.contains("rm -f")), "nothing to release: the step does nothing");
    }
}
