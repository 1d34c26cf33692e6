//! The answer for a series with a problem axis in words: the projections to the (P, N)
//! asked first, with their verdict, then the demand measured at every (size, problem),
//! the model's parts in both parameters, the backtest, each problem's demand constant
//! and the weak-scaling line; `--verbose` adds each problem's own answer.

use crate::answer::problem::ProblemAnalysis;
use crate::method::demand::Censored;
use crate::method::problem_traffic::Fit;
use crate::table::{number, wrap, Table};
use crate::trust::surface_check::Target;

/// A value of the problem as the series stores it: a whole number whole (a volume of
/// 4000000 bytes, not 4.0000e6).
fn value(v: f64) -> String {
    if v.fract() == 0.0 && v.abs() < 1e15 {
        format!("{}", v as i64)
    } else {
        number(v)
    }
}

/// A projection's cell: `12.3 [10.1-15.0]`.
fn projected(t: &Target) -> String {
    format!("{:.1} [{:.1}-{:.1}]", t.bw_pct, t.low, t.high)
}

/// The whole answer as text; with `each`, every problem's own answer after it.
pub fn render(a: &ProblemAnalysis, capacity: Option<&str>, each: bool) -> String {
    let name = &a.axis.name;
    let link = capacity.map_or(String::new(), |c| format!(" of {c}"));
    let mut out = String::new();
    out.push_str(&wrap(
        &format!(
            "{}: two parameters, processes and the problem's {name} ({} values: {}){}",
            a.series,
            a.values.len(),
            a.values
                .iter()
                .map(|v| value(*v))
                .collect::<Vec<_>>()
                .join(", "),
            a.axis
                .size_words()
                .map_or(String::new(), |w| format!("; {w}"))
        ),
        "",
    ));
    out.push('\n');
    // The answer first.
    if a.projection.is_empty() {
        out.push_str(&wrap(&format!("No projection: {}", a.verdict_why), "  "));
        out.push('\n');
    } else {
        out.push_str(&format!(
            "Projected demand (% of the link{link}; 90% interval: run noise, lack of fit, the model's growth per doubling beyond the data), backtest {}:\n",
            a.verdict
        ));
        let t = projection_table(a);
        out.push_str(&t.render());
        out.push_str(&wrap(
            &format!("verdict {}: {}", a.verdict, a.verdict_why),
            "  ",
        ));
        out.push('\n');
    }
    if let Some(w) = &a.weak {
        out.push_str(&format!(
            "\nAlong the weak-scaling line {name}(p) = {} from {name} {} at one process, the link saturates at:\n",
            if a.axis.log2 {
                format!("{name}(1) + log2 p")
            } else {
                format!("{name}(1) x p")
            },
            value(w.at_one)
        ));
        let mut t = Table::new(&["CTI %", "procs", "interval"]);
        // At the smallest size measured: it saturates there already, or before.
        let p = |v: Option<f64>| match v {
            Some(x) if x <= w.from => format!("<= {x:.0}"),
            Some(x) => format!("{x:.1}"),
            None => "beyond 2^20".to_string(),
        };
        for s in &w.saturation {
            t.row(vec![
                s.cti.to_string(),
                p(s.procs),
                format!("[{} - {}]", p(s.low), p(s.high)),
            ]);
        }
        out.push_str(&t.render());
    }
    // What was measured.
    out.push_str(&format!(
        "\nDemand measured (% of the link{link}) per size and {name}; < and > are bounds (the lowest step kept the level, no step under 100 did), ~ below the size's noise floor:\n"
    ));
    let t = measured_table(a);
    out.push_str(&t.render());
    if !a.dc.is_empty() && a.dc.iter().all(|d| d.dc.is_none()) {
        out.push_str(&format!(
            "demand constant per {name}: none (a problem's DC needs two of its sizes measured at one level)\n"
        ));
    } else if !a.dc.is_empty() {
        out.push_str(&wrap(
            &format!(
                "demand constant per {name}: {}{}",
                a.dc.iter()
                    .map(|d| format!(
                        "{} {}",
                        value(d.problem),
                        d.dc.map_or("none".into(), |v| format!("{v:.3}"))
                    ))
                    .collect::<Vec<_>>()
                    .join(", "),
                a.dc_trend.map_or(String::new(), |b| format!(
                    "; it grows as the problem's size^{b:.2}"
                ))
            ),
            "  ",
        ));
        out.push('\n');
    }
    if let Some(fit) = &a.model {
        model(&mut out, fit, a);
    }
    backtest(&mut out, a);
    if let Some(e) = &a.error {
        out.push_str(&wrap(
            &format!(
                "interval: lack of fit {:.3} logit, growth {:.3} logit per doubling ({}; the prior {:.2} worth {} checks), t with {:.0} degrees of freedom",
                e.lack_of_fit,
                e.tau,
                e.tau_own.map_or("no check of its own".to_string(), |t| format!(
                    "its own {t:.3} from {} check(s)",
                    e.checks
                )),
                e.prior.sd,
                e.prior.df,
                e.df
            ),
            "  ",
        ));
        out.push('\n');
    }
    for w in &a.warnings {
        out.push_str(&wrap(&format!("warning: {w}"), "  "));
        out.push('\n');
    }
    if each {
        for b in &a.by_problem {
            out.push_str(&format!("\n=== {name} {} ===\n", value(b.problem)));
            out.push_str(&crate::render::render(&b.analysis, &a.levels, capacity));
        }
    } else {
        out.push_str(&format!(
            "\nEach {name}'s own answer: --verbose, or `analyze --at-problem VALUE` (its report, exports and plots too).\n"
        ));
    }
    out
}

/// The model's three parts as fitted on every cell.
fn model(out: &mut String, fit: &Fit, a: &ProblemAnalysis) {
    out.push_str(&format!(
        "\nTraffic model in p and the problem's size n (T(w) = T(100%) + k V/C (1/w - 1)), fitted on {} cells{}:\n",
        a.cells.len() - a.held_out.len(),
        if a.held_out.is_empty() {
            String::new()
        } else {
            format!(" ({} held out)", a.held_out.len())
        }
    ));
    let fmt = |c: f64| number(c);
    for (part, found) in [
        ("V (bytes)", &fit.volume),
        ("T(100%)", &fit.baseline),
        ("k", &fit.exposed),
    ] {
        out.push_str(&wrap(
            &format!(
                "{part} = {}   ({} of {} forms averaged)",
                found.best.text(fmt),
                found.close.len(),
                found.judged
            ),
            "  ",
        ));
        out.push('\n');
    }
}

/// The three checks.
fn backtest(out: &mut String, a: &ProblemAnalysis) {
    if a.backtest.is_empty() {
        return;
    }
    let name = &a.axis.name;
    out.push_str(&format!(
        "\nBacktest: fitted without the largest size, the largest {name}, or both, and projected to what was held out (intervals by the prior alone):\n"
    ));
    out.push_str(&backtest_table(a).render());
    for c in &a.backtest {
        if let Some(why) = &c.why_not {
            out.push_str(&wrap(
                &format!("held out {}: not made: {why}", c.held_out.words()),
                "  ",
            ));
            out.push('\n');
        }
    }
}

/// The projections to the (P, N) asked.
fn projection_table(a: &ProblemAnalysis) -> Table {
    let mut t = Table::new(&[
        "procs",
        &a.axis.name,
        "CTI %",
        "demand [interval]",
        "measured",
        "error pp",
    ]);
    for p in &a.projection {
        t.row(vec![
            p.procs.to_string(),
            value(p.problem),
            p.cti.to_string(),
            if p.bw_pct >= 99.95 {
                "saturated (100)".into()
            } else {
                projected(p)
            },
            p.measured.map_or("-".into(), |m| format!("{m:.1}")),
            p.error_pp.map_or("-".into(), |e| format!("{e:+.1}")),
        ]);
    }
    t
}

/// The demand measured at every (size, problem), a column per level.
fn measured_table(a: &ProblemAnalysis) -> Table {
    let name = &a.axis.name;
    let mut head: Vec<String> = vec!["procs".into(), name.clone()];
    head.extend(a.levels.iter().map(|l| format!("CTI {l}%")));
    let head_refs: Vec<&str> = head.iter().map(String::as_str).collect();
    let mut t = Table::new(&head_refs);
    let mut keys: Vec<(u32, u64)> = a
        .demand
        .iter()
        .map(|d| (d.procs, d.problem.to_bits()))
        .collect();
    keys.sort_by(|x, y| {
        x.0.cmp(&y.0)
            .then(f64::from_bits(x.1).total_cmp(&f64::from_bits(y.1)))
    });
    keys.dedup();
    for (procs, bits) in keys {
        let problem = f64::from_bits(bits);
        let mut row = vec![procs.to_string(), value(problem)];
        for &level in &a.levels {
            let d = a
                .demand
                .iter()
                .find(|d| d.procs == procs && d.problem == problem && d.cti == level);
            row.push(match d {
                None => "-".into(),
                Some(d) => {
                    let v = match (d.censored, d.bound) {
                        (Censored::Below, Some(b)) => format!("<{b:.1}"),
                        (Censored::Above, Some(b)) => format!(">{b:.1}"),
                        _ => format!("{:.1}", d.bw_pct),
                    };
                    if d.below_noise {
                        format!("~{v}")
                    } else {
                        v
                    }
                }
            });
        }
        t.row(row);
    }
    t
}

/// The backtest's projections to what it held out, where a demand was measured.
fn backtest_table(a: &ProblemAnalysis) -> Table {
    let name = &a.axis.name;
    let mut t = Table::new(&[
        "held out",
        "fitted cells",
        "procs",
        name,
        "CTI %",
        "projected [interval]",
        "measured",
        "error pp",
        "inside",
    ]);
    for c in &a.backtest {
        if c.why_not.is_some() {
            t.row(vec![
                c.held_out.words().into(),
                c.fitted_cells.to_string(),
                "-".into(),
                "-".into(),
                "-".into(),
                "not made: see below".into(),
                "-".into(),
                "-".into(),
                "-".into(),
            ]);
            continue;
        }
        for x in c.targets.iter().filter(|x| x.measured.is_some()) {
            t.row(vec![
                c.held_out.words().into(),
                c.fitted_cells.to_string(),
                x.procs.to_string(),
                value(x.problem),
                x.cti.to_string(),
                projected(x),
                x.measured.map_or("-".into(), |m| format!("{m:.1}")),
                x.error_pp.map_or("-".into(), |e| format!("{e:+.1}")),
                match x.inside {
                    Some(true) => "yes".into(),
                    Some(false) => "NO".into(),
                    None => "-".into(),
                },
            ]);
        }
    }
    t
}

/// The answer as Markdown: the projections, the measured demand, the backtest.
pub fn markdown(a: &ProblemAnalysis, capacity: Option<&str>) -> String {
    let md = crate::table::escape_markdown;
    let link = capacity.map_or(String::new(), |c| format!(" of {}", md(c)));
    let mut out = format!(
        "# Bandwidth demand of {} in two parameters\n\nProcesses and the problem's {} ({}); demand in % of the link{link}.\n\n",
        md(&a.series),
        md(&a.axis.name),
        a.values.iter().map(|v| value(*v)).collect::<Vec<_>>().join(", ")
    );
    out.push_str(&format!(
        "## Projected demand\n\nBacktest {}: {}\n\n",
        a.verdict,
        md(&a.verdict_why)
    ));
    out.push_str(&projection_table(a).markdown());
    out.push_str("\n## Demand measured\n\n");
    out.push_str(&measured_table(a).markdown());
    out.push_str("\n## Backtest\n\n");
    out.push_str(&backtest_table(a).markdown());
    if !a.warnings.is_empty() {
        out.push_str("\n## Warnings\n\n");
        for w in &a.warnings {
            out.push_str(&format!("- {}\n", md(w)));
        }
    }
    out
}

/// The columns of [`csv()`].
pub const CSV_COLUMNS: [&str; 12] = [
    "kind",
    "procs",
    "problem",
    "cti_pct",
    "bw_pct",
    "censored",
    "low",
    "high",
    "measured_bw_pct",
    "error_pp",
    "held_out",
    "verdict",
];

/// The answer's figures as CSV: every measured demand (`measured`), every projection
/// (`projected`) and every backtest projection (`check`, with what it held out).
pub fn csv(a: &ProblemAnalysis) -> anyhow::Result<String> {
    let mut out = ::csv::Writer::from_writer(Vec::new());
    out.write_record(CSV_COLUMNS)?;
    let num = |v: Option<f64>| v.map(|x| x.to_string()).unwrap_or_default();
    for d in &a.demand {
        let censored = match d.censored {
            Censored::None => "none",
            Censored::Below => "below",
            Censored::Above => "above",
        };
        out.write_record([
            "measured".to_string(),
            d.procs.to_string(),
            d.problem.to_string(),
            d.cti.to_string(),
            d.bound.unwrap_or(d.bw_pct).to_string(),
            censored.to_string(),
            String::new(),
            String::new(),
            String::new(),
            String::new(),
            String::new(),
            String::new(),
        ])?;
    }
    let mut target = |kind: &str, held: &str, t: &Target| {
        out.write_record([
            kind.to_string(),
            t.procs.to_string(),
            t.problem.to_string(),
            t.cti.to_string(),
            t.bw_pct.to_string(),
            "none".to_string(),
            t.low.to_string(),
            t.high.to_string(),
            num(t.measured),
            num(t.error_pp),
            held.to_string(),
            a.verdict.clone(),
        ])
    };
    for t in &a.projection {
        target("projected", "", t)?;
    }
    for c in &a.backtest {
        for t in &c.targets {
            target("check", c.held_out.words(), t)?;
        }
    }
    Ok(String::from_utf8(out.into_inner()?)?)
}
