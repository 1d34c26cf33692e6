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
pub fn print_result(result: &throttle_proto::result::WorkloadResult) {
    println!("{}", result.line());
}
