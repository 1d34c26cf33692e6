//! An agent stopped on purpose during one of its jobs: the fault a loaded machine or a
//! pausing hypervisor injects by chance, injected on demand.
//!
//! A run whose agent could not keep its links at their setting is flagged, and a sweep
//! stores it and runs its point again. On a busy machine that happens by chance, so a test
//! that counts runs or needs a good one passes or fails with the machine's load. A
//! [`Stall`] makes it happen every time: it watches one agent, and during the `job`-th
//! period in which the agent has children (its ranks: every job it runs, a sweep's
//! unstored warm-ups included) it stops the agent with SIGSTOP for one to two times
//! `stop`, lets it run for `run`, and again, until the ranks are gone. Data that reaches the agent while it
//! is stopped is delivered late, and the run's proof says so
//! (`throttle-ctl/src/fidelity.rs`: "an agent was stopped (SIGSTOP?) or the machine
//! paused"). Stopped most of the time, the agent is late with whatever the ranks send,
//! however short the job: one 50 ms stop in a 100 ms job can fall before its first
//! message.
//!
//! The agent is always continued: when the job ends, when the stall is [`Stall::finish`]ed,
//! and when it is dropped (a failed assertion).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// How often the watcher looks for the agent's children.
const POLL: Duration = Duration::from_millis(2);
/// The most stops in one job: a job that never ends is not stopped forever.
const MAX_STOPS: usize = 200;

/// What a stall did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Stalled {
    /// Jobs the agent started while watched (periods with children).
    pub jobs: usize,
    /// Times it was stopped, all in the chosen job.
    pub stops: usize,
}

/// A watcher that stops one agent during one of its jobs ([module docs](self)).
pub struct Stall {
    done: Arc<AtomicBool>,
    thread: Option<JoinHandle<Stalled>>,
}

impl Stall {
    /// Stop the agent `pid` finds (polled until it names one: an agent not started yet)
    /// for 1 to 2 times `stop`, then let it `run`, in turns during its `job`-th job,
    /// counted from 1.
    pub fn during_job(
        mut pid: impl FnMut() -> Option<i32> + Send + 'static,
        job: usize,
        (stop, run): (Duration, Duration),
    ) -> Stall {
        assert!(job >= 1, "jobs are counted from 1");
        let done = Arc::new(AtomicBool::new(false));
        let watching = done.clone();
        let thread = std::thread::spawn(move || {
            let mut seen = Stalled::default();
            let agent = loop {
                if watching.load(Ordering::SeqCst) {
                    return seen;
                }
                match pid() {
                    Some(p) => break p,
                    None => std::thread::sleep(Duration::from_millis(20)),
                }
            };
            let mut busy = false;
            while !watching.load(Ordering::SeqCst) {
                let now = has_children(agent);
                if now && !busy {
                    seen.jobs += 1;
                    if seen.jobs == job {
                        seen.stops = stop_during(agent, (stop, run), &watching);
                    }
                }
                busy = now;
                std::thread::sleep(POLL);
            }
            seen
        });
        Stall {
            done,
            thread: Some(thread),
        }
    }

    /// Stop watching (the agent continued) and say what the stall did.
    pub fn finish(mut self) -> Stalled {
        self.stop()
    }

    fn stop(&mut self) -> Stalled {
        self.done.store(true, Ordering::SeqCst);
        self.thread
            .take()
            .and_then(|t| t.join().ok())
            .unwrap_or_default()
    }
}

impl Drop for Stall {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Stop `agent` for 1 to 2 times `stop` and continue it for `run`, in turns, while it
/// has children; how many stops.
fn stop_during(agent: i32, (stop, run): (Duration, Duration), done: &AtomicBool) -> usize {
    // Stops of 1 to 2 times `stop`, in an order that repeats every five: a program whose
    // messages come at a fixed period (a worker computing 50 ms) does not fall into step
    // with them and send each message while the agent runs.
    const STRETCH: [u32; 5] = [4, 7, 5, 8, 6];
    let mut stops = 0;
    while stops < MAX_STOPS && !done.load(Ordering::SeqCst) && has_children(agent) {
        // SAFETY: kill(2) with a pid and a signal number; no memory is shared.
        if unsafe { libc::kill(agent, libc::SIGSTOP) } != 0 {
            break;
        }
        sleep_until(Instant::now() + stop * STRETCH[stops % STRETCH.len()] / 4);
        stops += 1;
        // SAFETY: as above.
        unsafe { libc::kill(agent, libc::SIGCONT) };
        sleep_until(Instant::now() + run);
    }
    stops
}

fn sleep_until(t: Instant) {
    let now = Instant::now();
    if t > now {
        std::thread::sleep(t - now);
    }
}

/// The child processes of `pid`: what its threads' `children` lists name.
fn children(pid: i32) -> Vec<i32> {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return Vec::new();
    };
    tasks
        .flatten()
        .filter_map(|t| std::fs::read_to_string(t.path().join("children")).ok())
        .flat_map(|c| {
            c.split_whitespace()
                .filter_map(|p| p.parse().ok())
                .collect::<Vec<i32>>()
        })
        .collect()
}

/// Whether `pid` has a child process.
fn has_children(pid: i32) -> bool {
    !children(pid).is_empty()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::process::Command;

    /// A shell that starts two children in turn, a busy gap between them: the stall
    /// counts both jobs, stops the shell during the second only, and continues it (a
    /// shell left stopped would never exit).
    #[test]
    fn stops_the_chosen_job_only_and_continues_the_process() {
        let mut sh = Command::new("sh")
            .args([
                "-c",
                "sleep 0.2; i=0; while [ $i -lt 20000 ]; do i=$((i+1)); done; sleep 0.4",
            ])
            .spawn()
            .unwrap();
        let pid = sh.id() as i32;
        let ms = Duration::from_millis;
        let stall = Stall::during_job(move || Some(pid), 2, (ms(50), ms(10)));
        let status = sh.wait().unwrap();
        let seen = stall.finish();
        assert!(status.success());
        assert_eq!(seen.jobs, 2, "{seen:?}");
        assert!(seen.stops >= 1, "{seen:?}");
    }
}
