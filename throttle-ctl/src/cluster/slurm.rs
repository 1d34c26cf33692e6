//! What Slurm says about the nodes of a job: the address it reaches each node at.
//!
//! `cluster init --slurm` names the nodes as `SLURM_JOB_NODELIST` does. A node's name need
//! not resolve where the controller runs (a cluster whose `slurm.conf` gives every node a
//! `NodeAddr`, namespace hosts in the tests): Slurm's own `NodeAddr` is the address it
//! reaches the node at, and so the one the agents are given.

use std::collections::HashMap;
use std::process::Command;

/// `NodeName -> NodeAddr` from `scontrol -o show node` output (one node per line,
/// `Key=Value` fields).
pub fn node_addrs(text: &str) -> HashMap<String, String> {
    let mut out = HashMap::new();
    for line in text.lines() {
        let field = |key: &str| {
            line.split_whitespace()
                .find_map(|w| w.strip_prefix(key)?.strip_prefix('='))
                .filter(|v| !v.is_empty() && *v != "(null)")
        };
        if let (Some(name), Some(addr)) = (field("NodeName"), field("NodeAddr")) {
            out.insert(name.to_string(), addr.to_string());
        }
    }
    out
}

/// The `NodeAddr` of every node Slurm knows, or an empty map when `scontrol` cannot be
/// asked (not installed, no controller): the names are then resolved as host names.
pub fn ask_node_addrs() -> HashMap<String, String> {
    Command::new("scontrol")
        .args(["-o", "show", "node"])
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| node_addrs(&String::from_utf8_lossy(&o.stdout)))
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn node_addresses_are_read_from_scontrol() {
        // Slurm 22.05's `scontrol -o show node`, shortened.
        let text = "NodeName=n1 Arch=x86_64 CoresPerSocket=2 CPUAlloc=0 NodeAddr=198.19.10.1 NodeHostName=n1 Version=22.05.8 State=IDLE\n\
                    NodeName=n2 Arch=x86_64 NodeAddr=198.19.10.2 NodeHostName=n2 State=IDLE\n\
                    NodeName=n3 NodeAddr= State=DOWN\n\
                    garbage line\n";
        let m = node_addrs(text);
        assert_eq!(m.get("n1").map(String::as_str), Some("198.19.10.1"));
        assert_eq!(m.get("n2").map(String::as_str), Some("198.19.10.2"));
        assert_eq!(m.len(), 2, "{m:?}");
    }
}
