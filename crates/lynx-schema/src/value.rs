//! The two kinds of value a result may hold besides plain data: a number that is guaranteed
//! finite, and a fact that could not be had, with the reason.

use serde::{Deserialize, Serialize};

/// A finite `f64`. A result holds no NaN or infinity (DESIGN.md section 5): they are errors to
/// report where they arise, never data. Deserialising a non-finite number fails too.
#[derive(Debug, Clone, Copy, PartialEq, PartialOrd, Serialize, Deserialize)]
#[serde(try_from = "f64", into = "f64")]
pub struct Finite(f64);

/// A value that should have been finite was not.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{what} is {value}, not a finite number")]
pub struct NotFinite {
    /// What the value was meant to be, for the message.
    pub what: String,
    /// The offending value.
    pub value: f64,
}

impl Finite {
    /// `value` if it is finite; `what` names it in the error otherwise.
    pub fn new(value: f64, what: &str) -> Result<Finite, NotFinite> {
        if value.is_finite() {
            Ok(Finite(value))
        } else {
            Err(NotFinite { what: what.to_owned(), value })
        }
    }

    pub fn get(self) -> f64 {
        self.0
    }
}

impl TryFrom<f64> for Finite {
    type Error = NotFinite;
    fn try_from(value: f64) -> Result<Self, Self::Error> {
        Finite::new(value, "number")
    }
}

impl From<Finite> for f64 {
    fn from(value: Finite) -> f64 {
        value.0
    }
}

/// A fact about the device, host or software that is either known or explicitly unavailable.
/// Serialised as the bare value, or as `{"unavailable": "<reason>"}`: never an empty string or a
/// zero standing in for "unknown".
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum Reported<T> {
    Known(T),
    Unavailable {
        /// Why the value could not be had, for the reader of the result.
        unavailable: String,
    },
}

impl<T> Reported<T> {
    pub fn unavailable(reason: impl Into<String>) -> Self {
        Reported::Unavailable { unavailable: reason.into() }
    }

    /// The known value transformed by `f`; an unavailable one as it is.
    pub fn map_known<U>(self, f: impl FnOnce(T) -> U) -> Reported<U> {
        match self {
            Reported::Known(value) => Reported::Known(f(value)),
            Reported::Unavailable { unavailable } => Reported::Unavailable { unavailable },
        }
    }

    pub fn known(&self) -> Option<&T> {
        match self {
            Reported::Known(value) => Some(value),
            Reported::Unavailable { .. } => None,
        }
    }

    /// Why the value is unavailable; `None` when it is known.
    pub fn reason(&self) -> Option<&str> {
        match self {
            Reported::Known(_) => None,
            Reported::Unavailable { unavailable } => Some(unavailable),
        }
    }
}

impl<T, E: std::fmt::Display> From<Result<T, E>> for Reported<T> {
    fn from(result: Result<T, E>) -> Self {
        match result {
            Ok(value) => Reported::Known(value),
            Err(error) => Reported::unavailable(error.to_string()),
        }
    }
}

impl<T: std::fmt::Display> std::fmt::Display for Reported<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Reported::Known(value) => value.fmt(f),
            Reported::Unavailable { unavailable } => write!(f, "unavailable ({unavailable})"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finite_refuses_nan_and_infinity() {
        assert!(Finite::new(f64::NAN, "x").is_err());
        assert!(Finite::new(f64::INFINITY, "x").is_err());
        assert_eq!(Finite::new(1.5, "x").unwrap().get(), 1.5);
    }

    /// A number lynx writes into a result reads back as the same number, bit for bit: the figures
    /// recomputed from a result (its latency-bounded points from its cells, say) are then the
    /// ones computed before it was written. serde_json's default parser misses by one unit in
    /// the last place for about one value in nine; its `float_roundtrip` feature does not.
    #[test]
    fn a_number_reads_back_bit_for_bit() {
        let mut state: u64 = 0x9E37_79B9_7F4A_7C15;
        let mut off = Vec::new();
        for _ in 0..20_000 {
            state = state.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1_442_695_040_888_963_407);
            // Step times, rates and energies: 1e-6 to 1e6.
            let unit = (state >> 11) as f64 / (1u64 << 53) as f64;
            let value = Finite::new(1e-6 * 1e12f64.powf(unit), "value").unwrap();
            let text = serde_json::to_string(&value).unwrap();
            let back: Finite = serde_json::from_str(&text).unwrap();
            if back.get().to_bits() != value.get().to_bits() {
                off.push(text);
            }
        }
        assert!(
            off.is_empty(),
            "{} of 20000 numbers read back changed, e.g. {:?}",
            off.len(),
            &off[..off.len().min(3)]
        );
    }

    #[test]
    fn reported_serialises_value_or_reason() {
        let known: Reported<u64> = Reported::Known(7);
        let unknown: Reported<u64> = Reported::unavailable("no NVML");
        assert_eq!(serde_json::to_string(&known).unwrap(), "7");
        assert_eq!(serde_json::to_string(&unknown).unwrap(), r#"{"unavailable":"no NVML"}"#);
        let back: Reported<String> = serde_json::from_str(r#"{"unavailable":"x"}"#).unwrap();
        assert_eq!(back, Reported::unavailable("x"));
        let back: Reported<String> = serde_json::from_str(r#""H200""#).unwrap();
        assert_eq!(back, Reported::Known("H200".to_owned()));
    }
}
