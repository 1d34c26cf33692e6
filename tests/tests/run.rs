//! `throttle-ctl run` end to end: real agents launching real workload processes.

use std::process::Command;
use std::time::{Duration, Instant};

use throttle_tests::*;

/// Processes whose command line contains `needle` (other than this test).
fn processes_with(needle: &str) -> Vec<String> {
    let mut found = Vec::new();
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(cmd) = std::fs::read(e.path().join("cmdline")) else {
            continue;
        };
        let cmd = String::from_utf8_lossy(&cmd).replace('\0', " ");
        if cmd.contains(needle) {
            found.push(cmd);
        }
    }
    found
}

#[test]
fn bfs_and_pmm_run_through_the_agents_and_verify() {
    let c = up("wl", 3, "1Gbit", "127.0.8.1");
    let (ok, v, err) = json_run(
        &c.0,
        &[
            "--workload",
            "bfs",
            "--scale",
            "10",
            "--keys",
            "8",
            "--nodes",
            "3",
            "--ranks-per-node",
            "2",
            "--bw",
            "50",
        ],
    );
    assert!(ok, "{err}");
    assert_eq!(v["status"], "ok");
    assert_eq!(v["procs"], 6);
    assert_eq!(v["result"]["check"], "passed", "{v}");
    assert_eq!(v["result"]["detail"]["grid"], serde_json::json!([2, 3]));
    assert!(
        v["result"]["metrics"]["harmonic_mean_teps"]
            .as_f64()
            .unwrap()
            > 0.0
    );
    for bcast in ["flat", "binomial", "pipelined"] {
        let (ok, v, err) = json_run(
            &c.0,
            &[
                "--workload",
                "pmm",
                "--size",
                "96",
                "--bcast",
                bcast,
                "--nodes",
                "3",
                "--ranks-per-node",
                "3",
                "--bw",
                "30",
            ],
        );
        assert!(ok, "{bcast}: {err}");
        assert_eq!(v["result"]["check"], "passed", "{v}");
        assert_eq!(v["result"]["detail"]["grid"], 3);
    }
}

#[test]
fn a_crashing_rank_fails_the_job_with_its_message_and_leaves_nothing_running() {
    let c = up("crash", 2, "1Gbit", "127.0.9.1");
    let start = Instant::now();
    let (ok, v, err) = json_run(
        &c.0,
        &[
            "--workload",
            "program",
            "--program",
            "throttle-selftest",
            "--nodes",
            "2",
            "--ranks-per-node",
            "2",
            "--",
            "--crash-rank",
            "2",
            "--sleep",
            "60",
            "--spawn-child",
        ],
    );
    assert!(!ok);
    assert_eq!(v["status"], "failed", "{v}");
    let reason = v["reason"].as_str().unwrap();
    assert!(
        reason.contains("rank 2")
            && reason.contains("code 7")
            && reason.contains("crashing on purpose"),
        "{reason}"
    );
    assert!(err.contains("crashing on purpose"), "{err}");
    assert!(
        start.elapsed() < Duration::from_secs(30),
        "the other ranks were not stopped"
    );
    // Nothing left: no selftest rank, no child it started.
    let deadline = Instant::now() + Duration::from_secs(3);
    loop {
        let left = [
            processes_with("throttle-selftest"),
            processes_with("sleep 1000"),
        ]
        .concat();
        if left.is_empty() {
            break;
        }
        assert!(Instant::now() < deadline, "left running: {left:?}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Rank processes (throttle-selftest) whose command line contains `needle`.
fn ranks_with(needle: &str) -> Vec<String> {
    processes_with(needle)
        .into_iter()
        .filter(|c| {
            c.split(' ')
                .next()
                .is_some_and(|p| p.ends_with("throttle-selftest"))
        })
        .collect()
}

#[test]
fn run_starts_only_the_workloads_never_the_agent_or_the_controller() {
    let c = up("deny", 1, "1Gbit", "127.0.10.1");
    let bin = exe().parent().unwrap().to_path_buf();
    let agent = bin.join("throttle-agent").display().to_string();
    for program in [
        "/bin/sh",
        "../../../../../bin/sh",
        "throttle-agent",
        "throttle-ctl",
        agent.as_str(),
        "no-such-program",
    ] {
        // `throttle-ctl --cluster /etc/passwd status` once returned the file's first line.
        let (ok, _, err) = json_run(
            &c.0,
            &[
                "--workload",
                "program",
                "--program",
                program,
                "--nodes",
                "1",
                "--",
                "--cluster",
                "/etc/passwd",
                "status",
            ],
        );
        assert!(!ok);
        assert!(err.contains("not allowed on this node"), "{program}: {err}");
        assert!(!err.contains("root:"), "{program}: {err}");
    }
}

/// Finding 6 of the security review: a controller killed mid-run leaves nothing behind;
/// the agents kill the job when its lease runs out.
#[test]
fn a_killed_controller_leaves_no_job_behind() {
    let c = up("lease", 2, "1Gbit", "127.0.15.1");
    let marker = "--sleep 66.5";
    let mut run = Command::new(exe())
        .args([
            "run",
            "--workload",
            "program",
            "--program",
            "throttle-selftest",
            "--nodes",
            "2",
            "--lease",
            "2",
            "--",
            "--sleep",
            "66.5",
        ])
        .current_dir(&c.0)
        .env_remove("THROTTLE_CLUSTER")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    while ranks_with(marker).len() < 2 {
        assert!(Instant::now() < deadline, "the ranks never started");
        std::thread::sleep(Duration::from_millis(20));
    }
    // Longer than the lease: the controller renews while it lives.
    std::thread::sleep(Duration::from_secs(3));
    assert_eq!(
        ranks_with(marker).len(),
        2,
        "the lease expired while renewed"
    );
    run.kill().unwrap();
    run.wait().unwrap();
    let killed = Instant::now();
    while !ranks_with(marker).is_empty() {
        assert!(
            killed.elapsed() < Duration::from_secs(6),
            "the job outlived its controller: {:?}",
            ranks_with(marker)
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let status: serde_json::Value =
        serde_json::from_slice(&ctl(&c.0, &["status", "--json"]).stdout).unwrap();
    for node in status.as_array().unwrap() {
        assert_eq!(node["jobs"], 0, "{node}");
        assert_eq!(node["running_jobs"], 0, "{node}");
    }
}

#[test]
fn the_time_limit_kills_a_job_that_hangs() {
    let c = up("limit", 1, "1Gbit", "127.0.11.1");
    let start = Instant::now();
    let (ok, v, _) = json_run(
        &c.0,
        &[
            "--workload",
            "program",
            "--program",
            "throttle-selftest",
            "--nodes",
            "1",
            "--ranks-per-node",
            "2",
            "--time-limit",
            "2",
            "--",
            "--sleep",
            "60",
        ],
    );
    assert!(!ok);
    assert!(v["reason"].as_str().unwrap().contains("time limit"), "{v}");
    assert!(start.elapsed() < Duration::from_secs(20));
}

#[test]
fn bad_run_arguments_are_explained() {
    let c = up("args", 2, "1Gbit", "127.0.12.1");
    for (args, hint) in [
        (&["--workload", "bfs", "--nodes", "5"][..], "lists 2 nodes"),
        (
            &["--workload", "bfs", "--nodes", "1", "--bw", "0"][..],
            "0.01 to 100",
        ),
        (
            &["--workload", "sort", "--nodes", "1"][..],
            "possible values: bfs, pmm, mw, program",
        ),
        (
            &["--workload", "mw", "--nodes", "1", "--alpha", "2"][..],
            "alpha must be between 0 and 1",
        ),
        (
            &["--workload", "pmm", "--nodes", "1", "--bcast", "tree"][..],
            "possible values: flat, binomial, pipelined",
        ),
        (&["--workload", "program", "--nodes", "1"][..], "--program"),
    ] {
        let (ok, _, err) = json_run(&c.0, args);
        assert!(!ok, "{args:?}");
        assert!(err.contains(hint), "{args:?}: {err}");
    }
    // A process count the program would refuse is refused before anything is shaped or
    // launched (the ranks' own check stays: workloads' unit tests).
    let (ok, v, err) = json_run(&c.0, &["--workload", "pmm", "--nodes", "2", "--size", "64"]);
    assert!(!ok && v.is_null(), "{v}");
    assert!(
        err.contains("pmm needs a square number of processes"),
        "{err}"
    );
    // Issue 55, finding 3: a size whose blocks fit one by one but not together (more than
    // any machine's memory here: about 1.8 TiB) is refused before anything is launched,
    // with the figures; so is it by a rank on its own node (wherever the controller could
    // not know the node's memory).
    let (ok, v, err) = json_run(
        &c.0,
        &["--workload", "pmm", "--nodes", "1", "--size", "200000"],
    );
    assert!(!ok && v.is_null(), "{v}");
    assert!(
        err.contains("needs about") && err.contains("available"),
        "{err}"
    );
    let rank = std::process::Command::new(bin_dir().join("throttle-pmm"))
        .args(["--size", "200000"])
        .env("THROTTLE_SIZE", "4")
        .env("THROTTLE_NODE_RANKS", "4")
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&rank.stderr);
    assert_eq!(rank.status.code(), Some(2), "{said}");
    assert!(
        said.contains("needs about") && said.contains("MemAvailable"),
        "{said}"
    );
}

#[test]
fn ranks_die_with_their_agent_even_when_it_is_killed() {
    let c = up("pdeath", 1, "1Gbit", "127.0.14.1");
    let marker = "--sleep 77.5";
    let run = Command::new(exe())
        .args([
            "run",
            "--workload",
            "program",
            "--program",
            "throttle-selftest",
            "--nodes",
            "1",
            "--ranks-per-node",
            "2",
            "--",
            "--sleep",
            "77.5",
        ])
        .current_dir(&c.0)
        .env_remove("THROTTLE_CLUSTER")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    while processes_with(marker).len() < 2 {
        assert!(Instant::now() < deadline, "the ranks never started");
        std::thread::sleep(Duration::from_millis(20));
    }
    let cluster = std::fs::read_to_string(c.0.join("throttle-cluster.toml")).unwrap();
    let pid: i32 = cluster
        .lines()
        .find_map(|l| l.strip_prefix("pid = "))
        .and_then(|p| p.trim().parse().ok())
        .unwrap();
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(pid),
        nix::sys::signal::Signal::SIGKILL,
    )
    .unwrap();
    let deadline = Instant::now() + Duration::from_secs(5);
    while !processes_with(marker).is_empty() {
        assert!(
            Instant::now() < deadline,
            "ranks outlived their agent: {:?}",
            processes_with(marker)
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let out = run.wait_with_output().unwrap();
    assert!(
        !out.status.success(),
        "the controller must report the lost job"
    );
}

/// A paced incast (three workers answering one master at 20 % of 200 Mbit/s) over
/// loopback: before the agents capped their segment size, a sender whose next 64 KB
/// segment did not fit the paced reader's window waited for TCP's 200 ms persist timer,
/// about one iteration in forty. The job also runs longer than 10 s, past the moment a
/// rank used to be SIGKILLed when the thread that launched it retired. The cap itself
/// is guarded by `transport::tests` in the agent: with it removed this test now passes
/// (0.396-0.399 s, three runs, 2026-12-03; the agents' reads changed since), so here the
/// check is one of any stall on the paced loopback path, the persist timer's or another.
///
/// The load it tolerates: the check bounds the slowest iteration from above, which a
/// machine that stops does too (CI once saw 0.396-1.226 s). A run during which some CPU
/// kept a 5 ms sleeper waiting 50 ms or more ([`PauseWatch`]), or whose links the agents
/// flagged, cannot decide; it is run again, up to three times in all. The persist timer's
/// stall leaves the CPUs free, so it is judged.
///
/// [`PauseWatch`]: throttle_testkit::pause::PauseWatch
#[test]
fn a_paced_incast_has_no_transport_stalls_and_a_long_job_is_not_killed() {
    use throttle_testkit::pause::PauseWatch;
    let c = up("stall", 4, "200Mbit", "127.0.28.1");
    let mut undecided = Vec::new();
    for _attempt in 0..3 {
        let watch = PauseWatch::start();
        let (ok, v, err) = json_run(
            &c.0,
            &[
                "--workload",
                "mw",
                "--nodes",
                "4",
                "--bw",
                "20",
                "--volume",
                "2000000",
                "--compute-seconds",
                "0.3",
                "--iterations",
                "30",
                "--time-limit",
                "120",
            ],
        );
        let paused = watch.worst();
        assert!(ok, "{err}\n{v}");
        assert!(v["seconds"].as_f64().unwrap() > 11.0, "{v}");
        let m = &v["result"]["metrics"];
        let (fastest, slowest) = (
            m["min_iteration_seconds"].as_f64().unwrap(),
            m["max_iteration_seconds"].as_f64().unwrap(),
        );
        let flags = &v["fidelity"]["flags"];
        eprintln!(
            "paced incast: iterations {fastest:.3}-{slowest:.3} s, machine paused up to {} ms, flags {flags}",
            paused.as_millis()
        );
        // Measured here: 0.395-0.413 s (2026-11-24), 0.396-0.404 s beside a busy loop.
        if slowest - fastest < 0.1 {
            return;
        }
        if paused < Duration::from_millis(50) && flags.as_array().is_some_and(|f| f.is_empty()) {
            panic!("an iteration stalled: fastest {fastest:.3} s, slowest {slowest:.3} s, the machine did not pause (at most {} ms) and the links held", paused.as_millis());
        }
        undecided.push(format!(
            "{fastest:.3}-{slowest:.3} s with the machine paused up to {} ms, flags {flags}",
            paused.as_millis()
        ));
    }
    panic!("every attempt had a slow iteration on a machine that paused: {undecided:?}");
}

#[test]
fn every_run_carries_its_proof_and_a_stopped_agent_flags_it() {
    let c = up("proof", 2, "100Mbit", "127.0.29.1");
    // PMM with emulated compute: about 2.5 s, messaging through both agents.
    let args = [
        "--workload",
        "pmm",
        "--size",
        "512",
        "--emulate-gflops",
        "0.03",
        "--nodes",
        "2",
        "--ranks-per-node",
        "2",
        "--bw",
        "30",
    ];
    // A run nobody stopped: unflagged, though a busy machine flags one now and then (a
    // hypervisor's pause, a core taken): the first of five attempts that is not.
    let mut tried = Vec::new();
    let clean = loop {
        let (ok, run, err) = json_run(&c.0, &args);
        assert!(ok, "{err}");
        if run["fidelity"]["flags"] == serde_json::json!([]) {
            break run;
        }
        tried.push(run["fidelity"]["flags"].clone());
        assert!(tried.len() < 5, "every run flagged: {tried:?}");
    };
    let f = &clean["fidelity"];
    assert_eq!(f["nodes"].as_array().unwrap().len(), 2, "{f}");
    assert!(
        f["nodes"][0]["egress"]["busy_seconds"].as_f64().unwrap() > 0.0,
        "{f}"
    );
    // The same run with n1's agent stopped for a second in the middle.
    let pid = nix::unistd::Pid::from_raw(agent_pid(&c.0, "n1"));
    let stopper = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(1200));
        nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGSTOP).unwrap();
        std::thread::sleep(Duration::from_millis(1000));
        nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGCONT).unwrap();
    });
    let (ok, stopped, err) = json_run(&c.0, &args);
    stopper.join().unwrap();
    assert!(ok, "{err}");
    let flags = stopped["fidelity"]["flags"].as_array().unwrap();
    assert!(
        flags.iter().any(|f| f.as_str().unwrap().starts_with("n1")),
        "{flags:?}"
    );
    assert!(
        flags
            .iter()
            .any(|f| f.as_str().unwrap().contains("SIGSTOP")),
        "{flags:?}"
    );
    assert!(err.contains("did not run at their setting"), "{err}");
}

/// Issue 26: `--workload program` on a loopback cluster was refused with "the agent's
/// operator can add programs with --allow-program", which `local up` did not have. It
/// passes `--allow-program` and `--allow-dir` to its agents.
#[test]
fn local_up_lets_the_agents_launch_the_programs_it_is_given() {
    let s = scratch("allowprog");
    let dir = &s.0;
    let program = dir.join("hello");
    std::fs::write(
        &program,
        "#!/bin/sh\necho 'THROTTLE_RESULT {\"seconds\": 0.25}'\n",
    )
    .unwrap();
    std::fs::set_permissions(
        &program,
        std::os::unix::fs::PermissionsExt::from_mode(0o755),
    )
    .unwrap();
    let path = program.display().to_string();
    let up = |extra: &[&str]| {
        let mut args = vec!["local", "up", "--nodes", "1", "--base-addr", "127.0.42.1"];
        args.extend_from_slice(extra);
        let out = ctl(dir, &args);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    };
    let run = || {
        json_run(
            dir,
            &["--workload", "program", "--program", &path, "--nodes", "1"],
        )
    };
    up(&[]);
    let (ok, _, err) = run();
    assert!(!ok && err.contains("not allowed on this node"), "{err}");
    ctl(dir, &["local", "down"]);
    up(&["--allow-program", "hello"]);
    let (ok, v, err) = run();
    assert!(ok, "{v} {err}");
    assert_eq!(v["result"]["seconds"], 0.25, "{v}");
}

/// Issue 26: an agent killed with -9 could not be started again (`local up` refuses:
/// already up). `local restart NODE` starts it with its flags and addresses, and the
/// cluster runs jobs across it again.
#[test]
fn a_killed_agent_is_restarted_and_the_cluster_runs_again() {
    let c = up("restart", 2, "1Gbit", "127.0.43.1");
    let dir = &c.0;
    let before = agent_pid(dir, "n1");
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(before),
        nix::sys::signal::Signal::SIGKILL,
    )
    .unwrap();
    std::thread::sleep(Duration::from_millis(200));
    let status = String::from_utf8_lossy(&ctl(dir, &["status"]).stdout).to_string();
    assert!(status.contains("down"), "{status}");
    let out = ctl(dir, &["local", "restart", "n1"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let after = agent_pid(dir, "n1");
    assert_ne!(before, after, "a new agent");
    let out = ctl(dir, &["status", "--json"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let (ok, v, err) = json_run(
        dir,
        &[
            "--workload",
            "bfs",
            "--nodes",
            "2",
            "--",
            "--scale",
            "8",
            "--keys",
            "2",
        ],
    );
    assert!(ok, "{v} {err}");
    assert!(
        std::fs::read_to_string(dir.join(".throttle-local/n1.log"))
            .unwrap()
            .matches("agent started")
            .count()
            >= 2,
        "the log goes on in the same file"
    );
}
