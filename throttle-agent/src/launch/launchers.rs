//! Programs that start other programs: a script (its interpreter runs what it is given),
//! or an ELF executable that calls the C library's exec or spawn functions (`timeout`,
//! `nice`, `setsid`, `strace`, `env`, a Python interpreter, a copy of the agent itself).
//!
//! A token holder may start any program of an allowed directory with arguments of their
//! choosing; through one of these they would start anything at all as the agent's user.
//! Names and signatures do not find them (a renamed or patched copy has neither), what
//! they import does: the dynamic symbols an executable needs from the C library are in its
//! `.dynsym` table, which this module reads (ELF64, little-endian; anything else cannot be
//! told and counts as a launcher). A statically linked executable cannot be told either.

use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
use std::path::Path;

/// The C library functions that start another program.
const STARTERS: &[&str] = &[
    "execve",
    "execv",
    "execvp",
    "execvpe",
    "execl",
    "execlp",
    "execle",
    "fexecve",
    "execveat",
    "posix_spawn",
    "posix_spawnp",
    "system",
    "popen",
];

/// Why the program at `path` can start other programs, or `None` when it cannot (an ELF
/// executable that imports no exec or spawn function).
pub fn starts_programs(path: &Path) -> Option<String> {
    let mut f = match File::open(path) {
        Ok(f) => f,
        Err(e) => return Some(format!("it cannot be read ({e})")),
    };
    let mut head = [0u8; 64];
    if f.read_exact(&mut head[..4]).is_err() {
        return Some("it is not an executable the agent can read".into());
    }
    if head.starts_with(b"#!") {
        return Some("it is a script, run by an interpreter".into());
    }
    if &head[..4] != b"\x7fELF" {
        return Some("it is not an ELF executable the agent can read".into());
    }
    if f.read_exact(&mut head[4..]).is_err() || head[4] != 2 || head[5] != 1 {
        return Some(
            "it is not a 64-bit little-endian ELF executable, which the agent cannot read".into(),
        );
    }
    match dynamic_imports(&mut f, &head) {
        Ok(None) => Some("it is statically linked: what it calls cannot be told".into()),
        Ok(Some(imports)) => {
            let found: Vec<&str> = STARTERS
                .iter()
                .copied()
                .filter(|s| imports.iter().any(|i| i == s))
                .collect();
            (!found.is_empty()).then(|| format!("it calls {}", found.join(", ")))
        }
        Err(e) => Some(format!("its symbol table cannot be read ({e})")),
    }
}

fn u16_at(b: &[u8], at: usize) -> u16 {
    u16::from_le_bytes([b[at], b[at + 1]])
}

fn u32_at(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(b[at..at + 4].try_into().unwrap_or([0; 4]))
}

fn u64_at(b: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(b[at..at + 8].try_into().unwrap_or([0; 8]))
}

/// Read `len` bytes at `offset`, at most 64 MiB (a symbol table larger than that is no
/// program's).
fn read_at(f: &mut File, offset: u64, len: u64) -> std::io::Result<Vec<u8>> {
    if len > 64 << 20 {
        return Err(std::io::Error::other("a table over 64 MiB"));
    }
    let mut buf = vec![0u8; len as usize];
    f.seek(SeekFrom::Start(offset))?;
    f.read_exact(&mut buf)?;
    Ok(buf)
}

/// The names of the undefined (imported) dynamic symbols; `None` without a `.dynsym`
/// section (statically linked).
fn dynamic_imports(f: &mut File, head: &[u8; 64]) -> std::io::Result<Option<Vec<String>>> {
    const SHT_DYNSYM: u32 = 11;
    let shoff = u64_at(head, 0x28);
    let shentsize = u64::from(u16_at(head, 0x3A));
    let shnum = u64::from(u16_at(head, 0x3C));
    if shentsize < 64 || shnum == 0 || shnum > 4096 {
        return Ok(None);
    }
    let table = read_at(f, shoff, shentsize * shnum)?;
    let section = |i: u64| &table[(i * shentsize) as usize..(i * shentsize + 64) as usize];
    for i in 0..shnum {
        let s = section(i);
        if u32_at(s, 4) != SHT_DYNSYM {
            continue;
        }
        let (offset, size, link, entsize) = (
            u64_at(s, 0x18),
            u64_at(s, 0x20),
            u64::from(u32_at(s, 0x28)),
            u64_at(s, 0x38),
        );
        if link >= shnum || entsize < 24 {
            return Err(std::io::Error::other("a malformed .dynsym"));
        }
        let strings = section(link);
        let strtab = read_at(f, u64_at(strings, 0x18), u64_at(strings, 0x20))?;
        let symbols = read_at(f, offset, size)?;
        let mut out = Vec::new();
        for sym in symbols.chunks_exact(entsize as usize) {
            let (name, shndx) = (u32_at(sym, 0) as usize, u16_at(sym, 6));
            if shndx != 0 || name == 0 || name >= strtab.len() {
                continue;
            }
            let end = strtab[name..]
                .iter()
                .position(|b| *b == 0)
                .map_or(strtab.len(), |e| name + e);
            out.push(String::from_utf8_lossy(&strtab[name..end]).into_owned());
        }
        return Ok(Some(out));
    }
    Ok(None)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn programs_that_exec_are_told_from_those_that_do_not() {
        // The system's wrappers: each imports an exec function.
        for p in ["/usr/bin/env", "/usr/bin/timeout", "/usr/bin/nice"] {
            if Path::new(p).exists() {
                let why = starts_programs(Path::new(p));
                assert!(
                    why.as_deref().is_some_and(|w| w.contains("exec")),
                    "{p}: {why:?}"
                );
            }
        }
        // A script is a launcher; a file that is no program is one that cannot be told.
        let dir = std::env::temp_dir().join(format!("throttle-launchers-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("s"), "#!/bin/sh\nid\n").unwrap();
        assert!(starts_programs(&dir.join("s")).unwrap().contains("script"));
        std::fs::write(dir.join("junk"), "not a program").unwrap();
        assert!(starts_programs(&dir.join("junk")).is_some());
        // This test's own executable, built like the workloads, is an ELF file whose
        // imports can be read (what they are depends on the test harness).
        let me = std::env::current_exe().unwrap();
        let mut f = File::open(&me).unwrap();
        let mut head = [0u8; 64];
        f.read_exact(&mut head).unwrap();
        assert!(dynamic_imports(&mut f, &head)
            .unwrap()
            .is_some_and(|i| !i.is_empty()));
        let _ = std::fs::remove_dir_all(&dir);
    }
}
