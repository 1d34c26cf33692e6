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

/// Who runs a block.
#[derive(Clone, Copy, PartialEq)]
enum As {
    /// Whoever runs the tests.
    Tester,
    /// An unprivileged user: "nobody" (uid 65534) where the tests run as root, else the
    /// tester, who is one.
    Unprivileged,
}

fn run_blocks(kind: &str, tag: &str, who: As) {
    let blocks = blocks(kind);
    assert!(!blocks.is_empty(), "the README has no ```{kind} block");
    let nobody = who == As::Unprivileged && nix::unistd::geteuid().is_root();
    for (i, block) in blocks.iter().enumerate() {
        let dir = scratch(&format!("{tag}{i}"));
        // Another user may not reach this build (a checkout in root's home): the
        // binaries and the library it runs are copied into the block's directory.
        let bin = if nobody {
            let bin = dir.0.join("bin");
            std::fs::create_dir(&bin).unwrap();
            for name in ["throttle-ctl", "throttle-agent"] {
                std::fs::copy(bin_dir().join(name), bin.join(name)).unwrap();
            }
            std::fs::copy(preload_lib(), bin.join("libthrottle_preload.so")).unwrap();
            std::os::unix::fs::chown(&dir.0, Some(65534), Some(65534)).unwrap();
            bin
        } else {
            bin_dir()
        };
        let path = format!(
            "{}:{}",
            bin.display(),
            std::env::var("PATH").unwrap_or_default()
        );
        // What the block left in the background (a server waiting for its client) ends
        // with it, and so does a local cluster it left up, also when the block fails.
        let script = format!(
            "trap 'kill $(jobs -p) 2>/dev/null || true; throttle-ctl local down --force >/dev/null 2>&1 || true' EXIT\n{block}"
        );
        let mut cmd = if nobody {
            let mut c = throttle_testkit::user::as_user(throttle_testkit::user::NOBODY, "bash");
            c.env("HOME", &dir.0);
            c
        } else {
            Command::new("bash")
        };
        let out = cmd
            .args(["-euo", "pipefail", "-c", &script])
            .current_dir(&dir.0)
            .env("PATH", &path)
            .env_remove("THROTTLE_CLUSTER")
            .env_remove("THROTTLE_PRELOAD_LIB")
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
    run_blocks("sh runnable", "readme", As::Tester);
}

/// Issue 37: the loopback cluster's block (iperf3 and an MPI program as nodes) runs as an
/// unprivileged user.
#[test]
fn the_readmes_unprivileged_blocks_run_as_a_user_without_root() {
    let test = "the_readmes_unprivileged_blocks_run_as_a_user_without_root";
    if !needs(test, "iperf3", "-v") || !throttle_tests::namespace::have_mpi(test) {
        return;
    }
    if nix::unistd::geteuid().is_root() && !needs(test, "setpriv", "--version") {
        return;
    }
    run_blocks("sh runnable user", "readmeuser", As::Unprivileged);
}

#[test]
fn the_readmes_namespace_blocks_run_as_written() {
    let test = "the_readmes_namespace_blocks_run_as_written";
    if !can_run(test) || !needs(test, "iperf3", "-v") || !needs(test, "mpirun", "--version") {
        return;
    }
    run_blocks("sh runnable root", "readmens", As::Tester);
}
