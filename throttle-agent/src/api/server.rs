//! Serving the control API so that abuse cannot stall the agent.
//!
//! Our own accept loop over hyper rather than `axum::serve`, because the agent must:
//! * refuse connections beyond [`CONTROL_CONNECTIONS`](crate::limits::CONTROL_CONNECTIONS)
//!   at once with a 503 (never queue them: 20,000 idle connections once took an agent to
//!   its file limit), or evict the oldest that has not presented the token yet (a flood
//!   from the controller's own host must not lock the controller out);
//! * close a connection that does not deliver a complete request header within
//!   [`HEADER_TIMEOUT`], also while it idles between requests (hyper starts the header
//!   timer again after every response), and bound the header buffer;
//! * bound bodies ([`MAX_BODY_BYTES`]), the time a body may take to arrive
//!   ([`BODY_TIMEOUT`], [`whole_body`]) and the time of one request;
//! * answer every refusal as `{"error": ...}` JSON ([`json_errors`]), including the
//!   plain-text 404/405/413 that routing and extractors produce;
//! * speak TLS when the operator gives it a certificate ([`Tls`]), so the bearer token
//!   does not cross a real network in clear.

use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use axum::extract::Request;
use axum::http::{header, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::{Json, Router};
use serde_json::json;
use tokio::net::TcpStream;
use tracing::debug;

use crate::limits::{Permit, Proof};
use crate::serve::AtStop;
use crate::shutdown::Shutdown;
use crate::state::Agent;

/// Longest time a client may take to send a complete request header, and longest time a
/// kept-alive connection may sit idle between requests.
pub const HEADER_TIMEOUT: Duration = Duration::from_secs(10);
/// Largest request body accepted.
pub const MAX_BODY_BYTES: usize = 1 << 20;
/// Largest buffer for one connection's request header.
const MAX_HEADER_BYTES: usize = 64 * 1024;
/// Longest time one request may take (calibration takes up to a minute).
const REQUEST_TIMEOUT: Duration = Duration::from_secs(120);
/// Longest time a client may take to send a request's body, token or not (a body trickled
/// a byte at a time held a connection for 50 s).
pub const BODY_TIMEOUT: Duration = Duration::from_secs(10);
/// Longest time a TLS handshake may take.
const TLS_HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// The address a control request came from (a request extension, for the token check).
#[derive(Clone, Copy, Debug)]
pub struct PeerAddr(pub std::net::SocketAddr);

/// The address a control connection came in on, as this agent sees it (what
/// `Token::control_proof` is bound to).
#[derive(Clone, Copy, Debug)]
pub struct LocalAddr(pub std::net::SocketAddr);

/// TLS for the control API: the agent's certificate chain and key.
#[derive(Clone)]
pub struct Tls {
    acceptor: tokio_rustls::TlsAcceptor,
}

impl std::fmt::Debug for Tls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Tls(..)")
    }
}

impl Tls {
    /// Load a PEM certificate chain and a PEM private key.
    pub fn load(cert: &Path, key: &Path) -> Result<Tls, String> {
        use rustls::pki_types::pem::PemObject;
        use rustls::pki_types::{CertificateDer, PrivateKeyDer};
        let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(cert)
            .and_then(|it| it.collect::<Result<Vec<_>, _>>())
            .map_err(|e| format!("cannot read the certificate {}: {e}", cert.display()))?;
        if certs.is_empty() {
            return Err(format!(
                "{} holds no PEM certificate (`-----BEGIN CERTIFICATE-----`)",
                cert.display()
            ));
        }
        let key = PrivateKeyDer::from_pem_file(key)
            .map_err(|e| format!("cannot read the private key {}: {e}", key.display()))?;
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let config = rustls::ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(|e| format!("TLS setup: {e}"))?
            .with_no_client_auth()
            .with_single_cert(certs, key)
            .map_err(|e| format!("the certificate and key do not work together: {e}"))?;
        Ok(Tls {
            acceptor: tokio_rustls::TlsAcceptor::from(Arc::new(config)),
        })
    }
}

/// Serve the control API on `listener` until shutdown.
pub async fn serve(
    agent: Arc<Agent>,
    listener: tokio::net::TcpListener,
    tls: Option<Tls>,
    shutdown: Shutdown,
) {
    let app = super::router(agent.clone());
    let tls_for_handle = tls.clone();
    let admit = move |stream: &tokio::net::TcpStream, from: SocketAddr| {
        // Sources that presented the token recently may use the reserve, so that clients
        // without it cannot lock the controller out.
        let pool = &agent.limits.control;
        let permit = if agent.limits.is_trusted(from.ip()) {
            pool.try_enter_trusted(Some(from.ip()))
        } else {
            pool.try_enter(Some(from.ip()))
        };
        match &permit {
            Some(p) => p.watch(std::os::fd::AsRawFd::as_raw_fd(stream)),
            None => {
                agent.limits.note_refused();
                debug!(%from, "control API busy: refusing a connection");
                if tls.is_none() {
                    refuse_busy(stream);
                }
            }
        }
        permit
    };
    let handle = move |stream, from, permit: Permit| {
        let (app, tls) = (app.clone(), tls_for_handle.clone());
        async move {
            // Until it presents the token, a connection may be evicted for a newcomer.
            let proof = permit.proof();
            if permit
                .unless_evicted(serve_connection(stream, from, tls, app, proof))
                .await
                .is_none()
            {
                debug!(%from, "control connection evicted before it presented the token");
            }
        }
    };
    crate::serve::serve(
        "the control API",
        listener,
        Some(shutdown),
        AtStop::Cut,
        admit,
        handle,
    )
    .await
}

/// Answer 503 without waiting: the socket is new, so its send buffer has room.
fn refuse_busy(stream: &TcpStream) {
    use throttle_proto::wire::BUSY_HEADER;
    let body =
        r#"{"error":"the agent is serving as many control connections as it may; try again"}"#;
    let response = format!(
        "HTTP/1.1 503 Service Unavailable\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n{BUSY_HEADER}: 1\r\n\r\n{body}",
        body.len()
    );
    let _ = stream.try_write(response.as_bytes());
}

async fn serve_connection(
    stream: TcpStream,
    from: std::net::SocketAddr,
    tls: Option<Tls>,
    app: Router,
    proof: Option<Proof>,
) {
    let _ = stream.set_nodelay(true);
    let local = stream.local_addr().ok().map(LocalAddr);
    match tls {
        None => {
            http(
                hyper_util::rt::TokioIo::new(stream),
                from,
                local,
                app,
                proof,
            )
            .await
        }
        Some(t) => {
            match tokio::time::timeout(TLS_HANDSHAKE_TIMEOUT, t.acceptor.accept(stream)).await {
                Ok(Ok(s)) => http(hyper_util::rt::TokioIo::new(s), from, local, app, proof).await,
                Ok(Err(e)) => debug!(error = %e, "TLS handshake failed"),
                Err(_) => debug!("TLS handshake timed out"),
            }
        }
    }
}

async fn http<I>(
    io: I,
    from: std::net::SocketAddr,
    local: Option<LocalAddr>,
    app: Router,
    proof: Option<Proof>,
) where
    I: hyper::rt::Read + hyper::rt::Write + Unpin + Send + 'static,
{
    let service =
        hyper::service::service_fn(move |mut req: hyper::Request<hyper::body::Incoming>| {
            req.extensions_mut().insert(PeerAddr(from));
            if let Some(l) = local {
                req.extensions_mut().insert(l);
            }
            if let Some(p) = &proof {
                req.extensions_mut().insert(p.clone());
            }
            tower::ServiceExt::oneshot(app.clone(), req)
        });
    let mut builder = hyper::server::conn::http1::Builder::new();
    builder
        .timer(hyper_util::rt::TokioTimer::new())
        .header_read_timeout(HEADER_TIMEOUT)
        .max_buf_size(MAX_HEADER_BYTES)
        .keep_alive(true);
    if let Err(e) = builder.serve_connection(io, service).await {
        debug!(error = %e, "control connection ended");
    }
}

/// Read the request's whole body within [`BODY_TIMEOUT`] (and [`MAX_BODY_BYTES`]) before
/// the handler runs: a 408 for a body that trickles, a 413 for one too large.
pub async fn whole_body(req: Request, next: Next) -> Response {
    let (parts, body) = req.into_parts();
    match tokio::time::timeout(BODY_TIMEOUT, axum::body::to_bytes(body, MAX_BODY_BYTES)).await {
        Ok(Ok(bytes)) => {
            next.run(Request::from_parts(parts, axum::body::Body::from(bytes)))
                .await
        }
        Ok(Err(_)) => (
            StatusCode::PAYLOAD_TOO_LARGE,
            Json(json!({ "error": format!("the request body is larger than the limit of {MAX_BODY_BYTES} bytes, or broke off") })),
        )
            .into_response(),
        Err(_) => (
            StatusCode::REQUEST_TIMEOUT,
            Json(json!({ "error": format!("the request body did not arrive within {} s", BODY_TIMEOUT.as_secs()) })),
        )
            .into_response(),
    }
}

/// Bound each request's time, and turn every error answer that is not JSON yet (routing's
/// 404 and 405, extractors' 413 and 400) into `{"error": ...}` that says what to do.
pub async fn json_errors(req: Request, next: Next) -> Response {
    let method = req.method().clone();
    let path = req.uri().path().to_string();
    let resp = match tokio::time::timeout(REQUEST_TIMEOUT, next.run(req)).await {
        Ok(r) => r,
        Err(_) => {
            return (
                StatusCode::GATEWAY_TIMEOUT,
                Json(json!({ "error": format!("{method} {path} took longer than {} s", REQUEST_TIMEOUT.as_secs()) })),
            )
                .into_response()
        }
    };
    let status = resp.status();
    if !(status.is_client_error() || status.is_server_error()) {
        return resp;
    }
    let is_json = resp
        .headers()
        .get(header::CONTENT_TYPE)
        .is_some_and(|v| v.as_bytes().starts_with(b"application/json"));
    if is_json {
        return resp;
    }
    let text = axum::body::to_bytes(resp.into_body(), 16 * 1024)
        .await
        .map(|b| String::from_utf8_lossy(&b).trim().to_string())
        .unwrap_or_default();
    let message = match status {
        StatusCode::METHOD_NOT_ALLOWED => format!(
            "{method} is not allowed on {path}; the agent's API table (throttle-agent/src/api/mod.rs, ARCHITECTURE.md) lists the methods of each path"
        ),
        StatusCode::PAYLOAD_TOO_LARGE => format!(
            "the request body is larger than the limit of {} bytes",
            MAX_BODY_BYTES
        ),
        _ if !text.is_empty() => text,
        _ => status
            .canonical_reason()
            .unwrap_or("request refused")
            .to_string(),
    };
    (status, Json(json!({ "error": message }))).into_response()
}
