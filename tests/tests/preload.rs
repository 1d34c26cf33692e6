//! The preload library end to end: namespace hosts whose agents serve the library
//! (`local up --netns --intercept preload`: no nftables rules anywhere), unmodified
//! programs started with `throttle-ctl exec` (which loads the library), and Open MPI.
//! They need root for the namespaces (CI runs as root) and skip with a message otherwise.

use std::process::{Command, Output};

use throttle_tests::namespace::*;
use throttle_tests::{bin_dir, ctl, exe, preload_lib, Scratch};

fn probe() -> String {
    bin_dir().join("preload_probe").display().to_string()
}

/// `throttle-ctl exec NODE -- preload_probe ARGS` with `env`.
fn exec(s: &Scratch, node: &str, args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut cmd = Command::new(exe());
    cmd.args(["exec", node, "--", &probe()])
        .args(args)
        .current_dir(&s.0)
        .env("THROTTLE_CLUSTER", s.0.join("throttle-cluster.toml"));
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd.output().unwrap()
}

/// Start the probe's server in `node` on `addr`; it answers one connection.
fn serve(s: &Scratch, node: &str, addr: &str, env: &[(&str, &str)]) -> std::process::Child {
    let mut cmd = Command::new(exe());
    cmd.args(["exec", node, "--", &probe(), "serve", addr])
        .current_dir(&s.0)
        .env("THROTTLE_CLUSTER", s.0.join("throttle-cluster.toml"))
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    for (k, v) in env {
        cmd.env(k, v);
    }
    let mut child = cmd.spawn().unwrap();
    // Wait for its `listening=` line.
    let mut out = child.stdout.take().unwrap();
    let mut line = Vec::new();
    let mut byte = [0u8; 1];
    while std::io::Read::read(&mut out, &mut byte).unwrap_or(0) == 1 && byte[0] != b'\n' {
        line.push(byte[0]);
    }
    assert!(
        String::from_utf8_lossy(&line).starts_with("listening="),
        "the probe server did not start: {}",
        String::from_utf8_lossy(&line)
    );
    child.stdout = Some(out);
    child
}

fn text(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

#[test]
fn preloaded_programs_go_through_the_agents_and_see_their_real_peers() {
    let test = "preloaded_programs_go_through_the_agents_and_see_their_real_peers";
    if !can_run(test) {
        return;
    }
    let _serial = serial();
    let s = up_netns_with("preload", 2, "198.18.64.0/24", &["--intercept", "preload"]);
    // No kernel rules: the library is the only way in.
    for n in 0..2 {
        let ns = netns_of(&s.0, n);
        let out = Command::new("ip")
            .args(["netns", "exec", &ns, "nft", "list", "tables"])
            .output()
            .unwrap();
        assert!(
            !String::from_utf8_lossy(&out.stdout).contains("throttle"),
            "node {n} has nftables rules: {}",
            String::from_utf8_lossy(&out.stdout)
        );
    }
    let status = status_json(&s.0);
    assert_eq!(status[0]["intercepted"]["preload_port"], 7602, "{status}");
    assert_eq!(status[0]["intercepted"]["kernel"], false, "{status}");

    // Blocking and non-blocking connects, and a child started by fork and exec.
    let mut delivered = 0;
    for (i, mode) in [&["connect"][..], &["connect", "nonblocking"], &["spawn"]]
        .iter()
        .enumerate()
    {
        let port = format!("{}", 6000 + i);
        let server = serve(&s, "n1", &format!("198.18.64.2:{port}"), &[]);
        let dst = format!("198.18.64.2:{port}");
        let mut args = vec![mode[0], dst.as_str()];
        args.extend_from_slice(&mode[1..]);
        let client = exec(&s, "n0", &args, &[]);
        let server = server.wait_with_output().unwrap();
        let (c, sv) = (text(&client), text(&server));
        assert!(client.status.success(), "{mode:?}: {c}\nserver: {sv}");
        assert!(c.contains("echo=ok"), "{mode:?}: {c}");
        assert!(
            c.contains(&format!("peer={dst}")),
            "{mode:?}: the client's getpeername names the server: {c}"
        );
        // The server sees the client's own address and port, in accept and getpeername.
        let local = c
            .split_whitespace()
            .find_map(|w| w.strip_prefix("local="))
            .unwrap();
        assert!(local.starts_with("198.18.64.1:"), "{mode:?}: {c}");
        assert!(
            sv.contains(&format!("accepted={local} getpeername={local}")),
            "{mode:?}: the server sees the client ({local}): {sv}"
        );
        delivered += 1;
    }
    assert_eq!(intercepted(&s.0, 0, "outgoing"), delivered);
    assert_eq!(intercepted(&s.0, 1, "incoming"), delivered);

    // Without the receiver-side rewrite, the server sees the agent's connection from its
    // own node's address: what Open MPI refuses. The rewrite is what makes it right.
    let server = serve(
        &s,
        "n1",
        "198.18.64.2:6100",
        &[("THROTTLE_PRELOAD_PEER_REWRITE", "0")],
    );
    let client = exec(&s, "n0", &["connect", "198.18.64.2:6100"], &[]);
    let sv = text(&server.wait_with_output().unwrap());
    assert!(client.status.success(), "{}", text(&client));
    assert!(
        sv.contains("accepted=198.18.64.2:"),
        "without the rewrite the peer is the receiving node itself: {sv}"
    );

    // Nothing listens there: the errno a direct connect would give, blocking or not.
    for mode in [&["connect"][..], &["connect", "nonblocking"]] {
        let mut args = vec![mode[0], "198.18.64.2:6200"];
        args.extend_from_slice(&mode[1..]);
        let c = text(&exec(&s, "n0", &args, &[]));
        assert!(c.contains("error=ECONNREFUSED"), "{mode:?}: {c}");
    }

    // `run --cmd --intercept preload`: a command that starts its processes with `exec`
    // is carried (no warning); one that talks to nowhere is warned about.
    let probe = probe();
    let line = format!(
        "{ctl} exec n1 -- {probe} serve 198.18.64.2:6400 & sleep 1; {ctl} exec n0 -- {probe} connect 198.18.64.2:6400; wait",
        ctl = exe().display()
    );
    let out = ctl(
        &s.0,
        &[
            "run",
            "--nodes",
            "2",
            "--intercept",
            "preload",
            "--cmd",
            &line,
        ],
    );
    let t = text(&out);
    assert!(out.status.success() && t.contains("echo=ok"), "{t}");
    assert!(!t.contains("no connection of this command"), "{t}");
    let out = ctl(&s.0, &["run", "--nodes", "2", "--cmd", "sleep 0.1"]);
    let t = text(&out);
    assert!(
        out.status.success()
            && t.contains("no connection of this command between nodes went through the agents"),
        "{t}"
    );

    // No agent where the library looks: it says so, and the program still runs (direct,
    // unthrottled, uncounted).
    let before = intercepted(&s.0, 0, "outgoing");
    let server = serve(&s, "n1", "198.18.64.2:6300", &[]);
    let client = exec(
        &s,
        "n0",
        &["connect", "198.18.64.2:6300"],
        &[("THROTTLE_PRELOAD_AGENT", "127.0.0.1:1")],
    );
    server.wait_with_output().unwrap();
    let c = text(&client);
    assert!(client.status.success() && c.contains("echo=ok"), "{c}");
    assert!(c.contains("NOT throttled"), "a visible warning: {c}");
    assert_eq!(intercepted(&s.0, 0, "outgoing"), before);

    // Another user listening where the library looks for its agent (squatting the port
    // while no agent runs) is not trusted with the program's connections.
    let ns = netns_of(&s.0, 0);
    let mut squatter = as_user(&ns, throttle_testkit::user::NOBODY)
        .args([&probe, "serve", "127.0.0.1:7700"])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut first = [0u8; 10];
    std::io::Read::read_exact(squatter.stdout.as_mut().unwrap(), &mut first).unwrap();
    let server = serve(&s, "n1", "198.18.64.2:6500", &[]);
    let client = exec(
        &s,
        "n0",
        &["connect", "198.18.64.2:6500"],
        &[("THROTTLE_PRELOAD_AGENT", "127.0.0.1:7700")],
    );
    server.wait_with_output().unwrap();
    let _ = squatter.kill();
    let _ = squatter.wait();
    let c = text(&client);
    assert!(client.status.success() && c.contains("echo=ok"), "{c}");
    assert!(
        c.contains("belongs to uid 65534") && c.contains("NOT throttled"),
        "{c}"
    );

    // The preload port admits a bounded number of connections in their request (each
    // may read the socket table): past it, a flood of idle ones evicts its own oldest
    // (they are turned away and counted as refused), and the agent keeps answering.
    // Without the cap all of them were held.
    let before = status_json(&s.0)[0]["refused_connections"]
        .as_u64()
        .unwrap();
    let cap = 256; // throttle_agent::limits::PRELOAD_HANDSHAKES
    let idle = in_node(&netns_of(&s.0, 0), move || {
        (0..cap + 150)
            .filter_map(|_| std::net::TcpStream::connect("127.0.0.1:7602").ok())
            .collect::<Vec<_>>()
    });
    assert!(idle.len() > cap, "only {} connections opened", idle.len());
    let refused = status_json(&s.0)[0]["refused_connections"]
        .as_u64()
        .unwrap()
        - before;
    assert!(
        refused >= 100,
        "{refused} of {} idle connections refused (cap {cap})",
        idle.len()
    );
    drop(idle);
}

/// The acceptance test: the MPI program of the kernel redirect's test across four
/// namespace hosts with the preload library only (no nftables rules): correct results,
/// every byte between nodes through the agents, slower as the bandwidth drops; and Open
/// MPI refuses the connections when the receiver-side rewrite is off.
#[test]
fn open_mpi_runs_with_the_preload_library_alone() {
    let test = "open_mpi_runs_with_the_preload_library_alone";
    if !can_run(test) || !have_mpi(test) {
        return;
    }
    let _serial = serial();
    let subnet = "198.18.65.0/24";
    let s = up_netns_with("preload-mpi", 4, subnet, &["--intercept", "preload"]);
    build_mpi(&s, subnet, 4);
    const BYTES: u64 = 8 << 20;
    let bytes = BYTES.to_string();
    let run = |pct: &str| -> String {
        mpi_run(&s, subnet, 4, &["./mpitest", &bytes], pct, &[], 120)
            .unwrap_or_else(|e| panic!("{e}"))
    };
    let egress = || -> u64 {
        (0..4)
            .map(|n| status_json(&s.0)[n]["egress"]["bytes"].as_u64().unwrap())
            .sum()
    };
    let before = egress();
    let full = run("unlimited");
    let slow = run("10");
    for line in [&full, &slow] {
        assert_eq!(field(line, "ranks"), "4");
        assert_eq!(field(line, "data"), "ok", "{line}");
        assert_eq!(field(line, "allreduce"), "ok", "{line}");
    }
    let carried = egress() - before;
    assert!(
        carried >= 2 * BYTES,
        "the agents carried {carried} bytes, the program sent at least {}",
        2 * BYTES
    );
    let outgoing: u64 = (0..4).map(|n| intercepted(&s.0, n, "outgoing")).sum();
    let incoming: u64 = (0..4).map(|n| intercepted(&s.0, n, "incoming")).sum();
    assert!(outgoing >= 3, "{outgoing} intercepted connections");
    assert_eq!(outgoing, incoming);
    let slow_rate: f64 = field(&slow, "rate_Bps").parse().unwrap();
    assert!(
        slow_rate < 12.5e6 * 1.15 && slow_rate > 12.5e6 * 0.5,
        "MPI bandwidth loop at 10%: {:.2} MB/s, set to 12.5 MB/s ({slow})",
        slow_rate / 1e6
    );
    let (t_full, t_slow): (f64, f64) = (
        field(&full, "seconds").parse().unwrap(),
        field(&slow, "seconds").parse().unwrap(),
    );
    assert!(
        t_slow > 2.0 * t_full,
        "unlimited {t_full} s, 10% {t_slow} s"
    );

    // The receiver-side rewrite off: Open MPI sees connections from the receiving node's
    // own address, not the peer's, and drops them.
    let refused = mpi_run(
        &s,
        subnet,
        2,
        &["./mpitest", "1000000"],
        "unlimited",
        &[("THROTTLE_PRELOAD_PEER_REWRITE", "0")],
        // It hangs after saying so.
        15,
    );
    match refused {
        Ok(line) => panic!("Open MPI ran without the rewrite: {line}"),
        Err(e) => assert!(e.contains("Known IPs of peer"), "{e}"),
    }
    let _ = ctl(&s.0, &["set", "unlimited"]);
}

/// A command run as `uid` (and the same gid), inside node `ns`.
fn as_user(ns: &str, uid: u32) -> Command {
    let mut c = Command::new("ip");
    c.args(["netns", "exec", ns])
        .args(throttle_testkit::user::as_user_words(uid));
    c
}

/// An agent of an ordinary user (no root, as on a shared cluster) serves only that user's
/// programs on its preload port, and delivers only to that user's listeners: its
/// deliveries come from the node's own address, which other users' services must not be
/// made to see.
#[test]
fn an_ordinary_users_agents_serve_and_deliver_to_that_user_only() {
    let test = "an_ordinary_users_agents_serve_and_deliver_to_that_user_only";
    if !can_run(test) {
        return;
    }
    let _serial = serial();
    // The namespaces of a cluster; its root agents stay on their ports, and a second pair
    // of agents runs beside them as uid 65534 ("nobody") on other ports.
    let s = up_netns_with(
        "preload-user",
        2,
        "198.18.66.0/24",
        &["--intercept", "preload"],
    );
    const USER: u32 = throttle_testkit::user::NOBODY;
    let home = s.0.join("user");
    std::fs::create_dir(&home).unwrap();
    std::fs::copy(s.0.join(".throttle-local/token"), home.join("token")).unwrap();
    for p in [home.clone(), home.join("token")] {
        nix::unistd::chown(&p, Some(USER.into()), Some(USER.into())).unwrap();
    }
    // Reachable by the user (the scratch directory is the test's).
    let mut dir = s.0.clone();
    while dir != std::path::Path::new("/tmp") && dir.parent().is_some() {
        let _ = std::fs::set_permissions(&dir, std::os::unix::fs::PermissionsExt::from_mode(0o755));
        dir = dir.parent().unwrap().to_path_buf();
    }
    std::fs::set_permissions(&home, std::os::unix::fs::PermissionsExt::from_mode(0o700)).unwrap();
    let agent = bin_dir().join("throttle-agent");
    let mut agents = Vec::new();
    for n in 0..2 {
        let me = format!("198.18.66.{}", n + 1);
        let other = format!("198.18.66.{}", 2 - n);
        let ready = home.join(format!("u{n}.ready"));
        let mut child = as_user(&netns_of(&s.0, n), USER);
        child
            .arg(&agent)
            .args(["--node", &format!("n{n}"), "--capacity", "1Gbit"])
            .args([
                "--control",
                &format!("{me}:7610"),
                "--data",
                &format!("{me}:7611"),
            ])
            .args(["--peer", &format!("n{}={other}:7611", 1 - n)])
            .args(["--preload", "--preload-port", "7612"])
            .arg("--token-file")
            .arg(home.join("token"))
            .arg("--local-socket")
            .arg(home.join(format!("u{n}.sock")))
            .env("RUST_LOG", "throttle_agent=debug")
            .stderr(std::fs::File::create(s.0.join(format!("user-n{n}.log"))).unwrap());
        agents.push(throttle_testkit::agent::start(
            child,
            &ready,
            &format!("the user's agent n{n}"),
        ));
    }
    let (n0, n1) = (netns_of(&s.0, 0), netns_of(&s.0, 1));
    let run = |ns: &str, uid: u32, args: &[&str]| -> Output {
        as_user(ns, uid)
            .arg(probe())
            .args(args)
            .env("LD_PRELOAD", preload_lib())
            .env("THROTTLE_PRELOAD_AGENT", "127.0.0.1:7612")
            .output()
            .unwrap()
    };
    // The preload port answers its own user, and not another one (a client that skips the
    // library's own check of the port's owner).
    let own = text(&run(&n0, USER, &["ask-nodes", "127.0.0.1:7612"]));
    assert!(own.contains("nodes=1"), "{own}");
    let other = text(&run(&n0, USER - 1, &["ask-nodes", "127.0.0.1:7612"]));
    assert!(other.contains("refused="), "{other}");

    // A listener of the same user on the other node is reached, through the agents.
    let spawn_server = |uid: u32, port: &str| {
        let mut c = as_user(&n1, uid)
            .arg(probe())
            .args(["serve", &format!("198.18.66.2:{port}")])
            .env("LD_PRELOAD", preload_lib())
            .env("THROTTLE_PRELOAD_AGENT", "127.0.0.1:7612")
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let mut first = [0u8; 10];
        std::io::Read::read_exact(c.stdout.as_mut().unwrap(), &mut first).unwrap();
        c
    };
    let logs = || {
        (0..2)
            .map(|n| {
                std::fs::read_to_string(s.0.join(format!("user-n{n}.log"))).unwrap_or_default()
            })
            .collect::<Vec<_>>()
            .join("\n")
    };
    let mut server = spawn_server(USER, "6600");
    let c = text(&run(&n0, USER, &["connect", "198.18.66.2:6600"]));
    if !c.contains("echo=ok") {
        let _ = server.kill();
        let _ = server.wait();
        panic!("{c}\nthe user's agents:\n{}", logs());
    }
    let sv = text(&server.wait_with_output().unwrap());
    assert!(sv.contains("accepted=198.18.66.1:"), "{sv}");
    // Root's listener there is not: the agent refuses, the program gets EACCES.
    let mut server = spawn_server(0, "6601");
    let c = text(&run(&n0, USER, &["connect", "198.18.66.2:6601"]));
    let _ = server.kill();
    let _ = server.wait();
    assert!(c.contains("error=EACCES"), "{c}");
    drop(agents);
}
