//! A set of CPUs, written as Linux writes it (`0-3,8,10-11`): what an agent and the
//! ranks it launches may run on when a local cluster pins them to disjoint cores.
//!
//! On one machine the ranks of several emulated nodes and their agents compete for the
//! same cores, and the scheduler's choices become timing noise. Pinning agents to some
//! cores and ranks to the others removes one source of it (`local up --pin`).

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

/// The most CPUs a list may name (the kernel's usual CPU_SETSIZE).
pub const MAX_CPUS: usize = 1024;

/// A non-empty, sorted set of CPU numbers below [`MAX_CPUS`].
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct CpuList(Vec<usize>);

impl CpuList {
    /// CPUs `from..to` (end exclusive); `None` when empty or beyond [`MAX_CPUS`].
    pub fn range(from: usize, to: usize) -> Option<CpuList> {
        (from < to && to <= MAX_CPUS).then(|| CpuList((from..to).collect()))
    }

    /// The list of these CPUs; `None` when empty or beyond [`MAX_CPUS`].
    pub fn from_sorted(cpus: &[usize]) -> Option<CpuList> {
        let mut v = cpus.to_vec();
        v.sort_unstable();
        v.dedup();
        (!v.is_empty() && v.iter().all(|&c| c < MAX_CPUS)).then_some(CpuList(v))
    }

    pub fn cpus(&self) -> &[usize] {
        &self.0
    }
}

impl FromStr for CpuList {
    type Err = String;

    fn from_str(text: &str) -> Result<CpuList, String> {
        let bad = || {
            format!("`{text}` is not a CPU list: write numbers and ranges like 0-3,8 (each below {MAX_CPUS})")
        };
        let mut cpus = Vec::new();
        for part in text.split(',') {
            let part = part.trim();
            let (a, b) = match part.split_once('-') {
                Some((a, b)) => (a, b),
                None => (part, part),
            };
            let a: usize = a.trim().parse().map_err(|_| bad())?;
            let b: usize = b.trim().parse().map_err(|_| bad())?;
            if a > b || b >= MAX_CPUS {
                return Err(bad());
            }
            cpus.extend(a..=b);
        }
        cpus.sort_unstable();
        cpus.dedup();
        Ok(CpuList(cpus))
    }
}

impl fmt::Display for CpuList {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut first = true;
        let mut i = 0;
        while i < self.0.len() {
            let start = self.0[i];
            let mut end = start;
            while i + 1 < self.0.len() && self.0[i + 1] == end + 1 {
                i += 1;
                end = self.0[i];
            }
            if !first {
                f.write_str(",")?;
            }
            first = false;
            if start == end {
                write!(f, "{start}")?;
            } else {
                write!(f, "{start}-{end}")?;
            }
            i += 1;
        }
        Ok(())
    }
}

impl TryFrom<String> for CpuList {
    type Error = String;
    fn try_from(s: String) -> Result<CpuList, String> {
        s.parse()
    }
}

impl From<CpuList> for String {
    fn from(c: CpuList) -> String {
        c.to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lists_parse_and_print_as_linux_writes_them() {
        let c: CpuList = "8, 0-3,2,10-11".parse().unwrap();
        assert_eq!(c.cpus(), &[0, 1, 2, 3, 8, 10, 11]);
        assert_eq!(c.to_string(), "0-3,8,10-11");
        assert_eq!("5".parse::<CpuList>().unwrap().to_string(), "5");
        assert_eq!(CpuList::range(1, 4).unwrap().to_string(), "1-3");
        for bad in ["", "a", "3-1", "0-", "1024", "0-2000", "-1", "1,,2"] {
            let e = bad.parse::<CpuList>().unwrap_err();
            assert!(e.contains("not a CPU list"), "{bad}: {e}");
        }
        assert!(CpuList::range(2, 2).is_none());
    }
}
