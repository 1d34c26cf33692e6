//! The demo a newcomer runs first, end to end on a small configuration: agents up, an
//! emulated-compute PMM sweep, the analysis with its noise floor, backtest and held-out
//! comparison, the report, and the cluster down again.

use throttle_tests::*;

#[test]
fn the_demo_runs_the_whole_method_and_says_what_to_trust() {
    let s = scratch("demo");
    let out = ctl(
        &s.0,
        &[
            "demo",
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
    assert!(stderr.contains("16 runs"), "{stderr}");
    for want in [
        "noise floor",
        "16 (held out)",
        "backtest (DC)",
        "backtest (traffic)",
        "traffic per node and run",
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

    // Bad input is refused before any agent starts.
    let out = ctl(&s.0, &["demo", "--dir", "e", "--sizes", "1,2,3,4"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(err.contains("square node counts"), "{err}");
    assert!(!err.contains("starting"), "{err}");
}
