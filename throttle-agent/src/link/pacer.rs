//! Earliest-departure-time pacing of one direction of a node's link.
//!
//! Why not a token bucket: a bucket lets through whatever it has banked. Any depth large
//! enough for a shaper that wakes late to catch up (10 ms) also let request-response
//! messages of up to that size pass without their serialization time: ping-pong of 64 KiB
//! to 1 MiB ran at 2-4 times the set rate. A real link has nothing banked: every message
//! takes its size / rate, idle or not.
//!
//! Model (the earliest-departure-time idea of Linux's fq and of Carousel, SIGCOMM 2017):
//! the link has a clock, `free_at`, the moment it finishes what it was given. A unit of `s`
//! bytes that is ready at `t` starts at `max(free_at, t)` and occupies the link for
//! `s / rate`; `free_at` moves to its end. A unit becomes ready in one of two ways:
//!
//! * [`Arrival::Whole`] (egress: bytes an application wrote, present all at once): the
//!   unit departs when its last byte would have left, `start + s / rate`.
//! * [`Arrival::Streamed`] (ingress: a frame another agent's egress already paced out):
//!   its bytes streamed in over the `s / rate` before it arrived, so it used the ingress
//!   link during `[t - s/rate, t]` if the link was free then. It starts at
//!   `max(free_at, t - s/rate)` and departs at the end of that, but never before `t`. A
//!   paced stream passes an ingress of the same rate without added delay, and many senders
//!   into one node share its ingress rate.
//!
//! **Lateness is credited only while backlogged.** The agent sleeps until each departure
//! and may wake late. When a unit was already waiting behind the stream's previous one
//! (`backlogged`), the link would have started it the moment the previous one ended, so it
//! may start up to `catch_up` in the past: a stream makes up its pacer's lateness and keeps
//! its rate. A unit that came after the stream went idle starts now, whatever the link did
//! before: no idle credit.
//!
//! The pacer also keeps the account that proves a run's link ran at its setting
//! ([`PacingStatus`], `throttle_proto::pacing`): how much link time it scheduled, how much of it for data that was
//! already waiting (the link was backlogged), how much link time such a backlog lost for
//! good (it fell further behind than `catch_up`: the link delivered less than its rate),
//! and how late the last unit of each burst left (which delays the message it ends).

use std::sync::Mutex;
use std::time::{Duration, Instant};

use throttle_proto::pacing::PacingStatus;

/// How far in the past a backlogged unit may start by default: how long an agent may be
/// descheduled and still catch up without losing the link's rate.
pub const DEFAULT_CATCH_UP: Duration = Duration::from_millis(10);

/// Rates the pacer works with, in bytes/s. Any rate it is given is brought into this range
/// (NaN and anything below become the minimum), so no arithmetic below can overflow a
/// `Duration` or divide by zero, whatever a caller passes.
const MIN_RATE: f64 = 1e-3;
const MAX_RATE: f64 = 1e15;

/// The longest a single unit may occupy the link (a unit of 1 byte at the minimum rate is
/// 1000 s): the schedule is kept within what an `Instant` can hold.
const MAX_UNIT: Duration = Duration::from_secs(3600);

fn sane_rate(rate: Option<f64>) -> Option<f64> {
    rate.map(|r| {
        if r.is_nan() {
            MIN_RATE
        } else {
            r.clamp(MIN_RATE, MAX_RATE)
        }
    })
}

fn secs_of(bytes: usize, rate: f64) -> Duration {
    let s = bytes as f64 / rate;
    if s.is_finite() && s < MAX_UNIT.as_secs_f64() {
        Duration::from_secs_f64(s.max(0.0))
    } else {
        MAX_UNIT
    }
}

/// How a unit reached the pacer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Arrival {
    /// Present all at once (an application's write): pays its serialization time.
    Whole,
    /// Streamed in at the sender's paced rate (a frame from another agent).
    Streamed,
}

/// When the bytes of a unit were ready to use the link.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ready {
    /// They were already waiting behind the stream's previous unit: the link would have
    /// started them the moment that one ended, so its lateness may be made up.
    Backlogged,
    /// They came after the stream went idle, when the socket's stamp says (the agent may
    /// have run later than that), or now when that is not known.
    Arrived(Option<Instant>),
}

/// When one unit may leave, and what the pacer needs to account for it.
#[derive(Clone, Copy, Debug)]
pub struct Departure {
    /// The moment the unit may go (its last byte leaves the emulated link).
    pub at: Instant,
    /// The rate it was scheduled at (`None`: unlimited, `at` is when it was asked).
    rate: Option<f64>,
    /// The pacer's rate generation when scheduled: a change of rate reschedules it.
    generation: u64,
}

/// The pacer of one direction of a link; shared by every stream of the node.
#[derive(Debug)]
pub struct Pacer {
    arrival: Arrival,
    state: Mutex<State>,
}

#[derive(Debug)]
struct State {
    /// Bytes per second; `None` means unlimited.
    rate: Option<f64>,
    catch_up: Duration,
    /// When the link finishes what it was given.
    free_at: Instant,
    generation: u64,
    fidelity: PacingStatus,
}

impl Pacer {
    /// A pacer at `rate` bytes/s (`None`: unlimited) for units that arrive as `arrival`.
    pub fn new(rate: Option<f64>, arrival: Arrival) -> Pacer {
        Pacer {
            arrival,
            state: Mutex::new(State {
                rate: sane_rate(rate),
                catch_up: DEFAULT_CATCH_UP,
                free_at: Instant::now(),
                generation: 0,
                fidelity: PacingStatus::new(),
            }),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        // The state is a few numbers updated together; a panic elsewhere while holding the
        // lock cannot leave them in a state worse than stopping the agent would.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Change the rate. What the link still has to serialize keeps its bytes: the time
    /// left is rescaled to the new rate, and departures already handed out are rescheduled
    /// by [`Pacer::refresh`] (the copy loops ask at least every few ms).
    pub fn set_rate(&self, rate: Option<f64>) {
        let rate = sane_rate(rate);
        let mut s = self.lock();
        let now = Instant::now();
        let left = s.free_at.saturating_duration_since(now);
        s.free_at = now + rescale(left, s.rate, rate);
        s.rate = rate;
        s.generation += 1;
    }

    pub fn rate(&self) -> Option<f64> {
        self.lock().rate
    }

    /// How far in the past a backlogged unit may start (at least 100 us).
    pub fn set_catch_up(&self, catch_up: Duration) {
        self.lock().catch_up = catch_up.max(Duration::from_micros(100));
    }

    /// The largest unit worth scheduling at once: about 1 ms of traffic at the current
    /// rate, at least one 1,500-byte frame; `usize::MAX` when unlimited. A unit leaves in
    /// one piece, so this bounds how bursty the paced stream looks to a receiver.
    pub fn unit(&self) -> usize {
        match self.lock().rate {
            Some(r) => (r * 1e-3).clamp(1500.0, 64.0 * 1024.0 * 1024.0) as usize,
            None => usize::MAX,
        }
    }

    /// Schedule `bytes` that were `ready` at `now`: backlogged units may make up their
    /// stream's lateness, others start when they arrived; either way no earlier than the
    /// catch-up window.
    pub fn schedule(&self, bytes: usize, ready: Ready, now: Instant) -> Departure {
        let mut s = self.lock();
        let Some(rate) = s.rate else {
            return Departure {
                at: now,
                rate: None,
                generation: s.generation,
            };
        };
        let took = secs_of(bytes, rate);
        let earliest = now.checked_sub(s.catch_up).unwrap_or(now);
        let ready = match ready {
            Ready::Backlogged => {
                // A backlog older than the catch-up window is link time lost for good.
                if s.free_at < earliest {
                    s.fidelity.lost_seconds += (earliest - s.free_at).as_secs_f64();
                }
                s.fidelity.backlog_seconds += took.as_secs_f64();
                earliest
            }
            Ready::Arrived(arrived) => {
                // Bytes that waited in the socket longer than the window (the agent
                // stopped or starved) are late by the rest, and it is counted.
                if let Some(waited) = arrived.and_then(|a| earliest.checked_duration_since(a)) {
                    s.fidelity.note_behind(waited);
                }
                arrived.map_or(now, |a| a.clamp(earliest, now))
            }
        };
        // When the unit's first byte could use the link: a streamed frame began to arrive
        // its own serialization time before it was read.
        let start = match self.arrival {
            Arrival::Whole => ready,
            Arrival::Streamed => ready.checked_sub(took).unwrap_or(ready),
        };
        // Not before `now` unless backlogged: a departure in the past is a stream
        // catching up on its pacer's lateness.
        let at = s.free_at.max(start) + took;
        s.free_at = at;
        s.fidelity.busy_seconds += took.as_secs_f64();
        Departure {
            at,
            rate: Some(rate),
            generation: s.generation,
        }
    }

    /// Reschedule `d` if the rate changed since it was made: the wait left is rescaled to
    /// the new rate. A departure already past stays where it was (the unit left the link
    /// before the change; it may still be held for the link's delay). Returns whether it
    /// moved.
    pub fn refresh(&self, d: &mut Departure, now: Instant) -> bool {
        let s = self.lock();
        if d.generation == s.generation {
            return false;
        }
        let left = d.at.saturating_duration_since(now);
        let was = std::mem::replace(&mut d.rate, s.rate);
        d.generation = s.generation;
        if left.is_zero() {
            return false;
        }
        d.at = now + rescale(left, was, s.rate);
        true
    }

    /// A copy loop let a unit go at `now` (after sleeping for it): note how late.
    pub fn departed(&self, d: &Departure, now: Instant) -> Duration {
        let late = now.saturating_duration_since(d.at);
        if d.rate.is_some() {
            self.lock().fidelity.note_late(late);
        }
        late
    }

    /// A stream's burst ended `late` after its schedule (its last unit left that late):
    /// the message it ended arrived that much later than the emulated link would deliver.
    pub fn fell_behind(&self, late: Duration) {
        if !late.is_zero() {
            self.lock().fidelity.note_behind(late);
        }
    }

    pub fn fidelity(&self) -> PacingStatus {
        self.lock().fidelity.clone()
    }
}

/// `left` at rate `from` as time at rate `to` (the same bytes).
fn rescale(left: Duration, from: Option<f64>, to: Option<f64>) -> Duration {
    match (from, to) {
        (Some(from), Some(to)) => {
            let s = left.as_secs_f64() * from / to;
            if s.is_finite() && s < MAX_UNIT.as_secs_f64() {
                Duration::from_secs_f64(s.max(0.0))
            } else {
                MAX_UNIT
            }
        }
        (_, None) => Duration::ZERO,
        // From unlimited: nothing was scheduled.
        (None, Some(_)) => Duration::ZERO,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Duration = Duration::from_millis(1);

    fn close(a: Duration, b: Duration) -> bool {
        a.abs_diff(b) < Duration::from_micros(2)
    }

    #[test]
    fn a_message_after_idle_pays_its_whole_serialization_time() {
        // 1 MB/s: 64 KB take 64 ms, however long the link was idle before.
        let p = Pacer::new(Some(1e6), Arrival::Whole);
        let t0 = Instant::now() + 50 * MS;
        let d = p.schedule(64_000, Ready::Arrived(None), t0);
        assert!(close(d.at - t0, 64 * MS), "{:?}", d.at - t0);
        // A second message long after the first: again its full time.
        let t1 = t0 + 500 * MS;
        let d = p.schedule(64_000, Ready::Arrived(None), t1);
        assert!(close(d.at - t1, 64 * MS));
    }

    #[test]
    fn a_message_in_units_ends_at_size_over_rate() {
        let p = Pacer::new(Some(1e6), Arrival::Whole);
        let t0 = Instant::now();
        let mut last = t0;
        for i in 0..10 {
            // Each unit is read when the previous one left (backlogged after the first).
            let d = p.schedule(
                10_000,
                if i > 0 {
                    Ready::Backlogged
                } else {
                    Ready::Arrived(None)
                },
                last,
            );
            last = d.at;
        }
        assert!(close(last - t0, 100 * MS), "{:?}", last - t0);
    }

    #[test]
    fn a_busy_link_queues_the_next_message_behind_the_first() {
        // Two streams: the second unit starts when the first ends.
        let p = Pacer::new(Some(1e6), Arrival::Whole);
        let t0 = Instant::now();
        let a = p.schedule(10_000, Ready::Arrived(None), t0);
        let b = p.schedule(10_000, Ready::Arrived(None), t0 + MS);
        assert!(close(a.at - t0, 10 * MS));
        assert!(close(b.at - t0, 20 * MS));
    }

    #[test]
    fn lateness_is_made_up_only_while_backlogged() {
        let p = Pacer::new(Some(1e6), Arrival::Whole);
        let t0 = Instant::now();
        let a = p.schedule(10_000, Ready::Arrived(None), t0);
        // The copy loop woke 3 ms late; the next unit was already waiting: it may start
        // where the first ended, so it departs 7 ms after the late wake-up.
        let woke = a.at + 3 * MS;
        let b = p.schedule(10_000, Ready::Backlogged, woke);
        assert!(close(b.at - woke, 7 * MS), "{:?}", b.at - woke);
        // The same lateness, but the unit came after the stream went idle: no credit.
        let p = Pacer::new(Some(1e6), Arrival::Whole);
        let a = p.schedule(10_000, Ready::Arrived(None), t0);
        let woke = a.at + 3 * MS;
        let b = p.schedule(10_000, Ready::Arrived(None), woke);
        assert!(close(b.at - woke, 10 * MS));
    }

    #[test]
    fn a_backlog_older_than_the_catch_up_window_is_lost_and_counted() {
        let p = Pacer::new(Some(1e6), Arrival::Whole);
        let t0 = Instant::now();
        let a = p.schedule(1_000, Ready::Arrived(None), t0);
        // The agent was stopped for 50 ms with a backlog: 10 ms are made up, 40 lost.
        let woke = a.at + 50 * MS;
        let b = p.schedule(20_000, Ready::Backlogged, woke);
        assert!(close(b.at - woke, 10 * MS), "{:?}", b.at - woke);
        let f = p.fidelity();
        assert!((f.lost_seconds - 0.040).abs() < 1e-5, "{f:?}");
        assert!((f.busy_seconds - 0.021).abs() < 1e-9, "{f:?}");
        assert!((f.backlog_seconds - 0.020).abs() < 1e-9, "{f:?}");
    }

    #[test]
    fn a_message_that_waited_for_the_agent_starts_when_it_arrived() {
        // The agent ran 300 us after the bytes arrived (the socket's stamp says when):
        // the link started them on arrival. Never more than the catch-up window back.
        let p = Pacer::new(Some(1e6), Arrival::Whole);
        let now = Instant::now() + 100 * MS;
        let d = p.schedule(
            10_000,
            Ready::Arrived(Some(now - Duration::from_micros(300))),
            now,
        );
        assert!(
            close(d.at - now, Duration::from_micros(9_700)),
            "{:?}",
            d.at - now
        );
        let later = now + 100 * MS;
        let d = p.schedule(10_000, Ready::Arrived(Some(later - 50 * MS)), later);
        assert!(close(d.at - later, Duration::ZERO), "{:?}", d.at - later);
        // The 40 ms beyond the window are delivery the agent made late, and counted.
        assert_eq!(p.fidelity().late_bursts, 1);
        assert!((p.fidelity().late_burst_seconds - 0.039).abs() < 1e-6);
        assert!(
            (p.fidelity().behind_seconds - 0.040).abs() < 1e-6,
            "{:?}",
            p.fidelity()
        );
    }

    #[test]
    fn a_streamed_frame_passes_a_free_ingress_of_the_same_rate_at_once() {
        let p = Pacer::new(Some(1e6), Arrival::Streamed);
        let t0 = Instant::now() + 100 * MS;
        // Frames of 10 kB arriving every 10 ms (paced by the sender at the same rate).
        for i in 0..5 {
            let t = t0 + 10 * i * MS;
            let d = p.schedule(10_000, Ready::Arrived(None), t);
            assert!(
                d.at <= t && close(t - d.at, Duration::ZERO),
                "frame {i} held {:?}",
                d.at - t
            );
        }
    }

    #[test]
    fn streamed_frames_from_many_senders_share_the_ingress_rate() {
        // Three senders each deliver a 10 kB frame at t: the ingress link carries 30 kB
        // from t - 10 ms (when the first bytes arrived) on, so the last leaves at t + 20 ms.
        let p = Pacer::new(Some(1e6), Arrival::Streamed);
        let t = Instant::now() + 100 * MS;
        let at: Vec<Duration> = (0..3)
            .map(|_| p.schedule(10_000, Ready::Arrived(None), t).at - t)
            .collect();
        assert!(close(at[0], Duration::ZERO), "{at:?}");
        assert!(close(at[1], 10 * MS), "{at:?}");
        assert!(close(at[2], 20 * MS), "{at:?}");
    }

    #[test]
    fn a_rate_change_reschedules_what_waits() {
        // 12.5 kB/s (0.01 % of 1 Gbit/s): 1500 B take 120 ms.
        let p = Pacer::new(Some(12.5e3), Arrival::Whole);
        let now = Instant::now();
        let mut d = p.schedule(1500, Ready::Arrived(None), now);
        assert!(close(d.at - now, 120 * MS));
        p.set_rate(Some(125e6));
        let later = now + MS;
        assert!(p.refresh(&mut d, later));
        assert!(
            d.at - later < Duration::from_micros(20),
            "{:?}",
            d.at - later
        );
        // The link's own clock moved too: the next unit is not stuck behind 120 ms.
        let next = p.schedule(125_000, Ready::Arrived(None), later);
        assert!(
            next.at - later < Duration::from_millis(2),
            "{:?}",
            next.at - later
        );
        assert!(!p.refresh(&mut d, later));
    }

    /// A unit that already left the link keeps its departure through a change of rate:
    /// held for the link's delay meanwhile, it would otherwise wait that delay again.
    #[test]
    fn a_rate_change_leaves_a_past_departure_where_it_was() {
        let p = Pacer::new(Some(125e6), Arrival::Whole);
        let now = Instant::now();
        let mut d = p.schedule(125_000, Ready::Arrived(None), now);
        let left_at = d.at;
        p.set_rate(Some(12.5e6));
        let later = left_at + 5 * MS;
        assert!(!p.refresh(&mut d, later));
        assert_eq!(d.at, left_at);
        // And it is not rescaled again later.
        assert!(!p.refresh(&mut d, later + MS));
        assert_eq!(d.at, left_at);
    }

    #[test]
    fn unlimited_departs_at_once_and_counts_nothing() {
        let p = Pacer::new(None, Arrival::Whole);
        let now = Instant::now();
        let d = p.schedule(1 << 30, Ready::Arrived(None), now);
        assert_eq!(d.at, now);
        p.departed(&d, now + MS);
        assert_eq!(p.fidelity(), PacingStatus::new());
        assert_eq!(p.unit(), usize::MAX);
    }

    #[test]
    fn departures_record_their_lateness() {
        let p = Pacer::new(Some(1e6), Arrival::Whole);
        let now = Instant::now();
        let d = p.schedule(1000, Ready::Arrived(None), now);
        assert_eq!(
            p.departed(&d, d.at + Duration::from_micros(30)),
            Duration::from_micros(30)
        );
        p.departed(&d, d.at);
        let f = p.fidelity();
        assert_eq!(f.waits, 2);
        assert!((f.late_seconds - 30e-6).abs() < 1e-9);
        assert_eq!(f.late_buckets[0].count, 1, "{f:?}"); // <= 10 us: the on-time one
        assert_eq!(f.late_buckets[1].count, 2, "{f:?}"); // <= 50 us: both
    }

    #[test]
    fn any_rate_and_size_is_survived() {
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
            for arrival in [Arrival::Whole, Arrival::Streamed] {
                let p = Pacer::new(Some(r), arrival);
                let now = Instant::now();
                let mut d = p.schedule(usize::MAX, Ready::Backlogged, now);
                let _ = p.schedule(1, Ready::Arrived(None), now);
                p.set_rate(Some(r / 3.0));
                p.refresh(&mut d, now);
                p.set_rate(None);
                p.refresh(&mut d, now);
                p.set_rate(Some(1e9));
                let _ = p.schedule(1 << 20, Ready::Backlogged, now);
                p.departed(&d, now);
                let _ = p.unit();
            }
        }
    }

    #[test]
    fn long_run_rate_matches() {
        // A backlogged stream woken late by 0-300 us at random keeps its rate exactly.
        let rate = 50e6;
        let p = Pacer::new(Some(rate), Arrival::Whole);
        let t0 = Instant::now();
        let mut now = t0;
        let mut sent = 0usize;
        let mut x = 12345u64;
        while now - t0 < Duration::from_millis(300) {
            let d = p.schedule(
                64 * 1024,
                if sent > 0 {
                    Ready::Backlogged
                } else {
                    Ready::Arrived(None)
                },
                now,
            );
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            now = d.at.max(now) + Duration::from_micros((x >> 33) % 300);
            sent += 64 * 1024;
        }
        let achieved = sent as f64 / (now - t0).as_secs_f64();
        assert!((achieved / rate - 1.0).abs() < 0.01, "{achieved} vs {rate}");
    }
}
