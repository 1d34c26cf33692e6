//! Latency demand with real agents: a sweep's latency points run on the full link with
//! each added latency set on every node (and the bandwidth points after them without),
//! stored apart from the bandwidth steps, and `analyze` reads each size's tolerance.

use throttle_tests::*;

const SPEC: &str = r#"
workload = "mw"
nodes = [2, 3]
bandwidths = [100, 50]
latencies = [0, 4000, 16000]
repeats = 1
warmup = false
settle = 0
seed = 7
# Six attempts a point: beside a busy loop one latency point was flagged three times in a
# row (agents waiting for a CPU) and given up, failing a test that is about latency.
retries = 5
[mw]
volume = 100000
compute_seconds = 0.05
iterations = 2
"#;

#[test]
fn latency_points_set_their_latency_and_are_analysed_apart() {
    let c = up("latency", 3, "200Mbit", "127.0.47.1");
    let dir = &c.0;
    std::fs::write(dir.join("spec.toml"), SPEC).unwrap();
    // One run flagged on purpose (and more by chance on a busy machine).
    let stall = stall_n0(dir, 2);
    let out = ctl(
        dir,
        &["sweep", "spec.toml", "--db", "l.db", "--plain", "--json"],
    );
    let stalled = stall.finish();
    let err = String::from_utf8_lossy(&out.stderr).to_string();
    assert!(out.status.success(), "{err}");
    assert!(err.contains("lat=16000us"), "{err}");
    // Every run stored with the latency its links had: a latency point's own, a
    // bandwidth point's none (never the last latency point's).
    let rows = throttle_ctl::store::Store::read(&dir.join("l.db"))
        .unwrap()
        .rows()
        .unwrap();
    let mut at: std::collections::BTreeMap<(u32, u64), f64> = Default::default();
    for r in &rows {
        assert_eq!(r.latency_us, r.latency_step.unwrap_or(0), "{r:?}");
        if let (Some(l), true) = (r.latency_step, r.good()) {
            at.insert((r.nodes, l), r.seconds.unwrap());
        }
    }
    // 2 node counts x (2 bandwidths + 0 twice + 2 latencies) that count, and every
    // flagged run besides.
    let (ran, not_counted) = sweep_runs(&json_of(&out));
    assert_eq!(
        rows.iter().filter(|r| r.good()).count(),
        2 * (2 + 2 + 2),
        "{rows:?}"
    );
    assert_eq!(rows.len() as u64, ran, "{rows:?}");
    assert!(
        not_counted >= 1,
        "the stalled run was not flagged ({stalled:?}): {rows:?}"
    );
    for n in [2, 3] {
        assert!(at[&(n, 16000)] > at[&(n, 0)] + 0.016, "{at:?}");
    }
    // The export names the step.
    let csv = stdout_of(&ctl(dir, &["export", "--db", "l.db"]));
    // Second from the end, before the run's share of the cores.
    assert!(
        csv.lines().any(|l| l.rsplit(',').nth(1) == Some("16000")),
        "{csv}"
    );
    // The bandwidth answer has its runs alone; the latency answer its own.
    let a = json_of(&ctl(
        dir,
        &["analyze", "--db", "l.db", "--json", "--cti", "10,50"],
    ));
    let points = a["points"].as_array().unwrap();
    assert!(points.iter().all(|p| p["n"] == 1), "{a}");
    let l = &a["latency"];
    assert_eq!(l["steps_us"], serde_json::json!([0, 4000, 16000]), "{l}");
    assert!(!l["tolerance"].as_array().unwrap().is_empty(), "{l}");
    throttle_tests::json_doc::check("analyze", &a, true);
    let text = stdout_of(&ctl(dir, &["analyze", "--db", "l.db", "--cti", "10,50"]));
    assert!(text.contains("latency demand"), "{text}");
}
