//! Many-to-one and all-to-all transfers for `bench/fidelity.sh`.
//!
//! `blast sink ADDR` accepts connections; on each, every round is a size (u64, big-endian)
//! followed by that many bytes, answered with one byte once all have arrived.
//!
//! `blast send ROUNDS BYTES PAUSE_MS FLOW...` runs ROUNDS rounds; in each, every FLOW sends
//! BYTES at the same moment and the round ends when the last one is acknowledged. A FLOW
//! is `NETNS/HOST:PORT` (the connection is made from inside network namespace NETNS, as a
//! program on that node would; `-` for this one). Rounds are PAUSE_MS apart, so each starts
//! on idle links. Prints the round times in microseconds (median, p10, p90) as one JSON
//! line. Needs root for namespaces other than `-`.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

fn fail(msg: String) -> ! {
    eprintln!("blast: {msg}");
    std::process::exit(2)
}

fn serve(mut c: TcpStream) {
    let _ = c.set_nodelay(true);
    let mut buf = vec![0u8; 256 * 1024];
    loop {
        let mut size = [0u8; 8];
        if c.read_exact(&mut size).is_err() {
            return;
        }
        let mut left = u64::from_be_bytes(size);
        while left > 0 {
            let want = left.min(buf.len() as u64) as usize;
            match c.read(&mut buf[..want]) {
                Ok(0) | Err(_) => return,
                Ok(n) => left -= n as u64,
            }
        }
        if c.write_all(&[1]).is_err() {
            return;
        }
    }
}

/// Connect to `addr` from inside the network namespace `netns` (`-`: this one).
fn connect_from(netns: &str, addr: &str) -> TcpStream {
    if netns != "-" {
        let path = format!("/var/run/netns/{netns}");
        let f = std::fs::File::open(&path).unwrap_or_else(|e| fail(format!("{path}: {e}")));
        // This thread only: the socket is made in that namespace and stays there.
        nix::sched::setns(&f, nix::sched::CloneFlags::CLONE_NEWNET)
            .unwrap_or_else(|e| fail(format!("setns {netns}: {e}")));
    }
    let c = TcpStream::connect(addr).unwrap_or_else(|e| fail(format!("connect {addr}: {e}")));
    c.set_nodelay(true).expect("nodelay");
    c
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    match args.get(1).map(String::as_str) {
        Some("sink") => {
            let addr = args.get(2).unwrap_or_else(|| fail("sink ADDR".into()));
            let l = TcpListener::bind(addr).unwrap_or_else(|e| fail(format!("bind {addr}: {e}")));
            for c in l.incoming().flatten() {
                std::thread::spawn(move || serve(c));
            }
        }
        Some("send") if args.len() >= 6 => {
            let num = |i: usize| -> u64 {
                args[i]
                    .parse()
                    .unwrap_or_else(|_| fail(format!("not a number: {}", args[i])))
            };
            let (rounds, bytes, pause) = (num(2) as usize, num(3), Duration::from_millis(num(4)));
            let flows = &args[5..];
            // One thread per flow, all waiting at the same barrier before each round.
            let start = Arc::new(Barrier::new(flows.len() + 1));
            let done = Arc::new(Barrier::new(flows.len() + 1));
            let threads: Vec<_> = flows
                .iter()
                .map(|flow| {
                    let (netns, addr) = flow
                        .split_once('/')
                        .unwrap_or_else(|| fail(format!("FLOW is NETNS/HOST:PORT: {flow}")));
                    let (netns, addr) = (netns.to_string(), addr.to_string());
                    let (start, done) = (start.clone(), done.clone());
                    std::thread::spawn(move || {
                        let mut c = connect_from(&netns, &addr);
                        let data = vec![5u8; 256 * 1024];
                        // One warm-up round on this connection alone (connection set-up).
                        for round in 0..=rounds {
                            if round > 0 {
                                start.wait();
                            }
                            c.write_all(&bytes.to_be_bytes()).expect("write");
                            let mut left = bytes;
                            while left > 0 {
                                let n = left.min(data.len() as u64) as usize;
                                c.write_all(&data[..n]).expect("write");
                                left -= n as u64;
                            }
                            let mut ack = [0u8; 1];
                            c.read_exact(&mut ack).expect("ack");
                            if round > 0 {
                                done.wait();
                            }
                        }
                    })
                })
                .collect();
            let mut times = Vec::with_capacity(rounds);
            std::thread::sleep(pause.max(Duration::from_millis(100)));
            for _ in 0..rounds {
                std::thread::sleep(pause);
                let t = Instant::now();
                start.wait();
                done.wait();
                times.push(t.elapsed().as_secs_f64() * 1e6);
            }
            for t in threads {
                let _ = t.join();
            }
            times.sort_by(|a, b| a.total_cmp(b));
            let q = |p: f64| times[((times.len() as f64 - 1.0) * p).round() as usize];
            println!(
                "{{\"rounds\":{rounds},\"bytes\":{bytes},\"flows\":{},\"median_us\":{:.1},\"p10_us\":{:.1},\"p90_us\":{:.1}}}",
                flows.len(),
                q(0.5),
                q(0.1),
                q(0.9)
            );
        }
        _ => fail(
            "usage: blast sink ADDR | blast send ROUNDS BYTES PAUSE_MS NETNS/HOST:PORT...".into(),
        ),
    }
}
