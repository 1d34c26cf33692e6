//! Round-trip probe for `bench/latency.sh` and `bench/fidelity.sh`.
//!
//! `pingpong server ADDR` echoes messages: each connection starts with the message size
//! (u32, big-endian), then every message of that size is sent back whole.
//! `pingpong client ADDR [COUNT] [SIZE] [PAUSE_US] [MIN_SECONDS]` sends messages of SIZE
//! bytes one at a time, waits PAUSE_US microseconds between exchanges (a program that
//! computes between messages), and goes on past COUNT until MIN_SECONDS have passed; it
//! prints the round-trip times in microseconds (median, p10, p90, p99, mean) as one JSON
//! line. `pingpong connect ADDR [COUNT] [SIZE]` opens a new connection for every message
//! instead: connection set-up plus the first round trip, which through the agents
//! includes their authenticated handshake.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::time::{Duration, Instant};

/// Largest message the server accepts (the size comes from the network).
const MAX_SIZE: usize = 64 << 20;

fn arg<T: std::str::FromStr>(args: &[String], i: usize, default: T) -> T {
    match args.get(i) {
        None => default,
        Some(s) => s.parse().unwrap_or_else(|_| {
            eprintln!("pingpong: cannot read argument {i}: {s:?}");
            std::process::exit(2)
        }),
    }
}

fn open(addr: &str, size: usize) -> TcpStream {
    let mut c = TcpStream::connect(addr).unwrap_or_else(|e| panic!("connect {addr}: {e}"));
    c.set_nodelay(true).expect("nodelay");
    c.write_all(&(size as u32).to_be_bytes())
        .expect("write size");
    c
}

fn exchange(c: &mut TcpStream, buf: &mut [u8]) {
    c.write_all(buf).expect("write");
    c.read_exact(buf).expect("read");
}

fn print(rtts: &mut [f64], size: usize) {
    rtts.sort_by(|a, b| a.total_cmp(b));
    let q = |p: f64| rtts[((rtts.len() as f64 - 1.0) * p).round() as usize];
    let mean = rtts.iter().sum::<f64>() / rtts.len() as f64;
    println!(
        "{{\"count\":{},\"size\":{size},\"median_us\":{:.1},\"p10_us\":{:.1},\"p90_us\":{:.1},\"p99_us\":{:.1},\"mean_us\":{:.1}}}",
        rtts.len(),
        q(0.5),
        q(0.1),
        q(0.9),
        q(0.99),
        mean
    );
}

fn serve(mut c: TcpStream) {
    let _ = c.set_nodelay(true);
    let mut size = [0u8; 4];
    if c.read_exact(&mut size).is_err() {
        return;
    }
    let size = u32::from_be_bytes(size) as usize;
    if size == 0 || size > MAX_SIZE {
        return;
    }
    let mut buf = vec![0u8; size];
    while c.read_exact(&mut buf).is_ok() {
        if c.write_all(&buf).is_err() {
            break;
        }
    }
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let usage = "usage: pingpong server ADDR | pingpong client ADDR [COUNT] [SIZE] [PAUSE_US] [MIN_SECONDS] | pingpong connect ADDR [COUNT] [SIZE]";
    let (Some(mode), Some(addr)) = (args.get(1), args.get(2)) else {
        eprintln!("{usage}");
        std::process::exit(2);
    };
    let size: usize = arg(&args, 4, 64);
    if size == 0 || size > MAX_SIZE {
        eprintln!("pingpong: SIZE must be 1..={MAX_SIZE}");
        std::process::exit(2);
    }
    match mode.as_str() {
        "server" => {
            let l = TcpListener::bind(addr).unwrap_or_else(|e| panic!("bind {addr}: {e}"));
            for c in l.incoming() {
                let Ok(c) = c else { continue };
                std::thread::spawn(move || serve(c));
            }
        }
        "connect" => {
            let count: usize = arg(&args, 3, 2_000);
            let mut buf = vec![7u8; size];
            let mut once = || {
                let t = Instant::now();
                let mut c = open(addr, size);
                exchange(&mut c, &mut buf);
                t.elapsed().as_secs_f64() * 1e6
            };
            for _ in 0..50 {
                once();
            }
            let mut rtts: Vec<f64> = (0..count).map(|_| once()).collect();
            print(&mut rtts, size);
        }
        "client" => {
            let count: usize = arg(&args, 3, 10_000);
            let pause = Duration::from_micros(arg(&args, 5, 0u64));
            let min_time = Duration::from_secs_f64(arg(&args, 6, 0.0f64));
            let mut c = open(addr, size);
            let mut buf = vec![7u8; size];
            // Warm up the path (first stream setup, page faults): a few exchanges, fewer
            // for large messages.
            for _ in 0..(200 * 4096 / size.max(4096)).max(3) {
                exchange(&mut c, &mut buf);
            }
            let mut rtts = Vec::with_capacity(count);
            let start = Instant::now();
            while rtts.len() < count.max(1) || start.elapsed() < min_time {
                if !pause.is_zero() {
                    std::thread::sleep(pause);
                }
                let t = Instant::now();
                exchange(&mut c, &mut buf);
                rtts.push(t.elapsed().as_secs_f64() * 1e6);
            }
            print(&mut rtts, size);
        }
        _ => {
            eprintln!("{usage}");
            std::process::exit(2);
        }
    }
}
