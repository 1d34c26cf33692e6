//! The plotting kit the report's figures share: system fonts, colours, series with
//! optional intervals, a legend in its own column beside the plot, compact tick labels and
//! logarithmic bandwidth axes.

use std::sync::OnceLock;

use anyhow::{anyhow, Result};
use plotters::coord::ranged1d::{AsRangedCoord, ValueFormatter};
use plotters::coord::Shift;
use plotters::prelude::*;

pub(super) const W: u32 = 1000;
pub(super) const H: u32 = 560;
/// Width of the legend column beside each plot.
pub(super) const LEGEND_W: u32 = 260;
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

/// The legend in its own column: a coloured line and the series' name per row.
pub(super) fn legend<DB: DrawingBackend>(area: &Draw<DB>, series: &[Series]) -> Result<()>
where
    DB::ErrorType: 'static,
{
    area.fill(&WHITE).map_err(err)?;
    for (i, s) in series.iter().enumerate() {
        let y = 60 + 26 * i as i32;
        let c = color(s.colour.unwrap_or(i));
        area.draw(&PathElement::new(vec![(8, y), (34, y)], c.stroke_width(3)))
            .map_err(err)?;
        if s.markers {
            area.draw(&Circle::new((21, y), 4, c.filled()))
                .map_err(err)?;
        }
        area.draw(&Text::new(s.name.clone(), (42, y - 8), ("sans-serif", 15)))
            .map_err(err)?;
    }
    Ok(())
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
}

impl Default for YAxis {
    fn default() -> Self {
        YAxis {
            range: None,
            format: compact,
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
    let (width, _) = area.dim_in_pixel();
    let (chart_area, legend_area) = area.split_horizontally(width.saturating_sub(LEGEND_W));
    let Some((y0, y1)) = y_range(series, &y) else {
        return Ok(());
    };
    let mut chart = ChartBuilder::on(&chart_area)
        .caption(title, ("sans-serif", 22))
        .margin(14)
        .x_label_area_size(48)
        .y_label_area_size(74)
        .build_cartesian_2d(x, y0..y1)
        .map_err(err)?;
    let (_, height) = chart_area.dim_in_pixel();
    chart
        .configure_mesh()
        .x_desc(x_label)
        .y_desc(y_label)
        .x_labels(8)
        .y_labels((height / 60).clamp(3, 10) as usize)
        .x_label_formatter(&|v| x_format(*v))
        .y_label_formatter(&|v| (y.format)(*v))
        .light_line_style(WHITE)
        .label_style(("sans-serif", 15))
        .axis_desc_style(("sans-serif", 17))
        .draw()
        .map_err(err)?;
    for (i, s) in series.iter().enumerate() {
        let c = color(s.colour.unwrap_or(i));
        // The line in pieces: it breaks between two edge points in a row.
        let mut start = 0;
        for end in 1..=s.points.len() {
            let gap =
                end < s.points.len() && s.edges.contains(&(end - 1)) && s.edges.contains(&end);
            if end == s.points.len() || gap {
                chart
                    .draw_series(LineSeries::new(
                        s.points[start..end].iter().copied(),
                        c.stroke_width(2),
                    ))
                    .map_err(err)?;
                start = end;
            }
        }
        if s.markers {
            chart
                .draw_series(
                    s.points
                        .iter()
                        .enumerate()
                        .filter(|(k, _)| !s.edges.contains(k))
                        .map(|(_, &p)| Circle::new(p, 4, c.filled())),
                )
                .map_err(err)?;
        }
        for &((x, y), above) in &s.bounds {
            chart
                .draw_series(std::iter::once(Circle::new((x, y), 5, c.stroke_width(2))))
                .map_err(err)?;
            // The arrow, in pixels: a shaft from the marker and a head.
            let dir = if above { -1 } else { 1 };
            let arrow = EmptyElement::at((x, y))
                + PathElement::new(vec![(0, 6 * dir), (0, 22 * dir)], c.stroke_width(2))
                + PathElement::new(
                    vec![(-5, 16 * dir), (0, 22 * dir), (5, 16 * dir)],
                    c.stroke_width(2),
                );
            chart.plotting_area().draw(&arrow).map_err(err)?;
        }
        if let Some(iv) = &s.intervals {
            chart
                .draw_series(s.points.iter().zip(iv).map(|(&(x, y), &(lo, hi))| {
                    ErrorBar::new_vertical(x, lo, y, hi, c.stroke_width(1), 8)
                }))
                .map_err(err)?;
        }
    }
    legend(&legend_area, series)
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
/// runs from just below the lowest step to just above 100 %; its labels (from
/// [`from_log`]) are percentages again. (Plotters' own log axis labels decades only,
/// too few for steps between 3 and 100 %.)
pub(super) fn log_bandwidth(series: &mut [Series]) -> std::ops::Range<f64> {
    for s in series.iter_mut() {
        for p in &mut s.points {
            p.0 = p.0.max(0.01).log10();
        }
    }
    let lo = series
        .iter()
        .flat_map(|s| s.points.iter().map(|p| p.0))
        .fold(2.0, f64::min);
    lo - 0.05..2.04
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
