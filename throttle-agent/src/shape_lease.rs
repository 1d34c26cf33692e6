//! A shape that holds only while its controller renews it.
//!
//! A run sets the bandwidth it measures at; if its controller is killed outright
//! (SIGKILL, a lost host), nothing would put the node's link back, and the next user
//! would find it at 10%. A `PUT /shape` with `lease_s` holds for that long unless renewed
//! (`POST /shape/renew`, which changes nothing else: the pacer is not reset); when it runs
//! out the agent goes back to the shape the first leased change replaced. A change without
//! a lease (`throttle-ctl set`, a run's end putting the old shape back) ends the lease.

use std::sync::Mutex;
use std::time::{Duration, Instant};

use throttle_proto::shape::Shape;

use crate::link::Link;

/// Shortest and longest lease a change may ask for.
pub const MIN_LEASE: Duration = Duration::from_secs(1);
pub const MAX_LEASE: Duration = Duration::from_secs(86400);

#[derive(Debug)]
struct Held {
    /// What the link goes back to when the lease runs out.
    fallback: Shape,
    lease: Duration,
    until: Instant,
}

/// The lease on the link's current shape, if it has one.
#[derive(Debug, Default)]
pub struct ShapeLease(Mutex<Option<Held>>);

impl ShapeLease {
    fn held(&self) -> std::sync::MutexGuard<'_, Option<Held>> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Change `link`'s shape to what `change` makes of the current one: with `lease`, the
    /// new shape holds that long (then back to the shape before, or to what an earlier
    /// lease would have gone back to); without, any lease ends. Under the lease's lock,
    /// so that a lease running out meanwhile cannot put an older shape over the new one.
    /// The shapes before and after.
    pub fn change<E>(
        &self,
        link: &Link,
        change: impl FnOnce(Shape) -> Result<Shape, E>,
        lease: Option<Duration>,
    ) -> Result<(Shape, Shape), E> {
        let mut held = self.held();
        let before = link.shape();
        let after = change(before)?;
        link.set_shape(after);
        *held = lease.map(|lease| Held {
            fallback: held.as_ref().map_or(before, |h| h.fallback),
            lease,
            until: Instant::now() + lease,
        });
        Ok((before, after))
    }

    /// Renew the lease for its whole length again; the time it now has, or `None` when
    /// there is none to renew.
    pub fn renew(&self) -> Option<Duration> {
        let mut held = self.held();
        let h = held.as_mut()?;
        h.until = Instant::now() + h.lease;
        Some(h.lease)
    }

    /// The time left, when the shape is leased.
    pub fn left(&self) -> Option<Duration> {
        self.held()
            .as_ref()
            .map(|h| h.until.saturating_duration_since(Instant::now()))
    }

    /// When the lease ran out: put `link` back to the shape before it (the lease ends
    /// here); that shape.
    pub fn expire(&self, link: &Link) -> Option<Shape> {
        let mut held = self.held();
        match held.as_ref() {
            Some(h) if Instant::now() >= h.until => {
                let back = held.take().map(|h| h.fallback)?;
                link.set_shape(back);
                Some(back)
            }
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use throttle_proto::{Pct, Rate};

    fn at(pct: &str) -> Shape {
        Shape::new(Pct::parse(pct).unwrap(), Rate::parse("1Gbit").unwrap(), 0).unwrap()
    }

    #[test]
    fn a_lease_runs_out_to_the_shape_before_the_first_leased_change() {
        let link = Link::new(at("100"));
        let l = ShapeLease::default();
        let set = |pct: &str, lease: Option<u64>| {
            l.change(
                &link,
                |_| Ok::<_, ()>(at(pct)),
                lease.map(Duration::from_millis),
            )
            .unwrap()
        };
        assert!(l.renew().is_none(), "nothing to renew");
        set("20", Some(40));
        // A second leased change (the next step of a sweep) keeps the first fallback.
        set("10", Some(40));
        assert!(l.expire(&link).is_none());
        std::thread::sleep(Duration::from_millis(25));
        assert_eq!(l.renew(), Some(Duration::from_millis(40)));
        std::thread::sleep(Duration::from_millis(25));
        assert!(l.expire(&link).is_none(), "renewed");
        assert_eq!(link.shape(), at("10"));
        std::thread::sleep(Duration::from_millis(30));
        assert_eq!(l.expire(&link), Some(at("100")));
        assert_eq!(link.shape(), at("100"), "the link is back");
        assert!(l.expire(&link).is_none() && l.left().is_none(), "once");
        // A change without a lease ends it.
        set("30", Some(10));
        set("40", None);
        std::thread::sleep(Duration::from_millis(20));
        assert!(l.expire(&link).is_none());
        assert_eq!(link.shape(), at("40"));
    }
}
