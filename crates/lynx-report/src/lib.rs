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
