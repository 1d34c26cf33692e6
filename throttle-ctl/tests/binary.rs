//! The `throttle-ctl` binary on its own: help, completions and man pages. (Having an
//! integration test also makes `cargo test --workspace` build the binary that the
//! end-to-end tests in `tests/` drive.)

use std::process::Command;

fn ctl(args: &[&str]) -> (bool, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_throttle-ctl"))
        .args(args)
        .env_remove("THROTTLE_CLUSTER")
        .output()
        .unwrap();
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).to_string(),
        String::from_utf8_lossy(&out.stderr).to_string(),
    )
}

#[test]
fn help_starts_with_the_demo_and_every_command_has_help() {
    let (ok, out, _) = ctl(&["--help"]);
    assert!(ok);
    assert!(out.contains("throttle-ctl demo"), "{out}");
    for cmd in [
        "local",
        "status",
        "set",
        "forward",
        "run",
        "sweep",
        "analyze",
        "demo",
        "export",
        "calibrate",
        "completions",
        "man",
    ] {
        let (ok, out, err) = ctl(&[cmd, "--help"]);
        assert!(ok, "{cmd}: {err}");
        assert!(out.contains("Usage: throttle-ctl"), "{cmd}: {out}");
    }
}

#[test]
fn completions_and_man_pages_are_generated() {
    let (ok, out, err) = ctl(&["completions", "bash"]);
    assert!(ok, "{err}");
    assert!(
        out.contains("_throttle__ctl") && out.contains("sweep"),
        "{out}"
    );
    let (ok, out, _) = ctl(&["completions", "zsh"]);
    assert!(ok && out.contains("#compdef throttle-ctl"), "{out}");
    let dir = std::env::temp_dir().join(format!("throttle-man-{}", std::process::id()));
    let (ok, _, err) = ctl(&["man", dir.to_str().unwrap()]);
    assert!(ok, "{err}");
    let page = std::fs::read_to_string(dir.join("throttle-ctl.1")).unwrap();
    assert!(page.contains(".TH throttle-ctl"), "{page}");
    assert!(dir.join("throttle-ctl-sweep.1").exists());
    let _ = std::fs::remove_dir_all(&dir);
    let (ok, _, err) = ctl(&["completions", "tcsh"]);
    assert!(!ok && err.contains("possible values"), "{err}");
}
