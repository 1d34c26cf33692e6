//! The keys of the analysis's cells: a (size, bandwidth) point is looked up by its exact
//! setting ([`Pct`], thousandths of a percent), so that 33.333% and 33.3330001% are one
//! cell; an unlimited run is a run of the 100% baseline (the link's full speed).
//! A leaf: every other analysis module may use it, it uses none of them.

use throttle_proto::Pct;

/// A cell's bandwidth: a setting, never unlimited (see [`cell_bw`]).
pub type BwKey = Pct;

/// The 100% baseline's key.
pub const FULL: BwKey = Pct::FULL;

/// The lowest key: `(p, LOWEST)..(p, FULL)` are the throttled cells of size `p`.
pub const LOWEST: BwKey = Pct::LOWEST;

/// The cell a run at `bw` counts in.
pub fn cell_bw(bw: Pct) -> BwKey {
    if bw.is_unlimited() {
        FULL
    } else {
        bw
    }
}

/// A setting in percent, unlimited counted as 100 (the link's full speed): the one home
/// of that rule.
pub fn percent(key: BwKey) -> f64 {
    key.percent().unwrap_or(100.0)
}

/// A setting for tests: `pct(35.0)`.
#[cfg(test)]
pub fn pct(percent: f64) -> BwKey {
    Pct::new(percent).expect("a test's percentage")
}
