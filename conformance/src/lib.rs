//! concord-conformance: the conformance suite as a library — what backend authors run and
//! CI gates on.
//!
//! Given any [`concord::Executor`], the suite produces one trial per case and target, named
//! `<executor>/<target>/<category>/<case>`: `op/` hand-written cases kept as data in
//! conformance/cases/, `prop/` property cases compared with the reference, `golden/` and
//! `model/` cases whose outputs came from an independent oracle, `node/` ONNX's own node
//! tests. A golden, model or node trial whose model the executor runs only in part runs the
//! rest on the reference and is reported as *partial* with its node coverage; reports from
//! several runs, shards and devices merge into one ([`report::merge`]).
//!
//! Invariants:
//! - One suite for every executor: built-in executors use [`main`] / [`Conformance`]
//!   exactly as a backend author does; there is no per-backend copy.
//! - The suite is a dependency: its data (op cases, golden cases, tolerance table, ONNX
//!   node-test list) is packaged with this crate and found through this crate's own
//!   directory; the author's files (expectations, tolerance overrides, reports) are found
//!   in the author's crate ([`config`]). Nothing is edited inside Concord to test an
//!   executor.
//! - Expected outputs come from the reference executor or the golden oracle, never from
//!   the executor under test; the reference's own op/ trials compare with the op cases'
//!   independent oracle ([`op_oracle`]: onnxruntime, or the oracle a case names and why).
//! - Tolerances, expected failures and skips are data with reasons (tolerances.toml and the
//!   author's overrides, the executor's expectations file); malformed data fails the run,
//!   an expected failure that passes fails the run, and an executor without an
//!   expectations file is told so before the first trial (and fails under `CI`).
//! - A case the executor declines is a visible skip with the planner's reason, never a pass;
//!   a model it declines in part is a partial (never a pass, never hidden as a skip), with
//!   "k of n nodes on <executor>" and the declined ops with reasons.

pub mod case;
pub mod compare;
pub mod concurrency;
pub mod config;
pub mod error;
pub mod expectations;
pub mod fallback;
pub mod floors;
pub mod golden;
mod harness;
pub mod models;
pub mod node_tests;
pub mod op_oracle;
/// The .npy reader and writer (the facade's, re-exported for backend authors' tests).
pub use concord::npy;
pub mod outcome;
pub mod progress;
pub mod prop;
pub mod report;
pub mod repro;
pub mod shard;
pub mod suite;
pub mod tolerance;

pub use config::Conformance;
pub use error::SuiteError;
pub use harness::{main, run_harness};
pub use outcome::{NodeCoverage, Outcome, Record, Verdict};
pub use shard::Shard;
pub use suite::{Case, Suite, SuiteConfig};
