//! Master/worker rank (the master/worker thesis; Mizutani et al.). Started by throttle agents
//! (`throttle-ctl run --workload mw`, sweeps over worker counts).

use clap::Parser;
use throttle_proto::workload::MwOptions;
use workloads::comm::Comm;
use workloads::master_worker;

/// One rank of a master/worker program: rank 0 sends each of the other ranks its share of
/// the data (alpha x volume), they compute for compute-seconds / workers and return the
/// rest of the volume; the median iteration time is reported.
#[derive(Parser, Debug)]
#[command(version)]
struct Args {
    #[command(flatten)]
    options: MwOptions,
}

fn main() {
    let args = Args::parse();
    let cfg = args.options;
    if let Err(e) = cfg.check() {
        eprintln!("throttle-mw: {e}");
        std::process::exit(2)
    }
    if let Err(e) = workloads::fits_this_node(&throttle_proto::workload::Options::Mw(cfg.clone())) {
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
