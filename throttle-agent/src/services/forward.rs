//! Port forwards: `LISTEN on node X -> HOST:PORT on node Y`, for unmodified TCP programs.
//!
//! X listens; each accepted connection is carried to Y's agent (through X's egress and
//! Y's ingress), which connects to HOST:PORT. When X and Y are the same node the
//! connection goes straight to the target, unshaped, as every same-node stream does.
//!
//! HOST:PORT must be an address *of node Y* ([`target::resolve_local_target`]: Y's address
//! in the cluster or one of its interfaces' addresses, a port from 1024 up, and not Y's
//! agent itself): a forward carries traffic between the cluster's nodes, it never relays
//! to an arbitrary host, nor to a service meant for Y alone (loopback-only, system ports)
//! unless Y's operator opens them (`--open-forwards`). LISTEN takes a port from 1024 up
//! on the same terms.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use std::os::fd::AsRawFd;

use tokio::net::{TcpListener, TcpStream};
use tracing::{debug, info};

use super::target;
use crate::dial;
use crate::endpoint::Conn;
use crate::limits::Permit;
use crate::serve::AtStop;
use crate::state::forwards::MAX_FORWARDS;
use crate::state::Agent;
use crate::transport::pump::{self, Framing};
use crate::transport::wire::PeerWant;
pub use throttle_proto::forward::{ForwardInfo, ForwardSpec, HostPort};

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
        target::resolve_local_target(agent, spec.target.as_str())
            .await
            .map_err(|e| ForwardError::Forbidden(e.message))?;
    }
    if let Some(why) = target::listen_refused(agent, spec.listen) {
        return Err(ForwardError::Forbidden(why));
    }
    if spec.listen.port() != 0 && spec.listen.port() < 1024 && !agent.open_forwards {
        return Err(ForwardError::Forbidden(format!(
            "{}: a forward listens on a port from 1024 up (ports under 1024 are system services'; the operator can allow them with --open-forwards)",
            spec.listen
        )));
    }
    let listener = crate::transport::listen(spec.listen)
        .map_err(|e| ForwardError::Conflict(format!("cannot listen on {}: {e}", spec.listen)))?;
    let bound = listener
        .local_addr()
        .map_err(|e| ForwardError::Conflict(format!("cannot read the bound address: {e}")))?;
    let id = agent.forwards.next_id();
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
    agent.forwards.insert(info.clone(), connections, task);
    Ok(info)
}

/// Accept on a forward's listener until the rule is removed (its task aborted; the
/// connections it carries go on).
async fn accept_loop(
    agent: Arc<Agent>,
    listener: TcpListener,
    spec: ForwardSpec,
    connections: Arc<AtomicU64>,
) {
    let admitting = agent.clone();
    let admit = move |client: &TcpStream, _: SocketAddr| {
        connections.fetch_add(1, Ordering::Relaxed);
        // Anyone who can reach a forward's listener may connect: those connections have
        // their own pool, apart from the rank streams'.
        let permit = admitting.limits.forwarded.try_enter(None);
        if permit.is_none() {
            admitting.limits.note_refused();
            crate::transport::socket::reset_on_close(client.as_raw_fd());
        }
        permit
    };
    let handle = move |client: TcpStream, from: SocketAddr, permit: Permit| {
        let (agent, spec) = (agent.clone(), spec.clone());
        async move {
            if let Err(e) = carry(agent, client, &spec, permit).await {
                debug!(%from, error = %e, "forwarded connection ended with an error");
            }
        }
    };
    crate::serve::serve("a forward", listener, None, AtStop::Finish, admit, handle).await
}

/// Carry one admitted connection (`_permit`: its place in the forwarded connections' pool).
async fn carry(
    agent: Arc<Agent>,
    client: TcpStream,
    spec: &ForwardSpec,
    _permit: Permit,
) -> std::io::Result<()> {
    client.set_nodelay(true)?;
    if spec.to_node == agent.node {
        let target = match target::connect_local_target(&agent, spec.target.as_str()).await {
            Ok(t) => t,
            Err(e) => {
                agent
                    .limits
                    .warn_refusal(format_args!("forward target refused: {e}"));
                crate::transport::socket::reset_on_close(client.as_raw_fd());
                return Ok(());
            }
        };
        pump::bridge(&client, &target, Framing::Raw, None, agent.pump).await?;
        return Ok(());
    }
    let want = PeerWant::Forward {
        target: spec.target.to_string(),
    };
    match dial::dial(&agent, &spec.to_node, want).await {
        Ok(peer_stream) => dial::carry(&agent, Conn::Tcp(client), peer_stream).await,
        Err(e) => {
            // The client sees a reset: the closest a plain TCP program can get to the error.
            agent
                .limits
                .warn_refusal(format_args!("forward could not reach its destination: {e}"));
            crate::transport::socket::reset_on_close(client.as_raw_fd());
            Ok(())
        }
    }
}
