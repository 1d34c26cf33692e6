//! One agent: its configuration, and starting and stopping its services (the shared state
//! they all use is `state::Agent`).
//!
//! [`start`] binds the three listeners (control API, data port, local endpoint) before
//! returning, so a caller that got a [`RunningAgent`] can connect at once; the addresses
//! it reports are the ones actually bound (port 0 picks a free port).

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context;
use tokio::net::{TcpListener, UnixListener};
use tokio::sync::watch;
use tokio::task::JoinHandle;

use crate::api::Tls;
use crate::directory::{Directory, NodeEntry};
use crate::intercept::rules::{self, Here};
use crate::launch::jobs::Launcher;
use crate::launch::programs::ProgramPolicy;
use crate::limits::Limits;
use crate::link::{LeasedLink, Link, Shape};
use crate::registry::Registry;
use crate::services::forward::{self, ForwardSpec};
use crate::services::{peer, rank_endpoint};
use crate::shutdown::Shutdown;
use crate::state::forwards::Forwards;
use crate::state::interception::Interception;
use crate::state::Agent;
use crate::transport::pump::PumpOptions;
use throttle_proto::auth::Token;
use throttle_proto::name::Name;

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
    /// How far behind its schedule a backlogged stream may catch up (a descheduled agent).
    pub catch_up: Duration,
    /// The programs that may be launched as ranks.
    pub programs: ProgramPolicy,
    /// Serve the control API over TLS with this certificate (None: plain HTTP).
    pub tls: Option<Tls>,
    /// Intercept programs' TCP connections to the other nodes (nftables redirect; root).
    pub intercept: bool,
    /// Let forwards reach this node's loopback-only services and ports under 1024, and
    /// listen on ports under 1024 (`--open-forwards`; off: see `services::target`).
    pub open_forwards: bool,
    /// Serve the preload library on this port of 127.0.0.1 and ::1 (no root needed).
    pub preload_port: Option<u16>,
    /// Kernel-paced links (`--links kernel`, with the preload library): the programs'
    /// sockets connect directly and the kernel paces them at their shares.
    pub kernel_links: bool,
    /// The node's own link device (`--egress-device`, with kernel-paced links, as root):
    /// its egress queue holds the paced sockets' bursts to the link's rate
    /// ([`crate::transport::egress_queue`]).
    pub egress_device: Option<String>,
    /// Pin every launched rank to these CPUs (`--rank-cpus`, checked with
    /// [`crate::launch::affinity::cpu_set`] before the agent pinned itself).
    pub rank_cpus: Option<nix::sched::CpuSet>,
    /// The addresses interception may capture (`--intercept-within`); empty: the node's
    /// own subnet (/24 of an IPv4 data address, /64 of an IPv6 one).
    pub intercept_within: Vec<crate::state::interception::Subnet>,
}

/// A started agent: its bound addresses and the handle to stop it.
#[derive(Debug)]
pub struct RunningAgent {
    pub state: Arc<Agent>,
    pub control_addr: SocketAddr,
    pub data_addr: SocketAddr,
    /// Where the preload library reaches this agent (its first preload port), if it
    /// serves the library.
    pub preload_addr: Option<SocketAddr>,
    pub local_socket: PathBuf,
    stop: watch::Sender<bool>,
    tasks: Vec<JoinHandle<()>>,
}

impl RunningAgent {
    /// Stop accepting, stop forwards, remove the local socket.
    pub async fn shutdown(self) {
        let _ = self.stop.send(true);
        if let Some(i) = &self.state.intercept {
            rules::stop(i);
        }
        if let Some(q) = self
            .state
            .pacing
            .as_ref()
            .and_then(|p| p.egress_queue.as_ref())
        {
            q.remove();
        }
        self.state.forwards.clear();
        self.state.launcher.kill_everything();
        for t in self.tasks {
            let _ = t.await;
        }
        let _ = std::fs::remove_file(&self.local_socket);
    }
}

/// The local endpoint's socket file while the start may still fail: removed then.
struct Unbind(Option<PathBuf>);

impl Drop for Unbind {
    fn drop(&mut self) {
        if let Some(p) = self.0.take() {
            let _ = std::fs::remove_file(p);
        }
    }
}

/// Bind every listener and start the agent's services on the current tokio runtime.
pub async fn start(config: AgentConfig) -> anyhow::Result<RunningAgent> {
    let link = Link::new(config.shape);
    link.set_catch_up(config.catch_up);
    let (control, data, local_listener) = bind_ports(&config)?;
    // A start that fails from here on leaves no socket file behind.
    let mut unbind = Unbind(Some(config.local_socket.clone()));
    let control_addr = control.local_addr()?;
    let data_addr = data.local_addr()?;
    let (intercept_listener, preload_listeners) = interception_listeners(&config, data_addr)?;
    let preload_addr = match preload_listeners.first() {
        Some(l) => Some(l.local_addr()?),
        None => None,
    };
    let pacing_listener = match (config.kernel_links, preload_addr) {
        (false, _) => None,
        (true, None) => anyhow::bail!("--links kernel needs --preload: the preload library registers the programs' sockets with the agent"),
        (true, Some(at)) => Some(crate::services::pacing::bind(at).with_context(|| {
            format!("cannot bind the pacing socket @{} (another agent with this preload address?)", throttle_proto::preload::pace_socket_name(at))
        })?),
    };
    let egress_queue = match (&config.egress_device, &pacing_listener) {
        (None, _) => None,
        (Some(_), None) => anyhow::bail!("--egress-device needs --links kernel: the queue holds the kernel-paced sockets"),
        (Some(dev), Some(_)) => Some(
            crate::transport::egress_queue::EgressQueue::install(dev)
                .map_err(|e| anyhow::anyhow!("cannot install the egress queue on {dev} (root in the node's network namespace?): {e}"))?,
        ),
    };
    let intercept = interception(
        &config,
        data_addr,
        intercept_listener.as_ref(),
        &preload_listeners,
    )?;
    let mut launcher = Launcher::new(&config.node, config.programs, &config.local_socket);
    if let Some(cpus) = config.rank_cpus {
        launcher.pin_ranks(cpus);
    }
    // Throttle's own ranks connect to each other directly where the kernel paces their
    // messages in time: behind the egress queue (decision 0050). On a loopback cluster a
    // message's first 64 KiB burst would leave unpaced, so there they stay on the proxy.
    if let (Some(_), Some(at)) = (&egress_queue, preload_addr) {
        launcher.direct_links(
            throttle_proto::preload::pace_socket_name(at),
            data_addr.ip(),
        );
    }

    let agent = Arc::new(Agent {
        node: config.node.clone(),
        control_addr,
        data_addr,
        limits: Limits::for_this_process(),
        tls: config.tls.is_some(),
        link: LeasedLink::new(link),
        token: config.token,
        directory: Directory::default(),
        registry: Arc::new(Registry::default()),
        forwards: Forwards::default(),
        open_forwards: config.open_forwards,
        pump: config.pump,
        register_timeout: config.register_timeout,
        started: Instant::now(),
        launcher: Arc::new(launcher),
        intercept,
        pacing: pacing_listener
            .is_some()
            .then(|| crate::state::paced::Pacing {
                egress_queue,
                ..Default::default()
            }),
    });
    join(&agent, config.peers, config.forwards).await?;

    let (stop, rx) = watch::channel(false);
    let shutdown = Shutdown(rx);
    let mut tasks = vec![
        tokio::spawn(sample_rates(Arc::clone(&agent.link), shutdown.clone())),
        tokio::spawn(reap_leases(agent.clone(), shutdown.clone())),
        tokio::spawn(crate::intercept::members::keep_proving(
            agent.clone(),
            shutdown.clone(),
        )),
        tokio::spawn(crate::api::serve(
            agent.clone(),
            control,
            config.tls,
            shutdown.clone(),
        )),
        tokio::spawn(peer::serve(agent.clone(), data, shutdown.clone())),
        tokio::spawn(rank_endpoint::serve(
            agent.clone(),
            local_listener,
            shutdown.clone(),
        )),
    ];
    if let Some(l) = intercept_listener {
        tasks.push(tokio::spawn(crate::intercept::redirect::serve(
            agent.clone(),
            l,
            shutdown.clone(),
        )));
    }
    if let Some(l) = pacing_listener {
        tasks.push(tokio::spawn(crate::services::pacing::serve(
            agent.clone(),
            l,
            shutdown.clone(),
        )));
        tasks.push(tokio::spawn(crate::services::pacing::run(
            agent.clone(),
            shutdown.clone(),
        )));
    }
    for l in preload_listeners {
        tasks.push(tokio::spawn(crate::intercept::preload::serve(
            agent.clone(),
            l,
            shutdown.clone(),
        )));
    }
    tracing::info!(node = %agent.node, control = %control_addr, data = %data_addr,
        local = %config.local_socket.display(), "agent started");
    unbind.0 = None;
    Ok(RunningAgent {
        state: agent,
        control_addr,
        data_addr,
        preload_addr,
        local_socket: config.local_socket,
        stop,
        tasks,
    })
}

/// The control API, the data port and the local endpoint, bound.
fn bind_ports(config: &AgentConfig) -> anyhow::Result<(TcpListener, TcpListener, UnixListener)> {
    let control = crate::transport::listen_control(config.control)
        .with_context(|| format!("cannot bind the control API on {}", config.control))?;
    let data = crate::transport::listen(config.data)
        .with_context(|| format!("cannot bind the data port on {}", config.data))?;
    let local = rank_endpoint::bind(&config.local_socket).with_context(|| {
        format!(
            "cannot bind the local endpoint at {}",
            config.local_socket.display()
        )
    })?;
    Ok((control, data, local))
}

/// The interception port (`--intercept`, on 127.0.0.1) and the preload ports (`--preload`,
/// on 127.0.0.1 and ::1, or on the node's own address in a loopback cluster), bound; both
/// need the node's own address as its data address (a loopback one: preload only).
fn interception_listeners(
    config: &AgentConfig,
    data_addr: SocketAddr,
) -> anyhow::Result<(Option<TcpListener>, Vec<TcpListener>)> {
    let ip = data_addr.ip().to_canonical();
    if config.intercept && (ip.is_loopback() || ip.is_unspecified() || !ip.is_ipv4()) {
        anyhow::bail!("--intercept needs the node's own IPv4 address as --data (got {data_addr}): the other nodes' agents must see this node at that address; on a loopback cluster (one network stack for all nodes) programs are intercepted by the preload library (--preload)");
    }
    if config.preload_port.is_some() && ip.is_unspecified() {
        anyhow::bail!("--preload needs the node's own address as --data (got {data_addr}): the other nodes' agents and programs must see this node at that address");
    }
    // 127.0.0.1 and ::1 are every program's localhost: a node there would take the
    // machine's own services for its own (a loopback cluster's nodes are 127.0.1.1, ...).
    if config.preload_port.is_some()
        && (ip == std::net::IpAddr::from(std::net::Ipv4Addr::LOCALHOST)
            || ip == std::net::IpAddr::from(std::net::Ipv6Addr::LOCALHOST))
    {
        anyhow::bail!("--preload with --data on {ip}: that is every program's localhost, not a node's address; give a loopback cluster's node another loopback address (127.0.1.1, ...), or a real node its own address");
    }
    let intercept_listener = if config.intercept {
        Some(
            crate::transport::listen(SocketAddr::from(([127, 0, 0, 1], 0)))
                .context("cannot bind the interception port on 127.0.0.1")?,
        )
    } else {
        None
    };
    let mut preload_listeners = Vec::new();
    let Some(port) = config.preload_port else {
        return Ok((intercept_listener, preload_listeners));
    };
    // A node of a loopback cluster is one of several on this network stack: its preload
    // port is on its own address (each node's programs name theirs in
    // THROTTLE_PRELOAD_AGENT), not on 127.0.0.1, which the nodes would share.
    if ip.is_loopback() {
        let at = SocketAddr::new(ip, port);
        preload_listeners.push(crate::transport::listen(at).with_context(|| {
            format!("cannot bind the preload port {at} (another agent at this address? choose a free port with --preload-port, 0 for any)")
        })?);
        return Ok((intercept_listener, preload_listeners));
    }
    let v4 = crate::transport::listen(SocketAddr::from(([127, 0, 0, 1], port)))
        .with_context(|| format!("cannot bind the preload port 127.0.0.1:{port} (another agent on this node? choose one with --preload-port, and the same THROTTLE_PRELOAD_AGENT for the programs)"))?;
    // Port 0: the one IPv4 got, on ::1 too (the library reaches ::1 at the port it was
    // given for 127.0.0.1).
    let port = v4.local_addr()?.port();
    preload_listeners.push(v4);
    // IPv6 sockets reach the agent on ::1 (where this host has IPv6). Someone else
    // there would receive the programs' IPv6 connections: the agent does not start.
    let v6 = SocketAddr::from((std::net::Ipv6Addr::LOCALHOST, port));
    match crate::transport::listen(v6) {
        Ok(l) => preload_listeners.push(l),
        Err(e) if e.kind() == std::io::ErrorKind::AddrInUse => anyhow::bail!(
            "cannot bind the preload port {v6}: something else listens there, and the programs' IPv6 connections would go to it; stop it or choose another --preload-port (and the same THROTTLE_PRELOAD_AGENT for the programs)"
        ),
        // No IPv6 on this host: IPv6 sockets cannot reach ::1 at all.
        Err(e) => tracing::info!(error = %e, "no preload port on {v6}"),
    }
    Ok((intercept_listener, preload_listeners))
}

/// Interception's state, when the agent intercepts: its ports, and the addresses it may
/// capture (`--intercept-within`, by default the data address's /24 or /64).
fn interception(
    config: &AgentConfig,
    data_addr: SocketAddr,
    intercept_listener: Option<&TcpListener>,
    preload_listeners: &[TcpListener],
) -> anyhow::Result<Option<Interception>> {
    if !config.intercept && config.preload_port.is_none() {
        return Ok(None);
    }
    let kernel_port = match intercept_listener {
        Some(l) => Some(l.local_addr()?.port()),
        None => None,
    };
    let preload_port = match preload_listeners.first() {
        Some(l) => Some(l.local_addr()?.port()),
        None => None,
    };
    let within = if config.intercept_within.is_empty() {
        let ip = data_addr.ip().to_canonical();
        vec![crate::state::interception::Subnet::around(
            ip,
            if ip.is_ipv4() { 24 } else { 64 },
        )]
    } else {
        config.intercept_within.clone()
    };
    tracing::info!(within = %within.iter().map(|s| s.to_string()).collect::<Vec<_>>().join(", "),
        "intercepting only nodes at these addresses (--intercept-within)");
    Ok(Some(Interception::new(kernel_port, preload_port, within)))
}

/// Refresh both ports' current rates every 250 ms until shutdown.
async fn sample_rates(link: Arc<Link>, mut shutdown: Shutdown) {
    let mut tick = tokio::time::interval(Duration::from_millis(250));
    loop {
        tokio::select! {
            _ = shutdown.wait() => return,
            _ = tick.tick() => link.sample_rates(),
        }
    }
}

/// Every 500 ms until shutdown: kill the jobs whose leases ran out, and put the link back
/// when a run's shape lease ran out.
async fn reap_leases(agent: Arc<Agent>, mut shutdown: Shutdown) {
    let mut tick = tokio::time::interval(Duration::from_millis(500));
    loop {
        tokio::select! {
            _ = shutdown.wait() => return,
            _ = tick.tick() => {
                for job in agent.launcher.expired() {
                    agent.directory.remove_job(&job);
                    tracing::warn!(%job, "job lease expired: its controller stopped renewing; ranks killed");
                }
                if let Some(back) = agent.link.expire() {
                    tracing::warn!(pct = %back.pct(), "shape lease expired: its controller stopped renewing; the link is back to the shape before the run");
                }
            }
        }
    }
}

/// The directory given at start (this node at its data address, and `peers`), the
/// forward rules, and interception's rules: installed last of what can fail, so that a
/// start that fails leaves no redirect to a closed port. The nodes of that directory are
/// asked to prove the token before the agent says it is ready (the ones that are up
/// answer at once), then in the background.
async fn join(
    agent: &Arc<Agent>,
    peers: Vec<NodeEntry>,
    forwards: Vec<ForwardSpec>,
) -> anyhow::Result<()> {
    let mut nodes = peers;
    nodes.retain(|n| n.name != agent.node);
    nodes.push(NodeEntry {
        name: agent.node.clone(),
        data: agent.data_addr,
    });
    agent.directory.set_nodes(&nodes);
    for spec in forwards {
        forward::add(agent, spec)
            .await
            .map_err(|e| anyhow::anyhow!("forward rule: {e}"))?;
    }
    if let Some(i) = &agent.intercept {
        rules::install(i, &Here::of(agent))
            .context("cannot install the interception rules (they need root: CAP_NET_ADMIN)")?;
        if crate::intercept::members::prove(agent, Duration::from_secs(1)).await > 0 {
            crate::intercept::members::update_rules(agent)
                .await
                .map_err(|e| anyhow::anyhow!("cannot install the interception rules: {e}"))?;
        }
        i.directory_changed.notify_one();
    }
    Ok(())
}
