//! What users of command-line tools expect, checked on the real binaries: a closed pipe is
//! not an error, a dead node stays in the status table, `--json` where scripts need it,
//! a run puts the bandwidth back, agent logs are plain text and tell what happened.

use std::process::Command;

use throttle_tests::*;

#[test]
fn export_into_a_closed_pipe_ends_quietly() {
    let s = scratch("pipe");
    let db = s.0.join("r.db");
    {
        let store = throttle_ctl::store::Store::open(&db).unwrap();
        for i in 0..5000 {
            store
                .insert(&throttle_ctl::store::RunRow {
                    point_key: format!("k{i}"),
                    series: "bfs scale=8".into(),
                    workload: "bfs".into(),
                    options: "{}".into(),
                    nodes: 1,
                    ranks_per_node: 1,
                    procs: 1,
                    bw_pct: throttle_proto::Pct::FULL,
                    capacity: 125e6,
                    latency_us: 0,
                    repeat: i,
                    started_at: "2026-11-22T00:00:00Z".into(),
                    seconds: Some(1.0),
                    kernel_seconds: None,
                    teps: None,
                    status: throttle_ctl::run_status::RunStatus::Ok,
                    bytes_sent: None,
                    bytes_received: None,
                    cpu_busy_before: None,
                    cpu_steal: None,
                    metrics: None,
                    fidelity: None,
                    flag: None,
                    problem: None,
                    latency_step: None,
                    cpu_own: None,
                    reason: None,
                    host: "h".into(),
                    version: "0".into(),
                    job: "j".into(),
                })
                .unwrap();
        }
    }
    let out = Command::new("bash")
        .args([
            "-o",
            "pipefail",
            "-c",
            &format!(
                "'{}' export --db '{}' | head -1",
                exe().display(),
                db.display()
            ),
        ])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "exit {:?}: {err}", out.status);
    assert!(err.is_empty(), "{err}");
    // The header first (no comment line: pandas stops at one); `head -1` closed the pipe
    // after it.
    assert!(String::from_utf8_lossy(&out.stdout).starts_with("workload,nodes,procs,"));
}

/// `THROTTLE_CLUSTER=` (set, empty) is unset, as shells read `${VAR:-default}`: the
/// default cluster file is named, not an empty path (issue 37); every flag of every
/// command says what it does in `--help`.
#[test]
fn an_empty_cluster_variable_is_unset_and_help_describes_every_flag() {
    let s = scratch("emptyvar");
    let out = Command::new(exe())
        .args(["status"])
        .current_dir(&s.0)
        .env("THROTTLE_CLUSTER", "")
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success() && err.contains("no cluster file at throttle-cluster.toml"),
        "{err}"
    );
    for cmd in [
        "sweep",
        "analyze",
        "export",
        "output",
        "set",
        "status",
        "run",
        "exec",
        "demo",
        "forward add",
        "forward remove",
        "deploy",
        "calibrate",
        "completions",
        "model pmm",
        "model mw",
        "model loggps",
        "local up",
        "local down",
        "local restart",
    ] {
        let help = Command::new(exe())
            .args(cmd.split(' ').chain(["--help"]))
            .output()
            .unwrap();
        let help = String::from_utf8_lossy(&help.stdout).to_string();
        let lines: Vec<&str> = help.lines().collect();
        for (i, line) in lines.iter().enumerate() {
            let flag = line.trim_start();
            let indent = line.len() - flag.len();
            let is_flag =
                |t: &str| t.starts_with("--") || (t.starts_with('-') && t.get(2..4) == Some(", "));
            if indent < 2 || !is_flag(flag) {
                continue;
            }
            // A description on the same line (after two spaces), or on the next, deeper.
            let same_line = flag.split("  ").filter(|p| !p.trim().is_empty()).count() > 1;
            let next_line = lines.get(i + 1).is_some_and(|n| {
                let t = n.trim_start();
                !t.is_empty() && n.len() - t.len() > indent && !is_flag(t)
            });
            assert!(
                same_line || next_line,
                "`{cmd} --help`: a flag without a description: {line}"
            );
        }
    }
    // Clap's help turns every `{n}` into a line break (issue 55, finding 4: "a command's
    // its" and a broken line in `sweep --help` and `analyze --help`), so no help text may
    // hold one; the man pages show the texts as written.
    let man = s.0.join("man");
    let out = Command::new(exe()).arg("man").arg(&man).output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    for page in std::fs::read_dir(&man).unwrap() {
        let page = page.unwrap().path();
        let text = std::fs::read_to_string(&page).unwrap();
        assert!(
            !text.contains("{n}"),
            "{}: a help text holds `{{n}}`, which `--help` prints as a line break",
            page.display()
        );
    }
}

#[test]
fn a_dead_node_stays_in_the_status_table_and_json() {
    let c = up("deadstatus", 2, "1Gbit", "127.0.19.1");
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(agent_pid(&c.0, "n1")),
        nix::sys::signal::Signal::SIGKILL,
    )
    .unwrap();
    std::thread::sleep(std::time::Duration::from_millis(200));
    let out = ctl(&c.0, &["status"]);
    assert_eq!(out.status.code(), Some(1));
    let table = String::from_utf8_lossy(&out.stdout).to_string();
    let lines: Vec<&str> = table.lines().map(str::trim_start).collect();
    assert_eq!(lines.len(), 3, "{table}");
    assert!(
        lines[1].starts_with("n0") && lines[1].contains("100%"),
        "{table}"
    );
    assert!(
        lines[2].starts_with("n1")
            && lines[2].contains("down")
            && lines[2].contains("no agent answers at http://127.0.19.2:"),
        "{table}"
    );
    let out = ctl(&c.0, &["status", "--json"]);
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v[0]["node"], "n0");
    assert!(v[1]["error"].as_str().unwrap().contains("n1"), "{v}");
}

#[test]
fn local_up_and_sweep_speak_json_and_a_run_puts_the_bandwidth_back() {
    let s = scratch("jsonup");
    let out = ctl(
        &s.0,
        &[
            "local",
            "up",
            "--nodes",
            "2",
            "--base-addr",
            "127.0.20.1",
            "--json",
        ],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["cluster"]["node"].as_array().unwrap().len(), 2, "{v}");
    assert!(ctl(&s.0, &["set", "40"]).status.success());
    let out = ctl(
        &s.0,
        &[
            "run",
            "--workload",
            "bfs",
            "--scale",
            "8",
            "--keys",
            "2",
            "--nodes",
            "2",
            "--bw",
            "70",
        ],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let status: serde_json::Value =
        serde_json::from_slice(&ctl(&s.0, &["status", "--json"]).stdout).unwrap();
    assert_eq!(status[0]["pct"], 40.0, "run --bw 70 must put 40% back");
    assert_eq!(status[1]["pct"], 40.0);
    std::fs::write(
        s.0.join("spec.toml"),
        "workload = \"bfs\"\nnodes = [1, 2]\nbandwidths = [100]\nrepeats = 1\n[bfs]\nscale = 8\nkeys = 2\n",
    )
    .unwrap();
    let out = ctl(&s.0, &["sweep", "spec.toml", "--db", "r.db", "--json"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["result"]["end"], "complete", "{v}");
    assert_eq!(v["result"]["ran"], 2, "{v}");
    let status: serde_json::Value =
        serde_json::from_slice(&ctl(&s.0, &["status", "--json"]).stdout).unwrap();
    assert_eq!(status[0]["pct"], 40.0, "the sweep must put 40% back");
    // The agents' log files: plain text, and they say what happened.
    let log = std::fs::read_to_string(s.0.join(".throttle-local/n0.log")).unwrap();
    assert!(!log.contains('\u{1b}'), "colour codes in the log file");
    for what in ["agent started", "shape set", "job launched", "rank ended"] {
        assert!(log.contains(what), "`{what}` not in the log:\n{log}");
    }
}

/// Issue 37: `sweep ... 2>&1 | head -6` stops the sweep once `head` has its lines, the way
/// other tools stop on a closed pipe (it used to go on, unseen, until killed): the
/// bandwidth is put back, what ran is stored, the status is a closed pipe's (141).
#[test]
fn a_closed_output_stops_a_sweep() {
    let s = up("closedsweep", 2, "1Gbit", "127.0.47.1");
    assert!(ctl(&s.0, &["set", "40"]).status.success());
    std::fs::write(
        s.0.join("spec.toml"),
        "workload = \"bfs\"\nnodes = [1, 2]\nbandwidths = [100, 90, 80, 70, 60, 50, 40, 30, 20, 10]\nrepeats = 3\n[bfs]\nscale = 8\nkeys = 2\n",
    )
    .unwrap();
    let started = std::time::Instant::now();
    let out = Command::new("bash")
        .args([
            "-c",
            &format!(
                "'{}' sweep spec.toml --db r.db --plain 2>&1 | head -6; echo \"status ${{PIPESTATUS[0]}}\"",
                exe().display()
            ),
        ])
        .current_dir(&s.0)
        .env_remove("THROTTLE_CLUSTER")
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(text.ends_with("status 141\n"), "{text}");
    let store = throttle_ctl::store::Store::read(&s.0.join("r.db")).unwrap();
    let stored = store.rows().unwrap().len();
    assert!(
        (1..60).contains(&stored),
        "{stored} of 60 runs stored in {:?}",
        started.elapsed()
    );
    let status: serde_json::Value =
        serde_json::from_slice(&ctl(&s.0, &["status", "--json"]).stdout).unwrap();
    assert_eq!(
        status[0]["pct"], 40.0,
        "the sweep must put 40% back: {status}"
    );
    assert_eq!(status[1]["pct"], 40.0, "{status}");
}

/// Issue 37: `local up` says where the nodes are and what to do next, not the cluster
/// file (a token path and ports are for programs: `--json`, or the file).
#[test]
fn local_up_says_where_the_nodes_are() {
    let s = scratch("upsays");
    let out = ctl(
        &s.0,
        &["local", "up", "--nodes", "2", "--base-addr", "127.0.49.1"],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        !text.contains("token_file") && !text.contains("[[node]]"),
        "{text}"
    );
    assert!(
        text.contains(" n0 ") && text.contains("127.0.49.1") && text.contains("127.0.49.2"),
        "{text}"
    );
    assert!(text.contains("throttle-ctl exec n0 --"), "{text}");
    assert!(text.contains("throttle-ctl local down"), "{text}");
}
