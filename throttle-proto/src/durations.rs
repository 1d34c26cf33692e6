//! The contract's durations: a [`Lease`] (how long a job or a run's shape holds without a
//! renewal from its controller) and a [`TimeLimit`] (how long a job may run). Each is a
//! type with its range and its one default, checked where it enters (a flag, a sweep
//! file, a request body) and never again; on the wire, seconds (`lease_s`,
//! `time_limit_s`).

use std::fmt;
use std::str::FromStr;
use std::time::Duration;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// Why a duration was refused; the message says the range.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
#[error("{0}")]
pub struct DurationError(String);

/// How long a job, or a run's shape, holds without a renewal from its controller: from
/// one second to one day. The controller renews every quarter of it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Lease(Duration);

impl Lease {
    pub const MIN: Duration = Duration::from_secs(1);
    pub const MAX: Duration = Duration::from_secs(86400);
    /// The lease of a run whose controller or launch does not say.
    pub const DEFAULT: Lease = Lease(Duration::from_secs(20));

    pub fn from_secs(secs: f64) -> Result<Lease, DurationError> {
        Duration::try_from_secs_f64(secs)
            .ok()
            .filter(|d| (Lease::MIN..=Lease::MAX).contains(d))
            .map(Lease)
            .ok_or_else(|| {
                DurationError(format!(
                    "a lease must be from {} to {} seconds, not {secs}",
                    Lease::MIN.as_secs(),
                    Lease::MAX.as_secs()
                ))
            })
    }

    pub fn duration(self) -> Duration {
        self.0
    }

    pub fn secs(self) -> f64 {
        self.0.as_secs_f64()
    }

    /// How often a controller renews it: a quarter, so that three renewals may be lost.
    pub fn renew_every(self) -> Duration {
        self.0 / 4
    }
}

/// How long a job may run before it is killed: more than nothing, at most one week.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct TimeLimit(Duration);

impl TimeLimit {
    pub const MAX: Duration = Duration::from_secs(7 * 86400);
    /// The limit of a job whose launch or sweep does not say.
    pub const DEFAULT: TimeLimit = TimeLimit(Duration::from_secs(600));

    pub fn from_secs(secs: f64) -> Result<TimeLimit, DurationError> {
        Duration::try_from_secs_f64(secs)
            .ok()
            .filter(|d| !d.is_zero() && *d <= TimeLimit::MAX)
            .map(TimeLimit)
            .ok_or_else(|| {
                DurationError(format!(
                    "a time limit must be more than 0 and at most one week ({} seconds), not {secs}",
                    TimeLimit::MAX.as_secs()
                ))
            })
    }

    pub fn duration(self) -> Duration {
        self.0
    }

    pub fn secs(self) -> f64 {
        self.0.as_secs_f64()
    }
}

impl Default for Lease {
    fn default() -> Lease {
        Lease::DEFAULT
    }
}

impl Default for TimeLimit {
    fn default() -> TimeLimit {
        TimeLimit::DEFAULT
    }
}

/// Both are written and read as seconds.
macro_rules! seconds {
    ($t:ident, $wire:literal) => {
        impl fmt::Display for $t {
            /// `20 s`, `0.5 s`.
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                write!(f, "{} s", self.secs())
            }
        }

        /// Seconds, as a flag gives them (`20`, `20s`, `2.5 s`).
        impl FromStr for $t {
            type Err = DurationError;
            fn from_str(text: &str) -> Result<$t, DurationError> {
                let t = text.trim();
                let t = t.strip_suffix('s').unwrap_or(t).trim_end();
                let secs: f64 = t
                    .parse()
                    .map_err(|_| DurationError(format!("`{text}` is not a number of seconds")))?;
                $t::from_secs(secs)
            }
        }

        impl Serialize for $t {
            fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                s.serialize_f64(self.secs())
            }
        }

        impl<'de> Deserialize<'de> for $t {
            fn deserialize<D: Deserializer<'de>>(d: D) -> Result<$t, D::Error> {
                let secs = f64::deserialize(d)?;
                $t::from_secs(secs)
                    .map_err(|e| serde::de::Error::custom(format!("`{}`: {e}", $wire)))
            }
        }
    };
}

seconds!(Lease, "lease_s");
seconds!(TimeLimit, "time_limit_s");

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_is_checked_once_where_it_enters() {
        assert_eq!(Lease::from_secs(20.0).unwrap(), Lease::DEFAULT);
        assert_eq!("20".parse::<Lease>().unwrap(), Lease::DEFAULT);
        assert_eq!("20s".parse::<Lease>().unwrap(), Lease::DEFAULT);
        assert_eq!(Lease::DEFAULT.renew_every(), Duration::from_secs(5));
        for bad in [0.5, 86401.0, -1.0, f64::NAN, f64::INFINITY] {
            let e = Lease::from_secs(bad).unwrap_err().to_string();
            assert!(e.contains("from 1 to 86400 seconds"), "{bad}: {e}");
        }
        assert_eq!(TimeLimit::from_secs(600.0).unwrap(), TimeLimit::DEFAULT);
        for bad in [0.0, -1.0, 7.0 * 86400.0 + 1.0, f64::NAN] {
            let e = TimeLimit::from_secs(bad).unwrap_err().to_string();
            assert!(e.contains("at most one week"), "{bad}: {e}");
        }
        assert!("fast".parse::<TimeLimit>().is_err());
    }

    #[test]
    fn seconds_on_the_wire() {
        let l: Lease = serde_json::from_str("2.5").unwrap();
        assert_eq!(serde_json::to_string(&l).unwrap(), "2.5");
        let e = serde_json::from_str::<Lease>("0").unwrap_err().to_string();
        assert!(
            e.contains("`lease_s`: a lease must be from 1 to 86400"),
            "{e}"
        );
        let e = serde_json::from_str::<TimeLimit>("\"ten\"")
            .unwrap_err()
            .to_string();
        assert!(e.contains("f64") || e.contains("invalid type"), "{e}");
        assert_eq!(TimeLimit::DEFAULT.to_string(), "600 s");
    }
}
