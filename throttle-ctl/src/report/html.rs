//! The analysis's page: `index.html` with the answer first, then whether to trust it,
//! the warnings, the tables, the plots inline and the analysis as JSON, in one
//! self-contained file.

use std::path::{Path, PathBuf};

use anyhow::{anyhow, Result};
use throttle_analysis::method::demand::Censored;
use throttle_analysis::method::regression::Regression;
use throttle_analysis::method::traffic;
use throttle_analysis::{Analysis, TrafficAnswer};

use super::figures::{render_all, size_label, Figures};
use super::plot::font;

/// The page style both reports share.
pub(super) const STYLE: &str = "<style>
body { font-family: sans-serif; max-width: 1040px; margin: 2em auto; padding: 0 1em; color: #222; }
pre { background: #f6f6f6; padding: 1em; overflow-x: auto; font-size: 14px; }
table { border-collapse: collapse; margin: .5em 0 1.5em; font-size: 14px; }
th, td { border-bottom: 1px solid #ddd; padding: .25em .8em; text-align: right; }
th { background: #f2f2f2; }
figure { margin: 2em 0; } figcaption { font-weight: bold; margin-bottom: .5em; }
figure svg { max-width: 100%; height: auto; border: 1px solid #ddd; }
.warn, li { color: #8a4b00; } .files { font-size: 13px; }
.answer { font-size: 17px; font-weight: bold; margin: .3em 0; }
</style>";

/// A plot written as `dir/NAME.svg` and `.png`, as a figure of the page: the SVG inline
/// (without the font its file carries), links to both files.
pub(super) fn figure_html(dir: &Path, name: &str, title: &str) -> Result<String> {
    let svg = std::fs::read_to_string(dir.join(format!("{name}.svg")))?;
    // The file carries its font (for use elsewhere); the page, which inlines them all,
    // leaves it out.
    let svg = super::plot::without_font(&svg);
    let svg = svg.trim_start_matches(|c| c != '<');
    Ok(format!(
        "<figure><figcaption>{}</figcaption>{svg}<p class=\"files\"><a href=\"{name}.svg\">{name}.svg</a> · <a href=\"{name}.png\">{name}.png</a></p></figure>\n",
        escape(title)
    ))
}

pub(super) use throttle_analysis::table::escape_html as escape;

/// JSON for the page's data block: a bidirectional control in a string written as JSON's
/// own escape (`\u202e`), so that the block stays JSON when the page escapes the rest.
pub(super) fn json_text(json: &str) -> String {
    json.chars()
        .map(|c| {
            if throttle_analysis::table::unsafe_char(c) && !c.is_ascii() {
                format!("\\u{:04x}", c as u32)
            } else {
                c.to_string()
            }
        })
        .collect()
}

/// An HTML table.
pub(super) fn html_table(header: &[String], rows: &[Vec<String>]) -> String {
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
pub(super) fn tables(a: &Analysis, levels: &[f64], capacity: Option<&str>) -> String {
    let mut out = String::new();
    if let Some(r) = &a.regression {
        out.push_str(&strong_scaling(r));
    }
    out.push_str(&points_table(a));
    // The demand table's header, which the projection tables share.
    let mut header = vec!["procs".to_string()];
    header.extend(levels.iter().map(|c| format!("CTI {c}%")));
    out.push_str(&demand_table(a, levels, capacity, &header));
    out.push_str(&match (a.dc, a.dc_interval) {
        (Some(dc), Some(i)) => format!(
            "<p>Demand constant DC = {dc:.3} (90% bootstrap interval over runs {:.3} – {:.3}, {} pairs).</p>\n",
            i.low,
            i.high,
            a.dc_pairs.len()
        ),
        (Some(dc), None) => format!("<p>Demand constant DC = {dc:.3}.</p>\n"),
        _ => "<p>Demand constant: not available.</p>\n".into(),
    });
    if !a.projection.is_empty() {
        out.push_str(&format!(
            "<h3>Projection from p* = {} procs (DC model, demand ~ DC × sqrt(p))</h3>\n",
            a.p_star.unwrap_or(0)
        ));
        out.push_str(&projection_table(&a.projection, levels, &header, |c| {
            a.demand_at_star(c)
        }));
        if a.projection.iter().any(|p| p.from_censored) {
            out.push_str("<p>&lt;X: at most X, projected from a demand at p* censored below; X (from &gt;B): projected from a demand at p* known only to exceed B, not a bound.</p>\n");
        }
    }
    if let Some(t) = &a.traffic {
        if let Some(f) = &t.fit {
            out.push_str(&traffic_model(t, f));
        }
        if !t.projection.is_empty() {
            out.push_str("<h3>Projection from traffic</h3>\n");
            out.push_str(&projection_table(&t.projection, levels, &header, |_| None));
        }
    }
    if !a.saturation.is_empty() {
        out.push_str("<h3>Where the link saturates</h3>\n");
        out.push_str(&format!(
            "<p>{}</p>\n",
            throttle_analysis::table::escape_html(throttle_analysis::render::SATURATION_MEANING)
        ));
        out.push_str(&throttle_analysis::render::saturation_table(a).html());
    }
    out
}

/// The strong-scaling regression at 100%, with where communication overtakes.
fn strong_scaling(r: &Regression) -> String {
    format!(
        "<h3>Strong scaling at 100%</h3><p>{}; R² {:.3}, MSE {:.3e}{}</p>\n",
        r.formula(throttle_analysis::table::number),
        r.r2,
        r.mse,
        r.crossover_procs
            .map(|p| format!("; communication overtakes processing at p ≈ {p:.0}"))
            .unwrap_or_default()
    )
}

/// Each point's completion time, its interval and CTI, under its heading.
fn points_table(a: &Analysis) -> String {
    let header: Vec<String> = [
        "procs",
        "bandwidth (% of the link)",
        "runs",
        &a.time_head(),
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
                a.time_unit.format(p.median),
                {
                    let (lo, hi) = a.time_unit.format_interval(p.interval.low, p.interval.high);
                    format!("{lo} – {hi}")
                },
                format!("{:.0}%", p.coverage * 100.0),
                format!("{:.3}", p.cv),
                p.cti
                    .map(|c| format!("{c:.1}"))
                    .unwrap_or_else(|| "–".into()),
            ]
        })
        .collect();
    format!(
        "<h3>Completion time and CTI per point</h3>\n{}",
        html_table(&header, &rows)
    )
}

/// The measured demand of each size at each level (`header`: its columns), under its
/// heading and legend.
fn demand_table(a: &Analysis, levels: &[f64], capacity: Option<&str>, header: &[String]) -> String {
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
                    // A censored demand is its bound, as the terminal shows it.
                    .map(|d| {
                        throttle_analysis::render::level(
                            d.bound.unwrap_or(d.bw_pct),
                            d.censored,
                            d.below_noise,
                        )
                    })
                    .unwrap_or_else(|| "–".into())
            }));
            row
        })
        .collect();
    format!(
        "<h3>Bandwidth demand (% of {})</h3><p>&lt; censored below (the lowest step sufficed); &gt; censored above (even the highest throttled step was too slow: more than it); (noise): below the noise floor (not used).</p>\n{}",
        escape(capacity.unwrap_or("the link")),
        html_table(header, &rows)
    )
}

/// The traffic model `f`: each part's best form, its weight, and how often it was the
/// best over resampled runs.
fn traffic_model(t: &TrafficAnswer, f: &traffic::Fit) -> String {
    let rows: Vec<Vec<String>> = [
        ("T(100%)", "T(100%)", &f.baseline),
        ("bytes V", "V", &f.volume),
        ("weight k", "k", &f.exposed),
    ]
    .iter()
    .map(|(what, part, found)| {
        let won = t.stability.iter().find(|s| s.part == *part).map(|s| {
            let name = found.best.form.name();
            let n = s.forms.iter().find(|f| f.0 == name).map_or(0, |f| f.1);
            format!("{n} of {}", s.resamples)
        });
        vec![
            what.to_string(),
            found.best.text(|c| format!("{c:.4}")),
            match found.best.weight {
                Some(w) if found.judged > 0 => {
                    format!("{w:.2} ({} averaged)", found.close.len())
                }
                _ => "– (two sizes: the paper's form)".into(),
            },
            won.unwrap_or_else(|| "–".into()),
        ]
    })
    .collect();
    format!(
        "<h3>Traffic model</h3><p>T(w) = T(100%) + k V/C (1/w − 1); each part's forms weighed by their fit beyond the noise (AICc with a cost for the shape) and averaged. The best form, its weight among those averaged, and how often it was the best over resampled runs:</p>\n{}",
        html_table(
            &[
                "part".to_string(),
                "best form".to_string(),
                "weight".to_string(),
                "best in resamples".to_string(),
            ],
            &rows,
        )
    )
}

/// A projection table: each target's demand per level with the interval the answer uses
/// (noise and model error; `*`: noise only) and, at a held-out size, the measurement.
fn projection_table<'a>(
    proj: &[throttle_analysis::Projection],
    levels: &[f64],
    header: &[String],
    at_star: impl Fn(f64) -> Option<&'a throttle_analysis::Demand>,
) -> String {
    let mut targets: Vec<u32> = proj.iter().map(|p| p.procs).collect();
    targets.sort_unstable();
    targets.dedup();
    let rows: Vec<Vec<String>> = targets
        .iter()
        .map(|&t| {
            let mut row = vec![t.to_string()];
            row.extend(levels.iter().map(|&c| {
                proj.iter()
                    .find(|p| p.procs == t && p.cti == c)
                    .map(|p| {
                        let ci = match (p.interval, p.noise_interval) {
                            (Some(i), _) => format!(" [{:.1} – {:.1}]", i.low, i.high),
                            (None, Some(n)) => format!(" [{:.1} – {:.1}]*", n.low, n.high),
                            (None, None) => String::new(),
                        };
                        let m = p
                            .measured_bw_pct
                            .map(|m| {
                                format!(
                                    "; measured {}{m:.1} ({}{:+.1} pp)",
                                    p.measured_censored.unwrap_or(Censored::None).mark(),
                                    if p.error_is_bound { "bound " } else { "" },
                                    p.bw_pct - m
                                )
                            })
                            .unwrap_or_default();
                        let value = throttle_analysis::render::projected_from(
                            p.bw_pct,
                            p.from_censored,
                            at_star(c),
                        );
                        format!("{value}{ci}{m}")
                    })
                    .unwrap_or_else(|| "–".into())
            }));
            row
        })
        .collect();
    format!(
        "{}<p>[a – b]: where a measurement at that size would fall, 9 times in 10 (its noise and reading, the model's error); [a – b]*: run-to-run noise only.</p>\n",
        html_table(header, &rows)
    )
}

/// The bottom line: first its table (a row per size, as the terminal shows it, with the
/// notes that say what its words mean), then the answer's sentences, or why there is
/// none, and what to measure next.
pub(super) fn answer(a: &Analysis, levels: &[f64]) -> String {
    let b = &a.bottom_line;
    let (table, notes) = throttle_analysis::render::headline::table(a, levels);
    let mut out = table.map(|t| t.html()).unwrap_or_default();
    if !notes.is_empty() {
        out.push_str(&format!(
            "<p class=\"notes\">{}</p>\n",
            notes
                .iter()
                .map(|n| escape(n))
                .collect::<Vec<_>>()
                .join("<br>")
        ));
    }
    out.extend(
        b.lines
            .iter()
            .map(|l| format!("<p class=\"answer\">{}</p>\n", escape(l.trim()))),
    );
    if let Some(n) = &b.next {
        out.push_str(&format!("<p>Next: {}.</p>\n", escape(n)));
    }
    out
}

/// The backtest's verdict and checks, the noise floor, and what the intervals are.
pub(super) fn trust(a: &Analysis) -> String {
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
    out.push_str(&format!(
        "<p>Intervals: {}; a projection's interval is what a measurement at that size would show: its noise, how one level reads there, and the model's error (its lack of fit, its growth with the distance projected from the backtest and other programs', the averaged forms' disagreement), built in logit units so that it stays within 0–100% of the link; [a – b]* is run-to-run noise only.</p>\n",
        escape(&a.intervals)
    ));
    if !a.backtest.is_empty() {
        out.push_str(&throttle_analysis::render::backtest_table(a).html());
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

/// A series' name as a heading: what ran (the workload, or for a command the program its
/// line runs), and its parameters (`key=value` words, a quoted value kept whole) as a
/// line of their own, each value as code; HTML, escaped.
fn heading(series: &str) -> (String, String) {
    let words = series_words(series);
    let Some((name, rest)) = words.split_first() else {
        return (String::new(), String::new());
    };
    let run = rest
        .iter()
        .find_map(|w| w.strip_prefix("run="))
        .map(program_of);
    let title = match (name.as_str(), run) {
        ("command", Some(Some(program))) => program,
        _ => name.clone(),
    };
    if rest.is_empty() {
        return (title, String::new());
    }
    let params: Vec<String> = rest
        .iter()
        .map(|w| match w.split_once('=') {
            Some((k, v)) => format!("{} <code>{}</code>", escape(k), escape(v)),
            None => escape(w),
        })
        .collect();
    (
        title,
        format!("<p class=\"params\">{}</p>", params.join("<br>")),
    )
}

/// A series name's words: split at spaces outside double quotes; a `key="..."` value
/// (JSON, as the series is written) decoded.
fn series_words(series: &str) -> Vec<String> {
    let mut raw = Vec::new();
    let mut word = String::new();
    let (mut quoted, mut escaped) = (false, false);
    for c in series.chars() {
        if quoted && !escaped && c == '\\' {
            escaped = true;
            word.push(c);
            continue;
        }
        if c == '"' && !escaped {
            quoted = !quoted;
        }
        escaped = false;
        if c == ' ' && !quoted {
            if !word.is_empty() {
                raw.push(std::mem::take(&mut word));
            }
        } else {
            word.push(c);
        }
    }
    if !word.is_empty() {
        raw.push(word);
    }
    raw.into_iter()
        .map(|w| match w.split_once('=') {
            Some((k, v)) if v.starts_with('"') => {
                let value = serde_json::from_str::<String>(v)
                    .unwrap_or_else(|_| v.trim_matches('"').to_string());
                format!("{k}={value}")
            }
            _ => w,
        })
        .collect()
}

/// What starts a program rather than being one: skipped when naming a command's program.
const LAUNCHERS: &[&str] = &[
    "mpirun", "mpiexec", "orterun", "prterun", "srun", "aprun", "taskset", "timeout", "env",
    "numactl", "nice", "time", "stdbuf", "exec",
];

/// The program a command line runs, as its file name: the first word outside quotes
/// that names a file (`./app`, `/opt/bin/app`; or the line's first word) and is not a
/// launcher, an option, a placeholder, a number, an assignment or a redirection's target;
/// `None` without one.
fn program_of(line: &str) -> Option<String> {
    let mut words = Vec::new();
    let mut quote = None;
    let mut word = String::new();
    for c in line.chars() {
        match (quote, c) {
            (None, '\'' | '"') => quote = Some(c),
            (Some(q), _) if c == q => quote = None,
            // A quoted word is an argument (a launch agent's line), never the program.
            (Some(_), _) => word.push('\0'),
            (None, ' ') => words.push(std::mem::take(&mut word)),
            (None, _) => word.push(c),
        }
    }
    words.push(word);
    let mut redirected = false;
    for (i, w) in words.iter().enumerate() {
        if std::mem::take(&mut redirected) {
            continue;
        }
        if matches!(w.as_str(), ">" | ">>" | "<" | "2>" | "2>>" | "&>") {
            redirected = true;
            continue;
        }
        let skip = w.is_empty()
            || w.starts_with(['-', '>', '<', '{', '&', '|', ';'])
            || w.contains(['\0', '=', '{'])
            || w.parse::<f64>().is_ok();
        let base = w.rsplit('/').next().unwrap_or_default();
        if skip || base.is_empty() || LAUNCHERS.contains(&base) {
            continue;
        }
        if w.contains('/') || i == 0 {
            return Some(base.to_string());
        }
    }
    None
}

/// Write the report into `dir`; returns the path of `index.html`.
pub fn write(dir: &Path, a: &Analysis, levels: &[f64], capacity: Option<&str>) -> Result<PathBuf> {
    // A directory of this user's that nobody else may write: no link planted in it or in
    // its place is followed; the figures are written through its descriptor.
    let out =
        crate::shared_dir::out_dir(dir).map_err(|e| anyhow!("the report directory: {e:#}"))?;
    let mut figures = String::new();
    match font() {
        Ok(_) => {
            for (name, title) in render_all(&out.fd_path(), Figures { a, capacity })? {
                figures.push_str(&figure_html(&out.fd_path(), &name, &title)?);
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
    let (name, params) = heading(&a.series);
    let html = format!(
        r#"<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Bandwidth demand of {name}: throttle report</title>
{STYLE}</head><body>
<h1>Bandwidth demand of {name}</h1>{params}
<h2>The answer</h2>{answer}
<p>{runs}. Times: {time}.</p>
<h2>Can the projection be trusted?</h2>{trust}
<h2>Warnings</h2><ul>{warnings}</ul>
<h2>Tables</h2>{tables}
<h2>Plots</h2>{figures}
<h2>Data</h2><details><summary>analysis as JSON</summary><pre>{json}</pre></details>
</body></html>
"#,
        name = escape(&name),
        runs = escape(&throttle_analysis::render::runs_counted(a)),
        time = escape(&a.time_source),
        warnings = if warnings.is_empty() {
            "<li>none</li>".to_string()
        } else {
            warnings
        },
        tables = tables(a, levels, capacity),
        trust = trust(a),
        answer = answer(a, levels),
        figures = figures,
        json = escape(&json_text(&json)),
    );
    out.write_atomically("index.html", html.as_bytes(), 0o666)?;
    Ok(dir.join("index.html"))
}

#[cfg(test)]
mod tests {
    /// A label with a bidirectional control: written out on the page, and the data block
    /// still parses as JSON with the label as it was.
    #[test]
    fn the_data_block_stays_json_with_a_bidi_control_in_a_label() {
        let json = serde_json::json!({ "series": "mw\u{202e}exe" }).to_string();
        let block = super::json_text(&json);
        assert!(!block.contains('\u{202e}'), "{block}");
        let back: serde_json::Value = serde_json::from_str(&block).unwrap();
        assert_eq!(back["series"], "mw\u{202e}exe");
    }

    /// Issue 44, item 12: a command's series is titled by the program its line runs, and
    /// its run line and regex read whole (a quoted value with spaces is one parameter).
    #[test]
    fn a_commands_page_is_titled_by_its_program_and_its_line_reads_whole() {
        let series = r#"command rate_regex="harmonic_mean_TEPS:[ !]+([0-9.e+-]+)" run="mpirun --mca plm_rsh_agent 'throttle-ctl exec' --hostfile {hostfile} -np {procs} ./bfs_reference 20""#;
        let (title, params) = super::heading(series);
        assert_eq!(title, "bfs_reference");
        assert!(
            params.contains("rate_regex <code>harmonic_mean_TEPS:[ !]+([0-9.e+-]+)</code>"),
            "{params}"
        );
        assert!(
            params.contains("run <code>mpirun --mca plm_rsh_agent &#39;throttle-ctl exec&#39;")
                || params.contains("run <code>mpirun --mca plm_rsh_agent 'throttle-ctl exec'"),
            "{params}"
        );
        assert!(!params.contains(" · "), "{params}");
        assert_eq!(super::heading("mw alpha=0.8").0, "mw");
        assert_eq!(super::heading(r#"command run="sleep 1""#).0, "sleep");
        for (line, program) in [
            ("./app > /tmp/out.txt", Some("app")),
            ("./bfs data/g.bin", Some("bfs")),
            ("taskset -c 0 timeout 100 /opt/bin/app -n 3", Some("app")),
            (
                "mpirun --mca btl tcp,self -np {procs} ./a.out",
                Some("a.out"),
            ),
            ("mpirun -np 4 python3", None),
        ] {
            assert_eq!(super::program_of(line).as_deref(), program, "{line}");
        }
        // A JSON-escaped value reads as written.
        let (_, params) = super::heading(r#"command run="echo \"a b\" \u00e9""#);
        assert!(
            params.contains("echo &quot;a b&quot; é") || params.contains("echo \"a b\" é"),
            "{params}"
        );
    }
}
