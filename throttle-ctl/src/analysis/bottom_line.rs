//! The answer in a few sentences, printed before every table: at P procs, staying within
//! c% of the full-bandwidth time needs X% of the link [interval], by which projection
//! and on what backtest; or why no number can be given, and what to measure next.
//!
//! The projection it uses is one whose backtest did not fail: passed on two sizes
//! (trusted) before passed on one (given, marked not trusted), the smaller worst error
//! between equals. A projection refuted by a measured size is never the answer. A
//! projection without an interval that covers its model error (no backtest check, or no
//! run-to-run interval) gives no number. Without sizes to project to, the answer is the
//! demand measured at the largest size.

use super::answer::{BottomLine, Demand, Projection};
use super::backtest::{Model, Verdict};
use super::demand::Censored;
use super::render::steps;

/// How a verdict ranks as a basis for the answer (lower first); `None`: not a basis.
fn rank(v: &Verdict) -> Option<(u8, f64)> {
    match v {
        Verdict::Passed { worst_pp, .. } => Some((0, worst_pp.abs())),
        Verdict::Thin { worst_pp, .. } | Verdict::Unmodelled { worst_pp, .. } => {
            Some((1, worst_pp.abs()))
        }
        Verdict::Failed { .. } | Verdict::Untested { .. } => None,
    }
}

fn name(m: Model) -> &'static str {
    match m {
        Model::Dc => "the DC projection (the paper's)",
        Model::Traffic => "the traffic projection",
    }
}

/// The bottom line of an analysis: `candidates` are each model with its verdict and
/// projections; `demand` the measured demands; `largest` the largest measured size that
/// is not held out; `capacity` the link in words.
pub fn bottom_line(
    candidates: &[(Model, &Verdict, &[Projection])],
    demand: &[Demand],
    levels: &[f64],
    largest: Option<u32>,
    capacity: Option<&str>,
) -> BottomLine {
    let link = capacity.map_or("the link".to_string(), |c| format!("a {c} link"));
    let any_projection = candidates.iter().any(|c| !c.2.is_empty());
    if !any_projection {
        return measured(demand, levels, largest, &link);
    }
    let best = candidates
        .iter()
        .filter(|c| !c.2.is_empty())
        .filter_map(|c| Some((rank(c.1)?, c)))
        .min_by(|a, b| a.0 .0.cmp(&b.0 .0).then(a.0 .1.total_cmp(&b.0 .1)))
        .map(|(_, c)| c);
    let Some(&(model, verdict, projections)) = best else {
        let why: Vec<String> = candidates
            .iter()
            .filter(|c| !c.2.is_empty())
            .map(|c| format!("{}: {}", name(c.0), c.1.text()))
            .collect();
        return BottomLine {
            lines: vec![format!(
                "NO ANSWER for the sizes asked: no projection passed its backtest ({})",
                why.join("; ")
            )],
            next: Some(next_for_failure(candidates, largest)),
            ..Default::default()
        };
    };
    let trusted = matches!(verdict, Verdict::Passed { .. });
    let target = projections.iter().map(|p| p.procs).max().unwrap_or(0);
    let mut lines = Vec::new();
    for &c in levels {
        let Some(p) = projections.iter().find(|p| p.procs == target && p.cti == c) else {
            continue;
        };
        lines.push(statement(p, model, &link));
    }
    if lines.is_empty() {
        lines.push(format!(
            "NO ANSWER at {target} procs: {} projects no level there",
            name(model)
        ));
    }
    let basis = match verdict {
        Verdict::Passed { sizes, worst_pp, .. } => format!(
            "its backtest passed on {sizes} measured sizes (worst {worst_pp:+.1} pp)"
        ),
        Verdict::Thin {
            procs, worst_pp, ..
        } => format!(
            "NOT YET TRUSTED: its backtest checked one size only ({procs} procs, worst {worst_pp:+.1} pp)"
        ),
        Verdict::Unmodelled { part, error, .. } => format!(
            "NOT YET TRUSTED: its model of {part} misses the sizes left out of its fit by {:.1}%",
            error * 100.0
        ),
        _ => String::new(),
    };
    lines.push(format!("  by {}; {basis}", name(model)));
    BottomLine {
        model: Some(model),
        trusted,
        lines,
        next: (!trusted).then(|| match verdict {
            Verdict::Unmodelled { part, .. } => format!(
                "no model of {part} describes the measured sizes: measure nearer to the size you need (above {}), where less is extrapolated",
                largest.map_or("the largest".into(), |l| l.to_string())
            ),
            _ => format!(
                "measure one more size above {} (throttled steps around the demand) so the projection is checked on a second size",
                largest.map_or("the largest".into(), |l| l.to_string())
            ),
        }),
    }
}

/// One projected level as a sentence, or why it gives no number.
fn statement(p: &Projection, model: Model, link: &str) -> String {
    let head = format!("at {} procs, staying within CTI {}%", p.procs, p.cti);
    if p.from_censored {
        return format!(
            "{head}: no number (the demand {} projects from is censored)",
            name(model)
        );
    }
    let Some(i) = p.interval else {
        return format!(
            "{head}: no number: its model error cannot be estimated (no measured size was projected to, or no run-to-run interval)"
        );
    };
    let mut s = format!(
        "{head} needs {:.1}% of {link} [{:.1}-{:.1}: run-to-run noise and model error]",
        p.bw_pct, i.low, i.high
    );
    if p.bw_pct > 100.0 {
        s.push_str(": more than the link");
    }
    if let Some(m) = p.measured_bw_pct {
        let mark = p.measured_censored.unwrap_or(Censored::None);
        let inside = match mark {
            Censored::None => i.low <= m && m <= i.high,
            Censored::Below => i.low <= m,
            Censored::Above => i.high >= m,
        };
        s.push_str(&format!(
            "; measured there (held out): {}{m:.1}, {}",
            mark.mark(),
            if inside {
                "inside the interval"
            } else {
                "OUTSIDE the interval"
            }
        ));
    }
    s
}

/// No projection to answer with: the demand measured at the largest size.
fn measured(demand: &[Demand], levels: &[f64], largest: Option<u32>, link: &str) -> BottomLine {
    let Some(p) = largest else {
        return BottomLine {
            lines: vec!["NO ANSWER: no size has a demand to report".into()],
            ..Default::default()
        };
    };
    let mut lines = Vec::new();
    for &c in levels {
        let Some(d) = demand.iter().find(|d| d.procs == p && d.cti == c) else {
            continue;
        };
        let head = format!("measured at {p} procs, staying within CTI {c}%");
        lines.push(match (d.bound, d.between, d.interval) {
            (Some(b), _, _) => format!(
                "{head} needs {}{b:.1}% of {link} (a bound: {})",
                d.censored.mark(),
                if d.censored == Censored::Above {
                    "add steps above it"
                } else {
                    "the lowest step sufficed"
                }
            ),
            (None, Some([lo, hi]), i) => format!(
                "{head} needs {:.1}% of {link}{} (between the steps {})",
                d.bw_pct,
                i.map(|i| format!(" [{:.1}-{:.1}]", i.low, i.high))
                    .unwrap_or_default(),
                steps(lo, hi)
            ),
            (None, None, _) => format!("{head} needs {:.1}% of {link}", d.bw_pct),
        });
    }
    BottomLine {
        lines,
        next: Some(
            "to project to a larger size, give --predict with it (and measure at least three sizes so the projection can be backtested)".into(),
        ),
        ..Default::default()
    }
}

fn next_for_failure(
    candidates: &[(Model, &Verdict, &[Projection])],
    largest: Option<u32>,
) -> String {
    let untested = candidates
        .iter()
        .all(|c| matches!(c.1, Verdict::Untested { .. }));
    if untested {
        "measure at least three sizes besides the held-out ones, with throttled steps around each demand, so a projection can be checked on a measured size".into()
    } else {
        format!(
            "the models miss the measured sizes: measure sizes nearer to the one you need (above {}), or that size itself",
            largest.map_or("the largest".into(), |l| l.to_string())
        )
    }
}
