//! `analyze --report DIR`: plots as SVG and PNG, and a self-contained `index.html`.
//!
//! Four plots: completion time vs bandwidth per size (medians with their confidence
//! interval as error bars); CTI vs bandwidth per size; the strong-scaling fit with a panel
//! of its residuals; predicted vs measured demand. Bandwidth axes are logarithmic (the
//! steps are dense at low bandwidth, where the curves bend). Legends sit in their own
//! column beside the plot, so they never cover data. The HTML embeds the SVGs inline and
//! gives the tables as HTML tables, so the one file can be mailed or opened anywhere.
//! Fonts come from the system (DejaVu or Liberation, loaded at run time); without one, no
//! plots are drawn and the report says so.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use anyhow::{anyhow, Result};
use plotters::coord::ranged1d::{AsRangedCoord, ValueFormatter};
use plotters::coord::Shift;
use plotters::prelude::*;

use crate::analysis::demand::Censored;
use crate::analysis::render::flag;
use crate::analysis::{Analysis, MedianPoint};

const W: u32 = 1000;
const H: u32 = 560;
/// Width of the legend column beside each plot.
const LEGEND_W: u32 = 260;
const FONT_PATHS: [&str; 4] = [
    "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf",
    "/usr/share/fonts/TTF/DejaVuSans.ttf",
    "/usr/share/fonts/truetype/liberation/LiberationSans-Regular.ttf",
    "/usr/share/fonts/dejavu/DejaVuSans.ttf",
];

/// Register a system font for plotters once; the path used, or why none.
fn font() -> &'static Result<String, String> {
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

fn color(i: usize) -> RGBColor {
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

type Draw<'a, DB> = DrawingArea<DB, Shift>;

fn err<E: std::fmt::Display>(e: E) -> anyhow::Error {
    anyhow!("plotting: {e}")
}

/// One line of a plot: its name, its points, and (optionally) an interval per point.
struct Series {
    name: String,
    points: Vec<(f64, f64)>,
    /// `(low, high)` for each point, drawn as error bars.
    intervals: Option<Vec<(f64, f64)>>,
    /// Markers at the points (measured data), or a plain line (a model curve).
    markers: bool,
}

impl Series {
    fn measured(name: impl Into<String>, points: Vec<(f64, f64)>) -> Series {
        Series {
            name: name.into(),
            points,
            intervals: None,
            markers: true,
        }
    }
}

/// The legend in its own column: a coloured line and the series' name per row.
fn legend<DB: DrawingBackend>(area: &Draw<DB>, series: &[Series]) -> Result<()>
where
    DB::ErrorType: 'static,
{
    area.fill(&WHITE).map_err(err)?;
    for (i, s) in series.iter().enumerate() {
        let y = 60 + 26 * i as i32;
        let c = color(i);
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
/// or logarithmic).
fn plot<DB, X>(
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
    area.fill(&WHITE).map_err(err)?;
    let (width, _) = area.dim_in_pixel();
    let (chart_area, legend_area) = area.split_horizontally(width.saturating_sub(LEGEND_W));
    let ys = series.iter().flat_map(|s| {
        s.points
            .iter()
            .map(|p| p.1)
            .chain(s.intervals.iter().flatten().flat_map(|&(lo, hi)| [lo, hi]))
    });
    let (y0, y1) = ys.fold((f64::MAX, f64::MIN), |(a, b), v| (a.min(v), b.max(v)));
    if y0 > y1 {
        return Ok(());
    }
    let pad = ((y1 - y0) * 0.08).max(1e-9);
    let mut chart = ChartBuilder::on(&chart_area)
        .caption(title, ("sans-serif", 22))
        .margin(14)
        .x_label_area_size(48)
        .y_label_area_size(74)
        .build_cartesian_2d(x, (y0 - pad)..(y1 + pad))
        .map_err(err)?;
    let (_, height) = chart_area.dim_in_pixel();
    chart
        .configure_mesh()
        .x_desc(x_label)
        .y_desc(y_label)
        .x_labels(8)
        .y_labels((height / 60).clamp(3, 10) as usize)
        .x_label_formatter(&|v| x_format(*v))
        .y_label_formatter(&|v| compact(*v))
        .light_line_style(WHITE)
        .label_style(("sans-serif", 15))
        .axis_desc_style(("sans-serif", 17))
        .draw()
        .map_err(err)?;
    for (i, s) in series.iter().enumerate() {
        let c = color(i);
        chart
            .draw_series(LineSeries::new(s.points.iter().copied(), c.stroke_width(2)))
            .map_err(err)?;
        if s.markers {
            chart
                .draw_series(s.points.iter().map(|&p| Circle::new(p, 4, c.filled())))
                .map_err(err)?;
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

/// A tick label: as few digits as the value needs.
fn compact(v: f64) -> String {
    let a = v.abs();
    if a == 0.0 {
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

/// A log-scaled bandwidth axis: the series' x values become log10(bw %), and the axis
/// runs from just below the lowest step to just above 100 %; its labels (from
/// [`from_log`]) are percentages again. (Plotters' own log axis labels decades only,
/// too few for steps between 3 and 100 %.)
fn log_bandwidth(series: &mut [Series]) -> std::ops::Range<f64> {
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
fn from_log(v: f64) -> String {
    let x = 10f64.powf(v);
    let digits = (2 - x.log10().floor() as i32 - 1).max(0) as usize;
    let r = format!("{x:.digits$}");
    r
}

fn size_label(a: &Analysis, s: u32) -> String {
    format!(
        "{s} procs{}",
        if a.held_out.contains(&s) {
            " (held out)"
        } else {
            ""
        }
    )
}

/// The interval drawn around a point.
type IntervalOf = fn(&MedianPoint) -> (f64, f64);

fn per_size(
    a: &Analysis,
    y: impl Fn(&MedianPoint) -> Option<f64>,
    interval: Option<IntervalOf>,
) -> Vec<Series> {
    let mut sizes: Vec<u32> = a.points.iter().map(|p| p.procs).collect();
    sizes.sort_unstable();
    sizes.dedup();
    sizes
        .into_iter()
        .map(|s| {
            let mut pts: Vec<&MedianPoint> = a
                .points
                .iter()
                .filter(|p| p.procs == s && y(p).is_some())
                .collect();
            pts.sort_by(|x, y| x.bw_pct.total_cmp(&y.bw_pct));
            Series {
                name: size_label(a, s),
                points: pts
                    .iter()
                    .map(|p| (p.bw_pct, y(p).unwrap_or(0.0)))
                    .collect(),
                intervals: interval.map(|f| pts.iter().map(|p| f(p)).collect()),
                markers: true,
            }
        })
        .collect()
}

fn scaling<DB: DrawingBackend>(area: &Draw<DB>, a: &Analysis) -> Result<()>
where
    DB::ErrorType: 'static,
{
    let mut at_full: Vec<&MedianPoint> = a.points.iter().filter(|p| p.bw_pct == 100.0).collect();
    at_full.sort_by_key(|p| p.procs);
    let pts: Vec<(f64, f64)> = at_full.iter().map(|p| (p.procs as f64, p.median)).collect();
    let pmax = pts.iter().map(|p| p.0).fold(1.0, f64::max);
    let x = 0.8..pmax * 1.1 + 0.5;
    let mut measured = Series::measured("median of runs", pts.clone());
    measured.intervals = Some(at_full.iter().map(|p| (p.ci_low, p.ci_high)).collect());
    let Some(r) = &a.regression else {
        return plot(
            area,
            "strong scaling at 100% (no fit: too few sizes)",
            "processes",
            "completion time (s)",
            x,
            compact,
            &[measured],
        );
    };
    let (top, bottom) = area.split_vertically(H * 2 / 3);
    let model = |p: f64| r.c0 + r.c1 / p + r.c2 / p.sqrt();
    let curve: Vec<(f64, f64)> = (0..=100)
        .map(|i| 1.0 + (pmax - 1.0) * i as f64 / 100.0)
        .map(|p| (p, model(p)))
        .collect();
    plot(
        &top,
        &format!(
            "strong scaling at 100%: T(p) = {:.3} + {:.3}/p + {:.3}/sqrt(p), R^2 {:.2}",
            r.c0, r.c1, r.c2, r.r2
        ),
        "processes",
        "completion time (s)",
        x.clone(),
        compact,
        &[
            Series {
                name: "model".into(),
                points: curve,
                intervals: None,
                markers: false,
            },
            measured,
        ],
    )?;
    let resid: Vec<(f64, f64)> = pts.iter().map(|&(p, t)| (p, t - model(p))).collect();
    plot(
        &bottom,
        "residuals (measured - model)",
        "processes",
        "seconds",
        x,
        compact,
        &[Series::measured("residual", resid)],
    )
}

fn demand_plot<DB: DrawingBackend>(area: &Draw<DB>, a: &Analysis) -> Result<()>
where
    DB::ErrorType: 'static,
{
    let mut series = Vec::new();
    let mut sizes: Vec<u32> = a.demand.iter().map(|d| d.procs).collect();
    sizes.sort_unstable();
    sizes.dedup();
    for s in sizes {
        let pts: Vec<(f64, f64)> = a
            .demand
            .iter()
            .filter(|d| d.procs == s && d.censored != Censored::Below)
            .map(|d| (d.cti, d.bw_pct))
            .collect();
        if !pts.is_empty() {
            series.push(Series::measured(
                format!("{} measured", size_label(a, s)),
                pts,
            ));
        }
    }
    let mut targets: Vec<u32> = a.projection.iter().map(|p| p.procs).collect();
    targets.sort_unstable();
    targets.dedup();
    for t in targets {
        let proj: Vec<_> = a.projection.iter().filter(|p| p.procs == t).collect();
        series.push(Series {
            name: format!("{t} procs predicted"),
            points: proj.iter().map(|p| (p.cti, p.bw_pct)).collect(),
            intervals: proj
                .iter()
                .all(|p| p.bw_pct_ci.is_some())
                .then(|| proj.iter().filter_map(|p| p.bw_pct_ci).collect()),
            markers: true,
        });
    }
    let xs = series.iter().flat_map(|s| s.points.iter().map(|p| p.0));
    let (x0, x1) = xs.fold((f64::MAX, f64::MIN), |(a, b), v| (a.min(v), b.max(v)));
    if x0 > x1 {
        return Ok(());
    }
    plot(
        area,
        "bandwidth demand: measured and predicted",
        "completion-time increment (%)",
        "bandwidth needed (% of link)",
        (x0 - 1.0).max(0.0)..x1 + 1.0,
        compact,
        &series,
    )
}

fn draw_one<DB: DrawingBackend>(name: &str, area: &Draw<DB>, a: &Analysis) -> Result<()>
where
    DB::ErrorType: 'static,
{
    match name {
        "time_vs_bandwidth" => {
            let mut s = per_size(a, |p| Some(p.median), Some(|p| (p.ci_low, p.ci_high)));
            let x = log_bandwidth(&mut s);
            plot(
                area,
                "completion time vs bandwidth (median of repeats, with its CI)",
                "bandwidth (% of link, log scale)",
                "completion time (s)",
                x,
                from_log,
                &s,
            )
        }
        "cti_vs_bandwidth" => {
            let mut s = per_size(a, |p| p.cti, None);
            let x = log_bandwidth(&mut s);
            plot(
                area,
                "completion-time increment vs bandwidth",
                "bandwidth (% of link, log scale)",
                "CTI (%)",
                x,
                from_log,
                &s,
            )
        }
        "strong_scaling" => scaling(area, a),
        _ => demand_plot(area, a),
    }?;
    // Once, on the whole drawing: the SVG backend writes its file here, so every panel
    // (the residuals too) is in it.
    area.present().map_err(err)
}

fn render_all(dir: &Path, a: &Analysis) -> Result<Vec<(String, String)>> {
    let plots: [(&str, &str); 4] = [
        ("time_vs_bandwidth", "Completion time vs bandwidth"),
        ("cti_vs_bandwidth", "Completion-time increment vs bandwidth"),
        ("strong_scaling", "Strong-scaling fit and residuals"),
        ("demand", "Bandwidth demand, predicted vs measured"),
    ];
    let mut out = Vec::new();
    for (name, title) in plots {
        let svg_path = dir.join(format!("{name}.svg"));
        let png_path = dir.join(format!("{name}.png"));
        draw_one(
            name,
            &SVGBackend::new(&svg_path, (W, H)).into_drawing_area(),
            a,
        )?;
        draw_one(
            name,
            &BitMapBackend::new(&png_path, (W, H)).into_drawing_area(),
            a,
        )?;
        out.push((name.to_string(), title.to_string()));
    }
    Ok(out)
}

/// The page style both reports share.
const STYLE: &str = "<style>
body { font-family: sans-serif; max-width: 1040px; margin: 2em auto; padding: 0 1em; color: #222; }
pre { background: #f6f6f6; padding: 1em; overflow-x: auto; font-size: 14px; }
table { border-collapse: collapse; margin: .5em 0 1.5em; font-size: 14px; }
th, td { border-bottom: 1px solid #ddd; padding: .25em .8em; text-align: right; }
th { background: #f2f2f2; }
figure { margin: 2em 0; } figcaption { font-weight: bold; margin-bottom: .5em; }
figure svg { max-width: 100%; height: auto; border: 1px solid #ddd; }
.warn, li { color: #8a4b00; } .files { font-size: 13px; }
</style>";

/// A plot written as `dir/NAME.svg` and `.png`, as a figure of the page: the SVG inline,
/// links to both files.
fn figure_html(dir: &Path, name: &str, title: &str) -> Result<String> {
    let svg = std::fs::read_to_string(dir.join(format!("{name}.svg")))?;
    let svg = svg.trim_start_matches(|c| c != '<');
    Ok(format!(
        "<figure><figcaption>{}</figcaption>{svg}<p class=\"files\"><a href=\"{name}.svg\">{name}.svg</a> · <a href=\"{name}.png\">{name}.png</a></p></figure>\n",
        escape(title)
    ))
}

fn escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

/// An HTML table.
fn html_table(header: &[String], rows: &[Vec<String>]) -> String {
    let th: String = header
        .iter()
        .map(|h| format!("<th>{}</th>", escape(h)))
        .collect();
    let body: String = rows
        .iter()
        .map(|r| {
            let td: String = r
                .iter()
                .map(|c| format!("<td>{}</td>", escape(c)))
                .collect();
            format!("<tr>{td}</tr>")
        })
        .collect();
    format!("<table><thead><tr>{th}</tr></thead><tbody>{body}</tbody></table>\n")
}

/// The analysis's tables as HTML.
fn tables(a: &Analysis, levels: &[f64], capacity: Option<&str>) -> String {
    let mut out = String::new();
    if let Some(r) = &a.regression {
        out.push_str(&format!(
            "<h3>Strong scaling at 100%</h3><p>T(p) = {:.4} + {:.4}/p + {:.4}/sqrt(p); R² {:.3}, MSE {:.3e}{}</p>\n",
            r.c0,
            r.c1,
            r.c2,
            r.r2,
            r.mse,
            r.crossover_procs
                .map(|p| format!("; communication overtakes processing at p ≈ {p:.0}"))
                .unwrap_or_default()
        ));
    }
    out.push_str("<h3>Completion time and CTI per point</h3>\n");
    let header: Vec<String> = [
        "procs",
        "bw %",
        "runs",
        "median s",
        "order-statistic interval",
        "covers",
        "CV",
        "CTI %",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    let rows: Vec<Vec<String>> = a
        .points
        .iter()
        .map(|p| {
            vec![
                p.procs.to_string(),
                p.bw_pct.to_string(),
                p.n.to_string(),
                format!("{:.4}", p.median),
                format!("{:.4} – {:.4}", p.ci_low, p.ci_high),
                format!("{:.0}%", p.ci_coverage * 100.0),
                format!("{:.3}", p.cv),
                p.cti
                    .map(|c| format!("{c:.1}"))
                    .unwrap_or_else(|| "–".into()),
            ]
        })
        .collect();
    out.push_str(&html_table(&header, &rows));
    out.push_str(&format!(
        "<h3>Bandwidth demand (% of {})</h3><p>&lt; censored below (the lowest step sufficed); &gt; censored above (interpolated up to 100%); ~ below the noise floor (not used).</p>\n",
        escape(capacity.unwrap_or("the link"))
    ));
    let mut header = vec!["procs".to_string()];
    header.extend(levels.iter().map(|c| format!("CTI {c}%")));
    let mut sizes: Vec<u32> = a.demand.iter().map(|d| d.procs).collect();
    sizes.sort_unstable();
    sizes.dedup();
    let rows: Vec<Vec<String>> = sizes
        .iter()
        .map(|&p| {
            let mut row = vec![size_label(a, p)];
            row.extend(levels.iter().map(|&c| {
                a.demand
                    .iter()
                    .find(|d| d.procs == p && d.cti == c)
                    .map(|d| {
                        format!(
                            "{}{}{:.1}",
                            if d.below_noise { "~" } else { "" },
                            flag(d.censored),
                            d.bw_pct
                        )
                    })
                    .unwrap_or_else(|| "–".into())
            }));
            row
        })
        .collect();
    out.push_str(&html_table(&header, &rows));
    out.push_str(&match (a.dc, a.dc_ci) {
        (Some(dc), Some((l, h))) => format!(
            "<p>Demand constant DC = {dc:.3} (90% bootstrap interval over runs {l:.3} – {h:.3}, {} pairs).</p>\n",
            a.dc_pairs.len()
        ),
        (Some(dc), None) => format!("<p>Demand constant DC = {dc:.3}.</p>\n"),
        _ => "<p>Demand constant: not available.</p>\n".into(),
    });
    let mut targets: Vec<u32> = a.projection.iter().map(|p| p.procs).collect();
    targets.sort_unstable();
    targets.dedup();
    if !targets.is_empty() {
        out.push_str(&format!(
            "<h3>Projection from p* = {} procs</h3>\n",
            a.p_star.unwrap_or(0)
        ));
        let rows: Vec<Vec<String>> = targets
            .iter()
            .map(|&t| {
                let mut row = vec![t.to_string()];
                row.extend(levels.iter().map(|&c| {
                    a.projection
                        .iter()
                        .find(|p| p.procs == t && p.cti == c)
                        .map(|p| {
                            let ci = p
                                .bw_pct_ci
                                .map(|(l, h)| format!(" [{l:.1} – {h:.1}]"))
                                .unwrap_or_default();
                            let m = p
                                .measured_bw_pct
                                .map(|m| {
                                    format!(
                                        "; measured {}{m:.1} ({}{:+.1} pp)",
                                        flag(p.measured_censored.unwrap_or(Censored::None)),
                                        if p.error_is_bound { "bound " } else { "" },
                                        p.bw_pct - m
                                    )
                                })
                                .unwrap_or_default();
                            format!("{:.1}{ci}{m}", p.bw_pct)
                        })
                        .unwrap_or_else(|| "–".into())
                }));
                row
            })
            .collect();
        out.push_str(&html_table(&header, &rows));
    }
    if !a.saturation.is_empty() {
        out.push_str("<h3>Where the link saturates</h3>\n");
        let rows: Vec<Vec<String>> = a
            .saturation
            .iter()
            .map(|s| vec![format!("{}%", s.cti), format!("{:.0}", s.procs)])
            .collect();
        out.push_str(&html_table(
            &["CTI".to_string(), "processes at 100% demand".to_string()],
            &rows,
        ));
    }
    out
}

/// The backtest's verdict and checks, the noise floor, and what the intervals are.
fn trust(a: &Analysis) -> String {
    let mut out = format!(
        "<p><b>{}</b></p>\n",
        escape(&format!("Backtest (DC): {}.", a.verdict.text()))
    );
    if let Some(t) = &a.traffic {
        out.push_str(&format!(
            "<p><b>Traffic-based projection, backtest: {}.</b></p>\n",
            escape(&t.verdict.text())
        ));
    }
    out.push_str(&format!("<p>{}.</p>\n", escape(&a.supported)));
    out.push_str(&format!("<p>Intervals: {}.</p>\n", escape(&a.intervals)));
    if !a.backtest.is_empty() {
        let header: Vec<String> = [
            "model",
            "procs",
            "CTI %",
            "fitted on",
            "projected",
            "measured",
            "error pp",
            "in interval",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        let rows: Vec<Vec<String>> = a
            .backtest
            .iter()
            .map(|c| {
                vec![
                    match c.model {
                        crate::analysis::backtest::Model::Dc => "DC".to_string(),
                        crate::analysis::backtest::Model::Traffic => "traffic".to_string(),
                    },
                    c.target_label(),
                    c.cti.to_string(),
                    c.from
                        .iter()
                        .map(u32::to_string)
                        .collect::<Vec<_>>()
                        .join(", "),
                    match c.interval {
                        Some(i) => format!("{:.1} [{:.1} – {:.1}]", c.projected, i.low, i.high),
                        None => format!("{:.1}", c.projected),
                    },
                    format!(
                        "{}{}{:.1}",
                        if c.below_noise { "~" } else { "" },
                        flag(c.measured_censored),
                        c.measured
                    ),
                    format!(
                        "{}{:+.1}",
                        if c.error_is_bound { "bound " } else { "" },
                        c.error_pp
                    ),
                    match c.inside_interval {
                        Some(true) => "yes".into(),
                        Some(false) => "no".into(),
                        None => "–".into(),
                    },
                ]
            })
            .collect();
        out.push_str(&html_table(&header, &rows));
    }
    if !a.noise.is_empty() {
        out.push_str("<p>Noise floor: the smallest CTI each size's repeats resolve (90%).</p>\n");
        let header: Vec<String> = ["procs", "run CV", "baseline runs", "floor CTI %"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        let rows: Vec<Vec<String>> = a
            .noise
            .iter()
            .map(|f| {
                vec![
                    f.procs.to_string(),
                    format!("{:.3}", f.run_cv),
                    f.baseline_repeats.to_string(),
                    format!("{:.1}", f.cti_pct),
                ]
            })
            .collect();
        out.push_str(&html_table(&header, &rows));
    }
    out
}

/// Write the report into `dir`; returns the path of `index.html`.
pub fn write(dir: &Path, a: &Analysis, levels: &[f64], capacity: Option<&str>) -> Result<PathBuf> {
    std::fs::create_dir_all(dir)
        .map_err(|e| anyhow!("cannot create the report directory {}: {e}", dir.display()))?;
    let mut figures = String::new();
    match font() {
        Ok(_) => {
            for (name, title) in render_all(dir, a)? {
                figures.push_str(&figure_html(dir, &name, &title)?);
            }
        }
        Err(why) => figures.push_str(&format!("<p class=\"warn\">No plots: {}</p>", escape(why))),
    }
    let warnings: String = a
        .warnings
        .iter()
        .map(|w| format!("<li>{}</li>", escape(w)))
        .collect();
    let json = serde_json::to_string_pretty(a)?;
    let html = format!(
        r#"<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>throttle report: {series}</title>
{STYLE}</head><body>
<h1>Bandwidth demand: {series}</h1>
<p>{runs} successful runs, {failed} failed runs left out, {flagged} flagged runs {flag_fate} (their links did not run at their setting; see Warnings). Times: {time}.</p>
<h2>Can the projection be trusted?</h2>{trust}
<h2>Warnings</h2><ul>{warnings}</ul>
<h2>Tables</h2>{tables}
<h2>Plots</h2>{figures}
<h2>Data</h2><details><summary>analysis as JSON</summary><pre>{json}</pre></details>
</body></html>
"#,
        series = escape(&a.series),
        runs = a.runs,
        failed = a.failed_runs,
        flagged = a.flagged_runs,
        flag_fate = if a.flagged_kept { "KEPT" } else { "left out" },
        time = escape(&a.time_source),
        warnings = if warnings.is_empty() {
            "<li>none</li>".to_string()
        } else {
            warnings
        },
        tables = tables(a, levels, capacity),
        trust = trust(a),
        figures = figures,
        json = escape(&json),
    );
    let index = dir.join("index.html");
    std::fs::write(&index, html)?;
    Ok(index)
}

/// A plot of a model report (`model pmm|mw --report`): lines of measured points
/// (markers) and model curves (plain), on linear axes.
pub struct ModelFigure {
    /// File name without extension.
    pub name: String,
    pub title: String,
    pub x_label: String,
    pub y_label: String,
    pub lines: Vec<ModelLine>,
}

/// One line of a model figure.
pub struct ModelLine {
    pub name: String,
    pub points: Vec<(f64, f64)>,
    /// Measured points (markers), or a model curve (a plain line).
    pub measured: bool,
}

fn draw_model<DB: DrawingBackend>(area: &Draw<DB>, f: &ModelFigure) -> Result<()>
where
    DB::ErrorType: 'static,
{
    let series: Vec<Series> = f
        .lines
        .iter()
        .map(|l| Series {
            name: l.name.clone(),
            points: l.points.clone(),
            intervals: None,
            markers: l.measured,
        })
        .collect();
    let xs = series.iter().flat_map(|s| s.points.iter().map(|p| p.0));
    let (x0, x1) = xs.fold((f64::MAX, f64::MIN), |(a, b), v| (a.min(v), b.max(v)));
    if x0 > x1 {
        return Ok(());
    }
    let pad = ((x1 - x0) * 0.05).max(1e-9);
    plot(
        area,
        &f.title,
        &f.x_label,
        &f.y_label,
        (x0 - pad)..(x1 + pad),
        compact,
        &series,
    )?;
    area.present().map_err(err)
}

/// Write a model report into `dir`: the figures (SVG, PNG), the tables (the command's
/// text output, preformatted) and the model's JSON, in one `index.html`; returns its path.
pub fn write_model(
    dir: &Path,
    title: &str,
    intro: &str,
    tables_text: &str,
    figures: &[ModelFigure],
    json: &str,
) -> Result<PathBuf> {
    std::fs::create_dir_all(dir)
        .map_err(|e| anyhow!("cannot create the report directory {}: {e}", dir.display()))?;
    let mut html_figures = String::new();
    match font() {
        Ok(_) => {
            for f in figures {
                let svg_path = dir.join(format!("{}.svg", f.name));
                let png_path = dir.join(format!("{}.png", f.name));
                draw_model(&SVGBackend::new(&svg_path, (W, H)).into_drawing_area(), f)?;
                draw_model(
                    &BitMapBackend::new(&png_path, (W, H)).into_drawing_area(),
                    f,
                )?;
                html_figures.push_str(&figure_html(dir, &f.name, &f.title)?);
            }
        }
        Err(why) => {
            html_figures.push_str(&format!("<p class=\"warn\">No plots: {}</p>", escape(why)))
        }
    }
    let html = format!(
        r#"<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>throttle model: {title}</title>
{STYLE}</head><body>
<h1>{title}</h1>
<p>{intro}</p>
<h2>Tables</h2><pre>{tables}</pre>
<h2>Plots</h2>{html_figures}
<h2>Data</h2><details><summary>the comparison as JSON</summary><pre>{json}</pre></details>
</body></html>
"#,
        title = escape(title),
        intro = escape(intro),
        tables = escape(tables_text),
        json = escape(json),
    );
    let index = dir.join("index.html");
    std::fs::write(&index, html)?;
    Ok(index)
}
