//! Property strategies for the data-movement family: Concat, Split, Slice, Gather,
//! Reshape, Flatten, Transpose, Squeeze, Unsqueeze, Pad, Expand, Cast, Identity and
//! Dropout. Every operand an executor needs when it builds (axes, shapes, pads, starts
//! and ends, split sizes) is a constant input, as exporters write it.

use super::gen::{
    broadcast_shapes, case, data, dims, dims_maybe_empty, f16s, f32s, i64s, ints, long_axis,
    omitted, recipe, scalar, seed, spell_axis, with_long_axis, Attrs, Recipe, UNIFORM,
};
use crate::case::{AttributeValue, OpCase};
use proptest::prelude::*;
use proptest::sample::select;

/// The strategy of `op`, if it belongs to this family.
pub(super) fn strategy(op: &str) -> Option<BoxedStrategy<OpCase>> {
    Some(match op {
        "Concat" => concat().boxed(),
        "Split" => split().boxed(),
        "Slice" => slice().boxed(),
        "Gather" => gather().boxed(),
        "Reshape" => reshape().boxed(),
        "Flatten" => flatten().boxed(),
        "Transpose" => transpose().boxed(),
        "Squeeze" => squeeze().boxed(),
        "Unsqueeze" => unsqueeze().boxed(),
        "Pad" => pad().boxed(),
        "Expand" => expand().boxed(),
        "Cast" => cast().boxed(),
        "Identity" => identity().boxed(),
        "Dropout" => dropout().boxed(),
        _ => return None,
    })
}

/// Moving values must arrive bit for bit, NaN and infinities included, in every dtype.
const MOVING: &[Recipe] = &[
    UNIFORM,
    f32s("special", None),
    f16s("uniform", None),
    i64s(-100.0, 100.0),
];

/// `axis` reduced into `0..rank` (rank ≥ 1).
fn within(axis: usize, rank: usize) -> usize {
    axis % rank.max(1)
}

/// Concat of 1 to 4 inputs differing along the axis; inputs after the first are
/// sometimes constants.
fn concat() -> impl Strategy<Value = OpCase> {
    (
        dims(1..=4, 1..=4),
        (0usize..4, any::<bool>()),
        proptest::collection::vec((1usize..=3, any::<bool>()), 1..=4),
        recipe(MOVING),
        seed(),
    )
        .prop_map(|(base, (axis, negative), parts, values, seed)| {
            let axis = within(axis, base.len());
            let inputs = parts
                .iter()
                .enumerate()
                .map(|(i, &(len, constant))| {
                    let mut shape = base.clone();
                    shape[axis] = len;
                    data(
                        &format!("x{i}"),
                        values,
                        shape,
                        seed + i as u64,
                        i > 0 && constant,
                    )
                })
                .collect();
            let mut attrs = Attrs::new();
            attrs.insert(
                "axis".into(),
                AttributeValue::Int(spell_axis(axis, base.len(), negative)),
            );
            case("Concat", 13, attrs, inputs, 1)
        })
}

/// How a Split case says where to cut.
#[derive(Clone, Copy, Debug, PartialEq)]
enum SplitForm {
    /// The `split` input lists the sizes.
    Sizes,
    /// Equal parts by output count, no `split` input (opset 13).
    Equal,
    /// The `num_outputs` attribute (opset 18): parts of ceil(dim / n), the last smaller.
    NumOutputs,
}

/// Split into 1 to 4 outputs by sizes, equal parts, or num_outputs with a short last part.
fn split() -> impl Strategy<Value = OpCase> {
    (
        dims(1..=4, 1..=4),
        (0usize..4, any::<bool>()),
        select(&[SplitForm::Sizes, SplitForm::Equal, SplitForm::NumOutputs][..]),
        proptest::collection::vec(1usize..=3, 1..=4),
        (1usize..=3, 0usize..=2),
        recipe(MOVING),
        seed(),
    )
        .prop_map(
            |(mut shape, (axis, negative), form, sizes, (chunk, short), values, seed)| {
                let axis = within(axis, shape.len());
                let n = sizes.len();
                let mut attrs = Attrs::new();
                attrs.insert(
                    "axis".into(),
                    AttributeValue::Int(spell_axis(axis, shape.len(), negative)),
                );
                let mut extra = Vec::new();
                let opset = match form {
                    SplitForm::Sizes => {
                        shape[axis] = sizes.iter().sum();
                        let sizes: Vec<i64> = sizes.iter().map(|&s| s as i64).collect();
                        extra.push(ints("split", &sizes));
                        13
                    }
                    SplitForm::Equal => {
                        shape[axis] = n * chunk;
                        13
                    }
                    SplitForm::NumOutputs => {
                        shape[axis] = num_outputs_len(n, chunk, short);
                        attrs.insert("num_outputs".into(), AttributeValue::Int(n as i64));
                        18
                    }
                };
                let mut inputs = vec![data("x", values, shape, seed, false)];
                inputs.extend(extra);
                case("Split", opset, attrs, inputs, n)
            },
        )
}

/// A length that num_outputs = `n` cuts into exactly `n` parts of ceil(len / n): `n`
/// chunks of `chunk` with the last `short` elements shorter where that still gives `n`
/// parts, otherwise `n · chunk`.
fn num_outputs_len(n: usize, chunk: usize, short: usize) -> usize {
    let len = (n * chunk).saturating_sub(short.min(chunk - 1));
    let part = len.div_ceil(n);
    if len > 0 && len.div_ceil(part) == n {
        len
    } else {
        n * chunk
    }
}

/// One sliced axis: start, end (past either end included) and step.
type SliceAxis = (bool, i64, i64, i64);

/// How Slice's `axes` input is given.
#[derive(Clone, Copy, Debug, PartialEq)]
enum SliceAxes {
    /// Listed, possibly negative and out of order.
    Listed,
    /// Omitted: the bounds apply to the leading axes in order.
    Omitted,
}

/// Slice with starts and ends inside and past both ends, positive and negative steps,
/// axes listed (either sign, reversed) or omitted, steps omitted when all 1.
fn slice() -> impl Strategy<Value = OpCase> {
    let bound = prop_oneof![
        6 => -6i64..=6,
        1 => Just(i64::MAX),
        1 => Just(i64::MIN),
    ];
    (
        dims(1..=4, 1..=5),
        proptest::collection::vec(
            (
                any::<bool>(),
                -6i64..=6,
                bound,
                select(&[1i64, 1, 2, 3, -1, -2][..]),
            ),
            4..=4,
        ),
        select(&[SliceAxes::Listed, SliceAxes::Omitted][..]),
        (0u8..16, any::<bool>(), any::<bool>()),
        recipe(MOVING),
        seed(),
    )
        .prop_map(
            |(shape, per_axis, form, (negative, reversed, explicit_steps), values, seed)| {
                let rank = shape.len();
                let per_axis: Vec<SliceAxis> = per_axis.into_iter().take(rank).collect();
                let mut chosen: Vec<(usize, SliceAxis)> = match form {
                    SliceAxes::Listed => per_axis
                        .iter()
                        .copied()
                        .enumerate()
                        .filter(|(_, a)| a.0)
                        .collect(),
                    SliceAxes::Omitted => Vec::new(),
                };
                if chosen.is_empty() {
                    // Omitted axes (or none picked): bound the leading axes in order.
                    let count = per_axis.iter().filter(|a| a.0).count().max(1);
                    chosen = per_axis.iter().copied().enumerate().take(count).collect();
                }
                let listed = form == SliceAxes::Listed;
                if listed && reversed {
                    chosen.reverse();
                }
                let starts: Vec<i64> = chosen.iter().map(|(_, a)| a.1).collect();
                let ends: Vec<i64> = chosen.iter().map(|(_, a)| a.2).collect();
                let steps: Vec<i64> = chosen.iter().map(|(_, a)| a.3).collect();
                let axes: Vec<i64> = chosen
                    .iter()
                    .map(|&(i, _)| spell_axis(i, rank, (negative >> i) & 1 == 1))
                    .collect();
                let mut inputs = vec![
                    data("x", values, shape, seed, false),
                    ints("starts", &starts),
                    ints("ends", &ends),
                ];
                let steps_needed = explicit_steps || steps.iter().any(|&s| s != 1);
                if listed {
                    inputs.push(ints("axes", &axes));
                } else if steps_needed {
                    inputs.push(omitted());
                }
                if steps_needed {
                    inputs.push(ints("steps", &steps));
                }
                case("Slice", 13, Attrs::new(), inputs, 1)
            },
        )
}

/// Gather along any axis with indices of rank 0 to 2, negative indices included.
fn gather() -> impl Strategy<Value = OpCase> {
    (
        dims(1..=3, 1..=4),
        (0usize..3, any::<bool>()),
        dims(0..=2, 1..=3),
        any::<bool>(),
        recipe(MOVING),
        seed(),
    )
        .prop_map(
            |(shape, (axis, negative), indices, constant_indices, values, seed)| {
                let axis = within(axis, shape.len());
                let len = shape[axis] as f64;
                let mut attrs = Attrs::new();
                attrs.insert(
                    "axis".into(),
                    AttributeValue::Int(spell_axis(axis, shape.len(), negative)),
                );
                let inputs = vec![
                    data("x", values, shape, seed, false),
                    data(
                        "indices",
                        i64s(-len, len),
                        indices,
                        seed + 1,
                        constant_indices,
                    ),
                ];
                case("Gather", 13, attrs, inputs, 1)
            },
        )
}

/// Groups consecutive `factors` into dims, cutting after factor i where bit i is set.
fn group(factors: &[usize], cuts: u8) -> Vec<usize> {
    let mut out = Vec::new();
    let mut current = 1;
    for (i, &f) in factors.iter().enumerate() {
        current *= f;
        if (cuts >> i) & 1 == 1 || i + 1 == factors.len() {
            out.push(current);
            current = 1;
        }
    }
    out
}

/// Reshape between two groupings of the same factors, with -1 for one dim and 0 (copy
/// the input's dim) where the dims agree.
fn reshape() -> impl Strategy<Value = OpCase> {
    (
        proptest::collection::vec(1usize..=4, 1..=5),
        long_axis(),
        (0u8..16, 0u8..16),
        proptest::option::of(0usize..5),
        0u8..16,
        recipe(MOVING),
        seed(),
    )
        .prop_map(
            |(factors, long, (in_cuts, out_cuts), minus_one, copies, values, seed)| {
                let factors = with_long_axis(factors, long);
                let input = group(&factors, in_cuts);
                let output = group(&factors, out_cuts);
                let inferred = minus_one.map(|i| i % output.len());
                let target: Vec<i64> = output
                    .iter()
                    .enumerate()
                    .map(|(i, &d)| {
                        if Some(i) == inferred {
                            -1
                        } else if (copies >> i) & 1 == 1 && input.get(i) == Some(&d) {
                            0
                        } else {
                            d as i64
                        }
                    })
                    .collect();
                let inputs = vec![
                    data("x", values, input, seed, false),
                    ints("shape", &target),
                ];
                case("Reshape", 14, Attrs::new(), inputs, 1)
            },
        )
}

/// Flatten at every axis from 0 to rank, either sign.
fn flatten() -> impl Strategy<Value = OpCase> {
    (
        dims(1..=4, 1..=4),
        (0usize..=4, any::<bool>()),
        recipe(MOVING),
        seed(),
    )
        .prop_map(|(shape, (axis, negative), values, seed)| {
            let rank = shape.len();
            let axis = axis % (rank + 1);
            // Only axes below the rank have a negative spelling (-rank..-1).
            let spelled = if negative && axis < rank {
                axis as i64 - rank as i64
            } else {
                axis as i64
            };
            let mut attrs = Attrs::new();
            attrs.insert("axis".into(), AttributeValue::Int(spelled));
            case(
                "Flatten",
                13,
                attrs,
                vec![data("x", values, shape, seed, false)],
                1,
            )
        })
}

/// Transpose by a random permutation, or by the default (reversed axes).
fn transpose() -> impl Strategy<Value = OpCase> {
    (
        dims(1..=5, 1..=3),
        Just((0..5i64).collect::<Vec<_>>()).prop_shuffle(),
        any::<bool>(),
        recipe(MOVING),
        seed(),
    )
        .prop_map(|(shape, order, default_perm, values, seed)| {
            let rank = shape.len() as i64;
            let perm: Vec<i64> = order.into_iter().filter(|&a| a < rank).collect();
            let mut attrs = Attrs::new();
            if !default_perm {
                attrs.insert("perm".into(), AttributeValue::Ints(perm));
            }
            case(
                "Transpose",
                13,
                attrs,
                vec![data("x", values, shape, seed, false)],
                1,
            )
        })
}

/// Squeeze of some of the size-1 axes (either sign), or of all of them with no axes.
fn squeeze() -> impl Strategy<Value = OpCase> {
    (
        proptest::collection::vec(prop_oneof![Just(1usize), 2usize..=4], 1..=5),
        long_axis(),
        (0u8..32, 0u8..32),
        recipe(MOVING),
        seed(),
    )
        .prop_map(|(shape, long, (pick, negative), values, seed)| {
            let shape = with_long_axis(shape, long);
            let rank = shape.len();
            let axes: Vec<i64> = (0..rank)
                .filter(|&i| shape[i] == 1 && (pick >> i) & 1 == 1)
                .map(|i| spell_axis(i, rank, (negative >> i) & 1 == 1))
                .collect();
            let mut inputs = vec![data("x", values, shape, seed, false)];
            if !axes.is_empty() {
                inputs.push(ints("axes", &axes));
            }
            case("Squeeze", 13, Attrs::new(), inputs, 1)
        })
}

/// Unsqueeze of a rank 0 to 3 input by 1 to 3 new axes, in any order and either sign.
fn unsqueeze() -> impl Strategy<Value = OpCase> {
    (
        dims(0..=3, 1..=4),
        1usize..=3,
        Just((0..6usize).collect::<Vec<_>>()).prop_shuffle(),
        0u8..64,
        recipe(MOVING),
        seed(),
    )
        .prop_map(|(shape, new_axes, order, negative, values, seed)| {
            let out_rank = shape.len() + new_axes;
            let axes: Vec<i64> = order
                .into_iter()
                .filter(|&a| a < out_rank)
                .take(new_axes)
                .map(|a| spell_axis(a, out_rank, (negative >> a) & 1 == 1))
                .collect();
            let inputs = vec![data("x", values, shape, seed, false), ints("axes", &axes)];
            case("Unsqueeze", 13, Attrs::new(), inputs, 1)
        })
}

/// Constant-mode Pad with pads up to 2 (and now and then -1, which crops), an optional
/// constant value, and the `axes` input of opset 18 for a subset of axes.
fn pad() -> impl Strategy<Value = OpCase> {
    let amount = || prop_oneof![8 => 0i64..=2, 1 => Just(-1i64)];
    (
        dims(1..=4, 1..=4),
        proptest::collection::vec((amount(), amount()), 4..=4),
        (proptest::option::of(select(&[0.5, -2.0, 0.0][..])), 0u8..16),
        recipe(
            const {
                &[
                    UNIFORM,
                    f32s("special", None),
                    f16s("uniform", None),
                    i64s(-100.0, 100.0),
                ]
            },
        ),
        seed(),
    )
        .prop_map(|(shape, amounts, (value, subset), values, seed)| {
            let rank = shape.len();
            // A crop may not remove more than the axis holds.
            let amounts: Vec<(i64, i64)> = shape
                .iter()
                .zip(amounts)
                .map(|(&d, (begin, end))| {
                    if d as i64 + begin + end < 0 {
                        (begin, 0)
                    } else {
                        (begin, end)
                    }
                })
                .collect();
            let axes: Vec<usize> = (0..rank).filter(|i| (subset >> i) & 1 == 1).collect();
            let padded: Vec<usize> = if axes.is_empty() {
                (0..rank).collect()
            } else {
                axes.clone()
            };
            let pads: Vec<i64> = padded
                .iter()
                .map(|&i| amounts[i].0)
                .chain(padded.iter().map(|&i| amounts[i].1))
                .collect();
            let mut inputs = vec![data("x", values, shape, seed, false), ints("pads", &pads)];
            match value {
                Some(v) => inputs.push(scalar("value", values.dtype, v)),
                None if !axes.is_empty() => inputs.push(omitted()),
                None => {}
            }
            let opset = if axes.is_empty() {
                13
            } else {
                let axes: Vec<i64> = axes.iter().map(|&a| a as i64).collect();
                inputs.push(ints("axes", &axes));
                18
            };
            case("Pad", opset, Attrs::new(), inputs, 1)
        })
}

/// Expand: the input and the target shape broadcast either way (each may have 1 where
/// the other has the dim, and either may have fewer axes).
fn expand() -> impl Strategy<Value = OpCase> {
    (
        broadcast_shapes(2, dims(0..=4, 1..=4)),
        recipe(MOVING),
        seed(),
    )
        .prop_map(|(shapes, values, seed)| {
            let mut shapes = shapes.into_iter();
            let input = shapes.next().unwrap_or_default();
            let target: Vec<i64> = shapes
                .next()
                .unwrap_or_default()
                .into_iter()
                .map(|d| d as i64)
                .collect();
            let inputs = vec![
                data("x", values, input, seed, false),
                ints("shape", &target),
            ];
            case("Expand", 13, Attrs::new(), inputs, 1)
        })
}

/// A Cast: the source recipe and the target's ONNX data type code.
#[derive(Clone, Copy, Debug, PartialEq)]
struct Conversion {
    from: Recipe,
    to: i64,
}

const FLOAT: i64 = 1;
const BOOL: i64 = 9;
const INT64: i64 = 7;
const FLOAT16: i64 = 10;

/// Casts between f32, f16, i64 and bool. Float to integer stays in range (out-of-range
/// conversion is undefined in ONNX); float to f16 includes overflow to infinity.
fn cast() -> impl Strategy<Value = OpCase> {
    const BOOLS: Recipe = Recipe {
        dtype: "bool",
        fill: "bool",
        range: None,
    };
    const CONVERSIONS: &[Conversion] = &[
        Conversion {
            from: UNIFORM,
            to: FLOAT16,
        },
        Conversion {
            from: f32s("uniform", Some([-100.0, 100.0])),
            to: INT64,
        },
        Conversion {
            from: f16s("uniform", None),
            to: FLOAT,
        },
        Conversion {
            from: i64s(-1000.0, 1000.0),
            to: FLOAT,
        },
        Conversion {
            from: f32s("ints", Some([-2.0, 3.0])),
            to: BOOL,
        },
        Conversion {
            from: BOOLS,
            to: FLOAT,
        },
        Conversion {
            from: i64s(-2.0, 3.0),
            to: BOOL,
        },
        Conversion {
            from: BOOLS,
            to: INT64,
        },
        Conversion {
            from: i64s(-3000.0, 3000.0),
            to: FLOAT16,
        },
        Conversion {
            from: f32s("large", None),
            to: FLOAT16,
        },
        Conversion {
            from: f32s("special", None),
            to: FLOAT16,
        },
        Conversion {
            from: f32s("special", None),
            to: FLOAT,
        },
    ];
    (select(CONVERSIONS), dims_maybe_empty(0..=4), seed()).prop_map(|(conversion, shape, seed)| {
        let mut attrs = Attrs::new();
        attrs.insert("to".into(), AttributeValue::Int(conversion.to));
        case(
            "Cast",
            13,
            attrs,
            vec![data("x", conversion.from, shape, seed, false)],
            1,
        )
    })
}

/// Identity of any dtype and shape, empty ones included.
fn identity() -> impl Strategy<Value = OpCase> {
    (dims_maybe_empty(0..=4), recipe(MOVING), seed()).prop_map(|(shape, values, seed)| {
        case(
            "Identity",
            13,
            Attrs::new(),
            vec![data("x", values, shape, seed, false)],
            1,
        )
    })
}

/// Inference-mode Dropout (the identity), with and without a constant ratio.
fn dropout() -> impl Strategy<Value = OpCase> {
    (
        dims_maybe_empty(0..=4),
        proptest::option::of(select(&[0.5, 0.0, 0.9][..])),
        recipe(const { &[UNIFORM, f32s("special", None), f16s("uniform", None)] }),
        seed(),
    )
        .prop_map(|(shape, ratio, values, seed)| {
            let mut inputs = vec![data("x", values, shape, seed, false)];
            if let Some(r) = ratio {
                inputs.push(scalar("ratio", "f32", r));
            }
            case("Dropout", 13, Attrs::new(), inputs, 1)
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn group_cuts_after_set_bits() {
        // Factors 2·3·4: cut after the first → [2, 12]; no cut → [24]; all → [2, 3, 4].
        assert_eq!(group(&[2, 3, 4], 0b01), vec![2, 12]);
        assert_eq!(group(&[2, 3, 4], 0), vec![24]);
        assert_eq!(group(&[2, 3, 4], 0b11), vec![2, 3, 4]);
    }

    #[test]
    fn num_outputs_lengths_give_exactly_n_parts() {
        // 3 outputs of chunk 3 with the last one short by 2: len 7, parts 3, 3, 1.
        assert_eq!(num_outputs_len(3, 3, 2), 7);
        // 2 outputs of chunk 3 short by 2: len 4, parts 2 and 2.
        assert_eq!(num_outputs_len(2, 3, 2), 4);
        // 4 outputs of chunk 2 short by 1: len 7, parts 2, 2, 2, 1.
        assert_eq!(num_outputs_len(4, 2, 1), 7);
        // One output of one element cannot be any shorter.
        assert_eq!(num_outputs_len(1, 1, 2), 1);
        for n in 1..=4 {
            for chunk in 1..=3 {
                for short in 0..=2 {
                    let len = num_outputs_len(n, chunk, short);
                    let part = len.div_ceil(n);
                    assert_eq!(len.div_ceil(part), n, "n {n} chunk {chunk} short {short}");
                }
            }
        }
    }
}
