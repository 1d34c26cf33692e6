//! The token file: the token read from it, and a warning when others can read it.

use std::path::Path;

use crate::auth::Token;

impl Token {
    /// Read the token from `path`.
    pub fn load(path: &Path) -> Result<Token, String> {
        let text = std::fs::read_to_string(path).map_err(|e| {
            format!(
                "cannot read the token file {}: {e}; create it (e.g. `(umask 077; head -c 32 /dev/urandom | xxd -p -c 64 > {})`) or use `throttle-ctl local up`",
                path.display(),
                path.display()
            )
        })?;
        Token::new(&text).map_err(|e| format!("token file {}: {e}", path.display()))
    }
}

/// Warn when a token file can be read by other users (the token grants what
/// ARCHITECTURE.md's threat model lists).
pub fn permission_warning(path: &Path) -> Option<String> {
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(path).ok()?.permissions().mode();
    (mode & 0o077 != 0).then(|| {
        format!(
            "the token file {} can be read by other users (mode {:o}); `chmod 600 {}`",
            path.display(),
            mode & 0o777,
            path.display()
        )
    })
}
