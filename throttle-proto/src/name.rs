//! Names that arrive from outside (jobs, nodes) and end up in maps, paths and messages.
//!
//! Every such name passes one strict grammar before anything is done with it: 1 to
//! [`MAX_NAME_LEN`] characters of ASCII letters, digits, `-`, `_` and `.`, starting with a
//! letter or a digit. That rules out `.`, `..`, `/`, spaces, control characters and
//! anything a shell or a path would interpret, so a [`Name`] can be joined to a directory
//! without escaping it ([`path_inside`] checks that again anyway).

use std::fmt;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Deserializer, Serialize};

/// Longest name accepted. Job names become directory names under the socket directory,
/// and a Unix socket path may not exceed 107 bytes, so names stay short.
pub const MAX_NAME_LEN: usize = 64;

/// A validated job or node name.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(transparent)]
pub struct Name(String);

/// Why a name was refused; the message says what is allowed.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{what} `{shown}` is not allowed: use 1..{MAX_NAME_LEN} characters of letters, digits, `-`, `_`, `.`, starting with a letter or digit")]
pub struct NameError {
    what: &'static str,
    /// The refused text, cut and with control characters escaped so it is safe to print.
    shown: String,
}

impl Name {
    /// Check `text` against the grammar; `what` names the field in the error ("job name").
    pub fn parse(what: &'static str, text: &str) -> Result<Name, NameError> {
        if is_valid(text) {
            Ok(Name(text.to_string()))
        } else {
            Err(NameError {
                what,
                shown: text.chars().take(80).flat_map(char::escape_debug).collect(),
            })
        }
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// The grammar itself.
pub fn is_valid(text: &str) -> bool {
    let b = text.as_bytes();
    !b.is_empty()
        && b.len() <= MAX_NAME_LEN
        && b[0].is_ascii_alphanumeric()
        && b.iter()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'-' | b'_' | b'.'))
}

impl fmt::Display for Name {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::ops::Deref for Name {
    type Target = str;
    fn deref(&self) -> &str {
        &self.0
    }
}

impl AsRef<str> for Name {
    fn as_ref(&self) -> &str {
        &self.0
    }
}

impl std::borrow::Borrow<str> for Name {
    fn borrow(&self) -> &str {
        &self.0
    }
}

impl<'de> Deserialize<'de> for Name {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Name, D::Error> {
        let s = String::deserialize(d)?;
        Name::parse("name", &s).map_err(serde::de::Error::custom)
    }
}

/// `dir/prefix+name+suffix`, checked to be a direct child of `dir`.
///
/// The grammar already makes an escape impossible; this is the second lock on the door,
/// so a future change to the grammar cannot silently turn into a path traversal.
pub fn path_inside(dir: &Path, prefix: &str, name: &Name, suffix: &str) -> Option<PathBuf> {
    let file = format!("{prefix}{name}{suffix}");
    if file.contains('/') || file == "." || file == ".." || file.contains('\0') {
        return None;
    }
    let p = dir.join(&file);
    (p.parent() == Some(dir) && p.file_name().is_some_and(|f| f == file.as_str())).then_some(p)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepts_ordinary_names() {
        for ok in [
            "n0",
            "bfs-1732-a1b2c3",
            "node_07.rack2",
            "A",
            &"x".repeat(64),
        ] {
            assert!(Name::parse("job name", ok).is_ok(), "{ok}");
        }
    }

    #[test]
    fn refuses_everything_that_could_touch_a_path_or_a_shell() {
        for bad in [
            "",
            ".",
            "..",
            "../x",
            "..%2F..%2Fx",
            "a/b",
            "/etc",
            ".hidden",
            "-rf",
            "_x",
            "a b",
            "a\nb",
            "a\0b",
            "é",
            "x;rm",
            "$(id)",
            &"x".repeat(65),
        ] {
            let e = Name::parse("job name", bad).unwrap_err();
            assert!(e.to_string().contains("job name"), "{e}");
            assert!(
                !e.to_string().contains('\n'),
                "message must be printable: {e}"
            );
        }
    }

    #[test]
    fn paths_stay_in_their_directory() {
        let dir = Path::new("/run/throttle");
        let n = Name::parse("job name", "j1").unwrap();
        assert_eq!(
            path_inside(dir, "throttle-jobs-", &n, ".d").unwrap(),
            Path::new("/run/throttle/throttle-jobs-j1.d")
        );
        // A name that bypassed the grammar is still refused.
        let forged = Name("../../etc".into());
        assert!(path_inside(dir, "", &forged, "").is_none());
        let forged = Name("..".into());
        assert!(path_inside(dir, "", &forged, "").is_none());
    }

    #[test]
    fn deserializing_validates() {
        assert!(serde_json::from_str::<Name>("\"n1\"").is_ok());
        assert!(serde_json::from_str::<Name>("\"..\"").is_err());
    }
}
