//! The keys of the analysis's cells: a (size, bandwidth) point is looked up by its
//! bandwidth in thousandths of a percent, so that 33.333% and 33.3330001% are one cell.
//! A leaf: every other analysis module may use it, it uses none of them.

/// Bandwidth as a map key: thousandths of a percent.
pub type BwKey = u64;

/// The 100% baseline's key.
pub const FULL: BwKey = 100_000;

pub fn bw_key(bw_pct: f64) -> BwKey {
    (bw_pct * 1000.0).round() as BwKey
}

pub fn bw_of(key: BwKey) -> f64 {
    key as f64 / 1000.0
}
