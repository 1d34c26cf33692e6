//! Many-streams load generator for `bench/scale.sh`.
//!
//! `streams SERVER_LISTEN CONNECT N SECONDS`: listens on SERVER_LISTEN (the far end, put
//! behind a forward), opens N connections to CONNECT (the forward), and has each send a
//! deterministic pattern as fast as it may for SECONDS. The server checks every byte of
//! every stream. Prints one JSON line: streams, bytes verified, errors, the aggregate
//! receive rate over the steady window (after a 5 s warm-up), and the per-stream spread.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

struct Pattern(u64);

impl Pattern {
    fn fill(&mut self, buf: &mut [u8]) {
        for chunk in buf.chunks_mut(8) {
            let mut x = self.0;
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            self.0 = x;
            chunk.copy_from_slice(&x.to_le_bytes()[..chunk.len()]);
        }
    }
}

fn main() {
    let a: Vec<String> = std::env::args().collect();
    if a.len() != 5 {
        eprintln!("usage: streams SERVER_LISTEN CONNECT N SECONDS");
        std::process::exit(2);
    }
    let (listen, connect) = (a[1].clone(), a[2].clone());
    let n: usize = a[3].parse().expect("N");
    let secs: f64 = a[4].parse().expect("SECONDS");
    if let Ok((_, hard)) =
        nix::sys::resource::getrlimit(nix::sys::resource::Resource::RLIMIT_NOFILE)
    {
        let _ =
            nix::sys::resource::setrlimit(nix::sys::resource::Resource::RLIMIT_NOFILE, hard, hard);
    }
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("runtime");
    rt.block_on(run(listen, connect, n, secs));
}

/// What the server counts: bytes verified in all, per stream, and errors.
struct Tally {
    received: AtomicU64,
    errors: AtomicU64,
    per_stream: Vec<AtomicU64>,
}

async fn run(listen: String, connect: String, n: usize, secs: f64) {
    let tally = Arc::new(Tally {
        received: AtomicU64::new(0),
        errors: AtomicU64::new(0),
        per_stream: (0..n).map(|_| AtomicU64::new(0)).collect(),
    });
    serve(&listen, tally.clone());
    let end = Instant::now() + Duration::from_secs_f64(secs);
    let clients: Vec<_> = (0..n as u64)
        .map(|id| tokio::spawn(send(connect.clone(), id, end, tally.clone())))
        .collect();
    let warm = Duration::from_secs_f64((secs * 0.1).min(5.0));
    tokio::time::sleep(warm).await;
    let (t0, b0) = (Instant::now(), tally.received.load(Ordering::Relaxed));
    tokio::time::sleep_until((end - Duration::from_millis(200)).into()).await;
    let (t1, b1) = (Instant::now(), tally.received.load(Ordering::Relaxed));
    for c in clients {
        let _ = c.await;
    }
    // Let the tail drain (bounded), then report.
    let mut last = tally.received.load(Ordering::Relaxed);
    for _ in 0..100 {
        tokio::time::sleep(Duration::from_millis(200)).await;
        let now = tally.received.load(Ordering::Relaxed);
        if now == last {
            break;
        }
        last = now;
    }
    let rate = (b1 - b0) as f64 / (t1 - t0).as_secs_f64();
    let mut shares: Vec<u64> = tally
        .per_stream
        .iter()
        .map(|s| s.load(Ordering::Relaxed))
        .collect();
    shares.sort();
    let active = shares.iter().filter(|&&s| s > 0).count();
    println!(
        "{{\"streams\":{n},\"streams_with_data\":{active},\"bytes_verified\":{},\"errors\":{},\"rate_bytes_per_sec\":{rate:.0},\"min_stream_bytes\":{},\"median_stream_bytes\":{},\"max_stream_bytes\":{}}}",
        tally.received.load(Ordering::Relaxed),
        tally.errors.load(Ordering::Relaxed),
        shares.first().copied().unwrap_or(0),
        shares.get(shares.len() / 2).copied().unwrap_or(0),
        shares.last().copied().unwrap_or(0),
    );
}

/// The far end: accept on `listen` (a deep accept queue, like the agents': a thousand
/// connections arrive at once) and check every stream.
fn serve(listen: &str, tally: Arc<Tally>) {
    let listener = {
        let addr: std::net::SocketAddr = listen.parse().expect("SERVER_LISTEN is IP:PORT");
        let s = if addr.is_ipv4() {
            tokio::net::TcpSocket::new_v4()
        } else {
            tokio::net::TcpSocket::new_v6()
        }
        .expect("socket");
        s.set_reuseaddr(true).expect("reuseaddr");
        s.bind(addr).expect("bind");
        s.listen(4096).expect("listen")
    };
    tokio::spawn(async move {
        loop {
            let Ok((c, _)) = listener.accept().await else {
                continue;
            };
            tokio::spawn(check(c, tally.clone()));
        }
    });
}

/// Read one stream: its id, then its pattern, compared word by word.
async fn check(mut c: TcpStream, tally: Arc<Tally>) {
    let mut id = [0u8; 8];
    if let Err(e) = c.read_exact(&mut id).await {
        eprintln!("streams: server: reading a stream's id: {e}");
        tally.errors.fetch_add(1, Ordering::Relaxed);
        return;
    }
    let id = u64::from_le_bytes(id);
    let mut p = Pattern(id.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1);
    let mut buf = vec![0u8; 64 * 1024];
    let mut want = vec![0u8; 64 * 1024];
    let mut carry: Vec<u8> = Vec::new();
    loop {
        match c.read(&mut buf).await {
            Ok(0) => break,
            Ok(k) => {
                // Compare in whole 8-byte words; keep a partial word for later.
                carry.extend_from_slice(&buf[..k]);
                let whole = carry.len() / 8 * 8;
                let mut off = 0;
                while off < whole {
                    let m = (whole - off).min(want.len());
                    p.fill(&mut want[..m]);
                    if want[..m] != carry[off..off + m] {
                        tally.errors.fetch_add(1, Ordering::Relaxed);
                        return;
                    }
                    off += m;
                }
                carry.drain(..whole);
                tally.received.fetch_add(k as u64, Ordering::Relaxed);
                if let Some(s) = tally.per_stream.get(id as usize) {
                    s.fetch_add(k as u64, Ordering::Relaxed);
                }
            }
            Err(e) => {
                eprintln!("streams: server: stream {id}: read: {e}");
                tally.errors.fetch_add(1, Ordering::Relaxed);
                return;
            }
        }
    }
}

/// One client stream: its id, then its pattern as fast as it may until `end`.
async fn send(connect: String, id: u64, end: Instant, tally: Arc<Tally>) {
    let mut c = match TcpStream::connect(&connect).await {
        Ok(c) => c,
        Err(e) => {
            eprintln!("streams: stream {id}: connect: {e}");
            tally.errors.fetch_add(1, Ordering::Relaxed);
            return;
        }
    };
    if let Err(e) = c.write_all(&id.to_le_bytes()).await {
        eprintln!("streams: stream {id}: first write: {e}");
        tally.errors.fetch_add(1, Ordering::Relaxed);
        return;
    }
    let mut p = Pattern(id.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1);
    let mut buf = vec![0u8; 16 * 1024];
    while Instant::now() < end {
        p.fill(&mut buf);
        if let Err(e) = c.write_all(&buf).await {
            eprintln!("streams: stream {id}: write: {e}");
            tally.errors.fetch_add(1, Ordering::Relaxed);
            return;
        }
    }
    let _ = c.shutdown().await;
}
