//! Property strategies for the elementwise family: binary ops with random broadcasting
//! shapes, unary ops and activations, Clip, Where, the normalisations (Softmax,
//! LayerNormalization, BatchNormalization) and the reductions.

use super::gen::{
    broadcast_shapes, case, data, dims, dims_maybe_empty, f16s, f32s, i64s, ints, omitted, recipe,
    scalar, seed, spell_axis, Attrs, Recipe, ACCUMULATING, UNIFORM,
};
use crate::case::{AttributeValue, OpCase};
use concord::op::{AttrDefault, Unary};
use proptest::prelude::*;
use proptest::sample::select;

/// The strategy of `op`, if it belongs to this family.
pub(super) fn strategy(op: &str) -> Option<BoxedStrategy<OpCase>> {
    if let Some(operands) = binary_operands(op) {
        return Some(binary(op, operands).boxed());
    }
    if let Some(recipes) = unary_recipes(op) {
        return Some(unary(op, recipes).boxed());
    }
    Some(match op {
        "Clip" => clip().boxed(),
        "Where" => where_().boxed(),
        "Softmax" => softmax().boxed(),
        "LayerNormalization" => layer_normalization().boxed(),
        "BatchNormalization" => batch_normalization().boxed(),
        "ReduceMean" | "ReduceSum" | "ReduceMax" => reduce(op).boxed(),
        "ArgMax" => arg_max().boxed(),
        _ => return None,
    })
}

/// The recipes of a binary op's two operands (same dtype) and its `fmod`, if any.
#[derive(Clone, Copy, Debug, PartialEq)]
struct Operands {
    a: Recipe,
    b: Recipe,
    fmod: Option<i64>,
}

const fn pair(a: Recipe, b: Recipe) -> Operands {
    Operands { a, b, fmod: None }
}

const fn remainder(a: Recipe, b: Recipe, fmod: i64) -> Operands {
    Operands {
        a,
        b,
        fmod: Some(fmod),
    }
}

/// Per binary op, the operand recipes, plainest first. Integer divisors never include 0
/// (an error, not a value, in i64); float ones may (±Inf and NaN must match).
fn binary_operands(op: &str) -> Option<&'static [Operands]> {
    const ARITHMETIC: &[Operands] = &[
        pair(UNIFORM, UNIFORM),
        pair(f32s("normal", None), f32s("large", None)),
        pair(f32s("special", None), f32s("special", None)),
        pair(f16s("uniform", None), f16s("uniform", None)),
        pair(i64s(-50.0, 50.0), i64s(-50.0, 50.0)),
    ];
    const DIV: &[Operands] = &[
        pair(UNIFORM, f32s("positive", None)),
        pair(f32s("normal", None), UNIFORM),
        pair(f32s("special", None), f32s("special", None)),
        pair(f16s("uniform", None), f16s("positive", None)),
        pair(i64s(-50.0, 50.0), i64s(1.0, 8.0)),
        pair(i64s(-50.0, 50.0), i64s(-8.0, 0.0)),
    ];
    const POW: &[Operands] = &[
        pair(f32s("positive", None), f32s("uniform", Some([-2.0, 2.0]))),
        pair(UNIFORM, f32s("ints", Some([-3.0, 4.0]))),
        pair(f32s("special", None), f32s("ints", Some([0.0, 3.0]))),
        pair(f16s("positive", None), f16s("uniform", None)),
    ];
    const MOD: &[Operands] = &[
        remainder(
            f32s("uniform", Some([-10.0, 10.0])),
            f32s("uniform", Some([0.5, 3.0])),
            1,
        ),
        remainder(
            f32s("uniform", Some([-10.0, 10.0])),
            f32s("uniform", Some([-3.0, -0.5])),
            1,
        ),
        remainder(i64s(-20.0, 20.0), i64s(1.0, 8.0), 0),
        remainder(i64s(-20.0, 20.0), i64s(-8.0, 0.0), 0),
        remainder(i64s(-20.0, 20.0), i64s(-8.0, 0.0), 1),
        remainder(i64s(-20.0, 20.0), i64s(1.0, 8.0), 1),
    ];
    // Small integers make equal pairs common.
    const EQUAL: &[Operands] = &[
        pair(
            f32s("ints", Some([0.0, 3.0])),
            f32s("ints", Some([0.0, 3.0])),
        ),
        pair(i64s(0.0, 3.0), i64s(0.0, 3.0)),
    ];
    Some(match op {
        "Add" | "Sub" | "Mul" => ARITHMETIC,
        "Div" => DIV,
        "Pow" => POW,
        "Mod" => MOD,
        "Equal" => EQUAL,
        _ => return None,
    })
}

/// A binary op on two broadcasting operands; B is sometimes a constant (a bias or a
/// scale in a real model).
fn binary(op: &str, operands: &'static [Operands]) -> impl Strategy<Value = OpCase> {
    let op = op.to_string();
    (
        select(operands),
        broadcast_shapes(2, dims_maybe_empty(0..=4)),
        any::<bool>(),
        seed(),
    )
        .prop_map(move |(operands, shapes, constant_b, seed)| {
            let mut attrs = Attrs::new();
            if let Some(fmod) = operands.fmod {
                attrs.insert("fmod".into(), AttributeValue::Int(fmod));
            }
            let mut shapes = shapes.into_iter();
            let a = shapes.next().unwrap_or_default();
            let b = shapes.next().unwrap_or_default();
            let inputs = vec![
                data("a", operands.a, a, seed, false),
                data("b", operands.b, b, seed + 1, constant_b),
            ];
            case(&op, 13, attrs, inputs, 1)
        })
}

/// Per unary op, the input recipes, plainest first.
fn unary_recipes(op: &str) -> Option<&'static [Recipe]> {
    const SQRT: &[Recipe] = &[
        f32s("positive", None),
        f32s("special", None),
        UNIFORM,
        f32s("large", None),
        f16s("positive", None),
    ];
    const EXP: &[Recipe] = &[
        UNIFORM,
        f32s("uniform", Some([-20.0, 20.0])),
        f32s("normal", None),
        f32s("special", None),
        f16s("uniform", Some([-4.0, 4.0])),
    ];
    const SIGN: &[Recipe] = &[
        UNIFORM,
        f32s("special", None),
        f32s("large", None),
        f16s("uniform", None),
        i64s(-50.0, 50.0),
    ];
    // Activations: a range wide enough to cross every kink (HardSwish at ±3,
    // HardSigmoid where alpha·x + beta leaves [0, 1]).
    const ACTIVATION: &[Recipe] = &[
        UNIFORM,
        f32s("uniform", Some([-6.0, 6.0])),
        f32s("normal", None),
        f32s("special", None),
        f32s("large", None),
        f16s("uniform", Some([-6.0, 6.0])),
    ];
    // Any other op of the unary table gets the activation recipes.
    Unary::from_name(op)?;
    Some(match op {
        "Sqrt" => SQRT,
        "Exp" => EXP,
        "Neg" | "Abs" => SIGN,
        _ => ACTIVATION,
    })
}

/// A unary op (with LeakyRelu's alpha and HardSigmoid's alpha and beta) over any shape,
/// empty ones included.
fn unary(op: &str, recipes: &'static [Recipe]) -> impl Strategy<Value = OpCase> {
    let op = op.to_string();
    (
        recipe(recipes),
        dims_maybe_empty(0..=4),
        select(&[0.01, 0.2, 0.5, 2.0][..]),
        select(&[0.5, 0.0, 0.3][..]),
        seed(),
    )
        .prop_map(move |(values, shape, alpha, beta, seed)| {
            // The op's float parameters and their defaults come from its row of the table.
            let mut attrs = Attrs::new();
            let def = Unary::from_name(&op).map(|u| u.def());
            let params = def.map_or(&[][..], |d| d.params);
            for (spec, value) in params.iter().zip([alpha, beta]) {
                if spec.default != AttrDefault::Float(value as f32) {
                    attrs.insert(spec.name.into(), AttributeValue::Float(value));
                }
            }
            let opset = def.map_or(13, |d| d.since.max(13));
            case(
                &op,
                opset,
                attrs,
                vec![data("x", values, shape, seed, false)],
                1,
            )
        })
}

/// Which of Clip's bounds a case gives.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Bounds {
    Both,
    Min,
    /// Max only: min is an omitted input (an empty name), as exporters write it.
    Max,
    Neither,
}

/// Clip with constant scalar bounds, each optional; min ≤ max always (the other order is
/// a different, degenerate case).
fn clip() -> impl Strategy<Value = OpCase> {
    (
        recipe(
            const {
                &[
                    UNIFORM,
                    f32s("normal", None),
                    f32s("special", None),
                    f16s("uniform", None),
                ]
            },
        ),
        dims_maybe_empty(0..=4),
        select(&[Bounds::Both, Bounds::Min, Bounds::Max, Bounds::Neither][..]),
        select(&[-0.5, -1.0, 0.0, -0.25][..]),
        select(&[0.5, 1.0, 0.0, 6.0][..]),
        seed(),
    )
        .prop_map(|(values, shape, bounds, min, max, seed)| {
            let mut inputs = vec![data("x", values, shape, seed, false)];
            match bounds {
                Bounds::Both => {
                    inputs.push(scalar("min", values.dtype, min));
                    inputs.push(scalar("max", values.dtype, max));
                }
                Bounds::Min => inputs.push(scalar("min", values.dtype, min)),
                Bounds::Max => {
                    inputs.push(omitted());
                    inputs.push(scalar("max", values.dtype, max));
                }
                Bounds::Neither => {}
            }
            case("Clip", 13, Attrs::new(), inputs, 1)
        })
}

/// Where over three broadcasting operands: a runtime bool condition and float or integer
/// branches.
fn where_() -> impl Strategy<Value = OpCase> {
    (
        recipe(
            const {
                &[
                    UNIFORM,
                    f32s("special", None),
                    f16s("uniform", None),
                    i64s(-50.0, 50.0),
                ]
            },
        ),
        broadcast_shapes(3, dims_maybe_empty(0..=4)),
        seed(),
    )
        .prop_map(|(values, shapes, seed)| {
            let mut shapes = shapes.into_iter();
            let condition = shapes.next().unwrap_or_default();
            let x = shapes.next().unwrap_or_default();
            let y = shapes.next().unwrap_or_default();
            let bools = super::gen::Recipe {
                dtype: "bool",
                fill: "bool",
                range: None,
            };
            let inputs = vec![
                data("condition", bools, condition, seed, false),
                data("x", values, x, seed + 1, false),
                data("y", values, y, seed + 2, false),
            ];
            case("Where", 16, Attrs::new(), inputs, 1)
        })
}

/// An axis in `0..rank` and whether to spell it negatively.
fn axis_of(rank_dims: &[usize], axis: usize) -> usize {
    axis % rank_dims.len().max(1)
}

/// Softmax over any axis (opset 13: one axis, not the flattened 2-D view).
fn softmax() -> impl Strategy<Value = OpCase> {
    (
        dims(1..=4, 1..=5),
        0usize..4,
        any::<bool>(),
        recipe(
            const {
                &[
                    UNIFORM,
                    f32s("uniform", Some([-10.0, 10.0])),
                    f32s("normal", None),
                    f32s("large", None),
                ]
            },
        ),
        seed(),
    )
        .prop_map(|(shape, axis, negative, values, seed)| {
            let axis = axis_of(&shape, axis);
            let mut attrs = Attrs::new();
            attrs.insert(
                "axis".into(),
                AttributeValue::Int(spell_axis(axis, shape.len(), negative)),
            );
            case(
                "Softmax",
                13,
                attrs,
                vec![data("x", values, shape, seed, false)],
                1,
            )
        })
}

/// LayerNormalization over the trailing axes from `axis`, with or without B.
fn layer_normalization() -> impl Strategy<Value = OpCase> {
    (
        dims(1..=4, 1..=5),
        0usize..4,
        any::<bool>(),
        (any::<bool>(), any::<bool>()),
        select(&[1e-5, 1e-3][..]),
        recipe(
            const {
                &[
                    UNIFORM,
                    f32s("normal", None),
                    f32s("uniform", Some([-8.0, 8.0])),
                ]
            },
        ),
        seed(),
    )
        .prop_map(
            |(shape, axis, negative, (bias, runtime_weights), epsilon, values, seed)| {
                let axis = axis_of(&shape, axis);
                let normalized = shape[axis..].to_vec();
                let mut attrs = Attrs::new();
                attrs.insert(
                    "axis".into(),
                    AttributeValue::Int(spell_axis(axis, shape.len(), negative)),
                );
                if epsilon != 1e-5 {
                    attrs.insert("epsilon".into(), AttributeValue::Float(epsilon));
                }
                let mut inputs = vec![
                    data("x", values, shape, seed, false),
                    data(
                        "scale",
                        UNIFORM,
                        normalized.clone(),
                        seed + 1,
                        !runtime_weights,
                    ),
                ];
                if bias {
                    inputs.push(data(
                        "bias",
                        UNIFORM,
                        normalized,
                        seed + 2,
                        !runtime_weights,
                    ));
                }
                case("LayerNormalization", 17, attrs, inputs, 1)
            },
        )
}

/// Inference-mode BatchNormalization over N, C and 0 to 2 spatial axes.
fn batch_normalization() -> impl Strategy<Value = OpCase> {
    (
        (1usize..=2, 1usize..=4),
        dims(0..=2, 1..=5),
        select(&[1e-5, 1e-3][..]),
        any::<bool>(),
        recipe(const { &[UNIFORM, f32s("normal", None)] }),
        seed(),
    )
        .prop_map(
            |((batch, channels), spatial, epsilon, runtime_weights, values, seed)| {
                let mut x = vec![batch, channels];
                x.extend(spatial);
                let mut attrs = Attrs::new();
                if epsilon != 1e-5 {
                    attrs.insert("epsilon".into(), AttributeValue::Float(epsilon));
                }
                let constant = !runtime_weights;
                let inputs = vec![
                    data("x", values, x, seed, false),
                    data("scale", UNIFORM, vec![channels], seed + 1, constant),
                    data("bias", UNIFORM, vec![channels], seed + 2, constant),
                    data("mean", UNIFORM, vec![channels], seed + 3, constant),
                    data(
                        "var",
                        f32s("positive", None),
                        vec![channels],
                        seed + 4,
                        constant,
                    ),
                ];
                case("BatchNormalization", 15, attrs, inputs, 1)
            },
        )
}

/// How a reduction is told its axes.
#[derive(Clone, Copy, Debug, PartialEq)]
enum AxesForm {
    /// The `axes` input (opset 18; ReduceSum from 13).
    Input,
    /// The `axes` attribute (ReduceMean and ReduceMax before opset 18).
    Attribute,
}

/// A reduction over a subset of axes (spelled with either sign, in either order), with
/// keepdims either way; the empty subset reduces everything, or nothing with
/// noop_with_empty_axes.
fn reduce(op: &str) -> impl Strategy<Value = OpCase> {
    let op = op.to_string();
    const MAX_VALUES: &[Recipe] = &[UNIFORM, f32s("normal", None), f32s("large", None)];
    let values: &'static [Recipe] = if op == "ReduceMax" {
        MAX_VALUES
    } else {
        ACCUMULATING
    };
    (
        dims(1..=4, 1..=4),
        (0u8..16, 0u8..16),
        (any::<bool>(), any::<bool>(), any::<bool>()),
        select(&[AxesForm::Input, AxesForm::Attribute][..]),
        recipe(values),
        seed(),
    )
        .prop_map(
            move |(
                shape,
                (mask, negative),
                (drop_keepdims, noop, reversed),
                form,
                values,
                seed,
            )| {
                let rank = shape.len();
                let mut axes: Vec<i64> = (0..rank)
                    .filter(|i| (mask >> i) & 1 == 1)
                    .map(|i| spell_axis(i, rank, (negative >> i) & 1 == 1))
                    .collect();
                if reversed {
                    axes.reverse();
                }
                let mut attrs = Attrs::new();
                if drop_keepdims {
                    attrs.insert("keepdims".into(), AttributeValue::Int(0));
                }
                let mut inputs = vec![data("x", values, shape, seed, false)];
                // ReduceSum takes axes as an input from opset 13, the others from 18.
                let input_form_since = if op == "ReduceSum" { 13 } else { 18 };
                let opset = match form {
                    AxesForm::Input => {
                        if !axes.is_empty() {
                            inputs.push(ints("axes", &axes));
                        }
                        if axes.is_empty() && noop {
                            attrs.insert("noop_with_empty_axes".into(), AttributeValue::Int(1));
                        }
                        input_form_since
                    }
                    AxesForm::Attribute if op == "ReduceSum" => {
                        // No attribute form from opset 13: say it with the input instead.
                        if !axes.is_empty() {
                            inputs.push(ints("axes", &axes));
                        }
                        13
                    }
                    AxesForm::Attribute => {
                        if !axes.is_empty() {
                            attrs.insert("axes".into(), AttributeValue::Ints(axes));
                        }
                        13
                    }
                };
                case(&op, opset, attrs, inputs, 1)
            },
        )
}

/// ArgMax along one axis (spelled either way), with and without keepdims and
/// select_last_index; small integers make ties common, so both tie rules are exercised.
fn arg_max() -> impl Strategy<Value = OpCase> {
    const VALUES: &[Recipe] = &[
        f32s("ints", Some([0.0, 3.0])),
        UNIFORM,
        f32s("special", None),
        f16s("uniform", None),
        i64s(0.0, 3.0),
    ];
    (
        dims(1..=4, 1..=4),
        (0usize..4, any::<bool>()),
        (any::<bool>(), any::<bool>()),
        recipe(VALUES),
        seed(),
    )
        .prop_map(
            |(shape, (axis, negative), (drop_keepdims, last), values, seed)| {
                let rank = shape.len();
                let mut attrs = Attrs::new();
                let axis = spell_axis(axis % rank, rank, negative);
                attrs.insert("axis".into(), AttributeValue::Int(axis));
                if drop_keepdims {
                    attrs.insert("keepdims".into(), AttributeValue::Int(0));
                }
                if last {
                    attrs.insert("select_last_index".into(), AttributeValue::Int(1));
                }
                case(
                    "ArgMax",
                    13,
                    attrs,
                    vec![data("x", values, shape, seed, false)],
                    1,
                )
            },
        )
}
