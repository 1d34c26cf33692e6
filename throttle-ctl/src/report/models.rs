//! The model reports (`model pmm|mw --report`): measured points against model curves on
//! linear axes, with the command's tables and JSON, in one `index.html`.

use std::path::{Path, PathBuf};

use anyhow::{anyhow, Result};
use plotters::prelude::*;

use super::html::{escape, figure_html, STYLE};
use super::plot::*;

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
            colour: None,
            ..Default::default()
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
    // As the analysis report: a directory of this user's alone, written through its
    // descriptor.
    let out =
        crate::shared_dir::out_dir(dir).map_err(|e| anyhow!("the report directory: {e:#}"))?;
    let through = out.fd_path();
    let dir = through.as_path();
    let mut html_figures = String::new();
    match font() {
        Ok(_) => {
            for f in figures {
                let svg_path = dir.join(format!("{}.svg", f.name));
                let png_path = dir.join(format!("{}.png", f.name));
                draw_model(&SVGBackend::new(&svg_path, (W, H)).into_drawing_area(), f)?;
                embed_font(&svg_path)?;
                draw_model(
                    &BitMapBackend::new(&png_path, (W * PNG_SCALE, H * PNG_SCALE))
                        .into_drawing_area(),
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
        json = escape(&super::html::json_text(json)),
    );
    out.write_atomically("index.html", html.as_bytes(), 0o666)?;
    Ok(out.path().join("index.html"))
}
