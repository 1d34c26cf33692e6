//! Shared scaffolding of the controller's end-to-end tests: run the real `throttle-ctl` in
//! a scratch directory, and stop whatever local cluster it started when the test ends.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// A scratch directory; on drop its local cluster is taken down and the directory removed,
/// also when an assertion failed.
pub struct Scratch(pub PathBuf);

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = ctl(&self.0, &["local", "down"]);
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

pub fn scratch(tag: &str) -> Scratch {
    let p = std::env::temp_dir().join(format!("throttle-ctl-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&p);
    std::fs::create_dir_all(&p).unwrap();
    Scratch(p)
}

pub fn exe() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_throttle-ctl"))
}

/// Run `throttle-ctl ARGS` in `dir` (the cluster file there, not `$THROTTLE_CLUSTER`).
pub fn ctl(dir: &Path, args: &[&str]) -> Output {
    let exe = exe();
    for bin in [
        "throttle-agent",
        "throttle-bfs",
        "throttle-pmm",
        "throttle-selftest",
    ] {
        assert!(
            exe.with_file_name(bin).exists(),
            "{bin} is missing next to throttle-ctl: run the tests with `cargo test --workspace`"
        );
    }
    Command::new(exe)
        .args(args)
        .current_dir(dir)
        .env_remove("THROTTLE_CLUSTER")
        .output()
        .unwrap()
}

/// A scratch directory with a local cluster of `nodes` agents on `base` and up.
pub fn up(tag: &str, nodes: usize, capacity: &str, base: &str) -> Scratch {
    let s = scratch(tag);
    let out = ctl(
        &s.0,
        &[
            "local",
            "up",
            "--nodes",
            &nodes.to_string(),
            "--capacity",
            capacity,
            "--base-addr",
            base,
        ],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    s
}
