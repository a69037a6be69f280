//! Reports: per-phase timings for every run, as plain lines, JSON or JUnit XML.

use std::time::Duration;

use quick_junit::{NonSuccessKind, Report, TestCase, TestCaseStatus, TestSuite};
use serde::{Deserialize, Serialize};

use crate::events::Normalised;
use crate::record::{Entry, Phase};
pub use crate::runner::{PhaseSpan, PodState, TimedEvent, TimedWait, Timeline, Timings};
use crate::snapshot::SnapshotResult;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Status {
    Passed,
    Failed,
    Ignored,
}

/// One scenario's run.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct ScenarioReport {
    pub scenario: String,
    pub provider: String,
    pub platform: String,
    pub node: String,
    pub namespace: String,
    pub status: Status,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub failed_phase: Option<Phase>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// Seconds the provider took to create or connect to the cluster (kind creation is not a phase).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cluster_seconds: Option<f64>,
    /// The kind cluster it ran on (scenarios that shared one name the same).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cluster: Option<String>,
    /// Seconds per phase.
    pub timings: Timings,
    pub events: Vec<Normalised>,
    pub snapshot: SnapshotResult,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub teardown_errors: Vec<String>,
    /// Where the cluster's logs were exported (kind, failed runs).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub logs: Option<String>,
    /// What the user should know afterwards (for example how to delete a cluster kept with --keep).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
    /// Every node command and API call, by phase.
    pub record: Vec<Entry>,
    /// When things happened, for the HTML report's timeline.
    #[serde(default, skip_serializing_if = "Timeline::is_empty")]
    pub timeline: Timeline,
    /// The scenarios that ran at the same time as this one, at any moment of it (`faultlab run --jobs`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ran_beside: Vec<String>,
}


impl ScenarioReport {
    pub fn ignored(scenario: &str, reason: &str) -> Self {
        ScenarioReport {
            scenario: scenario.into(),
            provider: String::new(),
            platform: String::new(),
            node: String::new(),
            namespace: String::new(),
            status: Status::Ignored,
            failed_phase: None,
            error: Some(reason.into()),
            cluster_seconds: None,
            cluster: None,
            timings: Timings::default(),
            events: vec![],
            snapshot: SnapshotResult::Skipped(reason.into()),
            teardown_errors: vec![],
            logs: None,
            notes: vec![],
            record: vec![],
            timeline: Timeline::default(),
            ran_beside: vec![],
        }
    }

    /// One line: status, name and every phase's time.
    pub fn line(&self) -> String {
        let phases: Vec<String> = Phase::ALL
            .iter()
            .map(|p| match self.timings.get(*p) {
                Some(s) => format!("{}={s:.1}s", p.as_str()),
                None => format!("{}=-", p.as_str()),
            })
            .collect();
        let status = match self.status {
            Status::Passed => "PASS",
            Status::Failed => "FAIL",
            Status::Ignored => "IGNORED",
        };
        let mut line = format!("{status} {} [{}] {}", self.scenario, self.platform, phases.join(" "));
        // A snapshot mismatch is its own error: its paragraph is printed once, as `snapshot:`.
        let snapshot_error = matches!(&self.snapshot, SnapshotResult::Mismatched(d) if self.error.as_ref() == Some(d));
        if let Some(e) = self.error.as_ref().filter(|_| !snapshot_error) {
            let phase = self.failed_phase.map(|p| format!(" in {}", p.as_str())).unwrap_or_default();
            line.push_str(&format!("\n  error{phase}: {}", e.replace('\n', "\n  ")));
        }
        if let SnapshotResult::Mismatched(d) = &self.snapshot {
            line.push_str(&format!("\n  snapshot: {d}"));
        }
        for t in &self.teardown_errors {
            line.push_str(&format!("\n  teardown: {t}"));
        }
        if let Some(logs) = &self.logs {
            line.push_str(&format!("\n  logs: {logs}"));
        }
        for n in &self.notes {
            line.push_str(&format!("\n  note: {n}"));
        }
        line
    }
}

/// A whole invocation.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct SuiteReport {
    pub wall_seconds: f64,
    pub scenarios: Vec<ScenarioReport>,
}

impl SuiteReport {
    pub fn passed(&self) -> bool {
        self.scenarios.iter().all(|s| s.status != Status::Failed)
    }

    pub fn json(&self) -> String {
        serde_json::to_string_pretty(self).expect("report serialises")
    }

    /// JUnit XML: one test case per scenario, phase times as properties.
    pub fn junit(&self) -> String {
        let mut report = Report::new("faultlab");
        let mut suite = TestSuite::new("scenarios");
        for s in &self.scenarios {
            let status = match s.status {
                Status::Passed => TestCaseStatus::success(),
                Status::Ignored => {
                    let mut st = TestCaseStatus::skipped();
                    if let TestCaseStatus::Skipped { message, .. } = &mut st {
                        *message = s.error.clone().map(Into::into);
                    }
                    st
                }
                Status::Failed => {
                    let mut st = TestCaseStatus::non_success(NonSuccessKind::Failure);
                    st.set_message(s.error.clone().unwrap_or_default());
                    st.set_type(s.failed_phase.map(|p| p.as_str()).unwrap_or("run"));
                    st
                }
            };
            let mut case = TestCase::new(s.scenario.clone(), status);
            case.set_classname(format!("faultlab.{}", s.platform));
            let total: f64 = Phase::ALL.iter().filter_map(|p| s.timings.get(*p)).sum();
            case.set_time(Duration::from_secs_f64(total));
            for p in Phase::ALL {
                if let Some(t) = s.timings.get(p) {
                    case.add_property(quick_junit::Property::new(format!("phase.{}", p.as_str()), format!("{t:.3}")));
                }
            }
            suite.add_test_case(case);
        }
        suite.set_time(Duration::from_secs_f64(self.wall_seconds));
        report.add_test_suite(suite);
        report.to_string().expect("junit serialises")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn junit_and_lines_carry_phase_times() {
        let mut ok = ScenarioReport::ignored("pause-missing", "");
        ok.status = Status::Passed;
        ok.error = None;
        ok.platform = "k8s-1.20-containerd-1.6-amd64".into();
        ok.timings = Timings { setup: Some(3.0), inject: Some(0.5), symptom: Some(4.0), fix: Some(1.0), recovery: Some(12.0), teardown: Some(2.0), waiting: None, own: None };
        let ignored = ScenarioReport::ignored("disk-full", "no cluster configured");
        let suite = SuiteReport { wall_seconds: 30.0, scenarios: vec![ok.clone(), ignored] };
        assert_eq!(ok.line(), "PASS pause-missing [k8s-1.20-containerd-1.6-amd64] setup=3.0s inject=0.5s symptom=4.0s fix=1.0s recovery=12.0s teardown=2.0s");
        let xml = suite.junit();
        assert!(xml.contains(r#"<property name="phase.recovery" value="12.000"/>"#), "{xml}");
        assert!(xml.contains("<skipped message=\"no cluster configured\""), "{xml}");
        assert!(suite.passed());
        let json: serde_json::Value = serde_json::from_str(&suite.json()).unwrap();
        assert_eq!(json["scenarios"][0]["timings"]["symptom"], 4.0);
    }

    #[test]
    fn a_snapshot_mismatch_is_printed_once() {
        let mut r = ScenarioReport::ignored("web", "");
        r.status = Status::Failed;
        r.platform = "p".into();
        r.failed_phase = Some(Phase::Recovery);
        let paragraph = "events of web on p differ from the reviewed snapshot x.snap: 1 missing, 0 unexpected\n    missing:    Pod/web Normal A (kubelet): b\n    wrote x.snap.new; read it";
        r.error = Some(paragraph.into());
        r.snapshot = SnapshotResult::Mismatched(paragraph.into());
        let line = r.line();
        assert_eq!(line.matches("1 missing").count(), 1, "{line}");
        assert!(line.ends_with(&format!("\n  snapshot: {paragraph}")), "{line}");
        assert!(!line.contains("error in"), "{line}");
        let xml = SuiteReport { wall_seconds: 1.0, scenarios: vec![r] }.junit();
        assert!(xml.contains("1 missing, 0 unexpected"), "JUnit carries it as the failure's message: {xml}");
    }
}
