//! The adaptive sweep: which cell runs next, decided from the suite and the cells already
//! measured alone, so a resumed run makes exactly the decisions the first one would have.
//!
//! The sweep is a set of lines: prefill at each prompt length, then decode at each context, in
//! the suite's order. Each line climbs its batch ladder until a batch runs out of memory, a
//! batch's median step passes the suite's largest latency bound (TTFT for prefill, TPOT for
//! decode), or the ladder ends. A cell that failed for any other reason is recorded and the
//! climb goes on.

use serde::{Deserialize, Serialize};

/// How one line of the sweep ended (or that it has not).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SweepLine {
    /// `prefill` or `decode`.
    pub step: String,
    /// The prompt length (prefill) or starting context (decode) of the line.
    pub len: u32,
    /// The batches the ladder offers.
    pub ladder: Vec<u32>,
    /// Why the climb ended: `ladder end`, `out of memory at batch B`, `batch B step ... passes
    /// the largest bound ...`, or `not finished`.
    pub end: String,
}
