//! Port forwards: `LISTEN on node X -> HOST:PORT as seen from node Y`, for unmodified TCP
//! programs (`POST /forwards` takes a [`ForwardSpec`], answers a [`ForwardInfo`]).

use std::fmt;
use std::net::SocketAddr;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::name::Name;

/// What a user asks for.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ForwardSpec {
    /// Address to listen on, on this node (`127.0.0.1:5201`; port 0 picks one).
    #[serde(deserialize_with = "listen_addr")]
    pub listen: SocketAddr,
    /// Node whose agent connects to the target.
    pub to_node: Name,
    /// `host:port` as seen from `to_node`.
    pub target: HostPort,
}

impl ForwardSpec {
    /// Parse the command-line form `LISTEN=NODE:HOST:PORT`.
    pub fn parse_cli(text: &str) -> Result<ForwardSpec, String> {
        let (listen, to) = text.split_once('=').ok_or_else(|| {
            format!("forward `{text}` must look like LISTEN=NODE:HOST:PORT, e.g. 127.0.0.1:5201=n1:127.0.0.1:5201")
        })?;
        let (to_node, target) = parse_destination(to)?;
        Ok(ForwardSpec {
            listen: parse_listen(listen)?,
            to_node,
            target,
        })
    }
}

/// Parse a listen address, `IP:PORT`.
pub fn parse_listen(text: &str) -> Result<SocketAddr, String> {
    text.parse().map_err(|_| {
        format!(
            "listen address `{}` must be IP:PORT, e.g. 127.0.0.1:5201",
            text.escape_debug()
        )
    })
}

fn listen_addr<'de, D: Deserializer<'de>>(d: D) -> Result<SocketAddr, D::Error> {
    let s = String::deserialize(d)?;
    parse_listen(&s).map_err(serde::de::Error::custom)
}

/// Split `NODE:HOST:PORT` into the node and `HOST:PORT`.
pub fn parse_destination(text: &str) -> Result<(Name, HostPort), String> {
    let (node, target) = text.split_once(':').ok_or_else(|| {
        format!("destination `{text}` must look like NODE:HOST:PORT, e.g. n1:127.0.0.1:5201")
    })?;
    let node = Name::parse("node name", node).map_err(|e| e.to_string())?;
    Ok((node, HostPort::parse(target)?))
}

/// `HOST:PORT`: a host name or an IP address (IPv6 in brackets) and a port in 1..65535.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct HostPort(String);

impl HostPort {
    pub fn parse(text: &str) -> Result<HostPort, String> {
        let ok = text.len() <= 300
            && text
                .rsplit_once(':')
                .map(|(h, p)| {
                    !h.is_empty()
                        && h.bytes()
                            .all(|c| c.is_ascii_alphanumeric() || b".-:[]_%".contains(&c))
                        && p.parse::<u16>().map(|p| p > 0).unwrap_or(false)
                })
                .unwrap_or(false);
        if ok {
            Ok(HostPort(text.to_string()))
        } else {
            Err(format!(
                "target `{}` must be HOST:PORT with a port in 1..65535",
                text.escape_debug()
            ))
        }
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for HostPort {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl Serialize for HostPort {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.0)
    }
}

impl<'de> Deserialize<'de> for HostPort {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<HostPort, D::Error> {
        HostPort::parse(&String::deserialize(d)?).map_err(serde::de::Error::custom)
    }
}

/// A running rule, as reported by the API.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ForwardInfo {
    pub id: u64,
    /// The address actually bound.
    pub listen: SocketAddr,
    pub to_node: Name,
    pub target: HostPort,
    /// Connections accepted so far.
    pub connections: u64,
}

/// The body of `GET /forwards`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, Default)]
pub struct ForwardList {
    pub forwards: Vec<ForwardInfo>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_cli_rules_and_explains_mistakes() {
        let s = ForwardSpec::parse_cli("127.0.0.1:5201=n1:127.0.0.1:5202").unwrap();
        assert_eq!(s.to_node.as_str(), "n1");
        assert_eq!(s.target.as_str(), "127.0.0.1:5202");
        assert!(ForwardSpec::parse_cli("127.0.0.1:5201")
            .unwrap_err()
            .contains("LISTEN="));
        assert!(ForwardSpec::parse_cli("nohost=n1:127.0.0.1:1")
            .unwrap_err()
            .contains("IP:PORT"));
        assert!(ForwardSpec::parse_cli("127.0.0.1:1=n1:host:99999")
            .unwrap_err()
            .contains("port"));
        assert!(ForwardSpec::parse_cli("127.0.0.1:1=n1").is_err());
        assert!(ForwardSpec::parse_cli("127.0.0.1:1=..:127.0.0.1:2")
            .unwrap_err()
            .contains("node name"));
        assert!(ForwardSpec::parse_cli("127.0.0.1:1=n1:a b:2").is_err());
        let json = r#"{"listen":"127.0.0.1:0","to_node":"n1","target":"[::1]:80"}"#;
        let s: ForwardSpec = serde_json::from_str(json).unwrap();
        assert_eq!(s.target.as_str(), "[::1]:80");
        assert!(serde_json::from_str::<ForwardSpec>(
            r#"{"listen":"x","to_node":"n1","target":"a:1"}"#
        )
        .unwrap_err()
        .to_string()
        .contains("IP:PORT"));
    }
}
