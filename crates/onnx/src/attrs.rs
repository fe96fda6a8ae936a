//! Typed access to a node's attributes while reading ([`Attrs`]), and constructors for
//! attributes while writing.
//!
//! [`Attrs`] remembers which attributes the op mapping asked for; [`Attrs::finish`] then
//! refuses any attribute nobody read, so an attribute Concord would silently ignore (and so
//! compute the wrong function) is an error instead.

use crate::error::Error;
use crate::proto::{AttributeProto, AttributeType, TensorProto};
use std::cell::Cell;

/// The attributes of one node, with the node's name and op type for error messages.
#[derive(Debug)]
pub struct Attrs<'a> {
    node: &'a str,
    op: &'a str,
    attributes: Vec<(&'a AttributeProto, AttributeType, Cell<bool>)>,
}

impl<'a> Attrs<'a> {
    /// Indexes the attributes, refusing duplicates, function references and untyped ones.
    pub fn new(
        node: &'a str,
        op: &'a str,
        attributes: &'a [AttributeProto],
    ) -> Result<Self, Error> {
        let mut out: Vec<(&AttributeProto, AttributeType, Cell<bool>)> =
            Vec::with_capacity(attributes.len());
        for attr in attributes {
            let error = |detail: &str| Error::Attribute {
                node: node.to_string(),
                op: op.to_string(),
                attribute: attr.name.clone(),
                detail: detail.to_string(),
            };
            if out.iter().any(|(a, _, _)| a.name == attr.name) {
                return Err(error("is given twice; give each attribute once"));
            }
            if !attr.ref_attr_name.is_empty() {
                return Err(error(
                    "refers to a function attribute (ref_attr_name), which is only valid inside \
                     a function body",
                ));
            }
            let kind = match AttributeType::try_from(attr.r#type) {
                Ok(AttributeType::Undefined) | Err(_) => {
                    return Err(error(
                        "has no valid type (AttributeProto.type is unset or unknown); re-save \
                         the model with a current onnx version",
                    ))
                }
                Ok(kind) => kind,
            };
            // onnx.checker: one value field, the one `type` names. A second one set would
            // leave which value was meant to a guess.
            let others: Vec<&str> = held_kinds(attr)
                .into_iter()
                .filter(|held| *held != kind)
                .map(AttributeType::onnx_name)
                .collect();
            if !others.is_empty() {
                return Err(error(&format!(
                    "is of type {} but also holds a value of type {}; an attribute holds one \
                     value, in the field its type names",
                    kind.onnx_name(),
                    others.join(" and ")
                )));
            }
            out.push((attr, kind, Cell::new(false)));
        }
        Ok(Attrs {
            node,
            op,
            attributes: out,
        })
    }

    /// An [`Error::Attribute`] about `attribute` of this node.
    pub fn error(&self, attribute: &str, detail: impl Into<String>) -> Error {
        Error::Attribute {
            node: self.node.to_string(),
            op: self.op.to_string(),
            attribute: attribute.to_string(),
            detail: detail.into(),
        }
    }

    /// An [`Error::MissingAttribute`] for `attribute` of this node.
    pub fn missing(&self, attribute: &str) -> Error {
        Error::MissingAttribute {
            node: self.node.to_string(),
            op: self.op.to_string(),
            attribute: attribute.to_string(),
        }
    }

    pub fn node(&self) -> &str {
        self.node
    }

    pub fn op(&self) -> &str {
        self.op
    }

    /// Whether the attribute is present (and marks it as read).
    pub fn has(&self, name: &str) -> bool {
        self.lookup(name).is_some()
    }

    /// The attribute's kind, if present (and marks it as read).
    pub fn kind(&self, name: &str) -> Option<AttributeType> {
        self.lookup(name).map(|(_, kind)| kind)
    }

    /// Marks an attribute as accepted without reading it: one that does not change what
    /// inference computes (Dropout's seed, LayerNormalization's stash_type).
    pub fn ignore(&self, name: &str) {
        let _ = self.lookup(name);
    }

    /// An INT attribute.
    pub fn int(&self, name: &str) -> Result<Option<i64>, Error> {
        // A proto3 writer leaves out an `i` of 0; the type says it is an INT, so it is 0.
        Ok(self
            .expect(name, AttributeType::Int)?
            .map(|a| a.i.unwrap_or(0)))
    }

    pub fn int_or(&self, name: &str, default: i64) -> Result<i64, Error> {
        Ok(self.int(name)?.unwrap_or(default))
    }

    /// An INT attribute read as a flag: 0 is false, anything else true.
    pub fn flag_or(&self, name: &str, default: bool) -> Result<bool, Error> {
        Ok(self.int(name)?.map_or(default, |v| v != 0))
    }

    /// A FLOAT attribute.
    pub fn float(&self, name: &str) -> Result<Option<f32>, Error> {
        Ok(self.expect(name, AttributeType::Float)?.map(|a| a.f))
    }

    pub fn float_or(&self, name: &str, default: f32) -> Result<f32, Error> {
        Ok(self.float(name)?.unwrap_or(default))
    }

    /// An INTS attribute.
    pub fn ints(&self, name: &str) -> Result<Option<Vec<i64>>, Error> {
        Ok(self
            .expect(name, AttributeType::Ints)?
            .map(|a| a.ints.clone()))
    }

    /// A FLOATS attribute.
    pub fn floats(&self, name: &str) -> Result<Option<Vec<f32>>, Error> {
        Ok(self
            .expect(name, AttributeType::Floats)?
            .map(|a| a.floats.clone()))
    }

    /// An INTS attribute of extents (kernel sizes, strides, pads): empty when absent, each
    /// at least `min`.
    pub fn extents(&self, name: &str, min: usize) -> Result<Vec<usize>, Error> {
        let Some(values) = self.ints(name)? else {
            return Ok(Vec::new());
        };
        values
            .iter()
            .map(|&v| {
                usize::try_from(v)
                    .ok()
                    .filter(|&u| u >= min)
                    .ok_or_else(|| {
                        self.error(
                            name,
                            format!("every value must be an integer >= {min}, got {values:?}"),
                        )
                    })
            })
            .collect()
    }

    /// A STRING attribute, which must be UTF-8.
    pub fn string(&self, name: &str) -> Result<Option<String>, Error> {
        let Some(attr) = self.expect(name, AttributeType::String)? else {
            return Ok(None);
        };
        String::from_utf8(attr.s.clone())
            .map(Some)
            .map_err(|_| self.error(name, "is not valid UTF-8"))
    }

    /// A STRINGS attribute, each of which must be UTF-8.
    pub fn strings(&self, name: &str) -> Result<Option<Vec<String>>, Error> {
        let Some(attr) = self.expect(name, AttributeType::Strings)? else {
            return Ok(None);
        };
        attr.strings
            .iter()
            .map(|s| {
                String::from_utf8(s.clone()).map_err(|_| self.error(name, "is not valid UTF-8"))
            })
            .collect::<Result<Vec<_>, _>>()
            .map(Some)
    }

    /// A TENSOR attribute.
    pub fn tensor(&self, name: &str) -> Result<Option<&'a TensorProto>, Error> {
        let Some(attr) = self.expect(name, AttributeType::Tensor)? else {
            return Ok(None);
        };
        attr.t
            .as_ref()
            .map(Some)
            .ok_or_else(|| self.error(name, "has type TENSOR but holds no tensor"))
    }

    /// A GRAPH attribute (a control-flow node's subgraph).
    pub fn graph(&self, name: &str) -> Result<Option<&'a crate::proto::GraphProto>, Error> {
        let Some(attr) = self.expect(name, AttributeType::Graph)? else {
            return Ok(None);
        };
        attr.g
            .as_deref()
            .map(Some)
            .ok_or_else(|| self.error(name, "has type GRAPH but holds no graph"))
    }

    /// Refuses every attribute the op mapping did not read.
    pub fn finish(&self) -> Result<(), Error> {
        let unread: Vec<&str> = self
            .attributes
            .iter()
            .filter(|(_, _, read)| !read.get())
            .map(|(a, _, _)| a.name.as_str())
            .collect();
        match unread.first() {
            None => Ok(()),
            Some(first) => Err(self.error(
                first,
                format!(
                    "is not an attribute of {} that Concord reads (unread: {}); it would change \
                     the result, so the node is refused",
                    self.op,
                    unread.join(", ")
                ),
            )),
        }
    }

    fn lookup(&self, name: &str) -> Option<(&'a AttributeProto, AttributeType)> {
        self.attributes
            .iter()
            .find(|(a, _, _)| a.name == name)
            .map(|(a, kind, read)| {
                read.set(true);
                (*a, *kind)
            })
    }

    fn expect(
        &self,
        name: &str,
        expected: AttributeType,
    ) -> Result<Option<&'a AttributeProto>, Error> {
        match self.lookup(name) {
            None => Ok(None),
            Some((attr, kind)) if kind == expected => Ok(Some(attr)),
            Some((_, kind)) => Err(self.error(
                name,
                format!(
                    "expected an attribute of type {}, found {}",
                    expected.onnx_name(),
                    kind.onnx_name()
                ),
            )),
        }
    }
}

/// The kinds whose value field `attr` sets. A FLOAT's `f` has no presence on the wire
/// when it is 0.0 (proto3 reading), so a zero `f` counts as unset.
fn held_kinds(attr: &AttributeProto) -> Vec<AttributeType> {
    [
        (AttributeType::Float, attr.f != 0.0),
        (AttributeType::Int, attr.i.is_some()),
        (AttributeType::String, !attr.s.is_empty()),
        (AttributeType::Tensor, attr.t.is_some()),
        (AttributeType::Graph, attr.g.is_some()),
        (AttributeType::SparseTensor, attr.sparse_tensor.is_some()),
        (AttributeType::Floats, !attr.floats.is_empty()),
        (AttributeType::Ints, !attr.ints.is_empty()),
        (AttributeType::Strings, !attr.strings.is_empty()),
        (AttributeType::Tensors, !attr.tensors.is_empty()),
        (AttributeType::Graphs, !attr.graphs.is_empty()),
        (
            AttributeType::SparseTensors,
            !attr.sparse_tensors.is_empty(),
        ),
    ]
    .into_iter()
    .filter_map(|(kind, set)| set.then_some(kind))
    .collect()
}

/// An INT attribute.
pub fn int(name: &str, value: i64) -> AttributeProto {
    AttributeProto {
        name: name.to_string(),
        r#type: AttributeType::Int as i32,
        i: Some(value),
        ..AttributeProto::default()
    }
}

/// An INT attribute holding a flag (0 or 1).
pub fn flag(name: &str, value: bool) -> AttributeProto {
    int(name, i64::from(value))
}

/// A FLOAT attribute.
pub fn float(name: &str, value: f32) -> AttributeProto {
    AttributeProto {
        name: name.to_string(),
        r#type: AttributeType::Float as i32,
        f: value,
        ..AttributeProto::default()
    }
}

/// An INTS attribute.
pub fn ints(name: &str, values: &[i64]) -> AttributeProto {
    AttributeProto {
        name: name.to_string(),
        r#type: AttributeType::Ints as i32,
        ints: values.to_vec(),
        ..AttributeProto::default()
    }
}

/// An INTS attribute of extents.
pub fn extents(name: &str, values: &[usize]) -> AttributeProto {
    // An extent beyond i64::MAX cannot be real (no tensor is that large); saturating keeps
    // the writer total and the reader will refuse the value.
    let values: Vec<i64> = values
        .iter()
        .map(|&v| i64::try_from(v).unwrap_or(i64::MAX))
        .collect();
    ints(name, &values)
}

/// A STRING attribute.
pub fn string(name: &str, value: &str) -> AttributeProto {
    AttributeProto {
        name: name.to_string(),
        r#type: AttributeType::String as i32,
        s: value.as_bytes().to_vec(),
        ..AttributeProto::default()
    }
}

/// A FLOATS attribute.
pub fn floats(name: &str, values: &[f32]) -> AttributeProto {
    AttributeProto {
        name: name.to_string(),
        r#type: AttributeType::Floats as i32,
        floats: values.to_vec(),
        ..AttributeProto::default()
    }
}

/// A STRINGS attribute.
pub fn strings(name: &str, values: &[&str]) -> AttributeProto {
    AttributeProto {
        name: name.to_string(),
        r#type: AttributeType::Strings as i32,
        strings: values.iter().map(|v| v.as_bytes().to_vec()).collect(),
        ..AttributeProto::default()
    }
}

/// A TENSOR attribute.
pub fn tensor(name: &str, value: TensorProto) -> AttributeProto {
    AttributeProto {
        name: name.to_string(),
        r#type: AttributeType::Tensor as i32,
        t: Some(value),
        ..AttributeProto::default()
    }
}

/// A GRAPH attribute.
pub fn graph(name: &str, value: crate::proto::GraphProto) -> AttributeProto {
    AttributeProto {
        name: name.to_string(),
        r#type: AttributeType::Graph as i32,
        g: Some(Box::new(value)),
        ..AttributeProto::default()
    }
}
