//! The questions beyond one bandwidth axis, with real agents and workloads, one test
//! binary: a problem axis swept, stored, exported and answered in two parameters
//! (`problem.rs`), and latency points answered as latency demand (`latency.rs`).

mod latency;
mod problem;
