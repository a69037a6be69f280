//! A record of every node command and API call a run makes, by phase.
//!
//! In a plan (`faultlab plan`) nothing is executed and this record *is* the plan; in a real
//! run it is the log of what was done, kept in reports.

use std::sync::{Arc, Mutex};

use serde::{Deserialize, Serialize};

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Phase {
    Setup,
    Inject,
    Symptom,
    Fix,
    Recovery,
    Teardown,
}

impl Phase {
    pub const ALL: [Phase; 6] = [Phase::Setup, Phase::Inject, Phase::Symptom, Phase::Fix, Phase::Recovery, Phase::Teardown];

    pub fn as_str(self) -> &'static str {
        match self {
            Phase::Setup => "setup",
            Phase::Inject => "inject",
            Phase::Symptom => "symptom",
            Phase::Fix => "fix",
            Phase::Recovery => "recovery",
            Phase::Teardown => "teardown",
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Channel {
    /// A command on this machine (kind, docker).
    Host,
    /// A command on a node, shown as the host argv that runs it.
    Node,
    /// A Kubernetes API call.
    Api,
    /// A wait on a watch.
    Wait,
    /// A note: what a step is for.
    Note,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Entry {
    pub phase: Phase,
    pub channel: Channel,
    pub line: String,
}

/// What faultlab's own time in a run went to, besides waiting on the cluster's gates.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Work {
    /// Commands on a node or on this machine (the node's argv run here).
    Commands,
    /// Kubernetes API calls (reads and writes, and listing events before a watch).
    Api,
    /// Waiting for the event stream to go quiet before the record closes.
    Settling,
    /// Replaying the journal in teardown.
    Undoing,
}

/// Time spent, by phase and [`Work`].
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Spent(std::collections::BTreeMap<(Phase, Work), std::time::Duration>);

impl Spent {
    /// The time spent on `work` in any of `phases`.
    pub fn on(&self, work: Work, phases: &[Phase]) -> std::time::Duration {
        self.0.iter().filter(|((p, w), _)| *w == work && phases.contains(p)).map(|(_, d)| *d).sum()
    }
}

#[derive(Clone, Debug)]
pub struct Recorder {
    inner: Arc<Mutex<(Phase, Vec<Entry>)>>,
    spent: Arc<Mutex<Spent>>,
}

impl Default for Recorder {
    fn default() -> Self {
        Recorder { inner: Arc::new(Mutex::new((Phase::Setup, Vec::new()))), spent: Arc::default() }
    }
}

impl Recorder {
    /// Count `d` as spent on `work` in the current phase.
    pub fn spend(&self, work: Work, d: std::time::Duration) {
        self.add(self.phase(), work, d);
    }

    fn add(&self, phase: Phase, work: Work, d: std::time::Duration) {
        *self.spent.lock().unwrap().0.entry((phase, work)).or_default() += d;
    }

    /// Time `f` and count it as spent on `work` in the phase it started in.
    pub async fn timed<T>(&self, work: Work, f: impl std::future::Future<Output = T>) -> T {
        let phase = self.phase();
        // tokio's clock: the real one in a run, a virtual one in tests.
        let start = tokio::time::Instant::now();
        let out = f.await;
        self.add(phase, work, start.elapsed());
        out
    }

    pub fn spent(&self) -> Spent {
        self.spent.lock().unwrap().clone()
    }

    pub fn set_phase(&self, phase: Phase) {
        self.inner.lock().unwrap().0 = phase;
    }

    pub fn phase(&self) -> Phase {
        self.inner.lock().unwrap().0
    }

    pub fn push(&self, channel: Channel, line: impl Into<String>) {
        let mut g = self.inner.lock().unwrap();
        let phase = g.0;
        g.1.push(Entry { phase, channel, line: line.into() });
    }

    pub fn entries(&self) -> Vec<Entry> {
        self.inner.lock().unwrap().1.clone()
    }

    /// The record as text, grouped by phase, for `faultlab plan`.
    pub fn render(&self) -> String {
        let entries = self.entries();
        let mut out = String::new();
        for phase in Phase::ALL {
            let lines: Vec<&Entry> = entries.iter().filter(|e| e.phase == phase).collect();
            if lines.is_empty() {
                continue;
            }
            out.push_str(&format!("# {}\n", phase.as_str()));
            for e in lines {
                let tag = match e.channel {
                    Channel::Host => "host",
                    Channel::Node => "node",
                    Channel::Api => "api ",
                    Channel::Wait => "wait",
                    Channel::Note => "  --",
                };
                out.push_str(&format!("{tag} {}\n", e.line));
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[tokio::test(start_paused = true)]
    async fn time_is_counted_by_phase_and_work_in_the_phase_it_started_in() {
        let rec = Recorder::default();
        rec.spend(Work::Api, Duration::from_millis(200));
        rec.set_phase(Phase::Inject);
        rec.spend(Work::Commands, Duration::from_secs(2));
        let clone = rec.clone();
        rec.timed(Work::Commands, async move {
            tokio::time::sleep(Duration::from_secs(1)).await;
            // A phase that changes during a call does not split it.
            clone.set_phase(Phase::Symptom);
        })
        .await;
        let spent = rec.spent();
        assert_eq!(spent.on(Work::Api, &Phase::ALL), Duration::from_millis(200));
        assert_eq!(spent.on(Work::Commands, &[Phase::Inject]), Duration::from_secs(3));
        assert_eq!(spent.on(Work::Commands, &[Phase::Symptom]), Duration::ZERO);
        assert_eq!(spent.on(Work::Settling, &Phase::ALL), Duration::ZERO);
    }
}
