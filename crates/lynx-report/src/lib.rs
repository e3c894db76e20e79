//! Every view of results: text from results made safe for the medium it is shown in (`escape`:
//! terminal, Markdown, CSV, HTML), one table model rendered as text, Markdown or CSV (`table`),
//! a run's summary and the other terminal views (`text`), a buyer's shortlist and a result's
//! export (`listing`), the SVG charts (`chart`), and the static results site (`site`), whose HTML
//! is maud templates that escape every spliced string by construction.
//!
//! Results come from other people: every string taken from one is escaped for where it goes. This
//! crate verifies nothing; it is handed results its caller verified (lynx-attest).

pub mod chart;
pub mod escape;
pub mod listing;
pub mod site;
pub mod table;
pub mod text;

/// Who vouches for a verified result: the trusted key it verified under, and the other trusted
/// keys whose signatures on it verify too (a vendor's countersignature on a lab's result).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Signers {
    pub key_id: String,
    pub also: Vec<String>,
}

impl Signers {
    /// The keys' ids cut to 12 characters, the first and then each other's after "; also ".
    pub(crate) fn short(&self) -> String {
        let cut = |id: &str| id.chars().take(12).collect::<String>();
        std::iter::once(cut(&self.key_id))
            .chain(self.also.iter().map(|id| format!("also {}", cut(id))))
            .collect::<Vec<_>>()
            .join("; ")
    }
}
