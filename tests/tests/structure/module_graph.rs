//! No import circles: within each crate, no module reaches itself through the modules it
//! uses. A module may use its ancestors (a child uses its parent's types: the parent is
//! the child's context); any other cycle means two concepts that cannot be understood,
//! tested or changed apart.
//!
//! The graph is read from the source as Rust (syn): every `use` and every path in the
//! code that names a module of the crate (`crate::`, `super::`, `self::`), resolved to
//! the deepest module it names.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use syn::visit::Visit;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// `src/a/b.rs` and `src/a/b/mod.rs` are module `a::b`; `src/lib.rs` is the root ("").
fn module_of(src: &Path, file: &Path) -> Option<Vec<String>> {
    let rel = file.strip_prefix(src).ok()?;
    let mut parts: Vec<String> = rel
        .iter()
        .map(|p| p.to_string_lossy().into_owned())
        .collect();
    let last = parts.pop()?;
    match last.as_str() {
        "lib.rs" if parts.is_empty() => {}
        "main.rs" => return None,
        "mod.rs" => {}
        other => parts.push(other.strip_suffix(".rs")?.to_string()),
    }
    // Binaries are their own crates.
    if parts.first().is_some_and(|p| p == "bin") {
        return None;
    }
    Some(parts)
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

/// Every path a file names, as segments, with `crate`/`super`/`self` resolved against
/// the file's module.
struct Paths<'a> {
    here: &'a [String],
    found: Vec<Vec<String>>,
}

impl Paths<'_> {
    fn resolve(&mut self, segs: Vec<String>) {
        let mut out: Vec<String> = Vec::new();
        let mut it = segs.into_iter().peekable();
        match it.peek().map(String::as_str) {
            Some("crate") => {
                it.next();
            }
            Some("self") => {
                it.next();
                out = self.here.to_vec();
            }
            Some("super") => {
                out = self.here.to_vec();
                while it.peek().map(String::as_str) == Some("super") {
                    it.next();
                    out.pop();
                }
            }
            // A path relative to this module: `child::f`.
            _ => out = self.here.to_vec(),
        }
        out.extend(it);
        self.found.push(out);
    }

    fn use_tree(&mut self, prefix: &mut Vec<String>, tree: &syn::UseTree) {
        match tree {
            syn::UseTree::Path(p) => {
                prefix.push(p.ident.to_string());
                self.use_tree(prefix, &p.tree);
                prefix.pop();
            }
            syn::UseTree::Name(n) => {
                let mut segs = prefix.clone();
                if n.ident != "self" {
                    segs.push(n.ident.to_string());
                }
                self.resolve(segs);
            }
            syn::UseTree::Rename(r) => {
                let mut segs = prefix.clone();
                segs.push(r.ident.to_string());
                self.resolve(segs);
            }
            syn::UseTree::Glob(_) => self.resolve(prefix.clone()),
            syn::UseTree::Group(g) => {
                for t in &g.items {
                    self.use_tree(prefix, t);
                }
            }
        }
    }
}

impl<'ast> Visit<'ast> for Paths<'_> {
    fn visit_item_use(&mut self, u: &'ast syn::ItemUse) {
        self.use_tree(&mut Vec::new(), &u.tree);
    }

    fn visit_path(&mut self, p: &'ast syn::Path) {
        if p.segments.len() > 1 && p.leading_colon.is_none() {
            self.resolve(p.segments.iter().map(|s| s.ident.to_string()).collect());
        }
        syn::visit::visit_path(self, p);
    }

    // Tests may use anything: they are not part of the module's design.
    fn visit_item_mod(&mut self, m: &'ast syn::ItemMod) {
        let is_test = m.attrs.iter().any(|a| {
            a.path().is_ident("cfg") && a.parse_args::<syn::Ident>().is_ok_and(|i| i == "test")
        });
        if !is_test {
            syn::visit::visit_item_mod(self, m);
        }
    }
}

/// The crate's module graph: module -> modules it uses (ancestors left out).
fn graph(krate: &str) -> BTreeMap<String, BTreeSet<String>> {
    let src = root().join(krate).join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    let modules: BTreeMap<Vec<String>, PathBuf> = files
        .iter()
        .filter_map(|f| module_of(&src, f).map(|m| (m, f.clone())))
        .collect();
    let mut edges: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for (here, file) in &modules {
        let text = std::fs::read_to_string(file).unwrap();
        let ast = syn::parse_file(&text)
            .unwrap_or_else(|e| panic!("{} does not parse: {e}", file.display()));
        let mut paths = Paths {
            here,
            found: Vec::new(),
        };
        paths.visit_file(&ast);
        let from = here.join("::");
        let entry = edges.entry(from.clone()).or_default();
        for p in paths.found {
            // The deepest module the path names.
            let Some(target) = (0..=p.len())
                .rev()
                .map(|n| &p[..n])
                .find(|m| modules.contains_key(*m))
            else {
                continue;
            };
            let is_ancestor_or_self = here.starts_with(target);
            if !is_ancestor_or_self {
                entry.insert(target.join("::"));
            }
        }
    }
    edges
}

/// Strongly connected components with more than one module (Tarjan).
fn cycles(g: &BTreeMap<String, BTreeSet<String>>) -> Vec<Vec<String>> {
    struct Tarjan<'a> {
        g: &'a BTreeMap<String, BTreeSet<String>>,
        index: BTreeMap<&'a str, usize>,
        low: BTreeMap<&'a str, usize>,
        stack: Vec<&'a str>,
        on_stack: BTreeSet<&'a str>,
        next: usize,
        out: Vec<Vec<String>>,
    }
    impl<'a> Tarjan<'a> {
        fn visit(&mut self, v: &'a str) {
            self.index.insert(v, self.next);
            self.low.insert(v, self.next);
            self.next += 1;
            self.stack.push(v);
            self.on_stack.insert(v);
            for w in self.g.get(v).into_iter().flatten() {
                let w = w.as_str();
                if !self.index.contains_key(w) {
                    self.visit(w);
                    let lw = self.low[w];
                    let lv = self.low.get_mut(v).unwrap();
                    *lv = (*lv).min(lw);
                } else if self.on_stack.contains(w) {
                    let iw = self.index[w];
                    let lv = self.low.get_mut(v).unwrap();
                    *lv = (*lv).min(iw);
                }
            }
            if self.low[v] == self.index[v] {
                let mut scc = Vec::new();
                while let Some(w) = self.stack.pop() {
                    self.on_stack.remove(w);
                    scc.push(w.to_string());
                    if w == v {
                        break;
                    }
                }
                if scc.len() > 1 {
                    scc.sort();
                    self.out.push(scc);
                }
            }
        }
    }
    let mut t = Tarjan {
        g,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on_stack: BTreeSet::new(),
        next: 0,
        out: Vec::new(),
    };
    for v in g.keys() {
        if !t.index.contains_key(v.as_str()) {
            t.visit(v);
        }
    }
    t.out
}

#[test]
fn the_cycle_finder_finds_a_cycle_and_allows_a_tree() {
    let g = |edges: &[(&str, &str)]| {
        let mut m: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
        for (a, b) in edges {
            m.entry(a.to_string()).or_default().insert(b.to_string());
            m.entry(b.to_string()).or_default();
        }
        m
    };
    assert_eq!(
        cycles(&g(&[("a", "b"), ("b", "c"), ("c", "a"), ("c", "d")])),
        vec![vec!["a".to_string(), "b".into(), "c".into()]]
    );
    assert!(cycles(&g(&[("a", "b"), ("a", "c"), ("b", "c")])).is_empty());
}

#[test]
fn the_graph_sees_uses_and_inline_paths() {
    // The analysis's traffic model uses the model search (a `use`) and the demand's first
    // crossing (an inline `crate::method::demand::first_crossing` path).
    let g = graph("throttle-analysis");
    let traffic = &g["method::traffic"];
    assert!(traffic.contains("method::normal_form"), "{traffic:?}");
    assert!(traffic.contains("method::demand"), "{traffic:?}");
    assert!(
        !traffic.contains("method"),
        "its parent is left out: {traffic:?}"
    );
}

#[test]
fn no_crate_has_an_import_circle() {
    let mut found = Vec::new();
    // Every crate of the workspace with a library (`cargo metadata`).
    let crates: Vec<String> = throttle_tests::workspace::crates()
        .into_iter()
        .filter(|c| c.has_lib)
        .map(|c| c.folder)
        .collect();
    assert!(crates.len() >= 6, "{crates:?}");
    for krate in &crates {
        for scc in cycles(&graph(krate)) {
            found.push(format!("{krate}: {}", scc.join(" <-> ")));
        }
    }
    assert!(
        found.is_empty(),
        "modules that reach themselves through their uses:\n{}",
        found.join("\n")
    );
}
