//! The adaptive sweep: which cell runs next, decided from the suite and the cells already
//! measured alone, so a resumed run makes exactly the decisions the first one would have.
//!
//! The sweep is a set of lines: prefill at each prompt length, then decode at each context, in
//! the suite's order. Each line climbs its batch ladder until a batch runs out of memory, a
//! batch's median step passes the suite's largest latency bound (TTFT for prefill, TPOT for
//! decode), or the ladder ends. A cell that failed for any other reason is recorded and the
//! climb goes on.

use serde::{Deserialize, Serialize};

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
    /// The prompt length (prefill) or starting context (decode) of the line.
    pub len: u32,
    /// The batches the ladder offers.
    pub ladder: Vec<u32>,
    /// Why the climb ended: `ladder end`, `out of memory at batch B`, `batch B step ... passes
    /// the largest bound ...`, or `not finished`.
    pub end: String,
}
