//! The shared secret that guards the control API and the agent-to-agent data port.
//!
//! The token is read from a file (never from the command line, where `ps` would show it)
//! and compared in constant time. `throttle-ctl local up` generates one; on a real cluster
//! the operator distributes the file.

use std::path::Path;

/// Fewest characters a token may have.
pub const MIN_TOKEN_LEN: usize = 16;

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
        Ok(Token(t.to_string()))
    }

    /// Read the token from `path`.
    pub fn load(path: &Path) -> Result<Token, String> {
        let text = std::fs::read_to_string(path).map_err(|e| {
            format!(
                "cannot read the token file {}: {e}; create it (e.g. `head -c 32 /dev/urandom | xxd -p -c 64 > {}`) or use `throttle-ctl local up`",
                path.display(),
                path.display()
            )
        })?;
        Token::new(&text).map_err(|e| format!("token file {}: {e}", path.display()))
    }

    /// A fresh random token (64 hex characters).
    pub fn generate() -> Result<Token, String> {
        let mut bytes = [0u8; 32];
        getrandom::getrandom(&mut bytes).map_err(|e| format!("no randomness available: {e}"))?;
        Ok(Token(bytes.iter().map(|b| format!("{b:02x}")).collect()))
    }

    pub fn as_str(&self) -> &str {
        &self.0
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
    fn refuses_weak_tokens() {
        assert!(Token::new("short").is_err());
        assert!(Token::new("has a space in it ok").is_err());
        assert_eq!(Token::generate().unwrap().as_str().len(), 64);
    }
}
