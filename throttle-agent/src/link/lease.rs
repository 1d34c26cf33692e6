//! The one door to a link's shape: every change (the API's, a lease running out, the
//! operator's SIGHUP) goes through [`LeasedLink`], under one lock.
//!
//! A run sets the bandwidth it measures at; if its controller is killed outright
//! (SIGKILL, a lost host), nothing would put the node's link back, and the next user
//! would find it at 10%. A `PUT /shape` with `lease_s` holds for that long unless renewed
//! (`POST /shape/renew`, which changes nothing else: the pacer is not reset); when it runs
//! out, or the controller releases it (`POST /shape/release`), the agent goes back to the
//! shape the first leased change replaced. A change without a lease (`throttle-ctl set`)
//! ends the lease.
//!
//! The operator's shape (the agent's settings, re-read on SIGHUP) is the link's resting
//! shape: reloaded while no lease holds, it applies at once; reloaded during a leased run,
//! the run keeps the shape it measures at and the reloaded one is what the lease goes back
//! to. Before this type, the reload set the link directly and the lease's end put the old
//! shape back over it.
//!
//! `Link::set_shape` is private to `link/`: outside it, a link's shape can only be read.

use std::ops::Deref;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use super::{Link, Shape};
use crate::lease::LeaseTerm;

#[derive(Debug)]
struct Held {
    /// What the link goes back to when the lease ends.
    fallback: Shape,
    term: LeaseTerm,
}

/// A node's link and the lease on its current shape, if it has one. Reads of the link
/// (its ports, its shape) go through [`Deref`]; changes only through the methods here.
#[derive(Debug)]
pub struct LeasedLink {
    link: Arc<Link>,
    held: Mutex<Option<Held>>,
}

/// What a SIGHUP's reloaded shape did.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Reloaded {
    /// Applied at once; the shape it replaced.
    Now { was: Shape },
    /// A leased run holds the link for this long at most: the reloaded shape applies when
    /// its lease ends.
    WhenTheLeaseEnds { left: Duration },
}

impl Deref for LeasedLink {
    type Target = Arc<Link>;
    fn deref(&self) -> &Arc<Link> {
        &self.link
    }
}

impl LeasedLink {
    pub fn new(link: Arc<Link>) -> LeasedLink {
        LeasedLink {
            link,
            held: Mutex::new(None),
        }
    }

    fn held(&self) -> MutexGuard<'_, Option<Held>> {
        self.held.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Set `shape` without a lease (any lease ends); the shape before.
    pub fn set(&self, shape: Shape) -> Shape {
        let set = self.change(|_| Ok::<_, std::convert::Infallible>(shape), None);
        match set {
            Ok((before, _)) => before,
            Err(never) => match never {},
        }
    }

    /// Change the shape to what `change` makes of the current one: with `lease`, the new
    /// shape holds that long (then back to the shape before, or to what an earlier lease
    /// would have gone back to); without, any lease ends. The shapes before and after.
    pub fn change<E>(
        &self,
        change: impl FnOnce(Shape) -> Result<Shape, E>,
        lease: Option<Duration>,
    ) -> Result<(Shape, Shape), E> {
        self.change_at(Instant::now(), change, lease)
    }

    fn change_at<E>(
        &self,
        now: Instant,
        change: impl FnOnce(Shape) -> Result<Shape, E>,
        lease: Option<Duration>,
    ) -> Result<(Shape, Shape), E> {
        let mut held = self.held();
        let before = self.link.shape();
        let after = change(before)?;
        self.link.set_shape(after);
        *held = lease.map(|lease| Held {
            fallback: held.as_ref().map_or(before, |h| h.fallback),
            term: LeaseTerm::new(lease, now),
        });
        Ok((before, after))
    }

    /// Renew the lease for its whole length again; the time it now has, or `None` when
    /// there is none to renew.
    pub fn renew(&self) -> Option<Duration> {
        self.renew_at(Instant::now())
    }

    fn renew_at(&self, now: Instant) -> Option<Duration> {
        let mut held = self.held();
        let h = held.as_mut()?;
        h.term.renew(now);
        Some(h.term.length())
    }

    /// The time left, when the shape is leased.
    pub fn left(&self) -> Option<Duration> {
        self.left_at(Instant::now())
    }

    fn left_at(&self, now: Instant) -> Option<Duration> {
        self.held().as_ref().map(|h| h.term.left(now))
    }

    /// When the lease ran out: put the shape before it back (the lease ends here); that
    /// shape.
    pub fn expire(&self) -> Option<Shape> {
        self.expire_at(Instant::now())
    }

    fn expire_at(&self, now: Instant) -> Option<Shape> {
        let mut held = self.held();
        match held.as_ref() {
            Some(h) if h.term.ran_out(now) => self.end(&mut held),
            _ => None,
        }
    }

    /// End the lease now (the run is over): the shape before it is back; that shape, or
    /// `None` when no lease held (the run set none, or it had run out).
    pub fn release(&self) -> Option<Shape> {
        let mut held = self.held();
        self.end(&mut held)
    }

    fn end(&self, held: &mut MutexGuard<'_, Option<Held>>) -> Option<Shape> {
        let back = held.take()?.fallback;
        self.link.set_shape(back);
        Some(back)
    }

    /// The operator's settings were re-read: `shape` is the link's resting shape now.
    pub fn reload(&self, shape: Shape) -> Reloaded {
        self.reload_at(Instant::now(), shape)
    }

    fn reload_at(&self, now: Instant, shape: Shape) -> Reloaded {
        let mut held = self.held();
        match held.as_mut() {
            Some(h) => {
                h.fallback = shape;
                Reloaded::WhenTheLeaseEnds {
                    left: h.term.left(now),
                }
            }
            None => {
                let was = self.link.shape();
                self.link.set_shape(shape);
                Reloaded::Now { was }
            }
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

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    /// The clock is the test's: no sleep, so no load can make it flaky.
    #[test]
    fn a_lease_runs_out_to_the_shape_before_the_first_leased_change() {
        let l = LeasedLink::new(Link::new(at("100")));
        let t0 = Instant::now();
        let set = |t: u64, pct: &str, lease: Option<u64>| {
            l.change_at(t0 + ms(t), |_| Ok::<_, ()>(at(pct)), lease.map(ms))
                .unwrap()
        };
        assert!(l.renew_at(t0).is_none(), "nothing to renew");
        set(0, "20", Some(40));
        // A second leased change (the next step of a sweep) keeps the first fallback.
        set(0, "10", Some(40));
        assert!(l.expire_at(t0 + ms(25)).is_none());
        assert_eq!(l.renew_at(t0 + ms(25)), Some(ms(40)));
        assert!(
            l.expire_at(t0 + ms(50)).is_none(),
            "renewed at 25: until 65"
        );
        assert_eq!(l.shape(), at("10"));
        assert_eq!(l.left_at(t0 + ms(50)), Some(ms(15)));
        assert_eq!(l.expire_at(t0 + ms(65)), Some(at("100")));
        assert_eq!(l.shape(), at("100"), "the link is back");
        assert!(
            l.expire_at(t0 + ms(100)).is_none() && l.left().is_none(),
            "once"
        );
        // A change without a lease ends it.
        set(100, "30", Some(10));
        set(100, "40", None);
        assert!(l.expire_at(t0 + ms(200)).is_none());
        assert_eq!(l.shape(), at("40"));
    }

    #[test]
    fn a_release_puts_the_shape_before_back_at_once() {
        let l = LeasedLink::new(Link::new(at("100")));
        assert_eq!(l.release(), None, "no lease, nothing changes");
        l.change(|_| Ok::<_, ()>(at("20")), Some(Duration::from_secs(60)))
            .unwrap();
        assert_eq!(l.release(), Some(at("100")));
        assert_eq!(l.shape(), at("100"));
        assert!(l.left().is_none());
    }

    #[test]
    fn a_reload_during_a_leased_run_is_what_the_lease_goes_back_to() {
        let l = LeasedLink::new(Link::new(at("100")));
        let t0 = Instant::now();
        // No lease: at once.
        assert_eq!(l.reload_at(t0, at("90")), Reloaded::Now { was: at("100") });
        assert_eq!(l.shape(), at("90"));
        // A run holds the link: it keeps its shape, and the reload is not undone when
        // the lease runs out...
        l.change_at(t0, |_| Ok::<_, ()>(at("20")), Some(ms(40)))
            .unwrap();
        assert_eq!(
            l.reload_at(t0 + ms(10), at("80")),
            Reloaded::WhenTheLeaseEnds { left: ms(30) }
        );
        assert_eq!(l.shape(), at("20"), "the run measures at its own shape");
        assert_eq!(l.expire_at(t0 + ms(40)), Some(at("80")));
        assert_eq!(l.shape(), at("80"));
        // ...nor when the run releases it.
        l.change_at(t0, |_| Ok::<_, ()>(at("20")), Some(ms(40)))
            .unwrap();
        l.reload_at(t0, at("70"));
        assert_eq!(l.release(), Some(at("70")));
        assert_eq!(l.shape(), at("70"));
    }
}
