//! The OpenCL fallback cases, through `NetBuilder` as a user meets them:
//! - the OpenCL library is missing (OPENCL_DYLIB_PATH pointing nowhere), checked in a child
//!   process so the variable cannot leak into other tests and cl3's once-only library load
//!   starts fresh;
//! - opencl-fp16 runs as asked wherever f16 storage builds (with a note saying it is slower
//!   than opencl on a device without half arithmetic), and where it does not, opencl (f32)
//!   runs instead and says so;
//! - and, on a device that is present, the f16-storage target itself, prepared directly
//!   through the executor contract.

// A test reports a broken expectation by panicking with what it found.
#![allow(clippy::panic)]

mod common;

use common::{opencl_here, OpenClHere};
use concord::{
    DType, Executor, FallbackCause, FallbackPolicy, Graph, NetBuilder, Overrides, Tensor,
};
use concord_conformance::compare::compare;
use concord_conformance::tolerance::{allowance, ToleranceTable};
use concord_opencl::OpenClExecutor;
use std::collections::BTreeMap;
use std::process::Command;

/// Set in the child process: run the library-missing scenario instead of spawning it.
const CHILD_MARKER: &str = "CONCORD_OPENCL_TEST_CHILD";
const MISSING_LIBRARY: &str = "/nonexistent/concord-test/libOpenCL.so.1";

/// How close a model's output must come to the reference: the conformance suite's `model`
/// level (conformance/tolerances.toml), on the target that ran it — the same bar the
/// suite's model trials hold every executor to, and no literal here.
fn assert_within_model_level(actual: &Tensor, expected: &Tensor, target: &concord::Target) {
    let table = ToleranceTable::builtin().expect("the shipped tolerance table parses");
    let level = table
        .level("model")
        .expect("the shipped table has a model level")
        .level;
    let spec = OpenClExecutor::new()
        .targets()
        .into_iter()
        .find(|s| s.target == *target)
        .expect("the executor declares the target it ran");
    let allowed = allowance(level, &spec, expected, None).expect("a fixed level");
    let c = compare("output", actual, expected, &|i, _| {
        allowed.get(i).copied().unwrap_or(0.0)
    });
    assert!(c.passed(), "on {target}: {}", c.describe());
}

#[test]
fn library_missing_falls_back_and_says_so() {
    if std::env::var_os(CHILD_MARKER).is_some() {
        library_missing_child();
        return;
    }
    let exe = std::env::current_exe().expect("the test binary knows its path");
    let output = Command::new(exe)
        .args([
            "library_missing_falls_back_and_says_so",
            "--exact",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(CHILD_MARKER, "1")
        .env("OPENCL_DYLIB_PATH", MISSING_LIBRARY)
        .env_remove("CONCORD_REQUIRE")
        .env_remove("CONCORD_FALLBACK")
        .output()
        .expect("the child test process starts");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    println!("child stdout:\n{stdout}\nchild stderr:\n{stderr}");
    assert!(output.status.success(), "the child scenario failed");
    assert!(
        stdout.contains("child: library-missing scenario passed"),
        "the child did not run the scenario"
    );
}

/// Runs in the child: OPENCL_DYLIB_PATH names a file that does not exist.
fn library_missing_child() {
    let executor = OpenClExecutor::new();
    match executor.probe() {
        concord::Availability::Unavailable { cause, reason } => {
            assert_eq!(cause, FallbackCause::LibraryMissing, "{reason}");
            assert!(
                reason.contains(MISSING_LIBRARY) && reason.contains("OPENCL_DYLIB_PATH"),
                "the reason should say where it looked: {reason}"
            );
        }
        other => {
            panic!("expected Unavailable with OPENCL_DYLIB_PATH={MISSING_LIBRARY}, got {other:?}")
        }
    }
    // The library is loaded at run time only: nothing of it is mapped into this process.
    let maps = std::fs::read_to_string("/proc/self/maps").unwrap_or_default();
    assert!(
        !maps.contains("libOpenCL"),
        "libOpenCL is mapped although the probe found no library: it must not be linked"
    );

    let graph = common::resnet18_like(32, 8, 10);
    let input = common::image(32, 7);
    let reference = NetBuilder::from_graph(graph.clone())
        .overrides(Overrides::default())
        .build()
        .expect("reference builds")
        .forward([("input", input.clone())])
        .expect("reference runs");
    let net = NetBuilder::from_graph(graph)
        .backend(concord::backends::OPENCL)
        .fallback(FallbackPolicy::Allow)
        .overrides(Overrides::default())
        .build()
        .expect("a missing library falls back under Allow");
    let placement = net.placement();
    let notice = placement
        .notices
        .iter()
        .find(|n| n.cause == FallbackCause::LibraryMissing)
        .unwrap_or_else(|| panic!("no LibraryMissing notice in {placement}"));
    assert_eq!(notice.chosen, "cpu/cpu");
    assert_eq!(notice.nodes, placement.nodes.len());
    assert!(placement.nodes.iter().all(|n| n.executor == "cpu"));
    let out = net.forward([("input", input)]).expect("forward");
    assert!(out
        .get("output")
        .expect("output")
        .bit_identical(reference.get("output").expect("output")));

    // Deny refuses, naming the library.
    let denied = NetBuilder::from_graph(common::resnet18_like(32, 8, 10))
        .backend(concord::backends::OPENCL)
        .fallback(FallbackPolicy::Deny)
        .overrides(Overrides::default())
        .build();
    match denied {
        Err(concord::Error::FallbackDenied { reasons, .. }) => {
            assert!(
                reasons.iter().any(|r| r.contains(MISSING_LIBRARY)),
                "{reasons:?}"
            )
        }
        other => panic!("Deny must refuse a missing library, got {other:?}"),
    }
    println!("child: library-missing scenario passed");
}

/// How the chosen device runs opencl-fp16, as the probe says.
#[derive(Clone, Copy, Debug, PartialEq)]
enum HalfHere {
    /// No f16 at all (a vload_half kernel does not build): opencl runs instead.
    None,
    /// f16 storage, f32 arithmetic: runs as asked, with a note saying it is slower.
    StorageOnly,
    /// cl_khr_fp16.
    Native,
}

fn half_here(here: &OpenClHere) -> HalfHere {
    let OpenClHere::Available = here else {
        return HalfHere::None;
    };
    let concord::Availability::Available { devices } = common::shared_executor().probe() else {
        return HalfHere::None;
    };
    let chosen = devices
        .iter()
        .find(|d| d.details.get("selected").map(String::as_str) == Some("yes"))
        .expect("the probe marks the chosen device");
    match (chosen.fp16, chosen.details.get("fp16").map(String::as_str)) {
        (false, _) => HalfHere::None,
        (true, Some(f)) if f.starts_with("native") => HalfHere::Native,
        (true, _) => HalfHere::StorageOnly,
    }
}

#[test]
fn fp16_target_runs_where_storage_allows_and_says_what_it_costs() {
    let here = opencl_here("fp16_target_runs_where_storage_allows_and_says_what_it_costs");
    let graph = common::mobilenet_v2_like(32, 0.25, 10);
    let input = common::image(32, 3);
    let reference = NetBuilder::from_graph(graph.clone())
        .overrides(Overrides::default())
        .build()
        .expect("reference builds")
        .forward([("input", input.clone())])
        .expect("reference runs");
    let builder = |policy| {
        NetBuilder::from_graph(graph.clone())
            .registry(common::shared_registry())
            .backend(concord::backends::OPENCL)
            .target(concord::targets::OPENCL_FP16)
            .fallback(policy)
            .overrides(Overrides::default())
    };
    let net = builder(FallbackPolicy::Allow)
        .build()
        .expect("builds under Allow");
    let placement = net.placement();
    let half = half_here(&here);
    match (&here, half) {
        (OpenClHere::Available, HalfHere::None) => {
            let notice = placement
                .notices
                .iter()
                .find(|n| n.cause == FallbackCause::Fp16Unsupported)
                .unwrap_or_else(|| panic!("no Fp16Unsupported notice in {placement}"));
            assert_eq!(notice.asked, "opencl/opencl-fp16");
            assert_eq!(notice.chosen, "opencl/opencl");
            assert!(notice.reason.contains("fp16"), "{}", notice.reason);
            assert_eq!(placement.notices.len(), 1, "{placement}");
            assert!(
                placement
                    .nodes
                    .iter()
                    .all(|n| n.executor == "opencl" && n.target == concord::targets::OPENCL),
                "{placement}"
            );
            let denied = builder(FallbackPolicy::Deny)
                .build()
                .expect_err("Deny refuses a device without f16 storage");
            assert!(denied.to_string().contains("fp16"), "{denied}");
            println!("the device stores no f16: opencl-fp16 fell back to opencl and said so");
        }
        (OpenClHere::Available, HalfHere::StorageOnly | HalfHere::Native) => {
            assert!(placement.notices.is_empty(), "{placement}");
            assert!(
                placement
                    .nodes
                    .iter()
                    .all(|n| n.executor == "opencl" && n.target == concord::targets::OPENCL_FP16),
                "{placement}"
            );
            // Running as asked is no fallback: Deny and CONCORD_REQUIRE=opencl-fp16 let it
            // through, and the note travels with the placement either way.
            let denied = builder(FallbackPolicy::Deny).build().expect("Deny builds");
            let required = builder(FallbackPolicy::Allow)
                .overrides(Overrides {
                    require: vec!["opencl-fp16".into()],
                    ..Overrides::default()
                })
                .build()
                .expect("CONCORD_REQUIRE=opencl-fp16 builds");
            for p in [placement, denied.placement(), required.placement()] {
                assert_eq!(p.notes, placement.notes, "{p}");
            }
            if half == HalfHere::Native {
                assert!(placement.notes.is_empty(), "{placement}");
                println!("the device has cl_khr_fp16: opencl-fp16 ran as asked");
            } else {
                assert_eq!(placement.notes.len(), 1, "{placement}");
                let note = &placement.notes[0];
                assert_eq!(note.on, "opencl/opencl-fp16");
                for said in ["no native half arithmetic", "slower than opencl", "ms"] {
                    assert!(
                        note.text.contains(said),
                        "the note lacks `{said}`: {}",
                        note.text
                    );
                }
                assert!(placement.to_string().contains(&note.text), "{placement}");
                println!(
                    "storage-only opencl-fp16 ran as asked, noting: {}",
                    note.text
                );
            }
        }
        (OpenClHere::Unavailable { cause, .. }, _) => {
            assert!(
                placement.notices.iter().any(|n| n.cause == *cause),
                "{placement}"
            );
            assert!(placement.notes.is_empty(), "{placement}");
            assert!(placement.nodes.iter().all(|n| n.executor == "cpu"));
        }
    }
    let out = net.forward([("input", input)]).expect("forward");
    let ran_as = if half == HalfHere::None {
        concord::targets::OPENCL
    } else {
        concord::targets::OPENCL_FP16
    };
    assert_within_model_level(
        out.get("output").expect("output"),
        reference.get("output").expect("output"),
        &ran_as,
    );
}

#[test]
fn fp16_storage_target_prepared_directly_tracks_the_reference() {
    let here = opencl_here("fp16_storage_target_prepared_directly_tracks_the_reference");
    let executor = common::shared_executor();
    let mut graph = common::mobilenet_v2_like(32, 0.25, 10);
    graph.infer_shapes().expect("the model is well formed");
    let input = common::image(32, 5);
    let reference = concord_cpu_run(&graph, &input);
    match here {
        OpenClHere::Unavailable { .. } => {
            let err = executor
                .prepare(&graph, &concord::targets::OPENCL_FP16)
                .expect_err("prepare must fail without a device");
            println!("without OpenCL, prepare says: {err}");
            assert!(err.to_string().contains("OpenCL"));
        }
        OpenClHere::Available => {
            // The executor stores f16 through vload_half/vstore_half, which every OpenCL
            // device has, with or without cl_khr_fp16.
            let prepared = executor
                .prepare(&graph, &concord::targets::OPENCL_FP16)
                .expect("prepares for opencl-fp16");
            let mut inputs = BTreeMap::new();
            inputs.insert("input".to_string(), input);
            let out = prepared.run(&inputs, None).expect("runs");
            let out = out.first().expect("one output");
            assert_eq!(
                out.dtype(),
                DType::F32,
                "graph f32 outputs come back as f32"
            );
            assert_within_model_level(out, &reference, &concord::targets::OPENCL_FP16);
            // And it is really f16: not bit-identical to the f32 target's result.
            let f32_out = executor
                .prepare(&graph, &concord::targets::OPENCL)
                .expect("prepares for opencl")
                .run(&inputs, None)
                .expect("runs");
            assert!(
                !f32_out[0].bit_identical(out),
                "f16 storage gave the f32 result"
            );
        }
    }
}

fn concord_cpu_run(graph: &Graph, input: &Tensor) -> Tensor {
    NetBuilder::from_graph(graph.clone())
        .overrides(Overrides::default())
        .build()
        .expect("reference builds")
        .forward([("input", input.clone())])
        .expect("reference runs")
        .get("output")
        .cloned()
        .expect("output")
}
