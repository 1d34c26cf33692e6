//! Sleeping until a pacing departure, to within tens of microseconds.
//!
//! Why not `tokio::time::sleep`: tokio's timer wheel has millisecond resolution and wakes
//! 0.6-2 ms late (measured on the development machine), while a 64 KiB message at 1 Gbit/s
//! takes 0.52 ms on the link. A timerfd is an hrtimer the kernel fires to the nanosecond and
//! tokio's reactor sees like any socket; it woke 20-50 us late there (a virtual machine:
//! most of that is the CPU waking from idle). The remaining, fairly steady, wake-up delay is
//! learned (a running average over every wake-up of the process) and the timer is armed
//! that much early, so departures leave on time on average rather than always late.
//!
//! A [`Sleeper`] owns one timerfd, made on its first sleep (streams that never wait, the
//! unshaped ones, never make one); without one (out of descriptors) it falls back to
//! tokio's timer.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use tokio::io::unix::AsyncFd;

/// Learned wake-up delay of the process's timers, in nanoseconds.
static ADVANCE_NS: AtomicU64 = AtomicU64::new(0);

/// The most the timer is armed early: what is learned beyond this is not a steady delay.
const MAX_ADVANCE: Duration = Duration::from_micros(100);

/// A wait shorter than this is not slept: the departure is that close.
const MIN_SLEEP: Duration = Duration::from_micros(2);

/// How early the timer is armed now.
pub fn advance() -> Duration {
    Duration::from_nanos(ADVANCE_NS.load(Ordering::Relaxed))
}

fn learn(wake_delay: Duration) {
    // A running average with weight 1/16; updates from several threads may race and lose
    // one another's contribution, which only slows the average down.
    let d = wake_delay.min(MAX_ADVANCE).as_nanos() as i64;
    let a = ADVANCE_NS.load(Ordering::Relaxed) as i64;
    let next = (a + (d - a) / 16).max(0) as u64;
    ADVANCE_NS.store(next, Ordering::Relaxed);
}

/// One stream direction's timer.
#[derive(Debug, Default)]
pub struct Sleeper {
    fd: Option<AsyncFd<OwnedFd>>,
    /// Making a timerfd failed once: use tokio's timer from then on.
    coarse: bool,
}

impl Sleeper {
    pub fn new() -> Sleeper {
        Sleeper::default()
    }

    /// Sleep until about `deadline` (armed early by the learned wake-up delay). Returns at
    /// once when the deadline is that close or past.
    pub async fn until(&mut self, deadline: Instant) {
        let target = deadline.checked_sub(advance()).unwrap_or(deadline);
        let now = Instant::now();
        let Some(wait) = target.checked_duration_since(now) else {
            return;
        };
        if wait < MIN_SLEEP {
            return;
        }
        if !self.coarse {
            match self.timerfd_sleep(wait).await {
                Ok(()) => {
                    learn(Instant::now().saturating_duration_since(target));
                    return;
                }
                Err(e) => {
                    tracing::debug!("timerfd unavailable ({e}); pacing with tokio's timer");
                    self.fd = None;
                    self.coarse = true;
                }
            }
        }
        tokio::time::sleep_until(tokio::time::Instant::from_std(target)).await;
    }

    async fn timerfd_sleep(&mut self, wait: Duration) -> io::Result<()> {
        if self.fd.is_none() {
            let fd = new_timerfd()?;
            // SAFETY: an OwnedFd's descriptor is open and stays the same until the AsyncFd
            // (which owns it) is dropped.
            let fd = unsafe { AsyncFd::register_with_interest(fd, tokio::io::Interest::READABLE) }
                .map_err(io::Error::from)?;
            self.fd = Some(fd);
        }
        let Some(fd) = self.fd.as_ref() else {
            return Err(io::Error::other("timerfd missing"));
        };
        let spec = libc::itimerspec {
            it_interval: libc::timespec {
                tv_sec: 0,
                tv_nsec: 0,
            },
            it_value: libc::timespec {
                tv_sec: wait.as_secs() as libc::time_t,
                tv_nsec: wait.subsec_nanos() as libc::c_long,
            },
        };
        // SAFETY: timerfd_settime on our own timerfd with a valid itimerspec; the old
        // value is not asked for (null). Arming replaces any earlier, unexpired setting.
        let rc = unsafe { libc::timerfd_settime(fd.as_raw_fd(), 0, &spec, std::ptr::null_mut()) };
        if rc != 0 {
            return Err(io::Error::last_os_error());
        }
        loop {
            let mut guard = fd.readable().await?;
            let mut expirations = [0u8; 8];
            // SAFETY: read(2) of the 8-byte expiration count into a buffer of that size.
            let n = unsafe {
                libc::read(
                    fd.as_raw_fd(),
                    expirations.as_mut_ptr() as *mut libc::c_void,
                    expirations.len(),
                )
            };
            if n == 8 {
                return Ok(());
            }
            let err = io::Error::last_os_error();
            if n < 0 && err.kind() != io::ErrorKind::WouldBlock {
                return Err(err);
            }
            guard.clear_ready();
        }
    }
}

fn new_timerfd() -> io::Result<OwnedFd> {
    // SAFETY: timerfd_create returns a new descriptor we own, or -1.
    let fd = unsafe {
        libc::timerfd_create(
            libc::CLOCK_MONOTONIC,
            libc::TFD_NONBLOCK | libc::TFD_CLOEXEC,
        )
    };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: a fresh descriptor, owned by nobody else.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn sleeps_about_until_the_deadline() {
        let mut s = Sleeper::new();
        for us in [200u64, 1_000, 3_000] {
            let start = Instant::now();
            let deadline = start + Duration::from_micros(us);
            s.until(deadline).await;
            let woke = Instant::now();
            // Never earlier than the largest advance; late by less than tokio's timer
            // would be (generous: this machine may be loaded).
            assert!(
                woke + MAX_ADVANCE >= deadline,
                "woke {:?} early",
                deadline - woke
            );
            assert!(
                woke < deadline + Duration::from_millis(50),
                "woke {:?} late",
                woke - deadline
            );
        }
        assert!(s.fd.is_some(), "a timerfd was made");
    }

    #[tokio::test]
    async fn a_past_deadline_returns_at_once_without_a_timer() {
        let mut s = Sleeper::new();
        s.until(Instant::now()).await;
        assert!(s.fd.is_none());
    }
}
