//! The shared secret that guards the control API and the agent-to-agent data port.
//!
//! The token is read from a file (never from the command line, where `ps` would show it)
//! and compared in constant time. `throttle-ctl local up` generates one; on a real cluster
//! the operator distributes the file.
//!
//! On the data port the token itself never crosses the network: both agents prove that
//! they hold it with an HMAC-SHA256 over fresh nonces from both sides and the request
//! ([`Token::proof`]); see `transport::wire` for the exchange.

use hmac::{Hmac, Mac};
use sha2::Sha256;

/// Fewest characters a token may have.
pub const MIN_TOKEN_LEN: usize = 16;
/// Most characters a token may have.
pub const MAX_TOKEN_LEN: usize = 512;

#[derive(Clone)]
pub struct Token(String);

impl std::fmt::Debug for Token {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Token(..)")
    }
}

impl Token {
    pub fn new(text: &str) -> Result<Token, String> {
        let t = text.trim();
        if t.len() < MIN_TOKEN_LEN {
            return Err(format!(
                "the token must have at least {MIN_TOKEN_LEN} characters (got {}); `throttle-ctl local up` generates one",
                t.len()
            ));
        }
        if t.chars().any(|c| c.is_whitespace() || c.is_control()) {
            return Err("the token must not contain spaces or control characters".into());
        }
        // A token's shape (hex, base64, words joined by - or _): a file with a URL, a
        // password with punctuation or a credentials line in it is no token, and a
        // cluster file naming one must not get it sent anywhere.
        if t.len() > MAX_TOKEN_LEN
            || !t
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || "-_.+/=".contains(c))
        {
            return Err(format!(
                "this is not a token: a token is at most {MAX_TOKEN_LEN} letters, digits and - _ . + / = (`throttle-ctl local up` and `cluster init` generate one)"
            ));
        }
        Ok(Token(t.to_string()))
    }

    /// A fresh random token (64 hex characters).
    pub fn generate() -> Result<Token, String> {
        let mut bytes = [0u8; 32];
        getrandom::getrandom(&mut bytes).map_err(|e| format!("no randomness available: {e}"))?;
        Ok(Token(to_hex(&bytes)))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The proof that `side` holds the token, for one peer handshake: HMAC-SHA256 keyed
    /// with the token over a label for the side, both nonces, the name of the node dialed,
    /// and the request's bytes. Different labels keep a proof from being reflected back as
    /// the other side's; the node's name keeps a handshake meant for one node from being
    /// redirected to another.
    pub fn proof(
        &self,
        side: Side,
        client_nonce: &[u8],
        server_nonce: &[u8],
        dialed: &str,
        request: &[u8],
    ) -> [u8; 32] {
        self.mac(side, client_nonce, server_nonce, dialed, request)
            .finalize()
            .into_bytes()
            .into()
    }

    /// Check a proof in constant time.
    pub fn check_proof(
        &self,
        side: Side,
        client_nonce: &[u8],
        server_nonce: &[u8],
        dialed: &str,
        request: &[u8],
        proof: &[u8],
    ) -> bool {
        self.mac(side, client_nonce, server_nonce, dialed, request)
            .verify_slice(proof)
            .is_ok()
    }

    fn mac(
        &self,
        side: Side,
        client_nonce: &[u8],
        server_nonce: &[u8],
        dialed: &str,
        request: &[u8],
    ) -> Hmac<Sha256> {
        // HMAC takes keys of any length; new_from_slice cannot fail for it.
        let mut mac = <Hmac<Sha256> as Mac>::new_from_slice(self.0.as_bytes())
            .unwrap_or_else(|_| unreachable!("HMAC accepts any key length"));
        mac.update(match side {
            Side::Server => b"throttle-v2 peer server",
            Side::Client => b"throttle-v2 peer client",
        });
        mac.update(client_nonce);
        mac.update(server_nonce);
        // Length-prefixed, so the name and the request cannot be shifted into each other.
        mac.update(&(dialed.len() as u32).to_be_bytes());
        mac.update(dialed.as_bytes());
        mac.update(request);
        mac
    }

    /// The proof that an agent holds the token, which a controller asks for before it
    /// sends the token (`GET` [`PROVE_PATH`], the controller's nonce in [`NONCE_HEADER`]):
    /// HMAC-SHA256 keyed with the token over a label, the nonce, and `at`, the address the
    /// request came in on as the agent saw it. A cluster file someone else wrote may name
    /// any address and any token-shaped file: only an agent holding that very token can
    /// answer, and a relay at another address that passes the question on to a real agent
    /// gets a proof for the agent's address, not its own (issue 55, finding 5).
    pub fn control_proof(&self, nonce: &[u8], at: &std::net::SocketAddr) -> [u8; 32] {
        self.control_mac(nonce, at).finalize().into_bytes().into()
    }

    fn control_mac(&self, nonce: &[u8], at: &std::net::SocketAddr) -> Hmac<Sha256> {
        let mut mac = <Hmac<Sha256> as Mac>::new_from_slice(self.0.as_bytes())
            .unwrap_or_else(|_| unreachable!("HMAC accepts any key length"));
        mac.update(b"throttle-v2 control agent");
        mac.update(nonce);
        let at = at.to_string();
        mac.update(&(at.len() as u32).to_be_bytes());
        mac.update(at.as_bytes());
        mac
    }

    /// Check a [`Token::control_proof`] in constant time.
    pub fn check_control_proof(
        &self,
        nonce: &[u8],
        at: &std::net::SocketAddr,
        proof: &[u8],
    ) -> bool {
        self.control_mac(nonce, at).verify_slice(proof).is_ok()
    }

    /// Compare with `candidate` in time independent of where they differ.
    pub fn matches(&self, candidate: &str) -> bool {
        let a = self.0.as_bytes();
        let b = candidate.as_bytes();
        let mut diff = (a.len() != b.len()) as u8;
        for (i, x) in a.iter().enumerate() {
            diff |= x ^ b.get(i).copied().unwrap_or(0);
        }
        diff == 0
    }
}

/// Where an agent answers [`Token::control_proof`]'s question, without the token.
pub const PROVE_PATH: &str = "/prove";
/// The request header that carries the controller's nonce (64 hex digits).
pub const NONCE_HEADER: &str = "x-throttle-nonce";
/// The answer's header that carries the proof (64 hex digits).
pub const PROOF_HEADER: &str = "x-throttle-proof";

/// `bytes` as lowercase hex.
pub fn to_hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// 32 bytes from 64 hex digits; `None` for anything else.
pub fn from_hex32(text: &str) -> Option<[u8; 32]> {
    let t = text.as_bytes();
    if t.len() != 64 {
        return None;
    }
    let mut out = [0u8; 32];
    for (i, pair) in t.chunks(2).enumerate() {
        let s = std::str::from_utf8(pair).ok()?;
        out[i] = u8::from_str_radix(s, 16).ok()?;
    }
    Some(out)
}

/// Which end of a peer handshake a proof is for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Side {
    /// The agent that accepted the connection.
    Server,
    /// The agent that dialed.
    Client,
}

/// A fresh random nonce for a handshake.
pub fn nonce() -> std::io::Result<[u8; 32]> {
    let mut n = [0u8; 32];
    getrandom::getrandom(&mut n)
        .map_err(|e| std::io::Error::other(format!("no randomness: {e}")))?;
    Ok(n)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn compares_exactly() {
        let t = Token::new("0123456789abcdef").unwrap();
        assert!(t.matches("0123456789abcdef"));
        assert!(!t.matches("0123456789abcdeX"));
        assert!(!t.matches("0123456789abcde"));
        assert!(!t.matches("0123456789abcdef0"));
        assert!(!t.matches(""));
    }

    #[test]
    fn proofs_bind_side_nonces_and_request() {
        let t = Token::new("0123456789abcdef").unwrap();
        let other = Token::new("0123456789abcdeX").unwrap();
        let p = t.proof(Side::Client, b"cn", b"sn", "n1", b"req");
        assert!(t.check_proof(Side::Client, b"cn", b"sn", "n1", b"req", &p));
        assert!(!t.check_proof(Side::Server, b"cn", b"sn", "n1", b"req", &p));
        assert!(!t.check_proof(Side::Client, b"cX", b"sn", "n1", b"req", &p));
        assert!(!t.check_proof(Side::Client, b"cn", b"sX", "n1", b"req", &p));
        assert!(!t.check_proof(Side::Client, b"cn", b"sn", "n2", b"req", &p));
        assert!(!t.check_proof(Side::Client, b"cn", b"sn", "n1", b"reX", &p));
        assert!(!t.check_proof(Side::Client, b"cn", b"sn", "n1", b"req", &p[..31]));
        assert!(!other.check_proof(Side::Client, b"cn", b"sn", "n1", b"req", &p));
        // The proof is not the token, nor contains it.
        assert!(!p.windows(16).any(|w| w == &t.as_str().as_bytes()[..16]));
    }

    #[test]
    fn refuses_weak_tokens() {
        assert!(Token::new("short").is_err());
        // What a hostile cluster file could name instead: no token shape, refused.
        for secret in [
            "https://alice:ghp_0123456789abcdef@github.com",
            "//registry.npmjs.org/:_authToken=0123456789abcdef",
            "p@ssw0rd!p@ssw0rd!",
        ] {
            assert!(Token::new(secret).is_err(), "{secret}");
        }
        assert!(Token::new(&"a".repeat(MAX_TOKEN_LEN + 1)).is_err());
        assert!(Token::new("test-token-0123456789abcdef").is_ok());
        assert!(Token::new("c2VjcmV0LXRva2VuLWJhc2U2NA==").is_ok());
        assert!(Token::new("has a space in it ok").is_err());
        assert_eq!(Token::generate().unwrap().as_str().len(), 64);
    }

    #[test]
    fn a_control_proof_is_bound_to_the_token_the_nonce_and_the_address() {
        let t = Token::new("0123456789abcdef").unwrap();
        let other = Token::new("fedcba9876543210").unwrap();
        let at: std::net::SocketAddr = "127.0.1.1:7000".parse().unwrap();
        let relay: std::net::SocketAddr = "127.0.0.1:7000".parse().unwrap();
        let p = t.control_proof(&[1; 32], &at);
        assert!(t.check_control_proof(&[1; 32], &at, &p));
        assert!(!t.check_control_proof(&[2; 32], &at, &p));
        assert!(!t.check_control_proof(&[1; 32], &relay, &p));
        assert!(!other.check_control_proof(&[1; 32], &at, &p));
        assert!(!t.check_control_proof(&[1; 32], &at, &p[..31]));
        assert_eq!(from_hex32(&to_hex(&p)), Some(p));
        assert_eq!(from_hex32("zz"), None);
        assert_eq!(from_hex32(&"g".repeat(64)), None);
    }
}
