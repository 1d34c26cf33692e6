//! Reading runs measured with any tool: a CSV file with at least the columns
//! `workload,nodes,procs,bw_pct,repeat,seconds`.
//!
//! Extra columns are labels: together with `workload` they name the series (runs are
//! compared only within a series), except per-run columns such as `started_at`, `host`,
//! `job`. An optional `problem` column holds the problem's size of a series with a
//! problem axis (empty: none), `latency_step` the added latency of a latency point (us;
//! empty: a bandwidth step). An optional `status` column marks failed runs (anything but `ok`; they need no
//! time). `bw_pct` may be `unlimited`. Fields may be quoted (the `csv` crate reads them);
//! a UTF-8 byte-order mark is skipped. `nodes` must be a whole number from 1 to `procs`.
//! Two rows of one series with the same nodes, procs, bw_pct and repeat are one run
//! written twice (or two runs numbered alike): refused, with both lines. Rows that do not
//! parse are reported with their line number, all of them, and nothing is analysed: the
//! analysis refuses to guess.
//!
//! The time analysed is `seconds` unless the caller names another column
//! (`analyze --csv --time job` reads `wall_seconds`, `--time kernel` `kernel_seconds`:
//! the columns `export` writes beside `seconds`, which holds the time `analyze --db`
//! would use, said in its `seconds_is` column; files exported before that say it in a
//! first `# seconds: ...` comment line, which is read too).

use anyhow::{bail, Result};

use throttle_proto::Pct;

use crate::Observation;

const REQUIRED: [&str; 6] = ["workload", "nodes", "procs", "bw_pct", "repeat", "seconds"];
/// Columns that describe one run rather than the series (never labels).
const PER_RUN: [&str; 22] = [
    "status",
    "problem",
    "latency_step",
    "flag",
    "fidelity",
    "metrics",
    "bytes_sent",
    "bytes_received",
    "cpu_busy_before",
    "cpu_steal",
    "cpu_own",
    "reason",
    "started_at",
    "kernel_seconds",
    "wall_seconds",
    "rate",
    "teps",
    "host",
    "version",
    "job",
    "id",
    "seconds_is",
];

/// Field `i` of a row, if the column exists and the field is not empty.
fn optional<'a>(f: &[&'a str], i: usize) -> Option<&'a str> {
    f.get(i).copied().filter(|v| !v.is_empty())
}

/// Line numbers of byte offsets, from the newlines' positions found once (counting them
/// again for every record made a million-row file quadratic: minutes).
struct Lines<'a> {
    text: &'a [u8],
    newlines: Vec<usize>,
}

impl<'a> Lines<'a> {
    fn new(text: &'a str) -> Lines<'a> {
        let text = text.as_bytes();
        let newlines = text
            .iter()
            .enumerate()
            .filter(|(_, &c)| c == b'\n')
            .map(|(i, _)| i)
            .collect();
        Lines { text, newlines }
    }

    /// The 1-based line of byte `offset`.
    fn at(&self, offset: u64) -> u64 {
        let b = self.text;
        let mut end = (offset as usize).min(b.len());
        // A record's offset may point at blank lines before it.
        while end < b.len() && (b[end] == b'\n' || b[end] == b'\r') {
            end += 1;
        }
        self.newlines.partition_point(|&n| n < end) as u64 + 1
    }
}

/// Where each column the analysis reads is, and which columns are labels (every other
/// column not per run: part of the series).
struct Columns {
    names: Vec<String>,
    workload: usize,
    nodes: usize,
    procs: usize,
    bw_pct: usize,
    repeat: usize,
    seconds: usize,
    /// `usize::MAX` when absent (optional columns).
    status: usize,
    bytes_sent: usize,
    cpu_busy_before: usize,
    cpu_own: usize,
    flag: usize,
    problem: usize,
    latency_step: usize,
    labels: Vec<usize>,
}

impl Columns {
    /// `time`: the column read as the completion time (`seconds` by default).
    fn of(header: &csv::StringRecord, time: &str) -> Result<Columns> {
        if header.is_empty() || header.iter().all(str::is_empty) {
            bail!(
                "the CSV file is empty: it needs a header with {}",
                REQUIRED.join(",")
            );
        }
        let names: Vec<String> = header.iter().map(|c| c.to_ascii_lowercase()).collect();
        let missing: Vec<&str> = REQUIRED
            .iter()
            .copied()
            .filter(|r| !names.iter().any(|c| c == r))
            .collect();
        if !missing.is_empty() {
            bail!(
                "the CSV header lacks column(s) {}; it needs at least {}",
                missing.join(", "),
                REQUIRED.join(",")
            );
        }
        if !names.iter().any(|c| c == time) {
            bail!("the CSV header has no `{time}` column, the time asked for (`throttle-ctl export` writes seconds, wall_seconds and kernel_seconds)");
        }
        let idx = |name: &str| names.iter().position(|c| c == name).unwrap_or(usize::MAX);
        Ok(Columns {
            workload: idx("workload"),
            nodes: idx("nodes"),
            procs: idx("procs"),
            bw_pct: idx("bw_pct"),
            repeat: idx("repeat"),
            seconds: idx(time),
            status: idx("status"),
            bytes_sent: idx("bytes_sent"),
            cpu_busy_before: idx("cpu_busy_before"),
            cpu_own: idx("cpu_own"),
            flag: idx("flag"),
            problem: idx("problem"),
            latency_step: idx("latency_step"),
            labels: (0..names.len())
                .filter(|&i| {
                    !REQUIRED.contains(&names[i].as_str()) && !PER_RUN.contains(&names[i].as_str())
                })
                .collect(),
            names,
        })
    }

    /// One row as an observation, or everything wrong with it.
    fn observation(&self, f: &[&str]) -> Result<Observation, Vec<String>> {
        let procs = f[self.procs].parse::<u32>().ok().filter(|p| *p > 0);
        let nodes = f[self.nodes].parse::<u32>().ok().filter(|n| *n > 0);
        let bw = Pct::parse(f[self.bw_pct]).ok();
        let repeat = f[self.repeat].parse::<u32>().ok();
        let bytes_sent = optional(f, self.bytes_sent).map(str::parse::<u64>);
        let busy = optional(f, self.cpu_busy_before).map(|v| {
            v.parse::<f64>()
                .ok()
                .filter(|b| (0.0..=1.0).contains(b))
                .ok_or(())
        });
        let own = optional(f, self.cpu_own).map(|v| {
            v.parse::<f64>()
                .ok()
                .filter(|b| (0.0..=1.0).contains(b))
                .ok_or(())
        });
        let problem = optional(f, self.problem).map(str::parse::<f64>);
        let latency_step = optional(f, self.latency_step).map(str::parse::<u64>);
        let ok = self.status == usize::MAX || f[self.status].eq_ignore_ascii_case("ok");
        // A failed run need not have a time.
        let seconds = f[self.seconds]
            .parse::<f64>()
            .ok()
            .filter(|s| s.is_finite() && *s > 0.0)
            .or((!ok).then_some(0.0));
        let mut bad = Vec::new();
        if procs.is_none() {
            bad.push(format!(
                "procs `{}` is not a whole number > 0",
                f[self.procs]
            ));
        }
        match (nodes, procs) {
            (None, _) => bad.push(format!(
                "nodes `{}` is not a whole number > 0",
                f[self.nodes]
            )),
            (Some(n), Some(p)) if n > p => bad.push(format!(
                "nodes {n} is more than procs {p} (every node runs at least one process)"
            )),
            _ => {}
        }
        if bw.is_none() {
            bad.push(format!(
                "bw_pct `{}` is not a percentage from 0.01 to 100 or `unlimited`",
                f[self.bw_pct]
            ));
        }
        if repeat.is_none() {
            bad.push(format!("repeat `{}` is not a whole number", f[self.repeat]));
        }
        if seconds.is_none() {
            bad.push(format!(
                "{} `{}` is not a positive number",
                self.names[self.seconds], f[self.seconds]
            ));
        }
        if f[self.workload].is_empty() {
            bad.push("workload is empty".into());
        }
        if let Some(Err(_)) = bytes_sent {
            bad.push(format!(
                "bytes_sent `{}` is not a whole number",
                f[self.bytes_sent]
            ));
        }
        if let Some(Err(_)) = busy {
            bad.push(format!(
                "cpu_busy_before `{}` is not a share from 0 to 1",
                f[self.cpu_busy_before]
            ));
        }
        if let Some(Err(_)) = own {
            bad.push(format!(
                "cpu_own `{}` is not a share from 0 to 1",
                f[self.cpu_own]
            ));
        }
        if let Some(Err(_)) = problem {
            bad.push(format!("problem `{}` is not a number", f[self.problem]));
        }
        if let Some(Err(_)) = latency_step {
            bad.push(format!(
                "latency_step `{}` is not a whole number of microseconds",
                f[self.latency_step]
            ));
        }
        if !bad.is_empty() {
            return Err(bad);
        }
        let mut series = f[self.workload].to_string();
        for &i in &self.labels {
            series.push_str(&format!(" {}={}", self.names[i], f[i]));
        }
        Ok(Observation {
            series: crate::table::printable(&series),
            procs: procs.unwrap_or(1),
            bw_pct: bw.unwrap_or(Pct::UNLIMITED),
            repeat: repeat.unwrap_or(0),
            seconds: seconds.unwrap_or(0.0),
            ok,
            nodes: nodes.unwrap_or(1),
            busy: busy.and_then(Result::ok),
            cpu_own: own.and_then(Result::ok),
            bytes_sent: bytes_sent.and_then(Result::ok),
            // CSV data gets no traffic projection (no link capacity): the proof's
            // per-node bytes are not read.
            busiest_bytes: None,
            flag: optional(f, self.flag).map(crate::table::printable),
            problem: problem.and_then(Result::ok),
            latency_step: latency_step.and_then(Result::ok),
        })
    }
}

/// Parse CSV text into observations, the time read from the `seconds` column.
pub fn parse(text: &str) -> Result<Vec<Observation>> {
    parse_with_time(text, "seconds")
}

/// What the `seconds` column of a file `export` wrote holds, in its words (`wall`,
/// `kernel`, `1/rate ...`): its `seconds_is` column, or the first-line `# seconds: ...`
/// comment of files exported before that column; control characters left out.
pub fn seconds_is(text: &str) -> Option<String> {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let said = match text.lines().next()?.strip_prefix("# seconds: ") {
        Some(old) => old.to_string(),
        None => {
            let mut reader = csv::ReaderBuilder::new()
                .comment(Some(b'#'))
                .flexible(true)
                .trim(csv::Trim::All)
                .from_reader(text.as_bytes());
            let at = reader
                .headers()
                .ok()?
                .iter()
                .position(|h| h == "seconds_is")?;
            reader.records().next()?.ok()?.get(at)?.to_string()
        }
    };
    let said: String = said.chars().filter(|c| !c.is_control()).take(200).collect();
    (!said.is_empty()).then_some(said)
}

/// Parse CSV text into observations, the time read from column `time`.
pub fn parse_with_time(text: &str, time: &str) -> Result<Vec<Observation>> {
    // A spreadsheet's UTF-8 byte-order mark is not part of the first column's name.
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let mut reader = csv::ReaderBuilder::new()
        .comment(Some(b'#'))
        .flexible(true)
        .trim(csv::Trim::All)
        .from_reader(text.as_bytes());
    let header = reader
        .headers()
        .map_err(|e| anyhow::anyhow!("cannot read the CSV header: {e}"))?
        .clone();
    let cols = Columns::of(&header, time)?;
    let lines = Lines::new(text);
    let mut out = Vec::new();
    let mut errors = Vec::new();
    // (series, nodes, procs, bandwidth, repeat) of successful runs -> first line.
    type RunKey = (String, u32, u32, Pct, u32, Option<u64>, Option<u64>);
    let mut seen: std::collections::HashMap<RunKey, u64> = std::collections::HashMap::new();
    for record in reader.records() {
        let record = match record {
            Ok(r) => r,
            Err(e) => {
                let line = e.position().map(|p| lines.at(p.byte())).unwrap_or(0);
                errors.push(format!("line {line}: {e}"));
                continue;
            }
        };
        // The line in the file, counted from the record's byte offset (the reader's own
        // line count skips blank lines).
        let lineno = record.position().map(|p| lines.at(p.byte())).unwrap_or(0);
        if record.iter().all(str::is_empty) {
            continue;
        }
        if record.len() != cols.names.len() {
            errors.push(format!(
                "line {lineno}: {} fields, the header has {}",
                record.len(),
                cols.names.len()
            ));
            continue;
        }
        let f: Vec<&str> = record.iter().collect();
        // What no source may hold (a time beyond MAX_SECONDS) is checked in one place,
        // for the store's rows too.
        let o = match cols.observation(&f).and_then(|o| match o.problems() {
            p if p.is_empty() => Ok(o),
            p => Err(p),
        }) {
            Ok(o) => o,
            Err(bad) => {
                errors.push(format!("line {lineno}: {}", bad.join("; ")));
                continue;
            }
        };
        // A failed (or flagged) attempt and its retry share a repeat number (`export`
        // writes both); two successful, unflagged runs with the same one are a copy.
        if o.ok && o.flag.is_none() {
            let key = (
                o.series.clone(),
                o.nodes,
                o.procs,
                o.bw_pct,
                o.repeat,
                o.problem.map(f64::to_bits),
                o.latency_step,
            );
            if let Some(first) = seen.get(&key) {
                errors.push(format!(
                    "line {lineno}: the same run as line {first} (workload, labels, nodes, procs, bw_pct, repeat and problem all equal, both ok): number repeats apart or remove the copy"
                ));
                continue;
            }
            seen.insert(key, lineno);
        }
        out.push(o);
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
        assert_eq!(obs[1].bw_pct, Pct::UNLIMITED);
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
    fn quoted_fields_and_a_byte_order_mark_are_read() {
        let text = "\u{feff}workload,nodes,procs,bw_pct,repeat,seconds,note\n\"bfs\",1,4,100,0,1.0,\"a, b\"\n";
        let obs = parse(text).unwrap();
        assert_eq!(obs[0].series, "bfs note=a, b");
    }

    #[test]
    fn duplicate_runs_and_impossible_node_counts_are_refused() {
        let text = "workload,nodes,procs,bw_pct,repeat,seconds\nbfs,1,4,100,0,1.0\nbfs,1,4,50,0,1.2\nbfs,1,4,100,0,1.1\nbfs,8,4,50,1,1.0\nbfs,x,4,50,2,1.0\nbfs,1,4,100,1,1.0\n";
        let e = parse(text).unwrap_err().to_string();
        assert!(e.contains("3 row(s)"), "{e}");
        assert!(e.contains("line 4: the same run as line 2"), "{e}");
        assert!(e.contains("line 5: nodes 8 is more than procs 4"), "{e}");
        assert!(e.contains("line 6: nodes `x`"), "{e}");
        // Another series (a label column) or another repeat is another run; so is a
        // failed attempt and its retry; 50 and 50.0 are the same bandwidth.
        let ok = "workload,nodes,procs,bw_pct,repeat,seconds,scale,status\nbfs,1,4,100,0,1.0,20,ok\nbfs,1,4,100,0,1.0,21,ok\nbfs,1,4,100,1,1.0,21,ok\nbfs,1,4,50,0,,21,failed\nbfs,1,4,50,0,1.5,21,ok\n";
        assert_eq!(parse(ok).unwrap().len(), 5);
        let e = parse(
            "workload,nodes,procs,bw_pct,repeat,seconds\nbfs,1,4,50,0,1.0\nbfs,1,4,50.0,0,1.1\n",
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("line 3: the same run as line 2"), "{e}");
    }

    #[test]
    fn a_flagged_run_and_its_retry_are_two_runs_and_the_flag_is_kept() {
        // As `export` writes them: the flag and the fidelity are per run, not labels.
        let text = "workload,nodes,procs,bw_pct,repeat,seconds,status,flag,fidelity
                    bfs,2,2,50,0,1.9,ok,n1 egress carried 80.0% of its setting,{}
                    bfs,2,2,50,0,1.5,ok,,{}
";
        let obs = parse(text).unwrap();
        assert_eq!(obs.len(), 2);
        assert_eq!(obs[0].series, obs[1].series);
        assert!(obs[0].flag.as_deref().unwrap().contains("80.0%"));
        assert_eq!(obs[1].flag, None);
    }

    #[test]
    fn a_runs_share_of_the_cores_is_read_per_run_and_checked() {
        // As `export` writes it: per run, not a label that splits the series.
        let text = "workload,nodes,procs,bw_pct,repeat,seconds,cpu_own\nbfs,2,2,100,0,1.0,0.9\nbfs,2,2,50,0,1.2,\n";
        let obs = parse(text).unwrap();
        assert_eq!(obs[0].series, "bfs");
        assert_eq!((obs[0].cpu_own, obs[1].cpu_own), (Some(0.9), None));
        let e =
            parse("workload,nodes,procs,bw_pct,repeat,seconds,cpu_own\nbfs,2,2,100,0,1.0,1.5\n")
                .unwrap_err()
                .to_string();
        assert!(
            e.contains("cpu_own `1.5` is not a share from 0 to 1"),
            "{e}"
        );
    }

    #[test]
    fn large_files_parse_in_linear_time() {
        // 200,000 rows: counting newlines from the start for every record took minutes.
        let mut text = String::from("workload,nodes,procs,bw_pct,repeat,seconds\n");
        for r in 0..200_000 {
            text.push_str(&format!("bfs,2,2,50,{r},1.5\n"));
        }
        text.push_str("bfs,2,2,50,x,1.5\n");
        let t = std::time::Instant::now();
        let e = parse(&text).unwrap_err().to_string();
        assert!(e.contains("line 200002: repeat `x`"), "{e}");
        assert!(t.elapsed().as_secs_f64() < 20.0, "{:?}", t.elapsed());
    }

    #[test]
    fn a_missing_column_is_named() {
        let e = parse("workload,procs,bw_pct,repeat,seconds\n")
            .unwrap_err()
            .to_string();
        assert!(e.contains("lacks column(s) nodes"), "{e}");
    }
}
