//! How long the agent waited for a CPU: the cause a flagged run names.
//!
//! A paced link is only as faithful as the agent's wake-ups. Ranks that busy-poll (Open
//! MPI's default) on the cores the agent shares took its CPU: an MPI stream ran 24-39%
//! under its setting and nothing said so. The pacer's own account (`link::pacer`) shows
//! what the link lost (bursts delivered late, a backlog that fell behind); the scheduler's
//! statistics say why: how long the agent's threads were ready to run but waited for a
//! CPU (`/proc/self/task/*/schedstat`). Late bursts with a long wait: starved by other
//! processes. Late bursts without one: the agent was stopped or the machine paused.
//!
//! (A timer that woke every 5 ms to detect stalls was tried first: 25 agents made 5,000
//! wake-ups a second of it, and it flagged the start-up of 16 ranks on 2 cores, which
//! touched no link.)

use std::time::Duration;

/// Run-queue delay of this process's live threads since they started (`None` where the
/// kernel keeps no scheduler statistics). Threads that ended are not counted.
pub fn run_delay() -> Option<Duration> {
    let tasks = std::fs::read_dir("/proc/self/task").ok()?;
    let mut total = 0u64;
    let mut any = false;
    for task in tasks.flatten() {
        let Ok(text) = std::fs::read_to_string(task.path().join("schedstat")) else {
            continue;
        };
        if let Some(ns) = parse_schedstat(&text) {
            total = total.saturating_add(ns);
            any = true;
        }
    }
    any.then(|| Duration::from_nanos(total))
}

/// How the calling thread is scheduled (the runtime's threads inherit it from the one
/// that started them): its nice value and whether its policy is a real-time one (`None`
/// where the kernel does not say).
pub fn scheduling() -> (Option<i32>, Option<bool>) {
    // SAFETY: sched_getscheduler of the calling thread (0): no pointers.
    let policy = unsafe { libc::sched_getscheduler(0) };
    // getpriority returns -1 for nice -1 too: errno tells an error apart.
    // SAFETY: errno is this thread's; getpriority takes no pointers.
    let nice = unsafe {
        *libc::__errno_location() = 0;
        let n = libc::getpriority(libc::PRIO_PROCESS, 0);
        (*libc::__errno_location() == 0).then_some(n)
    };
    let realtime = (policy >= 0).then_some(policy == libc::SCHED_RR || policy == libc::SCHED_FIFO);
    (nice, realtime)
}

/// The run-queue wait (nanoseconds) of a `schedstat` line: "on-cpu wait timeslices".
fn parse_schedstat(text: &str) -> Option<u64> {
    text.split_whitespace().nth(1)?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn schedstat_lines_are_read_and_nonsense_is_not() {
        assert_eq!(parse_schedstat("156022 38704 2\n"), Some(38704));
        assert_eq!(parse_schedstat("156022"), None);
        assert_eq!(parse_schedstat("a b c"), None);
        assert_eq!(parse_schedstat(""), None);
    }

    #[test]
    fn this_thread_says_how_it_is_scheduled() {
        // A test thread runs as the test harness does: not real-time, and at the nice
        // value getpriority gives it.
        let (nice, realtime) = scheduling();
        // SAFETY: as in scheduling().
        let want = unsafe { libc::getpriority(libc::PRIO_PROCESS, 0) };
        assert_eq!(nice, Some(want));
        // SAFETY: no pointers.
        let policy = unsafe { libc::sched_getscheduler(0) };
        assert_eq!(
            realtime,
            Some(policy == libc::SCHED_RR || policy == libc::SCHED_FIFO)
        );
    }

    #[test]
    fn this_process_has_a_run_delay_where_the_kernel_keeps_one() {
        if std::path::Path::new("/proc/self/schedstat").exists() {
            assert!(run_delay().is_some());
        }
    }
}
