//! The controller's files in directories other users may write: a shared working
//! directory, `/tmp`, a project directory of a group.
//!
//! Another local user who can create entries in such a directory can plant a symbolic
//! link where we are about to write (and make root overwrite a file of root's), or a
//! directory of theirs where we are about to create ours (and read what we put in it).
//! The rules, as OpenSSH and systemd apply them to the files they trust:
//!
//! * a directory we create files in is opened once, without following a link, and checked
//!   on its descriptor: ours (or root's), and writable by nobody else unless sticky (then
//!   others cannot rename or remove what we create in it);
//! * a private directory of ours (a state directory, kept logs) is created with mode 0700,
//!   or, when it exists, must be ours, a directory (not a link) and writable by nobody else;
//! * files are created relative to such a directory's descriptor with `O_EXCL` and
//!   `O_NOFOLLOW`, and read with `O_NOFOLLOW`, checked regular and ours on their
//!   descriptor.
//!
//! * every path is walked one component at a time ([`Dir::resolve`]), each directory
//!   opened from the one before with `O_NOFOLLOW`: a symbolic link anywhere in it is
//!   followed only when it is this user's or root's and lies in a directory nobody else
//!   may change (this user's or root's, writable by nobody else, or sticky), as OpenSSH's
//!   `safe_path` and systemd's `chase()` trust paths; missing directories are made the
//!   same way (`mkdirat` in the directory just opened), never through a link;
//! * what the user names to be written (a report directory, an export, the demo's
//!   directory, the results database) is written only into a directory of the user's that
//!   nobody else may write ([`out_dir`]), or replaced whole, through no link
//!   ([`write_file`]): a link or a device at that name is refused, never followed.
//!
//! Everything is checked on the descriptor it is then used through, so that nothing can be
//! swapped between the check and the use; what only takes a path (the plotting library)
//! is given one through the checked descriptor ([`Dir::through`]).

use std::ffi::OsStr;
use std::fs::File;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use anyhow::{anyhow, bail, Result};
use nix::fcntl::{openat, OFlag};
use nix::sys::stat::{fstat, mkdirat, FileStat, Mode, SFlag};
use nix::unistd::{unlinkat, UnlinkatFlags};

/// Most symbolic links one path may pass through ([`Dir::resolve`]; the kernel's limit).
pub const MAX_LINKS: usize = 40;
/// Most directories one walk may make (or make again, where another process removes
/// them as fast): more than any path of ours has components.
const MAX_MADE: usize = 256;

/// A directory opened without following a link and checked on its descriptor.
pub struct Dir {
    fd: OwnedFd,
    path: PathBuf,
}

/// Open `name` (relative to `at`, or a path) as a directory, following a link in its last
/// component only when `follow`.
fn open_dir<P: ?Sized + nix::NixPath>(
    at: Option<&OwnedFd>,
    name: &P,
    follow: bool,
) -> nix::Result<OwnedFd> {
    let mut flags = OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC;
    if !follow {
        flags |= OFlag::O_NOFOLLOW;
    }
    let fd = openat(at.map(|f| f.as_raw_fd()), name, flags, Mode::empty())?;
    // SAFETY: openat returned a new descriptor that nothing else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

fn me() -> u32 {
    nix::unistd::geteuid().as_raw()
}

fn is_dir(st: &FileStat) -> bool {
    SFlag::from_bits_truncate(st.st_mode) & SFlag::S_IFMT == SFlag::S_IFDIR
}

fn is_file(st: &FileStat) -> bool {
    SFlag::from_bits_truncate(st.st_mode) & SFlag::S_IFMT == SFlag::S_IFREG
}

/// `name` as one path component: no `/`, not `.` or `..`, not empty.
fn component(name: &str) -> Result<&OsStr> {
    if name.is_empty() || name == "." || name == ".." || name.contains('/') {
        bail!("`{name}` is not a file name");
    }
    Ok(OsStr::from_bytes(name.as_bytes()))
}

impl Dir {
    /// Open `path` as a directory (a link in its last component refused) in which this
    /// user may create files that others cannot replace: owned by this user or root, and
    /// writable by no one else unless sticky.
    pub fn open_shared(path: &Path) -> Result<Dir> {
        Dir::open(path)?.shared()
    }

    /// [`Dir::open_shared`] for a directory made where it is missing, its missing parents
    /// too (mode 0755, through no link [`Dir::resolve`] does not trust).
    pub fn make_shared(path: &Path) -> Result<Dir> {
        Dir::resolve(path, Some(0o755))?.shared()
    }

    /// This directory, if this user may create files in it that others cannot replace
    /// ([`Dir::open_shared`]'s rule).
    fn shared(self) -> Result<Dir> {
        let (d, path) = (&self, self.path.clone());
        let st = d.stat()?;
        let owner_ok = st.st_uid == me() || st.st_uid == 0;
        let others_write = st.st_mode & 0o022 != 0;
        let sticky = st.st_mode & 0o1000 != 0;
        if !owner_ok || (others_write && !sticky) {
            bail!(
                "{} may be changed by other users (owner uid {}, mode {:o}): another user could replace what throttle-ctl writes there; use a directory of your own",
                path.display(),
                st.st_uid,
                st.st_mode & 0o7777
            );
        }
        Ok(self)
    }

    /// Open `path` as a directory, its last component not a link (refused: a link in an
    /// earlier one is followed as [`Dir::resolve`] trusts links).
    fn open(path: &Path) -> Result<Dir> {
        let Some(name) = path.file_name().and_then(|n| n.to_str()) else {
            return Dir::resolve(path, None);
        };
        let parent = match path.parent() {
            Some(p) if !p.as_os_str().is_empty() => p,
            _ => Path::new("."),
        };
        let at = Dir::resolve(parent, None)?;
        let fd = open_dir(Some(&at.fd), component(name)?, false).map_err(|e| match e {
            nix::errno::Errno::ELOOP | nix::errno::Errno::ENOTDIR => anyhow!(
                "{} is not a directory (a symbolic link or a file is refused)",
                path.display()
            ),
            e => anyhow!("cannot open the directory {}: {e}", path.display()),
        })?;
        Ok(Dir {
            fd,
            path: path.to_path_buf(),
        })
    }

    /// Open the directory `path` names one component at a time, each from the directory
    /// before it without following a link (`O_NOFOLLOW`), and making the missing ones with
    /// `create`'s mode when given (`mkdirat` there: never through a link). A symbolic link
    /// on the way is followed only when it is this user's or root's and its directory is
    /// one nobody else may change: this user's or root's, and writable by nobody else or
    /// sticky (others cannot replace the link there). Another user's link is refused,
    /// wherever it is in the path: a link planted in a shared directory cannot send what
    /// throttle-ctl writes, or the directories it makes, elsewhere. At most [`MAX_LINKS`]
    /// links are followed, as the kernel's own limit.
    pub fn resolve(path: &Path, create: Option<u32>) -> Result<Dir> {
        use std::collections::VecDeque;
        use std::path::Component;
        let start = if path.is_absolute() { "/" } else { "." };
        let mut fd = open_dir(None, start, false)
            .map_err(|e| anyhow!("cannot open the directory {start}: {e}"))?;
        let mut todo: VecDeque<std::ffi::OsString> = VecDeque::new();
        let queue = |todo: &mut VecDeque<std::ffi::OsString>, p: &Path, front: bool| {
            let parts: Vec<std::ffi::OsString> = p
                .components()
                .filter_map(|c| match c {
                    Component::Normal(n) => Some(n.to_os_string()),
                    Component::ParentDir => Some("..".into()),
                    Component::CurDir | Component::RootDir | Component::Prefix(_) => None,
                })
                .collect();
            if front {
                for c in parts.into_iter().rev() {
                    todo.push_front(c);
                }
            } else {
                todo.extend(parts);
            }
        };
        queue(&mut todo, path, false);
        let (mut links, mut made) = (0usize, 0usize);
        let at = |done: &Path| {
            if done.as_os_str().is_empty() {
                PathBuf::from(start)
            } else {
                done.to_path_buf()
            }
        };
        // The path walked so far, as the kernel would name it, for messages.
        let mut done = PathBuf::from(if path.is_absolute() { "/" } else { "" });
        while let Some(c) = todo.pop_front() {
            let name = c.as_os_str();
            match open_dir(Some(&fd), name, false) {
                Ok(next) => {
                    fd = next;
                    done.push(name);
                }
                Err(nix::errno::Errno::ENOENT) if create.is_some() && name != ".." => {
                    // Made here, then opened again like any other component (whoever
                    // put something in its place meanwhile meets the same checks).
                    made += 1;
                    if made > MAX_MADE {
                        bail!(
                            "cannot create {}: it keeps disappearing",
                            at(&done).join(name).display()
                        );
                    }
                    match mkdirat(
                        Some(fd.as_raw_fd()),
                        name,
                        Mode::from_bits_truncate(create.unwrap_or(0o755)),
                    ) {
                        Ok(()) | Err(nix::errno::Errno::EEXIST) => todo.push_front(c),
                        Err(e) => bail!(
                            "cannot create the directory {}: {e}",
                            at(&done).join(name).display()
                        ),
                    }
                }
                // A link (O_NOFOLLOW with O_DIRECTORY: ENOTDIR, or ELOOP) or no directory.
                Err(nix::errno::Errno::ELOOP | nix::errno::Errno::ENOTDIR) => {
                    let here = at(&done).join(name);
                    let link = nix::sys::stat::fstatat(
                        Some(fd.as_raw_fd()),
                        name,
                        nix::fcntl::AtFlags::AT_SYMLINK_NOFOLLOW,
                    )
                    .map_err(|e| anyhow!("cannot stat {}: {e}", here.display()))?;
                    if SFlag::from_bits_truncate(link.st_mode) & SFlag::S_IFMT != SFlag::S_IFLNK {
                        bail!("{} is not a directory", here.display());
                    }
                    let dir = fstat(fd.as_raw_fd())
                        .map_err(|e| anyhow!("cannot stat {}: {e}", at(&done).display()))?;
                    let trusted = |uid: u32| uid == me() || uid == 0;
                    let dir_safe = trusted(dir.st_uid)
                        && (dir.st_mode & 0o022 == 0 || dir.st_mode & 0o1000 != 0);
                    if !trusted(link.st_uid) || !dir_safe {
                        bail!(
                            "{} is a symbolic link {} (link owner uid {}; its directory's owner uid {}, mode {:o}): another user could send what throttle-ctl writes there elsewhere; name the real directory",
                            here.display(),
                            if trusted(link.st_uid) { "in a directory other users may change" } else { "of another user's" },
                            link.st_uid,
                            dir.st_uid,
                            dir.st_mode & 0o7777
                        );
                    }
                    links += 1;
                    if links > MAX_LINKS {
                        bail!(
                            "{}: more than {MAX_LINKS} symbolic links on the way (a loop?)",
                            path.display()
                        );
                    }
                    let target = nix::fcntl::readlinkat(Some(fd.as_raw_fd()), name)
                        .map_err(|e| anyhow!("cannot read the link {}: {e}", here.display()))?;
                    let target = PathBuf::from(target);
                    if target.is_absolute() {
                        fd = open_dir(None, "/", false)
                            .map_err(|e| anyhow!("cannot open /: {e}"))?;
                        done = PathBuf::from("/");
                    }
                    queue(&mut todo, &target, true);
                }
                Err(e) => bail!(
                    "cannot open the directory {}: {e}",
                    at(&done).join(name).display()
                ),
            }
        }
        Ok(Dir {
            fd,
            path: path.to_path_buf(),
        })
    }

    /// The directory's owner, mode and the rest, from its descriptor.
    pub fn stat(&self) -> Result<FileStat> {
        fstat(self.fd.as_raw_fd()).map_err(|e| anyhow!("cannot stat {}: {e}", self.path.display()))
    }

    /// The directory's path (for messages, and for what only takes a path).
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// What `name` here is, without following a link; `None` when there is nothing.
    pub fn entry(&self, name: &str) -> Result<Option<FileStat>> {
        let c = component(name)?;
        match nix::sys::stat::fstatat(
            Some(self.fd.as_raw_fd()),
            c,
            nix::fcntl::AtFlags::AT_SYMLINK_NOFOLLOW,
        ) {
            Ok(st) => Ok(Some(st)),
            Err(nix::errno::Errno::ENOENT) => Ok(None),
            Err(e) => bail!("cannot stat {}: {e}", self.path.join(c).display()),
        }
    }

    /// A path to `name` in this directory that resolves through the checked descriptor
    /// (`/proc/self/fd/N/name`), for what only takes a path: renaming or replacing the
    /// directory's path meanwhile changes nothing.
    pub fn through(&self, name: &str) -> Result<PathBuf> {
        Ok(self.fd_path().join(component(name)?))
    }

    /// This directory as a path through its descriptor ([`Dir::through`]), valid while
    /// the `Dir` lives.
    pub fn fd_path(&self) -> PathBuf {
        PathBuf::from(format!("/proc/self/fd/{}", self.fd.as_raw_fd()))
    }

    /// The directory's path as the kernel resolved its descriptor.
    pub fn real_path(&self) -> Result<PathBuf> {
        std::fs::read_link(format!("/proc/self/fd/{}", self.fd.as_raw_fd()))
            .map_err(|e| anyhow!("cannot resolve {}: {e}", self.path.display()))
    }

    /// Whether this directory is this user's and nobody else may enter or change it.
    pub fn is_private(&self) -> Result<bool> {
        let st = self.stat()?;
        Ok(is_dir(&st) && st.st_uid == me() && st.st_mode & 0o077 == 0)
    }

    /// Whether it holds no entry.
    pub fn is_empty(&self) -> Result<bool> {
        Ok(
            std::fs::read_dir(format!("/proc/self/fd/{}", self.fd.as_raw_fd()))
                .map_err(|e| anyhow!("cannot list {}: {e}", self.path.display()))?
                .next()
                .is_none(),
        )
    }

    /// The directory `name` in this one, made with `mode` where it is missing, opened
    /// without following a link (checks on it are the caller's).
    fn subdir(&self, name: &str, mode: u32) -> Result<Dir> {
        let c = component(name)?;
        let path = self.path.join(c);
        match mkdirat(Some(self.fd.as_raw_fd()), c, Mode::from_bits_truncate(mode)) {
            Ok(()) | Err(nix::errno::Errno::EEXIST) => {}
            Err(e) => bail!("cannot create {}: {e}", path.display()),
        }
        let fd = open_dir(Some(&self.fd), c, false).map_err(|e| {
            anyhow!(
                "{} exists and is not a directory (a symbolic link is refused): {e}",
                path.display()
            )
        })?;
        Ok(Dir { fd, path })
    }

    /// The directory `name` in this one, for this user alone: created with mode 0700, or,
    /// where it exists, opened only if it is this user's, a directory and writable by
    /// nobody else ([`Dir::make_private`] then closes it to reading too).
    pub fn private_subdir(&self, name: &str) -> Result<Dir> {
        let d = self.subdir(name, 0o700)?;
        let st = d.stat()?;
        if st.st_uid != me() || st.st_mode & 0o022 != 0 {
            bail!(
                "{} exists and is not a private directory of yours (owner uid {}, mode {:o}): remove it, or work in a directory of your own",
                d.path.display(),
                st.st_uid,
                st.st_mode & 0o7777
            );
        }
        Ok(d)
    }

    /// Make this directory of this user's 0700.
    pub fn make_private(&self) -> Result<()> {
        nix::sys::stat::fchmod(self.fd.as_raw_fd(), Mode::from_bits_truncate(0o700))
            .map_err(|e| anyhow!("cannot make {} private: {e}", self.path.display()))
    }

    /// Create the file `name` here, new (an existing one, or a link, is refused), with
    /// `mode`.
    pub fn create_new(&self, name: &str, mode: u32) -> Result<File> {
        let c = component(name)?;
        let fd = openat(
            Some(self.fd.as_raw_fd()),
            c,
            OFlag::O_WRONLY | OFlag::O_CREAT | OFlag::O_EXCL | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC,
            Mode::from_bits_truncate(mode),
        )
        .map_err(|e| anyhow!("cannot create {}: {e}", self.path.join(c).display()))?;
        // SAFETY: openat returned a new descriptor that nothing else owns.
        Ok(unsafe { File::from_raw_fd(fd) })
    }

    /// Create `name` here with `mode`, replacing a file of that name (this directory must
    /// be private: nobody else can put a file or a link there meanwhile).
    pub fn replace(&self, name: &str, mode: u32) -> Result<File> {
        if !self.is_private()? {
            bail!(
                "{} is not private: throttle-ctl does not replace files in it",
                self.path.display()
            );
        }
        let c = component(name)?;
        match unlinkat(Some(self.fd.as_raw_fd()), c, UnlinkatFlags::NoRemoveDir) {
            Ok(()) | Err(nix::errno::Errno::ENOENT) => {}
            Err(e) => bail!("cannot replace {}: {e}", self.path.join(c).display()),
        }
        self.create_new(name, mode)
    }

    /// Write `bytes` as the file `name` here, whole or not at all: into a new file of a
    /// name nobody can have guessed (`O_EXCL`, no link followed), then renamed over
    /// `name` (a link there is replaced, not followed; in a sticky directory another
    /// user's file there is not replaced, and that is an error).
    pub fn write_atomically(&self, name: &str, bytes: &[u8], mode: u32) -> Result<()> {
        use std::io::Write;
        let c = component(name)?;
        if let Some(st) = self.entry(name)? {
            if !is_file(&st) {
                bail!(
                    "{} exists and is not a regular file (a symbolic link, a directory, a FIFO or a device): throttle-ctl replaces only files; name another",
                    self.path.join(c).display()
                );
            }
        }
        let mut nonce = [0u8; 8];
        getrandom::getrandom(&mut nonce).map_err(|e| anyhow!("no randomness: {e}"))?;
        let tmp = format!(
            ".{name}.{}.{:016x}.tmp",
            std::process::id(),
            u64::from_le_bytes(nonce)
        );
        let written = self.create_new(&tmp, mode).and_then(|mut f| {
            f.write_all(bytes)
                .and_then(|_| f.sync_all())
                .map_err(|e| anyhow!("cannot write {}: {e}", self.path.join(&tmp).display()))
        });
        let renamed = written.and_then(|_| {
            nix::fcntl::renameat(
                Some(self.fd.as_raw_fd()),
                tmp.as_str(),
                Some(self.fd.as_raw_fd()),
                c,
            )
            .map_err(|e| {
                anyhow!(
                    "cannot write {}: {e}{}",
                    self.path.join(c).display(),
                    if e == nix::errno::Errno::EPERM {
                        " (another user's file has that name in a shared directory)"
                    } else {
                        ""
                    }
                )
            })
        });
        if renamed.is_err() {
            let _ = unlinkat(
                Some(self.fd.as_raw_fd()),
                tmp.as_str(),
                UnlinkatFlags::NoRemoveDir,
            );
        }
        renamed
    }

    /// Open the file `name` here to read: a regular file of this user's, not a link.
    pub fn open_own(&self, name: &str) -> Result<File> {
        let c = component(name)?;
        let path = self.path.join(c);
        let fd = openat(
            Some(self.fd.as_raw_fd()),
            c,
            OFlag::O_RDONLY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC | OFlag::O_NONBLOCK,
            Mode::empty(),
        )
        .map_err(|e| {
            anyhow!(
                "cannot open {} (a symbolic link is refused): {e}",
                path.display()
            )
        })?;
        // SAFETY: openat returned a new descriptor that nothing else owns.
        let f = unsafe { File::from_raw_fd(fd) };
        let st =
            fstat(f.as_raw_fd()).map_err(|e| anyhow!("cannot stat {}: {e}", path.display()))?;
        if !is_file(&st) || st.st_uid != me() {
            bail!(
                "{} is not a regular file of yours: not read",
                path.display()
            );
        }
        Ok(f)
    }
}

/// Open `path` (a file, maybe new) in a directory that passes [`Dir::open_shared`]:
/// the directory and the file's name.
pub fn in_shared_dir(path: &Path) -> Result<(Dir, String)> {
    let name = path
        .file_name()
        .and_then(|n| n.to_str())
        .ok_or_else(|| anyhow!("{} names no file", path.display()))?
        .to_string();
    let parent = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    };
    Ok((Dir::open_shared(&parent)?, name))
}

/// The directory `path` to write a user's output into (a report, the demo's files),
/// created where it is missing (mode 0755, its missing parents too, each made where the
/// walk of [`Dir::resolve`] arrived, never through a link it does not trust): the last
/// component not a link, this user's, and writable by nobody else, so that nobody can
/// plant a link or a file of theirs in it; its parent passes [`Dir::open_shared`]'s rule.
pub fn out_dir(path: &Path) -> Result<Dir> {
    let refuse = |st: &FileStat| -> Result<()> {
        if st.st_uid != me() || st.st_mode & 0o022 != 0 {
            bail!(
                "{} is not a directory of yours that only you may write (owner uid {}, mode {:o}): another user could replace or redirect what throttle-ctl writes there; name a directory of your own",
                path.display(),
                st.st_uid,
                st.st_mode & 0o7777
            );
        }
        Ok(())
    };
    let Some(name) = path.file_name().and_then(|n| n.to_str()) else {
        // ".", "/", "x/..": it exists or it is an error.
        let d = Dir::open(path)?;
        refuse(&d.stat()?)?;
        return Ok(d);
    };
    let parent = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    };
    let mut d = Dir::resolve(&parent, Some(0o755))?
        .shared()?
        .subdir(name, 0o755)?;
    d.path = path.to_path_buf();
    refuse(&d.stat()?)?;
    Ok(d)
}

/// Write `bytes` as the file `path` names, whole: a new file of a name nobody can have
/// guessed, renamed over the name ([`Dir::write_atomically`]); a link, a directory or a
/// device at that name is refused, never followed; the directory is reached by
/// [`Dir::resolve`]'s walk. The directory may be anyone's (a group's project directory):
/// nothing in this path follows a link another user could have planted, so whoever may
/// change the directory can change the file afterwards, as they could anyway, but cannot
/// make this write land elsewhere; in a sticky one another user's file of that name is not
/// replaced.
pub fn write_file(path: &Path, bytes: &[u8]) -> Result<()> {
    let name = path
        .file_name()
        .and_then(|n| n.to_str())
        .ok_or_else(|| anyhow!("{} names no file", path.display()))?;
    let parent = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    };
    Dir::resolve(&parent, None)?.write_atomically(name, bytes, 0o666)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Write};
    use std::os::unix::fs::PermissionsExt;

    fn scratch(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("throttle-shared-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    #[test]
    fn files_are_created_new_and_links_are_never_followed() {
        let d = scratch("links");
        let target = d.join("precious");
        std::fs::write(&target, "keep").unwrap();
        std::os::unix::fs::symlink(&target, d.join("planted")).unwrap();
        let dir = Dir::open_shared(&d).unwrap();
        // A planted link is neither written through nor read through.
        assert!(dir.create_new("planted", 0o600).is_err());
        assert!(dir.open_own("planted").is_err());
        assert_eq!(std::fs::read_to_string(&target).unwrap(), "keep");
        // A new file is made; the same name again is refused.
        dir.create_new("new", 0o600)
            .unwrap()
            .write_all(b"x")
            .unwrap();
        assert!(dir.create_new("new", 0o600).is_err());
        let mut s = String::new();
        dir.open_own("new").unwrap().read_to_string(&mut s).unwrap();
        assert_eq!(s, "x");
        // Written whole: over a file, it is replaced; over a planted link, refused, its
        // target untouched; over a FIFO, refused at once (not opened).
        dir.write_atomically("whole", b"old", 0o644).unwrap();
        dir.write_atomically("whole", b"new", 0o644).unwrap();
        assert_eq!(std::fs::read_to_string(d.join("whole")).unwrap(), "new");
        std::os::unix::fs::symlink(&target, d.join("linked")).unwrap();
        let e = dir
            .write_atomically("linked", b"new", 0o644)
            .err()
            .unwrap()
            .to_string();
        assert!(e.contains("not a regular file"), "{e}");
        assert_eq!(std::fs::read_to_string(&target).unwrap(), "keep");
        nix::unistd::mkfifo(&d.join("fifo"), Mode::from_bits_truncate(0o600)).unwrap();
        assert!(write_file(&d.join("fifo"), b"x").is_err());
        // A link to a directory is not a directory to open.
        std::os::unix::fs::symlink(&d, d.join("loop")).unwrap();
        assert!(Dir::open_shared(&d.join("loop")).is_err());
        assert!(dir.create_new("../escape", 0o600).is_err());
        let _ = std::fs::remove_dir_all(&d);
    }

    #[test]
    fn an_output_directory_is_ours_alone_or_refused() {
        let d = scratch("out");
        // Made where missing, with its parents; the same again is fine.
        let out = out_dir(&d.join("a/report")).unwrap();
        assert!(out_dir(&d.join("a/report")).is_ok());
        std::fs::write(out.through("x").unwrap(), "through").unwrap();
        assert_eq!(
            std::fs::read_to_string(d.join("a/report/x")).unwrap(),
            "through"
        );
        assert_eq!(
            out.real_path().unwrap(),
            std::fs::canonicalize(d.join("a/report")).unwrap()
        );
        // A link where it should be, and a directory others may write, are refused.
        std::os::unix::fs::symlink(d.join("a"), d.join("linked")).unwrap();
        let e = out_dir(&d.join("linked")).err().unwrap().to_string();
        assert!(e.contains("symbolic link"), "{e}");
        std::fs::create_dir(d.join("open")).unwrap();
        std::fs::set_permissions(d.join("open"), std::fs::Permissions::from_mode(0o1777)).unwrap();
        let e = out_dir(&d.join("open")).err().unwrap().to_string();
        assert!(e.contains("only you may write"), "{e}");
        // ... but a directory of ours may live in a shared (sticky) one.
        assert!(out_dir(&d.join("open/mine")).is_ok());
        // A file is written whole in a directory a group may write (no link followed
        // there either).
        std::fs::create_dir(d.join("group")).unwrap();
        std::fs::set_permissions(d.join("group"), std::fs::Permissions::from_mode(0o775)).unwrap();
        write_file(&d.join("group/out.csv"), b"a,b\n").unwrap();
        assert_eq!(
            std::fs::read_to_string(d.join("group/out.csv")).unwrap(),
            "a,b\n"
        );
        std::os::unix::fs::symlink(d.join("a"), d.join("group/linked.csv")).unwrap();
        assert!(write_file(&d.join("group/linked.csv"), b"x").is_err());
        let _ = std::fs::remove_dir_all(&d);
    }

    /// Issue 55, finding 1: a link in an earlier component of a path is followed only
    /// when it is ours (or root's) in a directory nobody else may change; directories are
    /// made one at a time, never through another's link.
    #[test]
    fn a_path_is_walked_one_component_at_a_time_trusting_only_safe_links() {
        use std::os::unix::fs::symlink;
        let d = scratch("resolve");
        std::fs::set_permissions(&d, std::fs::Permissions::from_mode(0o700)).unwrap();
        let target = d.join("target");
        std::fs::create_dir(&target).unwrap();
        // Our link in our own directory: followed, and what is missing beyond it made.
        symlink(&target, d.join("mine")).unwrap();
        let made = out_dir(&d.join("mine/run1/report")).unwrap();
        assert!(target.join("run1/report").is_dir());
        assert_eq!(
            made.real_path().unwrap(),
            std::fs::canonicalize(target.join("run1/report")).unwrap()
        );
        // Relative targets, `..` and chains resolve as the kernel would.
        symlink("target/run1", d.join("rel")).unwrap();
        symlink("../rel/../run1", d.join("target/chain")).unwrap();
        let chained = Dir::resolve(&d.join("target/chain/report"), None).unwrap();
        assert_eq!(
            chained.real_path().unwrap(),
            std::fs::canonicalize(target.join("run1/report")).unwrap()
        );
        // Our link in a directory others may write (not sticky): refused, nothing made
        // where it points.
        let open = d.join("open");
        std::fs::create_dir(&open).unwrap();
        std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o777)).unwrap();
        let elsewhere = d.join("elsewhere");
        std::fs::create_dir(&elsewhere).unwrap();
        symlink(&elsewhere, open.join("out")).unwrap();
        let e = out_dir(&open.join("out/run1/report"))
            .err()
            .unwrap()
            .to_string();
        assert!(
            e.contains("symbolic link") && e.contains("other users may change"),
            "{e}"
        );
        assert!(write_file(&open.join("out/runs.csv"), b"x").is_err());
        assert!(Dir::open_shared(&open.join("out/x")).is_err());
        assert_eq!(std::fs::read_dir(&elsewhere).unwrap().count(), 0);
        // ... but in a sticky one (others cannot replace it there) ours is followed.
        std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o1777)).unwrap();
        assert!(out_dir(&open.join("out/run1")).is_ok());
        assert!(elsewhere.join("run1").is_dir());
        // Another user's link is refused wherever it is (root can make one here).
        if nix::unistd::geteuid().is_root() {
            let theirs = open.join("theirs");
            symlink(&target, &theirs).unwrap();
            nix::unistd::fchownat(
                None,
                &theirs,
                Some(nix::unistd::Uid::from_raw(65534)),
                None,
                nix::fcntl::AtFlags::AT_SYMLINK_NOFOLLOW,
            )
            .unwrap();
            let e = out_dir(&theirs.join("a/b")).err().unwrap().to_string();
            assert!(e.contains("of another user's"), "{e}");
            assert!(!target.join("a").exists());
        }
        // A loop ends with an error, not for ever.
        symlink("loop2", d.join("loop1")).unwrap();
        symlink("loop1", d.join("loop2")).unwrap();
        let e = Dir::resolve(&d.join("loop1/x"), Some(0o755))
            .err()
            .unwrap()
            .to_string();
        assert!(e.contains("symbolic links on the way"), "{e}");
        // A file on the way is no directory.
        std::fs::write(d.join("file"), "x").unwrap();
        assert!(out_dir(&d.join("file/x")).is_err());
        let _ = std::fs::remove_dir_all(&d);
    }

    #[test]
    fn a_private_subdirectory_is_made_or_must_be_ours_and_closed() {
        let d = scratch("private");
        let dir = Dir::open_shared(&d).unwrap();
        let sub = dir.private_subdir("logs").unwrap();
        sub.make_private().unwrap();
        assert!(sub.is_private().unwrap() && sub.is_empty().unwrap());
        // Replacing works in a private directory, through no link.
        std::os::unix::fs::symlink(d.join("outside"), d.join("logs/n0.log")).unwrap();
        sub.replace("n0.log", 0o600)
            .unwrap()
            .write_all(b"log")
            .unwrap();
        assert!(!d.join("outside").exists());
        assert_eq!(
            std::fs::read_to_string(d.join("logs/n0.log")).unwrap(),
            "log"
        );
        // One that others may write is refused; a link where it should be too.
        std::fs::create_dir(d.join("open")).unwrap();
        std::fs::set_permissions(d.join("open"), std::fs::Permissions::from_mode(0o777)).unwrap();
        let e = dir.private_subdir("open").err().unwrap().to_string();
        assert!(e.contains("not a private directory of yours"), "{e}");
        std::os::unix::fs::symlink(d.join("logs"), d.join("linked")).unwrap();
        assert!(dir.private_subdir("linked").is_err());
        // A directory others may write, not sticky, is no place to create files in.
        let e = Dir::open_shared(&d.join("open")).err().unwrap().to_string();
        assert!(e.contains("may be changed by other users"), "{e}");
        std::fs::set_permissions(d.join("open"), std::fs::Permissions::from_mode(0o1777)).unwrap();
        assert!(Dir::open_shared(&d.join("open")).is_ok());
        let _ = std::fs::remove_dir_all(&d);
    }
}
