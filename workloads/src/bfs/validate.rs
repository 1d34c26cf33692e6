//! The five Graph500 validation rules for one BFS result.
//!
//! Input: the parent and level of every vertex (`-1` = not reached) and the generated edge
//! list. Checked in order, the first broken rule is reported with its number:
//! 1. the parents form a tree rooted at the search key (no cycles, every chain ends there);
//! 2. tree edges join vertices whose levels differ by exactly one;
//! 3. every input edge joins vertices whose levels differ by at most one (or neither is
//!    reached);
//! 4. the tree spans the key's connected component (no edge leaves the reached set);
//! 5. every tree edge (v, parent(v)) is an edge of the input graph.

/// A broken rule.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("validation rule {rule} failed: {message}")]
pub struct ValidationError {
    pub rule: u8,
    pub message: String,
}

fn fail<T>(rule: u8, message: String) -> Result<T, ValidationError> {
    Err(ValidationError { rule, message })
}

/// Validate; on success returns the number of input edges in the traversed component
/// (self-loops excluded), the edge count TEPS is computed from.
pub fn validate(
    parent: &[i64],
    level: &[i64],
    root: u32,
    edges: &[(u32, u32)],
) -> Result<u64, ValidationError> {
    let n = parent.len();
    let root = root as usize;
    if level.len() != n || root >= n {
        return fail(1, "parent and level arrays do not match the graph".into());
    }
    check_tree(parent, level, root)?;
    check_tree_levels(parent, level, root)?;
    let (in_component, parent_edge_seen) = check_input_edges(parent, level, edges)?;
    // Rule 5: every tree edge is an edge of the input graph.
    for v in 0..n {
        if parent[v] >= 0 && v != root && !parent_edge_seen[v] {
            return fail(
                5,
                format!("tree edge ({v}, {}) is not an edge of the graph", parent[v]),
            );
        }
    }
    Ok(in_component)
}

/// Rule 1: the parents form a tree rooted at `root` (no cycles, every chain ends there).
fn check_tree(parent: &[i64], level: &[i64], root: usize) -> Result<(), ValidationError> {
    let n = parent.len();
    if parent[root] != root as i64 || level[root] != 0 {
        return fail(
            1,
            format!("the root {root} must be its own parent at level 0"),
        );
    }
    // state: 0 = unknown, 1 = on the current path, 2 = reaches the root.
    let mut state = vec![0u8; n];
    state[root] = 2;
    let mut path = Vec::new();
    for start in 0..n {
        if parent[start] < 0 || state[start] == 2 {
            continue;
        }
        let mut v = start;
        path.clear();
        while state[v] == 0 {
            state[v] = 1;
            path.push(v);
            let p = parent[v];
            if p < 0 || p as usize >= n {
                return fail(
                    1,
                    format!("vertex {v} has parent {p}, which is not a reached vertex"),
                );
            }
            v = p as usize;
        }
        if state[v] == 1 {
            return fail(
                1,
                format!("the parents of vertex {start} run in a cycle through {v}"),
            );
        }
        for &u in &path {
            state[u] = 2;
        }
    }
    Ok(())
}

/// Rule 2: tree edges span exactly one level.
fn check_tree_levels(parent: &[i64], level: &[i64], root: usize) -> Result<(), ValidationError> {
    for v in 0..parent.len() {
        if parent[v] >= 0 && v != root {
            let p = parent[v] as usize;
            if level[v] != level[p] + 1 {
                return fail(
                    2,
                    format!(
                        "tree edge ({v}, {p}) joins levels {} and {}",
                        level[v], level[p]
                    ),
                );
            }
        }
    }
    Ok(())
}

/// Rules 3 and 4 over the input edges. Returns the edges inside the component (self-loops
/// excluded) and, for rule 5, which vertices' tree edges were found among them.
fn check_input_edges(
    parent: &[i64],
    level: &[i64],
    edges: &[(u32, u32)],
) -> Result<(u64, Vec<bool>), ValidationError> {
    let mut parent_edge_seen = vec![false; parent.len()];
    let mut in_component = 0u64;
    for &(a, b) in edges {
        let (a, b) = (a as usize, b as usize);
        let (ra, rb) = (parent[a] >= 0, parent[b] >= 0);
        if ra != rb {
            return fail(
                4,
                format!(
                    "edge ({a}, {b}) leaves the tree: {} is reached, {} is not",
                    if ra { a } else { b },
                    if ra { b } else { a }
                ),
            );
        }
        if !ra {
            continue;
        }
        if (level[a] - level[b]).abs() > 1 {
            return fail(
                3,
                format!("edge ({a}, {b}) joins levels {} and {}", level[a], level[b]),
            );
        }
        if a != b {
            in_component += 1;
        }
        if parent[a] == b as i64 {
            parent_edge_seen[a] = true;
        }
        if parent[b] == a as i64 {
            parent_edge_seen[b] = true;
        }
    }
    Ok((in_component, parent_edge_seen))
}

/// A reference sequential BFS (tests): parent and level of every vertex.
pub fn sequential_bfs(n: usize, edges: &[(u32, u32)], root: u32) -> (Vec<i64>, Vec<i64>) {
    let mut adj = vec![Vec::new(); n];
    for &(a, b) in edges {
        adj[a as usize].push(b);
        adj[b as usize].push(a);
    }
    let mut parent = vec![-1i64; n];
    let mut level = vec![-1i64; n];
    parent[root as usize] = root as i64;
    level[root as usize] = 0;
    let mut q = std::collections::VecDeque::from([root as usize]);
    while let Some(v) = q.pop_front() {
        for &w in &adj[v] {
            let w = w as usize;
            if parent[w] < 0 {
                parent[w] = v as i64;
                level[w] = level[v] + 1;
                q.push_back(w);
            }
        }
    }
    (parent, level)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rule(r: Result<u64, ValidationError>) -> u8 {
        r.err().map(|e| e.rule).unwrap_or(0)
    }

    #[test]
    fn a_correct_bfs_passes_and_counts_its_component() {
        let edges = [(0, 1), (1, 2), (0, 2), (3, 4), (2, 2)];
        let (p, l) = sequential_bfs(5, &edges, 0);
        assert_eq!(validate(&p, &l, 0, &edges), Ok(3));
    }

    #[test]
    fn rule_1_catches_a_cycle() {
        let edges = [(0, 1), (1, 2), (2, 3), (3, 1)];
        let (mut p, l) = sequential_bfs(4, &edges, 0);
        p[1] = 3; // 1 -> 3 -> 2 -> 1
        p[3] = 2;
        p[2] = 1;
        assert_eq!(rule(validate(&p, &l, 0, &edges)), 1);
    }

    #[test]
    fn rule_1_catches_a_wrong_root() {
        let edges = [(0, 1)];
        let (mut p, l) = sequential_bfs(2, &edges, 0);
        p[0] = 1;
        assert_eq!(rule(validate(&p, &l, 0, &edges)), 1);
    }

    #[test]
    fn rule_2_catches_a_tree_edge_skipping_a_level() {
        let edges = [(0, 1), (1, 2)];
        let (p, mut l) = sequential_bfs(3, &edges, 0);
        l[2] = 3;
        assert_eq!(rule(validate(&p, &l, 0, &edges)), 2);
    }

    #[test]
    fn rule_3_catches_an_edge_spanning_two_levels() {
        let edges = [(0, 1), (1, 2), (0, 2)];
        let (mut p, mut l) = sequential_bfs(3, &edges, 0);
        p[2] = 1; // a valid tree, but not breadth-first: edge (0, 2) spans levels 0 and 2
        l[2] = 2;
        assert_eq!(rule(validate(&p, &l, 0, &edges)), 3);
    }

    #[test]
    fn rule_4_catches_a_missed_vertex_of_the_component() {
        let edges = [(0, 1), (1, 2)];
        let (mut p, mut l) = sequential_bfs(3, &edges, 0);
        p[2] = -1;
        l[2] = -1;
        assert_eq!(rule(validate(&p, &l, 0, &edges)), 4);
    }

    #[test]
    fn rule_5_catches_a_parent_that_is_not_a_neighbour() {
        let edges = [(0, 1), (0, 2), (1, 3)];
        let (mut p, l) = sequential_bfs(4, &edges, 0);
        p[3] = 2; // level 1 like 1, but (2, 3) is no edge
        assert_eq!(rule(validate(&p, &l, 0, &edges)), 5);
    }
}
