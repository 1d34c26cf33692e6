//! LogGPS parameters measured through the agents (Mizutani et al.; docs/method.md): what one message costs
//! on the emulated link, for `throttle-ctl model loggps`.
//!
//! Rank 0 measures against rank 1 (on another node); ranks 2.. are the rest of the P
//! processes: they open their streams to rank 0 and back first, so rank 0 has P - 1
//! peers as a master has. The methods (ours; Mizutani et al. cite Ino et al. for its own):
//!
//! * **RTT(k)**: ping-pong of k-byte messages, median over the repeats.
//! * **o_s(k)**: time the sending thread spends inside `send` for a k-byte message, the
//!   stream idle before it, median over the repeats.
//! * **o_r(k)**: time the receiving thread spends inside `recv` for a k-byte message that
//!   has already arrived (rank 0 polls until it is there, `Comm::probe`).
//! * **L** = RTT(1)/2 - o_s(1) - o_r(1) (LogP's round trip is 2 (o_s + L + o_r)).
//! * **g**: a train of small messages: (train time - RTT(1)) / (messages - 1).
//! * **G**: seconds per payload byte of a long stream, the slope of the receiver's
//!   arrival times against bytes over the stream's second half (the bucket's burst and
//!   the start-up are in the first half). The stream is sized from a probe to last about
//!   `stream_seconds`.
//! * **o_r(P)**, **o_s(P)**: the master's side with P - 1 peers: every other rank sends
//!   small messages to rank 0, which takes them with `recv_any` once they are there; and
//!   rank 0 sends one to each peer in turn. Medians per call.
//!
//! [`measure`] runs these as phases, in this order on every rank: the streams to and from
//! rank 0 are opened (`open_streams`); per size, smallest first (`size_cost`), the
//! ping-pong (`ping_pong`) and the receive overheads (`receive_overheads`); the train for g
//! (`train_gap`); the stream for G (`stream_send` on rank 0, `stream_receive` on rank 1);
//! the master's side (`master_overheads`).
//!
//! Overheads are the thread's CPU time, not wall time (LogP's o is the time the processor
//! is busy with a message): a `send` that wakes the agent can be preempted by it on a
//! shared machine, and the wall clock charged that wait to o_s (one CI run measured 172 us
//! for a 1-byte send inside a 208 us round trip, so that L came out below zero). Round
//! trips, g and G stay wall time.
//!
//! Per-byte overheads O_s, O_r are the slopes of o_s(k), o_r(k) over the sizes
//! (`per_byte_overheads`).

use std::time::{Duration, Instant};

use serde::Serialize;
use throttle_proto::workload::LogGpsOptions;

use nix::time::{clock_gettime, ClockId};

use crate::comm::{collectives, Comm, CommError};
use crate::stats::median;

const TAG_SETUP: u32 = 40;
const TAG_PING: u32 = 41;
const TAG_PONG: u32 = 42;
const TAG_TRAIN: u32 = 43;
const TAG_STREAM: u32 = 44;
const TAG_ANY: u32 = 45;
const TAG_REPLY: u32 = 46;

/// Chunk of the long stream (G).
const CHUNK: usize = 256 * 1024;

/// Overheads and round trip at one message size, seconds.
#[derive(Clone, Debug, Serialize)]
pub struct SizeCost {
    pub bytes: usize,
    pub rtt: f64,
    pub send_overhead: f64,
    pub recv_overhead: f64,
}

/// What rank 0 reports.
#[derive(Clone, Debug, Serialize)]
pub struct LogGpsResult {
    pub procs: usize,
    pub sizes: Vec<SizeCost>,
    /// L, seconds.
    pub latency: f64,
    /// g, seconds between consecutive small messages.
    pub gap: f64,
    /// G, seconds per payload byte of a long stream.
    pub gap_per_byte: f64,
    /// Bytes of the stream G was measured on.
    pub stream_bytes: u64,
    /// O_s, O_r: seconds per byte of send and receive overhead (slopes over the sizes).
    pub send_per_byte: f64,
    pub recv_per_byte: f64,
    /// o_s, o_r of a small message at the master with P - 1 peers, seconds.
    pub master_send_overhead: f64,
    pub master_recv_overhead: f64,
    /// Wall time of the whole measurement.
    pub seconds: f64,
}

impl LogGpsResult {
    pub fn report(&self) -> throttle_proto::result::WorkloadResult {
        use throttle_proto::result::{Check, WorkloadResult};
        let mut metrics: std::collections::BTreeMap<String, f64> = [
            ("latency", self.latency),
            ("gap", self.gap),
            ("gap_per_byte", self.gap_per_byte),
            ("send_per_byte", self.send_per_byte),
            ("recv_per_byte", self.recv_per_byte),
            ("master_send_overhead", self.master_send_overhead),
            ("master_recv_overhead", self.master_recv_overhead),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v))
        .collect();
        // A metric must be a number on the result line (NaN would void the line).
        metrics.retain(|_, v| v.is_finite());
        for s in &self.sizes {
            metrics.insert(format!("rtt_{}", s.bytes), s.rtt);
            metrics.insert(format!("send_overhead_{}", s.bytes), s.send_overhead);
            metrics.insert(format!("recv_overhead_{}", s.bytes), s.recv_overhead);
        }
        WorkloadResult {
            workload: "loggps".into(),
            seconds: Some(self.seconds),
            check: Check::Passed,
            metrics,
            detail: serde_json::to_value(self).unwrap_or_default(),
        }
    }
}

/// CPU seconds this thread has used so far (`CLOCK_THREAD_CPUTIME_ID`). Zero if the clock
/// cannot be read (it always can on Linux), which shows as a zero overhead rather than a
/// wrong one.
fn thread_cpu() -> f64 {
    clock_gettime(ClockId::CLOCK_THREAD_CPUTIME_ID)
        .map(|t| t.tv_sec() as f64 + t.tv_nsec() as f64 * 1e-9)
        .unwrap_or(0.0)
}

/// Measures the CPU time of single calls. Reading this clock is a system call (no vDSO):
/// the difference of two reads around a call holds one read's cost as well, about 2 us
/// on a VM, more than the o_r being measured. The median of back-to-back reads is that
/// cost, taken off every measurement.
struct CpuTimer {
    read_cost: f64,
}

impl CpuTimer {
    fn calibrated() -> CpuTimer {
        let empty = (0..101)
            .map(|_| {
                let c = thread_cpu();
                thread_cpu() - c
            })
            .collect();
        CpuTimer {
            read_cost: median(empty),
        }
    }

    /// `f`'s result and the CPU seconds this thread spent in it (never below zero).
    fn time<T>(&self, f: impl FnOnce() -> T) -> (T, f64) {
        let c = thread_cpu();
        let r = f();
        let spent = thread_cpu() - c - self.read_cost;
        (r, spent.max(0.0))
    }
}

/// Least-squares slope of y over x.
fn slope(points: &[(f64, f64)]) -> f64 {
    let n = points.len() as f64;
    if points.len() < 2 {
        return f64::NAN;
    }
    let mx = points.iter().map(|p| p.0).sum::<f64>() / n;
    let my = points.iter().map(|p| p.1).sum::<f64>() / n;
    let sxx: f64 = points.iter().map(|p| (p.0 - mx).powi(2)).sum();
    let sxy: f64 = points.iter().map(|p| (p.0 - mx) * (p.1 - my)).sum();
    if sxx > 0.0 {
        sxy / sxx
    } else {
        f64::NAN
    }
}

fn f64_bytes(v: f64) -> [u8; 8] {
    v.to_le_bytes()
}

fn f64_from(b: &[u8]) -> Result<f64, CommError> {
    b.get(..8)
        .and_then(|s| <[u8; 8]>::try_from(s).ok())
        .map(f64::from_le_bytes)
        .ok_or_else(|| CommError::Protocol("expected an 8-byte number".into()))
}

/// Run the measurement on every rank; rank 0 gets the result.
pub fn measure(comm: &Comm, cfg: &LogGpsOptions) -> Result<Option<LogGpsResult>, CommError> {
    let p = comm.size();
    cfg.check()
        .and_then(|()| cfg.check_procs(p))
        .map_err(|e| CommError::Setup(e.to_string()))?;
    let mut sizes_asked = cfg.sizes.clone();
    sizes_asked.sort_unstable();
    sizes_asked.dedup();
    let rank = comm.rank();
    let started = Instant::now();
    let world = comm.world();
    let cpu = CpuTimer::calibrated();
    open_streams(comm)?;
    collectives::barrier(comm, &world)?;

    // Smallest first: L, o and g are those of the smallest message.
    let mut sizes = Vec::new();
    for &k in &sizes_asked {
        let cost = size_cost(comm, &cpu, k, cfg.repeats)?;
        if rank == 0 {
            sizes.push(cost);
        }
    }
    let gap = train_gap(comm, cfg.train, &sizes)?;
    let (gap_per_byte, stream_bytes) = match rank {
        0 => stream_send(comm, cfg.stream_seconds)?,
        1 => {
            stream_receive(comm)?;
            (f64::NAN, 0)
        }
        _ => (f64::NAN, 0),
    };

    // The master's side with P - 1 peers.
    collectives::barrier(comm, &world)?;
    let (master_send, master_recv) = master_overheads(comm, &cpu, cfg.per_peer, &sizes)?;
    collectives::barrier(comm, &world)?;
    if rank != 0 {
        return Ok(None);
    }
    let s0 = &sizes[0];
    let (send_per_byte, recv_per_byte) = per_byte_overheads(&sizes);
    Ok(Some(LogGpsResult {
        procs: p,
        latency: (s0.rtt / 2.0 - s0.send_overhead - s0.recv_overhead).max(0.0),
        gap,
        gap_per_byte,
        stream_bytes,
        send_per_byte,
        recv_per_byte,
        master_send_overhead: median(master_send),
        master_recv_overhead: median(master_recv),
        seconds: started.elapsed().as_secs_f64(),
        sizes,
    }))
}

/// Set-up: every stream to and from rank 0 exists before anything is timed.
fn open_streams(comm: &Comm) -> Result<(), CommError> {
    if comm.rank() == 0 {
        for r in 1..comm.size() {
            comm.recv(r, TAG_SETUP)?;
            comm.send(r, TAG_SETUP, &[0])?;
        }
    } else {
        comm.send(0, TAG_SETUP, &[0])?;
        comm.recv(0, TAG_SETUP)?;
    }
    Ok(())
}

/// RTT(k), o_s(k), o_r(k): medians over the repeats on rank 0 (NaN on the other ranks).
fn size_cost(comm: &Comm, cpu: &CpuTimer, k: usize, repeats: u32) -> Result<SizeCost, CommError> {
    let msg = vec![7u8; k.max(1)];
    let (rtts, sends) = ping_pong(comm, cpu, &msg, repeats)?;
    let rtt = median(rtts.clone());
    let recvs = receive_overheads(comm, cpu, &msg, repeats, rtt)?;
    Ok(SizeCost {
        bytes: msg.len(),
        rtt,
        send_overhead: median(sends),
        recv_overhead: median(recvs),
    })
}

/// O_s, O_r: the slopes of o_s(k) and o_r(k) over the sizes, seconds per byte.
fn per_byte_overheads(sizes: &[SizeCost]) -> (f64, f64) {
    let send_per_byte = slope(
        &sizes
            .iter()
            .map(|s| (s.bytes as f64, s.send_overhead))
            .collect::<Vec<_>>(),
    );
    let recv_per_byte = slope(
        &sizes
            .iter()
            .map(|s| (s.bytes as f64, s.recv_overhead))
            .collect::<Vec<_>>(),
    );
    (send_per_byte, recv_per_byte)
}

/// Ping-pong of `msg` between ranks 0 and 1: RTT and the send overhead on an idle stream.
/// Returns rank 0's round trips and send overheads (s), five warm-up exchanges left out
/// (empty on the other ranks).
fn ping_pong(
    comm: &Comm,
    cpu: &CpuTimer,
    msg: &[u8],
    repeats: u32,
) -> Result<(Vec<f64>, Vec<f64>), CommError> {
    let (mut rtts, mut sends) = (Vec::new(), Vec::new());
    for i in 0..repeats + 5 {
        match comm.rank() {
            0 => {
                let t = Instant::now();
                let (sent, s) = cpu.time(|| comm.send(1, TAG_PING, msg));
                sent?;
                comm.recv(1, TAG_PONG)?;
                if i >= 5 {
                    rtts.push(t.elapsed().as_secs_f64());
                    sends.push(s);
                }
            }
            1 => {
                comm.recv(0, TAG_PING)?;
                comm.send(0, TAG_PONG, msg)?;
            }
            _ => {}
        }
    }
    Ok((rtts, sends))
}

/// Receive overhead: rank 1 sends `msg`, and rank 0 calls recv once the message is there.
/// Returns rank 0's receive overheads (s), five warm-up exchanges left out (empty on the
/// other ranks); `rtt` bounds the wait for the message.
fn receive_overheads(
    comm: &Comm,
    cpu: &CpuTimer,
    msg: &[u8],
    repeats: u32,
    rtt: f64,
) -> Result<Vec<f64>, CommError> {
    let mut recvs = Vec::new();
    for i in 0..repeats + 5 {
        match comm.rank() {
            0 => {
                // Until the message is there (at most ten round trips, then it is
                // taken as it comes: waiting for it uses no CPU time, so it does
                // not count as o_r).
                let give_up = Instant::now() + Duration::from_secs_f64((10.0 * rtt).max(1e-3));
                while !comm.probe(1) && Instant::now() < give_up {
                    std::thread::sleep(Duration::from_micros(20));
                }
                let (got, o) = cpu.time(|| comm.recv(1, TAG_PING));
                got?;
                if i >= 5 {
                    recvs.push(o);
                }
                comm.send(1, TAG_PONG, &[0])?;
            }
            1 => {
                comm.send(0, TAG_PING, msg)?;
                comm.recv(0, TAG_PONG)?;
            }
            _ => {}
        }
    }
    Ok(recvs)
}

/// g: a train of `train` small messages from rank 0 to rank 1, acknowledged at its end.
/// Returns (train time - RTT(1)) / (messages - 1) on rank 0 (`sizes[0]` is the smallest
/// size), NaN elsewhere.
fn train_gap(comm: &Comm, train: u32, sizes: &[SizeCost]) -> Result<f64, CommError> {
    let mut gap = f64::NAN;
    match comm.rank() {
        0 => {
            let t = Instant::now();
            for _ in 0..train {
                comm.send(1, TAG_TRAIN, &[1])?;
            }
            comm.recv(1, TAG_PONG)?;
            let total = t.elapsed().as_secs_f64();
            gap = ((total - sizes[0].rtt) / (train - 1) as f64).max(0.0);
        }
        1 => {
            for _ in 0..train {
                comm.recv(0, TAG_TRAIN)?;
            }
            comm.send(0, TAG_PONG, &[0])?;
        }
        _ => {}
    }
    Ok(gap)
}

/// G, rank 0's side: a probe of 16 chunks for the rate, then a stream sized from it to
/// last about `stream_seconds`. Returns G as rank 1 measured it on the stream, and the
/// stream's bytes.
fn stream_send(comm: &Comm, stream_seconds: f64) -> Result<(f64, u64), CommError> {
    let chunk = vec![3u8; CHUNK];
    let mut stream_bytes = 0u64;
    for chunks in [16usize, 0] {
        let n = if chunks > 0 {
            chunks
        } else {
            let probe = f64_from(&comm.recv(1, TAG_REPLY)?)?;
            let rate = if probe > 0.0 { 1.0 / probe } else { 1e9 };
            let bytes = (rate * stream_seconds).clamp(8e6, 2e9);
            (bytes / CHUNK as f64).ceil() as usize
        };
        comm.send(1, TAG_STREAM, &(n as u64).to_le_bytes())?;
        for _ in 0..n {
            comm.send(1, TAG_STREAM, &chunk)?;
        }
        stream_bytes = (n * CHUNK) as u64;
    }
    let gap_per_byte = f64_from(&comm.recv(1, TAG_REPLY)?)?;
    Ok((gap_per_byte, stream_bytes))
}

/// G, rank 1's side: for the probe and the stream, the slope of the arrival times against
/// bytes over the second half, sent back to rank 0.
fn stream_receive(comm: &Comm) -> Result<(), CommError> {
    for _ in 0..2 {
        let head = comm.recv(0, TAG_STREAM)?;
        let n = head
            .get(..8)
            .and_then(|b| <[u8; 8]>::try_from(b).ok())
            .map(u64::from_le_bytes)
            .ok_or_else(|| CommError::Protocol("stream header".into()))? as usize;
        let t0 = Instant::now();
        let mut points = Vec::with_capacity(n);
        let mut bytes = 0usize;
        for _ in 0..n {
            bytes += comm.recv(0, TAG_STREAM)?.len();
            points.push((bytes as f64, t0.elapsed().as_secs_f64()));
        }
        let g = slope(&points[n / 2..]);
        comm.send(0, TAG_REPLY, &f64_bytes(g))?;
    }
    Ok(())
}

/// o_s(P), o_r(P): every other rank sends rank 0 `per_peer` small messages, which it takes
/// with `recv_any` once they are there (after a wait of some round trips, `sizes[0]`
/// being the smallest size); then rank 0 sends `per_peer` to each peer in turn. Returns
/// rank 0's send and receive overheads per call (empty on the other ranks).
fn master_overheads(
    comm: &Comm,
    cpu: &CpuTimer,
    per_peer: u32,
    sizes: &[SizeCost],
) -> Result<(Vec<f64>, Vec<f64>), CommError> {
    let p = comm.size();
    let (mut master_send, mut master_recv) = (Vec::new(), Vec::new());
    if comm.rank() == 0 {
        std::thread::sleep(Duration::from_millis(50).max(Duration::from_secs_f64(
            sizes[0].rtt * per_peer as f64 * 2.0,
        )));
        for _ in 0..per_peer as usize * (p - 1) {
            let (got, o) = cpu.time(|| comm.recv_any(TAG_ANY));
            got?;
            master_recv.push(o);
        }
        for _ in 0..per_peer {
            for r in 1..p {
                let (sent, o) = cpu.time(|| comm.send(r, TAG_ANY, &[2]));
                sent?;
                master_send.push(o);
            }
        }
    } else {
        for _ in 0..per_peer {
            comm.send(0, TAG_ANY, &[2])?;
        }
        for _ in 0..per_peer {
            comm.recv(0, TAG_ANY)?;
        }
    }
    Ok((master_send, master_recv))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::comm::run_local;

    #[test]
    fn waiting_inside_a_call_is_not_overhead() {
        // A call that waits (as a send preempted by the agent it woke does) is charged
        // only the CPU it used: with the wall clock this would be about 30 ms.
        let cpu = CpuTimer::calibrated();
        assert!(
            cpu.read_cost >= 0.0 && cpu.read_cost < 1e-3,
            "{}",
            cpu.read_cost
        );
        let ((), waited) = cpu.time(|| std::thread::sleep(Duration::from_millis(30)));
        assert!(waited < 5e-3, "a 30 ms sleep counted {waited} s");
        // Work is charged: a loop until this thread has used 20 ms of CPU.
        let ((), worked) = cpu.time(|| {
            let start = thread_cpu();
            while thread_cpu() - start < 0.02 {}
        });
        assert!(worked >= 0.015, "20 ms of work counted {worked} s");
    }

    #[test]
    fn in_process_ranks_give_finite_parameters_and_a_stream_slope() {
        let results = run_local(3, |c| {
            measure(
                &c,
                &LogGpsOptions {
                    sizes: vec![4096, 1],
                    repeats: 5,
                    train: 10,
                    stream_seconds: 0.05,
                    per_peer: 3,
                },
            )
            .unwrap()
        });
        let r = results[0].as_ref().unwrap();
        assert!(results[1].is_none() && results[2].is_none());
        assert_eq!(r.procs, 3);
        assert_eq!(r.sizes.len(), 2);
        for v in [
            r.latency,
            r.gap,
            r.master_recv_overhead,
            r.master_send_overhead,
        ] {
            assert!(v.is_finite() && v >= 0.0, "{r:?}");
        }
        assert!(r.gap_per_byte.is_finite() && r.gap_per_byte > 0.0, "{r:?}");
        assert!(r.stream_bytes >= 8_000_000);
        assert!(r.sizes.iter().all(|s| s.rtt > 0.0));
        assert_eq!(r.sizes[0].bytes, 1);
        assert!(r.send_per_byte.is_finite() && r.recv_per_byte.is_finite());
    }

    #[test]
    fn one_message_size_is_refused() {
        let results = run_local(2, |c| {
            measure(
                &c,
                &LogGpsOptions {
                    sizes: vec![16, 16],
                    ..LogGpsOptions::default()
                },
            )
            .map(|_| ())
            .map_err(|e| e.to_string())
        });
        assert!(results[0].as_ref().unwrap_err().contains("two different"));
    }
}
