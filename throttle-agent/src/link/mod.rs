//! The node's emulated interconnect link: what it allows, independent of how bytes move.
//!
//! A [`Link`] has a [`Shape`] (capacity, percentage, added latency) and two [`Port`]s,
//! egress and ingress, each with its own token bucket shared by every stream of the node.
//! The copy loop (`transport::pump`) only ever asks a port "how many bytes may pass now",
//! "how long must this chunk wait", and tells it what it moved. That is the seam: new
//! link behaviours change this module, never the copy loop (toxiproxy's lesson).

pub mod bucket;

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

pub use bucket::TokenBucket;

use crate::rate::Rate;

/// Largest added one-way latency accepted: 10 s. More is a typo.
pub const MAX_LATENCY_US: u64 = 10_000_000;
/// Smallest bandwidth percentage accepted. Below it a single 16 KiB grant would take
/// hours at the smallest capacities, which is a typo, not an experiment.
pub const MIN_PCT: f64 = 0.01;

/// What the link is set to. `pct = None` means unlimited (no shaping at all).
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct Shape {
    /// Percentage of capacity, from [`MIN_PCT`] to 100; `None` is unlimited.
    pub pct: Option<f64>,
    /// Link speed per direction in payload bytes per second.
    pub capacity: f64,
    /// Added one-way delay at egress, microseconds.
    pub latency_us: u64,
}

/// Why a requested shape was refused.
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum ShapeError {
    #[error("bandwidth percentage {0} is not allowed: give a number from 0.01 to 100, or `unlimited` to switch shaping off")]
    Pct(String),
    #[error("{0}")]
    Capacity(String),
    #[error("latency {0} us is too large: the maximum is {MAX_LATENCY_US} us (10 s)")]
    Latency(u64),
}

impl Shape {
    /// Check every field; this is the only way a shape reaches a link.
    pub fn validate(self) -> Result<Shape, ShapeError> {
        if let Some(p) = self.pct {
            if !(p.is_finite() && (MIN_PCT..=100.0).contains(&p)) {
                return Err(ShapeError::Pct(p.to_string()));
            }
        }
        Rate::from_bytes_per_sec(self.capacity).map_err(|e| ShapeError::Capacity(e.to_string()))?;
        if self.latency_us > MAX_LATENCY_US {
            return Err(ShapeError::Latency(self.latency_us));
        }
        Ok(self)
    }

    /// The rate each bucket runs at, `None` when unlimited.
    pub fn rate(&self) -> Option<f64> {
        self.pct.map(|p| self.capacity * p / 100.0)
    }

    pub fn latency(&self) -> Duration {
        Duration::from_micros(self.latency_us)
    }
}

/// Parse a user's percentage: a number from [`MIN_PCT`] to 100, or `unlimited`.
pub fn parse_pct(text: &str) -> Result<Option<f64>, ShapeError> {
    let t = text.trim().trim_end_matches('%');
    if t.eq_ignore_ascii_case("unlimited") || t.eq_ignore_ascii_case("off") {
        return Ok(None);
    }
    let p: f64 = t.parse().map_err(|_| ShapeError::Pct(text.to_string()))?;
    if !(p.is_finite() && (MIN_PCT..=100.0).contains(&p)) {
        return Err(ShapeError::Pct(text.to_string()));
    }
    Ok(Some(p))
}

/// Which way bytes cross the link.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Direction {
    Egress,
    Ingress,
}

/// One direction of the link: its bucket, its added delay, and its byte counters.
#[derive(Debug)]
pub struct Port {
    direction: Direction,
    bucket: TokenBucket,
    /// Added delay in microseconds (egress only; always 0 on ingress).
    delay_us: AtomicU64,
    bytes: AtomicU64,
    /// Recent rate in bytes/s as f64 bits, refreshed by [`Link::sample_rates`].
    rate_bits: AtomicU64,
    last_sample: RwLock<(Instant, u64)>,
}

impl Port {
    fn new(direction: Direction, shape: &Shape) -> Port {
        Port {
            direction,
            bucket: TokenBucket::new(shape.rate()),
            delay_us: AtomicU64::new(if direction == Direction::Egress {
                shape.latency_us
            } else {
                0
            }),
            bytes: AtomicU64::new(0),
            rate_bits: AtomicU64::new(0f64.to_bits()),
            last_sample: RwLock::new((Instant::now(), 0)),
        }
    }

    pub fn direction(&self) -> Direction {
        self.direction
    }

    /// Wait until up to `want` bytes may cross; returns how many may.
    pub async fn grant(&self, want: usize) -> usize {
        self.bucket.take(want).await
    }

    /// Return the part of a grant that was not used.
    pub fn refund(&self, bytes: usize) {
        self.bucket.refund(bytes)
    }

    /// How long a chunk leaving now must be held before it goes out.
    pub fn delay(&self) -> Duration {
        Duration::from_micros(self.delay_us.load(Ordering::Relaxed))
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

    /// The current bucket rate (`None`: unlimited).
    pub fn rate_limit(&self) -> Option<f64> {
        self.bucket.rate()
    }

    /// The largest single grant (one burst), so copy loops size their chunks by it.
    pub fn max_grant(&self) -> usize {
        self.bucket.max_grant()
    }

    fn apply(&self, shape: &Shape) {
        self.bucket.set_rate(shape.rate());
        if self.direction == Direction::Egress {
            self.delay_us.store(shape.latency_us, Ordering::Relaxed);
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

/// The node's link: shape plus the two ports, shared by every stream of the node.
#[derive(Debug)]
pub struct Link {
    shape: RwLock<Shape>,
    pub egress: Port,
    pub ingress: Port,
    open_streams: AtomicUsize,
}

impl Link {
    pub fn new(shape: Shape) -> Result<Arc<Link>, ShapeError> {
        let shape = shape.validate()?;
        Ok(Arc::new(Link {
            egress: Port::new(Direction::Egress, &shape),
            ingress: Port::new(Direction::Ingress, &shape),
            shape: RwLock::new(shape),
            open_streams: AtomicUsize::new(0),
        }))
    }

    pub fn shape(&self) -> Shape {
        *self.shape.read().unwrap_or_else(|e| e.into_inner())
    }

    /// Change the shape; open streams see it at their next grant (within a few ms).
    pub fn set_shape(&self, shape: Shape) -> Result<Shape, ShapeError> {
        let shape = shape.validate()?;
        let mut cur = self.shape.write().unwrap_or_else(|e| e.into_inner());
        self.egress.apply(&shape);
        self.ingress.apply(&shape);
        *cur = shape;
        Ok(shape)
    }

    /// Set the bucket depths of both ports: `burst` while traffic waits, `idle` for an
    /// idle link.
    pub fn set_burst(&self, burst: Duration, idle: Duration) {
        self.egress.bucket.set_burst(burst, idle);
        self.ingress.bucket.set_burst(burst, idle);
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

    fn shape(pct: Option<f64>) -> Shape {
        Shape {
            pct,
            capacity: 125e6,
            latency_us: 0,
        }
    }

    #[test]
    fn refuses_bad_percentages() {
        for p in [0.0, -1.0, 100.5, f64::NAN, f64::INFINITY, 1e-25, 0.009] {
            assert!(matches!(shape(Some(p)).validate(), Err(ShapeError::Pct(_))));
        }
        assert!(shape(Some(100.0)).validate().is_ok());
        assert!(shape(None).validate().is_ok());
    }

    #[test]
    fn refuses_bad_capacity_and_latency() {
        let mut s = shape(Some(50.0));
        s.capacity = -1.0;
        assert!(matches!(s.validate(), Err(ShapeError::Capacity(_))));
        s.capacity = 1e20;
        assert!(matches!(s.validate(), Err(ShapeError::Capacity(_))));
        let mut s = shape(Some(50.0));
        s.latency_us = MAX_LATENCY_US + 1;
        assert!(matches!(s.validate(), Err(ShapeError::Latency(_))));
    }

    #[test]
    fn parses_pct() {
        assert_eq!(parse_pct("50").unwrap(), Some(50.0));
        assert_eq!(parse_pct("32.5%").unwrap(), Some(32.5));
        assert_eq!(parse_pct("unlimited").unwrap(), None);
        assert_eq!(parse_pct("0.01").unwrap(), Some(0.01));
        for bad in ["0", "101", "-3", "NaN", "half", "inf", "1e-25", "0.001"] {
            assert!(parse_pct(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn rejected_shape_leaves_link_unchanged() {
        let link = Link::new(shape(Some(50.0))).unwrap();
        assert!(link.set_shape(shape(Some(0.0))).is_err());
        assert_eq!(link.shape().pct, Some(50.0));
        assert_eq!(link.egress.rate_limit(), Some(62.5e6));
    }

    #[test]
    fn latency_applies_to_egress_only() {
        let link = Link::new(Shape {
            pct: Some(10.0),
            capacity: 125e6,
            latency_us: 250,
        })
        .unwrap();
        assert_eq!(link.egress.delay(), Duration::from_micros(250));
        assert_eq!(link.ingress.delay(), Duration::ZERO);
    }
}
