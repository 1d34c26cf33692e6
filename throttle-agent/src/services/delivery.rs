//! Delivering a rank stream to a rank on this node: wait for the rank to register, check
//! that the stream may reach it, connect to its accept endpoint and announce the stream.

use throttle_proto::name::Name;
use tokio::io::AsyncWriteExt;

use crate::endpoint::{Conn, Endpoint};
use crate::state::Agent;
use crate::transport::wire::Request;
use crate::transport::wire::{Code, WireError};
use crate::transport::CONNECT_TIMEOUT;

/// A stream from a rank on this node (the local endpoint) to `dst_rank` of `job`, also on
/// this node.
pub async fn connect_rank(
    agent: &Agent,
    job: &Name,
    src_rank: u32,
    dst_rank: u32,
) -> Result<Conn, WireError> {
    let endpoint = agent
        .registry
        .wait_for(job, dst_rank, agent.register_timeout)
        .await?;
    connect_endpoint(endpoint, job, src_rank, dst_rank).await
}

/// A rank stream that node `src_node` asks for: `dst_rank` must be a rank of `job` that
/// runs (and has registered) on this node, and `src_rank` must run on `src_node`, as the
/// job's rank map says. Nothing else is reachable through the data port.
pub async fn accept_rank(
    agent: &Agent,
    src_node: &Name,
    job: &Name,
    src_rank: u32,
    dst_rank: u32,
) -> Result<Conn, WireError> {
    let endpoint = agent
        .registry
        .wait_for(job, dst_rank, agent.register_timeout)
        .await?;
    let dst_node = agent.directory.node_of(job, dst_rank)?;
    let claimed = agent.directory.node_of(job, src_rank)?;
    if dst_node != agent.node || claimed != *src_node {
        return Err(WireError::new(
            Code::Forbidden,
            format!(
                "job `{job}` places rank {dst_rank} on `{dst_node}` and rank {src_rank} on `{claimed}`; node `{src_node}` may not open that stream here"
            ),
        ));
    }
    connect_endpoint(endpoint, job, src_rank, dst_rank).await
}

async fn connect_endpoint(
    endpoint: Endpoint,
    job: &Name,
    src_rank: u32,
    dst_rank: u32,
) -> Result<Conn, WireError> {
    let mut conn = tokio::time::timeout(CONNECT_TIMEOUT, endpoint.connect())
        .await
        .map_err(|_| {
            WireError::new(
                Code::TargetUnreachable,
                format!("rank {dst_rank} of job `{job}` at {endpoint}: connect timed out"),
            )
        })?
        .map_err(|e| {
            WireError::new(
                Code::TargetUnreachable,
                format!("rank {dst_rank} of job `{job}` does not accept at {endpoint}: {e}"),
            )
        })?;
    announce(&mut conn, job, src_rank, dst_rank)
        .await
        .map_err(|e| {
            WireError::new(
                Code::TargetUnreachable,
                format!("rank {dst_rank} of job `{job}` closed its endpoint: {e}"),
            )
        })?;
    Ok(conn)
}

/// Send the `Incoming` header to a rank's accept endpoint.
pub async fn announce(
    conn: &mut Conn,
    job: &Name,
    src_rank: u32,
    dst_rank: u32,
) -> std::io::Result<()> {
    let bytes = Request::Incoming {
        job: job.clone(),
        src_rank,
        dst_rank,
    }
    .encode();
    match conn {
        Conn::Unix(s) => s.write_all(&bytes).await,
        Conn::Tcp(s) => s.write_all(&bytes).await,
    }
}
