//! Every view of a result that is not a number: text from results made safe for the medium it is
//! shown in (`escape`: terminal, Markdown, CSV, HTML), and the static results site with its SVG
//! charts (`site`).
//!
//! Results come from other people: every string taken from one is escaped for where it goes. This
//! crate verifies nothing; it is handed results its caller verified (lynx-attest).

pub mod escape;
pub mod site;
