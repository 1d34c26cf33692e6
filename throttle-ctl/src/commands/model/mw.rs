//! `model mw`: stored master/worker runs against the closed forms of the master/worker thesis and the
//! saturation point of Mizutani et al..

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Result;
use clap::{Args as ClapArgs, ValueEnum};
use throttle_analysis::models::master_worker::{
    self, Expression, MwComparison, MwRun, MwSetting, Sending,
};
use throttle_analysis::table::Table;

use super::{pct_err, secs, stored};
use crate::output;
use crate::report::{self, ModelFigure, ModelLine};
use crate::store::RunRow;

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

/// The stored runs as the model's comparison reads them: the iteration's time is the
/// kernel's, else the whole run's.
fn runs(rows: &[RunRow]) -> Vec<MwRun> {
    rows.iter()
        .map(|r| MwRun {
            options: r.options.clone(),
            pct: r.bw_pct,
            capacity: r.capacity,
            procs: r.procs,
            seconds: r.kernel_seconds.or(r.seconds),
        })
        .collect()
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
        let MwComparison { settings, skipped } =
            master_worker::compare(&runs(&rows), &links, sending);
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

fn title(s: &MwSetting) -> String {
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

fn render(settings: &[MwSetting], sending: Sending) -> String {
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
        out.push_str(&t.render_in(crate::output::terminal_width()));
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

fn write_report(
    dir: &std::path::Path,
    settings: &[MwSetting],
    sending: Sending,
) -> Result<PathBuf> {
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
