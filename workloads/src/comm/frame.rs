//! Message framing on a rank-to-rank stream: `tag u32 LE | len u64 LE | payload`.
//!
//! The one place that writes and reads messages on the wire, so a truncated stream is
//! always reported the same way.

use std::io::{self, Read, Write};

/// Largest message accepted: 16 GiB. A larger length means a corrupt stream.
pub const MAX_MESSAGE: u64 = 16 << 30;

pub fn write_message<W: Write>(w: &mut W, tag: u32, data: &[u8]) -> io::Result<()> {
    let mut header = [0u8; 12];
    header[..4].copy_from_slice(&tag.to_le_bytes());
    header[4..].copy_from_slice(&(data.len() as u64).to_le_bytes());
    w.write_all(&header)?;
    w.write_all(data)
}

/// Read one message; `Ok(None)` at a clean end between messages.
pub fn read_message<R: Read>(r: &mut R) -> io::Result<Option<(u32, Vec<u8>)>> {
    let mut header = [0u8; 12];
    let mut got = 0;
    while got < header.len() {
        match r.read(&mut header[got..]) {
            Ok(0) if got == 0 => return Ok(None),
            Ok(0) => {
                return Err(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    "stream ended inside a message header",
                ))
            }
            Ok(n) => got += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        }
    }
    let tag = u32::from_le_bytes([header[0], header[1], header[2], header[3]]);
    let mut len_bytes = [0u8; 8];
    len_bytes.copy_from_slice(&header[4..]);
    let len = u64::from_le_bytes(len_bytes);
    if len > MAX_MESSAGE {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!("message length {len} is beyond the limit: the stream is corrupt"),
        ));
    }
    let mut data = vec![0u8; len as usize];
    r.read_exact(&mut data).map_err(|e| {
        io::Error::new(
            e.kind(),
            format!("stream ended inside a {len}-byte message: {e}"),
        )
    })?;
    Ok(Some((tag, data)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_and_detects_truncation() {
        let mut buf = Vec::new();
        write_message(&mut buf, 7, b"hello").unwrap();
        write_message(&mut buf, 8, b"").unwrap();
        let mut r = &buf[..];
        assert_eq!(read_message(&mut r).unwrap(), Some((7, b"hello".to_vec())));
        assert_eq!(read_message(&mut r).unwrap(), Some((8, vec![])));
        assert_eq!(read_message(&mut r).unwrap(), None);
        for cut in 1..buf.len() - 12 {
            let mut r = &buf[..cut];
            if cut < 17 {
                assert!(read_message(&mut r).is_err(), "cut {cut}");
            }
        }
        let mut bad = Vec::new();
        bad.extend_from_slice(&1u32.to_le_bytes());
        bad.extend_from_slice(&u64::MAX.to_le_bytes());
        assert!(read_message(&mut &bad[..]).is_err());
    }
}
