//! The workload binaries, started by hand instead of by an agent, say how to run them.
//! (Also makes `cargo test --workspace` build them, which the controller's tests launch.)

use std::process::Command;

fn run_alone(exe: &str) -> (Option<i32>, String) {
    let mut cmd = Command::new(exe);
    for (k, _) in std::env::vars() {
        if k.starts_with("THROTTLE_") {
            cmd.env_remove(k);
        }
    }
    let out = cmd.output().unwrap();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stderr).to_string(),
    )
}

#[test]
fn each_binary_started_by_hand_explains_that_agents_start_it() {
    for exe in [
        env!("CARGO_BIN_EXE_throttle-bfs"),
        env!("CARGO_BIN_EXE_throttle-pmm"),
        env!("CARGO_BIN_EXE_throttle-selftest"),
    ] {
        let (code, err) = run_alone(exe);
        assert_eq!(code, Some(2), "{exe}: {err}");
        assert!(
            err.contains("THROTTLE_JOB is not set") && err.contains("throttle-ctl run"),
            "{exe}: {err}"
        );
    }
}

#[test]
fn bad_arguments_are_refused_by_the_argument_parser() {
    let out = Command::new(env!("CARGO_BIN_EXE_throttle-pmm"))
        .args(["--bcast", "tree"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("flat, binomial, pipelined"));
}
