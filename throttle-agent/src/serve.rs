//! The one accept loop every listener of the agent runs (control API, data port, local
//! endpoint, interception and preload ports, forwards).
//!
//! It owns what every listener needs alike: accepting until shutdown, admission (the
//! listener's `admit` takes a permit from its pool for each connection or refuses it at
//! once, never queueing), a pause after a failed accept (out of descriptors: retrying at
//! once would spin), and the connections' tasks, also when the loop's own task is aborted
//! (a forward removed). What differs per listener is only `admit` and `handle`.

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

/// What happens to the connections still open when the listener stops (at shutdown, or
/// when its task is aborted).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AtStop {
    /// They carry on to their end (streams: a stop must not cut a run's bytes, and
    /// removing a forward stops its listener only).
    Finish,
    /// They are cut (the control API's keep-alive connections would hold the stop).
    Cut,
}

/// The connections' tasks of one loop. Dropped when the loop ends, however it ends: a
/// `JoinSet` alone would abort every task when dropped, which must not happen to
/// [`AtStop::Finish`] connections when a forward's listener task is aborted.
struct Open {
    tasks: JoinSet<()>,
    at_stop: AtStop,
}

impl Drop for Open {
    fn drop(&mut self) {
        match self.at_stop {
            AtStop::Cut => self.tasks.abort_all(),
            AtStop::Finish => self.tasks.detach_all(),
        }
    }
}

/// Accept from `listener` (named `what` in warnings: "the data port", "a forward") until
/// `shutdown` fires (never, with `None`: a forward's listener is stopped by aborting its
/// task). Each connection is first given to `admit`, which returns its permit or `None`
/// after refusing it (an answer or a reset, at once; the connection is then closed); an
/// admitted one is served by `handle` on its own task. `at_stop` says what becomes of the
/// connections still open when the loop ends.
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
    let mut open = Open {
        tasks: JoinSet::new(),
        at_stop,
    };
    loop {
        tokio::select! {
            _ = stopped(&mut shutdown) => break,
            Some(_) = open.tasks.join_next(), if !open.tasks.is_empty() => {}
            accepted = listener.accept() => match accepted {
                Ok((conn, from)) => {
                    if let Some(permit) = admit(&conn, from) {
                        open.tasks.spawn(handle(conn, from, permit));
                    }
                }
                Err(e) => {
                    warn!(error = %e, "accept on {what} failed");
                    tokio::time::sleep(ACCEPT_BACKOFF).await;
                }
            }
        }
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

    /// Start a loop with no shutdown (like a forward's), connect once, abort the loop's
    /// task while the connection is served; what the client then reads.
    async fn read_after_abort(at_stop: AtStop) -> Vec<u8> {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let (started_tx, started_rx) = tokio::sync::oneshot::channel::<()>();
        let (go_tx, go_rx) = tokio::sync::oneshot::channel::<()>();
        let mut started_tx = Some(started_tx);
        let mut go_rx = Some(go_rx);
        let task = tokio::spawn(serve(
            "test port",
            listener,
            None,
            at_stop,
            |_, _| Some(()),
            move |mut c: tokio::net::TcpStream, _, ()| {
                let (started, go) = (started_tx.take().unwrap(), go_rx.take().unwrap());
                async move {
                    let _ = started.send(());
                    let _ = go.await;
                    let _ = c.write_all(b"still here").await;
                }
            },
        ));
        let mut client = tokio::net::TcpStream::connect(addr).await.unwrap();
        started_rx.await.unwrap();
        task.abort();
        assert!(task.await.unwrap_err().is_cancelled());
        let _ = go_tx.send(());
        let mut got = Vec::new();
        let read = tokio::io::AsyncReadExt::read_to_end(&mut client, &mut got);
        let _ = tokio::time::timeout(Duration::from_secs(5), read)
            .await
            .expect("the connection ends");
        got
    }

    #[tokio::test]
    async fn aborting_the_loop_leaves_finish_connections_running_and_cuts_cut_ones() {
        assert_eq!(read_after_abort(AtStop::Finish).await, b"still here");
        assert_eq!(read_after_abort(AtStop::Cut).await, b"");
    }
}
