//! Text from results, made safe for where it is shown. Results come from other people: a device
//! name may hold terminal escape sequences, Markdown or HTML markup, or a spreadsheet formula.
//! HTML is written with maud, which escapes every spliced string; [`Html`] adds control characters.

/// Text from a result, made safe for a terminal: control characters (escape sequences that could
/// rewrite the screen among them) shown as `\u{..}`, and at most `max` characters.
pub fn terminal_text(text: &str, max: usize) -> String {
    let mut out = visible(&text.chars().take(max).collect::<String>());
    if text.chars().count() > max {
        out.push('…');
    }
    out
}

/// Text from a result in a Markdown table cell: markup characters escaped as HTML entities, so
/// a renderer shows them as text and never as tags; the cell separator escaped.
pub fn markdown_text(text: &str) -> String {
    terminal_text(text, 200)
        .chars()
        .map(|c| match c {
            '&' => "&amp;".to_owned(),
            '<' => "&lt;".to_owned(),
            '>' => "&gt;".to_owned(),
            '|' => "\\|".to_owned(),
            '`' | '*' | '_' | '[' | ']' | '\\' => format!("\\{c}"),
            c => c.to_string(),
        })
        .collect()
}

/// A CSV field (RFC 4180): quoted when it must be, and a leading `=`, `+`, `-` or `@` (which a
/// spreadsheet would run as a formula) prefixed with `'`.
pub fn csv_field(text: &str) -> String {
    let text = if text.starts_with(['=', '+', '-', '@']) && text.parse::<f64>().is_err() {
        format!("'{text}")
    } else {
        text.to_owned()
    };
    if text.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", text.replace('"', "\"\""))
    } else {
        text
    }
}

/// Text in HTML, for maud: control characters shown as escapes (as on a terminal), then maud's
/// own escaping of markup (`&`, `<`, `>`, `"`; maud quotes every attribute with `"`). A plain string spliced into a maud template is escaped too; this adds
/// the control characters, for text that came from a result.
pub struct Html<'a>(pub &'a str);

impl maud::Render for Html<'_> {
    fn render_to(&self, buffer: &mut String) {
        visible(self.0).as_str().render_to(buffer);
    }
}

/// `text` with each control character shown as `\u{..}`.
fn visible(text: &str) -> String {
    text.chars().map(|c| if c.is_control() { c.escape_unicode().to_string() } else { c.to_string() }).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hostile_text_is_shown_as_text() {
        assert_eq!(terminal_text("GPU\u{1b}[2J", 80), "GPU\\u{1b}[2J");
        assert_eq!(terminal_text(&"x".repeat(100), 5), "xxxxx…");
        assert_eq!(
            markdown_text("<script>alert(1)</script> | <img onerror=x>"),
            "&lt;script&gt;alert(1)&lt;/script&gt; \\| &lt;img onerror=x&gt;"
        );
        assert_eq!(csv_field("=HYPERLINK(\"x\")"), "\"'=HYPERLINK(\"\"x\"\")\"");
        assert_eq!(csv_field("-1.5"), "-1.5");
        assert_eq!(csv_field("a,b"), "\"a,b\"");
        let html = |text: &str| maud::html! { (Html(text)) }.into_string();
        assert_eq!(html("<img src=x onerror=\"a()\">&"), "&lt;img src=x onerror=&quot;a()&quot;&gt;&amp;");
        assert_eq!(html("a\u{1b}b"), "a\\u{1b}b");
    }
}
