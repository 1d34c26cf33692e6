//! LogGPS measurement rank (Mizutani et al.; docs/method.md). Started by throttle agents
//! (`throttle-ctl model loggps`); rank 0 reports L, o_s, o_r, g and G through the link.

use clap::Parser;
use throttle_proto::workload::LogGpsOptions;
use workloads::comm::Comm;
use workloads::loggps;

/// One rank of the LogGPS measurement: rank 0 against rank 1 (ping-pong, trains, a long
/// stream), and the master's overheads with all other ranks as peers.
#[derive(Parser, Debug)]
#[command(version)]
struct Args {
    #[command(flatten)]
    options: LogGpsOptions,
}

fn main() {
    let args = Args::parse();
    let cfg = args.options;
    if let Err(e) = cfg.check() {
        eprintln!("throttle-loggps: {e}");
        std::process::exit(2)
    }
    if let Err(e) =
        workloads::fits_this_node(&throttle_proto::workload::Options::LogGps(cfg.clone()))
    {
        eprintln!("throttle-loggps: {e}");
        std::process::exit(2)
    }
    let comm = Comm::from_env().unwrap_or_else(|e| {
        eprintln!("throttle-loggps: {e}");
        std::process::exit(2)
    });
    let rank = comm.rank();
    let result = match loggps::measure(&comm, &cfg) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("throttle-loggps rank {rank}: {e}");
            std::process::exit(1)
        }
    };
    if let Some(r) = &result {
        println!(
            "loggps P={}: L {:.1} us, o_s {:.1} us, o_r {:.1} us, g {:.1} us, G {:.3} ns/B ({:.1} MB/s), master o_s {:.1} us o_r {:.1} us",
            r.procs,
            r.latency * 1e6,
            r.sizes[0].send_overhead * 1e6,
            r.sizes[0].recv_overhead * 1e6,
            r.gap * 1e6,
            r.gap_per_byte * 1e9,
            1e-6 / r.gap_per_byte,
            r.master_send_overhead * 1e6,
            r.master_recv_overhead * 1e6,
        );
        workloads::print_result(&r.report());
    }
    if let Err(e) = comm.finish() {
        eprintln!("throttle-loggps rank {rank}: {e}");
        std::process::exit(1)
    }
}
