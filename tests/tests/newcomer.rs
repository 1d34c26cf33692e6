//! Issue 44's acceptance: the newcomer's path, as an ordinary user, in one script
//! (tests/newcomer.sh): a Graph500-like program that busy-polls and prints a rate, swept
//! on a loopback cluster at the default capacity, then at the capacity the tool suggests;
//! there a demand at 2 and 4 nodes, and a bottom-line row for every size.

use std::os::unix::fs::PermissionsExt;
use std::process::Command;

use throttle_testkit::user::{as_user, NOBODY};
use throttle_tests::{bin_dir, exe, scratch, skip, BINARIES};

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
    let setcap = Command::new("setcap")
        .arg("-h")
        .output()
        .is_ok_and(|o| o.status.success());
    if root && !(have("setpriv") && setcap) {
        skip(
            test,
            "setpriv and setcap (to run as an ordinary user whose agents may go first)",
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
        for name in BINARIES {
            std::fs::copy(bin_dir().join(name), bin.join(name)).unwrap();
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
        // An ordinary user whose administrator did what `local up` advises when its agents
        // cannot go first (`setcap cap_sys_nice+ep` on the agent): the agents run ahead of
        // every ordinary process, the user's ranks do not. Without it a busy loop beside
        // the suite takes a core from the agents at their own priority, and every run of
        // 4 nodes is flagged (docs/testing.md).
        let agent = bin.join("throttle-agent");
        let set = Command::new("setcap")
            .arg("cap_sys_nice+ep")
            .arg(&agent)
            .output()
            .unwrap();
        assert!(set.status.success(), "{set:?}");
        let c = as_user(NOBODY, "bash");
        (c, dir.0.join("newcomer.sh"), bin.join("throttle-ctl"), work)
    } else {
        (
            Command::new("bash"),
            here.join("newcomer.sh"),
            exe(),
            dir.0.clone(),
        )
    };
    // Whatever becomes of the script (a failed assertion, a kill), its cluster is taken
    // down as the user who started it, before the scratch directory goes.
    let _down = Down {
        as_nobody: root,
        ctl: ctl.clone(),
        work: work.clone(),
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

/// Takes the script's cluster down when dropped (its own trap does too, unless it was
/// killed).
struct Down {
    as_nobody: bool,
    ctl: std::path::PathBuf,
    work: std::path::PathBuf,
}

impl Drop for Down {
    fn drop(&mut self) {
        let mut c = if self.as_nobody {
            as_user(NOBODY, &self.ctl)
        } else {
            Command::new(&self.ctl)
        };
        let _ = c
            .args(["local", "down", "--force"])
            .env("THROTTLE_CLUSTER", self.work.join("throttle-cluster.toml"))
            .current_dir(&self.work)
            .output();
    }
}
