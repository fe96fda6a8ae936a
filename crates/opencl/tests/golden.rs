//! Every golden case (conformance/golden/manifest.json) through `NetBuilder` on the OpenCL backend,
//! compared with onnxruntime's outputs at the case's f32 tolerance level, with the
//! placement checked: every node must run on opencl unless it is listed in
//! [`EXPECTED_FALLBACKS`] with its reason (strictly: a listed fallback that no longer
//! happens fails too).
//!
//! Without an OpenCL runtime the same cases are built and the test asserts the fallback
//! instead: every node on the reference, one notice with the probe's cause, and outputs
//! that still match.

// A test reports a broken expectation by panicking with what it found.
#![allow(clippy::panic)]

mod common;

use common::{compare, golden_dir, load_manifest, opencl_here, read_inputs, read_npy, OpenClHere};
use concord::{ExecutorRegistry, FallbackPolicy, NetBuilder, Overrides};
use concord_opencl::{BlockRows, FusionFault, GemmKernel, OpenClExecutor, OpenClOptions};
use std::sync::Arc;

/// A node that is expected to fall back to the reference, and why.
struct ExpectedFallback {
    case: &'static str,
    op: &'static str,
    /// Words the planner's reason must contain.
    reason: &'static str,
}

/// Nodes of golden cases the OpenCL executor does not run, as data, besides the ops no
/// device executor implements (see [`reference_only`]).
const EXPECTED_FALLBACKS: &[ExpectedFallback] = &[
    ExpectedFallback {
        case: "argmax_last_axis",
        op: "ArgMax",
        // ArgMax is on the reference only (issue #12's proof of a non-elementwise op); the
        // executor's `supports` declines ops it has no kernel for.
        reason: "ArgMax has no OpenCL kernel",
    },
    // Element types the OpenCL kernels have no storage for.
    ExpectedFallback {
        case: "abs_int8",
        op: "Abs",
        reason: "is i8; the OpenCL kernels handle f32, f16, i64 and bool",
    },
    ExpectedFallback {
        case: "add_uint8_wraps",
        op: "Add",
        reason: "is u8; the OpenCL kernels handle f32, f16, i64 and bool",
    },
    ExpectedFallback {
        case: "div_int32_truncates",
        op: "Div",
        reason: "is i32; the OpenCL kernels handle f32, f16, i64 and bool",
    },
    ExpectedFallback {
        case: "pad_reflect",
        op: "Pad",
        reason: "Pad mode Reflect is not implemented (constant is)",
    },
    ExpectedFallback {
        case: "mul_f64",
        op: "Mul",
        reason: "is f64; the OpenCL kernels handle f32, f16, i64 and bool",
    },
    ExpectedFallback {
        case: "range_float",
        op: "Range",
        reason: "input 0 (start) must be a constant",
    },
    // What the GRU and LSTM kernels leave to the reference.
    ExpectedFallback {
        case: "gru_linear_before_reset",
        op: "GRU",
        reason: "GRU with sequence_lens is not implemented on OpenCL",
    },
    ExpectedFallback {
        case: "lstm_bidirectional_seq_lens",
        op: "LSTM",
        reason: "LSTM with sequence_lens is not implemented on OpenCL",
    },
    ExpectedFallback {
        case: "maxpool_indices_unpool",
        op: "MaxPool",
        reason: "MaxPool's Indices output (its second) has no OpenCL kernel",
    },
];

/// Ops no device executor has a kernel for yet: the unary and binary table rows without
/// device kernels, and the conformance suite's list of the other reference-only ops.
fn reference_only(op: &str) -> bool {
    let row = concord::op::Unary::from_name(op)
        .map(|u| u.def().device)
        .or_else(|| concord::op::Binary::from_name(op).map(|b| b.def().device));
    match row {
        Some(device) => !device,
        None => concord_conformance::prop::REFERENCE_ONLY.contains(&op),
    }
}

/// The reason a node of `case` must fall back with, if it must.
fn expected_fallback(case: &str, op: &str) -> Option<String> {
    EXPECTED_FALLBACKS
        .iter()
        .find(|f| f.case == case && f.op == op)
        .map(|f| f.reason.to_string())
        .or_else(|| reference_only(op).then(|| format!("{op} has no OpenCL kernel")))
}

#[test]
fn golden_cases_on_opencl() {
    run_golden("golden_cases_on_opencl", common::shared_registry());
}

/// The same cases with the GEMM kernel family the device would not pick forced: on a CPU
/// device (PoCL) the GPU-shaped local-memory GEMM, elsewhere (Oclgrind, a GPU) the
/// register-blocked CPU-device kernels, whose 16-lane loads run past a value's end into
/// the slot's slack; on Oclgrind every such load is checked against its buffer's bounds.
#[test]
fn golden_cases_on_opencl_with_the_gemm_the_device_would_not_pick() {
    let gemm = if selected_device_is_cpu() {
        GemmKernel::LocalTiled
    } else {
        GemmKernel::RegisterBlocked
    };
    let executor = OpenClExecutor::with_options(OpenClOptions {
        gemm,
        ..OpenClOptions::default()
    });
    let registry = ExecutorRegistry::with_builtins().with(Arc::new(executor));
    run_golden(
        "golden_cases_on_opencl_with_the_gemm_the_device_would_not_pick",
        registry,
    );
}

/// The same cases on the CPU-device kernels with each register block: four rows of sums at
/// a time (what AVX2 devices get) and eight (AVX-512), whichever the device would pick, so
/// both builds of gemm.cl's GEMM and convs are held to onnxruntime's outputs on any machine.
#[test]
fn golden_cases_on_opencl_with_four_and_eight_row_register_blocks() {
    for rows in [BlockRows::Four, BlockRows::Eight] {
        let executor = OpenClExecutor::with_options(OpenClOptions {
            gemm: GemmKernel::RegisterBlocked,
            block_rows: rows,
            ..OpenClOptions::default()
        });
        let registry = ExecutorRegistry::with_builtins().with(Arc::new(executor));
        run_golden(
            &format!("golden_cases_on_opencl_with_four_and_eight_row_register_blocks ({rows:?})"),
            registry,
        );
    }
}

/// The fusions of a transformer block (a MatMul's bias, residual, erf GELU and scale by a
/// constant), EfficientNet's SiLU (Sigmoid and Mul fused into the Conv before them),
/// MobileNetV3's squeeze-excite blocks (two 1×1 convs folded into the pool before them) and
/// a bidirectional LSTM's Transpose of Y (folded into where the walk stores Y) proved
/// catchable: with each wrong fusion planted in the OpenCL executor, the
/// outputs of the cases that have that fusion are out of the case's tolerance, element
/// values wrong with the right shape (the unplanted executor passes the same cases in
/// `golden_cases_on_opencl`). torch_bert_encoder's activations have extents known only at
/// run time, so it holds the GELU fused by rank alone, and its attention scores' Div by
/// √d is the scale. Without an OpenCL runtime the planted executor is never used, and the
/// outputs (from the reference) match.
#[test]
fn a_planted_wrong_fusion_is_caught_by_a_named_golden_case() {
    let test = "a_planted_wrong_fusion_is_caught_by_a_named_golden_case";
    let here = opencl_here(test);
    let manifest = load_manifest();
    let block = [
        FusionFault::GeluScaleDropped,
        FusionFault::MatMulBiasDropped,
        FusionFault::GemmResidualDropped,
    ];
    let bert = [
        FusionFault::GeluScaleDropped,
        FusionFault::MatMulBiasDropped,
        FusionFault::ScaleDropped,
    ];
    // Both have squeeze-excite blocks whose gate (a Sigmoid, a HardSigmoid) the second
    // conv takes, so the whole block folds into the pool.
    let efficientnet = [FusionFault::SiluAsHardSwish, FusionFault::ExciteGateDropped];
    let mobilenet_v3 = [FusionFault::ExciteGateDropped];
    // Each layer's Y, [seq, dirs, batch, hidden], is transposed to [seq, batch, dirs,
    // hidden] before the Reshape for the next; dirs and batch are both 2, so a Y stored
    // unpermuted has the right shape and the wrong elements.
    let lstm = [FusionFault::RecurrentPermDropped];
    for (case_name, faults) in [
        ("transformer_encoder_block", &block[..]),
        ("torchvision_vit", &block),
        ("torch_bert_encoder", &bert),
        ("torchvision_efficientnet", &efficientnet),
        ("torchvision_mobilenet_v3_small", &mobilenet_v3),
        ("torch_lstm_lm", &lstm),
    ] {
        let Some(case) = manifest.cases.iter().find(|c| c.name == case_name) else {
            panic!("{test}: the golden manifest has no {case_name} case");
        };
        let tolerance = &manifest.tolerances[&case.tolerance];
        for &fault in faults {
            let executor = OpenClExecutor::with_options(OpenClOptions {
                planted_fusion_fault: Some(fault),
                ..OpenClOptions::default()
            });
            let net = NetBuilder::from_onnx_file(golden_dir().join(&case.model))
                .registry(ExecutorRegistry::with_builtins().with(Arc::new(executor)))
                .backend(concord::backends::OPENCL)
                .fallback(FallbackPolicy::Allow)
                .overrides(Overrides::default())
                .build()
                .unwrap_or_else(|e| panic!("{test}: {case_name}, {fault:?}: build failed: {e}"));
            let outputs = net
                .forward(read_inputs(&case.inputs).unwrap_or_else(|e| panic!("{test}: {e}")))
                .unwrap_or_else(|e| panic!("{test}: {case_name}, {fault:?}: forward failed: {e}"));
            for (name, file) in &case.outputs {
                let expected = read_npy(&golden_dir().join(file)).unwrap_or_else(|e| panic!("{e}"));
                let Some(actual) = outputs.get(name) else {
                    panic!("{test}: {case_name}, {fault:?}: output {name} missing");
                };
                let verdict = compare(actual, &expected, tolerance);
                match &here {
                    OpenClHere::Available => match verdict {
                        Err(m) if m.contains("out of tolerance") => {
                            println!("{test}: {case_name}: {fault:?} caught: {m}")
                        }
                        other => panic!(
                            "{test}: {fault:?} planted, but {case_name}'s {name} gave \
                             {other:?} instead of values out of tolerance"
                        ),
                    },
                    OpenClHere::Unavailable { .. } => assert!(
                        verdict.is_ok(),
                        "{test}: {case_name}, {fault:?}: the reference fallback's {name} does \
                         not match: {verdict:?}"
                    ),
                }
            }
        }
    }
}

/// Whether the device the OpenCL executor selects is a CPU (false without one).
fn selected_device_is_cpu() -> bool {
    match concord::Executor::probe(&OpenClExecutor::new()) {
        concord::Availability::Available { devices } => devices.iter().any(|d| {
            d.details.get("selected").map(String::as_str) == Some("yes")
                && d.details.get("type").map(String::as_str) == Some("cpu")
        }),
        concord::Availability::Unavailable { .. } => false,
    }
}

fn run_golden(test: &str, registry: ExecutorRegistry) {
    let here = opencl_here(test);
    let manifest = load_manifest();
    let mut failures = Vec::new();
    let mut on_device_nodes = 0;
    for case in &manifest.cases {
        let result = (|| -> Result<usize, String> {
            let tolerance = manifest
                .tolerances
                .get(&case.tolerance)
                .ok_or_else(|| format!("unknown tolerance {}", case.tolerance))?;
            let net = NetBuilder::from_onnx_file(golden_dir().join(&case.model))
                .registry(registry.clone())
                .backend(concord::backends::OPENCL)
                .fallback(FallbackPolicy::Allow)
                .overrides(Overrides::default())
                .build()
                .map_err(|e| format!("build failed: {e}"))?;
            let placement = net.placement();
            let mut device_nodes = 0;
            match &here {
                OpenClHere::Available => {
                    for node in &placement.nodes {
                        let expected = expected_fallback(&case.name, &node.op);
                        match (node.executor.as_str(), expected) {
                            ("opencl", None) => device_nodes += 1,
                            ("opencl", Some(f)) => {
                                return Err(format!(
                                    "node {} ({}) ran on opencl but is listed as falling back \
                                     ({f}); remove it from the expected fallbacks",
                                    node.name, node.op
                                ))
                            }
                            (_, Some(f)) => {
                                let reason = node.reason.clone().unwrap_or_default();
                                if !reason.contains(&f) {
                                    return Err(format!(
                                        "node {} ({}) fell back because `{reason}`, expected \
                                         a reason containing `{f}`",
                                        node.name, node.op
                                    ));
                                }
                            }
                            (other, None) => {
                                return Err(format!(
                                    "node {} ({}) ran on {other}: {}",
                                    node.name,
                                    node.op,
                                    node.reason.clone().unwrap_or_default()
                                ))
                            }
                        }
                    }
                }
                OpenClHere::Unavailable { cause, .. } => {
                    if placement.nodes.iter().any(|n| n.executor != "cpu") {
                        return Err("a node is placed off the reference".into());
                    }
                    if !placement.notices.iter().any(|n| n.cause == *cause) {
                        return Err(format!("no {cause:?} notice in {placement}"));
                    }
                }
            }
            // Every input set through the one built net (run 0 is the case's own).
            for (run, (input_files, output_files)) in case.runs().into_iter().enumerate() {
                let outputs = net
                    .forward(read_inputs(input_files)?)
                    .map_err(|e| format!("run {run}: forward failed: {e}"))?;
                for (name, file) in output_files {
                    let expected = read_npy(&golden_dir().join(file))?;
                    let actual = outputs
                        .get(name)
                        .ok_or_else(|| format!("run {run}: output {name} missing"))?;
                    compare(actual, &expected, tolerance)
                        .map_err(|m| format!("run {run}: output {name}: {m}"))?;
                }
            }
            Ok(device_nodes)
        })();
        match result {
            Ok(n) => on_device_nodes += n,
            Err(message) => failures.push(format!(
                "{} ({}, tolerance {}): {message}",
                case.name,
                case.op_types.join("+"),
                case.tolerance
            )),
        }
    }
    println!(
        "{test}: {} of {} cases pass, {on_device_nodes} nodes ran on the device",
        manifest.cases.len() - failures.len(),
        manifest.cases.len()
    );
    assert!(
        failures.is_empty(),
        "{} golden cases failed on OpenCL:\n{}",
        failures.len(),
        failures.join("\n")
    );
    if matches!(here, OpenClHere::Available) {
        assert!(
            on_device_nodes > 100,
            "only {on_device_nodes} nodes ran on OpenCL"
        );
    }
}

#[test]
fn expected_fallbacks_name_real_cases() {
    let manifest = load_manifest();
    for f in EXPECTED_FALLBACKS {
        let case = manifest
            .cases
            .iter()
            .find(|c| c.name == f.case)
            .unwrap_or_else(|| panic!("EXPECTED_FALLBACKS names unknown case {}", f.case));
        assert!(
            case.op_types.iter().any(|o| o == f.op),
            "case {} has no {} node",
            f.case,
            f.op
        );
    }
}
