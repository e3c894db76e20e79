//! A workload's input or output length: one number, or a distribution requests draw theirs from
//! (docs/SWEEPS.md, "Request-length mixes"). A fixed length is written as the number it always
//! was, so results from before mixes existed read and write back unchanged.

use super::{Checker, ConfigError, Suite};
use serde::de::{DeserializeOwned, Error as _};
use serde::{Deserialize, Deserializer, Serialize};
use std::fmt;

/// The most `isl,osl` lines a lengths file may hold (its pairs are kept in the signed result).
pub const MOST_FILE_PAIRS: usize = 100_000;

/// A length in tokens: fixed, or drawn per request from a distribution. Written in a suite as
/// a number or as one of the tables below, told apart by their keys: read by hand (below), so
/// that a table that is not quite one of them is refused saying which it was taken for and what
/// is wrong with it, where serde's untagged enums say only that nothing matched.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(untagged)]
pub enum Length {
    Fixed(u32),
    /// Uniform over the integers in [range_ratio · length, length], as InferenceX draws them:
    /// `{ range_ratio = 0.8, length = 1024 }`.
    RangeRatio {
        range_ratio: f64,
        length: u32,
    },
    /// Uniform over the integers in [lo, hi]: `{ uniform = [lo, hi] }`.
    Uniform {
        uniform: [u32; 2],
    },
    /// exp(ln median + sigma · z) for a standard normal z, rounded and held to [min, max]:
    /// `{ lognormal = { median = 1000.0, sigma = 0.5, min = 16, max = 8192 } }`.
    Lognormal {
        lognormal: Lognormal,
    },
    /// One `isl,osl` pair a line of a file (e.g. from production logs), drawn together: both
    /// lengths of a workload name the same file, `{ file = "lengths.csv" }` (relative to the
    /// suite file). Reading the suite puts the file's pairs into the input length's `pairs`, so
    /// a result carries the lengths it was measured with.
    File {
        file: String,
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        pairs: Vec<[u32; 2]>,
    },
}

/// The forms a length is written in as a table, each as the messages name it.
const RANGE_RATIO: &str = "{ range_ratio = R, length = L }";
const UNIFORM: &str = "{ uniform = [lo, hi] }";
const LOGNORMAL: &str = "{ lognormal = { median = M, sigma = S, min = lo, max = hi } }";
const FILE: &str = "{ file = \"lengths.csv\" }";

/// Every form a length is written in, for the message that refuses one that is none of them.
fn forms() -> String {
    format!("a number of tokens, {RANGE_RATIO}, {UNIFORM}, {LOGNORMAL} or {FILE}")
}

impl<'de> Deserialize<'de> for Length {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Length, D::Error> {
        #[derive(Deserialize)]
        #[serde(deny_unknown_fields)]
        struct RangeRatio {
            range_ratio: f64,
            length: u32,
        }
        #[derive(Deserialize)]
        #[serde(deny_unknown_fields)]
        struct Uniform {
            uniform: [u32; 2],
        }
        #[derive(Deserialize)]
        #[serde(deny_unknown_fields)]
        struct LognormalForm {
            lognormal: Lognormal,
        }
        #[derive(Deserialize)]
        #[serde(deny_unknown_fields)]
        struct File {
            file: String,
            #[serde(default)]
            pairs: Vec<[u32; 2]>,
        }
        fn whole(n: &dyn fmt::Display) -> String {
            format!("a length is a whole number of tokens from 1 to {}, got {n}", Suite::MOST_TOKENS)
        }
        /// The table read as the form its keys name, or why it is not that form.
        fn form<T: DeserializeOwned>(written: toml::Value, name: &str) -> Result<T, String> {
            written.try_into().map_err(|e: toml::de::Error| format!("{name}: {}", e.message().trim_end()))
        }
        // A TOML value holds whatever a suite (TOML) or a result (JSON) wrote, NaN included, which
        // the validation names.
        let written = toml::Value::deserialize(deserializer)?;
        let length = match &written {
            toml::Value::Integer(n) => u32::try_from(*n).map(Length::Fixed).map_err(|_| whole(n)),
            toml::Value::Float(x) => Err(whole(x)),
            toml::Value::Table(table) => {
                let has = |key: &str| table.contains_key(key);
                if has("range_ratio") || has("length") {
                    form(written, RANGE_RATIO)
                        .map(|f: RangeRatio| Length::RangeRatio { range_ratio: f.range_ratio, length: f.length })
                } else if has("uniform") {
                    form(written, UNIFORM).map(|f: Uniform| Length::Uniform { uniform: f.uniform })
                } else if has("lognormal") {
                    form(written, LOGNORMAL).map(|f: LognormalForm| Length::Lognormal { lognormal: f.lognormal })
                } else if has("file") {
                    form(written, FILE).map(|f: File| Length::File { file: f.file, pairs: f.pairs })
                } else {
                    Err(format!("a length is {}", forms()))
                }
            }
            toml::Value::Array(_) => Err(format!("a length is {}, not an array", forms())),
            other => Err(format!("a length is {}, not a {}", forms(), other.type_str())),
        };
        length.map_err(D::Error::custom)
    }
}

/// A lognormal length distribution, held to [min, max].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Lognormal {
    pub median: f64,
    pub sigma: f64,
    pub min: u32,
    pub max: u32,
}

impl Length {
    /// The longest length it can give (for a file, over its pairs: `column` 0 for inputs, 1 for
    /// outputs).
    pub fn max(&self, file_pairs: &[[u32; 2]], column: usize) -> u32 {
        match self {
            Length::Fixed(n) => *n,
            Length::RangeRatio { length, .. } => *length,
            Length::Uniform { uniform: [_, hi] } => *hi,
            Length::Lognormal { lognormal } => lognormal.max,
            Length::File { .. } => file_pairs.iter().map(|p| p[column]).max().unwrap_or(0),
        }
    }

    /// The shortest length it can give (for a file, over its pairs: `column` 0 for inputs, 1
    /// for outputs).
    pub fn min(&self, file_pairs: &[[u32; 2]], column: usize) -> u32 {
        match self {
            Length::Fixed(n) => *n,
            Length::RangeRatio { range_ratio, length } => {
                ((range_ratio * f64::from(*length)).ceil() as u32).clamp(1, *length)
            }
            Length::Uniform { uniform: [lo, _] } => *lo,
            Length::Lognormal { lognormal } => lognormal.min,
            Length::File { .. } => file_pairs.iter().map(|p| p[column]).min().unwrap_or(0),
        }
    }

    /// A typical length (the centre of the distribution: the mean of a uniform one, the median
    /// of a lognormal one, the mean over a file's pairs in `column`), for picking the measured
    /// context nearest a workload.
    pub fn typical(&self, file_pairs: &[[u32; 2]], column: usize) -> f64 {
        match self {
            Length::Fixed(n) => f64::from(*n),
            Length::RangeRatio { range_ratio, length } => (1.0 + range_ratio) / 2.0 * f64::from(*length),
            Length::Uniform { uniform: [lo, hi] } => (f64::from(*lo) + f64::from(*hi)) / 2.0,
            Length::Lognormal { lognormal } => {
                lognormal.median.clamp(f64::from(lognormal.min), f64::from(lognormal.max))
            }
            Length::File { .. } => {
                file_pairs.iter().map(|p| f64::from(p[column])).sum::<f64>() / file_pairs.len().max(1) as f64
            }
        }
    }

    /// The length as the sampler draws it: a range ratio is the uniform range it spans
    /// ([`Length::min`] to its length), everything else itself.
    pub fn spans(&self) -> Length {
        match self {
            Length::RangeRatio { length, .. } => Length::Uniform { uniform: [self.min(&[], 0), *length] },
            other => other.clone(),
        }
    }

    /// The file it names, if it is one.
    pub fn file(&self) -> Option<&str> {
        match self {
            Length::File { file, .. } => Some(file),
            _ => None,
        }
    }

    pub(crate) fn validate(&self, check: &Checker, key: &str) -> Result<(), ConfigError> {
        match self {
            Length::Fixed(n) => check.count(key, *n, Suite::MOST_TOKENS),
            Length::RangeRatio { range_ratio: ratio, length } => {
                check.count(&format!("{key}.length"), *length, Suite::MOST_TOKENS)?;
                if !(ratio.is_finite() && *ratio > 0.0 && *ratio <= 1.0) {
                    return Err(check.invalid(&format!("{key}.range_ratio"), format!("must be in (0, 1], got {ratio}")));
                }
                Ok(())
            }
            Length::Uniform { uniform: [lo, hi] } => {
                check.positive(&format!("{key}.uniform"), *lo)?;
                check.at_most(&format!("{key}.uniform"), *hi, Suite::MOST_TOKENS)?;
                if hi < lo {
                    return Err(check.invalid(&format!("{key}.uniform"), format!("[{lo}, {hi}] must have lo <= hi")));
                }
                Ok(())
            }
            Length::Lognormal { lognormal: Lognormal { median, sigma, min, max } } => {
                check.positive_real(&format!("{key}.lognormal.median"), *median)?;
                check.real_at_most(&format!("{key}.lognormal.median"), *median, f64::from(Suite::MOST_TOKENS), "")?;
                check.non_negative(&format!("{key}.lognormal.sigma"), *sigma)?;
                check.real_at_most(&format!("{key}.lognormal.sigma"), *sigma, 10.0, "")?;
                check.positive(&format!("{key}.lognormal.min"), *min)?;
                check.at_most(&format!("{key}.lognormal.max"), *max, Suite::MOST_TOKENS)?;
                if max < min {
                    return Err(
                        check.invalid(&format!("{key}.lognormal.max"), format!("({max}) must be at least min ({min})"))
                    );
                }
                Ok(())
            }
            Length::File { file, pairs } => {
                if file.is_empty() {
                    return Err(check.invalid(&format!("{key}.file"), "must name a file".to_owned()));
                }
                if pairs.len() > MOST_FILE_PAIRS {
                    return Err(check.invalid(
                        &format!("{key}.file"),
                        format!("holds {} pairs; at most {MOST_FILE_PAIRS} are kept", pairs.len()),
                    ));
                }
                if let Some(i) = pairs.iter().position(|p| p[0] > Suite::MOST_TOKENS || p[1] > Suite::MOST_TOKENS) {
                    return Err(check.invalid(
                        &format!("{key}.file"),
                        format!("pair {} has a length above {}", i + 1, Suite::MOST_TOKENS),
                    ));
                }
                match pairs.iter().position(|p| p[0] == 0 || p[1] == 0) {
                    Some(i) => Err(check.invalid(&format!("{key}.file"), format!("pair {} has a length of 0", i + 1))),
                    None => Ok(()),
                }
            }
        }
    }
}

impl From<u32> for Length {
    fn from(n: u32) -> Length {
        Length::Fixed(n)
    }
}

impl fmt::Display for Length {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Length::Fixed(n) => write!(f, "{n}"),
            Length::RangeRatio { range_ratio, length } => write!(f, "{range_ratio}-1×{length}"),
            Length::Uniform { uniform: [lo, hi] } => write!(f, "{lo}-{hi}"),
            Length::Lognormal { lognormal } => write!(f, "lognormal({}, {})", lognormal.median, lognormal.sigma),
            Length::File { file, .. } => write!(f, "file {file}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Workload;

    fn workload(isl: &str, osl: &str) -> Result<Workload, String> {
        let text = format!("name = \"w\"\nisl = {isl}\nosl = {osl}\n");
        let w: Workload = crate::config::parse(&text, "w.toml").map_err(|e| e.to_string())?;
        w.validate(&Checker { origin: "w.toml" }, "workload[0]").map_err(|e| e.to_string())?;
        Ok(w)
    }

    #[test]
    fn each_length_form_parses_and_a_fixed_one_stays_a_number() {
        let w = workload("1024", "{ range_ratio = 0.8, length = 1024 }").unwrap();
        assert_eq!(w.isl, Length::Fixed(1024));
        assert_eq!(w.osl, Length::RangeRatio { range_ratio: 0.8, length: 1024 });
        assert_eq!(w.max_lengths(), (1024, 1024));
        // The sampler's lowest: ceil(0.8 · 1024).
        assert_eq!(w.min_lengths(), (1024, 820));
        assert_eq!(serde_json::to_string(&w.isl).unwrap(), "1024");
        let w =
            workload("{ uniform = [10, 20] }", "{ lognormal = { median = 100.0, sigma = 0.5, min = 8, max = 400 } }")
                .unwrap();
        assert_eq!(w.max_lengths(), (20, 400));
        assert_eq!(w.min_lengths(), (10, 8));
        assert_eq!(w.to_string(), "w 10-20/lognormal(100, 0.5)");
        let w = workload("{ file = \"l.csv\", pairs = [[3, 4], [9, 2]] }", "{ file = \"l.csv\" }").unwrap();
        assert_eq!(w.max_lengths(), (9, 4));
        assert_eq!(w.min_lengths(), (3, 2));
        let back: Workload = serde_json::from_str(&serde_json::to_string(&w).unwrap()).unwrap();
        assert_eq!(back, w);
    }

    /// Two workloads draw alike when their lengths span the same ranges, or their files hold
    /// the same pairs; names, and a file's name, do not count.
    #[test]
    fn workloads_draw_alike_where_their_lengths_span_the_same() {
        let alike =
            |a: (&str, &str), b: (&str, &str)| workload(a.0, a.1).unwrap().same_lengths(&workload(b.0, b.1).unwrap());
        assert!(alike(("{ uniform = [820, 1024] }", "128"), ("{ range_ratio = 0.8, length = 1024 }", "128")));
        assert!(alike(("64", "16"), ("64", "16")));
        assert!(!alike(("64", "16"), ("64", "17")));
        assert!(!alike(("{ uniform = [819, 1024] }", "128"), ("{ range_ratio = 0.8, length = 1024 }", "128")));
        let file = |name: &str, pairs: &str| {
            (format!("{{ file = \"{name}\", pairs = {pairs} }}"), format!("{{ file = \"{name}\" }}"))
        };
        let (a, b, c) = (file("a.csv", "[[3, 4]]"), file("b.csv", "[[3, 4]]"), file("a.csv", "[[3, 5]]"));
        assert!(alike((&a.0, &a.1), (&b.0, &b.1)));
        assert!(!alike((&a.0, &a.1), (&c.0, &c.1)));
        assert!(!alike((&a.0, &a.1), ("3", "4")));
    }

    #[test]
    fn a_length_that_cannot_be_drawn_is_refused_naming_its_key() {
        for (isl, osl, needle) in [
            ("0", "1", "workload[0].isl must be greater than 0"),
            ("{ range_ratio = 1.5, length = 10 }", "1", "workload[0].isl.range_ratio must be in (0, 1]"),
            ("{ uniform = [20, 10] }", "1", "must have lo <= hi"),
            ("{ lognormal = { median = 10.0, sigma = 1.0, min = 50, max = 10 } }", "1", "lognormal.max"),
            ("{ file = \"a.csv\" }", "5", "one of isl and osl only"),
            ("{ file = \"a.csv\", pairs = [[0, 1]] }", "{ file = \"a.csv\" }", "pair 1 has a length of 0"),
            ("5", "1", "workload[0].osl gives every request one output token"),
            ("5", "{ uniform = [1, 1] }", "workload[0].osl gives every request one output token"),
            ("{ file = \"a.csv\", pairs = [[3, 1], [4, 1]] }", "{ file = \"a.csv\" }", "one output token"),
        ] {
            let error = workload(isl, osl).unwrap_err();
            assert!(error.contains(needle), "{isl}/{osl}: {error}");
        }
        assert!(workload("{ uniform = [1, 2], extra = 3 }", "1").is_err(), "an unknown key is refused");
    }

    /// A length written in none of the forms, or in one of them with something missing or
    /// extra, is refused saying which form its keys made it and what is wrong: the untagged
    /// enum it was read as said only "data did not match any variant of untagged enum Length".
    #[test]
    fn a_length_in_no_form_is_refused_saying_which_form_and_what_is_wrong() {
        for (isl, needle) in [
            ("{ range_ratio = 0.8 }", "{ range_ratio = R, length = L }: missing field `length`"),
            ("{ uniform = [1, 2], extra = 3 }", "{ uniform = [lo, hi] }: unknown field `extra`"),
            ("{ lognormal = { median = 9.0 } }", "missing field `sigma`"),
            ("{ file = 3 }", "{ file = \"lengths.csv\" }: invalid type: integer `3`"),
            ("{ bogus = 3 }", "a length is a number of tokens, { range_ratio = R, length = L }, { uniform"),
            ("[1, 2]", "not an array"),
            ("\"abc\"", "not a string"),
            ("-3", "a length is a whole number of tokens from 1 to 16777216, got -3"),
            ("3.5", "got 3.5"),
            ("4294967296", "got 4294967296"),
        ] {
            let error = workload(isl, "2").unwrap_err();
            assert!(error.contains(needle), "{isl}: {error}");
            assert!(!error.contains("untagged"), "{isl}: {error}");
        }
        // A NaN reaches the validation, which names the key.
        let error = workload("{ range_ratio = nan, length = 10 }", "2").unwrap_err();
        assert!(error.contains("workload[0].isl.range_ratio must be in (0, 1], got NaN"), "{error}");
        // A result (JSON) reads each form back as before.
        for written in ["7", r#"{"range_ratio":0.8,"length":10}"#, r#"{"file":"l.csv","pairs":[[3,4]]}"#] {
            let length: Length = serde_json::from_str(written).unwrap();
            assert_eq!(serde_json::to_string(&length).unwrap(), written);
        }
        assert!(serde_json::from_str::<Length>("null").is_err());
    }
}
