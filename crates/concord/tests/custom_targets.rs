//! Targets are open: a backend author's executor declares its own target names, and the
//! placement report, fallback notices, Deny, `CONCORD_REQUIRE` and `concord info --require`
//! all speak of them, through the one resolution function. Expected names and causes are
//! written out here, never read back from the code under test.

// A test reports a broken expectation by panicking with what it found.
#![allow(clippy::panic)]

mod common;

use common::{small_cnn, small_input, TestExecutor};
use concord::info::SystemInfo;
use concord::{
    Availability, Backend, Capability, DType, DeviceInfo, Error, ExecutorRegistry, FallbackCause,
    FallbackPolicy, Net, NetBuilder, Overrides, Target, TargetSpec,
};
use std::sync::Arc;

const DSP: Target = Target::new("toy-dsp");
const DSP_FP16: Target = Target::new("toy-dsp-fp16");

/// A "toy" DSP executor: an f32 target and an f16 one that needs fp16, on a device without
/// fp16; it runs the listed ops (with the reference kernels).
fn toy(ops: &[&'static str]) -> TestExecutor {
    TestExecutor {
        name: "toy".into(),
        availability: Availability::Available {
            devices: vec![DeviceInfo {
                name: "toy dsp 0".into(),
                fp16: false,
                ..DeviceInfo::default()
            }],
        },
        targets: vec![
            TargetSpec::new(DSP, DType::F32, DType::F32),
            TargetSpec::new(DSP_FP16, DType::F16, DType::F32).needing(Capability::Fp16, Some(DSP)),
        ],
        ops: ops.to_vec(),
    }
}

const ALL_OPS: &[&str] = &["Conv", "Relu", "GlobalAveragePool", "Flatten", "Gemm"];

fn registry(executor: TestExecutor) -> ExecutorRegistry {
    ExecutorRegistry::reference_only().with(Arc::new(executor))
}

fn build(
    executor: TestExecutor,
    target: Option<Target>,
    policy: FallbackPolicy,
    require: &[&str],
) -> Result<Net, Error> {
    let mut builder = NetBuilder::from_graph(small_cnn())
        .registry(registry(executor))
        .backend("toy")
        .fallback(policy)
        .overrides(Overrides {
            fallback: None,
            require: require.iter().map(|s| s.to_string()).collect(),
        });
    if let Some(t) = target {
        builder = builder.target(t);
    }
    builder.build()
}

fn reference() -> Net {
    NetBuilder::from_graph(small_cnn())
        .registry(ExecutorRegistry::reference_only())
        .overrides(Overrides::default())
        .build()
        .expect("the reference builds")
}

fn output(net: &Net) -> concord::Tensor {
    net.forward([("x", small_input())])
        .expect("forward")
        .into_iter()
        .next()
        .map(|(_, t)| t)
        .expect("one output")
}

#[test]
fn the_placement_report_names_the_declared_target() {
    let net = build(toy(ALL_OPS), None, FallbackPolicy::Deny, &[]).expect("toy runs it all");
    let placement = net.placement();
    assert_eq!(placement.requested_backend, Backend::new("toy"));
    assert_eq!(
        placement.requested_target, DSP,
        "the first declared target is the default"
    );
    assert_eq!(placement.resolved_target, DSP);
    assert!(placement.notices.is_empty(), "{placement}");
    for node in &placement.nodes {
        assert_eq!(
            (node.executor.as_str(), node.target.name()),
            ("toy", "toy-dsp")
        );
    }
    let text = placement.to_string();
    assert!(
        text.contains("requested toy/toy-dsp -> resolved toy/toy-dsp"),
        "{text}"
    );
    assert!(text.contains("#0 toy/toy-dsp: 5 nodes"), "{text}");
    // A partition on a target other than the reference's crosses host memory.
    assert!(
        placement.transfers.iter().any(|t| t.to == "toy:toy-dsp"),
        "{text}"
    );
    let json = serde_json::to_value(placement).expect("json");
    assert_eq!(json["requested_target"], "toy-dsp");
    assert_eq!(json["nodes"][0]["target"], "toy-dsp");
    assert!(output(&net).bit_identical(&output(&reference())));
}

#[test]
fn a_missing_capability_falls_back_to_the_declared_f32_target() {
    let net =
        build(toy(ALL_OPS), Some(DSP_FP16), FallbackPolicy::Allow, &[]).expect("Allow falls back");
    let placement = net.placement();
    assert_eq!(placement.notices.len(), 1, "{placement}");
    let notice = &placement.notices[0];
    assert_eq!(notice.cause, FallbackCause::Fp16Unsupported);
    assert_eq!(notice.asked, "toy/toy-dsp-fp16");
    assert_eq!(notice.chosen, "toy/toy-dsp");
    assert_eq!(
        notice.reason,
        "no toy device supports fp16 (toy dsp 0): running toy-dsp instead"
    );
    assert_eq!(notice.nodes, 5);
    assert_eq!(placement.requested_target, DSP_FP16);
    assert!(
        placement.nodes.iter().all(|n| n.target == DSP),
        "{placement}"
    );
}

#[test]
fn an_unsupported_node_falls_back_to_cpu_naming_the_target() {
    let net = build(
        toy(&["Conv", "Relu"]),
        Some(DSP),
        FallbackPolicy::Allow,
        &[],
    )
    .expect("Allow falls back");
    let placement = net.placement();
    let unsupported: Vec<_> = placement
        .notices
        .iter()
        .filter(|n| n.cause == FallbackCause::NodeUnsupported)
        .collect();
    assert_eq!(unsupported.len(), 3, "{placement}");
    for n in &unsupported {
        assert_eq!(n.asked, "toy/toy-dsp");
        assert_eq!(n.chosen, "cpu/cpu");
        assert!(
            n.reason.starts_with("toy does not support "),
            "{}",
            n.reason
        );
        assert!(n.reason.contains(" on toy-dsp: no "), "{}", n.reason);
    }
    let conv = &placement.nodes[0];
    assert_eq!(
        (conv.executor.as_str(), conv.target.name()),
        ("toy", "toy-dsp")
    );
    let gemm = &placement.nodes[4];
    assert_eq!((gemm.executor.as_str(), gemm.target.name()), ("cpu", "cpu"));
    assert!(output(&net).bit_identical(&output(&reference())));
}

#[test]
fn deny_refuses_naming_the_target() {
    match build(toy(ALL_OPS), Some(DSP_FP16), FallbackPolicy::Deny, &[]) {
        Err(Error::FallbackDenied { asked, reasons }) => {
            assert_eq!(asked, "toy/toy-dsp-fp16");
            assert_eq!(reasons.len(), 1, "{reasons:?}");
            assert!(
                reasons[0].contains("running toy-dsp instead"),
                "{reasons:?}"
            );
        }
        other => panic!("expected FallbackDenied, got {other:?}"),
    }
    let undeclared = build(
        toy(ALL_OPS),
        Some(Target::new("cuda")),
        FallbackPolicy::Deny,
        &[],
    );
    match undeclared {
        Err(Error::FallbackDenied { asked, reasons }) => {
            assert_eq!(asked, "toy/cuda");
            assert!(
                reasons[0].contains("target cuda is not valid for backend toy")
                    && reasons[0].contains("(valid: toy-dsp, toy-dsp-fp16)"),
                "{reasons:?}"
            );
        }
        other => panic!("expected FallbackDenied, got {other:?}"),
    }
}

#[test]
fn concord_require_accepts_and_enforces_the_executors_names() {
    // Naming the executor: accepted, and a node moved to the reference violates it.
    match build(
        toy(&["Conv", "Relu"]),
        None,
        FallbackPolicy::Allow,
        &["toy"],
    ) {
        Err(Error::Required {
            requirement,
            reasons,
        }) => {
            assert_eq!(requirement, "toy");
            assert!(
                reasons.iter().any(|r| r.contains("on toy-dsp")),
                "{reasons:?}"
            );
        }
        other => panic!("expected Required, got {other:?}"),
    }
    // Naming a declared target: accepted, and enforced when that target is asked for.
    match build(
        toy(ALL_OPS),
        Some(DSP_FP16),
        FallbackPolicy::Allow,
        &["Toy-DSP-fp16"],
    ) {
        Err(Error::Required { requirement, .. }) => assert_eq!(requirement, "toy-dsp-fp16"),
        other => panic!("expected Required, got {other:?}"),
    }
    // Met requirements (and one for a backend not asked for) let the net build.
    let met = build(
        toy(ALL_OPS),
        Some(DSP),
        FallbackPolicy::Deny,
        &["toy,toy-dsp", "cuda"],
    );
    assert!(met.is_ok(), "{met:?}");
    // An unknown name is an error that lists the names the registry knows.
    match build(toy(ALL_OPS), None, FallbackPolicy::Allow, &["toy,vulkan"]) {
        Err(Error::UnknownRequirement { entry, known, .. }) => {
            assert_eq!(entry, "vulkan");
            for name in [
                "cpu",
                "toy",
                "toy-dsp",
                "toy-dsp-fp16",
                "opencl",
                "cuda-fp16",
            ] {
                assert!(
                    known.iter().any(|k| k == name),
                    "{name} missing from {known:?}"
                );
            }
        }
        other => panic!("expected UnknownRequirement, got {other:?}"),
    }
    // Without the toy executor registered, `toy` names nothing.
    let without_toy = NetBuilder::from_graph(small_cnn())
        .registry(ExecutorRegistry::reference_only())
        .overrides(Overrides {
            fallback: None,
            require: vec!["toy".into()],
        })
        .build();
    assert!(
        matches!(&without_toy, Err(Error::UnknownRequirement { entry, .. }) if entry == "toy"),
        "{without_toy:?}"
    );
    // A typo is answered with the closest known name.
    match build(toy(ALL_OPS), None, FallbackPolicy::Allow, &["toy-dps"]) {
        Err(Error::UnknownRequirement { suggestion, .. }) => {
            assert_eq!(suggestion.as_deref(), Some("toy-dsp"));
        }
        other => panic!("expected UnknownRequirement, got {other:?}"),
    }
}

#[test]
fn info_require_resolves_the_executors_targets() {
    let info = SystemInfo::probe(&registry(toy(ALL_OPS)));
    let toy_info = info
        .backends
        .iter()
        .find(|b| b.name == "toy")
        .expect("the registered executor is listed");
    let names: Vec<&str> = toy_info.targets.iter().map(|s| s.target.name()).collect();
    assert_eq!(names, ["toy-dsp", "toy-dsp-fp16"]);
    assert_eq!(info.check_requirement("toy"), Ok(()));
    assert_eq!(info.check_requirement("toy:toy-dsp"), Ok(()));
    assert_eq!(info.check_requirement("toy-dsp"), Ok(()));
    assert_eq!(
        info.check_requirement("toy:toy-dsp-fp16"),
        Err("no toy device supports fp16 (toy dsp 0): running toy-dsp instead".to_string())
    );
    assert_eq!(
        info.check_requirement("toy-dsp-fp16"),
        info.check_requirement("toy:toy-dsp-fp16"),
        "a bare target name means the backend declaring it"
    );
    let invalid = info
        .check_requirement("toy:cuda")
        .expect_err("cuda is not toy's");
    assert!(invalid.contains("not valid for backend toy"), "{invalid}");
}

/// `concord info`'s text says which declared target each device can run: a target that
/// needs fp16 is never listed bare beside "fp16 no".
#[test]
fn info_text_says_which_targets_each_device_runs() {
    let text = SystemInfo::probe(&registry(toy(ALL_OPS))).to_string();
    assert!(
        text.contains(
            "toy: available, targets toy-dsp, toy-dsp-fp16 (not usable here: no device has \
             fp16; asking for it runs toy-dsp)\n"
        ),
        "{text}"
    );
    assert!(
        text.contains("  device `toy dsp 0`, fp16 no, runs toy-dsp\n"),
        "{text}"
    );
    // A device with fp16 runs both; the backend line then lists them plainly.
    let mut with_fp16 = toy(ALL_OPS);
    with_fp16.availability = Availability::Available {
        devices: vec![
            DeviceInfo {
                name: "toy dsp 0".into(),
                fp16: false,
                ..DeviceInfo::default()
            },
            DeviceInfo {
                name: "toy dsp 1".into(),
                fp16: true,
                ..DeviceInfo::default()
            },
        ],
    };
    let text = SystemInfo::probe(&registry(with_fp16)).to_string();
    assert!(
        text.contains("toy: available, targets toy-dsp, toy-dsp-fp16\n"),
        "{text}"
    );
    assert!(
        text.contains("  device `toy dsp 0`, fp16 no, runs toy-dsp\n"),
        "{text}"
    );
    assert!(
        text.contains("  device `toy dsp 1`, fp16 yes, runs toy-dsp, toy-dsp-fp16\n"),
        "{text}"
    );
}

#[test]
fn the_built_in_targets_keep_their_names() {
    use concord::targets;
    let builtin = targets::BUILTIN;
    let names: Vec<&str> = builtin.iter().map(Target::name).collect();
    assert_eq!(names, ["cpu", "opencl", "opencl-fp16", "cuda", "cuda-fp16"]);
    let registry = ExecutorRegistry::with_builtins();
    assert_eq!(
        registry.target_named("OpenCL-FP16"),
        Some(targets::OPENCL_FP16)
    );
    assert_eq!(
        concord::canonical_backend("ocl"),
        concord::backends::OPENCL,
        "ocl stays an alias"
    );
    let cpu = concord::CpuExecutor::new();
    let declared = concord::Executor::targets(&cpu);
    assert_eq!(declared.len(), 1);
    assert_eq!(declared[0].target, targets::CPU);
    assert_eq!(declared[0].needs, Capability::None);
}
