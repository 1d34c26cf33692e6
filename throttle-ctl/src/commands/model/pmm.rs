//! `model pmm`: stored Fox PMM runs against the Fox PMM timing model (Li, Qiu, Fox).

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Result;
use clap::Args as ClapArgs;
use throttle_analysis::models::loggps;
use throttle_analysis::models::pmm::{self, LinkCost, PmmComparison, PmmRun, PmmShape};
use throttle_analysis::table::Table;
use throttle_proto::workload::{Options, PmmOptions};
use throttle_proto::Pct;

use super::{metric, pct_err, secs, stored};
use crate::output;
use crate::report::{self, ModelFigure, ModelLine};
use crate::store::RunRow;

#[derive(ClapArgs, Debug)]
pub struct Args {
    /// Results database [default: ./throttle-results.db].
    #[arg(long)]
    db: Option<PathBuf>,
    /// Use this Tflops (seconds per floating-point operation) instead of the kernel time
    /// the runs reported.
    #[arg(long)]
    tflops: Option<f64>,
    /// Print one JSON document instead of tables.
    #[arg(long)]
    json: bool,
    /// Write plots (SVG, PNG) and index.html here.
    #[arg(long)]
    report: Option<PathBuf>,
}

/// A stored run as the model sees it, or why it cannot be one.
fn pmm_run(r: &RunRow, tflops: Option<f64>) -> Result<PmmRun, &'static str> {
    let Ok(Options::Pmm(PmmOptions { size, bcast, .. })) =
        Options::from_json(&r.workload, &r.options)
    else {
        return Err("its options are not a PMM run's (matrix size and broadcast)");
    };
    let grid = (r.procs as f64).sqrt().round() as usize;
    if grid * grid != r.procs as usize || grid == 0 || size % grid != 0 {
        return Err("its process count is not a square grid dividing the matrix");
    }
    let shape = PmmShape { size, grid, bcast };
    Ok(PmmRun {
        shape,
        ranks_per_node: r.ranks_per_node,
        pct: r.bw_pct,
        capacity: r.capacity,
        seconds: r.kernel_seconds.or(r.seconds).ok_or("it has no time")?,
        max_compute_seconds: match tflops {
            Some(t) => Some(t * shape.flops() / shape.procs() as f64),
            None => metric(r, "max_compute_seconds"),
        },
    })
}

impl Args {
    pub fn exec(self) -> crate::commands::Exit {
        if let Some(t) = self.tflops {
            if !(t.is_finite() && t > 0.0 && t < 1.0) {
                anyhow::bail!(
                    "--tflops is seconds per operation: a small positive number such as 2.5e-11"
                );
            }
        }
        let (rows, links) = stored(
            &self.db,
            "pmm",
            "run a PMM sweep first (`throttle-ctl sweep` with workload = \"pmm\")",
        )?;
        let mut runs = Vec::new();
        let mut unusable: std::collections::BTreeMap<&str, usize> = Default::default();
        for r in &rows {
            match pmm_run(r, self.tflops) {
                Ok(run) => runs.push(run),
                Err(why) => *unusable.entry(why).or_default() += 1,
            }
        }
        for (why, n) in &unusable {
            crate::note!("warning: {n} stored PMM run(s) left out: {why}");
        }
        let link = |p: Pct, capacity: f64| -> Option<LinkCost> {
            loggps::cost_at(&links, p, capacity).or_else(|| {
                Some(LinkCost {
                    tcomm: 8.0 / (p.percent()? / 100.0 * capacity),
                    tstartup: 0.0,
                    source: "nominal".into(),
                })
            })
        };
        let c = pmm::compare(&runs, link);
        if c.rows.is_empty() {
            let mut why: Vec<String> = unusable
                .iter()
                .map(|(w, n)| format!("{n} run(s): {w}"))
                .collect();
            why.extend(c.skipped.iter().cloned());
            anyhow::bail!(
                "no stored PMM configuration can be compared with the model:\n  {}\n(runs stored before schema 2 did not keep their kernel time: pass --tflops, or run the sweep again)",
                why.join("\n  ")
            );
        }
        if let Some(dir) = &self.report {
            let index = write_report(dir, &c)?;
            crate::note!("report written to {}", index.display());
        }
        if self.json {
            output::print_json(&c)?;
        } else {
            output::print(render(&c))?;
        }
        Ok(ExitCode::SUCCESS)
    }
}

fn config(s: &PmmShape) -> String {
    format!("{}x{} M={} {}", s.grid, s.grid, s.size, s.bcast)
}

fn render(c: &PmmComparison) -> String {
    let mut t = Table::new(&[
        "grid, size, bcast",
        "bw",
        "runs",
        "measured",
        "paper c(q)",
        "error",
        "tree c(q)",
        "error",
        "compute / comm (paper)",
        "Tcomm per element",
        "",
    ]);
    let mut notes = Vec::new();
    for r in &c.rows {
        let mark = match &r.caveat {
            Some(why) => {
                notes.push(format!("{} at {}: {why}", config(&r.shape), r.bw_pct));
                "*"
            }
            None => "",
        };
        t.row(vec![
            config(&r.shape),
            r.bw_pct.to_string(),
            r.runs.to_string(),
            secs(r.measured_seconds),
            secs(r.predicted.seconds),
            pct_err(r.error),
            secs(r.predicted_tree.seconds),
            pct_err(r.error_tree),
            format!(
                "{} / {}",
                secs(r.predicted.compute_seconds),
                secs(r.predicted.comm_seconds + r.predicted.startup_seconds)
            ),
            format!("{:.1} ns ({})", r.params.tcomm * 1e9, r.tcomm_source),
            mark.into(),
        ]);
    }
    let mut out = String::from(
        "Fox PMM against the Fox PMM model (Li, Qiu, Fox): T = 2M^3/N Tflops + q c(q) m^2 Tcomm + start-ups\n\
         paper c(q) (Table 2): flat (q+1)/2, binomial (1+ceil(log2 q))/2, pipelined 1\n\
         tree c(q): the paper's averaging argument on throttle-pmm's own broadcast tree (mean arrival + roll)\n\
         Tflops from the runs' kernel time (the slowest rank)\n",
    );
    out.push_str(&t.render_in(crate::output::terminal_width()));
    for n in &notes {
        out.push_str(&format!("* {n}\n"));
    }
    for s in &c.skipped {
        out.push_str(&format!("not compared: {s}\n"));
    }
    match (
        c.max_abs_error_where_assumptions_hold,
        c.max_abs_error_tree,
    ) {
        (Some(e), Some(t)) => out.push_str(&format!(
            "largest |error| where the model's assumptions hold: paper {:.1}%, tree {:.1}% (target 5%: {})\n",
            e * 100.0,
            t * 100.0,
            if e.min(t) <= 0.05 { "met" } else { "NOT met" }
        )),
        _ => out.push_str("no configuration where the model's assumptions hold (see *)\n"),
    }
    if c.max_abs_error_tree.is_some_and(|e| e > 0.05) {
        out.push_str(
            "the model has no contention: not for CPU (on a local cluster whose ranks and agents outnumber the cores the\n             agents' copying and the kernels share them) and not between a node's broadcast and roll; it under-predicts there\n",
        );
    }
    if c.rows.iter().any(|r| r.tcomm_source == "nominal") {
        out.push_str("Tcomm is nominal (8 bytes / (pct x capacity)) where no LogGPS measurement is stored: run `throttle-ctl model loggps` to measure it\n");
    }
    if !c.checks.is_empty() {
        let mut k = Table::new(&[
            "bcast",
            "bw",
            "points",
            "fitted slope of h vs x",
            "Tcomm/Tflops",
            "error",
            "R^2",
        ]);
        for ch in &c.checks {
            k.row(vec![
                ch.bcast.to_string(),
                ch.bw_pct.to_string(),
                ch.points.len().to_string(),
                format!("{:.4e}", ch.slope),
                format!("{:.4e}", ch.expected_slope),
                pct_err(ch.error),
                format!("{:.3}", ch.r2),
            ]);
        }
        out.push_str("\nparallel overhead h = (N T - T1)/T1 against x = q c(q)/(2M) (the paper: the slope is Tcomm/Tflops, within 1.4-3.1%)\n");
        out.push_str(&k.render_in(crate::output::terminal_width()));
    }
    out
}

/// Points measured and points of the model, of one configuration.
type MeasuredAndModel = (Vec<(f64, f64)>, Vec<(f64, f64)>);

fn write_report(dir: &std::path::Path, c: &PmmComparison) -> Result<PathBuf> {
    use std::collections::BTreeMap;
    let mut lines: BTreeMap<String, MeasuredAndModel> = BTreeMap::new();
    for r in &c.rows {
        let Some(p) = r.bw_pct.percent() else {
            continue;
        };
        let e = lines.entry(config(&r.shape)).or_default();
        e.0.push((p, r.measured_seconds));
        e.1.push((p, r.predicted_tree.seconds));
    }
    let mut time = Vec::new();
    for (name, (mut measured, mut model)) in lines {
        measured.sort_by(|a, b| a.0.total_cmp(&b.0));
        model.sort_by(|a, b| a.0.total_cmp(&b.0));
        time.push(line(format!("{name} measured"), measured, true));
        time.push(line(format!("{name} model (tree c)"), model, false));
    }
    let mut overhead = Vec::new();
    for ch in &c.checks {
        let name = format!("{} {}", ch.bcast, ch.bw_pct);
        let mut pts = ch.points.clone();
        pts.sort_by(|a, b| a.0.total_cmp(&b.0));
        let (x0, x1) = (pts[0].0, pts[pts.len() - 1].0);
        overhead.push(line(format!("{name} measured h"), pts, true));
        overhead.push(line(
            format!("{name} slope Tcomm/Tflops"),
            vec![
                (x0, ch.intercept + ch.expected_slope * x0),
                (x1, ch.intercept + ch.expected_slope * x1),
            ],
            false,
        ));
    }
    let figures = vec![
        ModelFigure {
            name: "pmm_time".into(),
            title: "PMM time vs bandwidth: measured and model".into(),
            x_label: "bandwidth (% of capacity)".into(),
            y_label: "seconds".into(),
            lines: time,
        },
        ModelFigure {
            name: "pmm_overhead".into(),
            title: "Parallel overhead vs q c(q) / 2M".into(),
            x_label: "x = q c(q) / (2M)".into(),
            y_label: "h".into(),
            lines: overhead,
        },
    ];
    let text = render(c);
    report::write_model(
        dir,
        "Fox PMM against the Fox PMM model (Li, Qiu, Fox)",
        "Measured multiplication times (medians of the stored runs) against T = 2M^3/N Tflops + q c(q) m^2 Tcomm + start-ups.",
        &text,
        &figures,
        &serde_json::to_string_pretty(c)?,
    )
}

fn line(name: String, points: Vec<(f64, f64)>, measured: bool) -> ModelLine {
    ModelLine {
        name,
        points,
        measured,
    }
}
