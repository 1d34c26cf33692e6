//! The README's runnable blocks (```` ```sh runnable ````, and ```` ```sh runnable root ````
//! for namespace hosts), each run as written by bash with `-euo pipefail` in an empty
//! directory, with this build's binaries first on the PATH: the commands a newcomer
//! copies work, and a block whose command changed fails here.

use std::process::Command;

use throttle_tests::namespace::{can_run, have};
use throttle_tests::*;

/// The README's blocks whose info string is exactly `kind`.
fn blocks(kind: &str) -> Vec<String> {
    let readme =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../README.md")).unwrap();
    let mut out = Vec::new();
    let mut current: Option<String> = None;
    for line in readme.lines() {
        match &mut current {
            None if line == format!("```{kind}") => current = Some(String::new()),
            Some(_) if line.starts_with("```") => out.extend(current.take()),
            Some(b) => {
                b.push_str(line);
                b.push('\n');
            }
            None => {}
        }
    }
    out
}

fn run_blocks(kind: &str, tag: &str) {
    let blocks = blocks(kind);
    assert!(!blocks.is_empty(), "the README has no ```{kind} block");
    let path = format!(
        "{}:{}",
        bin_dir().display(),
        std::env::var("PATH").unwrap_or_default()
    );
    for (i, block) in blocks.iter().enumerate() {
        let dir = scratch(&format!("{tag}{i}"));
        // What the block left in the background (a server waiting for its client) ends
        // with it, also when the block fails.
        let script = format!("trap 'kill $(jobs -p) 2>/dev/null || true' EXIT\n{block}");
        let out = Command::new("bash")
            .args(["-euo", "pipefail", "-c", &script])
            .current_dir(&dir.0)
            .env("PATH", &path)
            .env_remove("THROTTLE_CLUSTER")
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "README block {i} ({kind}) failed ({}):\n{block}\n--- stdout\n{}\n--- stderr\n{}",
            out.status,
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

/// Whether `tool` is here; a skip (printed) when not, a failure where the tests must run.
fn needs(test: &str, tool: &str, arg: &str) -> bool {
    if have(tool, arg) {
        return true;
    }
    throttle_tests::skip(test, tool, "THROTTLE_REQUIRE_NETNS");
    false
}

/// Every code block of the README is closed by a bare fence before another opens: an
/// unclosed one swallows the sections after it (and hides a runnable block from the
/// tests below).
#[test]
fn the_readmes_code_blocks_are_closed() {
    let readme =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../README.md")).unwrap();
    let mut open: Option<usize> = None;
    for (i, line) in readme.lines().enumerate() {
        match open {
            None if line.starts_with("```") => open = Some(i + 1),
            Some(_) if line == "```" => open = None,
            Some(from) if line.starts_with("```") => {
                panic!(
                    "README.md:{}: a block opens inside the block of line {from}",
                    i + 1
                )
            }
            _ => {}
        }
    }
    assert_eq!(
        open, None,
        "README.md: the block of this line is never closed"
    );
}

#[test]
fn the_readmes_loopback_blocks_run_as_written() {
    if !needs("the_readmes_loopback_blocks_run_as_written", "iperf3", "-v") {
        return;
    }
    run_blocks("sh runnable", "readme");
}

#[test]
fn the_readmes_namespace_blocks_run_as_written() {
    let test = "the_readmes_namespace_blocks_run_as_written";
    if !can_run(test) || !needs(test, "iperf3", "-v") || !needs(test, "mpirun", "--version") {
        return;
    }
    run_blocks("sh runnable root", "readmens");
}
