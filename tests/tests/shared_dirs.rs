//! A local cluster in a directory other users may write (issue 35's findings 1, 2 and 6):
//! what another user plants there (a link where logs are kept, an empty state directory
//! of hers, a cluster file naming someone else's files) never makes `local up` or `local
//! down` write through it, hand the token to it, or act on what it names. And what the
//! controller writes or reads for a user there (issue 43's findings 2, 4 and 7): reports,
//! exports and the demo's directory never through a link another user planted; a store
//! never with a journal file another user put beside it, nor a FIFO opened as one.

use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::Path;
use std::process::Command;

use throttle_tests::{ctl, exe, scratch};

/// Whether this machine can run a second user (root and `setpriv`); prints why not. With
/// `THROTTLE_REQUIRE_NETNS=1` (CI, as root) a missing prerequisite is a failure.
fn other_user_available(test: &str) -> bool {
    if throttle_testkit::user::can_switch_user() {
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
    let out = throttle_testkit::user::as_user(throttle_testkit::user::NOBODY, "sh")
        .args(["-c", script])
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

/// A results database of `procs` x steps x repeats that `analyze` answers, written as the
/// controller writes one, in a directory of root's, then moved to `to`.
fn a_store(private: &Path, to: &Path) {
    use throttle_ctl::store::{RunRow, Store};
    let db = private.join("made.db");
    let store = Store::open(&db).unwrap();
    for p in [2u32, 4, 8, 16] {
        for bw in [100u32, 60, 40, 20] {
            for r in 0..3u32 {
                let t = 10.0 / p as f64 + 0.5 + 2.0 * (p as f64).sqrt() / bw as f64;
                let pct = throttle_proto::Pct::new(bw as f64).unwrap();
                store
                    .insert(&RunRow {
                        workload: "mw".into(),
                        nodes: p,
                        procs: p,
                        started_at: "2026-11-28T00:00:00Z".into(),
                        seconds: Some(t * (1.0 + 0.002 * r as f64)),
                        job: format!("j{p}-{bw}-{r}"),
                        ..RunRow::for_test(&format!("s/{p}/{bw}/{r}"), "s", pct, r)
                    })
                    .unwrap();
            }
        }
    }
    drop(store);
    std::fs::rename(&db, to).unwrap();
}

/// Issue 43, finding 2: links another user planted in a shared directory, where root's
/// report, exports and demo go, are never written through; where nothing is planted, the
/// same commands write.
#[test]
fn what_the_controller_writes_never_follows_a_planted_link() {
    if !other_user_available("what_the_controller_writes_never_follows_a_planted_link") {
        return;
    }
    let s = scratch("planted-writes");
    let db = s.0.join("r.db");
    a_store(&s.0, &db);
    let sh = s.0.join("shared");
    std::fs::create_dir(&sh).unwrap();
    shared(&sh);
    let secret = s.0.join("root-only");
    std::fs::write(&secret, "root only\n").unwrap();
    std::fs::set_permissions(&secret, std::fs::Permissions::from_mode(0o600)).unwrap();
    let elsewhere = s.0.join("roots-dir");
    std::fs::create_dir(&elsewhere).unwrap();
    // Planted in directories of the other user's that everyone may write and that are
    // not sticky (where the kernel's fs.protected_symlinks, when on, does not refuse to
    // follow): `rep/` in the shared directory, the rest in `open/`.
    as_nobody(&format!(
        "cd {sh} && mkdir rep open && chmod 0777 rep open && ln -s {secret} rep/index.html \
         && ln -s {secret} open/runs.csv && ln -s {secret} open/answer.md \
         && ln -s {secret} open/answer.csv && ln -s {elsewhere} open/throttle-demo",
        sh = sh.display(),
        secret = secret.display(),
        elsewhere = elsewhere.display()
    ));
    let d = db.to_str().unwrap();
    let tries: [&[&str]; 5] = [
        &["analyze", "--db", d, "--report", "shared/rep"],
        &["export", "--db", d, "--out", "shared/open/runs.csv"],
        &[
            "analyze",
            "--db",
            d,
            "--export-markdown",
            "shared/open/answer.md",
        ],
        &[
            "analyze",
            "--db",
            d,
            "--export-csv",
            "shared/open/answer.csv",
        ],
        &["demo", "--dir", "shared/open/throttle-demo"],
    ];
    for args in tries {
        let out = ctl(&s.0, args);
        let said = text(&out);
        assert!(!out.status.success(), "{args:?} wrote: {said}");
        assert!(!said.contains("panicked"), "{said}");
        assert_eq!(
            std::fs::read_to_string(&secret).unwrap(),
            "root only\n",
            "{args:?} wrote through the link: {said}"
        );
    }
    assert_eq!(
        std::fs::read_dir(&elsewhere).unwrap().count(),
        0,
        "the demo wrote where the planted link points"
    );
    // Where nothing is planted, in the same shared directory: written.
    for (args, made) in [
        (
            &["analyze", "--db", d, "--report", "shared/mine"][..],
            "shared/mine/index.html",
        ),
        (
            &["export", "--db", d, "--out", "shared/mine.csv"][..],
            "shared/mine.csv",
        ),
    ] {
        let out = ctl(&s.0, args);
        assert!(out.status.success(), "{args:?}: {}", text(&out));
        assert!(s.0.join(made).is_file(), "{args:?} made no {made}");
    }
}

/// Issue 43, findings 4 and 7: a `-wal` another user forged and put beside root's store
/// in a shared directory adds no row of theirs (the store is refused, naming it); a FIFO
/// named as the store is refused at once, not opened.
#[test]
fn a_planted_journal_adds_no_rows_and_a_fifo_is_no_store() {
    if !other_user_available("a_planted_journal_adds_no_rows_and_a_fifo_is_no_store") {
        return;
    }
    let s = scratch("planted-wal");
    let sh = s.0.join("shared");
    std::fs::create_dir(&sh).unwrap();
    shared(&sh);
    a_store(&s.0, &sh.join("r.db"));
    // The other user's forgery: a copy of the store, changed in WAL mode and not
    // checkpointed; its `-wal` put beside root's store, theirs and writable by all.
    let copy = s.0.join("copy.db");
    std::fs::copy(sh.join("r.db"), &copy).unwrap();
    let c = rusqlite::Connection::open(&copy).unwrap();
    c.pragma_update(None, "journal_mode", "WAL").unwrap();
    c.pragma_update(None, "wal_autocheckpoint", 0).unwrap();
    c.execute("UPDATE runs SET series = 'forged'", []).unwrap();
    let planted = sh.join("r.db-wal");
    std::fs::copy(s.0.join("copy.db-wal"), &planted).unwrap();
    drop(c);
    std::os::unix::fs::chown(&planted, Some(65534), Some(65534)).unwrap();
    std::fs::set_permissions(&planted, std::fs::Permissions::from_mode(0o666)).unwrap();
    for args in [
        &["export", "--db", "shared/r.db"][..],
        &["analyze", "--db", "shared/r.db"][..],
    ] {
        let out = ctl(&s.0, args);
        let said = text(&out);
        assert!(
            !said.contains("forged"),
            "{args:?} read the planted rows: {said}"
        );
        assert!(!out.status.success(), "{args:?}: {said}");
        assert!(said.contains("r.db-wal belongs to uid 65534"), "{said}");
    }
    // Without it, the store reads.
    std::fs::remove_file(&planted).unwrap();
    let out = ctl(&s.0, &["export", "--db", "shared/r.db"]);
    assert!(out.status.success(), "{}", text(&out));
    // A FIFO as the store: refused by name within seconds, never opened.
    nix::unistd::mkfifo(
        &s.0.join("f.db"),
        nix::sys::stat::Mode::from_bits_truncate(0o600),
    )
    .unwrap();
    let start = std::time::Instant::now();
    let mut child = std::process::Command::new(exe())
        .current_dir(&s.0)
        .args(["export", "--db", "f.db"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    while child.try_wait().unwrap().is_none() {
        if start.elapsed() > std::time::Duration::from_secs(20) {
            let _ = child.kill();
            panic!("export --db FIFO still waits after 20 s");
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let out = child.wait_with_output().unwrap();
    let said = text(&out);
    assert!(
        !out.status.success() && said.contains("not a regular file"),
        "{said}"
    );
}

/// Issue 55, finding 1: another user's links in an earlier component of an output path
/// (`out -> a root-only directory`, `res -> a directory of root's like /etc`, planted in a
/// sticky shared directory) are never followed: not by the report, an export, the
/// Markdown answer, the man pages, nor a results database opened to write or read; none of
/// them creates a directory through them. Root's own link in a directory of root's still
/// leads where it points.
#[test]
fn a_link_in_an_earlier_component_of_a_path_is_followed_only_when_safe() {
    if !other_user_available("a_link_in_an_earlier_component_of_a_path_is_followed_only_when_safe")
    {
        return;
    }
    let s = scratch("earlier-link");
    let db = s.0.join("a.db");
    a_store(&s.0, &db);
    let rootonly = s.0.join("rootonly");
    let etcish = s.0.join("etcish");
    for d in [&rootonly, &etcish] {
        std::fs::create_dir(d).unwrap();
        std::fs::set_permissions(d, std::fs::Permissions::from_mode(0o700)).unwrap();
    }
    // Directories of root's behind the links, so that only the link stands between an
    // output and them.
    std::fs::create_dir(rootonly.join("sub")).unwrap();
    std::fs::copy(&db, rootonly.join("sub/theirs.db")).unwrap();
    let shr = s.0.join("shr");
    std::fs::create_dir(&shr).unwrap();
    shared(&shr);
    as_nobody(&format!(
        "cd {shr} && ln -s {rootonly} out && ln -s {etcish} res",
        shr = shr.display(),
        rootonly = rootonly.display(),
        etcish = etcish.display()
    ));
    let d = db.to_str().unwrap();
    let tries: [&[&str]; 6] = [
        &["analyze", "--db", d, "--report", "out/run1/report"],
        &["export", "--db", d, "--out", "out/sub/runs.csv"],
        &[
            "analyze",
            "--db",
            d,
            "--export-markdown",
            "out/sub/answer.md",
        ],
        &["man", "res/x/man"],
        &["analyze", "--db", "out/sub/theirs.db"],
        &["demo", "--dir", "out/sub/demo"],
    ];
    for args in tries {
        let out = ctl(&shr, args);
        let said = text(&out);
        assert!(
            !out.status.success(),
            "{args:?} went through the link: {said}"
        );
        assert!(said.contains("symbolic link"), "{args:?}: {said}");
        assert!(!said.contains("panicked"), "{said}");
    }
    let listing = |d: &Path| {
        let mut v: Vec<String> = std::fs::read_dir(d)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        v.sort();
        v
    };
    assert_eq!(listing(&rootonly), ["sub"], "made through the link");
    assert_eq!(
        listing(&rootonly.join("sub")),
        ["theirs.db"],
        "made through the link"
    );
    assert!(listing(&etcish).is_empty(), "made through the link");
    // A store opened to write through the planted link is refused too, and not made.
    let e = throttle_ctl::store::Store::open(&shr.join("out/sub/r.db"))
        .err()
        .expect("a store through another user's link");
    assert!(format!("{e:#}").contains("symbolic link"), "{e:#}");
    assert!(!rootonly.join("sub/r.db").exists());
    // Root's own link, in a directory of root's: followed, and the report is made there.
    std::os::unix::fs::symlink(&rootonly, s.0.join("mine")).unwrap();
    let out = ctl(
        &s.0,
        &["analyze", "--db", d, "--report", "mine/run1/report"],
    );
    assert!(out.status.success(), "{}", text(&out));
    assert!(rootonly.join("run1/report/index.html").is_file());
}
