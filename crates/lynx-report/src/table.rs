//! One table model for every tabular view: a header and rows of raw text, rendered as aligned
//! text for a terminal, as Markdown or as CSV, each escaping the text for its medium.

use crate::escape::{csv_field, markdown_text, terminal_tail, terminal_text};
use std::fmt::Write;

/// A header and rows of cells, as raw text.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Table {
    header: Vec<String>,
    rows: Vec<Vec<String>>,
    /// The columns whose cells [`Table::text`] cuts from the front (file paths).
    tails: Vec<usize>,
}

impl Table {
    /// An empty table with these column names.
    pub fn new<S: Into<String>>(header: impl IntoIterator<Item = S>) -> Table {
        Table { header: header.into_iter().map(Into::into).collect(), rows: Vec::new(), tails: Vec::new() }
    }

    /// Have [`Table::text`] keep the end of the cells in the column `name` where it cuts them:
    /// a file path's end names the result, its start is the folder all of them share.
    pub fn keep_tail(&mut self, name: &str) {
        self.tails.extend(self.header.iter().position(|h| h == name));
    }

    /// Add a row (one cell per column).
    pub fn row<S: Into<String>>(&mut self, cells: impl IntoIterator<Item = S>) {
        self.rows.push(cells.into_iter().map(Into::into).collect());
    }

    /// Whether it has no rows.
    pub fn is_empty(&self) -> bool {
        self.rows.is_empty()
    }

    /// Left-aligned columns separated by two spaces, the header first; every cell escaped for the
    /// terminal and cut to `max` characters (from the front in a [`Table::keep_tail`] column).
    pub fn text(&self, max: usize) -> String {
        let cut = |(i, c): (usize, &String)| {
            if self.tails.contains(&i) {
                terminal_tail(c, max)
            } else {
                terminal_text(c, max)
            }
        };
        let lines: Vec<Vec<String>> =
            std::iter::once(&self.header).chain(&self.rows).map(|r| r.iter().enumerate().map(cut).collect()).collect();
        let columns = lines.iter().map(Vec::len).max().unwrap_or(0);
        let mut widths = vec![0usize; columns];
        for line in &lines {
            for (width, cell) in widths.iter_mut().zip(line) {
                *width = (*width).max(cell.chars().count());
            }
        }
        let mut out = String::new();
        for line in &lines {
            let cells: Vec<String> = line.iter().zip(&widths).map(|(cell, &width)| format!("{cell:width$}")).collect();
            let _ = writeln!(out, "{}", cells.join("  ").trim_end());
        }
        out
    }

    /// A Markdown table, every cell escaped (the header is lynx's own words, and shown as written).
    pub fn markdown(&self) -> String {
        let mut out = String::new();
        let _ = writeln!(out, "| {} |", self.header.join(" | "));
        let _ = writeln!(out, "|{}", "---|".repeat(self.header.len()));
        for row in &self.rows {
            let _ = writeln!(out, "| {} |", row.iter().map(|c| markdown_text(c)).collect::<Vec<_>>().join(" | "));
        }
        out
    }

    /// CSV (RFC 4180), the header first, every field quoted where it must be and formula
    /// prefixes neutralised.
    pub fn csv(&self) -> String {
        let mut out = String::new();
        for line in std::iter::once(&self.header).chain(&self.rows) {
            let _ = writeln!(out, "{}", line.iter().map(|c| csv_field(c)).collect::<Vec<_>>().join(","));
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_table_renders_as_text_markdown_and_csv_with_each_escaping() {
        let mut table = Table::new(["DEVICE", "TOK/S"]);
        table.row(["H200 | <b>", "12.5"]);
        table.row(["=cmd()", "3"]);
        assert_eq!(table.text(80), "DEVICE      TOK/S\nH200 | <b>  12.5\n=cmd()      3\n");
        assert_eq!(table.markdown(), "| DEVICE | TOK/S |\n|---|---|\n| H200 \\| &lt;b&gt; | 12.5 |\n| =cmd() | 3 |\n");
        assert_eq!(table.csv(), "DEVICE,TOK/S\nH200 | <b>,12.5\n'=cmd(),3\n");
        assert_eq!(Table::new(["A"]).text(80), "A\n");
        let mut hostile = Table::new(["A"]);
        hostile.row(["x\u{1b}[2J"]);
        assert_eq!(hostile.text(80), "A\nx\\u{1b}[2J\n");
        let mut paths = Table::new(["RESULT", "NOTE"]);
        paths.row(["/long/folder/run-1.json", "/long/folder/run-1.json"]);
        paths.keep_tail("RESULT");
        assert_eq!(paths.text(10), "RESULT       NOTE\n…run-1.json  /long/fold…\n");
    }
}
