//! Dependency-free SVG charts for the self-contained `index.html` benchmark report.
//!
//! Every chart is one inline `<svg>` element (about 720x420) that draws without
//! JavaScript: a title, a plot frame with ticks and grid, the data and a legend to the
//! right of the plot. Output is deterministic: the same input gives the same string.

use std::fmt::Write as _;

/// Width of every chart, in px.
const WIDTH: f64 = 720.0;
/// Height of every chart unless the legend needs more room, in px.
const HEIGHT: f64 = 420.0;
/// Left edge of the plot area (room for y tick labels and the y axis label).
const PLOT_LEFT: f64 = 72.0;
/// Right edge of the plot area; the legend lies to its right.
const PLOT_RIGHT: f64 = 540.0;
/// Top edge of the plot area (room for the title).
const PLOT_TOP: f64 = 40.0;
/// Space below the plot area for x tick labels and the x axis label.
const BOTTOM_MARGIN: f64 = 56.0;
/// Left edge of the legend.
const LEGEND_X: f64 = 556.0;
/// Vertical distance between legend entries.
const LEGEND_STEP: f64 = 18.0;
/// Longest legend label, in characters, before it is shortened.
const LEGEND_CHARS: usize = 22;
/// Okabe-Ito colour-blind-friendly palette, ordered so the first colours read well as lines.
const PALETTE: [&str; 8] = [
    "#0072B2", "#E69F00", "#009E73", "#D55E00", "#56B4E9", "#CC79A7", "#F0E442", "#000000",
];

/// One line or point set of a chart.
#[derive(Clone, Debug, PartialEq)]
pub struct Series {
    /// Name shown in the legend.
    pub label: String,
    /// `(x, y)` data points, drawn in the given order.
    pub points: Vec<(f64, f64)>,
}

/// An axis: its label and whether it is logarithmic (base 10).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Axis {
    /// Text written along the axis.
    pub label: String,
    /// Logarithmic (base 10) instead of linear.
    pub log: bool,
}

impl Axis {
    /// A linear axis with this label.
    pub fn linear(label: &str) -> Axis {
        Axis {
            label: label.to_string(),
            log: false,
        }
    }

    /// A logarithmic (base 10) axis with this label.
    pub fn log(label: &str) -> Axis {
        Axis {
            label: label.to_string(),
            log: true,
        }
    }
}

/// Line chart with markers (each series a polyline plus small circles), legend, title,
/// ticks and grid.
///
/// Points that an axis cannot show (non-finite values; non-positive values on a log
/// axis) are skipped and break the series' line there. If no point is left, the chart
/// says "no data".
pub fn line_chart(title: &str, x: &Axis, y: &Axis, series: &[Series]) -> String {
    let valid = |&(px, py): &(f64, f64)| accepts(x.log, px) && accepts(y.log, py);
    let points: Vec<(f64, f64)> = series
        .iter()
        .flat_map(|s| s.points.iter().copied())
        .filter(valid)
        .collect();
    let xs: Vec<f64> = points.iter().map(|p| p.0).collect();
    let ys: Vec<f64> = points.iter().map(|p| p.1).collect();
    let height = chart_height(series.len());
    let mut svg = Svg::new(title, height);
    let (xa, ya) = match (build_axis(x.log, &xs, false), build_axis(y.log, &ys, false)) {
        (Some(xa), Some(ya)) => (xa, ya),
        _ => {
            svg.no_data(height);
            return svg.finish();
        }
    };
    let frame = Frame {
        left: PLOT_LEFT,
        right: PLOT_RIGHT,
        top: PLOT_TOP,
        bottom: height - BOTTOM_MARGIN,
    };

    // Grid: minor lines first, then major ones, then the frame on top.
    for &f in &xa.minor {
        let px = frame.x(f);
        svg.line(px, frame.top, px, frame.bottom, "#f0f0f0");
    }
    for &f in &ya.minor {
        let py = frame.y(f);
        svg.line(frame.left, py, frame.right, py, "#f0f0f0");
    }
    for t in &xa.major {
        let px = frame.x(t.frac);
        svg.line(px, frame.top, px, frame.bottom, "#dddddd");
        svg.text(px, frame.bottom + 16.0, &t.label, r#"text-anchor="middle""#);
    }
    for t in &ya.major {
        let py = frame.y(t.frac);
        svg.line(frame.left, py, frame.right, py, "#dddddd");
        svg.text(frame.left - 6.0, py + 4.0, &t.label, r#"text-anchor="end""#);
    }
    svg.frame(&frame);
    svg.text(
        (frame.left + frame.right) / 2.0,
        frame.bottom + 40.0,
        &x.label,
        r#"text-anchor="middle" font-size="12""#,
    );
    svg.y_label(&frame, &y.label);

    // Data.
    for (i, s) in series.iter().enumerate() {
        let colour = colour(i);
        let mut segment: Vec<(f64, f64)> = Vec::new();
        let mut markers: Vec<(f64, f64)> = Vec::new();
        let mut segments: Vec<Vec<(f64, f64)>> = Vec::new();
        for &(px, py) in &s.points {
            match (xa.scale.frac(px), ya.scale.frac(py)) {
                (Some(fx), Some(fy)) => {
                    let p = (frame.x(fx), frame.y(fy));
                    segment.push(p);
                    markers.push(p);
                }
                _ => segments.push(std::mem::take(&mut segment)),
            }
        }
        segments.push(segment);
        if markers.is_empty() {
            continue;
        }
        let _ = write!(svg.out, r#"<g stroke="{colour}" fill="{colour}">"#);
        for seg in segments.iter().filter(|seg| seg.len() >= 2) {
            let pts: Vec<String> = seg
                .iter()
                .map(|&(px, py)| format!("{},{}", coord(px), coord(py)))
                .collect();
            let _ = write!(
                svg.out,
                r#"<polyline points="{}" fill="none" stroke-width="1.8"/>"#,
                pts.join(" ")
            );
        }
        for &(px, py) in &markers {
            let _ = write!(
                svg.out,
                r#"<circle cx="{}" cy="{}" r="2.8" stroke="none"/>"#,
                coord(px),
                coord(py)
            );
        }
        svg.out.push_str("</g>");
    }

    // Legend.
    for (i, s) in series.iter().enumerate() {
        let colour = colour(i);
        let ly = frame.top + 6.0 + i as f64 * LEGEND_STEP;
        let _ = write!(
            svg.out,
            r#"<line x1="{}" y1="{y}" x2="{}" y2="{y}" stroke="{colour}" stroke-width="1.8"/><circle cx="{}" cy="{y}" r="2.8" fill="{colour}"/>"#,
            coord(LEGEND_X),
            coord(LEGEND_X + 18.0),
            coord(LEGEND_X + 9.0),
            y = coord(ly),
        );
        svg.legend_label(ly, &s.label);
    }
    svg.finish()
}

/// Grouped bar chart: one group of bars per category; `groups` are (series label, one
/// value per category; None = missing, drawn as nothing with a small "n/a" mark).
///
/// Values the axis cannot show (non-finite; non-positive on a log axis) and values
/// missing at the end of a group count as `None`. A linear axis always includes 0 and
/// bars grow from 0; on a log axis they grow from the bottom of the plot.
pub fn bar_chart(
    title: &str,
    categories: &[String],
    y: &Axis,
    groups: &[(String, Vec<Option<f64>>)],
) -> String {
    let value = |g: &(String, Vec<Option<f64>>), c: usize| -> Option<f64> {
        g.1.get(c).copied().flatten().filter(|&v| accepts(y.log, v))
    };
    let values: Vec<f64> = groups
        .iter()
        .flat_map(|g| (0..categories.len()).filter_map(move |c| value(g, c)))
        .collect();
    let height = chart_height(groups.len());
    let mut svg = Svg::new(title, height);
    let ya = match build_axis(y.log, &values, true) {
        Some(ya) => ya,
        None => {
            svg.no_data(height);
            return svg.finish();
        }
    };

    // Category labels: horizontal if they fit their band, else rotated (and shortened).
    let n = categories.len() as f64;
    let band = (PLOT_RIGHT - PLOT_LEFT) / n;
    let longest = categories
        .iter()
        .map(|c| c.chars().count())
        .max()
        .unwrap_or(0);
    let rotate = longest as f64 * 6.5 > band - 4.0;
    let label_chars = if rotate { longest.min(24) } else { longest };
    let bottom_margin = if rotate {
        20.0 + label_chars as f64 * 3.8
    } else {
        36.0
    };
    let frame = Frame {
        left: PLOT_LEFT,
        right: PLOT_RIGHT,
        top: PLOT_TOP,
        bottom: height - bottom_margin.max(36.0),
    };

    for &f in &ya.minor {
        let py = frame.y(f);
        svg.line(frame.left, py, frame.right, py, "#f0f0f0");
    }
    for t in &ya.major {
        let py = frame.y(t.frac);
        svg.line(frame.left, py, frame.right, py, "#dddddd");
        svg.text(frame.left - 6.0, py + 4.0, &t.label, r#"text-anchor="end""#);
    }
    svg.y_label(&frame, &y.label);

    // Bars.
    let base_frac = if y.log {
        0.0
    } else {
        ya.scale.frac(0.0).unwrap_or(0.0).clamp(0.0, 1.0)
    };
    let base = frame.y(base_frac);
    let slot = band * 0.8 / groups.len().max(1) as f64;
    for (c, category) in categories.iter().enumerate() {
        let band_left = frame.left + c as f64 * band;
        for (g, group) in groups.iter().enumerate() {
            let slot_left = band_left + band * 0.1 + g as f64 * slot;
            let centre = slot_left + slot / 2.0;
            match value(group, c).and_then(|v| Some((v, ya.scale.frac(v)?))) {
                Some((v, f)) => {
                    let top = frame.y(f.clamp(0.0, 1.0));
                    let _ = write!(
                        svg.out,
                        r#"<rect x="{}" y="{}" width="{}" height="{}" fill="{}"><title>{}</title></rect>"#,
                        coord(slot_left + slot * 0.05),
                        coord(top.min(base)),
                        coord(slot * 0.9),
                        coord((top - base).abs()),
                        colour(g),
                        escape(&format!("{} / {}: {}", group.0, category, value_text(v))),
                    );
                }
                None => {
                    let ny = base - 4.0;
                    let attrs = if slot < 16.0 {
                        format!(
                            r##"font-size="9" fill="#777777" text-anchor="start" transform="rotate(-90 {} {})""##,
                            coord(centre + 3.0),
                            coord(ny)
                        )
                    } else {
                        r##"font-size="9" fill="#777777" text-anchor="middle""##.to_string()
                    };
                    let nx = if slot < 16.0 { centre + 3.0 } else { centre };
                    svg.text(nx, ny, "n/a", &attrs);
                }
            }
        }
        let cx = band_left + band / 2.0;
        if rotate {
            let ty = frame.bottom + 12.0;
            let attrs = format!(
                r#"text-anchor="end" transform="rotate(-35 {} {})""#,
                coord(cx),
                coord(ty)
            );
            svg.text(cx, ty, &shorten(category, label_chars), &attrs);
        } else {
            svg.text(cx, frame.bottom + 16.0, category, r#"text-anchor="middle""#);
        }
    }
    // The zero line of a linear axis, then the frame.
    if !y.log && base_frac > 0.0 {
        svg.line(frame.left, base, frame.right, base, "#888888");
    }
    svg.frame(&frame);

    // Legend.
    for (g, group) in groups.iter().enumerate() {
        let ly = frame.top + 6.0 + g as f64 * LEGEND_STEP;
        let _ = write!(
            svg.out,
            r#"<rect x="{}" y="{}" width="14" height="10" fill="{}"/>"#,
            coord(LEGEND_X + 2.0),
            coord(ly - 5.0),
            colour(g)
        );
        svg.legend_label(ly, &group.0);
    }
    svg.finish()
}

/// Escapes text for XML/HTML (&, <, >, ", ').
///
/// Control characters other than tab, line feed and carriage return, which XML does not
/// allow, are dropped.
pub fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for ch in s.chars() {
        match ch {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            '\t' | '\n' | '\r' => out.push(ch),
            c if c.is_control() => {}
            c => out.push(c),
        }
    }
    out
}

/// The SVG being written.
struct Svg {
    out: String,
}

impl Svg {
    /// Opens the `<svg>` element with its `<title>`, background and visible title.
    fn new(title: &str, height: f64) -> Svg {
        let mut out = String::with_capacity(8192);
        let (w, h) = (coord(WIDTH), coord(height));
        let _ = write!(
            out,
            r#"<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {w} {h}" width="{w}" height="{h}" role="img"><title>{}</title>"#,
            escape(title)
        );
        let _ = write!(
            out,
            r##"<g font-family="sans-serif" font-size="11"><rect x="0" y="0" width="{w}" height="{h}" fill="#ffffff"/>"##
        );
        let mut svg = Svg { out };
        svg.text(
            WIDTH / 2.0,
            22.0,
            title,
            r##"text-anchor="middle" font-size="13" font-weight="bold" fill="#222222""##,
        );
        svg
    }

    /// Closes the open elements and returns the markup.
    fn finish(mut self) -> String {
        self.out.push_str("</g></svg>");
        self.out
    }

    /// A "no data" note in the middle of the chart.
    fn no_data(&mut self, height: f64) {
        self.text(
            WIDTH / 2.0,
            height / 2.0,
            "no data",
            r##"text-anchor="middle" font-size="13" fill="#777777""##,
        );
    }

    /// A one-pixel line.
    fn line(&mut self, x1: f64, y1: f64, x2: f64, y2: f64, stroke: &str) {
        let _ = write!(
            self.out,
            r#"<line x1="{}" y1="{}" x2="{}" y2="{}" stroke="{stroke}" stroke-width="1"/>"#,
            coord(x1),
            coord(y1),
            coord(x2),
            coord(y2)
        );
    }

    /// Text at (x, y); `content` is escaped, `attrs` is trusted markup.
    fn text(&mut self, x: f64, y: f64, content: &str, attrs: &str) {
        let _ = write!(
            self.out,
            r#"<text x="{}" y="{}" {attrs}>{}</text>"#,
            coord(x),
            coord(y),
            escape(content)
        );
    }

    /// The plot frame.
    fn frame(&mut self, frame: &Frame) {
        let _ = write!(
            self.out,
            r##"<rect x="{}" y="{}" width="{}" height="{}" fill="none" stroke="#888888" stroke-width="1"/>"##,
            coord(frame.left),
            coord(frame.top),
            coord(frame.right - frame.left),
            coord(frame.bottom - frame.top)
        );
    }

    /// The y axis label, written upwards left of the tick labels.
    fn y_label(&mut self, frame: &Frame, label: &str) {
        let (x, y) = (16.0, (frame.top + frame.bottom) / 2.0);
        let attrs = format!(
            r#"text-anchor="middle" font-size="12" transform="rotate(-90 {} {})""#,
            coord(x),
            coord(y)
        );
        self.text(x, y, label, &attrs);
    }

    /// A legend label at the given height, shortened if long (full text as tooltip).
    fn legend_label(&mut self, y: f64, label: &str) {
        let short = shorten(label, LEGEND_CHARS);
        if short == label {
            self.text(LEGEND_X + 24.0, y + 4.0, label, "");
        } else {
            let _ = write!(
                self.out,
                r#"<text x="{}" y="{}">{}<title>{}</title></text>"#,
                coord(LEGEND_X + 24.0),
                coord(y + 4.0),
                escape(&short),
                escape(label)
            );
        }
    }
}

/// The plot area, in px.
struct Frame {
    left: f64,
    right: f64,
    top: f64,
    bottom: f64,
}

impl Frame {
    /// Horizontal position of a fraction of the x axis.
    fn x(&self, frac: f64) -> f64 {
        self.left + frac * (self.right - self.left)
    }

    /// Vertical position of a fraction of the y axis (0 at the bottom).
    fn y(&self, frac: f64) -> f64 {
        self.bottom - frac * (self.bottom - self.top)
    }
}

/// Maps data values to fractions of an axis. For a log scale `lo` and `hi` are powers
/// of ten (exponents); `hi > lo` always.
#[derive(Clone, Copy, Debug)]
struct Scale {
    log: bool,
    lo: f64,
    hi: f64,
}

impl Scale {
    /// Where `v` lies on the axis, 0 at `lo` and 1 at `hi`; None if it cannot be shown.
    fn frac(&self, v: f64) -> Option<f64> {
        if !accepts(self.log, v) {
            return None;
        }
        let t = if self.log {
            (v.log10() - self.lo) / (self.hi - self.lo)
        } else {
            // Halved so that huge ranges do not overflow.
            (v / 2.0 - self.lo / 2.0) / (self.hi / 2.0 - self.lo / 2.0)
        };
        t.is_finite().then_some(t)
    }
}

/// A labelled tick.
struct Tick {
    frac: f64,
    label: String,
}

/// An axis ready to draw: its scale, labelled ticks and minor grid lines (fractions).
struct AxisTicks {
    scale: Scale,
    major: Vec<Tick>,
    minor: Vec<f64>,
}

/// Whether an axis can show `v`.
fn accepts(log: bool, v: f64) -> bool {
    v.is_finite() && (!log || v > 0.0)
}

/// Builds an axis for the values it can show; None if there is none.
fn build_axis(log: bool, values: &[f64], include_zero: bool) -> Option<AxisTicks> {
    let mut it = values.iter().copied().filter(|&v| accepts(log, v));
    let first = it.next()?;
    let (min, max) = it.fold((first, first), |(a, b), v| (a.min(v), b.max(v)));
    Some(if log {
        log_axis(min, max)
    } else if include_zero {
        linear_axis(min.min(0.0), max.max(0.0), true)
    } else {
        linear_axis(min, max, false)
    })
}

/// A linear axis over `[min, max]`, widened to nice ticks.
fn linear_axis(min: f64, max: f64, include_zero: bool) -> AxisTicks {
    let (mut lo, mut hi) = (min, max);
    if hi <= lo {
        if include_zero && lo == 0.0 {
            hi = 1.0;
        } else {
            let pad = if lo == 0.0 { 1.0 } else { lo.abs() * 0.1 };
            lo -= pad;
            hi += pad;
        }
    }
    if hi <= lo || !(hi - lo).is_normal() {
        // Too tiny a range to pad relatively.
        lo -= 1.0;
        hi += 1.0;
    }
    let (ticks, step) = match nice_ticks(lo, hi) {
        Some((ticks, step)) => (ticks, step),
        None => (vec![lo, hi], hi / 2.0 - lo / 2.0),
    };
    let (first, last) = match (ticks.first(), ticks.last()) {
        (Some(&a), Some(&b)) if b > a => (a, b),
        _ => (lo, hi),
    };
    let scale = Scale {
        log: false,
        lo: first,
        hi: last,
    };
    let major = ticks
        .iter()
        .filter_map(|&v| {
            Some(Tick {
                frac: scale.frac(v)?,
                label: compact(v, step),
            })
        })
        .collect();
    AxisTicks {
        scale,
        major,
        minor: Vec::new(),
    }
}

/// A log axis over `[min, max]` (both > 0), padded and holding at least two powers of ten.
fn log_axis(min: f64, max: f64) -> AxisTicks {
    let (mut lo, mut hi) = (min.log10(), max.log10());
    if hi - lo < 1e-9 {
        lo -= 0.5;
        hi += 0.5;
    } else {
        let pad = (hi - lo) * 0.04;
        lo -= pad;
        hi += pad;
    }
    if hi.floor() - lo.ceil() < 1.0 {
        lo = lo.floor();
        hi = hi.ceil();
    }
    let scale = Scale { log: true, lo, hi };
    let span = hi - lo;
    let major = log_exponents(lo, hi)
        .into_iter()
        .map(|k| Tick {
            frac: (f64::from(k) - lo) / span,
            label: pow10_label(k),
        })
        .collect();
    let mut minor = Vec::new();
    if span <= 6.0 {
        for k in (lo.floor() as i32)..=(hi.floor() as i32) {
            for m in 2..=9 {
                let e = f64::from(k) + f64::from(m).log10();
                if e > lo && e < hi {
                    minor.push((e - lo) / span);
                }
            }
        }
    }
    AxisTicks {
        scale,
        major,
        minor,
    }
}

/// Exponents of the powers of ten in `[lo, hi]` (exponents), thinned to at most about ten.
fn log_exponents(lo: f64, hi: f64) -> Vec<i32> {
    if !(lo.is_finite() && hi.is_finite()) {
        return Vec::new();
    }
    let a = (lo - 1e-9).ceil() as i32;
    let b = (hi + 1e-9).floor() as i32;
    if b < a {
        return Vec::new();
    }
    let count = b - a + 1;
    let stride = if count > 10 { (count + 7) / 8 } else { 1 };
    (a..=b).filter(|k| k.rem_euclid(stride) == 0).collect()
}

/// Powers of ten within `[lo, hi]` (values, both > 0).
#[cfg(test)]
fn log_ticks(lo: f64, hi: f64) -> Vec<f64> {
    if !(lo > 0.0 && hi >= lo) {
        return Vec::new();
    }
    log_exponents(lo.log10(), hi.log10())
        .into_iter()
        .map(pow10)
        .collect()
}

/// Nice ticks (steps of 1, 2 or 5 times a power of ten), about 5 to 8 of them, covering
/// `[lo, hi]`; returns the ticks and the step. None if the range is empty or not finite.
fn nice_ticks(lo: f64, hi: f64) -> Option<(Vec<f64>, f64)> {
    let range = hi - lo;
    if !(range.is_finite() && range > 0.0) {
        return None;
    }
    let e0 = (range / 6.0).log10().floor();
    if !e0.is_finite() {
        return None;
    }
    let e0 = e0 as i32;
    let mut best: Option<(f64, f64, f64, f64)> = None; // (score, first, count, step)
    for e in (e0 - 1)..=(e0 + 1) {
        for m in [1.0, 2.0, 5.0] {
            let step = m * pow10(e);
            if !(step.is_normal() && step > 0.0) {
                continue;
            }
            let (a, b) = (lo / step, hi / step);
            let first = (a + 1e-9 * a.abs().max(1.0)).floor();
            let last = (b - 1e-9 * b.abs().max(1.0)).ceil();
            let count = last - first + 1.0;
            if !(count.is_finite() && (2.0..=1000.0).contains(&count)) {
                continue;
            }
            let score = if count < 5.0 {
                5.0 - count
            } else if count > 8.0 {
                count - 8.0
            } else {
                (count - 6.0).abs() * 0.1
            };
            if best.is_none_or(|b| score < b.0) {
                best = Some((score, first, count, step));
            }
        }
    }
    let (_, first, count, step) = best?;
    let ticks: Vec<f64> = (0..count as usize)
        .map(|i| (first + i as f64) * step)
        .collect();
    ticks.iter().all(|t| t.is_finite()).then_some((ticks, step))
}

/// 10^k, correctly rounded (0 or infinity beyond the range of f64).
fn pow10(k: i32) -> f64 {
    format!("1e{k}").parse().unwrap_or(0.0)
}

/// The label of the tick at 10^k: compact for everyday exponents, else "1e{k}".
fn pow10_label(k: i32) -> String {
    if (-4..=20).contains(&k) {
        let v = pow10(k);
        compact(v, v)
    } else {
        format!("1e{k}")
    }
}

/// A tick label: SI suffixes from k up (1k, 2.5M), enough decimals for `step` (the
/// distance between ticks), scientific notation for very small or huge numbers.
fn compact(v: f64, step: f64) -> String {
    const SUFFIXES: [&str; 7] = ["", "k", "M", "G", "T", "P", "E"];
    if !v.is_finite() {
        return String::new();
    }
    let a = v.abs();
    if a == 0.0 {
        return "0".to_string();
    }
    if a >= 1e21 {
        return scientific(v);
    }
    let mut k = 0;
    let mut scale = 1.0;
    while k + 1 < SUFFIXES.len() && a >= scale * 1000.0 {
        k += 1;
        scale *= 1000.0;
    }
    let decimals = if step.is_finite() && step > 0.0 {
        (-(step / scale).log10() - 1e-9).ceil().max(0.0)
    } else {
        0.0
    };
    if decimals > 4.0 {
        return scientific(v);
    }
    let text = trim_zeros(format!("{:.*}", decimals as usize, v / scale));
    if text == "0" || text == "-0" {
        return "0".to_string();
    }
    format!("{text}{}", SUFFIXES[k])
}

/// `v` as mantissa (up to 2 decimals) and exponent: 2.5e-7.
fn scientific(v: f64) -> String {
    let s = format!("{v:.2e}");
    match s.split_once('e') {
        Some((mantissa, exp)) => format!("{}e{exp}", trim_zeros(mantissa.to_string())),
        None => s,
    }
}

/// A value for a tooltip: up to 2 decimals, scientific notation where that would hide it.
fn value_text(v: f64) -> String {
    let a = v.abs();
    if a == 0.0 {
        "0".to_string()
    } else if (0.01..1e15).contains(&a) {
        trim_zeros(format!("{v:.2}"))
    } else {
        scientific(v)
    }
}

/// A coordinate with at most 2 decimals, no trailing zeros, never "-0", "NaN" or "inf".
fn coord(v: f64) -> String {
    if !v.is_finite() {
        return "0".to_string();
    }
    let s = trim_zeros(format!("{v:.2}"));
    if s == "-0" {
        "0".to_string()
    } else {
        s
    }
}

/// Drops trailing zeros after a decimal point, and the point if nothing is left after it.
fn trim_zeros(s: String) -> String {
    if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    } else {
        s
    }
}

/// `s` cut to at most `max` characters, ending in "..." if it was cut.
fn shorten(s: &str, max: usize) -> String {
    if s.chars().count() <= max {
        s.to_string()
    } else {
        let mut out: String = s.chars().take(max.saturating_sub(3)).collect();
        out.push_str("...");
        out
    }
}

/// The colour of the i-th series.
fn colour(i: usize) -> &'static str {
    PALETTE[i % PALETTE.len()]
}

/// Chart height: the standard one, or more if the legend needs it.
fn chart_height(entries: usize) -> f64 {
    let legend = PLOT_TOP + 6.0 + entries as f64 * LEGEND_STEP + BOTTOM_MARGIN;
    HEIGHT.max(legend.ceil())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Checks that every `<tag ...>` is closed by a matching `</tag>` or self-closed, and
    /// that every `&` starts one of the entities `escape` writes.
    fn assert_balanced(svg: &str) {
        let mut stack: Vec<String> = Vec::new();
        let mut rest = svg;
        while let Some(start) = rest.find('<') {
            let text = &rest[..start];
            check_entities(text);
            let after = &rest[start + 1..];
            let end = after
                .find('>')
                .unwrap_or_else(|| panic!("unterminated tag in {svg}"));
            let tag = &after[..end];
            if let Some(name) = tag.strip_prefix('/') {
                let open = stack.pop();
                assert_eq!(open.as_deref(), Some(name.trim()), "mismatched </{name}>");
            } else if !tag.ends_with('/') {
                let name = tag.split_whitespace().next().unwrap_or_default();
                assert!(!name.is_empty(), "empty tag");
                stack.push(name.to_string());
            }
            check_entities(tag);
            rest = &after[end + 1..];
        }
        check_entities(rest);
        assert!(stack.is_empty(), "unclosed tags: {stack:?}");
        assert!(svg.starts_with(r#"<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 "#));
        assert!(svg.ends_with("</svg>"));
    }

    fn check_entities(s: &str) {
        for (i, _) in s.match_indices('&') {
            let tail = &s[i..];
            assert!(
                ["&amp;", "&lt;", "&gt;", "&quot;", "&#39;"]
                    .iter()
                    .any(|e| tail.starts_with(e)),
                "bare & in {s}"
            );
        }
    }

    fn assert_finite_numbers(svg: &str) {
        assert!(!svg.contains("NaN"), "NaN in {svg}");
        assert!(!svg.contains("inf"), "inf in {svg}");
    }

    fn series(label: &str, points: &[(f64, f64)]) -> Series {
        Series {
            label: label.to_string(),
            points: points.to_vec(),
        }
    }

    #[test]
    fn escape_replaces_markup_characters() {
        assert_eq!(
            escape(r#"a<b>&"c"'d'"#),
            "a&lt;b&gt;&amp;&quot;c&quot;&#39;d&#39;"
        );
        assert_eq!(escape("plain µs text"), "plain µs text");
        assert_eq!(escape("bell\u{7}"), "bell");
    }

    #[test]
    fn log_ticks_are_powers_of_ten_in_range() {
        let ticks = log_ticks(16.0, 10_485_760.0);
        assert_eq!(ticks, vec![1e2, 1e3, 1e4, 1e5, 1e6, 1e7]);
        assert_eq!(log_ticks(0.05, 20.0), vec![0.1, 1.0, 10.0]);
        assert!(log_ticks(-1.0, 10.0).is_empty());
        // Many decades are thinned.
        assert!(log_ticks(1e-30, 1e30).len() <= 10);
    }

    #[test]
    fn compact_labels() {
        assert_eq!(pow10_label(3), "1k");
        assert_eq!(pow10_label(6), "1M");
        assert_eq!(pow10_label(4), "10k");
        assert_eq!(pow10_label(-1), "0.1");
        assert_eq!(pow10_label(0), "1");
        assert_eq!(pow10_label(2), "100");
        assert_eq!(pow10_label(-7), "1e-7");
        assert_eq!(compact(1_048_576.0, 1_048_576.0), "1M");
        assert_eq!(compact(1_048_576.0, 10_000.0), "1.05M");
        assert_eq!(compact(2500.0, 500.0), "2.5k");
        assert_eq!(compact(0.30000000000000004, 0.1), "0.3");
        assert_eq!(compact(-0.0, 1.0), "0");
        assert_eq!(compact(-2000.0, 1000.0), "-2k");
    }

    #[test]
    fn nice_linear_ticks() {
        let (ticks, step) = nice_ticks(0.0, 100.0).expect("ticks");
        assert_eq!(step, 20.0);
        assert_eq!(ticks, vec![0.0, 20.0, 40.0, 60.0, 80.0, 100.0]);
        for (lo, hi) in [
            (0.0, 11.0),
            (3.2, 9.7),
            (-5.0, 123.0),
            (0.001, 0.0042),
            (1e6, 1.9e7),
        ] {
            let (ticks, step) = nice_ticks(lo, hi).expect("ticks");
            assert!((5..=8).contains(&ticks.len()), "{lo}..{hi}: {ticks:?}");
            assert!(ticks[0] <= lo && ticks[ticks.len() - 1] >= hi, "{ticks:?}");
            let mantissa = step / pow10(step.log10().floor() as i32);
            assert!(
                [1.0, 2.0, 5.0].iter().any(|m| (mantissa - m).abs() < 1e-9),
                "step {step}"
            );
        }
        assert!(nice_ticks(1.0, 1.0).is_none());
        assert!(nice_ticks(f64::NAN, 1.0).is_none());
    }

    #[test]
    fn line_chart_is_well_formed() {
        let svg = line_chart(
            "RTT <p50> & \"p99\"",
            &Axis::log("payload (bytes)"),
            &Axis::linear("µs"),
            &[
                series("nerve", &[(16.0, 3.0), (1024.0, 4.5), (1_048_576.0, 90.0)]),
                series("zenoh's", &[(16.0, 30.0), (1024.0, 32.0)]),
            ],
        );
        assert_balanced(&svg);
        assert_finite_numbers(&svg);
        assert!(svg.contains("<title>RTT &lt;p50&gt; &amp; &quot;p99&quot;</title>"));
        assert!(svg.contains("zenoh&#39;s"));
        assert!(svg.contains("<polyline points=\""));
        assert!(svg.contains(PALETTE[0]) && svg.contains(PALETTE[1]));
        assert!(svg.contains(">1k<") && svg.contains(">100k<"));
        assert!(svg.contains("font-family=\"sans-serif\""));
        // Deterministic.
        let again = line_chart(
            "RTT <p50> & \"p99\"",
            &Axis::log("payload (bytes)"),
            &Axis::linear("µs"),
            &[
                series("nerve", &[(16.0, 3.0), (1024.0, 4.5), (1_048_576.0, 90.0)]),
                series("zenoh's", &[(16.0, 30.0), (1024.0, 32.0)]),
            ],
        );
        assert_eq!(svg, again);
        // Legend entries in series order.
        let (a, b) = (svg.find(">nerve<"), svg.find(">zenoh&#39;s<"));
        assert!(a.is_some() && b.is_some() && a < b);
    }

    #[test]
    fn empty_input_says_no_data() {
        for svg in [
            line_chart("t", &Axis::linear("x"), &Axis::linear("y"), &[]),
            line_chart(
                "t",
                &Axis::log("x"),
                &Axis::log("y"),
                &[series("a", &[]), series("b", &[(0.0, -1.0)])],
            ),
            bar_chart("t", &[], &Axis::linear("y"), &[]),
            bar_chart(
                "t",
                &["a".to_string()],
                &Axis::linear("y"),
                &[("s".to_string(), vec![None])],
            ),
        ] {
            assert_balanced(&svg);
            assert!(svg.contains(">no data<"), "{svg}");
            assert!(svg.contains("<title>t</title>"));
        }
    }

    #[test]
    fn log_axis_skips_non_positive_values() {
        let svg = line_chart(
            "log",
            &Axis::log("x"),
            &Axis::log("y"),
            &[series(
                "s",
                &[
                    (1.0, 10.0),
                    (0.0, 5.0),
                    (10.0, -3.0),
                    (f64::NAN, 1.0),
                    (100.0, f64::INFINITY),
                    (1000.0, 100.0),
                    (10_000.0, 1000.0),
                ],
            )],
        );
        assert_balanced(&svg);
        assert_finite_numbers(&svg);
        assert_eq!(svg.matches("<circle").count(), 3 + 1); // 3 points + the legend marker
                                                           // The skipped points break the line: only the last two points are joined.
        assert_eq!(svg.matches("<polyline").count(), 1);
    }

    #[test]
    fn single_point_and_equal_values_do_not_divide_by_zero() {
        for (x, y) in [
            (Axis::linear("x"), Axis::linear("y")),
            (Axis::log("x"), Axis::log("y")),
        ] {
            let one = line_chart("one", &x, &y, &[series("s", &[(5.0, 7.0)])]);
            assert_balanced(&one);
            assert_finite_numbers(&one);
            assert!(one.contains("<circle"));
            let flat = line_chart(
                "flat",
                &x,
                &y,
                &[series("s", &[(1.0, 3.0), (2.0, 3.0), (3.0, 3.0)])],
            );
            assert_balanced(&flat);
            assert_finite_numbers(&flat);
        }
        let zeros = line_chart(
            "z",
            &Axis::linear("x"),
            &Axis::linear("y"),
            &[series("s", &[(0.0, 0.0)])],
        );
        assert_finite_numbers(&zeros);
        let huge = line_chart(
            "h",
            &Axis::linear("x"),
            &Axis::linear("y"),
            &[series("s", &[(-f64::MAX, f64::MAX), (f64::MAX, -f64::MAX)])],
        );
        assert_balanced(&huge);
        assert_finite_numbers(&huge);
    }

    #[test]
    fn bar_chart_with_missing_values() {
        let categories: Vec<String> = ["64 B", "1 KiB", "1 MiB"].map(String::from).to_vec();
        let groups = vec![
            ("nerve".to_string(), vec![Some(3.5), Some(4.0), Some(80.0)]),
            (
                "ros2 <rmw>".to_string(),
                vec![Some(40.0), None, Some(f64::NAN)],
            ),
            ("short".to_string(), vec![Some(1.0)]),
        ];
        for y in [Axis::linear("µs"), Axis::log("µs")] {
            let svg = bar_chart("bars", &categories, &y, &groups);
            assert_balanced(&svg);
            assert_finite_numbers(&svg);
            // 5 bars with a value (each with a tooltip) plus 3 legend swatches.
            assert_eq!(svg.matches("<rect").count(), 1 + 5 + 3 + 1);
            assert_eq!(svg.matches(">n/a<").count(), 4);
            assert!(svg.contains("ros2 &lt;rmw&gt;"));
            assert!(svg.contains(">1 KiB<"));
        }
        // A linear axis includes 0.
        let svg = bar_chart("bars", &categories, &Axis::linear("µs"), &groups);
        assert!(svg.contains(">0<"));
    }

    #[test]
    fn many_series_cycle_colours_and_grow_the_chart() {
        let many: Vec<Series> = (0..30)
            .map(|i| {
                series(
                    &format!("series number {i} with a long name"),
                    &[(1.0, i as f64)],
                )
            })
            .collect();
        let svg = line_chart("many", &Axis::linear("x"), &Axis::linear("y"), &many);
        assert_balanced(&svg);
        assert_finite_numbers(&svg);
        assert!(!svg.contains("height=\"420\""));
        assert!(svg.contains("series number 29 with a long name</title>"));
    }

    #[test]
    fn long_category_labels_are_rotated() {
        let categories: Vec<String> = (0..12)
            .map(|i| format!("a rather long category {i}"))
            .collect();
        let groups = vec![("s".to_string(), (0..12).map(|i| Some(i as f64)).collect())];
        let svg = bar_chart("rot", &categories, &Axis::linear("y"), &groups);
        assert_balanced(&svg);
        assert_finite_numbers(&svg);
        assert!(svg.contains("rotate(-35"));
    }
}
