//! Text from results, made safe for where it is shown. Results come from other people: a device
//! name may hold terminal escape sequences, Markdown or HTML markup, or a spreadsheet formula.

/// Text from a result, made safe for a terminal: control characters (escape sequences that could
/// rewrite the screen among them) shown as `\u{..}`, and at most `max` characters.
pub fn terminal_text(text: &str, max: usize) -> String {
    let mut out: String = text
        .chars()
        .take(max)
        .map(|c| if c.is_control() { c.escape_unicode().to_string() } else { c.to_string() })
        .collect();
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

/// HTML-escape text from a result (or anywhere): `&`, `<`, `>`, quotes; control characters
/// shown as escapes.
pub fn html(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c if c.is_control() && c != '\n' => out.push_str(&c.escape_unicode().to_string()),
            c => out.push(c),
        }
    }
    out
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
    }
}
