//! Soak load for `bench/soak.sh`: mixed traffic through forwards for a long time while the
//! bandwidth changes every 200 ms, every byte checked, the agents' memory and descriptors
//! sampled.
//!
//! `soak --minutes M --token-file F --control ADDR,.. --pids PID,.. --echo LISTEN=FORWARD ..`
//!
//! For each `--echo LISTEN=FORWARD` it runs an echo server on LISTEN (the far end of a
//! forward) and sends through FORWARD: long streams (a deterministic pattern, echoed and
//! checked byte by byte, reopened every few seconds) and short connections (1 B to 256 KiB,
//! echoed and checked). A changer sets a random percentage (or `unlimited`) on every
//! control address every 200 ms. Every 10 s it prints a sample: the agents' RSS and open
//! descriptors, bytes checked, connections, errors. At the end it prints the verdict: no
//! byte wrong, no connection failed, RSS and descriptors flat (the last sample within 10 %
//! + 4 MiB and + 16 descriptors of the first sample after one minute of warm-up).

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

#[derive(Default)]
struct Counters {
    bytes: AtomicU64,
    connections: AtomicU64,
    errors: AtomicU64,
    rate_changes: AtomicU64,
}

struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.0 = x;
        x
    }
}

fn arg_values(args: &[String], flag: &str) -> Vec<String> {
    args.windows(2)
        .filter(|w| w[0] == flag)
        .map(|w| w[1].clone())
        .collect()
}

fn echo_server(listen: String) {
    let l = TcpListener::bind(&listen).unwrap_or_else(|e| panic!("bind {listen}: {e}"));
    std::thread::spawn(move || {
        for c in l.incoming() {
            let Ok(mut c) = c else { continue };
            std::thread::spawn(move || {
                let Ok(mut r) = c.try_clone() else { return };
                let _ = std::io::copy(&mut r, &mut c);
                let _ = c.shutdown(std::net::Shutdown::Write);
            });
        }
    });
}

/// A deterministic byte stream that sender and checker both generate.
struct Pattern {
    rng: Rng,
    pending: Vec<u8>,
}

impl Pattern {
    fn new(seed: u64) -> Pattern {
        Pattern {
            rng: Rng(seed | 1),
            pending: Vec::new(),
        }
    }

    /// The next `n` bytes of the stream.
    fn take(&mut self, n: usize) -> Vec<u8> {
        while self.pending.len() < n {
            let w = self.rng.next().to_le_bytes();
            self.pending.extend_from_slice(&w);
        }
        let rest = self.pending.split_off(n);
        std::mem::replace(&mut self.pending, rest)
    }
}

/// Send `len` pattern bytes of `seed` through `forward` and check the echo; true if exact.
fn exchange(forward: &str, seed: u64, len: usize, c: &Counters) -> bool {
    let Ok(mut s) = TcpStream::connect(forward) else {
        return false;
    };
    let _ = s.set_read_timeout(Some(Duration::from_secs(120)));
    let Ok(mut w) = s.try_clone() else {
        return false;
    };
    let writer = std::thread::spawn(move || {
        let mut p = Pattern::new(seed);
        let mut left = len;
        while left > 0 {
            let n = left.min(64 * 1024);
            if w.write_all(&p.take(n)).is_err() {
                return false;
            }
            left -= n;
        }
        w.shutdown(std::net::Shutdown::Write).is_ok()
    });
    let mut p = Pattern::new(seed);
    let mut got = vec![0u8; 64 * 1024];
    let mut checked = 0usize;
    let ok = loop {
        match s.read(&mut got) {
            Ok(0) => break checked == len,
            Ok(n) => {
                if p.take(n) != got[..n] {
                    break false;
                }
                checked += n;
                c.bytes.fetch_add(n as u64, Ordering::Relaxed);
            }
            Err(_) => break false,
        }
    };
    let wrote = writer.join().unwrap_or(false);
    ok && wrote
}

fn http_put(addr: &str, token: &str, body: &str) -> bool {
    let Ok(mut s) = TcpStream::connect(addr) else {
        return false;
    };
    let _ = s.set_read_timeout(Some(Duration::from_secs(5)));
    let req = format!(
        "PUT /shape HTTP/1.1\r\nHost: x\r\nConnection: close\r\nAuthorization: Bearer {token}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    );
    if s.write_all(req.as_bytes()).is_err() {
        return false;
    }
    let mut out = String::new();
    let _ = s.read_to_string(&mut out);
    out.starts_with("HTTP/1.1 200")
}

fn rss_kib(pid: &str) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmRSS:"))
                .and_then(|l| l.split_whitespace().nth(1).and_then(|v| v.parse().ok()))
        })
        .unwrap_or(0)
}

fn fds(pid: &str) -> u64 {
    std::fs::read_dir(format!("/proc/{pid}/fd"))
        .map(|d| d.count() as u64)
        .unwrap_or(0)
}

/// The command line.
struct Options {
    minutes: f64,
    token: String,
    controls: Vec<String>,
    pids: Vec<String>,
    /// (LISTEN, FORWARD) pairs.
    echoes: Vec<(String, String)>,
    long_streams: usize,
}

impl Options {
    fn parse(args: &[String]) -> Options {
        let list = |flag: &str| -> Vec<String> {
            arg_values(args, flag)
                .iter()
                .flat_map(|v| v.split(',').map(str::to_string).collect::<Vec<_>>())
                .collect()
        };
        let o = Options {
            minutes: arg_values(args, "--minutes")
                .first()
                .and_then(|m| m.parse().ok())
                .unwrap_or(30.0),
            token: arg_values(args, "--token-file")
                .first()
                .map(|f| {
                    std::fs::read_to_string(f)
                        .expect("token file")
                        .trim()
                        .to_string()
                })
                .expect("--token-file"),
            controls: list("--control"),
            pids: list("--pids"),
            echoes: arg_values(args, "--echo")
                .iter()
                .map(|e| {
                    let (l, f) = e.split_once('=').expect("--echo LISTEN=FORWARD");
                    (l.to_string(), f.to_string())
                })
                .collect(),
            long_streams: arg_values(args, "--long")
                .first()
                .and_then(|v| v.parse().ok())
                .unwrap_or(2),
        };
        if o.controls.is_empty() || o.pids.is_empty() || o.echoes.is_empty() {
            eprintln!("usage: soak --minutes M --token-file F --control ADDR,.. --pids PID,.. --echo LISTEN=FORWARD [--long N]");
            std::process::exit(2);
        }
        o
    }
}

/// One sample: minutes since the start, RSS (KiB) and open descriptors per agent.
type Sample = (f64, Vec<u64>, Vec<u64>);

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let o = Options::parse(&args);
    let c = Arc::new(Counters::default());
    let stop = Arc::new(AtomicBool::new(false));
    let duration = Duration::from_secs_f64(o.minutes * 60.0);
    let start = Instant::now();
    let mut workers = Vec::new();
    for (i, (listen, forward)) in o.echoes.iter().enumerate() {
        echo_server(listen.clone());
        std::thread::sleep(Duration::from_millis(50));
        workers.extend(traffic(i, forward, o.long_streams, &c, &stop));
    }
    workers.push(rate_changer(&o, &c, &stop));
    let samples = sample(&o.pids, &c, start, duration);
    stop.store(true, Ordering::Relaxed);
    // Leave the link unlimited so the workers drain quickly.
    for a in &o.controls {
        http_put(a, &o.token, r#"{"pct": "unlimited"}"#);
    }
    for w in workers {
        let _ = w.join();
    }
    let errors = c.errors.load(Ordering::Relaxed);
    let flat = flat(&o.pids, &samples);
    println!(
        "soak: {:.1} min, {:.2} GiB checked byte by byte, {} connections, {} rate changes, {} errors: {}",
        start.elapsed().as_secs_f64() / 60.0,
        c.bytes.load(Ordering::Relaxed) as f64 / (1u64 << 30) as f64,
        c.connections.load(Ordering::Relaxed),
        c.rate_changes.load(Ordering::Relaxed),
        errors,
        if errors == 0 && flat { "PASS" } else { "FAIL" }
    );
    std::process::exit(if errors == 0 && flat { 0 } else { 1 });
}

/// The traffic through echo `i`'s forward: `long` long streams (4..64 MiB each, reopened
/// when done) and one thread of short connections, until `stop`.
fn traffic(
    i: usize,
    forward: &str,
    long: usize,
    c: &Arc<Counters>,
    stop: &Arc<AtomicBool>,
) -> Vec<std::thread::JoinHandle<()>> {
    let mut workers = Vec::new();
    for k in 0..long {
        let (forward, c, stop) = (forward.to_string(), c.clone(), stop.clone());
        workers.push(std::thread::spawn(move || {
            let mut rng = Rng(0x5eed ^ (((i * 31 + k) as u64 + 1) * 0x9E37_79B9));
            while !stop.load(Ordering::Relaxed) {
                let len = (4 << 20) + (rng.next() % (60 << 20)) as usize;
                c.connections.fetch_add(1, Ordering::Relaxed);
                if !exchange(&forward, rng.next(), len, &c) {
                    c.errors.fetch_add(1, Ordering::Relaxed);
                    eprintln!("soak: a long stream through {forward} failed");
                }
            }
        }));
    }
    let (forward, c, stop) = (forward.to_string(), c.clone(), stop.clone());
    workers.push(std::thread::spawn(move || {
        let mut rng = Rng(0xfeed ^ ((i as u64 + 7) * 0x9E37_79B9));
        while !stop.load(Ordering::Relaxed) {
            let len = 1 + (rng.next() % (256 * 1024)) as usize;
            c.connections.fetch_add(1, Ordering::Relaxed);
            if !exchange(&forward, rng.next(), len, &c) {
                c.errors.fetch_add(1, Ordering::Relaxed);
                eprintln!("soak: a short connection through {forward} failed");
            }
        }
    }));
    workers
}

/// A thread that sets a random percentage (or `unlimited`) on every control address every
/// 200 ms until `stop`.
fn rate_changer(
    o: &Options,
    c: &Arc<Counters>,
    stop: &Arc<AtomicBool>,
) -> std::thread::JoinHandle<()> {
    let (c, stop, token, controls) = (c.clone(), stop.clone(), o.token.clone(), o.controls.clone());
    std::thread::spawn(move || {
        let steps = [
            "1",
            "2",
            "5",
            "10",
            "20",
            "35",
            "50",
            "75",
            "100",
            "\"unlimited\"",
        ];
        let mut rng = Rng(0xc0ffee);
        while !stop.load(Ordering::Relaxed) {
            let pct = steps[(rng.next() % steps.len() as u64) as usize];
            let body = format!(r#"{{"pct": {pct}}}"#);
            for a in &controls {
                if !http_put(a, &token, &body) {
                    eprintln!("soak: PUT /shape on {a} failed");
                    c.errors.fetch_add(1, Ordering::Relaxed);
                }
            }
            c.rate_changes.fetch_add(1, Ordering::Relaxed);
            std::thread::sleep(Duration::from_millis(200));
        }
    })
}

/// Print a sample of the agents (`pids`) and the counters every 10 s until `duration`
/// has passed since `start`; returns the samples.
fn sample(pids: &[String], c: &Counters, start: Instant, duration: Duration) -> Vec<Sample> {
    println!(
        "{:>7} {:>28} {:>16} {:>12} {:>11} {:>8} {:>7}",
        "minute",
        "RSS MiB per agent",
        "fds per agent",
        "checked GiB",
        "connections",
        "changes",
        "errors"
    );
    let mut samples: Vec<Sample> = Vec::new();
    while start.elapsed() < duration {
        std::thread::sleep(Duration::from_secs(10).min(duration.saturating_sub(start.elapsed())));
        let rss: Vec<u64> = pids.iter().map(|p| rss_kib(p)).collect();
        let fd: Vec<u64> = pids.iter().map(|p| fds(p)).collect();
        let t = start.elapsed().as_secs_f64() / 60.0;
        println!(
            "{:>7.1} {:>28} {:>16} {:>12.2} {:>11} {:>8} {:>7}",
            t,
            rss.iter()
                .map(|k| format!("{:.1}", *k as f64 / 1024.0))
                .collect::<Vec<_>>()
                .join(" "),
            fd.iter()
                .map(|f| f.to_string())
                .collect::<Vec<_>>()
                .join(" "),
            c.bytes.load(Ordering::Relaxed) as f64 / (1u64 << 30) as f64,
            c.connections.load(Ordering::Relaxed),
            c.rate_changes.load(Ordering::Relaxed),
            c.errors.load(Ordering::Relaxed)
        );
        samples.push((t, rss, fd));
    }
    samples
}

/// Whether every agent's RSS and descriptors stayed flat: the last sample within 10 % +
/// 4 MiB and + 16 descriptors of the first after one minute of warm-up. Prints each.
fn flat(pids: &[String], samples: &[Sample]) -> bool {
    let base = samples.iter().find(|s| s.0 >= 1.0).or(samples.first());
    let mut flat = true;
    if let (Some(b), Some(l)) = (base, samples.last()) {
        for (i, pid) in pids.iter().enumerate() {
            let rss_ok = l.1[i] as f64 <= b.1[i] as f64 * 1.10 + 4096.0;
            let fd_ok = l.2[i] <= b.2[i] + 16;
            println!(
                "agent {}: RSS {:.1} -> {:.1} MiB ({}), fds {} -> {} ({})",
                pid,
                b.1[i] as f64 / 1024.0,
                l.1[i] as f64 / 1024.0,
                if rss_ok { "flat" } else { "GREW" },
                b.2[i],
                l.2[i],
                if fd_ok { "flat" } else { "GREW" }
            );
            flat &= rss_ok && fd_ok;
        }
    }
    flat
}
