//! Whether the machine paused while a test timed something: a thread on every CPU sleeps
//! in short steps and keeps the longest it overslept.
//!
//! A timing test that bounds a duration from above (no iteration took much longer than
//! the others) fails when the machine, not the code, stopped: the hypervisor took a CPU
//! (this VM's `st` reaches 43%), or other tests kept every core busy. Such a test runs
//! its measurement beside a [`PauseWatch`], and a measurement during which some CPU did
//! not come back to a 5 ms sleeper for longer than the bound it checks cannot decide: it
//! is taken again, and said so. A stall of the code itself leaves the CPUs free, so the
//! watch sees nothing and the check still fails.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// The sleeper's step.
const STEP: Duration = Duration::from_millis(5);

/// One sleeper per CPU this process may use, each pinned to its CPU.
pub struct PauseWatch {
    stop: Arc<AtomicBool>,
    /// The longest oversleep seen on any CPU, in microseconds.
    worst_us: Arc<AtomicU64>,
    threads: Vec<JoinHandle<()>>,
}

impl PauseWatch {
    pub fn start() -> PauseWatch {
        let stop = Arc::new(AtomicBool::new(false));
        let worst_us = Arc::new(AtomicU64::new(0));
        let threads = cpus()
            .into_iter()
            .map(|cpu| {
                let (stop, worst) = (stop.clone(), worst_us.clone());
                std::thread::spawn(move || {
                    pin(cpu);
                    while !stop.load(Ordering::Relaxed) {
                        let t = Instant::now();
                        std::thread::sleep(STEP);
                        let late = t.elapsed().saturating_sub(STEP).as_micros() as u64;
                        worst.fetch_max(late, Ordering::Relaxed);
                    }
                })
            })
            .collect();
        PauseWatch {
            stop,
            worst_us,
            threads,
        }
    }

    /// Stop watching: the longest any CPU kept its sleeper waiting past its step.
    pub fn worst(mut self) -> Duration {
        self.halt();
        Duration::from_micros(self.worst_us.load(Ordering::Relaxed))
    }

    fn halt(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

impl Drop for PauseWatch {
    fn drop(&mut self) {
        self.halt();
    }
}

/// The CPUs this process may run on (its affinity mask).
fn cpus() -> Vec<usize> {
    // SAFETY: a zeroed cpu_set_t is an empty set, filled by the call.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    let size = std::mem::size_of::<libc::cpu_set_t>();
    // SAFETY: `set` is a valid cpu_set_t of `size` bytes.
    if unsafe { libc::sched_getaffinity(0, size, &mut set) } != 0 {
        return vec![0];
    }
    (0..libc::CPU_SETSIZE as usize)
        // SAFETY: `cpu` is below CPU_SETSIZE.
        .filter(|&cpu| unsafe { libc::CPU_ISSET(cpu, &set) })
        .collect()
}

/// Pin the calling thread to `cpu` (left unpinned where that fails: it still watches).
fn pin(cpu: usize) {
    // SAFETY: as in `cpus`; the call changes the calling thread only (pid 0).
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu, &mut set);
        libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{BufRead, BufReader};

    const CHILD: &str = "THROTTLE_PAUSE_WATCH_CHILD";

    /// The watch runs in a child (this test again): stopping this process would stop the
    /// other tests too. The child is stopped for 300 ms, as a hypervisor stops a CPU.
    #[test]
    fn a_stopped_process_is_seen_as_a_pause() {
        if std::env::var_os(CHILD).is_some() {
            let watch = PauseWatch::start();
            println!("watching");
            std::thread::sleep(Duration::from_millis(800));
            println!("worst_us={}", watch.worst().as_micros());
            return;
        }
        let mut child = std::process::Command::new(std::env::current_exe().unwrap())
            .args([
                "--exact",
                "pause::tests::a_stopped_process_is_seen_as_a_pause",
            ])
            .args(["--nocapture", "--test-threads", "1"])
            .env(CHILD, "1")
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
        while !lines.next().unwrap().unwrap().contains("watching") {}
        let pid = child.id().to_string();
        let signal = |s: &str| {
            let ok = std::process::Command::new("kill")
                .args([s, &pid])
                .status()
                .unwrap();
            assert!(ok.success());
        };
        std::thread::sleep(Duration::from_millis(100));
        signal("-STOP");
        std::thread::sleep(Duration::from_millis(300));
        signal("-CONT");
        let worst: u64 = lines
            .map_while(Result::ok)
            .find_map(|l| {
                l.strip_prefix("worst_us=")
                    .map(|v| v.trim().parse().unwrap())
            })
            .expect("the child printed its worst pause");
        child.wait().unwrap();
        assert!(worst >= 200_000, "a 300 ms stop seen as {worst} us");
    }
}
