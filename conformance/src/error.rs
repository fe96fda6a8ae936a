//! Errors of the suite's own data (case files, expectations, tolerances). A malformed data
//! file fails the run: no entry is ever dropped silently.

use std::path::PathBuf;
use thiserror::Error;

#[derive(Debug, Error)]
pub enum SuiteError {
    #[error("{}: {detail}", path.display())]
    Data { path: PathBuf, detail: String },
    #[error("case {case}: {detail}")]
    Case { case: String, detail: String },
    #[error("expectations file {}: {detail}", path.display())]
    Expectations { path: PathBuf, detail: String },
    /// Under `CI`, an executor must have an expectations file, or nothing would catch a
    /// suite that shrank.
    #[error(
        "executor `{executor}` has no expectations file (looked for {}) and CI is set: create \
         it with at least `min_executed = N` (N a little below the executed count of an \
         unfiltered run), or name another file with Conformance::expectations",
        looked_for.display()
    )]
    NoExpectations {
        executor: String,
        looked_for: PathBuf,
    },
}
