//! External commands as runs (`run --cmd`, sweep workload `command`): placeholders and the
//! hostfile, the time a regex captures, and every way such a run fails, on a loopback
//! cluster (no root needed). Open MPI through `--cmd` is in `netns.rs`.

use std::path::Path;
use std::time::{Duration, Instant};

use throttle_tests::*;

/// The process whose pid the command wrote to `pidfile`, if it still runs a moment later
/// (a zombie counts as gone).
fn alive_after(pidfile: &Path) -> Option<i32> {
    let pid: i32 = std::fs::read_to_string(pidfile)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    std::thread::sleep(Duration::from_millis(200));
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .map(|s| !s.contains(") Z "))
        .unwrap_or(false)
        .then_some(pid)
}

#[test]
fn a_command_gets_its_nodes_and_bandwidth_and_reports_its_own_time() {
    let c = up("cmd", 3, "1Gbit", "127.0.21.1");
    let dir = &c.0;
    let out = ctl(
        dir,
        &[
            "run",
            "--nodes",
            "2",
            "--ranks-per-node",
            "3",
            "--bw",
            "30",
            "--cmd",
            "echo nodes={nodes} procs={procs} rpn={ranks_per_node} bw={bw}; cat {hostfile}; echo \"cluster=$THROTTLE_CLUSTER\"; throttle_set=$(cat /dev/null); echo 'elapsed: 2.5 s'",
            "--time-regex",
            r"elapsed: ([0-9.]+) s",
        ],
    );
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(text.contains("nodes=2 procs=6 rpn=3 bw=30"), "{text}");
    assert!(
        text.contains("127.0.21.1 slots=3\n127.0.21.2 slots=3\n"),
        "the hostfile lists the chosen nodes: {text}"
    );
    assert!(text.contains("throttle-cluster.toml"), "{text}");
    assert!(text.contains("its own time 2.500 s"), "{text}");

    // JSON: wall time and the captured time; the bandwidth was put back afterwards.
    let (ok, v, err) = json_run(
        dir,
        &[
            "--nodes",
            "1",
            "--bw",
            "unlimited",
            "--cmd",
            "echo bw={bw}; echo t=0.75",
            "--time-regex",
            "t=([0-9.]+)",
        ],
    );
    assert!(ok, "{err}");
    assert_eq!(v["workload"], "command");
    assert_eq!(v["result"]["seconds"], 0.75);
    assert!(v["seconds"].as_f64().unwrap() > 0.0);
    // A rate (Graph500's TEPS): its inverse is the stored time, the rate a metric.
    let (ok, v, err) = json_run(
        dir,
        &[
            "--nodes",
            "1",
            "--cmd",
            "echo 'harmonic_mean_TEPS: 4e8'",
            "--rate-regex",
            r"harmonic_mean_TEPS: +([0-9.e+]+)",
        ],
    );
    assert!(ok, "{err}");
    assert_eq!(v["result"]["seconds"], 2.5e-9, "{v}");
    assert_eq!(v["result"]["metrics"]["rate"], 4e8, "{v}");
    let status = ctl(dir, &["status", "--json"]);
    let s: serde_json::Value = serde_json::from_slice(&status.stdout).unwrap();
    assert_eq!(s[0]["pct"], 100.0, "run put the bandwidth back");
}

#[test]
fn failed_commands_are_failed_runs_with_their_reason() {
    let c = up("cmdfail", 1, "1Gbit", "127.0.22.1");
    let dir = &c.0;
    let cases: &[(&[&str], &str)] = &[
        (
            &["--cmd", "echo partial; exit 3"],
            "exited with status 3; its output says: partial",
        ),
        (
            &["--cmd", "no-such-program-here --flag"],
            "status 127 (command not found?)",
        ),
        (
            &["--cmd", "echo hello", "--time-regex", r"took (\d+)"],
            "matched no line",
        ),
        (
            &["--cmd", "echo took x", "--time-regex", r"took (\S+)"],
            "not a number of seconds",
        ),
    ];
    for (args, want) in cases {
        let mut a = vec!["--nodes", "1"];
        a.extend_from_slice(args);
        let (ok, v, err) = json_run(dir, &a);
        assert!(!ok, "{args:?} should fail");
        assert_eq!(v["status"], "failed", "{args:?}: {v}");
        let reason = v["reason"].as_str().unwrap_or_default();
        assert!(
            reason.contains(want),
            "{args:?}: reason {reason:?}, stderr {err}"
        );
    }
    // Refused before anything runs: an unknown placeholder, a regex without its group.
    for (args, want) in [
        (
            vec!["--cmd", "run {nodez}"],
            "unknown placeholder `{nodez}`",
        ),
        (
            vec!["--cmd", "true", "--time-regex", "took [0-9]+"],
            "exactly one capture group",
        ),
        (vec!["--time-regex", "(x)"], "--cmd"),
    ] {
        let mut a = vec!["run", "--nodes", "1"];
        a.extend_from_slice(&args);
        let out = ctl(dir, &a);
        assert!(!out.status.success());
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(want), "{args:?}: {err}");
    }
}

/// The time limit kills the command's whole process group, children included.
#[test]
fn the_time_limit_kills_the_whole_command() {
    let c = up("cmdlimit", 1, "1Gbit", "127.0.23.1");
    let dir = &c.0;
    let pidfile = dir.join("child.pid");
    let cmd = format!("sleep 300 & echo $! > {}; wait", pidfile.display());
    let start = Instant::now();
    let (ok, v, _) = json_run(dir, &["--nodes", "1", "--time-limit", "1", "--cmd", &cmd]);
    assert!(!ok);
    assert!(start.elapsed() < Duration::from_secs(20));
    assert!(v["reason"].as_str().unwrap().contains("time limit"), "{v}");
    let pid = alive_after(&pidfile);
    assert!(
        pid.is_none(),
        "the command's child {pid:?} outlived the time limit"
    );
}

/// What a command leaves running is killed when it ends, also a daemon in its own
/// session; output that is not UTF-8 neither stops the command nor hides its time.
#[test]
fn a_command_leaves_nothing_running_and_any_output_is_read() {
    let c = up("cmdleft", 1, "1Gbit", "127.0.25.1");
    let dir = &c.0;
    let pidfile = dir.join("daemon.pid");
    let cmd = format!(
        "setsid sleep 300 > /dev/null 2>&1 & echo $! > {}; printf '\\377\\376 not utf-8\\n'; seq 1 100000; echo t=1.5",
        pidfile.display()
    );
    let (ok, v, err) = json_run(
        dir,
        &["--nodes", "1", "--cmd", &cmd, "--time-regex", "t=([0-9.]+)"],
    );
    assert!(ok, "{v} {err}");
    assert_eq!(v["result"]["seconds"], 1.5, "{v}");
    // The whole output is kept (it is under the cap), the line that is not UTF-8 too.
    let lines = v["output"].as_array().unwrap();
    assert_eq!(lines.len(), 100_002, "{:?}", &lines[..3.min(lines.len())]);
    assert_eq!(
        (&lines[1], &lines[100_000]),
        (&"1".into(), &"100000".into())
    );
    let pid = alive_after(&pidfile);
    assert!(pid.is_none(), "the command's daemon {pid:?} outlived it");
}

/// A sweep of a command goes through the store and the analysis like the workloads do.
#[test]
fn a_sweep_of_a_command_is_stored_and_analyzed() {
    let c = up("cmdsweep", 2, "1Gbit", "127.0.24.1");
    let dir = &c.0;
    // Completion time 1 + 10/bw s, the same on every node count: a stand-in that moves
    // no byte through the agents, analysed with --keep-without-traffic (without it its
    // sizes are left out: the link cannot have changed its time).
    std::fs::write(
        dir.join("spec.toml"),
        "workload = \"command\"\nnodes = [1, 2]\nbandwidths = [100, 50, 25]\nrepeats = 1\n\
         [command]\nrun = \"awk 'BEGIN { printf \\\"t=%.4f\\\\n\\\", 1 + 10 / {bw} }'\"\ntime_regex = 't=([0-9.]+)'\n",
    )
    .unwrap();
    let out = ctl(dir, &["sweep", "spec.toml", "--db", "c.db"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let out = ctl(
        dir,
        &[
            "analyze",
            "--db",
            "c.db",
            "--keep-without-traffic",
            "--json",
        ],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout);
    // CTI at 25% = 1.4 / 1.1 - 1 = 27.27%.
    assert!(text.contains("27.27"), "{text}");
}

/// A command's whole output is kept: the terminal shows its last lines (all with
/// --verbose), a sweep stores it with the run, and `output JOB` prints it back.
#[test]
fn a_commands_whole_output_is_kept_with_its_run() {
    let c = up("cmdout", 1, "1Gbit", "127.0.50.1");
    let dir = &c.0;
    let run = |verbose: bool| {
        let mut args = vec!["run", "--nodes", "1", "--cmd", "seq 1 30"];
        if verbose {
            args.push("--verbose");
        }
        let out = ctl(dir, &args);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).to_string()
    };
    let text = run(false);
    assert!(
        text.starts_with("[10 earlier line(s) of output not shown: --verbose prints them]\n11\n"),
        "{text}"
    );
    let text = run(true);
    assert!(text.starts_with("1\n2\n"), "{text}");
    assert!(text.contains("\n30\n"), "{text}");

    // A sweep stores each run's output; its line for a failed run names the job.
    std::fs::write(
        dir.join("spec.toml"),
        "workload = \"command\"\nnodes = [1]\nbandwidths = [100]\nrepeats = 1\nretries = 0\nsettle = 0\nwarmup = false\n\
         [command]\nrun = \"echo first line; seq 1 50; printf 'bell\\\\007\\\\n'; exit 3\"\n",
    )
    .unwrap();
    let out = ctl(dir, &["sweep", "spec.toml", "--db", "o.db"]);
    let err =
        String::from_utf8_lossy(&out.stderr).to_string() + &String::from_utf8_lossy(&out.stdout);
    assert!(!out.status.success(), "{err}");
    let job = err
        .split("stored as job ")
        .nth(1)
        .and_then(|t| t.split(';').next())
        .unwrap_or_else(|| panic!("no job named: {err}"));
    let out = ctl(dir, &["output", job, "--db", "o.db"]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(text.starts_with("first line\n1\n2\n"), "{text}");
    // The bell from the stored text is written out, not rung.
    assert!(text.ends_with("\n50\nbell\\u{7}\n"), "{text}");
    let out = ctl(dir, &["output", "no-such-job", "--db", "o.db"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(
        err.contains("no run of job no-such-job") && err.contains("throttle-ctl export"),
        "{err}"
    );
    // The job name `run` prints is no stored run (issue 54): said, with where its output is.
    for args in [
        &["output", "command-1796241477964-26ecf7", "--db", "o.db"][..],
        &["output", "command-1796241477964-26ecf7"][..],
    ] {
        let out = ctl(dir, args);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success());
        assert!(
            err.contains("`throttle-ctl run` stores nothing") && err.contains("run --verbose"),
            "{err}"
        );
    }
}

#[test]
fn preload_interception_needs_agents_that_serve_the_library() {
    // Agents that do not serve the preload library (n1's, started again without it):
    // asking for the library is an error that names the node and the way to start it,
    // before anything runs.
    let c = up("cmd-preload", 2, "1Gbit", "127.0.24.1");
    let saved = c.0.join(".throttle-local/n1.command.json");
    let argv: Vec<String> =
        serde_json::from_str(&std::fs::read_to_string(&saved).unwrap()).unwrap();
    let mut without = Vec::new();
    let mut skip = 0;
    for a in argv {
        match a.as_str() {
            _ if skip > 0 => skip -= 1,
            "--preload" => {}
            "--preload-port" => skip = 1,
            _ => without.push(a),
        }
    }
    std::fs::write(&saved, serde_json::to_string(&without).unwrap()).unwrap();
    let out = ctl(&c.0, &["local", "restart", "n1"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let marker = c.0.join("ran");
    let out = ctl(
        &c.0,
        &[
            "run",
            "--nodes",
            "2",
            "--intercept",
            "preload",
            "--cmd",
            &format!("touch {}", marker.display()),
        ],
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(
        err.contains("agents of n1 do not serve the preload library") && err.contains("--preload"),
        "{err}"
    );
    assert!(!marker.exists(), "the command did not run");
}

/// Issue 23: a command measured by a rate (Graph500's TEPS line) is analysed, exported
/// and read back in its units: 1/rate, never as seconds (the analysis printed `median s
/// 0.0000` and fitted the traffic model on 1/TEPS mixed with seconds). Issue 37: tables
/// and plots show the rate itself (`median 1/rate 5.6011e-7` was read as nothing a user
/// knows; Graph500 prints TEPS).
#[test]
fn a_command_measured_by_a_rate_is_analysed_in_its_units() {
    let c = up("cmdrate", 2, "1Gbit", "127.0.33.1");
    let dir = &c.0;
    // The rate falls as 1 / (1 + 10/bw): 1/rate = (1 + 10/bw) x 5e-7, printed as the
    // reference program prints it; the regex is the one `run --help` gives.
    std::fs::write(
        dir.join("spec.toml"),
        "workload = \"command\"\nnodes = [1, 2]\nbandwidths = [100, 50, 25]\nrepeats = 1\n\
         [command]\nrun = \"awk 'BEGIN { printf \\\"bfs  harmonic_mean_TEPS:     !  %g\\\\n\\\", 2e6 / (1 + 10 / {bw}) }'\"\nrate_regex = 'harmonic_mean_TEPS:[ !]+([0-9.e+-]+)'\n",
    )
    .unwrap();
    let help = String::from_utf8_lossy(&ctl(dir, &["run", "--help"]).stdout).to_string();
    assert!(
        help.contains("harmonic_mean_TEPS:[ !]+([0-9.e+-]+)"),
        "{help}"
    );
    let out = ctl(dir, &["sweep", "spec.toml", "--db", "c.db"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let out = ctl(
        dir,
        &[
            "analyze",
            "--db",
            "c.db",
            "--keep-without-traffic",
            "--json",
        ],
    );
    let a: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(a["time_unit"], "inverse_rate", "{a}");
    assert!(
        a["time_source"].as_str().unwrap().starts_with("1/rate"),
        "{a}"
    );
    assert!(a["traffic"].is_null(), "no traffic model on 1/rate: {a}");
    // CTI at 25% = 1.4 / 1.1 - 1 = 27.27%.
    assert!(a.to_string().contains("27.27"), "{a}");
    let text = String::from_utf8_lossy(
        &ctl(dir, &["analyze", "--db", "c.db", "--keep-without-traffic"]).stdout,
    )
    .to_string();
    // At 100%: 2e6 / 1.1 TEPS, as the program printed it, under the rate's name.
    assert!(
        text.contains("median harmonic_mean_TEPS") && text.contains("1.8182e6"),
        "{text}"
    );
    assert!(!text.contains("0.0000 ["), "{text}");
    // Exported and read back: the same unit, said in the file.
    let out = ctl(dir, &["export", "--db", "c.db", "--out", "c.csv"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let csv = std::fs::read_to_string(dir.join("c.csv")).unwrap();
    // What `seconds` holds is a column (no comment line: pandas stops at one).
    assert!(
        csv.lines()
            .next()
            .unwrap()
            .ends_with(",rate,rate_name,seconds_is,problem,latency_step,cpu_own"),
        "{csv}"
    );
    assert!(
        throttle_analysis::data::csv::seconds_is(&csv).is_some_and(|w| w.starts_with("1/rate")),
        "{csv}"
    );
    // `rate` and `rate_name` are the columns before `seconds_is` (quoted where it holds
    // commas), the fidelity before them quoted commas too.
    let rates: Vec<(String, f64)> = csv
        .lines()
        .skip(1)
        .filter_map(|l| {
            let mut back = l
                .rsplit_once("1/rate")?
                .0
                .trim_end_matches('"')
                .trim_end_matches(',')
                .rsplit(',');
            let name = back.next()?.to_string();
            Some((name, back.next()?.parse().ok()?))
        })
        .collect();
    assert_eq!(rates.len(), 6, "the rate as printed, every run: {csv}");
    assert!(
        rates.iter().all(|r| r.0 == "harmonic_mean_TEPS"),
        "the rate named as its regex names it: {rates:?}"
    );
    let out = ctl(
        dir,
        &[
            "analyze",
            "--csv",
            "c.csv",
            "--keep-without-traffic",
            "--json",
        ],
    );
    let b: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(b["time_unit"], "inverse_rate", "{b}");
    assert!(b.to_string().contains("27.27"), "{b}");
    // The report's axes show the rate, not its inverse.
    let out = ctl(
        dir,
        &[
            "analyze",
            "--db",
            "c.db",
            "--keep-without-traffic",
            "--report",
            "rep",
        ],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let svgs: String = std::fs::read_dir(dir.join("rep"))
        .unwrap()
        .flatten()
        .filter(|e| e.path().extension().is_some_and(|x| x == "svg"))
        .map(|e| std::fs::read_to_string(e.path()).unwrap())
        .collect();
    assert!(
        svgs.contains("harmonic_mean_TEPS (as the program prints it)")
            && !svgs.contains("1/rate")
            && !svgs.contains("completion time (s)"),
        "the plots' axes"
    );
}

/// Issue 23: a command on a loopback cluster whose processes the agents do not carry is
/// warned about (it ran at 16.7 Gbit/s under a 10% setting, reported ok): after the run
/// when none of its connections went through them (its processes were not started as
/// nodes, with `throttle-ctl exec`), before it when the agents cannot carry any (a
/// cluster file from before they served the preload library).
#[test]
fn a_command_on_a_loopback_cluster_is_warned_about() {
    let c = up("cmdloop", 2, "1Gbit", "127.0.34.1");
    let out = ctl(
        &c.0,
        &["run", "--nodes", "2", "--bw", "10", "--cmd", "true"],
    );
    let err = String::from_utf8_lossy(&out.stderr).to_string();
    assert!(
        err.contains("no connection of this command between nodes went through the agents"),
        "{err}"
    );
    assert!(!err.contains("do not serve the preload library"), "{err}");
    let file = c.0.join("throttle-cluster.toml");
    let text = std::fs::read_to_string(&file).unwrap();
    let old: String = text
        .lines()
        .filter(|l| !l.starts_with("preload ="))
        .map(|l| format!("{l}\n"))
        .collect();
    std::fs::write(&file, old).unwrap();
    let out = ctl(
        &c.0,
        &["run", "--nodes", "2", "--bw", "10", "--cmd", "true"],
    );
    let err = String::from_utf8_lossy(&out.stderr).to_string();
    assert!(
        err.contains("do not serve the preload library")
            && err.contains("nothing between them is shaped"),
        "{err}"
    );
    // One node: nothing between nodes to shape, nothing to warn about.
    let out = ctl(
        &c.0,
        &["run", "--nodes", "1", "--bw", "10", "--cmd", "true"],
    );
    assert!(!String::from_utf8_lossy(&out.stderr).contains("loopback cluster"));
}

/// A second Ctrl-C quits at once, without the drops that put the bandwidth back: the
/// handler puts it back itself (it used to leave the nodes at the run's setting).
#[test]
fn a_second_ctrl_c_still_puts_the_bandwidth_back() {
    let c = up("cmdquit", 2, "1Gbit", "127.0.36.1");
    let dir = &c.0;
    let mut child = std::process::Command::new(exe())
        .args(["run", "--nodes", "2", "--bw", "10", "--cmd", "sleep 30"])
        .current_dir(dir)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let pcts = || -> Vec<serde_json::Value> {
        let s: Vec<serde_json::Value> =
            serde_json::from_slice(&ctl(dir, &["status", "--json"]).stdout).unwrap();
        s.iter().map(|n| n["pct"].clone()).collect()
    };
    let started = Instant::now();
    while pcts() != [10.0, 10.0] {
        assert!(started.elapsed() < Duration::from_secs(20), "never at 10%");
        std::thread::sleep(Duration::from_millis(100));
    }
    // n1 stopped: the first Ctrl-C's kill of the job waits on it (up to the client's
    // timeout), so the second one comes while the first is still at work.
    let n1 = nix::unistd::Pid::from_raw(agent_pid(dir, "n1"));
    nix::sys::signal::kill(n1, nix::sys::signal::Signal::SIGSTOP).unwrap();
    let pid = nix::unistd::Pid::from_raw(child.id() as i32);
    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGINT).unwrap();
    std::thread::sleep(Duration::from_millis(500));
    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGINT).unwrap();
    let status = child.wait().unwrap();
    nix::sys::signal::kill(n1, nix::sys::signal::Signal::SIGCONT).unwrap();
    let err = std::io::read_to_string(child.stderr.take().unwrap()).unwrap();
    assert_eq!(status.code(), Some(130), "{err}");
    assert!(err.contains("quitting"), "the second Ctrl-C quit: {err}");
    // n0 answered: it is back at 100%.
    assert_eq!(pcts()[0], 100.0, "after a second Ctrl-C\n{err}");
}

/// Issue 25, finding 10: a controller killed outright (SIGKILL) left its command running
/// (adopted by init) and the nodes at the run's bandwidth. Now a guard kills what the
/// command started, and the agents put the bandwidth back when the run's lease runs out.
#[test]
fn a_controller_killed_outright_leaves_no_command_and_no_bandwidth_behind() {
    let c = up("cmdkill", 1, "1Gbit", "127.0.41.1");
    let dir = &c.0;
    let (daemon, child) = (dir.join("daemon.pid"), dir.join("child.pid"));
    // Issue 35, finding 10: one that cleared its environment (no marker), in the group.
    let bare = dir.join("bare.pid");
    let hostfile = dir.join("hostfile.path");
    let cmd = format!(
        "echo {{hostfile}} > {}; setsid sleep 300 > /dev/null 2>&1 & echo $! > {}; sleep 301 & echo $! > {}; env -i /bin/sleep 302 & echo $! > {}; wait",
        hostfile.display(),
        daemon.display(),
        child.display(),
        bare.display()
    );
    let pct = || -> f64 {
        let out = ctl(dir, &["status", "--json"]);
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        v[0]["pct"].as_f64().unwrap_or(100.0)
    };
    let mut run = std::process::Command::new(exe())
        .args([
            "run", "--nodes", "1", "--bw", "10", "--lease", "2", "--cmd", &cmd,
        ])
        .current_dir(dir)
        .env_remove("THROTTLE_CLUSTER")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let start = Instant::now();
    while !(daemon.exists() && child.exists() && bare.exists()) {
        assert!(
            start.elapsed() < Duration::from_secs(20),
            "the command did not start"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    std::thread::sleep(Duration::from_millis(200));
    assert_eq!(pct(), 10.0, "the run's bandwidth is set");
    run.kill().unwrap(); // SIGKILL: no handler, no drop runs
    run.wait().unwrap();
    std::thread::sleep(Duration::from_millis(800));
    let left: Vec<i32> = [&daemon, &child, &bare]
        .iter()
        .filter_map(|p| alive_after(p))
        .collect();
    // The bandwidth is back within the lease (2 s) and the agent's check (0.5 s).
    let killed = Instant::now();
    let mut back = pct();
    while back != 100.0 && killed.elapsed() < Duration::from_secs(5) {
        std::thread::sleep(Duration::from_millis(200));
        back = pct();
    }
    for pid in &left {
        let _ = std::process::Command::new("kill")
            .args(["-9", &pid.to_string()])
            .status();
    }
    assert!(
        left.is_empty(),
        "the command's processes {left:?} outlived their controller"
    );
    assert_eq!(back, 100.0, "the nodes stayed at the run's bandwidth");
    // The run's directory (its hostfile) is gone too.
    let run_dir = std::path::PathBuf::from(std::fs::read_to_string(&hostfile).unwrap().trim())
        .parent()
        .unwrap()
        .to_path_buf();
    assert!(
        run_dir.starts_with(std::env::temp_dir()) && !run_dir.exists(),
        "{} outlived its controller",
        run_dir.display()
    );
}

/// The guard (`throttle-ctl __guard`) kills the processes that carry its run's marker when
/// its input ends, and nothing else; without a well-formed marker it kills nothing.
#[test]
fn the_guard_kills_the_marked_processes_and_nothing_else() {
    let marker = "0123456789abcdef0123456789abcdef";
    let sleep = |m: &str| {
        std::process::Command::new("sleep")
            .arg("30")
            .env("THROTTLE_RUN_ID", m)
            .spawn()
            .unwrap()
    };
    let mut marked = sleep(marker);
    let mut other = sleep("ffffffffffffffffffffffffffffffff");
    let guard = |input: &str| {
        use std::io::Write;
        let mut g = std::process::Command::new(exe())
            .arg("__guard")
            .stdin(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        g.stdin.take().unwrap().write_all(input.as_bytes()).unwrap();
        assert!(g.wait().unwrap().success());
    };
    guard("x\n");
    guard("");
    assert!(
        marked.try_wait().unwrap().is_none(),
        "no marker, nothing killed"
    );
    guard(&format!("{marker}\n"));
    let status = marked.wait().unwrap();
    assert!(!status.success(), "the marked process was killed: {status}");
    assert!(
        other.try_wait().unwrap().is_none(),
        "another run's process lives"
    );
    let _ = other.kill();
    let _ = other.wait();
}

/// A run whose bandwidth did not hold (here: someone set another one while it ran, which
/// ends the run's lease) is a failed run with the reason, not a result at the wrong
/// bandwidth.
#[test]
fn a_run_whose_bandwidth_did_not_hold_fails() {
    let c = up("cmdlapse", 1, "1Gbit", "127.0.44.1");
    let dir = c.0.clone();
    let setter = std::thread::spawn({
        let dir = dir.clone();
        move || {
            std::thread::sleep(Duration::from_millis(700));
            ctl(&dir, &["set", "50"])
        }
    });
    let (ok, v, err) = json_run(
        &dir,
        &[
            "--nodes",
            "1",
            "--bw",
            "10",
            "--lease",
            "2",
            "--cmd",
            "sleep 2.5",
        ],
    );
    let set = setter.join().unwrap();
    assert!(set.status.success());
    assert!(!ok, "{v} {err}");
    assert_eq!(v["status"], "failed", "{v}");
    assert!(
        v["reason"]
            .as_str()
            .unwrap_or_default()
            .contains("did not renew the run's bandwidth"),
        "{v}"
    );
}

/// Issue 37: a failing command's own error comes alone: no interception warning before
/// it (a user read "no connection went through the agents" first, then "exited with
/// status 132").
#[test]
fn a_failing_commands_error_comes_alone() {
    let c = up("cmdfail", 2, "1Gbit", "127.0.53.1");
    let out = ctl(&c.0, &["run", "--nodes", "2", "--cmd", "exit 3"]);
    let err = String::from_utf8_lossy(&out.stderr).to_string();
    assert!(!out.status.success(), "{err}");
    assert!(err.contains("status 3"), "{err}");
    assert!(!err.contains("went through the agents"), "{err}");
}

/// Issue 37: "times at this size are CPU-bound" only where the runs kept the CPUs busy:
/// a program that sleeps on more nodes than cores is not (it was warned about from the
/// count of ranks and agents alone).
#[test]
fn a_sleeping_program_is_not_called_cpu_bound() {
    let c = up("cmdsleep", 4, "1Gbit", "127.0.54.1");
    std::fs::write(
        c.0.join("spec.toml"),
        "workload = \"command\"\nnodes = [4]\nranks_per_node = 2\nbandwidths = [100]\nrepeats = 2\n[command]\nrun = \"sleep 0.3\"\n",
    )
    .unwrap();
    let out = ctl(&c.0, &["sweep", "spec.toml", "--db", "s.db", "--plain"]);
    let err = String::from_utf8_lossy(&out.stderr).to_string();
    assert!(out.status.success(), "{err}");
    assert!(!err.contains("CPU-bound"), "{err}");
    // Each run's share of the cores is stored with it (issue 54, item 3).
    let shares = cpu_own_of(&c.0, "s.db");
    assert_eq!(shares.len(), 2, "{shares:?}");
    assert!(shares.iter().all(|s| *s < 0.2), "{shares:?}");
}

/// The stored runs' `cpu_own`, in the order they ran (a run without one: panics).
fn cpu_own_of(dir: &Path, db: &str) -> Vec<f64> {
    throttle_ctl::store::Store::read(&dir.join(db))
        .unwrap()
        .rows()
        .unwrap()
        .iter()
        .map(|r| r.cpu_own.expect("a share"))
        .collect()
}

/// Issue 54, item 3: a program that burns every core has its runs' share stored, and
/// `analyze` marks the size CPU-bound exactly when their median reaches the threshold
/// (beside other load the program gets less of the cores: the share, not a fixed
/// verdict, decides).
#[test]
fn a_program_that_burns_the_cores_is_marked_cpu_bound_in_the_analysis() {
    let c = up("cmdburn", 2, "1Gbit", "127.0.54.33");
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    // Every core busy for 1.5 s per rank, both ranks on the nodes.
    let burn = (0..cores)
        .map(|_| "timeout 1.5 sh -c 'while :; do :; done' &")
        .collect::<String>();
    std::fs::write(
        c.0.join("spec.toml"),
        format!(
            "workload = \"command\"\nnodes = [2]\nbandwidths = [100, 50]\nrepeats = 1\nsettle = 0\n[command]\nrun = \"{burn} wait\"\n"
        ),
    )
    .unwrap();
    let out = ctl(&c.0, &["sweep", "spec.toml", "--db", "s.db", "--plain"]);
    let err = String::from_utf8_lossy(&out.stderr).to_string();
    assert!(out.status.success(), "{err}");
    let shares = cpu_own_of(&c.0, "s.db");
    assert_eq!(shares.len(), 2, "{shares:?}");
    // Generous: beside one busy loop on 2 cores the program still gets about 0.6.
    assert!(shares.iter().all(|s| *s > 0.3), "{shares:?}");
    // The one rule the sweep and the analysis judge a size by.
    let bound = throttle_analysis::trust::cpu::is_bound(&shares);
    eprintln!("cpu_own of the runs: {shares:?}");
    let out = ctl(
        &c.0,
        &[
            "analyze",
            "--db",
            "s.db",
            "--json",
            "--keep-without-traffic",
        ],
    );
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_str(&text).unwrap();
    let marked = v["cpu_bound"].as_array().unwrap();
    assert_eq!(!marked.is_empty(), bound, "{shares:?}: {}", v["cpu_bound"]);
    if bound {
        assert_eq!(marked[0]["procs"], 2);
        assert!(
            v["bottom_line"]["sizes"][0]["cpu_bound"].is_number(),
            "{}",
            v["bottom_line"]
        );
    }
}

/// Issue 44, item 2: a program that cannot start (mpirun's `Executable: ./bfss`) stops
/// the sweep at its warm-up, with that line, before anything is stored; `--ignore-failure`
/// stores the failures and gives the points up; once the cause is fixed, the same
/// command leaves them given up, and `--retry-given-up` runs them.
#[test]
fn a_program_that_cannot_start_stops_the_sweep_and_given_up_points_run_again_when_asked() {
    let c = up("cmdfail", 2, "1Gbit", "127.0.62.1");
    let dir = &c.0;
    std::fs::write(
        dir.join("spec.toml"),
        "workload = \"command\"\nnodes = [1]\nbandwidths = [100, 50]\nrepeats = 1\nretries = 0\nsettle = 0\n\
         [command]\nrun = \"test -f ok || { echo 'Executable: ./bfss'; echo 'while attempting to start process rank 0.'; exit 1; }; echo t=1\"\n\
         time_regex = 't=([0-9.]+)'\n",
    )
    .unwrap();
    let sweep = |extra: &[&str]| {
        let mut args = vec!["sweep", "spec.toml", "--db", "f.db", "--plain"];
        args.extend_from_slice(extra);
        let out = ctl(dir, &args);
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        (out.status.code(), text)
    };
    let stored = || {
        let out = ctl(dir, &["export", "--db", "f.db"]);
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .count()
            .saturating_sub(1)
    };
    let (code, text) = sweep(&[]);
    assert_ne!(code, Some(0), "{text}");
    assert!(
        text.contains("the warm-up run on 1 node(s) failed")
            && text.contains("Executable: ./bfss")
            && text.contains("--ignore-failure"),
        "{text}"
    );
    assert_eq!(stored(), 0, "a failed warm-up stores nothing");
    let (code, text) = sweep(&["--ignore-failure"]);
    assert_eq!(code, Some(1), "{text}");
    assert!(text.contains("--retry-given-up"), "{text}");
    assert_eq!(stored(), 2, "{text}");
    std::fs::write(dir.join("ok"), "").unwrap();
    let (code, text) = sweep(&[]);
    assert_eq!(code, Some(1), "given-up points stay given up: {text}");
    assert!(text.contains("0 runs now"), "{text}");
    let (code, text) = sweep(&["--retry-given-up"]);
    assert_eq!(code, Some(0), "{text}");
    assert!(text.contains("sweep complete: 2 runs now"), "{text}");
}
