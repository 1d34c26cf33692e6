//! A bandwidth setting: a percentage of the link's capacity, or no shaping at all.
//!
//! One type from the command line to the bucket: `throttle-ctl set 30`, `run --bw 30`, a
//! sweep's steps, `PUT /shape {"pct": 30}` and the status all carry a [`Pct`], validated
//! once where it enters (parse or deserialize) and never range-checked again.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// Smallest percentage accepted. Below it even one packet takes seconds to minutes at the
/// smaller capacities: a typo, not an experiment.
pub const MIN_PCT: f64 = 0.01;

/// Thousandths of a percent in one percent: the resolution a setting is kept at.
pub const STEPS_PER_PCT: u32 = 1000;

/// A percentage of the link in [`MIN_PCT`]..=100, or unlimited (no shaping), held exactly
/// as a count of thousandths of a percent: `33.333` and `33.3330001` are one setting, a
/// setting is its own map key (`Eq`, `Ord`, `Hash`), and unlimited orders above 100%.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Pct(Option<u32>);

/// Why a percentage was refused; the message says what to write instead.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
#[error("bandwidth percentage `{0}` is not allowed: give a number from 0.01 to 100 (`30`, `32.5%`), or `unlimited` (`off`) to switch shaping off")]
pub struct PctError(String);

impl Pct {
    /// No shaping.
    pub const UNLIMITED: Pct = Pct(None);
    /// The whole link (shaped at its capacity).
    pub const FULL: Pct = Pct(Some(100 * STEPS_PER_PCT));
    /// The lowest setting, [`MIN_PCT`].
    pub const LOWEST: Pct = Pct(Some(STEPS_PER_PCT / 100));

    /// `percent` of the link, checked, to the nearest thousandth of a percent.
    pub fn new(percent: f64) -> Result<Pct, PctError> {
        if percent.is_finite() && (MIN_PCT..=100.0).contains(&percent) {
            Ok(Pct(Some(
                (percent * f64::from(STEPS_PER_PCT)).round() as u32
            )))
        } else {
            Err(PctError(percent.to_string()))
        }
    }

    /// The setting `thousandths` thousandths of a percent stands for (a stored key).
    pub fn from_thousandths(thousandths: u32) -> Result<Pct, PctError> {
        Pct::new(f64::from(thousandths) / f64::from(STEPS_PER_PCT))
            .map_err(|_| PctError(format!("{thousandths} thousandths")))
    }

    /// Parse `30`, `32.5%`, `unlimited` (or `off`), in any case: the one grammar of
    /// flags, sweep files, the API and CSV.
    pub fn parse(text: &str) -> Result<Pct, PctError> {
        let t = text.trim().trim_end_matches('%').trim();
        if t.eq_ignore_ascii_case("unlimited") || t.eq_ignore_ascii_case("off") {
            return Ok(Pct::UNLIMITED);
        }
        let p: f64 = t.parse().map_err(|_| PctError(text.to_string()))?;
        Pct::new(p).map_err(|_| PctError(text.to_string()))
    }

    /// The percentage, `None` when unlimited.
    pub fn percent(self) -> Option<f64> {
        self.0.map(|t| f64::from(t) / f64::from(STEPS_PER_PCT))
    }

    /// The setting in thousandths of a percent, `None` when unlimited.
    pub fn thousandths(self) -> Option<u32> {
        self.0
    }

    pub fn is_unlimited(self) -> bool {
        self.0.is_none()
    }

    /// The rate this setting allows on a link of `capacity` bytes/s (`None`: unlimited).
    pub fn of(self, capacity: f64) -> Option<f64> {
        self.percent().map(|p| capacity * p / 100.0)
    }
}

/// By bandwidth: unlimited is above every percentage.
impl Ord for Pct {
    fn cmp(&self, other: &Pct) -> std::cmp::Ordering {
        match (self.0, other.0) {
            (Some(a), Some(b)) => a.cmp(&b),
            (Some(_), None) => std::cmp::Ordering::Less,
            (None, Some(_)) => std::cmp::Ordering::Greater,
            (None, None) => std::cmp::Ordering::Equal,
        }
    }
}

impl PartialOrd for Pct {
    fn partial_cmp(&self, other: &Pct) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl fmt::Display for Pct {
    /// `30%`, `32.5%`, `unlimited`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.percent() {
            Some(p) => write!(f, "{p}%"),
            None => f.write_str("unlimited"),
        }
    }
}

impl FromStr for Pct {
    type Err = PctError;
    fn from_str(s: &str) -> Result<Pct, PctError> {
        Pct::parse(s)
    }
}

/// On the wire: a number, or the string `"unlimited"`.
impl Serialize for Pct {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self.percent() {
            Some(p) => s.serialize_f64(p),
            None => s.serialize_str("unlimited"),
        }
    }
}

impl<'de> Deserialize<'de> for Pct {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Pct, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Either {
            Number(f64),
            Text(String),
        }
        match Either::deserialize(d).map_err(|_| {
            serde::de::Error::custom(
                "`pct` must be a number from 0.01 to 100 or the string \"unlimited\"",
            )
        })? {
            Either::Number(n) => Pct::new(n),
            Either::Text(t) => Pct::parse(&t),
        }
        .map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_and_refuses() {
        assert_eq!(Pct::parse("50").unwrap().percent(), Some(50.0));
        assert_eq!(Pct::parse("32.5%").unwrap().percent(), Some(32.5));
        assert_eq!(Pct::parse("0.01").unwrap().percent(), Some(0.01));
        assert!(Pct::parse("unlimited").unwrap().is_unlimited());
        assert!(Pct::parse("OFF").unwrap().is_unlimited());
        for bad in ["0", "101", "-3", "NaN", "half", "inf", "1e-25", "0.001", ""] {
            let e = Pct::parse(bad).unwrap_err();
            assert!(e.to_string().contains("0.01 to 100"), "{bad}: {e}");
        }
    }

    #[test]
    fn travels_as_a_number_or_unlimited() {
        let p: Pct = serde_json::from_str("30").unwrap();
        assert_eq!(serde_json::to_string(&p).unwrap(), "30.0");
        let u: Pct = serde_json::from_str("\"unlimited\"").unwrap();
        assert_eq!(serde_json::to_string(&u).unwrap(), "\"unlimited\"");
        assert_eq!(
            serde_json::from_str::<Pct>("\"40%\"").unwrap().percent(),
            Some(40.0)
        );
        for bad in ["0", "1e-25", "\"half\"", "null", "[]", "100.5"] {
            let e = serde_json::from_str::<Pct>(bad).unwrap_err().to_string();
            assert!(e.contains("0.01 to 100"), "{bad}: {e}");
        }
        assert_eq!(Pct::parse("30").unwrap().to_string(), "30%");
        assert_eq!(Pct::UNLIMITED.to_string(), "unlimited");
        assert_eq!(Pct::parse("10").unwrap().of(125e6), Some(12.5e6));
    }

    #[test]
    fn a_setting_is_exact_and_its_own_key() {
        use std::collections::{BTreeSet, HashSet};
        let a = Pct::new(33.333).unwrap();
        let b = Pct::new(33.3330001).unwrap();
        assert_eq!(a, b);
        assert_eq!(a.thousandths(), Some(33_333));
        assert_eq!(a.to_string(), "33.333%");
        assert_eq!(HashSet::from([a, b]).len(), 1);
        // Every spelling of one setting is one value.
        for t in ["30", "30%", " 30.000 ", "3e1"] {
            assert_eq!(Pct::parse(t).unwrap(), Pct::new(30.0).unwrap(), "{t}");
        }
        for t in ["off", "OFF", "unlimited", "Unlimited"] {
            assert_eq!(Pct::parse(t).unwrap(), Pct::UNLIMITED, "{t}");
        }
        // Ordered by bandwidth, unlimited above 100%.
        let sorted: Vec<String> = BTreeSet::from([
            Pct::UNLIMITED,
            Pct::FULL,
            Pct::new(5.0).unwrap(),
            Pct::new(0.01).unwrap(),
        ])
        .into_iter()
        .map(|p| p.to_string())
        .collect();
        assert_eq!(sorted, ["0.01%", "5%", "100%", "unlimited"]);
        assert_eq!(Pct::from_thousandths(100_000).unwrap(), Pct::FULL);
        assert_eq!(Pct::new(MIN_PCT).unwrap(), Pct::LOWEST);
        assert!(Pct::from_thousandths(0).is_err() && Pct::from_thousandths(100_001).is_err());
    }
}
