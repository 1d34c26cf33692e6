//! Every field the `--json` outputs a script reads most (`analyze`, `run`, `sweep`,
//! `status`) print is named in `docs/json.md`, in the section of its command, and every
//! interval has the one shape the document gives.

use std::fmt::Write as _;

use throttle_tests::*;

/// The section of docs/json.md headed with `command`'s `--json`, after the conventions
/// every output shares.
fn section(command: &str) -> String {
    let doc =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/json.md")).unwrap();
    let head = format!("## `throttle-ctl {command} --json`");
    let from = doc
        .find(&head)
        .unwrap_or_else(|| panic!("docs/json.md has no section {head}"));
    let common = &doc[..doc.find("\n## ").unwrap()];
    let rest = &doc[from + head.len()..];
    format!(
        "{common}{}",
        &rest[..rest.find("\n## ").unwrap_or(rest.len())]
    )
}

/// Keys of `v` not named (as `` `key` ``, or `` `key[]` `` for an array) in the section; with `deep`, of every object
/// inside it too, except the free-form ones (`metrics`, `detail`, `fidelity`).
fn undocumented(v: &serde_json::Value, section: &str, deep: bool, out: &mut Vec<String>) {
    match v {
        serde_json::Value::Object(m) => {
            if let (Some(_), Some(_), Some(c)) = (m.get("low"), m.get("high"), m.get("covers")) {
                assert_eq!(
                    m.len(),
                    3,
                    "an interval with more than low, high, covers: {v}"
                );
                let c = c.as_str().unwrap();
                assert!(
                    section.contains(&format!("`\"{c}\"`")),
                    "covers {c:?} not described"
                );
            }
            for (k, x) in m {
                let named =
                    section.contains(&format!("`{k}`")) || section.contains(&format!("`{k}[]`"));
                if !named && !out.contains(k) {
                    out.push(k.clone());
                }
                if deep && !["metrics", "detail", "fidelity"].contains(&k.as_str()) {
                    undocumented(x, section, deep, out);
                }
            }
        }
        serde_json::Value::Array(a) => {
            for x in a {
                undocumented(x, section, deep, out);
            }
        }
        _ => {}
    }
}

fn check(command: &str, v: &serde_json::Value, deep: bool) {
    let s = section(command);
    let mut missing = Vec::new();
    undocumented(v, &s, deep, &mut missing);
    assert!(
        missing.is_empty(),
        "`{command} --json` prints fields docs/json.md does not name: {missing:?}"
    );
}

fn json(out: &std::process::Output) -> serde_json::Value {
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

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
    let a = json(&ctl(
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
    let s = json(&ctl(dir, &["sweep", "spec.toml", "--db", "s.db", "--json"]));
    assert_eq!(s["result"]["ran"], 1, "{s}");
    check("sweep", &s, true);

    let st = json(&ctl(dir, &["status", "--json"]));
    check("status", &st, false);
}
