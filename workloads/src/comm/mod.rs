//! The communicator: ranks of a job exchanging messages through the throttle agents.
//!
//! A rank learns who it is from the environment the agent launched it with
//! (`THROTTLE_JOB`, `THROTTLE_RANK`, `THROTTLE_SIZE`, `THROTTLE_AGENT_SOCKET`,
//! `THROTTLE_RUN_DIR`). It listens on a Unix socket, registers it with its agent, and opens
//! one stream per destination on first use through the agent's rank tunnels, so every
//! inter-node byte crosses the shaped links. A reader thread per incoming stream drains it
//! into the [`Mailbox`], so sends never wait for the receiver to call `recv` (no
//! deadlock in all-to-all patterns). Where the agent paces the ranks' own sockets
//! ([`direct`]), a stream to another node's rank moves off the tunnel onto a TCP socket
//! of its own, which no agent reads.
//!
//! [`Comm::local`] builds ranks as threads of one process with the same message layer:
//! used by unit tests of the algorithms, never by jobs.

pub mod collectives;
pub mod direct;
pub mod frame;
pub mod mailbox;

use std::io::{BufWriter, Write};
use std::net::{TcpListener, TcpStream};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use throttle_proto::name::Name;

pub use collectives::{Bcast, Group};
use mailbox::{Mailbox, Message};

/// Why a communication failed. Every variant says which rank and what to look at.
#[derive(Debug, thiserror::Error)]
pub enum CommError {
    #[error("rank {rank} failed or closed its stream: {why}")]
    PeerFailed { rank: usize, why: String },
    #[error("no message from rank {rank} within {seconds:.0} s (is it stuck or dead?)")]
    Timeout { rank: usize, seconds: f64 },
    #[error("no message from any rank within {seconds:.0} s (are they stuck or dead?)")]
    TimeoutAny { seconds: f64 },
    #[error("protocol error: {0}")]
    Protocol(String),
    #[error("cannot reach rank {rank} through the agent: {why}")]
    Connect { rank: usize, why: String },
    #[error("sending to rank {rank}: {why}")]
    Send { rank: usize, why: String },
    #[error("setup: {0}")]
    Setup(String),
}

enum Transport {
    /// Through the node's agent.
    Agent {
        socket: PathBuf,
        job: Name,
        out: Vec<Mutex<Option<BufWriter<Out>>>>,
        /// Direct links, where the agent launched this rank for them.
        direct: Option<Arc<direct::Direct>>,
        _registration: UnixStream,
    },
    /// Threads of one process (tests).
    Local { peers: Vec<Arc<Mailbox>> },
}

/// Where a stream's messages go: the tunnel through the agents, or a direct socket.
enum Out {
    Tunnel(UnixStream),
    Direct(TcpStream),
}

impl Out {
    fn shutdown_write(&self) {
        let _ = match self {
            Out::Tunnel(s) => s.shutdown(std::net::Shutdown::Write),
            Out::Direct(s) => s.shutdown(std::net::Shutdown::Write),
        };
    }
}

impl Write for Out {
    fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
        match self {
            Out::Tunnel(s) => s.write(b),
            Out::Direct(s) => s.write(b),
        }
    }
    fn flush(&mut self) -> std::io::Result<()> {
        match self {
            Out::Tunnel(s) => s.flush(),
            Out::Direct(s) => s.flush(),
        }
    }
}

/// One rank's view of the job.
pub struct Comm {
    rank: usize,
    size: usize,
    mailbox: Arc<Mailbox>,
    transport: Transport,
    timeout: Duration,
    /// Seconds spent in communication calls (send, recv), for the compute/comm split.
    comm_seconds: Mutex<f64>,
}

/// Default wait for a message before declaring the peer stuck.
const DEFAULT_TIMEOUT: Duration = Duration::from_secs(600);

fn env(name: &str) -> Result<String, CommError> {
    std::env::var(name).map_err(|_| {
        CommError::Setup(format!(
            "{name} is not set: workloads are started by throttle agents (`throttle-ctl run`), not by hand"
        ))
    })
}

impl Comm {
    /// Join the job described by the environment the agent set.
    pub fn from_env() -> Result<Comm, CommError> {
        let job = env("THROTTLE_JOB")?;
        let rank: usize = env("THROTTLE_RANK")?
            .parse()
            .map_err(|_| CommError::Setup("THROTTLE_RANK is not a number".into()))?;
        let size: usize = env("THROTTLE_SIZE")?
            .parse()
            .map_err(|_| CommError::Setup("THROTTLE_SIZE is not a number".into()))?;
        if size == 0 || rank >= size {
            return Err(CommError::Setup(format!(
                "rank {rank} is not below size {size}"
            )));
        }
        let socket = PathBuf::from(env("THROTTLE_AGENT_SOCKET")?);
        let run_dir = PathBuf::from(env("THROTTLE_RUN_DIR")?);
        let timeout = std::env::var("THROTTLE_RECV_TIMEOUT")
            .ok()
            .and_then(|s| s.parse::<f64>().ok())
            .map(Duration::from_secs_f64)
            .unwrap_or(DEFAULT_TIMEOUT);
        Comm::join(&job, rank, size, socket, run_dir, timeout)
    }

    /// Join a job through the agent at `socket`, accepting streams in `run_dir`.
    pub fn join(
        job: &str,
        rank: usize,
        size: usize,
        socket: PathBuf,
        run_dir: PathBuf,
        timeout: Duration,
    ) -> Result<Comm, CommError> {
        let job = Name::parse("THROTTLE_JOB", job).map_err(|e| CommError::Setup(e.to_string()))?;
        let path = run_dir.join(format!("rank-{rank}.sock"));
        let _ = std::fs::remove_file(&path);
        let listener = UnixListener::bind(&path)
            .map_err(|e| CommError::Setup(format!("cannot listen on {}: {e}", path.display())))?;
        let registration = throttle_proto::os::rank_client::register(
            &socket,
            &job,
            rank as u32,
            &format!("unix:{}", path.display()),
        )
        .map_err(|e| CommError::Setup(format!("cannot register with the agent: {e}")))?;
        let mailbox = Arc::new(Mailbox::new(size));
        let direct = match direct::Direct::from_env()? {
            Some((d, tcp)) => {
                let (mb, d2) = (mailbox.clone(), d.clone());
                std::thread::spawn(move || accept_direct(tcp, mb, d2, size));
                Some(d)
            }
            None => None,
        };
        let mb = mailbox.clone();
        let job_name = job.clone();
        let d = direct.clone();
        std::thread::spawn(move || accept_loop(listener, mb, job_name, size, d));
        Ok(Comm {
            rank,
            size,
            mailbox,
            transport: Transport::Agent {
                socket,
                job,
                out: (0..size).map(|_| Mutex::new(None)).collect(),
                direct,
                _registration: registration,
            },
            timeout,
            comm_seconds: Mutex::new(0.0),
        })
    }

    /// `size` ranks as threads of this process, for tests.
    pub fn local(size: usize) -> Vec<Comm> {
        let boxes: Vec<Arc<Mailbox>> = (0..size).map(|_| Arc::new(Mailbox::new(size))).collect();
        (0..size)
            .map(|rank| Comm {
                rank,
                size,
                mailbox: boxes[rank].clone(),
                transport: Transport::Local {
                    peers: boxes.clone(),
                },
                timeout: Duration::from_secs(60),
                comm_seconds: Mutex::new(0.0),
            })
            .collect()
    }

    pub fn rank(&self) -> usize {
        self.rank
    }

    pub fn size(&self) -> usize {
        self.size
    }

    /// All ranks as a group.
    pub fn world(&self) -> Group {
        Group::new((0..self.size).collect(), self.rank)
    }

    /// Seconds spent in send/recv so far.
    pub fn comm_seconds(&self) -> f64 {
        *self.comm_seconds.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn charge(&self, since: Instant) {
        *self.comm_seconds.lock().unwrap_or_else(|e| e.into_inner()) +=
            since.elapsed().as_secs_f64();
    }

    /// Send `data` with `tag` to `dst` (returns once it is handed to the transport).
    pub fn send(&self, dst: usize, tag: u32, data: &[u8]) -> Result<(), CommError> {
        let t = Instant::now();
        let r = self.send_inner(dst, tag, data);
        self.charge(t);
        r
    }

    fn send_inner(&self, dst: usize, tag: u32, data: &[u8]) -> Result<(), CommError> {
        if direct::reserved(tag) {
            return Err(CommError::Protocol(format!(
                "tag {tag} is the communicator's own"
            )));
        }
        if dst >= self.size {
            return Err(CommError::Protocol(format!(
                "no rank {dst} (size {})",
                self.size
            )));
        }
        if dst == self.rank {
            self.mailbox.push(
                dst,
                Message {
                    tag,
                    data: data.to_vec(),
                },
            );
            return Ok(());
        }
        match &self.transport {
            Transport::Local { peers } => {
                peers[dst].push(
                    self.rank,
                    Message {
                        tag,
                        data: data.to_vec(),
                    },
                );
                Ok(())
            }
            Transport::Agent {
                socket,
                job,
                out,
                direct,
                ..
            } => {
                let mut slot = out[dst].lock().unwrap_or_else(|e| e.into_inner());
                if slot.is_none() {
                    let mut s = throttle_proto::os::rank_client::open_rank(
                        socket,
                        job,
                        self.rank as u32,
                        dst as u32,
                    )
                    .map_err(|e| CommError::Connect {
                        rank: dst,
                        why: e.to_string(),
                    })?;
                    let moved = match direct {
                        Some(d) => d.connect(&mut s, self.rank, dst, self.timeout)?,
                        None => None,
                    };
                    let out = match moved {
                        Some(tcp) => Out::Direct(tcp),
                        None => Out::Tunnel(s),
                    };
                    *slot = Some(BufWriter::with_capacity(256 * 1024, out));
                }
                let w = slot
                    .as_mut()
                    .ok_or_else(|| CommError::Protocol("stream missing".into()))?;
                frame::write_message(w, tag, data)
                    .and_then(|_| w.flush())
                    .map_err(|e| CommError::Send {
                        rank: dst,
                        why: e.to_string(),
                    })
            }
        }
    }

    /// Receive the next message from `src`, which must carry `tag`.
    pub fn recv(&self, src: usize, tag: u32) -> Result<Vec<u8>, CommError> {
        if src >= self.size {
            return Err(CommError::Protocol(format!(
                "no rank {src} (size {})",
                self.size
            )));
        }
        let t = Instant::now();
        let r = self.mailbox.pop(src, tag, self.timeout);
        self.charge(t);
        r
    }

    /// Whether a message from `src` has arrived and waits for `recv` (MPI_Iprobe).
    pub fn probe(&self, src: usize) -> bool {
        self.mailbox.waiting(src)
    }

    /// Receive the next message with `tag` from whichever rank sent one first
    /// (MPI_ANY_SOURCE); returns the source and the data.
    pub fn recv_any(&self, tag: u32) -> Result<(usize, Vec<u8>), CommError> {
        let t = Instant::now();
        let r = self.mailbox.pop_any(tag, self.timeout);
        self.charge(t);
        r
    }

    /// Close outgoing streams after a final barrier, so no rank leaves while others
    /// still expect messages from it.
    pub fn finish(self) -> Result<(), CommError> {
        collectives::barrier(&self, &self.world())?;
        if let Transport::Agent { out, .. } = &self.transport {
            for s in out {
                let mut slot = s.lock().unwrap_or_else(|e| e.into_inner());
                if let Some(mut w) = slot.take() {
                    let _ = w.flush();
                    if let Ok(s) = w.into_inner() {
                        s.shutdown_write();
                    }
                }
            }
        }
        Ok(())
    }
}

fn accept_loop(
    listener: UnixListener,
    mailbox: Arc<Mailbox>,
    job: Name,
    size: usize,
    direct: Option<Arc<direct::Direct>>,
) {
    for conn in listener.incoming() {
        let Ok(mut conn) = conn else { continue };
        let (from_job, src, _dst) = match throttle_proto::os::rank_client::read_incoming(&mut conn)
        {
            Ok(h) => h,
            Err(_) => continue,
        };
        let src = src as usize;
        if from_job != job || src >= size {
            continue;
        }
        let mb = mailbox.clone();
        let direct = direct.clone();
        std::thread::spawn(move || {
            let Ok(answer_to) = conn.try_clone() else {
                mb.fail(src, "cannot read its stream".into());
                return;
            };
            drain(conn, src, &mb, Some((answer_to, direct)));
        });
    }
}

/// Take the direct streams other nodes' ranks open to this one (see [`direct`]).
fn accept_direct(
    listener: TcpListener,
    mailbox: Arc<Mailbox>,
    direct: Arc<direct::Direct>,
    size: usize,
) {
    for conn in listener.incoming() {
        let Ok(conn) = conn else { continue };
        let (mb, d) = (mailbox.clone(), direct.clone());
        std::thread::spawn(move || {
            if let Some((src, conn)) = d.admit(conn, size) {
                drain(conn, src, &mb, None);
            }
        });
    }
}

/// Read `src`'s messages from `stream` into the mailbox until it ends. A tunnel
/// (`tunnel`: where to answer, and this rank's direct links) may be asked to move
/// ([`direct::HELLO`]) and may end by moving ([`direct::MOVED`]): the direct socket then
/// carries the rest.
fn drain<R: std::io::Read>(
    stream: R,
    src: usize,
    mb: &Mailbox,
    mut tunnel: Option<(UnixStream, Option<Arc<direct::Direct>>)>,
) {
    let mut r = std::io::BufReader::with_capacity(256 * 1024, stream);
    loop {
        match frame::read_message(&mut r) {
            Ok(Some((direct::HELLO, _))) if tunnel.is_some() => {
                let Some((answer_to, direct)) = tunnel.as_mut() else {
                    return;
                };
                let answer = match direct {
                    Some(d) => match d.invite(src) {
                        Ok(a) => a,
                        Err(e) => {
                            mb.fail(src, format!("cannot answer its hello: {e}"));
                            return;
                        }
                    },
                    None => Vec::new(),
                };
                if let Err(e) = frame::write_message(answer_to, direct::HELLO, &answer) {
                    mb.fail(src, format!("cannot answer its hello: {e}"));
                    return;
                }
            }
            Ok(Some((direct::MOVED, _))) if tunnel.is_some() => return,
            Ok(Some((tag, _))) if direct::reserved(tag) => {
                mb.fail(src, format!("its stream carried the reserved tag {tag}"));
                return;
            }
            Ok(Some((tag, data))) => mb.push(src, Message { tag, data }),
            Ok(None) => {
                mb.fail(src, "its stream ended (the rank finished or exited)".into());
                return;
            }
            Err(e) => {
                mb.fail(src, e.to_string());
                return;
            }
        }
    }
}

/// Run `f` on `size` in-process ranks and collect the results in rank order (tests).
pub fn run_local<T: Send + 'static>(
    size: usize,
    f: impl Fn(Comm) -> T + Send + Sync + 'static,
) -> Vec<T> {
    let f = Arc::new(f);
    let handles: Vec<_> = Comm::local(size)
        .into_iter()
        .map(|c| {
            let f = f.clone();
            std::thread::spawn(move || f(c))
        })
        .collect();
    handles
        .into_iter()
        .map(|h| match h.join() {
            Ok(v) => v,
            Err(e) => std::panic::resume_unwind(e),
        })
        .collect()
}
