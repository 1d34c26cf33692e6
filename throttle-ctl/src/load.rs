//! What else was going on: the machine's CPU load around each run, and the bytes the
//! run's nodes moved through their agents.
//!
//! Timing noise on a shared or virtual machine is large (a one-node BFS varies 5-10% run
//! to run), so a sweep records, with each run, how busy the CPUs were just before it (a
//! run started on a busy machine is suspect) and how much the hypervisor stole during it,
//! from `/proc/stat` of the controller's host; on a local cluster that is the host the
//! ranks run on. The agents' byte counters read before and after a run give its traffic,
//! which the traffic-based projection needs.

use serde::Serialize;

use crate::agent_client::AgentClient;
use crate::cluster::Cluster;

/// A run started when the CPUs were busier than this is reported.
pub const BUSY: f64 = 0.25;

/// The aggregate CPU counters of `/proc/stat` (USER_HZ ticks).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct CpuTimes {
    pub busy: u64,
    pub idle: u64,
    pub steal: u64,
}

impl CpuTimes {
    /// Read them now; `None` where there is no `/proc/stat` (not Linux).
    pub fn now() -> Option<CpuTimes> {
        parse(&std::fs::read_to_string("/proc/stat").ok()?)
    }
}

/// The `cpu` line: user nice system idle iowait irq softirq steal (guest time is
/// already inside user and nice).
pub fn parse(stat: &str) -> Option<CpuTimes> {
    let line = stat.lines().find(|l| l.starts_with("cpu "))?;
    let v: Vec<u64> = line
        .split_whitespace()
        .skip(1)
        .map(|f| f.parse().ok())
        .collect::<Option<_>>()?;
    if v.len() < 4 {
        return None;
    }
    let at = |i: usize| v.get(i).copied().unwrap_or(0);
    Some(CpuTimes {
        busy: at(0) + at(1) + at(2) + at(5) + at(6),
        idle: at(3) + at(4),
        steal: at(7),
    })
}

/// Shares of the interval between two readings: (busy, steal), each 0..1.
pub fn shares(before: CpuTimes, after: CpuTimes) -> Option<(f64, f64)> {
    let busy = after.busy.checked_sub(before.busy)?;
    let idle = after.idle.checked_sub(before.idle)?;
    let steal = after.steal.checked_sub(before.steal)?;
    let total = busy + idle + steal;
    (total > 0).then(|| {
        (
            (busy + steal) as f64 / total as f64,
            steal as f64 / total as f64,
        )
    })
}

/// Bytes the first `nodes` nodes' agents have sent and received so far.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct Traffic {
    pub sent: u64,
    pub received: u64,
}

/// Read the counters of the first `nodes` nodes; `None` if any agent does not answer
/// (then the run's traffic is unknown rather than wrong).
pub fn traffic(cluster: &Cluster, nodes: usize) -> Option<Traffic> {
    let mut t = Traffic::default();
    for n in cluster.file.nodes.iter().take(nodes) {
        let s = AgentClient::new(cluster, n).status().ok()?;
        t.sent += s.egress.bytes;
        t.received += s.ingress.bytes;
    }
    Some(t)
}

/// What the run moved: the difference of two readings (`None` if a counter went back,
/// i.e. an agent restarted in between).
pub fn moved(before: Traffic, after: Traffic) -> Option<Traffic> {
    Some(Traffic {
        sent: after.sent.checked_sub(before.sent)?,
        received: after.received.checked_sub(before.received)?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn proc_stat_by_hand() {
        let a = parse("cpu  100 10 50 1000 40 5 5 20 0 0\ncpu0 1 2 3 4\n").unwrap();
        assert_eq!(
            a,
            CpuTimes {
                busy: 170,
                idle: 1040,
                steal: 20
            }
        );
        let b = parse("cpu  160 10 70 1100 40 5 5 40 0 0\n").unwrap();
        // 80 busy, 100 idle, 20 stolen of 200 ticks.
        let (busy, steal) = shares(a, b).unwrap();
        assert!((busy - 0.5).abs() < 1e-12 && (steal - 0.1).abs() < 1e-12);
        assert!(shares(b, a).is_none());
        assert!(shares(a, a).is_none());
        assert!(parse("intr 1 2 3\n").is_none());
        assert!(CpuTimes::now().is_some(), "this test runs on Linux");
    }

    #[test]
    fn traffic_differences() {
        let a = Traffic {
            sent: 10,
            received: 20,
        };
        let b = Traffic {
            sent: 15,
            received: 29,
        };
        assert_eq!(
            moved(a, b),
            Some(Traffic {
                sent: 5,
                received: 9
            })
        );
        assert_eq!(moved(b, a), None);
    }
}
