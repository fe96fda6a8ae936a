//! The mutators: each changes one structural thing in a decoded model (or, one among many,
//! flips bytes of the encoded one). A mutant is one to four of them stacked on a seed.

use crate::rng::Rng;
use crate::Corpus;
use concord_onnx::proto::{
    tensor_shape_proto, type_proto, AttributeProto, AttributeType, GraphProto, ModelProto,
    NodeProto, OperatorSetIdProto, StringStringEntryProto, TensorProto, TensorShapeProto,
    ValueInfoProto,
};
use prost::Message;

/// Integers that sit on the edges ONNX readers and kernels have to handle.
const INTS: &[i64] = &[
    0,
    1,
    -1,
    2,
    3,
    -2,
    4,
    7,
    64,
    255,
    256,
    65_535,
    1 << 20,
    i32::MAX as i64,
    i32::MIN as i64,
    1 << 32,
    1 << 40,
    1 << 62,
    -(1 << 62),
    i64::MAX,
    i64::MIN,
];

/// Floats on the edges: zeros, signs, NaN, infinities, the extremes and a subnormal.
const FLOATS: &[f32] = &[
    0.0,
    -0.0,
    1.0,
    -1.0,
    0.5,
    2.0,
    f32::NAN,
    f32::INFINITY,
    f32::NEG_INFINITY,
    f32::MAX,
    f32::MIN,
    1e-45,
    1e30,
];

/// Strings attributes take (modes, paddings, layouts) and some they never do.
const STRINGS: &[&str] = &[
    "",
    "NOTSET",
    "SAME_UPPER",
    "SAME_LOWER",
    "VALID",
    "constant",
    "reflect",
    "edge",
    "wrap",
    "linear",
    "nearest",
    "cubic",
    "half_pixel",
    "asymmetric",
    "align_corners",
    "tf_crop_and_resize",
    "round_prefer_floor",
    "DCR",
    "CRD",
    "mean",
    "sum",
    "none",
    "ij,jk->ik",
    "...ii->...i",
    "\u{fffd}\u{0}",
];

/// Attribute names ops read, for adding one a node may not expect.
const ATTRIBUTE_NAMES: &[&str] = &[
    "axis",
    "axes",
    "perm",
    "pads",
    "strides",
    "dilations",
    "kernel_shape",
    "group",
    "auto_pad",
    "keepdims",
    "transA",
    "transB",
    "alpha",
    "beta",
    "epsilon",
    "mode",
    "to",
    "value",
    "body",
    "then_branch",
    "else_branch",
    "num_scan_inputs",
    "split",
    "starts",
    "ends",
    "shape",
    "allowzero",
    "blocksize",
    "ceil_mode",
    "count_include_pad",
    "storage_order",
    "coordinate_transformation_mode",
    "direction",
    "hidden_size",
    "largest",
    "sorted",
    "k",
    "batch_dims",
    "reduction",
    "equation",
    "seed",
    "dtype",
    "select_last_index",
    "noop_with_empty_axes",
    "exclusive",
    "reverse",
    "stash_type",
];

/// Element types, valid and not: every `TensorProto.DataType` and some beyond them.
const DATA_TYPES: &[i32] = &[
    0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 19, 21, 22, 23, 24, 99, -1,
];

/// Opset versions, inside the range Concord reads and outside it.
const OPSETS: &[i64] = &[
    -1,
    0,
    1,
    6,
    7,
    8,
    9,
    10,
    11,
    12,
    13,
    14,
    16,
    17,
    18,
    19,
    20,
    21,
    22,
    23,
    24,
    25,
    26,
    27,
    28,
    29,
    1000,
    i64::MAX,
];

/// A mutant of seed `pick`: one to four structural mutations, then, now and again, byte
/// mutations of the encoded model.
pub fn mutant(corpus: &Corpus, pick: usize, rng: &mut Rng) -> Vec<u8> {
    let mut model = corpus.seeds[pick].model.clone();
    // Mostly one or two mutations, so that most mutants still get past the reader.
    let count = if rng.one_in(4) {
        1 + rng.below(4)
    } else {
        1 + rng.below(2)
    };
    let mut bytes_too = rng.one_in(25);
    for _ in 0..count {
        if rng.one_in(40) {
            bytes_too = true;
        } else {
            mutate_model(&mut model, corpus, rng);
        }
    }
    let mut bytes = model.encode_to_vec();
    if bytes_too {
        for _ in 0..1 + rng.below(4) {
            mutate_bytes(&mut bytes, rng);
        }
    }
    bytes
}

/// Calls `f` on `graph` and every subgraph in it (attributes `g` and `graphs`), depth first.
pub fn visit_graphs(graph: &GraphProto, f: &mut dyn FnMut(&GraphProto)) {
    f(graph);
    for node in &graph.node {
        for attribute in &node.attribute {
            if let Some(g) = &attribute.g {
                visit_graphs(g, f);
            }
            for g in &attribute.graphs {
                visit_graphs(g, f);
            }
        }
    }
}

fn count_graphs(graph: &GraphProto) -> usize {
    let mut n = 0;
    visit_graphs(graph, &mut |_| n += 1);
    n
}

/// The `k`-th graph in [`visit_graphs`] order.
fn nth_graph<'a>(graph: &'a mut GraphProto, k: &mut usize) -> Option<&'a mut GraphProto> {
    if *k == 0 {
        return Some(graph);
    }
    *k -= 1;
    for node in graph.node.iter_mut() {
        for attribute in node.attribute.iter_mut() {
            if let Some(g) = attribute.g.as_deref_mut() {
                if let Some(found) = nth_graph(g, k) {
                    return Some(found);
                }
            }
            for g in attribute.graphs.iter_mut() {
                if let Some(found) = nth_graph(g, k) {
                    return Some(found);
                }
            }
        }
    }
    None
}

fn mutate_model(model: &mut ModelProto, corpus: &Corpus, rng: &mut Rng) {
    match rng.below(20) {
        0 => mutate_opsets(model, rng),
        1 => {
            model.ir_version = match rng.below(3) {
                0 => *rng.pick(INTS).unwrap_or(&0),
                _ => 3 + rng.below(9) as i64,
            }
        }
        _ => {
            let Some(graph) = model.graph.as_mut() else {
                model.graph = Some(GraphProto::default());
                return;
            };
            // Subgraphs get a fair share: half the time a mutation lands in a random one.
            let total = count_graphs(graph);
            let mut k = if total > 1 && rng.one_in(2) {
                1 + rng.below(total - 1)
            } else {
                0
            };
            if let Some(g) = nth_graph(graph, &mut k) {
                mutate_graph(g, corpus, rng);
            }
        }
    }
}

fn mutate_opsets(model: &mut ModelProto, rng: &mut Rng) {
    match rng.below(6) {
        0 => model.opset_import.clear(),
        1 => model.opset_import.push(OperatorSetIdProto {
            domain: if rng.one_in(2) {
                String::new()
            } else {
                "ai.onnx".to_string()
            },
            version: *rng.pick(OPSETS).unwrap_or(&13),
        }),
        2 => model.opset_import.push(OperatorSetIdProto {
            domain: "com.microsoft".to_string(),
            version: 1,
        }),
        _ => {
            if let Some(o) = model.opset_import.first_mut() {
                o.version = if rng.one_in(3) {
                    o.version.wrapping_add(rng.below(3) as i64 - 1)
                } else {
                    *rng.pick(OPSETS).unwrap_or(&13)
                };
            }
        }
    }
}

fn mutate_graph(graph: &mut GraphProto, corpus: &Corpus, rng: &mut Rng) {
    match rng.below(22) {
        0..=4 => mutate_attribute(graph, corpus, rng),
        5 | 6 => mutate_node_io(graph, rng),
        7 => mutate_op_type(graph, corpus, rng),
        8 | 9 => mutate_nodes(graph, corpus, rng),
        10..=12 => mutate_value_info(graph, rng),
        13..=16 => {
            if let Some(t) = pick_tensor(graph, rng) {
                mutate_tensor(t, rng);
            } else {
                mutate_value_info(graph, rng);
            }
        }
        17 | 18 => mutate_graph_io(graph, rng),
        19 => mutate_subgraph(graph, corpus, rng),
        _ => mutate_attribute(graph, corpus, rng),
    }
}

/// Every value name the graph defines or reads (inputs, initializers, node outputs and
/// inputs), for renaming a node's input to one that exists.
fn value_names(graph: &GraphProto) -> Vec<String> {
    let mut names: Vec<String> = graph.input.iter().map(|v| v.name.clone()).collect();
    names.extend(graph.initializer.iter().map(|t| t.name.clone()));
    for node in &graph.node {
        names.extend(node.output.iter().cloned());
        names.extend(node.input.iter().cloned());
    }
    names
}

fn random_name(rng: &mut Rng) -> String {
    match rng.below(6) {
        0 => String::new(),
        1 => "x".repeat(1 + rng.below(3000)),
        2 => "a/b\\c..\u{0}".to_string(),
        _ => format!("fuzz_{}", rng.below(8)),
    }
}

fn mutate_node_io(graph: &mut GraphProto, rng: &mut Rng) {
    let names = value_names(graph);
    let Some(node) = pick_mut(&mut graph.node, rng) else {
        return;
    };
    let list = if rng.one_in(3) {
        &mut node.output
    } else {
        &mut node.input
    };
    match rng.below(8) {
        0 => {
            if !list.is_empty() {
                list.remove(rng.below(list.len()));
            }
        }
        1 => {
            if let Some(name) = list.get(rng.below(list.len().max(1))).cloned() {
                list.push(name);
            }
        }
        2 => list.insert(rng.below(list.len() + 1), String::new()),
        3 => list.clear(),
        4 => {
            if list.len() >= 2 {
                let a = rng.below(list.len());
                let b = rng.below(list.len());
                list.swap(a, b);
            }
        }
        5 => list.push(rng.pick(&names).cloned().unwrap_or_default()),
        6 => {
            let name = random_name(rng);
            if let Some(slot) = pick_mut(list, rng) {
                *slot = name;
            }
        }
        _ => {
            let name = rng.pick(&names).cloned().unwrap_or_default();
            if let Some(slot) = pick_mut(list, rng) {
                *slot = name;
            }
        }
    }
}

fn mutate_op_type(graph: &mut GraphProto, corpus: &Corpus, rng: &mut Rng) {
    let Some(node) = pick_mut(&mut graph.node, rng) else {
        return;
    };
    match rng.below(8) {
        0 => {
            node.domain = ["ai.onnx.ml", "com.microsoft", "ai.onnx", "x"][rng.below(4)].to_string()
        }
        1 => node.op_type = random_name(rng),
        _ => node.op_type = rng.pick(&corpus.op_types).cloned().unwrap_or_default(),
    }
}

fn mutate_nodes(graph: &mut GraphProto, corpus: &Corpus, rng: &mut Rng) {
    let n = graph.node.len();
    match rng.below(5) {
        0 if n > 0 => {
            graph.node.remove(rng.below(n));
        }
        1 if n > 0 => {
            let copy = graph.node[rng.below(n)].clone();
            graph.node.insert(rng.below(n + 1), copy);
        }
        2 if n > 1 => {
            let a = rng.below(n);
            let b = rng.below(n);
            graph.node.swap(a, b);
        }
        _ => {
            // Splice: a node from another model, its inputs rebound to values of this graph.
            let names = value_names(graph);
            let donor = &corpus.seeds[rng.below(corpus.seeds.len())].model;
            let Some(donor_graph) = donor.graph.as_ref() else {
                return;
            };
            let Some(mut node) = rng.pick(&donor_graph.node).cloned() else {
                return;
            };
            for input in node.input.iter_mut() {
                if !input.is_empty() && !rng.one_in(4) {
                    *input = rng.pick(&names).cloned().unwrap_or_default();
                }
            }
            if rng.one_in(2) {
                if let (Some(out), Some(first)) = (graph.output.first_mut(), node.output.first()) {
                    out.name = first.clone();
                }
            }
            graph.node.insert(rng.below(n + 1), node);
        }
    }
}

fn pick_mut<'a, T>(items: &'a mut [T], rng: &mut Rng) -> Option<&'a mut T> {
    let n = items.len();
    if n == 0 {
        None
    } else {
        items.get_mut(rng.below(n))
    }
}

fn mutate_attribute(graph: &mut GraphProto, _corpus: &Corpus, rng: &mut Rng) {
    // Prefer a node that has attributes.
    let with: Vec<usize> = (0..graph.node.len())
        .filter(|&i| !graph.node[i].attribute.is_empty())
        .collect();
    let index = match rng.pick(&with) {
        Some(&i) if !rng.one_in(6) => i,
        _ if !graph.node.is_empty() => rng.below(graph.node.len()),
        _ => return,
    };
    let node: &mut NodeProto = &mut graph.node[index];
    if node.attribute.is_empty() || rng.one_in(8) {
        node.attribute.push(random_attribute(rng));
        return;
    }
    let n = node.attribute.len();
    match rng.below(12) {
        0 => {
            node.attribute.remove(rng.below(n));
        }
        1 => {
            let copy = node.attribute[rng.below(n)].clone();
            node.attribute.push(copy);
        }
        2 => {
            // Another kind than the value it holds (or no kind at all).
            let a = &mut node.attribute[rng.below(n)];
            a.r#type = [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 13, 99][rng.below(14)];
        }
        3 => {
            // The value moved to another field, the kind kept.
            let a = &mut node.attribute[rng.below(n)];
            let i = a.i.take();
            let ints = std::mem::take(&mut a.ints);
            match rng.below(3) {
                0 => a.floats = ints.iter().map(|&x| x as f32).collect(),
                1 => a.ints = i.into_iter().collect(),
                _ => a.i = ints.first().copied(),
            }
        }
        4 => node.attribute[rng.below(n)].name = random_name(rng),
        _ => {
            let a = &mut node.attribute[rng.below(n)];
            mutate_attribute_value(a, rng);
        }
    }
}

fn random_int(rng: &mut Rng) -> i64 {
    if rng.one_in(3) {
        rng.below(17) as i64 - 8
    } else {
        *rng.pick(INTS).unwrap_or(&0)
    }
}

fn random_float(rng: &mut Rng) -> f32 {
    if rng.one_in(3) {
        (rng.unit() * 8.0 - 4.0) as f32
    } else {
        *rng.pick(FLOATS).unwrap_or(&0.0)
    }
}

fn mutate_list<T: Clone>(list: &mut Vec<T>, rng: &mut Rng, fresh: &mut dyn FnMut(&mut Rng) -> T) {
    match rng.below(6) {
        0 => list.clear(),
        1 => list.push(fresh(rng)),
        2 => {
            if !list.is_empty() {
                list.remove(rng.below(list.len()));
            }
        }
        3 => {
            let len = rng.below(9);
            *list = (0..len).map(|_| fresh(rng)).collect();
        }
        _ => {
            let value = fresh(rng);
            match pick_mut(list, rng) {
                Some(slot) => *slot = value,
                None => list.push(value),
            }
        }
    }
}

fn mutate_attribute_value(a: &mut AttributeProto, rng: &mut Rng) {
    match AttributeType::try_from(a.r#type).unwrap_or(AttributeType::Undefined) {
        AttributeType::Int => a.i = Some(random_int(rng)),
        AttributeType::Float => a.f = random_float(rng),
        AttributeType::Ints => mutate_list(&mut a.ints, rng, &mut random_int),
        AttributeType::Floats => mutate_list(&mut a.floats, rng, &mut random_float),
        AttributeType::String => a.s = rng.pick(STRINGS).unwrap_or(&"").as_bytes().to_vec(),
        AttributeType::Strings => mutate_list(&mut a.strings, rng, &mut |r| {
            r.pick(STRINGS).unwrap_or(&"").as_bytes().to_vec()
        }),
        AttributeType::Tensor => match a.t.as_mut() {
            Some(t) => mutate_tensor(t, rng),
            None => a.t = Some(random_tensor(rng)),
        },
        AttributeType::Graph => match a.g.as_mut() {
            Some(g) if !rng.one_in(4) => {
                // A subgraph's interface: its inputs and outputs, which the node binds.
                mutate_graph_io(g, rng)
            }
            _ => a.g = None,
        },
        _ => {
            a.r#type = AttributeType::Int as i32;
            a.i = Some(random_int(rng));
        }
    }
}

fn random_attribute(rng: &mut Rng) -> AttributeProto {
    let mut a = AttributeProto {
        name: rng.pick(ATTRIBUTE_NAMES).unwrap_or(&"axis").to_string(),
        ..Default::default()
    };
    match rng.below(6) {
        0 => {
            a.r#type = AttributeType::Int as i32;
            a.i = Some(random_int(rng));
        }
        1 => {
            a.r#type = AttributeType::Ints as i32;
            a.ints = (0..rng.below(6)).map(|_| random_int(rng)).collect();
        }
        2 => {
            a.r#type = AttributeType::Float as i32;
            a.f = random_float(rng);
        }
        3 => {
            a.r#type = AttributeType::String as i32;
            a.s = rng.pick(STRINGS).unwrap_or(&"").as_bytes().to_vec();
        }
        4 => {
            a.r#type = AttributeType::Tensor as i32;
            a.t = Some(random_tensor(rng));
        }
        _ => {
            a.r#type = AttributeType::Graph as i32;
            a.g = Some(Box::new(GraphProto::default()));
        }
    }
    a
}

fn random_tensor(rng: &mut Rng) -> TensorProto {
    let dims: Vec<i64> = (0..rng.below(3)).map(|_| rng.below(4) as i64).collect();
    let numel: i64 = dims.iter().product();
    let data_type = *rng.pick(&[1, 7, 6, 9, 11, 10]).unwrap_or(&1);
    let mut t = TensorProto {
        dims,
        data_type,
        ..Default::default()
    };
    let width = match data_type {
        7 | 11 => 8,
        10 => 2,
        9 => 1,
        _ => 4,
    };
    t.raw_data = (0..numel.max(0) as usize * width)
        .map(|_| rng.below(256) as u8)
        .collect();
    t
}

/// An initializer, or a Constant's or other node's tensor attribute.
fn pick_tensor<'a>(graph: &'a mut GraphProto, rng: &mut Rng) -> Option<&'a mut TensorProto> {
    let attrs = graph
        .node
        .iter()
        .flat_map(|n| &n.attribute)
        .filter(|a| a.t.is_some())
        .count();
    let total = graph.initializer.len() + attrs;
    if total == 0 {
        return None;
    }
    let k = rng.below(total);
    if k < graph.initializer.len() {
        return graph.initializer.get_mut(k);
    }
    graph
        .node
        .iter_mut()
        .flat_map(|n| n.attribute.iter_mut())
        .filter_map(|a| a.t.as_mut())
        .nth(k - graph.initializer.len())
}

fn mutate_tensor(t: &mut TensorProto, rng: &mut Rng) {
    match rng.below(12) {
        0 => mutate_list(&mut t.dims, rng, &mut |r| {
            if r.one_in(2) {
                r.below(5) as i64
            } else {
                random_int(r)
            }
        }),
        1 => t.data_type = *rng.pick(DATA_TYPES).unwrap_or(&1),
        2 => {
            // Data length off by some bytes.
            let len = t.raw_data.len();
            if len > 0 && rng.one_in(2) {
                t.raw_data.truncate(rng.below(len));
            } else {
                let extra = 1 + rng.below(16);
                t.raw_data.extend((0..extra).map(|_| rng.below(256) as u8));
            }
        }
        3 => {
            // The data in a typed field as well as (or instead of) raw.
            match rng.below(4) {
                0 => t.float_data = (0..1 + rng.below(8)).map(|_| random_float(rng)).collect(),
                1 => t.int64_data = (0..1 + rng.below(8)).map(|_| random_int(rng)).collect(),
                2 => {
                    t.int32_data = (0..1 + rng.below(8))
                        .map(|_| rng.below(9) as i32 - 4)
                        .collect()
                }
                _ => t.double_data = vec![f64::NAN; 1 + rng.below(4)],
            }
            if rng.one_in(2) {
                t.raw_data.clear();
            }
        }
        4 => {
            // External data, a segment, or string data.
            match rng.below(3) {
                0 => {
                    t.data_location = 1;
                    t.external_data.push(StringStringEntryProto {
                        key: "location".to_string(),
                        value: ["weights.bin", "../../etc/passwd", "/dev/zero"][rng.below(3)]
                            .to_string(),
                    });
                }
                1 => {
                    t.segment = Some(concord_onnx::proto::tensor_proto::Segment {
                        begin: 0,
                        end: random_int(rng),
                    })
                }
                _ => t.string_data.push(b"s".to_vec()),
            }
        }
        5 => t.name = String::new(),
        _ => mutate_tensor_values(t, rng),
    }
}

/// One element of a tensor's data set to an edge value of its type: shape tensors, axes,
/// indices, trip counts and pads are where a value becomes a size.
fn mutate_tensor_values(t: &mut TensorProto, rng: &mut Rng) {
    if !t.int64_data.is_empty() {
        let v = random_int(rng);
        if let Some(slot) = pick_mut(&mut t.int64_data, rng) {
            *slot = v;
        }
        return;
    }
    if !t.float_data.is_empty() {
        let v = random_float(rng);
        if let Some(slot) = pick_mut(&mut t.float_data, rng) {
            *slot = v;
        }
        return;
    }
    if !t.int32_data.is_empty() {
        let v = random_int(rng) as i32;
        if let Some(slot) = pick_mut(&mut t.int32_data, rng) {
            *slot = v;
        }
        return;
    }
    let width = match t.data_type {
        7 | 11 | 13 => 8,
        1 | 6 | 12 => 4,
        10 | 16 | 4 | 5 => 2,
        _ => 1,
    };
    let elements = t.raw_data.len() / width;
    if elements == 0 {
        return;
    }
    let at = rng.below(elements) * width;
    let bytes: Vec<u8> = match (t.data_type, width) {
        (1, _) => random_float(rng).to_le_bytes().to_vec(),
        (11, _) => f64::from(random_float(rng)).to_le_bytes().to_vec(),
        (_, 8) => random_int(rng).to_le_bytes().to_vec(),
        (_, 4) => (random_int(rng) as i32).to_le_bytes().to_vec(),
        (_, 2) => (random_int(rng) as i16).to_le_bytes().to_vec(),
        _ => vec![rng.below(256) as u8],
    };
    t.raw_data[at..at + width].copy_from_slice(&bytes[..width]);
}

/// A declared value: a graph input's, output's or value_info's type and shape.
fn mutate_value_info(graph: &mut GraphProto, rng: &mut Rng) {
    let total = graph.input.len() + graph.output.len() + graph.value_info.len();
    if total == 0 {
        return;
    }
    let k = rng.below(total);
    let info: &mut ValueInfoProto = if k < graph.input.len() {
        &mut graph.input[k]
    } else if k < graph.input.len() + graph.output.len() {
        &mut graph.output[k - graph.input.len()]
    } else {
        &mut graph.value_info[k - graph.input.len() - graph.output.len()]
    };
    let Some(type_proto::Value::TensorType(tensor)) =
        info.r#type.as_mut().and_then(|t| t.value.as_mut())
    else {
        info.r#type = None;
        return;
    };
    match rng.below(8) {
        0 => tensor.elem_type = *rng.pick(DATA_TYPES).unwrap_or(&1),
        1 => tensor.shape = None,
        2 => tensor.shape = Some(TensorShapeProto::default()),
        _ => {
            let shape = tensor.shape.get_or_insert_with(TensorShapeProto::default);
            mutate_list(&mut shape.dim, rng, &mut |r| {
                use tensor_shape_proto::dimension::Value;
                tensor_shape_proto::Dimension {
                    value: match r.below(6) {
                        0 => None,
                        1 => Some(Value::DimParam(["N", "M", ""][r.below(3)].to_string())),
                        2 => Some(Value::DimValue(random_int(r))),
                        _ => Some(Value::DimValue(r.below(5) as i64)),
                    },
                    denotation: String::new(),
                }
            });
        }
    }
}

/// The graph's own inputs and outputs: removed, duplicated, renamed, or an initializer also
/// declared as an input.
fn mutate_graph_io(graph: &mut GraphProto, rng: &mut Rng) {
    match rng.below(7) {
        0 => {
            if !graph.input.is_empty() {
                graph.input.remove(rng.below(graph.input.len()));
            }
        }
        1 => {
            if !graph.output.is_empty() {
                graph.output.remove(rng.below(graph.output.len()));
            }
        }
        2 => {
            if let Some(v) = rng.pick(&graph.output).cloned() {
                graph.output.push(v);
            }
        }
        3 => {
            if let Some(v) = rng.pick(&graph.input).cloned() {
                graph.input.push(v);
            }
        }
        4 => {
            let names = value_names(graph);
            let name = rng.pick(&names).cloned().unwrap_or_default();
            if let Some(v) = pick_mut(&mut graph.output, rng) {
                v.name = name;
            }
        }
        5 => {
            let name = random_name(rng);
            if let Some(v) = pick_mut(&mut graph.input, rng) {
                v.name = name;
            }
        }
        _ => {
            if let Some(t) = rng.pick(&graph.initializer) {
                let info = ValueInfoProto {
                    name: t.name.clone(),
                    r#type: Some(concord_onnx::proto::TypeProto {
                        value: Some(type_proto::Value::TensorType(type_proto::Tensor {
                            elem_type: t.data_type,
                            shape: None,
                        })),
                        denotation: String::new(),
                    }),
                    doc_string: String::new(),
                };
                graph.input.push(info);
            }
        }
    }
}

/// A node's subgraph replaced by one from another model, removed, or emptied; or a node
/// given a subgraph it does not take.
fn mutate_subgraph(graph: &mut GraphProto, corpus: &Corpus, rng: &mut Rng) {
    let seed = &corpus.seeds[rng.below(corpus.seeds.len())].model;
    let donor = match &seed.graph {
        Some(g) => {
            let total = count_graphs(g);
            let want = if total > 1 && !rng.one_in(4) {
                1 + rng.below(total - 1)
            } else {
                0
            };
            let mut k = 0;
            let mut found = GraphProto::default();
            visit_graphs(g, &mut |sub| {
                if k == want {
                    found = sub.clone();
                }
                k += 1;
            });
            found
        }
        None => GraphProto::default(),
    };
    let Some(node) = pick_mut(&mut graph.node, rng) else {
        return;
    };
    let slot = node
        .attribute
        .iter_mut()
        .find(|a| a.g.is_some() && !rng.one_in(4));
    match slot {
        Some(a) => match rng.below(3) {
            0 => a.g = None,
            1 => a.g = Some(Box::new(GraphProto::default())),
            _ => a.g = Some(Box::new(donor)),
        },
        None => node.attribute.push(AttributeProto {
            name: ["body", "then_branch", "else_branch"][rng.below(3)].to_string(),
            r#type: AttributeType::Graph as i32,
            g: Some(Box::new(donor)),
            ..Default::default()
        }),
    }
}

/// Bytes of the encoded model: bits flipped, bytes set to edge values, a range inserted,
/// removed or cut off.
pub fn mutate_bytes(bytes: &mut Vec<u8>, rng: &mut Rng) {
    if bytes.is_empty() {
        bytes.push(rng.below(256) as u8);
        return;
    }
    let at = rng.below(bytes.len());
    match rng.below(6) {
        0 => bytes[at] ^= 1 << rng.below(8),
        1 => bytes[at] = [0x00, 0x01, 0x7f, 0x80, 0xff][rng.below(5)],
        2 => {
            let n = 1 + rng.below(16);
            let insert: Vec<u8> = (0..n).map(|_| rng.below(256) as u8).collect();
            bytes.splice(at..at, insert);
        }
        3 => {
            let end = (at + 1 + rng.below(16)).min(bytes.len());
            bytes.drain(at..end);
        }
        4 => bytes.truncate(at),
        _ => {
            // A varint length set to its largest one-byte-longer value.
            bytes[at] |= 0x80;
        }
    }
}
