//! The latency demand in words: each size's tolerance at each level, the model's parts,
//! the projection and its backtest.

use crate::answer::latency::LatencyAnswer;
use crate::method::demand::Censored;
use crate::method::latency::Tolerance;
use crate::table::{number, Table};

/// A measured tolerance: `480`, or its bound (`<50`, `>1000`).
fn measured(t: &Tolerance) -> String {
    match t.censored {
        Censored::None => format!("{:.0}", t.latency_us),
        Censored::Below => format!("<{:.0}", t.latency_us),
        Censored::Above => format!(">{:.0}", t.latency_us),
    }
}

/// The section, appended to `out`.
pub fn render(out: &mut String, l: &LatencyAnswer, levels: &[f64]) {
    out.push_str(&format!(
        "\nlatency demand: the largest added one-way latency (us) that keeps the CTI within each level, on the full link (steps {} us; < and > are bounds beyond the steps measured)\n",
        l.steps_us
            .iter()
            .map(u64::to_string)
            .collect::<Vec<_>>()
            .join(", ")
    ));
    let mut head = vec!["procs".to_string(), "m (s per s added)".to_string()];
    head.extend(levels.iter().map(|c| format!("CTI {c}% (us)")));
    let refs: Vec<&str> = head.iter().map(String::as_str).collect();
    let mut t = Table::new(&refs);
    let mut sizes: Vec<u32> = l.tolerance.iter().map(|t| t.procs).collect();
    sizes.sort_unstable();
    sizes.dedup();
    for p in sizes {
        let mut row = vec![
            p.to_string(),
            l.parts
                .iter()
                .find(|s| s.procs == p)
                .map_or("-".into(), |s| number(s.round_trips)),
        ];
        for &c in levels {
            row.push(
                l.tolerance
                    .iter()
                    .find(|t| t.procs == p && t.cti == c)
                    .map_or("-".into(), measured),
            );
        }
        t.row(row);
    }
    out.push_str(&t.render());
    if let Some(f) = &l.model {
        out.push_str(&format!(
            "model T(L) = T(0) + m L: T(0) = {}, m = {}\n",
            f.baseline.best.text(number),
            f.round_trips.best.text(number)
        ));
    }
    if !l.projection.is_empty() {
        let mut t = Table::new(&[
            "procs",
            "CTI %",
            "tolerance (us) [90% interval]",
            "measured",
        ]);
        for x in &l.projection {
            t.row(vec![
                x.procs.to_string(),
                x.cti.to_string(),
                format!("{:.0} [{:.0}-{:.0}]", x.latency_us, x.low, x.high),
                x.measured.map_or("-".into(), |m| format!("{m:.0}")),
            ]);
        }
        out.push_str(&t.render());
    }
    out.push_str(&format!(
        "latency backtest {}: {}\n",
        l.verdict, l.verdict_why
    ));
    for x in l.backtest.iter().filter(|x| x.measured.is_some()) {
        out.push_str(&format!(
            "  {} procs, CTI {}%: projected {:.0} [{:.0}-{:.0}] us, measured {:.0} ({:+.0}%{})\n",
            x.procs,
            x.cti,
            x.latency_us,
            x.low,
            x.high,
            x.measured.unwrap_or(f64::NAN),
            x.error_rel.unwrap_or(f64::NAN) * 100.0,
            if x.inside == Some(false) {
                ", OUTSIDE"
            } else {
                ""
            }
        ));
    }
}
