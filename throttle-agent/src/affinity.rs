//! CPU affinity of the agent and of the ranks it launches (`--cpus`, `--rank-cpus`).
//!
//! A local cluster runs every node's agent and ranks on one machine; pinning them to
//! disjoint cores (`throttle-ctl local up --pin`) keeps the scheduler from moving ranks
//! onto the cores the agents pump data on, one source of run-to-run noise.

use anyhow::{bail, Context, Result};
use nix::sched::{sched_getaffinity, sched_setaffinity, CpuSet};
use nix::unistd::Pid;
use throttle_proto::cpus::CpuList;

/// The kernel's set for `cpus`; an error naming the CPUs this process may not use (not
/// present, offline, or outside its cgroup or inherited affinity).
pub fn cpu_set(cpus: &CpuList) -> Result<CpuSet> {
    let allowed =
        sched_getaffinity(Pid::from_raw(0)).context("cannot read this process's CPU affinity")?;
    let usable: Vec<usize> = (0..CpuSet::count())
        .filter(|&c| allowed.is_set(c).unwrap_or(false))
        .collect();
    let missing: Vec<String> = cpus
        .cpus()
        .iter()
        .filter(|c| !usable.contains(c))
        .map(usize::to_string)
        .collect();
    if !missing.is_empty() {
        let have = CpuList::from_sorted(&usable)
            .map(|l| l.to_string())
            .unwrap_or_else(|| "none".into());
        bail!(
            "CPU(s) {} are not available here (this process may use {have})",
            missing.join(", ")
        );
    }
    let mut set = CpuSet::new();
    for &c in cpus.cpus() {
        set.set(c)
            .with_context(|| format!("CPU {c} cannot be put in an affinity set"))?;
    }
    Ok(set)
}

/// Pin the calling thread (and every thread it creates afterwards: call it before the
/// runtime starts) to `cpus`.
pub fn pin_this_thread(cpus: &CpuList) -> Result<()> {
    sched_setaffinity(Pid::from_raw(0), &cpu_set(cpus)?)
        .with_context(|| format!("cannot pin the agent to CPUs {cpus}"))
}
