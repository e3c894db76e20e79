//! The site's SVG charts: a line chart with markers and a legend, and a horizontal bar chart.
//! Built with maud, so every label (device names come from other people) is escaped by
//! construction. Text is laid out from an estimate of glyph widths that errs wide, and long
//! labels are wrapped whole rather than cut; the site's browser test measures the result.
//!
//! SVG inside an HTML page is foreign content, where no element is void: each shape is written
//! with an explicit end tag (`rect … {}`), never maud's `rect …;`, whose `<rect>` with no end the
//! parser takes as opening a container for everything after it.

use crate::escape::Html;
use maud::{html, Markup};

const PALETTE: [&str; 8] = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#e377c2", "#17becf"];

/// Width of every chart, in px.
const WIDTH: f64 = 720.0;
/// Font size of tick, legend and bar labels, in px.
const LABEL_PX: f64 = 11.0;

/// The width `text` takes at `font_px`, estimated from the widths of sans-serif glyphs (wide
/// capitals, narrow lower case) and kept on the generous side, so text laid out by it fits.
fn text_width(text: &str, font_px: f64) -> f64 {
    let em: f64 = text
        .chars()
        .map(|c| match c {
            'W' | 'M' | 'm' | 'w' | '@' | '%' => 0.95,
            c if c.is_ascii_uppercase() => 0.75,
            c if c.is_ascii_digit() => 0.6,
            'i' | 'l' | 'j' | 't' | 'f' | 'r' | '.' | ',' | ':' | ';' | '\'' | '|' | '!' => 0.35,
            c if c.is_ascii() => 0.6,
            _ => 1.0,
        })
        .sum();
    em * font_px
}

/// `text` broken into lines no wider than `width` at `font_px`: at spaces where it can, inside a
/// word where one word alone is wider.
fn wrap(text: &str, width: f64, font_px: f64) -> Vec<String> {
    let mut lines = Vec::new();
    let mut line = String::new();
    for word in text.split_whitespace() {
        let joined = if line.is_empty() { word.to_owned() } else { format!("{line} {word}") };
        if text_width(&joined, font_px) <= width {
            line = joined;
            continue;
        }
        if !line.is_empty() {
            lines.push(std::mem::take(&mut line));
        }
        for c in word.chars() {
            line.push(c);
            if text_width(&line, font_px) > width {
                let last = line.pop().unwrap_or(c);
                lines.push(std::mem::replace(&mut line, last.to_string()));
            }
        }
    }
    if !line.is_empty() || lines.is_empty() {
        lines.push(line);
    }
    lines
}

/// A `<text>` of `lines` at the label size from (`x`, `y`), one `line_px` apart.
fn text_lines(lines: &[String], x: f64, y: f64, line_px: f64, anchor: Option<&str>) -> Markup {
    html! {
        text x=(x) y=(y) font-size=(LABEL_PX) text-anchor=[anchor] {
            @for (i, line) in lines.iter().enumerate() {
                tspan x=(x) dy=(if i == 0 { 0.0 } else { line_px }) { (Html(line)) }
            }
        }
    }
}

/// An `<svg>` of `width` × `height` px, titled for screen readers, around `content`.
fn svg(title: &str, width: f64, height: f64, content: Markup) -> Markup {
    html! {
        svg xmlns="http://www.w3.org/2000/svg" viewBox={ "0 0 " (width) " " (height) } width=(width) height=(height)
            role="img" aria-label=(Html(title)) {
            title { (Html(title)) }
            (content)
        }
    }
}

/// A round step for about `ticks` ticks over `span`.
fn nice_step(span: f64, ticks: f64) -> f64 {
    let raw = (span / ticks).max(f64::MIN_POSITIVE);
    let magnitude = 10f64.powf(raw.log10().floor());
    let fraction = raw / magnitude;
    magnitude
        * if fraction <= 1.0 {
            1.0
        } else if fraction <= 2.0 {
            2.0
        } else if fraction <= 5.0 {
            5.0
        } else {
            10.0
        }
}

/// About six round values from `lo` to `hi`.
fn ticks(lo: f64, hi: f64) -> Vec<f64> {
    let step = nice_step(hi - lo, 6.0);
    let first = (lo / step).ceil();
    (0..).map(|i| (first + f64::from(i)) * step).take_while(|v| *v <= hi + step * 1e-9).take(100).collect()
}

fn tick_label(value: f64) -> String {
    let a = value.abs();
    let (number, suffix) = if a >= 1e9 {
        (format!("{:.3}", value / 1e9), "G")
    } else if a >= 1e6 {
        (format!("{:.3}", value / 1e6), "M")
    } else if a >= 1e4 {
        (format!("{:.1}", value / 1e3), "k")
    } else if a >= 10.0 || a == 0.0 {
        (format!("{value:.0}"), "")
    } else {
        (format!("{value:.2}"), "")
    };
    let number = if number.contains('.') { number.trim_end_matches('0').trim_end_matches('.') } else { &number };
    format!("{number}{suffix}")
}

/// A line chart's plot area and the data range it shows.
struct Plot {
    x: (f64, f64),
    y: (f64, f64),
    left: f64,
    top: f64,
    width: f64,
    height: f64,
}

impl Plot {
    /// The plot of every finite point of `series` in a `width` × `height` area at (`left`,
    /// `top`): from zero when `from_zero`, else from the data's minimum. None without a point.
    fn of(series: &[(String, Vec<(f64, f64)>)], from_zero: bool, area: (f64, f64, f64, f64)) -> Option<Plot> {
        let (mut x0, mut x1, mut y0, mut y1) = (f64::INFINITY, f64::NEG_INFINITY, f64::INFINITY, f64::NEG_INFINITY);
        for &(x, y) in series.iter().flat_map(|(_, p)| p.iter()).filter(|(x, y)| x.is_finite() && y.is_finite()) {
            (x0, x1, y0, y1) = (x0.min(x), x1.max(x), y0.min(y), y1.max(y));
        }
        if !x0.is_finite() {
            return None;
        }
        if from_zero {
            (x0, y0) = (x0.min(0.0), y0.min(0.0));
        }
        // A flat series gets a span of at least 2% of its value (or 1), centred on it, so its
        // ticks are distinct numbers.
        let widen = |lo: f64, hi: f64| {
            let least = (0.02 * lo.abs().max(hi.abs())).max(1.0);
            if hi - lo >= least {
                return (lo, hi);
            }
            let middle = (lo + hi) / 2.0;
            let lo = if from_zero && lo >= 0.0 { (middle - least / 2.0).max(0.0) } else { middle - least / 2.0 };
            (lo, lo + least)
        };
        let (left, top, width, height) = area;
        Some(Plot { x: widen(x0, x1), y: widen(y0, y1), left, top, width, height })
    }

    fn sx(&self, x: f64) -> f64 {
        self.left + (x - self.x.0) / (self.x.1 - self.x.0) * self.width
    }

    fn sy(&self, y: f64) -> f64 {
        self.top + self.height - (y - self.y.0) / (self.y.1 - self.y.0) * self.height
    }

    /// The frame, grid lines and tick labels.
    fn axes(&self) -> Markup {
        let (right, bottom) = (self.left + self.width, self.top + self.height);
        html! {
            rect x=(self.left) y=(self.top) width=(self.width) height=(self.height) fill="none" stroke="#888" {}
            @for v in ticks(self.x.0, self.x.1) {
                line x1=(self.sx(v)) x2=(self.sx(v)) y1=(self.top) y2=(bottom) stroke="#ddd" {}
                text x=(self.sx(v)) y=(bottom + 16.0) font-size=(LABEL_PX) text-anchor="middle" { (tick_label(v)) }
            }
            @for v in ticks(self.y.0, self.y.1) {
                line x1=(self.left) x2=(right) y1=(self.sy(v)) y2=(self.sy(v)) stroke="#ddd" {}
                text x=(self.left - 6.0) y=(self.sy(v) + 4.0) font-size=(LABEL_PX) text-anchor="end" { (tick_label(v)) }
            }
        }
    }

    /// One series in `colour`: its line, and a marker on each point when there are few.
    fn series(&self, points: &[(f64, f64)], colour: &str) -> Markup {
        let at: Vec<(String, String)> = points
            .iter()
            .filter(|(x, y)| x.is_finite() && y.is_finite())
            .map(|&(x, y)| (format!("{:.1}", self.sx(x)), format!("{:.1}", self.sy(y))))
            .collect();
        let line: Vec<String> = at.iter().map(|(x, y)| format!("{x},{y}")).collect();
        html! {
            polyline.series fill="none" stroke=(colour) stroke-width="1.5" points=(line.join(" ")) {}
            @if points.len() <= 64 {
                @for (x, y) in &at {
                    circle cx=(x) cy=(y) r="3" fill=(colour) {}
                }
            }
        }
    }
}

/// A line chart with markers: each series (name, points) in its colour, axes from zero (or
/// the data's minimum when `from_zero` is false), ticks, labels and a legend under the plot
/// with each series' whole name wrapped to the chart's width.
pub fn line_chart(
    title: &str,
    x_label: &str,
    y_label: &str,
    series: &[(String, Vec<(f64, f64)>)],
    from_zero: bool,
) -> Markup {
    let (plot_h, left, right, top, bottom, legend_line) = (360.0, 70.0, 20.0, 30.0, 50.0, 14.0);
    let legend: Vec<Vec<String>> = series.iter().map(|(name, _)| wrap(name, WIDTH - 40.0, LABEL_PX)).collect();
    let legend_y = |i: usize| {
        let above: usize = legend[..i].iter().map(Vec::len).sum();
        plot_h + 20.0 + legend_line * above as f64 + 6.0 * i as f64
    };
    let height = legend_y(series.len()) - 10.0;
    let area = (left, top, WIDTH - left - right, plot_h - top - bottom);
    let Some(plot) = Plot::of(series, from_zero, area) else {
        return svg(title, WIDTH, height, html! { text x=(left) y=(height / 2.0) { "no data" } });
    };
    let middle_y = top + plot.height / 2.0;
    svg(
        title,
        WIDTH,
        height,
        html! {
            (plot.axes())
            text x=(left + plot.width / 2.0) y="18" font-size="14" text-anchor="middle" { (Html(title)) }
            text x=(left + plot.width / 2.0) y=(plot_h - 10.0) font-size="12" text-anchor="middle" { (Html(x_label)) }
            text x="16" y=(middle_y) font-size="12" text-anchor="middle" transform={ "rotate(-90 16 " (middle_y) ")" } {
                (Html(y_label))
            }
            @for (i, (_, points)) in series.iter().enumerate() {
                (plot.series(points, PALETTE[i % PALETTE.len()]))
                rect x="10" y=(legend_y(i) - 10.0) width="12" height="12" fill=(PALETTE[i % PALETTE.len()]) {}
                (text_lines(&legend[i], 28.0, legend_y(i), legend_line, None))
            }
        },
    )
}

/// A horizontal bar chart of (label, value) in `unit` (values divided by `scale`), each label
/// whole, wrapped into the space left of the bars; a bar's row is as tall as its label.
pub fn bar_chart(title: &str, unit: &str, scale: f64, bars: &[(String, f64)]) -> Markup {
    let (left, right, line) = (260.0, 90.0, 13.0);
    let labels: Vec<Vec<String>> = bars.iter().map(|(label, _)| wrap(label, left - 16.0, LABEL_PX)).collect();
    let rows: Vec<f64> = labels.iter().map(|l| (line * l.len() as f64 + 9.0).max(22.0)).collect();
    let tops: Vec<f64> = rows.iter().scan(30.0, |y, row| Some(std::mem::replace(y, *y + row))).collect();
    let height = 40.0 + rows.iter().sum::<f64>().max(22.0) + 10.0;
    let max = bars.iter().map(|b| b.1).fold(0.0, f64::max).max(f64::MIN_POSITIVE);
    let length = |value: f64| (value / max * (WIDTH - left - right)).max(0.0);
    svg(
        title,
        WIDTH,
        height,
        html! {
            text x=(WIDTH / 2.0) y="18" font-size="14" text-anchor="middle" { (Html(title)) }
            @for (i, (_, value)) in bars.iter().enumerate() {
                (text_lines(&labels[i], left - 6.0, tops[i] + 15.0, line, Some("end")))
                rect.bar x=(left) y=(tops[i] + 3.0) width=(format!("{:.1}", length(*value))) height="16"
                    fill=(PALETTE[i % PALETTE.len()]) {}
                text x=(left + length(*value) + 4.0) y=(tops[i] + 15.0) font-size=(LABEL_PX) {
                    (format!("{:.1} ", value / scale)) (Html(unit))
                }
            }
        },
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Regression (issue 14): a long device name was cut to 28 characters in a chart's legend
    /// ("Intel(R) Xeon(R) Processor ("); it is wrapped whole into lines that fit.
    #[test]
    fn long_names_wrap_into_lines_that_fit_and_keep_every_character() {
        let name = "Intel(R) Xeon(R) Processor (Icelake) with a board name far longer than any legend line";
        let lines = wrap(name, 200.0, 11.0);
        assert!(lines.len() > 1, "{lines:?}");
        assert!(lines.iter().all(|l| text_width(l, 11.0) <= 200.0), "{lines:?}");
        assert_eq!(lines.join(" "), name);
        let word = "H".repeat(160);
        let lines = wrap(&word, 200.0, 11.0);
        assert!(lines.iter().all(|l| text_width(l, 11.0) <= 200.0) && lines.concat() == word, "{lines:?}");
        assert_eq!(wrap("", 100.0, 11.0), [""]);
        let chart = line_chart("t", "x", "y", &[(name.to_owned(), vec![(1.0, 2.0), (2.0, 3.0)])], true).into_string();
        assert!(chart.contains("far longer") && chart.contains("(Icelake)"), "{chart}");
        let bars = bar_chart("t", "GB/s", 1e9, &[(name.to_owned(), 1e9)]).into_string();
        assert!(bars.contains("far longer"), "{bars}");
    }

    #[test]
    fn a_flat_series_gets_distinct_ticks() {
        let svg = line_chart("clock", "s", "MHz", &[("clock".into(), vec![(0.0, 2596.1), (10.0, 2596.1)])], false)
            .into_string();
        let labels: Vec<&str> =
            svg.split("text-anchor=\"end\">").skip(1).map(|rest| rest.split('<').next().unwrap()).collect();
        let mut distinct = labels.clone();
        distinct.dedup();
        assert!(labels.len() >= 3 && distinct.len() == labels.len(), "{labels:?}");
    }

    #[test]
    fn tick_labels_keep_their_zeros() {
        assert_eq!(tick_label(10.0), "10");
        assert_eq!(tick_label(2500.0), "2500");
        assert_eq!(tick_label(20000.0), "20k");
        assert_eq!(tick_label(0.5), "0.5");
        assert_eq!(tick_label(3e9), "3G");
        assert_eq!(ticks(0.0, 10.0), [0.0, 2.0, 4.0, 6.0, 8.0, 10.0]);
    }

    #[test]
    fn charts_are_svg_with_every_series_and_escaped_labels() {
        let svg = line_chart(
            "t<1>",
            "x",
            "y",
            &[("<b>".into(), vec![(0.0, 1.0), (2.0, 3.0)]), ("b".into(), vec![(1.0, 1.0)])],
            true,
        )
        .into_string();
        assert!(svg.starts_with("<svg") && svg.ends_with("</svg>"));
        assert_eq!(svg.matches("class=\"series\"").count(), 2);
        assert_eq!(svg.matches("<circle").count(), 3);
        assert!(svg.contains("&lt;b&gt;") && !svg.contains("<b>") && svg.contains("aria-label=\"t&lt;1&gt;\""));
        let bars = bar_chart("bw", "GB/s", 1e9, &[("a".into(), 2e9), ("b".into(), 1e9)]).into_string();
        assert_eq!(bars.matches("class=\"bar\"").count(), 2);
        assert!(bars.contains("2.0 GB/s") && bars.contains("width=\"370.0\""), "{bars}");
        assert!(line_chart("empty", "x", "y", &[], true).into_string().contains("no data"));
        // Regression: shapes written as void elements swallowed the labels after them.
        for element in ["rect", "line", "polyline", "circle", "text", "tspan"] {
            for chart in [&svg, &bars] {
                let opened = chart.matches(&format!("<{element} ")).count();
                assert_eq!(opened, chart.matches(&format!("</{element}>")).count(), "<{element}> unclosed in {chart}");
            }
        }
    }
}
