//! Namespace hosts: a local cluster whose nodes are network namespaces on a bridge, each
//! with its own address from 198.18.0.0/15 (the range reserved for network benchmarking),
//! so unmodified programs see separate hosts and their traffic can be intercepted
//! (`throttle-ctl local up --netns`, `throttle-ctl exec`).
//!
//! Layout for a cluster with tag `T` on subnet `198.18.S.0/24`:
//!
//! ```text
//! bridge thrT (198.18.S.254)  <- this host: the controller reaches the agents here
//!   veth thrTn0 <-> eth0 in namespace throttle-T-n0 (198.18.S.1, default route via .254)
//!   veth thrTn1 <-> eth0 in namespace throttle-T-n1 (198.18.S.2)
//! ```
//!
//! Everything is made with iproute2's `ip` (what an operator would type and can inspect),
//! and removed by [`remove`], which ignores what is already gone: a `down` after a crash or
//! a half-finished `up` or `down` cleans up what is left.

use std::net::Ipv4Addr;
use std::path::Path;
use std::process::{Command, Stdio};

use anyhow::{anyhow, bail, Context, Result};

/// The addresses and names of one namespace cluster.
#[derive(Clone, Debug, PartialEq)]
pub struct Layout {
    /// Short tag that names this cluster's namespaces and links.
    pub tag: String,
    /// The /24 the nodes live in (198.18.0.0/15 only).
    pub subnet: Ipv4Addr,
    pub nodes: usize,
}

impl Layout {
    pub fn bridge(&self) -> String {
        format!("thr{}", self.tag)
    }
    pub fn namespace(&self, i: usize) -> String {
        format!("throttle-{}-n{i}", self.tag)
    }
    fn host_veth(&self, i: usize) -> String {
        format!("thr{}n{i}", self.tag)
    }
    /// The address of node `i` (.1, .2, ...).
    pub fn node_addr(&self, i: usize) -> Ipv4Addr {
        Ipv4Addr::from(u32::from(self.subnet) + 1 + i as u32)
    }
    /// This host's address on the bridge (.254).
    pub fn host_addr(&self) -> Ipv4Addr {
        Ipv4Addr::from(u32::from(self.subnet) + 254)
    }
}

/// Most namespace hosts of one cluster (a /24, less this host's address).
pub const MAX_NODES: usize = 250;

/// Whether `tag` is one [`tag_for`] makes (five lowercase hex digits).
pub fn is_tag(tag: &str) -> bool {
    tag.len() == 5
        && tag
            .bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

/// A short tag from the state directory's path, so two clusters in two directories get
/// different names and the same directory always the same ones.
pub fn tag_for(dir: &Path) -> String {
    // FNV-1a: stable across builds and platforms (std's hasher is not).
    let mut h: u32 = 0x811c_9dc5;
    for b in dir.as_os_str().as_encoded_bytes() {
        h ^= *b as u32;
        h = h.wrapping_mul(0x0100_0193);
    }
    format!("{:05x}", h & 0xf_ffff)
}

/// Parse `198.18.S.0/24` (the prefix may be left out); only 198.18.0.0/15.
pub fn parse_subnet(text: &str) -> Result<Ipv4Addr> {
    let addr = text.strip_suffix("/24").unwrap_or(text);
    let ip: Ipv4Addr = addr
        .parse()
        .map_err(|_| anyhow!("--subnet `{text}` is not an IPv4 /24 like 198.18.7.0/24"))?;
    let o = ip.octets();
    if o[0] != 198 || !(o[1] == 18 || o[1] == 19) || o[3] != 0 {
        bail!("--subnet `{text}`: namespace hosts use a /24 of 198.18.0.0/15 (reserved for network benchmarking), e.g. 198.18.7.0/24; never a private or public range");
    }
    Ok(ip)
}

/// The first /24 of 198.18.0.0/15 that no interface of this host uses.
pub fn free_subnet() -> Result<Ipv4Addr> {
    let out = ip_output(&["-4", "-o", "addr", "show"])?;
    for second in [18u8, 19] {
        for third in 0..=255u8 {
            let prefix = format!(" 198.{second}.{third}.");
            if !out.contains(&prefix) {
                return Ok(Ipv4Addr::new(198, second, third, 0));
            }
        }
    }
    bail!("every /24 of 198.18.0.0/15 is in use on this host; pass --subnet or take clusters down")
}

/// What `--netns` needs: root and iproute2's `ip` and nftables' `nft` (the agents'
/// interception rules). The error names what is missing.
pub fn check_prerequisites() -> Result<()> {
    if !nix::unistd::geteuid().is_root() {
        bail!("`local up --netns` needs root: it creates network namespaces, veth links, a bridge and nftables rules (run it as root or with sudo)");
    }
    for (tool, package) in [("ip", "iproute2"), ("nft", "nftables")] {
        let found = Command::new(tool)
            .arg("-V")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok();
        if !found {
            bail!("`local up --netns` needs `{tool}`, which is not installed (Debian: apt-get install {package})");
        }
    }
    Ok(())
}

fn ip(args: &[&str]) -> Result<()> {
    let out = Command::new("ip")
        .args(args)
        .stdin(Stdio::null())
        .output()
        .with_context(|| "cannot run `ip` (install iproute2)".to_string())?;
    if !out.status.success() {
        bail!(
            "`ip {}` failed: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(())
}

fn ip_output(args: &[&str]) -> Result<String> {
    let out = Command::new("ip")
        .args(args)
        .stdin(Stdio::null())
        .output()
        .with_context(|| "cannot run `ip` (install iproute2)".to_string())?;
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// The largest segment burst (GSO) on namespace hosts' links with kernel-paced links:
/// the kernel lets the first burst of a message leave unpaced, and at veth's default of
/// 64 KiB a 64 KiB ping-pong took half its serialization at 30% of 1 Gbit/s; at 16 KiB,
/// 64 KiB to 4 MiB at 10-100% within 2.7%, and one unpaced stream still carries 11.5
/// Gbit/s here (4 KiB: within 1.5% at 30%, but 1.5 Gbit/s;
/// experiments/2026-12-02-kernel-links.md).
pub const KERNEL_PACED_GSO: u32 = 16 * 1024;

/// Create the bridge, the namespaces and their links (with `gso_max_size`, each link's
/// largest segment burst at that, both ends). On failure, removes what it made.
pub fn create(layout: &Layout, gso_max_size: Option<u32>) -> Result<()> {
    if Path::new("/run/netns").join(layout.namespace(0)).exists() {
        bail!(
            "namespace {} exists already: a namespace cluster from this state directory is up or was not taken down; run `throttle-ctl local down`",
            layout.namespace(0)
        );
    }
    let prefix = {
        let o = layout.subnet.octets();
        format!(" {}.{}.{}.", o[0], o[1], o[2])
    };
    if ip_output(&["-4", "-o", "addr", "show"])?.contains(&prefix) {
        bail!(
            "the subnet {}/24 is already in use on this host (`ip -4 addr` lists it): choose another with --subnet, or take the other cluster down",
            layout.subnet
        );
    }
    let made = (|| -> Result<()> {
        let bridge = layout.bridge();
        let host = format!("{}/24", layout.host_addr());
        ip(&["link", "add", &bridge, "type", "bridge"])?;
        ip(&["addr", "add", &host, "dev", &bridge])?;
        ip(&["link", "set", &bridge, "up"])?;
        for i in 0..layout.nodes {
            let ns = layout.namespace(i);
            let veth = layout.host_veth(i);
            let addr = format!("{}/24", layout.node_addr(i));
            let gw = layout.host_addr().to_string();
            ip(&["netns", "add", &ns])?;
            ip(&[
                "link", "add", &veth, "type", "veth", "peer", "name", "eth0", "netns", &ns,
            ])?;
            ip(&["link", "set", &veth, "master", &bridge, "up"])?;
            ip(&["-n", &ns, "link", "set", "lo", "up"])?;
            ip(&["-n", &ns, "addr", "add", &addr, "dev", "eth0"])?;
            ip(&["-n", &ns, "link", "set", "eth0", "up"])?;
            ip(&["-n", &ns, "route", "add", "default", "via", &gw])?;
            if let Some(gso) = gso_max_size {
                let gso = gso.to_string();
                ip(&["link", "set", "dev", &veth, "gso_max_size", &gso])?;
                ip(&[
                    "-n",
                    &ns,
                    "link",
                    "set",
                    "dev",
                    "eth0",
                    "gso_max_size",
                    &gso,
                ])?;
            }
        }
        Ok(())
    })();
    if let Err(e) = made {
        remove(layout);
        return Err(e.context("cannot create the namespace hosts (removed what was made)"));
    }
    Ok(())
}

/// The processes in the network namespace `ns`.
pub fn pids(ns: &str) -> Vec<i32> {
    ip_output(&["netns", "pids", ns])
        .unwrap_or_default()
        .split_whitespace()
        .filter_map(|p| p.parse::<i32>().ok())
        .collect()
}

/// End the programs in the namespaces except `spared` (the agents): SIGTERM, then SIGKILL
/// to what is left after two seconds.
pub fn end_programs(layout: &Layout, spared: &[i32]) {
    let others = || -> Vec<i32> {
        (0..layout.nodes)
            .flat_map(|i| pids(&layout.namespace(i)))
            .filter(|p| !spared.contains(p))
            .collect()
    };
    for sig in [
        nix::sys::signal::Signal::SIGTERM,
        nix::sys::signal::Signal::SIGKILL,
    ] {
        for p in others() {
            let _ = nix::sys::signal::kill(nix::unistd::Pid::from_raw(p), sig);
        }
        let start = std::time::Instant::now();
        while !others().is_empty() && start.elapsed() < std::time::Duration::from_secs(2) {
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
    }
}

/// Remove the namespaces (killing what still runs in them) and the bridge. What is
/// already gone is no error; running it twice is fine.
pub fn remove(layout: &Layout) {
    for i in 0..layout.nodes {
        let ns = layout.namespace(i);
        if !Path::new("/run/netns").join(&ns).exists() {
            let _ = ip(&["link", "del", &layout.host_veth(i)]);
            continue;
        }
        for pid in ip_output(&["netns", "pids", &ns])
            .unwrap_or_default()
            .split_whitespace()
            .filter_map(|p| p.parse::<i32>().ok())
        {
            let _ = nix::sys::signal::kill(
                nix::unistd::Pid::from_raw(pid),
                nix::sys::signal::Signal::SIGKILL,
            );
        }
        // The veth pair first: deleting a namespace frees its links later, asynchronously.
        let _ = ip(&["link", "del", &layout.host_veth(i)]);
        let _ = ip(&["netns", "del", &ns]);
    }
    let _ = ip(&["link", "del", &layout.bridge()]);
}

/// Enter the network namespace `name` (this thread; the process if single-threaded).
pub fn enter(name: &str) -> Result<()> {
    if !throttle_proto::name::is_valid(name) {
        bail!("`{}` is not a namespace name", name.escape_debug());
    }
    let path = Path::new("/run/netns").join(name);
    let f = std::fs::File::open(&path).map_err(|e| {
        anyhow!(
            "cannot open the namespace {} ({e}); is the cluster up (`throttle-ctl local up --netns`), and are you root?",
            path.display()
        )
    })?;
    nix::sched::setns(f, nix::sched::CloneFlags::CLONE_NEWNET).map_err(|e| {
        anyhow!("cannot enter the namespace {name}: {e} (entering a namespace needs root)")
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_fit_the_kernel_and_addresses_stay_in_the_benchmarking_range() {
        let l = Layout {
            tag: tag_for(Path::new("/tmp/some/dir")),
            subnet: parse_subnet("198.19.4.0/24").unwrap(),
            nodes: 250,
        };
        // Interface names: at most 15 bytes (IFNAMSIZ - 1).
        assert!(l.bridge().len() <= 15 && l.host_veth(249).len() <= 15);
        assert_eq!(l.node_addr(0), Ipv4Addr::new(198, 19, 4, 1));
        assert_eq!(l.node_addr(249), Ipv4Addr::new(198, 19, 4, 250));
        assert_eq!(l.host_addr(), Ipv4Addr::new(198, 19, 4, 254));
        assert_eq!(tag_for(Path::new("/a")), tag_for(Path::new("/a")));
        assert!(is_tag(&tag_for(Path::new("/x/y"))));
        assert!(!is_tag("../x") && !is_tag("ABCDE") && !is_tag("abc"));
        assert_ne!(tag_for(Path::new("/a")), tag_for(Path::new("/b")));
        for bad in [
            "10.0.0.0/24",
            "192.168.1.0",
            "198.20.0.0/24",
            "198.18.0.5",
            "x",
        ] {
            assert!(parse_subnet(bad).is_err(), "{bad}");
        }
    }
}
