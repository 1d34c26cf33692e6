//! A lease as the agent keeps it: one type for everything a controller holds on this node,
//! a job (`launch::jobs`) and a link's shape (`link::lease`). It holds for its length
//! from when it was taken or last renewed; past that it has run out, and what it held goes
//! back (the job is killed, the shape returns). Every method takes the time, so that a
//! test can walk a lease through time without sleeping.

use std::time::{Duration, Instant};

/// A lease of `length`, held until a time that each renewal moves.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LeaseTerm {
    length: Duration,
    until: Instant,
}

impl LeaseTerm {
    /// A lease of `length` taken at `now`.
    pub fn new(length: Duration, now: Instant) -> LeaseTerm {
        LeaseTerm {
            length,
            until: now + length,
        }
    }

    /// Renewed at `now`: it holds its whole length again from then.
    pub fn renew(&mut self, now: Instant) {
        self.until = now + self.length;
    }

    /// The time left at `now` (zero once it ran out).
    pub fn left(&self, now: Instant) -> Duration {
        self.until.saturating_duration_since(now)
    }

    /// Whether it ran out by `now`.
    pub fn ran_out(&self, now: Instant) -> bool {
        now >= self.until
    }

    /// Its length: how long it holds without a renewal.
    pub fn length(&self) -> Duration {
        self.length
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_renewal_moves_the_end_by_the_whole_length() {
        let t0 = Instant::now();
        let ms = Duration::from_millis;
        let mut l = LeaseTerm::new(ms(40), t0);
        assert_eq!(l.left(t0 + ms(10)), ms(30));
        l.renew(t0 + ms(25));
        assert!(!l.ran_out(t0 + ms(64)), "renewed at 25: until 65");
        assert!(l.ran_out(t0 + ms(65)));
        assert_eq!(l.left(t0 + ms(90)), Duration::ZERO);
        assert_eq!(l.length(), ms(40));
    }
}
