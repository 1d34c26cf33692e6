//! The node's egress queue (`--egress-device`, kernel-paced links on a host of its own:
//! a namespace host's `eth0`, as root): what closes the first-burst gap of kernel pacing.
//!
//! Linux paces a socket by delaying the segment burst *after* the one it sends, so each
//! message after a pause leaves its first burst (a 16 KiB GSO segment on a namespace
//! host's link) at once, and a 16 KiB ping-pong at 10% of 1 Gbit/s took 0.55-0.73 of its
//! serialization (decision 0050, "Egress queue on namespace hosts"). Here the device gets an `htb` root whose
//! unclassified traffic goes out directly (the agents' own streams, the controller's
//! requests) and one class, [`CLASS`], whose leaf is a `tbf` at the link's rate: the agent
//! puts every socket it paces into that class (`SO_PRIORITY`), and `tbf`, whose bucket
//! holds two packets, splits each burst into the device's packets and sends each when it
//! is due. The sockets keep their shares (`SO_MAX_PACING_RATE`): the queue only holds the
//! node's egress, and each socket's share still holds its peer's ingress. A priority the
//! program gave its socket is replaced.
//!
//! The `tc` program does the work (iproute2, which every operator has and can read:
//! `tc -s qdisc show dev eth0`). This kernel has no `prio` qdisc, hence `htb` with a
//! `tbf` leaf, of which the kernel logs once per leaf that it is "non-work-conserving"
//! (it is, by design; `htb` polls it again when `tbf`'s timer fires).

use std::process::{Command, Stdio};

/// The `SO_PRIORITY` of a paced socket: `htb` class 1:2, whose leaf is the link's `tbf`
/// (a priority naming one of the root's classes selects it without a filter).
pub const CLASS: u32 = 0x0001_0002;
/// Bytes a `tbf` may hold queued: far above what the paced sockets' own pacing and the
/// kernel's small-queue limit leave there (their shares sum to the link's rate), so it
/// never drops.
pub const LIMIT: u64 = 32 * 1024 * 1024;
/// The bucket holds at least this long of the link (where two packets are less): at
/// 1 Gbit/s a two-packet bucket lost a tenth of the rate to the timer's jitter here.
pub const BURST_TIME_US: u64 = 64;

/// A device's egress queue, installed by [`EgressQueue::install`].
#[derive(Debug)]
pub struct EgressQueue {
    device: String,
    mtu: u32,
    /// The kind of the class's leaf now (`tbf` or `bfifo`): `tc` replaces a leaf with
    /// one of its own kind only.
    leaf: std::sync::Mutex<Option<&'static str>>,
    /// The rate [`set`](Self::set) was last asked for (`Some(None)`: unlimited), whether
    /// `tc` took it or not: a failure is tried again at the next change, not at every
    /// pass (each costs a process).
    asked: std::sync::Mutex<Option<Option<f64>>>,
}

/// What the `tbf` is set to for a link of `payload` bytes per second on a device of
/// `mtu`: its rate in bits per second of frames (a full segment carries `mtu - 52` bytes
/// of payload in `mtu + 14` bytes on the wire: IP and TCP headers with timestamps, and
/// Ethernet's) and its bucket in bytes.
pub fn tbf_settings(payload: f64, mtu: u32) -> (u64, u64) {
    let frame = f64::from(mtu + 14);
    let carried = f64::from(mtu.saturating_sub(52).max(1));
    let bytes = payload * frame / carried;
    let burst = (2.0 * frame).max(bytes * BURST_TIME_US as f64 / 1e6);
    ((bytes * 8.0).round().max(8.0) as u64, burst.ceil() as u64)
}

/// A network device name as the kernel allows it: 1-15 bytes, none of `/`, `:` or
/// whitespace (the operator's flag, checked before it reaches `tc`).
pub fn check_device(name: &str) -> Result<(), String> {
    if name.is_empty()
        || name.len() > 15
        || name == "."
        || name == ".."
        || name.starts_with('-')
        || name
            .chars()
            .any(|c| c == '/' || c == ':' || c.is_whitespace() || c.is_control())
    {
        return Err(format!(
            "`{name}` is not a network device name (1-15 characters, none of / : or spaces)"
        ));
    }
    Ok(())
}

fn tc(args: &[&str]) -> Result<(), String> {
    let out = Command::new("tc")
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .output()
        .map_err(|e| match e.kind() {
            std::io::ErrorKind::NotFound => {
                "`tc` is not installed (the egress queue needs iproute2's tc; Debian: apt-get install iproute2)".to_string()
            }
            _ => format!("cannot run `tc`: {e}"),
        })?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "`tc {}` failed: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}

impl EgressQueue {
    /// Replace `device`'s root qdisc with the queue, its class unlimited until
    /// [`set`](Self::set) (needs CAP_NET_ADMIN in the device's namespace).
    pub fn install(device: &str) -> Result<EgressQueue, String> {
        check_device(device)?;
        let mtu = std::fs::read_to_string(format!("/sys/class/net/{device}/mtu"))
            .map_err(|e| format!("no network device `{device}` here: {e}"))?
            .trim()
            .parse::<u32>()
            .map_err(|e| format!("cannot read the MTU of `{device}`: {e}"))?;
        // Replacing the root removes what a crashed agent left.
        let _ = tc(&["qdisc", "del", "dev", device, "root"]);
        tc(&["qdisc", "add", "dev", device, "root", "handle", "1:", "htb"])?;
        // The class itself never holds anything back (its leaf does): a rate above any
        // link, and a quantum set so that htb does not warn of its own.
        tc(&[
            "class", "add", "dev", device, "parent", "1:", "classid", "1:2", "htb", "rate",
            "100gbit", "ceil", "100gbit", "burst", "1mb", "quantum", "200000",
        ])?;
        let q = EgressQueue {
            device: device.to_string(),
            mtu,
            leaf: std::sync::Mutex::new(None),
            asked: std::sync::Mutex::new(None),
        };
        q.set(None)?;
        Ok(q)
    }

    /// The device the queue is on.
    pub fn device(&self) -> &str {
        &self.device
    }

    /// Whether [`set`](Self::set) was last asked for `payload` (nothing to do then).
    pub fn asked_for(&self, payload: Option<f64>) -> bool {
        *self.asked.lock().unwrap_or_else(|e| e.into_inner()) == Some(payload)
    }

    /// Hold the class to `payload` bytes per second (`None`: unlimited, a plain FIFO).
    pub fn set(&self, payload: Option<f64>) -> Result<(), String> {
        *self.asked.lock().unwrap_or_else(|e| e.into_inner()) = Some(payload);
        let dev = self.device.as_str();
        let limit = LIMIT.to_string();
        let (bits, burst);
        let (kind, params): (&'static str, Vec<&str>) = match payload {
            Some(r) if r.is_finite() && r > 0.0 => {
                let (b, u) = tbf_settings(r, self.mtu);
                (bits, burst) = (format!("{b}bit"), u.to_string());
                ("tbf", vec!["rate", &bits, "burst", &burst, "limit", &limit])
            }
            _ => ("bfifo", vec!["limit", &limit]),
        };
        let mut leaf = self.leaf.lock().unwrap_or_else(|e| e.into_inner());
        let verb = if *leaf == Some(kind) {
            "replace"
        } else {
            // Another kind: the old leaf goes first (what it held is dropped, and TCP
            // sends it again; the kind changes only with a link's setting).
            if leaf.is_some() {
                tc(&["qdisc", "del", "dev", dev, "parent", "1:2", "handle", "12:"])?;
                *leaf = None;
            }
            "add"
        };
        let mut args = vec![
            "qdisc", verb, "dev", dev, "parent", "1:2", "handle", "12:", kind,
        ];
        args.extend(params);
        tc(&args)?;
        *leaf = Some(kind);
        Ok(())
    }

    /// Take the queue off the device (the agent stopping).
    pub fn remove(&self) {
        let _ = tc(&["qdisc", "del", "dev", &self.device, "root"]);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_queue_counts_the_wire_bytes_of_full_segments_and_holds_two_packets_or_64_us() {
        // 10% of 1 Gbit/s of payload on a 1500-byte MTU: 1448 bytes in 1514 on the wire.
        let (bits, burst) = tbf_settings(12.5e6, 1500);
        assert_eq!(bits, (12.5e6 * 8.0 * 1514.0 / 1448.0_f64).round() as u64);
        assert_eq!(burst, 3028);
        // 1 Gbit/s: 64 us of it is more than two packets.
        let (_, burst) = tbf_settings(125e6, 1500);
        assert_eq!(burst, (125e6 * 1514.0 / 1448.0 * 64e-6_f64).ceil() as u64);
        assert!(burst > 3028);
    }

    #[test]
    fn a_device_name_that_is_not_one_is_refused() {
        for bad in [
            "",
            "a/b",
            "eth0 root",
            "-x",
            "..",
            "abcdefghijklmnop",
            "a:b",
        ] {
            assert!(check_device(bad).is_err(), "{bad}");
        }
        for good in ["eth0", "veth-n0.1", "enp0s3"] {
            assert!(check_device(good).is_ok(), "{good}");
        }
    }
}
