//! Directories that only the agent's user may enter: the default home of the local
//! endpoint and every job's run directory.
//!
//! Ranks listen on Unix sockets inside their job's run directory. If another local user
//! could create, rename or enter that directory, they could listen in the ranks' place and
//! read (or stall) the job's traffic, so the agent creates these directories with mode
//! 0700 and refuses one that exists but is not its own and private, or that sits in a
//! directory others may rename entries of.

use std::io;
use std::os::unix::fs::{DirBuilderExt, MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};

/// Create `path` (and missing parents) with mode 0700, or check that the existing one is
/// a directory of this user that nobody else may enter or change.
pub fn ensure(path: &Path) -> io::Result<()> {
    match std::fs::symlink_metadata(path) {
        Ok(_) => {}
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            std::fs::DirBuilder::new()
                .recursive(true)
                .mode(0o700)
                .create(path)
                .map_err(|e| {
                    io::Error::new(e.kind(), format!("cannot create {}: {e}", path.display()))
                })?;
        }
        Err(e) => return Err(e),
    }
    check(path)
}

fn refuse(path: &Path, why: String) -> io::Error {
    io::Error::new(
        io::ErrorKind::PermissionDenied,
        format!(
            "{} is not a private directory of this user ({why}); remove it, or choose another place with --local-socket",
            path.display()
        ),
    )
}

/// Check an existing directory: not a symbolic link, owned by this user, mode without
/// group or other bits, and its parent not open to renames by others.
pub fn check(path: &Path) -> io::Result<()> {
    let m = std::fs::symlink_metadata(path)?;
    if !m.file_type().is_dir() {
        return Err(refuse(path, "not a directory".into()));
    }
    let me = nix::unistd::geteuid().as_raw();
    if m.uid() != me {
        return Err(refuse(path, format!("owned by uid {}, not {me}", m.uid())));
    }
    let mode = m.permissions().mode() & 0o7777;
    if mode & 0o077 != 0 {
        return Err(refuse(path, format!("mode {mode:o}, others may enter it")));
    }
    if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
        let pm = std::fs::metadata(parent)?;
        let pmode = pm.permissions().mode();
        let others_write = pmode & 0o022 != 0 && pm.uid() != me || pmode & 0o002 != 0;
        if others_write && pmode & 0o1000 == 0 {
            return Err(refuse(
                path,
                format!(
                    "its parent {} may be changed by other users and is not sticky",
                    parent.display()
                ),
            ));
        }
    }
    Ok(())
}

/// The default home of an agent's local endpoint: `$XDG_RUNTIME_DIR/throttle`, else
/// `/run/throttle` for root, else `/tmp/throttle-UID`.
pub fn default_home() -> PathBuf {
    if let Some(d) = std::env::var_os("XDG_RUNTIME_DIR").filter(|d| !d.is_empty()) {
        return PathBuf::from(d).join("throttle");
    }
    let uid = nix::unistd::geteuid();
    if uid.is_root() {
        PathBuf::from("/run/throttle")
    } else {
        std::env::temp_dir().join(format!("throttle-{}", uid.as_raw()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scratch(tag: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("throttle-priv-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        d
    }

    #[test]
    fn creates_private_and_refuses_what_others_could_touch() {
        let d = scratch("a");
        ensure(&d.join("x/y")).unwrap();
        let mode = std::fs::metadata(d.join("x/y"))
            .unwrap()
            .permissions()
            .mode()
            & 0o777;
        assert_eq!(mode, 0o700);
        ensure(&d.join("x/y")).unwrap();
        // A directory others may enter.
        std::fs::create_dir_all(d.join("open")).unwrap();
        std::fs::set_permissions(d.join("open"), std::fs::Permissions::from_mode(0o755)).unwrap();
        assert!(ensure(&d.join("open"))
            .unwrap_err()
            .to_string()
            .contains("mode 755"));
        // A symbolic link, even to a private directory.
        std::os::unix::fs::symlink(d.join("x/y"), d.join("link")).unwrap();
        assert!(ensure(&d.join("link")).is_err());
        // A private directory in a world-writable, non-sticky parent.
        std::fs::create_dir_all(d.join("pub/inner")).unwrap();
        std::fs::set_permissions(d.join("pub/inner"), std::fs::Permissions::from_mode(0o700))
            .unwrap();
        std::fs::set_permissions(d.join("pub"), std::fs::Permissions::from_mode(0o777)).unwrap();
        assert!(ensure(&d.join("pub/inner"))
            .unwrap_err()
            .to_string()
            .contains("not sticky"));
        std::fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn a_directory_of_another_user_is_refused() {
        if !nix::unistd::geteuid().is_root() {
            throttle_testkit::skip(
                "a_directory_of_another_user_is_refused",
                "root (to create a directory owned by another user)",
                throttle_testkit::REQUIRE_NETNS,
            );
            return;
        }
        let d = scratch("b");
        std::fs::create_dir_all(&d).unwrap();
        std::fs::set_permissions(&d, std::fs::Permissions::from_mode(0o700)).unwrap();
        nix::unistd::chown(&d, Some(nix::unistd::Uid::from_raw(65534)), None).unwrap();
        assert!(ensure(&d)
            .unwrap_err()
            .to_string()
            .contains("owned by uid 65534"));
        std::fs::remove_dir_all(&d).unwrap();
    }
}
