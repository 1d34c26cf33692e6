//! The copy loop: moves one direction of a stream from a source socket to a sink socket.
//!
//! It knows nothing of rates or delays; it asks a [`Port`] (the link seam) how many bytes
//! may pass and how long a chunk must be held. On Linux the bytes go socket -> pipe ->
//! socket with splice(2), each splice capped at the tokens granted; when the port asks for
//! added delay (or splice is off) chunks are read into memory and released at their time.
//!
//! Legs between two agents are *framed*: each chunk is preceded by its length (u32 BE) and
//! a zero length marks the clean end of the direction. A peer agent that dies mid-stream
//! therefore shows as an error here (no end marker) instead of a silent, short EOF; the
//! caller then resets the local connection so the application sees the failure.

use std::collections::VecDeque;
use std::io;
use std::time::Duration;

use tokio::time::Instant;

use super::socket::{self, Pipe, Socket};
use crate::link::Port;

/// How a leg carries bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Framing {
    /// Plain bytes (an application's socket).
    Raw,
    /// Length-prefixed chunks with an end marker (agent to agent).
    Framed,
}

/// Tunables of the copy loop.
#[derive(Clone, Copy, Debug)]
pub struct PumpOptions {
    /// Use splice(2) where possible.
    pub splice: bool,
    /// Pipe size to ask for, and the largest chunk moved at once.
    pub chunk: usize,
}

impl Default for PumpOptions {
    fn default() -> Self {
        PumpOptions {
            splice: cfg!(target_os = "linux"),
            chunk: 256 * 1024,
        }
    }
}

/// The reading side of one direction; tracks frames on a framed leg.
struct Reader<'a, S> {
    sock: &'a S,
    framing: Framing,
    /// Bytes left in the current frame (framed legs).
    remaining: usize,
    header: [u8; 4],
    header_have: usize,
    ended: bool,
}

impl<'a, S: Socket> Reader<'a, S> {
    fn new(sock: &'a S, framing: Framing) -> Self {
        Reader {
            sock,
            framing,
            remaining: 0,
            header: [0; 4],
            header_have: 0,
            ended: false,
        }
    }

    /// How many bytes may be read before the next frame boundary; 0 at the clean end.
    /// Cancel-safe: a partly read header is kept in `self`.
    async fn budget(&mut self) -> io::Result<usize> {
        if self.ended {
            return Ok(0);
        }
        match self.framing {
            Framing::Raw => Ok(usize::MAX),
            Framing::Framed => {
                while self.remaining == 0 {
                    while self.header_have < 4 {
                        let n = socket::read_some(self.sock, &mut self.header[self.header_have..])
                            .await?;
                        if n == 0 {
                            return Err(peer_vanished());
                        }
                        self.header_have += n;
                    }
                    self.header_have = 0;
                    let len = u32::from_be_bytes(self.header) as usize;
                    if len == 0 {
                        self.ended = true;
                        return Ok(0);
                    }
                    self.remaining = len;
                }
                Ok(self.remaining)
            }
        }
    }

    /// Account for `n` bytes read; `n == 0` is end of input.
    fn consumed(&mut self, n: usize) -> io::Result<()> {
        if n == 0 {
            if self.framing == Framing::Framed {
                return Err(peer_vanished());
            }
            self.ended = true;
        } else if self.framing == Framing::Framed {
            self.remaining -= n;
        }
        Ok(())
    }
}

fn peer_vanished() -> io::Error {
    io::Error::new(
        io::ErrorKind::UnexpectedEof,
        "the peer agent closed the stream without its end marker (agent died or was reset)",
    )
}

/// Write a chunk to the sink, with its length header on a framed leg.
async fn write_chunk<S: Socket>(sink: &S, framing: Framing, data: &[u8]) -> io::Result<()> {
    if framing == Framing::Framed {
        socket::write_all(sink, &(data.len() as u32).to_be_bytes()).await?;
    }
    socket::write_all(sink, data).await
}

/// End the direction: end marker on a framed leg, then half-close.
async fn finish<S: Socket>(sink: &S, framing: Framing) -> io::Result<()> {
    if framing == Framing::Framed {
        socket::write_all(sink, &0u32.to_be_bytes()).await?;
    }
    socket::shutdown_write(sink);
    Ok(())
}

/// Copy one direction until its clean end. Returns the payload bytes moved.
///
/// `port` is the link direction that paces it (`None`: unshaped, e.g. same-node streams).
pub async fn pump<A: Socket, B: Socket>(
    src: &A,
    src_framing: Framing,
    dst: &B,
    dst_framing: Framing,
    port: Option<&Port>,
    opts: PumpOptions,
) -> io::Result<u64> {
    let mut reader = Reader::new(src, src_framing);
    let mut pipe: Option<Pipe> = None;
    let mut buf: Vec<u8> = Vec::new();
    let mut total = 0u64;
    loop {
        let delay = port.map(|p| p.delay()).unwrap_or_default();
        if !delay.is_zero() {
            total += delayed(&mut reader, dst, dst_framing, port, opts).await?;
            if reader.ended {
                break;
            }
            continue;
        }
        let budget = reader.budget().await?;
        if budget == 0 {
            break;
        }
        src.readable().await?;
        if opts.splice {
            if pipe.is_none() {
                pipe = Some(Pipe::new(opts.chunk)?);
            }
            let p = pipe
                .as_ref()
                .ok_or_else(|| io::Error::other("pipe missing"))?;
            let want = budget.min(p.capacity());
            let grant = match port {
                Some(port) => port.grant(want).await,
                None => want,
            };
            let n = match socket::splice_in(src, p, grant).await {
                Ok(n) => n,
                Err(e) => {
                    refund(port, grant);
                    return Err(e);
                }
            };
            refund(port, grant - n);
            reader.consumed(n)?;
            if n == 0 {
                break;
            }
            record(port, n);
            if dst_framing == Framing::Framed {
                socket::write_all(dst, &(n as u32).to_be_bytes()).await?;
            }
            socket::splice_out(p, dst, n).await?;
            total += n as u64;
        } else {
            if buf.is_empty() {
                buf = vec![0u8; opts.chunk];
            }
            let want = budget.min(buf.len());
            let grant = match port {
                Some(port) => port.grant(want).await,
                None => want,
            };
            let n = match socket::read_some(src, &mut buf[..grant]).await {
                Ok(n) => n,
                Err(e) => {
                    refund(port, grant);
                    return Err(e);
                }
            };
            refund(port, grant - n);
            reader.consumed(n)?;
            if n == 0 {
                break;
            }
            record(port, n);
            write_chunk(dst, dst_framing, &buf[..n]).await?;
            total += n as u64;
        }
    }
    finish(dst, dst_framing).await?;
    Ok(total)
}

fn refund(port: Option<&Port>, n: usize) {
    if let Some(p) = port {
        p.refund(n);
    }
}

fn record(port: Option<&Port>, n: usize) {
    if let Some(p) = port {
        p.record(n);
    }
}

/// Copy with added delay: chunks are read (and charged) as the bucket allows, held in a
/// queue, and written when their time comes. Returns when the delay is switched off and
/// the queue has drained, or at the end of input (with `reader.ended` set).
async fn delayed<A: Socket, B: Socket>(
    reader: &mut Reader<'_, A>,
    dst: &B,
    dst_framing: Framing,
    port: Option<&Port>,
    opts: PumpOptions,
) -> io::Result<u64> {
    let mut queue: VecDeque<(Instant, Vec<u8>)> = VecDeque::new();
    let mut queued = 0usize;
    let mut total = 0u64;
    enum Event {
        Due,
        Read(io::Result<Vec<u8>>),
    }
    loop {
        let delay = port.map(|p| p.delay()).unwrap_or_default();
        if queue.is_empty() && (reader.ended || delay.is_zero()) {
            return Ok(total);
        }
        let rate = port.and_then(|p| p.rate_limit()).unwrap_or(1.25e9);
        let limit = ((2.0 * rate * delay.as_secs_f64()) as usize).clamp(1 << 20, 64 << 20);
        let can_read = !reader.ended && queued < limit && !delay.is_zero();
        let head = queue.front().map(|(t, _)| *t);
        let event = tokio::select! {
            biased;
            _ = sleep_until_opt(head), if head.is_some() => Event::Due,
            r = read_chunk(reader, port, opts.chunk), if can_read => Event::Read(r),
        };
        match event {
            Event::Due => {
                if let Some((_, data)) = queue.pop_front() {
                    queued -= data.len();
                    write_chunk(dst, dst_framing, &data).await?;
                    total += data.len() as u64;
                }
            }
            Event::Read(r) => {
                let data = r?;
                if !data.is_empty() {
                    queued += data.len();
                    queue.push_back((Instant::now() + delay, data));
                }
            }
        }
    }
}

async fn sleep_until_opt(t: Option<Instant>) {
    match t {
        Some(t) => tokio::time::sleep_until(t).await,
        None => std::future::pending().await,
    }
}

/// Read one chunk into memory, charged to the port. Empty at the end of input.
/// Cancel-safe: tokens are only taken right before the (synchronous) read.
async fn read_chunk<A: Socket>(
    reader: &mut Reader<'_, A>,
    port: Option<&Port>,
    chunk: usize,
) -> io::Result<Vec<u8>> {
    loop {
        let budget = reader.budget().await?;
        if budget == 0 {
            return Ok(Vec::new());
        }
        reader.sock.readable().await?;
        let want = budget.min(chunk);
        let grant = match port {
            Some(port) => port.grant(want).await,
            None => want,
        };
        let mut buf = vec![0u8; grant];
        match reader.sock.try_read(&mut buf) {
            Ok(n) => {
                refund(port, grant - n);
                reader.consumed(n)?;
                record(port, n);
                buf.truncate(n);
                return Ok(buf);
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                refund(port, grant);
                continue;
            }
            Err(e) => {
                refund(port, grant);
                return Err(e);
            }
        }
    }
}

/// Run both directions of a stream between `local` (an application, raw bytes) and
/// `remote`. If either direction fails, both sockets are closed abortively so each end
/// sees an error rather than a clean end.
pub async fn bridge<L: Socket, R: Socket>(
    local: &L,
    remote: &R,
    remote_framing: Framing,
    ports: Option<(&Port, &Port)>,
    opts: PumpOptions,
) -> io::Result<(u64, u64)> {
    let (out_port, in_port) = match ports {
        Some((egress, ingress)) => (Some(egress), Some(ingress)),
        None => (None, None),
    };
    let outbound = pump(local, Framing::Raw, remote, remote_framing, out_port, opts);
    let inbound = pump(remote, remote_framing, local, Framing::Raw, in_port, opts);
    match tokio::try_join!(outbound, inbound) {
        Ok(v) => Ok(v),
        Err(e) => {
            local.set_abortive_close();
            remote.set_abortive_close();
            Err(e)
        }
    }
}

/// Calibration source: send `duration` worth of zeros through `port` as framed chunks.
pub async fn send_zeros<S: Socket>(sink: &S, port: &Port, duration: Duration) -> io::Result<u64> {
    let zeros = vec![0u8; 256 * 1024];
    let end = Instant::now() + duration;
    let mut total = 0u64;
    while Instant::now() < end {
        let n = port.grant(zeros.len()).await;
        record(Some(port), n);
        write_chunk(sink, Framing::Framed, &zeros[..n]).await?;
        total += n as u64;
    }
    finish(sink, Framing::Framed).await?;
    Ok(total)
}

/// Calibration sink: read framed chunks through `port` and discard them.
/// Returns (bytes, seconds from first to last byte).
pub async fn discard<S: Socket>(src: &S, port: &Port) -> io::Result<(u64, f64)> {
    let mut reader = Reader::new(src, Framing::Framed);
    let mut total = 0u64;
    let mut first: Option<Instant> = None;
    let mut last = Instant::now();
    loop {
        let chunk = read_chunk(&mut reader, Some(port), 256 * 1024).await?;
        if chunk.is_empty() {
            break;
        }
        first.get_or_insert_with(Instant::now);
        last = Instant::now();
        total += chunk.len() as u64;
    }
    let secs = first.map(|f| (last - f).as_secs_f64()).unwrap_or(0.0);
    Ok((total, secs))
}
