//! A local cluster in a directory other users may write (issue 35's findings 1, 2 and 6):
//! what another user plants there (a link where logs are kept, an empty state directory
//! of hers, a cluster file naming someone else's files) never makes `local up` or `local
//! down` write through it, hand the token to it, or act on what it names.

use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::Path;
use std::process::Command;

use throttle_tests::{ctl, exe, scratch};

/// Whether this machine can run a second user (root and `setpriv`); prints why not. With
/// `THROTTLE_REQUIRE_NETNS=1` (CI, as root) a missing prerequisite is a failure.
fn other_user_available(test: &str) -> bool {
    let root = nix::unistd::geteuid().is_root();
    let setpriv = Command::new("setpriv")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    if root && setpriv {
        return true;
    }
    throttle_tests::skip(
        test,
        "root and setpriv (a second user)",
        "THROTTLE_REQUIRE_NETNS",
    );
    false
}

/// Run `script` with `sh -c` as uid/gid 65534 ("nobody").
fn as_nobody(script: &str) {
    let out = Command::new("setpriv")
        .args([
            "--reuid=65534",
            "--regid=65534",
            "--clear-groups",
            "sh",
            "-c",
            script,
        ])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "as nobody: {script}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A directory everyone may create entries in, like /tmp (sticky: nobody removes or
/// renames what another made).
fn shared(dir: &Path) {
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o1777)).unwrap();
}

fn text(out: &std::process::Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// Finding 1: another user plants `throttle-local-logs/n0.log` as a link to a root-only
/// file; root's `local down --keep-logs` neither writes through it nor changes its mode,
/// and still stops the cluster.
#[test]
fn kept_logs_are_never_written_through_a_planted_link() {
    if !other_user_available("kept_logs_are_never_written_through_a_planted_link") {
        return;
    }
    let s = scratch("shared-logs");
    shared(&s.0);
    let out = ctl(
        &s.0,
        &["local", "up", "--nodes", "1", "--base-addr", "127.0.71.1"],
    );
    assert!(out.status.success(), "{}", text(&out));
    let secret = s.0.join("root-only");
    std::fs::write(&secret, "root only\n").unwrap();
    std::fs::set_permissions(&secret, std::fs::Permissions::from_mode(0o600)).unwrap();
    as_nobody(&format!(
        "mkdir -m 0777 {d}/throttle-local-logs && ln -s {secret} {d}/throttle-local-logs/n0.log",
        d = s.0.display(),
        secret = secret.display()
    ));
    let out = ctl(&s.0, &["local", "down", "--keep-logs"]);
    let said = text(&out);
    assert!(out.status.success(), "{said}");
    assert!(said.contains("logs are not kept"), "{said}");
    assert_eq!(std::fs::read_to_string(&secret).unwrap(), "root only\n");
    let m = std::fs::metadata(&secret).unwrap();
    assert_eq!((m.mode() & 0o777, m.uid()), (0o600, 0));
    assert!(
        !s.0.join("throttle-cluster.toml").exists(),
        "the cluster is down"
    );
    // Where nobody planted anything, the logs are kept, in a private directory.
    let out = ctl(
        &s.0,
        &[
            "local",
            "up",
            "--nodes",
            "1",
            "--base-addr",
            "127.0.71.1",
            "--dir",
            "st2",
        ],
    );
    assert!(out.status.success(), "{}", text(&out));
    std::fs::remove_dir_all(s.0.join("throttle-local-logs")).unwrap();
    let out = ctl(&s.0, &["local", "down", "--keep-logs"]);
    assert!(out.status.success(), "{}", text(&out));
    let kept = s.0.join("throttle-local-logs");
    assert_eq!(std::fs::metadata(&kept).unwrap().mode() & 0o777, 0o700);
    assert!(kept.join("n0.log").is_file());
}

/// Finding 2: another user pre-makes the state directory (empty, mode 777) and would
/// answer for the agents from it: root's `local up` refuses it and puts no token there.
#[test]
fn a_state_directory_of_another_user_is_refused() {
    if !other_user_available("a_state_directory_of_another_user_is_refused") {
        return;
    }
    let s = scratch("shared-state");
    shared(&s.0);
    as_nobody(&format!("mkdir -m 0777 {}/.throttle-local", s.0.display()));
    let out = ctl(
        &s.0,
        &["local", "up", "--nodes", "1", "--base-addr", "127.0.72.1"],
    );
    let said = text(&out);
    assert!(!out.status.success(), "{said}");
    assert!(said.contains("not a private directory of yours"), "{said}");
    let planted = s.0.join(".throttle-local");
    assert_eq!(
        std::fs::read_dir(&planted).unwrap().count(),
        0,
        "nothing written there"
    );
    assert!(!s.0.join("throttle-cluster.toml").exists());
    // Nor one of root's own that others may write into (they could plant a ready file).
    let open = s.0.join("open");
    std::fs::create_dir(&open).unwrap();
    std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o777)).unwrap();
    let out = ctl(
        &s.0,
        &[
            "local",
            "up",
            "--nodes",
            "1",
            "--base-addr",
            "127.0.72.1",
            "--dir",
            "open",
        ],
    );
    assert!(!out.status.success(), "{}", text(&out));
    assert_eq!(std::fs::read_dir(&open).unwrap().count(), 0);
}

/// Finding 6: a cluster file written by hand (or handed over) names the pid of an agent
/// the caller started by hand, and the state directory of another of the caller's
/// clusters: `local down` of it kills neither and removes nothing.
#[test]
fn local_down_acts_only_for_the_cluster_file_local_up_wrote() {
    let s = scratch("handwritten");
    let out = ctl(
        &s.0,
        &["local", "up", "--nodes", "1", "--base-addr", "127.0.73.1"],
    );
    assert!(out.status.success(), "{}", text(&out));
    let real: toml::Value =
        toml::from_str(&std::fs::read_to_string(s.0.join("throttle-cluster.toml")).unwrap())
            .unwrap();
    let state = real["local_dir"].as_str().unwrap().to_string();
    let pid = real["node"][0]["pid"].as_integer().unwrap();
    // An agent started by hand, outside any local cluster.
    let token = s.0.join("hand-token");
    std::fs::write(&token, "handwrittentokenhandwrittentoken00\n").unwrap();
    std::fs::set_permissions(&token, std::fs::Permissions::from_mode(0o600)).unwrap();
    let mut by_hand = Command::new(exe().with_file_name("throttle-agent"))
        .args([
            "--node",
            "h0",
            "--control",
            "127.0.73.9:0",
            "--data",
            "127.0.73.9:0",
        ])
        .arg("--local-socket")
        .arg(s.0.join("h0.sock"))
        .arg("--token-file")
        .arg(&token)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    std::thread::sleep(std::time::Duration::from_millis(500));
    let forged = s.0.join("forged.toml");
    std::fs::write(
        &forged,
        format!(
            "token_file = \"{state}/token\"\ncapacity = \"1 Gbit/s\"\nlocal_dir = \"{state}\"\n[[node]]\nname = \"n0\"\ncontrol = \"127.0.73.1:7600\"\ndata = \"127.0.73.1:7601\"\nsocket = \"{state}/n0.sock\"\npid = {pid}\n[[node]]\nname = \"h0\"\ncontrol = \"127.0.73.9:1\"\ndata = \"127.0.73.9:2\"\nsocket = \"/tmp/h0.sock\"\npid = {}\n",
            by_hand.id()
        ),
    )
    .unwrap();
    let out = ctl(&s.0, &["local", "down", "--cluster", "forged.toml"]);
    let said = text(&out);
    assert!(said.contains("stopped nothing"), "{said}");
    assert!(
        by_hand.try_wait().unwrap().is_none(),
        "the hand-started agent was killed"
    );
    assert!(
        Path::new(&format!("/proc/{pid}")).exists(),
        "the real cluster's agent was killed"
    );
    assert!(
        Path::new(&state).is_dir(),
        "the real cluster's state was removed"
    );
    // The real cluster file still takes its own cluster down.
    let out = ctl(&s.0, &["local", "down"]);
    assert!(out.status.success(), "{}", text(&out));
    assert!(!Path::new(&state).exists());
    let _ = by_hand.kill();
    let _ = by_hand.wait();
}

/// Finding 4: a cluster file another user planted in a shared working directory names a
/// token-shaped secret of root's as its token file and her listener as a node: plain
/// `throttle-ctl status` there refuses the file and sends nothing.
#[test]
fn a_planted_cluster_file_gets_no_token() {
    if !other_user_available("a_planted_cluster_file_gets_no_token") {
        return;
    }
    let s = scratch("planted-cluster");
    shared(&s.0);
    let secret = s.0.join("vault-token");
    std::fs::write(&secret, "s.rootsecretrootsecretrootsecret\n").unwrap();
    std::fs::set_permissions(&secret, std::fs::Permissions::from_mode(0o600)).unwrap();
    let listener = std::net::TcpListener::bind("127.0.74.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let addr = listener.local_addr().unwrap();
    as_nobody(&format!(
        "printf 'token_file = \"{secret}\"\\ncapacity = \"1 Gbit/s\"\\n[[node]]\\nname = \"n0\"\\ncontrol = \"{addr}\"\\ndata = \"{addr}\"\\nsocket = \"/tmp/x.sock\"\\n' > {d}/throttle-cluster.toml",
        secret = secret.display(),
        d = s.0.display()
    ));
    let out = ctl(&s.0, &["status"]);
    let said = text(&out);
    assert!(!out.status.success(), "{said}");
    assert!(said.contains("belongs to another user"), "{said}");
    std::thread::sleep(std::time::Duration::from_millis(200));
    assert!(
        listener.accept().is_err(),
        "throttle-ctl connected to the planted node"
    );
    // Nor `local down`, which would act on its pids and directories.
    let out = ctl(&s.0, &["local", "down"]);
    assert!(!out.status.success(), "{}", text(&out));
    std::fs::remove_file(s.0.join("throttle-cluster.toml")).ok();
}
