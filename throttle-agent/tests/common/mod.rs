//! Shared test harness: in-process agents on loopback, a verifiable byte pattern, and a
//! minimal HTTP client for the control API.
#![allow(dead_code)]

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use throttle_agent::agent::{self, AgentConfig, RunningAgent};
use throttle_agent::directory::NodeEntry;
use throttle_agent::launch::programs::ProgramPolicy;
use throttle_agent::transport::pump::PumpOptions;
use throttle_proto::auth::Token;
use throttle_proto::name::Name;
use throttle_proto::{Pct, Rate, Shape};
use throttle_testkit::agent::AgentProcess;

pub const TOKEN: &str = "test-token-0123456789abcdef";

/// A name known to be valid.
pub fn n(s: &str) -> Name {
    Name::parse("name", s).unwrap()
}

/// A scratch directory removed on drop.
pub struct Scratch(pub PathBuf);

impl Scratch {
    pub fn new(tag: &str) -> Scratch {
        let mut bytes = [0u8; 6];
        getrandom::getrandom(&mut bytes).unwrap();
        let name: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
        let p = std::env::temp_dir().join(format!("throttle-test-{tag}-{name}"));
        std::fs::create_dir_all(&p).unwrap();
        Scratch(p)
    }
    pub fn path(&self, name: &str) -> PathBuf {
        self.0.join(name)
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

pub fn shape(pct: Option<f64>, capacity: f64) -> Shape {
    Shape::new(
        pct.map(|p| Pct::new(p).unwrap()).unwrap_or(Pct::UNLIMITED),
        Rate::from_bytes_per_sec(capacity).unwrap(),
        0,
    )
    .unwrap()
}

/// Start `n` agents named n0..n{n-1} in-process, each knowing the others.
pub async fn cluster(scratch: &Scratch, n: usize, shape: Shape, splice: bool) -> Vec<RunningAgent> {
    cluster_on(scratch, n, shape, splice, "127.0.0.1", false).await
}

/// [`cluster`] with every agent's data port on address `ip` (the control API on
/// 127.0.0.1, as the agent advises), and `--open-forwards` or not.
pub async fn cluster_on(
    scratch: &Scratch,
    n: usize,
    shape: Shape,
    splice: bool,
    ip: &str,
    open_forwards: bool,
) -> Vec<RunningAgent> {
    let mut agents = Vec::new();
    for i in 0..n {
        let config = AgentConfig {
            node: Name::parse("node", &format!("n{i}")).unwrap(),
            control: "127.0.0.1:0".parse().unwrap(),
            data: format!("{ip}:0").parse().unwrap(),
            local_socket: scratch.path(&format!("n{i}.sock")),
            shape,
            token: Token::new(TOKEN).unwrap(),
            peers: vec![],
            forwards: vec![],
            pump: PumpOptions {
                splice,
                ..PumpOptions::default()
            },
            register_timeout: Duration::from_secs(5),
            catch_up: throttle_agent::link::pacer::DEFAULT_CATCH_UP,
            programs: ProgramPolicy::workloads_in(
                std::env::current_exe()
                    .unwrap()
                    .parent()
                    .unwrap()
                    .parent()
                    .unwrap(),
            ),
            tls: None,
            intercept: false,
            open_forwards,
            preload_port: None,
            kernel_links: false,
            egress_device: None,
            rank_cpus: None,
            intercept_within: vec![],
        };
        agents.push(agent::start(config).await.unwrap());
    }
    let nodes: Vec<NodeEntry> = agents
        .iter()
        .map(|a| NodeEntry {
            name: a.state.node.clone(),
            data: a.data_addr,
        })
        .collect();
    for a in &agents {
        a.state.directory.set_nodes(&nodes);
    }
    agents
}

/// A forward on `agent` from an ephemeral loopback port to `target` on node n1.
pub async fn forward_to_n1(
    agent: &RunningAgent,
    target: String,
) -> throttle_agent::services::forward::ForwardInfo {
    throttle_agent::services::forward::add(
        &agent.state,
        throttle_agent::services::forward::ForwardSpec {
            listen: "127.0.0.1:0".parse().unwrap(),
            to_node: n("n1"),
            target: throttle_proto::forward::HostPort::parse(&target).unwrap(),
        },
    )
    .await
    .unwrap()
}

/// Tell every agent the rank-to-node map of `job`.
pub fn set_job(agents: &[RunningAgent], job: &str, ranks: &[&str]) {
    for a in agents {
        a.state
            .directory
            .set_job(&n(job), ranks.iter().map(|s| n(s)).collect());
    }
}

/// A deterministic byte stream (xorshift) that a receiver can check byte by byte.
pub struct Pattern {
    state: u64,
    pub offset: u64,
    pending: Vec<u8>,
}

impl Pattern {
    pub fn new(seed: u64) -> Pattern {
        Pattern {
            state: seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1,
            offset: 0,
            pending: Vec::new(),
        }
    }

    fn next_word(&mut self) -> u64 {
        let mut x = self.state;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.state = x;
        x
    }

    /// The next `n` bytes of the stream.
    pub fn take(&mut self, n: usize) -> Vec<u8> {
        while self.pending.len() < n {
            let w = self.next_word();
            self.pending.extend_from_slice(&w.to_le_bytes());
        }
        let rest = self.pending.split_off(n);
        let out = std::mem::replace(&mut self.pending, rest);
        self.offset += n as u64;
        out
    }
}

/// Send `total` pattern bytes of `seed`, then half-close.
pub fn send_pattern<W: Write>(w: &mut W, seed: u64, total: usize) -> std::io::Result<()> {
    let mut p = Pattern::new(seed);
    let mut left = total;
    while left > 0 {
        let n = left.min(64 * 1024);
        w.write_all(&p.take(n))?;
        left -= n;
    }
    w.flush()
}

/// Read to the end and check every byte against the pattern of `seed`. Returns the count.
pub fn check_pattern<R: Read>(r: &mut R, seed: u64) -> std::io::Result<u64> {
    let mut p = Pattern::new(seed);
    let mut buf = vec![0u8; 64 * 1024];
    let mut total = 0u64;
    loop {
        let n = r.read(&mut buf)?;
        if n == 0 {
            return Ok(total);
        }
        let want = p.take(n);
        if want[..] != buf[..n] {
            let at = want
                .iter()
                .zip(&buf[..n])
                .position(|(a, b)| a != b)
                .unwrap_or(0);
            return Err(std::io::Error::new(
                std::io::ErrorKind::InvalidData,
                format!("byte {} differs", total + at as u64),
            ));
        }
        total += n as u64;
    }
}

/// One HTTP/1.1 request; returns (status, body).
pub fn http(
    addr: &str,
    method: &str,
    path: &str,
    token: Option<&str>,
    body: Option<&str>,
) -> (u16, String) {
    let mut s = std::net::TcpStream::connect(addr).unwrap();
    let mut req = format!("{method} {path} HTTP/1.1\r\nHost: test\r\nConnection: close\r\n");
    if let Some(t) = token {
        req.push_str(&format!("Authorization: Bearer {t}\r\n"));
    }
    let body = body.unwrap_or("");
    if !body.is_empty() || method != "GET" {
        req.push_str(&format!(
            "Content-Type: application/json\r\nContent-Length: {}\r\n",
            body.len()
        ));
    }
    req.push_str("\r\n");
    req.push_str(body);
    s.write_all(req.as_bytes()).unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).unwrap();
    let status = out
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    let body = out
        .split_once("\r\n\r\n")
        .map(|(_, b)| b.to_string())
        .unwrap_or_default();
    (status, body)
}

/// A rank that accepts streams on a Unix socket, registered with `agent_socket`.
pub struct Rank {
    pub listener: std::os::unix::net::UnixListener,
    pub registration: std::os::unix::net::UnixStream,
}

pub fn rank(scratch: &Scratch, agent_socket: &Path, job: &str, rank: u32) -> Rank {
    let path = scratch.path(&format!("{job}-r{rank}.sock"));
    let listener = std::os::unix::net::UnixListener::bind(&path).unwrap();
    let registration = throttle_proto::os::rank_client::register(
        agent_socket,
        &n(job),
        rank,
        &format!("unix:{}", path.display()),
    )
    .unwrap();
    Rank {
        listener,
        registration,
    }
}

/// The agent binary built for these tests.
pub fn agent_binary() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_throttle-agent"))
}

/// Start the real agent binary as node `node` with `extra` flags; waits until it is ready.
pub fn spawn_agent(scratch: &Scratch, node: &str, extra: &[&str]) -> AgentProcess {
    spawn_agent_with(scratch, node, extra, None)
}

/// Like [`spawn_agent`], with the agent's log (stderr) written to `log`.
pub fn spawn_agent_logging(scratch: &Scratch, node: &str, log: &Path) -> AgentProcess {
    spawn_agent_full(scratch, node, &[], None, Some(log))
}

/// Like [`spawn_agent`], with the agent's open-file limit (soft and hard) set to `nofile`.
pub fn spawn_agent_with(
    scratch: &Scratch,
    node: &str,
    extra: &[&str],
    nofile: Option<u64>,
) -> AgentProcess {
    spawn_agent_full(scratch, node, extra, nofile, None)
}

/// Like [`spawn_agent`], with extra environment variables.
pub fn spawn_agent_env(
    scratch: &Scratch,
    node: &str,
    extra: &[&str],
    env: &[(&str, &str)],
) -> AgentProcess {
    spawn_agent_inner(scratch, node, extra, None, None, env)
}

fn spawn_agent_full(
    scratch: &Scratch,
    node: &str,
    extra: &[&str],
    nofile: Option<u64>,
    log: Option<&Path>,
) -> AgentProcess {
    spawn_agent_inner(scratch, node, extra, nofile, log, &[])
}

fn spawn_agent_inner(
    scratch: &Scratch,
    node: &str,
    extra: &[&str],
    nofile: Option<u64>,
    log: Option<&Path>,
    env: &[(&str, &str)],
) -> AgentProcess {
    let token = scratch.path("token");
    std::fs::write(&token, TOKEN).unwrap();
    let ready = scratch.path(&format!("{node}.ready"));
    let mut cmd = Command::new(agent_binary());
    cmd.args([
        "--node",
        node,
        "--control",
        "127.0.0.1:0",
        "--data",
        "127.0.0.1:0",
    ])
    .arg("--local-socket")
    .arg(scratch.path(&format!("{node}.sock")))
    .arg("--token-file")
    .arg(&token)
    .args(extra)
    .envs(env.iter().copied())
    .stdout(Stdio::null())
    .stderr(match log {
        Some(p) => Stdio::from(std::fs::File::create(p).unwrap()),
        None => Stdio::null(),
    });
    if let Some(limit) = nofile {
        use std::os::unix::process::CommandExt;
        // SAFETY: setrlimit is async-signal-safe; it only lowers this child's own limit.
        unsafe {
            cmd.pre_exec(move || {
                nix::sys::resource::setrlimit(
                    nix::sys::resource::Resource::RLIMIT_NOFILE,
                    limit,
                    limit,
                )
                .map_err(std::io::Error::from)
            });
        }
    }
    throttle_testkit::agent::start(cmd, &ready, &format!("agent {node}"))
}

/// A TCP connection from a chosen local address (e.g. `127.0.0.99`), so tests can play a
/// client on another host; `None` if the connection could not be made within 2 s.
pub fn connect_from(source: &str, to: &str) -> Option<std::net::TcpStream> {
    let socket = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).ok()?;
    let src: std::net::SocketAddr = format!("{source}:0").parse().ok()?;
    socket.bind(&src.into()).ok()?;
    let to: std::net::SocketAddr = to.parse().ok()?;
    socket
        .connect_timeout(&to.into(), Duration::from_secs(2))
        .ok()?;
    Some(socket.into())
}

/// Like [`http`], but gives up after `timeout` (status 0) instead of hanging.
pub fn http_within(
    addr: &str,
    method: &str,
    path: &str,
    token: Option<&str>,
    body: Option<&str>,
    timeout: Duration,
) -> (u16, String) {
    let Ok(to) = addr.parse::<std::net::SocketAddr>() else {
        return (0, String::new());
    };
    let Ok(mut s) = std::net::TcpStream::connect_timeout(&to, timeout) else {
        return (0, "connect failed".into());
    };
    s.set_read_timeout(Some(timeout)).unwrap();
    s.set_write_timeout(Some(timeout)).unwrap();
    let body = body.unwrap_or("");
    let mut req = format!(
        "{method} {path} HTTP/1.1\r\nHost: test\r\nConnection: close\r\nContent-Type: application/json\r\nContent-Length: {}\r\n",
        body.len()
    );
    if let Some(t) = token {
        req.push_str(&format!("Authorization: Bearer {t}\r\n"));
    }
    req.push_str("\r\n");
    req.push_str(body);
    if s.write_all(req.as_bytes()).is_err() {
        return (0, "write failed".into());
    }
    let mut out = Vec::new();
    let _ = s.read_to_end(&mut out);
    let out = String::from_utf8_lossy(&out).to_string();
    let status = out
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    let body = out
        .split_once("\r\n\r\n")
        .map(|(_, b)| b.to_string())
        .unwrap_or_default();
    (status, body)
}

/// An echo server on loopback: every connection gets back what it sends.
pub fn echo_server() -> String {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap().to_string();
    std::thread::spawn(move || {
        for c in l.incoming() {
            let Ok(mut c) = c else { return };
            std::thread::spawn(move || {
                let mut r = c.try_clone().unwrap();
                let _ = std::io::copy(&mut r, &mut c);
                let _ = c.shutdown(std::net::Shutdown::Write);
            });
        }
    });
    addr
}
