//! The analysis as the tables a person reads (`analyze` without `--json`, and `demo`).
//!
//! Every figure is printed with what bounds it: `<`/`>` for censored demands (and for
//! errors computed against them and projections from them, which are bounds too),
//! `(noise)` after levels below the noise floor, and each interval with what it is.

pub mod bottom_line;
pub mod document;
pub mod glossary;
pub mod headline;
pub mod latency;
pub mod problem;

use crate::method::demand::Censored;
use crate::table::{wrap, Table};
use crate::trust::backtest::{Check, Model, Verdict};
use crate::{Analysis, Demand};

/// A demand as the tables write it: its censoring mark in front (`<`, `>`), `(noise)`
/// after it when the level is below the size's noise floor.
pub fn level(v: f64, censored: Censored, below_noise: bool) -> String {
    format!(
        "{}{v:.1}{}",
        censored.mark(),
        if below_noise { " (noise)" } else { "" }
    )
}

/// How a projection from a censored demand at p* is written: `<X` when that demand was
/// censored below (it starts from the lowest step, which the demand is at most, so the
/// projection is at most X too); `X (from >B)` when censored above (it starts from a value
/// read up to 100%, not from the bound B the demand is known to exceed: not a bound). A
/// projection at or past the full link says `saturated`: no link of this capacity keeps
/// the program within the level there.
pub fn projected_from(x: f64, from_censored: bool, at_star: Option<&Demand>) -> String {
    let saturated = if x >= 100.0 { " saturated" } else { "" };
    match (from_censored, at_star) {
        (false, _) => format!("{x:.1}{saturated}"),
        // At most x: past the link or not, unknown.
        (true, Some(d)) if d.censored == Censored::Below => format!("<{x:.1}"),
        (true, Some(Demand { bound: Some(b), .. })) => {
            format!("{x:.1} (from >{b:.1}){saturated}")
        }
        (true, _) => format!("{x:.1} (from a censored demand){saturated}"),
    }
}

fn interval(i: Option<(f64, f64)>) -> String {
    i.map(|(l, h)| format!(" [{l:.1}-{h:.1}]"))
        .unwrap_or_default()
}

/// Two measured steps, as few digits as they need: `60-70`, `62.5-65`.
pub fn steps(lo: f64, hi: f64) -> String {
    let short = |x: f64| {
        let s = format!("{x:.2}");
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    };
    format!("{}-{}", short(lo), short(hi))
}

/// What to print beyond the default tables.
#[derive(Clone, Copy, Debug, Default)]
pub struct Detail {
    /// The backtest's every check, not only its verdict.
    pub backtest: bool,
}

/// The tables a person reads.
pub fn render(a: &Analysis, levels: &[f64], capacity: Option<&str>) -> String {
    render_with(a, levels, capacity, Detail::default())
}

/// The runs the analysis rests on, and every stored run of the series it does not count,
/// with why: `N runs analysed, at least R repeat(s) per point; not counted: F failed, G
/// flagged (...)`. The terminal, the Markdown and the report say it in these words.
pub fn runs_counted(a: &Analysis) -> String {
    let mut not = Vec::new();
    if a.failed_runs > 0 {
        not.push(format!("{} failed", a.failed_runs));
    }
    if a.flagged_runs > 0 && !a.flagged_kept {
        not.push(format!(
            "{} flagged (their links did not run at their setting; --keep-flagged keeps them)",
            a.flagged_runs
        ));
    }
    if a.without_traffic_runs > 0 {
        not.push(format!(
            "{} of sizes left out, no byte of theirs through the agents (no demand there)",
            a.without_traffic_runs
        ));
    }
    if a.unlimited_runs > 0 {
        not.push(format!(
            "{} at unlimited bandwidth (no CTI against the full link)",
            a.unlimited_runs
        ));
    }
    if a.latency_runs > 0 {
        not.push(format!(
            "{} latency points (the latency answer's)",
            a.latency_runs
        ));
    }
    let kept = if a.flagged_kept && a.flagged_runs > 0 {
        format!(
            ", {} of them flagged and KEPT (--keep-flagged)",
            a.flagged_runs
        )
    } else {
        String::new()
    };
    format!(
        "{} runs analysed{kept}, at least {} repeat(s) per point; {}",
        a.runs,
        a.min_repeats,
        if not.is_empty() {
            "every stored run of the series counted".to_string()
        } else {
            format!("not counted: {}", not.join(", "))
        }
    )
}

pub fn render_with(a: &Analysis, levels: &[f64], capacity: Option<&str>, detail: Detail) -> String {
    let mut out = crate::render::headline::render(a, levels, capacity);
    out.push_str(&format!(
        "{}: {}\ntimes: {}\n\n",
        a.series,
        runs_counted(a),
        a.time_source
    ));
    regression(&mut out, a);
    let u = a.time_unit;
    out.push_str(&format!(
        "completion time ({}, its order-statistic interval and what it covers, CV) and CTI per point\n",
        a.time_head()
    ));
    let mut t = Table::new(&[
        "procs",
        "bw (% of link)",
        "n",
        &a.time_head(),
        "interval",
        "covers",
        "CV",
        "CTI %",
    ]);
    for p in &a.points {
        t.row(vec![
            p.procs.to_string(),
            format!("{}", p.bw_pct),
            p.n.to_string(),
            u.format(p.median),
            {
                let (lo, hi) = u.format_interval(p.interval.low, p.interval.high);
                format!("[{lo}, {hi}]")
            },
            // One run has no interval of its median: nothing it covers.
            if p.n < 2 {
                "-".into()
            } else {
                format!("{:.0}%", p.coverage * 100.0)
            },
            format!("{:.3}", p.cv),
            p.cti
                .map(|c| format!("{c:.1}"))
                .unwrap_or_else(|| "-".into()),
        ]);
    }
    out.push_str(&t.render());
    noise(&mut out, a);
    demand(&mut out, a, levels, capacity);
    match a.dc {
        Some(dc) => out.push_str(&format!(
            "demand constant DC = {dc:.3}{}  ({} pairs{})\n",
            a.dc_interval
                .map(|i| format!(" [{:.3}-{:.3}]", i.low, i.high))
                .unwrap_or_else(|| " [no interval: too often unavailable in resamples]".into()),
            a.dc_pairs.len(),
            if a.dc_pairs_censored > 0 {
                format!(
                    ", {} left out: censored, below the noise or missing",
                    a.dc_pairs_censored
                )
            } else {
                String::new()
            }
        )),
        None => out.push_str("demand constant: not available\n"),
    }
    projection(&mut out, a, levels);
    if !a.saturation.is_empty() {
        out.push_str(&format!(
            "\nsaturation, by each projection with its verdict ({SATURATION_MEANING})\n"
        ));
        out.push_str(&saturation_table(a).render());
    }
    traffic(&mut out, a, levels);
    backtest(&mut out, a, detail);
    if let Some(l) = &a.latency {
        crate::render::latency::render(&mut out, l, levels);
    }
    out.push_str(&format!(
        "intervals [a-b]: {}; a projection's [a-b] is what a measurement at that size would show: its noise, how one level reads there, and the model's error (its lack of fit, its growth with the distance projected from the backtest and other programs', the averaged forms' disagreement; --json: model_error), [a-b]* is run-to-run noise only (no model error could be estimated)\n",
        a.intervals
    ));
    if !a.warnings.is_empty() {
        out.push('\n');
        for w in &a.warnings {
            out.push_str(&format!("warning: {w}\n"));
        }
    }
    if let Some(f) = crate::render::glossary::footer(&out) {
        out.push_str(&format!("\n{f}\n"));
    }
    wrap_long(&out)
}

/// Every sentence of `text` over [`LINE`](crate::table::LINE) characters wrapped at
/// words, its continuation indented two more than the line. A table's row (columns
/// apart by two spaces or more) stays whole: its columns are read down the table.
fn wrap_long(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + text.len() / 50);
    for l in text.lines() {
        let body = l.trim_start_matches(' ');
        if body.contains("  ") {
            out.push_str(l);
        } else {
            out.push_str(&wrap(l, &" ".repeat(l.len() - body.len() + 2)));
        }
        out.push('\n');
    }
    out
}

/// The short form (the demo's default): the bottom line, the runs it rests on, each
/// projection's backtest verdict and the warnings, every line at most [`LINE`](crate::table::LINE)
/// characters; `more` says where the whole analysis is.
pub fn summary(a: &Analysis, levels: &[f64], capacity: Option<&str>, more: &str) -> String {
    let mut out = crate::render::headline::render(a, levels, capacity);
    let mut lines = vec![format!("{}; times: {}", runs_counted(a), a.time_source)];
    lines.push(format!("backtest (DC): {}", a.verdict.text()));
    if let Some(t) = &a.traffic {
        lines.push(format!("backtest (traffic): {}", t.verdict.text()));
    }
    lines.extend(a.warnings.iter().map(|w| format!("warning: {w}")));
    lines.push(more.to_string());
    for l in lines.iter().flat_map(|l| l.lines()) {
        out.push_str(&wrap(l, "  "));
        out.push('\n');
    }
    out
}

/// What a saturation size means, by model.
pub const SATURATION_MEANING: &str = "DC: where the projected demand reaches 100% of the link; traffic: where even the full link makes the program slower by the level than an unlimited network would; [a-b]: run-to-run noise and model error";

/// The saturation sizes, one row per model and level: the terminal and the report show
/// this one table.
pub fn saturation_table(a: &Analysis) -> Table {
    let mut t = Table::new(&["model", "verdict", "CTI %", "procs", "interval"]);
    let verdict = |m: Model| match m {
        Model::Dc => &a.verdict,
        Model::Traffic => a.traffic.as_ref().map_or(&a.verdict, |t| &t.verdict),
    };
    for s in &a.saturation {
        t.row(vec![
            match s.model {
                Model::Dc => "DC".into(),
                Model::Traffic => "traffic".into(),
            },
            verdict_word(verdict(s.model)).into(),
            format!("{}", s.cti),
            match (s.procs, s.from_censored) {
                (Some(p), false) => p.to_string(),
                (Some(p), true) => format!("{p} (from a censored demand: a bound at best)"),
                (None, _) => "not within 2^20".into(),
            },
            match (s.interval, s.noise_interval) {
                (Some(i), _) => format!(
                    "[{:.0}-{}]",
                    i.low.floor(),
                    if i.high.is_finite() {
                        format!("{:.0}", i.high.ceil())
                    } else {
                        "beyond reach".into()
                    }
                ),
                (None, Some(n)) => {
                    format!("[{:.0}-{:.0}]* (noise only)", n.low.floor(), n.high.ceil())
                }
                (None, None) => "-".into(),
            },
        ]);
    }
    t
}

/// A verdict in one word or two, for a table.
pub fn verdict_word(v: &Verdict) -> &'static str {
    match v {
        Verdict::Passed { .. } => "TRUSTED",
        Verdict::Thin { .. } => "NOT YET TRUSTED",
        Verdict::Failed { .. } => "FAILED",
        Verdict::Unmodelled { .. } | Verdict::CpuBound { .. } => "NOT TRUSTED",
        Verdict::Unchecked { .. } => "NOT CHECKED",
        Verdict::Untested { .. } => "untested",
    }
}

fn regression(out: &mut String, a: &Analysis) {
    let Some(r) = &a.regression else {
        out.push_str("strong scaling: not enough sizes at 100% for the regression\n\n");
        return;
    };
    let unit = match a.time_unit {
        crate::TimeUnit::Seconds => "s",
        crate::TimeUnit::InverseRate => "(1/rate)",
    };
    let s = |v: Option<f64>| {
        v.map(|v| format!("{v:.3e} {unit}"))
            .unwrap_or_else(|| "-".into())
    };
    // The fit's coefficients are in the analysed unit (a rate's inverse), not shown as
    // rates.
    let f = crate::table::number;
    out.push_str(&format!(
        "strong scaling at 100%   {}   R^2 {:.3}  adj R^2 {}  MSE {:.3e}\n  leave-one-out RMSE {}  leave-one-size-out RMSE {}\n",
        r.formula(f),
        r.r2,
        r.adj_r2.map(|v| format!("{v:.3}")).unwrap_or_else(|| "-".into()),
        r.mse,
        s(r.loo_rmse),
        s(r.loso_rmse),
    ));
    match r.crossover_procs {
        Some(px) => out.push_str(&format!(
            "  communication overtakes processing at p ~ {px:.0} processes\n\n"
        )),
        None => out.push_str("  no crossover (C1 and C2 are not both positive)\n\n"),
    }
}

fn noise(out: &mut String, a: &Analysis) {
    if a.noise.is_empty() {
        return;
    }
    out.push_str(
        "\nnoise floor: the smallest CTI each size's repeats resolve (90%; pooled run-to-run CV)\n",
    );
    let mut t = Table::new(&[
        "procs",
        "run CV",
        "from runs",
        "baseline n",
        "step n",
        "floor CTI %",
    ]);
    for f in &a.noise {
        t.row(vec![
            f.procs.to_string(),
            format!("{:.3}", f.run_cv),
            format!("{} in {} points", f.runs, f.cells),
            f.baseline_repeats.to_string(),
            f.step_repeats.to_string(),
            format!("{:.1}", f.cti_pct),
        ]);
    }
    out.push_str(&t.render());
}

fn demand(out: &mut String, a: &Analysis, levels: &[f64], capacity: Option<&str>) {
    out.push_str(&format!(
        "\nbandwidth demand (% of {}) to stay within a completion-time increment, read along\n{}; (A-B): the measured steps around the level\n  (<B censored below: the lowest step B sufficed; >B censored above: even the highest\n   throttled step B was too slow, the demand is only known to exceed it;\n   (noise): below the noise floor: not a measurement, left out of DC and projection)\n",
        capacity.unwrap_or("the link"),
        a.interpolation.describe()
    ));
    let mut header = vec!["procs".to_string()];
    header.extend(levels.iter().map(|c| format!("CTI {c}%")));
    let hdr: Vec<&str> = header.iter().map(String::as_str).collect();
    let mut t = Table::new(&hdr);
    let mut sizes: Vec<u32> = a.demand.iter().map(|d| d.procs).collect();
    sizes.sort_unstable();
    sizes.dedup();
    for p in sizes {
        let mut row = vec![format!(
            "{p}{}",
            if a.held_out.contains(&p) {
                " (held out)"
            } else {
                ""
            }
        )];
        for &c in levels {
            row.push(
                a.demand
                    .iter()
                    .find(|d| d.procs == p && d.cti == c)
                    .map(|d| {
                        let noise = if d.below_noise { " (noise)" } else { "" };
                        match (d.bound, d.between) {
                            // A censored demand is the bound it is, not an extrapolation.
                            (Some(b), _) => level(b, d.censored, d.below_noise),
                            (None, Some([lo, hi])) => format!(
                                "{:.1}{} ({}){noise}",
                                d.bw_pct,
                                interval(d.interval.map(|i| (i.low, i.high))),
                                steps(lo, hi)
                            ),
                            (None, None) => level(d.bw_pct, Censored::None, d.below_noise),
                        }
                    })
                    .unwrap_or_else(|| "-".into()),
            );
        }
        t.row(row);
    }
    out.push_str(&t.render());
}

fn projection(out: &mut String, a: &Analysis, levels: &[f64]) {
    if a.projection.is_empty() {
        return;
    }
    out.push_str(&format!(
        "projection from p* = {} procs (DC model, demand ~ DC x sqrt(p)){}\n",
        a.p_star.unwrap_or(0),
        doubt(&a.verdict)
    ));
    // A projection from a censored demand at p* says so (answer::projected_from).
    out.push_str(&projection_table(&a.projection, levels, |c| {
        a.demand_at_star(c)
    }));
    if a.projection.iter().any(|p| p.from_censored) {
        out.push_str("  <X: at most X, projected from a demand at p* censored below; X (from >B): projected from a demand at p* known only to exceed B, not a bound\n");
    }
    out.push_str(&covers(&a.projection));
}

fn doubt(v: &Verdict) -> &'static str {
    match v {
        Verdict::Passed { .. } => "",
        Verdict::Thin { .. } => ": NOT TRUSTED, its backtest passed on one size only (below)",
        Verdict::Failed { .. } => ": NOT TRUSTED, the backtest fails (below)",
        Verdict::Untested { .. } => ": untested (see the backtest below)",
        Verdict::Unchecked { .. } => {
            ": NOT CHECKED on this program, fitted on two sizes: too few for a backtest (below)"
        }
        Verdict::Unmodelled { .. } => {
            ": NOT TRUSTED, a part of its model misses the sizes left out of its fit (below)"
        }
        Verdict::CpuBound { .. } => ": NOT TRUSTED, it is fitted on CPU-bound sizes (below)",
    }
}

fn traffic(out: &mut String, a: &Analysis, levels: &[f64]) {
    let Some(t) = &a.traffic else { return };
    let bytes: Vec<String> = t
        .bytes_per_node
        .iter()
        .map(|(p, b)| format!("{p}: {}", human_bytes(*b)))
        .collect();
    out.push_str(&format!(
        "\ntraffic {} (from the agents' counters): {}\n",
        if t.busiest_link {
            "on the busiest link per run, V (the most one node sent or received)"
        } else {
            "per node and run, V (the mean: the runs carry no per-node counts)"
        },
        bytes.join(", ")
    ));
    let Some(f) = &t.fit else {
        out.push_str(
            "traffic model: needs throttled runs and traffic on at least 2 fitted sizes\n",
        );
        return;
    };
    let by_size: Vec<String> = f
        .exposed_by_size
        .iter()
        .map(|(p, k)| format!("{p}: {k:.2}"))
        .collect();
    out.push_str(
        "traffic model, each part's forms (c0 + c1 p^i log2(p)^j, c0 + c1 (p-1)^i, a p^b, the paper's T(p)) weighed by their fit beyond the noise (AICc, with a cost for the shape) and averaged; the best form, its weight, and how often it was the best over resampled runs:\n",
    );
    for (what, part, found) in [
        ("T(100%)", "T(100%)", &f.baseline),
        ("bytes V", "V", &f.volume),
        ("weight k", "k", &f.exposed),
    ] {
        let stable = t
            .stability
            .iter()
            .find(|s| s.part == part)
            .and_then(|s| {
                let name = found.best.form.name();
                let won = s.forms.iter().find(|f| f.0 == name).map_or(0, |f| f.1);
                (s.resamples > 0).then(|| {
                    format!(
                        "best in {:.0}% of {} resamples",
                        100.0 * won as f64 / s.resamples as f64,
                        s.resamples
                    )
                })
            })
            .unwrap_or_default();
        out.push_str(&format!(
            "  {what:<17} = {:<36} {}\n",
            found.best.text(coefficient),
            match found.best.weight {
                Some(w) if found.judged > 0 => format!(
                    "weight {w:.2}{} ({} forms judged); {stable}",
                    if found.close.len() > 1 {
                        format!(" of {} averaged", found.close.len())
                    } else {
                        String::new()
                    },
                    found.judged
                ),
                _ => "not judged: two sizes (the paper's form)".into(),
            }
        ));
    }
    out.push_str(&format!(
        "  (k per size {}; below 1: the share of the transfer not overlapped with computation)\n",
        by_size.join(", ")
    ));
    if !t.projection.is_empty() {
        out.push_str(&format!(
            "projection from traffic (T(w) = T(100%) + k V/C (1/w - 1)){}\n",
            doubt(&t.verdict)
        ));
        out.push_str(&projection_table(&t.projection, levels, |_| None));
        out.push_str(&covers(&t.projection));
    }
}

/// A model's coefficient with four significant digits.
fn coefficient(c: f64) -> String {
    if c != 0.0 && (c.abs() >= 1e4 || c.abs() < 1e-2) {
        format!("{c:.3e}")
    } else {
        format!("{c:.4}")
    }
}

fn human_bytes(b: f64) -> String {
    if b >= 1e9 {
        format!("{:.2} GB", b / 1e9)
    } else if b >= 1e6 {
        format!("{:.2} MB", b / 1e6)
    } else if b >= 1e3 {
        format!("{:.1} kB", b / 1e3)
    } else {
        format!("{b:.0} B")
    }
}

/// What the interval of the farthest projection covers (the others' differ only in the
/// distance).
fn covers(projection: &[crate::Projection]) -> String {
    projection
        .iter()
        .filter(|p| p.interval.is_some())
        .max_by_key(|p| p.procs)
        .and_then(|p| {
            let m = p.model_error.as_ref()?;
            Some(format!(
                "  [a-b] at {} procs, CTI {}%, covers {}\n",
                p.procs, p.cti, m.in_words
            ))
        })
        .unwrap_or_default()
}

/// `at_star`: the demand at p* each projection of a level starts from.
fn projection_table<'a>(
    projection: &[crate::Projection],
    levels: &[f64],
    at_star: impl Fn(f64) -> Option<&'a Demand>,
) -> String {
    let mut targets: Vec<u32> = projection.iter().map(|p| p.procs).collect();
    targets.sort_unstable();
    targets.dedup();
    let mut header = vec!["procs".to_string()];
    header.extend(levels.iter().map(|c| format!("CTI {c}%")));
    let hdr: Vec<&str> = header.iter().map(String::as_str).collect();
    let mut t = Table::new(&hdr);
    for p in targets {
        let mut row = vec![format!("{p}")];
        let mut measured = vec!["  measured".to_string()];
        let mut any_measured = false;
        for &c in levels {
            let pr = projection.iter().find(|x| x.procs == p && x.cti == c);
            row.push(
                pr.map(|x| {
                    format!(
                        "{}{}",
                        projected_from(x.bw_pct, x.from_censored, at_star(c)),
                        match (x.interval, x.noise_interval) {
                            (Some(i), _) => interval(Some((i.low, i.high))),
                            (None, Some(n)) => format!("{}*", interval(Some((n.low, n.high)))),
                            (None, None) => String::new(),
                        }
                    )
                })
                .unwrap_or_else(|| "-".into()),
            );
            measured.push(
                pr.and_then(|x| {
                    let m = x.measured_bw_pct?;
                    any_measured = true;
                    let censored = x.measured_censored.unwrap_or(Censored::None);
                    let shown = level(m, censored, x.measured_below_noise);
                    let err = x.bw_pct - m;
                    Some(if x.error_is_bound {
                        // m is the bound: against `>m` the truth is above it, so the error
                        // is at most err; against `<m` below it, so at least err.
                        let side = if censored == Censored::Above {
                            "<="
                        } else {
                            ">="
                        };
                        format!("{shown} ({side} {err:+.1} pp)")
                    } else {
                        format!("{shown} ({err:+.1} pp)")
                    })
                })
                .unwrap_or_else(|| "-".into()),
            );
        }
        t.row(row);
        if any_measured {
            t.row(measured);
        }
    }
    t.render()
}

fn backtest(out: &mut String, a: &Analysis, detail: Detail) {
    let line = |name: &str, v: &Verdict| format!("backtest ({name}): {}\n", v.text());
    out.push_str(&line("DC", &a.verdict));
    if let Some(t) = &a.traffic {
        out.push_str(&line("traffic", &t.verdict));
    }
    out.push_str(&format!("  {}\n", a.supported));
    if a.backtest.is_empty() {
        return;
    }
    if !detail.backtest {
        out.push_str("  (every check: `throttle-ctl analyze --backtest` on the same data)\n");
        return;
    }
    out.push_str(&backtest_table(a).render());
}

/// Every backtest check, one row each: the terminal's `--backtest` and the report show
/// this one table.
pub fn backtest_table(a: &Analysis) -> Table {
    let mut t = Table::new(&[
        "model",
        "procs",
        "CTI %",
        "from",
        "projected",
        "measured",
        "error pp",
        "noise +-pp",
        "agrees",
    ]);
    for c in &a.backtest {
        t.row(check_row(c));
    }
    t
}

fn check_row(c: &Check) -> Vec<String> {
    let from = c
        .from
        .iter()
        .map(u32::to_string)
        .collect::<Vec<_>>()
        .join(",");
    let bound = if c.error_is_bound { "bound " } else { "" };
    vec![
        match c.model {
            Model::Dc => "DC".into(),
            Model::Traffic => "traffic".into(),
        },
        c.target_label(),
        format!("{}", c.cti),
        from,
        format!(
            "{:.1}{}",
            c.projected,
            interval(c.interval.map(|i| (i.low, i.high)))
        ),
        format!(
            "{}{}",
            level(c.measured, c.measured_censored, c.below_noise),
            interval(c.measured_interval.map(|i| (i.low, i.high)))
        ),
        format!("{bound}{:+.1}", c.error_pp),
        format!("{:.1}", crate::method::quantiles::Z90 * c.noise_pp),
        if c.within_noise {
            "within noise".into()
        } else if c.miss {
            format!(
                "MISS (beyond {} pp and noise)",
                crate::trust::backtest::TOLERANCE_PP
            )
        } else {
            format!("within {} pp", crate::trust::backtest::TOLERANCE_PP)
        },
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_projection_past_the_link_is_called_saturated() {
        assert_eq!(projected_from(119.5, false, None), "119.5 saturated");
        assert_eq!(
            projected_from(100.0, true, None),
            "100.0 (from a censored demand) saturated"
        );
        assert_eq!(projected_from(99.9, false, None), "99.9");
    }

    #[test]
    fn bounds_and_noise_are_written_after_their_kind_not_stacked_in_front() {
        assert_eq!(level(91.4, Censored::Above, true), ">91.4 (noise)");
        assert_eq!(level(12.0, Censored::None, false), "12.0");
        let p = |from_censored, measured: Option<f64>| crate::Projection {
            procs: 64,
            cti: 10.0,
            bw_pct: 121.0,
            saturates: true,
            noise_interval: None,
            interval: None,
            at_levels: Vec::new(),
            model_error: None,
            measured_bw_pct: measured,
            measured_censored: measured.map(|_| Censored::Below),
            measured_below_noise: measured.is_some(),
            error_pp: measured.map(|m| 121.0 - m),
            error_is_bound: measured.is_some(),
            from_censored,
        };
        // From a demand at p* censored below: at most 121. From one censored above: not
        // a bound, and said so with the bound the demand is known to exceed.
        let star = |censored, bound| Demand {
            procs: 16,
            cti: 10.0,
            bw_pct: 88.0,
            censored,
            bound,
            between: None,
            below_noise: false,
            interval: None,
            held_out: false,
        };
        let below = star(Censored::Below, Some(20.0));
        let t = projection_table(&[p(true, None)], &[10.0], |_| Some(&below));
        assert!(t.contains("<121.0") && !t.contains("censored"), "{t}");
        let above = star(Censored::Above, Some(40.0));
        let t = projection_table(&[p(true, None)], &[10.0], |_| Some(&above));
        assert!(
            t.contains("121.0 (from >40.0)") && !t.contains(">121"),
            "{t}"
        );
        let t = projection_table(&[p(false, Some(30.0))], &[10.0], |_| None);
        assert!(t.contains("121.0") && !t.contains(">121.0"), "{t}");
        assert!(t.contains("<30.0 (noise) (>= +91.0 pp)"), "{t}");
    }

    #[test]
    fn a_projection_says_how_much_its_backtest_rests_on() {
        let passed = |sizes| Verdict::Passed {
            checks: 5,
            sizes,
            misses: 0,
            rms_pp: 1.0,
            worst_pp: -3.4,
        };
        assert_eq!(doubt(&passed(2)), "");
        let thin = Verdict::Thin {
            checks: 5,
            procs: 16,
            misses: 0,
            rms_pp: 1.0,
            worst_pp: -3.4,
        };
        assert!(doubt(&thin).contains("NOT TRUSTED"), "{}", doubt(&thin));
        assert!(
            thin.text().contains("one size (16 procs)"),
            "{}",
            thin.text()
        );
        let failed = Verdict::Failed {
            why: "x".into(),
            misses: 3,
            checks: 8,
            worst_pp: 9.0,
        };
        assert!(doubt(&failed).contains("NOT TRUSTED"));
        assert!(passed(2)
            .text()
            .starts_with("passed: 5 check(s) on 2 sizes"));
    }
}
