//! The demo a newcomer runs first, end to end on small configurations: agents up, an
//! emulated-compute sweep (PMM; master/worker, the default), the analysis with its noise
//! floor, backtest and held-out comparison, the report, and the cluster down again.

use throttle_tests::*;

#[test]
fn the_demo_runs_the_whole_method_and_says_what_to_trust() {
    let s = scratch("demo");
    let out = ctl(
        &s.0,
        &[
            "demo",
            "--workload",
            "pmm",
            "--dir",
            "d",
            "--base-addr",
            "127.0.27.1",
            "--sizes",
            "1,4,9,16",
            "--size",
            "48",
            "--emulate-gflops",
            "0.002",
            "--bandwidths",
            "100,20",
            "--repeats",
            "2",
            "--settle",
            "0",
            "--search",
            "20",
            "--search-width",
            "10",
            "--verbose",
        ],
    );
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    assert!(out.status.success(), "{stdout}\n{stderr}");
    assert!(
        stderr.contains("compute emulated at 0.002 GFLOP/s"),
        "{stderr}"
    );
    // 4 sizes x (the baseline twice over: 4 runs, 20%: 2), then the search's steps.
    assert!(stderr.contains("24 runs"), "{stderr}");
    // At 9 nodes the search ends with 20% between two steps at most 10 points apart (or,
    // on a machine fast enough, under the lowest step).
    let line = stderr
        .lines()
        .find(|l| l.contains("demand search at 9 node(s)"))
        .unwrap_or_else(|| panic!("no search summary for 9 nodes:\n{stderr}"));
    let after = line.split_once("20%: ").map(|(_, w)| w).unwrap_or("");
    let width: Option<f64> = after
        .split(|c: char| c == ',' || c == ';' || c.is_whitespace())
        .next()
        .and_then(|w| w.parse().ok());
    assert!(
        width.is_some_and(|w| w <= 10.0) || after.starts_with("under the lowest step"),
        "{line}"
    );
    // The held-out size, unless its runs' links did not run at their setting (16 agents
    // and 16 ranks on a small machine): then the analysis left them out and says so.
    assert!(
        stdout.contains("16 (held out)")
            || stdout.contains("left out because their links did not run at their setting"),
        "no held-out size and no flagged runs in:\n{stdout}"
    );
    // The runs counted, and what was not and why (issue 54: "24 successful runs" where
    // 47 were stored).
    assert!(stdout.contains(" runs analysed, at least "), "{stdout}");
    // The answer first: a number with its interval, or why there is none (NO ANSWER, or
    // "no number": the link saturates first, or no model error to bound it).
    let mut lines = stdout.trim_start().lines();
    assert!(
        lines
            .next()
            .unwrap_or_default()
            .starts_with("BOTTOM LINE: "),
        "{stdout}"
    );
    // Its first row: the size asked, projected, or the largest measured.
    let first = lines.nth(1).unwrap_or_default();
    assert!(
        first.contains("projected") || first.contains("measured") || stdout.contains("NO ANSWER"),
        "{stdout}"
    );
    // One node is no traffic between nodes, never a demand.
    assert!(stdout.contains("no traffic between nodes"), "{stdout}");
    for want in [
        "noise floor",
        "backtest (DC)",
        "backtest (traffic)",
        "traffic on the busiest link per run",
    ] {
        assert!(stdout.contains(want), "no `{want}` in:\n{stdout}");
    }
    let d = s.0.join("d");
    assert!(d.join("report/index.html").exists());
    let spec = std::fs::read_to_string(d.join("sweep.toml")).unwrap();
    assert!(spec.contains("emulate_gflops = 0.002"), "{spec}");
    assert!(
        !d.join("throttle-cluster.toml").exists(),
        "the demo's cluster is taken down"
    );

    // Bad input is refused before any agent starts, and the previous demo's results stay.
    let before = std::fs::read(d.join("results.db")).unwrap();
    for (bad, why) in [
        (
            &["--workload", "pmm", "--sizes", "1,2,3,4"][..],
            "square number of processes",
        ),
        (
            &["--workload", "pmm", "--emulate-gflops", "0.000001"][..],
            "time_limit",
        ),
        (&["--mw-compute", "1e9"][..], "compute_seconds"),
        (&["--sizes", "2,3,4"][..], "at least 4 node counts"),
        (&["--bandwidths", "100,abc"][..], "abc"),
        (&["--search", "abc"][..], "--search: `abc`"),
        (&["--search-width", "0.2"][..], "--search-width"),
    ] {
        let mut args = vec!["demo", "--dir", "d"];
        args.extend_from_slice(bad);
        let out = ctl(&s.0, &args);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{bad:?}");
        assert!(err.contains(why), "{bad:?}: {err}");
        assert!(!err.contains("starting"), "{err}");
        assert_eq!(
            std::fs::read(d.join("results.db")).unwrap(),
            before,
            "{bad:?} lost the last results"
        );
    }
}

#[test]
fn the_default_demo_is_master_worker_answering_first_at_the_levels_it_searched() {
    let s = scratch("demo-mw");
    // Its first stored run flagged on purpose (job 1 is the unstored warm-up), as a busy
    // machine flags some by chance: left out, its point run again, the answer the same.
    let stall = stall_n0(&s.0.join("d"), 2);
    let out = ctl(
        &s.0,
        &[
            "demo",
            "--dir",
            "d",
            "--base-addr",
            "127.0.28.1",
            "--sizes",
            "2,3,4,6",
            "--mw-compute",
            "0.1",
            "--bandwidths",
            "100,25",
            "--repeats",
            "2",
            "--settle",
            "0",
            "--search",
            "20",
            "--search-width",
            "10",
        ],
    );
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    let stalled = stall.finish();
    assert!(out.status.success(), "{stdout}\n{stderr}");
    assert!(stderr.contains("sweeping master/worker"), "{stderr}");
    let mut lines = stdout.trim_start().lines();
    let head = lines.next().unwrap_or_default();
    assert!(head.starts_with("BOTTOM LINE: % of a "), "{stdout}");
    // Without --cti the levels are the search's: 20% only, and no 5% column.
    let columns = lines.next().unwrap_or_default();
    assert!(
        columns.contains("CTI 20%") || stdout.contains("NO ANSWER"),
        "{stdout}"
    );
    assert!(!stdout.contains("CTI 5%"), "{stdout}");
    // Issue 44: a row for every size measured (the held-out 6 under its projection, or
    // as measured), the traffic projection's verdict, and the short form's bounds: at
    // most 60 lines, none over 160 characters.
    let block: Vec<&str> = stdout
        .trim_start()
        .split("\n\n")
        .next()
        .unwrap_or_default()
        .lines()
        .collect();
    for p in [6, 4, 3, 2] {
        assert!(
            block
                .iter()
                .any(|l| l.trim_start().starts_with(&format!("{p} "))),
            "no row for {p} procs: {stdout}"
        );
    }
    assert!(stdout.contains("backtest (traffic)"), "{stdout}");
    assert!(
        stdout.lines().count() <= 60,
        "{} lines: {stdout}",
        stdout.lines().count()
    );
    let long: Vec<&str> = stdout.lines().filter(|l| l.chars().count() > 160).collect();
    assert!(long.is_empty(), "{long:?}");
    // Issue 44, item 10: analyze on the demo's store, asked for the same sizes, says the
    // same bottom line (the sweep's levels are its default levels).
    let again = ctl(
        &s.0,
        &["analyze", "--db", "d/results.db", "--predict", "6,12"],
    );
    let again = String::from_utf8_lossy(&again.stdout);
    let bottom = |t: &str| {
        t.trim_start()
            .split("\n\n")
            .next()
            .unwrap_or_default()
            .to_string()
    };
    assert_eq!(bottom(&again), bottom(&stdout), "{again}");
    let spec = std::fs::read_to_string(s.0.join("d/sweep.toml")).unwrap();
    assert!(spec.contains("workload = \"mw\""), "{spec}");
    let rows = throttle_ctl::store::Store::read(&s.0.join("d/results.db"))
        .unwrap()
        .rows()
        .unwrap();
    assert!(
        rows.iter().any(|r| r.flag.is_some()),
        "the stalled run was not flagged ({stalled:?})"
    );
    assert!(
        !s.0.join("d/throttle-cluster.toml").exists(),
        "the demo's cluster is taken down"
    );
}

/// `demo --weak`: the master/worker program whose volume grows with the processes, on two
/// lines, a sweep per volume, and the answer in two parameters.
#[test]
fn the_weak_demo_sweeps_a_problem_axis_and_answers_in_both_parameters() {
    let s = scratch("demo-weak");
    let out = ctl(
        &s.0,
        &[
            "demo",
            "--weak",
            "--dir",
            "d",
            "--base-addr",
            "127.0.29.1",
            "--sizes",
            "2,3,4",
            "--mw-volume",
            "50000",
            "--mw-compute",
            "0.05",
            "--bandwidths",
            "100,40,15",
            "--repeats",
            "1",
            "--settle",
            "0",
        ],
    );
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    assert!(out.status.success(), "{stdout}\n{stderr}");
    // (2, 100 kB), (2, 250 kB), (3, 150 kB), (3, 375 kB), (4, 200 kB), (4, 500 kB): six
    // volumes, six cells of three steps.
    assert!(
        stderr.contains("6 volumes, 3 bandwidth steps, 1 repeats: 18 runs"),
        "{stderr}"
    );
    assert!(
        stdout.contains("two parameters, processes and the problem's volume (6 values"),
        "{stdout}"
    );
    assert!(stdout.contains("Demand measured"), "{stdout}");
    assert!(stdout.contains("Along the weak-scaling line"), "{stdout}");
    // The projection asked is on the first line at twice the largest size: (8, 8 x 50 kB).
    assert!(
        stdout
            .lines()
            .any(|l| l.split_whitespace().take(2).eq(["8", "400000"]))
            || stdout.contains("No projection"),
        "{stdout}"
    );
    assert!(s.0.join("d/results.db").exists());
}

/// `demo --links kernel` and `demo --netns` run on namespace hosts, which need root: an
/// ordinary user is told so before anything is started or written (no directory made, no
/// agent left), with the way that works without root.
#[test]
fn the_namespace_demos_refuse_without_root_before_they_start_anything() {
    let name = "the_namespace_demos_refuse_without_root_before_they_start_anything";
    if !throttle_testkit::user::can_switch_user() {
        skip(name, "root and setpriv", "THROTTLE_REQUIRE_NETNS");
        return;
    }
    let s = scratch("demokernel");
    std::fs::set_permissions(&s.0, std::os::unix::fs::PermissionsExt::from_mode(0o777)).unwrap();
    for (flags, way) in [
        (&["--links", "kernel"][..], "--links at proxy"),
        (&["--netns"][..], "without --netns"),
    ] {
        let dir = s.0.join("demo");
        let out = throttle_testkit::user::as_user(
            throttle_testkit::user::NOBODY,
            bin_dir().join("throttle-ctl"),
        )
        .arg("demo")
        .args(flags)
        .arg("--dir")
        .arg(&dir)
        .current_dir(&s.0)
        .output()
        .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{flags:?}: {err}");
        assert!(
            err.contains("need root") && err.contains(way),
            "{flags:?}: {err}"
        );
        assert!(
            !err.contains("starting"),
            "{flags:?} started something: {err}"
        );
        assert!(!dir.exists(), "{flags:?} made {}", dir.display());
    }
}
