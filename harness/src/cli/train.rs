//! Training: `faultlab train` breaks the cluster and leaves it broken; `hint`, `check`, `solution`,
//! `reset` and `sessions` work on the open session.

use std::path::Path;
use std::time::Duration;

use anyhow::{bail, Result};
use faultlab::record::Recorder;
use faultlab::{scenario, training};

use crate::cli::out::{emit, exit, status};
use crate::cli::run::progress;
use crate::cli::select::choose;
use crate::{Output, ProviderOpts};

/// The scenario to train on: `name`, or for a blind challenge one of `from` (else of every reproducible
/// scenario) at random.
fn chosen(dir: &Path, name: Option<&str>, from: &[String]) -> Result<scenario::Loaded> {
    if let Some(name) = name {
        return Ok(scenario::find(dir, name)?);
    }
    let set = scenario::load_set(dir)?;
    let all = set.good;
    let candidates: Vec<String> = if from.is_empty() { all.keys().cloned().collect() } else { from.to_vec() };
    for name in &candidates {
        if set.gaps.contains_key(name) {
            usage!("--from names {name}, which is not reproducible (`faultlab show {name}` says why)");
        }
        if !all.contains_key(name) {
            usage!("--from names {name:?}, which is not a scenario here (`faultlab list` lists them)");
        }
    }
    let Some(name) = training::pick(&candidates) else { usage!("no scenario to pick a blind challenge from") };
    Ok(all[name].clone())
}

/// `faultlab train SCENARIO` (or `--blind`): break the cluster, show the symptom as an on-call page would.
pub async fn train(dir: &Path, name: Option<&str>, from: &[String], provider: &ProviderOpts, allow_existing: Option<&str>, start: training::Start) -> Result<()> {
    let s = chosen(dir, name, from)?;
    let choice = choose(provider, true)?;
    let rec_phase = Recorder::default();
    let what = if start.blind { "a blind challenge".to_string() } else { s.name().to_string() };
    let ticker = progress(rec_phase.clone(), format!("{what} (breaking the cluster)"), None);
    let session = training::train(&s, &choice, allow_existing, start, rec_phase).await;
    ticker.abort();
    let session = session?;
    outp!("{}", faultlab::terminal::lines(&training::on_call_view(&session).await?));
    out!("\nsession: {} (FAULTLAB_SESSION={} selects it when several are open)", session.id, session.id);
    out!(
        "scored in stages within {}: `faultlab answer detect WORKLOAD`, `faultlab answer localise FAULT`, then the fix (`faultlab check`); hints and wrong answers cost points",
        faultlab::duration::format(start.time_limit)
    );
    Ok(())
}

/// `faultlab answer detect|localise ANSWER`: right (exit 0) or not (exit 1, it costs points).
pub fn answer(session: Option<&str>, stage: faultlab::score::Stage, text: &str) -> Result<()> {
    let mut s = training::Session::find(session)?;
    let right = training::answer(&mut s, stage, text)?;
    let score = training::score(&s);
    if right {
        out!("right: {} answered at {:.0}s (score so far {} of {})", stage.as_str(), s.elapsed(), score.total, score.out_of);
        return Ok(());
    }
    out!("not right: {:?} for {} ({} points; score so far {} of {})", text.trim(), stage.as_str(), -i64::from(s.rubric.wrong_answer), score.total, score.out_of);
    exit(status::FAILED);
}

/// `faultlab hint`: the next hint.
pub fn hint(session: Option<&str>) -> Result<()> {
    let mut s = training::Session::find(session)?;
    match training::hint(&mut s)? {
        Some(h) => out!("{}", training::hint_text(s.hints_used, &h)),
        None => out!("no more hints; `faultlab solution` shows the documented fix"),
    }
    Ok(())
}

/// `faultlab check [--wait D]`: is it fixed? Exit status 1 while not.
pub async fn check(session: Option<&str>, wait: Option<Duration>, output: Output) -> Result<()> {
    let mut s = training::Session::find(session)?;
    let verdict = training::check(&mut s, wait).await?;
    let score = training::score(&s);
    let shown = serde_json::json!({
        "session": s.id, "scenario": s.shown_as(), "fixed": verdict.fixed, "seconds": verdict.seconds,
        "failing": verdict.failing, "solved": s.solved, "score": score,
    });
    if emit(output, &shown)? {
        if verdict.fixed {
            let _ = training::write_debrief(&s, false);
            return Ok(());
        }
        exit(status::FAILED);
    }
    if verdict.fixed {
        let solved = s.solved.clone().expect("recorded when fixed");
        out!(
            "FIXED: {}{} recovered in {} ({:.1}s) with {} hint(s){}",
            if s.blind { "the blind challenge, " } else { "" },
            s.scenario,
            faultlab::duration::format(Duration::from_secs(solved.seconds as u64)),
            solved.seconds,
            solved.hints_used,
            if solved.solution_shown { " and the solution shown" } else { "" }
        );
        out!("score: {} of {}", score.total, score.out_of);
        for l in &score.lines {
            out!("  {:<14} {:>+4}  {}", l.part, l.points, l.why);
        }
        match training::write_debrief(&s, false) {
            Ok(path) => out!("debrief: {}", path.display()),
            Err(e) => eprintln!("warning: no debrief page: {e}"),
        }
        out!("`faultlab reset` restores the cluster and closes the session.");
    } else {
        out!("NOT FIXED yet ({:.0}s since the symptom). Still wrong:", verdict.seconds);
        outp!("{}", training::failing_text(&verdict.failing));
        exit(status::FAILED);
    }
    Ok(())
}

/// `faultlab solution [--apply]`: the documented fix, carried out with --apply.
pub async fn solution(session: Option<&str>, apply: bool) -> Result<()> {
    let mut s = training::Session::find(session)?;
    outp!("{}", faultlab::terminal::lines(&training::solution(&mut s, apply).await?));
    Ok(())
}

/// `faultlab reset`: restore what the session changed and close it.
pub async fn reset(session: Option<&str>) -> Result<()> {
    let s = training::Session::find(session)?;
    // Written before the session file goes; the page stays.
    let debrief = training::write_debrief(&s, s.solved.is_none());
    let training::Reset { errors, note } = training::reset(&s).await?;
    if let Some(note) = note {
        eprintln!("note: {note}");
    }
    match debrief {
        Ok(path) => out!("debrief: {}", path.display()),
        Err(e) => eprintln!("warning: no debrief page: {e}"),
    }
    if errors.is_empty() {
        out!("session {} reset: everything it changed is restored", s.id);
    } else {
        for e in &errors {
            eprintln!("error: {e}");
        }
        bail!("reset left {} undo step(s) failing; the session stays open (run `faultlab reset` again)", errors.len());
    }
    Ok(())
}

/// `faultlab scoreboard`: the open sessions' scoreboard written to `out`; with `watch`, again every
/// `watch` seconds (the page loads itself again as often) until interrupted.
pub async fn scoreboard(out: &Path, watch: Option<u32>) -> Result<()> {
    loop {
        training::write_scoreboard(out, watch)?;
        let Some(every) = watch else {
            out!("wrote the scoreboard of {} open session(s) to {}", training::Session::all().len(), out.display());
            return Ok(());
        };
        tokio::select! {
            _ = tokio::time::sleep(Duration::from_secs(u64::from(every))) => {}
            _ = tokio::signal::ctrl_c() => return Ok(()),
        }
    }
}

/// `faultlab terminal`: the session's shell in the browser (as `user`, with the broker, when given),
/// until interrupted or the session is gone.
pub async fn terminal(session: Option<&str>, listen: std::net::SocketAddr, shell: &Path, user: Option<&str>, node_commands: bool) -> Result<()> {
    use faultlab::webterm::{self, Broker, Recording, Server, User};
    let s = training::Session::find(session)?;
    if !shell.is_file() {
        usage!("--shell {}: no such program", shell.display());
    }
    let user = user.map(User::named).transpose()?;
    // SAFETY: geteuid has no preconditions.
    if user.is_some() && unsafe { libc::geteuid() } != 0 {
        return Err(webterm::WebTermError::NotRoot.into());
    }
    if let Some(u) = &user {
        webterm::check_runs_as(u, &std::env::current_exe()?)?;
    }
    let home = user.as_ref().map(webterm::private_home).transpose()?;
    let mut broker = None;
    let trainee = match (&user, &home) {
        (Some(u), Some(h)) => {
            let kubeconfig = match &s.trainee_kubeconfig {
                Some(kc) => Some(webterm::give_file(h.path(), "kubeconfig", faultlab::statefile::read(kc)?.as_bytes(), u)?),
                None => None,
            };
            let socket = h.path().join("broker.sock");
            broker = Some(Broker::bind(&socket, u)?);
            Some(training::TraineeHome { user: u, dir: h.path(), kubeconfig, broker: socket })
        }
        _ => None,
    };
    let recording = Recording::open(&training::commands_path(&s), s.started)?;
    let server = Server::bind(listen, training::terminal_shell(&s, shell, trainee), Some(recording)).await?;
    out!("terminal: {}", server.url());
    out!("for session {} ({}); the address is the trainee's credential. Ctrl-C stops it; so does `faultlab reset`.", s.id, s.shown_as());
    let (done, stopped) = tokio::sync::watch::channel(false);
    if let Some(broker) = broker {
        let exe = std::env::current_exe()?;
        let session = s.clone();
        let allow = move |args: &[String]| {
            let argv = training::brokered(&session, &exe, args, node_commands)?;
            let mut cmd = tokio::process::Command::new(&argv[0]);
            cmd.args(&argv[1..]);
            Ok(cmd)
        };
        let mut stopped = stopped.clone();
        tokio::spawn(broker.serve(allow, async move {
            let _ = stopped.wait_for(|d| *d).await;
        }));
    }
    let path = s.path();
    let mut signals = faultlab::signals::Interrupts::listen();
    let stop = async move {
        let gone = async {
            while path.exists() {
                tokio::time::sleep(Duration::from_secs(2)).await;
            }
        };
        tokio::select! {
            () = gone => {}
            _ = signals.recv() => {}
        }
    };
    server.serve(stop).await;
    let _ = done.send(true);
    drop(stopped);
    drop(home);
    Ok(())
}

/// `faultlab sessions`: the open sessions.
pub fn sessions(output: Output) -> Result<()> {
    let all = training::Session::all();
    if emit(output, &all.iter().map(training::Session::listed).collect::<Vec<_>>())? {
        return Ok(());
    }
    for s in all {
        let state = match &s.solved {
            Some(x) => format!("fixed in {:.0}s", x.seconds),
            None => "open".into(),
        };
        out!("{:<36} {:<22} {:<16} {}", s.id, s.shown_as(), s.cluster.context, state);
    }
    Ok(())
}
