//! Targets on this node: a forward's `HOST:PORT` must be an address of this node (its data
//! address, or one of its interfaces' non-loopback addresses), a port from 1024 up, and
//! never one of this agent's own ports (control, data, interception, preload) or a
//! listener of one of its forwards. A forward
//! carries traffic between the cluster's nodes; it never relays to an arbitrary host, nor
//! to a service meant for this machine alone, unless the operator opens loopback and
//! system ports (`--open-forwards`).

use std::net::{IpAddr, SocketAddr};

use tokio::net::TcpStream;

use crate::state::Agent;
use crate::transport::wire::{Code, WireError};
use crate::transport::CONNECT_TIMEOUT;
use throttle_proto::forward::HostPort;

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

/// Why a forward may not listen on `listen` (`None`: it may): only on this node's address
/// in the cluster or another non-loopback address of its interfaces. Not on a loopback
/// address that is not the node's, nor on every address at once (0.0.0.0, ::), unless the
/// operator opens forwards: there a forward would take the place of a service meant for
/// this machine alone, such as another user's preload agent at 127.0.0.1:P, whose programs
/// would then send their connections where the forward leads (issue 35, finding 3).
pub fn listen_refused(agent: &Agent, listen: SocketAddr) -> Option<String> {
    if agent.open_forwards {
        return None;
    }
    let ip = listen.ip().to_canonical();
    let node = agent.data_addr.ip().to_canonical();
    if ip == node && !ip.is_unspecified() {
        return None;
    }
    if ip.is_unspecified() {
        return Some(format!(
            "{listen}: a forward listens on one address of node `{}` (its address {node}, or another of its interfaces'), not on every address, where it would also take loopback ports meant for this machine's own services (the operator can allow it with --open-forwards)",
            agent.node
        ));
    }
    if ip.is_loopback() {
        return Some(format!(
            "{listen}: a loopback address other than node `{}`'s own ({node}) is for this machine's own services (another user's preload agent listens there); a forward listens on the node's address (the operator can allow loopback with --open-forwards)",
            agent.node
        ));
    }
    if !own_addresses().contains(&ip) {
        return Some(format!(
            "{listen} is not an address of node `{}`",
            agent.node
        ));
    }
    None
}

/// Resolve a forward target and check that it is an address of this node (its address in
/// the cluster or one of its interfaces' addresses; loopback only with `--open-forwards`),
/// a port from 1024 up (or `--open-forwards`), and not this agent's own control API or
/// data port. Returns the address to connect to.
pub async fn resolve_local_target(agent: &Agent, target: &str) -> Result<SocketAddr, WireError> {
    HostPort::parse(target).map_err(|e| WireError::new(Code::Malformed, e))?;
    let resolved = resolve(target).await?;
    let allowed = Allowed::on(agent);
    let mut refused = None;
    for a in &resolved {
        let a = SocketAddr::new(a.ip().to_canonical(), a.port());
        match allowed.refusal(agent, target, a) {
            Some(why) => refused = Some(why),
            None => return Ok(a),
        }
    }
    Err(WireError::new(
        Code::Forbidden,
        refused.unwrap_or_else(|| format!("{target} resolves to no address")),
    ))
}

/// The addresses `target` names (a literal address, or a name looked up within the
/// connect timeout).
async fn resolve(target: &str) -> Result<Vec<SocketAddr>, WireError> {
    if let Ok(a) = target.parse::<SocketAddr>() {
        return Ok(vec![a]);
    }
    Ok(tokio::time::timeout(
        crate::transport::CONNECT_TIMEOUT,
        tokio::net::lookup_host(target),
    )
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
    .collect())
}

/// What a forward of this node may reach, read from the agent once per request.
struct Allowed {
    /// The addresses of the node's interfaces.
    own: Vec<IpAddr>,
    /// The node's address as the cluster knows it, its data address (on a local cluster a
    /// loopback one). Not the control API's: that is on 127.0.0.1 where the operator
    /// follows the agent's advice, and so are the services meant for this machine only.
    announced: Vec<IpAddr>,
    /// The agent's own ports: control, data, and the interception and preload ports (on
    /// loopback; a forward there would let anyone who reaches it drive them).
    agent_ports: Vec<SocketAddr>,
    /// Other forwards' listeners: two forwards pointing at each other turned one
    /// connection into 1,415 chained ones.
    forward_listeners: Vec<SocketAddr>,
}

impl Allowed {
    fn on(agent: &Agent) -> Allowed {
        let announced = [agent.data_addr.ip().to_canonical()]
            .into_iter()
            .filter(|ip| !ip.is_unspecified())
            .collect();
        let mut agent_ports: Vec<SocketAddr> = vec![agent.control_addr, agent.data_addr];
        if let Some(i) = &agent.intercept {
            let lo = IpAddr::from([127, 0, 0, 1]);
            if i.port != 0 {
                agent_ports.push(SocketAddr::new(lo, i.port));
            }
            if let Some(p) = i.preload_port {
                agent_ports.push(SocketAddr::new(lo, p));
                agent_ports.push(SocketAddr::new(
                    IpAddr::from(std::net::Ipv6Addr::LOCALHOST),
                    p,
                ));
            }
        }
        Allowed {
            own: own_addresses(),
            announced,
            agent_ports,
            forward_listeners: agent
                .forwards
                .list()
                .into_iter()
                .map(|f| f.listen)
                .collect(),
        }
    }

    /// Why a forward may not reach `a` (one of `target`'s addresses), or `None` if it may.
    fn refusal(&self, agent: &Agent, target: &str, a: SocketAddr) -> Option<String> {
        let ip = a.ip();
        if !(ip.is_loopback() || self.own.contains(&ip)) {
            return Some(format!(
                "{target} ({ip}) is not an address of node `{}`: a forward may only reach addresses of its destination node, never another host",
                agent.node
            ));
        }
        // A service bound to loopback is meant for this machine only: a forward would hand
        // it to whoever reaches its listener. So are ports under 1024 (sshd, system
        // services). The operator may open both (`--open-forwards`).
        if ip.is_loopback() && !self.announced.contains(&ip) && !agent.open_forwards {
            return Some(format!(
                "{target} is a loopback address of node `{}`, for its own services only; a forward may reach the node's address{} or its interfaces' (its operator can allow loopback with --open-forwards)",
                agent.node,
                self.announced
                    .first()
                    .map(|a| format!(" ({a})"))
                    .unwrap_or_default()
            ));
        }
        if a.port() < 1024 && !agent.open_forwards {
            return Some(format!(
                "{target}: port {} is under 1024, a system service's; a forward may reach ports from 1024 up (node `{}`'s operator can allow more with --open-forwards)",
                a.port(),
                agent.node
            ));
        }
        if self.agent_ports.iter().any(|b| same_listener(b, &a)) {
            return Some(format!(
                "{target} is the agent of node `{}` itself; a forward may not target the agent",
                agent.node
            ));
        }
        if self.forward_listeners.iter().any(|b| same_listener(b, &a)) {
            return Some(format!(
                "{target} is a forward's listener on node `{}`; a forward may not target another forward (they could carry a connection round in a loop)",
                agent.node
            ));
        }
        None
    }
}

/// Whether a connection to `a` reaches the listener bound at `b` (its port, and its
/// address, any address, or loopback for loopback).
fn same_listener(b: &SocketAddr, a: &SocketAddr) -> bool {
    b.port() == a.port()
        && (b.ip().is_unspecified()
            || b.ip().to_canonical() == a.ip().to_canonical()
            || (b.ip().is_loopback() && a.ip().is_loopback()))
}

/// Connect to `target`, which must be an address of this node (see
/// [`resolve_local_target`]).
pub async fn connect_local_target(agent: &Agent, target: &str) -> Result<TcpStream, WireError> {
    let addr = resolve_local_target(agent, target).await?;
    let conn = tokio::time::timeout(CONNECT_TIMEOUT, crate::transport::connect(addr))
        .await
        .map_err(|_| {
            WireError::new(
                Code::TargetUnreachable,
                format!("connecting to {target} timed out"),
            )
        })?
        .map_err(|e| {
            WireError::new(
                Code::TargetUnreachable,
                format!("cannot connect to {target}: {e}"),
            )
        })?;
    let _ = conn.set_nodelay(true);
    Ok(conn)
}
