//! The answer written for other tools, read back: `analyze --export-markdown` (its
//! tables parsed as GitHub-flavoured Markdown) and `--export-csv` against the `--json`
//! answer. Stores are built as the controller writes them; no cluster runs.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Output;

use serde_json::Value;
use throttle_ctl::job::RunStatus;
use throttle_ctl::store::{RunRow, Store};
use throttle_proto::Pct;
use throttle_tests::*;

fn row(series: &str, procs: u32, bw: Pct, repeat: u32, seconds: f64) -> RunRow {
    RunRow {
        point_key: format!("{series}/{procs}/{bw}/{repeat}"),
        series: series.into(),
        workload: "mw".into(),
        options: "{}".into(),
        nodes: procs,
        ranks_per_node: 1,
        procs,
        bw_pct: bw,
        capacity: 125e6,
        latency_us: 0,
        repeat,
        started_at: "2026-11-27T00:00:00Z".into(),
        seconds: Some(seconds),
        kernel_seconds: None,
        teps: None,
        status: RunStatus::Ok,
        bytes_sent: None,
        bytes_received: None,
        cpu_busy_before: None,
        cpu_steal: None,
        metrics: None,
        fidelity: None,
        flag: None,
        reason: None,
        host: "h".into(),
        version: "0".into(),
        job: format!("j{procs}-{bw}-{repeat}"),
    }
}

/// A series with a clear demand (the one `json_fields.rs` analyses): 5 sizes x 8 steps
/// x 3 repeats.
fn study(series: &str) -> Vec<RunRow> {
    let mut rows = Vec::new();
    for p in [2u32, 4, 8, 16, 32] {
        for bw in [100u32, 80, 60, 50, 40, 30, 20, 10] {
            for r in 0..3 {
                let t = (10.0 / p as f64 + 0.5 + 0.02 * (p as f64).sqrt() * 100.0 / bw as f64)
                    * (1.0 + 0.002 * (r as f64 - 1.0));
                rows.push(row(series, p, Pct::new(bw as f64).unwrap(), r, t));
            }
        }
    }
    rows
}

fn store(path: &Path, rows: &[RunRow]) {
    let store = Store::open(path).unwrap();
    for r in rows {
        store.insert(r).unwrap();
    }
}

fn ok(out: &Output) -> String {
    assert!(
        out.status.success(),
        "{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).to_string()
}

/// A GitHub-flavoured Markdown table: its header and rows, cells unescaped.
struct MdTable {
    header: Vec<String>,
    rows: Vec<Vec<String>>,
}

impl MdTable {
    fn col(&self, name: &str) -> usize {
        self.header
            .iter()
            .position(|h| h == name)
            .unwrap_or_else(|| panic!("no column `{name}` in {:?}", self.header))
    }
}

/// One table row's cells: split on `|` not escaped, `\x` read as `x`.
fn cells(line: &str) -> Vec<String> {
    let inner = line
        .trim()
        .strip_prefix('|')
        .and_then(|l| l.strip_suffix('|'))
        .unwrap_or_else(|| panic!("not a table row: {line}"));
    let mut out = vec![String::new()];
    let mut chars = inner.chars();
    while let Some(c) = chars.next() {
        match c {
            '\\' => out.last_mut().unwrap().extend(chars.next()),
            '|' => out.push(String::new()),
            c => out.last_mut().unwrap().push(c),
        }
    }
    out.iter().map(|c| c.trim().to_string()).collect()
}

/// The tables of a Markdown document, by the `## ` heading above each.
fn md_tables(text: &str) -> BTreeMap<String, MdTable> {
    let mut out = BTreeMap::new();
    let mut heading = String::new();
    let lines: Vec<&str> = text.lines().collect();
    let mut i = 0;
    while i < lines.len() {
        if let Some(h) = lines[i].strip_prefix("## ") {
            heading = h.to_string();
        }
        if lines[i].starts_with('|') {
            let header = cells(lines[i]);
            let delimiter = cells(lines[i + 1]);
            assert_eq!(header.len(), delimiter.len(), "{}", lines[i + 1]);
            assert!(
                delimiter
                    .iter()
                    .all(|d| d.trim_matches(':').chars().all(|c| c == '-') && d.contains("---")),
                "not a delimiter row: {}",
                lines[i + 1]
            );
            let mut rows = Vec::new();
            i += 2;
            while i < lines.len() && lines[i].starts_with('|') {
                let r = cells(lines[i]);
                assert_eq!(r.len(), header.len(), "{}", lines[i]);
                rows.push(r);
                i += 1;
            }
            assert!(
                out.insert(heading.clone(), MdTable { header, rows })
                    .is_none(),
                "two tables under {heading}"
            );
            continue;
        }
        i += 1;
    }
    out
}

/// The first number in a cell (after a censoring mark).
fn number(cell: &str) -> f64 {
    let t: String = cell
        .trim_start_matches(['<', '>', '=', ' '])
        .chars()
        .take_while(|c| c.is_ascii_digit() || ".-+e".contains(*c))
        .collect();
    t.parse()
        .unwrap_or_else(|_| panic!("no number in cell `{cell}`"))
}

fn close(a: f64, b: f64, digits: f64) -> bool {
    (a - b).abs() <= 0.5 * 10f64.powf(-digits) + 1e-9
}

fn verdict_word(v: &Value) -> &'static str {
    match v["verdict"].as_str().unwrap() {
        "passed" => "TRUSTED",
        "thin" => "NOT YET TRUSTED",
        "failed" => "FAILED",
        "unmodelled" => "NOT TRUSTED",
        _ => "untested",
    }
}

#[test]
fn the_markdown_and_csv_answers_read_back_as_the_json_one() {
    let s = scratch("export-md");
    let dir = &s.0;
    store(&dir.join("s.db"), &study("mw n=3"));
    let out = ctl(
        dir,
        &[
            "analyze",
            "--db",
            "s.db",
            "--predict",
            "32,64",
            "--json",
            "--export-markdown",
            "a.md",
            "--export-csv",
            "a.csv",
        ],
    );
    let a: Value = serde_json::from_str(&ok(&out)).unwrap();
    let md = std::fs::read_to_string(dir.join("a.md")).unwrap();
    let tables = md_tables(&md);

    // Every header says its unit: a `%` is CTI's or the link's, never bare.
    for (h, t) in &tables {
        for c in &t.header {
            assert!(
                !c.contains('%')
                    || c == "CTI %"
                    || c.contains("(% of the link)")
                    || c.contains("(CTI %)"),
                "table {h}: the header `{c}` has a bare %"
            );
        }
    }
    assert!(md.contains("- ") && md.contains("## Bottom line"), "{md}");
    for l in a["bottom_line"]["lines"].as_array().unwrap() {
        let l = l.as_str().unwrap();
        let first: String = l.chars().take(20).collect();
        assert!(md.contains(&first), "bottom line `{l}` not in\n{md}");
    }

    // The time per point: the medians to their 4 decimals, the CTI to one.
    let t = &tables["Completion time per point"];
    let points = a["points"].as_array().unwrap();
    assert_eq!(t.rows.len(), points.len(), "{md}");
    for (r, p) in t.rows.iter().zip(points) {
        assert_eq!(number(&r[t.col("procs")]), p["procs"].as_f64().unwrap());
        assert_eq!(
            number(&r[t.col("bandwidth (% of the link)")]),
            p["bw_pct"].as_f64().unwrap()
        );
        assert_eq!(number(&r[t.col("runs")]), p["n"].as_f64().unwrap());
        for (col, key) in [
            ("median (s)", "median"),
            ("min (s)", "min"),
            ("max (s)", "max"),
        ] {
            assert!(
                close(number(&r[t.col(col)]), p[key].as_f64().unwrap(), 4.0),
                "{col}: {r:?} vs {p}"
            );
        }
        match p["cti"].as_f64() {
            Some(c) => assert!(close(number(&r[t.col("CTI %")]), c, 1.0), "{r:?}"),
            None => assert_eq!(r[t.col("CTI %")], "-"),
        }
    }

    // The demand per size and level.
    let t = &tables["Bandwidth demand"];
    let demand = a["demand"].as_array().unwrap();
    assert_eq!(t.rows.len(), demand.len(), "{md}");
    for d in demand {
        let r = t
            .rows
            .iter()
            .find(|r| {
                number(&r[t.col("procs")]) == d["procs"].as_f64().unwrap()
                    && number(&r[t.col("CTI %")]) == d["cti"].as_f64().unwrap()
            })
            .unwrap_or_else(|| panic!("no row for {d}"));
        let cell = &r[t.col("demand (% of the link)")];
        let want = d["bound"].as_f64().or(d["bw_pct"].as_f64()).unwrap();
        assert!(close(number(cell), want, 1.0), "{cell} vs {d}");
        let mark = match d["censored"].as_str().unwrap() {
            "below" => "<",
            "above" => ">",
            _ => "",
        };
        assert!(cell.starts_with(mark), "{cell} vs {d}");
        if let Some(i) = d["interval"].as_object() {
            let lo = number(&r[t.col("interval low (% of the link)")]);
            let hi = number(&r[t.col("interval high (% of the link)")]);
            assert!(
                close(lo, i["low"].as_f64().unwrap(), 1.0)
                    && close(hi, i["high"].as_f64().unwrap(), 1.0),
                "{r:?} vs {d}"
            );
        }
        if d["held_out"] == true {
            assert!(r[t.col("note")].contains("held out"), "{r:?}");
        }
    }

    // The projection with its interval and its model's verdict.
    let t = &tables["Projection"];
    let projection = a["projection"].as_array().unwrap();
    assert!(!projection.is_empty(), "{a}");
    assert_eq!(t.rows.len(), projection.len(), "{md}");
    for p in projection {
        let r = t
            .rows
            .iter()
            .find(|r| {
                number(&r[t.col("procs")]) == p["procs"].as_f64().unwrap()
                    && number(&r[t.col("CTI %")]) == p["cti"].as_f64().unwrap()
            })
            .unwrap_or_else(|| panic!("no row for {p}"));
        assert_eq!(r[t.col("model")], "DC");
        assert_eq!(r[t.col("verdict")], verdict_word(&a["verdict"]), "{r:?}");
        let shown = &r[t.col("projected demand (% of the link)")];
        assert!(
            close(number(shown), p["bw_pct"].as_f64().unwrap(), 1.0),
            "{r:?} vs {p}"
        );
        assert_eq!(
            shown.contains("saturates"),
            p["saturates"] == true,
            "{r:?} vs {p}"
        );
        let i = if p["interval"].is_null() {
            &p["noise_interval"]
        } else {
            &p["interval"]
        };
        if i.is_null() {
            assert_eq!(r[t.col("interval low (% of the link)")], "-");
        } else {
            assert!(close(
                number(&r[t.col("interval low (% of the link)")]),
                i["low"].as_f64().unwrap(),
                1.0
            ));
            assert!(close(
                number(&r[t.col("interval high (% of the link)")]),
                i["high"].as_f64().unwrap(),
                1.0
            ));
        }
        if let Some(m) = p["measured_bw_pct"].as_f64() {
            assert!(close(number(&r[t.col("measured (% of the link)")]), m, 1.0));
        }
    }
    // 32 procs was measured: held out, and its projection is set against the measurement.
    assert!(projection
        .iter()
        .any(|p| p["procs"] == 32 && p["measured_bw_pct"].is_f64()));

    // The CSV: the same figures, each number as the JSON holds it.
    let csv = std::fs::read_to_string(dir.join("a.csv")).unwrap();
    assert!(!csv.contains('"'), "no field needs quoting: {csv}");
    let mut lines = csv.lines();
    let header: Vec<&str> = lines.next().unwrap().split(',').collect();
    let col = |n: &str| header.iter().position(|h| *h == n).unwrap();
    let rows: Vec<Vec<&str>> = lines.map(|l| l.split(',').collect()).collect();
    assert!(rows.iter().all(|r| r.len() == header.len()), "{csv}");
    let measured: Vec<&Vec<&str>> = rows.iter().filter(|r| r[0] == "measured").collect();
    let projected: Vec<&Vec<&str>> = rows.iter().filter(|r| r[0] == "projected").collect();
    assert_eq!(measured.len(), demand.len(), "{csv}");
    assert_eq!(projected.len(), projection.len(), "{csv}");
    let f = |s: &str| s.parse::<f64>().unwrap();
    // As the JSON holds it: serde_json's parser may be off by an ulp.
    let same = |a: f64, b: f64| (a - b).abs() <= 1e-12 * a.abs().max(b.abs());
    for d in demand {
        let r = measured
            .iter()
            .find(|r| {
                f(r[col("procs")]) == d["procs"].as_f64().unwrap()
                    && f(r[col("cti_pct")]) == d["cti"].as_f64().unwrap()
            })
            .unwrap();
        assert!(
            same(
                f(r[col("demand_pct_of_link")]),
                d["bound"].as_f64().or(d["bw_pct"].as_f64()).unwrap()
            ),
            "{r:?} vs {d}"
        );
        assert_eq!(r[col("censored")], d["censored"].as_str().unwrap());
        if let Some(i) = d["interval"].as_object() {
            assert!(same(
                f(r[col("interval_low_pct_of_link")]),
                i["low"].as_f64().unwrap()
            ));
            assert!(same(
                f(r[col("interval_high_pct_of_link")]),
                i["high"].as_f64().unwrap()
            ));
        }
    }
    for p in projection {
        let r = projected
            .iter()
            .find(|r| {
                f(r[col("procs")]) == p["procs"].as_f64().unwrap()
                    && f(r[col("cti_pct")]) == p["cti"].as_f64().unwrap()
            })
            .unwrap();
        assert_eq!(r[col("model")], "DC");
        assert_eq!(r[col("verdict")], verdict_word(&a["verdict"]));
        assert!(same(
            f(r[col("demand_pct_of_link")]),
            p["bw_pct"].as_f64().unwrap()
        ));
        assert_eq!(r[col("saturates")], p["saturates"].to_string());
        if let Some(e) = p["error_pp"].as_f64() {
            assert!(same(f(r[col("error_pp")]), e), "{r:?} vs {p}");
        }
    }
}
