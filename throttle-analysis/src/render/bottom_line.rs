//! The answer in a few sentences, printed before every table: at P procs, staying within
//! c% of the full-bandwidth time needs X% of the link \[interval\], by which projection
//! and on what backtest, where the link saturates by the same projection; or why no
//! number can be given; and what would narrow the answer most. Beside it, every measured
//! size with its demand at each level or the reason it has none (`rows`): no size
//! measured goes unsaid.
//!
//! The projection it uses is one whose backtest did not fail: passed on two sizes
//! (trusted) before passed on one (given, marked not trusted), then one fitted on two
//! sizes and so checked on none (NOT CHECKED, the traffic projection first), the smaller
//! worst error between equals. A projection refuted by a measured size is never the
//! answer. A projection without an interval that covers its model error (no backtest
//! check on three sizes or more, or no run-to-run interval) gives no number, nor one at
//! or past the link (the link saturates first). Without sizes to project to, the answer
//! is the demand measured at the largest size, never a level below that size's noise
//! floor.

use std::collections::BTreeMap;

use crate::answer::narrow;
use crate::answer::sizes::SizeRule;
use crate::answer::{
    Advice, BottomLine, Demand, Figure, LinkTooFast, NetworkBound, Projection, Saturation, SizeRow,
};
use crate::method::demand::Censored;
use crate::render::steps;
use crate::trust::backtest::{Model, Verdict};

/// How a verdict ranks as a basis for the answer (lower first); `None`: not a basis.
fn rank(v: &Verdict) -> Option<(u8, f64)> {
    match v {
        Verdict::Passed { worst_pp, .. } => Some((0, worst_pp.abs())),
        Verdict::Thin { worst_pp, .. } => Some((1, worst_pp.abs())),
        // Fitted on too few sizes to check, with other programs' error: after one
        // checked on one size.
        Verdict::Unchecked { .. } => Some((2, 0.0)),
        // Known not to describe its own sizes: after one merely checked on too few.
        Verdict::Unmodelled { worst_pp, .. } => Some((3, worst_pp.abs())),
        // Measured where the cores, not only the link, set the times: last of the bases.
        Verdict::CpuBound { worst_pp, .. } => Some((4, worst_pp.abs())),
        Verdict::Failed { .. } | Verdict::Untested { .. } => None,
    }
}

fn name(m: Model) -> &'static str {
    match m {
        Model::Dc => "the DC projection (the paper's)",
        Model::Traffic => "the traffic projection",
    }
}

/// What the bottom line is drawn from.
pub struct Basis<'a> {
    /// Each model with its verdict and projections.
    pub candidates: &'a [(Model, &'a Verdict, &'a [Projection])],
    /// The measured demands.
    pub demand: &'a [Demand],
    /// Both models' saturation sizes.
    pub saturation: &'a [Saturation],
    pub levels: &'a [f64],
    /// The sizes the projections are fitted on (held-out ones not among them).
    pub fitted: &'a [u32],
    /// The good runs each size took, and the fewest of a point (what narrowing the
    /// answer costs, and what a repeat more is worth).
    pub runs_per_size: &'a BTreeMap<u32, usize>,
    pub min_repeats: usize,
    /// The link's capacity, bytes per second, when known.
    pub capacity: Option<f64>,
    /// Every measured size, with why it has no demand at any level when that is so (no
    /// traffic between nodes, its runs failed or flagged, no baseline).
    pub sizes: &'a [(u32, Option<String>)],
    /// The measured sizes held out of the fits.
    pub held_out: &'a [u32],
    /// The CPU-bound sizes.
    pub cpu_bound: &'a [crate::trust::cpu::CpuBound],
    /// The sizes the program allows, read off the sizes it ran at.
    pub rule: SizeRule,
}

impl Basis<'_> {
    /// Every size measured (none of them is suggested again).
    fn measured(&self) -> Vec<u32> {
        self.sizes.iter().map(|s| s.0).collect()
    }
}

/// The bottom line of an analysis; `asked`: sizes to project to were given.
pub fn bottom_line(b: &Basis, asked: bool) -> BottomLine {
    let link = b.capacity.map_or("the link".to_string(), |c| {
        format!("a {} link", throttle_proto::rate::format_bits_per_sec(c))
    });
    let mut out = answer(b, asked, &link);
    out.sizes = rows(b, &link);
    out.size_rule = b.rule;
    out.network_bound = network_bound(b);
    if let Some(n) = &out.network_bound {
        out.lines
            .push(format!("  {}", network_bound_text(n, &link)));
        let first = format!("first, measure at {}", higher(n));
        out.next = Some(match out.next.take() {
            Some(then) => format!("{first}; at this capacity: {then}"),
            None => first,
        });
    }
    out.link_too_fast = link_too_fast(b);
    if let Some(f) = &out.link_too_fast {
        out.lines
            .push(format!("  {}", link_too_fast_text(f, &link)));
        // First in `next` where it leaves too few sizes to project from; otherwise the
        // sizes with demands answer, and the line says what the others lack.
        let measured: std::collections::BTreeSet<u32> = b
            .demand
            .iter()
            .filter(|d| d.censored == Censored::None && !d.below_noise)
            .map(|d| d.procs)
            .collect();
        if measured.len() < 2 {
            let first = format!("first, measure {} procs {}", list(&f.sizes), lower(f));
            out.next = Some(match out.next.take() {
                Some(then) => format!("{first}; at this capacity: {then}"),
                None => first,
            });
        }
    }
    if !b.cpu_bound.is_empty() {
        out.lines.push(format!(
            "  CPU-bound: the runs at {} kept this machine's cores busy, so the demands measured there say as much about the cores as about the link",
            crate::trust::cpu::words(b.cpu_bound)
        ));
    }
    out
}

/// Whether every size measured needs nearly all of the link at the lowest level asked
/// ([`NetworkBound`]); `None` when a size needs less, when a size with demands has none
/// to judge there (below its noise, or no step reached it), or when fewer than two sizes
/// say so (one size cannot tell sizes apart or not).
fn network_bound(b: &Basis) -> Option<NetworkBound> {
    let cti = b.levels.iter().copied().min_by(f64::total_cmp)?;
    let all_transfer = 100.0 / (1.0 + cti / 100.0);
    let mut sizes = Vec::new();
    let mut values = Vec::new();
    for d in b.demand.iter().filter(|d| d.cti == cti && !d.below_noise) {
        let value = match d.censored {
            Censored::None => d.bw_pct,
            Censored::Above => d.bound.unwrap_or(d.bw_pct),
            Censored::Below => return None,
        };
        if value < NetworkBound::NEAR * all_transfer {
            return None;
        }
        sizes.push(d.procs);
        values.push(value);
    }
    let judged = |p: u32| sizes.contains(&p);
    if sizes.len() < 2 || b.sizes.iter().any(|(p, why)| why.is_none() && !judged(*p)) {
        return None;
    }
    sizes.sort_unstable();
    Some(NetworkBound {
        cti,
        sizes,
        low: values.iter().copied().fold(f64::INFINITY, f64::min),
        high: values.iter().copied().fold(0.0, f64::max),
        all_transfer,
        try_capacity: b.capacity.map(|c| c * NetworkBound::FACTOR),
    })
}

/// [`NetworkBound`] in words.
fn network_bound_text(n: &NetworkBound, link: &str) -> String {
    let range = if (n.high - n.low).abs() < 0.05 {
        format!("{:.1}%", n.low)
    } else {
        format!("{:.1}-{:.1}%", n.low, n.high)
    };
    format!(
        "the link is below what the program needs: at every size measured ({} procs) staying within CTI {}% needs {range} of {link}, about what a program whose time is all transfer needs ({:.1}%), so the link, not the size, sets these times and the answer cannot tell the sizes apart; measure at {}, within what this machine's links carry (`throttle-ctl calibrate` measures it)",
        list(&n.sizes),
        n.cti,
        n.all_transfer,
        higher(n)
    )
}

/// The sizes with demands at which the link is faster than the program needs
/// ([`LinkTooFast`]); `None` when there is none.
fn link_too_fast(b: &Basis) -> Option<LinkTooFast> {
    let mut sizes = Vec::new();
    let mut lowest_step = f64::INFINITY;
    for (p, _) in b.sizes.iter().filter(|(_, why)| why.is_none()) {
        let cells: Vec<&Demand> = b
            .demand
            .iter()
            .filter(|d| d.procs == *p && b.levels.contains(&d.cti))
            .collect();
        let below: Vec<f64> = cells
            .iter()
            .filter(|d| !d.below_noise && d.censored == Censored::Below)
            .map(|d| d.bound.unwrap_or(d.bw_pct))
            .collect();
        let unmeasured = cells
            .iter()
            .all(|d| d.below_noise || d.censored == Censored::Below);
        if !below.is_empty() && unmeasured {
            sizes.push(*p);
            lowest_step = below.into_iter().fold(lowest_step, f64::min);
        }
    }
    if sizes.is_empty() {
        return None;
    }
    sizes.sort_unstable();
    Some(LinkTooFast {
        sizes,
        lowest_step,
        // A lowest step at or above the share is lowered by the steps, not the capacity.
        try_capacity: b
            .capacity
            .filter(|_| lowest_step < LinkTooFast::SHARE)
            .map(|c| c * lowest_step / LinkTooFast::SHARE),
    })
}

/// [`LinkTooFast`] in words.
fn link_too_fast_text(f: &LinkTooFast, link: &str) -> String {
    format!(
        "the link is faster than the program needs at {} procs: every level asked is met at the lowest step ({:.1}% of {link}) or lies within the runs' noise, so its demand there is not measured; measure there {}",
        list(&f.sizes),
        f.lowest_step,
        lower(f)
    )
}

/// What measures below the lowest step, in words: a capacity of which today's lowest
/// step is [`LinkTooFast::SHARE`], or lower steps.
fn lower(f: &LinkTooFast) -> String {
    let steps = "with lower steps in `bandwidths`";
    match f.try_capacity {
        Some(c) => format!(
            "at a lower capacity (about {}: `--capacity {}`, of which today's lowest step is {}%), or {steps}",
            throttle_proto::rate::format_bits_per_sec(c),
            throttle_proto::rate::format_flag(c),
            LinkTooFast::SHARE
        ),
        None => format!("{steps} (down to a few %)"),
    }
}

/// The capacity to try instead, in words.
fn higher(n: &NetworkBound) -> String {
    match n.try_capacity {
        Some(c) => {
            let flag = throttle_proto::rate::format_flag(c);
            // The flag keeps a digit or two: said so where it rounds.
            let exact = throttle_proto::rate::Rate::parse(&flag)
                .is_ok_and(|r| (r.bytes_per_sec() - c).abs() <= 1e-6 * c);
            format!(
                "a capacity several times higher ({}{}x: `--capacity {flag}`)",
                if exact { "" } else { "about " },
                NetworkBound::FACTOR
            )
        }
        None => "a capacity several times higher".into(),
    }
}

/// Every measured size, largest first: its demand at each level, or why it has none.
fn rows(b: &Basis, link: &str) -> Vec<SizeRow> {
    b.sizes
        .iter()
        .rev()
        .map(|(p, why)| SizeRow {
            procs: *p,
            held_out: b.held_out.contains(p),
            why: why.clone(),
            cpu_bound: crate::trust::cpu::share_at(b.cpu_bound, *p),
            cells: if why.is_some() {
                Vec::new()
            } else {
                b.levels
                    .iter()
                    .map(
                        |&c| match b.demand.iter().find(|d| d.procs == *p && d.cti == c) {
                            Some(d) => measured_statement(d, link).1,
                            None => Figure {
                                why: Some("no throttled step was measured at this size".into()),
                                ..Figure::none(*p, c, false)
                            },
                        },
                    )
                    .collect()
            },
        })
        .collect()
}

/// The answer's sentences and figures: the best projection's, or what was measured.
fn answer(b: &Basis, asked: bool, link: &str) -> BottomLine {
    let link = link.to_string();
    let largest = b.fitted.iter().copied().max();
    let any_projection = b.candidates.iter().any(|c| !c.2.is_empty());
    if !any_projection {
        let mut out = measured(b, &link);
        if asked {
            out.next = Some("nothing could be projected to the sizes asked: a projection needs demands (uncensored, above the noise) at two or more sizes that are not held out".into());
        }
        return out;
    }
    let Some(&(model, verdict, projections)) = best_candidate(b.candidates) else {
        return no_basis(b.candidates, largest, &size_hint(b));
    };
    let trusted = verdict.trusted();
    let saturation: Vec<&Saturation> = b.saturation.iter().filter(|s| s.model == model).collect();
    let (mut lines, figures) = projected(projections, b.levels, model, &link, &saturation);
    if let Some(s) = saturates(&saturation, model) {
        lines.push(s);
    }
    lines.push(format!("  by {}; {}", name(model), basis(verdict)));
    let advice = narrow::advice(
        projections,
        b.fitted,
        b.runs_per_size,
        b.demand,
        b.min_repeats,
        (b.rule, &b.measured()),
    );
    let next = if trusted {
        advice.as_ref().map(Advice::text)
    } else {
        Some(untrusted_next(
            verdict,
            largest,
            advice.as_ref(),
            &size_hint(b),
        ))
    };
    BottomLine {
        model: Some(model),
        trusted,
        lines,
        figures,
        next,
        advice,
        ..Default::default()
    }
}

/// The candidate with projections whose verdict ranks first ([`rank`]); `None` when no
/// projection passed its backtest. Between equals, the smaller worst error at the
/// backtest's checks, not the narrower interval: choosing the narrower would choose the
/// model whose error is under-stated (measured: the MPI all-to-all's traffic projection,
/// 26.8-43.7 at 10 nodes against a measured 49.5, over DC's, which held it;
/// experiments/2026-11-28-calibrated-intervals.md).
fn best_candidate<'c, 'a>(
    candidates: &'c [(Model, &'a Verdict, &'a [Projection])],
) -> Option<&'c (Model, &'a Verdict, &'a [Projection])> {
    candidates
        .iter()
        .filter(|c| !c.2.is_empty())
        .filter_map(|c| {
            let (first, worst) = rank(c.1)?;
            // Neither checked: the traffic projection, whose errors from two sizes were
            // the smaller on the benchmark's programs (tuning stores: median 1.9 against
            // 2.4 pp from their two largest sizes, 6.4 against 11.1 from 2 and 4;
            // experiments/2026-12-02-two-size-answers.md).
            let unchecked = matches!(c.1, Verdict::Unchecked { .. });
            let second = if unchecked && c.0 == Model::Dc {
                1.0
            } else {
                worst
            };
            Some(((first, second), c))
        })
        .min_by(|a, b| a.0 .0.cmp(&b.0 .0).then(a.0 .1.total_cmp(&b.0 .1)))
        .map(|(_, c)| c)
}

/// The bottom line when no projection can be the answer: each one's verdict, and what to
/// measure next.
fn no_basis(
    candidates: &[(Model, &Verdict, &[Projection])],
    largest: Option<u32>,
    hint: &str,
) -> BottomLine {
    let why: Vec<String> = candidates
        .iter()
        .filter(|c| !c.2.is_empty())
        .map(|c| format!("{}: {}", name(c.0), c.1.text()))
        .collect();
    let untested = candidates
        .iter()
        .filter(|c| !c.2.is_empty())
        .all(|c| matches!(c.1, Verdict::Untested { .. }));
    let head = if untested {
        "no projection could be checked on a measured size"
    } else {
        "no projection passed its backtest"
    };
    BottomLine {
        lines: vec![format!(
            "NO ANSWER for the sizes asked: {head} ({})",
            why.join("; ")
        )],
        next: Some(next_for_failure(candidates, largest, hint)),
        ..Default::default()
    }
}

/// The answer's model's projections at every level, as sentences and figures; one NO
/// ANSWER line where it projects none.
fn projected(
    projections: &[Projection],
    levels: &[f64],
    model: Model,
    link: &str,
    saturation: &[&Saturation],
) -> (Vec<String>, Vec<Figure>) {
    let target = projections.iter().map(|p| p.procs).max().unwrap_or(0);
    let mut lines = Vec::new();
    let mut figures = Vec::new();
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
            let sat = saturation.iter().find(|s| s.cti == c).copied();
            let (line, figure) = statement(p, model, link, sat);
            lines.push(line);
            figures.push(figure);
        }
    }
    if lines.is_empty() {
        lines.push(format!(
            "NO ANSWER at {target} procs: {} projects no level there",
            name(model)
        ));
    }
    (lines, figures)
}

/// How far the answer's model can be trusted, by its backtest's verdict, in words.
fn basis(verdict: &Verdict) -> String {
    match verdict {
        Verdict::Passed { sizes, worst_pp, .. } => format!(
            "TRUSTED: its backtest passed on {sizes} measured sizes (worst {worst_pp:+.1} pp)"
        ),
        Verdict::Thin {
            procs, worst_pp, ..
        } => format!(
            "NOT YET TRUSTED: its backtest checked one size only ({procs} procs, worst {worst_pp:+.1} pp)"
        ),
        Verdict::Unchecked { fitted } => format!(
            "NOT CHECKED on this program: fitted on two sizes ({} procs), too few for a backtest; the interval is the error projections from two sizes showed on other programs",
            list(fitted)
        ),
        Verdict::Unmodelled { part, error, .. } => format!(
            "NOT TRUSTED: its model of {part} misses the sizes left out of its fit by {:.1}%",
            error * 100.0
        ),
        Verdict::CpuBound { procs, share, .. } => format!(
            "NOT TRUSTED: it is fitted on CPU-bound sizes ({} procs, up to {:.0}% of this machine's cores)",
            list(procs),
            share * 100.0
        ),
        _ => String::new(),
    }
}

/// What to measure next when the answer is not trusted: what would make it trusted,
/// then the `advice` that narrows it most.
/// Which sizes to measure next above the largest fitted one when the sizes the program
/// ran at follow a rule (powers of two, squares), none measured already: `, such as 16
/// or 32 (the sizes measured are all powers of two)`; empty when any size will do.
fn size_hint(b: &Basis) -> String {
    let (Some(words), Some(&top)) = (b.rule.words(), b.fitted.iter().max()) else {
        return String::new();
    };
    let next: Vec<String> = b
        .rule
        .next_above(top, 2, &b.measured())
        .iter()
        .map(u32::to_string)
        .collect();
    if next.is_empty() {
        return String::new();
    }
    format!(
        ", such as {} (the sizes measured are all {words})",
        next.join(" or ")
    )
}

fn untrusted_next(
    verdict: &Verdict,
    largest: Option<u32>,
    advice: Option<&Advice>,
    hint: &str,
) -> String {
    let first = match verdict {
        Verdict::Unmodelled { part, .. } => format!(
            "no model of {part} describes the measured sizes: measure nearer to the size you need (above {}), where less is extrapolated",
            largest.map_or("the largest".into(), |l| l.to_string())
        ),
        Verdict::CpuBound { procs, .. } => format!(
            "the runs at {} procs kept this machine's cores busy: measure them where every node has cores of its own (a real cluster, or a machine with more cores), or with fewer ranks per node",
            list(procs)
        ),
        Verdict::Unchecked { fitted } => format!(
            "measure a third size above {}{hint}, with throttled steps around the demand, so the projection is checked on this program",
            fitted.iter().max().map_or("the largest".into(), |l| l.to_string())
        ),
        _ => format!(
            "measure one more size above {}{hint}, with throttled steps around the demand, so the projection is checked on a second size",
            largest.map_or("the largest".into(), |l| l.to_string())
        ),
    };
    match advice {
        Some(a) => format!("{first}; {}", a.text()),
        None => first,
    }
}

/// Where the answer's model says the link saturates, in one line.
fn saturates(saturation: &[&Saturation], model: Model) -> Option<String> {
    let parts: Vec<String> = saturation
        .iter()
        .filter(|s| !s.from_censored)
        .map(|s| match (s.procs, s.interval) {
            (Some(p), Some(i)) => format!(
                "CTI {}% from {p} procs [{:.0}-{}]",
                s.cti,
                i.low.floor(),
                if i.high.is_finite() {
                    format!("{:.0}", i.high.ceil())
                } else {
                    "beyond reach".into()
                }
            ),
            (Some(p), None) => format!("CTI {}% from {p} procs (no interval)", s.cti),
            (None, _) => format!("CTI {}%: not within 2^20 procs", s.cti),
        })
        .collect();
    if parts.is_empty() {
        return None;
    }
    Some(match model {
        Model::Dc => format!(
            "the link saturates (the projected demand against the full link reaches 100% of it): {}",
            parts.join(", ")
        ),
        Model::Traffic => format!(
            "the network, not the CPUs, limits the program: {}; from there even the full link runs it slower than an unlimited network by more than the level (the demand above is against the full link: both hold)",
            parts.join(", ")
        ),
    })
}

/// One projected level as a sentence and its figure, or why it gives no number.
fn statement(
    p: &Projection,
    model: Model,
    link: &str,
    saturation: Option<&Saturation>,
) -> (String, Figure) {
    let head = format!("at {} procs, staying within CTI {}%", p.procs, p.cti);
    let mut figure = Figure::none(p.procs, p.cti, true);
    let no_number = |why: String, mut figure: Figure| {
        figure.why = Some(why.clone());
        (format!("{head}: no number: {why}"), figure)
    };
    if p.from_censored {
        return no_number(
            format!("the demand {} projects from is censored", name(model)),
            figure,
        );
    }
    if p.saturates {
        figure.saturates = true;
        let at = saturation
            .and_then(|s| Some((s.procs?, s.interval)))
            .map(|(n, i)| {
                format!(
                    " (at {n} procs{})",
                    i.map(|i| format!(" [{:.0}-{:.0}]", i.low.floor(), i.high.ceil()))
                        .unwrap_or_default()
                )
            })
            .unwrap_or_default();
        return no_number(
            format!(
                "the link saturates before this size{at}: the projection reaches {:.0}% of the link",
                p.bw_pct
            ),
            figure,
        );
    }
    let Some(i) = p.interval else {
        return no_number("its model error cannot be estimated (no measured size was projected to, or no run-to-run interval)".into(), figure);
    };
    figure.bw_pct = Some(p.bw_pct);
    figure.interval = Some(i);
    let mut s = format!(
        "{head} needs {:.1}% of {link} [{:.1}-{:.1}: where a measurement there would fall, 9 times in 10]",
        p.bw_pct, i.low, i.high
    );
    if let Some(m) = p.measured_bw_pct {
        let mark = p.measured_censored.unwrap_or(Censored::None);
        if p.measured_below_noise {
            s.push_str(
                "; measured there (held out): below that size's noise floor, not a measurement",
            );
        } else {
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
    }
    (s, figure)
}

/// No projection to answer with: the demand measured at the largest size that has one
/// (a larger one without any says so after it: NO ANSWER there, with its reason, never
/// silence); a level below its noise floor is said to be no measurement.
fn measured(b: &Basis, link: &str) -> BottomLine {
    let mut sizes = b.fitted.to_vec();
    sizes.sort_unstable();
    sizes.dedup();
    let with_demand = |p: u32| {
        b.demand
            .iter()
            .any(|d| d.procs == p && b.levels.contains(&d.cti))
    };
    let why_none = |q: u32| {
        b.sizes
            .iter()
            .find(|s| s.0 == q)
            .and_then(|s| s.1.clone())
            .unwrap_or_else(|| NO_DEMAND.to_string())
    };
    let Some(p) = sizes.iter().rev().copied().find(|&p| with_demand(p)) else {
        let all: Vec<u32> = b.sizes.iter().map(|s| s.0).collect();
        return BottomLine {
            lines: vec![format!(
                "NO ANSWER: no size has a demand to report{}",
                if all.is_empty() {
                    String::new()
                } else {
                    format!(" ({} procs: each size's reason is in its row)", list(&all))
                }
            )],
            ..Default::default()
        };
    };
    let mut lines = Vec::new();
    let mut figures = Vec::new();
    for &c in b.levels {
        if let Some(d) = b.demand.iter().find(|d| d.procs == p && d.cti == c) {
            let (line, figure) = measured_statement(d, link);
            lines.push(line);
            figures.push(figure);
        }
    }
    for &q in sizes.iter().rev().filter(|&&q| q > p) {
        lines.push(format!("NO ANSWER at {q} procs: {}", why_none(q)));
    }
    BottomLine {
        lines,
        figures,
        next: Some(
            "to project to a larger size, give --predict with it (from two sizes the answer is NOT CHECKED; measure at least four so its backtest checks it on two)".into(),
        ),
        ..Default::default()
    }
}

/// One measured demand as a sentence and its figure; a level below its size's noise
/// floor is no measurement.
fn measured_statement(d: &Demand, link: &str) -> (String, Figure) {
    let (p, c) = (d.procs, d.cti);
    let head = format!("measured at {p} procs, staying within CTI {c}%");
    let mut figure = Figure {
        below_noise: d.below_noise,
        censored: d.censored,
        ..Figure::none(p, c, false)
    };
    if d.below_noise {
        let why = format!(
            "CTI {c}% is below the noise floor of {p} procs (its runs vary by more than that), so the demand read there is not a measurement; more repeats lower the floor"
        );
        figure.why = Some(why.clone());
        return (format!("{head}: no number: {why}"), figure);
    }
    figure.bw_pct = Some(d.bound.unwrap_or(d.bw_pct));
    figure.interval = d.interval;
    let line = match (d.bound, d.between, d.interval) {
        (Some(bound), _, _) => format!(
            "{head} needs {}{bound:.1}% of {link} (a bound: {})",
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
    };
    (line, figure)
}

/// Why a measured size has no demand at any level asked.
const NO_DEMAND: &str = "no CTI level asked has a measured demand there (no baseline at 100% of the link, or no throttled step reached the level, or its points were given up: see the tables and the warnings)";

/// Sizes as a list in words: "2, 4 and 8".
fn list(sizes: &[u32]) -> String {
    let words: Vec<String> = sizes.iter().map(u32::to_string).collect();
    match words.split_last() {
        Some((last, rest)) if !rest.is_empty() => format!("{} and {last}", rest.join(", ")),
        _ => words.join(""),
    }
}

fn next_for_failure(
    candidates: &[(Model, &Verdict, &[Projection])],
    largest: Option<u32>,
    hint: &str,
) -> String {
    let untested = candidates
        .iter()
        .all(|c| matches!(c.1, Verdict::Untested { .. }));
    if untested {
        format!("measure at least three sizes besides the held-out ones{hint}, with throttled steps around each demand, so a projection can be checked on a measured size")
    } else {
        format!(
            "the models miss the measured sizes: measure sizes nearer to the one you need, above {}{hint}, or that size itself",
            largest.map_or("the largest".into(), |l| l.to_string())
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::trust::bootstrap::Interval;

    fn projection(procs: u32, bw: f64, interval: Option<(f64, f64)>) -> Projection {
        Projection {
            procs,
            cti: 10.0,
            bw_pct: bw,
            saturates: bw >= 100.0,
            noise_interval: interval.map(|(low, high)| Interval::noise(low, high)),
            interval: interval.map(|(low, high)| Interval::with_model_error(low, high)),
            at_levels: Vec::new(),
            model_error: None,
            measured_bw_pct: None,
            measured_censored: None,
            measured_below_noise: false,
            error_pp: None,
            error_is_bound: false,
            from_censored: false,
        }
    }

    /// A basis of these candidates and measured demands, at levels `levels`, fitted on
    /// 4-16 procs.
    fn answer(
        candidates: &[(Model, &Verdict, &[Projection])],
        demand: &[Demand],
        saturation: &[Saturation],
        levels: &[f64],
        asked: bool,
    ) -> BottomLine {
        let runs = BTreeMap::from([(4, 30), (9, 30), (16, 30)]);
        bottom_line(
            &Basis {
                candidates,
                demand,
                saturation,
                levels,
                fitted: &[4, 9, 16],
                runs_per_size: &runs,
                min_repeats: 3,
                capacity: Some(12.5e6),
                sizes: &[(4, None), (9, None), (16, None)],
                held_out: &[],
                cpu_bound: &[],
                rule: SizeRule::Any,
            },
            asked,
        )
    }

    fn passed() -> Verdict {
        Verdict::Passed {
            checks: 4,
            sizes: 2,
            misses: 0,
            rms_pp: 1.0,
            worst_pp: 2.0,
        }
    }

    #[test]
    fn a_model_that_misses_its_own_sizes_ranks_after_one_checked_on_too_few() {
        let thin = Verdict::Thin {
            checks: 1,
            procs: 16,
            misses: 0,
            rms_pp: 1.0,
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
        let b = answer(
            &[(Model::Dc, &thin, &dc), (Model::Traffic, &unmodelled, &tr)],
            &[],
            &[],
            &[10.0],
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
        assert_eq!(b.figures[0].bw_pct, Some(60.0));
    }

    #[test]
    fn no_number_without_an_interval_from_a_censored_demand_or_a_basis() {
        let passed = passed();
        let mut censored = projection(50, 60.0, Some((50.0, 70.0)));
        censored.from_censored = true;
        let mut both = [projection(50, 60.0, None), censored];
        both[1].cti = 20.0;
        let b = answer(
            &[(Model::Dc, &passed, &both)],
            &[],
            &[],
            &[10.0, 20.0],
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
        assert!(b.lines[1].contains("no number: the demand"), "{b:?}");
        assert!(b
            .figures
            .iter()
            .all(|f| f.bw_pct.is_none() && f.why.is_some()));
        // Refuted or untested: NO ANSWER, and what to measure.
        let failed = Verdict::Failed {
            why: "off".into(),
            misses: 3,
            checks: 8,
            worst_pp: 9.0,
        };
        let b = answer(&[(Model::Dc, &failed, &both)], &[], &[], &[10.0], true);
        assert!(
            b.lines[0].starts_with("NO ANSWER") && b.model.is_none(),
            "{b:?}"
        );
        assert!(b.next.unwrap().contains("miss the measured sizes"));
        // Sizes asked, nothing projected: the answer is what was measured, and why.
        let b = answer(&[(Model::Dc, &failed, &[])], &[], &[], &[10.0], true);
        assert!(
            b.next.unwrap().contains("nothing could be projected"),
            "{:?}",
            b.lines
        );
    }

    /// A projection at or past the link is no number: the link saturates before that
    /// size, and the line says where, by the same model.
    #[test]
    fn past_the_link_the_answer_is_where_it_saturates() {
        let passed = passed();
        let proj = [projection(64, 121.0, Some((110.0, 130.0)))];
        let sat = Saturation {
            model: Model::Dc,
            trusted: true,
            cti: 10.0,
            procs: Some(37),
            crossing: Some(36.2),
            noise_interval: Some(Interval::noise(34.0, 39.0)),
            interval: Some(Interval::with_model_error(30.0, 45.0)),
            from_censored: false,
        };
        let b = answer(&[(Model::Dc, &passed, &proj)], &[], &[sat], &[10.0], true);
        assert!(
            b.lines[0]
                .contains("no number: the link saturates before this size (at 37 procs [30-45])"),
            "{b:?}"
        );
        assert!(b.figures[0].saturates && b.figures[0].bw_pct.is_none());
        assert!(
            b.lines[1].contains("the link saturates")
                && b.lines[1].contains("CTI 10% from 37 procs [30-45]"),
            "{b:?}"
        );
    }

    /// A measured demand below its size's noise floor is never stated as a measurement.
    #[test]
    fn a_level_in_the_noise_is_no_measurement() {
        let demand = |cti: f64, below_noise| Demand {
            procs: 16,
            cti,
            bw_pct: 67.9,
            censored: Censored::None,
            bound: None,
            between: Some([60.0, 70.0]),
            below_noise,
            interval: None,
            held_out: false,
        };
        let b = answer(
            &[],
            &[demand(5.0, true), demand(10.0, false)],
            &[],
            &[5.0, 10.0],
            false,
        );
        assert!(
            b.lines[0].contains("no number: CTI 5% is below the noise floor")
                && !b.lines[0].contains("67.9"),
            "{b:?}"
        );
        assert!(b.figures[0].below_noise && b.figures[0].bw_pct.is_none());
        assert!(b.lines[1].contains("needs 67.9%"), "{b:?}");
        assert!(!b.figures[1].below_noise && b.figures[1].bw_pct == Some(67.9));
    }
}
