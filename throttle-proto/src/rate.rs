//! Link rates as users write them (`1Gbit`, `800Mbit`, `125MB`, `unlimited`).
//!
//! Every rate inside throttle is payload bytes per second. This
//! module is the one place that turns the human spelling into that number and back, so
//! the agent's flags, the control API and the cluster file all accept the same forms.

use std::fmt;

/// Largest capacity we accept: 1 Tbit/s. Anything above is a typo, not a link.
pub const MAX_CAPACITY_BYTES_PER_SEC: f64 = 125e9;
/// Smallest capacity we accept: 1 kbit/s. Below this a single stream setup would take minutes.
pub const MIN_CAPACITY_BYTES_PER_SEC: f64 = 125.0;

/// A link rate in payload bytes per second.
#[derive(Clone, Copy, Debug, PartialEq, PartialOrd)]
pub struct Rate(f64);

/// Why a rate string was refused; the message says what to write instead.
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum RateError {
    #[error("rate `{0}` is not understood: write a number and a unit, e.g. `1Gbit`, `800Mbit`, `125MB` (per second)")]
    Syntax(String),
    #[error("rate `{0}` is out of range: capacity must be between 1kbit and 1Tbit per second")]
    Range(String),
}

impl Rate {
    /// A rate of `bytes_per_sec`, checked against the accepted range.
    pub fn from_bytes_per_sec(bytes_per_sec: f64) -> Result<Rate, RateError> {
        if !bytes_per_sec.is_finite()
            || !(MIN_CAPACITY_BYTES_PER_SEC..=MAX_CAPACITY_BYTES_PER_SEC).contains(&bytes_per_sec)
        {
            return Err(RateError::Range(format!("{bytes_per_sec} B/s")));
        }
        Ok(Rate(bytes_per_sec))
    }

    pub fn bytes_per_sec(self) -> f64 {
        self.0
    }

    /// Parse `1Gbit`, `1gbit/s`, `800Mbit`, `125MB`, `125MB/s`, `1000000` (bytes).
    /// Prefixes are SI (k = 1000). `bit`/`b` means bits, `B`/`byte` bytes.
    pub fn parse(text: &str) -> Result<Rate, RateError> {
        let s = text.trim();
        let s = s
            .strip_suffix("/s")
            .or_else(|| s.strip_suffix("ps"))
            .unwrap_or(s);
        let split = s
            .find(|c: char| !(c.is_ascii_digit() || c == '.' || c == '_'))
            .unwrap_or(s.len());
        let (num, unit) = s.split_at(split);
        let num: f64 = num
            .replace('_', "")
            .parse()
            .map_err(|_| RateError::Syntax(text.to_string()))?;
        let unit = unit.trim();
        let (prefix, rest) = match unit.chars().next() {
            Some('k') | Some('K') => (1e3, &unit[1..]),
            Some('M') => (1e6, &unit[1..]),
            Some('G') | Some('g') => (1e9, &unit[1..]),
            Some('T') | Some('t') => (1e12, &unit[1..]),
            Some('m') if unit.len() > 1 => (1e6, &unit[1..]),
            _ => (1.0, unit),
        };
        let bits = match rest {
            "bit" | "bits" | "b" => true,
            "" | "B" | "byte" | "bytes" | "Byte" | "Bytes" => false,
            _ => return Err(RateError::Syntax(text.to_string())),
        };
        let bytes = num * prefix / if bits { 8.0 } else { 1.0 };
        Rate::from_bytes_per_sec(bytes).map_err(|_| RateError::Range(text.to_string()))
    }
}

impl fmt::Display for Rate {
    /// Shown in bits per second with an SI prefix, the way link speeds are quoted.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", format_bits_per_sec(self.0))
    }
}

/// `bytes_per_sec` as a `--capacity` flag takes it: `200Mbit`, `1Gbit` (what
/// [`Rate::parse`] reads back).
pub fn format_flag(bytes_per_sec: f64) -> String {
    format_bits_per_sec(bytes_per_sec)
        .replace(' ', "")
        .trim_end_matches("/s")
        .to_string()
}

/// `bytes_per_sec` shown as `1 Gbit/s`, `812.5 Mbit/s`, ...
pub fn format_bits_per_sec(bytes_per_sec: f64) -> String {
    let bits = bytes_per_sec * 8.0;
    let (div, unit) = if bits >= 1e12 {
        (1e12, "Tbit/s")
    } else if bits >= 1e9 {
        (1e9, "Gbit/s")
    } else if bits >= 1e6 {
        (1e6, "Mbit/s")
    } else if bits >= 1e3 {
        (1e3, "kbit/s")
    } else {
        (1.0, "bit/s")
    };
    let v = bits / div;
    if (v - v.round()).abs() < 1e-9 {
        format!("{} {unit}", v.round())
    } else {
        format!("{v:.1} {unit}")
    }
}

/// A rate travels as a number of bytes per second; it is read from that or from the
/// human spelling (`"1Gbit"`), and checked either way.
impl serde::Serialize for Rate {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_f64(self.0)
    }
}

impl<'de> serde::Deserialize<'de> for Rate {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Rate, D::Error> {
        #[derive(serde::Deserialize)]
        #[serde(untagged)]
        enum Either {
            Number(f64),
            Text(String),
        }
        match Either::deserialize(d).map_err(|_| {
            serde::de::Error::custom(
                "a rate is a number of bytes per second or a string like \"1Gbit\"",
            )
        })? {
            Either::Number(n) => Rate::from_bytes_per_sec(n),
            Either::Text(t) => Rate::parse(&t),
        }
        .map_err(serde::de::Error::custom)
    }
}

impl std::str::FromStr for Rate {
    type Err = RateError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Rate::parse(s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A rate as a flag reads back as the same rate.
    #[test]
    fn a_flag_reads_back() {
        for bytes in [12.5e6, 125e6, 62.5e6, 1.25e9] {
            let flag = format_flag(bytes);
            assert!(!flag.contains(' ') && !flag.ends_with("/s"), "{flag}");
            assert_eq!(Rate::parse(&flag).unwrap().bytes_per_sec(), bytes, "{flag}");
        }
    }

    #[test]
    fn parses_bits_and_bytes() {
        assert_eq!(Rate::parse("1Gbit").unwrap().bytes_per_sec(), 125e6);
        assert_eq!(Rate::parse("1gbit/s").unwrap().bytes_per_sec(), 125e6);
        assert_eq!(Rate::parse("800Mbit").unwrap().bytes_per_sec(), 100e6);
        assert_eq!(Rate::parse("10Gbit").unwrap().bytes_per_sec(), 1.25e9);
        assert_eq!(Rate::parse("125MB").unwrap().bytes_per_sec(), 125e6);
        assert_eq!(Rate::parse("125MB/s").unwrap().bytes_per_sec(), 125e6);
        assert_eq!(Rate::parse("2.5Gbit").unwrap().bytes_per_sec(), 312.5e6);
        assert_eq!(Rate::parse("1000000").unwrap().bytes_per_sec(), 1e6);
    }

    #[test]
    fn refuses_nonsense_with_a_hint() {
        for bad in ["", "fast", "1Xbit", "-5Mbit", "NaN", "1e400Gbit"] {
            let err = Rate::parse(bad).unwrap_err();
            assert!(err.to_string().contains("1Gbit") || err.to_string().contains("range"));
        }
        assert!(matches!(Rate::parse("10Tbit"), Err(RateError::Range(_))));
        assert!(matches!(Rate::parse("1bit"), Err(RateError::Range(_))));
    }

    #[test]
    fn serde_takes_numbers_and_spellings() {
        let r: Rate = serde_json::from_str("\"1Gbit\"").unwrap();
        assert_eq!(r.bytes_per_sec(), 125e6);
        let r: Rate = serde_json::from_str("125000000").unwrap();
        assert_eq!(serde_json::to_string(&r).unwrap(), "125000000.0");
        assert!(serde_json::from_str::<Rate>("\"fast\"").is_err());
        assert!(serde_json::from_str::<Rate>("-1").is_err());
        assert!(serde_json::from_str::<Rate>("true").is_err());
    }

    #[test]
    fn displays_in_bits() {
        assert_eq!(Rate::parse("1Gbit").unwrap().to_string(), "1 Gbit/s");
        assert_eq!(format_bits_per_sec(101.5625e6), "812.5 Mbit/s");
    }
}
