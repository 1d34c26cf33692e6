//! The dependency audit that can run without a network: every crate this machine's build pulls
//! in comes from crates.io (no git source, no path outside the workspace) and is under a
//! licence a MIT OR Apache-2.0 project may ship with. Read from `cargo metadata`, locked
//! and offline (the build has already fetched what it names).
//!
//! What it cannot do: known vulnerabilities. The RustSec advisory database is fetched
//! from GitHub, which neither this machine nor CI reaches; `cargo audit` belongs where it
//! does (decision 0042).

use std::process::Command;

/// Licences (SPDX identifiers) that ask no more of a binary than a notice.
const PERMISSIVE: &[&str] = &[
    "MIT",
    "Apache-2.0",
    "BSD-2-Clause",
    "BSD-3-Clause",
    "ISC",
    "Zlib",
    "0BSD",
    "BSL-1.0",
    "Unlicense",
    "CC0-1.0",
    "Unicode-3.0",
    "Unicode-DFS-2016",
    "CDLA-Permissive-2.0",
];

/// Whether an SPDX licence expression (`A OR B`, `A AND B`, `A WITH exception`, brackets,
/// and the old `A/B` for OR) leaves a permissive choice: an OR needs one side, an AND
/// both; an exception only adds permissions.
fn permissive(expr: &str) -> bool {
    let spaced = expr
        .replace('/', " OR ")
        .replace('(', " ( ")
        .replace(')', " ) ");
    let tokens: Vec<&str> = spaced.split_whitespace().collect();
    let mut at = 0;
    let ok = or_expr(&tokens, &mut at);
    ok == Some(true) && at == tokens.len()
}

fn or_expr(t: &[&str], at: &mut usize) -> Option<bool> {
    let mut v = and_expr(t, at)?;
    while t.get(*at) == Some(&"OR") {
        *at += 1;
        v |= and_expr(t, at)?;
    }
    Some(v)
}

fn and_expr(t: &[&str], at: &mut usize) -> Option<bool> {
    let mut v = term(t, at)?;
    while t.get(*at) == Some(&"AND") {
        *at += 1;
        v &= term(t, at)?;
    }
    Some(v)
}

fn term(t: &[&str], at: &mut usize) -> Option<bool> {
    let tok = *t.get(*at)?;
    *at += 1;
    let v = if tok == "(" {
        let v = or_expr(t, at)?;
        if t.get(*at) != Some(&")") {
            return None;
        }
        *at += 1;
        v
    } else {
        PERMISSIVE.contains(&tok)
    };
    if t.get(*at) == Some(&"WITH") {
        *at += 2;
    }
    Some(v)
}

/// The machine's target triple (what the build fetched dependencies for), from rustc.
fn host() -> String {
    let out = Command::new(std::env::var("RUSTC").unwrap_or_else(|_| "rustc".into()))
        .arg("-vV")
        .output()
        .expect("rustc -vV runs");
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .find_map(|l| l.strip_prefix("host: "))
        .expect("rustc -vV names its host")
        .to_string()
}

#[test]
fn every_dependency_is_from_crates_io_under_a_permissive_licence() {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let out = Command::new(cargo)
        .args([
            "metadata",
            "--format-version",
            "1",
            "--locked",
            "--offline",
            "--filter-platform",
            &host(),
        ])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("cargo metadata runs");
    assert!(
        out.status.success(),
        "cargo metadata: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let meta: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let members: Vec<&str> = meta["workspace_members"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|m| m.as_str())
        .collect();
    let mut wrong = Vec::new();
    let mut third_party = 0;
    for p in meta["packages"].as_array().unwrap() {
        let id = p["id"].as_str().unwrap_or_default();
        if members.contains(&id) {
            continue;
        }
        third_party += 1;
        let name = format!("{} {}", p["name"], p["version"]);
        match p["source"].as_str() {
            Some(s) if s.starts_with("registry+https://github.com/rust-lang/crates.io-index") => {}
            Some("sparse+https://index.crates.io/") => {}
            other => wrong.push(format!("{name}: from {other:?}, not crates.io")),
        }
        match p["license"].as_str() {
            Some(l) if permissive(l) => {}
            other => wrong.push(format!("{name}: licence {other:?}")),
        }
    }
    assert!(third_party > 50, "only {third_party} dependencies read");
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

#[test]
fn the_licence_reader_takes_a_choice_and_refuses_an_obligation() {
    for ok in [
        "MIT",
        "MIT OR Apache-2.0",
        "MIT/Apache-2.0",
        "Apache-2.0 WITH LLVM-exception OR Apache-2.0 OR MIT",
        "(MIT OR Apache-2.0) AND Unicode-3.0",
        "Apache-2.0 AND ISC",
        "GPL-3.0 OR MIT",
    ] {
        assert!(permissive(ok), "{ok}");
    }
    for refused in [
        "GPL-3.0",
        "MIT AND GPL-2.0",
        "(MIT OR Apache-2.0) AND LGPL-2.1",
        "AGPL-3.0-only",
        "",
        "MIT OR",
        "(MIT",
    ] {
        assert!(!permissive(refused), "{refused}");
    }
}
