//! Asking for CUDA through the facade. Without a driver (this machine, CI) the net still
//! builds under Warn and Allow with a LibraryMissing or NoDevice notice whose reason names
//! the libraries searched, computes exactly what the reference computes, and Deny refuses;
//! nothing panics. With a GPU the same requests run on the device with no notice, close to
//! the reference. Which case applies is what the probe says, and each case asserts its own
//! outcome.

use concord::executor::{Node, Op};
use concord::op::{Conv, Gemm};
use concord::{
    Availability, DType, Error, Executor, ExecutorRegistry, FallbackCause, FallbackPolicy, Graph,
    Net, NetBuilder, Overrides, Target, Tensor, ValueInfo,
};
use concord_conformance::compare::compare;
use concord_conformance::tolerance::{allowance, ToleranceTable};
use concord_core::op::Unary;
use concord_cuda::CudaExecutor;
use std::sync::Arc;

/// X f32[2,3,8,8] → Conv(4 filters, 3x3, pad 1) → Relu → GlobalAveragePool → Flatten →
/// Gemm(4→2) → Softmax.
fn small_cnn() -> Graph {
    let mut g = Graph {
        name: "small_cnn".into(),
        opset: 17,
        ..Graph::default()
    };
    g.inputs
        .push(ValueInfo::fixed("x", DType::F32, &[2, 3, 8, 8]));
    let w: Vec<f32> = (0..4 * 3 * 3 * 3)
        .map(|i| ((i * 7 % 11) as f32 - 5.0) / 10.0)
        .collect();
    let fc: Vec<f32> = (0..8).map(|i| (i as f32 - 3.5) / 4.0).collect();
    g.initializers
        .insert("w".into(), Tensor::from_f32([4, 3, 3, 3], w).expect("w"));
    g.initializers.insert(
        "b".into(),
        Tensor::from_f32([4], vec![0.1, -0.2, 0.3, 0.0]).expect("b"),
    );
    g.initializers
        .insert("fc".into(), Tensor::from_f32([4, 2], fc).expect("fc"));
    let conv = Conv {
        group: 1,
        pads: vec![1, 1, 1, 1],
        ..Conv::default()
    };
    g.nodes
        .push(Node::new("conv", Op::Conv(conv), &["x", "w", "b"], &["c"]));
    g.nodes
        .push(Node::new("relu", Op::Unary(Unary::Relu), &["c"], &["r"]));
    g.nodes
        .push(Node::new("gap", Op::GlobalAveragePool, &["r"], &["p"]));
    g.nodes.push(Node::new(
        "flatten",
        Op::Flatten { axis: 1 },
        &["p"],
        &["f"],
    ));
    g.nodes.push(Node::new(
        "fc",
        Op::Gemm(Gemm::default()),
        &["f", "fc"],
        &["logits"],
    ));
    g.nodes.push(Node::new(
        "softmax",
        Op::Softmax { axis: -1 },
        &["logits"],
        &["y"],
    ));
    g.outputs.push("y".into());
    g
}

fn input() -> Tensor {
    let v: Vec<f32> = (0..2 * 3 * 8 * 8)
        .map(|i| ((i * 13 % 17) as f32 - 8.0) / 8.0)
        .collect();
    Tensor::from_f32([2, 3, 8, 8], v).expect("input")
}

/// A builder for CUDA with the environment's overrides cleared (a GPU runner sets
/// CONCORD_REQUIRE=cuda, which these tests must not inherit).
fn cuda_builder(target: Target, policy: FallbackPolicy) -> NetBuilder {
    NetBuilder::from_graph(small_cnn())
        .registry(ExecutorRegistry::reference_only().with(Arc::new(CudaExecutor::new())))
        .backend(concord::backends::CUDA)
        .target(target)
        .fallback(policy)
        .overrides(Overrides::default())
}

/// How close a model's output must come to the reference: the conformance suite's `model`
/// level (conformance/tolerances.toml), on the target that ran it — the bar the suite's
/// model trials hold every executor to, and no literal here.
fn assert_within_model_level(actual: &Tensor, expected: &Tensor, target: &Target) {
    let table = ToleranceTable::builtin().expect("the shipped tolerance table parses");
    let level = table
        .level("model")
        .expect("the shipped table has a model level")
        .level;
    let spec = CudaExecutor::new()
        .targets()
        .into_iter()
        .find(|s| s.target == *target)
        .expect("the executor declares the target it ran");
    let allowed = allowance(level, &spec, expected, None).expect("a fixed level");
    let c = compare("y", actual, expected, &|i, _| {
        allowed.get(i).copied().unwrap_or(0.0)
    });
    assert!(c.passed(), "on {target}: {}", c.describe());
}

fn reference_output() -> Tensor {
    let net = NetBuilder::from_graph(small_cnn())
        .registry(ExecutorRegistry::reference_only())
        .overrides(Overrides::default())
        .build()
        .expect("the reference net builds");
    forward(&net)
}

fn forward(net: &Net) -> Tensor {
    let out = net.forward([("x", input())]).expect("forward");
    out.get("y").cloned().expect("output y")
}

#[test]
fn the_probe_never_panics_and_names_what_it_looked_for() {
    let probe = CudaExecutor::new().probe();
    match probe {
        Availability::Unavailable { cause, reason } => {
            assert!(
                matches!(
                    cause,
                    FallbackCause::LibraryMissing | FallbackCause::NoDevice
                ),
                "a CUDA probe reports LibraryMissing or NoDevice, not {cause:?}: {reason}"
            );
            if cause == FallbackCause::LibraryMissing {
                // One line naming the missing libraries; every file name tried is in the
                // probe's details (`concord info`).
                assert!(reason.contains("not found"), "{reason}");
                assert!(reason.contains("LD_LIBRARY_PATH"), "{reason}");
                assert!(!reason.contains('\n') && reason.len() <= 200, "{reason}");
                let details = CudaExecutor::new().probe_details().join("\n");
                assert!(details.contains(".so"), "{details}");
            } else {
                assert!(
                    reason.contains("cuInit")
                        || reason.contains("device")
                        || reason.contains("driver"),
                    "{reason}"
                );
            }
        }
        Availability::Available { devices } => {
            assert_eq!(devices.len(), 1, "the executor runs on one device");
            let cc = devices[0].compute_capability.clone().unwrap_or_default();
            let (major, minor) = cc.split_once('.').unwrap_or(("0", "0"));
            let at_least_53 = (
                major.parse::<u32>().unwrap_or(0),
                minor.parse::<u32>().unwrap_or(0),
            ) >= (5, 3);
            assert_eq!(
                devices[0].fp16, at_least_53,
                "fp16 follows compute capability {cc}"
            );
        }
    }
    // Probing again gives the same answer (it is cached, and a second look must not panic
    // either).
    assert_eq!(CudaExecutor::new().probe(), CudaExecutor::new().probe());
}

#[test]
fn warn_and_allow_fall_back_with_the_probe_reason_or_run_on_the_device() {
    let reference = reference_output();
    for policy in [FallbackPolicy::Warn, FallbackPolicy::Allow] {
        for target in [concord::targets::CUDA, concord::targets::CUDA_FP16] {
            let net = cuda_builder(target.clone(), policy)
                .build()
                .expect("a CUDA request builds under Warn and Allow");
            let placement = net.placement();
            let got = forward(&net);
            match CudaExecutor::new().probe() {
                Availability::Unavailable { cause, reason } => {
                    assert_eq!(placement.notices.len(), 1, "{placement}");
                    let notice = &placement.notices[0];
                    assert_eq!(notice.cause, cause);
                    assert_eq!(notice.asked, format!("cuda/{target}"));
                    assert_eq!(notice.chosen, "cpu/cpu");
                    assert!(notice.reason.contains(&reason), "{}", notice.reason);
                    assert!(
                        notice.reason.contains("libcuda")
                            || notice.reason.contains("cuInit")
                            || notice.reason.contains("device"),
                        "{}",
                        notice.reason
                    );
                    assert_eq!(notice.nodes, 6);
                    assert!(placement.nodes.iter().all(|n| n.executor == "cpu"));
                    assert!(
                        got.bit_identical(&reference),
                        "the fallback must compute exactly the reference"
                    );
                }
                Availability::Available { devices } => {
                    let fp16 = devices.iter().any(|d| d.fp16);
                    let expected_notices =
                        usize::from((target == concord::targets::CUDA_FP16) && !fp16);
                    assert_eq!(placement.notices.len(), expected_notices, "{placement}");
                    assert!(
                        placement.nodes.iter().all(|n| n.executor == "cuda"),
                        "{placement}"
                    );
                    // The fp16 target runs as cuda when the device lacks fp16.
                    let ran_as = if target == concord::targets::CUDA_FP16 && fp16 {
                        concord::targets::CUDA_FP16
                    } else {
                        concord::targets::CUDA
                    };
                    assert_within_model_level(&got, &reference, &ran_as);
                }
            }
        }
    }
}

#[test]
fn deny_refuses_with_the_reason_when_cuda_is_unavailable() {
    let result = cuda_builder(concord::targets::CUDA, FallbackPolicy::Deny).build();
    match CudaExecutor::new().probe() {
        Availability::Unavailable { reason, .. } => {
            assert!(
                matches!(&result, Err(Error::FallbackDenied { .. })),
                "Deny must refuse an unavailable CUDA, got {result:?}"
            );
            if let Err(Error::FallbackDenied { asked, reasons }) = result {
                assert_eq!(asked, "cuda/cuda");
                assert!(reasons.iter().any(|r| r.contains(&reason)), "{reasons:?}");
            }
        }
        Availability::Available { .. } => {
            let net = result.expect("with a device, Deny has nothing to refuse");
            assert!(net.placement().notices.is_empty());
        }
    }
}

#[test]
fn concurrent_forwards_of_one_net_agree_bit_for_bit() {
    let net = Arc::new(
        cuda_builder(concord::targets::CUDA, FallbackPolicy::Allow)
            .build()
            .expect("builds"),
    );
    let first = forward(&net);
    let handles: Vec<_> = (0..4)
        .map(|_| {
            let net = net.clone();
            std::thread::spawn(move || (0..5).map(|_| forward(&net)).collect::<Vec<_>>())
        })
        .collect();
    for h in handles {
        for out in h.join().expect("no thread panics") {
            assert!(out.bit_identical(&first));
        }
    }
}
