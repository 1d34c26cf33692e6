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

/// Print the result line the agent collects (see `throttle_agent::jobs`).
pub fn print_result<T: serde::Serialize>(result: &T) {
    match serde_json::to_string(result) {
        Ok(s) => println!("{}{s}", throttle_agent::jobs::RESULT_PREFIX),
        Err(e) => eprintln!("cannot serialize the result: {e}"),
    }
}
