//! Port forwards: `LISTEN on node X -> HOST:PORT on node Y`, for unmodified TCP programs.
//!
//! X listens; each accepted connection is carried to Y's agent (through X's egress and
//! Y's ingress), which connects to HOST:PORT. When X and Y are the same node the
//! connection goes straight to the target, unshaped, as every same-node stream does.
//!
//! HOST:PORT must be an address *of node Y* ([`resolve_local_target`]: a loopback address
//! or one of Y's interface addresses, and not Y's agent itself): a forward carries traffic
//! between the cluster's nodes, it never relays to an arbitrary host.

use std::collections::BTreeMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use std::os::fd::AsRawFd;

use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinHandle;
use tracing::{debug, info, warn};

use super::peer;
use super::pump::{self, Framing};
use super::wire::{Code, PeerWant, WireError};
use crate::endpoint::Conn;
use crate::state::Agent;
pub use throttle_proto::forward::{ForwardInfo, ForwardSpec, HostPort};

/// Forward rules an agent holds at once.
pub const MAX_FORWARDS: usize = 256;

struct Rule {
    info: ForwardInfo,
    connections: Arc<AtomicU64>,
    task: JoinHandle<()>,
}

/// The forward rules of this agent.
#[derive(Default)]
pub struct Forwards {
    rules: Mutex<BTreeMap<u64, Rule>>,
    next_id: AtomicU64,
}

impl std::fmt::Debug for Forwards {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.list()).finish()
    }
}

impl Forwards {
    pub fn list(&self) -> Vec<ForwardInfo> {
        let rules = self.rules.lock().unwrap_or_else(|e| e.into_inner());
        rules
            .values()
            .map(|r| {
                let mut i = r.info.clone();
                i.connections = r.connections.load(Ordering::Relaxed);
                i
            })
            .collect()
    }

    pub fn len(&self) -> usize {
        self.rules.lock().unwrap_or_else(|e| e.into_inner()).len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Stop listening for rule `id` (open connections carry on). False if unknown.
    pub fn remove(&self, id: u64) -> bool {
        let mut rules = self.rules.lock().unwrap_or_else(|e| e.into_inner());
        match rules.remove(&id) {
            Some(r) => {
                r.task.abort();
                true
            }
            None => false,
        }
    }

    /// Stop every rule.
    pub fn clear(&self) {
        let mut rules = self.rules.lock().unwrap_or_else(|e| e.into_inner());
        for (_, r) in std::mem::take(&mut *rules) {
            r.task.abort();
        }
    }
}

/// The addresses of this node: loopback, and every address of its interfaces.
fn own_addresses() -> Vec<IpAddr> {
    let mut out = Vec::new();
    if let Ok(addrs) = nix::ifaddrs::getifaddrs() {
        for a in addrs {
            let Some(sa) = a.address else { continue };
            if let Some(v4) = sa.as_sockaddr_in() {
                out.push(IpAddr::V4(v4.ip()));
            } else if let Some(v6) = sa.as_sockaddr_in6() {
                out.push(IpAddr::V6(v6.ip()));
            }
        }
    }
    out
}

/// Resolve a forward target and check that it is an address of this node (a loopback
/// address or one of its interfaces' addresses) and not this agent's own control API or
/// data port. Returns the address to connect to.
pub async fn resolve_local_target(agent: &Agent, target: &str) -> Result<SocketAddr, WireError> {
    HostPort::parse(target).map_err(|e| WireError::new(Code::Malformed, e))?;
    let resolved: Vec<SocketAddr> = match target.parse::<SocketAddr>() {
        Ok(a) => vec![a],
        Err(_) => tokio::time::timeout(super::CONNECT_TIMEOUT, tokio::net::lookup_host(target))
            .await
            .map_err(|_| {
                WireError::new(
                    Code::TargetUnreachable,
                    format!("resolving {target} timed out"),
                )
            })?
            .map_err(|e| {
                WireError::new(
                    Code::TargetUnreachable,
                    format!("cannot resolve {target}: {e}"),
                )
            })?
            .collect(),
    };
    let own = own_addresses();
    let is_agent = |a: &SocketAddr| {
        [agent.control_addr, agent.data_addr].iter().any(|b| {
            b.port() == a.port() && (b.ip().is_unspecified() || b.ip() == a.ip().to_canonical())
        })
    };
    let mut refused = None;
    for a in &resolved {
        let ip = a.ip().to_canonical();
        if !(ip.is_loopback() || own.contains(&ip)) {
            refused = Some(format!(
                "{target} ({ip}) is not an address of node `{}`: a forward may only reach addresses of its destination node, never another host",
                agent.node
            ));
            continue;
        }
        if is_agent(&SocketAddr::new(ip, a.port())) {
            refused = Some(format!(
                "{target} is the agent of node `{}` itself; a forward may not target the agent",
                agent.node
            ));
            continue;
        }
        return Ok(SocketAddr::new(ip, a.port()));
    }
    Err(WireError::new(
        Code::Forbidden,
        refused.unwrap_or_else(|| format!("{target} resolves to no address")),
    ))
}

/// Why a forward rule was refused.
#[derive(Debug, thiserror::Error)]
pub enum ForwardError {
    /// The target is not an address of the destination node.
    #[error("{0}")]
    Forbidden(String),
    /// The listen address is taken, or the agent holds too many rules.
    #[error("{0}")]
    Conflict(String),
}

/// Bind and start a rule on `agent`.
pub async fn add(agent: &Arc<Agent>, spec: ForwardSpec) -> Result<ForwardInfo, ForwardError> {
    if agent.forwards.len() >= MAX_FORWARDS {
        return Err(ForwardError::Conflict(format!(
            "this agent holds {MAX_FORWARDS} forwards already; remove some first"
        )));
    }
    if spec.to_node == agent.node {
        // Checked now for a clear error; checked again for every connection.
        resolve_local_target(agent, spec.target.as_str())
            .await
            .map_err(|e| ForwardError::Forbidden(e.message))?;
    }
    let listener = super::listen(spec.listen)
        .map_err(|e| ForwardError::Conflict(format!("cannot listen on {}: {e}", spec.listen)))?;
    let bound = listener
        .local_addr()
        .map_err(|e| ForwardError::Conflict(format!("cannot read the bound address: {e}")))?;
    let id = agent.forwards.next_id.fetch_add(1, Ordering::Relaxed) + 1;
    let connections = Arc::new(AtomicU64::new(0));
    let info = ForwardInfo {
        id,
        listen: bound,
        to_node: spec.to_node.clone(),
        target: spec.target.clone(),
        connections: 0,
    };
    let task = tokio::spawn(accept_loop(
        agent.clone(),
        listener,
        spec,
        connections.clone(),
    ));
    info!(id, listen = %bound, to = %info.to_node, target = %info.target, "forward added");
    let mut rules = agent
        .forwards
        .rules
        .lock()
        .unwrap_or_else(|e| e.into_inner());
    rules.insert(
        id,
        Rule {
            info: info.clone(),
            connections,
            task,
        },
    );
    Ok(info)
}

async fn accept_loop(
    agent: Arc<Agent>,
    listener: TcpListener,
    spec: ForwardSpec,
    connections: Arc<AtomicU64>,
) {
    loop {
        match listener.accept().await {
            Ok((client, from)) => {
                connections.fetch_add(1, Ordering::Relaxed);
                let agent = agent.clone();
                let spec = spec.clone();
                tokio::spawn(async move {
                    if let Err(e) = carry(agent, client, &spec).await {
                        debug!(%from, error = %e, "forwarded connection ended with an error");
                    }
                });
            }
            Err(e) => {
                warn!(error = %e, "accept on a forward failed");
                tokio::time::sleep(std::time::Duration::from_millis(50)).await;
            }
        }
    }
}

async fn carry(agent: Arc<Agent>, client: TcpStream, spec: &ForwardSpec) -> std::io::Result<()> {
    client.set_nodelay(true)?;
    // Anyone who can reach a forward's listener may connect: those connections have
    // their own pool, apart from the rank streams'.
    let Some(_permit) = agent.limits.forwarded.try_enter(None) else {
        agent.limits.note_refused();
        super::socket::reset_on_close(client.as_raw_fd());
        return Ok(());
    };
    if spec.to_node == agent.node {
        let target = match peer::connect_local_target(&agent, spec.target.as_str()).await {
            Ok(t) => t,
            Err(e) => {
                agent
                    .limits
                    .warn_refusal(format_args!("forward target refused: {e}"));
                super::socket::reset_on_close(client.as_raw_fd());
                return Ok(());
            }
        };
        pump::bridge(&client, &target, Framing::Raw, None, agent.pump).await?;
        return Ok(());
    }
    let want = PeerWant::Forward {
        target: spec.target.to_string(),
    };
    match peer::dial(&agent, &spec.to_node, want).await {
        Ok(peer_stream) => peer::carry(&agent, Conn::Tcp(client), peer_stream).await,
        Err(e) => {
            // The client sees a reset: the closest a plain TCP program can get to the error.
            agent
                .limits
                .warn_refusal(format_args!("forward could not reach its destination: {e}"));
            super::socket::reset_on_close(client.as_raw_fd());
            Ok(())
        }
    }
}
