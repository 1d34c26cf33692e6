//! What memory this machine has free, for the workloads' memory check
//! ([`crate::workload::memory`]).

/// `MemAvailable` of `/proc/meminfo`, bytes: what can be used without swapping. `None`
/// where it cannot be read (not Linux).
pub fn available() -> Option<u64> {
    parse(&std::fs::read_to_string("/proc/meminfo").ok()?)
}

fn parse(meminfo: &str) -> Option<u64> {
    let line = meminfo.lines().find(|l| l.starts_with("MemAvailable:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    kib.checked_mul(1024)
}

#[cfg(test)]
mod tests {
    #[test]
    fn mem_available_is_read_in_bytes() {
        let text = "MemTotal:       24000000 kB\nMemFree:  100 kB\nMemAvailable:   20000000 kB\n";
        assert_eq!(super::parse(text), Some(20_000_000 * 1024));
        assert_eq!(super::parse("MemTotal: 1 kB\n"), None);
        assert!(super::available().is_some(), "this test runs on Linux");
    }
}
