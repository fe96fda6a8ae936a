//! Proves the suite can fail: each planted-fault executor ([`planted`]) wraps the real
//! reference executor with exactly one bug that real backends have shipped, and a named
//! case of the suite must catch it — by the kind of failure the bug really causes: wrong
//! values with valid shapes are caught by the comparison ("out of tolerance"), never by a
//! shape error that a real backend with the bug would not raise. The same trials must pass
//! on the wrapper without the bug (the control), so a catch is the bug's doing. Prints the
//! table (fault → catching case → failure kind) and fails below 100%.

// A test reports a broken expectation by panicking with what it found.
#![allow(clippy::panic)]

mod planted;

use concord_conformance::expectations::Expectations;
use concord_conformance::{Case, Record, Suite, SuiteConfig, Verdict};
use planted::{Fault, Planted};
use std::path::PathBuf;
use std::sync::Arc;

/// What the catching trial's failure must look like.
#[derive(Clone, Copy, Debug)]
enum Kind {
    /// The comparison found elements out of tolerance, with matching dtype and shape.
    OutOfTolerance,
    /// The trial failed with a message containing this text.
    Message(&'static str),
}

impl Kind {
    /// Whether `record` failed this way.
    fn matches(&self, record: &Record) -> bool {
        let Some(message) = record.verdict.message() else {
            return false;
        };
        match self {
            Kind::OutOfTolerance => {
                message.contains("out of tolerance")
                    && record
                        .comparisons
                        .iter()
                        .any(|c| c.mismatch.is_none() && c.violations > 0)
                    && record.comparisons.iter().all(|c| c.mismatch.is_none())
            }
            Kind::Message(text) => message.contains(text),
        }
    }

    fn label(&self) -> String {
        match self {
            Kind::OutOfTolerance => "out of tolerance".into(),
            Kind::Message(text) => format!("\"{text}\""),
        }
    }
}

/// A fault, the trials that run before the catching one (they set up state the fault
/// carries between trials), the trial that must catch it, and how.
struct Plant {
    fault: Fault,
    setup: &'static [&'static str],
    caught_by: &'static str,
    kind: Kind,
}

const fn by_value(fault: Fault, caught_by: &'static str) -> Plant {
    Plant {
        fault,
        setup: &[],
        caught_by,
        kind: Kind::OutOfTolerance,
    }
}

const PLANTS: &[Plant] = &[
    Plant {
        fault: Fault::CacheKeyedByOpName,
        setup: &["op/Conv/basic_3x3_bias"],
        caught_by: "op/Conv/pads_stride2_same_shapes_as_basic",
        kind: Kind::OutOfTolerance,
    },
    Plant {
        fault: Fault::SilentCpuFallback,
        setup: &[],
        caught_by: "fallback/placement_honesty",
        kind: Kind::Message("a silent fallback"),
    },
    Plant {
        fault: Fault::DoubleNotice,
        setup: &[],
        caught_by: "fallback/notice_once",
        kind: Kind::Message("must warn exactly once"),
    },
    Plant {
        fault: Fault::BufferReusedTooEarly,
        setup: &[],
        caught_by: "concurrency/shared_net",
        kind: Kind::Message("on the shared net differs from the single-threaded output"),
    },
    Plant {
        fault: Fault::UninitialisedScratch,
        setup: &[],
        caught_by: "concurrency/shared_net",
        kind: Kind::Message("the same input twice through the same net gave different bits"),
    },
    by_value(Fault::ConvPadOffByOne, "op/Conv/pads_symmetric"),
    by_value(Fault::ConvGroupsIgnored, "op/Conv/groups_2"),
    by_value(Fault::ConvIgnoresDilation, "op/Conv/dilation_same_upper"),
    by_value(Fault::BroadcastWrongAxis, "op/Add/broadcast_row_square"),
    by_value(Fault::F16OverflowOnF32Target, "op/Add/large_magnitudes"),
    by_value(Fault::NanToZero, "op/Add/special_values"),
    by_value(Fault::PartialTileDropped, "op/Add/same_shape"),
    by_value(Fault::GemmIgnoresTransB, "op/Gemm/trans_b_square"),
    by_value(
        Fault::FlushDenormals,
        "op/Cast/f32_to_f16_overflow_and_subnormal",
    ),
    by_value(
        Fault::CastRoundsInsteadOfTruncating,
        "op/Cast/f32_to_i64_truncates",
    ),
    by_value(
        Fault::F16AccumulationInLongSum,
        "op/ReduceSum/long_positive_rows",
    ),
    by_value(
        Fault::ReduceWrongAxis,
        "op/ReduceSum/square_last_axis_no_keepdims",
    ),
    by_value(
        Fault::SoftmaxWithoutMaxSubtraction,
        "op/Softmax/large_magnitudes",
    ),
    by_value(Fault::SoftmaxFlattenedAtAxis, "op/Softmax/middle_axis"),
    by_value(
        Fault::ResizeCoordinateTransformSwapped,
        "op/Resize/linear_up2_half_pixel",
    ),
    by_value(
        Fault::ResizeNearestModeIgnored,
        "op/Resize/nearest_ceil_fractional_scale",
    ),
    by_value(
        Fault::GatherNegativeIndexNotWrapped,
        "op/Gather/negative_axis_negative_indices",
    ),
    by_value(Fault::TransposeInversePerm, "op/Transpose/cyclic_cube"),
    by_value(
        Fault::SliceNegativeStepOffByOne,
        "op/Slice/negative_step_interior",
    ),
    by_value(
        Fault::BatchNormWrongAxis,
        "op/BatchNormalization/channels_equal_width",
    ),
    by_value(Fault::MaxPoolPadsWithZero, "op/MaxPool/all_negative_padded"),
    by_value(
        Fault::AveragePoolCountIncludePadInverted,
        "op/AveragePool/pads_exclude_pad",
    ),
    by_value(
        Fault::LayerNormEpsilonIgnored,
        "op/LayerNormalization/epsilon_large",
    ),
    by_value(Fault::PadValueIgnored, "op/Pad/constant_value"),
    by_value(Fault::ModWithCSign, "op/Mod/i64_python_sign"),
    by_value(
        Fault::ArgMaxIgnoresSelectLastIndex,
        "op/ArgMax/ties_first_and_last",
    ),
    by_value(Fault::LeakyReluAlphaIgnored, "op/LeakyRelu/alpha_0_2"),
    by_value(Fault::DivisorLosesSignOfZero, "op/Div/by_zero_and_special"),
];

/// The trials of the control's suite, listed once (listing them builds a reference net
/// per golden case, which is most of this test's time otherwise).
struct Trials {
    cases: Vec<Case>,
    prefix: String,
}

impl Trials {
    fn of(control: &Suite) -> Trials {
        Trials {
            cases: control.cases(),
            prefix: format!("{}/", control.executor.name()),
        }
    }

    /// Runs the named trials (suffixes after `<executor>/cpu/`) on `suite`, in order, and
    /// returns their records. Every planted executor serves the control's target and
    /// declines nothing the control takes, so the control's trial, renamed, is the
    /// suite's. A skipped trial is an error: a fault must be caught by a case that ran.
    fn run(&self, suite: &Suite, suffixes: &[&str]) -> Result<Vec<Record>, String> {
        let mut records = Vec::new();
        for suffix in suffixes {
            let control_name = format!("{}cpu/{suffix}", self.prefix);
            let mut case = self
                .cases
                .iter()
                .find(|c| c.name == control_name)
                .cloned()
                .ok_or_else(|| format!("no trial named {control_name}"))?;
            case.name = format!("{}/cpu/{suffix}", suite.executor.name());
            let record = suite.run_case(&case);
            if let Verdict::Skip { reason } = &record.verdict {
                return Err(format!(
                    "{} was skipped ({reason}); a planted fault must be caught by an executed case",
                    case.name
                ));
            }
            records.push(record);
        }
        Ok(records)
    }
}

fn suite_for(fault: Fault) -> Suite {
    Suite::new(Arc::new(Planted::new(fault)), SuiteConfig::from_env())
        .unwrap_or_else(|e| panic!("suite: {e}"))
}

fn first_line(record: &Record) -> String {
    record
        .verdict
        .message()
        .unwrap_or_default()
        .lines()
        .next()
        .unwrap_or_default()
        .to_string()
}

/// One row of the printed table; `None` as the verdict means caught as required.
struct Row {
    fault: String,
    case: String,
    kind: String,
    problem: Option<String>,
}

#[test]
fn every_planted_fault_is_caught_by_its_named_case_and_kind() {
    let control = suite_for(Fault::None);
    let trials_of_control = Trials::of(&control);
    let mut rows = Vec::new();
    for plant in PLANTS {
        let mut trials: Vec<&str> = plant.setup.to_vec();
        trials.push(plant.caught_by);
        // The control passes the same trials, so a catch is the fault's doing.
        let control_records = trials_of_control
            .run(&control, &trials)
            .unwrap_or_else(|e| panic!("{e}"));
        for r in &control_records {
            assert!(
                matches!(r.verdict, Verdict::Pass),
                "the control fails {}: {:?}",
                r.name,
                r.verdict
            );
        }
        let suite = suite_for(plant.fault);
        let records = trials_of_control
            .run(&suite, &trials)
            .unwrap_or_else(|e| panic!("{e}"));
        let catching = records.last().unwrap_or_else(|| panic!("no records"));
        let problem = if catching.verdict.message().is_none() {
            Some(format!("NOT CAUGHT ({})", catching.verdict.label()))
        } else if !plant.kind.matches(catching) {
            Some(format!(
                "caught by the wrong kind: {}",
                first_line(catching)
            ))
        } else {
            None
        };
        rows.push(Row {
            fault: format!("{:?}", plant.fault),
            case: plant.caught_by.to_string(),
            kind: plant.kind.label(),
            problem,
        });
    }

    // One plant is in the data, not the executor: an expected-failure entry for a case that
    // passes must fail the run. Its control is the same trial without the entry, which
    // passes (run above for every plant's control suite; here once more on its own trial).
    let relu = "op/Relu/f32";
    let control_records = trials_of_control
        .run(&control, &[relu])
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(
        control_records
            .iter()
            .all(|r| matches!(r.verdict, Verdict::Pass)),
        "the control fails {relu}: {:?}",
        control_records.first().map(|r| &r.verdict)
    );
    let mut stale = suite_for(Fault::None);
    stale.expectations = Expectations::parse(
        "min_executed = 0\n[[expected_failure]]\ncase = \"planted-none/cpu/op/Relu/*\"\nreason = \"planted: Relu was once broken\"\nfailure = \"out-of-tolerance\"\n",
        PathBuf::from("planted.toml"),
        &[concord::targets::CPU],
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let stale_records = trials_of_control
        .run(&stale, &[relu])
        .unwrap_or_else(|e| panic!("{e}"));
    let kind = Kind::Message("but passed: remove the entry");
    let problem = match stale_records.first() {
        Some(r) if matches!(r.verdict, Verdict::UnexpectedPass { .. }) && kind.matches(r) => None,
        Some(r) => Some(format!("NOT CAUGHT ({})", r.verdict.label())),
        None => Some("no record".to_string()),
    };
    rows.push(Row {
        fault: "StaleExpectedFailure".into(),
        case: relu.into(),
        kind: kind.label(),
        problem,
    });

    let caught = rows.iter().filter(|r| r.problem.is_none()).count();
    let width = rows.iter().map(|r| r.fault.len()).max().unwrap_or(0);
    let case_width = rows.iter().map(|r| r.case.len()).max().unwrap_or(0);
    println!(
        "planted faults caught by their case and kind: {caught}/{} ({:.0}%)",
        rows.len(),
        100.0 * caught as f64 / rows.len().max(1) as f64
    );
    for row in &rows {
        println!(
            "  {:width$}  {:case_width$}  {}{}",
            row.fault,
            row.case,
            row.kind,
            row.problem
                .as_deref()
                .map(|p| format!("  <- {p}"))
                .unwrap_or_default()
        );
    }
    let missed: Vec<String> = rows
        .iter()
        .filter_map(|r| r.problem.as_ref().map(|p| format!("{}: {p}", r.fault)))
        .collect();
    assert!(
        missed.is_empty(),
        "the suite missed planted faults:\n{}",
        missed.join("\n")
    );
    assert!(
        rows.len() >= 25,
        "at least 25 fault classes are planted; {} are",
        rows.len()
    );
}
