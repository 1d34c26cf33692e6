//! throttle's test kit: what the tests of every crate share, each in one place.
//!
//! * [`skip`]: the one skip rule: a test that cannot run here fails where the environment
//!   says it must run (CI), and says `SKIPPED` and why elsewhere.
//! * [`agent`]: a started `throttle-agent` process, waited for until it is ready and
//!   killed when dropped.
//! * [`stall`]: an agent stopped on purpose during one of its jobs, so that a test meets
//!   the flagged run a busy machine gives by chance every time.
//! * [`pause`]: whether the machine paused while a test timed something, so that a
//!   measurement the machine spoiled is taken again rather than failed.
//! * [`user`]: another user: a command run as them (`setpriv`), a listener of theirs.
//! * [`bin_dir`]: where cargo put the workspace's binaries for this test run.
//!
//! Dev-only: the crates' tests depend on it (`[dev-dependencies]`), no program does.

pub mod agent;
pub mod pause;
pub mod stall;
pub mod user;

use std::path::{Path, PathBuf};

/// Set by CI as root where network namespaces work: the namespace tests must run.
pub const REQUIRE_NETNS: &str = "THROTTLE_REQUIRE_NETNS";
/// Set by CI where it installs Slurm: the Slurm test must run.
pub const REQUIRE_SLURM: &str = "THROTTLE_REQUIRE_SLURM";

/// The one skip rule. A test that cannot run here calls this with what it lacks: where
/// `require` is set in the environment ([`REQUIRE_NETNS`] or [`REQUIRE_SLURM`]) the test
/// fails, since a skip there would pass a test that did not run; elsewhere it says
/// `SKIPPED` and why, and the test returns.
pub fn skip(test: &str, what: &str, require: &str) {
    if std::env::var_os(require).is_some() {
        panic!("{test} needs {what}, and {require} is set");
    }
    eprintln!("SKIPPED {test}: needs {what}");
}

/// The directory of the workspace's binaries for this test run (`target/<profile>`): a
/// test runs as `target/<profile>/deps/<test>`.
pub fn bin_dir() -> PathBuf {
    let me = std::env::current_exe().expect("the test's own path");
    me.parent()
        .and_then(Path::parent)
        .expect("the test runs inside target/<profile>/deps")
        .to_path_buf()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_skip_fails_where_the_test_must_run() {
        let var = "THROTTLE_TESTKIT_SELF_TEST_REQUIRE";
        // Not set: a printed skip, no panic.
        std::env::remove_var(var);
        skip("t", "nothing", var);
        std::env::set_var(var, "1");
        let caught = std::panic::catch_unwind(|| skip("t", "nothing", var));
        std::env::remove_var(var);
        assert!(caught.is_err(), "a required test skipped quietly");
    }
}
