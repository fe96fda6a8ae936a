//! Shape inference for the nn family (concord-core `infer/nn.rs`): it must predict exactly
//! the shapes the reference kernels produce, pass symbolic dims through where the output
//! provably equals them, and reject what the kernels reject with the same kind of error.

mod nn_support;

use concord_core::infer::{infer_op, ValueFact};
use concord_core::op::{AutoPad, Conv, CoordinateTransform, Gemm, Pool, Resize, ResizeMode};
use concord_core::{DType, Dim, Op, OpError, Tensor};
use nn_support::{f32s, i64s, infer_dims, run_and_check_inference, values};

fn zeros(dims: &[usize]) -> Tensor {
    Tensor::zeros(DType::F32, dims)
}

fn conv(attrs: Conv) -> Op {
    Op::Conv(Conv { group: 1, ..attrs })
}

fn grouped(group: usize, attrs: Conv) -> Op {
    Op::Conv(Conv { group, ..attrs })
}

#[test]
fn conv_inference_matches_the_kernel() {
    let cases: Vec<(Op, Vec<usize>, Vec<usize>)> = vec![
        (conv(Conv::default()), vec![1, 3, 7, 7], vec![4, 3, 3, 3]),
        (
            conv(Conv {
                strides: vec![2, 3],
                dilations: vec![2, 1],
                pads: vec![1, 0, 2, 3],
                ..Conv::default()
            }),
            vec![2, 3, 11, 10],
            vec![5, 3, 3, 2],
        ),
        (
            grouped(
                4,
                Conv {
                    strides: vec![2, 2],
                    pads: vec![1, 1, 1, 1],
                    ..Conv::default()
                },
            ),
            vec![1, 4, 9, 9],
            vec![8, 1, 3, 3],
        ),
        (
            conv(Conv {
                auto_pad: AutoPad::SameUpper,
                strides: vec![2, 2],
                ..Conv::default()
            }),
            vec![1, 2, 7, 6],
            vec![3, 2, 4, 3],
        ),
        (
            conv(Conv {
                auto_pad: AutoPad::SameLower,
                dilations: vec![2, 2],
                ..Conv::default()
            }),
            vec![1, 2, 7, 6],
            vec![3, 2, 3, 3],
        ),
        (
            conv(Conv {
                auto_pad: AutoPad::Valid,
                strides: vec![2, 2],
                ..Conv::default()
            }),
            vec![1, 2, 8, 7],
            vec![3, 2, 3, 3],
        ),
        (
            conv(Conv {
                strides: vec![3],
                pads: vec![2, 1],
                ..Conv::default()
            }),
            vec![2, 3, 11],
            vec![5, 3, 4],
        ),
        (
            conv(Conv {
                strides: vec![1, 2, 1],
                pads: vec![1, 0, 1, 0, 1, 1],
                ..Conv::default()
            }),
            vec![1, 2, 4, 5, 3],
            vec![3, 2, 2, 3, 2],
        ),
    ];
    for (op, x_dims, w_dims) in cases {
        let x = zeros(&x_dims);
        let w = zeros(&w_dims);
        let b = zeros(&[w_dims[0]]);
        run_and_check_inference(&op, &[Some(&x), Some(&w), Some(&b)], &[]);
    }
}

#[test]
fn gemm_and_matmul_inference_match_the_kernels() {
    for trans_a in [false, true] {
        for trans_b in [false, true] {
            let a = zeros(if trans_a { &[4, 3] } else { &[3, 4] });
            let b = zeros(if trans_b { &[5, 4] } else { &[4, 5] });
            let c = zeros(&[5]);
            let op = Op::Gemm(Gemm {
                trans_a,
                trans_b,
                ..Gemm::default()
            });
            run_and_check_inference(&op, &[Some(&a), Some(&b), Some(&c)], &[]);
            run_and_check_inference(&op, &[Some(&a), Some(&b), None], &[]);
        }
    }
    let pairs: [(&[usize], &[usize]); 7] = [
        (&[3], &[3]),
        (&[2], &[2, 3]),
        (&[2, 3], &[3]),
        (&[2, 3, 4], &[2, 4, 5]),
        (&[2, 1, 3, 4], &[3, 4, 5]),
        (&[4], &[2, 4, 5]),
        (&[2, 3, 4], &[4]),
    ];
    for (a, b) in pairs {
        run_and_check_inference(&Op::MatMul, &[Some(&zeros(a)), Some(&zeros(b))], &[]);
    }
}

#[test]
fn pool_inference_matches_the_kernels() {
    let cases: Vec<(Pool, Vec<usize>)> = vec![
        (
            Pool {
                kernel_shape: vec![3, 3],
                strides: vec![2, 2],
                pads: vec![1, 1, 1, 1],
                ..Pool::default()
            },
            vec![1, 2, 112, 112],
        ),
        (
            Pool {
                kernel_shape: vec![2, 3],
                strides: vec![2, 2],
                pads: vec![1, 0, 1, 1],
                dilations: vec![2, 1],
                ceil_mode: true,
                ..Pool::default()
            },
            vec![1, 2, 9, 8],
        ),
        (
            Pool {
                kernel_shape: vec![1],
                strides: vec![2],
                ceil_mode: true,
                ..Pool::default()
            },
            vec![1, 1, 2],
        ),
        (
            Pool {
                kernel_shape: vec![3, 2, 2],
                auto_pad: AutoPad::SameUpper,
                strides: vec![2, 2, 3],
                ..Pool::default()
            },
            vec![2, 1, 5, 6, 7],
        ),
    ];
    for (attrs, x_dims) in cases {
        let x = zeros(&x_dims);
        run_and_check_inference(&Op::MaxPool(attrs.clone()), &[Some(&x)], &[]);
        run_and_check_inference(&Op::AveragePool(attrs), &[Some(&x)], &[]);
    }
    let x = zeros(&[2, 3, 4, 5]);
    run_and_check_inference(&Op::GlobalAveragePool, &[Some(&x)], &[]);
}

#[test]
fn resize_inference_reads_constant_scales_and_sizes() {
    let x = f32s(
        &[1, 1, 2, 10],
        &values(20, 1).iter().map(|&v| v as f32).collect::<Vec<_>>(),
    );
    // 10 · 0.7 in f32 rounds to exactly 7 (onnxruntime's arithmetic; float64 would give
    // 6.99999988 and floor to 6). Kernel and inference must agree on 7.
    let scales = f32s(&[4], &[1., 1., 2., 0.7]);
    let op = Op::Resize(Resize::default());
    let y = run_and_check_inference(&op, &[Some(&x), None, Some(&scales)], &[2]);
    assert_eq!(y.dims(), [1, 1, 4, 7]);
    let sizes = i64s(&[4], &[1, 1, 3, 5]);
    let linear = Op::Resize(Resize {
        mode: ResizeMode::Linear,
        ..Resize::default()
    });
    run_and_check_inference(&linear, &[Some(&x), None, None, Some(&sizes)], &[3]);
    // Not constant: the rank is known, the extents are not.
    assert_eq!(
        infer_dims(&op, &[Some(&x), None, Some(&scales)], &[]),
        Ok(vec![Dim::Unknown; 4])
    );
}

#[test]
fn tf_crop_and_resize_extents_ignore_the_roi() {
    // onnxruntime and the ONNX reference implementation size the output from scales alone:
    // floor(4 · 1.5) = 6 on each cropped axis, not floor(4 · (0.6 − 0.4) · 1.5) = 1.
    let x = f32s(
        &[1, 1, 4, 4],
        &values(16, 1).iter().map(|&v| v as f32).collect::<Vec<_>>(),
    );
    let roi = f32s(&[8], &[0., 0., 0.4, 0.6, 1., 1., 0.6, 0.8]);
    let scales = f32s(&[4], &[1., 1., 1.5, 1.5]);
    let crop = Op::Resize(Resize {
        mode: ResizeMode::Linear,
        coordinate_transformation_mode: CoordinateTransform::TfCropAndResize,
        ..Resize::default()
    });
    let y = run_and_check_inference(&crop, &[Some(&x), Some(&roi), Some(&scales)], &[2]);
    assert_eq!(y.dims(), [1, 1, 6, 6]);
    // A roi of the wrong length is refused when the net is built.
    let short = f32s(&[4], &[0.4, 0.6, 0.6, 0.8]);
    let e = infer_dims(&crop, &[Some(&x), Some(&short), Some(&scales)], &[2])
        .expect_err("4 roi values for 4 axes");
    assert!(matches!(e, OpError::Shape(_)), "{e:?}");
    assert!(e.to_string().contains("roi has 4 values"), "{e}");
}

fn named(name: &str) -> Dim {
    Dim::Named(name.into())
}

fn fact(dtype: DType, shape: &[Dim]) -> ValueFact<'_> {
    ValueFact {
        dtype,
        shape,
        value: None,
    }
}

fn infer_one(op: &Op, inputs: &[Option<ValueFact>]) -> Result<Vec<Dim>, OpError> {
    infer_op(op, inputs, 1).map(|mut v| v.remove(0).shape)
}

#[test]
fn symbolic_dims_pass_through_where_the_output_equals_them() {
    use Dim::{Fixed, Unknown};
    let x = [named("batch"), Fixed(3), named("h"), named("w")];
    let w = [Fixed(8), Fixed(3), Fixed(3), Fixed(3)];
    // 3x3, pad 1, stride 1 keeps the spatial extents, whatever they are.
    let same_size = conv(Conv {
        pads: vec![1, 1, 1, 1],
        ..Conv::default()
    });
    let out = infer_one(
        &same_size,
        &[Some(fact(DType::F32, &x)), Some(fact(DType::F32, &w))],
    );
    assert_eq!(
        out,
        Ok(vec![named("batch"), Fixed(8), named("h"), named("w")])
    );
    // Stride 2: the extents cannot be computed.
    let strided = conv(Conv {
        pads: vec![1, 1, 1, 1],
        strides: vec![2, 2],
        ..Conv::default()
    });
    let out = infer_one(
        &strided,
        &[Some(fact(DType::F32, &x)), Some(fact(DType::F32, &w))],
    );
    assert_eq!(out, Ok(vec![named("batch"), Fixed(8), Unknown, Unknown]));
    // SAME with stride 1 keeps them too.
    let pool = Op::MaxPool(Pool {
        kernel_shape: vec![3, 3],
        auto_pad: AutoPad::SameUpper,
        ..Pool::default()
    });
    let out = infer_one(&pool, &[Some(fact(DType::F32, &x))]);
    assert_eq!(out, Ok(x.to_vec()));
    // MatMul batch axes broadcast symbolically.
    let a = [named("batch"), Fixed(3), Fixed(4)];
    let b = [Fixed(4), Fixed(5)];
    let out = infer_one(
        &Op::MatMul,
        &[Some(fact(DType::F32, &a)), Some(fact(DType::F32, &b))],
    );
    assert_eq!(out, Ok(vec![named("batch"), Fixed(3), Fixed(5)]));
    // GlobalAveragePool keeps N and C.
    let out = infer_one(&Op::GlobalAveragePool, &[Some(fact(DType::F16, &x))]);
    assert_eq!(out, Ok(vec![named("batch"), Fixed(3), Fixed(1), Fixed(1)]));
}

#[test]
fn resize_scale_one_keeps_a_symbolic_dim() {
    let x = [named("batch"), Dim::Fixed(3), named("h"), Dim::Fixed(5)];
    let scales = f32s(&[4], &[1., 1., 2., 2.]);
    let scales_shape = [Dim::Fixed(4)];
    let facts = [
        Some(fact(DType::F32, &x)),
        None,
        Some(ValueFact {
            dtype: DType::F32,
            shape: &scales_shape,
            value: Some(&scales),
        }),
    ];
    let out = infer_one(&Op::Resize(Resize::default()), &facts);
    assert_eq!(
        out,
        Ok(vec![
            named("batch"),
            Dim::Fixed(3),
            Dim::Unknown,
            Dim::Fixed(10)
        ])
    );
}

#[test]
fn inference_rejects_what_the_kernel_rejects() {
    use Dim::Fixed;
    let f = |dims: &'static [usize]| dims.iter().map(|&d| Fixed(d)).collect::<Vec<_>>();
    let (x, w_rank3, w_channels, w_odd) = (
        f(&[1, 4, 5, 5]),
        f(&[2, 4, 3]),
        f(&[2, 3, 3, 3]),
        f(&[3, 2, 1, 1]),
    );
    let shape_error = |op: &Op, w: &[Dim]| {
        matches!(
            infer_one(op, &[Some(fact(DType::F32, &x)), Some(fact(DType::F32, w))]),
            Err(OpError::Shape(_))
        )
    };
    assert!(shape_error(&conv(Conv::default()), &w_rank3));
    assert!(shape_error(&conv(Conv::default()), &w_channels));
    assert!(shape_error(&grouped(2, Conv::default()), &w_odd));
    let w16 = f(&[2, 4, 3, 3]);
    assert!(matches!(
        infer_one(
            &conv(Conv::default()),
            &[Some(fact(DType::F32, &x)), Some(fact(DType::F16, &w16))]
        ),
        Err(OpError::DType { index: 1, .. })
    ));
    let xi = f(&[1, 1, 4, 4]);
    assert!(matches!(
        infer_one(&Op::GlobalAveragePool, &[Some(fact(DType::I64, &xi))]),
        Err(OpError::DType { index: 0, .. })
    ));
    let (a, b) = (f(&[2, 3]), f(&[4, 5]));
    assert!(matches!(
        infer_one(
            &Op::Gemm(Gemm::default()),
            &[Some(fact(DType::F32, &a)), Some(fact(DType::F32, &b))]
        ),
        Err(OpError::Shape(_))
    ));
    let pool = Op::MaxPool(Pool {
        kernel_shape: vec![2, 2],
        ..Pool::default()
    });
    // MaxPool has Y and the optional Indices (i64, Y's shape), and no third output.
    let two = infer_op(&pool, &[Some(fact(DType::F32, &x))], 2);
    assert_eq!(
        two.map(|facts| facts.iter().map(|f| f.dtype).collect::<Vec<_>>()),
        Ok(vec![DType::F32, DType::I64])
    );
    assert!(matches!(
        infer_op(&pool, &[Some(fact(DType::F32, &x))], 3),
        Err(OpError::Unsupported(_))
    ));
}
