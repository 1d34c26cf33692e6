//! ARCHITECTURE.md's claims that a program can check, checked: every file and folder its
//! code map names exists in the crate whose section names it, every crate of the
//! workspace (`cargo metadata`) has its section, the crates depend on each other only as
//! its graph draws, no crate holds more than 40% of the lines and no folder more than 20
//! Rust files, the analysis does no I/O, and the vocabulary none outside `os/`. (Its other claims, the invariants, are
//! each the subject of tests of their own; `module_graph.rs` checks "no import circle".)

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use throttle_tests::workspace;

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

/// The crate graph ARCHITECTURE.md draws: its `text` block of `crate -> crate, crate`
/// lines, by folder name.
fn drawn_graph(text: &str) -> BTreeMap<String, Vec<String>> {
    let mut graph = BTreeMap::new();
    let mut in_block = false;
    for line in text.lines() {
        if line.trim() == "```text" {
            in_block = true;
            continue;
        }
        if in_block && line.trim() == "```" {
            if !graph.is_empty() {
                break;
            }
            in_block = false;
            continue;
        }
        let Some((from, to)) = line.split_once("->").filter(|_| in_block) else {
            continue;
        };
        let mut to: Vec<String> = to
            .split(',')
            .map(|s| s.trim().to_string())
            .filter(|s| !s.is_empty())
            .collect();
        to.sort();
        graph.insert(from.trim().to_string(), to);
    }
    graph
}

/// The bird's-eye graph ("the arrows are the only dependencies between them"), against
/// the workspace as `cargo metadata` reads it: every crate drawn, no arrow more or less;
/// and "throttle-proto never depends on tokio, axum or HTTP", read from its manifest.
#[test]
fn the_crates_depend_only_as_the_graph_draws() {
    let text = std::fs::read_to_string(root().join("ARCHITECTURE.md")).unwrap();
    let drawn = drawn_graph(&text);
    let actual: BTreeMap<String, Vec<String>> = workspace::crates()
        .into_iter()
        .map(|c| (c.folder, c.uses))
        .collect();
    assert_eq!(
        drawn, actual,
        "ARCHITECTURE.md's crate graph (left) against the workspace's manifests (right)"
    );
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

/// Every crate of the workspace has its section in the code map (`### \`folder\``).
#[test]
fn every_crate_has_its_section_in_the_code_map() {
    let text = std::fs::read_to_string(root().join("ARCHITECTURE.md")).unwrap();
    let missing: Vec<String> = workspace::crates()
        .into_iter()
        .map(|c| c.folder)
        .filter(|f| !text.contains(&format!("### `{f}`")))
        .collect();
    assert!(
        missing.is_empty(),
        "crates without a section in ARCHITECTURE.md's code map: {missing:?}"
    );
}

/// The Rust lines under a folder (its target/ left out).
fn rust_lines(dir: &Path) -> usize {
    let mut all = Vec::new();
    files(dir, &mut all);
    all.iter()
        .filter(|p| p.extension().is_some_and(|e| e == "rs"))
        .filter(|p| !p.components().any(|c| c.as_os_str() == "target"))
        .map(|p| std::fs::read_to_string(p).unwrap().lines().count())
        .sum()
}

/// "No crate holds more than 40% of the code": one crate that grows past it is a house
/// with one room.
#[test]
fn no_crate_holds_more_than_40_percent_of_the_lines() {
    let lines: Vec<(String, usize)> = workspace::crates()
        .into_iter()
        .map(|c| (c.folder, rust_lines(&c.dir)))
        .collect();
    let total: usize = lines.iter().map(|(_, n)| n).sum();
    let over: Vec<String> = lines
        .iter()
        .filter(|(_, n)| *n * 100 > total * 40)
        .map(|(c, n)| format!("{c}: {n} of {total} lines ({}%)", n * 100 / total))
        .collect();
    assert!(
        over.is_empty(),
        "crates over 40% of the workspace: {over:?}"
    );
}

/// "No folder of more than 20 Rust files side by side": past that a folder is a list,
/// not a place.
#[test]
fn no_folder_holds_more_than_20_rust_files() {
    let mut crowded = Vec::new();
    for c in workspace::crates() {
        let mut all = vec![c.dir.clone()];
        files(&c.dir, &mut all);
        for dir in all.iter().filter(|p| p.is_dir()) {
            if dir.components().any(|x| x.as_os_str() == "target") {
                continue;
            }
            let n = std::fs::read_dir(dir)
                .unwrap()
                .flatten()
                .filter(|e| e.path().extension().is_some_and(|x| x == "rs"))
                .count();
            if n > 20 {
                crowded.push(format!("{}: {n}", dir.display()));
            }
        }
    }
    assert!(
        crowded.is_empty(),
        "folders of more than 20 .rs files: {crowded:?}"
    );
}

/// The ways a source file can reach the operating system; a line that names one does
/// I/O (comments aside).
const IO_MARKERS: [&str; 17] = [
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
    "std::thread",
    "Instant::now",
    "SystemTime",
    "stdout()",
    "getrandom",
];

/// The lines of the crate's source under `src` (files and folders `skip` says are
/// none of it left out) that name a way to the operating system, test modules aside.
fn io_lines(src: &Path, skip: impl Fn(&Path) -> bool) -> Vec<String> {
    let mut all = Vec::new();
    files(src, &mut all);
    let mut found = Vec::new();
    for f in all
        .iter()
        .filter(|p| p.extension().is_some_and(|e| e == "rs"))
    {
        let rel = f.strip_prefix(src).unwrap();
        // A file of tests (`#[cfg(test)] mod tests;`) is not the crate.
        if skip(rel) || rel.file_name().is_some_and(|n| n == "tests.rs") {
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
            for m in IO_MARKERS.iter().filter(|m| code.contains(*m)) {
                found.push(format!("{}:{}: {m}", f.display(), i + 1));
            }
        }
    }
    found
}

/// "The analysis is pure": no line of it names a way to the operating system, and its
/// manifest asks only for computation and text (the vocabulary without its `os`
/// feature, comfy-table without its terminal feature).
#[test]
fn the_analysis_does_no_io() {
    let found = io_lines(&root().join("throttle-analysis/src"), |_| false);
    assert!(
        found.is_empty(),
        "throttle-analysis does I/O:\n  {}",
        found.join("\n  ")
    );
    let manifest: toml::Table = toml::from_str(
        &std::fs::read_to_string(root().join("throttle-analysis/Cargo.toml")).unwrap(),
    )
    .unwrap();
    let deps = manifest["dependencies"].as_table().unwrap();
    let mut names: Vec<&str> = deps.keys().map(String::as_str).collect();
    names.sort();
    assert_eq!(
        names,
        [
            "anyhow",
            "comfy-table",
            "csv",
            "serde",
            "serde_json",
            "throttle-proto"
        ],
        "throttle-analysis's dependencies"
    );
    let features = |d: &str| deps[d].get("features").map(|f| f.to_string());
    assert_eq!(
        features("throttle-proto"),
        None,
        "the vocabulary's `os` stays off"
    );
    assert_eq!(
        deps["comfy-table"]
            .get("default-features")
            .and_then(|v| v.as_bool()),
        Some(false),
        "comfy-table's terminal feature (it asks the terminal for its width) stays off"
    );
}

/// "throttle-proto does no I/O but `os/`" (and its randomness, `getrandom`, for tokens
/// and nonces): no other file names a way to the operating system.
#[test]
fn the_vocabulary_does_no_io_outside_its_os_module() {
    let found: Vec<String> = io_lines(&root().join("throttle-proto/src"), |rel| {
        rel.starts_with("os")
    })
    .into_iter()
    .filter(|l| !l.ends_with(": getrandom"))
    .collect();
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
    let g = drawn_graph("x\n```text\na -> c, b\nb ->\n```\n```text\nz -> y\n```\n");
    assert_eq!(g["a"], ["b", "c"]);
    assert!(g["b"].is_empty());
    assert!(!g.contains_key("z"), "only the first graph: {g:?}");
}
