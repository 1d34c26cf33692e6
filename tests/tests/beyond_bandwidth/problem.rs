//! A sweep over a problem axis with real agents and the master/worker workload: one
//! series, every run stored with its problem value, resumed to nothing; the export's
//! `problem` column and Extra-P's third parameter; `analyze` answering in both
//! parameters, one value at a time with `--at-problem`, and refusing `--problem` where
//! a series has no axis.

use throttle_tests::*;

// Six attempts a point: beside the other test of this binary, 3 nodes' agents on 2 cores
// waited for a CPU and one point was flagged three times in a row (once in four suite
// runs); this test is about the problem axis, not the links.
const SPEC: &str = r#"
workload = "mw"
nodes = [2, 3]
bandwidths = [100, 25]
repeats = 1
retries = 5
warmup = false
settle = 0
seed = 46
[mw]
volume = 200000
compute_seconds = 0.05
iterations = 1
[problem]
values = [200000, 400000]
"#;

#[test]
fn a_problem_axis_is_swept_stored_exported_and_analysed_in_both_parameters() {
    let c = up("problem", 3, "200Mbit", "127.0.46.1");
    let dir = &c.0;
    std::fs::write(dir.join("spec.toml"), SPEC).unwrap();
    // One run flagged on purpose (and more by chance on a busy machine): stored, counted,
    // its point run again.
    let stall = stall_n0(dir, 2);
    let out = ctl(
        dir,
        &["sweep", "spec.toml", "--db", "p.db", "--plain", "--json"],
    );
    let stalled = stall.finish();
    let err = String::from_utf8_lossy(&out.stderr).to_string();
    assert!(out.status.success(), "{err}");
    assert!(err.contains("(problem value 200000, 1 of 2)"), "{err}");
    assert!(err.contains("(problem value 400000, 2 of 2)"), "{err}");
    let end = json_of(&out);
    assert_eq!(
        end["problems"],
        serde_json::json!([200000, 400000]),
        "{end}"
    );
    assert_eq!(end["result"]["end"], "complete", "{end}");
    let (ran, not_counted) = sweep_runs(&end);
    assert_eq!(ran - not_counted, 8, "{end}");
    assert!(
        not_counted >= 1,
        "the stalled run was not flagged ({stalled:?}): {end}"
    );
    throttle_tests::json_doc::check("sweep", &end, true);
    let series = end["series"].as_str().unwrap().to_string();
    assert!(series.contains(r#"volume="{n}""#), "{series}");

    // Resumed: every point of both values is stored.
    let again = ctl(dir, &["sweep", "spec.toml", "--db", "p.db", "--plain"]);
    assert!(
        again.status.success() && stdout_of(&again).contains("0 runs now, 8 already stored"),
        "{}{}",
        stdout_of(&again),
        String::from_utf8_lossy(&again.stderr)
    );

    // The store: one series, each run with its value, and the work grown with it.
    let rows = throttle_ctl::store::Store::read(&dir.join("p.db"))
        .unwrap()
        .rows()
        .unwrap();
    assert_eq!(rows.len() as u64, ran, "{rows:?}");
    let mut values = std::collections::BTreeMap::new();
    for r in rows.iter().filter(|r| r.good()) {
        assert_eq!(r.series, series);
        let v = r.problem.unwrap();
        let options: serde_json::Value = serde_json::from_str(&r.options).unwrap();
        assert_eq!(options["volume"], v as u64, "{r:?}");
        assert_eq!(options["compute_seconds"], 0.05 * v / 200000.0, "{r:?}");
        *values.entry(v as u64).or_insert(0) += 1;
    }
    assert_eq!(values, [(200000, 4), (400000, 4)].into(), "{rows:?}");
    let csv = stdout_of(&ctl(dir, &["export", "--db", "p.db"]));
    let head = csv.lines().find(|l| !l.starts_with('#')).unwrap();
    assert!(head.ends_with(",problem,latency_step,cpu_own"), "{head}");
    // The problem value, third from the end (then the latency step and the share of the
    // cores the run's processes used).
    assert!(
        csv.lines().any(|l| l.rsplit(',').nth(2) == Some("400000")),
        "{csv}"
    );
    let extrap = stdout_of(&ctl(dir, &["export", "--db", "p.db", "--format", "extrap"]));
    assert!(
        extrap.contains("PARAMETER p\nPARAMETER n\nPARAMETER bw\n")
            && extrap.contains("POINTS ( 3 400000 25 )"),
        "{extrap}"
    );

    // The answer in both parameters.
    let out = ctl(
        dir,
        &[
            "analyze",
            "--db",
            "p.db",
            "--json",
            "--predict",
            "6",
            "--problem",
            "800000",
        ],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let a = json_of(&out);
    assert_eq!(a["axis"]["name"], "volume", "{a}");
    assert_eq!(a["values"], serde_json::json!([200000.0, 400000.0]), "{a}");
    assert_eq!(a["by_problem"].as_array().unwrap().len(), 2, "{a}");
    let demands = a["demand"].as_array().unwrap();
    assert!(
        demands
            .iter()
            .any(|d| d["procs"] == 3 && d["problem"] == 400000.0),
        "{a}"
    );
    assert_eq!(a["backtest"].as_array().unwrap().len(), 3, "{a}");
    throttle_tests::json_doc::check("analyze", &a, true);
    let text = stdout_of(&ctl(dir, &["analyze", "--db", "p.db"]));
    assert!(
        text.contains("two parameters, processes and the problem's volume")
            && text.contains("Demand measured"),
        "{text}"
    );

    // One value alone is a series as before; an axis-less question is refused.
    let one = ctl(
        dir,
        &[
            "analyze",
            "--db",
            "p.db",
            "--json",
            "--at-problem",
            "400000",
        ],
    );
    assert!(
        one.status.success(),
        "{}",
        String::from_utf8_lossy(&one.stderr)
    );
    assert!(json_of(&one)["bottom_line"].is_object());
    let none = ctl(dir, &["analyze", "--db", "p.db", "--at-problem", "300000"]);
    assert!(
        !none.status.success()
            && String::from_utf8_lossy(&none.stderr)
                .contains(&format!("none of the {ran} runs has that problem value")),
        "{}",
        String::from_utf8_lossy(&none.stderr)
    );
    let report = ctl(
        dir,
        &[
            "analyze",
            "--db",
            "p.db",
            "--at-problem",
            "400000",
            "--report",
            "r",
        ],
    );
    assert!(
        report.status.success(),
        "{}",
        String::from_utf8_lossy(&report.stderr)
    );
    let exports = ctl(
        dir,
        &[
            "analyze",
            "--db",
            "p.db",
            "--export-markdown",
            "a.md",
            "--export-csv",
            "a.csv",
        ],
    );
    assert!(
        exports.status.success(),
        "{}",
        String::from_utf8_lossy(&exports.stderr)
    );
    let md = std::fs::read_to_string(dir.join("a.md")).unwrap();
    assert!(
        md.contains("## Demand measured") && md.contains("| procs | volume |"),
        "{md}"
    );
    let rows = std::fs::read_to_string(dir.join("a.csv")).unwrap();
    assert!(
        rows.starts_with("kind,procs,problem,") && rows.contains("\nmeasured,3,400000,"),
        "{rows}"
    );
    let two_report = ctl(dir, &["analyze", "--db", "p.db", "--report", "r2"]);
    assert!(
        !two_report.status.success()
            && String::from_utf8_lossy(&two_report.stderr).contains("--at-problem"),
        "{}",
        String::from_utf8_lossy(&two_report.stderr)
    );
}
