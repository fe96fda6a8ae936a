//! What opsets 25 to 28 changed, read as the spec says: new attributes mapped or refused by
//! value, the new 2-bit and 6-bit element types refused by name, and the writer refusing
//! what an older opset cannot say.

// Tests fail by panicking; the workspace's production lint does not apply here.
#![allow(clippy::panic)]

mod common;

use common::*;
use concord_core::op::Binary;
use concord_core::Op;
use concord_onnx::proto::{NodeProto, TensorProto};
use concord_onnx::{read_graph, save, Error};

/// A one-node model at `opset` with f32 inputs of shape `dims` named after `inputs`.
fn one_node(opset: i64, node: NodeProto, dims: &[i64], initializers: Vec<TensorProto>) -> Vec<u8> {
    let inputs = node
        .input
        .iter()
        .filter(|name| !initializers.iter().any(|t| &t.name == *name))
        .map(|name| f32_value(name, dims))
        .collect();
    let outputs = node.output.iter().map(|name| output(name)).collect();
    bytes(&model(
        opset,
        graph(vec![node], inputs, outputs, initializers),
    ))
}

fn read_op(opset: i64, node: NodeProto, dims: &[i64]) -> Result<Op, Error> {
    let g = read_graph(&one_node(opset, node, dims, vec![]))?;
    Ok(g.nodes[0].op.clone())
}

#[test]
fn opset_28_models_are_read() {
    let g = read_graph(&bytes(&relu_model(28))).expect("an opset-28 Relu reads");
    assert_eq!(g.opset, 28);
}

#[test]
fn space_to_depth_reads_its_opset_28_mode() {
    let s2d = |mode: Option<&str>| {
        let mut attrs = vec![attr_int("blocksize", 2)];
        if let Some(m) = mode {
            attrs.push(attr_string("mode", m));
        }
        node("SpaceToDepth", "s2d", &["x"], &["y"], attrs)
    };
    let dims = [1, 2, 4, 4];
    assert_eq!(
        read_op(28, s2d(Some("CRD")), &dims).expect("CRD reads"),
        Op::SpaceToDepth {
            blocksize: 2,
            crd: true
        }
    );
    assert_eq!(
        read_op(28, s2d(None), &dims).expect("the default reads"),
        Op::SpaceToDepth {
            blocksize: 2,
            crd: false
        }
    );
    expect_err(
        read_op(28, s2d(Some("RDC")), &dims),
        |e| matches!(e, Error::Attribute { attribute, .. } if attribute == "mode"),
        &["s2d", "RDC"],
    );
    // Before opset 28 SpaceToDepth has no `mode`.
    expect_err(
        read_op(24, s2d(Some("CRD")), &dims),
        |e| matches!(e, Error::Attribute { attribute, .. } if attribute == "mode"),
        &["s2d", "mode"],
    );
}

#[test]
fn space_to_depth_crd_is_written_at_opset_28_only() {
    let n = node(
        "SpaceToDepth",
        "s2d",
        &["x"],
        &["y"],
        vec![attr_int("blocksize", 2), attr_string("mode", "CRD")],
    );
    let mut g = read_graph(&one_node(28, n, &[1, 2, 4, 4], vec![])).expect("reads");
    let again = read_graph(&save(&g).expect("writes at 28")).expect("re-reads");
    assert_eq!(again.nodes[0].op, g.nodes[0].op);
    g.opset = 24;
    expect_err(
        save(&g),
        |e| matches!(e, Error::Unrepresentable { .. }),
        &["SpaceToDepth", "mode", "28"],
    );
}

#[test]
fn attention_reads_its_sliding_window() {
    let attention = |attrs| node("Attention", "attn", &["q", "k", "v"], &["y"], attrs);
    let dims = [1, 2, 3, 4];
    let window = |op: Op| match op {
        Op::Attention {
            left_window_size,
            right_window_size,
            ..
        } => (left_window_size, right_window_size),
        other => panic!("expected Attention, got {other:?}"),
    };
    let unbounded = attention(vec![
        attr_int("left_window_size", -1),
        attr_int("right_window_size", -1),
    ]);
    assert_eq!(
        window(read_op(25, unbounded, &dims).expect("reads")),
        (-1, -1)
    );
    let bounded = attention(vec![
        attr_int("left_window_size", 2),
        attr_int("right_window_size", 0),
    ]);
    let read = read_op(25, bounded.clone(), &dims).expect("a bounded window reads");
    assert_eq!(window(read.clone()), (2, 0));
    // It round-trips at 25, and an older opset cannot say it.
    let mut g = read_graph(&one_node(25, bounded, &dims, vec![])).expect("reads");
    let again = read_graph(&save(&g).expect("writes at 25")).expect("re-reads");
    assert_eq!(again.nodes[0].op, read);
    g.opset = 24;
    expect_err(
        save(&g),
        |e| matches!(e, Error::Unrepresentable { .. }),
        &["Attention", "window", "25"],
    );
    expect_err(
        read_op(25, attention(vec![attr_int("left_window_size", -2)]), &dims),
        |e| matches!(e, Error::Attribute { attribute, .. } if attribute == "left_window_size"),
        &["attn", "-2"],
    );
    // Opset 24 has no windows.
    expect_err(
        read_op(24, attention(vec![attr_int("left_window_size", -1)]), &dims),
        |e| matches!(e, Error::Attribute { attribute, .. } if attribute == "left_window_size"),
        &["attn"],
    );
}

#[test]
fn the_new_ops_of_opsets_26_to_28_read_and_round_trip() {
    use concord_core::op::LinearAttentionRule;
    use concord_core::DType;
    let cases: Vec<(i64, NodeProto, Op)> = vec![
        (
            26,
            node(
                "CumProd",
                "n",
                &["x", "a"],
                &["y"],
                vec![attr_int("exclusive", 1)],
            ),
            Op::CumProd {
                exclusive: true,
                reverse: false,
            },
        ),
        (
            26,
            node("BitCast", "n", &["x"], &["y"], vec![attr_int("to", 6)]),
            Op::BitCast { to: DType::I32 },
        ),
        (
            28,
            node(
                "SwiGLU",
                "n",
                &["x", "x2"],
                &["y"],
                vec![attr_float("alpha", 1.5)],
            ),
            Op::SwiGLU { alpha: 1.5 },
        ),
        (
            27,
            node(
                "LinearAttention",
                "n",
                &["q", "k", "v"],
                &["y"],
                vec![
                    attr_int("q_num_heads", 2),
                    attr_int("kv_num_heads", 1),
                    attr_string("update_rule", "delta"),
                    attr_int("chunk_size", 16),
                ],
            ),
            Op::LinearAttention {
                kv_num_heads: 1,
                q_num_heads: 2,
                scale: 0.0,
                update_rule: LinearAttentionRule::Delta,
            },
        ),
        (
            27,
            node(
                "CausalConvWithState",
                "n",
                &["x", "w"],
                &["y"],
                vec![attr_string("activation", "swish")],
            ),
            Op::CausalConvWithState { silu: true },
        ),
    ];
    for (opset, n, want) in cases {
        // The reader checks no operand dtypes; every input is an f32 graph input here.
        let g = read_graph(&one_node(opset, n, &[1, 2, 4], vec![]))
            .unwrap_or_else(|e| panic!("{want:?}: {e}"));
        assert_eq!(g.nodes[0].op, want);
        let again = read_graph(&save(&g).expect("writes")).expect("re-reads");
        assert_eq!(again.nodes[0].op, want);
    }
    // Before its opset an op is unknown; a bad attribute value is refused by name.
    expect_err(
        read_op(25, node("CumProd", "n", &["x", "a"], &["y"], vec![]), &[2]),
        |e| matches!(e, Error::UnknownOp { .. }),
        &["CumProd"],
    );
    expect_err(
        read_op(
            27,
            node(
                "LinearAttention",
                "n",
                &["q", "k", "v"],
                &["y"],
                vec![
                    attr_int("q_num_heads", 1),
                    attr_int("kv_num_heads", 1),
                    attr_string("update_rule", "softmax"),
                ],
            ),
            &[1, 2, 4],
        ),
        |e| matches!(e, Error::Attribute { attribute, .. } if attribute == "update_rule"),
        &["softmax"],
    );
    expect_err(
        read_op(
            27,
            node(
                "CausalConvWithState",
                "n",
                &["x", "w"],
                &["y"],
                vec![attr_string("activation", "relu")],
            ),
            &[1, 2, 4],
        ),
        |e| matches!(e, Error::Attribute { attribute, .. } if attribute == "activation"),
        &["relu"],
    );
}

#[test]
fn range_reads_the_float32_stash_and_refuses_the_16_bit_one() {
    let range = |attrs| node("Range", "range", &["s", "l", "d"], &["y"], attrs);
    let scalars = |names: [&str; 3]| names.map(|n| float_tensor(n, &[], &[1.0])).to_vec();
    let read = |opset, n| -> Result<Op, Error> {
        let g = read_graph(&one_node(opset, n, &[], scalars(["s", "l", "d"])))?;
        Ok(g.nodes[0].op.clone())
    };
    assert_eq!(
        read(27, range(vec![attr_int("stash_type", 1)])).expect("reads"),
        Op::Range
    );
    expect_err(
        read(27, range(vec![attr_int("stash_type", 0)])),
        |e| matches!(e, Error::Attribute { attribute, .. } if attribute == "stash_type"),
        &["range", "stash_type"],
    );
    expect_err(
        read(26, range(vec![attr_int("stash_type", 1)])),
        |e| matches!(e, Error::Attribute { attribute, .. } if attribute == "stash_type"),
        &["range"],
    );
}

#[test]
fn mod_without_fmod_reads_at_opset_28() {
    let n = node("Mod", "mod", &["a", "b"], &["y"], vec![]);
    assert_eq!(
        read_op(28, n, &[3]).expect("reads"),
        Op::Binary(Binary::Mod { fmod: false })
    );
}

#[test]
fn two_bit_and_six_bit_types_are_refused_by_name() {
    // ONNX data type codes: UINT2 25, INT2 26 (opset 25), FLOAT6E2M3 27, FLOAT6E3M2 28
    // (opset 28).
    for (code, name) in [
        (25, "UINT2"),
        (26, "INT2"),
        (27, "FLOAT6E2M3"),
        (28, "FLOAT6E3M2"),
    ] {
        let cast = node("Cast", "cast", &["x"], &["y"], vec![attr_int("to", code)]);
        expect_err(
            read_op(28, cast, &[4]),
            |e| matches!(e, Error::UnsupportedDType { data_type, .. } if *data_type == code as i32),
            &["cast", name],
        );
        let weight = TensorProto {
            name: "w".to_string(),
            dims: vec![4],
            data_type: code as i32,
            raw_data: vec![0; 4],
            ..TensorProto::default()
        };
        let id = node("Identity", "id", &["w"], &["y"], vec![]);
        expect_err(
            read_graph(&one_node(28, id, &[4], vec![weight])),
            |e| matches!(e, Error::UnsupportedDType { data_type, .. } if *data_type == code as i32),
            &["w", name],
        );
    }
}
