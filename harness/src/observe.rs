//! What a run waits for and watches (the gates on nodes, claims and pods, and the event watches) and
//! how it undoes the journal: against the cluster ([`Live`]), or in a plan ([`Planned`]), where each
//! wait is written to the record and met at once. The runner and the faults hold an [`Observe`], so a
//! plan runs the same code as a run.

use std::time::Duration;

use async_trait::async_trait;

use crate::events::{EventLog, EventsError};
use crate::gates::{ClaimGate, NodeGate, PodGate};
use crate::journal::{Journal, JournalError};
use crate::record::{Channel, Recorder};
use crate::wait::{self, WaitError};

#[async_trait]
pub trait Observe: Send + Sync {
    /// Until node `node` carries no not-ready or unreachable taint.
    async fn node_untainted(&self, node: &str, within: Duration) -> Result<(), WaitError>;
    /// Until node `node` carries a not-ready or unreachable taint.
    async fn node_tainted(&self, node: &str, within: Duration) -> Result<(), WaitError>;
    /// Until node `node` satisfies `gate`.
    async fn node(&self, node: &str, gate: &NodeGate, within: Duration) -> Result<(), WaitError>;
    /// Until claim `name` in `ns` satisfies `gate`.
    async fn claim(&self, ns: &str, name: &str, gate: &ClaimGate, within: Duration) -> Result<(), WaitError>;
    /// Until some pod of `ns` that `selector` selects satisfies `gate`.
    async fn pods(&self, ns: &str, selector: &str, gate: &PodGate, within: Duration) -> Result<(), WaitError>;
    /// Start watching the Events of `namespace` (if given) and those about node `node`; returns once
    /// the events already there are listed.
    async fn events(&self, namespace: Option<&str>, node: &str) -> Result<EventLog, EventsError>;
    /// Undo what the journal holds, newest first; the failures.
    async fn undo(&self, journal: &Journal) -> Vec<JournalError>;
    /// Keep still for `d` (a run's `--hold`).
    async fn hold(&self, d: Duration);
    /// The gate on the fault itself after inject: `absent` is why its check found it not in place, if
    /// it did. A run stops there (the error); a plan, whose answers do not change as the node would,
    /// notes the gate and goes on.
    fn fault_in_place(&self, absent: Option<String>) -> Result<(), String>;
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

    async fn node_tainted(&self, node: &str, within: Duration) -> Result<(), WaitError> {
        wait::node_tainted_within(&self.client, node, within).await.map(drop)
    }

    async fn node(&self, node: &str, gate: &NodeGate, within: Duration) -> Result<(), WaitError> {
        wait::node(&self.client, node, gate, within).await.map(drop)
    }

    async fn claim(&self, ns: &str, name: &str, gate: &ClaimGate, within: Duration) -> Result<(), WaitError> {
        wait::claim(&self.client, ns, name, gate, within).await.map(drop)
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

    async fn hold(&self, d: Duration) {
        tokio::time::sleep(d).await;
    }

    fn fault_in_place(&self, absent: Option<String>) -> Result<(), String> {
        absent.map_or(Ok(()), Err)
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
        self.wait(format!("node {node} without the taints {}", wait::NOT_READY_TAINTS.join(", ")))
    }

    async fn node_tainted(&self, node: &str, _: Duration) -> Result<(), WaitError> {
        self.wait(format!("node {node} tainted {}", wait::NOT_READY_TAINTS.join(" or ")))
    }

    async fn node(&self, node: &str, gate: &NodeGate, _: Duration) -> Result<(), WaitError> {
        self.wait(format!("node {node} {}={}", gate.condition.type_, gate.condition.status))
    }

    async fn claim(&self, _: &str, name: &str, gate: &ClaimGate, _: Duration) -> Result<(), WaitError> {
        self.wait(format!("pvc {name} phase={}", gate.phase))
    }

    async fn pods(&self, _: &str, selector: &str, gate: &PodGate, within: Duration) -> Result<(), WaitError> {
        let within = crate::duration::format(Duration::from_secs(within.as_secs_f64().round() as u64));
        self.wait(format!("pod -l {selector} {} (within {within})", wait::gate_text(gate)))
    }

    async fn events(&self, namespace: Option<&str>, node: &str) -> Result<EventLog, EventsError> {
        Ok(EventLog::planned(self.rec.clone(), namespace, node))
    }

    async fn undo(&self, _journal: &Journal) -> Vec<JournalError> {
        Vec::new()
    }

    async fn hold(&self, _: Duration) {}

    fn fault_in_place(&self, _: Option<String>) -> Result<(), String> {
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
}
