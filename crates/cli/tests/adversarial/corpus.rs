//! The adversarial corpus: hostile models and inputs, generated here from ONNX message
//! structs (or raw bytes), each with what `concord run` must answer. Nothing is stored on
//! disk between runs; `adversarial.rs` writes every case into a fresh directory and runs it.

use concord::internals::onnx::proto::{
    self, tensor_proto::DataType, type_proto, AttributeProto, AttributeType, GraphProto,
    ModelProto, NodeProto, OperatorSetIdProto, StringStringEntryProto, TensorProto,
    TensorShapeProto, ValueInfoProto,
};
use prost::Message;

/// What a case is about; the test prints its counts per class.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Class {
    Bytes,
    Graph,
    Initializer,
    Attribute,
    RuntimeInput,
    Resource,
}

/// What `concord run` must answer.
#[derive(Clone, Debug)]
pub enum Expect {
    /// Exit 0, every output written under the output directory.
    Runs,
    /// Exit 0 for a model that declares no outputs: nothing to write.
    RunsWritingNothing,
    /// Exit 1 with one `error:` line holding every one of these.
    Refused(Vec<String>),
    /// Either of the above: bytes whose meaning depends on where a cut falls (a cut on a
    /// field boundary leaves a shorter but well-formed message).
    RunsOrRefused(Vec<String>),
}

/// How the case feeds its inputs.
#[derive(Clone, Debug)]
pub enum Feed {
    Random,
    /// `--input NAME=FILE` for each (the file is relative to the case directory; written
    /// from `files`).
    Files(Vec<(String, String)>),
    /// These arguments verbatim after the model path.
    Args(Vec<String>),
}

pub struct Case {
    pub name: String,
    pub class: Class,
    pub model: Vec<u8>,
    /// Extra files in the case directory: (relative path, bytes).
    pub files: Vec<(String, Vec<u8>)>,
    pub feed: Feed,
    pub extra_args: Vec<String>,
    pub expect: Expect,
}

fn refused(needles: &[&str]) -> Expect {
    Expect::Refused(needles.iter().map(|s| s.to_string()).collect())
}

fn case(name: impl Into<String>, class: Class, model: Vec<u8>, expect: Expect) -> Case {
    Case {
        name: name.into(),
        class,
        model,
        files: vec![],
        feed: Feed::Random,
        extra_args: vec![],
        expect,
    }
}

// ---- message builders -------------------------------------------------------------------

pub fn vi(name: &str, elem: DataType, dims: &[i64]) -> ValueInfoProto {
    ValueInfoProto {
        name: name.into(),
        r#type: Some(proto::TypeProto {
            value: Some(type_proto::Value::TensorType(type_proto::Tensor {
                elem_type: elem as i32,
                shape: Some(TensorShapeProto {
                    dim: dims
                        .iter()
                        .map(|&d| proto::tensor_shape_proto::Dimension {
                            value: Some(proto::tensor_shape_proto::dimension::Value::DimValue(d)),
                            denotation: String::new(),
                        })
                        .collect(),
                }),
            })),
            denotation: String::new(),
        }),
        doc_string: String::new(),
    }
}

fn vi_sym(name: &str, dims: &[&str]) -> ValueInfoProto {
    let mut v = vi(name, DataType::Float, &[]);
    if let Some(proto::TypeProto {
        value: Some(type_proto::Value::TensorType(t)),
        ..
    }) = &mut v.r#type
    {
        t.shape = Some(TensorShapeProto {
            dim: dims
                .iter()
                .map(|d| proto::tensor_shape_proto::Dimension {
                    value: Some(proto::tensor_shape_proto::dimension::Value::DimParam(
                        d.to_string(),
                    )),
                    denotation: String::new(),
                })
                .collect(),
        });
    }
    v
}

fn out(name: &str) -> ValueInfoProto {
    ValueInfoProto {
        name: name.into(),
        ..Default::default()
    }
}

pub fn node(name: &str, op: &str, inputs: &[&str], outputs: &[&str]) -> NodeProto {
    NodeProto {
        name: name.into(),
        op_type: op.into(),
        input: inputs.iter().map(|s| s.to_string()).collect(),
        output: outputs.iter().map(|s| s.to_string()).collect(),
        ..Default::default()
    }
}

fn with(mut n: NodeProto, attrs: Vec<AttributeProto>) -> NodeProto {
    n.attribute = attrs;
    n
}

fn a_int(name: &str, v: i64) -> AttributeProto {
    AttributeProto {
        name: name.into(),
        r#type: AttributeType::Int as i32,
        i: Some(v),
        ..Default::default()
    }
}

fn a_ints(name: &str, v: &[i64]) -> AttributeProto {
    AttributeProto {
        name: name.into(),
        r#type: AttributeType::Ints as i32,
        ints: v.to_vec(),
        ..Default::default()
    }
}

fn a_float(name: &str, v: f32) -> AttributeProto {
    AttributeProto {
        name: name.into(),
        r#type: AttributeType::Float as i32,
        f: v,
        ..Default::default()
    }
}

fn a_str(name: &str, v: &str) -> AttributeProto {
    AttributeProto {
        name: name.into(),
        r#type: AttributeType::String as i32,
        s: v.as_bytes().to_vec(),
        ..Default::default()
    }
}

fn a_graph(name: &str, g: GraphProto) -> AttributeProto {
    AttributeProto {
        name: name.into(),
        r#type: AttributeType::Graph as i32,
        g: Some(Box::new(g)),
        ..Default::default()
    }
}

fn t_f32(name: &str, dims: &[i64], data: &[f32]) -> TensorProto {
    TensorProto {
        name: name.into(),
        dims: dims.to_vec(),
        data_type: DataType::Float as i32,
        float_data: data.to_vec(),
        ..Default::default()
    }
}

fn t_i64(name: &str, dims: &[i64], data: &[i64]) -> TensorProto {
    TensorProto {
        name: name.into(),
        dims: dims.to_vec(),
        data_type: DataType::Int64 as i32,
        int64_data: data.to_vec(),
        ..Default::default()
    }
}

fn t_bool(name: &str, v: bool) -> TensorProto {
    TensorProto {
        name: name.into(),
        dims: vec![],
        data_type: DataType::Bool as i32,
        int32_data: vec![v as i32],
        ..Default::default()
    }
}

fn graph(
    inputs: Vec<ValueInfoProto>,
    nodes: Vec<NodeProto>,
    outputs: &[&str],
    inits: Vec<TensorProto>,
) -> GraphProto {
    GraphProto {
        name: "adversarial".into(),
        input: inputs,
        node: nodes,
        output: outputs.iter().map(|s| out(s)).collect(),
        initializer: inits,
        ..Default::default()
    }
}

fn model_of(g: GraphProto, opset: i64) -> ModelProto {
    ModelProto {
        ir_version: 8,
        opset_import: vec![OperatorSetIdProto {
            domain: String::new(),
            version: opset,
        }],
        producer_name: "concord-adversarial".into(),
        graph: Some(g),
        ..Default::default()
    }
}

fn bytes_of(m: &ModelProto) -> Vec<u8> {
    m.encode_to_vec()
}

fn encode(g: GraphProto) -> Vec<u8> {
    bytes_of(&model_of(g, 18))
}

fn x23() -> ValueInfoProto {
    vi("x", DataType::Float, &[2, 3])
}

/// x: f32[2, 3] → `op` (node `victim`, with `attrs`) → y.
fn unary_with(op: &str, attrs: Vec<AttributeProto>) -> Vec<u8> {
    encode(graph(
        vec![x23()],
        vec![with(node("victim", op, &["x"], &["y"]), attrs)],
        &["y"],
        vec![],
    ))
}

/// The small valid model the byte cases cut and corrupt.
pub fn relu_model() -> Vec<u8> {
    encode(graph(
        vec![x23()],
        vec![node("relu", "Relu", &["x"], &["y"])],
        &["y"],
        vec![],
    ))
}

/// A deterministic byte stream (xorshift64*), so every run sees the same corpus.
struct Bytes(u64);
impl Bytes {
    fn next(&mut self) -> u8 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        (self.0.wrapping_mul(0x2545_F491_4F6C_DD1D) >> 56) as u8
    }
}

fn varint(mut v: u64, out: &mut Vec<u8>) {
    loop {
        let b = (v & 0x7f) as u8;
        v >>= 7;
        if v == 0 {
            out.push(b);
            return;
        }
        out.push(b | 0x80);
    }
}

// ---- the classes -------------------------------------------------------------------------

fn bytes_cases() -> Vec<Case> {
    let good = relu_model();
    let m = "model.onnx";
    let mut v = vec![];
    let n = good.len();
    for cut in [
        1,
        2,
        3,
        5,
        8,
        13,
        21,
        n / 4,
        n / 3,
        n / 2,
        2 * n / 3,
        n - 9,
        n - 2,
        n - 1,
    ] {
        v.push(case(
            format!("truncated_at_{cut}_of_{n}"),
            Class::Bytes,
            good[..cut].to_vec(),
            Expect::RunsOrRefused(vec![m.into()]),
        ));
    }
    for seed in 1..=12u64 {
        let mut r = Bytes(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15));
        let len = 16 + 40 * seed as usize;
        v.push(case(
            format!("random_{len}_bytes_seed_{seed}"),
            Class::Bytes,
            (0..len).map(|_| r.next()).collect(),
            refused(&[m]),
        ));
    }
    for seed in 1..=6u64 {
        // The good model with a few bytes flipped.
        let mut r = Bytes(seed.wrapping_mul(0xD1B5_4A32_D192_ED03));
        let mut b = good.clone();
        for _ in 0..3 {
            let i = (r.next() as usize * 256 + r.next() as usize) % b.len();
            b[i] ^= r.next() | 1;
        }
        v.push(case(
            format!("bit_flipped_seed_{seed}"),
            Class::Bytes,
            b,
            Expect::RunsOrRefused(vec![m.into()]),
        ));
    }
    v.push(case("empty_file", Class::Bytes, vec![], refused(&[m])));
    v.push(case("one_zero_byte", Class::Bytes, vec![0], refused(&[m])));
    // Field 7 (graph) as a varint, as fixed32, as a group start.
    v.push(case(
        "graph_as_varint",
        Class::Bytes,
        vec![0x38, 0x05],
        refused(&[m]),
    ));
    v.push(case(
        "graph_as_fixed32",
        Class::Bytes,
        vec![0x3d, 1, 2, 3, 4],
        refused(&[m]),
    ));
    v.push(case(
        "graph_as_group",
        Class::Bytes,
        vec![0x3b, 0x3c],
        refused(&[m]),
    ));
    v.push(case(
        "ir_version_as_bytes",
        Class::Bytes,
        vec![0x0a, 0x02, 0x41, 0x42],
        refused(&[m]),
    ));
    // An 11-byte varint (past 64 bits) for ir_version.
    let mut b = vec![0x08];
    b.extend([0xff; 10]);
    b.push(0x01);
    v.push(case("varint_of_11_bytes", Class::Bytes, b, refused(&[m])));
    // A graph whose length says 2^62 bytes.
    let mut b = vec![0x3a];
    varint(1 << 62, &mut b);
    b.extend([0; 8]);
    v.push(case(
        "graph_length_2_pow_62",
        Class::Bytes,
        b,
        refused(&[m]),
    ));
    // A graph whose length runs 1,000 bytes past the end.
    let mut b = vec![0x3a];
    varint(1000, &mut b);
    b.extend([0x0a, 0x00]);
    v.push(case(
        "graph_length_past_end",
        Class::Bytes,
        b,
        refused(&[m]),
    ));
    // Inside the graph, a node whose op_type string runs past the node's end.
    let node_bytes = [0x22, 0x40, b'R', b'e'];
    let mut g = vec![0x0a, node_bytes.len() as u8];
    g.extend(node_bytes);
    let mut b = vec![0x3a, g.len() as u8];
    b.extend(g);
    v.push(case(
        "string_length_past_message",
        Class::Bytes,
        b,
        refused(&[m]),
    ));
    // A string field holding invalid UTF-8 (the graph name).
    let b = vec![0x3a, 0x04, 0x12, 0x02, 0xff, 0xfe];
    v.push(case("name_not_utf8", Class::Bytes, b, refused(&[m])));
    // Tag 0 and field numbers past 2^29.
    v.push(case(
        "tag_zero",
        Class::Bytes,
        vec![0x00, 0x01],
        refused(&[m]),
    ));
    let mut b = good.clone();
    b.extend([0xf8, 0xff, 0xff, 0xff, 0x7f, 0x01]);
    v.push(case(
        "unknown_field_of_max_number_appended",
        Class::Bytes,
        b,
        Expect::RunsOrRefused(vec![m.into()]),
    ));
    // A text file, a gzip header, an .npy file given as a model.
    v.push(case(
        "text_file",
        Class::Bytes,
        b"ir_version: 8\ngraph { node { op_type: \"Relu\" } }\n".to_vec(),
        refused(&[m]),
    ));
    v.push(case(
        "gzip_magic",
        Class::Bytes,
        vec![0x1f, 0x8b, 0x08, 0, 0, 0, 0, 0, 0, 3],
        refused(&[m]),
    ));
    v
}

fn nested_if(depth: usize) -> GraphProto {
    // `depth` If nodes, each branch holding the next If; the innermost branch outputs a
    // constant from the outer scope.
    fn branch(level: usize, depth: usize) -> GraphProto {
        let out_name = format!("o{level}");
        if level == depth {
            return graph(
                vec![],
                vec![node(
                    &format!("id{level}"),
                    "Identity",
                    &["k"],
                    &[&out_name],
                )],
                &[&out_name],
                vec![],
            );
        }
        let inner = branch(level + 1, depth);
        graph(
            vec![],
            vec![with(
                node(&format!("if{level}"), "If", &["c"], &[&out_name]),
                vec![
                    a_graph("then_branch", inner.clone()),
                    a_graph("else_branch", inner),
                ],
            )],
            &[&out_name],
            vec![],
        )
    }
    // Both branches hold the whole next level, so the model doubles per level: keep the
    // depth small (deep nesting is `deep_if`).
    let inner = branch(1, depth);
    graph(
        vec![],
        vec![with(
            node("if0", "If", &["c"], &["y"]),
            vec![
                a_graph("then_branch", inner.clone()),
                a_graph("else_branch", inner),
            ],
        )],
        &["y"],
        vec![t_bool("c", true), t_f32("k", &[2], &[1.0, 2.0])],
    )
}

/// A graph nested `depth` levels through one `then_branch` each (the else branch is flat),
/// so its size is linear in depth.
fn deep_if(depth: usize) -> GraphProto {
    let flat = || {
        graph(
            vec![],
            vec![node("flat", "Identity", &["k"], &["f"])],
            &["f"],
            vec![],
        )
    };
    let mut g = graph(
        vec![],
        vec![node("leaf", "Identity", &["k"], &["o"])],
        &["o"],
        vec![],
    );
    for level in (1..depth).rev() {
        g = graph(
            vec![],
            vec![with(
                node(&format!("if{level}"), "If", &["c"], &["o"]),
                vec![a_graph("then_branch", g), a_graph("else_branch", flat())],
            )],
            &["o"],
            vec![],
        );
    }
    graph(
        vec![],
        vec![with(
            node("if0", "If", &["c"], &["y"]),
            vec![a_graph("then_branch", g), a_graph("else_branch", flat())],
        )],
        &["y"],
        vec![t_bool("c", true), t_f32("k", &[2], &[1.0, 2.0])],
    )
}

fn relu_chain(n: usize, close_cycle: bool) -> GraphProto {
    let names: Vec<String> = (0..=n).map(|i| format!("v{i}")).collect();
    let mut nodes: Vec<NodeProto> = (0..n)
        .map(|i| node(&format!("r{i}"), "Relu", &[&names[i]], &[&names[i + 1]]))
        .collect();
    if close_cycle {
        // The first node reads the last value instead of the input.
        nodes[0].input = vec![names[n].clone()];
    }
    let mut g = graph(vec![], nodes, &[&names[n]], vec![]);
    g.input = vec![vi("v0", DataType::Float, &[2, 3])];
    g
}

fn graph_cases() -> Vec<Case> {
    let m = "model.onnx";
    let c = |name: &str, g: GraphProto, e: Expect| case(name, Class::Graph, encode(g), e);
    let relu = |n: &str, i: &str, o: &str| node(n, "Relu", &[i], &[o]);
    let mut v = vec![
        c(
            "two_node_cycle",
            graph(
                vec![x23()],
                vec![relu("a", "b_out", "a_out"), relu("b", "a_out", "b_out")],
                &["b_out"],
                vec![],
            ),
            refused(&[m, "cycle"]),
        ),
        c(
            "self_loop",
            graph(vec![x23()], vec![relu("self", "y", "y")], &["y"], vec![]),
            refused(&[m, "cycle", "self"]),
        ),
        c(
            "two_nodes_write_one_value",
            graph(
                vec![x23()],
                vec![relu("first", "x", "y"), relu("second", "x", "y")],
                &["y"],
                vec![],
            ),
            refused(&[m, "`y`"]),
        ),
        c(
            "node_writes_a_graph_input",
            graph(vec![x23()], vec![relu("clobber", "x", "x")], &["x"], vec![]),
            refused(&[m, "`x`"]),
        ),
        c(
            "duplicate_graph_inputs",
            graph(
                vec![x23(), x23()],
                vec![relu("relu", "x", "y")],
                &["y"],
                vec![],
            ),
            refused(&[m, "`x`"]),
        ),
        c(
            "dangling_input",
            graph(
                vec![x23()],
                vec![relu("reader", "nowhere", "y")],
                &["y"],
                vec![],
            ),
            refused(&[m, "`nowhere`"]),
        ),
        c(
            "output_never_produced",
            graph(
                vec![x23()],
                vec![relu("relu", "x", "y")],
                &["ghost"],
                vec![],
            ),
            refused(&[m, "`ghost`"]),
        ),
        c(
            "empty_graph_output_name",
            graph(
                vec![x23()],
                vec![relu("relu", "x", "y")],
                &["y", ""],
                vec![],
            ),
            refused(&[m, "output"]),
        ),
        c(
            "empty_graph_input_name",
            graph(
                vec![vi("", DataType::Float, &[2])],
                vec![relu("relu", "", "y")],
                &["y"],
                vec![],
            ),
            refused(&[m, "input"]),
        ),
        c(
            "empty_node_output_name",
            graph(
                vec![x23()],
                vec![relu("relu", "x", ""), relu("after", "", "y")],
                &["y"],
                vec![],
            ),
            refused(&[m]),
        ),
        c(
            "empty_op_type",
            graph(
                vec![x23()],
                vec![node("nameless_op", "", &["x"], &["y"])],
                &["y"],
                vec![],
            ),
            refused(&[m, "`nameless_op`"]),
        ),
        c(
            "unknown_op",
            graph(
                vec![x23()],
                vec![node("mystery", "FrobnicateAll", &["x"], &["y"])],
                &["y"],
                vec![],
            ),
            refused(&[m, "FrobnicateAll", "`mystery`"]),
        ),
        c(
            "relu_with_three_inputs",
            graph(
                vec![x23()],
                vec![node("greedy", "Relu", &["x", "x", "x"], &["y"])],
                &["y"],
                vec![],
            ),
            refused(&[m, "`greedy` (Relu) has 3 inputs", "at most 1"]),
        ),
        c(
            "add_with_three_inputs",
            graph(
                vec![x23()],
                vec![node("greedy", "Add", &["x", "x", "x"], &["y"])],
                &["y"],
                vec![],
            ),
            refused(&[m, "`greedy` (Add) has 3 inputs", "at most 2"]),
        ),
        c(
            // FIXME: outside the unary and binary families an input past the op's last is
            // still ignored, not refused: core's op schemas carry no input counts yet.
            "softmax_with_two_inputs",
            graph(
                vec![x23()],
                vec![node("greedy", "Softmax", &["x", "x"], &["y"])],
                &["y"],
                vec![],
            ),
            Expect::Runs,
        ),
        c(
            "add_with_one_input",
            graph(
                vec![x23()],
                vec![node("lonely", "Add", &["x"], &["y"])],
                &["y"],
                vec![],
            ),
            refused(&[m, "`lonely`"]),
        ),
        c(
            "relu_with_no_outputs",
            graph(
                vec![x23()],
                vec![node("mute", "Relu", &["x"], &[]), relu("relu", "x", "y")],
                &["y"],
                vec![],
            ),
            refused(&[m, "`mute`"]),
        ),
        c(
            "empty_graph",
            // Accepted, as onnx.checker accepts it: a graph with no outputs computes nothing.
            graph(vec![], vec![], &[], vec![]),
            Expect::RunsWritingNothing,
        ),
        c(
            "output_is_the_input",
            graph(vec![x23()], vec![], &["x"], vec![]),
            Expect::Runs,
        ),
        c(
            "no_inputs_constant_relu",
            graph(
                vec![],
                vec![relu("relu", "k", "y")],
                &["y"],
                vec![t_f32("k", &[2], &[-1.0, 1.0])],
            ),
            Expect::Runs,
        ),
        c(
            "chain_of_10000_relus",
            relu_chain(10_000, false),
            Expect::Runs,
        ),
        c(
            "chain_of_10000_relus_closed_into_a_cycle",
            relu_chain(10_000, true),
            refused(&[m, "cycle"]),
        ),
        c("if_nested_20_deep", deep_if(20), Expect::Runs),
        // Each If level is three protobuf message levels; prost refuses nesting past 100.
        c(
            "if_nested_64_deep",
            deep_if(64),
            refused(&[m, "cannot decode the model"]),
        ),
        c("if_nested_8_deep_both_branches", nested_if(8), Expect::Runs),
        c(
            "if_nested_500_deep",
            deep_if(500),
            refused(&[m, "cannot decode the model"]),
        ),
        c(
            "subgraph_reads_undefined_outer_value",
            graph(
                vec![],
                vec![with(
                    node("branchy", "If", &["c"], &["y"]),
                    vec![
                        a_graph(
                            "then_branch",
                            graph(
                                vec![],
                                vec![relu("inner", "undefined", "o")],
                                &["o"],
                                vec![],
                            ),
                        ),
                        a_graph(
                            "else_branch",
                            graph(vec![], vec![relu("inner2", "k", "o")], &["o"], vec![]),
                        ),
                    ],
                )],
                &["y"],
                vec![t_bool("c", true), t_f32("k", &[1], &[1.0])],
            ),
            refused(&[m, "`undefined`"]),
        ),
        c(
            "if_without_else_branch",
            graph(
                vec![],
                vec![with(
                    node("half_if", "If", &["c"], &["y"]),
                    vec![a_graph(
                        "then_branch",
                        graph(vec![], vec![relu("inner", "k", "o")], &["o"], vec![]),
                    )],
                )],
                &["y"],
                vec![t_bool("c", true), t_f32("k", &[1], &[1.0])],
            ),
            refused(&[m, "`half_if`", "else_branch"]),
        ),
        c(
            "input_of_string_type",
            graph(
                vec![vi("x", DataType::String, &[2])],
                vec![node("id", "Identity", &["x"], &["y"])],
                &["y"],
                vec![],
            ),
            refused(&[m, "`x`"]),
        ),
        c(
            "input_of_unknown_elem_type_99",
            graph(
                vec![ValueInfoProto {
                    name: "x".into(),
                    r#type: Some(proto::TypeProto {
                        value: Some(type_proto::Value::TensorType(type_proto::Tensor {
                            elem_type: 99,
                            shape: Some(TensorShapeProto { dim: vec![] }),
                        })),
                        denotation: String::new(),
                    }),
                    doc_string: String::new(),
                }],
                vec![node("id", "Identity", &["x"], &["y"])],
                &["y"],
                vec![],
            ),
            refused(&[m, "`x`"]),
        ),
        c(
            "input_without_type",
            graph(vec![out("x")], vec![relu("relu", "x", "y")], &["y"], vec![]),
            refused(&[m, "`x`"]),
        ),
        c(
            "name_of_100000_chars",
            {
                let long = "n".repeat(100_000);
                graph(
                    vec![x23()],
                    vec![node("long", "Relu", &["x"], &[&long]), relu("r", "x", "y")],
                    &["y", &long],
                    vec![],
                )
            },
            Expect::Runs,
        ),
    ];
    // Opset and domain trouble.
    let relu_graph = || graph(vec![x23()], vec![relu("relu", "x", "y")], &["y"], vec![]);
    for (name, opsets, needles) in [
        ("opset_1", vec![("", 1)], vec![m, "opset"]),
        ("opset_10000", vec![("", 10_000)], vec![m, "10000"]),
        ("opset_negative", vec![("", -5)], vec![m, "-5"]),
        ("no_opset_import", vec![], vec![m, "opset"]),
        (
            "default_domain_imported_twice",
            vec![("", 13), ("", 18)],
            vec![m, "default ONNX domain", "13, 18"],
        ),
    ] {
        let mut model = model_of(relu_graph(), 18);
        model.opset_import = opsets
            .into_iter()
            .map(|(d, version)| OperatorSetIdProto {
                domain: d.into(),
                version,
            })
            .collect();
        v.push(case(
            name,
            Class::Graph,
            bytes_of(&model),
            refused(&needles),
        ));
    }
    let mut g = relu_graph();
    g.node[0].domain = "com.evil".into();
    v.push(c("custom_domain", g, refused(&[m, "com.evil"])));
    let mut model = model_of(relu_graph(), 18);
    model.graph = None;
    v.push(case(
        "no_graph",
        Class::Graph,
        bytes_of(&model),
        refused(&[m, "graph"]),
    ));
    // Output names that point outside the output directory: written inside it, or refused.
    for (name, out_name) in [
        (
            "output_named_parent_path",
            "../../concord-adversarial-escape",
        ),
        (
            "output_named_absolute_path",
            "/tmp/concord-adversarial-escape",
        ),
        ("output_named_dot", "."),
        ("output_named_dotdot", ".."),
        ("output_named_with_nul", "y\0z"),
        ("output_named_300_chars", &"o".repeat(300)),
    ] {
        v.push(c(
            name,
            graph(
                vec![x23()],
                vec![relu("relu", "x", out_name)],
                &[out_name],
                vec![],
            ),
            Expect::Runs,
        ));
    }
    v
}

fn init_cases() -> Vec<Case> {
    let m = "model.onnx";
    // x + w, where w is the initializer under test.
    let with_w = |name: &str, w: TensorProto, e: Expect| {
        case(
            name,
            Class::Initializer,
            encode(graph(
                vec![x23()],
                vec![node("add", "Add", &["x", "w"], &["y"])],
                &["y"],
                vec![w],
            )),
            e,
        )
    };
    let w = |dims: &[i64], data: &[f32]| t_f32("w", dims, data);
    let raw = |dims: &[i64], dt: DataType, bytes: Vec<u8>| TensorProto {
        name: "w".into(),
        dims: dims.to_vec(),
        data_type: dt as i32,
        raw_data: bytes,
        ..Default::default()
    };
    let ext = |kv: &[(&str, &str)]| TensorProto {
        name: "w".into(),
        dims: vec![3],
        data_type: DataType::Float as i32,
        data_location: proto::tensor_proto::DataLocation::External as i32,
        external_data: kv
            .iter()
            .map(|(k, v)| StringStringEntryProto {
                key: k.to_string(),
                value: v.to_string(),
            })
            .collect(),
        ..Default::default()
    };
    let mut v = vec![
        with_w(
            "valid_broadcast_initializer",
            w(&[3], &[1.0, 2.0, 3.0]),
            Expect::Runs,
        ),
        with_w(
            "float_data_short",
            w(&[3], &[1.0, 2.0]),
            refused(&[m, "`w`"]),
        ),
        with_w("float_data_long", w(&[3], &[1.0; 4]), refused(&[m, "`w`"])),
        with_w("dims_but_no_data", w(&[3], &[]), refused(&[m, "`w`"])),
        with_w("negative_dim", w(&[-3], &[1.0; 3]), refused(&[m, "`w`"])),
        with_w(
            "dims_product_overflows",
            w(&[1 << 40, 1 << 40, 1 << 40], &[1.0]),
            refused(&[m, "`w`"]),
        ),
        with_w(
            "dims_of_i64_min",
            w(&[i64::MIN], &[1.0]),
            refused(&[m, "`w`"]),
        ),
        with_w(
            "raw_data_short",
            raw(&[3], DataType::Float, vec![0; 11]),
            refused(&[m, "`w`"]),
        ),
        with_w(
            "raw_data_long",
            raw(&[3], DataType::Float, vec![0; 16]),
            refused(&[m, "`w`"]),
        ),
        with_w(
            "raw_data_for_f16_odd_length",
            raw(&[3], DataType::Float16, vec![0; 5]),
            refused(&[m, "`w`"]),
        ),
        with_w(
            "raw_and_float_data_both",
            TensorProto {
                raw_data: vec![0; 12],
                ..w(&[3], &[1.0; 3])
            },
            refused(&[m, "`w`"]),
        ),
        with_w(
            "int64_data_for_float",
            TensorProto {
                data_type: DataType::Float as i32,
                ..t_i64("w", &[3], &[1, 2, 3])
            },
            refused(&[m, "`w`"]),
        ),
        with_w(
            "data_type_undefined",
            TensorProto {
                data_type: 0,
                ..w(&[3], &[1.0; 3])
            },
            refused(&[m, "`w`"]),
        ),
        with_w(
            "data_type_99",
            TensorProto {
                data_type: 99,
                ..w(&[3], &[1.0; 3])
            },
            refused(&[m, "`w`"]),
        ),
        with_w(
            "data_type_string",
            TensorProto {
                name: "w".into(),
                dims: vec![1],
                data_type: DataType::String as i32,
                string_data: vec![b"hello".to_vec()],
                ..Default::default()
            },
            refused(&[m, "`w`"]),
        ),
        with_w(
            "data_type_complex64",
            raw(&[3], DataType::Complex64, vec![0; 24]),
            refused(&[m, "`w`"]),
        ),
        with_w(
            "segment_set",
            TensorProto {
                segment: Some(proto::tensor_proto::Segment { begin: 0, end: 1 }),
                ..w(&[3], &[1.0; 3])
            },
            refused(&[m, "`w`"]),
        ),
        with_w(
            "dtype_mismatch_with_x_int64",
            t_i64("w", &[3], &[1, 2, 3]),
            refused(&[m, "`add`"]),
        ),
        with_w(
            "shape_not_broadcastable",
            w(&[4], &[1.0; 4]),
            refused(&[m, "`add`"]),
        ),
        with_w(
            "nan_and_inf_values",
            w(&[3], &[f32::NAN, f32::INFINITY, f32::NEG_INFINITY]),
            Expect::Runs,
        ),
        with_w(
            "empty_initializer_name",
            TensorProto {
                name: String::new(),
                ..w(&[3], &[1.0; 3])
            },
            refused(&[m, "initializer #0 has no name"]),
        ),
        with_w(
            "external_data_parent_traversal",
            ext(&[("location", "../../../../etc/passwd")]),
            refused(&[m, "`w`", "external data"]),
        ),
        with_w(
            "external_data_absolute_path",
            ext(&[("location", "/etc/passwd")]),
            refused(&[m, "`w`", "external data"]),
        ),
        with_w(
            "external_data_missing_file",
            ext(&[("location", "weights_that_do_not_exist.bin")]),
            refused(&[m, "`w`", "external data"]),
        ),
        with_w(
            "external_data_without_location",
            ext(&[("length", "12")]),
            refused(&[m, "`w`", "external data"]),
        ),
        with_w(
            "external_data_offset_past_end",
            ext(&[
                ("location", "weights.bin"),
                ("offset", "18446744073709551615"),
                ("length", "12"),
            ]),
            refused(&[m, "`w`", "external data"]),
        ),
        with_w(
            "external_data_entries_without_location_flag",
            TensorProto {
                data_location: 0,
                ..ext(&[("location", "weights.bin")])
            },
            refused(&[m, "`w`", "external data"]),
        ),
    ];
    // Two initializers of one name.
    v.push(case(
        "duplicate_initializer_names",
        Class::Initializer,
        encode(graph(
            vec![x23()],
            vec![node("add", "Add", &["x", "w"], &["y"])],
            &["y"],
            vec![w(&[3], &[1.0; 3]), w(&[3], &[2.0; 3])],
        )),
        refused(&[m, "`w`"]),
    ));
    // An initializer that shares a graph input's name but not its shape.
    v.push(case(
        "initializer_contradicts_input_shape",
        Class::Initializer,
        encode(graph(
            vec![x23()],
            vec![node("relu", "Relu", &["x"], &["y"])],
            &["y"],
            vec![t_f32("x", &[4], &[1.0; 4])],
        )),
        // Accepted (docs/onnx-reading.md): an initializer named like an input is read as
        // the constant; the input's declared [2, 3] is not compared with it.
        Expect::Runs,
    ));
    // A sparse initializer.
    let mut g = graph(
        vec![x23()],
        vec![node("add", "Add", &["x", "w"], &["y"])],
        &["y"],
        vec![],
    );
    g.sparse_initializer = vec![proto::SparseTensorProto {
        values: Some(t_f32("w", &[1], &[1.0])),
        indices: Some(t_i64("", &[1], &[7])),
        dims: vec![3],
    }];
    v.push(case(
        "sparse_initializer_index_out_of_range",
        Class::Initializer,
        encode(g),
        refused(&[m]),
    ));
    // A valid initializer a next to weights.bin, with a symlink pointing outside.
    let mut c = with_w(
        "external_data_through_symlink",
        ext(&[("location", "link.bin")]),
        refused(&[m, "`w`", "external data"]),
    );
    c.files
        .push(("link.bin@symlink".into(), b"/etc/hostname".to_vec()));
    v.push(c);
    // A bool byte of 2 in raw_data: numpy reads any non-zero byte as true.
    v.push(case(
        "bool_raw_byte_of_2",
        Class::Initializer,
        encode(graph(
            vec![],
            vec![node("not", "Not", &["w"], &["y"])],
            &["y"],
            vec![raw(&[3], DataType::Bool, vec![0, 1, 2])],
        )),
        Expect::RunsOrRefused(vec![m.into(), "`w`".into()]),
    ));
    v
}

fn attribute_cases() -> Vec<Case> {
    // Errors found when the net is built name the model file; those found when a node
    // runs (its operands are known only then) name the node alone.
    let ca = |name: &str, bytes: Vec<u8>, needles: &[&str]| {
        case(name, Class::Attribute, bytes, refused(needles))
    };
    let runs = |name: &str, bytes: Vec<u8>| case(name, Class::Attribute, bytes, Expect::Runs);
    let mut v = vec![
        ca(
            "transpose_perm_repeats",
            unary_with("Transpose", vec![a_ints("perm", &[0, 0])]),
            &["`victim`", "perm"],
        ),
        ca(
            "transpose_perm_out_of_range",
            unary_with("Transpose", vec![a_ints("perm", &[0, 5])]),
            &["`victim`", "perm"],
        ),
        ca(
            "transpose_perm_too_short",
            unary_with("Transpose", vec![a_ints("perm", &[0])]),
            &["`victim`", "perm"],
        ),
        ca(
            "transpose_perm_negative",
            unary_with("Transpose", vec![a_ints("perm", &[-1, 0])]),
            &["`victim`", "perm"],
        ),
        ca(
            "transpose_perm_i64_max",
            unary_with("Transpose", vec![a_ints("perm", &[i64::MAX, 0])]),
            &["`victim`", "perm"],
        ),
        ca(
            "transpose_perm_as_int",
            unary_with("Transpose", vec![a_int("perm", 1)]),
            &["`victim`", "perm"],
        ),
        ca(
            "softmax_axis_5",
            unary_with("Softmax", vec![a_int("axis", 5)]),
            &["`victim`", "axis"],
        ),
        ca(
            "softmax_axis_minus_5",
            unary_with("Softmax", vec![a_int("axis", -5)]),
            &["`victim`", "axis"],
        ),
        ca(
            "softmax_axis_i64_min",
            unary_with("Softmax", vec![a_int("axis", i64::MIN)]),
            &["`victim`", "axis"],
        ),
        ca(
            "softmax_axis_as_float",
            unary_with("Softmax", vec![a_float("axis", 1.0)]),
            &["`victim`", "axis"],
        ),
        ca(
            "softmax_axis_as_string",
            unary_with("Softmax", vec![a_str("axis", "1")]),
            &["`victim`", "axis"],
        ),
        ca(
            "flatten_axis_10",
            unary_with("Flatten", vec![a_int("axis", 10)]),
            &["`victim`", "axis"],
        ),
        ca(
            "relu_with_unknown_attribute",
            unary_with("Relu", vec![a_int("strength", 3)]),
            &["`victim`", "strength"],
        ),
        ca(
            "attribute_with_empty_name",
            unary_with("Relu", vec![a_int("", 3)]),
            &["`victim`"],
        ),
        ca(
            "attribute_type_undefined",
            unary_with(
                "LeakyRelu",
                vec![AttributeProto {
                    name: "alpha".into(),
                    f: 0.5,
                    ..Default::default()
                }],
            ),
            &["`victim`", "alpha"],
        ),
        ca(
            "attribute_type_999",
            unary_with(
                "LeakyRelu",
                vec![AttributeProto {
                    name: "alpha".into(),
                    r#type: 999,
                    f: 0.5,
                    ..Default::default()
                }],
            ),
            &["`victim`", "alpha"],
        ),
        ca(
            "attribute_given_twice",
            unary_with(
                "LeakyRelu",
                vec![a_float("alpha", 0.5), a_float("alpha", 0.2)],
            ),
            &["`victim`", "alpha"],
        ),
        runs(
            "leaky_relu_alpha_nan",
            unary_with("LeakyRelu", vec![a_float("alpha", f32::NAN)]),
        ),
        runs(
            "leaky_relu_alpha_huge",
            unary_with("LeakyRelu", vec![a_float("alpha", f32::MAX)]),
        ),
        ca(
            "cast_to_undefined",
            unary_with("Cast", vec![a_int("to", 0)]),
            &["`victim`"],
        ),
        ca(
            "cast_to_99",
            unary_with("Cast", vec![a_int("to", 99)]),
            &["`victim`", "99"],
        ),
        ca(
            "cast_to_string",
            unary_with("Cast", vec![a_int("to", 8)]),
            &["`victim`"],
        ),
        ca(
            "cast_without_to",
            unary_with("Cast", vec![]),
            &["`victim`", "to"],
        ),
        ca(
            "concat_axis_7",
            encode(graph(
                vec![x23()],
                vec![with(
                    node("victim", "Concat", &["x", "x"], &["y"]),
                    vec![a_int("axis", 7)],
                )],
                &["y"],
                vec![],
            )),
            &["`victim`", "axis"],
        ),
        ca(
            "gather_axis_minus_3",
            encode(graph(
                vec![x23()],
                vec![with(
                    node("victim", "Gather", &["x", "i"], &["y"]),
                    vec![a_int("axis", -3)],
                )],
                &["y"],
                vec![t_i64("i", &[1], &[0])],
            )),
            &["`victim`", "axis"],
        ),
        ca(
            "gather_index_out_of_range",
            encode(graph(
                vec![x23()],
                vec![node("victim", "Gather", &["x", "i"], &["y"])],
                &["y"],
                vec![t_i64("i", &[2], &[0, 100])],
            )),
            &["`victim`", "100"],
        ),
        ca(
            "gather_index_i64_min",
            encode(graph(
                vec![x23()],
                vec![node("victim", "Gather", &["x", "i"], &["y"])],
                &["y"],
                vec![t_i64("i", &[1], &[i64::MIN])],
            )),
            &["`victim`"],
        ),
        ca(
            "split_sizes_do_not_sum",
            encode(graph(
                vec![x23()],
                vec![with(
                    node("victim", "Split", &["x", "s"], &["a", "b"]),
                    vec![a_int("axis", 1)],
                )],
                &["a", "b"],
                vec![t_i64("s", &[2], &[1, 5])],
            )),
            &["`victim`"],
        ),
        ca(
            "reshape_two_minus_ones",
            encode(graph(
                vec![x23()],
                vec![node("victim", "Reshape", &["x", "s"], &["y"])],
                &["y"],
                vec![t_i64("s", &[2], &[-1, -1])],
            )),
            &["`victim`"],
        ),
        ca(
            "reshape_to_wrong_count",
            encode(graph(
                vec![x23()],
                vec![node("victim", "Reshape", &["x", "s"], &["y"])],
                &["y"],
                vec![t_i64("s", &[2], &[4, 4])],
            )),
            &["`victim`"],
        ),
        ca(
            "reshape_to_minus_2",
            encode(graph(
                vec![x23()],
                vec![node("victim", "Reshape", &["x", "s"], &["y"])],
                &["y"],
                vec![t_i64("s", &[1], &[-2])],
            )),
            &["`victim`"],
        ),
        ca(
            "slice_step_zero",
            encode(graph(
                vec![x23()],
                vec![node(
                    "victim",
                    "Slice",
                    &["x", "st", "en", "ax", "sp"],
                    &["y"],
                )],
                &["y"],
                vec![
                    t_i64("st", &[1], &[0]),
                    t_i64("en", &[1], &[3]),
                    t_i64("ax", &[1], &[1]),
                    t_i64("sp", &[1], &[0]),
                ],
            )),
            &["`victim`"],
        ),
        ca(
            "slice_axes_repeat",
            encode(graph(
                vec![x23()],
                vec![node("victim", "Slice", &["x", "st", "en", "ax"], &["y"])],
                &["y"],
                vec![
                    t_i64("st", &[2], &[0, 0]),
                    t_i64("en", &[2], &[1, 1]),
                    t_i64("ax", &[2], &[1, 1]),
                ],
            )),
            &["`victim`"],
        ),
        ca(
            "topk_k_larger_than_axis",
            encode(graph(
                vec![x23()],
                vec![node("victim", "TopK", &["x", "k"], &["v", "i"])],
                &["v", "i"],
                vec![t_i64("k", &[1], &[10])],
            )),
            &["`victim`", "K = 10"],
        ),
        ca(
            "topk_k_negative",
            encode(graph(
                vec![x23()],
                vec![node("victim", "TopK", &["x", "k"], &["v", "i"])],
                &["v", "i"],
                vec![t_i64("k", &[1], &[-1])],
            )),
            &["`victim`", "K = -1"],
        ),
        ca(
            "tile_repeats_negative",
            encode(graph(
                vec![x23()],
                vec![node("victim", "Tile", &["x", "r"], &["y"])],
                &["y"],
                vec![t_i64("r", &[2], &[1, -4])],
            )),
            &["`victim`"],
        ),
        ca(
            "constant_of_shape_negative",
            encode(graph(
                vec![],
                vec![node("victim", "ConstantOfShape", &["s"], &["y"])],
                &["y"],
                vec![t_i64("s", &[2], &[2, -1])],
            )),
            &["`victim`"],
        ),
        ca(
            "range_delta_zero",
            encode(graph(
                vec![],
                vec![node("victim", "Range", &["a", "b", "d"], &["y"])],
                &["y"],
                vec![
                    t_f32("a", &[], &[0.0]),
                    t_f32("b", &[], &[10.0]),
                    t_f32("d", &[], &[0.0]),
                ],
            )),
            &["`victim`"],
        ),
        ca(
            "resize_mode_bogus",
            encode(graph(
                vec![vi("x", DataType::Float, &[1, 1, 2, 2])],
                vec![with(
                    node("victim", "Resize", &["x", "", "sc"], &["y"]),
                    vec![a_str("mode", "bogus")],
                )],
                &["y"],
                vec![t_f32("sc", &[4], &[1.0, 1.0, 2.0, 2.0])],
            )),
            &["`victim`", "bogus"],
        ),
        ca(
            "pad_mode_bogus",
            encode(graph(
                vec![x23()],
                vec![with(
                    node("victim", "Pad", &["x", "p"], &["y"]),
                    vec![a_str("mode", "bogus")],
                )],
                &["y"],
                vec![t_i64("p", &[4], &[0, 0, 0, 0])],
            )),
            &["`victim`", "bogus"],
        ),
        ca(
            "pads_negative_past_the_input",
            encode(graph(
                vec![x23()],
                vec![node("victim", "Pad", &["x", "p"], &["y"])],
                &["y"],
                vec![t_i64("p", &[4], &[0, -10, 0, 0])],
            )),
            &["`victim`"],
        ),
        ca(
            "onehot_depth_negative",
            encode(graph(
                vec![],
                vec![node("victim", "OneHot", &["i", "d", "vals"], &["y"])],
                &["y"],
                vec![
                    t_i64("i", &[2], &[0, 1]),
                    t_i64("d", &[], &[-3]),
                    t_f32("vals", &[2], &[0.0, 1.0]),
                ],
            )),
            &["`victim`"],
        ),
    ];
    // Conv and MaxPool with hostile geometry: x f32[1, 1, 4, 4], w f32[1, 1, 3, 3].
    let conv = |name: &str, attrs: Vec<AttributeProto>, needles: &[&str]| {
        ca(
            name,
            encode(graph(
                vec![vi("x", DataType::Float, &[1, 1, 4, 4])],
                vec![with(node("victim", "Conv", &["x", "w"], &["y"]), attrs)],
                &["y"],
                vec![t_f32("w", &[1, 1, 3, 3], &[0.5; 9])],
            )),
            needles,
        )
    };
    v.extend([
        conv(
            "conv_stride_zero",
            vec![a_ints("strides", &[0, 0])],
            &["`victim`", "strides"],
        ),
        conv(
            "conv_stride_negative",
            vec![a_ints("strides", &[-1, 1])],
            &["`victim`", "strides"],
        ),
        conv(
            "conv_dilation_zero",
            vec![a_ints("dilations", &[0, 1])],
            &["`victim`", "dilations"],
        ),
        conv(
            "conv_group_zero",
            vec![a_int("group", 0)],
            &["`victim`", "group"],
        ),
        conv(
            "conv_group_7",
            vec![a_int("group", 7)],
            &["`victim`", "group"],
        ),
        conv(
            "conv_pads_negative",
            vec![a_ints("pads", &[-5, 0, 0, 0])],
            &["`victim`"],
        ),
        conv(
            "conv_pads_wrong_length",
            vec![a_ints("pads", &[1, 1, 1])],
            &["`victim`", "pads"],
        ),
        conv(
            "conv_kernel_shape_contradicts_w",
            vec![a_ints("kernel_shape", &[5, 5])],
            &["`victim`", "kernel_shape"],
        ),
        conv(
            "conv_auto_pad_bogus",
            vec![a_str("auto_pad", "BOGUS")],
            &["`victim`", "BOGUS"],
        ),
        conv(
            "conv_strides_as_string",
            vec![a_str("strides", "1,1")],
            &["`victim`", "strides"],
        ),
        conv(
            "conv_dilations_huge",
            vec![a_ints("dilations", &[1 << 40, 1])],
            &["`victim`"],
        ),
    ]);
    let pool = |name: &str, attrs: Vec<AttributeProto>, needles: &[&str]| {
        ca(
            name,
            encode(graph(
                vec![vi("x", DataType::Float, &[1, 1, 4, 4])],
                vec![with(node("victim", "MaxPool", &["x"], &["y"]), attrs)],
                &["y"],
                vec![],
            )),
            needles,
        )
    };
    v.extend([
        pool(
            "maxpool_without_kernel_shape",
            vec![],
            &["`victim`", "kernel_shape"],
        ),
        pool(
            "maxpool_kernel_larger_than_input",
            vec![a_ints("kernel_shape", &[9, 9])],
            &["`victim`"],
        ),
        pool(
            "maxpool_kernel_2_pow_40",
            vec![a_ints("kernel_shape", &[1 << 40, 1])],
            &["`victim`"],
        ),
        pool(
            "maxpool_kernel_zero",
            vec![a_ints("kernel_shape", &[0, 0])],
            &["`victim`", "kernel_shape"],
        ),
        pool(
            "maxpool_kernel_rank_3",
            vec![a_ints("kernel_shape", &[2, 2, 2])],
            &["`victim`", "kernel_shape"],
        ),
    ]);
    v
}

/// An .npy file: magic, version, header dict padded with spaces to 64 bytes, then `data`.
pub fn npy(descr: &str, fortran: bool, shape: &str, data: &[u8]) -> Vec<u8> {
    let mut header = format!(
        "{{'descr': '{descr}', 'fortran_order': {}, 'shape': {shape}, }}",
        if fortran { "True" } else { "False" }
    );
    while (10 + header.len() + 1) % 64 != 0 {
        header.push(' ');
    }
    header.push('\n');
    let mut b = b"\x93NUMPY\x01\x00".to_vec();
    b.extend((header.len() as u16).to_le_bytes());
    b.extend(header.as_bytes());
    b.extend(data);
    b
}

fn f32_bytes(values: &[f32]) -> Vec<u8> {
    values.iter().flat_map(|v| v.to_le_bytes()).collect()
}

fn input_cases() -> Vec<Case> {
    let model = relu_model();
    let six = f32_bytes(&[1.0, -2.0, 3.0, -4.0, 5.0, -6.0]);
    let with_npy = |name: &str, file: Vec<u8>, expect: Expect| Case {
        name: name.into(),
        class: Class::RuntimeInput,
        model: model.clone(),
        files: vec![("x.npy".into(), file)],
        feed: Feed::Files(vec![("x".into(), "x.npy".into())]),
        extra_args: vec![],
        expect,
    };
    let good = npy("<f4", false, "(2, 3)", &six);
    let mut bad_magic = good.clone();
    bad_magic[1] = b'X';
    let mut version_9 = good.clone();
    version_9[6] = 9;
    let mut header_len_past_end = good.clone();
    header_len_past_end[8] = 0xff;
    header_len_past_end[9] = 0x7f;
    let mut v = vec![
        with_npy("valid_npy", good.clone(), Expect::Runs),
        with_npy(
            "nan_and_inf_input",
            npy(
                "<f4",
                false,
                "(2, 3)",
                &f32_bytes(&[f32::NAN, f32::INFINITY, -0.0, f32::MIN, f32::MAX, 1e-45]),
            ),
            Expect::Runs,
        ),
        with_npy(
            "big_endian_f4",
            npy(">f4", false, "(2, 3)", &six),
            Expect::Runs,
        ),
        with_npy(
            "fortran_order",
            npy("<f4", true, "(2, 3)", &six),
            refused(&["x.npy", "Fortran"]),
        ),
        with_npy("bad_magic", bad_magic, refused(&["x.npy"])),
        with_npy("version_9", version_9, refused(&["x.npy"])),
        with_npy(
            "header_length_past_end",
            header_len_past_end,
            refused(&["x.npy"]),
        ),
        with_npy(
            "truncated_in_header",
            good[..20].to_vec(),
            refused(&["x.npy"]),
        ),
        with_npy(
            "truncated_in_data",
            good[..good.len() - 5].to_vec(),
            refused(&["x.npy"]),
        ),
        // Bytes after the data are ignored, as numpy's np.load ignores them.
        with_npy(
            "trailing_bytes",
            [good.clone(), vec![0; 7]].concat(),
            Expect::Runs,
        ),
        with_npy("npy_empty_file", vec![], refused(&["x.npy"])),
        with_npy(
            "header_not_a_dict",
            {
                let mut b = b"\x93NUMPY\x01\x00".to_vec();
                let h = "[1, 2, 3]".to_string() + &" ".repeat(44) + "\n";
                b.extend((h.len() as u16).to_le_bytes());
                b.extend(h.as_bytes());
                b
            },
            refused(&["x.npy"]),
        ),
        with_npy(
            "descr_complex",
            npy("<c8", false, "(2, 3)", &[0; 48]),
            refused(&["x.npy"]),
        ),
        with_npy(
            "descr_object",
            npy("|O", false, "(2, 3)", &[0; 48]),
            refused(&["x.npy"]),
        ),
        with_npy(
            "descr_unicode",
            npy("<U4", false, "(2, 3)", &[0; 96]),
            refused(&["x.npy"]),
        ),
        with_npy(
            "descr_garbage",
            npy("<zz9", false, "(2, 3)", &six),
            refused(&["x.npy"]),
        ),
        with_npy(
            "npy_negative_dim",
            npy("<f4", false, "(-1, 3)", &six),
            refused(&["x.npy"]),
        ),
        with_npy(
            "shape_of_10_pow_12_with_no_data",
            npy("<f4", false, "(1000000, 1000000)", &six),
            refused(&["x.npy"]),
        ),
        with_npy(
            "shape_overflows_u64",
            npy("<f4", false, "(4294967296, 4294967296, 4294967296)", &six),
            refused(&["x.npy", "more elements than a 64-bit count holds"]),
        ),
        with_npy(
            "wrong_dtype_f64",
            npy("<f8", false, "(2, 3)", &[0; 48]),
            refused(&["`x`"]),
        ),
        with_npy(
            "wrong_dtype_i32",
            npy("<i4", false, "(2, 3)", &[0; 24]),
            refused(&["`x`"]),
        ),
        with_npy(
            "wrong_shape_3x2",
            npy("<f4", false, "(3, 2)", &six),
            refused(&["`x`", "[3, 2]"]),
        ),
        with_npy(
            "wrong_rank",
            npy("<f4", false, "(6,)", &six),
            refused(&["`x`", "[6]"]),
        ),
        with_npy(
            "empty_input_0x3",
            npy("<f4", false, "(0, 3)", &[]),
            refused(&["`x`", "[0, 3]"]),
        ),
        with_npy(
            "scalar_input",
            npy("<f4", false, "()", &six[..4]),
            refused(&["`x`"]),
        ),
    ];
    // A symbolic input takes an empty one and runs.
    v.push(Case {
        name: "empty_input_to_symbolic_dims".into(),
        class: Class::RuntimeInput,
        model: encode(graph(
            vec![vi_sym("x", &["n", "m"])],
            vec![node("relu", "Relu", &["x"], &["y"])],
            &["y"],
            vec![],
        )),
        files: vec![("x.npy".into(), npy("<f4", false, "(0, 3)", &[]))],
        feed: Feed::Files(vec![("x".into(), "x.npy".into())]),
        extra_args: vec![],
        expect: Expect::Runs,
    });
    let args = |name: &str, a: &[&str], files: Vec<(String, Vec<u8>)>, e: Expect| Case {
        name: name.into(),
        class: Class::RuntimeInput,
        model: model.clone(),
        files,
        feed: Feed::Args(a.iter().map(|s| s.to_string()).collect()),
        extra_args: vec![],
        expect: e,
    };
    let good_file = || vec![("x.npy".to_string(), good.clone())];
    v.extend([
        args("no_input_given", &[], vec![], refused(&["x: f32[2, 3]"])),
        args(
            "input_for_unknown_name",
            &["--input", "z=x.npy"],
            good_file(),
            refused(&["`z`"]),
        ),
        args(
            "input_given_twice",
            &["--input", "x=x.npy", "--input", "x=x.npy"],
            good_file(),
            refused(&["`x`"]),
        ),
        args(
            "input_file_missing",
            &["--input", "x=missing.npy"],
            vec![],
            refused(&["missing.npy"]),
        ),
        args(
            "input_file_is_a_directory",
            &["--input", "x=."],
            vec![],
            refused(&["not a regular file"]),
        ),
        args(
            "input_without_equals",
            &["--input", "x.npy"],
            good_file(),
            refused(&["x.npy"]),
        ),
        args(
            "input_from_dev_zero",
            &["--input", "x=/dev/zero"],
            vec![],
            refused(&["/dev/zero"]),
        ),
    ]);
    v
}

fn resource_cases() -> Vec<Case> {
    let m = "model.onnx";
    let cr = |name: &str, bytes: Vec<u8>, e: Expect| case(name, Class::Resource, bytes, e);
    let mut v = vec![
        cr(
            "constant_of_shape_1e6_by_1e6",
            encode(graph(
                vec![],
                vec![node("huge", "ConstantOfShape", &["s"], &["y"])],
                &["y"],
                vec![t_i64("s", &[2], &[1_000_000, 1_000_000])],
            )),
            refused(&["`huge`", "memory limit"]),
        ),
        cr(
            "range_of_10_pow_15",
            encode(graph(
                vec![],
                vec![node("huge", "Range", &["a", "b", "d"], &["y"])],
                &["y"],
                vec![
                    t_i64("a", &[], &[0]),
                    t_i64("b", &[], &[1_000_000_000_000_000]),
                    t_i64("d", &[], &[1]),
                ],
            )),
            refused(&["`huge`", "memory limit"]),
        ),
        cr(
            "tile_by_10_pow_6_squared",
            encode(graph(
                vec![x23()],
                vec![node("huge", "Tile", &["x", "r"], &["y"])],
                &["y"],
                vec![t_i64("r", &[2], &[1_000_000, 1_000_000])],
            )),
            refused(&["`huge`", "memory limit"]),
        ),
        cr(
            "onehot_depth_10_pow_12",
            encode(graph(
                vec![],
                vec![node("huge", "OneHot", &["i", "d", "vals"], &["y"])],
                &["y"],
                vec![
                    t_i64("i", &[2], &[0, 1]),
                    t_i64("d", &[], &[1_000_000_000_000]),
                    t_f32("vals", &[2], &[0.0, 1.0]),
                ],
            )),
            refused(&["`huge`", "memory limit"]),
        ),
        cr(
            "random_input_declared_1e6_by_1e6",
            encode(graph(
                vec![vi("x", DataType::Float, &[1_000_000, 1_000_000])],
                vec![node("relu", "Relu", &["x"], &["y"])],
                &["y"],
                vec![],
            )),
            refused(&["`x`", "memory limit"]),
        ),
        cr(
            "random_input_dims_overflow",
            encode(graph(
                vec![vi("x", DataType::Float, &[1 << 40, 1 << 40])],
                vec![node("relu", "Relu", &["x"], &["y"])],
                &["y"],
                vec![],
            )),
            refused(&["`x`"]),
        ),
        cr(
            "matmul_outer_product_1e6",
            encode(graph(
                vec![
                    vi("a", DataType::Float, &[1_000_000, 1]),
                    vi("b", DataType::Float, &[1, 1_000_000]),
                ],
                vec![node("huge", "MatMul", &["a", "b"], &["y"])],
                &["y"],
                vec![],
            )),
            refused(&["`huge`", "memory limit"]),
        ),
    ];
    // A loop whose trip count is 2^62 and whose scan output grows each iteration: the budget
    // ends it. And the same with a 1 KiB limit on a small valid model.
    let body = |emit: bool| {
        let mut nodes = vec![node("keep", "Identity", &["c"], &["c_out"])];
        let mut outs = vec!["c_out"];
        if emit {
            nodes.push(node("emit", "Identity", &["row_k"], &["row"]));
            outs.push("row");
        }
        let mut g = graph(
            vec![vi("i", DataType::Int64, &[]), vi("c", DataType::Bool, &[])],
            nodes,
            &outs,
            vec![],
        );
        if emit {
            g.initializer = vec![t_f32("row_k", &[1000], &[0.25; 1000])];
        }
        g
    };
    let looped = |trip: i64, emit: bool| {
        let outs: Vec<&str> = if emit { vec!["rows"] } else { vec![] };
        let mut g = graph(
            vec![],
            vec![with(
                node("forever", "Loop", &["n", "cond"], &outs),
                vec![a_graph("body", body(emit))],
            )],
            &outs,
            vec![t_i64("n", &[], &[trip]), t_bool("cond", true)],
        );
        if !emit {
            // Something to output: the loop computes nothing visible.
            g.node.push(node("relu", "Relu", &["k"], &["y"]));
            g.output = vec![out("y")];
            g.initializer.push(t_f32("k", &[1], &[1.0]));
        }
        encode(g)
    };
    let mut c = cr(
        "loop_trip_count_2_pow_62_growing",
        looped(1 << 62, true),
        refused(&["`forever`", "memory limit of 1048576 bytes"]),
    );
    c.extra_args = vec!["--memory-limit".into(), "1M".into()];
    v.push(c);
    let mut c = cr("loop_trip_count_negative", looped(-5, true), Expect::Runs);
    c.extra_args = vec!["--memory-limit".into(), "1M".into()];
    v.push(c);
    v.push(cr(
        "loop_trip_count_zero_no_outputs",
        looped(0, false),
        Expect::Runs,
    ));
    // A loop carrying one state through 2^62 iterations that allocate nothing new.
    let carried = |trip: i64| {
        let body = graph(
            vec![
                vi("i", DataType::Int64, &[]),
                vi("c", DataType::Bool, &[]),
                vi("s", DataType::Float, &[1]),
            ],
            vec![
                node("keep", "Identity", &["c"], &["c_out"]),
                node("step", "Relu", &["s"], &["s_out"]),
            ],
            &["c_out", "s_out"],
            vec![],
        );
        encode(graph(
            vec![],
            vec![with(
                node("spin", "Loop", &["n", "cond", "s0"], &["s_final"]),
                vec![a_graph("body", body)],
            )],
            &["s_final"],
            vec![
                t_i64("n", &[], &[trip]),
                t_bool("cond", true),
                t_f32("s0", &[1], &[1.0]),
            ],
        ))
    };
    v.push(cr(
        "loop_carrying_state_1000_times",
        carried(1000),
        Expect::Runs,
    ));
    // FIXME: `carried(1 << 62)` is not in the corpus because it hangs: a Loop whose
    // iterations allocate nothing new is bounded by no budget, only by its trip count, and
    // 2^62 iterations never end (the watchdog kills it on cpu and opencl). It needs an
    // iteration limit (a decision for the memory-budget design), not a longer watchdog.
    let mut c = cr(
        "model_over_16_byte_limit",
        relu_model(),
        refused(&[m, "memory limit of 16 bytes"]),
    );
    c.extra_args = vec!["--memory-limit".into(), "16".into()];
    v.push(c);
    let mut c = cr(
        "memory_limit_garbage",
        relu_model(),
        refused(&["--memory-limit"]),
    );
    c.extra_args = vec!["--memory-limit".into(), "lots".into()];
    v.push(c);
    let mut c = cr(
        "memory_limit_overflowing",
        relu_model(),
        refused(&["--memory-limit"]),
    );
    c.extra_args = vec!["--memory-limit".into(), "99999999999999999999T".into()];
    v.push(c);
    // Many outputs, all written.
    let nodes: Vec<NodeProto> = (0..500)
        .map(|i| node(&format!("r{i}"), "Relu", &["x"], &[&format!("out{i}")]))
        .collect();
    let names: Vec<String> = (0..500).map(|i| format!("out{i}")).collect();
    let name_refs: Vec<&str> = names.iter().map(|s| s.as_str()).collect();
    v.push(cr(
        "five_hundred_outputs",
        encode(graph(vec![x23()], nodes, &name_refs, vec![])),
        Expect::Runs,
    ));
    // A model of 2 MiB of initializer data over a 1 MiB limit.
    let mut c = cr(
        "model_file_over_limit",
        encode(graph(
            vec![x23()],
            vec![node("add", "Add", &["x", "big"], &["y"])],
            &["y"],
            vec![t_f32("big", &[1, 524_288], &vec![0.0; 524_288])],
        )),
        refused(&[m, "memory limit of 1048576 bytes"]),
    );
    c.extra_args = vec!["--memory-limit".into(), "1M".into()];
    v.push(c);
    v
}

/// Every case of the corpus.
pub fn all() -> Vec<Case> {
    let mut v = bytes_cases();
    v.extend(graph_cases());
    v.extend(init_cases());
    v.extend(attribute_cases());
    v.extend(input_cases());
    v.extend(resource_cases());
    v
}
