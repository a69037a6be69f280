//! The HTML report: one page for a whole suite, with a summary table and, for each scenario, its
//! outcome and a timeline of its phases, waits, events and pod states. Also a training session's
//! debrief ([`debrief_page`]): how the cluster was broken, then the trainee's hints, checks and fix.
//!
//! The page is self-contained: its styles are inline, it has no scripts and loads nothing, so it opens
//! offline and in a CI artifact viewer. Hover texts are `title` elements. This module computes where
//! each bar, mark and label of a timeline goes; `templates/report.html` and `templates/debrief.html`
//! write the elements (a run's timeline and the styles are `timeline.html` and `style.html`, which both
//! include), and askama escapes every text in them.

use std::collections::HashMap;

use askama::Template;

use crate::record::Phase;
use crate::report::{PodState, ScenarioReport, Status, SuiteReport, Timeline};
use crate::snapshot::SnapshotResult;

/// The timeline's width in pixels, whatever the run's length.
const WIDTH: f64 = 960.0;
/// The left margin, where the lanes' names and the pods' names go.
const LEFT: f64 = 140.0;
const RIGHT: f64 = 24.0;
const PLOT: f64 = WIDTH - LEFT - RIGHT;
/// The width of one character of the timeline's text (11 px monospace), for fitting labels.
const CHAR: f64 = 6.7;
const AXIS: f64 = 20.0;
const LANE_GAP: f64 = 12.0;
const PHASE_HEIGHT: f64 = 22.0;
const WAIT_HEIGHT: f64 = 8.0;
/// Waits that overlap go on rows of their own, up to this many; more share the last row.
const WAIT_ROWS: usize = 6;
const MARK_HEIGHT: f64 = 12.0;
/// Event labels are staggered over this many rows under the marks.
const LABEL_ROWS: usize = 3;
const LABEL_HEIGHT: f64 = 13.0;
/// Events of one reason within this many pixels of the first of them share one label (`BackOff ×12`).
const SAME_REASON: f64 = 120.0;
const POD_HEIGHT: f64 = 14.0;
const POD_GAP: f64 = 5.0;
/// The most characters of a pod's name the left margin shows (the whole name is its hover text).
const POD_NAME: usize = 19;

/// The whole suite as one HTML page headed `title`.
pub fn suite_page(report: &SuiteReport, title: &str) -> String {
    let count = |s: Status| report.scenarios.iter().filter(|r| r.status == s).count();
    let mut ids: HashMap<&str, usize> = HashMap::new();
    let runs = report
        .scenarios
        .iter()
        .enumerate()
        .map(|(i, r)| {
            // A scenario that ran twice (two platforms) gets a second anchor: `NAME-2`.
            let n = ids.entry(r.scenario.as_str()).and_modify(|n| *n += 1).or_insert(1);
            let id = if *n == 1 { r.scenario.clone() } else { format!("{}-{n}", r.scenario) };
            Run::new(r, id, i)
        })
        .collect();
    let page = Page {
        title,
        wall: seconds(report.wall_seconds),
        passed: count(Status::Passed),
        failed: count(Status::Failed),
        ignored: count(Status::Ignored),
        refused: count(Status::Refused),
        new_snapshots: report.new_snapshots().len(),
        phases: Phase::ALL.iter().map(|p| p.as_str()).collect(),
        runs,
    };
    // Every value the template writes is a string or a number written into a String, and no filter
    // it uses can fail: askama has no error to give here.
    terminal_safe(page.render().expect("the report page renders"))
}

/// A page with the controls of the cluster's text (askama escapes markup, not them) shown as escapes:
/// the page is read with `cat` and `less` too, and XML forbids most of them in its inline SVG.
fn terminal_safe(page: String) -> String {
    match crate::terminal::lines(&page) {
        std::borrow::Cow::Borrowed(_) => page,
        std::borrow::Cow::Owned(escaped) => escaped,
    }
}

#[derive(Template)]
#[template(path = "report.html")]
struct Page<'a> {
    title: &'a str,
    wall: String,
    passed: usize,
    failed: usize,
    ignored: usize,
    refused: usize,
    /// How many scenarios had no reviewed snapshot on their platform.
    new_snapshots: usize,
    phases: Vec<&'static str>,
    runs: Vec<Run<'a>>,
}

/// One scenario: its row in the summary and its section.
struct Run<'a> {
    id: String,
    name: &'a str,
    status: &'static str,
    platform: &'a str,
    /// Where it ran, as (name, value): only those known.
    facts: Vec<(&'static str, String)>,
    times: Vec<String>,
    waiting: String,
    /// The error, unless it is the snapshot's difference (shown once, as that).
    error: Option<&'a str>,
    failed_phase: Option<&'static str>,
    snapshot: &'a SnapshotResult,
    /// `matched`, `changed` or `new`; empty when the events were not compared.
    snapshot_status: &'static str,
    teardown_errors: &'a [String],
    logs: Option<&'a str>,
    /// Each note's first line, and the rest (a node's state difference) to show as written.
    notes: Vec<(&'a str, Option<&'a str>)>,
    timeline: Option<Svg>,
}

impl<'a> Run<'a> {
    fn new(r: &'a ScenarioReport, id: String, index: usize) -> Run<'a> {
        let mut facts = vec![
            ("platform", r.platform.clone()),
            ("provider", r.provider.clone()),
            ("cluster", r.cluster.clone().unwrap_or_default()),
            // A shared kind cluster is made for the first scenario of its group; the others find it up.
            ("cluster ready in", match r.cluster_seconds {
                Some(s) if s < 0.05 && r.cluster.is_some() => "already up (shared)".to_string(),
                Some(s) => seconds(s),
                None => String::new(),
            }),
            ("node", r.node.clone()),
            ("namespace", r.namespace.clone()),
            ("started", r.timeline.started.clone()),
            // `faultlab run --jobs`: the scenarios that ran at the same time as this one.
            ("ran beside", r.ran_beside.join(", ")),
            ("own time", own_time(&r.timings)),
        ];
        facts.retain(|(_, v)| !v.is_empty());
        let snapshot_error = matches!(&r.snapshot, SnapshotResult::Changed(d) | SnapshotResult::New(d) if r.error.as_ref() == Some(d));
        Run {
            id,
            name: &r.scenario,
            status: status(r.status),
            platform: &r.platform,
            facts,
            times: Phase::ALL.iter().map(|p| optional_seconds(r.timings.get(*p))).collect(),
            waiting: optional_seconds(r.timings.waiting),
            error: r.error.as_deref().filter(|_| !snapshot_error),
            failed_phase: r.failed_phase.map(Phase::as_str),
            snapshot: &r.snapshot,
            snapshot_status: r.snapshot.status().map_or("", crate::snapshot::SnapshotStatus::as_str),
            teardown_errors: &r.teardown_errors,
            logs: r.logs.as_deref(),
            notes: r.notes.iter().map(|n| n.split_once('\n').map_or((n.as_str(), None), |(head, rest)| (head, Some(rest)))).collect(),
            timeline: (!r.timeline.is_empty()).then(|| Svg::new(&r.timeline, index, &format!("timeline of {}", r.scenario))),
        }
    }
}

fn status(s: Status) -> &'static str {
    match s {
        Status::Passed => "passed",
        Status::Failed => "failed",
        Status::Ignored => "ignored",
        Status::Refused => "refused",
    }
}

/// `12.3 s`.
fn seconds(s: f64) -> String {
    format!("{s:.1} s")
}

/// Of the phases' time outside the gates, what faultlab's own time went to (reports from before the
/// breakdown: nothing).
fn own_time(t: &crate::runner::Timings) -> String {
    let (Some(own), Some(waiting)) = (&t.own, t.waiting) else { return String::new() };
    let phases: f64 = Phase::ALL.iter().filter_map(|p| t.get(*p)).sum();
    format!(
        "{} outside the gates: commands {} (the fault's own, in inject and fix: {}), API calls {}, settling {}, undoing {}",
        seconds((phases - waiting).max(0.0)),
        seconds(own.commands),
        seconds(own.fault_commands),
        seconds(own.api),
        seconds(own.settling),
        seconds(own.undoing)
    )
}

/// `12.3 s`, or `–` when there is no time.
fn optional_seconds(s: Option<f64>) -> String {
    s.map(seconds).unwrap_or_else(|| "–".into())
}

/// Rounded to a tenth of a pixel, which is all a screen shows and keeps the page short.
fn px(v: f64) -> f64 {
    (v * 10.0).round() / 10.0
}

/// The pixel width of `text` in the timeline's font.
fn text_width(text: &str) -> f64 {
    text.chars().count() as f64 * CHAR
}

/// The step between the time axis's ticks for a timeline `span` seconds long: the smallest of 0.1,
/// 0.2, 0.5, 1, 2, 5, 10, 20, 30, 60, 120, 300, 600, 1200, 1800, 3600 s (and doublings past that)
/// that gives at most 12 ticks, counting the one at 0; each step is at most 2.5 times the one
/// before, so that is at least 5 ticks once the span is 0.4 s or more.
fn tick_step(span: f64) -> f64 {
    const STEPS: [f64; 16] = [0.1, 0.2, 0.5, 1.0, 2.0, 5.0, 10.0, 20.0, 30.0, 60.0, 120.0, 300.0, 600.0, 1200.0, 1800.0, 3600.0];
    let fits = |step: f64| (span / step).floor() + 1.0 <= 12.0;
    if let Some(step) = STEPS.into_iter().find(|s| fits(*s)) {
        return step;
    }
    let mut step = STEPS[STEPS.len() - 1];
    while !fits(step) && step.is_finite() {
        step *= 2.0;
    }
    step
}

/// A run's timeline, laid out: every number is in pixels.
struct Svg {
    /// What it shows, for screen readers.
    label: String,
    width: f64,
    height: f64,
    /// The id of this timeline's hatching (unfinished phases); unique in the page.
    hatch: String,
    plot_left: f64,
    plot_right: f64,
    axis_y: f64,
    ticks: Vec<Tick>,
    lanes: Vec<LaneName>,
    phases: Vec<PhaseBar>,
    waits: Vec<WaitBar>,
    events: Vec<EventMark>,
    labels: Vec<Label>,
    pods: Vec<PodSegment>,
}

struct Tick {
    x: f64,
    text: String,
}

/// A lane's name in the left margin, and its hover text (a pod's whole name).
struct LaneName {
    y: f64,
    text: String,
    title: String,
}

struct PhaseBar {
    phase: &'static str,
    unfinished: bool,
    x: f64,
    y: f64,
    width: f64,
    height: f64,
    /// The phase's name, where it fits in the bar.
    label: Option<String>,
    title: String,
}

struct WaitBar {
    met: bool,
    x: f64,
    y: f64,
    width: f64,
    height: f64,
    title: String,
}

struct EventMark {
    type_: String,
    reason: String,
    x: f64,
    y: f64,
    height: f64,
    title: String,
}

/// The reason under one or more marks of the same reason close together.
struct Label {
    type_: String,
    x: f64,
    y: f64,
    /// `end` when the text ends at `x` (a label at the right edge).
    anchor: &'static str,
    text: String,
    title: String,
}

struct PodSegment {
    pod: String,
    state: String,
    /// `ok`, `waiting`, `bad` or `gone`: the segment's colour.
    kind: &'static str,
    x: f64,
    y: f64,
    width: f64,
    height: f64,
    label: Option<String>,
    title: String,
}

/// Seconds to pixels, for a timeline `span` seconds long.
struct Scale {
    span: f64,
}

impl Scale {
    fn x(&self, t: f64) -> f64 {
        px(LEFT + t.clamp(0.0, self.span) / self.span * PLOT)
    }

    /// From `start` to `end`, at least 2 px wide so that an instant stays visible.
    fn bar(&self, start: f64, end: f64) -> (f64, f64) {
        let x = self.x(start);
        (x, px((self.x(end) - x).max(2.0)))
    }
}

impl Svg {
    fn new(t: &Timeline, index: usize, label: &str) -> Svg {
        let end = t.end();
        let span = if end.is_finite() && end > 0.0 { end } else { 1.0 };
        let scale = Scale { span };
        let mut svg = Svg {
            label: label.into(),
            width: WIDTH,
            height: 0.0,
            hatch: format!("hatch-{index}"),
            plot_left: LEFT,
            plot_right: LEFT + PLOT,
            axis_y: AXIS - 4.0,
            ticks: ticks(span, &scale),
            lanes: vec![],
            phases: vec![],
            waits: vec![],
            events: vec![],
            labels: vec![],
            pods: vec![],
        };
        let mut y = AXIS + 4.0;
        y = svg.phase_lane(t, &scale, y);
        if !t.waits.is_empty() {
            y = svg.wait_lane(t, &scale, y + LANE_GAP);
        }
        if !t.events.is_empty() {
            y = svg.event_lane(t, &scale, y + LANE_GAP);
        }
        if !t.pods.is_empty() {
            y = svg.pod_lane(t, &scale, y + LANE_GAP);
        }
        svg.height = px(y + 6.0);
        svg
    }

    fn lane(&mut self, y: f64, text: &str, title: &str) {
        self.lanes.push(LaneName { y: px(y), text: text.into(), title: title.into() });
    }

    /// Phases as bands; one that did not end reaches the timeline's end. Returns the lane's bottom.
    fn phase_lane(&mut self, t: &Timeline, scale: &Scale, top: f64) -> f64 {
        self.lane(top + 15.0, "phases", "the run's phases");
        for p in &t.phases {
            let name = p.phase.as_str();
            let (x, width) = scale.bar(p.start, p.end.unwrap_or(scale.span));
            let title = match p.end {
                Some(end) => format!("{name}: {} – {} ({})", seconds(p.start), seconds(end), seconds(end - p.start)),
                None => format!("{name}: {} – unfinished (the timeline ends at {})", seconds(p.start), seconds(scale.span)),
            };
            let label = (text_width(name) + 6.0 <= width).then(|| name.to_string());
            self.phases.push(PhaseBar { phase: name, unfinished: p.end.is_none(), x, y: top, width, height: PHASE_HEIGHT, label, title });
        }
        top + PHASE_HEIGHT
    }

    /// Waits as thin bars; waits that overlap go on rows of their own.
    fn wait_lane(&mut self, t: &Timeline, scale: &Scale, top: f64) -> f64 {
        let mut order: Vec<_> = t.waits.iter().collect();
        order.sort_by(|a, b| a.start.total_cmp(&b.start));
        let mut rows: Vec<f64> = vec![];
        for w in order {
            let (x, width) = scale.bar(w.start, w.end);
            let row = match rows.iter().position(|end| *end + 2.0 <= x) {
                Some(r) => r,
                None if rows.len() < WAIT_ROWS => {
                    rows.push(0.0);
                    rows.len() - 1
                }
                None => WAIT_ROWS - 1,
            };
            rows[row] = rows[row].max(x + width);
            let met = if w.met { "met" } else { "not met" };
            let title = format!("{}: {} – {} ({}), {met} ({})", w.what, seconds(w.start), seconds(w.end), seconds(w.end - w.start), w.phase.as_str());
            self.waits.push(WaitBar { met: w.met, x, y: px(top + row as f64 * (WAIT_HEIGHT + 3.0)), width, height: WAIT_HEIGHT, title });
        }
        let bottom = top + rows.len() as f64 * (WAIT_HEIGHT + 3.0) - 3.0;
        self.lane((top + bottom) / 2.0 + 4.0, "waits", "each wait on the cluster: green when met, red when not");
        bottom
    }

    /// Events as marks, with their reasons under them on up to three rows. Events of one reason close
    /// together share a label that counts them; a label that finds no room is left out (its marks and
    /// their hover texts stay).
    fn event_lane(&mut self, t: &Timeline, scale: &Scale, top: f64) -> f64 {
        let mut order: Vec<_> = t.events.iter().collect();
        order.sort_by(|a, b| a.at.total_cmp(&b.at));
        // Events of one reason close together, from the first of them at `x`.
        struct Group<'e> {
            reason: &'e str,
            type_: &'e str,
            x: f64,
            first: f64,
            last: f64,
            count: usize,
        }
        let mut groups: Vec<Group> = vec![];
        let mut open: HashMap<&str, usize> = HashMap::new();
        for e in &order {
            let x = scale.x(e.at);
            self.events.push(EventMark {
                type_: e.type_.clone(),
                reason: e.reason.clone(),
                x: px(x - 1.5),
                y: top,
                height: MARK_HEIGHT,
                title: format!("{} {} {} ({}) {}: {}", seconds(e.at), e.type_, e.reason, e.source, e.object, e.message),
            });
            match open.get(e.reason.as_str()).map(|g| &mut groups[*g]) {
                Some(g) if x - g.x <= SAME_REASON => {
                    g.count += 1;
                    g.last = e.at;
                    // A warning among them colours the label.
                    if e.type_ == "Warning" {
                        g.type_ = &e.type_;
                    }
                }
                _ => {
                    open.insert(&e.reason, groups.len());
                    groups.push(Group { reason: &e.reason, type_: &e.type_, x, first: e.at, last: e.at, count: 1 });
                }
            }
        }
        let mut row_ends = [f64::NEG_INFINITY; LABEL_ROWS];
        let mut rows_used = 0;
        for g in groups {
            let (text, title) = if g.count == 1 {
                (g.reason.to_string(), format!("{} at {}", g.reason, seconds(g.first)))
            } else {
                (format!("{} ×{}", g.reason, g.count), format!("{} events {} from {} to {}", g.count, g.reason, seconds(g.first), seconds(g.last)))
            };
            let width = text_width(&text);
            let (left, anchor) = if g.x + width <= WIDTH - 2.0 { (g.x, "start") } else { (g.x - width, "end") };
            let Some(row) = row_ends.iter().position(|end| *end + CHAR <= left) else { continue };
            row_ends[row] = left + width;
            rows_used = rows_used.max(row + 1);
            let y = top + MARK_HEIGHT + LABEL_HEIGHT * (row as f64 + 1.0) - 2.0;
            self.labels.push(Label { type_: g.type_.to_string(), x: px(g.x), y: px(y), anchor, text, title });
        }
        self.lane(top + 10.0, "events", "every event the run saw: orange for warnings, blue for normal ones");
        top + MARK_HEIGHT + LABEL_HEIGHT * rows_used as f64
    }

    /// One row per pod, in the order they appeared: each state from when it was seen to the next
    /// (the last one to the timeline's end).
    fn pod_lane(&mut self, t: &Timeline, scale: &Scale, top: f64) -> f64 {
        let mut y = top;
        for (pod, states) in pod_rows(&t.pods) {
            let name: String = if pod.chars().count() > POD_NAME { pod.chars().take(POD_NAME - 1).chain(['…']).collect() } else { pod.to_string() };
            self.lane(y + 11.0, &name, pod);
            for (i, s) in states.iter().enumerate() {
                let next = states.get(i + 1).map(|n| n.at);
                let (x, width) = scale.bar(s.at, next.unwrap_or(scale.span));
                let until = match next {
                    Some(n) => format!("{} – {} ({})", seconds(s.at), seconds(n), seconds(n - s.at)),
                    None => format!("from {}, the last state seen", seconds(s.at)),
                };
                let label = (text_width(&s.state) + 6.0 <= width).then(|| s.state.clone());
                let kind = state_kind(&s.state);
                let title = format!("{pod}: {}, {until}", s.state);
                self.pods.push(PodSegment { pod: pod.to_string(), state: s.state.clone(), kind, x, y: px(y), width, height: POD_HEIGHT, label, title });
            }
            y += POD_HEIGHT + POD_GAP;
        }
        y - POD_GAP
    }
}

/// The pods' states by pod, the pods in the order they appeared, each one's states in time order: one
/// pass over the states (a pod's row found by its name), so a run whose pods changed state many times
/// costs time in proportion.
fn pod_rows(states: &[PodState]) -> Vec<(&str, Vec<&PodState>)> {
    let mut rows: Vec<(&str, Vec<&PodState>)> = vec![];
    let mut row_of: HashMap<&str, usize> = HashMap::new();
    for s in states {
        let row = *row_of.entry(s.pod.as_str()).or_insert_with(|| {
            rows.push((s.pod.as_str(), vec![]));
            rows.len() - 1
        });
        rows[row].1.push(s);
    }
    for (_, states) in &mut rows {
        states.sort_by(|a, b| a.at.total_cmp(&b.at));
    }
    rows
}

/// The ticks at every multiple of the step from 0 to the span.
fn ticks(span: f64, scale: &Scale) -> Vec<Tick> {
    ticks_in(span, scale, run_tick)
}

/// The ticks at every multiple of the step from 0 to the span, each written by `text(t, step)`.
fn ticks_in(span: f64, scale: &Scale, text: fn(f64, f64) -> String) -> Vec<Tick> {
    let step = tick_step(span);
    let count = (span / step + 1e-9).floor() as usize;
    (0..=count)
        .map(|i| {
            let t = i as f64 * step;
            Tick { x: scale.x(t), text: text(t, step) }
        })
        .collect()
}

/// A pod state's colour: `ok` (running and ready, or succeeded), `waiting` (pending, creating, not
/// ready yet), `gone` (terminating, deleted) or `bad` (any other reason: image pulls, crashes).
fn state_kind(state: &str) -> &'static str {
    let mut words = state.split_whitespace();
    let (phase, rest) = (words.next().unwrap_or_default(), words.collect::<Vec<_>>().join(" "));
    match (phase, rest.as_str()) {
        ("terminating" | "deleted", _) => "gone",
        ("Running", "ready") | ("Succeeded", _) => "ok",
        ("Pending", "" | "ContainerCreating" | "PodInitializing") | ("Running", "not ready" | "") => "waiting",
        _ => "bad",
    }
}

/// A training session, for its debrief page: how the cluster was broken, then what the trainee asked
/// and checked, and when. Plain data: `training` fills it in from a session (this module knows nothing
/// of sessions). Times are in seconds from the symptom shown (`started`, the session's 0 s) unless a
/// field says otherwise.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Debrief {
    pub scenario: String,
    /// The document the scenario follows: its name, title and section.
    pub document: String,
    pub title: String,
    pub section: Option<String>,
    pub session: String,
    pub namespace: String,
    /// When the symptom was shown, RFC 3339 (UTC): the clock starts.
    pub started: String,
    /// How the cluster was broken: the setup, inject and symptom phases, their waits and events, in
    /// seconds from the break's start (the session's 0 s is where it ends).
    pub broke: Timeline,
    /// Each hint asked, in order.
    pub hints: Vec<DebriefHint>,
    /// How many hints the scenario has.
    pub hints_available: usize,
    /// Each `faultlab check`, in order.
    pub checks: Vec<DebriefCheck>,
    /// Whether the documented fix was shown, and when (`None`: not recorded, in a session from before
    /// the solution was timed).
    pub solution_shown: bool,
    pub solution_at: Option<f64>,
    /// When a check first found the cluster fixed, RFC 3339 (UTC).
    pub fixed_at: Option<String>,
    /// The time to fix: from the symptom shown to that check.
    pub time_to_fix: Option<f64>,
    /// The session was reset before it was fixed: when.
    pub reset_unfixed: Option<f64>,
    /// The challenge's score and its breakdown (`None`: a page made without one).
    pub score: Option<crate::score::Score>,
    /// What the trainee typed in `faultlab terminal`, line by line (none: no web terminal was used).
    pub commands: Vec<DebriefCommand>,
}

/// A line the trainee entered in the web terminal, at `at` seconds from the symptom shown.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct DebriefCommand {
    pub at: f64,
    pub line: String,
}

/// A hint asked.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct DebriefHint {
    /// `None`: the session did not record when (it began before hints were timed).
    pub at: Option<f64>,
    pub text: String,
}

/// One `faultlab check`.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct DebriefCheck {
    pub at: f64,
    pub fixed: bool,
    /// What still failed, one line each (a line may hold several).
    pub failing: Vec<String>,
}

/// A training session's debrief as one self-contained HTML page, styled as the suite's: a summary, the
/// break's timeline, the session's own timeline (hints, checks, the solution, the fix) and every check
/// with what still failed.
pub fn debrief_page(d: &Debrief) -> String {
    let mut source = format!("{} — {}", d.document, d.title);
    if let Some(section) = &d.section {
        source.push_str(&format!(" / {section}"));
    }
    let not_fixed = d.checks.iter().filter(|c| !c.fixed).count();
    let summary = vec![
        ("broken at", d.started.clone()),
        (
            "fixed at",
            match (&d.fixed_at, d.reset_unfixed) {
                (Some(at), _) => at.clone(),
                (None, Some(reset)) => format!("not fixed: reset after {}", clock(reset)),
                (None, None) => "not fixed".into(),
            },
        ),
        ("time to fix", d.time_to_fix.map(|t| format!("{} ({})", clock(t), seconds(t))).unwrap_or_else(|| "–".into())),
        ("hints asked", format!("{} of {}", d.hints.len(), d.hints_available)),
        (
            "solution",
            match (d.solution_shown, d.solution_at) {
                (_, Some(t)) => format!("shown at {}", clock(t)),
                (true, None) => "shown".into(),
                (false, None) => "not shown".into(),
            },
        ),
        (
            "checks",
            match (d.checks.len(), not_fixed) {
                (0, _) => "none".into(),
                (n, 0) => format!("{n}"),
                (n, k) => format!("{n} ({k} not fixed)"),
            },
        ),
    ];
    let mut summary = summary;
    if let Some(score) = &d.score {
        summary.push(("score", format!("{} of {}", score.total, score.out_of)));
        summary.extend(score.lines.iter().map(|l| (l.part, format!("{:+} ({})", l.points, l.why))));
    }
    let page = DebriefPage {
        title: format!("Debrief: {}", d.scenario),
        d,
        source,
        fixed: d.time_to_fix.is_some(),
        summary,
        broke_end: seconds(d.broke.end()),
        timeline: (!d.broke.is_empty()).then(|| Svg::new(&d.broke, 0, &format!("how {} was broken", d.scenario))),
        session: SessionSvg::new(d),
        hints: d.hints.iter().map(|h| Item { at: h.at.map(clock).unwrap_or_else(|| "–".into()), fixed: false, text: &h.text, failing: &[] }).collect(),
        checks: d.checks.iter().map(|c| Item { at: clock(c.at), fixed: c.fixed, text: "", failing: &c.failing }).collect(),
        commands: d.commands.iter().map(|c| Item { at: clock(c.at), fixed: false, text: &c.line, failing: &[] }).collect(),
    };
    // As the suite page: strings and numbers only, and no filter that can fail.
    terminal_safe(page.render().expect("the debrief page renders"))
}

/// The instructor's scoreboard of a class: one row per trainee's session, best score first. Plain data
/// (`training` fills it in; this module knows nothing of sessions).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Scoreboard {
    /// When it was made, RFC 3339 (UTC).
    pub made: String,
    /// Seconds after which the browser loads the page again (`faultlab scoreboard --watch`); `None`: never.
    pub refresh: Option<u32>,
    pub rows: Vec<ScoreboardRow>,
}

/// One session on the scoreboard. Times are seconds from the symptom shown.
#[derive(Clone, Debug, PartialEq)]
pub struct ScoreboardRow {
    pub session: String,
    /// The challenge as the trainee is shown it: a blind one not yet fixed does not name its scenario.
    pub challenge: String,
    pub namespace: String,
    pub context: String,
    pub elapsed: f64,
    pub time_limit: f64,
    /// When each stage was first answered right; the fix when `check` first found it.
    pub detected: Option<f64>,
    pub localised: Option<f64>,
    pub fixed: Option<f64>,
    pub hints: usize,
    pub solution_shown: bool,
    pub score: crate::score::Score,
}

/// The scoreboard as one self-contained HTML page (no script; with `refresh`, a meta refresh).
pub fn scoreboard_page(b: &Scoreboard) -> String {
    let mut rows: Vec<&ScoreboardRow> = b.rows.iter().collect();
    // Best score first; on a tie, who got there sooner (fixed earlier, else more time left), then by name.
    rows.sort_by(|x, y| {
        y.score.total.cmp(&x.score.total).then(x.fixed.unwrap_or(f64::INFINITY).total_cmp(&y.fixed.unwrap_or(f64::INFINITY))).then(x.session.cmp(&y.session))
    });
    let stage = |t: Option<f64>, limit: f64| match t {
        Some(t) if t <= limit => (clock(t), "done"),
        Some(t) => (clock(t), "late"),
        None => ("–".to_string(), "open"),
    };
    let lines = rows
        .iter()
        .enumerate()
        .map(|(i, r)| {
            let state = match (r.fixed, r.elapsed > r.time_limit) {
                (Some(_), _) => "fixed",
                (None, true) => "over time",
                (None, false) => "working",
            };
            BoardLine {
                rank: i + 1,
                r,
                state,
                elapsed: clock(r.elapsed),
                limit: clock(r.time_limit),
                stages: [stage(r.detected, r.time_limit), stage(r.localised, r.time_limit), stage(r.fixed, r.time_limit)],
            }
        })
        .collect();
    let page = ScoreboardPage { title: "faultlab scoreboard".into(), b, lines };
    terminal_safe(page.render().expect("the scoreboard renders"))
}

struct BoardLine<'a> {
    rank: usize,
    r: &'a ScoreboardRow,
    /// `working`, `fixed` or `over time`.
    state: &'static str,
    elapsed: String,
    limit: String,
    /// Detect, localise, mitigate: when (m:ss) and `done`, `late` or `open`.
    stages: [(String, &'static str); 3],
}

#[derive(Template)]
#[template(path = "scoreboard.html")]
struct ScoreboardPage<'a> {
    title: String,
    b: &'a Scoreboard,
    lines: Vec<BoardLine<'a>>,
}

#[derive(Template)]
#[template(path = "debrief.html")]
struct DebriefPage<'a> {
    title: String,
    d: &'a Debrief,
    /// `document — title / section`.
    source: String,
    fixed: bool,
    summary: Vec<(&'static str, String)>,
    /// Where the break's timeline ends: the session's 0 s.
    broke_end: String,
    timeline: Option<Svg>,
    session: SessionSvg,
    hints: Vec<Item<'a>>,
    checks: Vec<Item<'a>>,
    commands: Vec<Item<'a>>,
}

/// A hint or a check in the page's lists.
struct Item<'a> {
    at: String,
    fixed: bool,
    text: &'a str,
    failing: &'a [String],
}

/// `4m12s` from a minute on, `12.3 s` below.
fn clock(s: f64) -> String {
    if s < 60.0 {
        seconds(s)
    } else {
        crate::duration::format(std::time::Duration::from_secs(s.round() as u64))
    }
}

const SESSION_MARK: f64 = 16.0;

/// The session on its own time axis, from the symptom shown (0 s) to the last thing that happened:
/// the cluster broken then fixed, each hint, each check, the solution shown, the fix and a reset.
struct SessionSvg {
    width: f64,
    height: f64,
    plot_left: f64,
    plot_right: f64,
    axis_y: f64,
    ticks: Vec<Tick>,
    lanes: Vec<LaneName>,
    /// The cluster's state: `broken`, then `fixed`.
    bands: Vec<Band>,
    hints: Vec<Mark>,
    checks: Vec<CheckMark>,
    solution: Option<Mark>,
    /// A line across the lanes where the cluster was found fixed.
    fix: Option<Rule>,
    /// Where the session was reset unfixed.
    reset: Option<Rule>,
}

struct Band {
    kind: &'static str,
    x: f64,
    y: f64,
    width: f64,
    height: f64,
    label: Option<String>,
    title: String,
}

/// A hint or the solution: a bar with a short label beside it.
struct Mark {
    x: f64,
    y: f64,
    height: f64,
    label: String,
    label_x: f64,
    anchor: &'static str,
    title: String,
}

struct CheckMark {
    fixed: bool,
    cx: f64,
    cy: f64,
    title: String,
}

struct Rule {
    x: f64,
    y1: f64,
    y2: f64,
    title: String,
}

impl SessionSvg {
    fn new(d: &Debrief) -> SessionSvg {
        let times = d.hints.iter().filter_map(|h| h.at).chain(d.checks.iter().map(|c| c.at)).chain(d.solution_at).chain(d.time_to_fix).chain(d.reset_unfixed);
        let last = times.filter(|t| t.is_finite()).fold(0.0, f64::max);
        let span = if last > 0.0 { last } else { 1.0 };
        let scale = Scale { span };
        let mut svg = SessionSvg {
            width: WIDTH,
            height: 0.0,
            plot_left: LEFT,
            plot_right: LEFT + PLOT,
            axis_y: AXIS - 4.0,
            ticks: ticks_in(span, &scale, clock_tick),
            lanes: vec![],
            bands: vec![],
            hints: vec![],
            checks: vec![],
            solution: None,
            fix: None,
            reset: None,
        };
        let lane = |svg: &mut SessionSvg, y: f64, text: &str, title: &str| svg.lanes.push(LaneName { y: px(y), text: text.into(), title: title.into() });

        // The cluster: broken from 0 to the fix (or the reset, or the last thing), then fixed.
        let top = AXIS + 4.0;
        lane(&mut svg, top + 15.0, "cluster", "the cluster: broken from the symptom shown, fixed from the first check that found it fixed");
        let broken_until = d.time_to_fix.or(d.reset_unfixed).unwrap_or(span);
        let (x, width) = scale.bar(0.0, broken_until);
        let title = match (d.time_to_fix, d.reset_unfixed) {
            (Some(t), _) => format!("broken: 0.0 s – {} ({})", seconds(t), clock(t)),
            (None, Some(t)) => format!("broken: 0.0 s – {}, reset before it was fixed", seconds(t)),
            (None, None) => format!("broken: from 0.0 s, not fixed (the timeline ends at {})", seconds(span)),
        };
        let label = (text_width("broken") + 6.0 <= width).then(|| "broken".to_string());
        svg.bands.push(Band { kind: "broken", x, y: top, width, height: PHASE_HEIGHT, label, title });
        if let Some(t) = d.time_to_fix {
            let (x, width) = scale.bar(t, span);
            let label = (text_width("fixed") + 6.0 <= width).then(|| "fixed".to_string());
            svg.bands.push(Band { kind: "fixed", x, y: top, width, height: PHASE_HEIGHT, label, title: format!("fixed: from {}", seconds(t)) });
        }

        let mark = |t: f64, y: f64, label: String, title: String| {
            let x = scale.x(t);
            let (label_x, anchor) = if x + 5.0 + text_width(&label) <= WIDTH - 2.0 { (px(x + 5.0), "start") } else { (px(x - 4.0), "end") };
            Mark { x: px(x - 1.5), y: px(y), height: SESSION_MARK, label, label_x, anchor, title }
        };
        let mut y = top + PHASE_HEIGHT + LANE_GAP;
        lane(&mut svg, y + 12.0, "hints", "each hint asked; hover for its text");
        for (i, h) in d.hints.iter().enumerate() {
            let Some(at) = h.at else { continue };
            svg.hints.push(mark(at, y, format!("{}", i + 1), format!("hint {} at {}: {}", i + 1, clock(at), h.text)));
        }
        y += SESSION_MARK + LANE_GAP;
        lane(&mut svg, y + 12.0, "checks", "each faultlab check: green when fixed, red when not; hover for what still failed");
        for (i, c) in d.checks.iter().enumerate() {
            let title = if c.fixed {
                format!("check {} at {}: fixed", i + 1, clock(c.at))
            } else {
                let failing: String = c.failing.iter().map(|f| format!("\n– {f}")).collect();
                format!("check {} at {}: not fixed{failing}", i + 1, clock(c.at))
            };
            svg.checks.push(CheckMark { fixed: c.fixed, cx: scale.x(c.at), cy: px(y + SESSION_MARK / 2.0), title });
        }
        y += SESSION_MARK + LANE_GAP;
        lane(&mut svg, y + 12.0, "solution", "when the documented fix was shown");
        if let Some(at) = d.solution_at {
            svg.solution = Some(mark(at, y, "solution shown".into(), format!("the solution was shown at {}", clock(at))));
        }
        y += SESSION_MARK;
        if let Some(t) = d.time_to_fix {
            svg.fix = Some(Rule { x: scale.x(t), y1: top, y2: px(y), title: format!("fixed after {} ({}), found by a check", clock(t), seconds(t)) });
        }
        if let Some(t) = d.reset_unfixed {
            svg.reset = Some(Rule { x: scale.x(t), y1: top, y2: px(y), title: format!("reset unfixed after {}", clock(t)) });
        }
        svg.height = px(y + 6.0);
        svg
    }
}

/// A tick of the session's axis: minutes once the step is a minute or more.
fn clock_tick(t: f64, step: f64) -> String {
    if step >= 60.0 {
        format!("{}m", (t / 60.0).round())
    } else {
        run_tick(t, step)
    }
}

/// A tick of a run's axis, in seconds.
fn run_tick(t: f64, step: f64) -> String {
    if step < 1.0 {
        format!("{t:.1} s")
    } else {
        format!("{t:.0} s")
    }
}

#[cfg(test)]
mod tests {
    use rstest::rstest;

    use super::*;
    use crate::events::Normalised;
    use crate::report::{PhaseSpan, TimedEvent, TimedWait};
    use crate::runner::Timings;

    fn event(at: f64, type_: &str, reason: &str, message: &str) -> TimedEvent {
        TimedEvent { at, object: "Pod/web-5d9c7b-x2x9q".into(), type_: type_.into(), reason: reason.into(), source: "kubelet".into(), message: message.into() }
    }

    fn span(phase: Phase, start: f64, end: Option<f64>) -> PhaseSpan {
        PhaseSpan { phase, start, end }
    }

    fn pod(at: f64, state: &str) -> PodState {
        PodState { at, pod: "web-5d9c7b-x2x9q".into(), state: state.into() }
    }

    /// A suite of two runs: one passed, one failed in recovery with its events differing from the
    /// snapshot, the recovery phase unfinished, a wait not met and a crash loop's repeated events.
    fn suite() -> SuiteReport {
        let mut passed = ScenarioReport::ignored("pause-missing", "");
        passed.status = Status::Passed;
        passed.error = None;
        passed.provider = "kind".into();
        passed.platform = "k8s-1.20-containerd-1.6-amd64".into();
        passed.node = "faultlab-control-plane".into();
        passed.namespace = "faultlab-pause-missing-x1".into();
        passed.cluster = Some("faultlab".into());
        passed.cluster_seconds = Some(41.04);
        passed.snapshot = SnapshotResult::Matched;
        passed.timings = Timings {
            setup: Some(3.0),
            inject: Some(0.5),
            symptom: Some(4.0),
            fix: Some(1.0),
            recovery: Some(12.0),
            teardown: Some(2.0),
            waiting: Some(15.2),
            own: Some(crate::runner::OwnTime { commands: 1.5, fault_commands: 0.4, api: 0.6, settling: 3.1, undoing: 0.2 }),
        };
        passed.timeline = Timeline {
            started: "2026-05-01T10:00:00Z".into(),
            phases: vec![span(Phase::Setup, 0.0, Some(3.0)), span(Phase::Inject, 3.0, Some(3.5)), span(Phase::Symptom, 3.5, Some(7.5)), span(Phase::Fix, 7.5, Some(8.5)), span(Phase::Recovery, 8.5, Some(20.5)), span(Phase::Teardown, 20.5, Some(22.5))],
            events: vec![event(1.2, "Normal", "Scheduled", "Successfully assigned ns/web to node"), event(4.0, "Warning", "FailedCreatePodSandBox", "failed to get sandbox image \"k8s.gcr.io/pause:3.2\"")],
            waits: vec![TimedWait { phase: Phase::Setup, what: "pod -l app=web phase=Running ready=true (within 2m)".into(), start: 0.4, end: 2.9, met: true }],
            pods: vec![pod(0.3, "Pending ContainerCreating"), pod(2.8, "Running ready"), pod(21.0, "terminating"), pod(22.0, "deleted")],
        };

        let mut failed = ScenarioReport::ignored("crash-loop", "");
        failed.status = Status::Failed;
        failed.provider = "kind".into();
        failed.platform = "k8s-1.20-containerd-1.6-amd64".into();
        failed.failed_phase = Some(Phase::Recovery);
        failed.error = Some("pod -l app=web phase=Running ready=true: not met within 30s; last: <Running CrashLoopBackOff> & \"restarting\"".into());
        failed.snapshot = SnapshotResult::Changed("events of crash-loop on p differ from the reviewed snapshot x.snap: 1 missing, 0 unexpected\n    missing:    Pod/web Normal Started (kubelet): Started container <web>\n    wrote x.snap.new; read it".into());
        failed.logs = Some("/tmp/faultlab-logs/crash-loop".into());
        failed.notes = vec![
            "the cluster was kept: kind delete cluster --name faultlab".into(),
            "shared kind cluster x deleted: the node is not as the cluster was made:\n# cpu_manager_state\n- {\"policyName\":\"static\"}\n".into(),
        ];
        failed.teardown_errors = vec!["deleting namespace: timed out".into()];
        failed.timings = Timings { setup: Some(3.1), inject: Some(0.4), symptom: Some(20.0), fix: Some(1.0), recovery: None, teardown: Some(2.0), waiting: Some(50.3), own: None };
        let mut events = vec![event(1.0, "Normal", "Scheduled", "assigned"), event(2.0, "Normal", "Pulled", "image <web> & \"sidecar\" already present")];
        events.extend((0..30).map(|i| event(4.0 + i as f64 * 1.5, "Warning", "BackOff", "Back-off restarting failed container web in pod web_ns(<uid>)")));
        events.push(event(60.0, "Normal", "Killing", "Stopping container web"));
        failed.timeline = Timeline {
            started: "2026-05-01T10:01:00Z".into(),
            phases: vec![span(Phase::Setup, 0.0, Some(3.1)), span(Phase::Inject, 3.1, Some(3.5)), span(Phase::Symptom, 3.5, Some(23.5)), span(Phase::Fix, 23.5, Some(24.5)), span(Phase::Recovery, 24.5, None)],
            events,
            waits: vec![
                TimedWait { phase: Phase::Setup, what: "pod -l app=web phase=Running ready=true (within 2m)".into(), start: 0.5, end: 3.0, met: true },
                TimedWait { phase: Phase::Symptom, what: "pod -l app=web reason=CrashLoopBackOff".into(), start: 3.6, end: 23.4, met: true },
                TimedWait { phase: Phase::Recovery, what: "pod -l app=web phase=Running ready=true (within 30s)".into(), start: 24.6, end: 54.6, met: false },
            ],
            pods: vec![pod(0.4, "Pending ContainerCreating"), pod(2.5, "Running ready"), pod(5.0, "Running CrashLoopBackOff"), pod(26.0, "Running not ready")],
        };
        failed.events = vec![Normalised { object: "Pod/web".into(), type_: "Warning".into(), reason: "BackOff".into(), source: "kubelet".into(), message: "Back-off".into() }];

        let ignored = ScenarioReport::ignored("disk-full", "no cluster configured");
        SuiteReport::new(95.25, vec![passed, failed, ignored])
    }

    #[test]
    fn a_refused_run_is_counted_and_says_why() {
        let mut report = suite();
        report.scenarios[2].status = Status::Refused;
        report.scenarios[2].error = Some("refusing to run disk-full on kind: <the host's disk>".into());
        let page = suite_page(&report, "t");
        assert!(page.contains(r#"<span class="status refused" title="not run: this platform cannot or may not run them">1 refused</span>"#), "{page}");
        assert!(page.contains(r#"data-scenario="disk-full" data-status="refused""#), "{page}");
        assert!(page.contains("<h3>Refused</h3>"), "{page}");
        assert!(page.contains("refusing to run disk-full on kind: &#60;the host&#39;s disk&#62;") || page.contains("refusing to run disk-full on kind: &lt;the host&#39;s disk&gt;") || page.contains("&lt;the host&#x27;s disk&gt;"), "escaped: {page}");
        assert!(!page.contains("The events were not compared"), "{page}");
        assert!(!suite_page(&suite(), "t").contains("<span class=\"status refused\""), "no refused run, no count");
    }

    /// An event's text is the cluster's: markup in it stays text (askama), and its controls are shown
    /// as escapes, wherever the page writes it (the mark's hover text, the label, the error).
    #[test]
    fn an_events_markup_and_controls_come_out_escaped() {
        let mut report = suite();
        let hostile = "<script>alert(1)</script>\x1b]0;owned\x07\u{9b}2J";
        let run = &mut report.scenarios[0];
        run.timeline.events.push(event(5.0, "Warning", "Bad<script>\x1b[2J", hostile));
        run.timeline.pods.push(PodState { at: 6.0, pod: "web-\x1b[8m".into(), state: "Running <b>\x1b[2J".into() });
        run.error = Some(format!("event: {hostile}"));
        run.notes.push(format!("note {hostile}"));
        let page = suite_page(&report, "t");
        assert!(!page.contains("<script"), "no markup from the event");
        assert!(!page.contains("<b>"), "no markup from the pod state");
        assert!(!page.chars().any(|c| c.is_control() && c != '\n' && c != '\t'), "no control character from the event");
        assert!(page.contains(r"&#60;script&#62;alert(1)&#60;/script&#62;\u{1b}]0;owned\u{7}\u{9b}2J"), "{page}");
        assert!(page.contains(r"Bad&#60;script&#62;\u{1b}[2J"), "the label");
        let debrief = debrief_page(&Debrief { broke: report.scenarios[0].timeline.clone(), ..debrief() });
        assert!(!debrief.contains("<script") && !debrief.chars().any(|c| c.is_control() && c != '\n' && c != '\t'));
    }

    /// The pod lane takes one pass over the pods' states: 20,000 states of 10,000 pods (each created,
    /// then running) make 10,000 rows of two segments each, in the order the pods appeared.
    #[test]
    fn many_pod_states_make_one_row_per_pod_in_one_pass() {
        let pods = 10_000;
        let mut states: Vec<PodState> = (0..pods).map(|i| PodState { at: i as f64 / 1000.0, pod: format!("web-{i:05}"), state: "Pending ContainerCreating".into() }).collect();
        // Each pod's second state, listed newest first: a row still comes out in time order.
        states.extend((0..pods).rev().map(|i| PodState { at: 20.0 + i as f64 / 1000.0, pod: format!("web-{i:05}"), state: "Running ready".into() }));
        let rows = pod_rows(&states);
        assert_eq!(rows.len(), pods);
        assert!(rows.iter().enumerate().all(|(i, (pod, s))| *pod == format!("web-{i:05}") && s.len() == 2 && s[0].state.starts_with("Pending") && s[1].state == "Running ready"));
        let t = Timeline { started: "2026-05-01T10:00:00Z".into(), pods: states, ..Timeline::default() };
        let svg = Svg::new(&t, 0, "many pods");
        assert_eq!(svg.pods.len(), 2 * pods);
        assert_eq!(svg.lanes.iter().filter(|l| l.title.starts_with("web-")).count(), pods);
        let mut report = suite();
        report.scenarios[0].timeline = t;
        assert_eq!(suite_page(&report, "t").matches(r#"<g class="pod-state""#).count(), 2 * pods + 4, "and the page has a segment each (the other run has 4)");
    }

    #[test]
    fn the_page_shows_every_run_its_marks_and_its_differences() {
        let report = suite();
        let page = suite_page(&report, "faultlab <nightly> & co");
        if let Ok(path) = std::env::var("FAULTLAB_HTML_SAMPLE") {
            std::fs::write(&path, &page).unwrap();
        }
        assert!(page.starts_with("<!DOCTYPE html>"), "{page}");
        assert!(page.contains("<title>faultlab &#60;nightly&#62; &#38; co</title>") || page.contains("<title>faultlab &lt;nightly&gt; &amp; co</title>"), "the title is escaped");
        assert!(page.contains("95.2 s"), "the wall time");
        assert!(page.contains("<dt>cluster ready in</dt><dd class=\"mono\">41.0 s</dd>"), "{page}");
        // 22.5 s of phases, 15.2 s of them in gates.
        let own = "<dt>own time</dt><dd class=\"mono\">7.3 s outside the gates: commands 1.5 s (the fault&#39;s own, in inject and fix: 0.4 s), API calls 0.6 s, settling 3.1 s, undoing 0.2 s</dd>";
        let own_unescaped = own.replace("&#39;", "'");
        assert!(page.contains(own) || page.contains(&own_unescaped) || page.contains(&own.replace("&#39;", "&#x27;")), "{page}");
        assert_eq!(page.matches("<dt>own time</dt>").count(), 1, "only the run whose report has the breakdown");
        assert!(page.contains(r#"<tr class="scenario" data-scenario="pause-missing" data-status="passed" data-snapshot="matched">"#));
        assert!(page.contains(r#"<tr class="scenario" data-scenario="crash-loop" data-status="failed" data-snapshot="changed">"#));
        assert!(page.contains(r#"<tr class="scenario" data-scenario="disk-full" data-status="ignored" data-snapshot="">"#));
        assert!(page.contains(r#"<td><span class="snapshot-status changed">changed</span></td>"#), "the snapshot's column");
        assert!(page.contains(r#"<span class="snapshot-status matched">snapshot matched</span></h2>"#), "and its badge by the heading");
        assert!(!page.contains("new snapshot(s)"), "no new snapshot to count");
        assert_eq!(page.matches(r#"<tr class="scenario""#).count(), 3);
        assert!(page.contains(r##"<a href="#crash-loop">crash-loop</a>"##));
        assert_eq!(page.matches(r#"<section id=""#).count(), 3);
        assert!(page.contains(r#"<section id="crash-loop" class="run""#));
        assert_eq!(page.matches("<svg class=\"timeline\"").count(), 2, "the ignored run has no timeline");
        assert!(page.contains("No timeline was recorded"), "and says so");

        let events: usize = report.scenarios.iter().map(|s| s.timeline.events.len()).sum();
        assert_eq!(page.matches(r#"<g class="event""#).count(), events, "one mark per event");
        assert_eq!(page.matches(r#"<g class="event" data-type="Warning" data-reason="BackOff">"#).count(), 30);
        assert!(page.contains("<title>2.0 s Normal Pulled (kubelet) Pod/web-5d9c7b-x2x9q: image &#60;web&#62; &#38; &#34;sidecar&#34; already present</title>"), "{page}");
        assert!(page.contains("BackOff ×"), "repeated events share a counted label");
        assert!(!page.contains("<web>") && !page.contains("(<uid>)"), "no message reaches the page unescaped");

        assert_eq!(page.matches(r#"<rect class="phase"#).count(), 11);
        assert!(page.contains(r#"<rect class="phase" data-phase="setup""#));
        assert!(page.contains("<title>setup: 0.0 s – 3.0 s (3.0 s)</title>"));
        assert_eq!(page.matches(r#"<rect class="phase unfinished" data-phase="recovery""#).count(), 1);
        assert!(page.contains("recovery: 24.5 s – unfinished (the timeline ends at 60.0 s)"));

        assert_eq!(page.matches(r#"<g class="wait" data-met="true">"#).count(), 3);
        assert_eq!(page.matches(r#"<g class="wait" data-met="false">"#).count(), 1);
        assert!(page.contains("pod -l app=web phase=Running ready=true (within 30s): 24.6 s – 54.6 s (30.0 s), not met (recovery)"));
        assert_eq!(page.matches(r#"<g class="pod-state""#).count(), 8);
        assert!(page.contains("web-5d9c7b-x2x9q: Running CrashLoopBackOff, 5.0 s – 26.0 s (21.0 s)"));

        assert!(page.contains(r#"<pre class="snapshot-diff">"#));
        assert!(page.contains("Started container &#60;web&#62;"), "the difference, escaped");
        assert!(page.contains("in recovery"), "the failed phase");
        assert!(page.contains("last: &#60;Running CrashLoopBackOff&#62; &#38; &#34;restarting&#34;"), "the error, escaped");
        assert!(page.contains("/tmp/faultlab-logs/crash-loop"));
        assert!(page.contains("kind delete cluster --name faultlab"));
        assert!(
            page.contains("<li>shared kind cluster x deleted: the node is not as the cluster was made:<pre># cpu_manager_state\n- {&#34;policyName&#34;:&#34;static&#34;}\n</pre></li>"),
            "a note's lines after its first, as written"
        );
        assert!(page.contains("deleting namespace: timed out"));
        assert!(page.contains("no cluster configured"));
        assert!(page.contains("12.0 s") && page.contains("<td>–</td>"), "phase times, and a dash for none");

        for outside in ["http://", "https://", "src=", "<link", "<script", "@import", "url(http"] {
            assert!(!page.contains(outside), "the page loads nothing: {outside}");
        }
    }

    #[test]
    fn a_snapshot_difference_that_is_the_error_is_shown_once() {
        let mut report = suite();
        let failed = &mut report.scenarios[1];
        let SnapshotResult::Changed(d) = &failed.snapshot else { unreachable!() };
        failed.error = Some(d.clone());
        let page = suite_page(&report, "t");
        assert_eq!(page.matches("1 missing, 0 unexpected").count(), 1, "{page}");
    }

    /// A run with no reviewed snapshot passes: its row and heading say `new`, its section shows the
    /// notice (where the file to review is), and the totals count it.
    #[test]
    fn a_new_snapshot_is_a_badge_a_notice_and_a_count() {
        let mut report = suite();
        let notice = "no reviewed snapshot yet for pause-missing on k8s-1.20-containerd-1.6-amd64: wrote x/pause-missing.snap.new; read it and accept it with `faultlab snapshots accept pause-missing`";
        report.scenarios[0].snapshot = SnapshotResult::New(notice.into());
        let page = suite_page(&report, "t");
        assert!(page.contains(r#"<tr class="scenario" data-scenario="pause-missing" data-status="passed" data-snapshot="new">"#), "{page}");
        assert!(page.contains(r#"<td><span class="snapshot-status new">new</span></td>"#), "{page}");
        assert!(page.contains("<h3>No reviewed snapshot on this platform yet</h3>\n<pre class=\"snapshot-new\">no reviewed snapshot yet for pause-missing"), "{page}");
        assert!(page.contains(">1 new snapshot(s)</span></p>"), "{page}");
        assert!(!page.contains("The events match the reviewed snapshot"), "{page}");
        assert!(page.contains(r##"data-snapshot=""><td><a href="#disk-full">disk-full</a></td><td></td><td><span class="status ignored">ignored</span></td><td>–</td>"##), "not compared: a dash; {page}");
    }

    #[test]
    fn a_scenario_run_twice_gets_two_anchors() {
        let mut report = suite();
        let again = report.scenarios[0].clone();
        report.scenarios.push(again);
        let page = suite_page(&report, "t");
        assert!(page.contains(r#"<section id="pause-missing" "#) && page.contains(r#"<section id="pause-missing-2" "#));
        assert!(page.contains(r##"href="#pause-missing-2""##));
    }

    #[test]
    fn a_page_renders_from_the_json_report() {
        let report = suite();
        let back: SuiteReport = serde_json::from_str(&report.json()).unwrap();
        assert_eq!(suite_page(&back, "t"), suite_page(&report, "t"));

        let json = r#"{
          "wall_seconds": 12.5,
          "scenarios": [{
            "scenario": "pause-missing", "provider": "kind", "platform": "p", "node": "n", "namespace": "ns",
            "status": "failed", "failed_phase": "symptom", "error": "no <symptom>",
            "timings": {"setup": 2.0, "inject": 0.5, "symptom": 10.0, "fix": null, "recovery": null, "teardown": 1.0},
            "events": [], "snapshot": {"result": "skipped", "detail": "the run failed"}, "record": [],
            "timeline": {
              "started": "2026-05-01T10:00:00Z",
              "phases": [{"phase": "setup", "start": 0.0, "end": 2.0}, {"phase": "symptom", "start": 2.5}],
              "events": [{"at": 3.0, "object": "Pod/web", "type": "Warning", "reason": "Failed", "source": "kubelet", "message": "a & b"}],
              "waits": [{"phase": "symptom", "what": "pod -l app=web", "start": 2.5, "end": 12.5, "met": false}],
              "pods": [{"at": 0.5, "pod": "web", "state": "Pending ContainerCreating"}]
            }
          }]
        }"#;
        let report: SuiteReport = serde_json::from_str(json).unwrap();
        let page = suite_page(&report, "from JSON");
        assert!(page.contains(r#"<tr class="scenario" data-scenario="pause-missing" data-status="failed" data-snapshot="">"#), "{page}");
        assert!(page.contains("<title>3.0 s Warning Failed (kubelet) Pod/web: a &#38; b</title>"), "{page}");
        assert!(page.contains(r#"<rect class="phase unfinished" data-phase="symptom""#), "{page}");
        assert!(page.contains(r#"<g class="wait" data-met="false">"#), "{page}");
        assert!(page.contains("no &#60;symptom&#62;") && page.contains("in symptom"), "{page}");
        assert!(page.contains("the run failed"), "why the snapshot was not compared");
    }

    /// A session fixed after two checks that were not, with two hints of three, the solution shown, and
    /// texts that need escaping.
    fn debrief() -> Debrief {
        let mut broke = suite().scenarios[0].timeline.clone();
        broke.phases.truncate(3);
        broke.pods.truncate(2);
        Debrief {
            scenario: "pause-missing".into(),
            document: "cce_faq_00140.html".into(),
            title: "What can I do if a pod <stays> ContainerCreating?".into(),
            section: Some("Cause 3 & its fix".into()),
            session: "faultlab-pause-missing-x1".into(),
            namespace: "faultlab-pause-missing-x1".into(),
            started: "2026-05-01T10:00:07Z".into(),
            broke,
            hints: vec![
                DebriefHint { at: Some(42.5), text: "Which step comes before any container <starts>?".into() },
                DebriefHint { at: Some(130.0), text: "Is the sandbox image on the node (`ctr -n k8s.io images ls`)?".into() },
            ],
            hints_available: 3,
            checks: vec![
                DebriefCheck { at: 95.2, fixed: false, failing: vec!["pod -l app=web phase=Running ready=true: not met; last: <Pending ContainerCreating>".into(), "the fault is still there: image \"k8s.gcr.io/pause:3.2\" & more".into()] },
                DebriefCheck { at: 200.0, fixed: false, failing: vec!["pod -l app=web phase=Running ready=true: not met".into()] },
                DebriefCheck { at: 252.3, fixed: true, failing: vec![] },
                DebriefCheck { at: 270.0, fixed: true, failing: vec![] },
            ],
            solution_shown: true,
            solution_at: Some(180.0),
            fixed_at: Some("2026-05-01T10:04:19Z".into()),
            time_to_fix: Some(252.3),
            reset_unfixed: None,
            score: Some(crate::score::score(
                &crate::score::Rubric::default(),
                &crate::score::Played {
                    answers: &[crate::score::Answer { stage: crate::score::Stage::Detect, at: 61.0, answer: "web".into(), correct: true }],
                    hints: 2,
                    solution_shown: true,
                    fixed_at: Some(252.3),
                },
            )),
            commands: vec![DebriefCommand { at: 30.4, line: "kubectl get pods -l 'app=<web>'".into() }, DebriefCommand { at: 250.0, line: "faultlab check".into() }],
        }
    }

    #[test]
    fn the_debrief_shows_the_break_the_session_and_every_check() {
        let d = debrief();
        let page = debrief_page(&d);
        if let Ok(path) = std::env::var("FAULTLAB_HTML_SAMPLE_DEBRIEF") {
            std::fs::write(&path, &page).unwrap();
        }
        assert!(page.starts_with("<!DOCTYPE html>"), "{page}");
        assert!(page.contains("<title>Debrief: pause-missing</title>") && page.contains("<h1>Debrief: pause-missing</h1>"), "{page}");
        assert!(page.contains("cce_faq_00140.html — What can I do if a pod &#60;stays&#62; ContainerCreating? / Cause 3 &#38; its fix"), "{page}");
        assert!(page.contains("<dd class=\"mono\">faultlab-pause-missing-x1</dd>"));
        for (k, v) in [
            ("broken at", "2026-05-01T10:00:07Z"),
            ("fixed at", "2026-05-01T10:04:19Z"),
            ("time to fix", "4m12s (252.3 s)"),
            ("hints asked", "2 of 3"),
            ("solution", "shown at 3m"),
            ("checks", "4 (2 not fixed)"),
            ("score", "0 of 100"),
            ("detect", "+20 (answered right at 1m01s)"),
            ("localise", "+0 (not answered right)"),
            ("mitigate", "+0 (fixed, with the documented fix shown)"),
            ("hints", "-20 (2 hint(s), 10 each)"),
        ] {
            assert!(page.contains(&format!("<dt>{k}</dt><dd class=\"mono\">{v}</dd>")), "{k}: {v}\n{page}");
        }
        assert!(page.contains(r#"<span class="status passed">fixed</span>"#));
        // What was typed in the web terminal, escaped; a page without any has no such section.
        assert!(page.contains("<h2>Commands typed</h2>") && page.contains(r#"<li><span class="mono">30.4 s</span> <code>kubectl get pods -l &#39;app=&#60;web&#62;&#39;</code></li>"#), "{page}");
        assert!(!debrief_page(&Debrief { commands: vec![], ..debrief() }).contains("Commands typed"));

        // The break: the suite's timeline, its three phases, its events.
        assert_eq!(page.matches("<svg class=\"timeline\"").count(), 1, "the break's timeline");
        assert_eq!(page.matches(r#"<rect class="phase""#).count(), 3);
        assert_eq!(page.matches(r#"<g class="event""#).count(), d.broke.events.len());
        assert!(page.contains("ends (7.5 s)"), "where the session's clock starts: {page}");

        // The session: a mark per hint, per check, the solution, the fix.
        assert_eq!(page.matches("<svg class=\"timeline session\"").count(), 1);
        assert_eq!(page.matches(r#"<g class="hint">"#).count(), 2);
        assert!(page.contains("<title>hint 1 at 42.5 s: Which step comes before any container &#60;starts&#62;?</title>"), "{page}");
        assert!(page.contains("<title>hint 2 at 2m10s: Is the sandbox image on the node (`ctr -n k8s.io images ls`)?</title>"), "{page}");
        assert_eq!(page.matches(r#"<g class="check" data-fixed="false">"#).count(), 2);
        assert_eq!(page.matches(r#"<g class="check" data-fixed="true">"#).count(), 2);
        assert!(
            page.contains("<title>check 1 at 1m35s: not fixed\n– pod -l app=web phase=Running ready=true: not met; last: &#60;Pending ContainerCreating&#62;\n– the fault is still there: image &#34;k8s.gcr.io/pause:3.2&#34; &#38; more</title>"),
            "{page}"
        );
        assert!(page.contains("<title>check 3 at 4m12s: fixed</title>"), "{page}");
        assert_eq!(page.matches(r#"<g class="solution">"#).count(), 1);
        assert!(page.contains("<title>the solution was shown at 3m</title>"));
        assert_eq!(page.matches(r#"<g class="fix">"#).count(), 1);
        assert!(page.contains("<title>fixed after 4m12s (252.3 s), found by a check</title>"));
        assert!(!page.contains(r#"<g class="reset">"#));
        assert!(page.contains(r#"<g class="band" data-kind="broken">"#) && page.contains(r#"<g class="band" data-kind="fixed">"#));
        assert!(page.contains(">240 s</text>"), "the session's axis: {page}");

        // The lists: each check with what still failed, escaped.
        assert_eq!(page.matches(r#"<li class="check-attempt" data-fixed="false">"#).count(), 2);
        assert_eq!(page.matches(r#"<li class="check-attempt" data-fixed="true">"#).count(), 2);
        assert!(page.contains("<li><pre>the fault is still there: image &#34;k8s.gcr.io/pause:3.2&#34; &#38; more</pre></li>"), "{page}");
        assert!(page.contains("Which step comes before any container &#60;starts&#62;?</li>"));
        assert!(!page.contains("<starts>") && !page.contains("<stays>") && !page.contains("<Pending"), "no text reaches the page unescaped");

        for outside in ["http://", "https://", "src=", "<link", "<script", "@import", "url(http"] {
            assert!(!page.contains(outside), "the page loads nothing: {outside}");
        }
    }

    #[test]
    fn a_session_never_fixed_says_so() {
        let d = Debrief {
            hints: vec![],
            checks: vec![DebriefCheck { at: 30.0, fixed: false, failing: vec!["ConfigMap app-config is still missing".into()] }],
            solution_shown: false,
            solution_at: None,
            fixed_at: None,
            time_to_fix: None,
            reset_unfixed: Some(600.0),
            ..debrief()
        };
        let page = debrief_page(&d);
        assert!(page.contains(r#"<span class="status failed">not fixed</span>"#), "{page}");
        assert!(page.contains("<dt>fixed at</dt><dd class=\"mono\">not fixed: reset after 10m</dd>"), "{page}");
        assert!(page.contains("<dt>time to fix</dt><dd class=\"mono\">–</dd>"));
        assert!(page.contains("<dt>hints asked</dt><dd class=\"mono\">0 of 3</dd>"));
        assert!(page.contains("<dt>solution</dt><dd class=\"mono\">not shown</dd>"));
        assert!(page.contains("No hint was asked."));
        assert_eq!(page.matches(r#"<g class="check" data-fixed="false">"#).count(), 1);
        assert!(!page.contains(r#"<g class="check" data-fixed="true">"#) && !page.contains(r#"<li class="check-attempt" data-fixed="true">"#), "{page}");
        for absent in [r#"<g class="hint">"#, r#"<g class="solution">"#, r#"<g class="fix">"#, r#"<g class="band" data-kind="fixed">"#] {
            assert!(!page.contains(absent), "{absent}");
        }
        assert!(page.contains(r#"<g class="reset"><title>reset unfixed after 10m</title>"#), "{page}");
        assert!(page.contains("broken: 0.0 s – 600.0 s, reset before it was fixed"));
    }

    #[test]
    fn an_empty_session_still_renders() {
        // Nothing asked, nothing checked, no break recorded (a session file from before timelines).
        let d = Debrief { scenario: "s".into(), hints_available: 2, hints: vec![DebriefHint { at: None, text: "untimed".into() }], ..Debrief::default() };
        let page = debrief_page(&d);
        assert!(page.contains("No timeline was recorded for the break."), "{page}");
        assert!(page.contains("The trainee never ran"));
        assert!(page.contains("<dt>checks</dt><dd class=\"mono\">none</dd>"));
        assert!(page.contains("<dt>hints asked</dt><dd class=\"mono\">1 of 2</dd>"));
        assert!(page.contains("<li><span class=\"mono\">–</span> untimed</li>"), "an untimed hint is listed: {page}");
        assert!(!page.contains(r#"<g class="hint">"#), "but has no mark");
        let shown = debrief_page(&Debrief { solution_shown: true, ..d });
        assert!(shown.contains("<dt>solution</dt><dd class=\"mono\">shown</dd>"), "shown, when not recorded: {shown}");
        assert_eq!(page.matches("<svg class=\"timeline").count(), 1, "only the session's lane");
    }

    #[test]
    fn the_session_lane_spans_to_the_last_thing() {
        let svg = SessionSvg::new(&debrief());
        let right = LEFT + PLOT;
        assert_eq!(svg.checks.last().map(|c| c.cx), Some(right), "the last check is at the axis' end");
        assert!(svg.hints.iter().all(|h| h.x > LEFT && h.x < right));
        assert!(svg.ticks.iter().all(|t| t.x <= right) && svg.ticks.len() >= 5);
        let fix = svg.fix.as_ref().unwrap();
        assert!((fix.x - (LEFT + 252.3 / 270.0 * PLOT)).abs() < 0.1);
        let late = Debrief { reset_unfixed: Some(400.0), ..debrief() };
        assert_eq!(SessionSvg::new(&late).reset.map(|r| r.x), Some(right), "a reset after the rest ends the axis");
        let long = SessionSvg::new(&Debrief { reset_unfixed: Some(1500.0), ..debrief() });
        assert_eq!(long.ticks.iter().map(|t| t.text.as_str()).collect::<Vec<_>>(), ["0m", "5m", "10m", "15m", "20m", "25m"], "minutes once ticks are a minute apart");
    }

    #[rstest]
    #[case::instant(0.0, 0.1)]
    #[case::a_second(1.0, 0.1)]
    #[case::three_seconds(3.0, 0.5)]
    #[case::ten_seconds(10.0, 1.0)]
    #[case::eleven_seconds(11.0, 1.0)]
    #[case::twelve_seconds(12.0, 2.0)]
    #[case::half_a_minute(30.0, 5.0)]
    #[case::a_minute(60.0, 10.0)]
    #[case::two_minutes(125.0, 20.0)]
    #[case::five_minutes(300.0, 30.0)]
    #[case::ten_minutes(600.0, 60.0)]
    #[case::twenty_minutes(1200.0, 120.0)]
    #[case::an_hour(3600.0, 600.0)]
    #[case::a_day(86_400.0, 14_400.0)]
    fn ticks_are_few_and_round(#[case] span: f64, #[case] step: f64) {
        assert_eq!(tick_step(span), step);
        let count = (span / step).floor() + 1.0;
        assert!(count <= 12.0, "{count} ticks");
        assert!(span < 0.4 || count >= 5.0, "{count} ticks");
    }

    #[test]
    fn labels_do_not_overlap_and_marks_stay() {
        // Twenty events of different reasons in two seconds: every mark is drawn, and the labels that are
        // drawn do not overlap on their rows.
        let events: Vec<TimedEvent> = (0..20).map(|i| event(10.0 + i as f64 * 0.1, "Normal", &format!("Reason{i}"), "m")).collect();
        let svg = Svg::new(&Timeline { events, ..Timeline::default() }, 0, "t");
        assert_eq!(svg.events.len(), 20);
        assert!(svg.labels.len() < 20 && !svg.labels.is_empty());
        let mut by_row: HashMap<i64, Vec<(f64, f64)>> = HashMap::new();
        for l in &svg.labels {
            let left = if l.anchor == "end" { l.x - text_width(&l.text) } else { l.x };
            by_row.entry(l.y as i64).or_default().push((left, left + text_width(&l.text)));
        }
        assert!(by_row.len() <= LABEL_ROWS);
        for spans in by_row.values() {
            for pair in spans.windows(2) {
                assert!(pair[0].1 <= pair[1].0, "{pair:?} overlap");
            }
        }
        assert!(svg.events.iter().all(|e| e.x >= LEFT - 2.0 && e.x <= WIDTH - RIGHT));
    }

    #[rstest]
    #[case("Running ready", "ok")]
    #[case("Running not ready", "waiting")]
    #[case("Pending ContainerCreating", "waiting")]
    #[case("Pending ErrImagePull", "bad")]
    #[case("Running CrashLoopBackOff", "bad")]
    #[case("Failed Error", "bad")]
    #[case("Succeeded Completed", "ok")]
    #[case("terminating", "gone")]
    #[case("deleted", "gone")]
    fn pod_states_are_coloured_by_kind(#[case] state: &str, #[case] kind: &str) {
        assert_eq!(state_kind(state), kind);
    }

    /// A scoreboard row of `session` whose score is computed from what it did, as `training` does.
    fn board_row(session: &str, challenge: &str, elapsed: f64, answers: &[(crate::score::Stage, f64)], fixed: Option<f64>, hints: usize) -> ScoreboardRow {
        use crate::score::{Answer, Played, Rubric};
        let answers: Vec<Answer> = answers.iter().map(|&(stage, at)| Answer { stage, at, answer: "x".into(), correct: true }).collect();
        let rubric = Rubric::default();
        let score = crate::score::score(&rubric, &Played { answers: &answers, hints, solution_shown: false, fixed_at: fixed });
        let first = |st| answers.iter().find(|a| a.stage == st).map(|a| a.at);
        ScoreboardRow {
            session: session.into(),
            challenge: challenge.into(),
            namespace: format!("fl-{session}"),
            context: "faultlab-testbed".into(),
            elapsed,
            time_limit: rubric.time_limit,
            detected: first(crate::score::Stage::Detect),
            localised: first(crate::score::Stage::Localise),
            fixed,
            hints,
            solution_shown: false,
            score,
        }
    }

    /// Best score first, each stage's time and state, the blind challenge as shown, the refresh; text
    /// from sessions is escaped.
    #[test]
    fn the_scoreboard_ranks_by_score_and_shows_each_stage() {
        use crate::score::Stage::{Detect, Localise};
        let board = Scoreboard {
            made: "2026-11-28T14:00:00Z".into(),
            refresh: Some(5),
            rows: vec![
                board_row("ann", "a blind challenge in fl-challenge-x", 95.0, &[(Detect, 30.0)], None, 1),
                board_row("bob", "pause-missing", 400.0, &[(Detect, 20.0), (Localise, 100.0)], Some(300.0), 0),
                board_row("cy<b>", "configmap-missing", 1900.0, &[], None, 0),
            ],
        };
        let page = scoreboard_page(&board);
        assert!(page.contains(r#"<meta http-equiv="refresh" content="5">"#));
        let order: Vec<&str> = page.match_indices(r#"<tr class="trainee" data-session=""#).map(|(i, m)| &page[i + m.len()..i + m.len() + 3]).collect();
        assert_eq!(order, ["bob", "ann", "cy&"], "best score first");
        assert!(page.contains(r#"data-session="bob" data-state="fixed" data-score="100""#), "{page}");
        assert!(page.contains(r#"data-session="ann" data-state="working" data-score="10""#), "20 for detecting, less a hint");
        assert!(page.contains(r#"data-state="over time" data-score="0""#));
        assert!(page.contains(r#"<td class="stage mono" data-state="done">5m</td>"#), "bob's fix: {page}");
        assert!(page.contains(r#"<td class="stage mono" data-state="open">–</td>"#), "ann's open stages");
        assert!(page.contains("a blind challenge in fl-challenge-x"));
        assert!(!page.contains("cy<b>") && page.contains(r#"data-session="cy&"#), "a session's text is escaped");
        let once = scoreboard_page(&Scoreboard { refresh: None, rows: vec![], ..board });
        assert!(!once.contains("http-equiv") && once.contains("No training session is open."));
    }
}
