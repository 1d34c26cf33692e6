//! Issue 44's acceptance: the newcomer's path, as an ordinary user, in one script
//! (tests/newcomer.sh): a Graph500-like program that busy-polls and prints a rate, swept
//! on a loopback cluster at the default capacity, then at the capacity the tool suggests;
//! there a demand at 2 and 4 nodes, and a bottom-line row for every size.

use std::os::unix::fs::PermissionsExt;
use std::process::Command;

use throttle_tests::{exe, scratch, skip};

fn have(program: &str) -> bool {
    Command::new(program)
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success())
}

#[test]
fn a_newcomers_program_reaches_a_demand_at_the_capacity_the_tool_suggests() {
    let test = "a_newcomers_program_reaches_a_demand_at_the_capacity_the_tool_suggests";
    if !have("mpicc") || !have("mpirun") {
        skip(test, "Open MPI (mpicc, mpirun)", "THROTTLE_REQUIRE_NETNS");
        return;
    }
    let root = nix::unistd::geteuid().is_root();
    if root && !have("setpriv") {
        skip(
            test,
            "setpriv (to run as an ordinary user)",
            "THROTTLE_REQUIRE_NETNS",
        );
        return;
    }
    let dir = scratch("newcomer");
    let script = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("newcomer.sh");
    let mut cmd = if root {
        // The newcomer has no root: uid 65534 in a directory of its own.
        std::os::unix::fs::chown(&dir.0, Some(65534), Some(65534)).unwrap();
        std::fs::set_permissions(&dir.0, std::fs::Permissions::from_mode(0o755)).unwrap();
        let mut c = Command::new("setpriv");
        c.args(["--reuid=65534", "--regid=65534", "--clear-groups", "bash"]);
        c
    } else {
        Command::new("bash")
    };
    let out = cmd
        .arg(&script)
        .arg(exe())
        .arg(&dir.0)
        .env("HOME", &dir.0)
        .env_remove("THROTTLE_CLUSTER")
        .output()
        .unwrap();
    let text = format!(
        "{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "{text}");
    assert!(text.contains("newcomer path: OK"), "{text}");
}
