//! What a node's link is set to: a bandwidth percentage, a capacity, an added latency.
//!
//! A [`Shape`] can only be made valid ([`Shape::new`], or deserialized, which checks the
//! same), so the agent never range-checks one again. A [`ShapeChange`] is the body of
//! `PUT /shape`: the fields to change, each already typed.

use serde::{Deserialize, Serialize};

use crate::durations::Lease;
use crate::pct::Pct;
use crate::rate::Rate;

/// Largest added one-way latency accepted: 10 s. More is a typo.
pub const MAX_LATENCY_US: u64 = 10_000_000;

/// A valid link setting.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(try_from = "RawShape")]
pub struct Shape {
    pct: Pct,
    capacity: Rate,
    latency_us: u64,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawShape {
    pct: Pct,
    capacity: Rate,
    latency_us: u64,
}

impl TryFrom<RawShape> for Shape {
    type Error = ShapeError;
    fn try_from(r: RawShape) -> Result<Shape, ShapeError> {
        Shape::new(r.pct, r.capacity, r.latency_us)
    }
}

/// Why a setting was refused.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum ShapeError {
    #[error("latency {0} us is too large: the maximum is {MAX_LATENCY_US} us (10 s)")]
    Latency(u64),
}

impl Shape {
    pub fn new(pct: Pct, capacity: Rate, latency_us: u64) -> Result<Shape, ShapeError> {
        if latency_us > MAX_LATENCY_US {
            return Err(ShapeError::Latency(latency_us));
        }
        Ok(Shape {
            pct,
            capacity,
            latency_us,
        })
    }

    pub fn pct(&self) -> Pct {
        self.pct
    }

    pub fn capacity(&self) -> Rate {
        self.capacity
    }

    pub fn latency_us(&self) -> u64 {
        self.latency_us
    }

    pub fn latency(&self) -> std::time::Duration {
        std::time::Duration::from_micros(self.latency_us)
    }

    /// The rate each direction runs at, bytes/s; `None` when unlimited.
    pub fn rate(&self) -> Option<f64> {
        self.pct.of(self.capacity.bytes_per_sec())
    }
}

/// The body of `PUT /shape`: what to change (absent fields stay as they are).
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ShapeChange {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pct: Option<Pct>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub capacity: Option<Rate>,
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "latency"
    )]
    pub latency_us: Option<u64>,
    /// Seconds the new shape holds unless renewed (`POST /shape/renew`); then the agent
    /// goes back to the shape before. Absent: the shape holds until changed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lease_s: Option<Lease>,
}

fn latency<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<u64>, D::Error> {
    let v = serde_json::Value::deserialize(d)?;
    match v.as_u64() {
        Some(l) => Ok(Some(l)),
        None => Err(serde::de::Error::custom(format!(
            "`latency_us` must be a whole number of microseconds from 0 to {MAX_LATENCY_US}, not {v}"
        ))),
    }
}

impl ShapeChange {
    /// `current` with this change applied, checked.
    pub fn apply(&self, current: Shape) -> Result<Shape, ShapeError> {
        Shape::new(
            self.pct.unwrap_or(current.pct),
            self.capacity.unwrap_or(current.capacity),
            self.latency_us.unwrap_or(current.latency_us),
        )
    }

    pub fn is_empty(&self) -> bool {
        ShapeChange {
            lease_s: None,
            ..*self
        } == ShapeChange::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_valid_shapes_exist() {
        let cap = Rate::parse("1Gbit").unwrap();
        let s = Shape::new(Pct::parse("50").unwrap(), cap, 0).unwrap();
        assert_eq!(s.rate(), Some(62.5e6));
        assert!(Shape::new(Pct::FULL, cap, MAX_LATENCY_US + 1).is_err());
        let json = serde_json::to_string(&s).unwrap();
        assert_eq!(serde_json::from_str::<Shape>(&json).unwrap(), s);
        assert!(serde_json::from_str::<Shape>(
            r#"{"pct":50,"capacity":125000000,"latency_us":20000000}"#
        )
        .is_err());
    }

    #[test]
    fn changes_apply_field_by_field() {
        let cap = Rate::parse("1Gbit").unwrap();
        let s = Shape::new(Pct::FULL, cap, 10).unwrap();
        let c: ShapeChange = serde_json::from_str(r#"{"pct": "unlimited"}"#).unwrap();
        let t = c.apply(s).unwrap();
        assert!(t.pct().is_unlimited());
        assert_eq!(t.latency_us(), 10);
        for bad in [
            r#"{"pct": 0}"#,
            r#"{"capacity": "fast"}"#,
            r#"{"latency_us": -1}"#,
            r#"{"colour": 1}"#,
        ] {
            assert!(serde_json::from_str::<ShapeChange>(bad).is_err(), "{bad}");
        }
    }
}
