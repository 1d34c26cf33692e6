//! Reading runs measured with any tool: a CSV file with at least the columns
//! `workload,nodes,procs,bw_pct,repeat,seconds`.
//!
//! Extra columns are labels: together with `workload` they name the series (runs are
//! compared only within a series), except per-run columns such as `started_at`, `host`,
//! `job`. An optional `status` column marks failed runs (anything but `ok`; they need no
//! time). `bw_pct` may be `unlimited`. Rows that do not parse are reported with their
//! line number, all of them, and nothing is analysed: the analysis refuses to guess.

use anyhow::{bail, Result};

use super::Observation;

const REQUIRED: [&str; 6] = ["workload", "nodes", "procs", "bw_pct", "repeat", "seconds"];
/// Columns that describe one run rather than the series (never labels).
const PER_RUN: [&str; 9] = [
    "status",
    "reason",
    "started_at",
    "kernel_seconds",
    "teps",
    "host",
    "version",
    "job",
    "id",
];

/// Parse CSV text into observations.
pub fn parse(text: &str) -> Result<Vec<Observation>> {
    let mut lines = text
        .lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty() && !l.starts_with('#'));
    let Some((_, header)) = lines.next() else {
        bail!(
            "the CSV file is empty: it needs a header with {}",
            REQUIRED.join(",")
        );
    };
    let cols: Vec<String> = header
        .split(',')
        .map(|c| c.trim().to_ascii_lowercase())
        .collect();
    let missing: Vec<&str> = REQUIRED
        .iter()
        .copied()
        .filter(|r| !cols.iter().any(|c| c == r))
        .collect();
    if !missing.is_empty() {
        bail!(
            "the CSV header lacks column(s) {}; it needs at least {}",
            missing.join(", "),
            REQUIRED.join(",")
        );
    }
    let idx = |name: &str| cols.iter().position(|c| c == name).unwrap_or(usize::MAX);
    let (iw, ipr, ibw, irep, isec, ist) = (
        idx("workload"),
        idx("procs"),
        idx("bw_pct"),
        idx("repeat"),
        idx("seconds"),
        idx("status"),
    );
    let labels: Vec<usize> = (0..cols.len())
        .filter(|&i| !REQUIRED.contains(&cols[i].as_str()) && !PER_RUN.contains(&cols[i].as_str()))
        .collect();
    let mut out = Vec::new();
    let mut errors = Vec::new();
    for (n, line) in lines {
        let lineno = n + 1;
        if line.contains('"') {
            errors.push(format!("line {lineno}: quoted fields are not supported"));
            continue;
        }
        let f: Vec<&str> = line.split(',').map(str::trim).collect();
        if f.len() != cols.len() {
            errors.push(format!(
                "line {lineno}: {} fields, the header has {}",
                f.len(),
                cols.len()
            ));
            continue;
        }
        let procs = f[ipr].parse::<u32>().ok().filter(|p| *p > 0);
        let bw = if f[ibw].eq_ignore_ascii_case("unlimited") {
            Some(None)
        } else {
            f[ibw]
                .parse::<f64>()
                .ok()
                .filter(|b| b.is_finite() && *b > 0.0 && *b <= 100.0)
                .map(Some)
        };
        let repeat = f[irep].parse::<u32>().ok();
        let ok = ist == usize::MAX || f[ist].eq_ignore_ascii_case("ok");
        // A failed run need not have a time.
        let seconds = f[isec]
            .parse::<f64>()
            .ok()
            .filter(|s| s.is_finite() && *s > 0.0)
            .or((!ok).then_some(0.0));
        let mut bad = Vec::new();
        if procs.is_none() {
            bad.push(format!("procs `{}` is not a whole number > 0", f[ipr]));
        }
        if bw.is_none() {
            bad.push(format!(
                "bw_pct `{}` is not a number in (0, 100] or `unlimited`",
                f[ibw]
            ));
        }
        if repeat.is_none() {
            bad.push(format!("repeat `{}` is not a whole number", f[irep]));
        }
        if seconds.is_none() {
            bad.push(format!("seconds `{}` is not a positive number", f[isec]));
        }
        if f[iw].is_empty() {
            bad.push("workload is empty".into());
        }
        if !bad.is_empty() {
            errors.push(format!("line {lineno}: {}", bad.join("; ")));
            continue;
        }
        let mut series = f[iw].to_string();
        for &i in &labels {
            series.push_str(&format!(" {}={}", cols[i], f[i]));
        }
        out.push(Observation {
            series,
            procs: procs.unwrap_or(1),
            bw_pct: bw.unwrap_or(None),
            repeat: repeat.unwrap_or(0),
            seconds: seconds.unwrap_or(0.0),
            ok,
        });
    }
    if !errors.is_empty() {
        let shown: Vec<String> = errors.iter().take(20).cloned().collect();
        bail!(
            "{} row(s) of the CSV file do not parse:\n  {}{}",
            errors.len(),
            shown.join("\n  "),
            if errors.len() > 20 {
                format!("\n  ... and {} more", errors.len() - 20)
            } else {
                String::new()
            }
        );
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_required_and_label_columns() {
        let text = "workload,nodes,procs,bw_pct,repeat,seconds,scale,status\nbfs,4,72,100,0,12.5,27,ok\nbfs,4,72,unlimited,1,12.0,27,ok\nbfs,4,72,30,0,14.1,27,failed\n";
        let obs = parse(text).unwrap();
        assert_eq!(obs.len(), 3);
        assert_eq!(obs[0].series, "bfs scale=27");
        assert_eq!(obs[0].procs, 72);
        assert_eq!(obs[1].bw_pct, None);
        assert!(!obs[2].ok);
    }

    #[test]
    fn reports_every_bad_row_with_its_line_number() {
        let text = "workload,nodes,procs,bw_pct,repeat,seconds\nbfs,1,4,100,0,1.0\nbfs,1,four,100,0,1.0\nbfs,1,4,150,0,1.0\nbfs,1,4,50,0\n\nbfs,1,4,50,0,-2\n";
        let e = parse(text).unwrap_err().to_string();
        assert!(e.contains("4 row(s)"), "{e}");
        assert!(e.contains("line 3: procs `four`"), "{e}");
        assert!(e.contains("line 4: bw_pct `150`"), "{e}");
        assert!(e.contains("line 5: 5 fields"), "{e}");
        assert!(e.contains("line 7: seconds `-2`"), "{e}");
    }

    #[test]
    fn a_missing_column_is_named() {
        let e = parse("workload,procs,bw_pct,repeat,seconds\n")
            .unwrap_err()
            .to_string();
        assert!(e.contains("lacks column(s) nodes"), "{e}");
    }
}
