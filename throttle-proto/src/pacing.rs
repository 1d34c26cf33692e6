//! A direction's pacing account: the one type the pacer keeps, the agent's status reports
//! and the controller's per-run proof is the difference of, with the rules that fill it
//! and the lateness cutoffs both sides judge by.

use std::time::Duration;

use serde::{Deserialize, Serialize};

/// Upper bounds (seconds) of the lateness histogram's buckets; a last +Inf is the total.
pub const LATE_BUCKETS: [f64; 7] = [10e-6, 50e-6, 100e-6, 500e-6, 1e-3, 10e-3, 100e-3];

/// A burst delivered later than this behind its schedule is a late burst: an agent that
/// could not run when its link needed it, as opposed to the tens of microseconds every
/// wake-up costs.
pub const LATE_BURST: Duration = Duration::from_millis(1);

/// A departure later than this (one of [`LATE_BUCKETS`]) is late: the pacing itself ran
/// behind.
pub const LATE_WAIT_SECONDS: f64 = 10e-3;

/// One direction's account of its pacing, since the agent started (counters only grow;
/// a run's share is the difference of two readings).
///
/// `busy_seconds` is the link time the pacer scheduled at the set rate: every unit's
/// size / rate; `backlog_seconds` the part of it for data that was already waiting behind
/// the previous unit (the link was backlogged). `lost_seconds` is link time such a backlog
/// lost for good because the agent fell further behind its schedule than its catch-up
/// window: while backlogged the link carried `backlog / (backlog + lost)` of its setting.
/// `behind_seconds` sums how late the last unit of each burst left, the delay the
/// messages they ended saw beyond the emulated link (the agent's own latency among it).
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct PacingStatus {
    pub busy_seconds: f64,
    #[serde(default)]
    pub backlog_seconds: f64,
    #[serde(default)]
    pub lost_seconds: f64,
    pub behind_seconds: f64,
    /// Bursts delivered more than 1 ms behind their schedule (an agent that could not run
    /// when its link needed it), and their lateness beyond that millisecond.
    #[serde(default)]
    pub late_bursts: u64,
    #[serde(default)]
    pub late_burst_seconds: f64,
    /// Departures a copy loop slept for.
    pub waits: u64,
    /// Their summed lateness past the departure time.
    pub late_seconds: f64,
    /// How many of them were late by at most `le` seconds (cumulative, ascending `le`; the
    /// total is `waits`).
    pub late_buckets: Vec<LateBucket>,
}

/// One bucket of [`PacingStatus::late_buckets`].
#[derive(Clone, Copy, Debug, Serialize, Deserialize, PartialEq)]
pub struct LateBucket {
    pub le: f64,
    pub count: u64,
}

impl PacingStatus {
    /// An empty account, with every bucket of [`LATE_BUCKETS`].
    pub fn new() -> PacingStatus {
        PacingStatus {
            late_buckets: LATE_BUCKETS
                .iter()
                .map(|&le| LateBucket { le, count: 0 })
                .collect(),
            ..PacingStatus::default()
        }
    }

    /// A burst ended `behind` its schedule.
    pub fn note_behind(&mut self, behind: Duration) {
        self.behind_seconds += behind.as_secs_f64();
        if let Some(beyond) = behind.checked_sub(LATE_BURST).filter(|b| !b.is_zero()) {
            self.late_bursts += 1;
            self.late_burst_seconds += beyond.as_secs_f64();
        }
    }

    /// A copy loop waited for a departure and let it go `late`.
    pub fn note_late(&mut self, late: Duration) {
        let s = late.as_secs_f64();
        self.waits += 1;
        self.late_seconds += s;
        for bucket in &mut self.late_buckets {
            if s <= bucket.le {
                bucket.count += 1;
            }
        }
    }

    /// Departures that left more than [`LATE_WAIT_SECONDS`] late (none when the account
    /// has no such bucket: an agent from before the histogram).
    pub fn late_waits(&self) -> u64 {
        let on_time = self
            .late_buckets
            .iter()
            .find(|b| (b.le - LATE_WAIT_SECONDS).abs() < 1e-9)
            .map_or(self.waits, |b| b.count);
        self.waits.saturating_sub(on_time)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_account_counts_late_bursts_and_late_departures_by_the_shared_cutoffs() {
        assert!(LATE_BUCKETS.contains(&LATE_WAIT_SECONDS));
        let mut a = PacingStatus::new();
        a.note_behind(Duration::from_micros(900));
        a.note_behind(Duration::from_millis(41));
        assert_eq!(a.late_bursts, 1);
        assert!((a.late_burst_seconds - 0.040).abs() < 1e-9);
        for us in [5, 60, 20_000] {
            a.note_late(Duration::from_micros(us));
        }
        assert_eq!(a.waits, 3);
        assert_eq!(a.late_waits(), 1, "one departure beyond 10 ms");
        assert_eq!(a.late_buckets[0].count, 1);
        assert_eq!(a.late_buckets[6].count, 3, "cumulative");
        assert_eq!(PacingStatus::default().late_waits(), 0);
    }
}
