//! The property strategies on the reference executor: every op's trial passes through the
//! suite, every generated case builds into a model with a runtime input, and the
//! strategies really reach the attributes and shapes they claim to cover.

// A test reports a broken expectation by panicking with what it found.
#![allow(clippy::panic)]

use concord_conformance::case::{AttributeValue, OpCase};
use concord_conformance::{prop, Outcome, Suite, SuiteConfig};
use proptest::strategy::{Strategy, ValueTree};
use proptest::test_runner::TestRunner;
use std::sync::Arc;
use std::time::Instant;

/// Draws `n` cases of `op` from its strategy, deterministically.
fn samples(op: &str, n: usize) -> Vec<OpCase> {
    let strategy = prop::strategy(op).unwrap_or_else(|| panic!("{op} has no strategy"));
    let mut runner = TestRunner::deterministic();
    (0..n)
        .map(|_| {
            strategy
                .new_tree(&mut runner)
                .unwrap_or_else(|e| panic!("{op}: the strategy cannot generate: {e}"))
                .current()
        })
        .collect()
}

fn int(case: &OpCase, name: &str) -> Option<i64> {
    match case.attributes.get(name) {
        Some(AttributeValue::Int(v)) => Some(*v),
        _ => None,
    }
}

fn ints(case: &OpCase, name: &str) -> Option<Vec<i64>> {
    match case.attributes.get(name) {
        Some(AttributeValue::Ints(v)) => Some(v.clone()),
        _ => None,
    }
}

fn literal<'a>(case: &'a OpCase, input: &str) -> Option<&'a [f64]> {
    case.inputs
        .iter()
        .find(|i| i.name == input)
        .and_then(|i| i.values.as_deref())
}

#[test]
fn every_property_trial_passes_on_the_reference() {
    let mut config = SuiteConfig::from_env();
    config.repro_dir = std::env::temp_dir().join("concord-prop-reference-repro");
    let suite = Suite::new(Arc::new(concord_cpu::CpuExecutor::new()), config).expect("suite");
    let started = Instant::now();
    let mut failures = Vec::new();
    for op in prop::ops() {
        match prop::run(&suite, op, &concord::targets::CPU) {
            Outcome::Pass { comparisons } => assert!(
                !comparisons.is_empty(),
                "{op}: a passing trial reports its comparisons"
            ),
            other => failures.push(format!("{op}: {other:?}")),
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
    println!(
        "{} property trials on the reference in {:.2} s",
        prop::ops().len(),
        started.elapsed().as_secs_f64()
    );
}

#[test]
fn every_supported_op_has_a_strategy_or_a_reason() {
    for op in concord_core::op::supported_names() {
        let has_strategy = prop::strategy(op).is_some();
        let excused = prop::not_generated(op).is_some();
        assert!(
            has_strategy || excused,
            "{op}: needs a strategy or a reason it has none"
        );
        assert_eq!(prop::ops().contains(op), !excused, "{op}");
    }
}

#[test]
fn every_generated_case_builds_with_a_runtime_input() {
    for op in prop::ops() {
        for case in samples(op, 40) {
            assert_eq!(&case.op, op);
            let built = case
                .build()
                .unwrap_or_else(|e| panic!("{op}: {e}\n{case:?}"));
            assert!(
                !built.inputs.is_empty(),
                "{op}: a case without a runtime input would be folded at build time: {case:?}"
            );
            // Operands an executor needs when it builds are constants, as exporters write
            // them.
            for spec in &case.inputs {
                if matches!(
                    spec.name.as_str(),
                    "shape"
                        | "axes"
                        | "pads"
                        | "starts"
                        | "ends"
                        | "steps"
                        | "split"
                        | "sizes"
                        | "scales"
                ) {
                    assert!(spec.constant, "{op}: `{}` must be a constant", spec.name);
                }
            }
        }
    }
}

#[test]
fn conv_cases_cover_groups_depthwise_strides_pads_dilations_and_auto_pad() {
    let cases = samples("Conv", 300);
    let has = |what: &str, f: &dyn Fn(&OpCase) -> bool| {
        assert!(cases.iter().any(f), "no Conv case with {what}");
    };
    has("groups", &|c| int(c, "group").is_some_and(|g| g > 1));
    // Depthwise: one input channel per group, so W's second dim is 1 and group = C.
    has("a depthwise convolution", &|c| {
        let group = int(c, "group").unwrap_or(1);
        group > 1 && c.inputs[1].shape[1] == 1 && c.inputs[0].shape[1] as i64 == group
    });
    has("strides > 1", &|c| {
        ints(c, "strides").is_some_and(|s| s.iter().any(|&v| v > 1))
    });
    has("dilations > 1", &|c| {
        ints(c, "dilations").is_some_and(|s| s.iter().any(|&v| v > 1))
    });
    has("asymmetric pads", &|c| {
        ints(c, "pads").is_some_and(|p| {
            let half = p.len() / 2;
            p[..half] != p[half..]
        })
    });
    has(
        "SAME_UPPER",
        &|c| matches!(c.attributes.get("auto_pad"), Some(AttributeValue::Str(s)) if s == "SAME_UPPER"),
    );
    has("a bias", &|c| c.inputs.len() == 3);
    has("1-D input", &|c| c.inputs[0].shape.len() == 3);
    has("3-D input", &|c| c.inputs[0].shape.len() == 5);
    has("runtime weights", &|c| !c.inputs[1].constant);
}

#[test]
fn binary_cases_broadcast_both_ways() {
    for op in ["Add", "Sub", "Mul", "Div", "Pow", "Mod", "Equal"] {
        let cases = samples(op, 200);
        let shapes = |c: &OpCase| (c.inputs[0].shape.clone(), c.inputs[1].shape.clone());
        assert!(
            cases.iter().any(|c| {
                let (a, b) = shapes(c);
                a.len() < b.len()
            }),
            "{op}: no case where A has fewer axes"
        );
        assert!(
            cases.iter().any(|c| {
                let (a, b) = shapes(c);
                a.len() == b.len() && a.iter().zip(&b).any(|(x, y)| *x == 1 && *y > 1)
            }),
            "{op}: no case where A stretches a size-1 axis"
        );
        assert!(
            cases.iter().any(|c| {
                let (a, b) = shapes(c);
                a == b
            }),
            "{op}: no case with equal shapes"
        );
    }
    assert!(
        samples("Mod", 100)
            .iter()
            .any(|c| int(c, "fmod") == Some(0)),
        "no integer Mod with fmod = 0"
    );
}

#[test]
fn movement_cases_reach_their_edge_cases() {
    assert!(
        samples("Slice", 200)
            .iter()
            .any(|c| literal(c, "steps").is_some_and(|s| s.iter().any(|&v| v < 0.0))),
        "no Slice with a negative step"
    );
    assert!(
        samples("Slice", 200)
            .iter()
            .any(|c| literal(c, "ends").is_some_and(|s| s.iter().any(|&v| v > 1e18))),
        "no Slice with an end past the last element"
    );
    let reshapes = samples("Reshape", 200);
    assert!(
        reshapes
            .iter()
            .any(|c| literal(c, "shape").is_some_and(|s| s.contains(&-1.0))),
        "no Reshape with -1"
    );
    assert!(
        reshapes
            .iter()
            .any(|c| literal(c, "shape").is_some_and(|s| s.contains(&0.0))),
        "no Reshape copying a dim with 0"
    );
    assert!(
        samples("Split", 100)
            .iter()
            .any(|c| int(c, "num_outputs").is_some()),
        "no Split by num_outputs"
    );
    assert!(
        samples("Pad", 200)
            .iter()
            .any(|c| literal(c, "pads").is_some_and(|p| p.iter().any(|&v| v < 0.0))),
        "no Pad that crops"
    );
    assert!(
        samples("Gather", 100)
            .iter()
            .any(|c| c.inputs[1].shape.is_empty()),
        "no Gather with scalar indices"
    );
    assert!(
        samples("Squeeze", 100).iter().any(|c| c.inputs.len() == 1),
        "no Squeeze without axes"
    );
    assert!(
        samples("Resize", 100).iter().any(|c| c.inputs.len() == 4),
        "no Resize by sizes"
    );
    assert!(
        samples("Identity", 100)
            .iter()
            .any(|c| c.inputs[0].shape.contains(&0)),
        "no empty tensor"
    );
}

#[test]
fn every_op_reaches_vector_widths_and_tile_edges() {
    // Around 16-lane vectors and 32-wide tiles, and past 64: a kernel that handles whole
    // vectors and tiles but not the remainder (or the remainder but not a lone element)
    // fails on one of these.
    let bands: [(&str, std::ops::RangeInclusive<usize>); 4] = [
        ("1", 1..=1),
        ("15-17", 15..=17),
        ("31-33", 31..=33),
        ("64+", 64..=usize::MAX),
    ];
    let mut missing = Vec::new();
    let mut widest = Vec::new();
    for op in prop::ops() {
        let cases = samples(op, 300);
        let dims: Vec<usize> = cases
            .iter()
            .flat_map(|c| c.inputs.iter().filter(|i| i.values.is_none()))
            .flat_map(|i| i.shape.iter().copied())
            .collect();
        for (band, range) in &bands {
            if !dims.iter().any(|d| range.contains(d)) {
                missing.push(format!("{op}: no generated operand has a dim in {band}"));
            }
        }
        let largest = cases
            .iter()
            .map(|c| {
                c.inputs
                    .iter()
                    .map(|i| i.shape.iter().product::<usize>())
                    .sum::<usize>()
            })
            .max()
            .unwrap_or(0);
        widest.push(format!(
            "{op}: largest dim {}, largest case {largest} elements",
            dims.iter().max().copied().unwrap_or(0)
        ));
    }
    println!("{}", widest.join("\n"));
    assert!(missing.is_empty(), "{}", missing.join("\n"));
}
