//! The plotting kit the report's figures share: system fonts, colours, series with
//! optional intervals, a legend in its own column beside the plot, compact tick labels,
//! ticks where the data are (whole process counts, 1-2-5 on log axes) and logarithmic
//! bandwidth axes. What is measured is drawn solid with filled markers and error bars;
//! what is projected dashed with hollow markers and its interval as a band, so that a
//! projection never reads as a measurement. SVGs carry their font; PNGs are drawn at
//! twice the size ([`PNG_SCALE`]), every length scaled with them.

use std::sync::OnceLock;

use anyhow::{anyhow, Result};
use plotters::coord::ranged1d::{AsRangedCoord, ValueFormatter};
use plotters::coord::Shift;
use plotters::prelude::*;

pub(super) const W: u32 = 1100;
pub(super) const H: u32 = 560;
/// How much larger than the SVG (W x H) a PNG is drawn: for print and high-density
/// screens, with text of 30 px and more.
pub(super) const PNG_SCALE: u32 = 2;
/// Width of the legend column beside each plot.
pub(super) const LEGEND_W: u32 = 360;
/// Font sizes as plotters takes them (it writes 0.8 of them as pixels: 18 is 14.5 px, the
/// smallest text of a figure).
const TEXT: i32 = 18;
const AXIS_TEXT: i32 = 20;
const TITLE_TEXT: i32 = 24;
pub(super) const FONT_PATHS: [&str; 4] = [
    "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf",
    "/usr/share/fonts/TTF/DejaVuSans.ttf",
    "/usr/share/fonts/truetype/liberation/LiberationSans-Regular.ttf",
    "/usr/share/fonts/dejavu/DejaVuSans.ttf",
];

/// Register a system font for plotters once; the path used, or why none.
pub(super) fn font() -> &'static Result<String, String> {
    static FONT: OnceLock<Result<String, String>> = OnceLock::new();
    FONT.get_or_init(|| {
        for p in FONT_PATHS {
            if let Ok(bytes) = std::fs::read(p) {
                let bytes: &'static [u8] = Box::leak(bytes.into_boxed_slice());
                if plotters::style::register_font("sans-serif", FontStyle::Normal, bytes).is_ok() {
                    return Ok(p.to_string());
                }
            }
        }
        Err(format!(
            "no font found ({}); install fonts-dejavu-core to get plots",
            FONT_PATHS.join(", ")
        ))
    })
}

pub(super) fn color(i: usize) -> RGBColor {
    const C: [RGBColor; 8] = [
        RGBColor(31, 119, 180),
        RGBColor(255, 127, 14),
        RGBColor(44, 160, 44),
        RGBColor(214, 39, 40),
        RGBColor(148, 103, 189),
        RGBColor(140, 86, 75),
        RGBColor(227, 119, 194),
        RGBColor(127, 127, 127),
    ];
    C[i % C.len()]
}

pub(super) type Draw<'a, DB> = DrawingArea<DB, Shift>;

pub(super) fn err<E: std::fmt::Display>(e: E) -> anyhow::Error {
    anyhow!("plotting: {e}")
}

/// One line of a plot: its name, its points, and (optionally) an interval per point.
#[derive(Default)]
pub(super) struct Series {
    pub name: String,
    pub points: Vec<(f64, f64)>,
    /// `(low, high)` for each point, drawn as error bars.
    pub intervals: Option<Vec<(f64, f64)>>,
    /// Markers at the points (measured data), or a plain line (a model curve).
    pub markers: bool,
    /// Figures known only as bounds (a censored demand): drawn hollow at the bound, off
    /// the line, with an arrow towards where the truth lies (`true`: above it).
    pub bounds: Vec<((f64, f64), bool)>,
    /// Its colour's index, when it must match another series' (a level's measured and
    /// projected demand); else its position.
    pub colour: Option<usize>,
    /// Indices of `points` that [`clip_above`] put on the axis's edge, where the line
    /// leaves or re-enters it: no markers there, and no line between two of them in a
    /// row (the data ran above the axis between them).
    pub edges: Vec<usize>,
    /// A projection, not a measurement: dashed, hollow markers, its intervals a band
    /// (or bars, with `bars`).
    pub projected: bool,
    /// A projection's intervals drawn as bars at its points, not a band: where several
    /// projections share a plot, their bands would blend into one.
    pub bars: bool,
    /// Measured but held out of the fits (compared with the projection there): square
    /// markers, not joined by a line to the fitted sizes.
    pub held_out: bool,
    /// A reference line (a level asked for, a noise floor): labelled at one end in its
    /// colour rather than in the legend.
    pub label_at_end: Option<End>,
}

impl Series {
    pub fn measured(name: impl Into<String>, points: Vec<(f64, f64)>) -> Series {
        Series {
            name: name.into(),
            points,
            intervals: None,
            markers: true,
            colour: None,
            ..Default::default()
        }
    }
}

/// Where a reference line's label goes: at its left or right end, above the line.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) enum End {
    Left,
    Right,
}

/// The legend in its own column: a sample of each series' line and marker (solid and
/// filled: measured; dashed and hollow: projected; a cross: held out) and its name, per row; reference lines
/// labelled at their end are not in it. `k`: the drawing's scale.
pub(super) fn legend<DB: DrawingBackend>(area: &Draw<DB>, series: &[Series], k: i32) -> Result<()>
where
    DB::ErrorType: 'static,
{
    area.fill(&WHITE).map_err(err)?;
    for (row, (i, s)) in series
        .iter()
        .enumerate()
        .filter(|(_, s)| s.label_at_end.is_none())
        .enumerate()
    {
        let y = (60 + 30 * row as i32) * k;
        let c = color(s.colour.unwrap_or(i));
        if s.held_out {
            // Its marker alone: a held-out size is not joined to the others.
            area.draw(&Cross::new(
                (25 * k, y),
                6 * k,
                c.stroke_width(3 * k as u32),
            ))
            .map_err(err)?;
        } else if s.projected {
            for x0 in [8, 24] {
                area.draw(&PathElement::new(
                    vec![(x0 * k, y), ((x0 + 10) * k, y)],
                    c.stroke_width(2 * k as u32),
                ))
                .map_err(err)?;
            }
        } else {
            area.draw(&PathElement::new(
                vec![(8 * k, y), (42 * k, y)],
                c.stroke_width(3 * k as u32),
            ))
            .map_err(err)?;
        }
        if s.markers && !s.held_out {
            let style = if s.projected {
                ShapeStyle::from(&WHITE).filled()
            } else {
                c.filled()
            };
            area.draw(&Circle::new((25 * k, y), 4 * k, style))
                .map_err(err)?;
            if s.projected {
                area.draw(&Circle::new(
                    (25 * k, y),
                    4 * k,
                    c.stroke_width(2 * k as u32),
                ))
                .map_err(err)?;
            }
        }
        area.draw(&Text::new(
            s.name.clone(),
            (50 * k, y - 9 * k),
            ("sans-serif", TEXT * k),
        ))
        .map_err(err)?;
    }
    Ok(())
}

/// An f64 axis with its ticks where they are given (plotters places its own ticks at
/// round values of the axis's units, which on a log axis are 0.631 or 2.5 processes).
#[derive(Clone)]
pub(super) struct Ticked {
    range: std::ops::Range<f64>,
    ticks: Vec<f64>,
}

impl Ticked {
    /// Where the axis starts and ends.
    pub fn ends(&self) -> (f64, f64) {
        (self.range.start, self.range.end)
    }

    /// The axis over `range` with ticks at `ticks` (those outside the range left out).
    pub fn new(range: std::ops::Range<f64>, ticks: Vec<f64>) -> Ticked {
        let ticks = ticks
            .into_iter()
            .filter(|t| *t >= range.start && *t <= range.end)
            .collect();
        Ticked { range, ticks }
    }
}

impl plotters::coord::ranged1d::Ranged for Ticked {
    type FormatOption = plotters::coord::ranged1d::DefaultFormatting;
    type ValueType = f64;

    fn map(&self, v: &f64, limit: (i32, i32)) -> i32 {
        plotters::coord::types::RangedCoordf64::from(self.range.clone()).map(v, limit)
    }

    fn key_points<Hint: plotters::coord::ranged1d::KeyPointHint>(&self, _hint: Hint) -> Vec<f64> {
        self.ticks.clone()
    }

    fn range(&self) -> std::ops::Range<f64> {
        self.range.clone()
    }
}

/// The drawing's scale: 1 for the SVG, [`PNG_SCALE`] for the PNG (its width against W).
pub(super) fn scale_of<DB: DrawingBackend>(area: &Draw<DB>) -> i32 {
    ((area.dim_in_pixel().0 as f64 / W as f64).round() as i32).max(1)
}

/// Ticks for a process axis in log10 units: at the sizes given (whole numbers), labelled
/// as such ([`procs_label`]).
pub(super) fn procs_ticks(sizes: impl IntoIterator<Item = u32>) -> Vec<f64> {
    let mut s: Vec<u32> = sizes.into_iter().filter(|&p| p > 0).collect();
    s.sort_unstable();
    s.dedup();
    s.into_iter().map(|p| (p as f64).log10()).collect()
}

/// A process axis's label at log10 value `v`: the whole number of processes.
pub(super) fn procs_label(v: f64) -> String {
    format!("{:.0}", 10f64.powf(v))
}

/// Ticks for a log10 axis from `lo` to `hi` (log10 units): 1, 2 and 5 times each power of
/// ten within, or finer round values (1.5, 3, 7, ...) on a narrow axis, so that at least
/// three fall inside; on an axis narrower than those (strong-scaling times from 0.30 to
/// 0.33 s had no tick, so no label), round values as a linear axis would have them.
pub(super) fn log_ticks(lo: f64, hi: f64) -> Vec<f64> {
    const SETS: [&[f64]; 3] = [
        &[1.0, 2.0, 5.0],
        &[1.0, 2.0, 3.0, 5.0, 7.0],
        &[1.0, 1.2, 1.5, 2.0, 2.5, 3.0, 4.0, 5.0, 6.0, 8.0],
    ];
    let mut out = Vec::new();
    for set in SETS {
        out = (lo.floor() as i32 - 1..=hi.ceil() as i32 + 1)
            .flat_map(|e| set.iter().map(move |m| (m * 10f64.powi(e)).log10()))
            .filter(|v| *v >= lo && *v <= hi)
            .collect();
        if out.len() >= 3 {
            return out;
        }
    }
    // Linear steps no finer than the labels' digits ([`compact`]: one decimal from 1 to
    // 100, three below 1), so that no two ticks read alike.
    let (a, b) = (10f64.powf(lo), 10f64.powf(hi));
    let digit = if a >= 100.0 {
        1.0
    } else if a >= 1.0 {
        0.1
    } else if a >= 0.01 {
        0.001
    } else {
        return out;
    };
    for n in (2..=4).rev() {
        let fine = linear_ticks(a, b, n);
        let coarse_enough = fine.windows(2).all(|w| w[1] - w[0] >= digit - 1e-12);
        if fine.len() > out.len() && coarse_enough && fine.iter().all(|v| *v > 0.0) {
            return fine
                .into_iter()
                .map(f64::log10)
                .filter(|v| *v >= lo && *v <= hi)
                .collect();
        }
    }
    out
}

/// Ticks for a linear axis from `lo` to `hi`: about `n` at a step of 1, 2 or 5 times a
/// power of ten.
pub(super) fn linear_ticks(lo: f64, hi: f64, n: usize) -> Vec<f64> {
    let span = (hi - lo).max(1e-12);
    let raw = span / n.max(1) as f64;
    let mag = 10f64.powf(raw.log10().floor());
    let step = [1.0, 2.0, 5.0, 10.0]
        .iter()
        .map(|m| m * mag)
        .find(|s| *s >= raw)
        .unwrap_or(10.0 * mag);
    let first = (lo / step).ceil() as i64;
    let last = (hi / step).floor() as i64;
    (first..=last).map(|i| i as f64 * step).collect()
}

/// The markers around the font an SVG file carries ([`embed_font`]); the page that
/// inlines the figures leaves it out ([`without_font`]).
const FONT_START: &str = "<!--throttle: embedded font-->";
const FONT_END: &str = "<!--throttle: end of the embedded font-->";

/// Put the font the figure was drawn with into the SVG file at `path` (an `@font-face`
/// rule with the font's bytes), so that the file shows the same text wherever it goes (a
/// paper, another machine); plotters' SVGs name `sans-serif`, which each viewer resolves
/// its own way. About 1 MB with DejaVu Sans.
pub(super) fn embed_font(path: &std::path::Path) -> Result<()> {
    let Ok(font_path) = font() else {
        return Ok(());
    };
    let bytes = std::fs::read(font_path).map_err(|e| anyhow!("{font_path}: {e}"))?;
    let svg = std::fs::read_to_string(path).map_err(|e| anyhow!("{}: {e}", path.display()))?;
    let Some(open_end) = svg
        .find("<svg")
        .and_then(|i| svg[i..].find('>').map(|j| i + j + 1))
    else {
        return Ok(());
    };
    let style = format!(
        "{FONT_START}<style>@font-face{{font-family:\"throttle-embedded\";src:url(data:font/ttf;base64,{})}} text{{font-family:\"throttle-embedded\",sans-serif}}</style>{FONT_END}",
        base64(&bytes)
    );
    let out = format!("{}{style}{}", &svg[..open_end], &svg[open_end..]);
    std::fs::write(path, out).map_err(|e| anyhow!("{}: {e}", path.display()))
}

/// An SVG without the font [`embed_font`] put in (for a page that inlines several).
pub(super) fn without_font(svg: &str) -> String {
    match (svg.find(FONT_START), svg.find(FONT_END)) {
        (Some(a), Some(b)) if a < b => format!("{}{}", &svg[..a], &svg[b + FONT_END.len()..]),
        _ => svg.to_string(),
    }
}

/// Standard base64 (RFC 4648, with padding).
fn base64(bytes: &[u8]) -> String {
    const A: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for chunk in bytes.chunks(3) {
        let b = [
            chunk[0],
            *chunk.get(1).unwrap_or(&0),
            *chunk.get(2).unwrap_or(&0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(A[(n >> (18 - 6 * i) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

/// A plot of `series` on `area`, its legend beside it; `x` is the x axis's range (linear
/// or logarithmic), the y axis fits the data.
pub(super) fn plot<DB, X>(
    area: &Draw<DB>,
    title: &str,
    x_label: &str,
    y_label: &str,
    x: X,
    x_format: fn(f64) -> String,
    series: &[Series],
) -> Result<()>
where
    DB: DrawingBackend,
    DB::ErrorType: 'static,
    X: AsRangedCoord<Value = f64>,
    X::CoordDescType: ValueFormatter<f64>,
{
    plot_with(
        area,
        title,
        (x_label, y_label),
        x,
        x_format,
        YAxis::default(),
        series,
    )
}

/// How a plot's y axis runs.
#[derive(Clone, Copy)]
pub(super) struct YAxis {
    /// Its lowest and highest value; `None`: the data's, padded. Series must lie within
    /// it (see [`clip_above`]): plotters draws outside the plotting area otherwise.
    pub range: Option<(f64, f64)>,
    /// Its tick labels ([`compact`], or [`from_log_compact`] for a log10 axis).
    pub format: fn(f64) -> String,
    /// A log10 axis: ticks at 1, 2 and 5 times the powers of ten ([`log_ticks`]);
    /// else at round steps ([`linear_ticks`]).
    pub log: bool,
}

impl Default for YAxis {
    fn default() -> Self {
        YAxis {
            range: None,
            format: compact,
            log: false,
        }
    }
}

/// [`plot`] with its y axis given.
pub(super) fn plot_with<DB, X>(
    area: &Draw<DB>,
    title: &str,
    (x_label, y_label): (&str, &str),
    x: X,
    x_format: fn(f64) -> String,
    y: YAxis,
    series: &[Series],
) -> Result<()>
where
    DB: DrawingBackend,
    DB::ErrorType: 'static,
    X: AsRangedCoord<Value = f64>,
    X::CoordDescType: ValueFormatter<f64>,
{
    area.fill(&WHITE).map_err(err)?;
    let k = scale_of(area);
    let ku = k as u32;
    let (width, _) = area.dim_in_pixel();
    let (chart_area, legend_area) = area.split_horizontally(width.saturating_sub(LEGEND_W * ku));
    let Some((y0, y1)) = y_range(series, &y) else {
        return Ok(());
    };
    let (_, height) = chart_area.dim_in_pixel();
    let n = (height / (60 * ku)).clamp(3, 10) as usize;
    let y_ticks = if y.log {
        log_ticks(y0, y1)
    } else {
        linear_ticks(y0, y1, n)
    };
    // The title in the chart's width: a long one in a smaller font (not under the
    // labels' size), never cut at the figure's edge.
    let room = chart_area.dim_in_pixel().0.saturating_sub(28 * ku);
    let mut title_size = TITLE_TEXT * k;
    while title_size > TEXT * k {
        let font = TextStyle::from(("sans-serif", title_size).into_font());
        match chart_area.estimate_text_size(title, &font) {
            Ok((w, _)) if w > room => title_size -= k,
            _ => break,
        }
    }
    let mut chart = ChartBuilder::on(&chart_area)
        .caption(title, ("sans-serif", title_size))
        .margin(14 * k)
        .x_label_area_size(52 * k)
        .y_label_area_size(80 * k)
        .build_cartesian_2d(x, Ticked::new(y0..y1, y_ticks))
        .map_err(err)?;
    chart
        .configure_mesh()
        .x_desc(x_label)
        .y_desc(y_label)
        .x_labels(8)
        .x_label_formatter(&|v| x_format(*v))
        .y_label_formatter(&|v| (y.format)(*v))
        .light_line_style(WHITE)
        .label_style(("sans-serif", TEXT * k))
        .axis_desc_style(("sans-serif", AXIS_TEXT * k))
        .draw()
        .map_err(err)?;
    // Bands first, under every line and marker.
    draw_bands(&mut chart, series)?;
    for (i, s) in series.iter().enumerate() {
        draw_series(&mut chart, s, color(s.colour.unwrap_or(i)), k)?;
    }
    legend(&legend_area, series, k)
}

/// The chart [`plot_with`] draws on: any x axis, a [`Ticked`] y axis.
type Chart<'a, DB, XC> = ChartContext<'a, DB, Cartesian2d<XC, Ticked>>;

/// The bands of the projected series with intervals, under everything else.
fn draw_bands<DB, XC>(chart: &mut Chart<'_, DB, XC>, series: &[Series]) -> Result<()>
where
    DB: DrawingBackend,
    DB::ErrorType: 'static,
    XC: plotters::coord::ranged1d::Ranged<ValueType = f64>,
{
    for (i, s) in series.iter().enumerate() {
        if let (true, false, Some(iv)) = (s.projected, s.bars, &s.intervals) {
            let c = color(s.colour.unwrap_or(i));
            let mut band: Vec<(f64, f64)> = s
                .points
                .iter()
                .zip(iv)
                .map(|(&(x, _), &(_, hi))| (x, hi))
                .collect();
            band.extend(
                s.points
                    .iter()
                    .zip(iv)
                    .rev()
                    .map(|(&(x, _), &(lo, _))| (x, lo)),
            );
            chart
                .draw_series(std::iter::once(Polygon::new(band, c.mix(0.15).filled())))
                .map_err(err)?;
        }
    }
    Ok(())
}

/// A series' markers: filled (measured) or hollow (projected), none at its edge points.
fn draw_markers<DB, XC>(
    chart: &mut Chart<'_, DB, XC>,
    s: &Series,
    c: RGBColor,
    k: i32,
) -> Result<()>
where
    DB: DrawingBackend,
    DB::ErrorType: 'static,
    XC: plotters::coord::ranged1d::Ranged<ValueType = f64>,
{
    let ku = k as u32;
    let shown = |(k, _): &(usize, &(f64, f64))| !s.edges.contains(k);
    if s.markers && s.projected {
        // Hollow: a white disc under the outline, so a band or line does not show
        // through as a fill.
        chart
            .draw_series(
                s.points
                    .iter()
                    .enumerate()
                    .filter(shown)
                    .flat_map(|(_, &p)| {
                        [
                            Circle::new(p, 4 * k, ShapeStyle::from(&WHITE).filled()),
                            Circle::new(p, 4 * k, c.stroke_width(2 * ku)),
                        ]
                    }),
            )
            .map_err(err)?;
    } else if s.markers && s.held_out {
        chart
            .draw_series(
                s.points
                    .iter()
                    .enumerate()
                    .filter(shown)
                    .map(|(_, &p)| Cross::new(p, 6 * k, c.stroke_width(3 * ku))),
            )
            .map_err(err)?;
    } else if s.markers {
        chart
            .draw_series(
                s.points
                    .iter()
                    .enumerate()
                    .filter(shown)
                    .map(|(_, &p)| Circle::new(p, 4 * k, c.filled())),
            )
            .map_err(err)?;
    }
    Ok(())
}

/// One series: its line (solid, or dashed when projected; in pieces where it left the
/// axis), its label at an end (a reference line), its markers (filled, or hollow when
/// projected), the bounds of censored figures with their arrows, and the error bars of a
/// measured series. `k`: the drawing's scale.
fn draw_series<DB, XC>(chart: &mut Chart<'_, DB, XC>, s: &Series, c: RGBColor, k: i32) -> Result<()>
where
    DB: DrawingBackend,
    DB::ErrorType: 'static,
    XC: plotters::coord::ranged1d::Ranged<ValueType = f64>,
{
    let ku = k as u32;
    // The line in pieces: it breaks between two edge points in a row.
    let mut start = 0;
    let joined = if s.held_out { 0 } else { s.points.len() };
    for end in 1..=joined {
        let gap = end < s.points.len() && s.edges.contains(&(end - 1)) && s.edges.contains(&end);
        if end == s.points.len() || gap {
            let piece = s.points[start..end].iter().copied();
            if s.projected {
                chart
                    .draw_series(DashedLineSeries::new(
                        piece,
                        8 * k,
                        5 * k,
                        c.stroke_width(2 * ku),
                    ))
                    .map_err(err)?;
            } else {
                chart
                    .draw_series(LineSeries::new(piece, c.stroke_width(2 * ku)))
                    .map_err(err)?;
            }
            start = end;
        }
    }
    if let Some(end) = s.label_at_end {
        use plotters::style::text_anchor::{HPos, Pos, VPos};
        let (at, h) = match end {
            End::Left => (s.points.first(), HPos::Left),
            End::Right => (s.points.last(), HPos::Right),
        };
        if let Some(&(xe, ye)) = at {
            let style = ("sans-serif", TEXT * k)
                .into_font()
                .color(&c)
                .pos(Pos::new(h, VPos::Bottom));
            chart
                .draw_series(std::iter::once(Text::new(s.name.clone(), (xe, ye), style)))
                .map_err(err)?;
        }
    }
    draw_markers(chart, s, c, k)?;
    for &((x, y), above) in &s.bounds {
        chart
            .draw_series(std::iter::once(Circle::new(
                (x, y),
                5 * k,
                c.stroke_width(2 * ku),
            )))
            .map_err(err)?;
        // The arrow, in pixels: a shaft from the marker and a head.
        let dir = if above { -k } else { k };
        let arrow = EmptyElement::at((x, y))
            + PathElement::new(vec![(0, 6 * dir), (0, 22 * dir)], c.stroke_width(2 * ku))
            + PathElement::new(
                vec![(-5 * k, 16 * dir), (0, 22 * dir), (5 * k, 16 * dir)],
                c.stroke_width(2 * ku),
            );
        chart.plotting_area().draw(&arrow).map_err(err)?;
    }
    // Error bars: a measured series', or a projection's drawn with bars, not a band.
    if let (false, Some(iv)) = (s.projected && !s.bars, &s.intervals) {
        chart
            .draw_series(s.points.iter().zip(iv).map(|(&(x, y), &(lo, hi))| {
                ErrorBar::new_vertical(x, lo, y, hi, c.stroke_width(ku), 8 * ku)
            }))
            .map_err(err)?;
    }
    Ok(())
}

/// The y axis's range: the one given, or every value drawn (points, intervals, bounds)
/// with 8% of room; `None` when nothing is drawn.
fn y_range(series: &[Series], y: &YAxis) -> Option<(f64, f64)> {
    let ys = series.iter().flat_map(|s| {
        s.points
            .iter()
            .map(|p| p.1)
            .chain(s.intervals.iter().flatten().flat_map(|&(lo, hi)| [lo, hi]))
            .chain(s.bounds.iter().map(|b| b.0 .1))
    });
    let (y0, y1) = ys.fold((f64::MAX, f64::MIN), |(a, b), v| (a.min(v), b.max(v)));
    if y0 > y1 {
        return None;
    }
    let pad = ((y1 - y0) * 0.08).max(1e-9);
    Some(y.range.unwrap_or((y0 - pad, y1 + pad)))
}

/// A tick label: as few digits as the value needs.
pub(super) fn compact(v: f64) -> String {
    let a = v.abs();
    // A tick at zero computed in floating point comes as 1e-18 or so.
    if a < 1e-15 {
        "0".into()
    } else if a >= 100.0 || (a >= 1.0 && (v - v.round()).abs() < 1e-9) {
        format!("{v:.0}")
    } else if a >= 1.0 {
        format!("{v:.1}")
    } else if a >= 0.01 {
        format!("{v:.3}").trim_end_matches('0').to_string()
    } else {
        format!("{v:.1e}")
    }
}

/// Clip `series` at `top`: a point above it goes, a line crossing it stops at it (an
/// edge point, in `edges`), and so do bounds and intervals reaching above it. The
/// number of points and bounds removed.
pub(super) fn clip_above(series: &mut [Series], top: f64) -> usize {
    let mut removed = 0;
    for s in series.iter_mut() {
        let before = s.bounds.len();
        s.bounds.retain(|b| b.0 .1 <= top);
        removed += before - s.bounds.len();
        if let Some(iv) = &mut s.intervals {
            for i in iv.iter_mut() {
                i.1 = i.1.min(top);
                i.0 = i.0.min(top);
            }
        }
        if s.points.iter().all(|p| p.1 <= top) {
            continue;
        }
        // A series with intervals keeps one per point: its points above are held at the
        // edge instead of removed.
        if s.intervals.is_some() {
            for (k, p) in s.points.iter_mut().enumerate() {
                if p.1 > top {
                    p.1 = top;
                    s.edges.push(k);
                    removed += 1;
                }
            }
            continue;
        }
        let mut out = Vec::with_capacity(s.points.len());
        let mut edges = Vec::new();
        for (i, &p) in s.points.iter().enumerate() {
            if let Some(q) = i.checked_sub(1).map(|k| s.points[k]) {
                // A crossing between q and p: the point on the edge.
                if (q.1 > top) != (p.1 > top) {
                    let t = (top - q.1) / (p.1 - q.1);
                    edges.push(out.len());
                    out.push((q.0 + t * (p.0 - q.0), top));
                }
            }
            if p.1 <= top {
                out.push(p);
            } else {
                removed += 1;
            }
        }
        s.points = out;
        s.edges = edges;
    }
    removed
}

/// A label on a log10 axis of any magnitude: the value it stands for, as [`compact`]
/// writes it.
pub(super) fn from_log_compact(v: f64) -> String {
    compact(10f64.powf(v))
}

/// A log-scaled bandwidth axis: the series' x values become log10(bw %), and the axis
/// runs from just below the lowest step to just above 100 %, with ticks at 1, 2, 3, 5 and
/// 7 times the powers of ten (labels from [`from_log`]: percentages again).
pub(super) fn log_bandwidth(series: &mut [Series]) -> Ticked {
    for s in series.iter_mut() {
        for p in &mut s.points {
            p.0 = p.0.max(0.01).log10();
        }
    }
    let lo = series
        .iter()
        .flat_map(|s| s.points.iter().map(|p| p.0))
        .fold(2.0, f64::min);
    let ticks = (-2..=2)
        .flat_map(|e| [1.0, 2.0, 3.0, 5.0, 7.0].map(|m| (m * 10f64.powi(e)).log10()))
        .collect();
    Ticked::new(lo - 0.05..2.04, ticks)
}

/// A label on a log10 axis: the value it stands for, with two significant digits.
pub(super) fn from_log(v: f64) -> String {
    let x = 10f64.powf(v);
    let digits = (2 - x.log10().floor() as i32 - 1).max(0) as usize;
    let r = format!("{x:.digits$}");
    r
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Issue 44: a title wider than its chart is drawn in a smaller font (it was cut at
    /// the figure's edge); a short one keeps the title's size.
    #[test]
    fn a_title_wider_than_the_chart_is_drawn_smaller() {
        if font().is_err() {
            return; // No font: no plots (the report says so); nothing to measure.
        }
        let draw = |title: &str| {
            let mut svg = String::new();
            {
                let area = SVGBackend::with_string(&mut svg, (W, H)).into_drawing_area();
                let s = Series::measured("m", vec![(1.0, 1.0), (2.0, 2.0)]);
                plot(&area, title, "x", "y", 0.0..3.0, compact, &[s]).unwrap();
                area.present().unwrap();
            }
            let at = svg
                .find(title)
                .unwrap_or_else(|| panic!("no title in {svg}"));
            let tag = &svg[svg[..at].rfind("<text").unwrap()..at];
            let size: f64 = tag
                .split("font-size=\"")
                .nth(1)
                .and_then(|r| r.split('"').next())
                .and_then(|v| v.parse().ok())
                .unwrap_or_else(|| panic!("no font size in {tag}"));
            size
        };
        // The SVG states sizes in its own unit: compare the two titles' sizes.
        let short = draw("short");
        let long =
            "demand against the size; projection: traffic model, NOT TRUSTED; bars: 90% intervals";
        let size = draw(long);
        let floor = short * TEXT as f64 / TITLE_TEXT as f64;
        assert!(
            size < short && size >= floor - 0.01,
            "{size} against {short}"
        );
    }

    #[test]
    fn base64_is_rfc_4648() {
        assert_eq!(base64(b""), "");
        assert_eq!(base64(b"f"), "Zg==");
        assert_eq!(base64(b"fo"), "Zm8=");
        assert_eq!(base64(b"foo"), "Zm9v");
        assert_eq!(base64(b"foobar"), "Zm9vYmFy");
    }

    #[test]
    fn ticks_fall_on_round_values_and_the_sizes() {
        let t: Vec<String> = log_ticks(-0.5, 0.8)
            .iter()
            .map(|&v| from_log_compact(v))
            .collect();
        assert_eq!(t, ["0.5", "1", "2", "5"]);
        // A narrow axis (0.30-0.33 s) still has labels (it had none).
        let t: Vec<String> = log_ticks(0.30f64.log10(), 0.33f64.log10())
            .iter()
            .map(|&v| from_log_compact(v))
            .collect();
        assert!(t.len() >= 3, "{t:?}");
        // ... whose labels never read alike (1.00-1.05 s made "1", "1.0", "1.0").
        for (lo, hi) in [(0.30, 0.33), (1.0, 1.05), (1.0, 1.3), (150.0, 156.0)] {
            let t: Vec<String> = log_ticks(f64::log10(lo), f64::log10(hi))
                .iter()
                .map(|&v| from_log_compact(v))
                .collect();
            let mut d = t.clone();
            d.dedup();
            assert_eq!(d, t, "{lo}-{hi}");
        }
        assert_eq!(linear_ticks(0.0, 97.0, 5), [0.0, 20.0, 40.0, 60.0, 80.0]);
        let p: Vec<String> = procs_ticks([8, 2, 4, 2, 16])
            .iter()
            .map(|&v| procs_label(v))
            .collect();
        assert_eq!(p, ["2", "4", "8", "16"]);
    }

    #[test]
    fn a_clipped_line_stops_at_the_edge_and_breaks_where_it_ran_above() {
        let pts = vec![
            (0.0, 10.0),
            (1.0, 40.0),
            (2.0, 50.0),
            (3.0, 20.0),
            (4.0, 35.0),
            (5.0, 5.0),
        ];
        let mut s = vec![Series::measured("x", pts)];
        s[0].bounds = vec![((1.0, 45.0), true), ((2.0, 25.0), false)];
        assert_eq!(clip_above(&mut s, 30.0), 4);
        let got: Vec<(f64, f64)> = s[0]
            .points
            .iter()
            .map(|&(x, y)| (format!("{x:.3}").parse::<f64>().unwrap(), y))
            .collect();
        assert_eq!(
            got,
            vec![
                (0.0, 10.0),
                (0.667, 30.0),
                (2.667, 30.0),
                (3.0, 20.0),
                (3.667, 30.0),
                (4.167, 30.0),
                (5.0, 5.0)
            ]
        );
        assert_eq!(s[0].edges, vec![1, 2, 4, 5]);
        assert_eq!(s[0].bounds, vec![((2.0, 25.0), false)]);
        // Under the edge nothing changes.
        let mut low = vec![Series::measured("y", vec![(0.0, 1.0), (1.0, 2.0)])];
        assert_eq!(clip_above(&mut low, 30.0), 0);
        assert!(low[0].edges.is_empty() && low[0].points.len() == 2);
    }
}
