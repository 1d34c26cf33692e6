//! The handshake on async sockets: the agent's side of `throttle_proto::wire`.
//!
//! The format, its sans-IO parser and the blocking readers live in the contract crate
//! (`throttle_proto::wire`), shared with the workloads and the controller; this module
//! only moves bytes from tokio sockets into that parser, and re-exports the types so the
//! agent's code says `wire::Request` as before.

use std::io;

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

pub use throttle_proto::wire::*;

/// Read one request, refusing oversized or malformed input.
pub async fn read_request<R: AsyncRead + Unpin>(r: &mut R) -> Result<Request, WireError> {
    let mut header = [0u8; HEADER_LEN];
    r.read_exact(&mut header).await.map_err(|e| {
        WireError::new(
            Code::Malformed,
            format!("connection ended inside the handshake header: {e}"),
        )
    })?;
    let mut body = vec![0u8; request_body_len(&header)?];
    r.read_exact(&mut body).await.map_err(|e| {
        WireError::new(
            Code::Malformed,
            format!("connection ended inside the handshake body: {e}"),
        )
    })?;
    Request::decode(header, &body)
}

/// Read an answer: a challenge or a reply.
pub async fn read_answer<R: AsyncRead + Unpin>(r: &mut R) -> Result<Answer, WireError> {
    let mut header = [0u8; HEADER_LEN];
    r.read_exact(&mut header).await.map_err(|e| {
        WireError::new(
            Code::PeerUnreachable,
            format!("the agent closed the connection before answering: {e}"),
        )
    })?;
    let mut body = vec![0u8; answer_body_len(&header)?];
    r.read_exact(&mut body)
        .await
        .map_err(|e| WireError::new(Code::Malformed, format!("answer truncated: {e}")))?;
    Answer::decode(header, &body)
}

/// Read a reply.
pub async fn read_reply<R: AsyncRead + Unpin>(r: &mut R) -> Result<Reply, WireError> {
    read_answer(r).await?.into_reply()
}

pub async fn write_reply<W: AsyncWrite + Unpin>(w: &mut W, reply: &Reply) -> io::Result<()> {
    w.write_all(&reply.encode()).await
}

#[cfg(test)]
mod tests {
    use super::*;
    use throttle_proto::name::Name;

    #[tokio::test]
    async fn async_readers_agree_with_the_blocking_ones() {
        let req = Request::OpenRank {
            job: Name::parse("job", "j").unwrap(),
            src_rank: 1,
            dst_rank: 2,
        };
        let bytes = req.encode();
        assert_eq!(read_request(&mut &bytes[..]).await.unwrap(), req);
        let mut big = bytes.clone();
        big[6] = 0xff;
        big[7] = 0xff;
        assert!(read_request(&mut &big[..])
            .await
            .unwrap_err()
            .message
            .contains("exceeds"));
        let reply = Reply {
            code: Code::UnknownJob,
            message: "no".into(),
        };
        let b = reply.encode();
        assert_eq!(read_reply(&mut &b[..]).await.unwrap(), reply);
        let c = Challenge {
            nonce: [1; NONCE_LEN],
            proof: [2; PROOF_LEN],
        }
        .encode();
        assert!(matches!(
            read_answer(&mut &c[..]).await.unwrap(),
            Answer::Challenge(_)
        ));
    }
}
