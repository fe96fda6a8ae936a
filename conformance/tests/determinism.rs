//! An executor that cannot promise bit-identical results declares so: the suite then holds
//! its concurrency outputs to the tolerance instead of bit-identity, and the report says
//! so. The same jitter from an executor that claims determinism fails.

// A test reports a broken expectation by panicking with what it found.
#![allow(clippy::panic)]

use concord::executor::{Error, Node};
use concord::{
    Availability, CpuExecutor, DeviceInfo, Executor, Graph, PreparedPartition, ProfileSink,
    Support, Target, TargetSpec, Tensor,
};
use concord_conformance::{Suite, SuiteConfig, Verdict};
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;

/// Runs on the reference, then nudges the first output by one ulp on every other call, as
/// a scheduling-dependent reduction order would.
#[derive(Debug)]
struct Jittery {
    name: &'static str,
    declares_deterministic: bool,
}

#[derive(Debug)]
struct JitteryPartition {
    inner: Box<dyn PreparedPartition>,
    calls: AtomicU32,
    name: &'static str,
}

impl Executor for Jittery {
    fn name(&self) -> &str {
        self.name
    }
    fn probe(&self) -> Availability {
        Availability::Available {
            devices: vec![DeviceInfo {
                name: "jitter".into(),
                ..DeviceInfo::default()
            }],
        }
    }
    fn targets(&self) -> Vec<TargetSpec> {
        // It wraps the reference, so it declares the reference's target.
        CpuExecutor::new().targets()
    }
    fn supports(&self, graph: &Graph, node: &Node, target: &Target) -> Support {
        CpuExecutor::new().supports(graph, node, target)
    }
    fn deterministic(&self) -> bool {
        self.declares_deterministic
    }
    fn prepare(
        &self,
        partition: &Graph,
        target: &Target,
    ) -> Result<Box<dyn PreparedPartition>, Error> {
        Ok(Box::new(JitteryPartition {
            inner: CpuExecutor::new().prepare(partition, target)?,
            calls: AtomicU32::new(0),
            name: self.name,
        }))
    }
}

struct Attribute<'a>(&'a dyn ProfileSink, &'a str);

impl ProfileSink for Attribute<'_> {
    fn record(&self, node: &str, elapsed: std::time::Duration) {
        self.0.record_on(node, self.1, elapsed);
    }
    fn record_on(&self, node: &str, _: &str, elapsed: std::time::Duration) {
        self.0.record_on(node, self.1, elapsed);
    }
    fn record_transfer(&self, value: &str, bytes: u64, elapsed: std::time::Duration) {
        self.0.record_transfer(value, bytes, elapsed);
    }
}

impl PreparedPartition for JitteryPartition {
    fn run(
        &self,
        inputs: &BTreeMap<String, Tensor>,
        profile: Option<&dyn ProfileSink>,
    ) -> Result<Vec<Tensor>, Error> {
        let sink = profile.map(|p| Attribute(p, self.name));
        let mut out = self
            .inner
            .run(inputs, sink.as_ref().map(|s| s as &dyn ProfileSink))?;
        if self.calls.fetch_add(1, Ordering::Relaxed) % 2 == 1 {
            if let Some(first) = out.first_mut() {
                if let Some(v) = first.as_f32() {
                    let nudged: Vec<f32> =
                        v.iter().map(|x| f32::from_bits(x.to_bits() ^ 1)).collect();
                    *first = Tensor::from_f32(first.shape().clone(), nudged)?;
                }
            }
        }
        Ok(out)
    }
}

fn shared_net_verdict(executor: Jittery) -> (Verdict, Vec<String>) {
    let suite =
        Suite::new(Arc::new(executor), SuiteConfig::from_env()).unwrap_or_else(|e| panic!("{e}"));
    let case = suite
        .cases()
        .into_iter()
        .find(|c| c.name.ends_with("/concurrency/shared_net"))
        .unwrap_or_else(|| panic!("no shared_net trial"));
    let record = suite.run_case(&case);
    (record.verdict, record.notices)
}

#[test]
fn declared_non_determinism_is_held_to_tolerance_and_reported() {
    let (verdict, notices) = shared_net_verdict(Jittery {
        name: "jitter-declared",
        declares_deterministic: false,
    });
    assert_eq!(verdict, Verdict::Pass, "{notices:?}");
    assert!(
        notices.iter().any(|n| n.contains("non-deterministic")),
        "{notices:?}"
    );
}

#[test]
fn undeclared_non_determinism_fails() {
    let (verdict, _) = shared_net_verdict(Jittery {
        name: "jitter-claims-determinism",
        declares_deterministic: true,
    });
    assert!(
        verdict.fails_run(),
        "one-ulp jitter from an executor claiming determinism must fail: {verdict:?}"
    );
}
