//! How unmodified programs' connections reach the agents: the kernel redirect (root, the
//! agents' `--intercept`) or the preload library (no root, `LD_PRELOAD`, the agents'
//! `--preload`), and where that library is.

use std::path::PathBuf;

use anyhow::{bail, Result};

/// Environment variable `throttle-ctl exec` reads for the mode (set by `run --cmd` and
/// sweeps, so that mpirun's launch agent needs no flag).
pub const ENV: &str = "THROTTLE_INTERCEPT";
/// Environment variable naming the preload library (set for commands that use it, so that
/// hand-written launch lines can say `-x LD_PRELOAD=$THROTTLE_PRELOAD_LIB`).
pub const LIB_ENV: &str = "THROTTLE_PRELOAD_LIB";
/// The library's file name.
pub const LIB_NAME: &str = "libthrottle_preload.so";

/// How programs' connections to other nodes are intercepted.
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum, serde::Serialize, serde::Deserialize,
)]
#[serde(rename_all = "lowercase")]
pub enum Mode {
    /// nftables redirect on every node (root), delivered from the original source.
    Kernel,
    /// LD_PRELOAD library in the programs; no root, no kernel rules.
    Preload,
}

impl Mode {
    pub fn as_str(self) -> &'static str {
        match self {
            Mode::Kernel => "kernel",
            Mode::Preload => "preload",
        }
    }

    pub fn parse(text: &str) -> Result<Mode> {
        match text {
            "kernel" => Ok(Mode::Kernel),
            "preload" => Ok(Mode::Preload),
            other => bail!("unknown interception mode `{other}`: use kernel or preload"),
        }
    }

    /// The agent flag that serves this mode.
    pub fn agent_flag(self) -> &'static str {
        match self {
            Mode::Kernel => "--intercept",
            Mode::Preload => "--preload",
        }
    }
}

/// The preload library: `THROTTLE_PRELOAD_LIB`, else next to this executable (where
/// `cargo build` puts it; `cargo test` leaves it in `deps/` beside), else in the usual
/// library directories. An absolute path: the
/// dynamic loader resolves it in every process, whatever its working directory.
pub fn library() -> Result<PathBuf> {
    if let Some(p) = std::env::var_os(LIB_ENV) {
        let p = PathBuf::from(p);
        if !p.is_file() {
            bail!("{LIB_ENV} names {}, which is not a file", p.display());
        }
        return Ok(std::path::absolute(&p)?);
    }
    let mut candidates = Vec::new();
    if let Ok(me) = std::env::current_exe() {
        if let Some(dir) = me.parent() {
            // In a cargo target directory both may exist; the newer one is the build
            // that goes with this executable (an old `cargo build` copy goes stale).
            let built = [dir.join(LIB_NAME), dir.join("deps").join(LIB_NAME)];
            let modified = |p: &PathBuf| p.metadata().and_then(|m| m.modified()).ok();
            if let Some(newest) = built
                .iter()
                .filter(|p| p.is_file())
                .max_by_key(|p| modified(p))
            {
                candidates.push(newest.clone());
            }
            candidates.push(dir.join("..").join(LIB_NAME));
            candidates.push(dir.join("../lib").join(LIB_NAME));
        }
    }
    for d in ["/usr/local/lib", "/usr/lib"] {
        candidates.push(PathBuf::from(d).join(LIB_NAME));
    }
    for c in &candidates {
        if c.is_file() {
            return Ok(std::fs::canonicalize(c)?);
        }
    }
    bail!(
        "cannot find the preload library {LIB_NAME} (looked next to throttle-ctl and in /usr/local/lib, /usr/lib): build it with `cargo build --release --workspace`, or set {LIB_ENV}"
    )
}

/// `LD_PRELOAD` with the library first, keeping what was there.
pub fn ld_preload_with(lib: &std::path::Path) -> std::ffi::OsString {
    let mut v = lib.as_os_str().to_owned();
    if let Some(old) = std::env::var_os("LD_PRELOAD") {
        let already = std::env::split_paths(&old).any(|p| p == lib);
        if already {
            return old;
        }
        if !old.is_empty() {
            v.push(":");
            v.push(old);
        }
    }
    v
}

/// Whether the ELF executable at `path` is statically linked (no program interpreter):
/// the preload library cannot reach it. `None` when it is not an ELF file (a script).
pub fn is_static_elf(path: &std::path::Path) -> Option<bool> {
    let mut f = std::fs::File::open(path).ok()?;
    is_static_elf_in(&mut f)
}

/// Most bytes of program headers [`is_static_elf_in`] reads (an ELF file has a few
/// dozen headers of 56 bytes).
const MAX_PROGRAM_HEADERS: usize = 64 * 1024;

/// [`is_static_elf`] of what `r` holds. Only the file header and the program headers are
/// read: `exec` asks it of every program its command line names, and reading whole
/// executables (throttle-ctl's own path is on every mpirun daemon's command line, 106 MB
/// with debug information) cost each launch on each node 80 ms.
pub fn is_static_elf_in<R: std::io::Read + std::io::Seek>(r: &mut R) -> Option<bool> {
    let mut head = [0u8; 64];
    r.read_exact(&mut head).ok()?;
    if &head[..4] != b"\x7fELF" || head[4] != 2 {
        return None;
    }
    let u16_at = |b: &[u8], o: usize| u16::from_le_bytes([b[o], b[o + 1]]) as usize;
    let phoff = u64::from_le_bytes(head[0x20..0x28].try_into().ok()?);
    let (phentsize, phnum) = (u16_at(&head, 0x36), u16_at(&head, 0x38));
    let size = phentsize.checked_mul(phnum)?;
    if phentsize < 4 || size > MAX_PROGRAM_HEADERS {
        return None;
    }
    r.seek(std::io::SeekFrom::Start(phoff)).ok()?;
    let mut headers = vec![0u8; size];
    r.read_exact(&mut headers).ok()?;
    // PT_INTERP = 3
    let interp = headers
        .chunks_exact(phentsize)
        .any(|h| u32::from_le_bytes([h[0], h[1], h[2], h[3]]) == 3);
    Some(!interp)
}

/// The words of a shell command line that name statically linked executables (a path
/// with a `/`, or a program found on PATH): what the preload library cannot reach.
pub fn static_programs(line: &str) -> Vec<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    let mut out = Vec::new();
    for word in line.split_whitespace() {
        let word = word.trim_matches(|c| c == '\'' || c == '"');
        let found = if word.contains('/') {
            Some(PathBuf::from(word))
        } else {
            std::env::split_paths(&path)
                .map(|d| d.join(word))
                .find(|p| p.is_file())
        };
        if let Some(p) = found {
            if p.is_file() && is_static_elf(&p) == Some(true) && !out.contains(&p) {
                out.push(p);
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn modes_parse_and_name_their_agent_flag() {
        assert_eq!(Mode::parse("preload").unwrap(), Mode::Preload);
        assert_eq!(Mode::Kernel.agent_flag(), "--intercept");
        assert!(Mode::parse("ebpf")
            .unwrap_err()
            .to_string()
            .contains("kernel or preload"));
    }

    #[test]
    fn a_dynamic_executable_is_told_from_a_script() {
        assert_eq!(is_static_elf(std::path::Path::new("/bin/sh")), Some(false));
        let script = std::env::temp_dir().join(format!("thr-script-{}", std::process::id()));
        std::fs::write(&script, "#!/bin/sh\n").unwrap();
        assert_eq!(is_static_elf(&script), None);
        let _ = std::fs::remove_file(&script);
    }

    /// A reader that counts what is read of it.
    struct Counted<'a> {
        inner: std::io::Cursor<&'a [u8]>,
        read: usize,
    }

    impl std::io::Read for Counted<'_> {
        fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
            let n = self.inner.read(buf)?;
            self.read += n;
            Ok(n)
        }
    }

    impl std::io::Seek for Counted<'_> {
        fn seek(&mut self, to: std::io::SeekFrom) -> std::io::Result<u64> {
            self.inner.seek(to)
        }
    }

    /// An ELF64 file of `len` bytes with `kinds` as its program headers' types.
    fn elf(len: usize, kinds: &[u32]) -> Vec<u8> {
        let mut b = vec![0u8; len];
        b[..4].copy_from_slice(b"\x7fELF");
        b[4] = 2;
        b[0x20..0x28].copy_from_slice(&64u64.to_le_bytes());
        b[0x36..0x38].copy_from_slice(&56u16.to_le_bytes());
        b[0x38..0x3a].copy_from_slice(&(kinds.len() as u16).to_le_bytes());
        for (i, k) in kinds.iter().enumerate() {
            if let Some(at) = b.get_mut(64 + 56 * i..68 + 56 * i) {
                at.copy_from_slice(&k.to_le_bytes());
            }
        }
        b
    }

    #[test]
    fn only_the_headers_of_an_executable_are_read() {
        // PT_PHDR, PT_INTERP, PT_LOAD: dynamic; without PT_INTERP: static.
        let dynamic = elf(4 << 20, &[6, 3, 1]);
        let mut r = Counted {
            inner: std::io::Cursor::new(&dynamic),
            read: 0,
        };
        assert_eq!(is_static_elf_in(&mut r), Some(false));
        assert!(r.read <= 64 + 3 * 56, "read {} bytes of 4 MiB", r.read);
        let fixed = elf(4 << 20, &[6, 1, 1]);
        assert_eq!(
            is_static_elf_in(&mut std::io::Cursor::new(&fixed)),
            Some(true)
        );
        // Headers that run past the end, or an absurd table: not an answer.
        let mut cut = elf(64 + 56, &[6, 3, 1]);
        assert_eq!(is_static_elf_in(&mut std::io::Cursor::new(&cut)), None);
        cut[0x38..0x3a].copy_from_slice(&u16::MAX.to_le_bytes());
        assert_eq!(is_static_elf_in(&mut std::io::Cursor::new(&cut)), None);
        assert_eq!(
            is_static_elf_in(&mut std::io::Cursor::new(&b"\x7fEL"[..])),
            None
        );
    }
}
