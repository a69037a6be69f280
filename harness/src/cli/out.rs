//! What the command prints and how it exits: standard output that a closed pipe does not break
//! ([`write_out`], `out!`, `outp!`), `-o json|yaml` ([`emit`]), usage errors (`usage!`), and the exit
//! statuses, one meaning each ([`status`]).

use anyhow::{Context, Result};
use faultlab::{scenario, training};

use crate::Output;

/// Exit statuses, one meaning each (the README's "Exit statuses"; tests/exit_status.rs).
pub mod status {
    /// A scenario failed; a training check found the cluster not fixed; snapshots wait for review.
    pub const FAILED: u8 = 1;
    /// A bad flag or argument; a scenario that does not exist or does not load; an empty scenario set.
    pub const USAGE: u8 = 2;
    /// The environment: no cluster, a missing tool, a file that cannot be read or written, a cluster
    /// that answers with an error; a scenario the platform refused (and none failed).
    pub const ENVIRONMENT: u8 = 3;
    // Interrupted by SIGINT or SIGTERM (after undoing what the run did): 130 or 143, the signal's own
    // (faultlab::signals::Signal::exit_status).
    /// Standard output was closed by its reader (`faultlab plan X | head -1`): what a process killed by
    /// SIGPIPE reports, as kubectl's does, but only once the command has finished (a run still undoes
    /// its faults).
    pub const CLOSED_PIPE: u8 = 141;
}

/// Set when a write to standard output found it closed: the rest of the output is dropped quietly.
static STDOUT_CLOSED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Write to standard output; a closed pipe sets [`STDOUT_CLOSED`] instead of panicking, and other
/// write errors are said once on standard error.
pub fn write_out(args: std::fmt::Arguments<'_>) {
    use std::io::Write;
    if STDOUT_CLOSED.load(std::sync::atomic::Ordering::Relaxed) {
        return;
    }
    if let Err(e) = std::io::stdout().lock().write_fmt(args) {
        STDOUT_CLOSED.store(true, std::sync::atomic::Ordering::Relaxed);
        if e.kind() != std::io::ErrorKind::BrokenPipe {
            eprintln!("error: writing to standard output: {e}; the rest of the output is lost");
        }
    }
}

/// A line on standard output ([`write_out`]).
macro_rules! out {
    () => { $crate::cli::out::write_out(format_args!("\n")) };
    ($($t:tt)*) => { $crate::cli::out::write_out(format_args!("{}\n", format_args!($($t)*))) };
}

/// Text on standard output as it is ([`write_out`]).
macro_rules! outp {
    ($($t:tt)*) => { $crate::cli::out::write_out(format_args!($($t)*)) };
}

/// An error in what the user asked for (exit status 2), as opposed to one of the environment (3).
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct Usage(pub String);

/// Return a [`Usage`] error.
macro_rules! usage {
    ($($t:tt)*) => { return Err($crate::cli::out::Usage(format!($($t)*)).into()) };
}

/// The exit status of an error: a usage error, a scenario that does not load, a session id that is
/// none or a stage answered twice is the user's (2), anything else the environment's (3).
pub fn error_status(e: &anyhow::Error) -> u8 {
    let bad_session_id = |c: &(dyn std::error::Error + 'static)| matches!(c.downcast_ref::<training::TrainingError>(), Some(training::TrainingError::BadSessionId(_) | training::TrainingError::Answered(_)));
    let users = e.chain().any(|c| c.is::<Usage>() || c.is::<scenario::ScenarioError>() || c.is::<faultlab::datafile::DataFileError>() || bad_session_id(c));
    if users {
        status::USAGE
    } else {
        status::ENVIRONMENT
    }
}

/// Was this error a write to a closed pipe (a reader that went away)?
pub fn closed_pipe(e: &anyhow::Error) -> bool {
    e.chain().any(|c| c.downcast_ref::<std::io::Error>().is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe))
}

/// Leave with `code`, standard output flushed (a closed one turns success into [`status::CLOSED_PIPE`]).
pub fn exit(code: u8) -> ! {
    let closed = STDOUT_CLOSED.load(std::sync::atomic::Ordering::Relaxed);
    exit_verdict(if code == 0 && closed { status::CLOSED_PIPE } else { code })
}

/// Leave with `code` as it is: a run's verdict, which a reader that went away does not change.
pub fn exit_verdict(code: u8) -> ! {
    use std::io::Write;
    let _ = std::io::stdout().flush();
    std::process::exit(i32::from(code))
}

/// Print `value` as JSON or YAML; false for text (the caller prints it).
pub fn emit<T: serde::Serialize>(output: Output, value: &T) -> Result<bool> {
    match output {
        Output::Text => Ok(false),
        Output::Json => {
            out!("{}", serde_json::to_string_pretty(value).context("writing JSON")?);
            Ok(true)
        }
        Output::Yaml => {
            outp!("{}", serde_saphyr::to_string(value).context("writing YAML")?);
            Ok(true)
        }
    }
}

/// Each line of `text`, indented by two spaces.
pub fn indent(text: &str) -> String {
    text.lines().map(|l| format!("  {l}")).collect::<Vec<_>>().join("\n")
}
