//! The node's emulated interconnect link: what it allows, independent of how bytes move.
//!
//! A [`Link`] has a [`Shape`] (capacity, percentage, added latency; the type, valid by
//! construction, is `throttle_proto::shape`) and two [`Port`]s,
//! egress and ingress, each with its own token bucket shared by every stream of the node.
//! The copy loop (`transport::pump`) only ever asks a port "how many bytes may pass now",
//! "how long must this chunk wait", and tells it what it moved. That is the seam: new
//! link behaviours change this module, never the copy loop (toxiproxy's lesson).

pub mod bucket;

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant};

pub use bucket::TokenBucket;

pub use throttle_proto::shape::{Shape, MAX_LATENCY_US};

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
                shape.latency_us()
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

/// The node's link: shape plus the two ports, shared by every stream of the node.
#[derive(Debug)]
pub struct Link {
    shape: RwLock<Shape>,
    pub egress: Port,
    pub ingress: Port,
    open_streams: AtomicUsize,
}

impl Link {
    pub fn new(shape: Shape) -> Arc<Link> {
        Arc::new(Link {
            egress: Port::new(Direction::Egress, &shape),
            ingress: Port::new(Direction::Ingress, &shape),
            shape: RwLock::new(shape),
            open_streams: AtomicUsize::new(0),
        })
    }

    pub fn shape(&self) -> Shape {
        *self.shape.read().unwrap_or_else(|e| e.into_inner())
    }

    /// Change the shape; open streams see it at their next grant (within a few ms).
    pub fn set_shape(&self, shape: Shape) {
        let mut cur = self.shape.write().unwrap_or_else(|e| e.into_inner());
        self.egress.apply(&shape);
        self.ingress.apply(&shape);
        *cur = shape;
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
    fn a_shape_reaches_both_buckets() {
        let link = Link::new(shape("50", 0));
        assert_eq!(link.egress.rate_limit(), Some(62.5e6));
        link.set_shape(shape("unlimited", 0));
        assert_eq!(link.ingress.rate_limit(), None);
        assert!(link.shape().pct().is_unlimited());
    }

    #[test]
    fn latency_applies_to_egress_only() {
        let link = Link::new(shape("10", 250));
        assert_eq!(link.egress.delay(), Duration::from_micros(250));
        assert_eq!(link.ingress.delay(), Duration::ZERO);
    }
}
