//! `model mw`: stored master/worker runs against the closed forms of the master/worker thesis and the
//! saturation point of Mizutani et al..

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Result;
use clap::{Args as ClapArgs, ValueEnum};
use serde::Serialize;
use throttle_proto::workload::{MwOptions, Options};
use throttle_proto::Pct;

use super::{pct_err, secs, stored};
use crate::analysis::stats::median;

use crate::models::loggps;
use crate::models::master_worker::{Expression, MwModel, Sending, VolumeScaling};
use crate::output;
use crate::report::{self, ModelFigure, ModelLine};
use crate::table::Table;

#[derive(Clone, Copy, Debug, ValueEnum)]
enum SendingArg {
    /// The master sends every task without waiting (throttle-mw does): expressions 7, 8.
    Async,
    /// Each send waits for its transfer: expression 9.
    Sync,
}

#[derive(ClapArgs, Debug)]
pub struct Args {
    /// Results database [default: ./throttle-results.db].
    #[arg(long)]
    db: Option<PathBuf>,
    /// Which of the thesis's sending models to compare with.
    #[arg(long, value_enum, default_value = "async")]
    sending: SendingArg,
    /// Print one JSON document instead of tables.
    #[arg(long)]
    json: bool,
    /// Write plots (SVG, PNG) and index.html here.
    #[arg(long)]
    report: Option<PathBuf>,
}

/// One worker count at one bandwidth.
#[derive(Debug, Serialize)]
struct Point {
    workers: usize,
    runs: usize,
    measured_seconds: f64,
    predicted_seconds: f64,
    error: f64,
    expression: Expression,
    measured_index: f64,
    predicted_index: f64,
}

/// One bandwidth of one program setting.
#[derive(Debug, Serialize)]
struct Setting {
    options: MwOptions,
    bw_pct: Pct,
    model: MwModel,
    /// Where mo and lambda came from.
    source: String,
    points: Vec<Point>,
    /// Worker counts with the lowest time and the lowest index Pi: measured, and
    /// predicted over the same worker counts.
    measured_best_time: usize,
    measured_best_index: usize,
    predicted_best_time: usize,
    predicted_best_index: usize,
    /// The root of (13)/(14) (V fixed).
    optimal_workers_root: f64,
    /// Mizutani et al.: with mo growing linearly in P (the LogGPS fit), the worker count with
    /// the lowest time up to 4x the largest measured, and whether it lies below that.
    saturation: Option<(usize, bool)>,
    mean_abs_error: f64,
}

impl Args {
    pub fn exec(self) -> crate::commands::Exit {
        let (rows, links) = stored(
            &self.db,
            "mw",
            "run a sweep over worker counts first (`throttle-ctl sweep` with workload = \"mw\")",
        )?;
        let sending = match self.sending {
            SendingArg::Async => Sending::Asynchronous,
            SendingArg::Sync => Sending::Synchronous,
        };
        let fit = loggps::fit(&links);
        let mut groups: BTreeMap<(String, Pct), Vec<&crate::store::RunRow>> = BTreeMap::new();
        for r in &rows {
            groups
                .entry((r.options.clone(), r.bw_pct))
                .or_default()
                .push(r);
        }
        let mut settings = Vec::new();
        let mut skipped = Vec::new();
        for ((options, _), runs) in groups {
            let pct = runs[0].bw_pct;
            let Ok(Options::Mw(opts)) = Options::from_json("mw", &options) else {
                skipped.push(format!(
                    "{} run(s) at {}: their options are not a master/worker program's ({options})",
                    runs.len(),
                    pct
                ));
                continue;
            };
            if opts.compute_seconds <= 0.0 || !opts.compute_seconds.is_finite() {
                skipped.push(format!(
                    "{} run(s) at {}: compute_seconds = 0 (the model's index divides by Tc)",
                    runs.len(),
                    pct
                ));
                continue;
            }
            let capacity = runs[0].capacity;
            let at = loggps::measured_at(&links, pct, capacity);
            let (lambda, mo, source) = if at.is_empty() {
                let Some(p) = pct.percent() else {
                    skipped.push(format!(
                        "{} run(s) at unlimited bandwidth: no LogGPS measured there, so no lambda",
                        runs.len()
                    ));
                    continue;
                };
                (
                    1.0 / (p / 100.0 * capacity),
                    0.0,
                    "nominal lambda, mo = 0 (no LogGPS measurement at this bandwidth: run `model loggps`)".to_string(),
                )
            } else {
                (
                    median(&at.iter().map(|l| l.gap_per_byte).collect::<Vec<_>>()),
                    median(
                        &at.iter()
                            .map(|l| l.latency + l.send_overhead + l.recv_overhead)
                            .collect::<Vec<_>>(),
                    ),
                    format!("LogGPS at {} ({} measurements)", pct, at.len()),
                )
            };
            let model = MwModel {
                mo,
                lambda,
                volume: opts.volume as f64,
                alpha: opts.alpha,
                tc: opts.compute_seconds,
                mu_m: 0.0,
            };
            let mut by_n: BTreeMap<usize, Vec<f64>> = BTreeMap::new();
            for r in &runs {
                if r.procs < 2 {
                    continue;
                }
                if let Some(t) = r.kernel_seconds.or(r.seconds) {
                    by_n.entry(r.procs as usize - 1).or_default().push(t);
                }
            }
            if by_n.is_empty() {
                skipped.push(format!(
                    "{} run(s) at {}: none with a worker (2 processes or more)",
                    runs.len(),
                    pct
                ));
                continue;
            }
            let points: Vec<Point> = by_n
                .iter()
                .map(|(&n, ts)| {
                    let m = median(ts);
                    let p = model.iteration_time(n, sending);
                    Point {
                        workers: n,
                        runs: ts.len(),
                        measured_seconds: m,
                        predicted_seconds: p,
                        error: p / m - 1.0,
                        expression: model.expression(n, sending),
                        measured_index: n as f64 * m * m / model.tc,
                        predicted_index: model.performance_index(n, sending),
                    }
                })
                .collect();
            let argmin = |f: &dyn Fn(&Point) -> f64| {
                points
                    .iter()
                    .min_by(|a, b| f(a).total_cmp(&f(b)))
                    .map(|p| p.workers)
                    .unwrap_or(1)
            };
            let max_n = points.iter().map(|p| p.workers).max().unwrap_or(1);
            let saturation = match (&fit.send, &fit.recv) {
                // mo(P) = mo + b (P - 2): the ping-pong's start-up, growing with the
                // master's fitted send and receive slopes.
                (Some(s), Some(r)) => {
                    let b = s.b + r.b;
                    Some(model.saturation(mo - 2.0 * b, b, max_n * 4, sending))
                }
                _ => None,
            };
            settings.push(Setting {
                options: opts,
                bw_pct: pct,
                model,
                source,
                measured_best_time: argmin(&|p| p.measured_seconds),
                measured_best_index: argmin(&|p| p.measured_index),
                predicted_best_time: argmin(&|p| p.predicted_seconds),
                predicted_best_index: argmin(&|p| p.predicted_index),
                optimal_workers_root: model.optimal_workers(sending, VolumeScaling::Fixed, max_n),
                saturation,
                mean_abs_error: points.iter().map(|p| p.error.abs()).sum::<f64>()
                    / points.len() as f64,
                points,
            });
        }
        for s in &skipped {
            crate::note!("not compared: {s}");
        }
        if settings.is_empty() {
            anyhow::bail!(
                "no stored master/worker runs can be compared with the model:\n  {}",
                skipped.join("\n  ")
            );
        }
        if let Some(dir) = &self.report {
            let index = write_report(dir, &settings, sending)?;
            crate::note!("report written to {}", index.display());
        }
        if self.json {
            output::print_json(&settings)?;
        } else {
            output::print(render(&settings, sending))?;
        }
        Ok(ExitCode::SUCCESS)
    }
}

fn title(s: &Setting) -> String {
    format!(
        "V={} B alpha={} Tc={} s, bw {}",
        s.options.volume, s.options.alpha, s.options.compute_seconds, s.bw_pct
    )
}

fn number(v: f64) -> String {
    if v.is_finite() {
        format!("{v:.3}")
    } else {
        "-".into()
    }
}

fn render(settings: &[Setting], sending: Sending) -> String {
    let mut out = String::from(match sending {
        Sending::Asynchronous => "Master/worker against the master/worker thesis: Tt(n) = (n+1) mo + (lambda V + Tc)/n   (7, mo >= lambda alpha V/n)\n\
         \x20                                   Tt(n) = 2 mo + ((1+(n-1) alpha) lambda V + Tc)/n   (8)\n",
        Sending::Synchronous => "Master/worker against the master/worker thesis: Tt(n) = (n+1) mo + ((1+(n-1) alpha) lambda V + Tc)/n   (9, synchronous sends)\n",
    });
    for s in settings {
        out.push_str(&format!(
            "\n{}   mo {} lambda {:.3} ns/B ({})\n",
            title(s),
            secs(s.model.mo),
            s.model.lambda * 1e9,
            s.source
        ));
        let mut t = Table::new(&[
            "workers",
            "runs",
            "measured Tt",
            "predicted Tt",
            "error",
            "expression",
            "Pi measured",
            "Pi predicted",
        ]);
        for p in &s.points {
            t.row(vec![
                p.workers.to_string(),
                p.runs.to_string(),
                secs(p.measured_seconds),
                secs(p.predicted_seconds),
                pct_err(p.error),
                p.expression.to_string(),
                number(p.measured_index),
                number(p.predicted_index),
            ]);
        }
        out.push_str(&t.render());
        out.push_str(&format!(
            "best worker count by time: measured {}, predicted {};  by index Pi: measured {}, predicted {};  mean |error| {:.1}%\n",
            s.measured_best_time,
            s.predicted_best_time,
            s.measured_best_index,
            s.predicted_best_index,
            s.mean_abs_error * 100.0
        ));
        if s.points.iter().any(|p| p.expression != Expression::E8)
            && !s.optimal_workers_root.is_finite()
        {
            out.push_str(
                "optimal workers by (13)/(14): unbounded (mo = 0: measure it with `model loggps`)",
            );
        } else if s.points.iter().any(|p| p.expression != Expression::E8) {
            out.push_str(&format!(
                "optimal workers by (13)/(14), where (7)/(9) hold: {:.1} (the thesis rounds down: {})",
                s.optimal_workers_root,
                s.optimal_workers_root.floor()
            ));
        } else {
            out.push_str(
                "(8) holds at every count measured: the master's link is the bottleneck, Tt falls with every worker and the index Pi picks the count",
            );
        }
        match s.saturation {
            Some((n, true)) => out.push_str(&format!(
                ";  Mizutani et al.'s saturation with mo linear in P: {n} workers\n"
            )),
            Some((n, false)) => out.push_str(&format!(
                ";  Mizutani et al.'s saturation with mo linear in P: beyond {n} workers\n"
            )),
            None => {
                out.push_str(";  Mizutani et al.'s saturation: needs LogGPS at 2+ process counts\n")
            }
        }
    }
    out
}

fn write_report(dir: &std::path::Path, settings: &[Setting], sending: Sending) -> Result<PathBuf> {
    let mut lines = Vec::new();
    for s in settings {
        let name = title(s);
        lines.push(line(
            format!("{name} measured"),
            s.points
                .iter()
                .map(|p| (p.workers as f64, p.measured_seconds))
                .collect(),
            true,
        ));
        lines.push(line(
            format!("{name} model"),
            s.points
                .iter()
                .map(|p| (p.workers as f64, p.predicted_seconds))
                .collect(),
            false,
        ));
    }
    let figures = vec![ModelFigure {
        name: "mw_iteration_time".into(),
        title: "Iteration time vs workers: measured and the master/worker thesis's model".into(),
        x_label: "workers".into(),
        y_label: "seconds per iteration".into(),
        lines,
    }];
    let text = render(settings, sending);
    report::write_model(
        dir,
        "Master/worker against the master/worker thesis",
        "Median iteration times of the stored runs against the thesis's expressions 7-9.",
        &text,
        &figures,
        &serde_json::to_string_pretty(settings)?,
    )
}

fn line(name: String, points: Vec<(f64, f64)>, measured: bool) -> ModelLine {
    ModelLine {
        name,
        points,
        measured,
    }
}
