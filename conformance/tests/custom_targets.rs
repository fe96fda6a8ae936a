//! The suite speaks of an executor's own targets: trial names are `<executor>/<target>/…`
//! for each target the executor declares, a target whose capability the device lacks is a
//! visible "unavailable" trial with the resolution's reason, and the tolerance model takes
//! the unit roundoff from the declared storage precision.

// A test reports a broken expectation by panicking with what it found.
#![allow(clippy::panic)]

use concord::executor::{Error, Node};
use concord::{
    Availability, Capability, CpuExecutor, DType, DeviceInfo, Executor, Graph, PreparedPartition,
    Support, Target, TargetSpec,
};
use concord_conformance::{Suite, SuiteConfig, Verdict};
use std::sync::Arc;

const DSP: Target = Target::new("toy-dsp");
const DSP_FP16: Target = Target::new("toy-dsp-fp16");

/// A DSP-like executor with an f32 target and an fp16 one, on a device without fp16. It
/// runs Relu (with the reference kernel) and declines everything else.
#[derive(Debug)]
struct Dsp;

impl Executor for Dsp {
    fn name(&self) -> &str {
        "toy"
    }
    fn probe(&self) -> Availability {
        Availability::Available {
            devices: vec![DeviceInfo {
                name: "toy dsp 0".into(),
                fp16: false,
                ..DeviceInfo::default()
            }],
        }
    }
    fn targets(&self) -> Vec<TargetSpec> {
        vec![
            TargetSpec::new(DSP, DType::F32, DType::F32),
            TargetSpec::new(DSP_FP16, DType::F16, DType::F32).needing(Capability::Fp16, Some(DSP)),
        ]
    }
    fn supports(&self, _graph: &Graph, node: &Node, _target: &Target) -> Support {
        if node.op.name() == "Relu" {
            Support::Yes
        } else {
            Support::No(format!("toy dsp has no {} kernel", node.op.name()))
        }
    }
    fn prepare(
        &self,
        partition: &Graph,
        _target: &Target,
    ) -> Result<Box<dyn PreparedPartition>, Error> {
        CpuExecutor::new().prepare(partition, &concord::targets::CPU)
    }
}

fn suite() -> Suite {
    Suite::new(Arc::new(Dsp), SuiteConfig::from_env()).unwrap_or_else(|e| panic!("{e}"))
}

#[test]
fn trial_names_use_the_declared_targets() {
    let suite = suite();
    let cases = suite.cases();
    assert!(!cases.is_empty());
    for case in &cases {
        let expected_prefix = format!("toy/{}/", case.target);
        assert!(
            case.name.starts_with(&expected_prefix),
            "{} does not start with {expected_prefix}",
            case.name
        );
        assert!(
            case.target == DSP || case.target == DSP_FP16,
            "{}",
            case.target
        );
    }
    let relu = cases
        .iter()
        .find(|c| c.name.starts_with("toy/toy-dsp/op/Relu/") && c.skip.is_none())
        .unwrap_or_else(|| panic!("no runnable Relu trial on toy-dsp"));
    let record = suite.run_case(relu);
    assert_eq!(record.verdict, Verdict::Pass, "{:?}", record);
    assert_eq!(record.target, "toy-dsp");
    assert_eq!(record.executor, "toy");
}

#[test]
fn a_target_the_device_cannot_run_is_one_visible_unavailable_trial() {
    let suite = suite();
    let fp16: Vec<_> = suite
        .cases()
        .into_iter()
        .filter(|c| c.target == DSP_FP16)
        .collect();
    assert_eq!(
        fp16.len(),
        1,
        "{:?}",
        fp16.iter().map(|c| &c.name).collect::<Vec<_>>()
    );
    assert_eq!(fp16[0].name, "toy/toy-dsp-fp16/unavailable/probe");
    assert_eq!(
        suite.target_unavailable(&DSP_FP16).as_deref(),
        Some(
            "unsupported: no toy device supports fp16 (toy dsp 0): running toy-dsp instead \
             (target toy-dsp-fp16)"
        )
    );
    assert_eq!(suite.target_unavailable(&DSP), None);
    // Locally (no CONCORD_REQUIRE naming it) the unavailable trial is a skip with that
    // reason; CI alone does not fail it, since fp16 is a capability, not an installation.
    if std::env::var_os("CONCORD_REQUIRE").is_none() {
        match suite.run_case(&fp16[0]).verdict {
            Verdict::Skip { reason } => assert!(reason.contains("supports fp16"), "{reason}"),
            other => panic!("expected a skip, got {other:?}"),
        }
    }
}

#[test]
fn the_tolerance_model_uses_the_declared_storage_precision() {
    let suite = suite();
    assert_eq!(suite.spec(&DSP).unit_roundoff(), 2f64.powi(-24));
    assert_eq!(suite.spec(&DSP_FP16).unit_roundoff(), 2f64.powi(-11));
    assert!(suite.stores_f16(&DSP_FP16) && !suite.stores_f16(&DSP));
}
