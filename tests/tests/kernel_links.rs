//! Kernel-paced links (issue 53): `local up --links kernel` starts agents that pace the
//! programs' own sockets. A program run as a node (`throttle-ctl exec`) connects to the
//! other node directly; no byte passes an agent, the kernel paces the stream at the link's
//! setting, a new setting reaches a running stream, two senders into one node share its
//! ingress, and the agent takes registrations from its own user only.

use std::process::{Command, Stdio};
use std::time::Duration;

use throttle_tests::loopback::{exec_in, received_mbit, server};
use throttle_tests::namespace::have;
use throttle_tests::*;

fn kernel_cluster(tag: &str, nodes: usize, base: &str) -> Scratch {
    let s = scratch(tag);
    let n = nodes.to_string();
    stdout_of(&ctl(
        &s.0,
        &[
            "local",
            "up",
            "--nodes",
            &n,
            "--capacity",
            "1Gbit",
            "--base-addr",
            base,
            "--links",
            "kernel",
        ],
    ));
    s
}

fn status(dir: &std::path::Path) -> serde_json::Value {
    serde_json::from_str(&stdout_of(&ctl(dir, &["status", "--json"]))).unwrap()
}

/// An iperf3 client run as `node` for `secs`, its first `omit` seconds left out of the
/// result (`-O`), reporting JSON.
fn iperf(
    dir: &std::path::Path,
    node: &str,
    to: &str,
    port: &str,
    secs: &str,
    omit: &str,
) -> Command {
    exec_in(
        dir,
        node,
        &["iperf3", "-c", to, "-p", port, "-t", secs, "-O", omit, "-J"],
    )
}

/// One stream at 30% and then at 10% of 1 Gbit/s: each at its setting (unpaced loopback
/// carries tens of Gbit/s), the setting changed between them reached the socket, the
/// agents carried nothing (their ports counted no byte, interception no connection) and
/// the sending node's agent paced the program's sockets. Added latency is refused.
#[test]
fn a_stream_between_nodes_is_paced_by_the_kernel_and_no_agent_carries_it() {
    if !have("iperf3", "-v") {
        skip(
            "a_stream_between_nodes_is_paced_by_the_kernel_and_no_agent_carries_it",
            "iperf3",
            "THROTTLE_REQUIRE_NETNS",
        );
        return;
    }
    let c = kernel_cluster("klink", 2, "127.0.43.1");
    stdout_of(&ctl(&c.0, &["set", "30"]));
    let _srv = server(&c.0, "n1", &["iperf3", "-s", "-p", "5301"]);
    std::thread::sleep(Duration::from_millis(700));
    let rate = received_mbit(&stdout_of(
        &iperf(&c.0, "n0", "127.0.43.2", "5301", "2", "0")
            .output()
            .unwrap(),
    ));
    // Generous bounds for a loaded machine; bench/kernel_links.sh measures the error.
    assert!(
        (240.0..=315.0).contains(&rate),
        "n0 -> n1 at 30% of 1 Gbit/s: {rate:.1} Mbit/s"
    );
    stdout_of(&ctl(&c.0, &["set", "10"]));
    let rate = received_mbit(&stdout_of(
        &iperf(&c.0, "n0", "127.0.43.2", "5301", "2", "0")
            .output()
            .unwrap(),
    ));
    assert!(
        (80.0..=105.0).contains(&rate),
        "n0 -> n1 at 10% of 1 Gbit/s: {rate:.1} Mbit/s"
    );
    let s = status(&c.0);
    for n in 0..2 {
        assert_eq!(s[n]["egress"]["bytes"], 0, "an agent carried bytes: {s}");
        assert_eq!(s[n]["intercepted"]["outgoing"], 0, "{s}");
    }
    let k = &s[0]["kernel_pacing"];
    // iperf3: a control and a data connection per client, two clients.
    assert!(k["registered"].as_u64().unwrap() >= 4, "{s}");
    assert_eq!(k["unpaced"], 0, "{s}");
    assert!(k["bytes_sent"].as_u64().unwrap() > 50_000_000, "{s}");
    // A stream paced by the kernel stays within the link: (almost) nothing beyond it.
    let (sent, beyond) = (
        k["bytes_sent"].as_u64().unwrap(),
        k["beyond_link_sent"].as_u64().unwrap(),
    );
    assert!(
        beyond * 20 < sent,
        "a paced stream counted {beyond} of {sent} bytes beyond the link: {s}"
    );
    // The receiving side registered what it accepted.
    assert!(
        s[1]["kernel_pacing"]["registered"].as_u64().unwrap() >= 4,
        "{s}"
    );
    let table = stdout_of(&ctl(&c.0, &["status"]));
    assert!(table.contains("kernel:"), "{table}");
    // Added latency is the proxy's: refused here, with the way to it, not ignored.
    let latency = ctl(&c.0, &["set", "30", "--latency-us", "100"]);
    let err = String::from_utf8_lossy(&latency.stderr);
    assert!(
        !latency.status.success() && err.contains("--links proxy"),
        "{err}"
    );
}

/// Messages at 1% of 1 Gbit/s (1.25 MB/s), as an MPI program's first iterations send
/// them: 7 connections open at once (one per peer), on each a ping-pong of 9 messages of
/// 32 KiB, which a link of that rate carries in 26 ms each way (1.7 s in all). The kernel
/// paces a connection only from its tenth segment on (on loopback a 32 KiB message is
/// one), so these go at once, and the agent's account of the paced sockets against the
/// link counts most of their bytes beyond it: a run's proof would be flagged
/// (`fidelity`), and a sweep gives its point up without retrying it. Tolerates load up
/// to the 63 round trips taking about 0.7 s (then the messages would be nearer the
/// link's pace, and the counts say so).
#[test]
fn small_messages_the_kernel_lets_past_the_link_are_counted_beyond_it() {
    let name = "small_messages_the_kernel_lets_past_the_link_are_counted_beyond_it";
    if !have("python3", "--version") {
        skip(name, "python3", "THROTTLE_REQUIRE_NETNS");
        return;
    }
    let c = kernel_cluster("kbeyond", 2, "127.0.46.1");
    stdout_of(&ctl(&c.0, &["set", "1"]));
    let echo = c.0.join("echo.py");
    std::fs::write(
        &echo,
        r#"
import socket, threading
l = socket.socket(); l.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
l.bind(("127.0.46.2", 5311)); l.listen(64)
def echo(c):
    c.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    while b := c.recv(1 << 20):
        c.sendall(b)
    c.close()
while True:
    threading.Thread(target=echo, args=(l.accept()[0],), daemon=True).start()
"#,
    )
    .unwrap();
    let ping = c.0.join("ping.py");
    std::fs::write(
        &ping,
        r#"
import socket, time
msg = b"x" * 32768
peers = [socket.create_connection(("127.0.46.2", 5311)) for _ in range(7)]
t = time.monotonic()
for _ in range(9):
    for s in peers:
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        s.sendall(msg)
        got = 0
        while got < len(msg):
            got += len(s.recv(len(msg) - got))
print(f"{time.monotonic() - t:.3f}")
# Open until the agent has read them once more (it counts what it last read).
time.sleep(0.3)
"#,
    )
    .unwrap();
    let _srv = server(&c.0, "n1", &["python3", echo.to_str().unwrap()]);
    std::thread::sleep(Duration::from_millis(700));
    let took = stdout_of(
        &exec_in(&c.0, "n0", &["python3", ping.to_str().unwrap()])
            .output()
            .unwrap(),
    );
    // The agent reads its sockets every 20 ms: let it count the last of them.
    std::thread::sleep(Duration::from_millis(200));
    let s = status(&c.0);
    let k = &s[0]["kernel_pacing"];
    let (sent, beyond) = (
        k["bytes_sent"].as_u64().unwrap(),
        k["beyond_link_sent"].as_u64().unwrap(),
    );
    eprintln!(
        "63 round trips of 32 KiB in {} s: {beyond} of {sent} bytes beyond the link",
        took.trim()
    );
    assert!(sent >= 63 * 32768, "{s}");
    assert!(
        beyond * 10 > sent * 3,
        "63 round trips of 32 KiB on 7 connections in {} s at 1.25 MB/s (a link takes 1.7 s each way): {beyond} of {sent} bytes counted beyond the link: {s}",
        took.trim()
    );
    // Run by a sweep, the run is flagged for it and its point given up at once: a retry
    // would send the same messages past the link again.
    std::fs::write(
        c.0.join("spec.toml"),
        format!(
            "workload = \"command\"\nnodes = [2]\nbandwidths = [1]\nrepeats = 1\nretries = 2\nsettle = 0\nwarmup = false\n\
             [command]\nrun = \"{} exec n0 -- python3 {}\"\n",
            exe().display(),
            ping.display()
        ),
    )
    .unwrap();
    let out = ctl(
        &c.0,
        &[
            "sweep",
            "spec.toml",
            "--db",
            "b.db",
            "--plain",
            "--no-baseline",
        ],
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains("went faster than its link carries at the setting")
            && err.contains("--links proxy"),
        "{err}"
    );
    assert!(
        err.contains("gave up after 1 failed or flagged attempt"),
        "retried what no retry changes: {err}"
    );
}

/// Two nodes send to a third at once (incast), at 30% of 1 Gbit/s: together they get the
/// receiver's ingress, not twice it, and about half each. Without the agents' exchange
/// each sender would pace at its own egress, 300 Mbit/s, and the two 600.
#[test]
fn two_senders_into_one_node_share_its_ingress() {
    if !have("iperf3", "-v") {
        skip(
            "two_senders_into_one_node_share_its_ingress",
            "iperf3",
            "THROTTLE_REQUIRE_NETNS",
        );
        return;
    }
    let c = kernel_cluster("kincast", 3, "127.0.44.1");
    stdout_of(&ctl(&c.0, &["set", "30"]));
    let _a = server(&c.0, "n0", &["iperf3", "-s", "-p", "5301"]);
    let _b = server(&c.0, "n0", &["iperf3", "-s", "-p", "5302"]);
    std::thread::sleep(Duration::from_millis(700));
    // The first two seconds left out (-O 2): the two clients start a moment apart (more
    // on a loaded machine), and the first has the link to itself meanwhile.
    let one = iperf(&c.0, "n1", "127.0.44.1", "5301", "6", "2")
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let two = iperf(&c.0, "n2", "127.0.44.1", "5302", "6", "2")
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let one = received_mbit(&stdout_of(&one.wait_with_output().unwrap()));
    let two = received_mbit(&stdout_of(&two.wait_with_output().unwrap()));
    assert!(
        one + two <= 345.0,
        "n1 -> n0 {one:.1} and n2 -> n0 {two:.1} Mbit/s: more than n0's ingress (300)"
    );
    for r in [one, two] {
        assert!(
            (90.0..=210.0).contains(&r),
            "n1 -> n0 {one:.1} and n2 -> n0 {two:.1} Mbit/s: not about half each"
        );
    }
}

/// What a registration over the pacing socket at `preload` gets, run as `uid` (`None`: this
/// process's user): the errno answered, or `closed` when the agent closed the connection
/// without an answer. The registration names a fresh socket of the asking process and a
/// peer at 192.0.2.1:5000, which is no node's.
fn register(preload: &str, uid: Option<u32>) -> String {
    let script = format!(
        r#"
import socket, struct
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.connect("\0throttle-pace/{preload}")
t = socket.socket()
req = b"THPC" + bytes([1, 1]) + struct.pack(">i", t.fileno()) + bytes([4, 192, 0, 2, 1]) + bytes(12) + struct.pack(">H", 5000)
try:
    s.sendall(req)
    s.settimeout(5)
    r = s.recv(4)
except (ConnectionResetError, BrokenPipeError):
    r = b""
print("closed" if not r else struct.unpack(">i", r)[0])
"#
    );
    let out = match uid {
        // The system's Python: one under root's home (pyenv) is not for other users.
        Some(uid) => throttle_testkit::user::as_user(uid, "/usr/bin/python3")
            .args(["-c", &script])
            .output(),
        None => Command::new("python3").args(["-c", &script]).output(),
    }
    .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

/// The pacing socket: a registration from the agent's user for a socket to an address
/// that is no node's is refused with EHOSTUNREACH (and counted); an agent of another user
/// (uid 65534, started beside the cluster where the tests run as root) closes a
/// registration of this user's without answering it.
#[test]
fn the_pacing_socket_takes_its_users_sockets_to_the_nodes_only() {
    let name = "the_pacing_socket_takes_its_users_sockets_to_the_nodes_only";
    if !have("python3", "--version") {
        skip(name, "python3", "THROTTLE_REQUIRE_NETNS");
        return;
    }
    let c = kernel_cluster("kpace", 2, "127.0.45.1");
    let before = status(&c.0);
    let preload = before[0]["intercepted"]["preload_port"].as_u64().unwrap();
    let preload = format!("127.0.45.1:{preload}");
    assert_eq!(register(&preload, None), libc::EHOSTUNREACH.to_string());
    let after = status(&c.0);
    assert_eq!(
        after[0]["kernel_pacing"]["refused"].as_u64().unwrap(),
        before[0]["kernel_pacing"]["refused"].as_u64().unwrap() + 1,
        "{after}"
    );
    // A socket registered for a node (n1) that then connects elsewhere (a listener on
    // 127.0.0.1) is not a flow between nodes: once connected, it is no longer paced.
    let script = format!(
        r#"
import socket, struct, time
l = socket.socket(); l.bind(("127.0.0.1", 0)); l.listen(1)
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.connect("\0throttle-pace/{preload}")
t = socket.socket()
req = b"THPC" + bytes([1, 1]) + struct.pack(">i", t.fileno()) + bytes([4, 127, 0, 45, 2]) + bytes(12) + struct.pack(">H", 5000)
s.sendall(req)
print(struct.unpack(">i", s.recv(4))[0], flush=True)
t.connect(l.getsockname())
time.sleep(2)
"#
    );
    let out = Command::new("python3")
        .args(["-c", &script])
        .output()
        .unwrap();
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        "0",
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let elsewhere = status(&c.0);
    let k = &elsewhere[0]["kernel_pacing"];
    assert_eq!(
        k["refused"].as_u64().unwrap(),
        after[0]["kernel_pacing"]["refused"].as_u64().unwrap() + 1,
        "a socket connected elsewhere than registered: {elsewhere}"
    );
    assert_eq!(k["paced_now"], 0, "{elsewhere}");
    if !throttle_testkit::user::can_switch_user() {
        skip(
            name,
            "root and setpriv (another user's agent)",
            "THROTTLE_REQUIRE_NETNS",
        );
        return;
    }
    const USER: u32 = throttle_testkit::user::NOBODY;
    let home = c.0.join("user");
    std::fs::create_dir(&home).unwrap();
    std::fs::copy(c.0.join(".throttle-local/token"), home.join("token")).unwrap();
    for p in [home.clone(), home.join("token")] {
        nix::unistd::chown(&p, Some(USER.into()), Some(USER.into())).unwrap();
    }
    let mut dir = c.0.clone();
    while dir != std::path::Path::new("/tmp") && dir.parent().is_some() {
        use std::os::unix::fs::PermissionsExt;
        let _ = std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755));
        dir = dir.parent().unwrap().to_path_buf();
    }
    let mut agent = throttle_testkit::user::as_user(USER, bin_dir().join("throttle-agent"));
    agent
        .args(["--node", "u0", "--capacity", "1Gbit"])
        .args(["--control", "127.0.45.9:0", "--data", "127.0.45.9:0"])
        .args(["--preload", "--preload-port", "0", "--links", "kernel"])
        .arg("--token-file")
        .arg(home.join("token"))
        .arg("--local-socket")
        .arg(home.join("u0.sock"))
        .stderr(Stdio::null());
    let _theirs = throttle_testkit::agent::start(agent, &home.join("u0.ready"), "nobody's agent");
    let ready: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(home.join("u0.ready")).unwrap()).unwrap();
    let theirs = ready["preload"].as_str().unwrap().to_string();
    // This user (root) is not the agent's: no answer. The agent's own user is answered.
    assert_eq!(register(&theirs, None), "closed");
    assert_eq!(
        register(&theirs, Some(USER)),
        libc::EHOSTUNREACH.to_string()
    );
}

/// On namespace hosts (root) a small message takes its time on the link: at 10% of
/// 1 Gbit/s a 16 KiB ping-pong's round trip is its serialization, 2.6 ms. The kernel
/// paces a socket by delaying the segment burst after the one it sends, so without the
/// agents' egress queue each message's single 16 KiB burst left at once (0.55-0.73 of
/// it, measured); the queue's `tbf` sends it packet by packet at the link's rate. Bounds
/// for a loaded machine: at least 0.85 of serialization (a busy machine only makes round
/// trips longer), at most 3 times it.
#[test]
fn on_namespace_hosts_a_small_message_takes_its_time_on_the_link() {
    let name = "on_namespace_hosts_a_small_message_takes_its_time_on_the_link";
    if !throttle_tests::namespace::can_run(name) {
        return;
    }
    if !have("python3", "--version") || !have("tc", "-V") {
        skip(name, "python3 and tc", "THROTTLE_REQUIRE_NETNS");
        return;
    }
    let _serial = throttle_tests::namespace::serial();
    let c = throttle_tests::namespace::up_netns_with(
        "kqueue",
        2,
        "198.18.68.0/24",
        &["--intercept", "preload", "--links", "kernel"],
    );
    stdout_of(&ctl(&c.0, &["set", "10"]));
    let ns0 = throttle_tests::namespace::netns_of(&c.0, 0);
    let qdisc = stdout_of(
        &Command::new("ip")
            .args(["netns", "exec", &ns0, "tc", "qdisc", "show", "dev", "eth0"])
            .output()
            .unwrap(),
    );
    let echo = c.0.join("echo.py");
    std::fs::write(
        &echo,
        r#"
import socket
l = socket.socket(); l.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
l.bind(("198.18.68.2", 5321)); l.listen(4)
c = l.accept()[0]; c.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
while True:
    m = b""
    while len(m) < 16384:
        b = c.recv(16384 - len(m))
        if not b:
            raise SystemExit
        m += b
    c.sendall(m)
"#,
    )
    .unwrap();
    let ping = c.0.join("ping.py");
    std::fs::write(
        &ping,
        r#"
import socket, statistics, time
size = 16384
s = socket.create_connection(("198.18.68.2", 5321))
s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
msg, rts = b"x" * size, []
for i in range(35):
    t = time.monotonic()
    s.sendall(msg)
    got = 0
    while got < size:
        got += len(s.recv(size - got))
    if i >= 5:
        rts.append(time.monotonic() - t)
    time.sleep(0.01)
print(statistics.median(rts))
"#,
    )
    .unwrap();
    let _srv = server(&c.0, "n1", &["python3", echo.to_str().unwrap()]);
    std::thread::sleep(Duration::from_millis(700));
    let out = exec_in(&c.0, "n0", &["python3", ping.to_str().unwrap()])
        .output()
        .unwrap();
    let median: f64 = stdout_of(&out)
        .trim()
        .parse()
        .unwrap_or_else(|_| panic!("ping.py: {}", String::from_utf8_lossy(&out.stderr)));
    let serialization = 2.0 * 16384.0 / 12.5e6;
    let ratio = median / serialization;
    eprintln!(
        "16 KiB ping-pong at 10%: {:.0} us, {ratio:.3} of serialization",
        median * 1e6
    );
    assert!(
        (0.85..=3.0).contains(&ratio),
        "a 16 KiB ping-pong at 10% of 1 Gbit/s took {:.0} us: {ratio:.3} of its serialization ({:.0} us)",
        median * 1e6,
        serialization * 1e6
    );
    // The agent's queue on n0's link: an htb root and the tbf at 10% in its class.
    assert!(
        qdisc.contains("htb 1: root") && qdisc.contains("tbf 12:"),
        "{qdisc}"
    );
    let s = status(&c.0);
    assert_eq!(s[0]["kernel_pacing"]["refused"], 0, "{s}");
    assert_eq!(s[0]["kernel_pacing"]["egress_queue"], "eth0", "{s}");
}

/// Throttle's own ranks on namespace hosts with kernel-paced links (behind the egress
/// queue) connect to each other directly (`workloads::comm::direct`): a master/worker of
/// 3 nodes moving 4 MB per iteration (3.2 MB out of the master) at 10% of 1 Gbit/s
/// (12.5 MB/s) takes at least its serialization (0.256 s) plus its 0.1 s of work per
/// iteration, while no agent carries more than the few hundred bytes of the ranks'
/// meeting through the tunnels, and the agents paced every socket. Bounds for a loaded
/// machine: at least 0.9 of that time (a busy machine only makes it longer), at most 4
/// times it.
#[test]
fn on_namespace_hosts_throttles_own_ranks_connect_directly_and_are_paced() {
    let name = "on_namespace_hosts_throttles_own_ranks_connect_directly_and_are_paced";
    if !throttle_tests::namespace::can_run(name) {
        return;
    }
    if !have("tc", "-V") {
        skip(name, "tc", "THROTTLE_REQUIRE_NETNS");
        return;
    }
    let _serial = throttle_tests::namespace::serial();
    let c = throttle_tests::namespace::up_netns_with(
        "kdirect",
        3,
        "198.18.74.0/24",
        &["--intercept", "preload", "--links", "kernel"],
    );
    let run: serde_json::Value = serde_json::from_str(&stdout_of(&ctl(
        &c.0,
        &[
            "run",
            "--workload",
            "mw",
            "--nodes",
            "3",
            "--bw",
            "10",
            "--volume",
            "4000000",
            "--alpha",
            "0.8",
            "--compute-seconds",
            "0.1",
            "--iterations",
            "2",
            "--json",
        ],
    )))
    .unwrap();
    let iteration = run["result"]["metrics"]["iteration_seconds"]
        .as_f64()
        .unwrap_or_else(|| panic!("{run}"));
    let expected = 3.2e6 / 12.5e6 + 0.1;
    eprintln!("mw iteration at 10%: {iteration:.3} s ({expected:.3} s of serialization and work)");
    assert!(
        (0.9 * expected..=4.0 * expected).contains(&iteration),
        "an iteration took {iteration:.3} s where the link and the work take {expected:.3} s: {run}"
    );
    assert_eq!(run["fidelity"]["flags"], serde_json::json!([]), "{run}");
    let s = status(&c.0);
    for n in 0..3 {
        let carried = s[n]["egress"]["bytes"].as_u64().unwrap();
        assert!(
            carried < 4096,
            "n{n}'s agent carried {carried} bytes of the job: {s}"
        );
        let k = &s[n]["kernel_pacing"];
        // Each node's rank opened a socket to each other node's and accepted one from it.
        assert_eq!(k["registered"], 4, "n{n}: {s}");
        assert_eq!(k["refused"], 0, "n{n}: {s}");
        assert_eq!(k["unpaced"], 0, "n{n}: {s}");
    }
    // The warm-up and the two timed iterations: 3.2 MB each out of the master.
    let sent = s[0]["kernel_pacing"]["bytes_sent"].as_u64().unwrap();
    assert!(
        sent >= 9_600_000,
        "the master's paced sockets sent {sent} bytes: {s}"
    );
}
