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
        Verdict::Thin { worst_pp, .. } => Some((1, worst_pp.abs())),
        // Known not to describe its own sizes: after one merely checked on too few.
        Verdict::Unmodelled { worst_pp, .. } => Some((2, worst_pp.abs())),
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
/// is not held out; `capacity` the link in words; `asked`: sizes to project to were
/// given.
pub fn bottom_line(
    candidates: &[(Model, &Verdict, &[Projection])],
    demand: &[Demand],
    levels: &[f64],
    largest: Option<u32>,
    capacity: Option<&str>,
    asked: bool,
) -> BottomLine {
    let link = capacity.map_or("the link".to_string(), |c| format!("a {c} link"));
    let any_projection = candidates.iter().any(|c| !c.2.is_empty());
    if !any_projection {
        let mut b = measured(demand, levels, largest, &link);
        if asked {
            b.next = Some("nothing could be projected to the sizes asked: a projection needs demands (uncensored, above the noise) at two or more sizes that are not held out".into());
        }
        return b;
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
    // Held-out sizes first (the projection against what was measured there), then the
    // largest size asked.
    let mut held: Vec<u32> = projections
        .iter()
        .filter(|p| p.measured_bw_pct.is_some() && p.procs != target)
        .map(|p| p.procs)
        .collect();
    held.sort_unstable();
    held.dedup();
    for t in held.into_iter().chain([target]) {
        for &c in levels {
            let Some(p) = projections.iter().find(|p| p.procs == t && p.cti == c) else {
                continue;
            };
            lines.push(statement(p, model, &link));
        }
    }
    if lines.is_empty() {
        lines.push(format!(
            "NO ANSWER at {target} procs: {} projects no level there",
            name(model)
        ));
    }
    let basis = match verdict {
        Verdict::Passed { sizes, worst_pp, .. } => format!(
            "TRUSTED: its backtest passed on {sizes} measured sizes (worst {worst_pp:+.1} pp)"
        ),
        Verdict::Thin {
            procs, worst_pp, ..
        } => format!(
            "NOT YET TRUSTED: its backtest checked one size only ({procs} procs, worst {worst_pp:+.1} pp)"
        ),
        Verdict::Unmodelled { part, error, .. } => format!(
            "NOT TRUSTED: its model of {part} misses the sizes left out of its fit by {:.1}%",
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analysis::bootstrap::Interval;

    fn projection(procs: u32, bw: f64, interval: Option<(f64, f64)>) -> Projection {
        Projection {
            procs,
            cti: 10.0,
            bw_pct: bw,
            noise_interval: interval.map(|(low, high)| Interval::noise(low, high)),
            interval: interval.map(|(low, high)| Interval::with_model_error(low, high)),
            model_error: None,
            measured_bw_pct: None,
            measured_censored: None,
            measured_below_noise: false,
            error_pp: None,
            error_is_bound: false,
            from_censored: false,
        }
    }

    #[test]
    fn a_model_that_misses_its_own_sizes_ranks_after_one_checked_on_too_few() {
        let thin = Verdict::Thin {
            checks: 1,
            procs: 16,
            worst_pp: 4.0,
        };
        let unmodelled = Verdict::Unmodelled {
            part: "T(100%)".into(),
            error: 0.12,
            sizes: 2,
            worst_pp: 1.0,
        };
        let dc = [projection(50, 60.0, Some((50.0, 70.0)))];
        let tr = [projection(50, 40.0, Some((35.0, 45.0)))];
        let b = bottom_line(
            &[(Model::Dc, &thin, &dc), (Model::Traffic, &unmodelled, &tr)],
            &[],
            &[10.0],
            Some(16),
            Some("100 Mbit/s"),
            true,
        );
        assert_eq!(b.model, Some(Model::Dc), "{b:?}");
        assert!(!b.trusted && b.next.is_some());
        assert!(
            b.lines[0].starts_with(
                "at 50 procs, staying within CTI 10% needs 60.0% of a 100 Mbit/s link [50.0-70.0"
            ),
            "{b:?}"
        );
    }

    #[test]
    fn no_number_without_an_interval_from_a_censored_demand_or_a_basis() {
        let passed = Verdict::Passed {
            checks: 4,
            sizes: 2,
            worst_pp: 2.0,
        };
        let mut censored = projection(50, 60.0, Some((50.0, 70.0)));
        censored.from_censored = true;
        let mut both = [projection(50, 60.0, None), censored];
        both[1].cti = 20.0;
        let b = bottom_line(
            &[(Model::Dc, &passed, &both)],
            &[],
            &[10.0, 20.0],
            Some(16),
            None,
            true,
        );
        assert!(b.trusted, "{b:?}");
        assert!(
            b.lines
                .last()
                .unwrap()
                .contains("; TRUSTED: its backtest passed"),
            "{b:?}"
        );
        assert!(
            b.lines[0].contains("no number: its model error cannot be estimated"),
            "{b:?}"
        );
        assert!(b.lines[1].contains("no number (the demand"), "{b:?}");
        // Refuted or untested: NO ANSWER, and what to measure.
        let failed = Verdict::Failed {
            why: "off".into(),
            worst_pp: 9.0,
        };
        let b = bottom_line(
            &[(Model::Dc, &failed, &both)],
            &[],
            &[10.0],
            Some(16),
            None,
            true,
        );
        assert!(
            b.lines[0].starts_with("NO ANSWER") && b.model.is_none(),
            "{b:?}"
        );
        assert!(b.next.unwrap().contains("miss the measured sizes"));
        // Sizes asked, nothing projected: the answer is what was measured, and why.
        let b = bottom_line(
            &[(Model::Dc, &failed, &[])],
            &[],
            &[10.0],
            Some(16),
            None,
            true,
        );
        assert!(
            b.next.unwrap().contains("nothing could be projected"),
            "{:?}",
            b.lines
        );
    }
}
