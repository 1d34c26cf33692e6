//! A blocking client for one agent's control API, in the contract's types.
//!
//! Every call sends and receives `throttle_proto` values, and turns transport failures
//! and `{"error": ...}` answers into messages that name the node and say what to do, so
//! commands can simply `?` them.

use std::time::Duration;

use anyhow::{anyhow, Result};
use serde::de::DeserializeOwned;
use serde::Serialize;
use throttle_proto::calibration::{CalibrateRequest, Calibration};
use throttle_proto::cluster::ClusterNodes;
use throttle_proto::forward::{ForwardInfo, ForwardList, ForwardSpec};
use throttle_proto::job::{JobList, JobReport, LaunchSpec, Launched};
use throttle_proto::refusal::Refusal;
use throttle_proto::shape::ShapeChange;
use throttle_proto::status::Status;
use throttle_proto::Name;

use crate::cluster::{Cluster, Node};

#[derive(Clone)]
pub struct AgentClient {
    node: Name,
    base: String,
    auth: String,
    http: ureq::Agent,
    /// The token, to check the agent's proof of it before it is sent.
    token: throttle_proto::auth::Token,
    /// The address dialed, which the agent's proof must name.
    control: std::net::SocketAddr,
    /// Whether the agent proved it holds the token (once per client and its clones).
    proved: std::sync::Arc<std::sync::atomic::AtomicBool>,
}

/// What went wrong underneath a transport error (the system's words: "Connection refused
/// (os error 111)"), without the URL and the layers ureq wraps around it.
fn why_unreachable(e: &ureq::Error) -> String {
    let mut deepest: &dyn std::error::Error = e;
    while let Some(next) = deepest.source() {
        deepest = next;
    }
    let text = deepest.to_string();
    if text.is_empty() {
        e.to_string()
    } else {
        text
    }
}

/// How long a request turned away unread is sent again.
const RETRY_FOR: Duration = Duration::from_secs(3);

/// Whether a transport error is a connection the agent closed before answering (reset,
/// or closed: what an evicted connection sees), not one that never connected.
fn closed_unanswered(t: &ureq::Transport) -> bool {
    use std::error::Error;
    if t.kind() != ureq::ErrorKind::Io {
        return false;
    }
    let mut cause = t.source();
    while let Some(c) = cause {
        if let Some(io) = c.downcast_ref::<std::io::Error>() {
            return matches!(
                io.kind(),
                std::io::ErrorKind::ConnectionReset
                    | std::io::ErrorKind::ConnectionAborted
                    | std::io::ErrorKind::UnexpectedEof
                    | std::io::ErrorKind::BrokenPipe
            );
        }
        cause = c.source();
    }
    false
}

impl AgentClient {
    pub fn new(cluster: &Cluster, node: &Node) -> AgentClient {
        Self::with_timeout(cluster, node, Duration::from_secs(10))
    }

    pub fn with_timeout(cluster: &Cluster, node: &Node, timeout: Duration) -> AgentClient {
        let mut http = ureq::AgentBuilder::new()
            .timeout_connect(Duration::from_secs(3))
            .timeout(timeout);
        if let Some(tls) = &cluster.tls {
            http = http.tls_config(tls.clone());
        }
        AgentClient {
            node: node.name.clone(),
            base: cluster.control_url(node),
            auth: format!("Bearer {}", cluster.token.as_str()),
            http: http.build(),
            token: cluster.token.clone(),
            control: node.control,
            proved: Default::default(),
        }
    }

    pub fn node(&self) -> &Name {
        &self.node
    }

    /// One request; `Ok(None)` for 204 No Content. The token goes only to an agent that
    /// proved it holds it ([`AgentClient::prove`]).
    fn call<B: Serialize, T: DeserializeOwned>(
        &self,
        method: &str,
        path: &str,
        body: Option<&B>,
    ) -> Result<Option<T>> {
        self.prove()?;
        self.answer(self.request(method, path, body))
    }

    /// Ask the agent, without the token, to prove it holds it (`GET /prove`: an HMAC of
    /// a fresh nonce and the address dialed, `Token::control_proof`), once per client: a
    /// cluster file someone else wrote may name any address and any token-shaped file,
    /// and only the agent of that very token, reached at that very address (not through
    /// a relay elsewhere), can answer (issue 55, finding 5). A failure is not remembered:
    /// an agent still starting is asked again next time.
    fn prove(&self) -> Result<()> {
        use std::sync::atomic::Ordering;
        use throttle_proto::auth::{from_hex32, to_hex, NONCE_HEADER, PROOF_HEADER, PROVE_PATH};
        if self.proved.load(Ordering::Acquire) {
            return Ok(());
        }
        let nonce = throttle_proto::auth::nonce()?;
        let asked = self
            .http
            .get(&format!("{}{PROVE_PATH}", self.base))
            .set(NONCE_HEADER, &to_hex(&nonce))
            .call();
        let resp = match asked {
            Ok(r) => r,
            Err(ureq::Error::Status(404, _)) => {
                return Err(anyhow!(
                    "node `{}`: the agent at {} does not prove it holds the cluster's token (GET {PROVE_PATH}: not found): the token was not sent; run the same throttle version on every node",
                    self.node,
                    self.control
                ))
            }
            Err(e) => {
                return self
                    .answer::<serde::de::IgnoredAny>(Err(Box::new(e)))
                    .map(|_| ())
            }
        };
        let proof = resp.header(PROOF_HEADER).and_then(from_hex32);
        if !proof.is_some_and(|p| self.token.check_control_proof(&nonce, &self.control, &p)) {
            return Err(anyhow!(
                "node `{}`: what answers at {} did not prove it holds the token of the cluster file's token_file, so the token was not sent to it: is that address this cluster's agent, reached directly (not through a port mapping or a relay), and is the token file this cluster's? A cluster file someone else wrote may name another's address or secret",
                self.node,
                self.control
            ));
        }
        self.proved.store(true, Ordering::Release);
        Ok(())
    }

    /// One request, sent again while the agent turns it away unread: a 503 of its
    /// admission ([`throttle_proto::wire::BUSY_HEADER`]: its control port is full, nothing
    /// was read), or, for a request that may be repeated (not a POST: a launch, a forward),
    /// a connection closed before any answer (evicted before it presented the token by
    /// another user's flood of connections). For up to [`RETRY_FOR`], with the agents'
    /// backoff.
    fn request<B: Serialize>(
        &self,
        method: &str,
        path: &str,
        body: Option<&B>,
    ) -> Result<ureq::Response, Box<ureq::Error>> {
        let start = std::time::Instant::now();
        let mut attempt = 0;
        loop {
            let r = self.request_once(method, path, body);
            let unread = match &r {
                Err(e) => match e.as_ref() {
                    ureq::Error::Status(503, resp) => {
                        resp.header(throttle_proto::wire::BUSY_HEADER).is_some()
                    }
                    // A closed connection may also have run its handler (an agent
                    // stopping mid-request): sent again only where that is harmless.
                    ureq::Error::Transport(t) => method != "POST" && closed_unanswered(t),
                    _ => false,
                },
                Ok(_) => false,
            };
            if !unread || start.elapsed() >= RETRY_FOR {
                return r;
            }
            std::thread::sleep(throttle_proto::wire::busy_backoff(attempt));
            attempt += 1;
        }
    }

    fn request_once<B: Serialize>(
        &self,
        method: &str,
        path: &str,
        body: Option<&B>,
    ) -> Result<ureq::Response, Box<ureq::Error>> {
        let req = self
            .http
            .request(method, &format!("{}{}", self.base, path))
            .set("Authorization", &self.auth);
        match body {
            Some(b) => req.send_json(b),
            None => req.call(),
        }
        .map_err(Box::new)
    }

    fn answer<T: DeserializeOwned>(
        &self,
        result: Result<ureq::Response, Box<ureq::Error>>,
    ) -> Result<Option<T>> {
        match result.map_err(|e| *e) {
            Ok(resp) => {
                if resp.status() == 204 {
                    return Ok(None);
                }
                resp.into_json::<T>()
                    .map(Some)
                    .map_err(|e| anyhow!("node `{}`: unexpected answer: {e}", self.node))
            }
            Err(ureq::Error::Status(code, resp)) => {
                let msg = resp
                    .into_json::<Refusal>()
                    .map(|r| r.error)
                    .unwrap_or_else(|_| format!("HTTP {code} without a message"));
                let hint = if code == 401 {
                    " (does the cluster file's token_file hold this cluster's token?)"
                } else {
                    ""
                };
                Err(anyhow!("node `{}`: {msg}{hint}", self.node))
            }
            Err(e) => Err(anyhow!(
                "node `{}`: no agent answers at {}: {} (is it running? `throttle-ctl local up` starts a local cluster)",
                self.node,
                self.base,
                why_unreachable(&e)
            )),
        }
    }

    fn get<T: DeserializeOwned>(&self, path: &str) -> Result<T> {
        self.call::<(), T>("GET", path, None)?
            .ok_or_else(|| anyhow!("node `{}`: empty answer to GET {path}", self.node))
    }

    fn send<B: Serialize, T: DeserializeOwned>(
        &self,
        method: &str,
        path: &str,
        body: &B,
    ) -> Result<T> {
        self.call(method, path, Some(body))?
            .ok_or_else(|| anyhow!("node `{}`: empty answer to {method} {path}", self.node))
    }

    fn no_content(&self, method: &str, path: &str) -> Result<()> {
        self.call::<(), serde::de::IgnoredAny>(method, path, None)
            .map(|_| ())
    }

    pub fn status(&self) -> Result<Status> {
        self.get("/status")
    }

    pub fn set_shape(&self, change: &ShapeChange) -> Result<Status> {
        self.send("PUT", "/shape", change)
    }

    /// Renew the lease of this node's shape (a run's setting).
    pub fn renew_shape(&self) -> Result<()> {
        self.call::<(), serde::de::IgnoredAny>("POST", "/shape/renew", None)
            .map(|_| ())
    }

    /// End the lease of this node's shape now (the run is over): the shape before the run,
    /// or the one the node's operator reloaded meanwhile, is back. `false` when no lease
    /// held (the run set none, it ran out, or an agent older than this call answered 404).
    pub fn release_shape(&self) -> Result<bool> {
        match self.request::<()>("POST", "/shape/release", None) {
            Err(e) if matches!(*e, ureq::Error::Status(404 | 409, _)) => Ok(false),
            result => self.answer::<serde::de::IgnoredAny>(result).map(|_| true),
        }
    }

    pub fn cluster(&self) -> Result<ClusterNodes> {
        self.get("/cluster")
    }

    pub fn put_cluster(&self, nodes: &ClusterNodes) -> Result<ClusterNodes> {
        self.send("PUT", "/cluster", nodes)
    }

    pub fn launch(&self, job: &Name, spec: &LaunchSpec) -> Result<Launched> {
        self.send("POST", &format!("/jobs/{job}/launch"), spec)
    }

    pub fn job_report(&self, job: &Name) -> Result<JobReport> {
        self.get(&format!("/jobs/{job}"))
    }

    /// Extend the lease of `job` on this node.
    pub fn renew(&self, job: &Name) -> Result<()> {
        self.no_content("POST", &format!("/jobs/{job}/renew"))
    }

    pub fn delete_job(&self, job: &Name) -> Result<()> {
        self.no_content("DELETE", &format!("/jobs/{job}"))
    }

    pub fn jobs(&self) -> Result<JobList> {
        self.get("/jobs")
    }

    pub fn add_forward(&self, spec: &ForwardSpec) -> Result<ForwardInfo> {
        self.send("POST", "/forwards", spec)
    }

    pub fn list_forwards(&self) -> Result<Vec<ForwardInfo>> {
        self.get::<ForwardList>("/forwards").map(|l| l.forwards)
    }

    pub fn remove_forward(&self, id: u64) -> Result<()> {
        self.no_content("DELETE", &format!("/forwards/{id}"))
    }

    pub fn calibrate(&self, to: &Name, seconds: f64) -> Result<Calibration> {
        self.send(
            "POST",
            "/calibrate",
            &CalibrateRequest {
                to: to.clone(),
                seconds,
            },
        )
    }
}
