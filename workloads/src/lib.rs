//! The programs whose sensitivity to bandwidth throttle measures.
//!
//! * [`comm`]: the communicator (point-to-point and collectives) over the agents' rank
//!   tunnels.
//! * [`bfs`]: Graph500-style BFS on a 2-D partitioned Kronecker graph.
//! * [`pmm`]: Fox's broadcast-multiply-roll matrix multiplication.
//! * [`loggps`]: LogGPS parameters (L, o, g, G) measured through the agents.
//! * [`master_worker`]: a master handing out tasks to workers (the master/worker thesis; Mizutani et al.).
//!
//! The binaries `throttle-bfs`, `throttle-pmm`, `throttle-loggps` and `throttle-mw` are
//! what agents launch; each rank prints
//! one `THROTTLE_RESULT {json}` line that the agent hands back to the controller.

pub mod bfs;
pub mod comm;
pub mod loggps;
pub mod master_worker;
pub mod pmm;
pub mod stats;

/// Print the result line the agent collects (`throttle_proto::result`).
/// Refuse, before anything is allocated, options whose ranks on this node need more memory
/// than it has available (`throttle_proto::workload::memory`): the job's size from
/// `THROTTLE_SIZE`, this node's share of it from `THROTTLE_NODE_RANKS` (the agent sets
/// both; one rank when it is not set).
pub fn fits_this_node(options: &throttle_proto::workload::Options) -> Result<(), String> {
    let number = |name: &str| {
        std::env::var(name)
            .ok()
            .and_then(|v| v.parse::<usize>().ok())
    };
    let procs = number("THROTTLE_SIZE").unwrap_or(1);
    let ranks = number("THROTTLE_NODE_RANKS").unwrap_or(1);
    let Some(available) = throttle_proto::os::memory::available() else {
        return Ok(());
    };
    throttle_proto::workload::memory::check(options, procs, ranks, available)
        .map_err(|e| format!("{e} (this node's MemAvailable)"))
}

pub fn print_result(result: &throttle_proto::result::WorkloadResult) {
    println!("{}", result.line());
}
