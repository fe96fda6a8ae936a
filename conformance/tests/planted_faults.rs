//! Proves the suite can fail: each planted-fault executor wraps the real reference executor
//! with exactly one bug that real backends have shipped, and a named case of the suite must
//! catch it. The same cases must pass on the wrapper without the bug (so a catch is the
//! bug's doing, not a broken case). Prints the mutation score and fails below 100%.

// A test reports a broken expectation by panicking with what it found.
#![allow(clippy::panic)]

use concord::executor::{Error, Node, Op};
use concord::op::Binary;
use concord::op::{Conv, Gemm};
use concord::{
    Availability, CpuExecutor, DeviceInfo, Executor, Graph, PreparedPartition, ProfileSink,
    Support, Target, TargetSpec, Tensor,
};
use concord_conformance::expectations::Expectations;
use concord_conformance::{Suite, SuiteConfig};
use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

/// One bug per planted executor.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Fault {
    /// No bug: the control.
    None,
    /// A prepared-plan cache shared process-wide and keyed by op name only.
    CacheKeyedByOpName,
    /// Claims the nodes, then runs them on the CPU path without saying so.
    SilentCpuFallback,
    /// Emits its own fallback warning on top of the planner's.
    DoubleNotice,
    /// Conv padding shifted by one on one side.
    ConvPadOffByOne,
    /// Conv groups ignored.
    ConvGroupsIgnored,
    /// A lower-rank operand aligned with the leading axes instead of the trailing ones.
    BroadcastWrongAxis,
    /// An output buffer from a pool handed to the next call before its reader is done.
    BufferReusedTooEarly,
    /// Scratch not cleared between calls, so the second call differs.
    UninitialisedScratch,
    /// Intermediates stored in f16 on an f32 target: overflow to Inf.
    F16OverflowOnF32Target,
    /// NaN turned into 0.
    NanToZero,
    /// Gemm ignores transB.
    GemmIgnoresTransB,
}

#[derive(Debug)]
struct Planted {
    name: String,
    fault: Fault,
}

impl Planted {
    fn new(fault: Fault) -> Planted {
        Planted {
            name: format!("planted-{}", format!("{fault:?}").to_lowercase()),
            fault,
        }
    }
}

impl Executor for Planted {
    fn name(&self) -> &str {
        &self.name
    }
    fn probe(&self) -> Availability {
        Availability::Available {
            devices: vec![DeviceInfo {
                name: "planted host".into(),
                ..DeviceInfo::default()
            }],
        }
    }
    fn targets(&self) -> Vec<TargetSpec> {
        // It wraps the reference, so it declares the reference's target.
        CpuExecutor::new().targets()
    }
    fn supports(&self, graph: &Graph, node: &Node, target: &Target) -> Support {
        CpuExecutor::new()
            .supports(graph, node, &concord::targets::CPU)
            .clone_if(*target == concord::targets::CPU)
    }
    fn prepare(
        &self,
        partition: &Graph,
        _target: &Target,
    ) -> Result<Box<dyn PreparedPartition>, Error> {
        let mut graph = partition.clone();
        match self.fault {
            Fault::ConvPadOffByOne => {
                for node in &mut graph.nodes {
                    if let Op::Conv(Conv { pads, .. }) = &mut node.op {
                        // Move one cell of padding from the end of the last axis to its
                        // beginning: same output shape, shifted window.
                        let half = pads.len() / 2;
                        if half > 0 && pads[pads.len() - 1] > 0 {
                            pads[half - 1] += 1;
                            let last = pads.len() - 1;
                            pads[last] -= 1;
                        }
                    }
                }
            }
            Fault::ConvGroupsIgnored => {
                for node in &mut graph.nodes {
                    if let Op::Conv(Conv { group, .. }) = &mut node.op {
                        *group = 1;
                    }
                }
            }
            Fault::GemmIgnoresTransB => {
                for node in &mut graph.nodes {
                    if let Op::Gemm(Gemm { trans_b, .. }) = &mut node.op {
                        *trans_b = false;
                    }
                }
            }
            Fault::BroadcastWrongAxis => misalign_broadcasts(&mut graph),
            Fault::DoubleNotice => {
                tracing::warn!(target: "planted", "planted executor: falling back to the CPU for some nodes");
            }
            _ => {}
        }
        let inner: Arc<dyn PreparedPartition> = if self.fault == Fault::CacheKeyedByOpName {
            let key = graph
                .nodes
                .first()
                .map(|n| n.op.name().to_string())
                .unwrap_or_default();
            let cache = PLAN_CACHE.get_or_init(Mutex::default);
            let mut cache = cache
                .lock()
                .map_err(|_| Error::InvalidGraph("poisoned".into()))?;
            match cache.get(&key) {
                Some(p) => p.clone(),
                None => {
                    let p: Arc<dyn PreparedPartition> =
                        Arc::from(CpuExecutor::new().prepare(&graph, &concord::targets::CPU)?);
                    cache.insert(key, p.clone());
                    p
                }
            }
        } else {
            Arc::from(CpuExecutor::new().prepare(&graph, &concord::targets::CPU)?)
        };
        Ok(Box::new(PlantedPartition {
            inner,
            fault: self.fault,
            name: self.name.clone(),
            scratch: Mutex::new(Vec::new()),
        }))
    }
}

/// The process-wide cache of the CacheKeyedByOpName fault.
static PLAN_CACHE: OnceLock<Mutex<HashMap<String, Arc<dyn PreparedPartition>>>> = OnceLock::new();

trait CloneIf {
    fn clone_if(self, ok: bool) -> Support;
}

impl CloneIf for Support {
    fn clone_if(self, ok: bool) -> Support {
        if ok {
            self
        } else {
            Support::No("planted executors run on the host only".into())
        }
    }
}

fn misalign_broadcasts(graph: &mut Graph) {
    let mut extra = Vec::new();
    for (i, node) in graph.nodes.iter_mut().enumerate() {
        if !matches!(
            node.op,
            Op::Binary(Binary::Add | Binary::Sub | Binary::Mul | Binary::Div)
        ) {
            continue;
        }
        let ranks: Vec<usize> = node
            .inputs
            .iter()
            .map(|n| {
                n.as_ref()
                    .and_then(|n| graph.values.get(n))
                    .map(|v| v.shape.len())
                    .unwrap_or(0)
            })
            .collect();
        let Some(&max) = ranks.iter().max() else {
            continue;
        };
        for (slot, &rank) in ranks.iter().enumerate() {
            if rank == 0 || rank >= max {
                continue;
            }
            let Some(Some(name)) = node.inputs.get(slot).cloned() else {
                continue;
            };
            let axes_name = format!("{name}__planted_axes_{i}");
            let moved = format!("{name}__planted_{i}");
            let axes: Vec<i64> = (rank as i64..max as i64).collect();
            graph
                .initializers
                .insert(axes_name.clone(), Tensor::vec_i64(axes));
            extra.push((
                i,
                Node::new(
                    format!("planted_unsqueeze_{i}_{slot}"),
                    Op::Unsqueeze,
                    &[&name, &axes_name],
                    &[&moved],
                ),
            ));
            node.inputs[slot] = Some(moved);
        }
    }
    for (offset, (i, node)) in extra.into_iter().enumerate() {
        graph.nodes.insert(i + offset, node);
    }
}

#[derive(Debug)]
struct PlantedPartition {
    inner: Arc<dyn PreparedPartition>,
    fault: Fault,
    name: String,
    scratch: Mutex<Vec<f32>>,
}

/// Passes profile records through, attributing the work to the planted executor — except
/// under the silent-fallback fault, where the CPU path's own attribution shows through.
struct Relabel<'a> {
    inner: &'a dyn ProfileSink,
    name: &'a str,
}

impl ProfileSink for Relabel<'_> {
    fn record(&self, node: &str, elapsed: Duration) {
        self.inner.record_on(node, self.name, elapsed);
    }
    fn record_on(&self, node: &str, _executor: &str, elapsed: Duration) {
        self.inner.record_on(node, self.name, elapsed);
    }
    fn record_transfer(&self, value: &str, bytes: u64, elapsed: Duration) {
        self.inner.record_transfer(value, bytes, elapsed);
    }
}

impl PreparedPartition for PlantedPartition {
    fn run(
        &self,
        inputs: &BTreeMap<String, Tensor>,
        profile: Option<&dyn ProfileSink>,
    ) -> Result<Vec<Tensor>, Error> {
        let relabel = profile.map(|inner| Relabel {
            inner,
            name: &self.name,
        });
        let sink: Option<&dyn ProfileSink> = match (self.fault, &relabel) {
            (Fault::SilentCpuFallback, _) => profile,
            (_, Some(r)) => Some(r),
            (_, None) => None,
        };
        let mut outputs = self.inner.run(inputs, sink)?;
        let Some(first) = outputs.first_mut() else {
            return Ok(outputs);
        };
        let Some(values) = first.as_f32().map(|v| v.to_vec()) else {
            return Ok(outputs);
        };
        let shape = first.shape().clone();
        let changed: Option<Vec<f32>> = match self.fault {
            Fault::F16OverflowOnF32Target => Some(
                values
                    .iter()
                    .map(|&v| half::f16::from_f32(v).to_f32())
                    .collect(),
            ),
            Fault::NanToZero => Some(
                values
                    .iter()
                    .map(|&v| if v.is_nan() { 0.0 } else { v })
                    .collect(),
            ),
            Fault::UninitialisedScratch => {
                let mut scratch = self
                    .scratch
                    .lock()
                    .map_err(|_| Error::InvalidGraph("poisoned".into()))?;
                if scratch.len() != values.len() {
                    *scratch = vec![0.0; values.len()];
                }
                for (s, v) in scratch.iter_mut().zip(&values) {
                    *s += v;
                }
                Some(scratch.clone())
            }
            Fault::BufferReusedTooEarly => {
                // The pool's one buffer: written, released, and read back after a pause in
                // which another call may have taken it.
                {
                    let mut buffer = self
                        .scratch
                        .lock()
                        .map_err(|_| Error::InvalidGraph("poisoned".into()))?;
                    *buffer = values.clone();
                }
                std::thread::sleep(Duration::from_micros(300));
                let buffer = self
                    .scratch
                    .lock()
                    .map_err(|_| Error::InvalidGraph("poisoned".into()))?;
                Some(if buffer.len() == values.len() {
                    buffer.clone()
                } else {
                    values.clone()
                })
            }
            _ => None,
        };
        if let Some(v) = changed {
            *first = Tensor::from_f32(shape, v)?;
        }
        Ok(outputs)
    }
}

/// A fault and the trials of the suite that must catch it.
struct Plant {
    fault: Fault,
    caught_by: &'static [&'static str],
}

const PLANTS: &[Plant] = &[
    Plant {
        fault: Fault::CacheKeyedByOpName,
        caught_by: &["op/Conv/basic_3x3_bias", "op/Conv/pads_asymmetric"],
    },
    Plant {
        fault: Fault::SilentCpuFallback,
        caught_by: &["fallback/placement_honesty"],
    },
    Plant {
        fault: Fault::DoubleNotice,
        caught_by: &["fallback/notice_once"],
    },
    Plant {
        fault: Fault::ConvPadOffByOne,
        caught_by: &["op/Conv/pads_symmetric"],
    },
    Plant {
        fault: Fault::ConvGroupsIgnored,
        caught_by: &["op/Conv/groups_2"],
    },
    Plant {
        fault: Fault::BroadcastWrongAxis,
        caught_by: &["op/Add/broadcast_row_constant"],
    },
    Plant {
        fault: Fault::BufferReusedTooEarly,
        caught_by: &["concurrency/shared_net"],
    },
    Plant {
        fault: Fault::UninitialisedScratch,
        caught_by: &["concurrency/shared_net"],
    },
    Plant {
        fault: Fault::F16OverflowOnF32Target,
        caught_by: &["op/Add/large_magnitudes"],
    },
    Plant {
        fault: Fault::NanToZero,
        caught_by: &["op/Add/special_values"],
    },
    Plant {
        fault: Fault::GemmIgnoresTransB,
        caught_by: &["op/Gemm/trans_b"],
    },
];

/// Runs the named trials (suffixes after `<executor>/<target>/`) on `suite`; returns the
/// failing ones with their messages.
fn run_trials(suite: &Suite, suffixes: &[&str]) -> Result<Vec<(String, String)>, String> {
    let cases = suite.cases();
    let mut failures = Vec::new();
    for suffix in suffixes {
        let name = format!("{}/cpu/{suffix}", suite.executor.name());
        let case = cases
            .iter()
            .find(|c| c.name == name)
            .ok_or_else(|| format!("no trial named {name}"))?;
        let record = suite.run_case(case);
        if let concord_conformance::Verdict::Skip { reason } = &record.verdict {
            return Err(format!(
                "{name} was skipped ({reason}); a planted fault must be caught by an executed case"
            ));
        }
        if let Some(message) = record.verdict.message() {
            failures.push((name, message));
        }
    }
    Ok(failures)
}

fn suite_for(fault: Fault) -> Suite {
    Suite::new(Arc::new(Planted::new(fault)), SuiteConfig::from_env())
        .unwrap_or_else(|e| panic!("suite: {e}"))
}

#[test]
fn every_planted_fault_is_caught_by_its_named_case() {
    let control = suite_for(Fault::None);
    let mut caught = 0;
    let mut report = Vec::new();
    for plant in PLANTS {
        // The control passes the same trials, so a catch is the fault's doing.
        let control_failures =
            run_trials(&control, plant.caught_by).unwrap_or_else(|e| panic!("{e}"));
        assert!(
            control_failures.is_empty(),
            "control fails {:?}: {control_failures:?}",
            plant.caught_by
        );
        let suite = suite_for(plant.fault);
        let failures = run_trials(&suite, plant.caught_by).unwrap_or_else(|e| panic!("{e}"));
        if failures.is_empty() {
            report.push(format!(
                "NOT CAUGHT: {:?} by {:?}",
                plant.fault, plant.caught_by
            ));
        } else {
            caught += 1;
            let (name, message) = &failures[0];
            let first_line = message.lines().next().unwrap_or_default();
            report.push(format!("caught {:?} by {name}: {first_line}", plant.fault));
        }
    }

    // The twelfth plant is in the data, not the executor: an expected-failure entry for a
    // case that passes must fail the run.
    let mut stale = suite_for(Fault::None);
    stale.expectations = Expectations::parse(
        "min_executed = 0\n[[expected_failure]]\ncase = \"planted-none/cpu/op/Relu/*\"\nreason = \"planted: Relu was once broken\"\nfailure = \"out-of-tolerance\"\n",
        PathBuf::from("planted.toml"),
        &[concord::targets::CPU],
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let failures = run_trials(&stale, &["op/Relu/f32"]).unwrap_or_else(|e| panic!("{e}"));
    let planted = PLANTS.len() + 1;
    match failures.first() {
        Some((name, message)) if message.contains("but passed: remove the entry") => {
            caught += 1;
            report.push(format!(
                "caught an expected failure that passes by {name}: {message}"
            ));
        }
        _ => report.push(format!(
            "NOT CAUGHT: expected failure that passes ({failures:?})"
        )),
    }

    println!("mutation score: {caught}/{planted}");
    for line in &report {
        println!("  {line}");
    }
    assert_eq!(
        caught,
        planted,
        "the suite missed planted faults:\n{}",
        report.join("\n")
    );
}
