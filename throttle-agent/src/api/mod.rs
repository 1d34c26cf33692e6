//! The control API: HTTP/JSON, every request authenticated with the cluster token.
//!
//! | method & path            | what                                                   |
//! |--------------------------|--------------------------------------------------------|
//! | `GET /status`            | shape, bytes and current rate per direction, streams   |
//! | `PUT /shape`             | `{"pct": 50 \| "unlimited", "capacity": "1Gbit", "latency_us": 0, "lease_s": 20}` (all optional; with `lease_s` the shape holds that long unless renewed) |
//! | `POST /shape/renew`      | renew the shape's lease (nothing else changes); 409 when it has none |
//! | `POST /shape/release`    | end the lease now: the shape before it (or the operator's reloaded one) is back; 409 when there is none |
//! | `GET /cluster`, `PUT /cluster` | the directory: `{"nodes":[{"name","data"}]}`     |
//! | `GET /jobs`              | launched jobs (state, lease) and rank-to-node maps     |
//! | `PUT /jobs/{job}`, `DELETE /jobs/{job}` | rank-to-node maps: `{"ranks":["n0","n1"]}`; DELETE also kills the job's ranks |
//! | `POST /jobs/{job}/launch`, `GET /jobs/{job}` | start this node's ranks (`LaunchSpec`), and their state, output tail, result |
//! | `POST /jobs/{job}/renew` | extend the job's lease (the controller does this while it waits) |
//! | `GET /forwards`, `POST /forwards`, `DELETE /forwards/{id}` | `{"listen","to_node","target"}` |
//! | `POST /calibrate`        | `{"to":"n1","seconds":3}`: measured rate to that node  |
//! | `GET /metrics`           | Prometheus text format                                 |
//!
//! Every refusal, including 404, 405, 413 and 503, is `{"error": "..."}` with a 4xx/5xx
//! status; the message says what to change. Names in paths and bodies pass the [`Name`]
//! grammar before anything else happens.
//!
//! `server.rs` serves this router with the limits that keep the agent responsive under
//! abuse, and optionally over TLS.

mod metrics;
mod server;

pub use server::{serve, Tls, BODY_TIMEOUT, HEADER_TIMEOUT, MAX_BODY_BYTES};

use std::sync::Arc;
use std::time::Duration;

use axum::body::Bytes;
use axum::extract::{Path, Request, State};
use axum::http::{header, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::routing::{delete, get, post, put};
use axum::{Json, Router};
use serde::de::DeserializeOwned;
use throttle_proto::calibration::CalibrateRequest;
use throttle_proto::cluster::ClusterNodes;
use throttle_proto::forward::{ForwardList, ForwardSpec};
use throttle_proto::job::{JobList, JobMap, LaunchSpec, Launched};
use throttle_proto::name::Name;
use throttle_proto::refusal::Refusal;
use throttle_proto::shape::ShapeChange;
use throttle_proto::status::{AgentCpu, DirectionStatus, Status};

use crate::directory::{MAX_NODES, MAX_RANKS};
use crate::launch::jobs::LaunchError;
use crate::link::Port;
use crate::services::forward;
use crate::state::Agent;
use crate::transport::wire::Code;

/// An error answer: status and a message for the user.
#[derive(Debug)]
pub struct ApiError(StatusCode, String);

impl ApiError {
    fn bad(msg: impl Into<String>) -> ApiError {
        ApiError(StatusCode::BAD_REQUEST, msg.into())
    }

    fn internal(msg: impl Into<String>) -> ApiError {
        ApiError(StatusCode::INTERNAL_SERVER_ERROR, msg.into())
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        (self.0, Json(Refusal { error: self.1 })).into_response()
    }
}

type ApiResult = Result<Response, ApiError>;

/// A name from a request path, checked against the grammar.
fn name(what: &'static str, text: &str) -> Result<Name, ApiError> {
    Name::parse(what, text).map_err(|e| ApiError::bad(e.to_string()))
}

fn parse_body<T: DeserializeOwned>(body: &Bytes, example: &str) -> Result<T, ApiError> {
    serde_json::from_slice(body).map_err(|e| {
        ApiError::bad(format!(
            "request body is not valid: {e}; expected JSON like {example}"
        ))
    })
}

/// Build the router (exposed for tests that want to drive it in-process).
pub fn router(agent: Arc<Agent>) -> Router {
    Router::new()
        .route("/status", get(status))
        .route("/shape", put(set_shape))
        .route("/shape/renew", post(renew_shape))
        .route("/shape/release", post(release_shape))
        .route("/cluster", get(get_cluster).put(set_cluster))
        .route("/jobs", get(get_jobs))
        .route(
            "/jobs/:job",
            get(job_report).put(set_job).delete(delete_job),
        )
        .route("/jobs/:job/launch", post(launch_job))
        .route("/jobs/:job/renew", post(renew_job))
        .route("/forwards", get(list_forwards).post(add_forward))
        .route("/forwards/:id", delete(delete_forward))
        .route("/calibrate", post(calibrate))
        .route("/metrics", get(metrics))
        .fallback(not_found)
        .layer(axum::extract::DefaultBodyLimit::max(MAX_BODY_BYTES))
        // Inside the token check: a request without the token is refused unread.
        .layer(axum::middleware::from_fn(server::whole_body))
        .layer(axum::middleware::from_fn_with_state(
            agent.clone(),
            authenticate,
        ))
        .layer(axum::middleware::from_fn(server::json_errors))
        .with_state(agent)
}

async fn authenticate(State(agent): State<Arc<Agent>>, req: Request, next: Next) -> Response {
    if req.uri().path() == throttle_proto::auth::PROVE_PATH
        && req.method() == axum::http::Method::GET
    {
        return prove(&agent, &req);
    }
    let presented = req
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "));
    let peer = req.extensions().get::<server::PeerAddr>().map(|p| p.0);
    let refusal = match presented {
        Some(t) if agent.token.matches(t) => {
            if let Some(p) = peer {
                agent.limits.trust(p.ip());
            }
            if let Some(proof) = req.extensions().get::<crate::limits::Proof>() {
                proof.prove();
            }
            return next.run(req).await;
        }
        Some(_) => "wrong token",
        None => "missing `Authorization: Bearer <token>`; the token is in the file named by the cluster file's token_file",
    };
    agent.limits.warn_refusal(format_args!(
        "refused a control request from {}: {}",
        peer.map(|p| p.to_string()).unwrap_or_else(|| "?".into()),
        if presented.is_some() {
            "wrong token"
        } else {
            "no token"
        }
    ));
    // A client without the token gets one answer per connection, then the close.
    let mut resp = ApiError(StatusCode::UNAUTHORIZED, refusal.into()).into_response();
    resp.headers_mut().insert(
        header::CONNECTION,
        header::HeaderValue::from_static("close"),
    );
    resp
}

/// `GET /prove`: the proof that this agent holds the token, for the controller's nonce and
/// the address the request came in on (`Token::control_proof`), so that a controller
/// sends its token only to an agent that has it. Asked without the token: one answer per
/// connection, then the close, as for any request without it.
fn prove(agent: &Agent, req: &Request) -> Response {
    use throttle_proto::auth::{from_hex32, to_hex, NONCE_HEADER, PROOF_HEADER};
    let nonce = req
        .headers()
        .get(NONCE_HEADER)
        .and_then(|v| v.to_str().ok())
        .and_then(from_hex32);
    let at = req.extensions().get::<server::LocalAddr>().map(|l| l.0);
    let mut resp = match (nonce, at) {
        (Some(n), Some(at)) => {
            let mut r = StatusCode::NO_CONTENT.into_response();
            if let Ok(v) =
                header::HeaderValue::from_str(&to_hex(&agent.token.control_proof(&n, &at)))
            {
                r.headers_mut().insert(PROOF_HEADER, v);
            }
            r
        }
        (None, _) => ApiError(
            StatusCode::BAD_REQUEST,
            format!("GET /prove needs the header {NONCE_HEADER}: 64 hex digits"),
        )
        .into_response(),
        (_, None) => ApiError(
            StatusCode::INTERNAL_SERVER_ERROR,
            "the connection's own address is unknown".into(),
        )
        .into_response(),
    };
    resp.headers_mut().insert(
        header::CONNECTION,
        header::HeaderValue::from_static("close"),
    );
    resp
}

async fn not_found() -> ApiError {
    ApiError(
        StatusCode::NOT_FOUND,
        "no such endpoint; see GET /prove, GET /status, PUT /shape, /cluster, /jobs, /jobs/{job}[/launch|/renew], /forwards, POST /calibrate, GET /metrics".into(),
    )
}

/// This agent's status document (`GET /status`, and the answer to `PUT /shape`).
pub fn status_of(agent: &Agent) -> Status {
    let shape = agent.link.shape();
    Status {
        node: agent.node.clone(),
        version: env!("CARGO_PKG_VERSION").to_string(),
        pct: shape.pct(),
        capacity: shape.capacity(),
        limit_bytes_per_sec: shape.rate(),
        latency_us: shape.latency_us(),
        shape_lease_left_s: agent.link.left().map(|l| l.as_secs_f64()),
        egress: direction_status(&agent.link.egress),
        ingress: direction_status(&agent.link.ingress),
        open_streams: agent.link.open_streams(),
        registered_ranks: agent.registry.len(),
        jobs: agent.directory.job_count(),
        forwards: agent.forwards.len(),
        running_jobs: agent.launcher.running(),
        splice: agent.pump.splice,
        uptime_seconds: agent.started.elapsed().as_secs_f64(),
        refused_connections: agent.limits.refused(),
        tls: agent.tls,
        cpu: {
            let (nice, realtime) = crate::launch::cpu::scheduling();
            AgentCpu {
                run_delay_seconds: crate::launch::cpu::run_delay()
                    .unwrap_or_default()
                    .as_secs_f64(),
                nice,
                realtime,
            }
        },
        intercepted: agent.intercept.as_ref().map(|i| {
            use std::sync::atomic::Ordering::Relaxed;
            throttle_proto::status::InterceptedStatus {
                outgoing: i.outgoing.load(Relaxed),
                incoming: i.incoming.load(Relaxed),
                failed: i.failed.load(Relaxed),
                kernel: i.kernel,
                preload_port: i.preload_port,
                not_proven: crate::intercept::members::pending(agent),
                outside: crate::intercept::members::outside(agent),
            }
        }),
        kernel_pacing: agent.pacing.as_ref().map(|p| {
            let c = p.counts();
            throttle_proto::status::KernelPacingStatus {
                paced_now: c.paced_now,
                registered: c.registered,
                refused: c.refused,
                unpaced: c.unpaced + c.lost,
                bytes_sent: c.bytes_acked,
                bytes_received: c.bytes_received,
                beyond_link_sent: c.beyond_sent,
                beyond_link_received: c.beyond_received,
                rate_changes: c.rate_changes,
                rwnd_limited_seconds: c.rwnd_limited_us as f64 / 1e6,
                sndbuf_limited_seconds: c.sndbuf_limited_us as f64 / 1e6,
                egress_queue: p.egress_queue.as_ref().map(|q| q.device().to_string()),
            }
        }),
    }
}

fn direction_status(port: &Port) -> DirectionStatus {
    DirectionStatus {
        bytes: port.bytes(),
        rate_bytes_per_sec: port.current_rate(),
        pacing: port.fidelity(),
    }
}

async fn status(State(agent): State<Arc<Agent>>) -> Json<Status> {
    Json(status_of(&agent))
}

async fn set_shape(State(agent): State<Arc<Agent>>, body: Bytes) -> ApiResult {
    let change: ShapeChange = parse_body(
        &body,
        r#"{"pct": 50, "capacity": "1Gbit", "latency_us": 0}"#,
    )?;
    let lease = change.lease_s.map(|l| l.duration());
    let (before, shape) = agent
        .link
        .change(
            |before| {
                let after = change.apply(before).map_err(|e| e.to_string())?;
                if agent.pacing.is_some() && after.latency_us() > 0 {
                    return Err(format!(
                        "node `{}` paces its links in the kernel (throttle-agent --links kernel), which cannot add latency ({} us asked): start the agents with --links proxy (local up --links proxy) for added latency and latency steps",
                        agent.node,
                        after.latency_us()
                    ));
                }
                Ok(after)
            },
            lease,
        )
        .map_err(ApiError::bad)?;
    tracing::info!(
        pct = %shape.pct(),
        capacity = %shape.capacity(),
        latency_us = shape.latency_us(),
        was = %before.pct(),
        "shape set"
    );
    Ok(Json(status_of(&agent)).into_response())
}

async fn renew_shape(State(agent): State<Arc<Agent>>) -> ApiResult {
    match agent.link.renew() {
        Some(_) => Ok(Json(status_of(&agent)).into_response()),
        None => Err(ApiError(
            StatusCode::CONFLICT,
            "the shape has no lease to renew: it was set without one, or the lease ran out and the shape before it is back".into(),
        )),
    }
}

async fn release_shape(State(agent): State<Arc<Agent>>) -> ApiResult {
    match agent.link.release() {
        Some(back) => {
            tracing::info!(pct = %back.pct(), "shape lease released: the link is back to the shape before the run");
            Ok(Json(status_of(&agent)).into_response())
        }
        None => Err(ApiError(
            StatusCode::CONFLICT,
            "the shape has no lease to release: it was set without one, or the lease ran out and the shape before it is back".into(),
        )),
    }
}

async fn get_cluster(State(agent): State<Arc<Agent>>) -> Json<ClusterNodes> {
    Json(ClusterNodes {
        nodes: agent.directory.nodes(),
    })
}

async fn set_cluster(State(agent): State<Arc<Agent>>, body: Bytes) -> ApiResult {
    let req: ClusterNodes = parse_body(
        &body,
        r#"{"nodes":[{"name":"n0","data":"127.0.1.1:7601"}]}"#,
    )?;
    if req.nodes.len() > MAX_NODES {
        return Err(ApiError::bad(format!(
            "a cluster has at most {MAX_NODES} nodes"
        )));
    }
    let mut seen = std::collections::HashSet::new();
    for n in &req.nodes {
        if !seen.insert(n.name.as_str()) {
            return Err(ApiError::bad(format!("node `{}` appears twice", n.name)));
        }
    }
    if !req.nodes.iter().any(|n| n.name == agent.node) {
        return Err(ApiError::bad(format!(
            "the directory must include this agent's own node `{}`",
            agent.node
        )));
    }
    agent.directory.set_nodes(&req.nodes);
    tracing::info!(nodes = req.nodes.len(), "cluster directory set");
    if let Some(i) = &agent.intercept {
        // Only nodes whose agents prove the token at their address are intercepted; the
        // ones that do not answer in time are asked again in the background.
        crate::intercept::members::prove(&agent, crate::intercept::members::FIRST_PASS).await;
        i.directory_changed.notify_one();
        crate::intercept::members::update_rules(&agent)
            .await
            .map_err(|e| {
                ApiError::internal(format!(
                    "the directory is set, but the interception rules could not follow: {e}"
                ))
            })?;
    }
    Ok(Json(ClusterNodes {
        nodes: agent.directory.nodes(),
    })
    .into_response())
}

async fn get_jobs(State(agent): State<Arc<Agent>>) -> Json<JobList> {
    Json(JobList {
        jobs: agent.directory.jobs().into_iter().collect(),
        launched: agent.launcher.reports(),
    })
}

/// Check a rank map's size and that every node in it is known.
fn check_ranks(agent: &Agent, ranks: &[Name]) -> Result<(), ApiError> {
    if ranks.is_empty() || ranks.len() > MAX_RANKS {
        return Err(ApiError::bad(format!(
            "a job needs 1..{MAX_RANKS} ranks, got {}",
            ranks.len()
        )));
    }
    if let Some(unknown) = ranks.iter().find(|n| !agent.directory.has_node(n)) {
        let e = agent
            .directory
            .data_addr(unknown)
            .err()
            .map(|e| e.message)
            .unwrap_or_default();
        return Err(ApiError(StatusCode::UNPROCESSABLE_ENTITY, e));
    }
    Ok(())
}

async fn set_job(
    State(agent): State<Arc<Agent>>,
    Path(job): Path<String>,
    body: Bytes,
) -> ApiResult {
    let job = name("job name", &job)?;
    let req: JobMap = parse_body(&body, r#"{"ranks":["n0","n0","n1","n1"]}"#)?;
    check_ranks(&agent, &req.ranks)?;
    if !agent.directory.set_job(&job, req.ranks.clone()) {
        return Err(ApiError(
            StatusCode::CONFLICT,
            "this agent holds as many rank maps (or ranks in them) as it may; DELETE /jobs/{job} old ones".into(),
        ));
    }
    Ok(Json(req).into_response())
}

async fn delete_job(State(agent): State<Arc<Agent>>, Path(job): Path<String>) -> ApiResult {
    let job = name("job name", &job)?;
    let launched = agent.launcher.remove(&job);
    if agent.directory.remove_job(&job) || launched {
        tracing::debug!(%job, "job deleted");
        Ok(StatusCode::NO_CONTENT.into_response())
    } else {
        Err(ApiError(
            StatusCode::NOT_FOUND,
            format!("no job `{job}` on this agent"),
        ))
    }
}

async fn launch_job(
    State(agent): State<Arc<Agent>>,
    Path(job): Path<String>,
    body: Bytes,
) -> ApiResult {
    let job = name("job name", &job)?;
    let spec: LaunchSpec = parse_body(
        &body,
        r#"{"program":"throttle-bfs","args":["--scale","16"],"ranks":["n0","n1"],"time_limit_s":600,"lease_s":30}"#,
    )?;
    check_ranks(&agent, &spec.ranks)?;
    let refusal = |e: LaunchError| match e {
        LaunchError::NotAllowed(m) => ApiError(StatusCode::FORBIDDEN, m),
        LaunchError::Invalid(m) => ApiError::bad(m),
        LaunchError::Conflict(m) => ApiError(StatusCode::CONFLICT, m),
    };
    agent.launcher.check(&spec).map_err(|e| {
        agent
            .limits
            .warn_refusal(format_args!("launch of job `{job}` refused: {e}"));
        refusal(e)
    })?;
    if agent.launcher.is_running(&job) {
        return Err(ApiError(
            StatusCode::CONFLICT,
            format!("job `{job}` is already running here; DELETE /jobs/{job} first"),
        ));
    }
    // The rank map goes in first: a rank that starts and registers at once must find it.
    // A launch that is refused below puts the previous map back.
    let previous = agent.directory.job(&job);
    if !agent.directory.set_job(&job, spec.ranks.clone()) {
        return Err(ApiError(
            StatusCode::CONFLICT,
            "this agent holds as many rank maps (or ranks in them) as it may; DELETE /jobs/{job} old ones".into(),
        ));
    }
    // Starting many processes takes a while: off the runtime's workers.
    let launched = {
        let (launcher, job, spec) = (agent.launcher.clone(), job.clone(), spec.clone());
        tokio::task::spawn_blocking(move || launcher.launch(&job, &spec))
            .await
            .map_err(|e| ApiError(StatusCode::INTERNAL_SERVER_ERROR, format!("launch: {e}")))?
    };
    let local_ranks = launched.map_err(|e| {
        match previous {
            Some(ranks) => {
                agent.directory.set_job(&job, ranks);
            }
            None => {
                agent.directory.remove_job(&job);
            }
        }
        refusal(e)
    })?;
    tracing::info!(%job, program = %spec.program, ?local_ranks, lease_s = spec.lease_s.secs(), "job launched");
    Ok((StatusCode::CREATED, Json(Launched { job, local_ranks })).into_response())
}

async fn renew_job(State(agent): State<Arc<Agent>>, Path(job): Path<String>) -> ApiResult {
    let job = name("job name", &job)?;
    if agent.launcher.renew(&job) {
        Ok(StatusCode::NO_CONTENT.into_response())
    } else {
        Err(ApiError(
            StatusCode::NOT_FOUND,
            format!("job `{job}` is not held by this agent (finished and deleted, or its lease ran out)"),
        ))
    }
}

async fn job_report(State(agent): State<Arc<Agent>>, Path(job): Path<String>) -> ApiResult {
    let job = name("job name", &job)?;
    match agent.launcher.report(&job) {
        Some(r) => Ok(Json(r).into_response()),
        None => Err(ApiError(
            StatusCode::NOT_FOUND,
            format!("job `{job}` was not launched on this agent"),
        )),
    }
}

async fn list_forwards(State(agent): State<Arc<Agent>>) -> Json<ForwardList> {
    Json(ForwardList {
        forwards: agent.forwards.list(),
    })
}

async fn add_forward(State(agent): State<Arc<Agent>>, body: Bytes) -> ApiResult {
    let spec: ForwardSpec = parse_body(
        &body,
        r#"{"listen":"127.0.0.1:5201","to_node":"n1","target":"127.0.0.1:5201"}"#,
    )?;
    if spec.to_node != agent.node && !agent.directory.has_node(&spec.to_node) {
        let e = agent
            .directory
            .data_addr(&spec.to_node)
            .err()
            .map(|e| e.message)
            .unwrap_or_default();
        return Err(ApiError(StatusCode::UNPROCESSABLE_ENTITY, e));
    }
    let info = forward::add(&agent, spec).await.map_err(|e| match e {
        forward::ForwardError::Forbidden(m) => ApiError(StatusCode::FORBIDDEN, m),
        forward::ForwardError::Conflict(m) => ApiError(StatusCode::CONFLICT, m),
    })?;
    Ok((StatusCode::CREATED, Json(info)).into_response())
}

async fn delete_forward(State(agent): State<Arc<Agent>>, Path(id): Path<String>) -> ApiResult {
    let id: u64 = id.parse().map_err(|_| {
        ApiError::bad(format!(
            "forward id `{}` is not a number",
            id.escape_debug()
        ))
    })?;
    if agent.forwards.remove(id) {
        Ok(StatusCode::NO_CONTENT.into_response())
    } else {
        Err(ApiError(
            StatusCode::NOT_FOUND,
            format!("no forward {id} on this agent (GET /forwards lists them)"),
        ))
    }
}

async fn calibrate(State(agent): State<Arc<Agent>>, body: Bytes) -> ApiResult {
    let req: CalibrateRequest = parse_body(&body, r#"{"to":"n1","seconds":3}"#)?;
    if !req.seconds.is_finite() || !(0.1..=60.0).contains(&req.seconds) {
        return Err(ApiError::bad("`seconds` must be between 0.1 and 60"));
    }
    let result = crate::services::calibration::calibrate(
        &agent,
        &req.to,
        Duration::from_secs_f64(req.seconds),
    )
    .await
    .map_err(|e| {
        let status = match e.code {
            Code::UnknownNode => StatusCode::UNPROCESSABLE_ENTITY,
            _ => StatusCode::BAD_GATEWAY,
        };
        ApiError(status, e.message)
    })?;
    Ok(Json(result).into_response())
}

/// OpenMetrics when the scraper asks for it (Prometheus does), the classic text format
/// otherwise (`curl`, `promtool check metrics`).
async fn metrics(State(agent): State<Arc<Agent>>, req: Request) -> Response {
    let text = metrics::render(&status_of(&agent));
    let wants_openmetrics = req
        .headers()
        .get(header::ACCEPT)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|a| a.contains("application/openmetrics-text"));
    if wants_openmetrics {
        ([(header::CONTENT_TYPE, metrics::OPENMETRICS)], text).into_response()
    } else {
        (
            [(header::CONTENT_TYPE, metrics::TEXT_004)],
            metrics::classic(&text),
        )
            .into_response()
    }
}
