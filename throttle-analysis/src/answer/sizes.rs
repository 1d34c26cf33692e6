//! The sizes a program allows, as the sizes it was measured at show them.
//!
//! Many programs run on powers of two only (FFT, sorts, butterflies: NAS IS and FT,
//! Graph500's reference), others on square grids (Fox's matrix multiplication); a `next:`
//! that asks such a program for 11 processes asks for what cannot be run. Which rule a
//! series follows is read off the sizes it ran at (held out or not; a size whose runs all
//! failed is none: "Number of processes 3 is not a power of two"): three or more sizes
//! above one, all of them powers of two (or all squares, or both: powers of four), are
//! taken for the rule, and a size suggested to measure is one it allows and not one
//! measured. Fewer sizes say nothing: any size is suggested, as before.

use serde::Serialize;

/// Which sizes a program runs on, as far as its measured sizes show.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum SizeRule {
    #[default]
    Any,
    PowersOfTwo,
    Squares,
    /// Both powers of two and squares (4, 16, 64): which of the two the program needs
    /// is not known, so only sizes that are both.
    PowersOfFour,
}

/// How many sizes above one must follow a rule before it is taken for the program's.
pub const MIN_SIZES: usize = 3;

impl SizeRule {
    /// The rule the sizes a series ran at (`ran`) follow: powers of four where both
    /// powers of two and squares fit (4, 16, 64), else the one that fits.
    pub fn of(ran: &[u32]) -> SizeRule {
        let mut above: Vec<u32> = ran.iter().copied().filter(|&p| p > 1).collect();
        above.sort_unstable();
        above.dedup();
        if above.len() < MIN_SIZES {
            return SizeRule::Any;
        }
        let fits = |rule: SizeRule| above.iter().all(|&p| rule.allows(p));
        match (fits(SizeRule::PowersOfTwo), fits(SizeRule::Squares)) {
            (true, true) => SizeRule::PowersOfFour,
            (true, false) => SizeRule::PowersOfTwo,
            (false, true) => SizeRule::Squares,
            (false, false) => SizeRule::Any,
        }
    }

    /// Whether the rule allows `p` processes.
    pub fn allows(self, p: u32) -> bool {
        match self {
            SizeRule::Any => true,
            SizeRule::PowersOfTwo => p.is_power_of_two(),
            SizeRule::Squares => {
                let r = (p as f64).sqrt().round() as u32;
                r.checked_mul(r) == Some(p)
            }
            SizeRule::PowersOfFour => {
                SizeRule::PowersOfTwo.allows(p) && SizeRule::Squares.allows(p)
            }
        }
    }

    /// The smallest allowed size above `p`, none past `u32::MAX`.
    fn next(self, p: u32) -> Option<u32> {
        let q = p.checked_add(1)?;
        match self {
            SizeRule::Any => Some(q),
            SizeRule::PowersOfTwo => q.checked_next_power_of_two(),
            SizeRule::Squares => {
                let mut r = (q as f64).sqrt() as u32;
                while r.checked_mul(r)? < q {
                    r += 1;
                }
                r.checked_mul(r)
            }
            SizeRule::PowersOfFour => {
                let mut n = q.checked_next_power_of_two()?;
                while !SizeRule::Squares.allows(n) {
                    n = n.checked_mul(2)?;
                }
                Some(n)
            }
        }
    }

    /// The allowed size strictly between `low` and `high` nearest to their midpoint in
    /// log (where one more measured size halves the doublings projected), none of
    /// `taken`; `None` when there is none.
    pub fn between(self, low: u32, high: u32, taken: &[u32]) -> Option<u32> {
        if high <= low.saturating_add(1) {
            return None;
        }
        let mid = ((low as f64) * (high as f64)).sqrt().ln();
        let candidates: Box<dyn Iterator<Item = u32>> = match self {
            SizeRule::Any => {
                let m = mid.exp().round() as u32;
                Box::new([m, m.saturating_sub(1), m.saturating_add(1)].into_iter())
            }
            SizeRule::PowersOfTwo => Box::new((0..32).map(|k| 1u32 << k)),
            SizeRule::Squares => Box::new((1..=65_535u32).map(|r| r * r)),
            SizeRule::PowersOfFour => Box::new((0..16).map(|k| 1u32 << (2 * k))),
        };
        candidates
            .filter(|&p| p > low && p < high && !taken.contains(&p))
            .min_by(|&a, &b| {
                ((a as f64).ln() - mid)
                    .abs()
                    .total_cmp(&((b as f64).ln() - mid).abs())
                    .then(a.cmp(&b))
            })
    }

    /// The next `count` allowed sizes above `p`, none of `taken` (fewer near `u32::MAX`).
    pub fn next_above(self, p: u32, count: usize, taken: &[u32]) -> Vec<u32> {
        let mut out = Vec::new();
        let mut at = p;
        while out.len() < count {
            let Some(q) = self.next(at) else { break };
            if !taken.contains(&q) {
                out.push(q);
            }
            at = q;
        }
        out
    }

    /// The rule in words, for a sentence; `None` for any size.
    pub fn words(self) -> Option<&'static str> {
        match self {
            SizeRule::Any => None,
            SizeRule::PowersOfTwo => Some("powers of two"),
            SizeRule::Squares => Some("squares"),
            SizeRule::PowersOfFour => Some("powers of four (powers of two and squares)"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::SizeRule::{self, *};

    #[test]
    fn the_rule_is_read_off_three_sizes_or_more() {
        assert_eq!(SizeRule::of(&[1, 2, 4, 8]), PowersOfTwo);
        assert_eq!(SizeRule::of(&[4, 9, 16, 25]), Squares);
        // Both rules fit: only sizes both allow.
        assert_eq!(SizeRule::of(&[4, 16, 64]), PowersOfFour);
        assert!(matches!(
            PowersOfFour.between(16, 1024, &[]),
            Some(64) | Some(256)
        ));
        assert_eq!(PowersOfFour.between(16, 64, &[]), None);
        assert_eq!(SizeRule::of(&[2, 3, 4, 6, 8]), Any);
        // Two sizes above one say nothing.
        assert_eq!(SizeRule::of(&[1, 2, 4]), Any);
    }

    #[test]
    fn a_size_suggested_is_one_the_rule_allows_and_not_measured() {
        // 16 and 32 lie as far from the midpoint (in log): the smaller.
        assert_eq!(PowersOfTwo.between(8, 64, &[]), Some(16));
        assert_eq!(PowersOfTwo.between(8, 128, &[]), Some(32));
        assert_eq!(PowersOfTwo.between(8, 16, &[]), None);
        assert_eq!(PowersOfTwo.between(8, 64, &[16, 32]), None);
        assert_eq!(Squares.between(16, 64, &[]), Some(36));
        assert_eq!(Squares.between(16, 25, &[]), None);
        assert_eq!(Any.between(8, 16, &[]), Some(11));
        assert_eq!(Any.between(8, 9, &[]), None);
        assert_eq!(PowersOfTwo.next_above(8, 2, &[]), vec![16, 32]);
        assert_eq!(PowersOfTwo.next_above(8, 2, &[16]), vec![32, 64]);
        assert_eq!(Squares.next_above(16, 2, &[]), vec![25, 36]);
        assert_eq!(PowersOfFour.next_above(16, 2, &[]), vec![64, 256]);
        // Near the top of u32: fewer, at once (a hostile store's procs reach here).
        assert_eq!(PowersOfTwo.next_above(1 << 31, 2, &[]), Vec::<u32>::new());
        assert_eq!(
            Squares.next_above(65_535 * 65_535, 2, &[]),
            Vec::<u32>::new()
        );
        assert_eq!(Any.next_above(u32::MAX - 1, 2, &[]), vec![u32::MAX]);
    }
}
