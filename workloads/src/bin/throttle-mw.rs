//! Master/worker rank (seeds/001, seeds/003). Started by throttle agents
//! (`throttle-ctl run --workload mw`, sweeps over worker counts).

use clap::Parser;
use workloads::comm::Comm;
use workloads::master_worker::{self, MwConfig, Work};

/// One rank of a master/worker program: rank 0 sends each of the other ranks its share of
/// the data (alpha x volume), they compute for compute-seconds / workers and return the
/// rest of the volume; the median iteration time is reported.
#[derive(Parser, Debug)]
#[command(version)]
struct Args {
    /// V: bytes per iteration, tasks and results together.
    #[arg(long, default_value_t = 16_000_000)]
    volume: u64,
    /// Share of the volume the master sends (0 to 1); the rest returns as results.
    #[arg(long, default_value_t = 0.5)]
    alpha: f64,
    /// Tc: seconds of computation per iteration, shared by the workers.
    #[arg(long, default_value_t = 2.0)]
    compute_seconds: f64,
    /// Timed iterations (after one warm-up iteration).
    #[arg(long, default_value_t = 3)]
    iterations: usize,
    /// How a worker computes: sleep (a node with its own CPU) or spin (burn this CPU).
    #[arg(long, default_value = "sleep")]
    work: Work,
}

fn main() {
    let args = Args::parse();
    let cfg = MwConfig {
        volume: args.volume,
        alpha: args.alpha,
        compute_seconds: args.compute_seconds,
        iterations: args.iterations,
        work: args.work,
    };
    if let Err(e) = cfg.check() {
        eprintln!("throttle-mw: {e}");
        std::process::exit(2)
    }
    let comm = Comm::from_env().unwrap_or_else(|e| {
        eprintln!("throttle-mw: {e}");
        std::process::exit(2)
    });
    let rank = comm.rank();
    let result = match master_worker::run(&comm, &cfg) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("throttle-mw rank {rank}: {e}");
            std::process::exit(1)
        }
    };
    if let Some(r) = &result {
        println!(
            "mw workers={} V={} alpha={} Tc={} s: iteration {:.4} s (min {:.4}, max {:.4})",
            r.workers,
            r.volume,
            r.alpha,
            r.compute_seconds,
            r.iteration_seconds,
            r.min_iteration_seconds,
            r.max_iteration_seconds
        );
        workloads::print_result(&r.report());
    }
    if let Err(e) = comm.finish() {
        eprintln!("throttle-mw rank {rank}: {e}");
        std::process::exit(1)
    }
}
