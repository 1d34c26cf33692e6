//! The interception port: where the kernel redirect (nftables, [`super::netfilter`]) sends
//! the connections of this node's programs to other nodes. Each is handed to
//! [`super::outgoing::open`] with the destination the kernel saw (SO_ORIGINAL_DST).

use std::net::SocketAddr;
use std::os::fd::AsRawFd;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use tokio::net::{TcpListener, TcpStream};
use tracing::debug;

use super::outgoing::open;
use crate::serve::{self, AtStop};
use crate::shutdown::Shutdown;
use crate::state::Agent;
use crate::transport::sockopt;

/// Accept redirected connections until shutdown. They are programs' connections of this
/// node, carried under the forwarded connections' pool (taken in [`open`]).
pub async fn serve(agent: Arc<Agent>, listener: TcpListener, shutdown: Shutdown) {
    let handle = move |client: TcpStream, from: SocketAddr, (): ()| {
        let agent = agent.clone();
        async move {
            if let Err(e) = carry_outgoing(agent, client, from).await {
                debug!(%from, error = %e, "intercepted connection ended with an error");
            }
        }
    };
    serve::serve(
        "the interception port",
        listener,
        Some(shutdown),
        AtStop::Finish,
        |_: &TcpStream, _| Some(()),
        handle,
    )
    .await
}

/// Carry one connection the kernel redirected, from a program on this node (`src`) to
/// its original destination on another node, through both agents' links.
pub async fn carry_outgoing(
    agent: Arc<Agent>,
    client: TcpStream,
    src: SocketAddr,
) -> std::io::Result<()> {
    let Some(state) = agent.intercept.as_ref() else {
        return Ok(());
    };
    client.set_nodelay(true)?;
    let dst = match sockopt::original_destination(&client) {
        Ok(d) => d,
        Err(e) => {
            state.failed.fetch_add(1, Ordering::Relaxed);
            agent.limits.warn_refusal(format_args!(
                "a connection to the interception port from {src} was not redirected ({e})"
            ));
            crate::transport::socket::reset_on_close(client.as_raw_fd());
            return Ok(());
        }
    };
    match open(&agent, src, dst).await {
        Ok(opened) => opened.carry(&agent, client).await,
        Err(_) => {
            // The program sees a reset: the closest a redirected connection can get to the
            // error (it was accepted by the kernel before anyone knew).
            crate::transport::socket::reset_on_close(client.as_raw_fd());
            Ok(())
        }
    }
}
