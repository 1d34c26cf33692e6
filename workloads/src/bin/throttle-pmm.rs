//! Fox matrix multiplication rank. Started by throttle agents (`throttle-ctl run --workload pmm`).

use clap::Parser;
use workloads::comm::{BcastAlgo, Comm};
use workloads::pmm::{self, PmmConfig};

/// One rank of Fox's broadcast-multiply-roll matrix multiplication (needs a square
/// number of ranks).
#[derive(Parser, Debug)]
#[command(version)]
struct Args {
    /// Matrix order M (a multiple of sqrt(ranks)).
    #[arg(long, default_value_t = 1024)]
    size: usize,
    /// Row broadcast: flat, binomial or pipelined.
    #[arg(long, default_value = "binomial")]
    bcast: BcastAlgo,
    /// Sleep for the time a node computing at this many GFLOP/s would take, instead of
    /// multiplying (each rank stands for a node with its own CPU; the received blocks are
    /// checked instead of the product).
    #[arg(long, value_name = "GFLOPS")]
    emulate_gflops: Option<f64>,
}

fn main() {
    let args = Args::parse();
    let comm = Comm::from_env().unwrap_or_else(|e| {
        eprintln!("throttle-pmm: {e}");
        std::process::exit(2)
    });
    let rank = comm.rank();
    let result = match pmm::multiply(
        &comm,
        &PmmConfig {
            size: args.size,
            bcast: args.bcast,
            emulate_gflops: args.emulate_gflops,
        },
    ) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("throttle-pmm rank {rank}: {e}");
            std::process::exit(1)
        }
    };
    if rank == 0 {
        println!(
            "pmm M={} p={} grid={}x{} bcast={}: {:.3} s, {:.2} GFLOP/s, compute {:.3} s, bcast {:.3} s, roll {:.3} s; {}",
            result.size, result.procs, result.grid, result.grid, result.bcast, result.seconds,
            result.gflops, result.compute_seconds, result.bcast_seconds, result.roll_seconds,
            result.verification
        );
        workloads::print_result(&result.report());
    }
    if let Err(e) = comm.finish() {
        eprintln!("throttle-pmm rank {rank}: {e}");
        std::process::exit(1)
    }
    if !result.verified {
        eprintln!(
            "throttle-pmm rank {rank}: verification failed: {}",
            result.verification
        );
        std::process::exit(3)
    }
}
