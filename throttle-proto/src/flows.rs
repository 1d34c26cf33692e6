//! What one node's agent tells the others in the kernel-paced mode: its links' rates and
//! how many of its sockets send to each other node (sans-IO).
//!
//! With kernel-paced links no agent carries the program's bytes, so no agent sees the
//! link as a whole: each paces its own node's sockets, and a socket's rate is its share of
//! its node's egress and of its peer's ingress. Every agent sends its [`FlowRow`] to every
//! other over an authenticated data-port stream (`PeerWant::Flows`) whenever it changes;
//! each then holds every node's row and computes the same max-min shares.
//!
//! A row is framed: a u32 body length (at most [`MAX_ROW_BYTES`]), then the egress and
//! ingress rates (u64 bytes per second, [`UNLIMITED`] for none), a u16 count of
//! destinations, and per destination the node's name (u8 length, bytes) and a u32 count
//! of sending sockets. Big-endian, checked on reading: a row speaks for the node whose
//! stream it came on (the receiver files it under the node the handshake named).

use crate::name::Name;

/// A rate that is not limited.
pub const UNLIMITED: u64 = u64::MAX;
/// Most destinations one row may list.
pub const MAX_DESTINATIONS: usize = 4096;
/// Most bytes of one row's body.
pub const MAX_ROW_BYTES: usize = 16 + 2 + MAX_DESTINATIONS * (1 + crate::name::MAX_NAME_LEN + 4);

/// One node's links and its sending sockets per destination node.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FlowRow {
    /// The node's egress rate in payload bytes per second ([`UNLIMITED`]: none).
    pub egress: u64,
    /// The node's ingress rate in payload bytes per second ([`UNLIMITED`]: none).
    pub ingress: u64,
    /// Destination node and how many of this node's sockets send to it now; a
    /// destination with none sending is left out.
    pub flows: Vec<(Name, u32)>,
}

/// Why bytes are not a valid row.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum RowError {
    #[error("a flow row of {0} bytes is longer than {MAX_ROW_BYTES}")]
    TooLong(usize),
    #[error("a flow row lists {0} destinations, more than {MAX_DESTINATIONS}")]
    TooMany(usize),
    #[error("a flow row's destination is not a node name: {0}")]
    BadName(String),
    #[error("a flow row is cut short")]
    Short,
    #[error("{0} unexpected bytes after a flow row")]
    Trailing(usize),
}

impl FlowRow {
    /// The frame: length, then body.
    pub fn encode(&self) -> Vec<u8> {
        let mut body = Vec::with_capacity(18 + self.flows.len() * 16);
        body.extend_from_slice(&self.egress.to_be_bytes());
        body.extend_from_slice(&self.ingress.to_be_bytes());
        let n = self.flows.len().min(MAX_DESTINATIONS);
        body.extend_from_slice(&(n as u16).to_be_bytes());
        for (name, count) in self.flows.iter().take(n) {
            let b = name.as_str().as_bytes();
            body.push(b.len() as u8);
            body.extend_from_slice(b);
            body.extend_from_slice(&count.to_be_bytes());
        }
        let mut out = Vec::with_capacity(4 + body.len());
        out.extend_from_slice(&(body.len() as u32).to_be_bytes());
        out.extend_from_slice(&body);
        out
    }

    /// The body's length from a frame's first 4 bytes, checked against [`MAX_ROW_BYTES`].
    pub fn body_len(head: &[u8; 4]) -> Result<usize, RowError> {
        let n = u32::from_be_bytes(*head) as usize;
        if n > MAX_ROW_BYTES {
            return Err(RowError::TooLong(n));
        }
        Ok(n)
    }

    /// Read a body (the bytes after the length).
    pub fn decode(body: &[u8]) -> Result<FlowRow, RowError> {
        let mut b = body;
        let mut take = |n: usize| -> Result<&[u8], RowError> {
            if b.len() < n {
                return Err(RowError::Short);
            }
            let (h, t) = b.split_at(n);
            b = t;
            Ok(h)
        };
        let u64_at = |s: &[u8]| u64::from_be_bytes(s.try_into().expect("8 bytes"));
        let egress = u64_at(take(8)?);
        let ingress = u64_at(take(8)?);
        let h = take(2)?;
        let n = u16::from_be_bytes([h[0], h[1]]) as usize;
        if n > MAX_DESTINATIONS {
            return Err(RowError::TooMany(n));
        }
        let mut flows = Vec::with_capacity(n);
        for _ in 0..n {
            let len = take(1)?[0] as usize;
            let raw = take(len)?;
            let text = String::from_utf8_lossy(raw).into_owned();
            let name = Name::parse("node", &text).map_err(|_| RowError::BadName(text))?;
            let c = take(4)?;
            flows.push((name, u32::from_be_bytes(c.try_into().expect("4 bytes"))));
        }
        if !b.is_empty() {
            return Err(RowError::Trailing(b.len()));
        }
        Ok(FlowRow {
            egress,
            ingress,
            flows,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn name(s: &str) -> Name {
        Name::parse("node", s).unwrap()
    }

    #[test]
    fn rows_round_trip_and_bad_ones_are_named() {
        let row = FlowRow {
            egress: 12_500_000,
            ingress: UNLIMITED,
            flows: vec![(name("n1"), 3), (name("n7"), 1)],
        };
        let b = row.encode();
        let n = FlowRow::body_len(b[..4].try_into().unwrap()).unwrap();
        assert_eq!(n, b.len() - 4);
        assert_eq!(FlowRow::decode(&b[4..]), Ok(row.clone()));
        assert_eq!(FlowRow::decode(&b[4..b.len() - 1]), Err(RowError::Short));
        let mut long = b[4..].to_vec();
        long.push(0);
        assert_eq!(FlowRow::decode(&long), Err(RowError::Trailing(1)));
        let mut bad = b[4..].to_vec();
        bad[19] = b'/';
        assert!(matches!(FlowRow::decode(&bad), Err(RowError::BadName(_))));
        assert_eq!(
            FlowRow::body_len(&((MAX_ROW_BYTES as u32 + 1).to_be_bytes())),
            Err(RowError::TooLong(MAX_ROW_BYTES + 1))
        );
        let mut many = FlowRow::default().encode()[4..].to_vec();
        many[16..18].copy_from_slice(&((MAX_DESTINATIONS as u16) + 1).to_be_bytes());
        assert_eq!(
            FlowRow::decode(&many),
            Err(RowError::TooMany(MAX_DESTINATIONS + 1))
        );
    }
}
