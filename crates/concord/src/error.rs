//! The facade's error type: everything that can go wrong building a [`crate::Net`] or
//! calling `forward`, each variant naming what the caller has to fix.

use concord_core::{DType, Shape, Target};
use thiserror::Error;

#[derive(Debug, Error)]
pub enum Error {
    /// The model file could not be read or decoded.
    #[error(transparent)]
    Onnx(#[from] concord_onnx::Error),
    /// The graph is invalid or an op failed.
    #[error(transparent)]
    Graph(#[from] concord_core::Error),
    /// The forward ran past its time limit ([`crate::NetBuilder::time_limit`]) between two
    /// partitions (inside a reference partition it is [`concord_core::OpError::TimeLimit`]
    /// at the node); names the partition that was about to start.
    #[error("before the {executor} partition producing {outputs}: {source}")]
    TimeLimit {
        executor: String,
        outputs: String,
        source: concord_core::OpError,
    },
    /// `forward` got an input name the model does not have.
    #[error("unknown input `{name}`: the model's inputs are {}", expected.join(", "))]
    UnknownInput { name: String, expected: Vec<String> },
    /// `forward` got the same input twice.
    #[error("input `{name}` was given more than once")]
    DuplicateInput { name: String },
    /// `forward` did not get a required input.
    #[error("missing input `{name}` (expected {expected})")]
    MissingInput { name: String, expected: String },
    /// An input has the wrong element type.
    #[error("input `{name}` has dtype {actual}, the model expects {expected}")]
    InputDType {
        name: String,
        expected: DType,
        actual: DType,
    },
    /// An input has the wrong rank.
    #[error("input `{name}` has shape {actual} (rank {}), the model expects {expected} (rank {expected_rank})", actual.rank())]
    InputRank {
        name: String,
        expected: String,
        expected_rank: usize,
        actual: Shape,
    },
    /// An input has a wrong extent on one axis (a fixed dim differs, or a named dim
    /// disagrees with its extent in another input).
    #[error("input `{name}` has shape {actual}, the model expects {expected}: {detail}")]
    InputShape {
        name: String,
        /// The declared shape, symbolic dims by name ("[N, 3, 4]").
        expected: String,
        actual: Shape,
        /// The first axis that does not fit.
        axis: usize,
        detail: String,
    },
    /// An environment variable Concord reads has a value it does not understand.
    #[error("{variable}={value:?} is not understood: expected {expected}")]
    Environment {
        variable: &'static str,
        value: String,
        expected: &'static str,
    },
    /// `CONCORD_REQUIRE` (or `concord info --require`) names something no registered
    /// executor is or declares: a usage error, like an unknown flag.
    #[error(
        "{source_name}={value:?}: no executor or target is named `{entry}`{}; known: {}",
        suggestion.as_ref().map(|s| format!(" (did you mean `{s}`?)")).unwrap_or_default(),
        known.join(", ")
    )]
    UnknownRequirement {
        /// Where the list came from: "CONCORD_REQUIRE" or "--require".
        source_name: &'static str,
        value: String,
        entry: String,
        known: Vec<String>,
        suggestion: Option<String>,
    },
    /// The backend asked for is neither registered nor a built-in: a usage error (a typo),
    /// not a fallback.
    #[error(
        "no backend is named `{name}`{}; known backends: {}",
        suggestion.as_ref().map(|s| format!(" (did you mean `{s}`?)")).unwrap_or_default(),
        known.join(", ")
    )]
    UnknownBackend {
        name: String,
        known: Vec<String>,
        suggestion: Option<String>,
    },
    /// The target asked for is declared by no registered executor and no built-in backend:
    /// a usage error (a typo), not a fallback.
    #[error(
        "no target is named `{target}`{} (backend {backend} serves: {})",
        suggestion.as_ref().map(|s| format!("; did you mean `{s}`?")).unwrap_or_default(),
        known.join(", ")
    )]
    UnknownTarget {
        backend: String,
        target: String,
        known: Vec<String>,
        suggestion: Option<String>,
    },
    /// The fallback policy is Deny and something would have fallen back.
    #[error("asked for {asked} with fallback policy deny, but it would fall back: {}", reasons.join("; "))]
    FallbackDenied { asked: String, reasons: Vec<String> },
    /// `CONCORD_REQUIRE` names a backend or target that would fall back.
    #[error("CONCORD_REQUIRE includes `{requirement}`, but it would fall back: {}", reasons.join("; "))]
    Required {
        requirement: String,
        reasons: Vec<String>,
    },
    /// An executor failed to prepare its partition.
    #[error("executor `{executor}` could not prepare a partition for target {target}: {source}")]
    Prepare {
        executor: String,
        target: Target,
        /// Boxed so that every `Result<_, Error>` stays small (clippy's
        /// `result_large_err`): the target name made this variant the largest.
        source: Box<concord_core::Error>,
    },
    /// An executor broke the contract (e.g. returned the wrong number of outputs).
    #[error("executor `{executor}` broke the executor contract: {detail}")]
    Contract { executor: String, detail: String },
}
