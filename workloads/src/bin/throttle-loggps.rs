//! LogGPS measurement rank (seeds/003). Started by throttle agents
//! (`throttle-ctl model loggps`); rank 0 reports L, o_s, o_r, g and G through the link.

use clap::Parser;
use workloads::comm::Comm;
use workloads::loggps::{self, LogGpsConfig};

/// One rank of the LogGPS measurement: rank 0 against rank 1 (ping-pong, trains, a long
/// stream), and the master's overheads with all other ranks as peers.
#[derive(Parser, Debug)]
#[command(version)]
struct Args {
    /// Message sizes in bytes for the round trip and the overheads (comma-separated; at
    /// least two different ones: the per-byte overheads are slopes over them).
    #[arg(long, default_value = "1,1024,16384,65536", value_delimiter = ',')]
    sizes: Vec<usize>,
    /// Repeats per size (1 to 100000).
    #[arg(long, default_value_t = 50, value_parser = clap::value_parser!(u32).range(1..=100_000))]
    repeats: u32,
    /// Small messages in the train for g (2 to 1000000).
    #[arg(long, default_value_t = 200, value_parser = clap::value_parser!(u32).range(2..=1_000_000))]
    train: u32,
    /// How long the stream for G should last, seconds (0.05 to 60).
    #[arg(long, default_value_t = 1.0)]
    stream_seconds: f64,
    /// Small messages each rank sends to rank 0 for the master's receive overhead.
    #[arg(long, default_value_t = 20, value_parser = clap::value_parser!(u32).range(1..=100_000))]
    per_peer: u32,
}

fn main() {
    let args = Args::parse();
    if !(args.stream_seconds.is_finite() && (0.05..=60.0).contains(&args.stream_seconds)) {
        eprintln!("throttle-loggps: --stream-seconds must be between 0.05 and 60");
        std::process::exit(2)
    }
    let mut distinct = args.sizes.clone();
    distinct.sort_unstable();
    distinct.dedup();
    if distinct.len() < 2 || args.sizes.iter().any(|&s| s == 0 || s > 64 << 20) {
        eprintln!(
            "throttle-loggps: --sizes needs at least two different sizes, 1 byte to 64 MiB each"
        );
        std::process::exit(2)
    }
    let comm = Comm::from_env().unwrap_or_else(|e| {
        eprintln!("throttle-loggps: {e}");
        std::process::exit(2)
    });
    let rank = comm.rank();
    let cfg = LogGpsConfig {
        sizes: args.sizes,
        repeats: args.repeats as usize,
        train: args.train as usize,
        stream_seconds: args.stream_seconds,
        per_peer: args.per_peer as usize,
    };
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
