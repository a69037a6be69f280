//! A record of every node command and API call a run makes, by phase.
//!
//! In a plan (`faultlab plan`) nothing is executed and this record *is* the plan; in a real
//! run it is the log of what was done, kept in reports.

use std::sync::{Arc, Mutex};

use serde::{Deserialize, Serialize};

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
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

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
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

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Entry {
    pub phase: Phase,
    pub channel: Channel,
    pub line: String,
}

#[derive(Clone, Debug)]
pub struct Recorder {
    inner: Arc<Mutex<(Phase, Vec<Entry>)>>,
}

impl Default for Recorder {
    fn default() -> Self {
        Recorder { inner: Arc::new(Mutex::new((Phase::Setup, Vec::new()))) }
    }
}

impl Recorder {
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
