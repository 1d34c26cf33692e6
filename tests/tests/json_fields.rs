//! Every field the `--json` outputs print is named in `docs/json.md`, in the section of
//! its command, and every interval has the one shape the document gives (the models'
//! outputs are checked in `models.rs`, where their data is made).

use std::fmt::Write as _;

use throttle_tests::json_doc::check;
use throttle_tests::*;

#[test]
fn every_json_field_is_documented() {
    let c = up("jsonfields", 2, "1Gbit", "127.0.51.1");
    let dir = &c.0;

    // analyze: a series with a clear bandwidth demand, five sizes, a held-out size and
    // sizes to predict, so that projections, saturation and the backtest all appear.
    let mut csv = String::from("workload,nodes,procs,bw_pct,repeat,seconds,status\n");
    for p in [2u32, 4, 8, 16, 32] {
        for bw in [100u32, 80, 60, 50, 40, 30, 20, 10] {
            for r in 0..3 {
                let t = (10.0 / p as f64 + 0.5 + 0.02 * (p as f64).sqrt() * 100.0 / bw as f64)
                    * (1.0 + 0.002 * (r as f64 - 1.0));
                writeln!(csv, "app,{p},{p},{bw},{r},{t:.5},ok").unwrap();
            }
        }
    }
    std::fs::write(dir.join("a.csv"), csv).unwrap();
    let a = json_of(&ctl(
        dir,
        &[
            "analyze",
            "--csv",
            "a.csv",
            "--json",
            "--predict",
            "32,64,128",
        ],
    ));
    for key in ["projection", "saturation", "backtest", "points", "demand"] {
        assert!(
            a[key].as_array().is_some_and(|x| !x.is_empty()),
            "no {key} to check: {a}"
        );
    }
    assert!(
        a["dc_interval"]["covers"] == "noise",
        "{}",
        a["dc_interval"]
    );
    check("analyze", &a, true);

    let (ok, r, err) = json_run(
        dir,
        &[
            "--nodes",
            "2",
            "--bw",
            "50",
            "--cmd",
            "echo t=0.5",
            "--time-regex",
            "t=([0-9.]+)",
        ],
    );
    assert!(ok, "{err}");
    check("run", &r, false);

    std::fs::write(
        dir.join("spec.toml"),
        "workload = \"command\"\nname = \"echo\"\nnodes = [1]\nbandwidths = [100]\nrepeats = 1\nwarmup = false\nsettle = 0\n[command]\nrun = \"true\"\n",
    )
    .unwrap();
    let s = json_of(&ctl(dir, &["sweep", "spec.toml", "--db", "s.db", "--json"]));
    assert_eq!(s["result"]["ran"], 1, "{s}");
    check("sweep", &s, true);

    let st = json_of(&ctl(dir, &["status", "--json"]));
    check("status", &st, false);
    // `set` prints the nodes' status after the change (its section says so).
    check(
        "status",
        &json_of(&ctl(dir, &["set", "40", "--json"])),
        false,
    );
    let f = json_of(&ctl(
        dir,
        &[
            "forward",
            "add",
            "--from",
            "n0",
            "--listen",
            "127.0.51.1:5400",
            "--to",
            "n1:127.0.51.2:5401",
            "--json",
        ],
    ));
    check("forward", &f, false);
    check(
        "forward",
        &json_of(&ctl(dir, &["forward", "list", "--json"])),
        false,
    );
    let c = json_of(&ctl(dir, &["calibrate", "--seconds", "0.5", "--json"]));
    check("calibrate", &c, false);

    // A cluster of its own for local up and down, and a cluster file of a real one.
    let other = scratch("jsonlocal");
    let up = json_of(&ctl(
        &other.0,
        &[
            "local",
            "up",
            "--nodes",
            "1",
            "--base-addr",
            "127.0.52.1",
            "--json",
        ],
    ));
    check("local up", &up, false);
    check("local up", &up["cluster"], false);
    check("local up", &up["cluster"]["node"], false);
    check(
        "local down",
        &json_of(&ctl(&other.0, &["local", "down", "--json"])),
        false,
    );
    let init = json_of(&ctl(
        &other.0,
        &[
            "cluster",
            "init",
            "--hosts",
            "n0=198.18.70.1,n1=198.18.70.2",
            "--capacity",
            "1Gbit",
            "--json",
        ],
    ));
    check("cluster init", &init, false);
    check("cluster init", &init["agents"], false);
}
