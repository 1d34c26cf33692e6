//! Which programs a token holder may start on this node.
//!
//! The launcher runs programs as the agent's user, which is root on many clusters, so
//! the set is closed: by default only the workload programs installed next to the agent
//! binary (`throttle-bfs`, `throttle-pmm`, `throttle-mw`, `throttle-loggps`,
//! `throttle-selftest`); the operator adds more
//! explicitly (`--allow-program PATH`, `--allow-dir DIR`). Whatever the allow-list says,
//! the agent never starts itself or the controller (either would hand out a shell through
//! its own flags), nor a set-user-ID program: recognised by path, by inode, by content,
//! and by the text every build of them carries (so an older version or a copy with a
//! byte changed, in an allowed directory, is refused too). Paths are canonicalized, so
//! `..` and symbolic links cannot leave the allowed places. Interpreters in an allowed
//! directory are reported at start, by name or as copies of the system's; and a program
//! of an allowed directory that can start other programs (a script, or an executable that
//! imports an exec or spawn function: [`crate::launch::launchers`]) is not started unless the
//! operator names it with `--allow-program`, whatever its name (a patched copy of the
//! agent, `timeout`, `nice`, `setsid`, `strace`, a Python interpreter).

use std::collections::BTreeMap;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};

/// The workload programs shipped with throttle, allowed by default when installed next to
/// the agent.
pub const WORKLOADS: &[&str] = &[
    "throttle-bfs",
    "throttle-pmm",
    "throttle-mw",
    "throttle-loggps",
    "throttle-selftest",
];

/// Never started, whatever the allow-list says.
const NEVER: &[&str] = &["throttle-agent", "throttle-ctl"];

/// Text every build of throttle's agent and controller carries (the source paths of their
/// panic locations) and no workload does: a binary holding one is throttle's own, whatever
/// its name or version, or a byte changed in it.
const SIGNATURES: &[&[u8]] = &[b"throttle-agent/src/", b"throttle-ctl/src/"];

/// Programs that give whoever starts them a way to run anything else.
const INTERPRETERS: &[&str] = &[
    "sh", "bash", "dash", "zsh", "ksh", "csh", "tcsh", "fish", "busybox", "env", "python",
    "python3", "perl", "ruby", "node", "lua", "tclsh", "awk", "gawk", "find", "xargs", "sudo",
    "su", "ssh", "nc", "socat",
];

/// Why a program may not be started.
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum ProgramError {
    #[error("{0}")]
    NotAllowed(String),
    #[error("{0}")]
    Invalid(String),
}

/// The programs this agent starts.
#[derive(Clone, Debug, Default)]
pub struct ProgramPolicy {
    /// Allowed one by one: name -> canonical path.
    programs: BTreeMap<String, PathBuf>,
    /// Directories whose every executable is allowed (canonical).
    dirs: Vec<PathBuf>,
    /// This agent's own executable and the controller next to it, never started, under
    /// any name: recognised by path, by inode (hard links) and by content (copies).
    own_exe: Vec<Forbidden>,
}

/// A binary that is never started.
#[derive(Clone, Debug)]
struct Forbidden {
    path: PathBuf,
    dev: u64,
    ino: u64,
    size: u64,
}

impl Forbidden {
    fn of(path: &Path) -> Option<Forbidden> {
        let path = path.canonicalize().ok()?;
        let m = std::fs::metadata(&path).ok()?;
        Some(Forbidden {
            path,
            dev: m.dev(),
            ino: m.ino(),
            size: m.len(),
        })
    }

    /// Whether `real` (canonical, with metadata `m`) is this binary, or a copy of it.
    fn matches(&self, real: &Path, m: &std::fs::Metadata) -> bool {
        if self.path == real || (self.dev == m.dev() && self.ino == m.ino()) {
            return true;
        }
        m.len() == self.size && same_content(&self.path, real)
    }
}

/// Whether the file at `path` holds one of [`SIGNATURES`] (read through once; the verdict
/// is kept per file version: device, inode, size and change time).
fn carries_signature(path: &Path, m: &std::fs::Metadata) -> bool {
    use std::io::Read;
    type Key = (u64, u64, u64, i64, i64);
    static SEEN: std::sync::Mutex<Vec<(Key, bool)>> = std::sync::Mutex::new(Vec::new());
    let key = (m.dev(), m.ino(), m.len(), m.ctime(), m.ctime_nsec());
    if let Some((_, v)) = SEEN
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .iter()
        .find(|(k, _)| *k == key)
    {
        return *v;
    }
    let finders: Vec<memchr::memmem::Finder> =
        SIGNATURES.iter().map(memchr::memmem::Finder::new).collect();
    let longest = SIGNATURES.iter().map(|s| s.len()).max().unwrap_or(0);
    let found = std::fs::File::open(path).is_ok_and(|mut f| {
        let mut buf = vec![0u8; 1 << 20];
        let mut kept = 0;
        loop {
            let n = match f.read(&mut buf[kept..]) {
                Ok(0) | Err(_) => return false,
                Ok(n) => n,
            };
            let have = kept + n;
            if finders.iter().any(|f| f.find(&buf[..have]).is_some()) {
                return true;
            }
            // Keep the tail, where a signature may start.
            kept = longest.min(have);
            buf.copy_within(have - kept..have, 0);
        }
    });
    let mut seen = SEEN.lock().unwrap_or_else(|e| e.into_inner());
    if seen.len() >= 256 {
        seen.clear();
    }
    seen.push((key, found));
    found
}

/// The system's own interpreters (by [`INTERPRETERS`] name in the usual places), as
/// binaries to recognise under other names.
fn system_interpreters() -> Vec<Forbidden> {
    let mut out = Vec::new();
    for dir in ["/usr/bin", "/bin", "/usr/local/bin", "/usr/sbin", "/sbin"] {
        for name in INTERPRETERS {
            if let Some(f) = Forbidden::of(&Path::new(dir).join(name)) {
                if !out
                    .iter()
                    .any(|o: &Forbidden| o.dev == f.dev && o.ino == f.ino)
                {
                    out.push(f);
                }
            }
        }
    }
    out
}

fn same_content(a: &Path, b: &Path) -> bool {
    use std::io::Read;
    let (Ok(mut fa), Ok(mut fb)) = (std::fs::File::open(a), std::fs::File::open(b)) else {
        return false;
    };
    let (mut ba, mut bb) = (vec![0u8; 1 << 16], vec![0u8; 1 << 16]);
    loop {
        let na = fa.read(&mut ba).unwrap_or(0);
        let mut nb = 0;
        while nb < na {
            match fb.read(&mut bb[nb..na]) {
                Ok(0) | Err(_) => return false,
                Ok(n) => nb += n,
            }
        }
        if na == 0 {
            return fb.read(&mut bb[..1]).map(|n| n == 0).unwrap_or(false);
        }
        if ba[..na] != bb[..na] {
            return false;
        }
    }
}

/// This agent's binary and the controller installed next to it.
fn own_binaries() -> Vec<Forbidden> {
    let Ok(me) = std::env::current_exe() else {
        return Vec::new();
    };
    let mut out: Vec<Forbidden> = Forbidden::of(&me).into_iter().collect();
    if let Some(dir) = me.parent() {
        for n in NEVER {
            out.extend(Forbidden::of(&dir.join(n)));
        }
    }
    out
}

impl ProgramPolicy {
    /// The default policy: the workload programs found in `dir` (the agent's directory).
    pub fn workloads_in(dir: &Path) -> ProgramPolicy {
        let mut p = ProgramPolicy {
            own_exe: own_binaries(),
            ..ProgramPolicy::default()
        };
        for w in WORKLOADS {
            let _ = p.allow_program(&dir.join(w));
        }
        p
    }

    /// An empty policy (nothing may be started) that still knows the agent's own binary.
    pub fn nothing() -> ProgramPolicy {
        ProgramPolicy {
            own_exe: own_binaries(),
            ..ProgramPolicy::default()
        }
    }

    /// Allow one program by path.
    pub fn allow_program(&mut self, path: &Path) -> Result<(), String> {
        let real = self
            .check_file(path)
            .map_err(|e| format!("--allow-program {}: {e}", path.display()))?;
        let name = real
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        self.programs.insert(name, real);
        Ok(())
    }

    /// Allow every executable in a directory.
    pub fn allow_dir(&mut self, dir: &Path) -> Result<(), String> {
        let real = dir
            .canonicalize()
            .map_err(|e| format!("--allow-dir {}: {e}", dir.display()))?;
        if !real.is_dir() {
            return Err(format!("--allow-dir {}: not a directory", dir.display()));
        }
        self.dirs.push(real);
        Ok(())
    }

    /// What is allowed, for messages.
    pub fn describe(&self) -> String {
        let mut parts: Vec<String> = self.programs.keys().cloned().collect();
        parts.extend(
            self.dirs
                .iter()
                .map(|d| format!("the programs in {}", d.display())),
        );
        if parts.is_empty() {
            "nothing".into()
        } else {
            parts.join(", ")
        }
    }

    /// Things an operator should know about the allow-list: interpreters or shells inside
    /// an allowed directory (they let a token holder run anything), and directories that
    /// others may write to (a program could be swapped between check and start).
    pub fn warnings(&self) -> Vec<String> {
        let mut out = Vec::new();
        let system = system_interpreters();
        for d in &self.dirs {
            let mut risky: Vec<String> = INTERPRETERS
                .iter()
                .filter(|i| d.join(i).is_file())
                .map(|i| i.to_string())
                .collect();
            // Renamed copies and links of the system's interpreters (`env` as `myenv`).
            let files = std::fs::read_dir(d)
                .into_iter()
                .flatten()
                .flatten()
                .take(10_000);
            for e in files {
                let name = e.file_name().to_string_lossy().into_owned();
                if risky.contains(&name) {
                    continue;
                }
                let path = e.path();
                let (Ok(real), Ok(m)) = (path.canonicalize(), std::fs::metadata(&path)) else {
                    continue;
                };
                if m.is_file() && system.iter().any(|i| i.matches(&real, &m)) {
                    risky.push(format!("{name} (a copy of {})", {
                        let i = system.iter().find(|i| i.matches(&real, &m));
                        i.map(|i| i.path.display().to_string()).unwrap_or_default()
                    }));
                }
            }
            if !risky.is_empty() {
                out.push(format!(
                    "--allow-dir {} holds {}: a token holder can run any command through them",
                    d.display(),
                    risky.join(", ")
                ));
            }
            // Every other program there that starts programs (what it imports says so,
            // whatever its name): refused as a job unless named with --allow-program.
            let launchers: Vec<String> = std::fs::read_dir(d)
                .into_iter()
                .flatten()
                .flatten()
                .take(10_000)
                .filter(|e| e.path().is_file())
                .filter(|e| {
                    std::fs::metadata(e.path()).is_ok_and(|m| m.permissions().mode() & 0o111 != 0)
                })
                .filter(|e| {
                    !risky
                        .iter()
                        .any(|r| r.split(' ').next() == e.file_name().to_str())
                })
                .filter_map(|e| {
                    let why = crate::launch::launchers::starts_programs(&e.path())?;
                    Some(format!("{} ({why})", e.file_name().to_string_lossy()))
                })
                .take(20)
                .collect();
            if !launchers.is_empty() {
                out.push(format!(
                    "--allow-dir {} holds programs that start other programs, which are not started as jobs unless named with --allow-program: {}",
                    d.display(),
                    launchers.join(", ")
                ));
            }
        }
        let mut seen = Vec::new();
        for p in self.programs.values().chain(self.dirs.iter()) {
            let dir = if p.is_dir() {
                p.clone()
            } else {
                p.parent().map(Path::to_path_buf).unwrap_or_default()
            };
            if seen.contains(&dir) {
                continue;
            }
            if let Ok(m) = std::fs::metadata(&dir) {
                if m.permissions().mode() & 0o002 != 0 && m.permissions().mode() & 0o1000 == 0 {
                    out.push(format!(
                        "{} is writable by every user: anyone could replace an allowed program",
                        dir.display()
                    ));
                }
            }
            seen.push(dir);
        }
        out
    }

    /// The executable to start for `program`: a name on the allow-list or in an allowed
    /// directory, or a path inside an allowed place.
    pub fn resolve(&self, program: &str) -> Result<PathBuf, ProgramError> {
        if program.is_empty() || program.len() > 4096 || program.contains('\0') {
            return Err(ProgramError::Invalid(
                "the program name is empty, too long or contains NUL".into(),
            ));
        }
        let not_allowed = || {
            ProgramError::NotAllowed(format!(
                "program `{}` is not allowed on this node: it may start {}; the agent's operator can add programs with --allow-program PATH or --allow-dir DIR",
                program.escape_debug(),
                self.describe()
            ))
        };
        let candidate = if program.contains('/') {
            PathBuf::from(program)
        } else if program == "." || program == ".." {
            return Err(not_allowed());
        } else if let Some(p) = self.programs.get(program) {
            p.clone()
        } else {
            self.dirs
                .iter()
                .map(|d| d.join(program))
                .find(|p| p.exists())
                .ok_or_else(not_allowed)?
        };
        let real = candidate.canonicalize().map_err(|_| not_allowed())?;
        let named = self.programs.values().any(|p| *p == real);
        let allowed = named || self.dirs.iter().any(|d| real.starts_with(d));
        if !allowed {
            return Err(not_allowed());
        }
        let real = self.check_file(&real).map_err(ProgramError::NotAllowed)?;
        // A program of an allowed directory that starts other programs would start
        // anything a token holder asks for: only one the operator named runs.
        if !named {
            if let Some(why) = crate::launch::launchers::starts_programs(&real) {
                return Err(ProgramError::NotAllowed(format!(
                    "{} can start other programs ({why}), so it runs only when the operator names it (--allow-program {}), not from --allow-dir",
                    real.display(),
                    real.display()
                )));
            }
        }
        Ok(real)
    }

    /// Canonical path of an executable that may ever be started.
    fn check_file(&self, path: &Path) -> Result<PathBuf, String> {
        let real = path.canonicalize().map_err(|e| e.to_string())?;
        let name = real
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let meta = std::fs::metadata(&real).map_err(|e| e.to_string())?;
        let same_as_me = self.own_exe.iter().any(|f| f.matches(&real, &meta));
        if same_as_me
            || NEVER.contains(&name.as_str())
            || (meta.is_file() && carries_signature(&real, &meta))
        {
            return Err(format!(
                "{} is throttle's own agent or controller, which is never started as a job",
                real.display()
            ));
        }
        if !meta.is_file() || meta.permissions().mode() & 0o111 == 0 {
            return Err(format!("{} is not an executable file", real.display()));
        }
        if meta.permissions().mode() & 0o6000 != 0 {
            return Err(format!(
                "{} is set-user-ID or set-group-ID, which is never started as a job",
                real.display()
            ));
        }
        Ok(real)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn exe(dir: &Path, name: &str, mode: u32) -> PathBuf {
        let p = dir.join(name);
        std::fs::write(&p, "#!/bin/true\n").unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(mode)).unwrap();
        p
    }

    fn scratch(tag: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("throttle-prog-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    #[test]
    fn by_default_only_the_workloads_next_to_the_agent_run() {
        let d = scratch("default");
        exe(&d, "throttle-bfs", 0o755);
        exe(&d, "throttle-agent", 0o755);
        exe(&d, "throttle-ctl", 0o755);
        exe(&d, "sh", 0o755);
        let p = ProgramPolicy::workloads_in(&d);
        assert_eq!(
            p.resolve("throttle-bfs").unwrap(),
            d.join("throttle-bfs").canonicalize().unwrap()
        );
        for refused in [
            "throttle-agent",
            "throttle-ctl",
            "sh",
            "/bin/sh",
            "throttle-pmm", // not installed there
            "..",
            ".",
            "",
        ] {
            assert!(p.resolve(refused).is_err(), "{refused}");
        }
        let via_dots = format!(
            "{}/../{}/throttle-agent",
            d.display(),
            d.file_name().unwrap().to_string_lossy()
        );
        assert!(p.resolve(&via_dots).is_err());
        let e = p.resolve("sh").unwrap_err().to_string();
        assert!(
            e.contains("--allow-program") && e.contains("throttle-bfs"),
            "{e}"
        );
        std::fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn an_allowed_directory_never_yields_the_agent_the_controller_or_setuid() {
        let d = scratch("dir");
        // A real program that starts no other (a script would: an interpreter runs it).
        std::fs::copy("/bin/true", d.join("app")).unwrap();
        exe(&d, "throttle-agent", 0o755);
        exe(&d, "throttle-ctl", 0o755);
        exe(&d, "suid", 0o4755);
        exe(&d, "plain", 0o644);
        std::os::unix::fs::symlink(d.join("throttle-agent"), d.join("innocent")).unwrap();
        let mut p = ProgramPolicy::nothing();
        p.allow_dir(&d).unwrap();
        assert!(p.resolve("app").is_ok());
        assert!(p.resolve(&d.join("app").to_string_lossy()).is_ok());
        for refused in [
            "throttle-agent",
            "throttle-ctl",
            "suid",
            "plain",
            "innocent",
        ] {
            assert!(p.resolve(refused).is_err(), "{refused}");
        }
        // The agent's own binary, under any name, is refused even when allowed explicitly,
        // and so are a hard link and a copy of it.
        let me = std::env::current_exe().unwrap();
        assert!(ProgramPolicy::nothing().allow_program(&me).is_err());
        std::fs::copy(&me, d.join("copy")).unwrap();
        if std::fs::hard_link(&me, d.join("hardlink")).is_ok() {
            assert!(p.resolve("hardlink").is_err(), "a hard link to the agent");
        }
        assert!(p.resolve("copy").is_err(), "a copy of the agent");
        // A copy with a byte changed (another build, an older version) under another name.
        let mut bytes = std::fs::read(&me).unwrap();
        let last = bytes.len() - 1;
        bytes[last] ^= 0xff;
        let modified = d.join("tool");
        std::fs::write(&modified, &bytes).unwrap();
        std::fs::set_permissions(&modified, std::fs::Permissions::from_mode(0o755)).unwrap();
        let e = p.resolve("tool").unwrap_err().to_string();
        assert!(
            e.contains("own agent or controller"),
            "a modified copy: {e}"
        );
        std::fs::remove_dir_all(&d).unwrap();
    }

    /// Issue 35, finding 7: copies of `timeout`, `nice`, `setsid` (and a script) in an
    /// allowed directory ran `id` as root for a token holder. What they import says they
    /// start programs: refused from --allow-dir, run when the operator names them, and
    /// named in the start-up warning.
    #[test]
    fn programs_that_start_programs_run_only_when_named() {
        let d = scratch("launch");
        let mut copied = Vec::new();
        for (tool, name) in [
            ("/usr/bin/timeout", "t1"),
            ("/usr/bin/nice", "n1"),
            ("/usr/bin/setsid", "s1"),
        ] {
            if std::fs::copy(tool, d.join(name)).is_ok() {
                copied.push(name);
            }
        }
        exe(&d, "script", 0o755);
        std::fs::copy("/bin/true", d.join("plain")).unwrap();
        let mut p = ProgramPolicy::nothing();
        p.allow_dir(&d).unwrap();
        for name in copied.iter().copied().chain(["script"]) {
            let e = p.resolve(name).unwrap_err().to_string();
            assert!(e.contains("can start other programs"), "{name}: {e}");
        }
        assert!(p.resolve("plain").is_ok());
        let w = p.warnings().join("\n");
        for name in copied.iter().copied().chain(["script"]) {
            assert!(w.contains(&format!("{name} (")), "{name} not in: {w}");
        }
        if let Some(first) = copied.first() {
            p.allow_program(&d.join(first)).unwrap();
            assert!(p.resolve(first).is_ok(), "named, it runs");
        }
        std::fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn interpreters_in_an_allowed_directory_are_reported() {
        let d = scratch("warn");
        exe(&d, "bash", 0o755);
        let mut p = ProgramPolicy::nothing();
        p.allow_dir(&d).unwrap();
        // A renamed copy of the system's `env`.
        let env = ["/usr/bin/env", "/bin/env"]
            .into_iter()
            .find(|p| Path::new(p).is_file());
        if let Some(env) = env {
            std::fs::copy(env, d.join("myenv")).unwrap();
        }
        let w = p.warnings();
        assert!(w.iter().any(|w| w.contains("bash")), "{w:?}");
        if env.is_some() {
            assert!(
                w.iter().any(|w| w.contains("myenv (a copy of")),
                "a renamed env: {w:?}"
            );
        }
        std::fs::remove_dir_all(&d).unwrap();
    }
}
