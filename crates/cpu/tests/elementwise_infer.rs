//! Shape and dtype inference for the elementwise, normalisation and reduction families:
//! agreement with the reference kernels' outputs, symbolic dims, and typed errors.

mod elementwise_support;

use concord_core::infer::{infer_op, OutputFact, ValueFact};
use concord_core::op::{Binary, Unary};
use concord_core::op::{Reduce, ReduceKind};
use concord_core::{DType, Dim, Op, OpError, Tensor};
use elementwise_support::{bools, check_inference_agrees, f16s, f32s, i64s};

/// An op, its inputs (None for an omitted optional one) and which inputs inference may
/// see as constants.
type Case<'t> = (Op, Vec<Option<&'t Tensor>>, Vec<usize>);

fn reduce(axes: Option<&[i64]>, keepdims: bool, noop: bool) -> Reduce {
    Reduce {
        axes: axes.map(|a| a.to_vec()),
        keepdims,
        noop_with_empty_axes: noop,
    }
}

#[test]
fn inference_agrees_with_kernels() {
    let m = f32s(&[2, 3], &[1.0, 2.0, 3.0, 4.0, 5.0, 6.0]);
    let col = f32s(&[2, 1], &[1.0, 2.0]);
    let row = f32s(&[3], &[1.0, 2.0, 3.0]);
    let s = f32s(&[], &[2.0]);
    let empty = f32s(&[0, 3], &[]);
    let h = f16s(&[2, 1, 2], &[1.0, 2.0, 3.0, 4.0]);
    let i = i64s(&[3], &[7, -7, 3]);
    let i_col = i64s(&[2, 1], &[2, 3]);
    let c = bools(&[2, 1], &[true, false]);
    let axes = i64s(&[1], &[-1]);
    let no_axes = i64s(&[0], &[]);
    let h_scale = f16s(&[1, 2], &[1.0, 1.0]);
    let cases: Vec<Case> = vec![
        (Op::Binary(Binary::Add), vec![Some(&m), Some(&col)], vec![]),
        (
            Op::Binary(Binary::Sub),
            vec![Some(&row), Some(&col)],
            vec![],
        ),
        (Op::Binary(Binary::Mul), vec![Some(&s), Some(&m)], vec![]),
        (Op::Binary(Binary::Div), vec![Some(&s), Some(&s)], vec![]),
        (
            Op::Binary(Binary::Add),
            vec![Some(&empty), Some(&row)],
            vec![],
        ),
        (
            Op::Binary(Binary::Pow),
            vec![Some(&m), Some(&i_col)],
            vec![],
        ),
        (
            Op::Binary(Binary::Mod { fmod: false }),
            vec![Some(&i), Some(&i_col)],
            vec![],
        ),
        (
            Op::Binary(Binary::Equal),
            vec![Some(&i), Some(&i_col)],
            vec![],
        ),
        (Op::Binary(Binary::Equal), vec![Some(&c), Some(&c)], vec![]),
        (Op::Unary(Unary::Erf), vec![Some(&h)], vec![]),
        (Op::Unary(Unary::Neg), vec![Some(&i)], vec![]),
        (Op::Unary(Unary::Relu), vec![Some(&s)], vec![]),
        (
            Op::Unary(Unary::HardSigmoid {
                alpha: 0.2,
                beta: 0.5,
            }),
            vec![Some(&empty)],
            vec![],
        ),
        (Op::Clip, vec![Some(&m), None, Some(&s)], vec![]),
        (Op::Where, vec![Some(&c), Some(&row), Some(&s)], vec![]),
        (Op::Softmax { axis: -1 }, vec![Some(&h)], vec![]),
        (
            Op::LayerNormalization {
                axis: 1,
                epsilon: 1e-5,
            },
            vec![Some(&h), Some(&h_scale)],
            vec![],
        ),
        (
            Op::BatchNormalization { epsilon: 1e-5 },
            vec![Some(&m), Some(&row), Some(&row), Some(&row), Some(&row)],
            vec![],
        ),
        (
            Op::Reduce(ReduceKind::Sum, reduce(Some(&[0]), true, false)),
            vec![Some(&m)],
            vec![],
        ),
        (
            Op::Reduce(ReduceKind::Sum, reduce(Some(&[0]), false, false)),
            vec![Some(&m)],
            vec![],
        ),
        (
            Op::Reduce(ReduceKind::Mean, reduce(None, false, false)),
            vec![Some(&m), Some(&axes)],
            vec![1],
        ),
        (
            Op::Reduce(ReduceKind::Max, reduce(None, true, false)),
            vec![Some(&h)],
            vec![],
        ),
        (
            Op::Reduce(ReduceKind::Max, reduce(None, false, true)),
            vec![Some(&h), Some(&no_axes)],
            vec![1],
        ),
        (
            Op::Reduce(ReduceKind::Sum, reduce(None, false, false)),
            vec![Some(&i)],
            vec![],
        ),
        (
            Op::Reduce(ReduceKind::Mean, reduce(Some(&[0]), false, false)),
            vec![Some(&empty)],
            vec![],
        ),
    ];
    for (op, inputs, constant) in &cases {
        check_inference_agrees(op, inputs, constant);
    }
}

fn named(name: &str) -> Dim {
    Dim::Named(name.into())
}

fn fact(dtype: DType, shape: &[Dim]) -> Option<ValueFact<'_>> {
    Some(ValueFact {
        dtype,
        shape,
        value: None,
    })
}

fn infer_one(op: &Op, inputs: &[Option<ValueFact>]) -> Result<OutputFact, OpError> {
    infer_op(op, inputs, 1).map(|mut v| v.remove(0))
}

#[test]
fn symbolic_dims_broadcast() {
    let a = [named("N"), Dim::Fixed(1)];
    let b = [Dim::Fixed(4)];
    let out = infer_one(
        &Op::Binary(Binary::Add),
        &[fact(DType::F32, &a), fact(DType::F32, &b)],
    );
    assert_eq!(
        out,
        Ok(OutputFact::new(DType::F32, vec![named("N"), Dim::Fixed(4)]))
    );
    let c = [Dim::Fixed(1), named("M")];
    let out = infer_one(
        &Op::Binary(Binary::Equal),
        &[fact(DType::I64, &a), fact(DType::I64, &c)],
    );
    assert_eq!(
        out,
        Ok(OutputFact::new(DType::Bool, vec![named("N"), named("M")]))
    );
    let cond = [named("N"), Dim::Unknown];
    let out = infer_one(
        &Op::Where,
        &[
            fact(DType::Bool, &cond),
            fact(DType::F16, &b),
            fact(DType::F16, &[]),
        ],
    );
    assert_eq!(
        out,
        Ok(OutputFact::new(DType::F16, vec![named("N"), Dim::Fixed(4)]))
    );
}

#[test]
fn reduce_with_runtime_axes_knows_the_rank_from_their_count() {
    let data = [named("N"), Dim::Fixed(1), Dim::Fixed(5)];
    let axes = [Dim::Fixed(1)];
    let op = Op::Reduce(ReduceKind::Sum, reduce(None, true, false));
    let out = infer_one(&op, &[fact(DType::F32, &data), fact(DType::I64, &axes)]);
    // An axis of extent 1 is 1 whether reduced or not; the others are unknown.
    let want = vec![Dim::Unknown, Dim::Fixed(1), Dim::Unknown];
    assert_eq!(out, Ok(OutputFact::new(DType::F32, want)));
    // Without keepdims, the axes input's length gives the rank (rank 3 less one axis).
    let op = Op::Reduce(ReduceKind::Sum, reduce(None, false, false));
    let out = infer_one(&op, &[fact(DType::F32, &data), fact(DType::I64, &axes)]);
    assert_eq!(
        out,
        Ok(OutputFact::new(
            DType::F32,
            vec![Dim::Unknown, Dim::Unknown]
        ))
    );
    // An axes input of unknown length leaves even the rank unknown.
    let unknown = [Dim::Unknown];
    let out = infer_one(&op, &[fact(DType::F32, &data), fact(DType::I64, &unknown)]);
    assert_eq!(
        out,
        Err(OpError::NotConstant {
            index: 1,
            name: "axes"
        })
    );
}

#[test]
fn reduce_with_symbolic_data_keeps_the_unreduced_symbols() {
    let data = [named("N"), Dim::Fixed(3), named("T")];
    let op = Op::Reduce(ReduceKind::Mean, reduce(Some(&[1, -1]), false, false));
    let out = infer_one(&op, &[fact(DType::F16, &data)]);
    assert_eq!(out, Ok(OutputFact::new(DType::F16, vec![named("N")])));
}

#[test]
fn inference_reports_typed_errors() {
    let v = [Dim::Fixed(3)];
    let w = [Dim::Fixed(2)];
    let f = |shape| fact(DType::F32, shape);
    assert!(matches!(
        infer_one(&Op::Binary(Binary::Add), &[f(&v), fact(DType::I64, &v)]),
        Err(OpError::DType { index: 1, .. })
    ));
    assert!(matches!(
        infer_one(&Op::Binary(Binary::Mul), &[f(&v), f(&w)]),
        Err(OpError::Shape(_))
    ));
    // Opset 28 defines the floored remainder (fmod=0) on floats, so it infers like fmod=1.
    assert!(matches!(
        infer_one(&Op::Binary(Binary::Mod { fmod: false }), &[f(&v), f(&v)]),
        Ok(ref out) if out.dtype == DType::F32
    ));
    assert!(matches!(
        infer_one(&Op::Where, &[f(&v), f(&v), f(&v)]),
        Err(OpError::DType { index: 0, .. })
    ));
    assert!(matches!(
        infer_one(&Op::Unary(Unary::Sqrt), &[fact(DType::I64, &v)]),
        Err(OpError::DType { index: 0, .. })
    ));
    assert!(matches!(
        infer_one(&Op::Softmax { axis: 1 }, &[f(&v)]),
        Err(OpError::Attribute { name: "axis", .. })
    ));
    assert!(matches!(
        infer_one(&Op::Clip, &[f(&v), f(&w)]),
        Err(OpError::Shape(_))
    ));
    assert!(matches!(
        infer_one(
            &Op::LayerNormalization {
                axis: -1,
                epsilon: 1e-5
            },
            &[f(&v), f(&w)]
        ),
        Err(OpError::Shape(_))
    ));
    let x = [Dim::Fixed(1), Dim::Fixed(3)];
    assert!(matches!(
        infer_one(
            &Op::BatchNormalization { epsilon: 1e-5 },
            &[f(&x), f(&w), f(&v), f(&v), f(&v)]
        ),
        Err(OpError::Shape(_))
    ));
    assert!(matches!(
        infer_one(
            &Op::Reduce(ReduceKind::Max, reduce(Some(&[3]), true, false)),
            &[f(&v)]
        ),
        Err(OpError::Attribute { name: "axes", .. })
    ));
    assert!(matches!(
        infer_one(
            // ReduceMax and ReduceMin take bool (opset 20); the sums do not.
            &Op::Reduce(ReduceKind::Sum, reduce(None, true, false)),
            &[fact(DType::Bool, &v)]
        ),
        Err(OpError::DType { index: 0, .. })
    ));
}
