//! The one accept loop every listener of the agent runs (control API, data port, local
//! endpoint, interception and preload ports, forwards).
//!
//! It owns what every listener needs alike: accepting until shutdown, admission (the
//! listener's `admit` takes a permit from its pool for each connection or refuses it at
//! once, never queueing), a pause after a failed accept (out of descriptors: retrying at
//! once would spin), and the connections' tasks. What differs per listener is only
//! `admit` and `handle`.

use std::future::Future;
use std::time::Duration;

use tokio::task::JoinSet;
use tracing::warn;

use crate::shutdown::Shutdown;

/// Pause after a failed accept.
const ACCEPT_BACKOFF: Duration = Duration::from_millis(50);

/// A listener `serve` accepts from (TCP or Unix).
pub trait Listener {
    type Conn: Send + 'static;
    /// Where a connection comes from (`()` for a Unix socket).
    type From: Copy + Send + 'static;
    fn accept(&self) -> impl Future<Output = std::io::Result<(Self::Conn, Self::From)>> + Send;
}

impl Listener for tokio::net::TcpListener {
    type Conn = tokio::net::TcpStream;
    type From = std::net::SocketAddr;
    async fn accept(&self) -> std::io::Result<(Self::Conn, Self::From)> {
        tokio::net::TcpListener::accept(self).await
    }
}

impl Listener for tokio::net::UnixListener {
    type Conn = tokio::net::UnixStream;
    type From = ();
    async fn accept(&self) -> std::io::Result<(Self::Conn, Self::From)> {
        tokio::net::UnixListener::accept(self)
            .await
            .map(|(s, _)| (s, ()))
    }
}

/// What happens to the connections still open when the listener stops.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AtStop {
    /// They carry on to their end (streams: a stop must not cut a run's bytes).
    Finish,
    /// They are cut (the control API's keep-alive connections would hold the stop).
    Cut,
}

/// Accept from `listener` (named `what` in warnings) until `shutdown` fires (never, with
/// `None`: a forward's listener is stopped by aborting its task). Each connection is first
/// given to `admit`, which returns its permit or `None` after refusing it (an answer or a
/// reset, at once); an admitted one is served by `handle` on its own task.
pub async fn serve<L, P, Fut>(
    what: &'static str,
    listener: L,
    shutdown: Option<Shutdown>,
    at_stop: AtStop,
    mut admit: impl FnMut(&L::Conn, L::From) -> Option<P>,
    mut handle: impl FnMut(L::Conn, L::From, P) -> Fut,
) where
    L: Listener,
    Fut: Future<Output = ()> + Send + 'static,
{
    let mut shutdown = shutdown;
    let mut open = JoinSet::new();
    loop {
        tokio::select! {
            _ = stopped(&mut shutdown) => break,
            Some(_) = open.join_next(), if !open.is_empty() => {}
            accepted = listener.accept() => match accepted {
                Ok((conn, from)) => {
                    if let Some(permit) = admit(&conn, from) {
                        open.spawn(handle(conn, from, permit));
                    }
                }
                Err(e) => {
                    warn!(error = %e, "accept on the {what} failed");
                    tokio::time::sleep(ACCEPT_BACKOFF).await;
                }
            }
        }
    }
    match at_stop {
        AtStop::Cut => open.abort_all(),
        AtStop::Finish => open.detach_all(),
    }
}

async fn stopped(shutdown: &mut Option<Shutdown>) {
    match shutdown {
        Some(s) => s.wait().await,
        None => std::future::pending().await,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;
    use tokio::io::AsyncWriteExt;

    #[tokio::test]
    async fn admitted_connections_are_handled_refused_ones_are_not_and_stop_ends_the_loop() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let (tx, rx) = tokio::sync::watch::channel(false);
        let handled = Arc::new(AtomicUsize::new(0));
        let seen = Arc::new(AtomicUsize::new(0));
        let (h, s) = (handled.clone(), seen.clone());
        let task = tokio::spawn(serve(
            "test port",
            listener,
            Some(Shutdown(rx)),
            AtStop::Finish,
            move |_, _| (s.fetch_add(1, Ordering::SeqCst) % 2 == 0).then_some(()),
            move |mut c: tokio::net::TcpStream, _, ()| {
                let h = h.clone();
                async move {
                    h.fetch_add(1, Ordering::SeqCst);
                    let _ = c.write_all(b"x").await;
                }
            },
        ));
        for _ in 0..4 {
            let _ = tokio::net::TcpStream::connect(addr).await.unwrap();
        }
        while seen.load(Ordering::SeqCst) < 4 {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        tx.send(true).unwrap();
        tokio::time::timeout(Duration::from_secs(5), task)
            .await
            .expect("the loop ends at shutdown")
            .unwrap();
        let t = std::time::Instant::now();
        while handled.load(Ordering::SeqCst) < 2 && t.elapsed() < Duration::from_secs(5) {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        assert_eq!(
            handled.load(Ordering::SeqCst),
            2,
            "every other one admitted"
        );
    }
}
