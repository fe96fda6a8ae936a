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
fn attention_reads_unbounded_windows_and_refuses_bounded_ones() {
    let attention = |attrs| node("Attention", "attn", &["q", "k", "v"], &["y"], attrs);
    let dims = [1, 2, 3, 4];
    let unbounded = attention(vec![
        attr_int("left_window_size", -1),
        attr_int("right_window_size", -1),
    ]);
    assert!(matches!(
        read_op(25, unbounded, &dims),
        Ok(Op::Attention { .. })
    ));
    expect_err(
        read_op(25, attention(vec![attr_int("left_window_size", 2)]), &dims),
        |e| matches!(e, Error::Attribute { attribute, .. } if attribute == "left_window_size"),
        &["attn", "sliding window"],
    );
    // Opset 24 has no windows.
    expect_err(
        read_op(24, attention(vec![attr_int("left_window_size", -1)]), &dims),
        |e| matches!(e, Error::Attribute { attribute, .. } if attribute == "left_window_size"),
        &["attn"],
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
