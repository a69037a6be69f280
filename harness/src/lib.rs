//! faultlab: reproduce documented Kubernetes faults on real clusters, assert the events they cause,
//! and prove that the documented fix brings the workload back.
//!
//! The life cycle ([`runner`]): set up a workload, inject the fault ([`faults`]), wait for the
//! documented symptom ([`wait`], [`events`]), apply the documented fix, verify recovery, and always undo
//! what was touched ([`journal`]). Clusters come from a [`provider`]; commands reach nodes as argv data
//! through [`node`].
//!
//! The modules by stage; each uses only its own stage and those above it (`tests/layers.rs` fails on
//! any cycle):
//! 1. base: [`check`], [`datafile`], [`duration`], [`names`], [`pattern`], [`record`], [`image`], [`image_archive`], [`cmd`], [`schedule`],
//!    [`home`], [`statefile`], [`terminal`], [`atomic`], [`signals`], [`score`], [`webterm`]
//! 2. nodes and the API: [`node`], [`kube_ops`], [`attacher`], [`journal`], [`machine_lock`], [`cri`] (the faultlab-cri crate, `harness/cri/`), [`testbed`]
//! 3. what scenarios say: [`gates`], [`needs`], [`vars`], [`manifest`]
//! 4. observe: [`wait`], [`events`], [`observe`]
//! 5. faults: [`faults`]
//! 6. scenarios: [`scenario`], [`scaffold`], [`snapshot`]
//! 7. platforms: [`provider`] (kind, existing)
//! 8. run: [`runner`]
//! 9. suite, report, train, clean up: [`lease`], [`suite`], [`batch`], [`report`], [`html`], [`training`], [`cleanup`]; the command
//!    line is `main.rs`.

pub mod atomic;
pub mod attacher;
pub mod batch;
pub mod check;
pub mod cleanup;
pub mod cmd;
/// The CRI client: the faultlab-cri crate (`harness/cri/`, also the nodes' `faultlab-cri` binary), so
/// that its cross-build for arm64 nodes compiles none of this library.
pub use faultlab_cri as cri;
pub mod datafile;
pub mod duration;
pub mod events;
pub mod faults;
pub mod gates;
pub mod home;
pub mod html;
pub mod image;
pub mod image_archive;
pub mod journal;
pub mod kube_ops;
pub mod lease;
pub mod machine_lock;
pub mod manifest;
pub mod names;
pub mod observe;
pub mod needs;
pub mod node;
pub mod pattern;
pub mod provider;
pub mod record;
pub mod report;
pub mod runner;
pub mod scaffold;
pub mod scenario;
pub mod schedule;
pub mod score;
pub mod signals;
pub mod snapshot;
pub mod statefile;
pub mod suite;
pub mod terminal;
pub mod testbed;
pub mod training;
pub mod vars;
pub mod wait;
pub mod webterm;
