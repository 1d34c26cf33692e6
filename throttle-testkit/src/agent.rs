//! A started `throttle-agent`: the one way a test starts an agent process and waits for it.
//!
//! The caller builds the command (the agent binary, or a launcher in front of it: `ip
//! netns exec NS`, [`crate::user::as_user`]) with the flags its test needs; [`start`] adds
//! `--ready-file`, spawns it, waits until the agent wrote that file (its listeners are
//! bound) and reads the addresses it bound from it.

use std::path::Path;
use std::process::{Child, Command};
use std::time::{Duration, Instant};

/// How long an agent may take to become ready, beside a loaded test suite.
pub const READY_WITHIN: Duration = Duration::from_secs(20);

/// A running agent process, killed (and reaped) when dropped.
pub struct AgentProcess {
    pub child: Child,
    /// Where its control API and data port listen, as its ready file says.
    pub control: String,
    pub data: String,
}

impl AgentProcess {
    /// Its process id.
    pub fn pid(&self) -> i32 {
        self.child.id() as i32
    }
}

impl Drop for AgentProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Start `agent` (a command ending in the agent's flags) with its ready file at `ready`,
/// and wait for it (at most [`READY_WITHIN`]); panics, naming `what`, when it exits or
/// does not become ready.
pub fn start(mut agent: Command, ready: &Path, what: &str) -> AgentProcess {
    let _ = std::fs::remove_file(ready);
    let mut child = agent
        .arg("--ready-file")
        .arg(ready)
        .spawn()
        .unwrap_or_else(|e| panic!("{what}: cannot start: {e}"));
    let start = Instant::now();
    // The file is written whole (renamed into place): present means readable.
    while !ready.exists() {
        if let Ok(Some(status)) = child.try_wait() {
            panic!("{what} exited before it was ready: {status}");
        }
        if start.elapsed() > READY_WITHIN {
            let _ = child.kill();
            let _ = child.wait();
            panic!("{what} did not become ready within {READY_WITHIN:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let text = std::fs::read_to_string(ready).unwrap_or_default();
    let v: serde_json::Value = serde_json::from_str(&text).unwrap_or_default();
    let field = |k: &str| v[k].as_str().unwrap_or_default().to_string();
    AgentProcess {
        control: field("control"),
        data: field("data"),
        child,
    }
}
