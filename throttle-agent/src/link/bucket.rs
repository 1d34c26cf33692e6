//! The token bucket that paces one direction of a node's link.
//!
//! Why not `governor`: its quota is fixed at construction (a rate change would need a new
//! limiter, losing the debt of streams in flight), it rounds per-cell intervals to whole
//! nanoseconds (wrong above ~250 MB/s with byte cells) and its async wait wakes late. This
//! bucket is a few lines of arithmetic under a mutex, rescales on a rate change so the
//! change is in force at once, and lets the caller do its own (short, capped) sleeping.
//!
//! Model: `tokens` may go negative ("debt"). A grant is made whenever `tokens > 0`, of at
//! most what the bucket holds (at least the idle depth); the bytes are then owed. Over any window the bytes granted are
//! `rate * window + burst` at most, so averages over 100 ms are on target.
//!
//! Two depths: a link cannot bank capacity while nobody sends, so an idle bucket fills
//! only to the small *idle* depth (1 ms by default): a message after a quiet phase gets at
//! most that much for free, the rest pays its serialization time. While the link is busy
//! (a sender was refused, or asked for a bulk chunk, within the last full depth), the
//! bucket may fill to the full depth (10 ms by default), so that a shaper descheduled for a
//! few ms catches up instead of losing the link's capacity.

use std::sync::Mutex;
use std::time::{Duration, Instant};

/// How long a caller sleeps at most before asking again. Bounds how late a rate change
/// (or a refill) is noticed by a waiting stream: DESIGN.md asks for 10 ms.
pub const MAX_WAIT: Duration = Duration::from_millis(4);

/// Default depth of the bucket while traffic waits, in time at the current rate.
pub const DEFAULT_BURST: Duration = Duration::from_millis(10);

/// Default depth of an idle bucket, in time at the current rate.
pub const DEFAULT_IDLE_BURST: Duration = Duration::from_millis(1);

/// A request at least this large comes from a bulk transfer (the splice path): the link
/// counts as busy, like after a refusal.
const BULK_WANT: usize = 64 * 1024;

/// Smallest depth in bytes: one Ethernet frame's payload, so that the lowest rates still
/// move whole packets. Small on purpose: below 1 ms of traffic (rates under 1.5 MB/s) this
/// floor, not the idle depth, is what a message after a quiet phase gets for free (twice:
/// a grant may put the bucket into debt of one depth). At 16 KiB, a 32 KB message passed
/// unpaced at 10% of 100 Mbit/s, 26 ms of serialization a real link would impose.
const MIN_BURST_BYTES: f64 = 1500.0;

/// Rates the bucket works with, in bytes/s. Any rate it is given is brought into this
/// range (NaN and anything below become the minimum), so no arithmetic below can
/// overflow a `Duration` or divide by zero, whatever a caller passes.
const MIN_RATE: f64 = 1e-3;
const MAX_RATE: f64 = 1e15;

fn sane_rate(rate: Option<f64>) -> Option<f64> {
    rate.map(|r| {
        if r.is_nan() {
            MIN_RATE
        } else {
            r.clamp(MIN_RATE, MAX_RATE)
        }
    })
}

/// A token bucket whose rate can change while streams wait on it.
#[derive(Debug)]
pub struct TokenBucket {
    state: Mutex<State>,
}

#[derive(Debug)]
struct State {
    /// Bytes per second; `None` means unlimited.
    rate: Option<f64>,
    burst_time: Duration,
    idle_burst_time: Duration,
    tokens: f64,
    last: Instant,
    /// When a sender was last refused or asked for a bulk chunk: the link is busy, and a
    /// stall of the agent may be made up for.
    last_busy: Option<Instant>,
}

impl State {
    fn burst_bytes(&self) -> f64 {
        match self.rate {
            Some(r) => (r * self.burst_time.as_secs_f64()).max(MIN_BURST_BYTES),
            None => f64::INFINITY,
        }
    }

    fn idle_bytes(&self) -> f64 {
        match self.rate {
            Some(r) => (r * self.idle_burst_time.as_secs_f64())
                .max(MIN_BURST_BYTES)
                .min(self.burst_bytes()),
            None => f64::INFINITY,
        }
    }

    /// Traffic was refused, or moved in bulk, recently enough that the link counts as busy.
    fn backlogged(&self, now: Instant) -> bool {
        self.last_busy
            .is_some_and(|t| now.saturating_duration_since(t) <= self.burst_time + MAX_WAIT)
    }

    fn refill(&mut self, now: Instant) {
        if let Some(rate) = self.rate {
            let dt = now.saturating_duration_since(self.last).as_secs_f64();
            let burst = self.burst_bytes();
            // Idle time may not raise the tokens above the idle depth (tokens already
            // there are kept); a backlog may fill up to the full depth.
            let cap = if self.backlogged(now) {
                burst
            } else {
                self.idle_bytes().max(self.tokens).min(burst)
            };
            self.tokens = (self.tokens + dt * rate).min(cap);
        }
        self.last = now;
    }
}

impl TokenBucket {
    /// A bucket at `rate` bytes/s (`None`: unlimited), starting full.
    pub fn new(rate: Option<f64>) -> TokenBucket {
        let rate = sane_rate(rate);
        let mut state = State {
            rate,
            burst_time: DEFAULT_BURST,
            idle_burst_time: DEFAULT_IDLE_BURST,
            tokens: 0.0,
            last: Instant::now(),
            last_busy: None,
        };
        state.tokens = if rate.is_some() {
            state.idle_bytes()
        } else {
            0.0
        };
        TokenBucket {
            state: Mutex::new(state),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        // A panic while holding this lock cannot leave the arithmetic half-done in a way
        // that matters more than stopping the agent would; keep serving.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Change the rate. Tokens (and debt) are rescaled so that they keep meaning the same
    /// time at the link: a stream that owed 2 ms of traffic still owes 2 ms. Debt is then
    /// capped at one full depth, so no debt outlives a rate change by more than the bucket's
    /// own duration (a grant made at 0.01 % must not stall the link after `set 100`).
    pub fn set_rate(&self, rate: Option<f64>) {
        let rate = sane_rate(rate);
        let mut s = self.lock();
        let now = Instant::now();
        s.refill(now);
        match (s.rate, rate) {
            (Some(old), Some(new)) => s.tokens *= new / old,
            (None, Some(_)) => s.tokens = 0.0,
            _ => {}
        }
        s.rate = rate;
        let burst = s.burst_bytes();
        if !s.tokens.is_finite() {
            s.tokens = 0.0;
        }
        s.tokens = s.tokens.clamp(-burst, burst);
    }

    pub fn rate(&self) -> Option<f64> {
        self.lock().rate
    }

    /// Change the depths of the bucket (in time at the current rate): `burst` while
    /// traffic waits, `idle` for an idle link (at most `burst`).
    pub fn set_burst(&self, burst: Duration, idle: Duration) {
        let mut s = self.lock();
        s.burst_time = burst.max(Duration::from_micros(100));
        s.idle_burst_time = idle.max(Duration::from_micros(100)).min(s.burst_time);
    }

    /// Largest grant this bucket makes at once, in bytes (`usize::MAX` when unlimited).
    pub fn max_grant(&self) -> usize {
        let b = self.lock().burst_bytes();
        if b.is_finite() {
            b as usize
        } else {
            usize::MAX
        }
    }

    /// Take up to `want` bytes now, or say how long to wait before asking again.
    pub fn try_take(&self, want: usize) -> Result<usize, Duration> {
        if want == 0 {
            return Ok(0);
        }
        let mut s = self.lock();
        let Some(rate) = s.rate else {
            return Ok(want);
        };
        let now = Instant::now();
        s.refill(now);
        if s.tokens > 0.0 {
            // At most what the bucket holds (but at least the idle depth, so streams move
            // in large chunks), never more than the full depth.
            let limit = s.tokens.max(s.idle_bytes()).min(s.burst_bytes());
            let grant = (want as f64).min(limit).max(1.0) as usize;
            s.tokens -= grant as f64;
            if want >= BULK_WANT {
                s.last_busy = Some(now);
            }
            Ok(grant)
        } else {
            s.last_busy = Some(now);
            // Compared in seconds before any Duration is made: at a tiny rate the time to
            // pay the debt can exceed what a Duration holds.
            let secs = ((-s.tokens + 1.0) / rate).clamp(50e-6, MAX_WAIT.as_secs_f64());
            Err(Duration::from_secs_f64(if secs.is_finite() {
                secs
            } else {
                MAX_WAIT.as_secs_f64()
            }))
        }
    }

    /// Give back tokens that were granted but not used.
    pub fn refund(&self, bytes: usize) {
        if bytes == 0 {
            return;
        }
        let mut s = self.lock();
        if s.rate.is_some() {
            let burst = s.burst_bytes();
            s.tokens = (s.tokens + bytes as f64).min(burst);
        }
    }

    /// Wait (asynchronously) until some of `want` bytes may pass; returns how many.
    pub async fn take(&self, want: usize) -> usize {
        loop {
            match self.try_take(want) {
                Ok(n) => return n,
                Err(wait) => tokio::time::sleep(wait).await,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unlimited_grants_everything() {
        let b = TokenBucket::new(None);
        assert_eq!(b.try_take(1 << 30), Ok(1 << 30));
    }

    #[test]
    fn an_idle_link_banks_only_the_idle_depth_but_a_backlog_catches_up() {
        let b = TokenBucket::new(Some(100e6)); // idle depth 1 ms = 100 KB, full 10 ms = 1 MB
        std::thread::sleep(Duration::from_millis(30));
        // After 30 ms of idle, one grant is at most ~the idle depth...
        let first = b.try_take(usize::MAX).unwrap();
        assert!(first <= 110_000, "idle link granted {first} bytes at once");
        // ...and then senders wait.
        while b.try_take(usize::MAX).is_ok() {}
        // A sender stalled for 8 ms while refused may use the whole 8 ms afterwards.
        std::thread::sleep(Duration::from_millis(8));
        let mut got = 0;
        while let Ok(n) = b.try_take(64 * 1024) {
            got += n;
        }
        assert!(
            got >= 600_000,
            "a backlog caught up only {got} bytes of ~800 KB"
        );
    }

    #[test]
    fn grant_is_capped_at_one_burst_then_waits() {
        let b = TokenBucket::new(Some(1e6)); // 1 MB/s, idle depth 1500 B (min)
        let first = b.try_take(1 << 20).unwrap();
        assert_eq!(first, 1500);
        // The bucket is now at ~0; a grant may still be made while tokens > 0, which puts
        // it into debt of up to one burst. After that, callers must wait.
        while b.try_take(1 << 20).is_ok() {}
        let wait = b.try_take(1).unwrap_err();
        assert!(wait > Duration::ZERO && wait <= MAX_WAIT);
    }

    #[test]
    fn a_message_after_idle_at_a_low_rate_pays_all_but_two_small_depths() {
        // 10% of 100 Mbit/s: 1.25 MB/s, 1 ms = 1.25 kB, so the 1500 B floor is the idle
        // depth. A 16 kB message after a quiet phase may pass 2 x 1500 B at once (one depth
        // banked, one in debt); the rest, 13 kB, takes 10.4 ms. (With a 16 KiB floor the
        // whole message passed at once.)
        let b = TokenBucket::new(Some(1.25e6));
        std::thread::sleep(Duration::from_millis(30));
        let start = Instant::now();
        let mut left: usize = 16_000;
        while left > 0 {
            match b.try_take(left) {
                Ok(n) => left -= n,
                Err(wait) => std::thread::sleep(wait),
            }
        }
        let took = start.elapsed();
        assert!(
            took >= Duration::from_millis(9),
            "16 kB at 1.25 MB/s after idle took only {took:?}"
        );
        assert!(took < Duration::from_millis(500), "{took:?}");
    }

    #[test]
    fn refund_restores_tokens() {
        let b = TokenBucket::new(Some(1e6));
        let g = b.try_take(1 << 20).unwrap();
        b.refund(g);
        assert!(b.try_take(1).is_ok());
    }

    #[test]
    fn rate_change_rescales_debt() {
        let b = TokenBucket::new(Some(100e6));
        // Drive into debt.
        let _ = b.try_take(usize::MAX).unwrap();
        let _ = b.try_take(usize::MAX).unwrap();
        b.set_rate(Some(1e6));
        // The debt is rescaled to the same time at 1 MB/s: the wait stays short.
        let wait = b.try_take(1).unwrap_err();
        assert!(wait <= MAX_WAIT);
        std::thread::sleep(Duration::from_millis(15));
        assert!(
            b.try_take(1).is_ok(),
            "after 15 ms at the new rate the debt is paid"
        );
    }

    #[test]
    fn any_rate_is_survived() {
        for r in [
            1e-30,
            0.0,
            -5.0,
            f64::NAN,
            f64::INFINITY,
            f64::MIN_POSITIVE,
            1e300,
            12.5,
        ] {
            let b = TokenBucket::new(Some(r));
            for _ in 0..4 {
                let _ = b.try_take(usize::MAX);
                let _ = b.try_take(1);
            }
            b.set_rate(Some(r / 3.0));
            b.set_rate(Some(1e9));
            let _ = b.try_take(1 << 20);
            b.set_rate(Some(r));
            let _ = b.try_take(1 << 20);
            b.refund(usize::MAX);
            let _ = b.max_grant();
        }
    }

    #[test]
    fn debt_from_a_tiny_rate_does_not_outlive_the_change() {
        // 0.01 % of 1 Gbit/s = 12.5 kB/s: one minimum grant of 1500 B is 0.12 s of debt.
        let b = TokenBucket::new(Some(12.5e3));
        // Taking until refused ends in debt: a grant made while a few bytes were left is a
        // whole minimum depth.
        while b.try_take(1 << 20).is_ok() {}
        std::thread::sleep(Duration::from_millis(15));
        assert!(b.try_take(1).is_err(), "0.12 s of debt at 12.5 kB/s");
        b.set_rate(Some(125e6));
        // At the new rate the debt is at most one full depth (10 ms).
        std::thread::sleep(Duration::from_millis(15));
        assert!(
            b.try_take(1).is_ok(),
            "debt from 12.5 kB/s still blocks 125 MB/s after 15 ms"
        );
    }

    #[test]
    fn long_run_rate_matches() {
        // Take greedily for 300 ms with real time; bytes must be rate*t + burst at most.
        let rate = 50e6;
        let b = TokenBucket::new(Some(rate));
        let start = Instant::now();
        let mut total = 0usize;
        while start.elapsed() < Duration::from_millis(300) {
            match b.try_take(64 * 1024) {
                Ok(n) => total += n,
                Err(w) => std::thread::sleep(w),
            }
        }
        let el = start.elapsed().as_secs_f64();
        let achieved = total as f64 / el;
        let bound = (rate * el + 2.0 * rate * 0.005) / el;
        assert!(
            achieved <= bound * 1.01,
            "achieved {achieved} > bound {bound}"
        );
        assert!(
            achieved >= rate * 0.9,
            "achieved {achieved} far below {rate}"
        );
    }
}
