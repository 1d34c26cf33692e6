//! Whether the agent itself gets the CPU it needs.
//!
//! A paced link is only as faithful as the agent's wake-ups. Ranks that busy-poll (Open
//! MPI's default) on the cores the agent shares took its CPU: an MPI stream ran 24-39%
//! under its setting and nothing said so. The pacer's own account (`link::pacer`) shows
//! what the link lost; this module says why, with two cheap measures:
//!
//! * **run-queue delay**: how long the agent's threads were ready to run but waited for a
//!   CPU, from the scheduler's statistics (`/proc/self/task/*/schedstat`);
//! * **stalls**: a task wakes every 10 ms on the same precise timer the pacing uses; each
//!   wake-up later than 2 ms counts its lateness beyond those 2 ms (25 agents on one
//!   machine wake 2,500 times a second for this; every 5 ms was twice that). A stopped agent
//!   (SIGSTOP), one starved for tens of milliseconds, or a paused machine shows here even
//!   when no stream was waiting at the time.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use crate::shutdown::Shutdown;
use crate::transport::timer::Sleeper;

/// How often the stall watch wakes.
const PERIOD: Duration = Duration::from_millis(10);

/// Lateness of a wake-up that is still normal scheduling, not a stall.
const GRACE: Duration = Duration::from_millis(2);

/// The agent's stall account.
#[derive(Debug, Default)]
pub struct CpuWatch {
    stalled_ns: AtomicU64,
}

impl CpuWatch {
    pub fn new() -> CpuWatch {
        CpuWatch::default()
    }

    /// Time the agent could not run when it should have, since it started.
    pub fn stalled(&self) -> Duration {
        Duration::from_nanos(self.stalled_ns.load(Ordering::Relaxed))
    }

    fn note(&self, late: Duration) {
        if let Some(stall) = late.checked_sub(GRACE) {
            let ns = u64::try_from(stall.as_nanos()).unwrap_or(u64::MAX);
            self.stalled_ns.fetch_add(ns, Ordering::Relaxed);
        }
    }

    /// Wake every [`PERIOD`] until shutdown, counting stalls.
    pub async fn run(&self, mut shutdown: Shutdown) {
        let mut sleeper = Sleeper::new();
        let mut due = Instant::now() + PERIOD;
        loop {
            tokio::select! {
                _ = shutdown.wait() => return,
                _ = sleeper.until(due) => {}
            }
            let now = Instant::now();
            self.note(now.saturating_duration_since(due));
            due = now + PERIOD;
        }
    }
}

/// Run-queue delay of this process's live threads since they started (`None` where the
/// kernel keeps no scheduler statistics).
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
    fn only_lateness_beyond_the_grace_counts() {
        let w = CpuWatch::new();
        w.note(Duration::from_micros(1900));
        assert_eq!(w.stalled(), Duration::ZERO);
        w.note(Duration::from_millis(52));
        assert_eq!(w.stalled(), Duration::from_millis(50));
    }

    #[test]
    fn this_process_has_a_run_delay_where_the_kernel_keeps_one() {
        if std::path::Path::new("/proc/self/schedstat").exists() {
            assert!(run_delay().is_some());
        }
    }

    #[tokio::test]
    async fn a_stopped_runtime_shows_as_a_stall() {
        // Block the (single) runtime thread for 60 ms: the watch wakes about that late.
        let w = std::sync::Arc::new(CpuWatch::new());
        let (stop, rx) = tokio::sync::watch::channel(false);
        let task = tokio::spawn({
            let w = w.clone();
            async move { w.run(Shutdown(rx)).await }
        });
        tokio::time::sleep(Duration::from_millis(20)).await;
        std::thread::sleep(Duration::from_millis(60));
        tokio::time::sleep(Duration::from_millis(20)).await;
        let _ = stop.send(true);
        let _ = task.await;
        let stalled = w.stalled();
        assert!(
            stalled >= Duration::from_millis(40) && stalled < Duration::from_millis(500),
            "{stalled:?}"
        );
    }
}
