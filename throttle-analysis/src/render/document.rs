//! The answer as a document: `analyze --export-markdown` (GitHub-flavoured Markdown
//! tables, as hyperfine writes its own) and `analyze --export-csv` (one row per figure).
//!
//! Built from [`Analysis`] alone, the structure `--json` prints: each figure's row is
//! made once ([`figures`]) and written either way. Every header says its unit: "% of the
//! link" for bandwidth, "CTI %" for a completion-time increment, "s" (or "rate") for a
//! time; a bare "%" is never either.

use anyhow::Result;

use crate::method::demand::Censored;
use crate::render::{level, projected_from, saturation_table, verdict_word};
use crate::table::{escape_markdown as md, Table};
use crate::trust::backtest::{Model, Verdict};
use crate::trust::bootstrap::{Covers, Interval};
use crate::{Analysis, Demand, Projection, TimeUnit};

/// One figure of the answer: a demand measured at a size, or projected to one.
#[derive(Clone, Debug, PartialEq)]
pub struct Figure {
    /// `None`: measured; `Some`: projected by that model.
    pub model: Option<Model>,
    /// The projecting model's verdict in a word or two (`TRUSTED`, ...).
    pub verdict: Option<&'static str>,
    pub procs: u32,
    pub cti: f64,
    /// Percent of the link; a censored measured demand is its bound (what is known).
    pub demand: f64,
    pub censored: Censored,
    pub interval: Option<Interval>,
    /// The measured steps the demand lies between (measured figures).
    pub between: Option<[f64; 2]>,
    pub below_noise: bool,
    pub held_out: bool,
    /// A projection at or past 100% of the link: the link saturates first.
    pub saturates: bool,
    /// A projection from a censored demand at p*.
    pub from_censored: bool,
    /// What `render` writes for a projection (its bound or what it comes from).
    shown: String,
    /// A projection to a measured (held-out) size: the measured demand, its censoring
    /// and whether it is below the noise floor, and the error, points of the link.
    pub measured: Option<(f64, Censored, bool)>,
    pub error_pp: Option<f64>,
    pub error_is_bound: bool,
}

/// Every figure: the measured demands (by size, then level), then each model's
/// projections (by size, then level).
pub fn figures(a: &Analysis) -> Vec<Figure> {
    let mut out: Vec<Figure> = Vec::new();
    let mut demand: Vec<&Demand> = a.demand.iter().collect();
    demand.sort_by(|x, y| x.procs.cmp(&y.procs).then(x.cti.total_cmp(&y.cti)));
    for d in demand {
        out.push(Figure {
            model: None,
            verdict: None,
            procs: d.procs,
            cti: d.cti,
            demand: d.bound.unwrap_or(d.bw_pct),
            censored: d.censored,
            interval: d.interval,
            between: d.between,
            below_noise: d.below_noise,
            held_out: d.held_out || a.held_out.contains(&d.procs),
            saturates: false,
            from_censored: false,
            shown: String::new(),
            measured: None,
            error_pp: None,
            error_is_bound: false,
        });
    }
    let mut projected = |model: Model, verdict: &Verdict, projection: &[Projection]| {
        let mut rows: Vec<&Projection> = projection.iter().collect();
        rows.sort_by(|x, y| x.procs.cmp(&y.procs).then(x.cti.total_cmp(&y.cti)));
        for p in rows {
            // The terminal's projection tables: from a censored demand at p* for DC only.
            let at_star = match model {
                Model::Dc => a.demand_at_star(p.cti),
                Model::Traffic => None,
            };
            out.push(Figure {
                model: Some(model),
                verdict: Some(verdict_word(verdict)),
                procs: p.procs,
                cti: p.cti,
                demand: p.bw_pct,
                censored: Censored::None,
                interval: p.interval.or(p.noise_interval),
                between: None,
                below_noise: false,
                held_out: false,
                saturates: p.saturates,
                from_censored: p.from_censored,
                shown: projected_from(p.bw_pct, p.from_censored, at_star),
                measured: p.measured_bw_pct.map(|m| {
                    (
                        m,
                        p.measured_censored.unwrap_or(Censored::None),
                        p.measured_below_noise,
                    )
                }),
                error_pp: p.error_pp,
                error_is_bound: p.error_is_bound,
            });
        }
    };
    projected(Model::Dc, &a.verdict, &a.projection);
    if let Some(t) = &a.traffic {
        projected(Model::Traffic, &t.verdict, &t.projection);
    }
    out
}

fn model_name(m: Model) -> &'static str {
    match m {
        Model::Dc => "DC",
        Model::Traffic => "traffic",
    }
}

fn censored_name(c: Censored) -> &'static str {
    match c {
        Censored::None => "none",
        Censored::Below => "below",
        Censored::Above => "above",
    }
}

fn covers(i: &Interval) -> &'static str {
    match i.covers {
        Covers::Noise => "noise",
        Covers::NoiseAndModelError => "noise and model error",
        Covers::Median => "median",
    }
}

/// The columns of [`csv()`].
pub const CSV_COLUMNS: [&str; 20] = [
    "figure",
    "model",
    "verdict",
    "procs",
    "cti_pct",
    "demand_pct_of_link",
    "censored",
    "interval_low_pct_of_link",
    "interval_high_pct_of_link",
    "interval_covers",
    "step_low_pct_of_link",
    "step_high_pct_of_link",
    "below_noise_floor",
    "held_out",
    "saturates",
    "from_censored_demand",
    "measured_pct_of_link",
    "measured_censored",
    "error_pp",
    "error_is_bound",
];

/// The figures as CSV, one row each ([`CSV_COLUMNS`]), numbers as `--json` holds them.
pub fn csv(a: &Analysis) -> Result<String> {
    let mut out = ::csv::Writer::from_writer(Vec::new());
    out.write_record(CSV_COLUMNS)?;
    let num = |v: Option<f64>| v.map(|x| x.to_string()).unwrap_or_default();
    let yes = |b: bool| if b { "true" } else { "false" }.to_string();
    for f in figures(a) {
        out.write_record([
            if f.model.is_some() {
                "projected"
            } else {
                "measured"
            }
            .to_string(),
            f.model.map(model_name).unwrap_or_default().to_string(),
            f.verdict.unwrap_or_default().to_string(),
            f.procs.to_string(),
            f.cti.to_string(),
            f.demand.to_string(),
            censored_name(f.censored).to_string(),
            num(f.interval.map(|i| i.low)),
            num(f.interval.map(|i| i.high)),
            f.interval
                .as_ref()
                .map(covers)
                .unwrap_or_default()
                .to_string(),
            num(f.between.map(|b| b[0])),
            num(f.between.map(|b| b[1])),
            yes(f.below_noise),
            yes(f.held_out),
            yes(f.saturates),
            yes(f.from_censored),
            num(f.measured.map(|m| m.0)),
            f.measured
                .map(|m| censored_name(m.1))
                .unwrap_or_default()
                .to_string(),
            num(f.error_pp),
            yes(f.error_is_bound),
        ])?;
    }
    Ok(String::from_utf8(out.into_inner()?)?)
}

/// The answer as GitHub-flavoured Markdown: the bottom line, the completion time per
/// point, the noise floors, the demands, the demand constant, the projections with their
/// intervals and verdicts, the saturation sizes, the backtests' verdicts and the warnings.
/// `capacity`: the link's, in words, when known.
pub fn markdown(a: &Analysis, capacity: Option<&str>) -> String {
    let u = a.time_unit;
    // A rate is shown as the rate the program printed (the analysis works on its
    // inverse); the fit's coefficients stay in the analysed unit.
    let name = a.time_name();
    let (time, fitted) = match u {
        TimeUnit::Seconds => (name.as_str(), "s"),
        TimeUnit::InverseRate => (name.as_str(), "1/rate"),
    };
    let coefficient = crate::table::number;
    let mut out = format!("# Bandwidth demand of {}\n\n", md(&a.series));
    out.push_str("## Bottom line\n\n");
    for l in &a.bottom_line.lines {
        out.push_str(&format!("- {}\n", md(l)));
    }
    if let Some(n) = &a.bottom_line.next {
        out.push_str(&format!("- next: {}\n", md(n)));
    }
    out.push_str(&format!(
        "\nBandwidth is in % of the link{}; CTI % is the completion-time increment over the run at 100% of the link. {}. Times ({time}): {}.\n",
        capacity.map(|c| format!(" ({})", md(c))).unwrap_or_default(),
        md(&crate::render::runs_counted(a)),
        md(&a.time_source),
    ));
    if let Some(r) = &a.regression {
        out.push_str(&format!(
            "\nStrong scaling at 100% of the link: {} ({fitted}), R^2 {:.3}.\n",
            md(&r.formula(coefficient)),
            r.r2
        ));
    }

    out.push_str(&points_md(a, time));
    out.push_str(&noise_md(a));
    let all = figures(a);
    out.push_str(&demand_md(a, &all));
    out.push_str(&projection_md(a, &all));
    out.push_str(&tail_md(a));
    out
}

/// The completion time per point (`time`: the unit shown, s or rate).
fn points_md(a: &Analysis, time: &str) -> String {
    let mut out = String::new();
    let u = a.time_unit;
    let one = |v: f64| format!("{v:.1}");
    out.push_str("\n## Completion time per point\n\nThe median of the runs, its order-statistic interval and that interval's confidence, the fastest and slowest run, and the CTI of the median.\n\n");
    let h = |what: &str| format!("{what} ({time})");
    let mut t = Table::new(&[
        "procs",
        "bandwidth (% of the link)",
        "runs",
        &h("median"),
        &h("interval low"),
        &h("interval high"),
        "interval confidence",
        &h("min"),
        &h("max"),
        "CV",
        "CTI %",
    ]);
    for p in &a.points {
        let (low, high) = u.format_interval(p.interval.low, p.interval.high);
        let (min, max) = u.format_interval(p.min, p.max);
        t.row(vec![
            p.procs.to_string(),
            format!("{}", p.bw_pct),
            p.n.to_string(),
            u.format(p.median),
            low,
            high,
            format!("{:.0}%", p.coverage * 100.0),
            min,
            max,
            format!("{:.3}", p.cv),
            p.cti.map(one).unwrap_or_else(|| "-".into()),
        ]);
    }
    out.push_str(&t.markdown());

    out
}

/// The noise floor per size.
fn noise_md(a: &Analysis) -> String {
    let mut out = String::new();
    let one = |v: f64| format!("{v:.1}");
    if !a.noise.is_empty() {
        out.push_str("\n## Noise floor\n\nThe smallest CTI each size's repeats resolve (90%; pooled run-to-run CV). Demands below it are no measurement.\n\n");
        let mut t = Table::new(&[
            "procs",
            "run CV",
            "runs",
            "baseline repeats",
            "step repeats",
            "noise floor (CTI %)",
        ]);
        for f in &a.noise {
            t.row(vec![
                f.procs.to_string(),
                format!("{:.3}", f.run_cv),
                f.runs.to_string(),
                f.baseline_repeats.to_string(),
                f.step_repeats.to_string(),
                one(f.cti_pct),
            ]);
        }
        out.push_str(&t.markdown());
    }

    out
}

/// The measured demand per size and level, and the demand constant.
fn demand_md(a: &Analysis, all: &[Figure]) -> String {
    let mut out = String::new();
    let one = |v: f64| format!("{v:.1}");
    out.push_str(&format!(
        "\n## Bandwidth demand\n\nThe bandwidth (% of the link) each size needs to stay within each CTI level, read along {}; `<B`: at most B (the lowest step sufficed), `>B`: more than B (even the highest throttled step was too slow). The interval is the 90% bootstrap over runs.\n\n",
        a.interpolation.describe()
    ));
    let mut t = Table::new(&[
        "procs",
        "CTI %",
        "demand (% of the link)",
        "interval low (% of the link)",
        "interval high (% of the link)",
        "between steps (% of the link)",
        "note",
    ]);
    for f in all.iter().filter(|f| f.model.is_none()) {
        let mut note = Vec::new();
        if f.held_out {
            note.push("held out");
        }
        if f.below_noise {
            note.push("below the noise floor: not a measurement");
        }
        t.row(vec![
            f.procs.to_string(),
            format!("{}", f.cti),
            level(f.demand, f.censored, false),
            f.interval.map(|i| one(i.low)).unwrap_or_else(|| "-".into()),
            f.interval
                .map(|i| one(i.high))
                .unwrap_or_else(|| "-".into()),
            f.between
                .map(|[lo, hi]| crate::render::steps(lo, hi))
                .unwrap_or_else(|| "-".into()),
            note.join("; "),
        ]);
    }
    out.push_str(&t.markdown());
    out.push_str(&match a.dc {
        Some(dc) => format!(
            "\nDemand constant DC = {dc:.3}{} from {} pairs of sizes.\n",
            a.dc_interval
                .map(|i| format!(" (90% interval {:.3} to {:.3})", i.low, i.high))
                .unwrap_or_default(),
            a.dc_pairs.len()
        ),
        None => "\nDemand constant: not available.\n".into(),
    });

    out
}

/// The projected demands, with their intervals and verdicts.
fn projection_md(a: &Analysis, all: &[Figure]) -> String {
    let mut out = String::new();
    let one = |v: f64| format!("{v:.1}");
    let projected: Vec<&Figure> = all.iter().filter(|f| f.model.is_some()).collect();
    if !projected.is_empty() {
        out.push_str(&format!(
            "\n## Projection\n\nDC: from p* = {} procs, demand ~ DC x sqrt(p){}. The verdict is the model's backtest's (below). The interval is where a measurement at that size would fall, 9 times in 10: its noise and reading and the model's error where that could be estimated (else noise only). At or past 100% of the link the link saturates: no demand.\n\n",
            a.p_star.map(|p| p.to_string()).unwrap_or_else(|| "-".into()),
            if a.traffic.is_some() {
                "; traffic: T(w) = T(100% of the link) + k V/C (1/w - 1)"
            } else {
                ""
            }
        ));
        let mut t = Table::new(&[
            "model",
            "verdict",
            "procs",
            "CTI %",
            "projected demand (% of the link)",
            "interval low (% of the link)",
            "interval high (% of the link)",
            "interval covers",
            "measured (% of the link)",
            "error (points of the link)",
        ]);
        for f in projected {
            let side = if f.measured.is_some_and(|m| m.1 == Censored::Above) {
                "<= "
            } else {
                ">= "
            };
            t.row(vec![
                f.model.map(model_name).unwrap_or_default().into(),
                f.verdict.unwrap_or_default().into(),
                f.procs.to_string(),
                format!("{}", f.cti),
                // `shown` says "saturated" at or past the link (`projected_from`).
                f.shown.clone(),
                f.interval.map(|i| one(i.low)).unwrap_or_else(|| "-".into()),
                f.interval
                    .map(|i| one(i.high))
                    .unwrap_or_else(|| "-".into()),
                f.interval
                    .as_ref()
                    .map(|i| match i.covers {
                        Covers::NoiseAndModelError => "noise and model error",
                        _ => "noise only",
                    })
                    .unwrap_or("-")
                    .into(),
                f.measured
                    .map(|(m, c, noise)| level(m, c, noise))
                    .unwrap_or_else(|| "-".into()),
                f.error_pp
                    .map(|e| format!("{}{e:+.1}", if f.error_is_bound { side } else { "" }))
                    .unwrap_or_else(|| "-".into()),
            ]);
        }
        out.push_str(&t.markdown());
    }
    out
}

/// The saturation sizes, the backtests' verdicts, the warnings and what the intervals are.
fn tail_md(a: &Analysis) -> String {
    let mut out = String::new();
    if !a.saturation.is_empty() {
        out.push_str(&format!(
            "\n## Saturation\n\nThe smallest size (procs) at which the link saturates, by each model with its verdict ({}).\n\n",
            md(crate::render::SATURATION_MEANING)
        ));
        out.push_str(&saturation_table(a).markdown());
    }
    out.push_str("\n## Backtest\n\n");
    out.push_str(&format!("- DC: {}\n", md(&a.verdict.text())));
    if let Some(t) = &a.traffic {
        out.push_str(&format!("- traffic: {}\n", md(&t.verdict.text())));
    }
    out.push_str(&format!(
        "- {}\n- every check: `throttle-ctl analyze --backtest` on the same data\n",
        md(&a.supported)
    ));
    if !a.warnings.is_empty() {
        out.push_str("\n## Warnings\n\n");
        for w in &a.warnings {
            out.push_str(&format!("- {}\n", md(w)));
        }
    }
    out.push_str(&format!("\nIntervals: {}.\n", md(&a.intervals)));
    out
}
