//! The tolerance model: named levels per op × target, kept as data
//! (conformance/tolerances.toml) with a reason each, and the per-element error allowance
//! they imply. Tests never carry tolerance literals.
//!
//! A backend author adds to the table from their own crate ([`ToleranceTable::with_overrides`]):
//! levels of their own and `[[override]]` entries for their own targets, in the same format
//! and as strictly checked; the shipped table itself is never edited for them.

use crate::error::SuiteError;
use concord_core::{DType, Target, TargetSpec, Tensor};
use concord_cpu::Accumulation;
use serde::Deserialize;
use std::collections::BTreeMap;
use std::path::PathBuf;

/// The table as shipped with the suite.
pub const TOLERANCES_TOML: &str = include_str!("../tolerances.toml");

/// Every level and the level of every op.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ToleranceTable {
    pub levels: BTreeMap<String, Level>,
    pub ops: BTreeMap<String, String>,
    #[serde(default, rename = "override")]
    pub overrides: Vec<Override>,
}

/// A named tolerance level.
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(try_from = "RawLevel")]
pub struct Level {
    pub kind: LevelKind,
    pub reason: String,
}

/// A level as written, checked field by field when converted.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawLevel {
    kind: String,
    reason: String,
    ulps: Option<f64>,
    c: Option<f64>,
    abs: Option<f64>,
    rel: Option<f64>,
    abs_f16: Option<f64>,
    rel_f16: Option<f64>,
}

impl TryFrom<RawLevel> for Level {
    type Error = String;

    fn try_from(r: RawLevel) -> Result<Level, String> {
        let need = |v: Option<f64>, field: &str| {
            v.ok_or_else(|| format!("a `{}` level needs `{field}`", r.kind))
        };
        let kind = match r.kind.as_str() {
            "exact" => LevelKind::Exact,
            "ulp" => LevelKind::Ulp {
                ulps: need(r.ulps, "ulps")?,
            },
            "accumulate" => LevelKind::Accumulate { c: need(r.c, "c")? },
            "fixed" => LevelKind::Fixed {
                abs: need(r.abs, "abs")?,
                rel: need(r.rel, "rel")?,
                abs_f16: need(r.abs_f16, "abs_f16")?,
                rel_f16: need(r.rel_f16, "rel_f16")?,
            },
            other => {
                return Err(format!(
                    "unknown level kind `{other}` (exact, ulp, accumulate, fixed)"
                ))
            }
        };
        if r.reason.trim().is_empty() {
            return Err("a level needs a reason".into());
        }
        Ok(Level {
            kind,
            reason: r.reason,
        })
    }
}

/// How a level turns into an allowance.
#[derive(Clone, Debug, PartialEq)]
pub enum LevelKind {
    Exact,
    Ulp {
        ulps: f64,
    },
    Accumulate {
        c: f64,
    },
    Fixed {
        abs: f64,
        rel: f64,
        abs_f16: f64,
        rel_f16: f64,
    },
}

/// A per op × target exception.
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Override {
    pub op: String,
    pub target: String,
    pub level: String,
    pub reason: String,
}

/// A backend author's tolerance file: levels of their own and overrides for their targets.
/// `[ops]` is not accepted: an op's level for every executor is the shipped table's, and an
/// executor that needs another one says so per target, with a reason.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct AuthorTolerances {
    #[serde(default)]
    levels: BTreeMap<String, Level>,
    #[serde(default, rename = "override")]
    overrides: Vec<Override>,
}

/// The level chosen for one comparison.
#[derive(Clone, Debug, PartialEq)]
pub struct Chosen<'a> {
    pub name: &'a str,
    pub level: &'a Level,
}

impl ToleranceTable {
    /// The table shipped in conformance/tolerances.toml, checked.
    pub fn builtin() -> Result<ToleranceTable, SuiteError> {
        Self::parse(
            TOLERANCES_TOML,
            PathBuf::from("conformance/tolerances.toml"),
        )
    }

    /// Parses and checks a table: every op level and override must name a defined level.
    pub fn parse(text: &str, path: PathBuf) -> Result<ToleranceTable, SuiteError> {
        let table: ToleranceTable = toml::from_str(text).map_err(|e| SuiteError::Data {
            path: path.clone(),
            detail: e.to_string(),
        })?;
        for (op, level) in &table.ops {
            if !table.levels.contains_key(level) {
                return Err(SuiteError::Data {
                    path,
                    detail: format!("op {op} names undefined level `{level}`"),
                });
            }
        }
        for o in &table.overrides {
            // The table is this crate's data, so its targets are the built-in ones.
            let known_target = concord::targets::BUILTIN
                .iter()
                .any(|t| t.name() == o.target);
            if !table.levels.contains_key(&o.level) || !known_target {
                return Err(SuiteError::Data {
                    path,
                    detail: format!(
                        "override for {} on {}: unknown level or target",
                        o.op, o.target
                    ),
                });
            }
        }
        if !table.levels.contains_key("model") {
            return Err(SuiteError::Data {
                path,
                detail: "the `model` level is missing".into(),
            });
        }
        Ok(table)
    }

    /// The table with a backend author's file added: its levels (new names only) and its
    /// overrides, which must name an op of the table, a level of the table or the file, a
    /// target in `targets` (the executor's declared ones) and a reason, at most once per
    /// op × target. The author's overrides come first, so they decide for their targets.
    pub fn with_overrides(
        mut self,
        text: &str,
        path: PathBuf,
        targets: &[Target],
    ) -> Result<ToleranceTable, SuiteError> {
        let fail = |detail: String| SuiteError::Data {
            path: path.clone(),
            detail,
        };
        let file: AuthorTolerances = toml::from_str(text).map_err(|e| fail(e.to_string()))?;
        for (name, level) in file.levels {
            if self.levels.contains_key(&name) {
                return Err(fail(format!(
                    "level `{name}` is already defined by the suite's tolerances.toml: give \
                     yours another name"
                )));
            }
            self.levels.insert(name, level);
        }
        let mut seen = std::collections::BTreeSet::new();
        for o in &file.overrides {
            let what = format!("override for {} on {}", o.op, o.target);
            if !self.ops.contains_key(&o.op) {
                return Err(fail(format!("{what}: the suite knows no op `{}`", o.op)));
            }
            if !targets.iter().any(|t| t.name() == o.target) {
                let known: Vec<&str> = targets.iter().map(Target::name).collect();
                return Err(fail(format!(
                    "{what}: unknown target `{}` (the executor declares: {})",
                    o.target,
                    known.join(", ")
                )));
            }
            if !self.levels.contains_key(&o.level) {
                let known: Vec<&str> = self.levels.keys().map(String::as_str).collect();
                return Err(fail(format!(
                    "{what}: unknown level `{}` (known: {})",
                    o.level,
                    known.join(", ")
                )));
            }
            if o.reason.trim().is_empty() {
                return Err(fail(format!("{what} has no reason")));
            }
            if !seen.insert((o.op.as_str(), o.target.as_str())) {
                return Err(fail(format!("{what} is given twice")));
            }
        }
        self.overrides.splice(0..0, file.overrides);
        Ok(self)
    }

    /// The level for `op` on `target` (an override first, then the op's level).
    pub fn level_for(&self, op: &str, target: &Target) -> Option<Chosen<'_>> {
        let name = self
            .overrides
            .iter()
            .find(|o| o.op == op && o.target == target.name())
            .map(|o| o.level.as_str())
            .or_else(|| self.ops.get(op).map(|s| s.as_str()))?;
        self.levels
            .get_key_value(name)
            .map(|(name, level)| Chosen { name, level })
    }

    /// A level by name.
    pub fn level(&self, name: &str) -> Option<Chosen<'_>> {
        self.levels
            .get_key_value(name)
            .map(|(name, level)| Chosen { name, level })
    }
}

/// The absolute error allowed at each element of `expected` under `level` on `target`.
/// `accumulation` is required for accumulate levels.
pub fn allowance(
    level: &Level,
    target: &TargetSpec,
    expected: &Tensor,
    accumulation: Option<&Accumulation>,
) -> Result<Vec<f64>, String> {
    let fp16 = target.stores_f16() || expected.dtype() == DType::F16;
    // A half-precision output is stored with its own unit roundoff whatever the target's
    // storage: f16's 2^-11, or bf16's 2^-8 (bf16 keeps f32's exponent range, so its
    // smallest normal is f32's).
    let bf16 = expected.dtype() == DType::BF16;
    let u = match expected.dtype() {
        DType::F16 | DType::BF16 => expected.dtype().unit_roundoff(),
        _ => target.unit_roundoff(),
    };
    let tiny = if fp16 {
        6.1e-5
    } else {
        f32::MIN_POSITIVE as f64
    };
    let y = expected.to_f64_vec();
    Ok(match &level.kind {
        LevelKind::Exact => vec![0.0; y.len()],
        LevelKind::Ulp { ulps } => y
            .iter()
            .map(|v| ulps * 2.0 * u * v.abs().max(tiny))
            .collect(),
        LevelKind::Accumulate { c } => {
            let acc = accumulation
                .ok_or("an accumulate level needs the reference's accumulation figures")?;
            if acc.magnitude.len() != y.len() {
                return Err(format!(
                    "accumulation figures cover {} elements, the output has {}",
                    acc.magnitude.len(),
                    y.len()
                ));
            }
            y.iter()
                .zip(&acc.magnitude)
                .map(|(v, m)| c * acc.k as f64 * u * m + 2.0 * u * v.abs() + tiny)
                .collect()
        }
        LevelKind::Fixed {
            abs,
            rel,
            abs_f16,
            rel_f16,
        } => {
            let (a, r) = if bf16 {
                // The f16 figures scaled by the ratio of the unit roundoffs (2^-8 / 2^-11 =
                // 8): the fixed levels are a number of ulps of the stored type, and a bf16
                // ulp is eight f16 ulps.
                let scale = DType::BF16.unit_roundoff() / DType::F16.unit_roundoff();
                (abs_f16 * scale, rel_f16 * scale)
            } else if fp16 {
                (*abs_f16, *rel_f16)
            } else {
                (*abs, *rel)
            };
            y.iter().map(|v| a + r * v.abs()).collect()
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builtin_table_covers_every_supported_op() {
        let table = ToleranceTable::builtin().expect("table parses");
        for op in concord_core::op::supported_names() {
            assert!(
                table.level_for(op, &concord::targets::CPU).is_some(),
                "no tolerance level for {op}"
            );
        }
    }

    #[test]
    fn accumulate_scales_with_k_and_magnitude() {
        let table = ToleranceTable::builtin().expect("table parses");
        let level = table.level("accumulate").expect("level").level;
        let y = Tensor::from_f32([2], vec![1.0, 0.0]).expect("t");
        let acc = Accumulation {
            k: 100,
            magnitude: vec![10.0, 10.0],
        };
        let f32_storage = TargetSpec::new(Target::new("t"), DType::F32, DType::F32);
        let f16_storage = TargetSpec::new(Target::new("t-fp16"), DType::F16, DType::F32);
        let a = allowance(level, &f32_storage, &y, Some(&acc)).expect("allowance");
        let u = 2f64.powi(-24);
        assert!(
            (a[0] - (2.0 * 100.0 * u * 10.0 + 2.0 * u + f32::MIN_POSITIVE as f64)).abs() < 1e-15
        );
        let a16 = allowance(level, &f16_storage, &y, Some(&acc)).expect("allowance");
        assert!(a16[1] > a[1] * 1000.0, "f16 allowance uses u = 2^-11");
    }

    #[test]
    fn bf16_outputs_use_bf16_roundoff() {
        let table = ToleranceTable::builtin().expect("table parses");
        let f32_storage = TargetSpec::new(Target::new("t"), DType::F32, DType::F32);
        let y32 =
            Tensor::from_f64(DType::F32, concord_core::Shape::from(vec![1]), vec![0.5]).expect("t");
        let y16 =
            Tensor::from_f64(DType::F16, concord_core::Shape::from(vec![1]), vec![0.5]).expect("t");
        let yb = Tensor::from_f64(DType::BF16, concord_core::Shape::from(vec![1]), vec![0.5])
            .expect("t");
        // An ulp level: n ulps of the stored type, 2^-8 for bf16.
        let ulp = table.level("rounding").expect("level").level;
        let ab = allowance(ulp, &f32_storage, &yb, None).expect("allowance");
        let a32 = allowance(ulp, &f32_storage, &y32, None).expect("allowance");
        assert!(
            (ab[0] / a32[0] - 2f64.powi(16)).abs() < 1e-9,
            "bf16 ulp is 2^16 f32 ulps"
        );
        // A fixed level: the f16 figures times the ratio of unit roundoffs.
        let fixed = table.level("normalize").expect("level").level;
        let ab = allowance(fixed, &f32_storage, &yb, None).expect("allowance");
        let a16 = allowance(fixed, &f32_storage, &y16, None).expect("allowance");
        assert!(
            (ab[0] / a16[0] - 8.0).abs() < 1e-9,
            "{} vs {}",
            ab[0],
            a16[0]
        );
    }

    #[test]
    fn unknown_level_is_rejected() {
        let bad = "[levels.model]\nkind = \"exact\"\nreason = \"r\"\n[ops]\nConv = \"nope\"\n";
        assert!(ToleranceTable::parse(bad, PathBuf::from("t.toml")).is_err());
    }
}
