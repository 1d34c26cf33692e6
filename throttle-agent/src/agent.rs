//! One agent: its configuration, its shared state, and starting/stopping its services.
//!
//! [`start`] binds the three listeners (control API, data port, local endpoint) before
//! returning, so a caller that got a [`RunningAgent`] can connect at once; the addresses
//! it reports are the ones actually bound (port 0 picks a free port).

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context;
use serde::Serialize;
use tokio::io::AsyncReadExt;
use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio::task::JoinHandle;

use crate::api::Tls;
use crate::auth::Token;
use crate::directory::{Directory, NodeEntry};
use crate::endpoint::Conn;
use crate::jobs::Launcher;
use crate::limits::Limits;
use crate::link::{Link, Shape};
use crate::name::Name;
use crate::programs::ProgramPolicy;
use crate::registry::Registry;
use crate::transport::forward::{self, ForwardSpec, Forwards};
use crate::transport::pump::{self, PumpOptions};
use crate::transport::wire::{Code, PeerWant, WireError};
use crate::transport::{local, peer, CONNECT_TIMEOUT};

/// Everything an agent is started with.
#[derive(Clone, Debug)]
pub struct AgentConfig {
    pub node: Name,
    pub control: SocketAddr,
    pub data: SocketAddr,
    pub local_socket: PathBuf,
    pub shape: Shape,
    pub token: Token,
    /// Initial directory (the controller may replace it later).
    pub peers: Vec<NodeEntry>,
    pub forwards: Vec<ForwardSpec>,
    pub pump: PumpOptions,
    /// How long a stream waits for its destination rank to register.
    pub register_timeout: Duration,
    /// Depth of the token buckets while traffic waits, in time at the current rate.
    pub burst: Duration,
    /// Depth of an idle bucket (what a quiet link lets through at once).
    pub idle_burst: Duration,
    /// The programs that may be launched as ranks.
    pub programs: ProgramPolicy,
    /// Serve the control API over TLS with this certificate (None: plain HTTP).
    pub tls: Option<Tls>,
}

/// The state every service of the agent shares.
#[derive(Debug)]
pub struct Agent {
    pub node: Name,
    /// Where the control API and the data port are bound (a forward may not target them).
    pub control_addr: SocketAddr,
    pub data_addr: SocketAddr,
    pub limits: Limits,
    /// Whether the control API speaks TLS.
    pub tls: bool,
    pub link: Arc<Link>,
    pub token: Token,
    pub directory: Directory,
    pub registry: Arc<Registry>,
    pub forwards: Forwards,
    pub pump: PumpOptions,
    pub register_timeout: Duration,
    pub started: Instant,
    pub launcher: Arc<Launcher>,
}

/// Result of a calibration run from this node to another.
#[derive(Clone, Debug, Serialize)]
pub struct Calibration {
    pub from: Name,
    pub to: Name,
    /// Configured rate during the run (bytes/s); `None` if unlimited.
    pub target_bytes_per_sec: Option<f64>,
    pub bytes: u64,
    pub seconds: f64,
    pub achieved_bytes_per_sec: f64,
}

impl Agent {
    /// Connect to the accept endpoint of a rank on this node and announce the stream.
    pub async fn connect_rank(
        &self,
        job: &Name,
        src_rank: u32,
        dst_rank: u32,
    ) -> Result<Conn, WireError> {
        let endpoint = self
            .registry
            .wait_for(job, dst_rank, self.register_timeout)
            .await?;
        self.connect_endpoint(endpoint, job, src_rank, dst_rank)
            .await
    }

    /// A rank stream that node `src_node` asks for: `dst_rank` must be a rank of `job`
    /// that runs (and has registered) on this node, and `src_rank` must run on `src_node`,
    /// as the job's rank map says. Nothing else is reachable through the data port.
    pub async fn accept_rank(
        &self,
        src_node: &Name,
        job: &Name,
        src_rank: u32,
        dst_rank: u32,
    ) -> Result<Conn, WireError> {
        let endpoint = self
            .registry
            .wait_for(job, dst_rank, self.register_timeout)
            .await?;
        let dst_node = self.directory.node_of(job, dst_rank)?;
        let claimed = self.directory.node_of(job, src_rank)?;
        if dst_node != self.node || claimed != *src_node {
            return Err(WireError::new(
                Code::Forbidden,
                format!(
                    "job `{job}` places rank {dst_rank} on `{dst_node}` and rank {src_rank} on `{claimed}`; node `{src_node}` may not open that stream here"
                ),
            ));
        }
        self.connect_endpoint(endpoint, job, src_rank, dst_rank)
            .await
    }

    async fn connect_endpoint(
        &self,
        endpoint: crate::endpoint::Endpoint,
        job: &Name,
        src_rank: u32,
        dst_rank: u32,
    ) -> Result<Conn, WireError> {
        let mut conn = tokio::time::timeout(CONNECT_TIMEOUT, endpoint.connect())
            .await
            .map_err(|_| {
                WireError::new(
                    Code::TargetUnreachable,
                    format!("rank {dst_rank} of job `{job}` at {endpoint}: connect timed out"),
                )
            })?
            .map_err(|e| {
                WireError::new(
                    Code::TargetUnreachable,
                    format!("rank {dst_rank} of job `{job}` does not accept at {endpoint}: {e}"),
                )
            })?;
        local::announce(&mut conn, job, src_rank, dst_rank)
            .await
            .map_err(|e| {
                WireError::new(
                    Code::TargetUnreachable,
                    format!("rank {dst_rank} of job `{job}` closed its endpoint: {e}"),
                )
            })?;
        Ok(conn)
    }

    /// Send as fast as this node's egress allows to `to` for `duration`; the peer measures.
    pub async fn calibrate(&self, to: &Name, duration: Duration) -> Result<Calibration, WireError> {
        if *to == self.node {
            return Err(WireError::new(
                Code::UnknownNode,
                "calibration needs another node: same-node streams are not shaped",
            ));
        }
        let mut s = peer::dial(self, to, PeerWant::Sink).await?;
        let _open = self.link.stream_opened();
        let target = self.link.egress.rate_limit();
        let io = |e: std::io::Error| {
            WireError::new(
                Code::PeerUnreachable,
                format!("calibration stream to `{to}` failed: {e}"),
            )
        };
        pump::send_zeros(&s, &self.link.egress, duration)
            .await
            .map_err(io)?;
        let mut result = [0u8; 16];
        s.read_exact(&mut result).await.map_err(io)?;
        let bytes = u64::from_be_bytes(result[..8].try_into().unwrap_or_default());
        let seconds = f64::from_be_bytes(result[8..].try_into().unwrap_or_default());
        Ok(Calibration {
            from: self.node.clone(),
            to: to.clone(),
            target_bytes_per_sec: target,
            bytes,
            seconds,
            achieved_bytes_per_sec: if seconds > 0.0 {
                bytes as f64 / seconds
            } else {
                0.0
            },
        })
    }
}

/// A signal that the agent is stopping; each service holds one.
#[derive(Clone, Debug)]
pub struct Shutdown(watch::Receiver<bool>);

impl Shutdown {
    /// Resolve once shutdown was asked for.
    pub async fn wait(&mut self) {
        while !*self.0.borrow() {
            if self.0.changed().await.is_err() {
                return;
            }
        }
    }
}

/// A started agent: its bound addresses and the handle to stop it.
#[derive(Debug)]
pub struct RunningAgent {
    pub state: Arc<Agent>,
    pub control_addr: SocketAddr,
    pub data_addr: SocketAddr,
    pub local_socket: PathBuf,
    stop: watch::Sender<bool>,
    tasks: Vec<JoinHandle<()>>,
}

impl RunningAgent {
    /// Stop accepting, stop forwards, remove the local socket.
    pub async fn shutdown(self) {
        let _ = self.stop.send(true);
        self.state.forwards.clear();
        self.state.launcher.kill_everything();
        for t in self.tasks {
            let _ = t.await;
        }
        let _ = std::fs::remove_file(&self.local_socket);
    }
}

/// Bind every listener and start the agent's services on the current tokio runtime.
pub async fn start(config: AgentConfig) -> anyhow::Result<RunningAgent> {
    let link = Link::new(config.shape).map_err(|e| anyhow::anyhow!("{e}"))?;
    link.set_burst(config.burst, config.idle_burst);
    let control = TcpListener::bind(config.control)
        .await
        .with_context(|| format!("cannot bind the control API on {}", config.control))?;
    let data = TcpListener::bind(config.data)
        .await
        .with_context(|| format!("cannot bind the data port on {}", config.data))?;
    let local_listener = local::bind(&config.local_socket).with_context(|| {
        format!(
            "cannot bind the local endpoint at {}",
            config.local_socket.display()
        )
    })?;
    let launcher = Launcher::new(&config.node, config.programs, &config.local_socket);
    let control_addr = control.local_addr()?;
    let data_addr = data.local_addr()?;

    let agent = Arc::new(Agent {
        node: config.node.clone(),
        control_addr,
        data_addr,
        limits: Limits::for_this_process(),
        tls: config.tls.is_some(),
        link,
        token: config.token,
        directory: Directory::default(),
        registry: Arc::new(Registry::default()),
        forwards: Forwards::default(),
        pump: config.pump,
        register_timeout: config.register_timeout,
        started: Instant::now(),
        launcher: Arc::new(launcher),
    });
    let mut nodes = config.peers.clone();
    nodes.retain(|n| n.name != config.node);
    nodes.push(NodeEntry {
        name: config.node.clone(),
        data: data_addr,
    });
    agent.directory.set_nodes(&nodes);

    for spec in config.forwards {
        forward::add(&agent, spec)
            .await
            .map_err(|e| anyhow::anyhow!("forward rule: {e}"))?;
    }

    let (stop, rx) = watch::channel(false);
    let shutdown = Shutdown(rx);
    let sampler = {
        let link = agent.link.clone();
        let mut sd = shutdown.clone();
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(Duration::from_millis(250));
            loop {
                tokio::select! {
                    _ = sd.wait() => return,
                    _ = tick.tick() => link.sample_rates(),
                }
            }
        })
    };
    let reaper = {
        let agent = agent.clone();
        let mut sd = shutdown.clone();
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(Duration::from_millis(500));
            loop {
                tokio::select! {
                    _ = sd.wait() => return,
                    _ = tick.tick() => {
                        for job in agent.launcher.expired() {
                            agent.directory.remove_job(&job);
                            tracing::warn!(%job, "job lease expired: its controller stopped renewing; ranks killed");
                        }
                    }
                }
            }
        })
    };
    let tasks = vec![
        sampler,
        reaper,
        tokio::spawn(crate::api::serve(
            agent.clone(),
            control,
            config.tls,
            shutdown.clone(),
        )),
        tokio::spawn(peer::serve(agent.clone(), data, shutdown.clone())),
        tokio::spawn(local::serve(agent.clone(), local_listener, shutdown)),
    ];
    tracing::info!(node = %agent.node, control = %control_addr, data = %data_addr,
        local = %config.local_socket.display(), "agent started");
    Ok(RunningAgent {
        state: agent,
        control_addr,
        data_addr,
        local_socket: config.local_socket,
        stop,
        tasks,
    })
}
