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
    let here = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let (mut cmd, script, ctl, work) = if root {
        // The newcomer has no root: uid 65534, in a directory of its own, with the
        // binaries and the script copied where that user can reach them (a checkout
        // under /root is not).
        let bin = dir.0.join("bin");
        std::fs::create_dir_all(&bin).unwrap();
        std::fs::create_dir_all(dir.0.join("newcomer")).unwrap();
        let built = exe().parent().unwrap().to_path_buf();
        for name in [
            "throttle-ctl",
            "throttle-agent",
            "throttle-bfs",
            "throttle-pmm",
            "throttle-mw",
            "throttle-loggps",
            "throttle-selftest",
        ] {
            if built.join(name).is_file() {
                std::fs::copy(built.join(name), bin.join(name)).unwrap();
            }
        }
        let lib = throttle_tests::preload_lib();
        std::fs::copy(&lib, bin.join(lib.file_name().unwrap())).unwrap();
        std::fs::copy(here.join("newcomer.sh"), dir.0.join("newcomer.sh")).unwrap();
        std::fs::copy(
            here.join("newcomer/standin.c"),
            dir.0.join("newcomer/standin.c"),
        )
        .unwrap();
        let work = dir.0.join("work");
        std::fs::create_dir_all(&work).unwrap();
        std::os::unix::fs::chown(&work, Some(65534), Some(65534)).unwrap();
        for d in [&dir.0, &bin, &work] {
            std::fs::set_permissions(d, std::fs::Permissions::from_mode(0o755)).unwrap();
        }
        let mut c = Command::new("setpriv");
        c.args(["--reuid=65534", "--regid=65534", "--clear-groups", "bash"]);
        (c, dir.0.join("newcomer.sh"), bin.join("throttle-ctl"), work)
    } else {
        (
            Command::new("bash"),
            here.join("newcomer.sh"),
            exe(),
            dir.0.clone(),
        )
    };
    let out = cmd
        .arg(&script)
        .arg(&ctl)
        .arg(&work)
        .env("HOME", &work)
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
