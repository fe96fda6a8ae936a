//! Every cause of fallback under every policy: the output still equals the reference, Warn
//! says so exactly once, Deny refuses with the reason, Allow is quiet but recorded.

// A test reports a broken expectation by panicking with what it found.
#![allow(clippy::panic)]

mod common;

use common::{count_warnings, small_cnn, small_input, test_executor, TestExecutor};
use concord::{
    Backend, Error, ExecutorRegistry, FallbackCause, FallbackPolicy, Net, NetBuilder, Overrides,
    Tensor,
};

/// One way a request can fail to be met.
struct Scenario {
    name: &'static str,
    cause: FallbackCause,
    /// Words the reason must contain, so a wrong reason fails the test.
    reason_contains: &'static str,
    /// The executor the conv node must end up on.
    conv_executor: &'static str,
    configure: fn(NetBuilder) -> NetBuilder,
}

fn scenarios() -> Vec<Scenario> {
    vec![
        Scenario {
            name: "backend feature off",
            cause: FallbackCause::NotCompiled,
            reason_contains: "opencl",
            conv_executor: "cpu",
            configure: |b| {
                b.registry(ExecutorRegistry::reference_only())
                    .backend(concord::backends::OPENCL)
            },
        },
        Scenario {
            name: "library missing",
            cause: FallbackCause::LibraryMissing,
            reason_contains: "libfakecl.so",
            conv_executor: "cpu",
            configure: |b| {
                b.executor(test_executor(TestExecutor::unavailable(
                    "fakecl",
                    FallbackCause::LibraryMissing,
                    "libfakecl.so not found (looked in /nowhere)",
                )))
                .backend(Backend::named("fakecl"))
            },
        },
        Scenario {
            name: "no platform or device",
            cause: FallbackCause::NoDevice,
            reason_contains: "no platform",
            conv_executor: "cpu",
            configure: |b| {
                b.executor(test_executor(TestExecutor::unavailable(
                    "fakecl",
                    FallbackCause::NoDevice,
                    "no platform found",
                )))
                .backend(Backend::named("fakecl"))
            },
        },
        Scenario {
            name: "target invalid for backend",
            cause: FallbackCause::InvalidTarget,
            reason_contains: "not valid for backend cpu",
            conv_executor: "cpu",
            configure: |b| {
                b.backend(concord::backends::CPU)
                    .target(concord::targets::CUDA)
            },
        },
        Scenario {
            name: "fp16 unsupported",
            cause: FallbackCause::Fp16Unsupported,
            reason_contains: "fp16",
            conv_executor: "halfless",
            configure: |b| {
                b.executor(test_executor(TestExecutor::device(
                    "halfless",
                    false,
                    &["Conv", "Relu", "GlobalAveragePool", "Flatten", "Gemm"],
                )))
                .backend(Backend::named("halfless"))
                .target(concord::targets::OPENCL_FP16)
            },
        },
        Scenario {
            name: "node unsupported",
            cause: FallbackCause::NodeUnsupported,
            reason_contains: "no GlobalAveragePool kernel",
            conv_executor: "partial",
            configure: |b| {
                b.executor(test_executor(TestExecutor::device(
                    "partial",
                    true,
                    &["Conv", "Relu"],
                )))
                .backend(Backend::named("partial"))
                .target(concord::targets::OPENCL)
            },
        },
    ]
}

fn reference_output() -> Tensor {
    let net = Net::from_graph(small_cnn()).expect("reference net builds");
    let out = net
        .forward([("x", small_input())])
        .expect("reference forward");
    out.get("y").cloned().expect("output y")
}

fn build(s: &Scenario, policy: FallbackPolicy) -> Result<Net, Error> {
    (s.configure)(NetBuilder::from_graph(small_cnn()))
        .fallback(policy)
        .overrides(Overrides::default())
        .build()
}

#[test]
fn warn_says_so_exactly_once_and_still_computes_the_reference() {
    let expected = reference_output();
    for s in scenarios() {
        let (net, warnings) = count_warnings(|| build(&s, FallbackPolicy::Warn));
        let net = net.unwrap_or_else(|e| panic!("{}: build failed under Warn: {e}", s.name));
        assert_eq!(
            warnings.warnings(),
            1,
            "{}: expected exactly one warning",
            s.name
        );
        let message = &warnings.messages()[0];
        assert!(
            message.contains(s.reason_contains),
            "{}: warning `{message}` lacks `{}`",
            s.name,
            s.reason_contains
        );
        let placement = net.placement();
        assert!(
            placement.notices.iter().any(|n| n.cause == s.cause),
            "{}: no {:?} notice in {placement}",
            s.name,
            s.cause
        );
        let conv = placement
            .nodes
            .iter()
            .find(|n| n.name == "conv")
            .expect("conv placed");
        assert_eq!(conv.executor, s.conv_executor, "{}", s.name);
        let y = net.forward([("x", small_input())]).expect("forward");
        assert!(
            y.get("y").expect("y").bit_identical(&expected),
            "{}: output differs from the reference",
            s.name
        );
    }
}

#[test]
fn deny_refuses_with_every_reason() {
    for s in scenarios() {
        let (result, warnings) = count_warnings(|| build(&s, FallbackPolicy::Deny));
        match result {
            Err(Error::FallbackDenied { reasons, .. }) => {
                assert!(
                    reasons.iter().any(|r| r.contains(s.reason_contains)),
                    "{}: reasons {reasons:?} lack `{}`",
                    s.name,
                    s.reason_contains
                );
            }
            Err(other) => panic!("{}: expected FallbackDenied, got {other}", s.name),
            Ok(_) => panic!("{}: Deny built a net that falls back", s.name),
        }
        assert_eq!(
            warnings.warnings(),
            0,
            "{}: Deny must not also warn",
            s.name
        );
    }
}

#[test]
fn allow_is_quiet_but_recorded() {
    let expected = reference_output();
    for s in scenarios() {
        let (net, warnings) = count_warnings(|| build(&s, FallbackPolicy::Allow));
        let net = net.unwrap_or_else(|e| panic!("{}: build failed under Allow: {e}", s.name));
        assert_eq!(warnings.warnings(), 0, "{}: Allow must be quiet", s.name);
        assert!(
            net.placement().notices.iter().any(|n| n.cause == s.cause),
            "{}",
            s.name
        );
        let y = net.forward([("x", small_input())]).expect("forward");
        assert!(
            y.get("y").expect("y").bit_identical(&expected),
            "{}",
            s.name
        );
    }
}

#[test]
fn no_fallback_means_no_notice_and_deny_builds() {
    let (net, warnings) = count_warnings(|| {
        NetBuilder::from_graph(small_cnn())
            .fallback(FallbackPolicy::Deny)
            .overrides(Overrides::default())
            .build()
    });
    let net = net.expect("cpu under Deny builds");
    assert_eq!(warnings.warnings(), 0);
    assert!(net.placement().notices.is_empty());
    assert_eq!(net.placement().partitions.len(), 1);
    assert_eq!(net.placement().transfer_count(), 0);
}

#[test]
fn partial_support_cuts_partitions_and_counts_transfers() {
    let s = scenarios()
        .into_iter()
        .find(|s| s.name == "node unsupported")
        .expect("scenario");
    let net = build(&s, FallbackPolicy::Allow).expect("builds");
    let p = net.placement();
    let on: Vec<(&str, &str)> = p
        .nodes
        .iter()
        .map(|n| (n.name.as_str(), n.executor.as_str()))
        .collect();
    assert_eq!(
        on,
        vec![
            ("conv", "partial"),
            ("relu", "partial"),
            ("gap", "cpu"),
            ("flatten", "cpu"),
            ("fc", "cpu")
        ]
    );
    assert_eq!(p.partitions.len(), 2);
    // x (1·3·8·8 f32) goes up, r (1·4·8·8 f32) comes back.
    assert_eq!(p.transfer_count(), 2);
    assert_eq!(p.transfer_bytes(), (3 * 64 + 4 * 64) * 4);
    insta::assert_snapshot!("placement_partial", p.to_string());
    insta::assert_snapshot!("warning_partial", p.fallback_summary().unwrap_or_default());
    let json = serde_json::to_value(p).expect("placement serialises");
    assert_eq!(json["partitions"].as_array().map(|a| a.len()), Some(2));
    assert_eq!(json["requested_target"], "opencl");
}

#[test]
fn environment_overrides_win() {
    // CONCORD_FALLBACK=deny turns a Warn build into a refusal.
    let s = scenarios().into_iter().next().expect("scenario");
    let strict = Overrides {
        fallback: Some(FallbackPolicy::Deny),
        require: Vec::new(),
    };
    let result = (s.configure)(NetBuilder::from_graph(small_cnn()))
        .overrides(strict)
        .build();
    assert!(matches!(result, Err(Error::FallbackDenied { .. })));

    // CONCORD_REQUIRE=opencl refuses even under Allow.
    let require = Overrides {
        fallback: None,
        require: vec!["opencl".into()],
    };
    let result = (s.configure)(NetBuilder::from_graph(small_cnn()))
        .fallback(FallbackPolicy::Allow)
        .overrides(require)
        .build();
    match result {
        Err(Error::Required {
            requirement,
            reasons,
        }) => {
            assert_eq!(requirement, "opencl");
            assert!(reasons.iter().any(|r| r.contains("opencl")), "{reasons:?}");
        }
        other => panic!("expected Required, got {other:?}"),
    }

    // A requirement for a backend that was not asked for does not apply.
    let require_cuda = Overrides {
        fallback: None,
        require: vec!["cuda".into()],
    };
    let ok = NetBuilder::from_graph(small_cnn())
        .overrides(require_cuda)
        .build();
    assert!(ok.is_ok());
}

#[test]
fn environment_values_are_parsed_strictly() {
    assert_eq!(concord::parse_policy("Deny"), Some(FallbackPolicy::Deny));
    assert_eq!(concord::parse_policy("strict"), None);
    let builtins = ExecutorRegistry::with_builtins();
    let names = |list: &str| {
        concord::parse_require(list, &builtins)
            .map(|r| r.into_iter().map(|r| r.name).collect::<Vec<_>>())
            .map_err(|e| e.to_string())
    };
    assert_eq!(
        names("cuda, OpenCL-fp16"),
        Ok(vec!["cuda".to_string(), "opencl-fp16".to_string()])
    );
    let unknown = names("cuda,vulkan").expect_err("vulkan is no backend or target");
    assert!(
        unknown.contains("`vulkan`") && unknown.contains("known: cpu"),
        "{unknown}"
    );
}

#[test]
fn a_backend_or_target_nobody_has_is_a_usage_error_under_every_policy() {
    use concord::Target;
    for policy in [
        FallbackPolicy::Allow,
        FallbackPolicy::Warn,
        FallbackPolicy::Deny,
    ] {
        let typo = NetBuilder::from_graph(small_cnn())
            .backend(Backend::named("cdua"))
            .fallback(policy)
            .overrides(Overrides::default())
            .build()
            .map(|_| ())
            .expect_err("a backend nobody registered is refused");
        assert!(
            matches!(&typo, Error::UnknownBackend { name, suggestion: Some(s), .. }
                if name == "cdua" && s == "cuda"),
            "{typo}"
        );
        assert!(typo.to_string().contains("did you mean `cuda`?"), "{typo}");
        let target = NetBuilder::from_graph(small_cnn())
            .target(Target::named("opencl-fp61"))
            .fallback(policy)
            .overrides(Overrides::default())
            .build()
            .map(|_| ())
            .expect_err("a target nobody declares is refused");
        assert!(
            target.to_string().contains("`opencl-fp61`")
                && target.to_string().contains("did you mean `opencl-fp16`?"),
            "{target}"
        );
    }
    // A target that exists but belongs to another backend still falls back, said so.
    let net = NetBuilder::from_graph(small_cnn())
        .target(Target::named("opencl"))
        .fallback(FallbackPolicy::Allow)
        .overrides(Overrides::default())
        .build()
        .expect("a known target of another backend falls back");
    assert!(net
        .placement()
        .notices
        .iter()
        .any(|n| n.cause == FallbackCause::InvalidTarget));
}

/// An executor that runs its fp16 target as asked but has something to say about it (as
/// concord-opencl does on a device without half arithmetic).
#[derive(Debug)]
struct Noted(TestExecutor);

impl concord::Executor for Noted {
    fn name(&self) -> &str {
        self.0.name()
    }
    fn probe(&self) -> concord::Availability {
        self.0.probe()
    }
    fn targets(&self) -> Vec<concord::TargetSpec> {
        self.0.targets()
    }
    fn notes(&self, target: &concord::Target) -> Vec<String> {
        if *target == concord::targets::OPENCL_FP16 {
            vec!["stores f16 but computes in f32: slower than f32".into()]
        } else {
            Vec::new()
        }
    }
    fn supports(
        &self,
        graph: &concord::Graph,
        node: &concord::Node,
        target: &concord::Target,
    ) -> concord::Support {
        self.0.supports(graph, node, target)
    }
    fn prepare(
        &self,
        partition: &concord::Graph,
        target: &concord::Target,
    ) -> Result<Box<dyn concord::PreparedPartition>, concord::executor::Error> {
        self.0.prepare(partition, target)
    }
}

#[test]
fn a_note_is_recorded_and_said_but_is_no_fallback() {
    let noted = || {
        std::sync::Arc::new(Noted(TestExecutor::device(
            "noted",
            true,
            &["Conv", "Relu", "GlobalAveragePool", "Flatten", "Gemm"],
        ))) as std::sync::Arc<dyn concord::Executor>
    };
    let build = |policy, target: concord::Target, require: Vec<String>| {
        NetBuilder::from_graph(small_cnn())
            .executor(noted())
            .backend(Backend::named("noted"))
            .target(target)
            .fallback(policy)
            .overrides(Overrides {
                require,
                ..Overrides::default()
            })
            .build()
    };
    let fp16 = concord::targets::OPENCL_FP16;
    let (net, warn) = count_warnings(|| build(FallbackPolicy::Warn, fp16.clone(), Vec::new()));
    let net = net.expect("a note does not stop a build");
    let placement = net.placement();
    assert!(!placement.has_fallback(), "{placement}");
    assert_eq!(placement.notes.len(), 1, "{placement}");
    assert_eq!(placement.notes[0].on, "noted/opencl-fp16");
    assert!(placement
        .to_string()
        .contains("note: noted/opencl-fp16: stores f16"));
    assert_eq!(warn.warnings(), 1, "{:?}", warn.messages());
    assert!(
        warn.messages()[0].contains("slower than f32"),
        "{:?}",
        warn.messages()
    );

    // Deny and a requirement on the target let it through, and Deny still says it.
    let (denied, deny_warn) = count_warnings(|| {
        build(
            FallbackPolicy::Deny,
            fp16.clone(),
            vec!["opencl-fp16".into()],
        )
    });
    assert_eq!(denied.expect("Deny builds").placement().notes.len(), 1);
    assert_eq!(deny_warn.warnings(), 1, "{:?}", deny_warn.messages());

    // Allow records it quietly; the f32 target has nothing to say.
    let (allowed, allow_warn) =
        count_warnings(|| build(FallbackPolicy::Allow, fp16.clone(), Vec::new()));
    assert_eq!(allowed.expect("Allow builds").placement().notes.len(), 1);
    assert_eq!(allow_warn.warnings(), 0, "{:?}", allow_warn.messages());
    let f32_net =
        build(FallbackPolicy::Warn, concord::targets::OPENCL, Vec::new()).expect("f32 builds");
    assert!(f32_net.placement().notes.is_empty());
}
