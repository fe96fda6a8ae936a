//! The CPU-device kernels that walk a run of values per work-item (`binary_rows`,
//! `gather_runs`), on shapes the goldens and op cases do not reach: broadcast rows with a
//! ragged last chunk, several outer axes, per-row and per-column operands, i64 arithmetic
//! with its division-by-zero report, and Gather with run-time indices (negative ones and one
//! out of range) over runs of 16 values. Float Add, Sub, Mul and Div and Gather's copies are
//! exact, so the OpenCL outputs must equal the reference's bit for bit.
//!
//! Without an OpenCL runtime the tests assert that a net asking for OpenCL under the Deny
//! policy is refused instead.

// A test reports a broken expectation by panicking with what it found.
#![allow(clippy::panic)]

mod common;

use common::{opencl_here, shared_registry, OpenClHere};
use concord::op::Binary;
use concord::Backend;
use concord::{
    DType, Dim, Error, FallbackPolicy, Graph, Net, NetBuilder, Node, Op, Overrides, Tensor,
    ValueInfo,
};

fn fixed(dims: &[usize]) -> Vec<Dim> {
    dims.iter().map(|&d| Dim::Fixed(d)).collect()
}

/// One node `op` over inputs `a` and `b` (both graph inputs) into `y`.
fn two_input_graph(op: Op, (a, da): (&[usize], DType), (b, db): (&[usize], DType)) -> Graph {
    Graph {
        name: "row_kernels".into(),
        inputs: vec![
            ValueInfo::new("a", da, fixed(a)),
            ValueInfo::new("b", db, fixed(b)),
        ],
        outputs: vec!["y".into()],
        nodes: vec![Node::new("node", op, &["a", "b"], &["y"])],
        opset: 17,
        ..Graph::default()
    }
}

fn build(graph: Graph, backend: Backend) -> Result<Net, Error> {
    NetBuilder::from_graph(graph)
        .registry(shared_registry())
        .backend(backend)
        .fallback(FallbackPolicy::Deny)
        .overrides(Overrides::default())
        .build()
}

fn run(net: &Net, a: &Tensor, b: &Tensor) -> Result<Tensor, Error> {
    Ok(net
        .forward([("a", a.clone()), ("b", b.clone())])?
        .get("y")
        .cloned()
        .expect("the net has an output y"))
}

/// Values that exercise signs, zeros, fractions and magnitudes, from a seed.
fn f32_values(n: usize, seed: u32) -> Vec<f32> {
    (0..n)
        .map(|i| {
            let k = (i as u32).wrapping_mul(2_654_435_761).wrapping_add(seed) >> 20;
            match k % 11 {
                0 => 0.0,
                1 => -0.0,
                _ => (k as f32 - 2048.0) / 37.0,
            }
        })
        .collect()
}

fn f32_bits(t: &Tensor) -> Vec<u32> {
    t.as_f32()
        .expect("an f32 output")
        .iter()
        .map(|v| v.to_bits())
        .collect()
}

/// The net built on OpenCL under Deny, or None where there is no OpenCL, after checking
/// that the build was refused there.
fn opencl_net(test: &str, graph: Graph) -> Option<Net> {
    let opencl = build(graph, concord::backends::OPENCL);
    if let OpenClHere::Unavailable { .. } = opencl_here(test) {
        assert!(
            opencl.is_err(),
            "{test}: without OpenCL, Deny must refuse the net"
        );
        return None;
    }
    Some(opencl.unwrap_or_else(|e| panic!("{test}: builds on OpenCL: {e}")))
}

/// Checks the OpenCL net against the reference on one pair of inputs, or, without OpenCL,
/// that the net is refused.
fn check_against_reference(test: &str, graph: Graph, a: &Tensor, b: &Tensor) {
    let Some(opencl) = opencl_net(test, graph.clone()) else {
        return;
    };
    let reference = build(graph, concord::backends::CPU)
        .unwrap_or_else(|e| panic!("{test}: the reference builds: {e}"));
    let expected = run(&reference, a, b).unwrap_or_else(|e| panic!("{test}: reference: {e}"));
    let actual = run(&opencl, a, b).unwrap_or_else(|e| panic!("{test}: OpenCL: {e}"));
    assert_eq!(actual.dims(), expected.dims(), "{test}: shapes differ");
    match expected.dtype() {
        DType::F32 => assert!(
            f32_bits(&actual) == f32_bits(&expected),
            "{test}: OpenCL differs from the reference\nactual:   {actual:?}\nexpected: {expected:?}"
        ),
        _ => assert_eq!(actual, expected, "{test}: OpenCL differs from the reference"),
    }
}

#[test]
fn broadcast_arithmetic_by_rows_matches_the_reference_bit_for_bit() {
    // (A's shape, B's shape): a per-channel operand over ragged rows (37 = 2·16 + 5), one
    // repeated along the outer axes, a row vector against a column, rows shorter than a
    // chunk, and a scalar.
    let shapes: [(&[usize], &[usize]); 6] = [
        (&[2, 5, 37], &[5, 1]),
        (&[3, 4, 33], &[33]),
        (&[7, 1], &[1, 40]),
        (&[2, 3, 4, 3], &[3, 1, 1]),
        (&[1, 3, 2, 17], &[1, 3, 1, 17]),
        (&[64], &[]),
    ];
    for (i, (sa, sb)) in shapes.iter().enumerate() {
        for op in [Binary::Add, Binary::Sub, Binary::Mul, Binary::Div] {
            let graph = two_input_graph(Op::Binary(op), (sa, DType::F32), (sb, DType::F32));
            let na: usize = sa.iter().product();
            let nb: usize = sb.iter().product();
            let a = Tensor::from_f32(sa.to_vec(), f32_values(na, 7 + i as u32)).expect("a");
            let b = Tensor::from_f32(sb.to_vec(), f32_values(nb, 91 + i as u32)).expect("b");
            let test = format!("{op:?} of {sa:?} and {sb:?}");
            check_against_reference(&test, graph, &a, &b);
        }
    }
}

#[test]
fn i64_arithmetic_by_rows_wraps_like_the_reference_and_reports_division_by_zero() {
    let (sa, sb): (&[usize], &[usize]) = (&[3, 2, 19], &[2, 1]);
    let a_values: Vec<i64> = (0..3 * 2 * 19)
        .map(|i| match i % 7 {
            0 => i64::MIN,
            1 => i64::MAX,
            k => (i - 50) * k,
        })
        .collect();
    let a = Tensor::from_i64(sa.to_vec(), a_values).expect("a");
    let b = Tensor::from_i64(sb.to_vec(), vec![-1, 3]).expect("b");
    for op in [Binary::Add, Binary::Sub, Binary::Mul, Binary::Div] {
        let graph = two_input_graph(Op::Binary(op), (sa, DType::I64), (sb, DType::I64));
        check_against_reference(&format!("i64 {op:?}"), graph, &a, &b);
    }
    // A zero divisor: the forward is an error, and the next forward with a good divisor
    // is right.
    let test = "i64 Div by zero";
    let graph = two_input_graph(Op::Binary(Binary::Div), (sa, DType::I64), (sb, DType::I64));
    let Some(opencl) = opencl_net(test, graph.clone()) else {
        return;
    };
    let zero = Tensor::from_i64(sb.to_vec(), vec![5, 0]).expect("b");
    match run(&opencl, &a, &zero) {
        Ok(y) => panic!("{test}: a zero divisor gave {y:?} instead of an error"),
        Err(e) => assert!(
            e.to_string().contains("divided by zero"),
            "{test}: the error should name the division by zero: {e}"
        ),
    }
    let reference = build(graph, concord::backends::CPU).expect("the reference builds");
    assert_eq!(
        run(&opencl, &a, &b).expect("the next forward runs"),
        run(&reference, &a, &b).expect("the reference runs"),
        "{test}: the forward after the error differs from the reference"
    );
}

#[test]
fn gather_of_runs_with_run_time_indices_matches_the_reference_and_reports_one_out_of_range() {
    let test = "gather_of_runs";
    // Data [3, 5, 16]: a Gather on axis 1 copies runs of 16 values; on axis 0, of 80.
    let data_dims = [3usize, 5, 16];
    let data = Tensor::from_f32(data_dims.to_vec(), f32_values(3 * 5 * 16, 3)).expect("data");
    for (axis, good, bad) in [
        (1i64, vec![4i64, -1, 0, -5, 2, 2], vec![1i64, 5, 0, 0, 0, 0]),
        (0, vec![-3, 2, 1, -1, 0, 0], vec![0, 0, -4, 0, 0, 0]),
    ] {
        let graph = two_input_graph(
            Op::Gather { axis },
            (&data_dims, DType::F32),
            (&[2, 3], DType::I64),
        );
        let indices = Tensor::from_i64([2, 3], good).expect("indices");
        let what = format!("{test} on axis {axis}");
        check_against_reference(&what, graph.clone(), &data, &indices);
        let Some(opencl) = opencl_net(&what, graph.clone()) else {
            continue;
        };
        let reference = build(graph, concord::backends::CPU)
            .unwrap_or_else(|e| panic!("{what}: the reference builds: {e}"));
        let bad = Tensor::from_i64([2, 3], bad).expect("indices");
        // Good and bad indices in turn: a forward after a clean one reuses its status word
        // without clearing it, and a report must neither be missed nor outlive its forward.
        let expected = f32_bits(
            &run(&reference, &data, &indices).unwrap_or_else(|e| panic!("{what}: reference: {e}")),
        );
        for round in 0..2 {
            let y = run(&opencl, &data, &indices)
                .unwrap_or_else(|e| panic!("{what}: round {round}: good indices failed: {e}"));
            assert_eq!(f32_bits(&y), expected, "{what}: round {round}");
            match run(&opencl, &data, &bad) {
                Ok(y) => panic!("{what}: an index out of range gave {y:?} instead of an error"),
                Err(e) => assert!(
                    e.to_string().contains("out of range"),
                    "{what}: the error should say an index is out of range: {e}"
                ),
            }
        }
    }
}
