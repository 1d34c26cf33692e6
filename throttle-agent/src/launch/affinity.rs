//! How the agent gets the CPU it needs: its affinity and that of the ranks it launches
//! (`--cpus`, `--rank-cpus`), and its scheduling priority (`--priority`).
//!
//! A local cluster runs every node's agent and ranks on one machine; pinning them to
//! disjoint cores (`throttle-ctl local up --pin`) keeps the scheduler from moving ranks
//! onto the cores the agents pump data on, one source of run-to-run noise.
//!
//! The priority is the protection that needs no spare core. Four busy-polling Open MPI
//! ranks on the development machine's two cores starved the agents (stalls of 6% of the
//! run, the links flagged); at nice -10 the stalls fell to 1%, under SCHED_RR to nothing
//! (experiments/2026-11-24-fidelity.md). The default is `high` (nice -10): it needs root
//! or CAP_SYS_NICE, and the agent says once when it runs without it. Ranks never inherit
//! it: the spawner puts every rank back to the normal policy and nice 0 before exec.

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

/// The agent's scheduling priority (`--priority`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Priority {
    /// As any process (nice 0).
    Normal,
    /// nice -10: ahead of the ranks sharing its cores, without starving them.
    High,
    /// SCHED_RR at priority 10: always ahead of normal processes (the kernel keeps 5% of
    /// each second for them). An agent pumping 10 Gbit/s can then take a whole core.
    Realtime,
}

/// Run the calling thread (and every thread it creates afterwards: call it before the
/// runtime starts) at `priority`, or at the highest one below it the system allows
/// (`realtime`, then `high`, then `normal`). Returns what it runs at, and what was
/// refused on the way, in words.
pub fn raise_this_thread(priority: Priority) -> (Priority, Option<String>) {
    const DOWN: [Priority; 3] = [Priority::Realtime, Priority::High, Priority::Normal];
    let mut refused: Vec<String> = Vec::new();
    for at in DOWN.into_iter().skip_while(|p| *p != priority) {
        match try_priority(at) {
            Ok(()) => return (at, (!refused.is_empty()).then(|| refused.join("; "))),
            Err(e) => refused.push(format!("{e:#}")),
        }
    }
    (Priority::Normal, Some(refused.join("; ")))
}

/// Set the calling thread's `priority`; an error says what was refused.
fn try_priority(priority: Priority) -> Result<()> {
    match priority {
        Priority::Normal => Ok(()),
        Priority::High => {
            // SAFETY: setpriority on the calling thread (who 0), no pointers.
            let rc = unsafe { libc::setpriority(libc::PRIO_PROCESS, 0, -10) };
            if rc != 0 {
                bail!(
                    "cannot raise the agent's priority to nice -10 ({}): it needs root or CAP_SYS_NICE",
                    std::io::Error::last_os_error()
                );
            }
            Ok(())
        }
        Priority::Realtime => {
            let param = libc::sched_param { sched_priority: 10 };
            // SAFETY: sched_setscheduler on the calling thread with a valid sched_param.
            let rc = unsafe { libc::sched_setscheduler(0, libc::SCHED_RR, &param) };
            if rc != 0 {
                bail!(
                    "cannot run the agent under SCHED_RR ({}): it needs root or CAP_SYS_NICE",
                    std::io::Error::last_os_error()
                );
            }
            Ok(())
        }
    }
}

/// In a rank between fork and exec: the normal policy and nice 0, whatever the agent runs
/// at. Async-signal-safe (two system calls); lowering a priority is always allowed.
pub fn normal_priority_in_child() -> std::io::Result<()> {
    let param = libc::sched_param { sched_priority: 0 };
    // SAFETY: plain system calls on the calling process with a valid sched_param.
    unsafe {
        if libc::sched_setscheduler(0, libc::SCHED_OTHER, &param) != 0 {
            return Err(std::io::Error::last_os_error());
        }
        if libc::setpriority(libc::PRIO_PROCESS, 0, 0) != 0 {
            return Err(std::io::Error::last_os_error());
        }
    }
    Ok(())
}
