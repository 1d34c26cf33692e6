//! What else was going on: the machine's CPU load around each run.
//!
//! Timing noise on a shared or virtual machine is large (a one-node BFS varies 5-10% run
//! to run), so a sweep records, with each run, how busy the CPUs were just before it (a
//! run started on a busy machine is suspect) and how much the hypervisor stole during it,
//! from `/proc/stat` of the controller's host; on a local cluster that is the host the
//! ranks run on. (The bytes a run moved come with its proof: `fidelity`.)

use crate::cluster::Cluster;

/// Runs of a size whose own processes used at least this share of all cores over the
/// run, by their median, are CPU-bound (the analysis's threshold, which marks them in its
/// answer: one home).
pub use throttle_analysis::trust::cpu::CPU_BOUND;

/// The CPU time, in seconds, that a run's own processes have used so far on this
/// machine: the local cluster's agents (`agents`: their pids) with the ranks they
/// launched and reaped, and this process's reaped children (a command and what it
/// started). Read before and after a run, the difference is the run's, whatever else
/// runs on the machine (the machine's busy share counted a build beside the sweep as
/// the run's).
pub fn own_cpu_seconds(agents: &[u32]) -> f64 {
    let hz = nix::unistd::sysconf(nix::unistd::SysconfVar::CLK_TCK)
        .ok()
        .flatten()
        .filter(|&h| h > 0)
        .unwrap_or(100) as f64;
    let agents: u64 = agents
        .iter()
        .filter_map(|pid| std::fs::read_to_string(format!("/proc/{pid}/stat")).ok())
        .filter_map(|stat| process_ticks(&stat))
        .sum();
    let children = nix::sys::resource::getrusage(nix::sys::resource::UsageWho::RUSAGE_CHILDREN)
        .map(|u| {
            let t = |v: nix::sys::time::TimeVal| v.tv_sec() as f64 + v.tv_usec() as f64 / 1e6;
            t(u.user_time()) + t(u.system_time())
        })
        .unwrap_or(0.0);
    agents as f64 / hz + children
}

/// utime + stime + cutime + cstime of a `/proc/PID/stat` line, in clock ticks (the
/// fields after the parenthesised name, which may hold spaces).
fn process_ticks(stat: &str) -> Option<u64> {
    let after = stat.rsplit_once(')')?.1;
    let f: Vec<&str> = after.split_whitespace().collect();
    // After the name: state is field 3 of the line, utime 14 .. cstime 17.
    let at = |i: usize| f.get(i - 3).and_then(|v| v.parse::<u64>().ok());
    Some(at(14)? + at(15)? + at(16)? + at(17)?)
}

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

/// On a cluster whose nodes all run on this machine (`local up`), the note said before a
/// sweep for a size whose nodes outnumber the cores, when the ranks' compute is emulated
/// (they sleep): more run-to-run noise. Whether other programs' sizes are CPU-bound is
/// measured during their runs instead ([`cpu_bound`]): a program that sleeps or waits
/// does not load the cores however many ranks it has.
pub fn oversubscription(
    cluster: &Cluster,
    nodes: usize,
    ranks_per_node: usize,
    emulated_compute: bool,
) -> Option<String> {
    cluster.file.local_dir.as_ref()?;
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    if emulated_compute {
        return emulated(nodes, ranks_per_node, cores);
    }
    None
}

/// The warning for the node counts whose runs kept the CPUs busy (`by_nodes`: each node
/// count's runs' shares of busy CPU time, 0..1): those whose median reaches
/// [`CPU_BOUND`].
pub fn cpu_bound(by_nodes: &std::collections::BTreeMap<usize, Vec<f64>>) -> Option<String> {
    let bound: Vec<String> = by_nodes
        .iter()
        .filter_map(|(n, shares)| {
            let median = throttle_analysis::trust::cpu::median_share(shares)?;
            (median >= CPU_BOUND).then(|| format!("{n} node(s) ({:.0}%)", median * 100.0))
        })
        .collect();
    (!bound.is_empty()).then(|| {
        format!(
            "the runs at {} used this machine's cores (their processes' CPU time, the median share of all cores over a run): their times are CPU-bound, and a CTI measured there says little about the link (use fewer nodes here, or a machine with more cores)",
            bound.join(", ")
        )
    })
}

/// Ranks that sleep for their compute do not load the cores; their messaging and the
/// agents do, which shows as run-to-run noise rather than as a CPU-bound baseline.
fn emulated(nodes: usize, ranks_per_node: usize, cores: usize) -> Option<String> {
    (nodes > cores).then(|| {
        format!(
            "{nodes} node(s) on this machine run {} rank(s) and {nodes} agent(s) on {cores} core(s); the ranks' compute is emulated (sleep), so only their messaging and the agents share the cores: expect more run-to-run noise at the largest sizes (see the noise floor)",
            nodes * ranks_per_node
        )
    })
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_processs_ticks_are_read_past_a_name_with_spaces() {
        let stat = "42 (a (b) c) S 1 42 42 0 -1 4194304 100 0 0 0 7 3 2 1 20 0 1 0 100 1000 10";
        assert_eq!(super::process_ticks(stat), Some(7 + 3 + 2 + 1));
        assert_eq!(super::process_ticks("garbage"), None);
        assert!(super::own_cpu_seconds(&[std::process::id()]) >= 0.0);
    }

    #[test]
    fn only_sizes_whose_runs_kept_the_cpus_busy_are_cpu_bound() {
        let mut by = std::collections::BTreeMap::new();
        by.insert(2, vec![0.3, 0.4, 0.35]);
        by.insert(8, vec![0.97, 0.95, 0.5]);
        let w = super::cpu_bound(&by).unwrap();
        assert!(
            w.contains("8 node(s) (95%)") && !w.contains("2 node(s)"),
            "{w}"
        );
        by.remove(&8);
        assert!(super::cpu_bound(&by).is_none());
        let w = super::emulated(25, 1, 2).unwrap();
        assert!(w.contains("emulated") && !w.contains("CPU-bound"), "{w}");
        assert!(super::emulated(2, 1, 2).is_none());
    }

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
}
