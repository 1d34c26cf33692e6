//! Each flow's share of the links it crosses: max-min fair, as a network of links gives
//! its TCP flows their share when the kernel paces each flow instead of an agent pacing
//! the node.
//!
//! In the kernel-paced mode (`services::pacing`) no agent carries the program's bytes:
//! each sending socket is paced by the kernel at a rate the agent sets. That rate is the
//! flow's share of every link it crosses: its node's egress and its peer's ingress today,
//! and any shared link (an oversubscribed uplink) as one more entry of its list. The
//! shares are max-min fair (water-filling): every link's capacity is split evenly among
//! the flows still unconstrained that cross it, the most constrained link's flows are
//! fixed at its even split, and the rest is shared again among the others. Only flows
//! that are sending count; an idle flow is given what it would get if it started now.
//!
//! [`node_rates`] builds the links and groups from every node's [`FlowRow`]: node `i`'s
//! egress and ingress are two links, a flow from `a` to `b` crosses `a`'s egress and
//! `b`'s ingress.
//!
//! Pure: no clock, no I/O. Every agent runs the same computation over the same flows (each
//! tells the others its own), so they agree without a coordinator.

use std::collections::HashMap;

use throttle_proto::flows::{FlowRow, UNLIMITED};
use throttle_proto::name::Name;

/// The rate of one of `own`'s sockets to each of `dests` (`None`: unlimited), from every
/// node's row (`own`'s among them): max-min fair over the flows that send now, and for a
/// destination none of `own`'s sockets sends to, what one that started would get. A node
/// without a row has unlimited links (its agent has not told them yet).
pub fn node_rates(
    own: &Name,
    rows: &[(Name, FlowRow)],
    dests: &[Name],
) -> HashMap<Name, Option<f64>> {
    let mut index: HashMap<&Name, usize> = HashMap::new();
    let mut names: Vec<&Name> = Vec::new();
    for n in std::iter::once(own)
        .chain(rows.iter().map(|(n, _)| n))
        .chain(
            rows.iter()
                .flat_map(|(_, r)| r.flows.iter().map(|(d, _)| d)),
        )
        .chain(dests.iter())
    {
        if !index.contains_key(n) {
            index.insert(n, names.len());
            names.push(n);
        }
    }
    let rate = |r: u64| {
        if r == UNLIMITED {
            f64::INFINITY
        } else {
            r as f64
        }
    };
    let mut caps = vec![f64::INFINITY; 2 * names.len()];
    for (n, row) in rows {
        let i = index[n];
        caps[2 * i] = rate(row.egress);
        caps[2 * i + 1] = rate(row.ingress);
    }
    let mut groups = Vec::new();
    let mut mine: Vec<(&Name, usize)> = Vec::new();
    for (n, row) in rows {
        let a = index[n];
        for (d, count) in &row.flows {
            let b = index[d];
            if a == b || *count == 0 {
                continue;
            }
            if n == own {
                mine.push((d, groups.len()));
            }
            groups.push(Group {
                count: *count,
                links: vec![2 * a, 2 * b + 1],
            });
        }
    }
    let a = index[own];
    for d in dests {
        let b = index[d];
        if a != b && !mine.iter().any(|(m, _)| *m == d) {
            mine.push((d, groups.len()));
            groups.push(Group {
                count: 0,
                links: vec![2 * a, 2 * b + 1],
            });
        }
    }
    let rates = max_min(&caps, &groups);
    mine.into_iter()
        .map(|(d, g)| (d.clone(), rates[g].is_finite().then_some(rates[g])))
        .collect()
}

/// A group of `count` flows that cross the same links (indices into the capacities).
#[derive(Clone, Debug, PartialEq)]
pub struct Group {
    pub count: u32,
    pub links: Vec<usize>,
}

/// The max-min fair rate of one flow of each group, in the capacities' unit
/// (`f64::INFINITY` for a group whose links are all unlimited, or that crosses none).
/// Capacities may be `f64::INFINITY` (an unlimited link); a group with a count of 0 is
/// given the rate one more flow of it would get.
pub fn max_min(capacities: &[f64], groups: &[Group]) -> Vec<f64> {
    let mut rates = fill(capacities, groups);
    // An idle group: what one more flow of it would get, the others as they are.
    for (g, group) in groups.iter().enumerate() {
        if group.count == 0 {
            let mut more = groups.to_vec();
            more[g].count = 1;
            rates[g] = fill(capacities, &more)[g];
        }
    }
    rates
}

/// Water-filling over the groups that have flows (the others' rates are left infinite).
fn fill(capacities: &[f64], groups: &[Group]) -> Vec<f64> {
    let mut rates = vec![f64::INFINITY; groups.len()];
    let mut fixed = vec![false; groups.len()];
    // Capacity each link has left for its unfixed flows.
    let mut left: Vec<f64> = capacities.iter().map(|c| c.max(0.0)).collect();
    loop {
        // Unfixed flows per link.
        let mut crossing = vec![0u64; capacities.len()];
        for (g, group) in groups.iter().enumerate() {
            if !fixed[g] && group.count > 0 {
                for &l in &group.links {
                    if l < crossing.len() {
                        crossing[l] += u64::from(group.count);
                    }
                }
            }
        }
        // The most constrained link: the smallest even split among its unfixed flows.
        let tightest = (0..capacities.len())
            .filter(|&l| crossing[l] > 0 && left[l].is_finite())
            .map(|l| (l, left[l] / crossing[l] as f64))
            .min_by(|a, b| a.1.total_cmp(&b.1));
        let Some((link, share)) = tightest else {
            break;
        };
        for (g, group) in groups.iter().enumerate() {
            if fixed[g] || group.count == 0 || !group.links.contains(&link) {
                continue;
            }
            fixed[g] = true;
            rates[g] = share;
            for &l in &group.links {
                if l < left.len() {
                    left[l] = (left[l] - share * f64::from(group.count)).max(0.0);
                }
            }
        }
    }
    rates
}

#[cfg(test)]
mod tests {
    use super::*;

    fn g(count: u32, links: &[usize]) -> Group {
        Group {
            count,
            links: links.to_vec(),
        }
    }

    fn close(a: &[f64], b: &[f64]) -> bool {
        a.len() == b.len() && a.iter().zip(b).all(|(x, y)| (x - y).abs() < 1e-9)
    }

    #[test]
    fn flows_into_one_node_share_its_ingress() {
        // Links: egress of n0..n3 (0-3), ingress of n0..n3 (4-7), all 100.
        let caps = [100.0; 8];
        // Incast: n1, n2, n3 each send one flow to n0.
        let r = max_min(&caps, &[g(1, &[1, 4]), g(1, &[2, 4]), g(1, &[3, 4])]);
        assert!(close(&r, &[100.0 / 3.0; 3]), "{r:?}");
        // Seven flows out of one node to seven others: a seventh of its egress each.
        let caps = [100.0; 16];
        let out: Vec<Group> = (1..8).map(|d| g(1, &[0, 8 + d])).collect();
        assert!(close(&max_min(&caps, &out), &[100.0 / 7.0; 7]));
    }

    #[test]
    fn what_one_link_leaves_goes_to_the_others() {
        // n0 sends to n1 and to n2; n3 also sends to n1. n1's ingress (50) is the tighter:
        // its two flows get 25 each; n0's other flow gets what n0's egress (100) has left.
        // Links: 0 egress n0, 1 egress n3, 2 ingress n1 (50), 3 ingress n2.
        let caps = [100.0, 100.0, 50.0, 100.0];
        let r = max_min(&caps, &[g(1, &[0, 2]), g(1, &[0, 3]), g(1, &[1, 2])]);
        assert!(close(&r, &[25.0, 75.0, 25.0]), "{r:?}");
        // Two flows in one group split alike.
        let r = max_min(&caps, &[g(2, &[0, 3])]);
        assert!(close(&r, &[50.0]), "{r:?}");
    }

    fn name(s: &str) -> Name {
        Name::parse("node", s).unwrap()
    }

    fn row(rate: u64, flows: &[(&str, u32)]) -> FlowRow {
        FlowRow {
            egress: rate,
            ingress: rate,
            flows: flows.iter().map(|(d, c)| (name(d), *c)).collect(),
        }
    }

    #[test]
    fn nodes_share_from_their_rows() {
        // Incast: n1, n2 and n3 each send to n0 (all links 90): a third of n0's ingress.
        let rows = vec![
            (name("n0"), row(90, &[])),
            (name("n1"), row(90, &[("n0", 1)])),
            (name("n2"), row(90, &[("n0", 1)])),
            (name("n3"), row(90, &[("n0", 1), ("n2", 1)])),
        ];
        let r = node_rates(&name("n1"), &rows, &[name("n0"), name("n2")]);
        assert!((r[&name("n0")].unwrap() - 30.0).abs() < 1e-9, "{r:?}");
        // n1 sends nothing to n2: a socket that starts gets half of n2's ingress (n3's
        // other flow to n2 keeps 60 of it meanwhile, n3's egress being 30 + 60).
        assert!((r[&name("n2")].unwrap() - 45.0).abs() < 1e-9, "{r:?}");
        let r3 = node_rates(&name("n3"), &rows, &[]);
        assert!((r3[&name("n2")].unwrap() - 60.0).abs() < 1e-9, "{r3:?}");
        // A destination whose agent has not told its links: only the sender's egress.
        let r = node_rates(&name("n0"), &[(name("n0"), row(50, &[("n9", 2)]))], &[]);
        assert!((r[&name("n9")].unwrap() - 25.0).abs() < 1e-9, "{r:?}");
        // Unlimited everywhere: no limit.
        let r = node_rates(
            &name("n0"),
            &[(name("n0"), row(UNLIMITED, &[("n1", 1)]))],
            &[],
        );
        assert_eq!(r[&name("n1")], None);
    }

    #[test]
    fn unlimited_links_and_idle_groups() {
        let inf = f64::INFINITY;
        // An unlimited egress: the ingress decides; both unlimited: no limit at all.
        assert!(close(&max_min(&[inf, 40.0], &[g(1, &[0, 1])]), &[40.0]));
        assert_eq!(max_min(&[inf, inf], &[g(1, &[0, 1])]), vec![inf]);
        // An idle flow is given what it would get once it sends: half of the link the
        // other uses, and the sending one keeps all of it meanwhile.
        let r = max_min(&[100.0, 100.0, 100.0], &[g(1, &[0, 1]), g(0, &[0, 2])]);
        assert!(close(&r, &[100.0, 50.0]), "{r:?}");
        // No flows at all: nothing to compute, and a link index out of range is ignored.
        assert!(max_min(&[100.0], &[]).is_empty());
        assert!(close(&max_min(&[100.0], &[g(1, &[0, 9])]), &[100.0]));
    }
}
