//! Shape inference of the data-movement ops with symbolic dims and non-constant operands:
//! what folding can know before run time. Named dims pass through where an op keeps
//! them, ranks survive unknown operands, and only an unknowable rank is NotConstant.

use concord_core::infer::{infer_op, OutputFact, ValueFact};
use concord_core::op::{Op, PadMode};
use concord_core::{DType, Dim, OpError, Tensor};

/// One input: dtype, shape and, for constants, the value.
struct Input {
    dtype: DType,
    shape: Vec<Dim>,
    value: Option<Tensor>,
}

fn data(dtype: DType, shape: Vec<Dim>) -> Option<Input> {
    Some(Input {
        dtype,
        shape,
        value: None,
    })
}

/// A constant operand; its fact's shape is the tensor's.
fn constant(t: Tensor) -> Option<Input> {
    Some(Input {
        dtype: t.dtype(),
        shape: t.shape().to_sym(),
        value: Some(t),
    })
}

/// A 1-D i64 operand of length `n` whose values are not known.
fn unknown_ints(n: usize) -> Option<Input> {
    data(DType::I64, vec![Dim::Fixed(n)])
}

fn ints(v: &[i64]) -> Option<Input> {
    constant(Tensor::vec_i64(v.to_vec()))
}

fn infer_n(op: &Op, inputs: &[Option<Input>], n: usize) -> Result<Vec<OutputFact>, OpError> {
    let facts: Vec<Option<ValueFact>> = inputs
        .iter()
        .map(|i| {
            i.as_ref().map(|i| ValueFact {
                dtype: i.dtype,
                shape: &i.shape,
                value: i.value.as_ref(),
            })
        })
        .collect();
    infer_op(op, &facts, n)
}

fn infer(op: &Op, inputs: &[Option<Input>]) -> Result<Vec<Dim>, OpError> {
    infer_n(op, inputs, 1).map(|mut o| o.remove(0).shape)
}

fn b() -> Dim {
    Dim::Named("batch".into())
}

fn f(n: usize) -> Dim {
    Dim::Fixed(n)
}

const U: Dim = Dim::Unknown;

#[test]
fn reshape_solves_minus_one_around_named_dims() {
    let x = || data(DType::F32, vec![b(), f(3), f(4)]);
    let reshape = Op::Reshape { allowzero: false };
    assert_eq!(
        infer(&reshape, &[x(), ints(&[0, -1])]),
        Ok(vec![b(), f(12)])
    );
    assert_eq!(
        infer(&reshape, &[x(), ints(&[-1, 12])]),
        Ok(vec![b(), f(12)])
    );
    assert_eq!(infer(&reshape, &[x(), ints(&[-1, 4])]), Ok(vec![U, f(4)]));
    assert_eq!(
        infer(&reshape, &[x(), ints(&[0, 2, 6])]),
        Ok(vec![b(), f(2), f(6)])
    );
    // Fully fixed: exact, and a bad count is caught at build time naming both shapes.
    let y = || data(DType::F32, vec![f(2), f(3)]);
    assert_eq!(
        infer(&reshape, &[y(), ints(&[3, -1])]),
        Ok(vec![f(3), f(2)])
    );
    let e = infer(&reshape, &[y(), ints(&[4])]).expect_err("6 into 4");
    assert!(
        e.to_string().contains("[2, 3]") && e.to_string().contains("[4]"),
        "{e}"
    );
    // A copied named dim might be 0 at run time, when any target fits: no error yet.
    assert_eq!(infer(&reshape, &[x(), ints(&[0, 5])]), Ok(vec![b(), f(5)]));
    let empty = || data(DType::F32, vec![f(0), f(3)]);
    assert_eq!(
        infer(&reshape, &[empty(), ints(&[0, 4])]),
        Ok(vec![f(0), f(4)])
    );
    let e = infer(&reshape, &[empty(), ints(&[0, -1])]).expect_err("ambiguous -1");
    assert!(e.to_string().contains("ambiguous"), "{e}");
    // Unknown values of a known length give the rank.
    assert_eq!(infer(&reshape, &[x(), unknown_ints(3)]), Ok(vec![U, U, U]));
    let unknown_len = data(DType::I64, vec![U]);
    assert_eq!(
        infer(&reshape, &[x(), unknown_len]),
        Err(OpError::NotConstant {
            index: 1,
            name: "shape"
        })
    );
}

#[test]
fn slice_passes_named_dims_only_through_whole_axis_slices() {
    let x = || data(DType::F32, vec![b(), f(10)]);
    let whole = [ints(&[0]), ints(&[i64::MAX]), ints(&[0])];
    let [s, e, a] = whole;
    assert_eq!(infer(&Op::Slice, &[x(), s, e, a]), Ok(vec![b(), f(10)]));
    assert_eq!(
        infer(
            &Op::Slice,
            &[x(), ints(&[1]), ints(&[i64::MAX]), ints(&[0])]
        ),
        Ok(vec![U, f(10)])
    );
    // Exact on fixed axes, negative steps included.
    assert_eq!(
        infer(
            &Op::Slice,
            &[x(), ints(&[8]), ints(&[1]), ints(&[-1]), ints(&[-3])]
        ),
        Ok(vec![b(), f(3)])
    );
    // Ends not constant: the listed axis becomes unknown, the rest are kept.
    assert_eq!(
        infer(&Op::Slice, &[x(), ints(&[1]), unknown_ints(1), ints(&[1])]),
        Ok(vec![b(), U])
    );
    // Axes not constant either: every axis is unknown, the rank is kept.
    assert_eq!(
        infer(
            &Op::Slice,
            &[x(), ints(&[1]), unknown_ints(1), unknown_ints(1)]
        ),
        Ok(vec![U, U])
    );
}

#[test]
fn squeeze_and_unsqueeze_with_symbolic_dims() {
    let x = || data(DType::F32, vec![b(), f(1), f(4)]);
    assert_eq!(infer(&Op::Squeeze, &[x(), ints(&[1])]), Ok(vec![b(), f(4)]));
    assert_eq!(infer(&Op::Squeeze, &[x(), unknown_ints(1)]), Ok(vec![U, U]));
    // Without axes, whether `batch` is 1 decides the rank: a type that waits for folding,
    // and says why.
    let e = infer(&Op::Squeeze, &[x()]).expect_err("the rank depends on `batch`");
    assert!(
        matches!(&e, OpError::NeedsFolding(why) if why.contains("without axes") && why.contains("batch")),
        "{e:?}"
    );
    let e = infer(&Op::Squeeze, &[x(), ints(&[2])]).expect_err("extent 4");
    assert!(matches!(e, OpError::Shape(_)), "{e:?}");
    assert_eq!(
        infer(&Op::Unsqueeze, &[x(), ints(&[-1, 0])]),
        Ok(vec![f(1), b(), f(1), f(4), f(1)])
    );
    assert_eq!(
        infer(&Op::Unsqueeze, &[x(), unknown_ints(2)]),
        Ok(vec![U, U, U, U, U])
    );
    // Axes given as a scalar name one axis (onnxruntime's and ONNX's reference reading).
    let axis = |a: i64| constant(Tensor::scalar_i64(a));
    assert_eq!(
        infer(&Op::Unsqueeze, &[x(), axis(-1)]),
        Ok(vec![b(), f(1), f(4), f(1)])
    );
    assert_eq!(infer(&Op::Squeeze, &[x(), axis(1)]), Ok(vec![b(), f(4)]));
    let matrix = constant(Tensor::from_i64([1, 1], vec![1]).expect("[1, 1] axes"));
    let e = infer(&Op::Unsqueeze, &[x(), matrix]).expect_err("2-D axes");
    assert!(matches!(e, OpError::Shape(_)), "{e:?}");
    // A scalar (PyTorch's Gather of a Shape) becomes [1] wherever the axis goes.
    let scalar = || data(DType::I64, vec![]);
    assert_eq!(
        infer(&Op::Unsqueeze, &[scalar(), unknown_ints(1)]),
        Ok(vec![f(1)])
    );
}

#[test]
fn concat_and_split_with_symbolic_dims() {
    let a = || data(DType::F32, vec![b(), f(3)]);
    let c = || data(DType::F32, vec![b(), f(5)]);
    assert_eq!(
        infer(&Op::Concat { axis: -1 }, &[a(), c()]),
        Ok(vec![b(), f(8)])
    );
    let d = || data(DType::F32, vec![f(2), f(3)]);
    assert_eq!(
        infer(&Op::Concat { axis: 0 }, &[a(), d()]),
        Ok(vec![U, f(3)])
    );
    let e = infer(&Op::Concat { axis: 0 }, &[a(), c()]).expect_err("3 vs 5 off the axis");
    assert!(matches!(e, OpError::Shape(_)), "{e:?}");

    let split = Op::Split {
        axis: 0,
        num_outputs: 2,
    };
    let shapes = |r: Result<Vec<OutputFact>, OpError>| {
        r.map(|o| o.into_iter().map(|f| f.shape).collect::<Vec<_>>())
    };
    assert_eq!(
        shapes(infer_n(&split, &[a()], 2)),
        Ok(vec![vec![U, f(3)], vec![U, f(3)]])
    );
    assert_eq!(
        shapes(infer_n(&split, &[a(), ints(&[1, 2])], 2)),
        Ok(vec![vec![f(1), f(3)], vec![f(2), f(3)]])
    );
    let split1 = Op::Split {
        axis: 1,
        num_outputs: 2,
    };
    assert_eq!(
        shapes(infer_n(&split1, &[c()], 2)),
        Ok(vec![vec![b(), f(3)], vec![b(), f(2)]])
    );
}

#[test]
fn layout_ops_keep_named_dims() {
    let x = || data(DType::F16, vec![b(), f(3), f(4)]);
    assert_eq!(
        infer(&Op::Flatten { axis: 1 }, &[x()]),
        Ok(vec![b(), f(12)])
    );
    assert_eq!(infer(&Op::Flatten { axis: 2 }, &[x()]), Ok(vec![U, f(4)]));
    assert_eq!(
        infer(
            &Op::Transpose {
                perm: Some(vec![2, 0, 1])
            },
            &[x()]
        ),
        Ok(vec![f(4), b(), f(3)])
    );
    let pad = Op::Pad {
        mode: PadMode::Reflect,
    };
    assert_eq!(
        infer(&pad, &[x(), ints(&[0, 1, -1, 0, 1, 2])]),
        Ok(vec![b(), f(5), f(5)])
    );
    assert_eq!(
        infer(&pad, &[x(), ints(&[1, 0, 0, 0, 0, 0])]),
        Ok(vec![U, f(3), f(4)])
    );
    assert_eq!(
        infer(&pad, &[x(), unknown_ints(2), None, ints(&[-1])]),
        Ok(vec![b(), f(3), U])
    );
}

#[test]
fn expand_with_constant_and_unknown_targets() {
    let x = || data(DType::Bool, vec![b(), f(1)]);
    assert_eq!(
        infer(&Op::Expand, &[x(), ints(&[1, 4])]),
        Ok(vec![b(), f(4)])
    );
    assert_eq!(
        infer(&Op::Expand, &[x(), ints(&[2, 1, 4])]),
        Ok(vec![f(2), b(), f(4)])
    );
    let y = || data(DType::F32, vec![f(3), f(1)]);
    assert_eq!(
        infer(&Op::Expand, &[y(), unknown_ints(3)]),
        Ok(vec![U, f(3), U])
    );
    let e = infer(&Op::Expand, &[y(), ints(&[2, 1])]).expect_err("3 vs 2");
    assert!(matches!(e, OpError::Shape(_)), "{e:?}");
}

#[test]
fn shape_gather_cast_and_dropout() {
    let x = || data(DType::F32, vec![b(), f(3), f(4)]);
    let shape = infer_n(
        &Op::Shape {
            start: 1,
            end: None,
        },
        &[x()],
        1,
    )
    .expect("shape");
    assert_eq!(shape[0], OutputFact::new(DType::I64, vec![f(2)]));

    let idx = constant(Tensor::from_i64([2, 2], vec![0, 1, 2, -3]).expect("indices"));
    assert_eq!(
        infer(&Op::Gather { axis: 1 }, &[x(), idx]),
        Ok(vec![b(), f(2), f(2), f(4)])
    );
    let bad = constant(Tensor::vec_i64(vec![3]));
    let e = infer(&Op::Gather { axis: 1 }, &[x(), bad]).expect_err("3 of extent 3");
    assert!(e.to_string().contains("index 3"), "{e}");

    let cast = infer_n(&Op::Cast { to: DType::I64 }, &[x()], 1).expect("cast");
    assert_eq!(cast[0], OutputFact::new(DType::I64, vec![b(), f(3), f(4)]));

    let on = constant(Tensor::from_bool(Vec::<usize>::new(), vec![true]).expect("flag"));
    let e = infer(&Op::Dropout, &[x(), None, on]).expect_err("training");
    assert!(matches!(e, OpError::Unsupported(_)), "{e:?}");
    let outs = infer_n(&Op::Dropout, &[x()], 2).expect("dropout with mask");
    assert_eq!(outs[1], OutputFact::new(DType::Bool, vec![b(), f(3), f(4)]));
}
