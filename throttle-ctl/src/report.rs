//! `analyze --report DIR`: plots as SVG and PNG, and a self-contained `index.html`.
//!
//! Four plots: completion time vs bandwidth per size; CTI vs bandwidth per size; the
//! strong-scaling fit with its residuals; predicted vs measured demand. The HTML embeds
//! the SVGs inline, so the one file can be mailed or opened anywhere. Fonts come from the
//! system (DejaVu or Liberation, loaded at run time); without one, no plots are drawn and
//! the report says so.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use anyhow::{anyhow, Result};
use plotters::coord::Shift;
use plotters::prelude::*;

use crate::analysis::demand::Censored;
use crate::analysis::Analysis;

const W: u32 = 900;
const H: u32 = 560;
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

/// Series of (x, y) per size, drawn as lines with points.
fn lines<DB: DrawingBackend>(
    area: &Draw<DB>,
    title: &str,
    x_label: &str,
    y_label: &str,
    series: &[(String, Vec<(f64, f64)>)],
) -> Result<()>
where
    DB::ErrorType: 'static,
{
    area.fill(&WHITE).map_err(err)?;
    let xs = series.iter().flat_map(|s| s.1.iter().map(|p| p.0));
    let ys = series.iter().flat_map(|s| s.1.iter().map(|p| p.1));
    let (x0, x1) = xs.fold((f64::MAX, f64::MIN), |(a, b), v| (a.min(v), b.max(v)));
    let (y0, y1) = ys.fold((f64::MAX, f64::MIN), |(a, b), v| (a.min(v), b.max(v)));
    if x0 > x1 {
        return Ok(());
    }
    let pad = ((y1 - y0) * 0.08).max(1e-9);
    let mut chart = ChartBuilder::on(area)
        .caption(title, ("sans-serif", 24))
        .margin(14)
        .x_label_area_size(48)
        .y_label_area_size(70)
        .build_cartesian_2d(x0..x1 + (x1 - x0) * 0.02 + 1e-9, (y0 - pad)..(y1 + pad))
        .map_err(err)?;
    chart
        .configure_mesh()
        .x_desc(x_label)
        .y_desc(y_label)
        .label_style(("sans-serif", 16))
        .axis_desc_style(("sans-serif", 18))
        .draw()
        .map_err(err)?;
    for (i, (name, pts)) in series.iter().enumerate() {
        let c = color(i);
        chart
            .draw_series(LineSeries::new(pts.iter().copied(), c.stroke_width(2)))
            .map_err(err)?
            .label(name.clone())
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], c.stroke_width(3)));
        // Markers for measured points only, not for sampled model curves.
        if pts.len() <= 40 {
            chart
                .draw_series(pts.iter().map(|&p| Circle::new(p, 4, c.filled())))
                .map_err(err)?;
        }
    }
    chart
        .configure_series_labels()
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .label_font(("sans-serif", 16))
        .position(SeriesLabelPosition::UpperRight)
        .draw()
        .map_err(err)?;
    area.present().map_err(err)?;
    Ok(())
}

fn per_size(
    a: &Analysis,
    f: impl Fn(&crate::analysis::MedianPoint) -> Option<f64>,
) -> Vec<(String, Vec<(f64, f64)>)> {
    let mut sizes: Vec<u32> = a.points.iter().map(|p| p.procs).collect();
    sizes.dedup();
    sizes
        .into_iter()
        .map(|s| {
            let mut pts: Vec<(f64, f64)> = a
                .points
                .iter()
                .filter(|p| p.procs == s)
                .filter_map(|p| f(p).map(|y| (p.bw_pct, y)))
                .collect();
            pts.sort_by(|x, y| x.0.total_cmp(&y.0));
            (
                format!(
                    "{s} procs{}",
                    if a.held_out.contains(&s) {
                        " (held out)"
                    } else {
                        ""
                    }
                ),
                pts,
            )
        })
        .collect()
}

fn scaling<DB: DrawingBackend>(area: &Draw<DB>, a: &Analysis) -> Result<()>
where
    DB::ErrorType: 'static,
{
    area.fill(&WHITE).map_err(err)?;
    let pts: Vec<(f64, f64)> = a
        .points
        .iter()
        .filter(|p| p.bw_pct == 100.0)
        .map(|p| (p.procs as f64, p.median))
        .collect();
    let Some(r) = &a.regression else {
        return lines(
            area,
            "strong scaling at 100% (no fit: too few sizes)",
            "processes",
            "completion time (s)",
            &[("median".into(), pts)],
        );
    };
    let (top, bottom) = area.split_vertically(H * 2 / 3);
    let model = |p: f64| r.c0 + r.c1 / p + r.c2 / p.sqrt();
    let pmax = pts.iter().map(|p| p.0).fold(1.0, f64::max);
    let curve: Vec<(f64, f64)> = (0..=100)
        .map(|i| 1.0 + (pmax - 1.0) * i as f64 / 100.0)
        .map(|p| (p, model(p)))
        .collect();
    lines(
        &top,
        &format!(
            "strong scaling at 100%: T(p) = {:.3} + {:.3}/p + {:.3}/sqrt(p), R^2 {:.2}",
            r.c0, r.c1, r.c2, r.r2
        ),
        "processes",
        "completion time (s)",
        &[
            ("model".into(), curve),
            ("median of runs".into(), pts.clone()),
        ],
    )?;
    let resid: Vec<(f64, f64)> = pts.iter().map(|&(p, t)| (p, t - model(p))).collect();
    lines(
        &bottom,
        "residuals (measured - model)",
        "processes",
        "seconds",
        &[("residual".into(), resid)],
    )
}

fn demand_plot<DB: DrawingBackend>(area: &Draw<DB>, a: &Analysis) -> Result<()>
where
    DB::ErrorType: 'static,
{
    let mut series: Vec<(String, Vec<(f64, f64)>)> = Vec::new();
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
            let tag = if a.held_out.contains(&s) {
                " measured (held out)"
            } else {
                " measured"
            };
            series.push((format!("{s} procs{tag}"), pts));
        }
    }
    let mut targets: Vec<u32> = a.projection.iter().map(|p| p.procs).collect();
    targets.sort_unstable();
    targets.dedup();
    for t in targets {
        let pts: Vec<(f64, f64)> = a
            .projection
            .iter()
            .filter(|p| p.procs == t)
            .map(|p| (p.cti, p.bw_pct))
            .collect();
        series.push((format!("{t} procs predicted"), pts));
    }
    lines(
        area,
        "bandwidth demand: measured and predicted",
        "completion-time increment (%)",
        "bandwidth needed (% of link)",
        &series,
    )
}

fn render_all(dir: &Path, a: &Analysis) -> Result<Vec<(String, String)>> {
    let plots: [(&str, &str); 4] = [
        ("time_vs_bandwidth", "Completion time vs bandwidth"),
        ("cti_vs_bandwidth", "Completion-time increment vs bandwidth"),
        ("strong_scaling", "Strong-scaling fit and residuals"),
        ("demand", "Bandwidth demand, predicted vs measured"),
    ];
    let time_series = per_size(a, |p| Some(p.median));
    let cti_series = per_size(a, |p| p.cti);
    let mut out = Vec::new();
    for (name, title) in plots {
        let svg_path = dir.join(format!("{name}.svg"));
        let png_path = dir.join(format!("{name}.png"));
        {
            let area = SVGBackend::new(&svg_path, (W, H)).into_drawing_area();
            draw_one(name, &area, a, &time_series, &cti_series)?;
        }
        {
            let area = BitMapBackend::new(&png_path, (W, H)).into_drawing_area();
            draw_one(name, &area, a, &time_series, &cti_series)?;
        }
        out.push((name.to_string(), title.to_string()));
    }
    Ok(out)
}

fn draw_one<DB: DrawingBackend>(
    name: &str,
    area: &Draw<DB>,
    a: &Analysis,
    time_series: &[(String, Vec<(f64, f64)>)],
    cti_series: &[(String, Vec<(f64, f64)>)],
) -> Result<()>
where
    DB::ErrorType: 'static,
{
    match name {
        "time_vs_bandwidth" => lines(
            area,
            "completion time vs bandwidth (median of repeats)",
            "bandwidth (% of link)",
            "completion time (s)",
            time_series,
        ),
        "cti_vs_bandwidth" => lines(
            area,
            "completion-time increment vs bandwidth",
            "bandwidth (% of link)",
            "CTI (%)",
            cti_series,
        ),
        "strong_scaling" => scaling(area, a),
        _ => demand_plot(area, a),
    }
}

fn escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

/// Write the report into `dir`; returns the path of `index.html`.
pub fn write(dir: &Path, a: &Analysis, levels: &[f64], capacity: Option<&str>) -> Result<PathBuf> {
    std::fs::create_dir_all(dir)
        .map_err(|e| anyhow!("cannot create the report directory {}: {e}", dir.display()))?;
    let text = crate::analysis::render(a, levels, capacity);
    let mut figures = String::new();
    match font() {
        Ok(_) => {
            for (name, title) in render_all(dir, a)? {
                let svg = std::fs::read_to_string(dir.join(format!("{name}.svg")))?;
                let svg = svg.trim_start_matches(|c| c != '<').to_string();
                figures.push_str(&format!(
                    "<figure><figcaption>{}</figcaption>{}<p class=\"files\"><a href=\"{name}.svg\">{name}.svg</a> · <a href=\"{name}.png\">{name}.png</a></p></figure>\n",
                    escape(&title),
                    svg
                ));
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
<style>
body {{ font-family: sans-serif; max-width: 1000px; margin: 2em auto; padding: 0 1em; color: #222; }}
pre {{ background: #f6f6f6; padding: 1em; overflow-x: auto; font-size: 14px; }}
figure {{ margin: 2em 0; }} figcaption {{ font-weight: bold; margin-bottom: .5em; }}
figure svg {{ max-width: 100%; height: auto; border: 1px solid #ddd; }}
.warn, li {{ color: #8a4b00; }} .files {{ font-size: 13px; }}
</style></head><body>
<h1>Bandwidth demand: {series}</h1>
<p>{runs} successful runs, {failed} failed runs left out. Times: {time}.</p>
<h2>Warnings</h2><ul>{warnings}</ul>
<h2>Tables</h2><pre>{text}</pre>
<h2>Plots</h2>{figures}
<h2>Data</h2><details><summary>analysis as JSON</summary><pre>{json}</pre></details>
</body></html>
"#,
        series = escape(&a.series),
        runs = a.runs,
        failed = a.failed_runs,
        time = escape(&a.time_source),
        warnings = if warnings.is_empty() {
            "<li>none</li>".to_string()
        } else {
            warnings
        },
        text = escape(&text),
        figures = figures,
        json = escape(&json),
    );
    let index = dir.join("index.html");
    std::fs::write(&index, html)?;
    Ok(index)
}
