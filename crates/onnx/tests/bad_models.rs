//! Malformed and unsupported models: each must fail with its own typed error whose message
//! names what is wrong, and no input bytes may make the reader panic.

// Tests fail by panicking; the workspace's production lint does not apply here.
#![allow(clippy::panic)]

mod common;

use common::*;
use concord_core::{Error as CoreError, OpError};
use concord_onnx::proto::tensor_proto::{DataLocation, DataType};
use concord_onnx::proto::{ModelProto, SparseTensorProto, StringStringEntryProto, TensorProto};
use concord_onnx::{load, load_file, read_graph, read_tensor_proto, Error};

// Decoding.

#[test]
fn empty_bytes_are_not_a_model() {
    expect_err(load(&[]), |e| matches!(e, Error::Decode { .. }), &["empty"]);
}

#[test]
fn random_bytes_are_not_protobuf() {
    // 0xff bytes form a varint that never terminates within 10 bytes: invalid protobuf.
    expect_err(
        load(&[0xff; 24]),
        |e| matches!(e, Error::Decode { .. }),
        &["not an ONNX protobuf"],
    );
    // A text file: "<html>" starts with '<' (0x3c), field 7 with wire type 4 (end group)
    // and no group open, which protobuf rejects.
    expect_err(
        load(b"<html><body>404 not found</body></html>"),
        |e| matches!(e, Error::Decode { .. }),
        &["cannot decode the model"],
    );
}

#[test]
fn truncated_model_is_a_decode_error() {
    let full = bytes(&relu_model(17));
    // Cutting into the last field (a length-delimited message) leaves it short.
    for cut in [1, 2, full.len() / 2] {
        expect_err(
            load(&full[..full.len() - cut]),
            |e| matches!(e, Error::Decode { .. }),
            &["truncated"],
        );
    }
}

#[test]
fn model_without_graph() {
    let model = ModelProto {
        ir_version: 8,
        ..ModelProto::default()
    };
    expect_err(
        load(&bytes(&model)),
        |e| matches!(e, Error::NoGraph),
        &["no graph"],
    );
}

#[test]
fn tensor_file_garbage_is_a_decode_error() {
    expect_err(
        read_tensor_proto(&[0x0a, 0x05, 0x01]),
        |e| {
            matches!(
                e,
                Error::Decode {
                    what: "the tensor",
                    ..
                }
            )
        },
        &["tensor"],
    );
}

#[test]
fn missing_file_names_the_path() {
    let path = std::path::Path::new("/nonexistent/concord/model-that-is-not-here.onnx");
    expect_err(
        load_file(path),
        |e| matches!(e, Error::Io { .. }),
        &["model-that-is-not-here.onnx"],
    );
}

#[test]
fn a_path_that_is_not_a_regular_file_is_refused_before_it_is_read() {
    // A directory, and on Linux a device that would never end.
    let dir = std::env::temp_dir();
    expect_err(
        load_file(&dir),
        |e| matches!(e, Error::ModelFile { .. }),
        &["not a regular file"],
    );
    let zero = std::path::Path::new("/dev/zero");
    if zero.exists() {
        expect_err(
            load_file(zero),
            |e| matches!(e, Error::ModelFile { .. }),
            &["/dev/zero", "not a regular file"],
        );
    }
}

// Opsets and domains.

#[test]
fn opset_too_new() {
    expect_err(
        load(&bytes(&relu_model(29))),
        |e| {
            matches!(
                e,
                Error::OpsetTooNew {
                    version: 29,
                    max_supported: 28,
                    ..
                }
            )
        },
        &["29", "28", "ai.onnx"],
    );
}

#[test]
fn opset_too_old() {
    expect_err(
        load(&bytes(&relu_model(6))),
        |e| {
            matches!(
                e,
                Error::OpsetTooOld {
                    version: 6,
                    min_supported: 7,
                    max_supported: 28,
                    ..
                }
            )
        },
        &["6", "opsets 7 to 28", "broadcast"],
    );
}

#[test]
fn no_default_domain_opset() {
    let mut m = relu_model(17);
    m.opset_import[0].domain = "ai.onnx.ml".to_string();
    expect_err(
        load(&bytes(&m)),
        |e| matches!(e, Error::MissingOpset { .. }),
        &["default ONNX domain"],
    );
}

#[test]
fn unknown_op_names_op_node_and_opset() {
    let m = model(
        17,
        graph(
            vec![node("FancyAttention", "attn0", &["x"], &["y"], vec![])],
            vec![f32_value("x", &[1, 4])],
            vec![output("y")],
            vec![],
        ),
    );
    expect_err(
        load(&bytes(&m)),
        |e| matches!(e, Error::UnknownOp { opset: 17, .. }),
        &["FancyAttention", "attn0", "17"],
    );
}

#[test]
fn op_newer_than_the_opset_is_unknown() {
    // HardSwish was added in opset 14.
    let m = model(
        13,
        graph(
            vec![node("HardSwish", "hs", &["x"], &["y"], vec![])],
            vec![f32_value("x", &[1, 4])],
            vec![output("y")],
            vec![],
        ),
    );
    expect_err(
        read_graph(&bytes(&m)),
        |e| matches!(e, Error::UnknownOp { opset: 13, .. }),
        &["HardSwish", "hs", "13"],
    );
}

#[test]
fn custom_domain_is_refused() {
    let mut n = node("FusedGelu", "gelu", &["x"], &["y"], vec![]);
    n.domain = "com.microsoft".to_string();
    let m = model(
        17,
        graph(
            vec![n],
            vec![f32_value("x", &[1, 4])],
            vec![output("y")],
            vec![],
        ),
    );
    expect_err(
        load(&bytes(&m)),
        |e| matches!(e, Error::UnsupportedDomain { .. }),
        &["com.microsoft", "gelu", "FusedGelu"],
    );
}

// Structure (checked by core through `load`).

#[test]
fn missing_initializer_is_dangling() {
    let m = model(
        17,
        graph(
            vec![node("Add", "add", &["x", "bias"], &["y"], vec![])],
            vec![f32_value("x", &[1, 4])],
            vec![output("y")],
            vec![],
        ),
    );
    expect_err(
        load(&bytes(&m)),
        |e| matches!(e, Error::Graph(CoreError::DanglingInput { .. })),
        &["add", "bias"],
    );
}

#[test]
fn cyclic_graph_is_refused() {
    let m = model(
        17,
        graph(
            vec![
                node("Add", "a", &["x", "c_out"], &["a_out"], vec![]),
                node("Relu", "b", &["a_out"], &["b_out"], vec![]),
                node("Relu", "c", &["b_out"], &["c_out"], vec![]),
            ],
            vec![f32_value("x", &[1, 4])],
            vec![output("b_out")],
            vec![],
        ),
    );
    expect_err(
        load(&bytes(&m)),
        |e| matches!(e, Error::Graph(CoreError::Cycle { .. })),
        &["cycle", "a", "b", "c"],
    );
}

#[test]
fn duplicate_output_name() {
    let m = model(
        17,
        graph(
            vec![
                node("Relu", "first", &["x"], &["y"], vec![]),
                node("Neg", "second", &["x"], &["y"], vec![]),
            ],
            vec![f32_value("x", &[1, 4])],
            vec![output("y")],
            vec![],
        ),
    );
    expect_err(
        load(&bytes(&m)),
        |e| matches!(e, Error::Graph(CoreError::DuplicateValue { .. })),
        &["`y`", "first", "second"],
    );
}

#[test]
fn graph_output_nobody_produces() {
    let m = model(
        17,
        graph(
            vec![node("Relu", "relu", &["x"], &["y"], vec![])],
            vec![f32_value("x", &[1, 4])],
            vec![output("y"), output("ghost")],
            vec![],
        ),
    );
    expect_err(
        load(&bytes(&m)),
        |e| matches!(e, Error::Graph(CoreError::DanglingOutput { .. })),
        &["ghost"],
    );
}

#[test]
fn duplicate_initializer_name() {
    let m = model(
        17,
        graph(
            vec![node("Add", "add", &["x", "w"], &["y"], vec![])],
            vec![f32_value("x", &[1])],
            vec![output("y")],
            vec![
                float_tensor("w", &[1], &[1.0]),
                float_tensor("w", &[1], &[2.0]),
            ],
        ),
    );
    expect_err(
        read_graph(&bytes(&m)),
        |e| matches!(e, Error::Graph(CoreError::DuplicateValue { .. })),
        &["`w`"],
    );
}

// Attributes.

#[test]
fn wrong_attribute_type_names_both_kinds() {
    let m = model(
        17,
        graph(
            vec![node(
                "Softmax",
                "sm",
                &["x"],
                &["y"],
                vec![attr_ints("axis", &[1])],
            )],
            vec![f32_value("x", &[1, 4])],
            vec![output("y")],
            vec![],
        ),
    );
    expect_err(
        load(&bytes(&m)),
        |e| matches!(e, Error::Attribute { attribute, .. } if attribute == "axis"),
        &[
            "sm",
            "Softmax",
            "axis",
            "expected an attribute of type INT",
            "found INTS",
        ],
    );
}

#[test]
fn unknown_attribute_is_refused() {
    let m = model(
        17,
        graph(
            vec![node(
                "Relu",
                "r",
                &["x"],
                &["y"],
                vec![attr_float("alpha", 0.1)],
            )],
            vec![f32_value("x", &[1, 4])],
            vec![output("y")],
            vec![],
        ),
    );
    expect_err(
        read_graph(&bytes(&m)),
        |e| matches!(e, Error::Attribute { attribute, .. } if attribute == "alpha"),
        &["r", "Relu", "alpha"],
    );
}

#[test]
fn attribute_given_twice() {
    let m = model(
        17,
        graph(
            vec![node(
                "Gather",
                "g",
                &["x", "i"],
                &["y"],
                vec![attr_int("axis", 0), attr_int("axis", 1)],
            )],
            vec![f32_value("x", &[4])],
            vec![output("y")],
            vec![i64_tensor("i", &[1], &[0])],
        ),
    );
    expect_err(
        read_graph(&bytes(&m)),
        |e| matches!(e, Error::Attribute { .. }),
        &["g", "axis", "twice"],
    );
}

#[test]
fn constant_without_value() {
    let m = model(
        17,
        graph(
            vec![node("Constant", "c", &[], &["y"], vec![])],
            vec![],
            vec![output("y")],
            vec![],
        ),
    );
    expect_err(
        load(&bytes(&m)),
        |e| matches!(e, Error::MissingAttribute { attribute, .. } if attribute == "value"),
        &["c", "Constant", "value"],
    );
}

#[test]
fn constant_string_value_is_refused() {
    let m = model(
        17,
        graph(
            vec![node(
                "Constant",
                "c",
                &[],
                &["y"],
                vec![attr_string("value_string", "hello")],
            )],
            vec![],
            vec![output("y")],
            vec![],
        ),
    );
    expect_err(
        read_graph(&bytes(&m)),
        |e| matches!(e, Error::Attribute { attribute, .. } if attribute == "value_string"),
        &["c", "value_string"],
    );
}

#[test]
fn concat_without_axis() {
    let m = model(
        17,
        graph(
            vec![node("Concat", "cat", &["x", "x"], &["y"], vec![])],
            vec![f32_value("x", &[1, 4])],
            vec![output("y")],
            vec![],
        ),
    );
    expect_err(
        read_graph(&bytes(&m)),
        |e| matches!(e, Error::MissingAttribute { attribute, .. } if attribute == "axis"),
        &["cat", "Concat", "axis"],
    );
}

#[test]
fn cast_to_unsupported_type() {
    let m = model(
        17,
        graph(
            vec![node(
                "Cast",
                "to_string",
                &["x"],
                &["y"],
                vec![attr_int("to", DataType::String as i64)],
            )],
            vec![f32_value("x", &[1, 4])],
            vec![output("y")],
            vec![],
        ),
    );
    expect_err(
        load(&bytes(&m)),
        |e| matches!(e, Error::UnsupportedDType { data_type: 8, .. }),
        &["to_string", "STRING"],
    );
}

#[test]
fn resize_antialias_is_read() {
    let m = model(
        18,
        graph(
            vec![node(
                "Resize",
                "up",
                &["x", "", "scales"],
                &["y"],
                vec![attr_int("antialias", 1), attr_string("mode", "linear")],
            )],
            vec![f32_value("x", &[1, 1, 2, 2])],
            vec![output("y")],
            vec![float_tensor("scales", &[4], &[1.0, 1.0, 2.0, 2.0])],
        ),
    );
    // The reference implements antialiasing now: the attribute is read, not refused.
    let graph = load(&bytes(&m)).map_err(|e| e.to_string());
    assert_eq!(
        graph.map(|g| matches!(&g.nodes[0].op, concord_core::Op::Resize(r) if r.antialias)),
        Ok(true)
    );
}

#[test]
fn resize_unknown_keep_aspect_ratio_policy_is_refused() {
    let m = model(
        18,
        graph(
            vec![node(
                "Resize",
                "up",
                &["x", "", "", "sizes"],
                &["y"],
                vec![attr_string("keep_aspect_ratio_policy", "sideways")],
            )],
            vec![f32_value("x", &[1, 1, 2, 2])],
            vec![output("y")],
            vec![i64_tensor("sizes", &[4], &[1, 1, 4, 4])],
        ),
    );
    expect_err(
        read_graph(&bytes(&m)),
        |e| matches!(e, Error::Attribute { attribute, .. } if attribute == "keep_aspect_ratio_policy"),
        &["sideways", "not_larger", "not_smaller"],
    );
}

#[test]
fn maxpool_used_indices_output_is_kept() {
    let m = model(
        17,
        graph(
            vec![
                node(
                    "MaxPool",
                    "pool",
                    &["x"],
                    &["y", "idx"],
                    vec![attr_ints("kernel_shape", &[2, 2])],
                ),
                node(
                    "Cast",
                    "cast",
                    &["idx"],
                    &["idx_f"],
                    vec![attr_int("to", 1)],
                ),
            ],
            vec![f32_value("x", &[1, 1, 4, 4])],
            vec![output("y"), output("idx_f")],
            vec![],
        ),
    );
    // The reference computes the Indices; a model that reads them loads with both outputs.
    let graph = load(&bytes(&m)).map_err(|e| e.to_string());
    assert_eq!(
        graph.map(|g| g.nodes[0].outputs.clone()),
        Ok(vec!["y".to_string(), "idx".to_string()])
    );
}

#[test]
fn batch_norm_running_mean_as_graph_output() {
    // BatchNormalization's running statistics exist only in training mode, which Concord
    // does not run; reading one is refused by output index.
    let m = model(
        17,
        graph(
            vec![node(
                "BatchNormalization",
                "bn",
                &["x", "s", "b", "m", "v"],
                &["y", "running_mean"],
                vec![],
            )],
            vec![f32_value("x", &[1, 2, 2, 2])],
            vec![output("y"), output("running_mean")],
            vec![
                float_tensor("s", &[2], &[1.0; 2]),
                float_tensor("b", &[2], &[0.0; 2]),
                float_tensor("m", &[2], &[0.0; 2]),
                float_tensor("v", &[2], &[1.0; 2]),
            ],
        ),
    );
    expect_err(
        read_graph(&bytes(&m)),
        |e| matches!(e, Error::UnsupportedOutput { index: 1, .. }),
        &["bn", "BatchNormalization", "running_mean"],
    );
}

#[test]
fn maxpool_storage_order_beyond_column_major() {
    let m = model(
        17,
        graph(
            vec![node(
                "MaxPool",
                "pool",
                &["x"],
                &["y"],
                vec![
                    attr_ints("kernel_shape", &[2, 2]),
                    attr_int("storage_order", 2),
                ],
            )],
            vec![f32_value("x", &[1, 1, 4, 4])],
            vec![output("y")],
            vec![],
        ),
    );
    expect_err(
        read_graph(&bytes(&m)),
        |e| matches!(e, Error::Attribute { attribute, .. } if attribute == "storage_order"),
        &["pool", "storage_order"],
    );
}

#[test]
fn batch_norm_training_mode() {
    let m = model(
        17,
        graph(
            vec![node(
                "BatchNormalization",
                "bn",
                &["x", "s", "b", "m", "v"],
                &["y"],
                vec![attr_int("training_mode", 1)],
            )],
            vec![f32_value("x", &[1, 1, 2, 2])],
            vec![output("y")],
            vec![
                float_tensor("s", &[1], &[1.0]),
                float_tensor("b", &[1], &[0.0]),
                float_tensor("m", &[1], &[0.0]),
                float_tensor("v", &[1], &[1.0]),
            ],
        ),
    );
    expect_err(
        read_graph(&bytes(&m)),
        |e| matches!(e, Error::Attribute { attribute, .. } if attribute == "training_mode"),
        &["bn", "training mode", "eval"],
    );
}

#[test]
fn split_num_outputs_must_match_outputs() {
    let m = model(
        18,
        graph(
            vec![node(
                "Split",
                "split",
                &["x"],
                &["a", "b"],
                vec![attr_int("num_outputs", 3)],
            )],
            vec![f32_value("x", &[6])],
            vec![output("a"), output("b")],
            vec![],
        ),
    );
    expect_err(
        read_graph(&bytes(&m)),
        |e| matches!(e, Error::Attribute { attribute, .. } if attribute == "num_outputs"),
        &["split", "3", "2 outputs"],
    );
}

#[test]
fn reduce_axes_given_twice() {
    let m = model(
        17,
        graph(
            vec![node(
                "ReduceMean",
                "mean",
                &["x", "axes"],
                &["y"],
                vec![attr_ints("axes", &[1])],
            )],
            vec![f32_value("x", &[2, 3])],
            vec![output("y")],
            vec![i64_tensor("axes", &[1], &[1])],
        ),
    );
    expect_err(
        read_graph(&bytes(&m)),
        |e| matches!(e, Error::Attribute { attribute, .. } if attribute == "axes"),
        &["mean", "both"],
    );
}

// Tensors.

#[test]
fn external_data_initializer() {
    let w = TensorProto {
        dims: vec![4],
        data_type: DataType::Float as i32,
        name: "weights".to_string(),
        data_location: DataLocation::External as i32,
        external_data: vec![StringStringEntryProto {
            key: "location".to_string(),
            value: "weights.bin".to_string(),
        }],
        ..TensorProto::default()
    };
    let m = model(
        17,
        graph(
            vec![node("Add", "add", &["x", "weights"], &["y"], vec![])],
            vec![f32_value("x", &[4])],
            vec![output("y")],
            vec![w],
        ),
    );
    expect_err(
        load(&bytes(&m)),
        |e| matches!(e, Error::ExternalData { tensor } if tensor == "weights"),
        &[
            "weights",
            "external data is not supported",
            "re-save the model with all tensors inline",
        ],
    );
}

#[test]
fn a_tensor_with_two_value_fields_is_refused() {
    // onnx.checker refuses it: raw_data and float_data both set, which one holds the value
    // would be a guess.
    let mut w = float_tensor("w", &[2, 3], &[1.0; 6]);
    w.float_data = vec![2.0; 6];
    let m = model(
        17,
        graph(
            vec![node("Add", "add", &["x", "w"], &["y"], vec![])],
            vec![f32_value("x", &[2, 3])],
            vec![output("y")],
            vec![w],
        ),
    );
    expect_err(
        load(&bytes(&m)),
        |e| matches!(e, Error::TensorData { name, .. } if name == "w"),
        &["`w`", "float_data and raw_data"],
    );
}

#[test]
fn raw_data_length_mismatch() {
    let mut w = float_tensor("w", &[2, 3], &[1.0; 6]);
    w.raw_data.truncate(20);
    let m = model(
        17,
        graph(
            vec![node("Add", "add", &["x", "w"], &["y"], vec![])],
            vec![f32_value("x", &[2, 3])],
            vec![output("y")],
            vec![w],
        ),
    );
    expect_err(
        load(&bytes(&m)),
        |e| matches!(e, Error::TensorData { name, .. } if name == "w"),
        &["`w`", "20 bytes", "24"],
    );
}

#[test]
fn typed_field_length_mismatch() {
    let m = model(
        17,
        graph(
            vec![node("Reshape", "r", &["x", "shape"], &["y"], vec![])],
            vec![f32_value("x", &[2, 3])],
            vec![output("y")],
            vec![i64_tensor("shape", &[2], &[6])],
        ),
    );
    expect_err(
        read_graph(&bytes(&m)),
        |e| matches!(e, Error::TensorData { name, .. } if name == "shape"),
        &["int64_data has 1 elements", "need 2"],
    );
}

#[test]
fn sparse_initializer_is_refused() {
    let mut g = graph(
        vec![node("Add", "add", &["x", "sp"], &["y"], vec![])],
        vec![f32_value("x", &[4])],
        vec![output("y")],
        vec![],
    );
    g.sparse_initializer.push(SparseTensorProto {
        values: Some(float_tensor("sp", &[1], &[1.0])),
        indices: Some(i64_tensor("sp_idx", &[1], &[0])),
        dims: vec![4],
    });
    expect_err(
        read_graph(&bytes(&model(17, g))),
        |e| matches!(e, Error::SparseTensor { tensor } if tensor == "sp"),
        &["sp", "sparse"],
    );
}

#[test]
fn float8_input_is_unsupported() {
    let m = model(
        17,
        graph(
            vec![node("Relu", "relu", &["x"], &["y"], vec![])],
            vec![value("x", DataType::Float8e4m3fn, &[D::V(4)])],
            vec![output("y")],
            vec![],
        ),
    );
    expect_err(
        load(&bytes(&m)),
        |e| matches!(e, Error::UnsupportedDType { name, data_type: 17, .. } if name == "x"),
        &["graph input `x`", "FLOAT8E4M3FN"],
    );
}

#[test]
fn complex_input_is_unsupported() {
    let m = model(
        17,
        graph(
            vec![node("Identity", "id", &["ids"], &["y"], vec![])],
            vec![value("ids", DataType::Complex64, &[D::V(4)])],
            vec![output("y")],
            vec![],
        ),
    );
    expect_err(
        read_graph(&bytes(&m)),
        |e| matches!(e, Error::UnsupportedDType { data_type: 14, .. }),
        &["ids", "COMPLEX64"],
    );
}

#[test]
fn input_without_shape() {
    let mut x = f32_value("x", &[1]);
    if let Some(concord_onnx::proto::type_proto::Value::TensorType(t)) =
        x.r#type.as_mut().and_then(|t| t.value.as_mut())
    {
        t.shape = None;
    }
    let m = model(
        17,
        graph(
            vec![node("Relu", "relu", &["x"], &["y"], vec![])],
            vec![x],
            vec![output("y")],
            vec![],
        ),
    );
    expect_err(
        load(&bytes(&m)),
        |e| matches!(e, Error::InputWithoutShape { name } if name == "x"),
        &["`x`", "no shape"],
    );
}

#[test]
fn input_without_type() {
    let m = model(
        17,
        graph(
            vec![node("Relu", "relu", &["x"], &["y"], vec![])],
            vec![output("x")],
            vec![output("y")],
            vec![],
        ),
    );
    expect_err(
        read_graph(&bytes(&m)),
        |e| matches!(e, Error::ValueInfo { name, .. } if name == "x"),
        &["`x`", "no type"],
    );
}

#[test]
fn input_dims_that_overflow() {
    let m = model(
        17,
        graph(
            vec![node("Relu", "relu", &["x"], &["y"], vec![])],
            vec![f32_value("x", &[1 << 40, 1 << 40, 1 << 40])],
            vec![output("y")],
            vec![],
        ),
    );
    expect_err(
        load(&bytes(&m)),
        |e| matches!(e, Error::Graph(CoreError::ShapeOverflow { name, .. }) if name == "x"),
        &["`x`"],
    );
}

#[test]
fn conv_weight_rank_mismatch() {
    // X is NCHW (rank 4) but W is rank 3; ONNX requires W to have X's rank. This is caught
    // by core's shape inference for Conv.
    let m = model(
        17,
        graph(
            vec![node(
                "Conv",
                "conv1",
                &["x", "w"],
                &["y"],
                vec![attr_ints("kernel_shape", &[3, 3])],
            )],
            vec![f32_value("x", &[1, 3, 8, 8])],
            vec![output("y")],
            vec![float_tensor("w", &[4, 3, 3], &[0.5; 36])],
        ),
    );
    expect_err(
        load(&bytes(&m)),
        |e| {
            matches!(
                e,
                Error::Graph(CoreError::Node { node, op: "Conv", source: OpError::Shape(_) })
                    if node == "conv1"
            )
        },
        &["conv1", "Conv", "rank"],
    );
}

// Robustness.

/// A small deterministic generator (xorshift64), so the mutation test needs no dependency
/// and replays identically.
struct XorShift(u64);

impl XorShift {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
}

/// A model that exercises attributes, initializers and several value fields.
fn busy_model() -> ModelProto {
    model(
        17,
        graph(
            vec![
                node(
                    "Conv",
                    "conv",
                    &["x", "w", "b"],
                    &["c"],
                    vec![
                        attr_ints("kernel_shape", &[1, 1]),
                        attr_ints("pads", &[0, 0, 0, 0]),
                        attr_string("auto_pad", "NOTSET"),
                    ],
                ),
                node("Relu", "", &["c"], &["r"], vec![]),
                node(
                    "Constant",
                    "k",
                    &[],
                    &["shape"],
                    vec![attr_tensor("value", i64_tensor("", &[2], &[1, -1]))],
                ),
                node("Reshape", "reshape", &["r", "shape"], &["y"], vec![]),
                node(
                    "LeakyRelu",
                    "leaky",
                    &["y"],
                    &["z"],
                    vec![attr_float("alpha", 0.2)],
                ),
            ],
            vec![value(
                "x",
                DataType::Float,
                &[D::P("N"), D::V(2), D::V(2), D::V(2)],
            )],
            vec![output("z")],
            vec![
                float_tensor("w", &[2, 2, 1, 1], &[1.0, 0.0, 0.0, 1.0]),
                float_tensor("b", &[2], &[0.5, -0.5]),
            ],
        ),
    )
}

#[test]
fn no_input_bytes_panic() {
    let full = bytes(&busy_model());
    assert!(read_graph(&full).is_ok(), "the unmutated model must read");
    // Every truncation.
    for len in 0..full.len() {
        let _ = load(&full[..len]);
    }
    // Single-byte corruptions at every position, and random multi-byte ones.
    let mut rng = XorShift(0x9e37_79b9_7f4a_7c15);
    for pos in 0..full.len() {
        for value in [0x00, 0x01, 0x7f, 0x80, 0xff, (rng.next() & 0xff) as u8] {
            let mut mutated = full.clone();
            mutated[pos] = value;
            let _ = load(&mutated);
        }
    }
    for _ in 0..2000 {
        let mut mutated = full.clone();
        let flips = 1 + (rng.next() % 8) as usize;
        for _ in 0..flips {
            let pos = (rng.next() % full.len() as u64) as usize;
            mutated[pos] = (rng.next() & 0xff) as u8;
        }
        let _ = load(&mutated);
        let _ = read_tensor_proto(&mutated);
    }
    // Pure noise.
    for len in [1usize, 7, 64, 513] {
        let noise: Vec<u8> = (0..len).map(|_| (rng.next() & 0xff) as u8).collect();
        let _ = load(&noise);
        let _ = read_tensor_proto(&noise);
    }
}

#[test]
fn ops_refused_by_design_say_why() {
    let cases = [
        ("SequenceAt", "", "sequences and optionals are out of scope"),
        (
            "OptionalHasElement",
            "",
            "sequences and optionals are out of scope",
        ),
        ("StringNormalizer", "", "string ops are out of scope"),
        ("ImageDecoder", "", "decoding encoded images"),
        (
            "Adam",
            "ai.onnx.preview.training",
            "training ops are out of scope",
        ),
    ];
    for (op, domain, why) in cases {
        let mut n = node(op, "n0", &["x"], &["y"], vec![]);
        n.domain = domain.to_string();
        let m = model(
            17,
            graph(
                vec![n],
                vec![f32_value("x", &[1, 4])],
                vec![output("y")],
                vec![],
            ),
        );
        expect_err(
            read_graph(&bytes(&m)),
            |e| matches!(e, Error::RefusedOp { op: o, .. } if o == op),
            &[op, "n0", "by design", why],
        );
    }
}

// onnx.checker's structural rules that the reader enforces (docs/onnx-reading.md lists
// every rule and what the reader does with it).

#[test]
fn an_empty_graph_output_name_is_refused() {
    let mut m = relu_model(17);
    if let Some(g) = m.graph.as_mut() {
        g.output.push(output(""));
    }
    expect_err(
        load(&bytes(&m)),
        |e| matches!(e, Error::InvalidModel(detail) if detail.contains("#1")),
        &["graph output #1 has no name"],
    );
}

#[test]
fn an_attribute_holding_two_values_is_refused() {
    // An INT `axis` that also carries an INTS list: which one was meant is a guess.
    let mut axis = attr_int("axis", 1);
    axis.ints = vec![0];
    let m = model(
        17,
        graph(
            vec![node("Softmax", "sm", &["x"], &["y"], vec![axis])],
            vec![f32_value("x", &[1, 4])],
            vec![output("y")],
            vec![],
        ),
    );
    expect_err(
        load(&bytes(&m)),
        |e| matches!(e, Error::Attribute { attribute, .. } if attribute == "axis"),
        &[
            "sm",
            "Softmax",
            "of type INT",
            "also holds a value of type INTS",
        ],
    );
}

#[test]
fn the_default_domain_imported_at_two_versions_is_refused() {
    let mut m = relu_model(17);
    m.opset_import
        .push(concord_onnx::proto::OperatorSetIdProto {
            domain: "ai.onnx".to_string(),
            version: 13,
        });
    expect_err(
        load(&bytes(&m)),
        |e| matches!(e, Error::InvalidModel(_)),
        &["default ONNX domain at 2 different versions", "13, 17"],
    );
    // The same version twice says the same thing twice, and reads.
    let mut same = relu_model(17);
    same.opset_import
        .push(concord_onnx::proto::OperatorSetIdProto {
            domain: "ai.onnx".to_string(),
            version: 17,
        });
    assert!(load(&bytes(&same)).is_ok());
}

#[test]
fn an_attribute_without_a_name_is_refused_as_unknown() {
    let m = model(
        17,
        graph(
            vec![node("Relu", "r", &["x"], &["y"], vec![attr_float("", 0.5)])],
            vec![f32_value("x", &[1, 4])],
            vec![output("y")],
            vec![],
        ),
    );
    expect_err(
        load(&bytes(&m)),
        |e| matches!(e, Error::Attribute { attribute, .. } if attribute.is_empty()),
        &["r", "Relu"],
    );
}

#[test]
fn a_node_without_an_op_type_is_unknown() {
    let m = model(
        17,
        graph(
            vec![node("", "blank", &["x"], &["y"], vec![])],
            vec![f32_value("x", &[1, 4])],
            vec![output("y")],
            vec![],
        ),
    );
    expect_err(
        load(&bytes(&m)),
        |e| matches!(e, Error::UnknownOp { node, .. } if node == "blank"),
        &["blank"],
    );
}

#[test]
fn two_graph_inputs_of_one_name_are_refused() {
    let m = model(
        17,
        graph(
            vec![node("Relu", "r", &["x"], &["y"], vec![])],
            vec![f32_value("x", &[1, 4]), f32_value("x", &[1, 4])],
            vec![output("y")],
            vec![],
        ),
    );
    expect_err(
        load(&bytes(&m)),
        |e| matches!(e, Error::Graph(CoreError::DuplicateValue { value, .. }) if value == "x"),
        &["`x`"],
    );
}
