//! SIGINT and SIGTERM: the two signals that interrupt a run. Once [`Interrupts::listen`] has registered
//! them they no longer kill the process: whoever listens tears down, and the first one received is
//! kept for the whole process ([`interrupted`]), so `faultlab run --all` starts nothing after it and
//! exits with its status.

use std::sync::atomic::{AtomicU8, Ordering};

/// A signal that interrupts a run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Signal {
    /// SIGINT: Ctrl-C.
    Int,
    /// SIGTERM: `kill`, a CI job's cancellation.
    Term,
}

impl Signal {
    pub fn name(self) -> &'static str {
        match self {
            Signal::Int => "SIGINT",
            Signal::Term => "SIGTERM",
        }
    }

    /// The exit status of a process this signal stopped (128 + its number), as shells report one.
    pub fn exit_status(self) -> u8 {
        match self {
            Signal::Int => 130,
            Signal::Term => 143,
        }
    }
}

impl std::fmt::Display for Signal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// The first signal this process received through [`Interrupts`]: 0 none, 1 SIGINT, 2 SIGTERM.
static FIRST: AtomicU8 = AtomicU8::new(0);

/// The signal that interrupted a run of this process, if one did.
pub fn interrupted() -> Option<Signal> {
    first_of(&FIRST)
}

fn first_of(latch: &AtomicU8) -> Option<Signal> {
    match latch.load(Ordering::SeqCst) {
        1 => Some(Signal::Int),
        2 => Some(Signal::Term),
        _ => None,
    }
}

fn keep_first(latch: &AtomicU8, signal: Signal) {
    let code = match signal {
        Signal::Int => 1,
        Signal::Term => 2,
    };
    let _ = latch.compare_exchange(0, code, Ordering::SeqCst, Ordering::SeqCst);
}

/// SIGINT and SIGTERM, listened for. Where a handler cannot be registered (no signal driver), that
/// signal is never received and keeps its default action.
pub struct Interrupts {
    int: Option<tokio::signal::unix::Signal>,
    term: Option<tokio::signal::unix::Signal>,
}

impl Interrupts {
    pub fn listen() -> Self {
        use tokio::signal::unix::{signal, SignalKind};
        Interrupts { int: signal(SignalKind::interrupt()).ok(), term: signal(SignalKind::terminate()).ok() }
    }

    /// The next signal, kept as the process's ([`interrupted`]) if it is the first.
    pub async fn recv(&mut self) -> Signal {
        async fn one(s: &mut Option<tokio::signal::unix::Signal>) {
            match s {
                Some(s) => {
                    s.recv().await;
                }
                None => std::future::pending().await,
            }
        }
        let signal = tokio::select! {
            _ = one(&mut self.int) => Signal::Int,
            _ = one(&mut self.term) => Signal::Term,
        };
        keep_first(&FIRST, signal);
        signal
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_exit_statuses_are_the_shells() {
        assert_eq!((Signal::Int.to_string(), Signal::Int.exit_status()), ("SIGINT".to_string(), 130));
        assert_eq!((Signal::Term.to_string(), Signal::Term.exit_status()), ("SIGTERM".to_string(), 143));
    }

    #[test]
    fn the_first_signal_kept_stays() {
        // A latch of the test's own: the process's (FIRST) is left alone, as other tests of this
        // process read it. Real signals are tests/kind_contract.rs's (SIGINT and SIGTERM sent to
        // `faultlab run`, which exits 130 and 143) and tests/teardown.rs's (SIGINT mid-fault).
        let latch = AtomicU8::new(0);
        assert_eq!(first_of(&latch), None);
        keep_first(&latch, Signal::Term);
        keep_first(&latch, Signal::Int);
        assert_eq!(first_of(&latch), Some(Signal::Term), "the first one stays");
    }
}
