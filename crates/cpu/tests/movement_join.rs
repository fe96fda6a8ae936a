//! Concat and Split kernels on hand-computed examples: negative axes, empty parts, every
//! dtype, uneven splits (opset 18) and typed errors for mismatched operands.

mod movement_support;

use concord_core::{DType, Op, OpError};
use movement_support::*;

#[test]
fn concat_joins_along_the_last_axis() {
    // [[1,2],[3,4]] ++ [[5],[6]] on axis 1.
    let a = f32s(&[2, 2], &[1.0, 2.0, 3.0, 4.0]);
    let b = f32s(&[2, 1], &[5.0, 6.0]);
    let want = f32s(&[2, 3], &[1.0, 2.0, 5.0, 3.0, 4.0, 6.0]);
    assert_same(&ok(&Op::Concat { axis: 1 }, &[&a, &b]), &want);
    assert_same(&ok(&Op::Concat { axis: -1 }, &[&a, &b]), &want);
}

#[test]
fn concat_joins_along_the_first_axis() {
    let a = i64s(&[1, 2], &[1, 2]);
    let b = i64s(&[2, 2], &[3, 4, 5, 6]);
    let want = i64s(&[3, 2], &[1, 2, 3, 4, 5, 6]);
    assert_same(&ok(&Op::Concat { axis: 0 }, &[&a, &b]), &want);
    assert_same(&ok(&Op::Concat { axis: -2 }, &[&a, &b]), &want);
}

#[test]
fn concat_of_shape_pieces_builds_a_target_shape() {
    // The PyTorch pattern: [batch] ++ [-1].
    let got = ok(&Op::Concat { axis: 0 }, &[&ints(&[2]), &ints(&[-1])]);
    assert_same(&got, &ints(&[2, -1]));
}

#[test]
fn concat_skips_empty_parts() {
    let empty = f32s(&[2, 0], &[]);
    let b = f32s(&[2, 2], &[1.0, 2.0, 3.0, 4.0]);
    assert_same(&ok(&Op::Concat { axis: 1 }, &[&empty, &b, &empty]), &b);
    let all_empty = ok(&Op::Concat { axis: 1 }, &[&empty, &empty]);
    assert_same(&all_empty, &f32s(&[2, 0], &[]));
}

#[test]
fn concat_keeps_bits_of_every_dtype() {
    let a = bools(&[2], &[true, false]);
    let b = bools(&[1], &[true]);
    assert_same(
        &ok(&Op::Concat { axis: 0 }, &[&a, &b]),
        &bools(&[3], &[true, false, true]),
    );
    let h = f16s(&[1], &[0.1]);
    let got = ok(&Op::Concat { axis: 0 }, &[&h, &h]);
    assert_same(&got, &f16s(&[2], &[0.1, 0.1]));
    // A NaN with a payload survives untouched.
    let nan = f32::from_bits(0x7fc0_0001);
    let got = ok(
        &Op::Concat { axis: 0 },
        &[&f32s(&[1], &[nan]), &f32s(&[1], &[1.0])],
    );
    assert_eq!(got.as_f32().map(|v| v[0].to_bits()), Some(0x7fc0_0001));
}

#[test]
fn concat_rejects_mismatched_operands() {
    let a = f32s(&[2, 2], &[0.0; 4]);
    let b = f32s(&[3, 1], &[0.0; 3]);
    let e = err(&Op::Concat { axis: 1 }, &[&a, &b]);
    assert!(matches!(e, OpError::Shape(_)), "{e:?}");
    assert_mentions(&e, &["input 1", "[3, 1]", "[2, 2]"]);

    let c = i64s(&[2, 1], &[0, 0]);
    let e = err(&Op::Concat { axis: 1 }, &[&a, &c]);
    assert!(
        matches!(
            e,
            OpError::DType {
                index: 1,
                actual: DType::I64,
                ..
            }
        ),
        "{e:?}"
    );

    let e = err(&Op::Concat { axis: 2 }, &[&a, &a]);
    assert!(
        matches!(e, OpError::Attribute { name: "axis", .. }),
        "{e:?}"
    );
}

#[test]
fn split_into_equal_parts() {
    let x = f32s(&[6], &[1.0, 2.0, 3.0, 4.0, 5.0, 6.0]);
    let op = Op::Split {
        axis: 0,
        num_outputs: 3,
    };
    let parts = run_n(&op, &[Some(&x)], 3).expect("split");
    assert_eq!(parts.len(), 3);
    assert_same(&parts[0], &f32s(&[2], &[1.0, 2.0]));
    assert_same(&parts[1], &f32s(&[2], &[3.0, 4.0]));
    assert_same(&parts[2], &f32s(&[2], &[5.0, 6.0]));
}

#[test]
fn split_uneven_gives_a_smaller_last_part() {
    // Opset 18: ceil(10 / 3) = 4, so the parts are 4, 4 and 2.
    let x = i64s(&[10], &[0, 1, 2, 3, 4, 5, 6, 7, 8, 9]);
    let op = Op::Split {
        axis: 0,
        num_outputs: 3,
    };
    let parts = run_n(&op, &[Some(&x)], 3).expect("split");
    assert_same(&parts[0], &i64s(&[4], &[0, 1, 2, 3]));
    assert_same(&parts[1], &i64s(&[4], &[4, 5, 6, 7]));
    assert_same(&parts[2], &i64s(&[2], &[8, 9]));

    // 6 into 4: ceil = 2, so 2, 2, 2 and an empty last part.
    let x = i64s(&[6], &[0, 1, 2, 3, 4, 5]);
    let op = Op::Split {
        axis: 0,
        num_outputs: 4,
    };
    let parts = run_n(&op, &[Some(&x)], 4).expect("split");
    assert_same(&parts[2], &i64s(&[2], &[4, 5]));
    assert_same(&parts[3], &i64s(&[0], &[]));
}

#[test]
fn split_with_sizes_on_a_negative_axis() {
    let x = i64s(&[2, 5], &[0, 1, 2, 3, 4, 5, 6, 7, 8, 9]);
    let sizes = ints(&[2, 3]);
    let op = Op::Split {
        axis: -1,
        num_outputs: 2,
    };
    let parts = run_n(&op, &[Some(&x), Some(&sizes)], 2).expect("split");
    assert_same(&parts[0], &i64s(&[2, 2], &[0, 1, 5, 6]));
    assert_same(&parts[1], &i64s(&[2, 3], &[2, 3, 4, 7, 8, 9]));

    // A zero size gives an empty part.
    let sizes = ints(&[0, 5]);
    let parts = run_n(&op, &[Some(&x), Some(&sizes)], 2).expect("split");
    assert_same(&parts[0], &i64s(&[2, 0], &[]));
    assert_same(&parts[1], &x);
}

#[test]
fn split_rejects_bad_sizes() {
    let x = f32s(&[2, 5], &[0.0; 10]);
    let op = Op::Split {
        axis: 1,
        num_outputs: 2,
    };
    let e = run_n(&op, &[Some(&x), Some(&ints(&[2, 2]))], 2).expect_err("sum 4 != 5");
    assert_mentions(&e, &["[2, 2]", "5"]);
    let e = run_n(&op, &[Some(&x), Some(&ints(&[1, 1, 3]))], 2).expect_err("3 sizes, 2 outputs");
    assert_mentions(&e, &["3 sizes", "2 outputs"]);
    let e = run_n(&op, &[Some(&x), Some(&ints(&[6, -1]))], 2).expect_err("negative size");
    assert_mentions(&e, &["negative"]);
    // 2 cannot make 4 parts of ceil(2/4) = 1 with a smaller last one.
    let y = f32s(&[2], &[0.0; 2]);
    let op4 = Op::Split {
        axis: 0,
        num_outputs: 4,
    };
    assert!(run_n(&op4, &[Some(&y)], 4).is_err());
    // The attribute and the node's output count must agree.
    let e = run_n(&op, &[Some(&x)], 3).expect_err("attribute says 2");
    assert!(
        matches!(
            e,
            OpError::Attribute {
                name: "num_outputs",
                ..
            }
        ),
        "{e:?}"
    );
}
