//! The programs whose sensitivity to bandwidth throttle measures.
//!
//! * [`comm`]: the communicator (point-to-point and collectives) over the agents' rank
//!   tunnels.
//! * [`bfs`]: Graph500-style BFS on a 2-D partitioned Kronecker graph.
//! * [`pmm`]: Fox's broadcast-multiply-roll matrix multiplication.
//!
//! The binaries `throttle-bfs` and `throttle-pmm` are what agents launch; each rank prints
//! one `THROTTLE_RESULT {json}` line that the agent hands back to the controller.

pub mod bfs;
pub mod comm;
pub mod pmm;

/// Print the result line the agent collects (`throttle_proto::result`).
pub fn print_result(result: &throttle_proto::result::WorkloadResult) {
    println!("{}", result.line());
}
