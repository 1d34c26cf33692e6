//! Calibration: send as fast as this node's egress allows to another node, whose agent
//! discards and measures (`POST /calibrate`).

use std::time::Duration;

use throttle_proto::calibration::Calibration;
use throttle_proto::name::Name;
use tokio::io::AsyncReadExt;

use crate::state::Agent;
use crate::transport::pump;
use crate::transport::wire::{Code, PeerWant, WireError};

/// Send to `to` for `duration`; the peer reports what arrived.
pub async fn calibrate(
    agent: &Agent,
    to: &Name,
    duration: Duration,
) -> Result<Calibration, WireError> {
    if *to == agent.node {
        return Err(WireError::new(
            Code::UnknownNode,
            "calibration needs another node: same-node streams are not shaped",
        ));
    }
    let mut s = crate::dial::dial(agent, to, PeerWant::Sink).await?;
    let _open = agent.link.stream_opened();
    let target = agent.link.egress.rate_limit();
    let io = |e: std::io::Error| {
        WireError::new(
            Code::PeerUnreachable,
            format!("calibration stream to `{to}` failed: {e}"),
        )
    };
    pump::send_zeros(&s, &agent.link.egress, duration)
        .await
        .map_err(io)?;
    let mut result = [0u8; 16];
    s.read_exact(&mut result).await.map_err(io)?;
    let bytes = u64::from_be_bytes(result[..8].try_into().unwrap_or_default());
    let seconds = f64::from_be_bytes(result[8..].try_into().unwrap_or_default());
    Ok(Calibration {
        from: agent.node.clone(),
        to: to.clone(),
        target_bytes_per_sec: target,
        bytes,
        seconds,
        achieved_bytes_per_sec: if seconds > 0.0 {
            bytes as f64 / seconds
        } else {
            0.0
        },
    })
}
