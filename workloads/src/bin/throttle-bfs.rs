//! Graph500-style BFS rank. Started by throttle agents (`throttle-ctl run --workload bfs`).

use clap::Parser;
use throttle_proto::workload::BfsOptions;
use workloads::bfs;
use workloads::comm::Comm;

/// One rank of the Graph500-style BFS benchmark (2-D partitioned, validated).
#[derive(Parser, Debug)]
#[command(version)]
struct Args {
    #[command(flatten)]
    options: BfsOptions,
}

fn main() {
    let args = Args::parse();
    let cfg = args.options;
    if let Err(e) = cfg.check() {
        eprintln!("throttle-bfs: {e}");
        std::process::exit(2)
    }
    if let Err(e) = workloads::fits_this_node(&throttle_proto::workload::Options::Bfs(cfg.clone()))
    {
        eprintln!("throttle-bfs: {e}");
        std::process::exit(2)
    }
    let comm = Comm::from_env().unwrap_or_else(|e| {
        eprintln!("throttle-bfs: {e}");
        std::process::exit(2)
    });
    let rank = comm.rank();
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
