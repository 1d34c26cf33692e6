//! What an external command leaves behind: every process this controller adopted as
//! their subreaper, found from `/proc` and killed, except the children it had before.

use std::time::Duration;

/// Every process's parent (from /proc/PID/stat: "pid (comm) state ppid ...").
fn process_parents() -> std::collections::HashMap<i32, i32> {
    let mut parent = std::collections::HashMap::new();
    if let Ok(dir) = std::fs::read_dir("/proc") {
        for e in dir.flatten() {
            let Some(pid) = e.file_name().to_str().and_then(|s| s.parse::<i32>().ok()) else {
                continue;
            };
            let Ok(stat) = std::fs::read_to_string(e.path().join("stat")) else {
                continue;
            };
            // comm may hold spaces and parentheses: the fields follow the last `)`.
            let Some(after) = stat.rfind(')').map(|i| &stat[i + 1..]) else {
                continue;
            };
            if let Some(ppid) = after.split_whitespace().nth(1).and_then(|p| p.parse().ok()) {
                parent.insert(pid, ppid);
            }
        }
    }
    parent
}

/// This process's children now.
pub(super) fn children() -> std::collections::HashSet<i32> {
    let me = std::process::id() as i32;
    process_parents()
        .into_iter()
        .filter(|(_, pp)| *pp == me)
        .map(|(p, _)| p)
        .collect()
}

/// Kill every process descended from this one, and reap those that became ours. With
/// this process a child subreaper (set in [`run`](super::run)), orphans of the command stay
/// descendants, whatever process group or session they moved to.
/// `spared`: processes (and their descendants) that are not the command's, e.g. agents a
/// `demo` started before.
pub(super) fn kill_descendants(spared: &std::collections::HashSet<i32>) {
    let me = std::process::id() as i32;
    for _ in 0..3 {
        let parent = process_parents();
        let descends = |mut p: i32| {
            for _ in 0..64 {
                if spared.contains(&p) {
                    return false;
                }
                match parent.get(&p) {
                    Some(&pp) if pp == me => return true,
                    Some(&pp) if pp > 1 => p = pp,
                    _ => return false,
                }
            }
            false
        };
        let victims: Vec<i32> = parent.keys().copied().filter(|p| descends(*p)).collect();
        if victims.is_empty() {
            return;
        }
        for p in &victims {
            let _ = nix::sys::signal::kill(
                nix::unistd::Pid::from_raw(*p),
                nix::sys::signal::Signal::SIGKILL,
            );
        }
        std::thread::sleep(Duration::from_millis(20));
        for p in &victims {
            let _ = nix::sys::wait::waitpid(
                nix::unistd::Pid::from_raw(*p),
                Some(nix::sys::wait::WaitPidFlag::WNOHANG),
            );
        }
    }
}
