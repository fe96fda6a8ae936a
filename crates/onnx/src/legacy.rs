//! Opsets 7 to 12 on import: a node written in an older opset's form is rewritten, as
//! NodeProtos, into the opset-13 form ([`FORM_OPSET`]) that [`crate::ops::read_op`] reads,
//! so the op mapping and the IR know one form of each op.
//!
//! - Attributes that later became inputs (Slice's starts/ends/axes before 10, Pad's pads
//!   and value and Clip's min/max before 11, Dropout's ratio before 12, Squeeze's and
//!   Unsqueeze's axes and Split's split before 13) become initializers the node reads as
//!   those inputs. Clip's bounds and Pad's value take the dtype of the data they apply to,
//!   which is only known after inference: they are made f32 and listed in
//!   [`Normaliser::follows`] for the reader to retype.
//! - Upsample (opsets 7 to 9) and Resize-10 become Resize-13 with the mapping they meant:
//!   `coordinate_transformation_mode = asymmetric` (x_in = x_out / scale) and, for nearest,
//!   `nearest_mode = floor`.
//! - Scatter (opsets 9 and 10; deprecated from 11) becomes ScatterElements, which reads
//!   the same inputs and `axis`.
//! - Softmax before 13 coerces its input to 2-D at `axis` (default 1) and normalises each
//!   row; unless `axis` is known to be the last one, it becomes Shape, Flatten(axis),
//!   Softmax(-1) and Reshape back to the input's shape, as onnx's version converter does.
//! - BatchNormalization's `spatial` (before 9) reads when it is 1, the only form with an
//!   equivalent.
//! - Scan-8 (a batch axis on every input and output, an optional `sequence_lens` input, and
//!   `directions`) is, without sequence_lens, an opset-9 Scan per batch element: the node
//!   is rewritten to that per-element Scan here, and the reader wraps it in a Scan over
//!   the batch axis ([`scan_over_batch`]). With sequence_lens (lengths per batch element)
//!   it has no opset-9 equivalent and is refused.
//! - Forms from before opset 7 (`consumed_inputs`, `is_test`, a binary op's `broadcast` and
//!   `axis`) are refused by name at any opset, as is every form with no opset-13
//!   equivalent: each is an [`Error::LegacyForm`] naming node, op, opset and attribute.
//!
//! Ops whose older forms read the same as their opset-13 form (Gemm's required C before 11,
//! Flatten's and Gather's non-negative axis before 11, the older pooling attribute sets,
//! Reduce axes as an attribute, which the IR keeps) pass through unchanged.

use crate::attrs::Attrs;
use crate::error::Error;
use crate::proto::{AttributeProto, NodeProto};
use crate::read::NodeNames;
use concord_core::op::Binary;
use concord_core::{Graph, Node, Op, Tensor, ValueInfo};
use std::collections::{BTreeMap, HashMap, HashSet};

/// The opset whose forms the op mapping reads; nodes of older opsets are rewritten to it,
/// and the graph of an older model says this opset.
pub const FORM_OPSET: i64 = 13;

/// One node after normalisation: its (unique) name and its opset-13 form.
#[derive(Clone, Debug)]
pub struct Normalised {
    pub name: String,
    pub proto: NodeProto,
}

/// An f32 initializer made from an attribute (Clip's min and max, Pad's value) that must
/// have the dtype of the node's data input `value`, which is only known after inference.
#[derive(Clone, Debug)]
pub struct FollowsDtype {
    pub initializer: String,
    pub value: String,
}

/// Rewrites the nodes of one graph read at `opset`.
pub struct Normaliser<'g> {
    opset: i64,
    initializers: &'g mut BTreeMap<String, Tensor>,
    /// Every value name of the graph and every one made here, so made names are fresh.
    values: HashSet<String>,
    /// Ranks known before inference (graph inputs and initializers).
    ranks: HashMap<String, usize>,
    /// The made initializers whose dtype follows their node's data input.
    pub follows: Vec<FollowsDtype>,
}

/// Whether `op_type` is an op that exists only in older opsets and that this module maps
/// onto an op of the table (Upsample onto Resize, Scatter onto ScatterElements).
pub fn is_legacy_alias(op_type: &str, opset: i64) -> bool {
    match op_type {
        "Upsample" => opset < FORM_OPSET,
        // Scatter exists from opset 9; `normalise` refuses it from 11, where it is
        // deprecated, with a reason.
        "Scatter" => (9..FORM_OPSET).contains(&opset),
        _ => false,
    }
}

/// How an attribute that became an input is stored.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    /// An INTS attribute → a 1-D i64 tensor.
    Ints,
    /// A FLOAT attribute → an f32 scalar.
    Float,
    /// A FLOAT attribute → a scalar of the data input's dtype (see [`FollowsDtype`]).
    FloatLikeData,
}

/// One attribute that later became input `index`.
#[derive(Clone, Copy, Debug)]
struct ToInput {
    attribute: &'static str,
    index: usize,
    kind: Kind,
    required: bool,
}

const fn to_input(attribute: &'static str, index: usize, kind: Kind, required: bool) -> ToInput {
    ToInput {
        attribute,
        index,
        kind,
        required,
    }
}

impl<'g> Normaliser<'g> {
    /// `values` is every value name the graph mentions; `ranks` the ranks known before
    /// inference.
    pub fn new(
        opset: i64,
        initializers: &'g mut BTreeMap<String, Tensor>,
        values: HashSet<String>,
        ranks: HashMap<String, usize>,
    ) -> Self {
        Normaliser {
            opset,
            initializers,
            values,
            ranks,
            follows: Vec::new(),
        }
    }

    /// The opset-13 form of one node (several nodes for Softmax before 13).
    pub fn normalise(
        &mut self,
        proto: &NodeProto,
        name: String,
        names: &mut NodeNames,
    ) -> Result<Vec<Normalised>, Error> {
        refuse_pre_opset_7(proto, &name, self.opset)?;
        let unchanged = |name: String| {
            Ok(vec![Normalised {
                name,
                proto: proto.clone(),
            }])
        };
        if self.opset >= FORM_OPSET {
            return unchanged(name);
        }
        let opset = self.opset;
        refuse_newer_attributes(proto, &name, opset)?;
        let node = name.clone();
        let a = Attrs::new(&node, &proto.op_type, &proto.attribute)?;
        let rewritten = match proto.op_type.as_str() {
            "Slice" if opset < 10 => self.attributes_to_inputs(
                proto,
                &a,
                &[
                    to_input("starts", 1, Kind::Ints, true),
                    to_input("ends", 2, Kind::Ints, true),
                    to_input("axes", 3, Kind::Ints, false),
                ],
            )?,
            "Pad" if opset < 11 => self.attributes_to_inputs(
                proto,
                &a,
                &[
                    to_input("pads", 1, Kind::Ints, true),
                    to_input("value", 2, Kind::FloatLikeData, false),
                ],
            )?,
            "Clip" if opset < 11 => self.attributes_to_inputs(
                proto,
                &a,
                &[
                    to_input("min", 1, Kind::FloatLikeData, false),
                    to_input("max", 2, Kind::FloatLikeData, false),
                ],
            )?,
            "Dropout" if opset < 12 => {
                self.attributes_to_inputs(proto, &a, &[to_input("ratio", 1, Kind::Float, false)])?
            }
            "Squeeze" => {
                self.attributes_to_inputs(proto, &a, &[to_input("axes", 1, Kind::Ints, false)])?
            }
            "Unsqueeze" => {
                self.attributes_to_inputs(proto, &a, &[to_input("axes", 1, Kind::Ints, true)])?
            }
            "Split" => {
                self.attributes_to_inputs(proto, &a, &[to_input("split", 1, Kind::Ints, false)])?
            }
            "BatchNormalization" if opset < 9 => {
                let spatial = a.int_or("spatial", 1)?;
                if spatial != 1 {
                    return Err(legacy(
                        proto,
                        &name,
                        opset,
                        "attribute `spatial`",
                        format!(
                            "is {spatial}: per-activation statistics (scale, B, mean and var \
                             of shape C×D1×…×Dn) have no equivalent in BatchNormalization from \
                             opset 9; only spatial = 1 (per-channel statistics) is read"
                        ),
                    ));
                }
                without_attributes(proto, &["spatial"])
            }
            "Scan" if opset < 9 => self.scan_8(proto, &name, &a)?,
            "Softmax" => return self.softmax(proto, name, &a, names),
            "Upsample" => self.upsample(proto, &name, &a)?,
            "Scatter" => self.scatter(proto, &name, &a)?,
            "Resize" if opset < 11 => self.resize_10(proto, &name, &a)?,
            "Resize" => {
                let mode = a.string("coordinate_transformation_mode")?;
                if mode.as_deref() == Some("tf_half_pixel_for_nn") {
                    return Err(legacy(
                        proto,
                        &name,
                        opset,
                        "attribute `coordinate_transformation_mode`",
                        "`tf_half_pixel_for_nn` (opsets 11 and 12 only, x_in = (x_out + 0.5) / \
                         scale) has no equivalent from opset 13; re-export the model with \
                         half_pixel or asymmetric",
                    ));
                }
                proto.clone()
            }
            _ => proto.clone(),
        };
        Ok(vec![Normalised {
            name,
            proto: rewritten,
        }])
    }

    /// Moves the attributes in `specs` to the inputs they became, as initializers. The old
    /// form has only the data input, so any other input is refused.
    fn attributes_to_inputs(
        &mut self,
        proto: &NodeProto,
        a: &Attrs,
        specs: &[ToInput],
    ) -> Result<NodeProto, Error> {
        let (node, op) = (a.node(), proto.op_type.as_str());
        if let Some((index, input)) = proto
            .input
            .iter()
            .enumerate()
            .skip(1)
            .find(|(_, i)| !i.is_empty())
        {
            let attributes: Vec<&str> = specs.iter().map(|s| s.attribute).collect();
            return Err(legacy(
                proto,
                node,
                self.opset,
                &format!("input {index} (`{input}`)"),
                format!(
                    "at opset {} {op} takes {} as attributes and has only its data input",
                    self.opset,
                    attributes.join(", ")
                ),
            ));
        }
        let Some(data) = proto.input.first().filter(|d| !d.is_empty()) else {
            return Err(legacy(
                proto,
                node,
                self.opset,
                "input 0",
                "is missing; the node has no data input",
            ));
        };
        let mut inputs = vec![data.clone()];
        for spec in specs {
            let tensor = match spec.kind {
                Kind::Ints => a.ints(spec.attribute)?.map(Tensor::vec_i64),
                Kind::Float | Kind::FloatLikeData => {
                    a.float(spec.attribute)?.map(Tensor::scalar_f32)
                }
            };
            let Some(tensor) = tensor else {
                if spec.required {
                    return Err(a.missing(spec.attribute));
                }
                continue;
            };
            let name = self.fresh_value(&format!("{node}_{}", spec.attribute));
            if spec.kind == Kind::FloatLikeData {
                self.follows.push(FollowsDtype {
                    initializer: name.clone(),
                    value: data.clone(),
                });
            }
            self.initializers.insert(name.clone(), tensor);
            if inputs.len() <= spec.index {
                inputs.resize(spec.index + 1, String::new());
            }
            inputs[spec.index] = name;
        }
        let attributes: Vec<&str> = specs.iter().map(|s| s.attribute).collect();
        let mut out = without_attributes(proto, &attributes);
        out.input = inputs;
        Ok(out)
    }

    /// Softmax before opset 13: `axis` (default 1) splits the input into a 2-D matrix whose
    /// rows are normalised. That is Softmax(-1) when `axis` is the last axis, and otherwise
    /// Flatten(axis) → Softmax(-1) → Reshape to the input's shape.
    fn softmax(
        &mut self,
        proto: &NodeProto,
        name: String,
        a: &Attrs,
        names: &mut NodeNames,
    ) -> Result<Vec<Normalised>, Error> {
        let axis = a.int_or("axis", 1)?;
        let mut softmax = without_attributes(proto, &["axis"]);
        softmax.attribute.push(crate::attrs::int("axis", -1));
        let (input, output) = match (proto.input.as_slice(), proto.output.as_slice()) {
            ([input], [output]) if !input.is_empty() && !output.is_empty() => {
                (input.clone(), output.clone())
            }
            _ => {
                return Err(legacy(
                    proto,
                    &name,
                    self.opset,
                    "inputs and outputs",
                    format!(
                        "Softmax has one input and one output, this node has {} and {}",
                        proto.input.len(),
                        proto.output.len()
                    ),
                ))
            }
        };
        let rank = self.ranks.get(&input).copied();
        let last = axis == -1
            || rank
                .and_then(|r| i64::try_from(r).ok())
                .is_some_and(|r| axis == r - 1);
        if last {
            return Ok(vec![Normalised {
                name,
                proto: softmax,
            }]);
        }
        let shape = self.fresh_value(&format!("{name}_input_shape"));
        let flat = self.fresh_value(&format!("{name}_2d"));
        let flat_out = self.fresh_value(&format!("{name}_2d_out"));
        let helper = |op_type: &str, inputs: Vec<String>, output: String, attribute| NodeProto {
            input: inputs,
            output: vec![output],
            op_type: op_type.to_string(),
            attribute,
            ..NodeProto::default()
        };
        let shape_node = helper("Shape", vec![input.clone()], shape.clone(), vec![]);
        let flatten = helper(
            "Flatten",
            vec![input],
            flat.clone(),
            vec![crate::attrs::int("axis", axis)],
        );
        softmax.input = vec![flat];
        softmax.output = vec![flat_out.clone()];
        let reshape = helper("Reshape", vec![flat_out, shape], output, vec![]);
        Ok(vec![
            Normalised {
                name: names.fresh(&format!("{name}_shape")),
                proto: shape_node,
            },
            Normalised {
                name: names.fresh(&format!("{name}_flatten")),
                proto: flatten,
            },
            Normalised {
                name: name.clone(),
                proto: softmax,
            },
            Normalised {
                name: names.fresh(&format!("{name}_reshape")),
                proto: reshape,
            },
        ])
    }

    /// Upsample, opsets 7 to 9 (deprecated from 10): `scales` is an attribute at 7 and 8
    /// and input 1 at 9; output = floor(input × scale) with x_in = x_out / scale.
    fn upsample(&mut self, proto: &NodeProto, name: &str, a: &Attrs) -> Result<NodeProto, Error> {
        if self.opset >= 10 {
            return Err(legacy(
                proto,
                name,
                self.opset,
                "the op",
                "Upsample is deprecated from opset 10 and has no form there; use Resize",
            ));
        }
        let scales = if self.opset < 9 {
            let values = a.floats("scales")?.ok_or_else(|| a.missing("scales"))?;
            if let Some((index, input)) = proto
                .input
                .iter()
                .enumerate()
                .skip(1)
                .find(|(_, i)| !i.is_empty())
            {
                return Err(legacy(
                    proto,
                    name,
                    self.opset,
                    &format!("input {index} (`{input}`)"),
                    format!(
                        "at opset {} Upsample takes scales as an attribute",
                        self.opset
                    ),
                ));
            }
            let tensor = Tensor::from_f32([values.len()], values)?;
            let scales = self.fresh_value(&format!("{name}_scales"));
            self.initializers.insert(scales.clone(), tensor);
            scales
        } else {
            match proto.input.get(1).filter(|s| !s.is_empty()) {
                Some(scales) if proto.input.len() == 2 => scales.clone(),
                _ => {
                    return Err(legacy(
                        proto,
                        name,
                        self.opset,
                        "inputs",
                        "at opset 9 Upsample takes exactly two inputs, X and scales",
                    ))
                }
            }
        };
        let x = proto.input.first().cloned().unwrap_or_default();
        let resize = resize_13(proto, a, x, scales)?;
        a.finish()?;
        Ok(resize)
    }

    /// Scatter (opsets 9 and 10) is ScatterElements under its first name: the same inputs
    /// (data, indices, updates) and `axis`, with no reduction.
    fn scatter(&mut self, proto: &NodeProto, name: &str, a: &Attrs) -> Result<NodeProto, Error> {
        if self.opset >= 11 {
            return Err(legacy(
                proto,
                name,
                self.opset,
                "the op",
                "Scatter is deprecated from opset 11 and has no form there; use \
                 ScatterElements",
            ));
        }
        a.int("axis")?;
        a.finish()?;
        let mut elements = proto.clone();
        elements.op_type = "ScatterElements".to_string();
        Ok(elements)
    }

    /// Resize-10: inputs X and scales, attribute `mode`, Upsample's coordinate mapping.
    fn resize_10(&mut self, proto: &NodeProto, name: &str, a: &Attrs) -> Result<NodeProto, Error> {
        let scales = match proto.input.get(1).filter(|s| !s.is_empty()) {
            Some(scales) if proto.input.len() == 2 => scales.clone(),
            _ => {
                return Err(legacy(
                    proto,
                    name,
                    self.opset,
                    "inputs",
                    "at opset 10 Resize takes exactly two inputs, X and scales",
                ))
            }
        };
        let x = proto.input.first().cloned().unwrap_or_default();
        let resize = resize_13(proto, a, x, scales)?;
        a.finish()?;
        Ok(resize)
    }

    /// Scan-8: inputs sequence_lens?, then N states and M scan inputs, every one with a
    /// leading batch axis (scan inputs are [batch, sequence, …]); `directions` per scan
    /// input; every output has the batch axis too (scan outputs [batch, sequence, …]). For
    /// each batch element it runs the body over that element's sequence, which is an
    /// opset-9 Scan of the element's slices, scanning axis 0. This returns that per-element
    /// Scan (sequence_lens dropped, `directions` renamed `scan_input_directions`); the
    /// reader then wraps it in a Scan over the batch axis with [`scan_over_batch`].
    ///
    /// sequence_lens gives each batch element its own length (the rest of its scan outputs
    /// left as padding): opset 9 has no such input, and whether given lengths are all full
    /// is only known from values at run time, so a node with it is refused.
    fn scan_8(&mut self, proto: &NodeProto, name: &str, a: &Attrs) -> Result<NodeProto, Error> {
        if let Some(lens) = proto.input.first().filter(|s| !s.is_empty()) {
            return Err(legacy(
                proto,
                name,
                self.opset,
                &format!("input 0 (`{lens}`, sequence_lens)"),
                "gives each batch element its own sequence length; the opset-9 Scan that \
                 Concord reads scans every sequence to its full length and has no such \
                 input, so Scan-8 is read only without sequence_lens",
            ));
        }
        let mut out = without_attributes(proto, &["directions"]);
        out.input = proto.input.iter().skip(1).cloned().collect();
        if let Some(directions) = a.ints("directions")? {
            out.attribute
                .push(crate::attrs::ints("scan_input_directions", &directions));
        }
        Ok(out)
    }

    fn fresh_value(&mut self, base: &str) -> String {
        let mut candidate = base.to_string();
        let mut suffix = 1usize;
        while self.values.contains(&candidate) {
            candidate = format!("{base}_{suffix}");
            suffix += 1;
        }
        self.values.insert(candidate.clone());
        candidate
    }
}

/// A Resize-13 node reading X and scales (roi omitted) with Upsample's mapping: asymmetric
/// coordinates, and floor for nearest.
fn resize_13(proto: &NodeProto, a: &Attrs, x: String, scales: String) -> Result<NodeProto, Error> {
    let mode = a.string("mode")?.unwrap_or_else(|| "nearest".to_string());
    let mut attribute = vec![
        crate::attrs::string("mode", &mode),
        crate::attrs::string("coordinate_transformation_mode", "asymmetric"),
    ];
    match mode.as_str() {
        "nearest" => attribute.push(crate::attrs::string("nearest_mode", "floor")),
        "linear" => {}
        other => return Err(a.error("mode", format!("`{other}` is not one of nearest, linear"))),
    }
    Ok(NodeProto {
        input: vec![x, String::new(), scales],
        output: proto.output.clone(),
        name: proto.name.clone(),
        op_type: "Resize".to_string(),
        attribute,
        ..NodeProto::default()
    })
}

/// Refuses, at any opset, the attributes that only exist before opset 7.
fn refuse_pre_opset_7(proto: &NodeProto, name: &str, opset: i64) -> Result<(), Error> {
    let has = |attribute: &str| proto.attribute.iter().any(|a| a.name == attribute);
    let op = proto.op_type.as_str();
    let found = if has("consumed_inputs") {
        Some((
            "consumed_inputs",
            "belongs to opset 5 and older (an in-place hint of the first ONNX releases)",
        ))
    } else if has("is_test") && matches!(op, "BatchNormalization" | "Dropout") {
        Some((
            "is_test",
            "belongs to opset 6 and older; from opset 7 the op always runs as in inference",
        ))
    } else if Binary::from_name(op).is_some() && (has("broadcast") || has("axis")) {
        Some((
            if has("broadcast") {
                "broadcast"
            } else {
                "axis"
            },
            "is the explicit broadcasting of opset 6 and older; from opset 7 binary ops \
             broadcast multidirectionally (numpy-style) without attributes",
        ))
    } else {
        None
    };
    match found {
        None => Ok(()),
        Some((attribute, why)) => Err(legacy(
            proto,
            name,
            opset,
            &format!("attribute `{attribute}`"),
            format!(
                "{why}; Concord reads opsets {} to {}: convert the model with \
                 onnx.version_converter to opset {} or newer",
                crate::MIN_OPSET,
                crate::MAX_OPSET,
                crate::MIN_OPSET
            ),
        )),
    }
}

/// Attributes the op mapping reads that an op gained in opsets 8 to 13, with the opset
/// that added each: in an older model they are not part of the op, so the model is not
/// valid at its opset and is refused rather than read as a newer form.
const NEWER_ATTRIBUTES: &[(&str, &str, i64)] = &[
    ("MaxPool", "storage_order", 8),
    ("MaxPool", "ceil_mode", 10),
    ("MaxPool", "dilations", 10),
    ("AveragePool", "ceil_mode", 10),
    ("ArgMax", "select_last_index", 12),
    ("Dropout", "seed", 12),
    ("Constant", "sparse_value", 11),
    ("Constant", "value_float", 12),
    ("Constant", "value_floats", 12),
    ("Constant", "value_int", 12),
    ("Constant", "value_ints", 12),
    ("Constant", "value_string", 12),
    ("Constant", "value_strings", 12),
    ("ReduceSum", "noop_with_empty_axes", 13),
    ("Scan", "scan_input_axes", 9),
    ("Scan", "scan_input_directions", 9),
    ("Scan", "scan_output_axes", 9),
    ("Scan", "scan_output_directions", 9),
    ("ReduceMean", "noop_with_empty_axes", 18),
    ("ReduceMax", "noop_with_empty_axes", 18),
    ("RoiAlign", "coordinate_transformation_mode", 16),
];

fn refuse_newer_attributes(proto: &NodeProto, name: &str, opset: i64) -> Result<(), Error> {
    let op = proto.op_type.as_str();
    for attribute in &proto.attribute {
        let newer = NEWER_ATTRIBUTES
            .iter()
            .find(|(o, a, since)| *o == op && *a == attribute.name && *since > opset);
        if let Some((_, a, since)) = newer {
            return Err(legacy(
                proto,
                name,
                opset,
                &format!("attribute `{a}`"),
                format!(
                    "{op} has it from opset {since}, so it is not part of the op at opset \
                     {opset}; re-export the model at opset {since} or newer, or without it"
                ),
            ));
        }
    }
    Ok(())
}

/// Wraps the per-element Scan that [`Normaliser::scan_8`] made of a Scan-8 node (already
/// read, its captures appended) in a Scan over the batch axis, which is exactly Scan-8
/// without sequence_lens: the outer Scan has no states and scans axis 0 of every one of
/// the node's operands, states included, so each iteration is one batch element; its body
/// runs the per-element Scan on those slices, and the outer Scan stacks each result along
/// a new axis 0, the batch axis of every Scan-8 output. The node keeps its name, operands
/// and outputs; the captured values pass through to the inner Scan as captures of both.
pub fn scan_over_batch(node: Node) -> Result<Node, Error> {
    let Op::Scan {
        num_scan_inputs,
        captures,
        ..
    } = &node.op
    else {
        return Err(Error::InvalidModel(format!(
            "node `{}`: only a Scan is wrapped over a batch axis, not {}",
            node.name,
            node.op.name()
        )));
    };
    let (scanned, captures) = (*num_scan_inputs, *captures);
    let refuse = |detail: String| Error::LegacyForm {
        node: node.name.clone(),
        op: "Scan".to_string(),
        opset: 8,
        attribute: "inputs".to_string(),
        detail,
    };
    let formal = node
        .inputs
        .len()
        .checked_sub(captures)
        .filter(|&f| f >= scanned)
        .ok_or_else(|| {
            refuse(format!(
                "the node has {} operands, fewer than its {scanned} scan inputs",
                node.inputs.len().saturating_sub(captures)
            ))
        })?;
    let mut operands = Vec::with_capacity(node.inputs.len());
    for (index, input) in node.inputs.iter().enumerate() {
        match input {
            Some(value) => operands.push(value.clone()),
            None => {
                return Err(refuse(format!(
                    "input {} is empty; every state and scan input of Scan-8 is required",
                    index + 1
                )))
            }
        }
    }
    // Names inside the new body: the slices and the inner Scan's results get names no
    // operand or output of the node has, so nothing in the body shadows an outer value.
    let mut taken: std::collections::HashSet<String> =
        operands.iter().chain(&node.outputs).cloned().collect();
    let mut fresh = |base: &str| {
        let mut candidate = format!("{base}_element");
        let mut suffix = 1usize;
        while !taken.insert(candidate.clone()) {
            candidate = format!("{base}_element_{suffix}");
            suffix += 1;
        }
        candidate
    };
    let slices: Vec<String> = operands[..formal].iter().map(|v| fresh(v)).collect();
    let results: Vec<String> = node
        .outputs
        .iter()
        .enumerate()
        .map(|(k, o)| {
            if o.is_empty() {
                fresh(&format!("{}_output_{k}", node.name))
            } else {
                fresh(o)
            }
        })
        .collect();
    let captured = &operands[formal..];
    let opset = node.op.subgraphs().first().map_or(FORM_OPSET, |g| g.opset);
    let inner = Node {
        name: format!("{}/element", node.name),
        op: node.op.clone(),
        inputs: slices
            .iter()
            .chain(captured)
            .map(|v| Some(v.clone()))
            .collect(),
        outputs: results.clone(),
    };
    // The body's inputs are typed by what the outer Scan binds to them when the graph is
    // inferred, as every subgraph input is; the declared f32 scalar is a placeholder.
    let body = Graph {
        name: format!("{}_batch_element", node.name),
        inputs: slices
            .iter()
            .chain(captured)
            .map(|v| ValueInfo::new(v.clone(), concord_core::DType::F32, Vec::new()))
            .collect(),
        outputs: results,
        nodes: vec![inner],
        opset,
        ..Graph::default()
    };
    Ok(Node {
        name: node.name,
        op: Op::Scan {
            body: Box::new(body),
            num_scan_inputs: formal,
            scan_input_axes: Vec::new(),
            scan_input_directions: Vec::new(),
            scan_output_axes: Vec::new(),
            scan_output_directions: Vec::new(),
            captures,
        },
        inputs: node.inputs,
        outputs: node.outputs,
    })
}

fn without_attributes(proto: &NodeProto, names: &[&str]) -> NodeProto {
    let mut out = proto.clone();
    out.attribute
        .retain(|a: &AttributeProto| !names.contains(&a.name.as_str()));
    out
}

fn legacy(
    proto: &NodeProto,
    node: &str,
    opset: i64,
    attribute: &str,
    detail: impl Into<String>,
) -> Error {
    Error::LegacyForm {
        node: node.to_string(),
        op: proto.op_type.clone(),
        opset,
        attribute: attribute.to_string(),
        detail: detail.into(),
    }
}
