//! Addresses where a rank accepts streams: `unix:/path` or `tcp:host:port`.
//!
//! Kept as text on the wire (the `Register` request) and parsed here, in one place, into
//! something the agent can connect to.

use std::fmt;
use std::io;
use std::path::PathBuf;

use tokio::net::{TcpStream, UnixStream};

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Endpoint {
    Unix(PathBuf),
    Tcp(String),
}

impl Endpoint {
    /// Parse `unix:/path` or `tcp:host:port`.
    pub fn parse(text: &str) -> Result<Endpoint, String> {
        if let Some(p) = text.strip_prefix("unix:") {
            if p.is_empty() {
                return Err("`unix:` needs a socket path, e.g. `unix:/tmp/rank0.sock`".into());
            }
            Ok(Endpoint::Unix(PathBuf::from(p)))
        } else if let Some(a) = text.strip_prefix("tcp:") {
            if !a.contains(':') {
                return Err(format!("`{text}` needs a port, e.g. `tcp:127.0.0.1:5000`"));
            }
            Ok(Endpoint::Tcp(a.to_string()))
        } else {
            Err(format!(
                "accept address `{text}` must start with `unix:` or `tcp:`"
            ))
        }
    }

    /// Connect to it.
    pub async fn connect(&self) -> io::Result<Conn> {
        match self {
            Endpoint::Unix(p) => Ok(Conn::Unix(UnixStream::connect(p).await?)),
            Endpoint::Tcp(a) => {
                // Segments capped like every data path's: the agent reads the rank's
                // replies at the paced rate (see `transport::MAX_SEGMENT`).
                let mut last = None;
                for addr in tokio::net::lookup_host(a.as_str()).await? {
                    match crate::transport::connect(addr).await {
                        Ok(s) => {
                            s.set_nodelay(true)?;
                            return Ok(Conn::Tcp(s));
                        }
                        Err(e) => last = Some(e),
                    }
                }
                Err(last.unwrap_or_else(|| {
                    io::Error::new(io::ErrorKind::NotFound, format!("`{a}` has no address"))
                }))
            }
        }
    }
}

impl fmt::Display for Endpoint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Endpoint::Unix(p) => write!(f, "unix:{}", p.display()),
            Endpoint::Tcp(a) => write!(f, "tcp:{a}"),
        }
    }
}

/// A connection to a local application, of either kind.
#[derive(Debug)]
pub enum Conn {
    Unix(UnixStream),
    Tcp(TcpStream),
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_both_kinds_and_explains_mistakes() {
        assert_eq!(
            Endpoint::parse("unix:/tmp/a").unwrap(),
            Endpoint::Unix("/tmp/a".into())
        );
        assert_eq!(
            Endpoint::parse("tcp:127.0.0.1:80").unwrap(),
            Endpoint::Tcp("127.0.0.1:80".into())
        );
        assert!(Endpoint::parse("127.0.0.1:80")
            .unwrap_err()
            .contains("unix:"));
        assert!(Endpoint::parse("tcp:localhost")
            .unwrap_err()
            .contains("port"));
        assert!(Endpoint::parse("unix:").is_err());
        let e = Endpoint::parse("tcp:127.0.0.1:80").unwrap();
        assert_eq!(Endpoint::parse(&e.to_string()).unwrap(), e);
    }

    /// A rank's `tcp:` endpoint, by address or by name: the connection's segments are
    /// capped like every data path's; a closed port is an error.
    #[tokio::test]
    async fn a_tcp_endpoint_connects_with_capped_segments() {
        let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = l.local_addr().unwrap().port();
        for text in [
            format!("tcp:127.0.0.1:{port}"),
            format!("tcp:localhost:{port}"),
        ] {
            let conn = Endpoint::parse(&text).unwrap().connect().await;
            let Ok(Conn::Tcp(s)) = conn else {
                panic!("{text}: {conn:?}");
            };
            let mss =
                nix::sys::socket::getsockopt(&s, nix::sys::socket::sockopt::TcpMaxSeg).unwrap();
            assert!(
                mss <= crate::transport::MAX_SEGMENT,
                "{text}: segment size {mss}"
            );
        }
        drop(l);
        let closed = Endpoint::parse(&format!("tcp:127.0.0.1:{port}")).unwrap();
        assert!(closed.connect().await.is_err());
    }
}
