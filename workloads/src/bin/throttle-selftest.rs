//! A diagnostic rank for the job launcher: exchanges a message around a ring, and on
//! request fails, hangs or leaves a child process behind, so the launcher's handling of
//! each can be checked (`throttle-ctl run --workload program --program throttle-selftest`).

use std::time::Duration;

use clap::Parser;
use workloads::comm::{collectives, Comm};

/// Diagnostic rank: ring exchange, then optionally misbehave.
#[derive(Parser, Debug)]
#[command(version)]
struct Args {
    /// This rank exits with code 7 after the ring exchange, printing why.
    #[arg(long)]
    crash_rank: Option<usize>,
    /// Every rank sleeps this long after the ring exchange (time-limit tests).
    #[arg(long, default_value_t = 0.0)]
    sleep: f64,
    /// Every rank starts a `sleep 1000` child first (stray-process tests).
    #[arg(long)]
    spawn_child: bool,
}

fn main() {
    let args = Args::parse();
    if args.spawn_child {
        let _ = std::process::Command::new("sleep").arg("1000").spawn();
    }
    let comm = Comm::from_env().unwrap_or_else(|e| {
        eprintln!("throttle-selftest: {e}");
        std::process::exit(2)
    });
    let (me, n) = (comm.rank(), comm.size());
    comm.send((me + 1) % n, 9, &(me as u64).to_le_bytes())
        .and_then(|_| comm.recv((me + n - 1) % n, 9))
        .unwrap_or_else(|e| {
            eprintln!("rank {me}: ring exchange failed: {e}");
            std::process::exit(1)
        });
    println!("rank {me} of {n}: ring exchange done");
    if args.crash_rank == Some(me) {
        eprintln!("rank {me}: crashing on purpose (--crash-rank)");
        std::process::exit(7);
    }
    if args.sleep > 0.0 {
        std::thread::sleep(Duration::from_secs_f64(args.sleep));
    }
    if let Err(e) = collectives::barrier(&comm, &comm.world()).and_then(|_| comm.finish()) {
        eprintln!("rank {me}: {e}");
        std::process::exit(1);
    }
    workloads::print_result(&throttle_proto::result::WorkloadResult {
        workload: "selftest".into(),
        seconds: Some(0.0),
        check: throttle_proto::result::Check::Passed,
        ..Default::default()
    });
}
