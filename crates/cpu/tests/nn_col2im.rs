//! Reference kernel for Col2Im: hand-computed images for overlapping, strided, padded and
//! dilated blocks in one and two dimensions, integer wrap-around, and its inference. The
//! ONNX node tests and a golden case from onnxruntime check larger inputs.

// Tests fail by panicking; the workspace's production lint does not apply here.
#![allow(clippy::panic)]

use concord_core::infer::infer_on_tensors;
use concord_core::{Dim, Op, OpError, Tensor};
use concord_cpu::run_op;

fn f32s(dims: &[usize], v: &[f32]) -> Tensor {
    match Tensor::from_f32(dims.to_vec(), v.to_vec()) {
        Ok(t) => t,
        Err(e) => panic!("bad test tensor: {e}"),
    }
}

fn col2im(dilations: &[usize], pads: &[usize], strides: &[usize]) -> Op {
    Op::Col2Im {
        dilations: dilations.to_vec(),
        pads: pads.to_vec(),
        strides: strides.to_vec(),
    }
}

fn run(op: &Op, x: &Tensor, image: &[i64], block: &[i64]) -> Result<Tensor, OpError> {
    let image = Tensor::vec_i64(image.to_vec());
    let block = Tensor::vec_i64(block.to_vec());
    run_op(op, &[Some(x), Some(&image), Some(&block)], 1).map(|mut v| v.remove(0))
}

fn one(op: &Op, x: &Tensor, image: &[i64], block: &[i64]) -> Tensor {
    match run(op, x, image, block) {
        Ok(t) => t,
        Err(e) => panic!("{op:?}: {e}"),
    }
}

fn check(t: &Tensor, dims: &[usize], values: &[f64]) {
    assert_eq!(t.dims(), dims, "shape");
    assert_eq!(t.to_f64_vec(), values, "values");
}

#[test]
fn overlapping_blocks_sum() {
    // 2×2 blocks of ones at unit stride over a 3×3 image: 4 blocks, and each element gets
    // one 1 per block covering it.
    let x = f32s(&[1, 4, 4], &[1.0; 16]);
    check(
        &one(&col2im(&[], &[], &[]), &x, &[3, 3], &[2, 2]),
        &[1, 1, 3, 3],
        &[1.0, 2.0, 1.0, 2.0, 4.0, 2.0, 1.0, 2.0, 1.0],
    );
}

#[test]
fn strided_blocks_tile_the_image() {
    // Stride 2: four 2×2 blocks tile a 4×4 image. Input row t is the block tap (row-major
    // over the 2×2 block), column l the block (row-major over the 2×2 grid of blocks), and
    // the value is 4·t + l; image element (y, x) is tap (y % 2, x % 2) of block
    // (y / 2, x / 2).
    let v: Vec<f32> = (0..16).map(|i| i as f32).collect();
    let x = f32s(&[1, 4, 4], &v);
    let y = one(&col2im(&[], &[], &[2, 2]), &x, &[4, 4], &[2, 2]);
    let mut want = Vec::new();
    for row in 0..4 {
        for col in 0..4 {
            let tap = (row % 2) * 2 + col % 2;
            let block = (row / 2) * 2 + col / 2;
            want.push((4 * tap + block) as f64);
        }
    }
    check(&y, &[1, 1, 4, 4], &want);
    // Two channels: rows 0–3 are channel 0's taps, rows 4–7 channel 1's.
    let two = f32s(&[1, 8, 1], &[1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0]);
    check(
        &one(&col2im(&[], &[], &[]), &two, &[2, 2], &[2, 2]),
        &[1, 2, 2, 2],
        &[1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0],
    );
}

#[test]
fn pads_drop_what_falls_outside() {
    // 1-D: image 5, block 3, pads 1 + 1, stride 2: the padded 7 holds 3 blocks at padded 0,
    // 2, 4, covering image -1…1, 1…3 and 3…5. With ones: 0 gets 1 (block 0), 1 gets 2
    // (blocks 0 and 1), 2 gets 1, 3 gets 2, 4 gets 1; -1 and 5 are dropped.
    let x = f32s(&[1, 3, 3], &[1.0; 9]);
    check(
        &one(&col2im(&[], &[1, 1], &[2]), &x, &[5], &[3]),
        &[1, 1, 5],
        &[1.0, 2.0, 1.0, 2.0, 1.0],
    );
}

#[test]
fn dilated_taps_skip_elements() {
    // 1-D: image 5, block 2 with dilation 3 spans 4, so 2 blocks; block l's taps land on
    // l and l + 3. Input rows are taps: tap 0 = (1, 2), tap 1 = (3, 4).
    let x = f32s(&[1, 2, 2], &[1.0, 2.0, 3.0, 4.0]);
    check(
        &one(&col2im(&[3], &[], &[]), &x, &[5], &[2]),
        &[1, 1, 5],
        &[1.0, 2.0, 0.0, 3.0, 4.0],
    );
}

#[test]
fn integers_sum_exactly_and_wrap_once() {
    // i8 100s over the 3×3 image of overlapping 2×2 blocks: 100, 200, 400 wrap to 100,
    // -56, -112 (modulo 256), as numpy's `+=` on int8 gives.
    let x = match Tensor::from_vec(vec![1, 4, 4], vec![100i8; 16]) {
        Ok(t) => t,
        Err(e) => panic!("{e}"),
    };
    let y = one(&col2im(&[], &[], &[]), &x, &[3, 3], &[2, 2]);
    assert_eq!(y.dtype(), concord_core::DType::I8);
    assert_eq!(
        y.to_f64_vec(),
        vec![100.0, -56.0, 100.0, -56.0, -112.0, -56.0, 100.0, -56.0, 100.0]
    );
    // bool sums are "any".
    let b = match Tensor::from_bool(vec![1, 2, 2], vec![true, false, false, false]) {
        Ok(t) => t,
        Err(e) => panic!("{e}"),
    };
    let y = one(&col2im(&[], &[], &[]), &b, &[3], &[2]);
    assert_eq!(y.as_bool(), Some(&[true, false, false][..]));
}

#[test]
fn inconsistent_operands_are_refused() {
    let x = f32s(&[1, 4, 4], &[1.0; 16]);
    let op = col2im(&[], &[], &[]);
    // 5 blocks' worth of columns where 3×3 with 2×2 blocks has 4.
    let five = f32s(&[1, 4, 5], &[1.0; 20]);
    assert!(matches!(
        run(&op, &five, &[3, 3], &[2, 2]),
        Err(OpError::Shape(_))
    ));
    // Rows not a multiple of the block size.
    let three = f32s(&[1, 3, 4], &[1.0; 12]);
    assert!(run(&op, &three, &[3, 3], &[2, 2]).is_err());
    // image_shape and block_shape of different lengths, a block larger than the image, a
    // non-positive extent, and pads of the wrong length.
    assert!(run(&op, &x, &[3, 3], &[4]).is_err());
    assert!(run(&op, &x, &[1, 1], &[2, 2]).is_err());
    assert!(run(&op, &x, &[3, 0], &[2, 2]).is_err());
    assert!(matches!(
        run(&col2im(&[], &[1], &[]), &x, &[3, 3], &[2, 2]),
        Err(OpError::Attribute { name: "pads", .. })
    ));
}

#[test]
fn inference_matches_the_kernel() {
    use concord_core::infer::{infer_op, ValueFact};
    use concord_core::DType;
    let fixed = |d: &[usize]| d.iter().map(|&e| Dim::Fixed(e)).collect::<Vec<Dim>>();
    let x = f32s(&[2, 8, 4], &[0.0; 64]);
    let image = Tensor::vec_i64(vec![3, 3]);
    let block = Tensor::vec_i64(vec![2, 2]);
    let op = col2im(&[], &[], &[]);
    let inputs = [Some(&x), Some(&image), Some(&block)];
    let inferred = infer_on_tensors(&op, &inputs, 1).map(|mut v| v.remove(0).shape);
    let ran = run_op(&op, &inputs, 1).map(|v| v[0].dims().to_vec());
    assert_eq!(inferred.ok(), Some(fixed(&[2, 2, 3, 3])));
    assert_eq!(ran.ok(), Some(vec![2, 2, 3, 3]));
    // Inference refuses what the kernel refuses: a column count that is not the blocks'.
    let five = f32s(&[1, 4, 5], &[0.0; 20]);
    assert!(infer_on_tensors(&op, &[Some(&five), Some(&image), Some(&block)], 1).is_err());

    // Runtime image_shape and block_shape: N known, C and the extents unknown, of the rank
    // image_shape's length gives.
    let x_shape = [Dim::Named("n".into()), Dim::Fixed(8), Dim::Unknown];
    let two = fixed(&[2]);
    let fact = |dtype, shape| {
        Some(ValueFact {
            dtype,
            shape,
            value: None,
        })
    };
    let facts = [
        fact(DType::F32, &x_shape[..]),
        fact(DType::I64, &two[..]),
        fact(DType::I64, &two[..]),
    ];
    assert_eq!(
        infer_op(&op, &facts, 1).map(|mut v| v.remove(0).shape).ok(),
        Some(vec![
            Dim::Named("n".into()),
            Dim::Unknown,
            Dim::Unknown,
            Dim::Unknown
        ])
    );
}

#[test]
fn accumulation_figures_count_the_overlaps() {
    // 2×2 blocks at unit stride over 3×3: at most 2 blocks overlap along each axis, so
    // the centre sums 2·2 = 4 terms; Σ|terms| is Col2Im of |input|.
    let x = f32s(&[1, 4, 4], &[-1.0; 16]);
    let image = Tensor::vec_i64(vec![3, 3]);
    let block = Tensor::vec_i64(vec![2, 2]);
    let op = col2im(&[], &[], &[]);
    let figures = concord_cpu::accumulation(&op, &[Some(&x), Some(&image), Some(&block)]);
    let figures = match figures {
        Ok(Some(f)) => f,
        other => panic!("{other:?}"),
    };
    assert_eq!(figures.k, 4);
    assert_eq!(
        figures.magnitude,
        vec![1.0, 2.0, 1.0, 2.0, 4.0, 2.0, 1.0, 2.0, 1.0]
    );
    // Stride 2 tiles without overlap: one term each.
    let tiles = f32s(&[1, 4, 4], &[1.0; 16]);
    let image = Tensor::vec_i64(vec![4, 4]);
    let op = col2im(&[], &[], &[2, 2]);
    let figures = concord_cpu::accumulation(&op, &[Some(&tiles), Some(&image), Some(&block)]);
    assert_eq!(figures.ok().flatten().map(|f| f.k), Some(1));
}
