//! What a run waits for and watches (the gates on nodes, claims and pods, and the event watches) and
//! how it undoes the journal: against the cluster ([`Live`]), or in a plan ([`Planned`]), where each
//! wait is written to the record and met at once. The runner and the faults hold an [`Observe`], so a
//! plan runs the same code as a run.

use std::time::Duration;

use async_trait::async_trait;

use crate::events::{EventLog, EventsError};
use crate::gates::EventGate;
use crate::gates::{ClaimGate, DeploymentGate, NodeGate, PodGate};
use crate::journal::{Journal, JournalError};
use crate::record::{Channel, Recorder};
use crate::wait::{self, WaitError};

/// The fault's own check found it not in place after inject, and why.
#[derive(Debug, thiserror::Error)]
#[error("the fault is not in place after inject: {0}")]
pub struct FaultAbsent(pub String);

#[async_trait]
pub trait Observe: Send + Sync {
    /// Until node `node` carries no not-ready or unreachable taint.
    async fn node_untainted(&self, node: &str, within: Duration) -> Result<(), WaitError>;
    /// Until node `node` carries taint `key` (not-ready or unreachable) and not the other.
    async fn node_tainted(&self, node: &str, key: &str, within: Duration) -> Result<(), WaitError>;
    /// Until node `node` satisfies `gate`.
    async fn node(&self, node: &str, gate: &NodeGate, within: Duration) -> Result<(), WaitError>;
    /// Until claim `name` in `ns` satisfies `gate`.
    async fn claim(&self, ns: &str, name: &str, gate: &ClaimGate, within: Duration) -> Result<(), WaitError>;
    /// Until Deployment `gate.name` in `ns` has the gate's condition.
    async fn deployment(&self, ns: &str, gate: &DeploymentGate, within: Duration) -> Result<(), WaitError>;
    /// Until some pod of `ns` that `selector` selects satisfies `gate`.
    async fn pods(&self, ns: &str, selector: &str, gate: &PodGate, within: Duration) -> Result<(), WaitError>;
    /// Start watching the Events of `namespace` (if given) and those about node `node`; returns once
    /// the events already there are listed.
    async fn events(&self, namespace: Option<&str>, node: &str) -> Result<EventLog, EventsError>;
    /// Until every one of `gates` is matched by an event `log` saw (the symptom's documented events).
    async fn events_seen(&self, log: &EventLog, gates: &[(EventGate, regex::Regex)], within: Duration) -> Result<(), EventsError> {
        log.wait_for(gates, within).await
    }
    /// Undo what the journal holds, newest first; the failures.
    async fn undo(&self, journal: &Journal) -> Vec<JournalError>;
    /// Keep still for `d` (a run's `--hold`).
    async fn hold(&self, d: Duration);
    /// Sleep `d` between two looks of a fault's own polling loop at the cluster or the node (pods of
    /// another namespace going away, a kubelet's log line): waiting on the cluster outside a gate. The
    /// looks themselves are API calls and commands, counted as such.
    async fn pause(&self, d: Duration) {
        tokio::time::sleep(d).await;
    }
    /// The gate on the fault itself after inject: `absent` is why its check found it not in place, if
    /// it did. A run stops there (the error); a plan, whose answers do not change as the node would,
    /// notes the gate and goes on.
    fn fault_in_place(&self, absent: Option<String>) -> Result<(), FaultAbsent>;
    /// Start recording the states of the pods of `ns` that `selector` selects, for the timeline
    /// (default, and in a plan: nothing is recorded).
    fn pod_states(&self, _ns: &str, _selector: &str) -> wait::PodLog {
        wait::PodLog::default()
    }
}

/// A wait on the cluster as it went: what, from when to when, and whether it was met.
#[derive(Clone, Debug)]
pub struct Waited {
    pub what: String,
    pub start: std::time::Instant,
    pub end: std::time::Instant,
    pub met: bool,
}

/// The cluster itself.
pub struct Live {
    pub client: kube::Client,
}

#[async_trait]
impl Observe for Live {
    async fn node_untainted(&self, node: &str, within: Duration) -> Result<(), WaitError> {
        wait::node_untainted_within(&self.client, node, within).await.map(drop)
    }

    async fn node_tainted(&self, node: &str, key: &str, within: Duration) -> Result<(), WaitError> {
        wait::node_tainted_within(&self.client, node, key, within).await.map(drop)
    }

    async fn node(&self, node: &str, gate: &NodeGate, within: Duration) -> Result<(), WaitError> {
        wait::node(&self.client, node, gate, within).await.map(drop)
    }

    async fn claim(&self, ns: &str, name: &str, gate: &ClaimGate, within: Duration) -> Result<(), WaitError> {
        wait::claim(&self.client, ns, name, gate, within).await.map(drop)
    }

    async fn deployment(&self, ns: &str, gate: &DeploymentGate, within: Duration) -> Result<(), WaitError> {
        wait::deployment(&self.client, ns, gate, within).await.map(drop)
    }

    async fn pods(&self, ns: &str, selector: &str, gate: &PodGate, within: Duration) -> Result<(), WaitError> {
        wait::pod_gate(&self.client, ns, selector, gate, within).await
    }

    async fn events(&self, namespace: Option<&str>, node: &str) -> Result<EventLog, EventsError> {
        match namespace {
            Some(ns) => EventLog::start(self.client.clone(), ns, node).await,
            None => EventLog::start_node(self.client.clone(), node).await,
        }
    }

    async fn undo(&self, journal: &Journal) -> Vec<JournalError> {
        crate::journal::replay_for_real(journal).await
    }

    fn pod_states(&self, ns: &str, selector: &str) -> wait::PodLog {
        wait::PodLog::start(&self.client, ns, selector)
    }

    async fn hold(&self, d: Duration) {
        tokio::time::sleep(d).await;
    }

    fn fault_in_place(&self, absent: Option<String>) -> Result<(), FaultAbsent> {
        absent.map_or(Ok(()), |why| Err(FaultAbsent(why)))
    }
}

/// Another [`Observe`], with the time spent in its gates (pods, nodes, claims, Deployments, a hold)
/// added to a clock: the time a run waited on the cluster, as opposed to its own work (API calls, node
/// commands, listing events, settling, undoing).
pub struct Timed {
    inner: std::sync::Arc<dyn Observe>,
    waited: std::sync::Arc<std::sync::Mutex<Duration>>,
    log: std::sync::Arc<std::sync::Mutex<Vec<Waited>>>,
}

impl Timed {
    pub fn new(inner: std::sync::Arc<dyn Observe>) -> Timed {
        Timed { inner, waited: Default::default(), log: Default::default() }
    }

    /// The clock: the time spent in gates so far.
    pub fn clock(&self) -> std::sync::Arc<std::sync::Mutex<Duration>> {
        self.waited.clone()
    }

    /// Every wait so far, in the order they ended.
    pub fn waits(&self) -> std::sync::Arc<std::sync::Mutex<Vec<Waited>>> {
        self.log.clone()
    }

    async fn timed<T, E>(&self, what: String, wait: impl std::future::Future<Output = Result<T, E>>) -> Result<T, E> {
        // tokio's clock: the real one in a run, a virtual one in tests.
        let started = tokio::time::Instant::now();
        let start = std::time::Instant::now();
        let out = wait.await;
        *self.waited.lock().unwrap_or_else(|p| p.into_inner()) += started.elapsed();
        let waited = Waited { what, start, end: std::time::Instant::now(), met: out.is_ok() };
        self.log.lock().unwrap_or_else(|p| p.into_inner()).push(waited);
        out
    }
}

/// What each gate waits for, in words (plans and timelines).
fn untainted_text(node: &str) -> String {
    format!("node {node} without the taints {}", wait::NOT_READY_TAINTS.join(", "))
}

fn node_text(node: &str, gate: &NodeGate) -> String {
    format!("node {node} {}={}", gate.condition.type_, gate.condition.status)
}

fn events_text(gates: &[(EventGate, regex::Regex)]) -> String {
    let each: Vec<String> = gates.iter().map(|(g, re)| format!("{} matching /{}/", g.reason, re.as_str())).collect();
    format!("events {}", each.join(", "))
}

fn claim_text(name: &str, gate: &ClaimGate) -> String {
    format!("pvc {name} phase={}", gate.phase)
}

fn pods_text(selector: &str, gate: &PodGate, within: Duration) -> String {
    let within = crate::duration::format(Duration::from_secs(within.as_secs_f64().round() as u64));
    format!("pod -l {selector} {} (within {within})", wait::gate_text(gate))
}

#[async_trait]
impl Observe for Timed {
    async fn node_untainted(&self, node: &str, within: Duration) -> Result<(), WaitError> {
        self.timed(untainted_text(node), self.inner.node_untainted(node, within)).await
    }

    async fn node_tainted(&self, node: &str, key: &str, within: Duration) -> Result<(), WaitError> {
        self.timed(wait::tainted_text(node, key), self.inner.node_tainted(node, key, within)).await
    }

    async fn node(&self, node: &str, gate: &NodeGate, within: Duration) -> Result<(), WaitError> {
        self.timed(node_text(node, gate), self.inner.node(node, gate, within)).await
    }

    async fn claim(&self, ns: &str, name: &str, gate: &ClaimGate, within: Duration) -> Result<(), WaitError> {
        self.timed(claim_text(name, gate), self.inner.claim(ns, name, gate, within)).await
    }

    async fn deployment(&self, ns: &str, gate: &DeploymentGate, within: Duration) -> Result<(), WaitError> {
        self.timed(wait::deployment_text(gate), self.inner.deployment(ns, gate, within)).await
    }

    async fn pods(&self, ns: &str, selector: &str, gate: &PodGate, within: Duration) -> Result<(), WaitError> {
        self.timed(pods_text(selector, gate, within), self.inner.pods(ns, selector, gate, within)).await
    }

    async fn events(&self, namespace: Option<&str>, node: &str) -> Result<EventLog, EventsError> {
        self.inner.events(namespace, node).await
    }

    /// Waiting for the documented events is waiting on the cluster, as a pod's gate is (pause-missing's
    /// symptom waits out the runtime's 10 s pull for its event).
    async fn events_seen(&self, log: &EventLog, gates: &[(EventGate, regex::Regex)], within: Duration) -> Result<(), EventsError> {
        self.timed(events_text(gates), self.inner.events_seen(log, gates, within)).await
    }

    async fn undo(&self, journal: &Journal) -> Vec<JournalError> {
        self.inner.undo(journal).await
    }

    async fn hold(&self, d: Duration) {
        let what = format!("hold {}", crate::duration::format(d));
        let _ = self.timed(what, async { self.inner.hold(d).await; Ok::<(), WaitError>(()) }).await;
    }

    /// Counted on the clock, not in the list of waits: a loop's pauses are one wait, which the fault's
    /// note in the record names.
    async fn pause(&self, d: Duration) {
        let started = tokio::time::Instant::now();
        self.inner.pause(d).await;
        *self.waited.lock().unwrap_or_else(|p| p.into_inner()) += started.elapsed();
    }

    fn fault_in_place(&self, absent: Option<String>) -> Result<(), FaultAbsent> {
        self.inner.fault_in_place(absent)
    }

    fn pod_states(&self, ns: &str, selector: &str) -> wait::PodLog {
        self.inner.pod_states(ns, selector)
    }
}

/// A plan: every wait and watch is written to the record and met at once; undoing is the record the
/// runner writes (nothing runs).
pub struct Planned {
    pub rec: Recorder,
}

impl Planned {
    fn wait(&self, what: String) -> Result<(), WaitError> {
        self.rec.push(Channel::Wait, what);
        Ok(())
    }
}

#[async_trait]
impl Observe for Planned {
    async fn node_untainted(&self, node: &str, _: Duration) -> Result<(), WaitError> {
        self.wait(untainted_text(node))
    }

    async fn node_tainted(&self, node: &str, key: &str, _: Duration) -> Result<(), WaitError> {
        self.wait(wait::tainted_text(node, key))
    }

    async fn node(&self, node: &str, gate: &NodeGate, _: Duration) -> Result<(), WaitError> {
        self.wait(node_text(node, gate))
    }

    async fn claim(&self, _: &str, name: &str, gate: &ClaimGate, _: Duration) -> Result<(), WaitError> {
        self.wait(claim_text(name, gate))
    }

    async fn deployment(&self, _: &str, gate: &DeploymentGate, _: Duration) -> Result<(), WaitError> {
        self.wait(wait::deployment_text(gate))
    }

    async fn pods(&self, _: &str, selector: &str, gate: &PodGate, within: Duration) -> Result<(), WaitError> {
        self.wait(pods_text(selector, gate, within))
    }

    async fn events(&self, namespace: Option<&str>, node: &str) -> Result<EventLog, EventsError> {
        Ok(EventLog::planned(self.rec.clone(), namespace, node))
    }

    async fn undo(&self, _journal: &Journal) -> Vec<JournalError> {
        Vec::new()
    }

    async fn hold(&self, _: Duration) {}

    fn fault_in_place(&self, _: Option<String>) -> Result<(), FaultAbsent> {
        self.rec.push(Channel::Wait, "the fault in place, as the check above finds it (a run stops here if not)");
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gates::ConditionGate;

    #[tokio::test]
    async fn a_plan_writes_each_wait_and_meets_it() {
        let rec = Recorder::default();
        let plan = Planned { rec: rec.clone() };
        let ready = NodeGate { condition: ConditionGate { type_: "Ready".into(), status: "True".into(), reason: None } };
        plan.node("n1", &ready, Duration::from_secs(1)).await.unwrap();
        plan.pods("ns", "app=web", &PodGate { phase: Some("Running".into()), ..Default::default() }, Duration::from_millis(90_400)).await.unwrap();
        let log = plan.events(Some("ns"), "n1").await.unwrap();
        log.wait_for(&[], Duration::from_secs(3600)).await.unwrap();
        let lines: Vec<String> = rec.entries().into_iter().map(|e| e.line).collect();
        assert_eq!(lines, ["node n1 Ready=True", "pod -l app=web phase=Running (within 1m30s)", "watch /api/v1/namespaces/ns/events and events of node n1"]);
    }

    /// Gates that take a while (virtual time), everything else at once.
    struct Slow(Recorder);

    #[async_trait]
    impl Observe for Slow {
        async fn node_untainted(&self, _: &str, _: Duration) -> Result<(), WaitError> {
            tokio::time::sleep(Duration::from_secs(2)).await;
            Ok(())
        }
        async fn node_tainted(&self, _: &str, _: &str, _: Duration) -> Result<(), WaitError> {
            Ok(())
        }
        async fn node(&self, _: &str, _: &NodeGate, _: Duration) -> Result<(), WaitError> {
            Ok(())
        }
        async fn claim(&self, _: &str, _: &str, _: &ClaimGate, _: Duration) -> Result<(), WaitError> {
            Ok(())
        }
        async fn deployment(&self, _: &str, _: &DeploymentGate, _: Duration) -> Result<(), WaitError> {
            tokio::time::sleep(Duration::from_secs(5)).await;
            Err(WaitError::Timeout { what: "d".into(), within: Duration::from_secs(5), last: String::new() })
        }
        async fn pods(&self, _: &str, _: &str, _: &PodGate, _: Duration) -> Result<(), WaitError> {
            tokio::time::sleep(Duration::from_secs(3)).await;
            Ok(())
        }
        async fn events(&self, namespace: Option<&str>, node: &str) -> Result<EventLog, EventsError> {
            tokio::time::sleep(Duration::from_secs(7)).await;
            Ok(EventLog::planned(self.0.clone(), namespace, node))
        }
        async fn undo(&self, _: &Journal) -> Vec<JournalError> {
            tokio::time::sleep(Duration::from_secs(11)).await;
            Vec::new()
        }
        async fn hold(&self, d: Duration) {
            tokio::time::sleep(d).await;
        }
        fn fault_in_place(&self, _: Option<String>) -> Result<(), FaultAbsent> {
            Ok(())
        }
    }

    #[tokio::test(start_paused = true)]
    async fn the_clock_counts_the_gates_and_the_hold_not_the_events_or_the_undo() {
        let timed = Timed::new(std::sync::Arc::new(Slow(Recorder::default())));
        let clock = timed.clock();
        timed.node_untainted("n", Duration::from_secs(60)).await.unwrap();
        timed.pods("ns", "app=web", &PodGate::default(), Duration::from_secs(60)).await.unwrap();
        let gate = DeploymentGate { name: "web".into(), condition: ConditionGate { type_: "Progressing".into(), status: "False".into(), reason: None } };
        assert!(timed.deployment("ns", &gate, Duration::from_secs(5)).await.is_err(), "a gate's error is passed on, its time counted");
        timed.hold(Duration::from_secs(13)).await;
        timed.events(Some("ns"), "n").await.unwrap();
        timed.undo(&Journal::in_memory("x")).await;
        assert_eq!(*clock.lock().unwrap(), Duration::from_secs(2 + 3 + 5 + 13), "events (7 s) and undo (11 s) are faultlab's own");
        let waits = timed.waits().lock().unwrap().len();
        timed.pause(Duration::from_secs(1)).await;
        timed.pause(Duration::from_secs(1)).await;
        assert_eq!(*clock.lock().unwrap(), Duration::from_secs(2 + 3 + 5 + 13 + 2), "a polling loop's pauses are waiting on the cluster");
        assert_eq!(timed.waits().lock().unwrap().len(), waits, "pauses are not listed as gates");
    }
}
