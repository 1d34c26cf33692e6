//! Host lists as schedulers and MPI write them: Slurm's bracket syntax
//! (`node[01-04,07],login1`, as in `SLURM_JOB_NODELIST`) and hostfiles (Open MPI's
//! `host slots=4`, MPICH's `host:4`, Slurm's one host per task). `cluster init` builds a
//! cluster file from them.

use anyhow::{bail, Result};

/// The most hosts a list may expand to (a typo like `n[1-99999999]` must not eat memory).
pub const MAX_HOSTS: usize = 100_000;

/// Expand a Slurm host list: top-level commas separate items; each `[...]` group holds
/// numbers and ranges (`01-04,07`), zero-padded to the width of the range's first number,
/// and several groups in one item multiply (`r[1-2]n[1-2]`: r1n1 r1n2 r2n1 r2n2).
/// Duplicates are dropped, order kept.
pub fn expand(list: &str) -> Result<Vec<String>> {
    let mut out: Vec<String> = Vec::new();
    for item in split_top(list)? {
        let item = item.trim();
        if item.is_empty() {
            continue;
        }
        let mut hosts = vec![String::new()];
        let mut rest = item;
        while !rest.is_empty() {
            match rest.find('[') {
                None => {
                    for h in &mut hosts {
                        h.push_str(rest);
                    }
                    rest = "";
                }
                Some(open) => {
                    let (head, tail) = rest.split_at(open);
                    let Some(close) = tail.find(']') else {
                        bail!("`{item}`: a `[` without its `]`");
                    };
                    let numbers = group(&tail[1..close], item)?;
                    if hosts.len().saturating_mul(numbers.len()) > MAX_HOSTS {
                        bail!("`{item}` expands to more than {MAX_HOSTS} hosts");
                    }
                    hosts = hosts
                        .iter()
                        .flat_map(|h| numbers.iter().map(move |n| format!("{h}{head}{n}")))
                        .collect();
                    rest = &tail[close + 1..];
                }
            }
        }
        for h in hosts {
            if h.contains(']') {
                bail!("`{item}`: a `]` without its `[`");
            }
            if !out.contains(&h) {
                out.push(h);
            }
            if out.len() > MAX_HOSTS {
                bail!("the host list expands to more than {MAX_HOSTS} hosts");
            }
        }
    }
    if out.is_empty() {
        bail!("the host list `{list}` names no host");
    }
    Ok(out)
}

/// Split at commas outside brackets.
fn split_top(list: &str) -> Result<Vec<&str>> {
    let mut parts = Vec::new();
    let (mut depth, mut start) = (0i32, 0);
    for (i, c) in list.char_indices() {
        match c {
            '[' => depth += 1,
            ']' => depth -= 1,
            ',' if depth == 0 => {
                parts.push(&list[start..i]);
                start = i + 1;
            }
            _ => {}
        }
        if depth < 0 {
            bail!("`{list}`: a `]` without its `[`");
        }
        if depth > 1 {
            bail!("`{list}`: brackets do not nest in a host list");
        }
    }
    if depth != 0 {
        bail!("`{list}`: a `[` without its `]`");
    }
    parts.push(&list[start..]);
    Ok(parts)
}

/// The numbers of one bracket group, as text (padded).
fn group(inner: &str, item: &str) -> Result<Vec<String>> {
    let mut out = Vec::new();
    for part in inner.split(',') {
        let part = part.trim();
        let (a, b) = part.split_once('-').unwrap_or((part, part));
        let bad = || anyhow::anyhow!("`{item}`: `{part}` is not a number or a range like 01-04");
        if a.is_empty()
            || !a.bytes().all(|c| c.is_ascii_digit())
            || !b.bytes().all(|c| c.is_ascii_digit())
            || b.is_empty()
        {
            return Err(bad());
        }
        let (lo, hi): (u64, u64) = (a.parse().map_err(|_| bad())?, b.parse().map_err(|_| bad())?);
        if lo > hi {
            bail!("`{item}`: the range {part} runs backwards");
        }
        if (hi - lo) as usize >= MAX_HOSTS {
            bail!("`{item}`: the range {part} is longer than {MAX_HOSTS} hosts");
        }
        let width = if a.len() > 1 && a.starts_with('0') {
            a.len()
        } else {
            0
        };
        out.extend((lo..=hi).map(|n| format!("{n:0width$}")));
    }
    Ok(out)
}

/// The hosts of a hostfile, in order, each once: the first word of every line that is
/// not blank or a comment, without an MPICH `:slots` suffix (Open MPI's `slots=N` and
/// other words are ignored).
pub fn hostfile(text: &str) -> Result<Vec<String>> {
    let mut out: Vec<String> = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let line = line.split('#').next().unwrap_or("").trim();
        let Some(word) = line.split_whitespace().next() else {
            continue;
        };
        let host = word.split(':').next().unwrap_or(word);
        if host.is_empty() {
            bail!("line {}: `{word}` names no host", i + 1);
        }
        if !out.iter().any(|h| h == host) {
            out.push(host.to_string());
        }
        if out.len() > MAX_HOSTS {
            bail!("the hostfile lists more than {MAX_HOSTS} hosts");
        }
    }
    if out.is_empty() {
        bail!("the hostfile lists no host");
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slurm_lists_expand_as_slurm_does() {
        assert_eq!(
            expand("node[01-03]").unwrap(),
            ["node01", "node02", "node03"]
        );
        assert_eq!(
            expand("n[1,3-4],login1").unwrap(),
            ["n1", "n3", "n4", "login1"]
        );
        assert_eq!(
            expand("node[8-11]").unwrap(),
            ["node8", "node9", "node10", "node11"]
        );
        assert_eq!(
            expand("node[08-11]").unwrap(),
            ["node08", "node09", "node10", "node11"]
        );
        assert_eq!(
            expand("r[1-2]n[1-2]").unwrap(),
            ["r1n1", "r1n2", "r2n1", "r2n2"]
        );
        assert_eq!(expand("gpu[1-2]-ib").unwrap(), ["gpu1-ib", "gpu2-ib"]);
        assert_eq!(
            expand("198.18.70.[1-3]").unwrap(),
            ["198.18.70.1", "198.18.70.2", "198.18.70.3"]
        );
        assert_eq!(expand("a,a,b").unwrap(), ["a", "b"]);
    }

    #[test]
    fn bad_lists_are_explained() {
        for (bad, hint) in [
            ("node[1-3", "without its `]`"),
            ("node1-3]", "without its `[`"),
            ("node[3-1]", "backwards"),
            ("node[a-b]", "not a number"),
            ("node[1-]", "not a number"),
            ("node[[1]]", "nest"),
            ("n[1-99999999]", "longer than"),
            ("n[1-1000]m[1-1000]", "more than"),
            (",", "names no host"),
        ] {
            let e = expand(bad).unwrap_err().to_string();
            assert!(e.contains(hint), "{bad}: {e}");
        }
    }

    #[test]
    fn hostfiles_of_open_mpi_mpich_and_slurm() {
        let ompi = "# the cluster\nnode01 slots=4 max_slots=8\n\nnode02 slots=4 # second\n";
        assert_eq!(hostfile(ompi).unwrap(), ["node01", "node02"]);
        assert_eq!(hostfile("a:4\nb:4\n").unwrap(), ["a", "b"]);
        // Slurm's SLURM_HOSTFILE: one line per task.
        assert_eq!(hostfile("a\na\nb\nb\n").unwrap(), ["a", "b"]);
        assert!(hostfile("# nothing\n\n")
            .unwrap_err()
            .to_string()
            .contains("no host"));
        assert!(hostfile(":4\n").unwrap_err().to_string().contains("line 1"));
    }
}
