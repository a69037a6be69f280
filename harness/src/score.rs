//! A training challenge's score, in stages (as AIOpsLab splits an incident): **detect** (name the
//! broken workload), **localise** (name the fault that broke it), **mitigate** (fix it: `faultlab
//! check` finds it fixed). Each stage is timed from the symptom shown and scores only within the
//! challenge's time limit; each hint and each wrong answer costs points; the documented fix shown
//! forfeits the mitigation's points. Pure: the session records what happened, this says what it is worth.

use serde::{Deserialize, Serialize};

/// What each part is worth.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Rubric {
    pub detect: u32,
    pub localise: u32,
    pub mitigate: u32,
    /// Points each hint costs.
    pub hint: u32,
    /// Points each wrong answer costs.
    pub wrong_answer: u32,
    /// Seconds from the symptom shown within which a stage scores.
    pub time_limit: f64,
}

/// The default time limit: 30 minutes.
pub const DEFAULT_TIME_LIMIT: f64 = 1800.0;

impl Default for Rubric {
    fn default() -> Self {
        Rubric { detect: 20, localise: 30, mitigate: 50, hint: 10, wrong_answer: 5, time_limit: DEFAULT_TIME_LIMIT }
    }
}

/// The stages a trainee answers (mitigation is not answered: `check` finds it).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Stage {
    Detect,
    Localise,
}

impl Stage {
    pub fn as_str(self) -> &'static str {
        match self {
            Stage::Detect => "detect",
            Stage::Localise => "localise",
        }
    }
}

/// One answer given, and whether it was right.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Answer {
    pub stage: Stage,
    /// Seconds from the symptom shown.
    pub at: f64,
    pub answer: String,
    pub correct: bool,
}

/// What a session did, as the score reads it.
#[derive(Clone, Copy, Debug, Default)]
pub struct Played<'a> {
    pub answers: &'a [Answer],
    pub hints: usize,
    pub solution_shown: bool,
    /// When `check` first found it fixed, seconds from the symptom shown.
    pub fixed_at: Option<f64>,
}

/// One line of the breakdown: what it is for, the points (negative for a cost), and why.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Line {
    pub part: &'static str,
    pub points: i64,
    pub why: String,
}

/// The score and its breakdown.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Score {
    /// The sum of the lines, never below 0.
    pub total: i64,
    pub out_of: u32,
    pub lines: Vec<Line>,
}

fn clock(seconds: f64) -> String {
    let s = seconds.max(0.0).round() as u64;
    format!("{}m{:02}s", s / 60, s % 60)
}

/// A stage's points: its first right answer, if within the limit.
fn stage(rubric: &Rubric, played: &Played, stage: Stage, worth: u32) -> Line {
    let first = played.answers.iter().find(|a| a.stage == stage && a.correct);
    let (points, why) = match first {
        Some(a) if a.at <= rubric.time_limit => (i64::from(worth), format!("answered right at {}", clock(a.at))),
        Some(a) => (0, format!("answered right at {}, after the time limit ({})", clock(a.at), clock(rubric.time_limit))),
        None => (0, "not answered right".into()),
    };
    Line { part: stage.as_str(), points, why }
}

/// The score of what was `played` under `rubric`.
pub fn score(rubric: &Rubric, played: &Played) -> Score {
    let mut lines = vec![stage(rubric, played, Stage::Detect, rubric.detect), stage(rubric, played, Stage::Localise, rubric.localise)];
    let (points, why) = match played.fixed_at {
        Some(_) if played.solution_shown => (0, "fixed, with the documented fix shown".to_string()),
        Some(t) if t <= rubric.time_limit => (i64::from(rubric.mitigate), format!("fixed at {}", clock(t))),
        Some(t) => (0, format!("fixed at {}, after the time limit ({})", clock(t), clock(rubric.time_limit))),
        None => (0, "not fixed".into()),
    };
    lines.push(Line { part: "mitigate", points, why });
    if played.hints > 0 {
        lines.push(Line { part: "hints", points: -(i64::from(rubric.hint) * played.hints as i64), why: format!("{} hint(s), {} each", played.hints, rubric.hint) });
    }
    let wrong = played.answers.iter().filter(|a| !a.correct).count();
    if wrong > 0 {
        lines.push(Line { part: "wrong answers", points: -(i64::from(rubric.wrong_answer) * wrong as i64), why: format!("{wrong}, {} each", rubric.wrong_answer) });
    }
    let total = lines.iter().map(|l| l.points).sum::<i64>().max(0);
    Score { total, out_of: rubric.detect + rubric.localise + rubric.mitigate, lines }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn answer(stage: Stage, at: f64, correct: bool) -> Answer {
        Answer { stage, at, answer: "x".into(), correct }
    }

    #[test]
    fn every_stage_in_time_and_no_help_is_full_marks() {
        let answers = [answer(Stage::Detect, 30.0, true), answer(Stage::Localise, 200.0, true)];
        let s = score(&Rubric::default(), &Played { answers: &answers, hints: 0, solution_shown: false, fixed_at: Some(400.0) });
        assert_eq!((s.total, s.out_of), (100, 100));
        assert_eq!(s.lines.iter().map(|l| (l.part, l.points)).collect::<Vec<_>>(), [("detect", 20), ("localise", 30), ("mitigate", 50)]);
        assert_eq!(s.lines[2].why, "fixed at 6m40s");
    }

    #[test]
    fn hints_wrong_answers_the_solution_and_the_time_limit_cost() {
        let answers = [answer(Stage::Detect, 10.0, false), answer(Stage::Detect, 20.0, true), answer(Stage::Localise, 1900.0, true)];
        let played = Played { answers: &answers, hints: 2, solution_shown: false, fixed_at: Some(100.0) };
        let s = score(&Rubric::default(), &played);
        assert_eq!(s.lines.iter().map(|l| (l.part, l.points)).collect::<Vec<_>>(), [("detect", 20), ("localise", 0), ("mitigate", 50), ("hints", -20), ("wrong answers", -5)]);
        assert_eq!(s.total, 45);
        assert_eq!(s.lines[1].why, "answered right at 31m40s, after the time limit (30m00s)");
        let shown = score(&Rubric::default(), &Played { solution_shown: true, ..played });
        assert_eq!(shown.lines[2], Line { part: "mitigate", points: 0, why: "fixed, with the documented fix shown".into() });
        let late = score(&Rubric { time_limit: 60.0, ..Rubric::default() }, &played);
        assert_eq!(late.lines[2].points, 0);
    }

    #[test]
    fn the_total_is_never_below_zero_and_nothing_done_is_zero() {
        let wrong: Vec<Answer> = (0..30).map(|i| answer(Stage::Localise, f64::from(i), false)).collect();
        let s = score(&Rubric::default(), &Played { answers: &wrong, hints: 5, ..Played::default() });
        assert_eq!(s.total, 0);
        assert_eq!(s.lines[0].why, "not answered right");
        assert_eq!(s.lines[2].why, "not fixed");
    }
}
