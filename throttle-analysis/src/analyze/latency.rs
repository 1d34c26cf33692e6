//! `analyze` of a series' latency points: each size's steps, its tolerance at each
//! level, the parts modelled in p, the projection to the sizes asked and the backtest
//! that holds out the largest size ([`crate::method::latency`],
//! [`crate::trust::latency_check`]).

use std::collections::BTreeMap;

use super::Question;
use crate::answer::latency::{LatencyAnswer, LatencyPoint};
use crate::data::observation::Observation;
use crate::method::latency::{self, Parts, Steps};
use crate::trust::latency_check;

/// The latency answer of `series` in `obs`; `None` when it has no latency point.
pub fn answer(obs: &[Observation], series: &str, req: &Question) -> Option<LatencyAnswer> {
    let mine: Vec<&Observation> = obs
        .iter()
        .filter(|o| o.series == series && o.latency_step.is_some())
        .collect();
    if mine.is_empty() {
        return None;
    }
    let mut by_size: BTreeMap<u32, Steps> = BTreeMap::new();
    for o in mine
        .iter()
        .filter(|o| o.ok && (req.keep_flagged || o.flag.is_none()))
    {
        let s = by_size.entry(o.procs).or_insert_with(|| Steps {
            procs: o.procs,
            ..Steps::default()
        });
        s.times
            .entry(o.latency_step.unwrap_or(0))
            .or_default()
            .push(o.seconds);
    }
    let mut steps_us: Vec<u64> = mine.iter().filter_map(|o| o.latency_step).collect();
    steps_us.sort_unstable();
    steps_us.dedup();
    let mut points = Vec::new();
    let mut tolerance = Vec::new();
    let mut parts: Vec<Parts> = Vec::new();
    for s in by_size.values() {
        let medians = s.medians();
        let base = medians.get(&0).copied();
        for (&l, &m) in &medians {
            points.push(LatencyPoint {
                procs: s.procs,
                latency_us: l,
                runs: s.times[&l].len(),
                median: m,
                cti: base.filter(|_| l > 0).map(|b| (m / b - 1.0) * 100.0),
            });
        }
        tolerance.extend(req.cti.iter().filter_map(|&c| latency::tolerance(s, c)));
        parts.extend(latency::parts(s));
    }
    // Sizes asked that were measured are held out of every fit, as in the bandwidth
    // answer: the projection to them is compared with what was measured there.
    let fitted: Vec<Parts> = parts
        .iter()
        .copied()
        .filter(|p| !req.predict.contains(&p.procs))
        .collect();
    let largest = fitted.iter().map(|p| p.procs).max();
    let asked: Vec<u32> = if req.predict.is_empty() {
        largest.into_iter().collect()
    } else {
        req.predict.clone()
    };
    let reach = asked.iter().copied().chain(largest).max().unwrap_or(1) as f64;
    // The backtest: the largest fitted size from the smaller ones.
    let (backtest, why_not) = match largest {
        Some(top) if fitted.len() >= 3 => {
            let rest: Vec<Parts> = fitted.iter().copied().filter(|p| p.procs != top).collect();
            match latency::fit(&rest, reach) {
                Some(f) => {
                    let lambda = latency_check::lack_of_fit(&f, &rest, &tolerance);
                    let checks =
                        latency_check::project(&f, &rest, lambda, &[top], &req.cti, &tolerance);
                    (checks, None)
                }
                None => (Vec::new(), Some("no form fits the smaller sizes' parts")),
            }
        }
        _ => (
            Vec::new(),
            Some("fewer than three fitted sizes with a latency that slowed the program: the largest cannot be held out"),
        ),
    };
    let (verdict, verdict_why) = latency_check::verdict(&backtest, why_not);
    let model = latency::fit(&fitted, reach);
    let projection = model.as_ref().map_or_else(Vec::new, |f| {
        let lambda = latency_check::lack_of_fit(f, &fitted, &tolerance);
        latency_check::project(f, &fitted, lambda, &asked, &req.cti, &tolerance)
    });
    Some(LatencyAnswer {
        steps_us,
        points,
        tolerance,
        parts,
        model,
        projection,
        backtest,
        verdict: verdict.to_string(),
        verdict_why,
    })
}
