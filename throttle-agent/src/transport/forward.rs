//! Port forwards: `LISTEN on node X -> HOST:PORT on node Y`, for unmodified TCP programs.
//!
//! X listens; each accepted connection is carried to Y's agent (through X's egress and
//! Y's ingress), which connects to HOST:PORT. When X and Y are the same node the
//! connection goes straight to the target, unshaped, as every same-node stream does.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use std::os::fd::AsRawFd;

use serde::{Deserialize, Serialize};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinHandle;
use tracing::{debug, info, warn};

use super::peer;
use super::pump::{self, Framing};
use super::wire::Request;
use crate::agent::Agent;
use crate::endpoint::Conn;

/// What a user asks for.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ForwardSpec {
    /// Address to listen on, on this node (`127.0.0.1:5201`; port 0 picks one).
    pub listen: String,
    /// Node whose agent connects to the target.
    pub to_node: String,
    /// `host:port` as seen from `to_node`.
    pub target: String,
}

impl ForwardSpec {
    /// Parse the command-line form `LISTEN=NODE:HOST:PORT`.
    pub fn parse_cli(text: &str) -> Result<ForwardSpec, String> {
        let (listen, to) = text.split_once('=').ok_or_else(|| {
            format!("forward `{text}` must look like LISTEN=NODE:HOST:PORT, e.g. 127.0.0.1:5201=n1:127.0.0.1:5201")
        })?;
        let (to_node, target) = parse_destination(to)?;
        let spec = ForwardSpec {
            listen: listen.to_string(),
            to_node,
            target,
        };
        spec.check()?;
        Ok(spec)
    }

    /// Check the addresses' form.
    pub fn check(&self) -> Result<(), String> {
        self.listen.parse::<SocketAddr>().map_err(|_| {
            format!(
                "listen address `{}` must be IP:PORT, e.g. 127.0.0.1:5201",
                self.listen
            )
        })?;
        check_host_port(&self.target)?;
        if self.to_node.is_empty() {
            return Err("the destination node name is empty".into());
        }
        Ok(())
    }
}

/// Split `NODE:HOST:PORT` into the node and `HOST:PORT`.
pub fn parse_destination(text: &str) -> Result<(String, String), String> {
    let (node, target) = text.split_once(':').ok_or_else(|| {
        format!("destination `{text}` must look like NODE:HOST:PORT, e.g. n1:127.0.0.1:5201")
    })?;
    check_host_port(target)?;
    Ok((node.to_string(), target.to_string()))
}

fn check_host_port(target: &str) -> Result<(), String> {
    let ok = target
        .rsplit_once(':')
        .map(|(h, p)| !h.is_empty() && p.parse::<u16>().map(|p| p > 0).unwrap_or(false))
        .unwrap_or(false);
    if ok {
        Ok(())
    } else {
        Err(format!(
            "target `{target}` must be HOST:PORT with a port in 1..65535"
        ))
    }
}

/// A running rule, as reported by the API.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct ForwardInfo {
    pub id: u64,
    /// The address actually bound.
    pub listen: String,
    pub to_node: String,
    pub target: String,
    pub connections: u64,
}

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

/// Bind and start a rule on `agent`.
pub async fn add(agent: &Arc<Agent>, spec: ForwardSpec) -> Result<ForwardInfo, String> {
    spec.check()?;
    let listener = TcpListener::bind(&spec.listen)
        .await
        .map_err(|e| format!("cannot listen on {}: {e}", spec.listen))?;
    let bound = listener
        .local_addr()
        .map_err(|e| format!("cannot read the bound address: {e}"))?;
    let id = agent.forwards.next_id.fetch_add(1, Ordering::Relaxed) + 1;
    let connections = Arc::new(AtomicU64::new(0));
    let info = ForwardInfo {
        id,
        listen: bound.to_string(),
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
    if spec.to_node == agent.node {
        let target = match peer::connect_target(&spec.target).await {
            Ok(t) => t,
            Err(e) => {
                warn!(error = %e, "forward target refused");
                super::socket::reset_on_close(client.as_raw_fd());
                return Ok(());
            }
        };
        pump::bridge(&client, &target, Framing::Raw, None, agent.pump).await?;
        return Ok(());
    }
    let req = Request::PeerForward {
        token: agent.token.as_str().to_string(),
        src_node: agent.node.clone(),
        target: spec.target.clone(),
    };
    match peer::dial(&agent, &spec.to_node, &req).await {
        Ok(peer_stream) => peer::carry(&agent, Conn::Tcp(client), peer_stream).await,
        Err(e) => {
            // The client sees a reset: the closest a plain TCP program can get to the error.
            warn!(error = %e, "forward could not reach its destination");
            super::socket::reset_on_close(client.as_raw_fd());
            Ok(())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_cli_rules_and_explains_mistakes() {
        let s = ForwardSpec::parse_cli("127.0.0.1:5201=n1:127.0.0.1:5202").unwrap();
        assert_eq!(s.to_node, "n1");
        assert_eq!(s.target, "127.0.0.1:5202");
        assert!(ForwardSpec::parse_cli("127.0.0.1:5201")
            .unwrap_err()
            .contains("LISTEN="));
        assert!(ForwardSpec::parse_cli("nohost=n1:127.0.0.1:1")
            .unwrap_err()
            .contains("IP:PORT"));
        assert!(ForwardSpec::parse_cli("127.0.0.1:1=n1:host:99999")
            .unwrap_err()
            .contains("port"));
        assert!(ForwardSpec::parse_cli("127.0.0.1:1=n1").is_err());
    }
}
