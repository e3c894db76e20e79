//! Text from results, made safe for where it is shown: the one escaping module for every output
//! (terminal, Markdown, CSV, HTML). Results come from other people: a device name may hold
//! terminal escape sequences, Markdown or HTML markup, a spreadsheet formula, or a bidirectional
//! override (U+202E) that shows text in another order than it is. Every output first makes such
//! characters visible ([`inert`]: C0 and C1 controls, DEL, the bidi embeddings, overrides,
//! isolates and marks, and the line and paragraph separators, each as `\u{..}`), then escapes
//! its own markup. HTML is written with maud, which escapes every spliced string; [`Html`] adds
//! the rest.

/// Text from a result, made safe for a terminal: control characters (escape sequences that could
/// rewrite the screen among them) shown as `\u{..}`, and at most `max` characters.
pub fn terminal_text(text: &str, max: usize) -> String {
    let mut out = inert(&text.chars().take(max).collect::<String>());
    if text.chars().count() > max {
        out.push('…');
    }
    out
}

/// As [`terminal_text`], but a text longer than `max` characters keeps its last `max`: for a
/// file path, whose end (the run id) tells results apart and whose start is the same for all.
pub fn terminal_tail(text: &str, max: usize) -> String {
    let count = text.chars().count();
    if count <= max {
        return inert(text);
    }
    format!("…{}", inert(&text.chars().skip(count - max).collect::<String>()))
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

/// A CSV field (RFC 4180): [`inert`], quoted when it must be, and a leading `=`, `+`, `-` or `@`
/// (which a spreadsheet would run as a formula) prefixed with `'`.
pub fn csv_field(text: &str) -> String {
    let text = inert(text);
    let text =
        if text.starts_with(['=', '+', '-', '@']) && text.parse::<f64>().is_err() { format!("'{text}") } else { text };
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
        inert(self.0).as_str().render_to(buffer);
    }
}

/// `text` with every character that is not shown as itself made visible as `\u{..}`: C0 and C1
/// controls and DEL (escape sequences, BEL, CR, NUL), the bidirectional formatting characters
/// (U+061C, U+200E, U+200F, U+202A to U+202E, U+2066 to U+2069), and U+2028/U+2029 (which some
/// terminals and editors take as line breaks). For a terminal line, an error message, a CSV
/// field: anything printed that came from outside.
pub fn inert(text: &str) -> String {
    text.chars().map(|c| if hidden(c) { c.escape_unicode().to_string() } else { c.to_string() }).collect()
}

fn hidden(c: char) -> bool {
    c.is_control()
        || matches!(c, '\u{061C}' | '\u{200E}' | '\u{200F}' | '\u{202A}'..='\u{202E}' | '\u{2066}'..='\u{2069}')
        || matches!(c, '\u{2028}' | '\u{2029}')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hostile_text_is_shown_as_text() {
        assert_eq!(terminal_text("GPU\u{1b}[2J", 80), "GPU\\u{1b}[2J");
        assert_eq!(terminal_text(&"x".repeat(100), 5), "xxxxx…");
        assert_eq!(terminal_tail("/a/long/path/run.json", 8), "…run.json");
        assert_eq!(terminal_tail("/r/\u{1b}x", 80), "/r/\\u{1b}x");
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

    /// Issue 17: C0 and C1 controls and the bidi overrides are inert in every output.
    #[test]
    fn controls_and_bidi_overrides_are_inert_everywhere() {
        let hostile = "H100\u{202E}gnp.exe\u{7}\u{1b}]0;x\u{7}\r\0\u{85}\u{2066}\u{2028}";
        let shown = "H100\\u{202e}gnp.exe\\u{7}\\u{1b}]0;x\\u{7}\\u{d}\\u{0}\\u{85}\\u{2066}\\u{2028}";
        assert_eq!(inert(hostile), shown);
        assert_eq!(terminal_text(hostile, 200), shown);
        assert_eq!(csv_field(hostile), shown, "no raw ESC, BEL, CR or NUL, and nothing left to quote");
        assert!(!markdown_text(hostile).contains(['\u{202E}', '\u{1b}', '\u{7}', '\r', '\0']));
        let html = maud::html! { (Html(hostile)) }.into_string();
        assert!(!html.contains(['\u{202E}', '\u{1b}', '\u{7}', '\r', '\0', '\u{2066}']), "{html}");
        assert_eq!(inert("Ünïcödé 東京 — fine"), "Ünïcödé 東京 — fine");
    }
}
