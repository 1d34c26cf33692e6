//! Graph500-style BFS rank. Started by throttle agents (`throttle-ctl run --workload bfs`).

use clap::Parser;
use workloads::bfs::{self, BfsConfig};
use workloads::comm::Comm;

/// One rank of the Graph500-style BFS benchmark (2-D partitioned, validated).
#[derive(Parser, Debug)]
#[command(version)]
struct Args {
    /// Graph scale: 2^SCALE vertices.
    #[arg(long, default_value_t = 16)]
    scale: u32,
    /// Edges per vertex.
    #[arg(long, default_value_t = 16)]
    edge_factor: u32,
    /// Generator seed.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Number of search keys.
    #[arg(long, default_value_t = 64)]
    keys: usize,
    /// Skip validation (for sweeps).
    #[arg(long)]
    no_validate: bool,
    /// Emulate compute: every level's local step lasts as long as on a node scanning this
    /// many million edges per second (the search itself stays real and validated).
    #[arg(long, value_name = "MEPS")]
    emulate_meps: Option<f64>,
}

fn main() {
    let args = Args::parse();
    let comm = Comm::from_env().unwrap_or_else(|e| {
        eprintln!("throttle-bfs: {e}");
        std::process::exit(2)
    });
    let rank = comm.rank();
    let cfg = BfsConfig {
        scale: args.scale,
        edge_factor: args.edge_factor,
        seed: args.seed,
        keys: args.keys,
        validate: !args.no_validate,
        emulate_meps: args.emulate_meps,
    };
    let result = match bfs::benchmark(&comm, &cfg) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("throttle-bfs rank {rank}: {e}");
            std::process::exit(1)
        }
    };
    if rank == 0 {
        print!("{}", bfs::summary(&result));
        workloads::print_result(&result.report());
    }
    if let Err(e) = comm.finish() {
        eprintln!("throttle-bfs rank {rank}: {e}");
        std::process::exit(1)
    }
    if !result.validated && cfg.validate {
        eprintln!("throttle-bfs rank {rank}: {}", result.validation);
        std::process::exit(3)
    }
}
