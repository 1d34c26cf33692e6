//! ARCHITECTURE.md's claims that a program can check, checked: every file and folder its
//! code map names exists in the crate whose section names it, the crates depend on
//! each other only as its graph draws, and the vocabulary crate does no I/O outside `os/`. (Its other claims, the invariants, are
//! each the subject of tests of their own; `module_graph.rs` checks "no import circle".)

use std::path::{Path, PathBuf};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn files(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap().flatten() {
        let p = e.path();
        if p.is_dir() {
            out.push(p.clone());
            files(&p, out);
        } else {
            out.push(p);
        }
    }
}

/// The code map's sections: the crate a `### \`crate\`` heading names, and its text.
fn sections(text: &str) -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> = Vec::new();
    for line in text.lines() {
        if let Some(h) = line.strip_prefix("### `") {
            let krate = h.split('`').next().unwrap_or_default().to_string();
            out.push((krate, String::new()));
        } else if line.starts_with("## ") {
            out.push((String::new(), String::new()));
        } else if let Some((_, body)) = out.last_mut() {
            body.push_str(line);
            body.push('\n');
        }
    }
    out.retain(|(k, _)| !k.is_empty() && k != "tests");
    out
}

/// The paths a section names in backticks: `name.rs`, `dir/name.rs`, `dir/`.
fn named_paths(body: &str) -> Vec<String> {
    body.split('`')
        .skip(1)
        .step_by(2)
        .filter(|t| {
            !t.is_empty()
                && !t.contains(' ')
                && !t.contains("::")
                && (t.ends_with(".rs") || (t.ends_with('/') && t.len() > 1))
                && t.chars()
                    .all(|c| c.is_ascii_alphanumeric() || "_/.-".contains(c))
        })
        .map(str::to_string)
        .collect()
}

#[test]
fn every_file_the_code_map_names_exists_in_its_crate() {
    let text = std::fs::read_to_string(root().join("ARCHITECTURE.md")).unwrap();
    let secs = sections(&text);
    assert!(secs.len() >= 5, "no code map sections found: {secs:?}");
    let mut missing = Vec::new();
    let mut checked = 0;
    for (krate, body) in &secs {
        let dir = root().join(krate);
        let mut all = Vec::new();
        files(&dir.join("src"), &mut all);
        for name in named_paths(body) {
            checked += 1;
            let want = name.trim_end_matches('/');
            // A name is relative to the crate's src/ or to a folder the bullet is about
            // (any file or folder of the crate whose path ends with it), or to the
            // repository (`tests/tests/...`).
            let found = all.iter().any(|p| {
                p.strip_prefix(&dir)
                    .is_ok_and(|rel| rel.ends_with(want) && (name.ends_with('/') == p.is_dir()))
            }) || dir.join(want).exists()
                || root().join(want).exists();
            if !found {
                missing.push(format!("{krate}: `{name}`"));
            }
        }
    }
    assert!(checked > 50, "only {checked} paths read from the code map");
    assert!(
        missing.is_empty(),
        "ARCHITECTURE.md's code map names what its crate does not have:\n  {}",
        missing.join("\n  ")
    );
}

/// The workspace crates a manifest depends on (any section).
fn internal_deps(krate: &str) -> Vec<String> {
    let m: toml::Table =
        toml::from_str(&std::fs::read_to_string(root().join(krate).join("Cargo.toml")).unwrap())
            .unwrap();
    let mut out: Vec<String> = ["dependencies", "dev-dependencies", "build-dependencies"]
        .iter()
        .filter_map(|k| m.get(*k).and_then(|d| d.as_table()))
        .flat_map(|t| t.iter())
        .filter(|(_, v)| v.get("path").is_some())
        .map(|(k, _)| k.clone())
        .collect();
    out.sort();
    out
}

/// The bird's-eye graph ("the arrows are the only dependencies between them") and
/// "throttle-proto never depends on tokio, axum or HTTP", read from the manifests.
#[test]
fn the_crates_depend_only_as_the_graph_draws() {
    for (krate, arrows) in [
        ("throttle-proto", &[][..]),
        ("throttle-agent", &["throttle-proto"][..]),
        ("throttle-ctl", &["throttle-proto"][..]),
        ("throttle-preload", &["throttle-proto"][..]),
        ("workloads", &["throttle-proto"][..]),
    ] {
        assert_eq!(
            internal_deps(krate),
            arrows,
            "{krate}'s workspace dependencies"
        );
    }
    let manifest = std::fs::read_to_string(root().join("throttle-proto/Cargo.toml")).unwrap();
    let deps: toml::Table = toml::from_str(&manifest).unwrap();
    let names: Vec<&String> = ["dependencies", "dev-dependencies"]
        .iter()
        .filter_map(|k| deps.get(*k).and_then(|d| d.as_table()))
        .flat_map(|t| t.keys())
        .collect();
    for forbidden in ["tokio", "axum", "hyper", "hyper-util", "ureq", "rustls"] {
        assert!(
            !names.iter().any(|n| n.as_str() == forbidden),
            "throttle-proto depends on {forbidden}: {names:?}"
        );
    }
}

/// "throttle-proto does no I/O but `os/`": no file outside it names a way to the operating
/// system (comments aside).
#[test]
fn the_vocabulary_does_no_io_outside_its_os_module() {
    let src = root().join("throttle-proto/src");
    let mut all = Vec::new();
    files(&src, &mut all);
    let markers = [
        "std::fs",
        "File::",
        "UnixStream",
        "TcpStream",
        "TcpListener",
        "UdpSocket",
        "libc::",
        "/proc/",
        "read_to_string",
        "metadata(",
        "std::process",
        "std::env::var",
    ];
    let mut found = Vec::new();
    for f in all
        .iter()
        .filter(|p| p.extension().is_some_and(|e| e == "rs"))
    {
        if f.strip_prefix(&src).is_ok_and(|rel| rel.starts_with("os")) {
            continue;
        }
        let text = std::fs::read_to_string(f).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        for (i, line) in lines.iter().enumerate() {
            // A test module may read the environment or a file: it is not the crate.
            if line.trim() == "#[cfg(test)]"
                && lines
                    .get(i + 1)
                    .is_some_and(|next| next.trim_start().starts_with("mod "))
            {
                break;
            }
            let code = line.split("//").next().unwrap_or_default();
            for m in markers.iter().filter(|m| code.contains(*m)) {
                found.push(format!("{}:{}: {m}", f.display(), i + 1));
            }
        }
    }
    assert!(
        found.is_empty(),
        "throttle-proto does I/O outside os/:\n  {}",
        found.join("\n  ")
    );
}

#[test]
fn the_checker_reads_names_and_finds_a_missing_one() {
    let body = "* `link/` — the link (`pacer.rs`, `lease.rs`); `a b.rs` `crate::x` `x`\n";
    assert_eq!(named_paths(body), ["link/", "pacer.rs", "lease.rs"]);
    let secs = sections("## Code map\n### `throttle-agent` (x)\n`nowhere.rs`\n## Next\n");
    assert_eq!(secs.len(), 1);
    assert_eq!(named_paths(&secs[0].1), ["nowhere.rs"]);
}
