//! The adaptive sweep: which cell runs next, decided from the suite and the cells already
//! measured alone, so a resumed run makes exactly the decisions the first one would have.
//!
//! The sweep is a set of lines: prefill at each prompt length, then decode at each context, in
//! the suite's order. Each line climbs its batch ladder until a batch runs out of memory, a
//! batch's median step passes the suite's largest latency bound (TTFT for prefill, TPOT for
//! decode), or the ladder ends. A cell that failed for any other reason is recorded and the
//! climb goes on.

use serde::{Deserialize, Serialize};

/// Why a line of the sweep stopped climbing its batch ladder, written as `ladder end`, `not
/// finished`, `out of memory at batch B` or `batch B median step M s passes the largest TTFT
/// (or TPOT) bound L s`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum LineEnd {
    /// Every batch of the ladder ran.
    LadderEnd,
    /// A batch of the ladder is still to run.
    NotFinished,
    /// The batch ran out of memory.
    OutOfMemory { batch: u32 },
    /// The batch's estimated memory exceeded the device's free memory: not run.
    DoesNotFit { batch: u32 },
    /// The batch's median step passed the largest bound on its step's latency (TTFT for
    /// prefill, TPOT for decode); the median as written, to four decimals.
    PassesBound { batch: u32, median_s: f64, step: StepKind, bound_s: f64 },
}

impl std::fmt::Display for LineEnd {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match *self {
            LineEnd::LadderEnd => f.write_str("ladder end"),
            LineEnd::NotFinished => f.write_str("not finished"),
            LineEnd::OutOfMemory { batch } => write!(f, "out of memory at batch {batch}"),
            LineEnd::DoesNotFit { batch } => write!(f, "does not fit at batch {batch}"),
            LineEnd::PassesBound { batch, median_s, step, bound_s } => {
                let latency = if step == StepKind::Prefill { "TTFT" } else { "TPOT" };
                write!(f, "batch {batch} median step {median_s:.4} s passes the largest {latency} bound {bound_s} s")
            }
        }
    }
}

impl std::str::FromStr for LineEnd {
    type Err = String;
    fn from_str(text: &str) -> Result<LineEnd, String> {
        let wrong = || format!("not how a sweep line ends: {text}");
        let number = |t: &str| t.parse::<f64>().map_err(|_| wrong());
        let batch = |t: &str| t.parse::<u32>().map_err(|_| wrong());
        match text {
            "ladder end" => return Ok(LineEnd::LadderEnd),
            "not finished" => return Ok(LineEnd::NotFinished),
            _ => {}
        }
        if let Some(b) = text.strip_prefix("out of memory at batch ") {
            return Ok(LineEnd::OutOfMemory { batch: batch(b)? });
        }
        if let Some(b) = text.strip_prefix("does not fit at batch ") {
            return Ok(LineEnd::DoesNotFit { batch: batch(b)? });
        }
        let rest = text.strip_prefix("batch ").ok_or_else(wrong)?;
        let (b, rest) = rest.split_once(" median step ").ok_or_else(wrong)?;
        let (median, rest) = rest.split_once(" s passes the largest ").ok_or_else(wrong)?;
        let (latency, rest) = rest.split_once(" bound ").ok_or_else(wrong)?;
        let step = match latency {
            "TTFT" => StepKind::Prefill,
            "TPOT" => StepKind::Decode,
            _ => return Err(wrong()),
        };
        let bound = rest.strip_suffix(" s").ok_or_else(wrong)?;
        Ok(LineEnd::PassesBound { batch: batch(b)?, median_s: number(median)?, step, bound_s: number(bound)? })
    }
}

impl Serialize for LineEnd {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for LineEnd {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<LineEnd, D::Error> {
        String::deserialize(deserializer)?.parse().map_err(serde::de::Error::custom)
    }
}

/// Which step a line of the sweep measures.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum StepKind {
    Prefill,
    Decode,
}

impl std::fmt::Display for StepKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            StepKind::Prefill => "prefill",
            StepKind::Decode => "decode",
        })
    }
}

/// How one line of the sweep ended (or that it has not).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SweepLine {
    pub step: StepKind,
    /// Decode lines: how the line's steps were issued (absent: eager).
    #[serde(default, skip_serializing_if = "crate::result::StepMode::is_eager")]
    pub mode: crate::result::StepMode,
    /// The prompt length (prefill) or starting context (decode) of the line.
    pub len: u32,
    /// The batches the ladder offers.
    pub ladder: Vec<u32>,
    /// Why the climb ended.
    pub end: LineEnd,
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each way a line ends is written as it always was, and reads back to itself (a published
    /// result must write back to exactly what was signed).
    #[test]
    fn line_ends_are_written_as_words_and_read_back() {
        for text in [
            "ladder end",
            "not finished",
            "out of memory at batch 64",
            "does not fit at batch 512",
            "batch 2 median step 2.5638 s passes the largest TTFT bound 2 s",
            "batch 16 median step 0.1234 s passes the largest TPOT bound 0.1 s",
        ] {
            let end: LineEnd = text.parse().unwrap();
            assert_eq!(end.to_string(), text);
        }
        let end = LineEnd::PassesBound { batch: 8, median_s: 0.123456, step: StepKind::Decode, bound_s: 0.2 };
        assert_eq!(end.to_string(), "batch 8 median step 0.1235 s passes the largest TPOT bound 0.2 s");
        assert!("batch x median step 1 s passes the largest TTFT bound 2 s".parse::<LineEnd>().is_err());
        assert!("ran out".parse::<LineEnd>().is_err());
    }
}
