//! The answer and the runs written for other tools, each read back: `analyze
//! --export-markdown` (its tables parsed as GitHub-flavoured Markdown) and `--export-csv`
//! against the `--json` answer; `export --format extrap` parsed by a reader that follows
//! Extra-P's text grammar (`docs/file-formats.md` of github.com/extra-p/extrap) against
//! the stored runs. Stores are built as the controller writes them; no cluster runs.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Output;

use serde_json::Value;
use throttle_ctl::run_status::RunStatus;
use throttle_ctl::store::{RunRow, Store};
use throttle_proto::Pct;
use throttle_tests::*;

fn row(series: &str, procs: u32, bw: Pct, repeat: u32, seconds: f64) -> RunRow {
    RunRow {
        workload: "mw".into(),
        nodes: procs,
        procs,
        started_at: "2026-11-27T00:00:00Z".into(),
        seconds: Some(seconds),
        job: format!("j{procs}-{bw}-{repeat}"),
        ..RunRow::for_test(
            &format!("{series}/{procs}/{bw}/{repeat}"),
            series,
            bw,
            repeat,
        )
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

/// The error of a command that must fail, clearly and without a panic.
fn refused(out: &Output) -> String {
    let err = String::from_utf8_lossy(&out.stderr).to_string();
    assert!(!out.status.success(), "it succeeded: {err}");
    assert!(!err.contains("panicked"), "{err}");
    err
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
        "unmodelled" | "cpu_bound" => "NOT TRUSTED",
        "unchecked" => "NOT CHECKED",
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
    let a: Value = serde_json::from_str(&stdout_of(&out)).unwrap();
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
            shown.contains("saturated"),
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

/// One experiment as Extra-P's text reader builds it: parameters, points, and per
/// (region, metric) the values of each point.
#[derive(Debug, Default)]
struct Extrap {
    parameters: Vec<String>,
    points: Vec<Vec<f64>>,
    data: BTreeMap<(String, String), Vec<Vec<f64>>>,
}

/// Extra-P's text grammar (its docs/file-formats.md, and
/// extrap/fileio/file_reader/text_file_reader.py, 4.2.5): blank and `#` lines skipped;
/// `PARAMETER names`; `POINTS` with points `( c1 c2 )` (bare numbers with one
/// parameter); `REGION name`, `METRIC name`, each resetting the point count; `DATA
/// values` for the next point; at the end every (region, metric) holds one DATA line per
/// point, every point one coordinate per parameter.
fn read_extrap(text: &str) -> Result<Extrap, String> {
    let mut e = Extrap::default();
    let (mut region, mut metric) = (String::new(), String::new());
    for (i, line) in text.lines().enumerate() {
        if line.trim().is_empty() || line.starts_with('#') {
            continue;
        }
        let line = line.split_whitespace().collect::<Vec<_>>().join(" ");
        let (field, value) = line.split_once(' ').unwrap_or((&line, ""));
        match field {
            "PARAMETER" => e.parameters.extend(value.split(' ').map(str::to_string)),
            "POINTS" => {
                if e.parameters.is_empty() || e.parameters.len() > 4 {
                    return Err(format!(
                        "line {i}: POINTS with {} parameters",
                        e.parameters.len()
                    ));
                }
                let groups: Vec<&str> = if value.contains('(') {
                    value
                        .split(')')
                        .map(|g| g.trim().trim_start_matches('(').trim())
                        .filter(|g| !g.is_empty())
                        .collect()
                } else {
                    value.split(' ').collect()
                };
                for g in groups {
                    let c: Result<Vec<f64>, _> = g.split(' ').map(str::parse).collect();
                    e.points
                        .push(c.map_err(|_| format!("line {i}: a coordinate in `{g}`"))?);
                }
            }
            "REGION" => region = value.to_string(),
            "METRIC" => metric = value.to_string(),
            "DATA" => {
                let v: Result<Vec<f64>, _> = value.split(' ').map(str::parse).collect();
                let v = v.map_err(|_| format!("line {i}: a value in `{value}`"))?;
                let d = e.data.entry((region.clone(), metric.clone())).or_default();
                if d.len() >= e.points.len() {
                    return Err(format!("line {i}: more DATA lines than POINTS"));
                }
                d.push(v);
            }
            other => return Err(format!("line {i}: the field `{other}`")),
        }
    }
    if e.parameters.is_empty() || e.points.is_empty() || e.data.is_empty() {
        return Err("parameters, points or data missing".into());
    }
    if let Some(p) = e.points.iter().find(|p| p.len() != e.parameters.len()) {
        return Err(format!(
            "the point {p:?} for {} parameters",
            e.parameters.len()
        ));
    }
    if let Some((k, d)) = e.data.iter().find(|(_, d)| d.len() != e.points.len()) {
        return Err(format!(
            "{k:?}: {} DATA lines for {} points",
            d.len(),
            e.points.len()
        ));
    }
    Ok(e)
}

#[test]
fn export_format_extrap_reads_back_as_the_stored_runs() {
    let s = scratch("export-extrap");
    let dir = &s.0;
    let mut rows = study("mw n=3");
    // What `analyze` leaves out is left out: a failed run, a flagged one, an unlimited one.
    let half = Pct::new(50.0).unwrap();
    rows.push(RunRow {
        status: RunStatus::Failed,
        seconds: None,
        reason: Some("exit 1".into()),
        ..row("mw n=3", 4, half, 7, 0.0)
    });
    rows.push(RunRow {
        flag: Some("an agent starved".into()),
        ..row("mw n=3", 4, half, 8, 99.0)
    });
    rows.push(row("mw n=3", 4, Pct::UNLIMITED, 0, 2.0));
    rows.extend(study("other").into_iter().take(3));
    store(&dir.join("s.db"), &rows);

    // Two series: Extra-P's file holds one set of points, so one series is chosen.
    let err = refused(&ctl(dir, &["export", "--db", "s.db", "--format", "extrap"]));
    assert!(err.contains("--series") && err.contains("`other`"), "{err}");

    let out = ctl(
        dir,
        &[
            "export", "--db", "s.db", "--format", "extrap", "--series", "mw n=3", "--out", "mw.txt",
        ],
    );
    stdout_of(&out);
    let text = std::fs::read_to_string(dir.join("mw.txt")).unwrap();
    let e = read_extrap(&text).unwrap_or_else(|why| panic!("{why}\n{text}"));
    assert_eq!(e.parameters, ["p", "bw"], "{text}");
    assert!(
        text.contains("# p: processes; bw: the bandwidth setting, % of the link (1 Gbit/s)"),
        "{text}"
    );
    assert!(
        text.contains("# metric time: job completion time"),
        "{text}"
    );
    assert!(
        text.contains("1 failed, 1 flagged (links not at their setting), 1 at unlimited bandwidth"),
        "{text}"
    );
    let data = &e.data[&("mw n=3".to_string(), "time".to_string())];
    assert_eq!(e.data.len(), 1);
    // Each point's values are its good runs' seconds, in repeat order.
    let mut want: BTreeMap<(u32, u64), Vec<(u32, f64)>> = BTreeMap::new();
    for r in &rows {
        if r.series == "mw n=3" && r.status == RunStatus::Ok && r.flag.is_none() {
            if let Some(bw) = r.bw_pct.percent() {
                want.entry((r.procs, bw.to_bits()))
                    .or_default()
                    .push((r.repeat, r.seconds.unwrap()));
            }
        }
    }
    assert_eq!(e.points.len(), want.len(), "{text}");
    for (point, values) in e.points.iter().zip(data) {
        let mut runs = want[&(point[0] as u32, point[1].to_bits())].clone();
        runs.sort_by_key(|r| r.0);
        let seconds: Vec<f64> = runs.iter().map(|r| r.1).collect();
        assert_eq!(values, &seconds, "the point {point:?}");
    }
    assert_eq!(data.iter().map(Vec::len).sum::<usize>(), 120);

    // To standard output, and the default CSV keeps its form (with --series, one series).
    let out = stdout_of(&ctl(
        dir,
        &[
            "export", "--db", "s.db", "--format", "extrap", "--series", "other",
        ],
    ));
    let other = read_extrap(&out).unwrap();
    assert_eq!(other.points.len(), 1, "{out}");
    let out = stdout_of(&ctl(dir, &["export", "--db", "s.db", "--series", "other"]));
    assert!(
        out.starts_with("workload,nodes,procs,bw_pct,repeat,seconds,"),
        "{out}"
    );
    assert_eq!(out.lines().count(), 4, "{out}");
}

#[test]
fn exports_to_nowhere_of_nothing_or_of_rates_say_what_is_wrong() {
    let s = scratch("export-bad");
    let dir = &s.0;
    store(&dir.join("s.db"), &study("mw n=3"));

    // A file in a directory that does not exist: refused before any work, named.
    for args in [
        &[
            "analyze",
            "--db",
            "s.db",
            "--export-markdown",
            "no/such/a.md",
        ][..],
        &["analyze", "--db", "s.db", "--export-csv", "no/such/a.csv"],
        &[
            "export",
            "--db",
            "s.db",
            "--format",
            "extrap",
            "--out",
            "no/such/a.txt",
        ],
        &["export", "--db", "s.db", "--out", "no/such/a.csv"],
    ] {
        let err = refused(&ctl(dir, args));
        assert!(
            err.contains("no/such") && err.contains("does not exist"),
            "{args:?}: {err}"
        );
    }
    let err = refused(&ctl(
        dir,
        &["analyze", "--db", "s.db", "--export-markdown", "."],
    ));
    assert!(err.contains("is a directory"), "{err}");
    assert!(!dir.join("no").exists());

    // A store with no runs.
    store(&dir.join("empty.db"), &[]);
    let err = refused(&ctl(
        dir,
        &["export", "--db", "empty.db", "--format", "extrap"],
    ));
    assert!(err.contains("empty.db holds no runs"), "{err}");
    let err = refused(&ctl(
        dir,
        &[
            "analyze",
            "--db",
            "empty.db",
            "--export-markdown",
            "e.md",
            "--export-csv",
            "e.csv",
        ],
    ));
    assert!(err.contains("no runs to analyze"), "{err}");
    assert!(!dir.join("e.md").exists() && !dir.join("e.csv").exists());
    let err = refused(&ctl(dir, &["export", "--db", "s.db", "--series", "nope"]));
    assert!(
        err.contains("no such series") && err.contains("`mw n=3`"),
        "{err}"
    );

    // A store of rates: the analysis works on 1/rate, and every export says so.
    let rates: Vec<RunRow> = study("bfs rate")
        .into_iter()
        .map(|r| {
            let rate = 1e6 / r.seconds.unwrap();
            RunRow {
                kernel_seconds: Some(1.0 / rate),
                metrics: Some(format!("{{\"rate\":{rate}}}")),
                ..r
            }
        })
        .collect();
    store(&dir.join("rates.db"), &rates);
    let text = stdout_of(&ctl(
        dir,
        &["export", "--db", "rates.db", "--format", "extrap"],
    ));
    let e = read_extrap(&text).unwrap();
    assert!(
        e.data
            .contains_key(&("bfs rate".to_string(), "inverse_rate".to_string())),
        "{text}"
    );
    assert!(
        text.contains("# metric inverse_rate: 1/rate: the inverse of the rate"),
        "{text}"
    );
    stdout_of(&ctl(
        dir,
        &[
            "analyze",
            "--db",
            "rates.db",
            "--export-markdown",
            "r.md",
            "--export-csv",
            "r.csv",
        ],
    ));
    let md = std::fs::read_to_string(dir.join("r.md")).unwrap();
    let t = &md_tables(&md)["Completion time per point"];
    // Tables show the rate itself (issue 37, item 9); what was analysed is said.
    assert!(t.header.iter().any(|h| h == "median (rate)"), "{md}");
    assert!(!t.header.iter().any(|h| h.contains("(s)")), "{md}");
    assert!(md.contains("Times (rate): 1/rate"), "{md}");
}
