//! The node's emulated interconnect link: what it allows, independent of how bytes move.
//!
//! A [`Link`] has a [`Shape`] (capacity, percentage, added latency; the type, valid by
//! construction, is `throttle_proto::shape`) and two [`Port`]s,
//! egress and ingress, each with its own pacer shared by every stream of the node.
//! The copy loop (`transport::pump`) only ever asks a port "when may these bytes be
//! written" (a [`Release`]: the pacer's departure plus the link's added delay, whatever
//! makes them wait) and "how many bytes may wait at once" ([`Port::window`]), and tells it
//! what it moved and when it let it go. That is the seam: new link behaviours change this
//! module, never the copy loop (toxiproxy's lesson). Nothing here sleeps or does I/O:
//! releases are instants, and the copy loop waits for them.
//!
//! A link's shape changes only through [`lease::LeasedLink`], the one door (API, lease,
//! SIGHUP): `Link::set_shape` is private to this module.

pub mod lease;
pub mod pacer;
pub mod shares;

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant};

pub use lease::{LeasedLink, Reloaded};
pub use pacer::{Arrival, Departure, Pacer, Ready};
pub use throttle_proto::pacing::PacingStatus;

pub use throttle_proto::shape::{Shape, MAX_LATENCY_US};

/// How long a copy loop waits at most before asking its port again: bounds how late a
/// rate change reaches a waiting stream (the design asks for 10 ms).
pub const MAX_WAIT: Duration = Duration::from_millis(4);

/// Which way bytes cross the link.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Direction {
    Egress,
    Ingress,
}

/// One direction of the link: its pacer, its added delay, and its byte counters.
#[derive(Debug)]
pub struct Port {
    direction: Direction,
    pacer: Pacer,
    /// Added delay in microseconds (egress only; always 0 on ingress).
    delay_us: AtomicU64,
    /// The link's capacity in bytes/s as f64 bits (what an unlimited setting carries).
    capacity_bits: AtomicU64,
    bytes: AtomicU64,
    /// Recent rate in bytes/s as f64 bits, refreshed by [`Link::sample_rates`].
    rate_bits: AtomicU64,
    last_sample: RwLock<(Instant, u64)>,
}

impl Port {
    fn new(direction: Direction, shape: &Shape) -> Port {
        Port {
            direction,
            // Egress carries what applications wrote (all there at once); ingress carries
            // frames another agent's egress paced out (they streamed in at the link rate).
            pacer: Pacer::new(
                shape.rate(),
                match direction {
                    Direction::Egress => Arrival::Whole,
                    Direction::Ingress => Arrival::Streamed,
                },
            ),
            delay_us: AtomicU64::new(if direction == Direction::Egress {
                shape.latency_us()
            } else {
                0
            }),
            capacity_bits: AtomicU64::new(shape.capacity().bytes_per_sec().to_bits()),
            bytes: AtomicU64::new(0),
            rate_bits: AtomicU64::new(0f64.to_bits()),
            last_sample: RwLock::new((Instant::now(), 0)),
        }
    }

    pub fn direction(&self) -> Direction {
        self.direction
    }

    /// When `bytes` that were `ready` may be written: their departure (see
    /// [`Pacer::schedule`]) plus the link's added delay.
    pub fn schedule(&self, bytes: usize, ready: Ready) -> Release {
        let now = Instant::now();
        Release {
            departure: Some(self.pacer.schedule(bytes, ready, now)),
            asked: now,
            delay: self.delay(),
        }
    }

    /// When bytes the pacer does not schedule (the rest of a frame it paced whole) may be
    /// written: now plus the link's added delay.
    pub fn carry(&self) -> Release {
        Release {
            departure: None,
            asked: Instant::now(),
            delay: self.delay(),
        }
    }

    /// Move `r` to the current rate if the rate changed since it was scheduled.
    pub fn refresh(&self, r: &mut Release) -> bool {
        match r.departure.as_mut() {
            Some(d) => self.pacer.refresh(d, Instant::now()),
            None => false,
        }
    }

    /// The copy loop let `r` go now, after waiting for it; returns how late (after its
    /// due moment, the delay included).
    pub fn departed(&self, r: &Release) -> Duration {
        let now = Instant::now();
        match &r.departure {
            // The pacer knows no delay: its departure was due `delay` before the release.
            Some(d) => self
                .pacer
                .departed(d, now.checked_sub(r.delay).unwrap_or(now)),
            None => now.saturating_duration_since(r.due()),
        }
    }

    /// A stream's burst ended `late` after its schedule.
    pub fn fell_behind(&self, late: Duration) {
        self.pacer.fell_behind(late)
    }

    /// The largest unit a copy loop schedules at once (about 1 ms of traffic).
    pub fn unit(&self) -> usize {
        self.pacer.unit()
    }

    /// The fidelity account of this direction (counters since the agent started).
    pub fn fidelity(&self) -> PacingStatus {
        self.pacer.fidelity()
    }

    /// The link's added delay: how long bytes stay on the emulated wire after they leave.
    pub fn delay(&self) -> Duration {
        Duration::from_micros(self.delay_us.load(Ordering::Relaxed))
    }

    /// How many bytes a copy loop may hold between reading and writing them (scheduled,
    /// not yet due). None without added delay: each unit is written before the next is
    /// read, so the socket's buffer, not the agent, holds the backlog. With a delay, what
    /// the link carries in two of its delays, at its rate (its capacity when unlimited),
    /// from 1 to 64 MiB: more would only queue in the agent; less would let the delay cut
    /// the rate.
    pub fn window(&self) -> usize {
        let delay = self.delay();
        if delay.is_zero() {
            return 0;
        }
        let rate = self
            .rate_limit()
            .unwrap_or_else(|| f64::from_bits(self.capacity_bits.load(Ordering::Relaxed)));
        ((2.0 * rate * delay.as_secs_f64()) as usize).clamp(1 << 20, 64 << 20)
    }

    /// Count bytes that really crossed.
    pub fn record(&self, bytes: usize) {
        self.bytes.fetch_add(bytes as u64, Ordering::Relaxed);
    }

    pub fn bytes(&self) -> u64 {
        self.bytes.load(Ordering::Relaxed)
    }

    /// Bytes per second over the last sampling interval.
    pub fn current_rate(&self) -> f64 {
        f64::from_bits(self.rate_bits.load(Ordering::Relaxed))
    }

    /// The current pacing rate (`None`: unlimited).
    pub fn rate_limit(&self) -> Option<f64> {
        self.pacer.rate()
    }

    fn apply(&self, shape: &Shape) {
        self.pacer.set_rate(shape.rate());
        self.capacity_bits.store(
            shape.capacity().bytes_per_sec().to_bits(),
            Ordering::Relaxed,
        );
        if self.direction == Direction::Egress {
            self.delay_us.store(shape.latency_us(), Ordering::Relaxed);
        }
    }

    fn sample(&self) {
        let now = Instant::now();
        let bytes = self.bytes();
        let mut last = self.last_sample.write().unwrap_or_else(|e| e.into_inner());
        let dt = now.duration_since(last.0).as_secs_f64();
        if dt > 0.0 {
            let rate = bytes.saturating_sub(last.1) as f64 / dt;
            self.rate_bits.store(rate.to_bits(), Ordering::Relaxed);
        }
        *last = (now, bytes);
    }
}

/// When a unit a copy loop read may be written to the other side: when the pacer lets
/// it leave the emulated link, plus the delay the link adds. The copy loop waits for
/// [`Release::due`] and need not know which of the two made it wait.
#[derive(Clone, Copy, Debug)]
pub struct Release {
    /// The pacer's departure (`None`: bytes it does not schedule).
    departure: Option<Departure>,
    /// When the unit was scheduled.
    asked: Instant,
    /// The link's added delay then.
    delay: Duration,
}

impl Release {
    /// Bytes of an unshaped stream: due now.
    pub fn now() -> Release {
        Release {
            departure: None,
            asked: Instant::now(),
            delay: Duration::ZERO,
        }
    }

    /// When the bytes may be written: departure (or the moment they were scheduled, for
    /// bytes the pacer does not schedule) plus the added delay.
    pub fn due(&self) -> Instant {
        self.departure.map_or(self.asked, |d| d.at) + self.delay
    }

    /// Whether the pacer scheduled these bytes (its lateness account counts them).
    pub fn paced(&self) -> bool {
        self.departure.is_some()
    }
}

/// The node's link: shape plus the two ports, shared by every stream of the node.
#[derive(Debug)]
pub struct Link {
    shape: RwLock<Shape>,
    pub egress: Port,
    pub ingress: Port,
    open_streams: AtomicUsize,
    /// Told of every change of the shape (kernel-paced links' rates follow it at once
    /// instead of polling for it).
    pub shape_changed: tokio::sync::Notify,
}

impl Link {
    pub fn new(shape: Shape) -> Arc<Link> {
        Arc::new(Link {
            egress: Port::new(Direction::Egress, &shape),
            ingress: Port::new(Direction::Ingress, &shape),
            shape: RwLock::new(shape),
            open_streams: AtomicUsize::new(0),
            shape_changed: tokio::sync::Notify::new(),
        })
    }

    pub fn shape(&self) -> Shape {
        *self.shape.read().unwrap_or_else(|e| e.into_inner())
    }

    /// Change the shape; waiting streams see it within a few ms (they ask again at least
    /// every [`MAX_WAIT`]). Only [`LeasedLink`] calls it.
    fn set_shape(&self, shape: Shape) {
        let mut cur = self.shape.write().unwrap_or_else(|e| e.into_inner());
        self.egress.apply(&shape);
        self.ingress.apply(&shape);
        *cur = shape;
        self.shape_changed.notify_one();
    }

    /// How far behind its schedule a backlogged stream may catch up, on both ports.
    pub fn set_catch_up(&self, catch_up: Duration) {
        self.egress.pacer.set_catch_up(catch_up);
        self.ingress.pacer.set_catch_up(catch_up);
    }

    /// Refresh the `current_rate` of both ports (called periodically by the agent).
    pub fn sample_rates(&self) {
        self.egress.sample();
        self.ingress.sample();
    }

    pub fn open_streams(&self) -> usize {
        self.open_streams.load(Ordering::Relaxed)
    }

    /// Count a stream as open until the returned guard is dropped.
    pub fn stream_opened(self: &Arc<Link>) -> StreamGuard {
        self.open_streams.fetch_add(1, Ordering::Relaxed);
        StreamGuard(self.clone())
    }
}

/// Keeps a stream counted in [`Link::open_streams`] while alive.
#[derive(Debug)]
pub struct StreamGuard(Arc<Link>);

impl Drop for StreamGuard {
    fn drop(&mut self) {
        self.0.open_streams.fetch_sub(1, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use throttle_proto::{Pct, Rate};

    fn shape(pct: &str, latency_us: u64) -> Shape {
        Shape::new(
            Pct::parse(pct).unwrap(),
            Rate::parse("1Gbit").unwrap(),
            latency_us,
        )
        .unwrap()
    }

    #[test]
    fn a_shape_reaches_both_pacers() {
        let link = Link::new(shape("50", 0));
        assert_eq!(link.egress.rate_limit(), Some(62.5e6));
        link.set_shape(shape("unlimited", 0));
        assert_eq!(link.ingress.rate_limit(), None);
        assert!(link.shape().pct().is_unlimited());
    }

    /// The bytes a delayed stream may hold come from the link (its rate, its capacity when
    /// unlimited), not from a unit hidden in the copy loop; without a delay, none.
    #[test]
    fn a_delayed_direction_holds_two_delays_of_its_link() {
        let link = Link::new(shape("unlimited", 10_000));
        // 1 Gbit/s capacity = 125 MB/s; two delays of 10 ms: 2.5 MB.
        assert_eq!(link.egress.window(), 2_500_000);
        assert_eq!(link.ingress.window(), 0);
        // At 10% (12.5 MB/s) two delays hold 250 kB: the floor of 1 MiB applies.
        link.set_shape(shape("10", 10_000));
        assert_eq!(link.egress.window(), 1 << 20);
        link.set_shape(shape("10", 0));
        assert_eq!(link.egress.window(), 0);
    }

    /// A release is due at its departure plus the delay, whichever made it wait; its
    /// lateness is counted from that moment.
    #[test]
    fn a_release_is_due_after_its_departure_and_the_delay() {
        let link = Link::new(shape("10", 10_000));
        let before = Instant::now();
        // 125 kB at 12.5 MB/s: 10 ms on the link, then 10 ms on the wire.
        let r = link.egress.schedule(125_000, Ready::Arrived(None));
        let due = r.due() - before;
        assert!(
            due >= Duration::from_millis(20) && due < Duration::from_millis(25),
            "{due:?}"
        );
        assert!(r.paced());
        let carried = link.egress.carry();
        assert!(!carried.paced());
        assert!(carried.due() >= before + Duration::from_millis(10));
        // Let go before it is due (the delay included), it is not late.
        assert!(link.egress.departed(&r) == Duration::ZERO);
        let unshaped = Release::now();
        assert!(unshaped.due() <= Instant::now());
    }

    #[test]
    fn latency_applies_to_egress_only() {
        let link = Link::new(shape("10", 250));
        assert_eq!(link.egress.delay(), Duration::from_micros(250));
        assert_eq!(link.ingress.delay(), Duration::ZERO);
    }
}
