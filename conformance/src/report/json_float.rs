//! Floats in conformance.json without loss: a finite value is a JSON number, and NaN and
//! the infinities (which JSON has no number for, and serde_json would write as `null`) are
//! the strings "NaN", "inf" and "-inf". Reading accepts all of these, and `null` as NaN, so
//! that `concord report merge` gets back exactly the errors a run measured (an infinite
//! relative error is common: any error where zero was expected).

use serde::de::{self, Deserializer, Visitor};
use serde::Serializer;
use std::fmt;

/// Writes one f64.
pub fn serialize<S: Serializer>(value: &f64, serializer: S) -> Result<S::Ok, S::Error> {
    if value.is_finite() {
        serializer.serialize_f64(*value)
    } else if value.is_nan() {
        serializer.serialize_str("NaN")
    } else if *value > 0.0 {
        serializer.serialize_str("inf")
    } else {
        serializer.serialize_str("-inf")
    }
}

/// Reads one f64 written by [`serialize`] (or a plain number, or `null` as NaN).
pub fn deserialize<'de, D: Deserializer<'de>>(deserializer: D) -> Result<f64, D::Error> {
    deserializer.deserialize_any(FloatVisitor)
}

/// The same for `Option<f64>`: `None` is `null`, so a NaN is always the string.
pub mod option {
    use super::FloatVisitor;
    use serde::{Deserializer, Serializer};

    pub fn serialize<S: Serializer>(value: &Option<f64>, serializer: S) -> Result<S::Ok, S::Error> {
        match value {
            Some(v) => super::serialize(v, serializer),
            None => serializer.serialize_none(),
        }
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(
        deserializer: D,
    ) -> Result<Option<f64>, D::Error> {
        deserializer.deserialize_any(OptionVisitor)
    }

    struct OptionVisitor;

    impl<'de> serde::de::Visitor<'de> for OptionVisitor {
        type Value = Option<f64>;

        fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
            f.write_str("a number, \"NaN\", \"inf\", \"-inf\" or null")
        }

        fn visit_unit<E: serde::de::Error>(self) -> Result<Self::Value, E> {
            Ok(None)
        }

        fn visit_none<E: serde::de::Error>(self) -> Result<Self::Value, E> {
            Ok(None)
        }

        fn visit_f64<E: serde::de::Error>(self, v: f64) -> Result<Self::Value, E> {
            FloatVisitor.visit_f64(v).map(Some)
        }

        fn visit_i64<E: serde::de::Error>(self, v: i64) -> Result<Self::Value, E> {
            FloatVisitor.visit_i64(v).map(Some)
        }

        fn visit_u64<E: serde::de::Error>(self, v: u64) -> Result<Self::Value, E> {
            FloatVisitor.visit_u64(v).map(Some)
        }

        fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<Self::Value, E> {
            FloatVisitor.visit_str(v).map(Some)
        }
    }
}

struct FloatVisitor;

impl<'de> Visitor<'de> for FloatVisitor {
    type Value = f64;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a number, \"NaN\", \"inf\" or \"-inf\"")
    }

    fn visit_f64<E: de::Error>(self, v: f64) -> Result<f64, E> {
        Ok(v)
    }

    // JSON numbers without a fraction arrive as integers; the conversion is the nearest
    // f64, which is what writing them as floats produced in the first place.
    fn visit_i64<E: de::Error>(self, v: i64) -> Result<f64, E> {
        Ok(v as f64)
    }

    fn visit_u64<E: de::Error>(self, v: u64) -> Result<f64, E> {
        Ok(v as f64)
    }

    fn visit_unit<E: de::Error>(self) -> Result<f64, E> {
        Ok(f64::NAN)
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<f64, E> {
        match v {
            "NaN" => Ok(f64::NAN),
            "inf" => Ok(f64::INFINITY),
            "-inf" => Ok(f64::NEG_INFINITY),
            other => Err(E::invalid_value(de::Unexpected::Str(other), &self)),
        }
    }
}

#[cfg(test)]
mod tests {
    use serde::{Deserialize, Serialize};

    #[derive(Debug, Serialize, Deserialize)]
    struct Pair {
        #[serde(with = "super")]
        x: f64,
        #[serde(with = "super::option")]
        y: Option<f64>,
    }

    fn round_trip(x: f64, y: Option<f64>) -> (String, Pair) {
        let text = serde_json::to_string(&Pair { x, y }).expect("serialises");
        let back: Pair = serde_json::from_str(&text).expect("parses");
        (text, back)
    }

    #[test]
    fn non_finite_values_survive_a_round_trip() {
        let (text, back) = round_trip(f64::INFINITY, Some(f64::NAN));
        assert_eq!(text, r#"{"x":"inf","y":"NaN"}"#);
        assert_eq!(back.x, f64::INFINITY);
        assert!(back.y.is_some_and(f64::is_nan));
        let (text, back) = round_trip(-0.25, None);
        assert_eq!(text, r#"{"x":-0.25,"y":null}"#);
        assert_eq!((back.x, back.y), (-0.25, None));
        let (_, back) = round_trip(f64::NEG_INFINITY, Some(3.0));
        assert_eq!((back.x, back.y), (f64::NEG_INFINITY, Some(3.0)));
        let integer: Pair = serde_json::from_str(r#"{"x":2,"y":null}"#).expect("parses");
        assert_eq!(integer.x, 2.0);
        assert!(serde_json::from_str::<Pair>(r#"{"x":"infinity","y":null}"#).is_err());
    }
}
