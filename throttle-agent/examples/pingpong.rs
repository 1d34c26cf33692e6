//! Round-trip latency probe for `bench/latency.sh`.
//!
//! `pingpong server ADDR` echoes fixed-size messages; `pingpong client ADDR [COUNT] [SIZE]`
//! sends COUNT messages of SIZE bytes one at a time and prints the round-trip times
//! (median, p90, p99, in microseconds) as one JSON line. `pingpong connect ADDR [COUNT]
//! [SIZE]` opens a new connection for every message instead: connection set-up plus the
//! first round trip, which through the agents includes their authenticated handshake.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::time::Instant;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let usage = "usage: pingpong server ADDR | pingpong client|connect ADDR [COUNT] [SIZE]";
    let (Some(mode), Some(addr)) = (args.get(1), args.get(2)) else {
        eprintln!("{usage}");
        std::process::exit(2);
    };
    let size: usize = args.get(4).and_then(|s| s.parse().ok()).unwrap_or(64);
    match mode.as_str() {
        "server" => {
            let l = TcpListener::bind(addr).unwrap_or_else(|e| panic!("bind {addr}: {e}"));
            for c in l.incoming() {
                let Ok(mut c) = c else { continue };
                std::thread::spawn(move || {
                    let _ = c.set_nodelay(true);
                    let mut buf = vec![0u8; size];
                    while c.read_exact(&mut buf).is_ok() {
                        if c.write_all(&buf).is_err() {
                            break;
                        }
                    }
                });
            }
        }
        "connect" => {
            let count: usize = args.get(3).and_then(|s| s.parse().ok()).unwrap_or(2_000);
            let mut buf = vec![7u8; size];
            let mut once = || {
                let t = Instant::now();
                let mut c =
                    TcpStream::connect(addr).unwrap_or_else(|e| panic!("connect {addr}: {e}"));
                c.set_nodelay(true).expect("nodelay");
                c.write_all(&buf).expect("write");
                c.read_exact(&mut buf).expect("read");
                t.elapsed().as_secs_f64() * 1e6
            };
            for _ in 0..50 {
                once();
            }
            let mut rtts: Vec<f64> = (0..count).map(|_| once()).collect();
            rtts.sort_by(|a, b| a.total_cmp(b));
            let q = |p: f64| rtts[((rtts.len() as f64 - 1.0) * p) as usize];
            println!(
                "{{\"count\":{count},\"size\":{size},\"median_us\":{:.1},\"p90_us\":{:.1},\"p99_us\":{:.1}}}",
                q(0.5),
                q(0.9),
                q(0.99)
            );
        }
        "client" => {
            let count: usize = args.get(3).and_then(|s| s.parse().ok()).unwrap_or(10_000);
            let mut c = TcpStream::connect(addr).unwrap_or_else(|e| panic!("connect {addr}: {e}"));
            c.set_nodelay(true).expect("nodelay");
            let mut buf = vec![7u8; size];
            // Warm up the path (first stream setup, page faults).
            for _ in 0..200 {
                c.write_all(&buf).expect("write");
                c.read_exact(&mut buf).expect("read");
            }
            let mut rtts = Vec::with_capacity(count);
            for _ in 0..count {
                let t = Instant::now();
                c.write_all(&buf).expect("write");
                c.read_exact(&mut buf).expect("read");
                rtts.push(t.elapsed().as_secs_f64() * 1e6);
            }
            rtts.sort_by(|a, b| a.total_cmp(b));
            let q = |p: f64| rtts[((rtts.len() as f64 - 1.0) * p) as usize];
            println!(
                "{{\"count\":{count},\"size\":{size},\"median_us\":{:.1},\"p90_us\":{:.1},\"p99_us\":{:.1}}}",
                q(0.5),
                q(0.9),
                q(0.99)
            );
        }
        _ => {
            eprintln!("{usage}");
            std::process::exit(2);
        }
    }
}
