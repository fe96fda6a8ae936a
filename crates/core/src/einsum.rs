//! Einsum equations: the one parser of numpy's einsum notation, shared by shape inference
//! and every executor, so that both read an equation the same way.
//!
//! An equation is one term per operand, separated by commas, optionally followed by `->`
//! and the output term. A term is letters (`a`–`z`, `A`–`Z`) and at most one ellipsis
//! `...`, which stands for the operand's axes not named by letters; spaces are ignored.
//! Without `->` the output is implicit: the ellipsis axes, then every letter that appears
//! exactly once in the equation, in ASCII order (upper case before lower case), as numpy
//! and onnxruntime do. A letter repeated within one operand reads that operand's diagonal;
//! letters absent from the output are summed over.
//!
//! Ellipsis axes are aligned from the right. Every label broadcasts like an elementwise
//! operand's axis (an extent of 1 stretches), letters included, as onnxruntime and numpy
//! allow.

use crate::error::OpError;

/// An equation resolved against its operands' ranks: every letter and every ellipsis axis
/// is a label, numbered from 0.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EinsumPlan {
    /// For each operand, the label of each of its axes.
    pub inputs: Vec<Vec<usize>>,
    /// The label of each output axis.
    pub output: Vec<usize>,
    /// How many labels there are; the first [`EinsumPlan::ellipsis`] are the ellipsis axes,
    /// outermost first.
    pub labels: usize,
    /// The number of ellipsis axes (the largest rank any operand's ellipsis covers).
    pub ellipsis: usize,
}

/// One term of an equation: its letters, with the ellipsis (if any) at its position.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Item {
    Letter(u8),
    Ellipsis,
}

impl EinsumPlan {
    /// Parses `equation` for operands of the given ranks.
    pub fn new(equation: &str, ranks: &[usize]) -> Result<EinsumPlan, OpError> {
        let bad = |detail: String| OpError::Attribute {
            name: "equation",
            detail: format!("`{equation}`: {detail}"),
        };
        let compact: String = equation.chars().filter(|c| !c.is_whitespace()).collect();
        let (lhs, rhs) = match compact.split_once("->") {
            Some((l, r)) => (l, Some(r)),
            None => (compact.as_str(), None),
        };
        let terms: Vec<Vec<Item>> = lhs
            .split(',')
            .map(|t| parse_term(t).map_err(&bad))
            .collect::<Result<_, _>>()?;
        if terms.len() != ranks.len() {
            return Err(bad(format!(
                "it has {} operand terms, the node has {} inputs",
                terms.len(),
                ranks.len()
            )));
        }
        // The rank each operand's ellipsis covers.
        let mut covered = Vec::with_capacity(terms.len());
        for (i, (term, &rank)) in terms.iter().zip(ranks).enumerate() {
            let letters = term.iter().filter(|t| matches!(t, Item::Letter(_))).count();
            let has_ellipsis = term.contains(&Item::Ellipsis);
            let ok = if has_ellipsis {
                letters <= rank
            } else {
                letters == rank
            };
            if !ok {
                return Err(bad(format!(
                    "term {i} names {letters} axes{}, but input {i} has rank {rank}",
                    if has_ellipsis { " besides `...`" } else { "" }
                )));
            }
            covered.push(if has_ellipsis { rank - letters } else { 0 });
        }
        let ellipsis = covered.iter().copied().max().unwrap_or(0);
        // Letters are numbered after the ellipsis axes, in ASCII order.
        let mut seen = [0usize; 128];
        for term in &terms {
            for item in term {
                if let Item::Letter(c) = item {
                    seen[usize::from(*c)] += 1;
                }
            }
        }
        let mut label_of = [usize::MAX; 128];
        let mut labels = ellipsis;
        for (c, &count) in seen.iter().enumerate() {
            if count > 0 {
                label_of[c] = labels;
                labels += 1;
            }
        }
        let resolve = |term: &[Item], covered: usize| -> Vec<usize> {
            let mut axes = Vec::new();
            for item in term {
                match item {
                    Item::Letter(c) => axes.push(label_of[usize::from(*c)]),
                    // Right-aligned: an ellipsis of rank r takes the last r ellipsis labels.
                    Item::Ellipsis => axes.extend(ellipsis - covered..ellipsis),
                }
            }
            axes
        };
        let inputs: Vec<Vec<usize>> = terms
            .iter()
            .zip(&covered)
            .map(|(t, &c)| resolve(t, c))
            .collect();
        let output = match rhs {
            Some(r) => {
                let term = parse_term(r).map_err(&bad)?;
                let mut out_seen = [false; 128];
                for item in &term {
                    if let Item::Letter(c) = item {
                        let c = usize::from(*c);
                        if seen[c] == 0 {
                            return Err(bad(format!(
                                "output label `{}` appears in no operand",
                                c as u8 as char
                            )));
                        }
                        if out_seen[c] {
                            return Err(bad(format!(
                                "output label `{}` appears twice",
                                c as u8 as char
                            )));
                        }
                        out_seen[c] = true;
                    }
                }
                if !term.contains(&Item::Ellipsis) && ellipsis > 0 {
                    // numpy and onnxruntime refuse to drop broadcast axes silently.
                    return Err(bad(format!(
                        "the operands' `...` covers {ellipsis} axes but the output has no `...`"
                    )));
                }
                resolve(&term, ellipsis)
            }
            None => {
                let mut out: Vec<usize> = (0..ellipsis).collect();
                out.extend(
                    seen.iter()
                        .enumerate()
                        .filter(|(_, &n)| n == 1)
                        .map(|(c, _)| label_of[c]),
                );
                out
            }
        };
        Ok(EinsumPlan {
            inputs,
            output,
            labels,
            ellipsis,
        })
    }

    /// The extent of every label from the operands' extents (an extent of 1 stretches).
    /// `pick` merges two extents of one label, returning None when they conflict; `one` is
    /// the extent of a label no operand has.
    pub fn extents<D: Clone>(
        &self,
        shapes: &[&[D]],
        one: D,
        mut pick: impl FnMut(&D, &D) -> Option<D>,
        describe: impl Fn(&[D]) -> String,
    ) -> Result<Vec<D>, OpError> {
        let mut extents: Vec<Option<D>> = vec![None; self.labels];
        for (i, (axes, shape)) in self.inputs.iter().zip(shapes).enumerate() {
            for (&label, d) in axes.iter().zip(shape.iter()) {
                extents[label] = match extents[label].take() {
                    None => Some(d.clone()),
                    Some(prev) => Some(pick(&prev, d).ok_or_else(|| {
                        OpError::Shape(format!(
                            "Einsum: input {i} {} disagrees with the other operands on the \
                             extent of one label (extents must be equal or 1)",
                            describe(shape)
                        ))
                    })?),
                };
            }
        }
        Ok(extents
            .into_iter()
            .map(|e| e.unwrap_or_else(|| one.clone()))
            .collect())
    }
}

fn parse_term(term: &str) -> Result<Vec<Item>, String> {
    let mut items = Vec::new();
    let bytes = term.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            c if c.is_ascii_alphabetic() => {
                items.push(Item::Letter(c));
                i += 1;
            }
            b'.' if bytes.get(i..i + 3) == Some(b"...") => {
                if items.contains(&Item::Ellipsis) {
                    return Err(format!("term `{term}` has two `...`"));
                }
                items.push(Item::Ellipsis);
                i += 3;
            }
            _ => return Err(format!("term `{term}` may hold only letters and one `...`")),
        }
    }
    Ok(items)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The plan's (inputs, output, ellipsis).
    type Parts = (Vec<Vec<usize>>, Vec<usize>, usize);

    /// The parts of the plan of `equation`.
    fn plan(equation: &str, ranks: &[usize]) -> Result<Parts, OpError> {
        EinsumPlan::new(equation, ranks).map(|p| (p.inputs, p.output, p.ellipsis))
    }

    #[test]
    fn explicit_implicit_and_ellipsis() {
        assert_eq!(
            plan("ij,jk->ik", &[2, 2]),
            Ok((vec![vec![0, 1], vec![1, 2]], vec![0, 2], 0))
        );
        // Labels: B = 0, a = 1, c = 2; B appears twice, so the implicit output is ac.
        assert_eq!(
            plan("aB,Bc", &[2, 2]),
            Ok((vec![vec![1, 0], vec![0, 2]], vec![1, 2], 0))
        );
        // Ellipsis of ranks 2 and 1, right-aligned, then i = 2, j = 3, k = 4.
        assert_eq!(
            plan("...ij, ...jk", &[4, 3]),
            Ok((vec![vec![0, 1, 2, 3], vec![1, 3, 4]], vec![0, 1, 2, 4], 2))
        );
        // A trace: the repeated label is summed, the output is a scalar.
        assert_eq!(plan("ii", &[2]), Ok((vec![vec![0, 0]], vec![], 0)));
        for (eq, ranks) in [
            ("ij->ii", &[2][..]),
            ("ij,jk", &[2]),
            ("ij->k", &[2]),
            ("i.j", &[2]),
            ("...ij->ij", &[3]),
        ] {
            assert!(plan(eq, ranks).is_err(), "{eq}");
        }
    }
}
