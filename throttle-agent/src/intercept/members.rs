//! Which directory entries interception may capture: only nodes whose agents proved the
//! cluster token at the address the directory gives them, and only at addresses the
//! operator allows (`--intercept-within`, by default the node's own subnet: a token holder
//! could otherwise run an agent at an address shared with other users' services, add it to
//! the directory, and receive their connections there).
//!
//! Any token holder can write the directory (`PUT /cluster`). Were every entry captured,
//! an entry naming a host outside the cluster (a license server, a file server) would make
//! this node's redirect capture its programs' connections there and reset them (no agent
//! answers there to deliver them). So an address joins the redirect and the preload
//! library's node list only after the agent there answered the handshake with a proof of
//! the token and of its node name ([`crate::dial::prove`]); a host without an
//! agent never does. The proof is asked when the agent starts and when the directory is
//! set (for at most [`FIRST_PASS`], so that `PUT /cluster` returns with the rules in place
//! for the nodes that are up), and again in the background, with backoff, for nodes not
//! proven yet. Asking goes through the whole handshake, so the node asked learns of the
//! asker too ([`proven_by_peer`]): agents started one after the other know each other as
//! soon as the second is up.

use std::sync::Arc;
use std::time::Duration;

use super::rules::{self, Here};
use crate::shutdown::Shutdown;
use crate::state::Agent;

/// How long `PUT /cluster` waits for the nodes' proofs before it answers.
pub const FIRST_PASS: Duration = Duration::from_secs(3);
/// The background pass's first and longest interval while some node is not proven.
const RETRY_FIRST: Duration = Duration::from_secs(1);
const RETRY_MOST: Duration = Duration::from_secs(30);

/// The other nodes of the directory not proven at their current address.
fn unproven(agent: &Agent) -> Vec<(throttle_proto::name::Name, std::net::SocketAddr)> {
    let Some(state) = agent.intercept.as_ref() else {
        return Vec::new();
    };
    agent
        .directory
        .nodes()
        .into_iter()
        .filter(|n| n.name != agent.node && !state.is_proven(&n.name, n.data))
        .filter(|n| state.may_capture(n.data.ip()))
        .map(|n| (n.name, n.data))
        .collect()
}

/// The names of the other nodes not intercepted yet (for `status`).
pub fn pending(agent: &Agent) -> Vec<throttle_proto::name::Name> {
    unproven(agent).into_iter().map(|(n, _)| n).collect()
}

/// The names of the other nodes at addresses outside the operator's blocks: never
/// intercepted, whatever they prove (for `status`, so that a run between them is refused
/// rather than left unshaped).
pub fn outside(agent: &Agent) -> Vec<throttle_proto::name::Name> {
    let Some(state) = agent.intercept.as_ref() else {
        return Vec::new();
    };
    agent
        .directory
        .nodes()
        .into_iter()
        .filter(|n| n.name != agent.node && !state.may_capture(n.data.ip()))
        .map(|n| n.name)
        .collect()
}

/// Ask every node not proven yet, all at once, for at most `within`; record those that
/// prove themselves. Returns how many did.
pub async fn prove(agent: &Arc<Agent>, within: Duration) -> usize {
    let Some(state) = agent.intercept.as_ref() else {
        return 0;
    };
    let mut asks = tokio::task::JoinSet::new();
    for (name, data) in unproven(agent) {
        let agent = agent.clone();
        asks.spawn(async move {
            let r = tokio::time::timeout(within, crate::dial::prove(&agent, &name, data))
                .await
                .unwrap_or_else(|_| {
                    Err(crate::transport::wire::WireError::new(
                        crate::transport::wire::Code::PeerUnreachable,
                        "no answer in time",
                    ))
                });
            (name, data, r)
        });
    }
    let mut proven = 0;
    while let Some(done) = asks.join_next().await {
        let Ok((name, data, r)) = done else { continue };
        match r {
            Ok(()) => {
                state.prove(&name, data);
                proven += 1;
            }
            Err(e) => tracing::debug!(node = %name, %data, error = %e,
                "not intercepted yet: no agent proved the cluster token there"),
        }
    }
    proven
}

/// A peer authenticated as `name` from `ip`: when that is the address the directory gives
/// it, it is proven (and the rules follow, in the background, if that is news).
pub fn proven_by_peer(agent: &Arc<Agent>, name: &throttle_proto::name::Name, ip: std::net::IpAddr) {
    let Some(state) = agent.intercept.as_ref() else {
        return;
    };
    let Ok(data) = agent.directory.data_addr(name) else {
        return;
    };
    if data.ip().to_canonical() == ip.to_canonical() && state.prove(name, data) {
        let agent = agent.clone();
        tokio::spawn(async move {
            if let Err(e) = update_rules(&agent).await {
                tracing::warn!(error = %e, "the interception rules could not follow a node's proof");
            }
        });
    }
}

/// Rewrite the kernel rules from the directory and the proven nodes (blocking: `nft`).
pub async fn update_rules(agent: &Arc<Agent>) -> Result<(), String> {
    let a = agent.clone();
    tokio::task::spawn_blocking(move || match &a.intercept {
        Some(i) => rules::update(i, &Here::of(&a)).map_err(|e| e.to_string()),
        None => Ok(()),
    })
    .await
    .map_err(|e| e.to_string())?
}

/// Until shutdown: prove the nodes not proven yet, every second at first and less often
/// while they stay silent (up to every 30 s); the rules follow each new proof. A change of
/// the directory starts a pass at once.
pub async fn keep_proving(agent: Arc<Agent>, mut shutdown: Shutdown) {
    let Some(state) = agent.intercept.as_ref() else {
        return;
    };
    let mut wait = RETRY_FIRST;
    let mut warned: std::collections::HashSet<(throttle_proto::name::Name, std::net::SocketAddr)> =
        Default::default();
    loop {
        tokio::select! {
            _ = shutdown.wait() => return,
            _ = state.directory_changed.notified() => wait = RETRY_FIRST,
            _ = tokio::time::sleep(wait) => wait = (wait * 2).min(RETRY_MOST),
        }
        let waiting = unproven(&agent);
        if waiting.is_empty() {
            continue;
        }
        if prove(&agent, FIRST_PASS).await > 0 {
            if let Err(e) = update_rules(&agent).await {
                tracing::warn!(error = %e, "the interception rules could not follow a node's proof");
            }
        }
        for n in unproven(&agent) {
            if warned.insert(n.clone()) {
                tracing::warn!(node = %n.0, data = %n.1,
                    "not intercepting connections to this node: no agent there has proven this cluster's token yet (asked again with backoff)");
            }
        }
    }
}
