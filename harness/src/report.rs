//! Reports: per-phase timings for every run, as plain lines, JSON or JUnit XML.

use std::time::Duration;

use quick_junit::{NonSuccessKind, Report, TestCase, TestCaseStatus, TestSuite};
use serde::{Deserialize, Serialize};

use crate::events::Normalised;
use crate::record::{Entry, Phase};
pub use crate::runner::{PhaseSpan, PodState, TimedEvent, TimedWait, Timeline, Timings};
use crate::snapshot::{SnapshotResult, SnapshotStatus};

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Status {
    Passed,
    Failed,
    Ignored,
    /// Not run: this platform cannot or may not run it (another architecture, a fault that reaches past
    /// a kind node, a cluster of the user's that the fault would have to remake, a context faultlab does
    /// not own, a `--cluster` that kind does not list). `error` says why; `faultlab run` exits 3
    /// (environment) when nothing failed.
    Refused,
}

/// One scenario's run.
#[derive(Clone, Debug, Serialize, Deserialize, schemars::JsonSchema)]
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
    /// How the events compare with the reviewed snapshot: in JSON `"snapshot": "matched" | "changed" |
    /// "new" | null` (not compared) and `"snapshot_detail"` ([`SnapshotResult`]).
    #[serde(flatten)]
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

    /// One line: status, name, every phase's time and the snapshot's status; then, a line each, the
    /// error, the snapshot's paragraph (`snapshot:` when it changed, `new snapshot:` when there was
    /// none), teardown errors, where the logs are, and notes. Terminal-safe ([`crate::terminal`]): the
    /// platform is what the nodes say, and errors and notes quote the cluster's events and what node
    /// commands printed.
    pub fn line(&self) -> String {
        use crate::terminal::{field, lines};
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
            Status::Refused => "REFUSED",
        };
        let snapshot = self.snapshot.status().map_or("-", SnapshotStatus::as_str);
        // A run refused or failed before the cluster was reached has no platform yet: `-`, not `[]`.
        let platform = if self.platform.is_empty() { "-".into() } else { field(&self.platform) };
        let mut line = format!("{status} {} [{platform}] {} snapshot={snapshot}", field(&self.scenario), phases.join(" "));
        // A snapshot paragraph that is the error (a changed one; a new one in a report of an older faultlab)
        // is printed once, as the snapshot's line.
        let snapshot_error = matches!(&self.snapshot, SnapshotResult::Changed(d) | SnapshotResult::New(d) if self.error.as_ref() == Some(d));
        if let Some(e) = self.error.as_ref().filter(|_| !snapshot_error) {
            let phase = self.failed_phase.map(|p| format!(" in {}", p.as_str())).unwrap_or_default();
            line.push_str(&format!("\n  error{phase}: {}", lines(e).replace('\n', "\n  ")));
        }
        match &self.snapshot {
            SnapshotResult::Changed(d) => line.push_str(&format!("\n  snapshot: {}", lines(d))),
            SnapshotResult::New(d) => line.push_str(&format!("\n  new snapshot: {}", lines(d))),
            SnapshotResult::Matched | SnapshotResult::Skipped(_) => {}
        }
        for t in &self.teardown_errors {
            line.push_str(&format!("\n  teardown: {}", lines(t)));
        }
        if let Some(logs) = &self.logs {
            line.push_str(&format!("\n  logs: {}", field(logs)));
        }
        for n in &self.notes {
            line.push_str(&format!("\n  note: {}", lines(n)));
        }
        line
    }
}

/// The version of the JSON report's layout ([`SuiteReport::schema_version`]): raised when a field
/// changes meaning or goes, or a field gains a value; new fields do not raise it. 2: `status` gained
/// `refused` (such scenarios were `failed` in 1).
pub const SCHEMA_VERSION: u32 = 2;

/// Reports from before `schemaVersion` was written are version 1.
fn unversioned() -> u32 {
    1
}

/// A whole invocation (`faultlab run --output json`; its JSON Schema: `faultlab schema --report`).
#[derive(Clone, Debug, Serialize, Deserialize, schemars::JsonSchema)]
pub struct SuiteReport {
    /// The report's layout version ([`SCHEMA_VERSION`]); reports from before it had none.
    #[serde(rename = "schemaVersion", default = "unversioned")]
    pub schema_version: u32,
    pub wall_seconds: f64,
    pub scenarios: Vec<ScenarioReport>,
}

impl SuiteReport {
    pub fn new(wall_seconds: f64, scenarios: Vec<ScenarioReport>) -> Self {
        SuiteReport { schema_version: SCHEMA_VERSION, wall_seconds, scenarios }
    }

    pub fn passed(&self) -> bool {
        self.scenarios.iter().all(|s| s.status != Status::Failed)
    }

    /// The scenarios this platform refused to run ([`Status::Refused`]).
    pub fn refused(&self) -> Vec<&ScenarioReport> {
        self.scenarios.iter().filter(|s| s.status == Status::Refused).collect()
    }

    /// The scenarios whose snapshot is `new`: no reviewed snapshot on their platform yet.
    pub fn new_snapshots(&self) -> Vec<&ScenarioReport> {
        self.scenarios.iter().filter(|s| matches!(s.snapshot, SnapshotResult::New(_))).collect()
    }

    pub fn json(&self) -> String {
        serde_json::to_string_pretty(self).expect("report serialises")
    }

    /// The JSON Schema of the report.
    pub fn json_schema() -> String {
        serde_json::to_string_pretty(&schemars::schema_for!(SuiteReport)).expect("schema serialises") + "\n"
    }

    /// JUnit XML: one test case per scenario, phase times and the snapshot's status as properties.
    pub fn junit(&self) -> String {
        let mut report = Report::new("faultlab");
        let mut suite = TestSuite::new("scenarios");
        for s in &self.scenarios {
            let status = match s.status {
                Status::Passed => TestCaseStatus::success(),
                Status::Ignored | Status::Refused => {
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
            if let Some(snapshot) = s.snapshot.status() {
                case.add_property(quick_junit::Property::new("snapshot", snapshot.as_str()));
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
        let suite = SuiteReport::new(30.0, vec![ok.clone(), ignored]);
        assert_eq!(ok.line(), "PASS pause-missing [k8s-1.20-containerd-1.6-amd64] setup=3.0s inject=0.5s symptom=4.0s fix=1.0s recovery=12.0s teardown=2.0s snapshot=-");
        let xml = suite.junit();
        assert!(xml.contains(r#"<property name="phase.recovery" value="12.000"/>"#), "{xml}");
        assert!(xml.contains("<skipped message=\"no cluster configured\""), "{xml}");
        assert!(suite.passed());
        let json: serde_json::Value = serde_json::from_str(&suite.json()).unwrap();
        assert_eq!(json["scenarios"][0]["timings"]["symptom"], 4.0);
    }

    /// What the cluster said reaches the terminal only as visible escapes: no escape sequence, no C1
    /// control, and no line the report did not make.
    #[test]
    fn a_line_is_terminal_safe() {
        let mut r = ScenarioReport::ignored("pause-missing", "");
        r.status = Status::Failed;
        r.platform = "k8s\n PASS".into();
        r.error = Some("event Bad: \x1b]0;owned\x07\u{9b}2J\nsecond line\x7f".into());
        r.snapshot = SnapshotResult::Changed("differs:\n    unexpected: \x1b[2J".into());
        r.teardown_errors = vec!["\x1bc".into()];
        r.notes = vec!["held\x1b[8m".into()];
        let line = r.line();
        assert!(!line.chars().any(|c| c.is_control() && c != '\n'), "{line:?}");
        assert_eq!(
            line.lines().collect::<Vec<_>>(),
            [
                r"FAIL pause-missing [k8s\n PASS] setup=- inject=- symptom=- fix=- recovery=- teardown=- snapshot=changed",
                r"  error: event Bad: \u{1b}]0;owned\u{7}\u{9b}2J",
                r"  second line\u{7f}",
                "  snapshot: differs:",
                r"    unexpected: \u{1b}[2J",
                r"  teardown: \u{1b}c",
                r"  note: held\u{1b}[8m",
            ]
        );
    }

    /// A scenario the platform refused: not a failure (the suite passed nothing wrong), but listed as
    /// refused; JUnit skips it with the reason, the line says REFUSED.
    #[test]
    fn a_refused_scenario_is_neither_passed_nor_failed() {
        let mut r = ScenarioReport::ignored("inotify-limit", "refusing to run inotify-limit on kind: it reaches the host");
        r.status = Status::Refused;
        r.failed_phase = Some(Phase::Setup);
        let suite = SuiteReport::new(1.0, vec![r.clone()]);
        assert!(suite.passed(), "nothing failed");
        assert_eq!(suite.refused().len(), 1);
        assert!(r.line().starts_with("REFUSED inotify-limit [-] setup=-"), "no platform yet: {}", r.line());
        assert!(r.line().contains("error in setup: refusing to run inotify-limit on kind"), "{}", r.line());
        let xml = suite.junit();
        assert!(xml.contains("<skipped message=\"refusing to run inotify-limit on kind: it reaches the host\""), "{xml}");
        let json: serde_json::Value = serde_json::from_str(&suite.json()).unwrap();
        assert_eq!(json["scenarios"][0]["status"], "refused");
    }

    #[test]
    fn a_snapshot_mismatch_is_printed_once() {
        let mut r = ScenarioReport::ignored("web", "");
        r.status = Status::Failed;
        r.platform = "p".into();
        r.failed_phase = Some(Phase::Recovery);
        let paragraph = "events of web on p differ from the reviewed snapshot x.snap: 1 missing, 0 unexpected\n    missing:    Pod/web Normal A (kubelet): b\n    wrote x.snap.new; read it";
        r.error = Some(paragraph.into());
        r.snapshot = SnapshotResult::Changed(paragraph.into());
        let line = r.line();
        assert_eq!(line.matches("1 missing").count(), 1, "{line}");
        assert!(line.ends_with(&format!("\n  snapshot: {paragraph}")), "{line}");
        assert!(!line.contains("error in"), "{line}");
        let xml = SuiteReport::new(1.0, vec![r]).junit();
        assert!(xml.contains("1 missing, 0 unexpected"), "JUnit carries it as the failure's message: {xml}");
    }

    fn with_snapshot(status: Status, snapshot: SnapshotResult) -> ScenarioReport {
        let mut r = ScenarioReport::ignored("web", "");
        r.status = status;
        r.error = None;
        r.platform = "p".into();
        r.snapshot = snapshot;
        r
    }

    /// The line carries the snapshot's status; a new snapshot's paragraph is a notice of its own
    /// (`new snapshot:`, which CI's failure summary does not pick up), a changed one's is `snapshot:`.
    #[rstest::rstest]
    #[case::matched(SnapshotResult::Matched, " snapshot=matched", None)]
    #[case::changed(SnapshotResult::Changed("events of web on p differ".into()), " snapshot=changed", Some("\n  snapshot: events of web on p differ"))]
    #[case::new(SnapshotResult::New("no reviewed snapshot yet for web on p: wrote x".into()), " snapshot=new", Some("\n  new snapshot: no reviewed snapshot yet for web on p: wrote x"))]
    #[case::not_compared(SnapshotResult::Skipped("the run failed".into()), " snapshot=-", None)]
    fn the_line_says_the_snapshots_status(#[case] snapshot: SnapshotResult, #[case] status: &str, #[case] then: Option<&str>) {
        let line = with_snapshot(Status::Passed, snapshot).line();
        let (first, rest) = line.split_once('\n').map_or((line.as_str(), None), |(a, b)| (a, Some(b)));
        assert!(first.starts_with("PASS web [p] setup=-") && first.ends_with(status), "{line}");
        assert_eq!(rest.map(|r| format!("\n{r}")), then.map(str::to_owned), "{line}");
    }

    /// JSON: `snapshot` is the status or null, `snapshot_detail` the paragraph (or why not compared),
    /// and both read back.
    #[rstest::rstest]
    #[case::matched(SnapshotResult::Matched, serde_json::json!("matched"), None)]
    #[case::changed(SnapshotResult::Changed("differs".into()), serde_json::json!("changed"), Some("differs"))]
    #[case::new(SnapshotResult::New("none yet".into()), serde_json::json!("new"), Some("none yet"))]
    #[case::not_compared(SnapshotResult::Skipped("the run failed".into()), serde_json::Value::Null, Some("the run failed"))]
    fn the_json_has_the_snapshots_status_and_its_paragraph(#[case] snapshot: SnapshotResult, #[case] status: serde_json::Value, #[case] detail: Option<&str>) {
        let suite = SuiteReport::new(1.0, vec![with_snapshot(Status::Passed, snapshot.clone())]);
        let json: serde_json::Value = serde_json::from_str(&suite.json()).unwrap();
        let s = &json["scenarios"][0];
        assert_eq!(s["snapshot"], status, "{s}");
        assert_eq!(s.get("snapshot_detail").and_then(|d| d.as_str()), detail, "{s}");
        let back: SuiteReport = serde_json::from_str(&suite.json()).unwrap();
        assert_eq!(back.scenarios[0].snapshot, snapshot);
    }

    /// Reports of an older faultlab (`"snapshot": {"result": ..., "detail": ...}`) still read, as the
    /// status they meant: a first run's paragraph as `new`, any other difference as `changed`.
    #[rstest::rstest]
    #[case::matched(r#"{"result": "matched"}"#, SnapshotResult::Matched)]
    #[case::first_run(r#"{"result": "mismatched", "detail": "no reviewed snapshot yet for web on p: wrote x"}"#, SnapshotResult::New("no reviewed snapshot yet for web on p: wrote x".into()))]
    #[case::changed(r#"{"result": "mismatched", "detail": "events of web on p differ"}"#, SnapshotResult::Changed("events of web on p differ".into()))]
    #[case::skipped(r#"{"result": "skipped", "detail": "the run failed"}"#, SnapshotResult::Skipped("the run failed".into()))]
    fn older_reports_read_as_the_status_they_meant(#[case] field: &str, #[case] expected: SnapshotResult) {
        let mut json: serde_json::Value = serde_json::from_str(&SuiteReport::new(1.0, vec![with_snapshot(Status::Failed, SnapshotResult::Matched)]).json()).unwrap();
        json["scenarios"][0]["snapshot"] = serde_json::from_str(field).unwrap();
        let back: SuiteReport = serde_json::from_value(json).unwrap();
        assert_eq!(back.scenarios[0].snapshot, expected);
    }

    /// The report's JSON Schema names every field a report has, at the top and in each scenario, and
    /// the report carries its layout version.
    #[test]
    fn the_schema_names_every_field_and_the_version_is_written() {
        let report = SuiteReport::new(1.0, vec![with_snapshot(Status::Passed, SnapshotResult::New("no reviewed snapshot yet".into()))]);
        let json: serde_json::Value = serde_json::from_str(&report.json()).unwrap();
        assert_eq!(json["schemaVersion"], SCHEMA_VERSION);
        let schema: serde_json::Value = serde_json::from_str(&SuiteReport::json_schema()).unwrap();
        let top = schema["properties"].as_object().unwrap();
        for key in json.as_object().unwrap().keys() {
            assert!(top.contains_key(key), "the schema lacks the report's {key}");
        }
        let scenario_schema = &schema["$defs"]["ScenarioReport"];
        // The snapshot's fields are flattened in: the schema holds them through `allOf`/`$ref` or as properties.
        let text = scenario_schema.to_string() + &schema["$defs"].to_string();
        for key in json["scenarios"][0].as_object().unwrap().keys() {
            assert!(text.contains(&format!("\"{key}\"")), "the schema lacks the scenario report's {key}");
        }
        // A report from before the version was written reads as version 1.
        let mut older = json.clone();
        older.as_object_mut().unwrap().remove("schemaVersion");
        assert_eq!(serde_json::from_value::<SuiteReport>(older).unwrap().schema_version, 1);
    }

    /// JUnit: the status is a property of each case compared; a new snapshot failed by
    /// --strict-snapshots is a failure whose message names the scenario and the platform.
    #[test]
    fn junit_has_the_snapshots_status_and_a_strict_failure() {
        let passed = with_snapshot(Status::Passed, SnapshotResult::New("no reviewed snapshot yet for web on p: wrote x".into()));
        let mut strict = with_snapshot(Status::Failed, SnapshotResult::New("no reviewed snapshot yet for db on p: wrote y".into()));
        strict.scenario = "db".into();
        strict.failed_phase = Some(Phase::Recovery);
        strict.error = Some("no reviewed snapshot of db on p, and --strict-snapshots fails a run without one".into());
        let ignored = ScenarioReport::ignored("cni", "no cluster");
        let suite = SuiteReport::new(1.0, vec![passed, strict, ignored]);
        let xml = suite.junit();
        assert_eq!(xml.matches(r#"<property name="snapshot" value="new"/>"#).count(), 2, "{xml}");
        assert_eq!(xml.matches(r#"name="snapshot""#).count(), 2, "none for a scenario not compared: {xml}");
        assert!(xml.contains(r#"<failure message="no reviewed snapshot of db on p, and --strict-snapshots fails a run without one" type="recovery""#), "{xml}");
        assert_eq!(xml.matches("<failure").count(), 1, "the new one without --strict-snapshots passed: {xml}");
        assert!(!suite.passed());
        assert_eq!(suite.new_snapshots().iter().map(|r| r.scenario.as_str()).collect::<Vec<_>>(), ["web", "db"]);
    }
}
