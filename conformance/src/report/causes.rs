//! Why trials did not run, and which expected failures are absences rather than errors: the
//! classes the printed summary groups skips by, and the test that keeps a cell of
//! "unsupported" node tests from reading as an expected (wrong) result in the matrix.
//!
//! Both are read from the reasons the suite already writes, whose forms are fixed in one
//! place each: "skipped by expectations: …" ([`crate::suite::Suite::known_skip`]),
//! "op X is not supported by Concord" (the node tests' op-table check), "unsupported: …"
//! (what an executor's `supports()` declined), the `unavailable` probe trials, and the
//! category that opens every exclusion reason of conformance/onnx-node.toml.

use crate::outcome::Record;
use serde::Serialize;

/// Why a skipped trial did not run.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum SkipCause {
    /// A node test uses an ONNX op outside Concord's op table.
    OpNotSupported,
    /// The executor declines a dtype the case uses.
    DtypeNotSupported,
    /// The executor's `supports()` declines the case for another reason: no kernel for
    /// the op, an attribute, a rank, an operand computed at run time.
    DeclinedByExecutor,
    /// The executor's expectations file skips the trial, with its reason.
    ByExpectations,
    /// The executor or target is not available here (its `unavailable/probe` trial).
    Unavailable,
    /// Anything else, e.g. the ONNX node-test data is not there.
    Other,
}

/// The exclusion categories of conformance/onnx-node.toml that say Concord lacks the
/// feature (a dtype, an opset, an output, training mode, an attribute value, a runtime
/// operand), rather than that its result is wrong or that ONNX's data or convention
/// differs: an expected failure for one of these is *unsupported* in the matrix.
pub const UNSUPPORTED_CATEGORIES: [&str; 6] = [
    "dtype",
    "opset",
    "output",
    "training",
    "attribute",
    "operand",
];

impl SkipCause {
    /// Every cause, in the order the summary's columns show them.
    pub const ALL: [SkipCause; 6] = [
        SkipCause::OpNotSupported,
        SkipCause::DtypeNotSupported,
        SkipCause::DeclinedByExecutor,
        SkipCause::ByExpectations,
        SkipCause::Unavailable,
        SkipCause::Other,
    ];

    /// The cause of a skipped record with this `reason` (the record's category tells the
    /// unavailable probes apart).
    pub fn of(category: &str, reason: &str) -> SkipCause {
        if category == "unavailable" {
            SkipCause::Unavailable
        } else if reason.starts_with("skipped by expectations:") {
            SkipCause::ByExpectations
        } else if (reason.starts_with("op ") || reason.starts_with("ops "))
            && reason.ends_with("not supported by Concord")
        {
            SkipCause::OpNotSupported
        } else if let Some(why) = reason.strip_prefix("unsupported:") {
            if mentions_dtype(why) {
                SkipCause::DtypeNotSupported
            } else {
                SkipCause::DeclinedByExecutor
            }
        } else {
            SkipCause::Other
        }
    }

    /// The cause of a record's skip, if it was skipped.
    pub fn of_record(record: &Record) -> Option<SkipCause> {
        match &record.verdict {
            crate::Verdict::Skip { reason } => Some(SkipCause::of(&record.category, reason)),
            _ => None,
        }
    }

    /// "op not supported", "dtype not supported", "declined by executor", "by
    /// expectations", "unavailable", "other".
    pub fn label(self) -> &'static str {
        match self {
            SkipCause::OpNotSupported => "op not supported",
            SkipCause::DtypeNotSupported => "dtype not supported",
            SkipCause::DeclinedByExecutor => "declined by executor",
            SkipCause::ByExpectations => "by expectations",
            SkipCause::Unavailable => "unavailable",
            SkipCause::Other => "other",
        }
    }
}

/// Whether an expected failure's reason opens with one of the [`UNSUPPORTED_CATEGORIES`]
/// ("dtype: graph input `input` is int4").
pub fn is_unsupported_reason(reason: &str) -> bool {
    reason
        .split_once(':')
        .is_some_and(|(category, _)| UNSUPPORTED_CATEGORIES.contains(&category.trim()))
}

/// Whether a decline reason names a dtype: Concord's own names ("f16", "i32", "bool"), the
/// ONNX ones ("INT64", "float16"), or the word dtype itself.
fn mentions_dtype(reason: &str) -> bool {
    const ONNX_NAMES: [&str; 14] = [
        "float", "float16", "bfloat16", "double", "int8", "int16", "int32", "int64", "uint8",
        "uint16", "uint32", "uint64", "dtype", "dtypes",
    ];
    reason
        .split(|c: char| !c.is_ascii_alphanumeric())
        .map(str::to_ascii_lowercase)
        .any(|word| {
            concord::DType::from_name(&word).is_some() || ONNX_NAMES.contains(&word.as_str())
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_suites_reasons_fall_into_their_classes() {
        let cases = [
            ("node", "op Unique is not supported by Concord", SkipCause::OpNotSupported),
            (
                "node",
                "ops Unique, StringNormalizer are not supported by Concord",
                SkipCause::OpNotSupported,
            ),
            (
                "op",
                "unsupported: node `n` (Neg) was placed on cpu/cpu: `x` is i32; the OpenCL kernels handle f32, f16, i64 and bool",
                SkipCause::DtypeNotSupported,
            ),
            (
                "model",
                "unsupported: opencl declines Gather: INT64 indices",
                SkipCause::DtypeNotSupported,
            ),
            (
                "node",
                "unsupported: opencl declines Resize: Resize has no OpenCL kernel",
                SkipCause::DeclinedByExecutor,
            ),
            (
                "op",
                "skipped by expectations: slow on the reference",
                SkipCause::ByExpectations,
            ),
            ("unavailable", "libcuda.so.1 not found", SkipCause::Unavailable),
            (
                "node",
                "the ONNX node-test data is not in target/onnx-node-tests",
                SkipCause::Other,
            ),
        ];
        for (category, reason, cause) in cases {
            assert_eq!(SkipCause::of(category, reason), cause, "{reason}");
        }
    }

    #[test]
    fn only_the_absence_categories_are_unsupported() {
        assert!(is_unsupported_reason("dtype: graph input `input` is int4"));
        assert!(is_unsupported_reason("opset: the model imports opset 1"));
        assert!(is_unsupported_reason(
            "training: BatchNormalization training_mode = 1"
        ));
        assert!(!is_unsupported_reason(
            "data: the expected Y is written to 4 decimals"
        ));
        assert!(!is_unsupported_reason(
            "convention: MaxUnpool with output_shape"
        ));
        assert!(!is_unsupported_reason(
            "FIXME: Resize rounds half the wrong way"
        ));
        assert!(!is_unsupported_reason("f16 rounding of large magnitudes"));
    }
}
