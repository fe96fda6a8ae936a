//! What the suite does not ask of the onnxruntime adapter directly: the probe's reasons when
//! the library is missing, every Concord element type through a session, and whether results
//! depend on onnxruntime's thread count (the ground for `deterministic()`).
//!
//! The tests that run onnxruntime need `ORT_DYLIB_PATH` (`cargo xtask adapters` sets it);
//! without it they fail saying so, never pass by skipping.
// A test reports a failure by panicking, helpers included.
#![allow(clippy::panic)]

use concord::executor::{Availability, DType, Dim, FallbackCause, Graph, Node, Tensor, ValueInfo};
use concord::op::Conv;
use concord::{Backend, Executor, ExecutorRegistry, FallbackPolicy, NetBuilder, Op, TensorData};
use concord_adapter_onnxruntime::{LibrarySource, OnnxRuntimeExecutor, Settings, NAME};
use std::sync::Arc;

/// The executor for the library in `ORT_DYLIB_PATH`, which these tests need.
fn executor(threads: usize) -> OnnxRuntimeExecutor {
    let path = std::env::var_os("ORT_DYLIB_PATH").unwrap_or_else(|| {
        std::panic::panic_any(
            "ORT_DYLIB_PATH must name libonnxruntime.so.1.23.2 (cargo xtask adapters sets it)",
        )
    });
    OnnxRuntimeExecutor::with_library(path).intra_op_threads(threads)
}

/// A net whose every node must run on `executor` (Deny: a fallback fails the build).
fn net_on(executor: OnnxRuntimeExecutor, graph: Graph) -> concord::Net {
    let built = NetBuilder::from_graph(graph)
        .registry(ExecutorRegistry::reference_only().with(Arc::new(executor)))
        .backend(Backend::named(NAME))
        .fallback(FallbackPolicy::Deny)
        .build();
    match built {
        Ok(net) => {
            assert!(
                net.placement().nodes.iter().all(|n| n.executor == NAME),
                "{}",
                net.placement()
            );
            net
        }
        Err(e) => std::panic::panic_any(format!("building on onnxruntime failed: {e}")),
    }
}

fn one_node(
    op: Op,
    inputs: Vec<ValueInfo>,
    extra: Vec<(&str, Tensor)>,
    output: ValueInfo,
) -> Graph {
    let mut node_inputs: Vec<Option<String>> =
        inputs.iter().map(|i| Some(i.name.clone())).collect();
    node_inputs.extend(extra.iter().map(|(n, _)| Some(n.to_string())));
    Graph {
        name: "test".into(),
        values: inputs
            .iter()
            .chain([&output])
            .map(|v| (v.name.clone(), v.clone()))
            .collect(),
        inputs,
        outputs: vec![output.name.clone()],
        initializers: extra.into_iter().map(|(n, t)| (n.to_string(), t)).collect(),
        nodes: vec![Node {
            name: "node".into(),
            op,
            inputs: node_inputs,
            outputs: vec![output.name],
        }],
        opset: 23,
    }
}

#[test]
fn a_missing_library_is_unavailable_naming_the_path() {
    let path = "/nonexistent/concord/libonnxruntime.so.1.23.2";
    match OnnxRuntimeExecutor::with_library(path).probe() {
        Availability::Unavailable { cause, reason } => {
            assert_eq!(cause, FallbackCause::LibraryMissing);
            assert!(reason.contains(path), "{reason}");
        }
        other => std::panic::panic_any(format!("a missing library was {other:?}")),
    }
}

#[test]
fn an_unset_variable_is_named_in_the_reason() {
    let unset = OnnxRuntimeExecutor::with_settings(Settings {
        library: LibrarySource::Environment(None),
        intra_op_threads: 1,
    });
    match unset.probe() {
        Availability::Unavailable { cause, reason } => {
            assert_eq!(cause, FallbackCause::LibraryMissing);
            assert!(reason.contains("ORT_DYLIB_PATH is not set"), "{reason}");
        }
        other => std::panic::panic_any(format!("no library path was {other:?}")),
    }
}

#[test]
fn the_probe_finds_onnxruntime_1_23() {
    match executor(1).probe() {
        Availability::Available { devices } => {
            assert_eq!(devices.len(), 1);
            assert!(
                devices[0].driver_version.starts_with("1.23"),
                "{:?}",
                devices[0]
            );
        }
        other => std::panic::panic_any(format!("the library did not load: {other:?}")),
    }
}

/// Transpose of a 2×3 tensor of every element type: the output is the input's elements in
/// column order (worked out by hand: [[0,1,2],[3,4,5]] → [[0,3],[1,4],[2,5]]), bit for bit.
#[test]
fn every_element_type_goes_through_a_session() {
    for dtype in DType::ALL {
        let x = ValueInfo::new("x", dtype, vec![Dim::Fixed(2), Dim::Fixed(3)]);
        let y = ValueInfo::new("y", dtype, vec![Dim::Fixed(3), Dim::Fixed(2)]);
        let net = net_on(
            executor(1),
            one_node(Op::Transpose { perm: None }, vec![x], Vec::new(), y),
        );
        let values: Vec<f64> = (0..6)
            .map(|i| {
                if dtype == DType::Bool {
                    (i % 2) as f64
                } else {
                    i as f64
                }
            })
            .collect();
        let input = Tensor::new(vec![2, 3], TensorData::from_f64(dtype, &values))
            .unwrap_or_else(|e| std::panic::panic_any(e.to_string()));
        let want_values: Vec<f64> = [0, 3, 1, 4, 2, 5].iter().map(|&i| values[i]).collect();
        let want = Tensor::new(vec![3, 2], TensorData::from_f64(dtype, &want_values))
            .unwrap_or_else(|e| std::panic::panic_any(e.to_string()));
        let got = net
            .forward([("x", input)])
            .unwrap_or_else(|e| std::panic::panic_any(format!("{dtype}: {e}")));
        let got = got
            .get("y")
            .unwrap_or_else(|| std::panic::panic_any("no output y"));
        assert!(
            got.bit_identical(&want),
            "{dtype}: got {got:?}, want {want:?}"
        );
    }
}

/// A convolution large enough that onnxruntime splits it across threads: with a fixed
/// thread count repeated runs are bit-identical (what `deterministic()` promises), and the
/// result is also the same bits with 1 and with 4 intra-op threads.
#[test]
fn results_do_not_depend_on_the_thread_count() {
    let x = ValueInfo::new(
        "x",
        DType::F32,
        [1, 16, 32, 32].iter().map(|&d| Dim::Fixed(d)).collect(),
    );
    let y = ValueInfo::new(
        "y",
        DType::F32,
        [1, 32, 32, 32].iter().map(|&d| Dim::Fixed(d)).collect(),
    );
    let weights: Vec<f32> = (0..32 * 16 * 9)
        .map(|i| ((i * 7919 % 1000) as f32 - 500.0) / 997.0)
        .collect();
    let w = Tensor::from_f32(vec![32, 16, 3, 3], weights)
        .unwrap_or_else(|e| std::panic::panic_any(e.to_string()));
    let conv = Conv {
        pads: vec![1, 1, 1, 1],
        ..Conv::default()
    };
    let graph = one_node(Op::Conv(conv), vec![x], vec![("w", w)], y);
    let input: Vec<f32> = (0..16 * 32 * 32)
        .map(|i| ((i * 104_729 % 2000) as f32 - 1000.0) / 1013.0)
        .collect();
    let input = Tensor::from_f32(vec![1, 16, 32, 32], input)
        .unwrap_or_else(|e| std::panic::panic_any(e.to_string()));
    let run = |threads: usize| {
        let net = net_on(executor(threads), graph.clone());
        let first = net
            .forward([("x", input.clone())])
            .unwrap_or_else(|e| std::panic::panic_any(e.to_string()));
        for _ in 0..3 {
            let again = net
                .forward([("x", input.clone())])
                .unwrap_or_else(|e| std::panic::panic_any(e.to_string()));
            let (a, b) = (first.get("y"), again.get("y"));
            assert!(
                a.zip(b).is_some_and(|(a, b)| a.bit_identical(b)),
                "{threads} threads: two runs differ"
            );
        }
        first
    };
    let one = run(1);
    let four = run(4);
    assert!(
        one.get("y")
            .zip(four.get("y"))
            .is_some_and(|(a, b)| a.bit_identical(b)),
        "1 and 4 intra-op threads give different bits"
    );
}
