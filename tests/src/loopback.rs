//! Programs run as nodes of a local cluster (`throttle-ctl exec NODE -- WORDS`): started
//! in a test's scratch directory, in a process group of their own so that a server is
//! killed with what it started when the test ends, and iperf3's receiver rate read back.

use std::path::Path;
use std::process::{Command, Stdio};

use crate::{exe, Killed};

/// `throttle-ctl exec NODE -- WORDS` in `dir`, not waited for.
pub fn exec_in(dir: &Path, node: &str, words: &[&str]) -> Command {
    use std::os::unix::process::CommandExt;
    let mut c = Command::new(exe());
    c.process_group(0);
    c.args(["exec", node, "--"])
        .args(words)
        .current_dir(dir)
        .env("THROTTLE_CLUSTER", dir.join("throttle-cluster.toml"));
    c
}

/// A server started as node `node` (`exec`), its output discarded, killed with its
/// process group when the test ends.
pub fn server(dir: &Path, node: &str, words: &[&str]) -> Killed {
    Killed(
        exec_in(dir, node, words)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    )
}

/// The receiver's rate of an `iperf3 -J` client run, Mbit/s.
pub fn received_mbit(json: &str) -> f64 {
    let v: serde_json::Value = serde_json::from_str(json).unwrap_or_else(|e| panic!("{e}: {json}"));
    v["end"]["sum_received"]["bits_per_second"]
        .as_f64()
        .unwrap_or_else(|| panic!("no receiver rate in {json}"))
        / 1e6
}
