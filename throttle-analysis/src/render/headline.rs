//! The bottom line as the terminal shows it: one row per size, largest first, a cell per
//! CTI level (the number with its interval, or a word for why there is none), then the
//! basis, saturation and what to measure next, wrapped to [`LINE`](crate::table::LINE)
//! characters. The sentences of `analyze --json`'s `bottom_line.lines` say the same at
//! length.

use crate::answer::{Analysis, Figure, Projection};
use crate::method::demand::Censored;
use crate::table::{wrap, Table};
use crate::trust::backtest::Model;

/// The bottom line, ending with a blank line.
pub fn render(a: &Analysis, levels: &[f64], capacity: Option<&str>) -> String {
    let b = &a.bottom_line;
    let mut out = format!(
        "BOTTOM LINE: % of {} a run needs to stay within each CTI (how much slower than on the full link)\n",
        capacity.map_or("the link".to_string(), |c| format!("a {c} link"))
    );
    let (table, notes) = table(a, levels);
    if let Some(t) = table {
        out.push_str(&t.render());
    }
    for n in notes {
        out.push_str(&format!("{}\n", wrap(&format!("  {n}"), "      ")));
    }
    for l in b.remarks() {
        out.push_str(&format!(
            "{}\n",
            wrap(&format!("  {}", l.trim_start()), "    ")
        ));
    }
    if let Some(n) = &b.next {
        out.push_str(&format!("{}\n", wrap(&format!("  next: {n}"), "    ")));
    }
    out.push('\n');
    out
}

/// The bottom line's table, one row per size (none without a size), and the notes that
/// say what its marks and words mean: the terminal's and the report's.
pub fn table(a: &Analysis, levels: &[f64]) -> (Option<Table>, Vec<String>) {
    let b = &a.bottom_line;
    let mut header = vec!["procs".to_string(), String::new()];
    header.extend(levels.iter().map(|c| format!("CTI {c}%")));
    let hdr: Vec<&str> = header.iter().map(String::as_str).collect();
    let mut t = Table::new(&hdr);
    let projections = model_projections(a);
    let mut projected: Vec<u32> = b
        .figures
        .iter()
        .filter(|f| f.projected)
        .map(|f| f.procs)
        .collect();
    projected.sort_unstable_by(|x, y| y.cmp(x));
    projected.dedup();
    let mut notes: Vec<String> = Vec::new();
    // Numbered reasons: a row's or a cell's, each said once below the table.
    let mut whole: Vec<String> = Vec::new();
    for &p in &projected {
        let mut row = vec![p.to_string(), "projected".into()];
        for &c in levels {
            row.push(
                match b.figures.iter().find(|f| f.procs == p && f.cti == c) {
                    Some(f) => cell(f, &mut notes, &mut whole),
                    None => "-".into(),
                },
            );
        }
        t.row(row);
        // A held-out size: what was measured there, against the interval.
        if projections
            .iter()
            .any(|q| q.procs == p && q.measured_bw_pct.is_some())
        {
            let mut row = vec![String::new(), label(a, p, "measured", &mut whole)];
            for &c in levels {
                let q = projections.iter().find(|q| q.procs == p && q.cti == c);
                let f = b.figures.iter().find(|f| f.procs == p && f.cti == c);
                row.push(held_out(q, f));
            }
            t.row(row);
        }
    }
    // A held-out size is under its projection, unless nothing was measured there: then
    // its own row says why.
    for s in b
        .sizes
        .iter()
        .filter(|s| !projected.contains(&s.procs) || s.why.is_some())
    {
        let base = if s.held_out {
            "measured (held out)"
        } else {
            "measured"
        };
        let mut row = vec![s.procs.to_string(), label(a, s.procs, base, &mut whole)];
        match &s.why {
            Some(why) => {
                row.push(format!("no demand: see ({})", note(&mut whole, why)));
                row.extend(levels.iter().skip(1).map(|_| String::new()));
            }
            None => {
                for &c in levels {
                    row.push(match s.cells.iter().find(|f| f.cti == c) {
                        Some(f) => cell(f, &mut notes, &mut whole),
                        None => "-".into(),
                    });
                }
            }
        }
        t.row(row);
    }
    let table = (!projected.is_empty() || !b.sizes.is_empty()).then_some(t);
    let mut said = Vec::new();
    if !projected.is_empty() {
        said.push(
            "projected [a-b]: where a measurement there would fall, 9 times in 10".to_string(),
        );
    }
    let cells = || b.sizes.iter().flat_map(|s| &s.cells);
    if cells().any(|f| f.interval.is_some()) {
        said.push("measured [a-b]: run-to-run noise (90%)".into());
    }
    if cells().any(|f| f.bw_pct.is_some() && f.censored != Censored::None) {
        said.push(
            "<B: the lowest step B sufficed; >B: even the highest throttled step B was too slow"
                .into(),
        );
    }
    let mut lines = Vec::new();
    if !said.is_empty() {
        lines.push(said.join("; "));
    }
    lines.extend(
        whole
            .iter()
            .enumerate()
            .map(|(i, n)| format!("({}) {n}", i + 1)),
    );
    lines.extend(notes);
    (table, lines)
}

/// A measured row's label (`base`), marked where its size is CPU-bound, with the reason
/// numbered among `numbered`.
fn label(a: &Analysis, procs: u32, base: &str, numbered: &mut Vec<String>) -> String {
    let share = a
        .bottom_line
        .sizes
        .iter()
        .find(|s| s.procs == procs)
        .and_then(|s| s.cpu_bound);
    match share {
        Some(share) => {
            let why = format!(
                "CPU-bound: that size's runs used {:.0}% of this machine's cores (their median), so its times measure the cores as much as the link",
                share * 100.0
            );
            format!("{base}, CPU-bound ({})", note(numbered, &why))
        }
        None => base.to_string(),
    }
}

/// The projections of the model the bottom line answers with.
fn model_projections(a: &Analysis) -> &[Projection] {
    match a.bottom_line.model {
        Some(Model::Dc) => &a.projection,
        Some(Model::Traffic) => a.traffic.as_ref().map_or(&[], |t| &t.projection[..]),
        None => &[],
    }
}

/// The number `n` a note is listed under, adding it when new.
fn note(notes: &mut Vec<String>, why: &str) -> usize {
    match notes.iter().position(|n| n == why) {
        Some(i) => i + 1,
        None => {
            notes.push(why.to_string());
            notes.len()
        }
    }
}

/// One figure as a cell: the number and its interval, a bound, or a word for why there is
/// no number (the first time a word is used, a note says what it means; a reason of its
/// own is numbered among `numbered`).
fn cell(f: &Figure, notes: &mut Vec<String>, numbered: &mut Vec<String>) -> String {
    let mut word = |w: &str, meaning: &str| {
        let n = format!("{w}: {meaning}");
        if !notes.contains(&n) {
            notes.push(n);
        }
        w.to_string()
    };
    if f.below_noise {
        return word(
            "noise",
            "the level is below that size's noise floor (its runs vary by more): no measurement; more repeats lower it",
        );
    }
    if f.saturates {
        return word(
            "saturates",
            "the projection reaches the full link before that size: no number there",
        );
    }
    let Some(v) = f.bw_pct else {
        let why = f.why.as_deref().unwrap_or("no figure could be given");
        return format!("no number ({})", note(numbered, why));
    };
    match (f.censored, f.interval) {
        (Censored::None, Some(i)) => format!("{v:.1} [{:.1}-{:.1}]", i.low, i.high),
        (c, _) => format!("{}{v:.1}", c.mark()),
    }
}

/// What was measured at a held-out size, against its projection's interval.
fn held_out(q: Option<&Projection>, f: Option<&Figure>) -> String {
    let Some(q) = q else { return "-".into() };
    let Some(m) = q.measured_bw_pct else {
        return "-".into();
    };
    if q.measured_below_noise {
        return "noise".into();
    }
    let mark = q.measured_censored.unwrap_or(Censored::None);
    let inside = f.and_then(|f| f.interval).map(|i| match mark {
        Censored::None => i.low <= m && m <= i.high,
        Censored::Below => i.low <= m,
        Censored::Above => i.high >= m,
    });
    format!(
        "{}{m:.1}{}",
        mark.mark(),
        match inside {
            Some(true) => " inside",
            Some(false) => " OUTSIDE",
            None => "",
        }
    )
}
