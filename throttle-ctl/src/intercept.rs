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
    let data = std::fs::read(path).ok()?;
    if data.len() < 64 || &data[..4] != b"\x7fELF" || data[4] != 2 {
        return None;
    }
    let u16_at = |o: usize| u16::from_le_bytes([data[o], data[o + 1]]) as usize;
    let u64_at =
        |o: usize| u64::from_le_bytes(data[o..o + 8].try_into().unwrap_or([0; 8])) as usize;
    let (phoff, phentsize, phnum) = (u64_at(0x20), u16_at(0x36), u16_at(0x38));
    for i in 0..phnum {
        let at = phoff + i * phentsize;
        if at + 4 > data.len() {
            return None;
        }
        // PT_INTERP = 3
        if u32::from_le_bytes([data[at], data[at + 1], data[at + 2], data[at + 3]]) == 3 {
            return Some(false);
        }
    }
    Some(true)
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
}
