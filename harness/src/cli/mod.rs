//! The command line's commands, one module each (`main.rs` parses and dispatches); `out` first, for
//! its macros (`out!`, `outp!`, `usage!`).

#[macro_use]
pub mod out;
pub mod cleanup;
pub mod docs;
pub mod plan;
pub mod run;
pub mod scenarios;
pub mod select;
pub mod snapshots;
pub mod train;
