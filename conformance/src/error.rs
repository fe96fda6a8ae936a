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
}
