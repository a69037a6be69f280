//! Events: recorded from just before injection, de-duplicated by object and reason, normalised.
//!
//! A kube watcher follows core/v1 Events in the run's namespace and those about the node. Events that
//! existed before the watch began are the baseline and are left out, unless they occur again (their
//! count grows; a late write of repeats from before the watch is not an occurrence: [`late_flush`]). The normaliser replaces what differs from run to run (generated name suffixes, UIDs,
//! IPs, timestamps, durations, digests, container IDs, the namespace and node names) with placeholders,
//! so the list can be snapshot-asserted.

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::StreamExt;
use k8s_openapi::api::core::v1::Event;
use kube::api::Api;
use kube::runtime::watcher;
use kube::Client;
use regex::Regex;
use serde::{Deserialize, Serialize};
use thiserror::Error;
use tokio::sync::watch;

use crate::gates::EventGate;
use crate::record::{Channel, Recorder};

#[derive(Debug, Error)]
pub enum EventsError {
    #[error("within {within:?} these expected events were not seen: {}\nseen:\n{seen}", missing.join("; "))]
    Missing { within: Duration, missing: Vec<String>, seen: String },
    #[error("the event watch did not list the events already there within {within:?}, so it could not tell them from new ones")]
    Baseline { within: Duration },
    #[error("bad event pattern {pattern:?}: {source}")]
    Pattern {
        pattern: String,
        #[source]
        source: regex::Error,
    },
}

/// An event as seen, before normalisation.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Seen {
    pub kind: String,
    pub name: String,
    pub type_: String,
    pub reason: String,
    pub message: String,
    pub source: String,
    pub at: Instant,
    /// How many occurrences this sighting stands for: the rise of the event's count since it was last
    /// seen (1 for a new event or one repeat).
    pub occurrences: u32,
}

/// An event as snapshot: normalised.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Normalised {
    pub object: String,
    #[serde(rename = "type")]
    pub type_: String,
    pub reason: String,
    pub source: String,
    pub message: String,
}

/// The most events one log keeps. Whoever can create events in the namespace (or about the node) can
/// create any number of them; past this many a run's record is of no more use, and the rest would only
/// grow faultlab's memory. The count of those dropped is kept, and said in the report.
pub const MAX_EVENTS: usize = 20_000;

/// The most bytes of one event's message kept: the API server takes messages far longer than any a
/// component sends.
pub const MAX_MESSAGE: usize = 4096;

/// Events collected by a running watch.
#[derive(Clone)]
pub struct EventLog {
    seen: Arc<Mutex<Vec<Seen>>>,
    /// Events seen after [`MAX_EVENTS`] were kept.
    dropped: Arc<AtomicUsize>,
    changed: watch::Receiver<usize>,
    tasks: Arc<Mutex<Vec<tokio::task::JoinHandle<()>>>>,
    /// A plan's log: no watch feeds it, and each wait is written to this record and met at once.
    planned: Option<Recorder>,
}

impl EventLog {
    /// An empty log nothing feeds (unit tests).
    pub fn detached() -> (EventLog, impl Fn(Seen)) {
        let (tx, rx) = watch::channel(0usize);
        let seen = Arc::new(Mutex::new(Vec::new()));
        let dropped = Arc::new(AtomicUsize::new(0));
        let log = EventLog { seen: seen.clone(), dropped: dropped.clone(), changed: rx, tasks: Arc::default(), planned: None };
        let push = move |e: Seen| {
            if let Some(len) = keep(&seen, &dropped, e) {
                let _ = tx.send(len);
            }
        };
        (log, push)
    }

    /// A plan's log: the watch it stands for is written to `rec`, and so is each wait, which it meets
    /// at once (nothing is seen).
    pub fn planned(rec: Recorder, namespace: Option<&str>, node: &str) -> EventLog {
        let what = match namespace {
            Some(ns) => format!("watch /api/v1/namespaces/{ns}/events and events of node {node}"),
            None => format!("watch events of node {node}"),
        };
        rec.push(Channel::Wait, what);
        let (mut log, _) = Self::detached();
        log.planned = Some(rec);
        log
    }

    /// Start watching Events in `namespace` and those about node `node`, and return once both watches
    /// have listed what is already there (the baseline), so nothing that follows is mistaken for it.
    pub async fn start(client: Client, namespace: &str, node: &str) -> Result<EventLog, EventsError> {
        Self::start_watches(client, Some(namespace), node, BASELINE_WITHIN).await
    }

    /// Start watching only the Events about node `node` (after the same baseline).
    pub async fn start_node(client: Client, node: &str) -> Result<EventLog, EventsError> {
        Self::start_watches(client, None, node, BASELINE_WITHIN).await
    }

    async fn start_watches(client: Client, namespace: Option<&str>, node: &str, within: Duration) -> Result<EventLog, EventsError> {
        let (ready_tx, mut ready_rx) = tokio::sync::mpsc::channel::<()>(2);
        let (tx, rx) = watch::channel(0usize);
        let tx = Arc::new(tx);
        let seen = Arc::new(Mutex::new(Vec::new()));
        let dropped = Arc::new(AtomicUsize::new(0));
        let log = EventLog { seen: seen.clone(), dropped: dropped.clone(), changed: rx, tasks: Arc::default(), planned: None };
        let node_api: Api<Event> = Api::all(client.clone());
        let node_fields = format!("involvedObject.kind=Node,involvedObject.name={node}");
        let mut watches = vec![(node_api, watcher::Config::default().fields(&node_fields))];
        if let Some(namespace) = namespace {
            watches.push((Api::namespaced(client, namespace), watcher::Config::default()));
        }
        let count = watches.len();
        for (api, cfg) in watches {
            let seen = seen.clone();
            let dropped = dropped.clone();
            let tx = tx.clone();
            let ready = ready_tx.clone();
            let task = tokio::spawn(async move {
                // Each event's occurrences, and whether it had a series (events.k8s.io), as last seen.
                let mut baseline: HashMap<String, (i32, bool)> = HashMap::new();
                let began = jiff::Timestamp::now();
                let mut initial = true;
                let mut stream = watcher(api, cfg).boxed();
                while let Some(item) = stream.next().await {
                    let event = match item {
                        Ok(watcher::Event::InitApply(e)) if initial => {
                            baseline.insert(e.metadata.uid.clone().unwrap_or_default(), (occurrences(&e), e.series.is_some()));
                            continue;
                        }
                        Ok(watcher::Event::InitDone) => {
                            if initial {
                                let _ = ready.send(()).await;
                            }
                            initial = false;
                            continue;
                        }
                        Ok(watcher::Event::InitApply(e)) | Ok(watcher::Event::Apply(e)) => e,
                        Ok(_) => continue,
                        Err(e) => {
                            tracing::debug!("event watch: {e}");
                            tokio::time::sleep(Duration::from_millis(500)).await;
                            continue;
                        }
                    };
                    let uid = event.metadata.uid.clone().unwrap_or_default();
                    let count = occurrences(&event);
                    let (before, had_series) = baseline.get(&uid).copied().unwrap_or((0, false));
                    let flushed = late_flush(&event, had_series, began);
                    baseline.insert(uid, (count.max(before), event.series.is_some()));
                    if before >= count || flushed {
                        continue;
                    }
                    let s = Seen {
                        kind: event.involved_object.kind.clone().unwrap_or_default(),
                        name: event.involved_object.name.clone().unwrap_or_default(),
                        type_: event.type_.clone().unwrap_or_default(),
                        reason: event.reason.clone().unwrap_or_default(),
                        message: event.message.clone().unwrap_or_default(),
                        source: event
                            .source
                            .as_ref()
                            .and_then(|s| s.component.clone())
                            .or(event.reporting_component.clone())
                            .unwrap_or_default(),
                        at: Instant::now(),
                        occurrences: u32::try_from(count - before).unwrap_or(1),
                    };
                    if let Some(len) = keep(&seen, &dropped, s) {
                        let _ = tx.send(len);
                    }
                }
            });
            log.tasks.lock().unwrap().push(task);
        }
        drop(ready_tx);
        // Every baseline listed; without it an event that was already there would count as new.
        let listed = tokio::time::timeout(within, async {
            for _ in 0..count {
                ready_rx.recv().await;
            }
        })
        .await;
        if listed.is_err() {
            log.stop();
            return Err(EventsError::Baseline { within });
        }
        Ok(log)
    }

    /// Wait until no new event has arrived for `quiet` (at most `max`): the kubelet sends events
    /// asynchronously, so some of what a recovery caused arrive after the recovery itself was seen.
    pub async fn settle(&self, quiet: Duration, max: Duration) {
        if self.planned.is_some() {
            return;
        }
        let mut changed = self.changed.clone();
        let _ = tokio::time::timeout(max, async {
            while let Ok(Ok(())) = tokio::time::timeout(quiet, changed.changed()).await {}
        })
        .await;
    }

    pub fn stop(&self) {
        for t in self.tasks.lock().unwrap().drain(..) {
            t.abort();
        }
    }

    pub fn seen(&self) -> Vec<Seen> {
        self.seen.lock().unwrap().clone()
    }

    /// How many events were seen and not kept, past [`MAX_EVENTS`].
    pub fn dropped(&self) -> usize {
        self.dropped.load(Ordering::Relaxed)
    }

    /// The report's note when events were dropped.
    pub fn dropped_note(&self) -> Option<String> {
        let n = self.dropped();
        (n > 0).then(|| format!("the run's event record kept the first {MAX_EVENTS} events and dropped {n} more: the snapshot and the timeline lack them"))
    }

    /// Wait until every gate is matched by some event, or fail with what was seen.
    pub async fn wait_for(&self, gates: &[(EventGate, Regex)], within: Duration) -> Result<(), EventsError> {
        if let Some(rec) = &self.planned {
            for (g, re) in gates {
                rec.push(Channel::Wait, format!("event {} matching /{}/", g.reason, re.as_str()));
            }
            return Ok(());
        }
        let deadline = tokio::time::Instant::now() + within;
        let mut changed = self.changed.clone();
        loop {
            let missing = missing(gates, &self.seen());
            if missing.is_empty() {
                return Ok(());
            }
            match tokio::time::timeout_at(deadline, changed.changed()).await {
                Ok(Ok(())) => continue,
                _ => {
                    use crate::terminal::field;
                    let seen = self
                        .seen()
                        .iter()
                        .map(|s| format!("  {} {}/{} {}: {}", field(&s.type_), field(&s.kind), field(&s.name), field(&s.reason), field(&s.message)))
                        .collect::<Vec<_>>();
                    return Err(EventsError::Missing { within, missing, seen: seen.join("\n") });
                }
            }
        }
    }
}

/// Keep `s` in `seen` unless [`MAX_EVENTS`] are kept already (then count it in `dropped`), its message
/// cut to [`MAX_MESSAGE`] bytes. The number kept, if it was kept.
fn keep(seen: &Mutex<Vec<Seen>>, dropped: &AtomicUsize, mut s: Seen) -> Option<usize> {
    let mut g = seen.lock().unwrap_or_else(|p| p.into_inner());
    if g.len() >= MAX_EVENTS {
        dropped.fetch_add(1, Ordering::Relaxed);
        return None;
    }
    if s.message.len() > MAX_MESSAGE {
        let mut end = MAX_MESSAGE;
        while !s.message.is_char_boundary(end) {
            end -= 1;
        }
        let more = s.message.len() - end;
        s.message.truncate(end);
        s.message.push_str(&format!("... ({more} bytes more dropped)"));
    }
    g.push(s);
    Some(g.len())
}

/// How long the watches may take to list the events already there.
pub const BASELINE_WITHIN: Duration = Duration::from_secs(20);

/// Is this write of an event that already had a series (events.k8s.io/v1, the scheduler's) a late
/// write of repeats that all came before the watch began? client-go's event library writes a series'
/// first repeat at once, but the later ones only when it refreshes the series (every 30 minutes) or
/// finishes it (6 minutes after its last repeat), each with the series' last observed time. CI's test
/// bed: volume-multi-attach's pod was refused once by the scheduler at setup ("unbound immediate
/// PersistentVolumeClaims", its claim not bound yet), the repeat's count was written 7 minutes later,
/// during recovery, and counted as a new occurrence. The time is the control plane's clock against
/// this machine's: the same clock on the test bed and kind.
pub fn late_flush(event: &Event, had_series: bool, began: jiff::Timestamp) -> bool {
    had_series && event.series.as_ref().and_then(|s| s.last_observed_time.as_ref()).is_some_and(|t| t.0 < began)
}

/// How often an event has occurred. Events written through core/v1 count in `count`; those written
/// through events.k8s.io/v1 (the scheduler's, from 1.19 on) keep `count` unset and count the repeats
/// after the first in `series.count`: client-go's event library patches the first repeat in with
/// `series.count: 1` (seen on the test bed: a FailedScheduling created before the watch's baseline,
/// then patched with series count 1), so the occurrences are the first one plus the series.
pub fn occurrences(event: &Event) -> i32 {
    let series = event.series.as_ref().and_then(|s| s.count).unwrap_or(0);
    event.count.filter(|c| *c > 0).unwrap_or(1) + series
}

fn missing(gates: &[(EventGate, Regex)], seen: &[Seen]) -> Vec<String> {
    gates
        .iter()
        .filter(|(g, re)| {
            !seen.iter().any(|s| s.reason == g.reason && g.type_.as_ref().is_none_or(|t| *t == s.type_) && re.is_match(&s.message))
        })
        .map(|(g, _)| format!("{} /{}/", g.reason, g.message))
        .collect()
}

/// Compile gates with their `${...}` variables substituted.
pub fn compile(gates: &[EventGate], vars: &crate::vars::Vars) -> Result<Vec<(EventGate, Regex)>, EventsError> {
    gates
        .iter()
        .map(|g| {
            let pattern = vars.regex(&g.message);
            Regex::new(&pattern).map(|re| (g.clone(), re)).map_err(|source| EventsError::Pattern { pattern, source })
        })
        .collect()
}

/// The scheduler's `0/N nodes are available: ...` as it reads on a cluster of the run's node alone: on a
/// cluster of several nodes the run pins its workload to its node (`faultlab run --jobs`), so the other
/// nodes add a `didn't match node selector` clause and raise the counts. Without that clause, with
/// every count 1, the message is what a single-node cluster says (where this changes nothing), so one
/// snapshot holds for both.
fn as_one_node(message: &str) -> String {
    static TOTAL: std::sync::LazyLock<Regex> = std::sync::LazyLock::new(|| Regex::new(r"^0/\d+ nodes are available: ").expect("valid"));
    static PINNED: std::sync::LazyLock<Regex> =
        std::sync::LazyLock::new(|| Regex::new(r"(: |, )\d+ node\(s\) didn't match (node selector|Pod's node affinity(/selector)?)").expect("valid"));
    static COUNT: std::sync::LazyLock<Regex> = std::sync::LazyLock::new(|| Regex::new(r"(: |, )\d+ ").expect("valid"));
    if !TOTAL.is_match(message) {
        return message.to_string();
    }
    let rest = &message[TOTAL.find(message).map_or(0, |m| m.end()) - 2..];
    let rest = PINNED.replace_all(rest, "");
    let rest = rest.strip_prefix(", ").map(|r| format!(": {r}")).unwrap_or_else(|| rest.into_owned());
    // Schedulers from 1.25 repeat the count after the reason (`. preemption: 0/3 nodes are available:
    // 3 Preemption is not helpful for scheduling.`; platform-wording.md N5): every total reads as one node's.
    static AGAIN: std::sync::LazyLock<Regex> = std::sync::LazyLock::new(|| Regex::new(r"\b0/\d+ nodes are available").expect("valid"));
    let rest = COUNT.replace_all(&rest, "${1}1 ");
    format!("0/1 nodes are available{}", AGAIN.replace_all(&rest, "0/1 nodes are available"))
}

/// Replaces what differs between runs.
pub struct Normaliser {
    literal: Vec<(String, String)>,
    rules: Vec<(Regex, &'static str)>,
}

/// The alphabet Kubernetes uses for generated name suffixes (no vowels, no 0, 1, 3).
const SUFFIX: &str = "[bcdfghjklmnpqrstvwxz2456789]";

impl Normaliser {
    /// `namespace` and `node` are replaced by `<namespace>` and `<node>`.
    pub fn new(namespace: &str, node: &str) -> Self {
        let rules: Vec<(&str, &'static str)> = vec![
            (r"\b\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}:\d{2}(\.\d+)?( ?(Z|[+-]\d{2}:?\d{2}))?( [A-Z]{3,4})?", "<time>"),
            (r"sha256:[0-9a-f]{64}", "sha256:<digest>"),
            (r"[0-9a-f]{64}", "<id>"),
            (r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}", "<uid>"),
            (r"/new-\d+", "/new-<n>"),
            (r"\b\d{1,3}\.\d{1,3}\.\d{1,3}\.\d{1,3}:\d+\b", "<ip>:<port>"),
            // IPv6 with a port, as Go writes it (`[::1]:53`, `[fd00::1]:56359`; seen on a node without a
            // name server, whose resolver falls back to [::1]:53 from a random local port).
            (r"\[[0-9A-Fa-f]*:[0-9A-Fa-f:.]*\]:\d+\b", "<ip>:<port>"),
            (r"\b\d{1,3}\.\d{1,3}\.\d{1,3}\.\d{1,3}\b", "<ip>"),
            (r"\b\d+(\.\d+)?(ms|s|m|h)(\d+(\.\d+)?(ms|s|m))*\b", "<duration>"),
            (r"\bpid[ =]\d+", "pid <n>"),
            // containerd's overlayfs snapshotter prepares a snapshot with two mkdirs (a temporary
            // directory `new-N`, then `new-N/fs`; snapshots/overlay/overlay.go, prepareDirectory). On a
            // full disk either can be the one that fails, depending on whether ext4 had a block left
            // at that moment (both seen on the test bed for disk-full), so the two read as one.
            (
                r"failed to create prepare snapshot dir: (?:failed to create temp dir: )?mkdir (\S+)/new-<n>(?:/fs)?: ",
                "failed to create prepare snapshot dir: mkdir ${1}/new-<n>[/fs]: ",
            ),
            // On a full disk, which of containerd's first writes for a new sandbox fails is a matter of
            // which needs a block first: the snapshot's directories (the only one containerd 1.6 was seen
            // to fail) or, with containerd 2, the sandbox's record in its metadata store (bolt grows its
            // file) or the sandbox's root directory (all three seen on the containerd 2 test bed for
            // disk-full, one run to the next). Any of them reads as one.
            (
                r#"desc = (?:failed to start sandbox "<id>": )?(?:unable to save sandbox "<id>" to sandbox store: write (\S+)/io\.containerd\.metadata\.v1\.bolt/meta\.db|failed to create containerd container: failed to create prepare snapshot dir: mkdir (\S+)/io\.containerd\.snapshotter\.v1\.overlayfs/snapshots/new-<n>\[/fs\]|failed to create sandbox root directory "(\S+)/io\.containerd\.grpc\.v1\.cri/sandboxes/<id>": mkdir \S+): no space left on device"#,
                "desc = <a write of the new sandbox under ${1}${2}${3}>: no space left on device",
            ),
            // Newer kubelets' words for the same thing, within one platform name (scenarios/
            // platform-wording.md): `Created container: app` arrived in patch releases of 1.29 to 1.31
            // (1.20 and older patches say `Created container app`); the pulled image's size (1.30 on)
            // is the image's, not the fault's; client-go's aggregator prefixes an event it folded.
            (r"^Created container: ", "Created container "),
            (r"Image size: \d+ bytes", "Image size: <n> bytes"),
            (r"^\(combined from similar events\): ", ""),
            // 1.35 (and 1.33/1.34 with its feature gate) adds to a present image that the pod may use
            // it (N2); under systemd's cgroup driver a pod's slice writes its UID with underscores (N7).
            (r" already present on machine and can be accessed by the pod", " already present on machine"),
            (r"\bpod[0-9a-f]{8}(_[0-9a-f]{4}){3}_[0-9a-f]{12}", "pod<uid>"),
        ];
        let mut compiled: Vec<(Regex, &'static str)> = rules.into_iter().map(|(p, r)| (Regex::new(p).expect("valid rule"), r)).collect();
        // Generated names: deployment pods (<rs-hash>-<id>), replica sets and jobs (<hash>), others (<id>).
        // A name ends at anything but a lowercase letter or digit (CRI names continue with `_`). They go
        // before the durations: a pod's random suffix can read as one (`2m45s`, seen on the test bed as
        // `web-<hash>-<duration>`).
        let end = r"([^a-z0-9]|$)";
        let names = [
            (format!(r"-{SUFFIX}{{6,10}}-{SUFFIX}{{5}}{end}"), "-<hash>-<id>${1}"),
            (format!(r"-{SUFFIX}{{5}}{end}"), "-<id>${1}"),
            (format!(r"-{SUFFIX}{{8,10}}{end}"), "-<hash>${1}"),
        ];
        let at = compiled.iter().position(|(_, to)| *to == "<duration>").expect("the duration rule");
        compiled.splice(at..at, names.into_iter().map(|(p, r)| (Regex::new(&p).expect("valid rule"), r)));
        let mut literal = vec![(namespace.to_string(), "<namespace>".to_string())];
        if !node.is_empty() {
            literal.push((node.to_string(), "<node>".to_string()));
        }
        Normaliser { literal, rules: compiled }
    }

    pub fn text(&self, input: &str) -> String {
        let mut s = as_one_node(input);
        for (from, to) in &self.literal {
            if !from.is_empty() {
                s = s.replace(from.as_str(), to);
            }
        }
        for (re, to) in &self.rules {
            s = re.replace_all(&s, *to).into_owned();
        }
        // The test bed's nodes after the first each have a cgroup root of their own, named for the
        // node (`/sys/fs/cgroup/memory/faultlab-node-2/kubepods/...`); node 1 and kind nodes use the
        // root. Seen for memory-limit-unit on node 2 of the 3-node bed (2026-11-26).
        // Likewise their directories on the test bed (`/var/lib/faultlab/testbed/nodes/faultlab-node-2/cni/bin`
        // where node 1 has `/var/lib/faultlab/testbed/cni/bin`; the same under /run/faultlab and
        // /var/lib/faultlab): seen in CI for cni-plugin-missing when the pod landed on node 2 or 3 of the
        // 3-node bed (2026-11-27).
        static NODE_DIR: std::sync::LazyLock<Regex> = std::sync::LazyLock::new(|| Regex::new(r"(/faultlab(?:/testbed)?)/nodes/<node>/").expect("valid"));
        NODE_DIR.replace_all(&s.replace("/<node>/kubepods/", "/kubepods/"), "${1}/").into_owned()
    }

    /// Normalise, de-duplicate by object and reason, and sort. Of one object's messages with the same
    /// reason, the first that a symptom event of that reason matches (`prefer`, [`compile`]d) stands,
    /// else the first seen: the kubelet gives one reason several messages (`Failed`: `Failed to pull
    /// image ...`, then `Error: ErrImagePull`), which arrive in either order. Transient events (see
    /// [`TRANSIENT`]) and the scenario's ignored reasons are left out.
    pub fn events(&self, seen: &[Seen], ignore_reasons: &[String], prefer: &[(EventGate, Regex)]) -> Vec<Normalised> {
        let mut by_key: BTreeMap<(String, String), (bool, Normalised)> = BTreeMap::new();
        let mut ordered: Vec<&Seen> = seen.iter().collect();
        ordered.sort_by_key(|s| s.at);
        for s in ordered {
            if ignore_reasons.contains(&s.reason) || is_transient(s) {
                continue;
            }
            let object = format!("{}/{}", s.kind, self.text(&s.name));
            let preferred = prefer.iter().any(|(g, re)| g.reason == s.reason && re.is_match(&s.message));
            let entry = by_key.entry((object.clone(), s.reason.clone()));
            let new = || Normalised { object, type_: s.type_.clone(), reason: s.reason.clone(), source: s.source.clone(), message: self.text(&s.message) };
            match entry {
                std::collections::btree_map::Entry::Vacant(v) => {
                    v.insert((preferred, new()));
                }
                std::collections::btree_map::Entry::Occupied(mut o) if preferred && !o.get().0 => {
                    o.insert((true, new()));
                }
                std::collections::btree_map::Entry::Occupied(_) => {}
            }
        }
        by_key.into_values().map(|(_, n)| n).collect()
    }

    /// [`withheld`], with objects named as snapshots name them.
    pub fn withheld(&self, seen: &[Seen]) -> Vec<Withheld> {
        let mut out: Vec<Withheld> =
            withheld(seen).into_iter().map(|(source, kind, name, sent)| Withheld { object: format!("{kind}/{}", self.text(&name)), source, sent }).collect();
        out.sort();
        out.dedup_by(|a, b| a.object == b.object && a.source == b.source);
        out
    }
}

/// How many events one source may send about one object before client-go's event recorder holds
/// back the rest (tools/record/events_cache.go in Kubernetes 1.20: `defaultSpamBurst`), and how
/// often it gets one more (`defaultSpamQPS`, one every 5 minutes). The kubelet, the controller
/// manager and every other core/v1 recorder drop an event silently when the object has no token
/// left; each event it does send (a new one, or a repeat's count patched) takes one. The recorder
/// counts the repeats it held back all the same, so the next repeat it sends jumps its count.
/// Seen on the test bed (2026-11-26): a pod in ImagePullBackOff stopped getting events once its
/// Pulling, Failed and BackOff counts summed to 25 (04:16), while the kubelet kept pulling; five
/// minutes after the first, `Error: ImagePullBackOff` went from 6 to 21 in one write.
pub const SPAM_BURST: f64 = 25.0;
pub const SPAM_REFILL: Duration = Duration::from_secs(300);

/// An object whose events a source may have held back during the run (see [`SPAM_BURST`]). Names
/// the object as snapshots do.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Withheld {
    pub object: String,
    pub source: String,
    /// The events (creations and count patches) the run saw that source send about it.
    pub sent: u32,
}

/// The (source, kind, name, events sent) whose events were held back, as far as the sightings
/// tell: each one's token bucket is replayed from the times faultlab saw the events, full at the
/// first, one token per event sent, refilled at the recorder's rate. A bucket that fell below one
/// token could not send the next event until it refilled; a count that rose by more than one
/// between two sightings shows repeats held back.
pub fn withheld(seen: &[Seen]) -> Vec<(String, String, String, u32)> {
    let mut ordered: Vec<&Seen> = seen.iter().collect();
    ordered.sort_by_key(|s| s.at);
    struct Bucket {
        tokens: f64,
        last: Instant,
        sent: u32,
        held_back: bool,
    }
    let mut buckets: BTreeMap<(String, String, String), Bucket> = BTreeMap::new();
    for s in ordered {
        let key = (s.source.clone(), s.kind.clone(), s.name.clone());
        let b = buckets.entry(key).or_insert(Bucket { tokens: SPAM_BURST, last: s.at, sent: 0, held_back: false });
        let refill = s.at.saturating_duration_since(b.last).as_secs_f64() / SPAM_REFILL.as_secs_f64();
        b.tokens = ((b.tokens + refill).min(SPAM_BURST) - 1.0).max(0.0);
        b.last = s.at;
        b.sent += 1;
        b.held_back |= b.tokens < 1.0 || s.occurrences > 1;
    }
    buckets.into_iter().filter(|(_, b)| b.held_back).map(|((source, kind, name), b)| (source, kind, name, b.sent)).collect()
}

/// Events no scenario is about, which the kubelet sends now and then whatever the fault, and which it
/// retries by itself: (reason, part of the message). Left out of snapshots, so they cannot make one
/// flaky.
///
/// - `failed to sync secret cache` / `configmap cache`: the kubelet's watch-based secret and ConfigMap
///   managers give a new reflector one second to list before a mount fails, and the mount is retried
///   half a second later. The list can be refused at first by the API server's Node authorizer
///   (`User "system:node:..." cannot list resource "secrets"`), whose graph of which pod on which node
///   uses which secret lags behind the kubelet's own pod watch when a pod is replaced by a new one.
///   Seen on the test bed for a pod's service-account token when a fault restarts the workload
///   (default-route, pause-missing), in most fresh-clone CI runs.
pub const TRANSIENT: &[(&str, &str)] = &[
    ("FailedMount", "failed to sync secret cache: timed out waiting for the condition"),
    ("FailedMount", "failed to sync configmap cache: timed out waiting for the condition"),
    // The kubelet asked for a pod's claim before the API server's node authorizer had linked the pod,
    // just bound, to its node; the next try mounts it. Seen on the 3-node test bed (storageclass-missing,
    // the pod bound as soon as its claim was), 2026-11-26.
    ("FailedMount", "no relationship found between node"),
    // The container's process had exited and its shim was closing as the kubelet's kill reached it
    // (containerd's shim API over ttrpc); the kubelet kills the pod again and the next try finds it
    // stopped. Seen on the emulated arm64 node in CI (image-pull-secret-missing's teardown, 2026-11-26),
    // where a busy node widens the window.
    ("FailedKillPod", "ttrpc: closed"),
    // A node's "System OOM encountered, victim process: runc:[2:INIT]": memory-limit-unit's sandbox,
    // killed by its 2-byte limit in runc's init, which the kubelet's OOM watcher can report as the
    // node's. No document is about a system OOM, and a scenario that records node events and runs
    // beside memory-limit-unit on the same node caught it (cpu-count, ci/test at 189 commits, the
    // 3-node containerd 2 test bed).
    ("SystemOOM", "System OOM encountered"),
    // The kubelet's pod worker could not read the pod's status from its cache: the runtime had removed
    // a sandbox or container between the PLEG's list and its status call ("error determining status:
    // rpc error: code = NotFound desc = an error occurred when try to find sandbox: not found"). The
    // 1.20 kubelet's only FailedSync (pkg/kubelet/pod_workers.go), and the next relist has the status.
    // Seen once, on the emulated arm64 node in CI (cni-plugin-missing's recovery, 2026-11-30); any
    // scenario whose pods are replaced can meet it.
    ("FailedSync", "error determining status: rpc error: code = NotFound"),
];

/// What the kubelet says, whatever its event's reason, when it could not reach the container engine's
/// socket: the engine was restarting. A fix that restarts containerd (registry-x509's, as documented:
/// install the CA, restart the engine) leaves the socket gone for a moment, and whatever the kubelet
/// asked the engine then fails once and works on the next try: a pod sync's image inspect
/// (`InspectFailed`), the node's container garbage collection (`ContainerGCFailed`), and so on. Seen
/// on the emulated arm64 node in CI (2026-11-26), where the restart is slow enough for the kubelet's
/// loops to fall into it. No scenario's symptom is the engine being down; one that is would have to
/// gate on it, not on these events.
pub const ENGINE_UNREACHABLE: &str = "containerd.sock: connect: ";

fn is_transient(s: &Seen) -> bool {
    TRANSIENT.iter().any(|(reason, text)| s.reason == *reason && s.message.contains(text))
        || (s.source.starts_with("kubelet") && s.message.contains(ENGINE_UNREACHABLE))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_watch_that_cannot_list_what_is_there_is_an_error() {
        // An API server that takes every request and never answers.
        let (service, _handle) = tower_test::mock::pair::<http::Request<kube::client::Body>, http::Response<kube::client::Body>>();
        let client = kube::Client::new(service, "default");
        let e = EventLog::start_watches(client, Some("ns"), "node", Duration::from_millis(300)).await.err().expect("no baseline");
        assert!(matches!(e, EventsError::Baseline { .. }), "{e}");
    }

    #[test]
    fn transient_kubelet_events_are_left_out_and_the_real_one_stands() {
        let n = Normaliser::new("fl-x", "faultlab-node");
        let t = Instant::now();
        let seen = vec![
            seen("Pod", "web-1", "FailedMount", r#"MountVolume.SetUp failed for volume "default-token-abcde" : failed to sync secret cache: timed out waiting for the condition"#, t),
            seen("Pod", "web-1", "FailedMount", r#"MountVolume.SetUp failed for volume "cfg" : configmap "app-config" not found"#, t + Duration::from_secs(1)),
        ];
        let events = n.events(&seen, &[], &[]);
        assert_eq!(events.len(), 1);
        assert!(events[0].message.contains("not found"), "{events:?}");
        assert!(n.events(&seen[..1], &[], &[]).is_empty());
        let raced = tests::seen("Pod", "web-0", "FailedMount", "Unable to attach or mount volumes: unmounted volumes=[data]: error processing PVC fl-x/data-web-0: failed to fetch PVC from API server: persistentvolumeclaims \"data-web-0\" is forbidden: User \"system:node:faultlab-node-2\" cannot get resource \"persistentvolumeclaims\" in API group \"\" in the namespace \"fl-x\": no relationship found between node 'faultlab-node-2' and this object", t);
        assert!(n.events(&[raced], &[], &[]).is_empty(), "the node authorizer's race is transient");
        let oom = tests::seen("Node", "faultlab-node", "SystemOOM", "System OOM encountered, victim process: runc:[2:INIT], pid: 7019", t);
        assert!(n.events(&[oom], &[], &[]).is_empty(), "another scenario's sandbox OOM seen as the node's");
        let sync = tests::seen("Pod", "web-1", "FailedSync", "error determining status: rpc error: code = NotFound desc = an error occurred when try to find sandbox: not found", t);
        assert!(n.events(&[sync], &[], &[]).is_empty(), "a sandbox removed between the PLEG's list and its status");
        let down = tests::seen("Pod", "web-1", "FailedSync", "error determining status: rpc error: code = Unavailable desc = connection error", t);
        assert_eq!(n.events(&[down], &[], &[]).len(), 1, "only NotFound is the race");
    }

    fn seen(kind: &str, name: &str, reason: &str, message: &str, at: Instant) -> Seen {
        Seen { kind: kind.into(), name: name.into(), type_: "Warning".into(), reason: reason.into(), message: message.into(), source: "kubelet".into(), at, occurrences: 1 }
    }

    #[test]
    fn an_object_whose_25_events_came_at_once_may_have_had_more_held_back() {
        let t = Instant::now();
        let n = Normaliser::new("fl-x", "node");
        let at = |s: u64| t + Duration::from_secs(s);
        let pod = "web-7d9f8b6c4d-x2x4z";
        // 24 events sent within a minute: the bucket still has a token.
        let mut seen: Vec<Seen> = (0..24).map(|i| tests::seen("Pod", pod, "BackOff", "Back-off", at(i * 2))).collect();
        assert!(n.withheld(&seen).is_empty());
        // The 25th: now it has none.
        seen.push(tests::seen("Pod", pod, "Failed", "Error: ImagePullBackOff", at(60)));
        assert_eq!(n.withheld(&seen), vec![Withheld { object: "Pod/web-<hash>-<id>".into(), source: "kubelet".into(), sent: 25 }]);
        // The same 25 spread over two hours: one token back every 5 minutes keeps it from running out.
        let slow: Vec<Seen> = (0..25).map(|i| tests::seen("Pod", pod, "BackOff", "Back-off", at(i * 300))).collect();
        assert!(n.withheld(&slow).is_empty());
        // Budgets are per source and object: 13 about each of two pods is no one's 25.
        let two: Vec<Seen> = (0..26).map(|i| tests::seen("Pod", if i % 2 == 0 { "a" } else { "b" }, "BackOff", "Back-off", at(i))).collect();
        assert!(n.withheld(&two).is_empty());
        // A repeat whose count jumped (6 to 21, as on the test bed) shows repeats held back.
        let jumped = vec![tests::seen("Pod", pod, "Failed", "Error: ImagePullBackOff", at(0)), Seen { occurrences: 15, ..tests::seen("Pod", pod, "Failed", "Error: ImagePullBackOff", at(300)) }];
        assert_eq!(n.withheld(&jumped), vec![Withheld { object: "Pod/web-<hash>-<id>".into(), source: "kubelet".into(), sent: 2 }]);
    }

    #[test]
    fn a_nodes_own_cgroup_root_reads_as_the_root() {
        let n = Normaliser::new("fl-x", "faultlab-node-2");
        let on_node_2 = "unable to apply cgroup configuration: mkdir /sys/fs/cgroup/memory/faultlab-node-2/kubepods/burstable/pod0b9c6a4e-1f5e-4f0e-9d7a-2c1f3e4d5a6b/0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef: cannot allocate memory";
        let on_node_1 = on_node_2.replace("/faultlab-node-2/kubepods/", "/kubepods/");
        assert_eq!(n.text(on_node_2), n.text(&on_node_1));
        assert!(n.text(on_node_2).contains("/sys/fs/cgroup/memory/kubepods/burstable/pod<uid>/<id>"), "{}", n.text(on_node_2));
    }

    #[test]
    fn a_nodes_own_test_bed_directory_reads_as_node_1s() {
        let n = Normaliser::new("fl-x", "faultlab-node-3");
        let on_node_3 = r#"failed to find plugin "bridge" in path [/var/lib/faultlab/testbed/nodes/faultlab-node-3/cni/bin]"#;
        assert_eq!(n.text(on_node_3), r#"failed to find plugin "bridge" in path [/var/lib/faultlab/testbed/cni/bin]"#);
        let state = "open /run/faultlab/nodes/faultlab-node-3/containerd/io.containerd.runtime.v2.task/k8s.io/x/log.json: no such file or directory): /var/lib/faultlab/testbed/nodes/faultlab-node-3/runtime/runc did not terminate";
        assert_eq!(n.text(state), "open /run/faultlab/containerd/io.containerd.runtime.v2.task/k8s.io/x/log.json: no such file or directory): /var/lib/faultlab/testbed/runtime/runc did not terminate");
        // Another node's directory is not the pod's node: it stays, named.
        let other = r#"in path [/var/lib/faultlab/testbed/nodes/faultlab-node-2/cni/bin]"#;
        assert_eq!(n.text(other), other);
    }

    #[test]
    fn what_a_restarting_engine_or_a_closing_shim_caused_is_transient() {
        let n = Normaliser::new("fl-x", "node");
        let restarting = tests::seen("Pod", "web-0", "InspectFailed", r#"Failed to inspect image "198.18.214.2:5443/faultlab/busybox:1": rpc error: code = Unavailable desc = connection error: desc = "transport: Error while dialing dial unix /run/faultlab/containerd/containerd.sock: connect: no such file or directory""#, Instant::now());
        assert!(n.events(&[restarting], &[], &[]).is_empty(), "containerd restarting is transient");
        let gc = tests::seen("Node", "node", "ContainerGCFailed", r#"rpc error: code = Unavailable desc = connection error: desc = "transport: Error while dialing dial unix /run/faultlab/containerd/containerd.sock: connect: no such file or directory""#, Instant::now());
        assert!(n.events(&[gc], &[], &[]).is_empty(), "whatever the kubelet asked the restarting engine");
        let refused = tests::seen("Node", "node", "ContainerGCFailed", r#"rpc error: code = Unavailable desc = connection error: desc = "transport: Error while dialing dial unix /run/containerd/containerd.sock: connect: connection refused""#, Instant::now());
        assert!(n.events(&[refused], &[], &[]).is_empty(), "kind's socket, refused as containerd starts");
        let gc_other = tests::seen("Node", "node", "ContainerGCFailed", "rpc error: code = DeadlineExceeded desc = context deadline exceeded", Instant::now());
        assert_eq!(n.events(&[gc_other], &[], &[]).len(), 1, "another GC failure stands");
        let other = tests::seen("Pod", "web-0", "InspectFailed", r#"Failed to inspect image "x": rpc error: code = Unknown desc = invalid image"#, Instant::now());
        assert_eq!(n.events(&[other], &[], &[]).len(), 1, "any other inspect failure stands");
        let kill = tests::seen("Pod", "web-0", "FailedKillPod", r#"error killing pod: failed to "KillContainer" for "app" with KillContainerError: "rpc error: code = Unknown desc = failed to kill container \"0123\": ttrpc: closed: unknown""#, Instant::now());
        assert!(n.events(&[kill], &[], &[]).is_empty());
    }

    #[test]
    fn a_pinned_pods_scheduling_failure_reads_as_on_its_node_alone() {
        let one = "0/1 nodes are available: 1 node(s) had taint {node.kubernetes.io/unreachable: }, that the pod didn't tolerate.";
        assert_eq!(as_one_node(one), one, "a single-node cluster's message is left as it is");
        let three = "0/3 nodes are available: 1 node(s) had taint {node.kubernetes.io/unreachable: }, that the pod didn't tolerate, 2 node(s) didn't match node selector.";
        assert_eq!(as_one_node(three), one);
        let first = "0/3 nodes are available: 2 node(s) didn't match node selector, 1 node(s) had taint {node.kubernetes.io/not-ready: }, that the pod didn't tolerate.";
        assert_eq!(as_one_node(first), "0/1 nodes are available: 1 node(s) had taint {node.kubernetes.io/not-ready: }, that the pod didn't tolerate.");
        assert_eq!(as_one_node("0/3 nodes are available: 3 pod has unbound immediate PersistentVolumeClaims."), "0/1 nodes are available: 1 pod has unbound immediate PersistentVolumeClaims.");
        assert_eq!(as_one_node("Back-off pulling image"), "Back-off pulling image");
        // 1.25 and later: the preemption part repeats the total (N5).
        let newer = "0/3 nodes are available: 3 node(s) had untolerated taint {node.kubernetes.io/not-ready: }. preemption: 0/3 nodes are available: 3 Preemption is not helpful for scheduling.";
        assert_eq!(
            as_one_node(newer),
            "0/1 nodes are available: 1 node(s) had untolerated taint {node.kubernetes.io/not-ready: }. preemption: 0/1 nodes are available: 1 Preemption is not helpful for scheduling."
        );
        let unbound = "0/1 nodes are available: pod has unbound immediate PersistentVolumeClaims. preemption: 0/1 nodes are available: 1 Preemption is not helpful for scheduling.";
        assert_eq!(as_one_node(unbound), unbound);
        assert_eq!(Normaliser::new("fl-x-abcde", "faultlab-node-2").text(three), one);
    }

    #[test]
    fn normalises_what_differs_between_runs() {
        let n = Normaliser::new("fl-pause-missing-x7k2p", "faultlab-node");
        let cases = [
            (
                r#"Failed to create pod sandbox: rpc error: code = Unknown desc = failed to get sandbox image "faultlab.invalid/cce-pause:3.1": failed to pull image "faultlab.invalid/cce-pause:3.1": failed to pull and unpack image "faultlab.invalid/cce-pause:3.1": failed to resolve reference "faultlab.invalid/cce-pause:3.1": failed to do request: Head "https://faultlab.invalid/v2/cce-pause/manifests/3.1": dial tcp: lookup faultlab.invalid on 10.213.0.1:53: no such host"#,
                r#"Failed to create pod sandbox: rpc error: code = Unknown desc = failed to get sandbox image "faultlab.invalid/cce-pause:3.1": failed to pull image "faultlab.invalid/cce-pause:3.1": failed to pull and unpack image "faultlab.invalid/cce-pause:3.1": failed to resolve reference "faultlab.invalid/cce-pause:3.1": failed to do request: Head "https://faultlab.invalid/v2/cce-pause/manifests/3.1": dial tcp: lookup faultlab.invalid on <ip>:<port>: no such host"#,
            ),
            (
                "Successfully assigned fl-pause-missing-x7k2p/web-6d4cf56db6-vw2zq to faultlab-node",
                "Successfully assigned <namespace>/web-<hash>-<id> to <node>",
            ),
            (
                r#"Error: failed to reserve container name "worker_web-0_fl-pause-missing-x7k2p_0b5bd2a6-4c52-4b8d-a1e2-5cc3c5be61f0_1": name "worker_web-0_fl-pause-missing-x7k2p_0b5bd2a6-4c52-4b8d-a1e2-5cc3c5be61f0_1" is reserved for "3b2c1f0e9d8c7b6a5f4e3d2c1b0a99887766554433221100ffeeddccbbaa9988""#,
                r#"Error: failed to reserve container name "worker_web-0_<namespace>_<uid>_1": name "worker_web-0_<namespace>_<uid>_1" is reserved for "<id>""#,
            ),
            ("Back-off 1m20s restarting failed container", "Back-off <duration> restarting failed container"),
            (
                "dial tcp: lookup faultlab.invalid on [::1]:53: read udp [::1]:56359->[::1]:53: read: connection refused",
                "dial tcp: lookup faultlab.invalid on <ip>:<port>: read udp <ip>:<port>-><ip>:<port>: read: connection refused",
            ),
            // Brackets that are not an address stay.
            ("mkdir /x/new-<n>[/fs]: no space left on device", "mkdir /x/new-<n>[/fs]: no space left on device"),
            // A random suffix that reads as a duration is still a name.
            ("Created pod: web-6d4cf56db6-2m45s", "Created pod: web-<hash>-<id>"),
            ("pod web-2m45s in 2m45s", "pod web-<id> in <duration>"),
            (
                "Container image \"faultlab.invalid/busybox:1.35@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef\" already present on machine",
                "Container image \"faultlab.invalid/busybox:1.35@sha256:<digest>\" already present on machine",
            ),
            ("mkdir /var/lib/containerd/io.containerd.snapshotter.v1.overlayfs/snapshots/new-4183077394: no space left on device", "mkdir /var/lib/containerd/io.containerd.snapshotter.v1.overlayfs/snapshots/new-<n>: no space left on device"),
            (
                "failed to create prepare snapshot dir: failed to create temp dir: mkdir /var/lib/containerd/io.containerd.snapshotter.v1.overlayfs/snapshots/new-123: no space left on device",
                "failed to create prepare snapshot dir: mkdir /var/lib/containerd/io.containerd.snapshotter.v1.overlayfs/snapshots/new-<n>[/fs]: no space left on device",
            ),
            (
                "failed to create prepare snapshot dir: mkdir /var/lib/containerd/io.containerd.snapshotter.v1.overlayfs/snapshots/new-123/fs: no space left on device",
                "failed to create prepare snapshot dir: mkdir /var/lib/containerd/io.containerd.snapshotter.v1.overlayfs/snapshots/new-<n>[/fs]: no space left on device",
            ),
            ("at 2026-11-22T01:02:03Z and 2026-11-22 01:02:03.123 +0000", "at <time> and <time>"),
            ("Created container k8s app", "Created container k8s app"),
            (r#"pod: "web-6d4cf56db6-tbkl8_fl-pause-missing-x7k2p(0b5bd2a6-4c52-4b8d-a1e2-5cc3c5be61f0)""#, r#"pod: "web-<hash>-<id>_<namespace>(<uid>)""#),
            ("worker-0_ns", "worker-0_ns"),
            // disk-full: whichever of containerd's writes for the sandbox met the full disk.
            (
                "Failed to create pod sandbox: rpc error: code = Unknown desc = failed to create containerd container: failed to create prepare snapshot dir: mkdir /var/lib/faultlab/containerd/io.containerd.snapshotter.v1.overlayfs/snapshots/new-77/fs: no space left on device",
                "Failed to create pod sandbox: rpc error: code = Unknown desc = <a write of the new sandbox under /var/lib/faultlab/containerd>: no space left on device",
            ),
            (
                "Failed to create pod sandbox: rpc error: code = Unknown desc = failed to start sandbox \"0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef\": failed to create containerd container: failed to create prepare snapshot dir: mkdir /var/lib/faultlab/containerd/io.containerd.snapshotter.v1.overlayfs/snapshots/new-77: no space left on device",
                "Failed to create pod sandbox: rpc error: code = Unknown desc = <a write of the new sandbox under /var/lib/faultlab/containerd>: no space left on device",
            ),
            (
                "Failed to create pod sandbox: rpc error: code = Unknown desc = unable to save sandbox \"0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef\" to sandbox store: write /var/lib/faultlab/containerd/io.containerd.metadata.v1.bolt/meta.db: no space left on device",
                "Failed to create pod sandbox: rpc error: code = Unknown desc = <a write of the new sandbox under /var/lib/faultlab/containerd>: no space left on device",
            ),
            (
                "Failed to create pod sandbox: rpc error: code = Unknown desc = failed to start sandbox \"0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef\": failed to create sandbox root directory \"/var/lib/faultlab/containerd/io.containerd.grpc.v1.cri/sandboxes/0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef\": mkdir /var/lib/faultlab/containerd/io.containerd.grpc.v1.cri/sandboxes/0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef: no space left on device",
                "Failed to create pod sandbox: rpc error: code = Unknown desc = <a write of the new sandbox under /var/lib/faultlab/containerd>: no space left on device",
            ),
            // Newer kubelets (platform-wording.md N1, N3, N4).
            ("Created container: app", "Created container app"),
            ("Pulled: Created container: app", "Pulled: Created container: app"),
            (
                "Successfully pulled image \"busybox:1\" in 1.2s (1.5s including waiting). Image size: 2155744 bytes.",
                "Successfully pulled image \"busybox:1\" in <duration> (<duration> including waiting). Image size: <n> bytes.",
            ),
            ("(combined from similar events): Back-off 10s restarting failed container", "Back-off <duration> restarting failed container"),
            // N2 and N7.
            (
                "Container image \"busybox:1\" already present on machine and can be accessed by the pod",
                "Container image \"busybox:1\" already present on machine",
            ),
            (
                "mkdir /sys/fs/cgroup/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod0b5bd2a6_4c52_4b8d_a1e2_5cc3c5be61f0.slice: cannot allocate memory",
                "mkdir /sys/fs/cgroup/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod<uid>.slice: cannot allocate memory",
            ),
        ];
        for (input, want) in cases {
            assert_eq!(n.text(input), want);
        }
    }

    #[test]
    fn deduplicates_by_object_and_reason_and_sorts_stably() {
        let n = Normaliser::new("ns1", "node1");
        let t = Instant::now();
        let later = t + Duration::from_secs(1);
        let a = vec![
            seen("Pod", "web-6d4cf56db6-vw2zq", "FailedMount", "MountVolume.SetUp failed for volume \"cfg\" : configmap \"app-config\" not found", t),
            seen("Pod", "web-6d4cf56db6-vw2zq", "FailedMount", "Unable to attach or mount volumes: timed out waiting for the condition", later),
            seen("Pod", "web-6d4cf56db6-vw2zq", "Scheduled", "Successfully assigned ns1/web-6d4cf56db6-vw2zq to node1", t),
            seen("Node", "node1", "NodeReady", "Node node1 status is now: NodeReady", t),
            seen("Pod", "web-6d4cf56db6-vw2zq", "SandboxChanged", "Pod sandbox changed, it will be killed and re-created.", t),
        ];
        // The same events in another order, from another pod of the same deployment.
        let mut b: Vec<Seen> = a.iter().rev().cloned().map(|mut s| {
            s.name = s.name.replace("vw2zq", "k8x9p");
            s
        }).collect();
        b.iter_mut().for_each(|s| if s.message.starts_with("Unable") { s.at = later } else { s.at = t });
        let ignore = vec!["SandboxChanged".to_string()];
        let na = n.events(&a, &ignore, &[]);
        assert_eq!(na, n.events(&b, &ignore, &[]));
        assert_eq!(na.len(), 3);
        assert_eq!(na[0].object, "Node/<node>");
        assert_eq!(na[1].reason, "FailedMount");
        assert!(na[1].message.starts_with("MountVolume.SetUp failed"), "the first message stands");
        assert_eq!(na[2].message, "Successfully assigned <namespace>/web-<hash>-<id> to <node>");
    }

    /// The kubelet's two `Failed` messages of one pull arrive in either order: the symptom's stands.
    #[test]
    fn the_symptoms_message_stands_for_its_reason_whatever_the_order() {
        let n = Normaliser::new("ns1", "node1");
        let t = Instant::now();
        let pulled = seen("Pod", "web-6d4cf56db6-vw2zq", "Failed", "Failed to pull image \"r/app:1\": 401 Unauthorized", t);
        let summary = seen("Pod", "web-6d4cf56db6-vw2zq", "Failed", "Error: ErrImagePull", t);
        let gate = crate::gates::EventGate { reason: "Failed".into(), type_: None, message: "Failed to pull image .*401".into() };
        let prefer = compile(&[gate], &crate::vars::Vars::placeholder()).unwrap();
        for order in [vec![pulled.clone(), summary.clone()], vec![summary.clone(), pulled.clone()]] {
            let events = n.events(&order, &[], &prefer);
            assert_eq!(events.len(), 1);
            assert_eq!(events[0].message, "Failed to pull image \"r/app:1\": 401 Unauthorized");
        }
        assert_eq!(n.events(&[summary, pulled], &[], &[])[0].message, "Error: ErrImagePull", "without a symptom gate the first stands");
    }

    #[test]
    fn a_series_written_late_with_repeats_from_before_the_watch_is_not_a_new_occurrence() {
        let began: jiff::Timestamp = "2026-11-30T06:00:00Z".parse().unwrap();
        let event = |series: serde_json::Value| -> Event { serde_json::from_value(serde_json::json!({"metadata": {"name": "a"}, "involvedObject": {}, "series": series})).unwrap() };
        // Its last repeat before the watch began, its series known then: a flush (CI's volume-multi-attach).
        let flushed = event(serde_json::json!({"count": 2, "lastObservedTime": "2026-11-30T05:59:58.000000Z"}));
        assert!(late_flush(&flushed, true, began));
        // A repeat after the watch began counts, late as it is written.
        let later = event(serde_json::json!({"count": 3, "lastObservedTime": "2026-11-30T06:00:05.000000Z"}));
        assert!(!late_flush(&later, true, began));
        // A series that starts now (its first repeat, written at once) counts: the baseline had none.
        assert!(!late_flush(&flushed, false, began));
        // An event without a series (core/v1, the kubelet's) is never a flush.
        let legacy: Event = serde_json::from_value(serde_json::json!({"metadata": {"name": "b"}, "involvedObject": {}, "count": 4})).unwrap();
        assert!(!late_flush(&legacy, true, began));
    }

    #[test]
    fn repeats_count_in_count_or_in_series() {
        let core: Event = serde_json::from_value(serde_json::json!({"metadata": {"name": "a"}, "involvedObject": {}, "count": 3})).unwrap();
        assert_eq!(occurrences(&core), 3);
        let first: Event = serde_json::from_value(serde_json::json!({"metadata": {"name": "b"}, "involvedObject": {}})).unwrap();
        assert_eq!(occurrences(&first), 1);
        // The scheduler's first repeat: series.count 1 after an event that had no series.
        let repeat: Event = serde_json::from_value(serde_json::json!({"metadata": {"name": "b"}, "involvedObject": {}, "series": {"count": 1, "lastObservedTime": "2026-11-22T03:35:14.732765Z"}})).unwrap();
        assert!(occurrences(&repeat) > occurrences(&first), "the first repeat written through events.k8s.io/v1 counts");
        let series: Event = serde_json::from_value(serde_json::json!({"metadata": {"name": "c"}, "involvedObject": {}, "series": {"count": 4, "lastObservedTime": "2026-11-22T01:06:08.000000Z"}})).unwrap();
        assert_eq!(occurrences(&series), 5, "the first occurrence and four repeats");
    }

    #[tokio::test]
    async fn settle_waits_for_late_events_then_for_quiet() {
        let (log, push) = EventLog::detached();
        let push = std::sync::Arc::new(push);
        let late = push.clone();
        tokio::spawn(async move {
            for i in 0..3 {
                tokio::time::sleep(Duration::from_millis(100)).await;
                late(seen("Pod", "p", &format!("Late{i}"), "x", Instant::now()));
            }
        });
        let started = Instant::now();
        log.settle(Duration::from_millis(250), Duration::from_secs(5)).await;
        assert_eq!(log.seen().len(), 3, "events arriving within the quiet period are kept");
        assert!(started.elapsed() >= Duration::from_millis(550) && started.elapsed() < Duration::from_secs(2));
        // Bounded: a stream that never goes quiet does not hold teardown up.
        let (busy, push_busy) = EventLog::detached();
        let push_busy = std::sync::Arc::new(push_busy);
        let task = tokio::spawn(async move {
            loop {
                tokio::time::sleep(Duration::from_millis(20)).await;
                push_busy(seen("Pod", "p", "Busy", "x", Instant::now()));
            }
        });
        let started = Instant::now();
        busy.settle(Duration::from_millis(100), Duration::from_millis(400)).await;
        assert!(started.elapsed() < Duration::from_secs(1));
        task.abort();
    }

    #[tokio::test]
    async fn waits_for_patterns_and_reports_what_was_seen() {
        let (log, push) = EventLog::detached();
        let vars = crate::vars::Vars::new("ns", &crate::testbed::tests::sample_profile());
        let gates = compile(
            &[EventGate { reason: "FailedCreatePodSandBox".into(), type_: Some("Warning".into()), message: r#"failed to get sandbox image "${sandboxImage}""#.into() }],
            &vars,
        )
        .unwrap();
        push(seen("Pod", "p", "Scheduled", "ok", Instant::now()));
        let err = log.wait_for(&gates, Duration::from_millis(50)).await.unwrap_err().to_string();
        assert!(err.contains("FailedCreatePodSandBox") && err.contains("Scheduled"), "{err}");
        push(seen("Pod", "p", "FailedCreatePodSandBox", r#"Failed to create pod sandbox: failed to get sandbox image "faultlab.invalid/cce-pause:3.1": x"#, Instant::now()));
        log.wait_for(&gates, Duration::from_millis(50)).await.unwrap();
    }

    /// An event that never matches, seen: its fields are the cluster's, so the error quoting them
    /// shows their controls as escapes, each event on its own line.
    #[tokio::test]
    async fn what_was_seen_is_quoted_terminal_safe() {
        let (log, push) = EventLog::detached();
        let gates = compile(&[EventGate { reason: "Never".into(), type_: None, message: "x".into() }], &crate::vars::Vars::placeholder()).unwrap();
        push(seen("Pod", "p\u{9b}2J", "Bad\x1b]0;t\x07", "one\n  Warning Pod/forged Fake: two\x7f", Instant::now()));
        let err = log.wait_for(&gates, Duration::from_millis(10)).await.unwrap_err().to_string();
        let seen_lines: Vec<&str> = err.lines().skip_while(|l| *l != "seen:").skip(1).collect();
        assert_eq!(seen_lines, [r"  Warning Pod/p\u{9b}2J Bad\u{1b}]0;t\u{7}: one\n  Warning Pod/forged Fake: two\u{7f}"]);
    }

    /// A flood of events is kept to [`MAX_EVENTS`], the rest counted and said; a long message is cut.
    #[test]
    fn the_record_is_bounded_and_says_what_it_dropped() {
        let (log, push) = EventLog::detached();
        assert_eq!(log.dropped_note(), None);
        for i in 0..MAX_EVENTS + 7 {
            push(seen("Pod", "p", "Flood", &format!("{i}"), Instant::now()));
        }
        assert_eq!(log.seen().len(), MAX_EVENTS);
        assert_eq!(log.seen().last().unwrap().message, format!("{}", MAX_EVENTS - 1), "the first ones are kept");
        assert_eq!(log.dropped(), 7);
        assert_eq!(log.dropped_note().unwrap(), format!("the run's event record kept the first {MAX_EVENTS} events and dropped 7 more: the snapshot and the timeline lack them"));
        let (log, push) = EventLog::detached();
        push(seen("Pod", "p", "Long", &"é".repeat(MAX_MESSAGE), Instant::now()));
        let message = &log.seen()[0].message;
        assert_eq!(message, &format!("{}... ({} bytes more dropped)", "é".repeat(MAX_MESSAGE / 2), MAX_MESSAGE));
    }
}
