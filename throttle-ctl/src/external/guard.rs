//! What a command started dies with the controller, also when the controller is killed
//! outright (SIGKILL, OOM): a small guard process watches the controller and, when it is
//! gone, kills every process of the command.
//!
//! The controller is its command's subreaper and kills what the command left behind when
//! it ends ([`super::reap`]); a SIGKILL runs none of that, and the command's processes
//! were adopted by init and ran on (`run --cmd 'sleep 123'` outlived its controller). The
//! guard is `throttle-ctl` itself, started before the command in a process group of its
//! own (so a Ctrl-C at the terminal does not reach it). Its standard input is a pipe
//! whose writing end only the controller holds: when that end closes (the controller
//! exited, however) it kills every process whose environment carries this run's marker,
//! `THROTTLE_RUN_ID=<random>`, which the command and everything it starts inherit, and
//! every process of the command's process group, whose id the controller writes to the
//! pipe once the command runs (a child that cleared its environment, `env -i`, stays in
//! the group; a process group's id is not given to another process while the group has a
//! member). The marker comes through the pipe, not the command line, so other users
//! cannot read it. Then it removes the run's directory (the hostfile), which the
//! controller's own cleanup would have removed.

use std::io::{Read, Write};
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use anyhow::{Context, Result};

/// The environment variable that marks a run's processes.
pub const MARKER_ENV: &str = "THROTTLE_RUN_ID";

/// The controller's side: the pipe's writing end and the guard process.
pub struct Guard {
    pipe: Option<std::fs::File>,
    child: Child,
    marker: String,
}

impl Guard {
    /// Start a guard for a run marked with a new random marker, whose directory is
    /// `run_dir` (see [`super::RUN_DIR_PREFIX`]).
    pub fn start(run_dir: &Path) -> Result<Guard> {
        let mut b = [0u8; 16];
        getrandom::getrandom(&mut b).map_err(|e| anyhow::anyhow!("no randomness: {e}"))?;
        let marker: String = b.iter().map(|x| format!("{x:02x}")).collect();
        let exe = std::env::current_exe().context("cannot find this program to start its guard")?;
        // Close-on-exec: neither the guard nor the command may hold the writing end.
        let (read, write) = nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC)
            .context("cannot make the guard's pipe")?;
        let mut child = Command::new(exe)
            .arg("__guard")
            .stdin(read)
            .stdout(Stdio::null())
            .stderr(Stdio::inherit())
            .process_group(0)
            .spawn()
            .context("cannot start the run's guard")?;
        let mut pipe = std::fs::File::from(write);
        if let Err(e) = writeln!(pipe, "{marker}\n{}", run_dir.display()) {
            let _ = child.kill();
            let _ = child.wait();
            return Err(e).context("cannot hand the guard its marker");
        }
        Ok(Guard {
            pipe: Some(pipe),
            child,
            marker,
        })
    }

    /// The marker the command's environment must carry.
    pub fn marker(&self) -> &str {
        &self.marker
    }

    /// Tell the guard the command's process group, which it kills too.
    pub fn group(&mut self, pgid: u32) {
        if let Some(pipe) = self.pipe.as_mut() {
            let _ = writeln!(pipe, "{GROUP}{pgid}");
        }
    }
}

/// The line that gives the guard the command's process group id.
const GROUP: &str = "process group ";

impl Drop for Guard {
    fn drop(&mut self) {
        // The guard kills whatever still carries the marker, then exits.
        drop(self.pipe.take());
        let _ = self.child.wait();
    }
}

/// The guard's side (`throttle-ctl __guard`; tested through the binary in
/// `tests/tests/command.rs`, where no other test reaps this process's children): read the
/// marker and the run's directory, wait for the end of the input, kill the marked
/// processes, remove the directory. Returns how many processes it killed.
pub fn watch(mut input: impl Read) -> usize {
    let mut all = Vec::new();
    let _ = input.read_to_end(&mut all);
    let text = std::str::from_utf8(&all).unwrap_or("");
    let mut lines = text.lines();
    let Some(marker) = lines
        .next()
        .filter(|m| m.len() == 32 && m.bytes().all(|b| b.is_ascii_hexdigit()))
    else {
        return 0;
    };
    let dir = lines.next();
    let groups: Vec<i32> = lines
        .filter_map(|l| l.strip_prefix(GROUP)?.parse::<i32>().ok())
        .filter(|&g| g > 1)
        .collect();
    let mut killed = 0;
    for g in groups {
        if nix::sys::signal::killpg(
            nix::unistd::Pid::from_raw(g),
            nix::sys::signal::Signal::SIGKILL,
        )
        .is_ok()
        {
            killed += 1;
        }
    }
    killed += kill_marked(marker);
    if let Some(dir) = dir {
        remove_run_dir(Path::new(dir));
    }
    killed
}

/// Remove `dir` if it is a run's directory of this user: `throttle-run-<hex>` directly in
/// the temporary directory, a directory (not a link), owned by this user. Anything else
/// is left alone: the path comes from a pipe, and a mistake must not delete a user's files.
fn remove_run_dir(dir: &Path) {
    use std::os::unix::fs::MetadataExt;
    let shaped = dir.parent() == Some(std::env::temp_dir().as_path())
        && dir
            .file_name()
            .and_then(|n| n.to_str())
            .and_then(|n| n.strip_prefix(super::RUN_DIR_PREFIX))
            .is_some_and(|hex| hex.len() == 12 && hex.bytes().all(|b| b.is_ascii_hexdigit()));
    let mine = std::fs::symlink_metadata(dir)
        .is_ok_and(|m| m.is_dir() && m.uid() == nix::unistd::getuid().as_raw());
    if shaped && mine {
        let _ = std::fs::remove_dir_all(dir);
    }
}

/// Kill every process whose environment holds `THROTTLE_RUN_ID=marker` (a few passes:
/// one may fork while the others die).
pub fn kill_marked(marker: &str) -> usize {
    let needle = format!("{MARKER_ENV}={marker}\0").into_bytes();
    let me = std::process::id() as i32;
    let mut killed = 0;
    for _ in 0..10 {
        let marked = marked_processes(&needle, me);
        if marked.is_empty() {
            break;
        }
        for pid in marked {
            if nix::sys::signal::kill(
                nix::unistd::Pid::from_raw(pid),
                nix::sys::signal::Signal::SIGKILL,
            )
            .is_ok()
            {
                killed += 1;
            }
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    killed
}

/// Live processes (not zombies) whose environment contains `needle`, except `me`.
fn marked_processes(needle: &[u8], me: i32) -> Vec<i32> {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    dir.flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok())
        .filter(|&pid| pid != me)
        .filter(|pid| {
            let zombie = std::fs::read_to_string(format!("/proc/{pid}/stat"))
                .map(|s| {
                    s.rsplit_once(')')
                        .is_some_and(|(_, r)| r.trim_start().starts_with('Z'))
                })
                .unwrap_or(true);
            !zombie
                && std::fs::read(format!("/proc/{pid}/environ"))
                    .is_ok_and(|env| env.windows(needle.len()).any(|w| w == needle))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_run_directory_of_this_user_is_removed() {
        let tmp = std::env::temp_dir();
        let pid = std::process::id();
        let run = tmp.join(format!("{}{:012x}", super::super::RUN_DIR_PREFIX, pid));
        std::fs::create_dir_all(run.join("sub")).unwrap();
        remove_run_dir(&run);
        assert!(!run.exists(), "a run's directory stays");
        // Not a run's name, a link to a directory, a run's name elsewhere: left alone.
        let other = tmp.join(format!("throttle-guard-other-{pid}"));
        std::fs::create_dir_all(&other).unwrap();
        remove_run_dir(&other);
        let link = tmp.join(format!("{}{:012x}", super::super::RUN_DIR_PREFIX, pid + 1));
        let _ = std::fs::remove_file(&link);
        std::os::unix::fs::symlink(&other, &link).unwrap();
        remove_run_dir(&link);
        let nested = other.join(format!("{}{:012x}", super::super::RUN_DIR_PREFIX, pid));
        std::fs::create_dir_all(&nested).unwrap();
        remove_run_dir(&nested);
        assert!(other.exists() && link.exists() && nested.exists());
        let _ = std::fs::remove_file(&link);
        let _ = std::fs::remove_dir_all(&other);
    }
}
