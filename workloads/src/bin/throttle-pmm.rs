//! Fox matrix multiplication rank. Started by throttle agents (`throttle-ctl run --workload pmm`).

use clap::Parser;
use throttle_proto::workload::PmmOptions;
use workloads::comm::Comm;
use workloads::pmm;

/// One rank of Fox's broadcast-multiply-roll matrix multiplication (needs a square
/// number of ranks).
#[derive(Parser, Debug)]
#[command(version)]
struct Args {
    #[command(flatten)]
    options: PmmOptions,
}

fn main() {
    let args = Args::parse();
    let cfg = args.options;
    if let Err(e) = cfg.check() {
        eprintln!("throttle-pmm: {e}");
        std::process::exit(2)
    }
    if let Err(e) = workloads::fits_this_node(&throttle_proto::workload::Options::Pmm(cfg.clone()))
    {
        eprintln!("throttle-pmm: {e}");
        std::process::exit(2)
    }
    let comm = Comm::from_env().unwrap_or_else(|e| {
        eprintln!("throttle-pmm: {e}");
        std::process::exit(2)
    });
    let rank = comm.rank();
    let result = match pmm::multiply(&comm, &cfg) {
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
