//! The workspace as Cargo sees it (`cargo metadata`): its crates, their folders and which
//! of each other each depends on. The structure tests (`architecture.rs`,
//! `module_graph.rs`) read it, so that a crate added to the workspace is checked without
//! anyone adding it to a list.

use std::path::PathBuf;
use std::process::Command;

/// One crate of the workspace.
#[derive(Clone, Debug)]
pub struct Crate {
    /// The package's name (`throttle-tests`).
    pub name: String,
    /// Its folder's name under the workspace root (`tests`): how ARCHITECTURE.md names it.
    pub folder: String,
    pub dir: PathBuf,
    /// The workspace crates it depends on, by folder, in any section (sorted).
    pub uses: Vec<String>,
    /// Whether it has a library target (whose modules may import each other).
    pub has_lib: bool,
}

/// Every crate of the workspace, by folder name.
pub fn crates() -> Vec<Crate> {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let out = Command::new(cargo)
        .args([
            "metadata",
            "--format-version",
            "1",
            "--no-deps",
            "--offline",
        ])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("cargo metadata runs");
    assert!(
        out.status.success(),
        "cargo metadata: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let meta: serde_json::Value = serde_json::from_slice(&out.stdout).expect("its JSON");
    let packages = meta["packages"].as_array().expect("packages");
    let dir_of = |p: &serde_json::Value| -> PathBuf {
        PathBuf::from(p["manifest_path"].as_str().expect("manifest_path"))
            .parent()
            .expect("a manifest's folder")
            .to_path_buf()
    };
    let folder = |d: &PathBuf| d.file_name().unwrap().to_string_lossy().into_owned();
    let by_name: std::collections::BTreeMap<&str, String> = packages
        .iter()
        .map(|p| (p["name"].as_str().unwrap(), folder(&dir_of(p))))
        .collect();
    let mut crates: Vec<Crate> = packages
        .iter()
        .map(|p| {
            let dir = dir_of(p);
            let mut uses: Vec<String> = p["dependencies"]
                .as_array()
                .into_iter()
                .flatten()
                .filter(|d| d["path"].is_string())
                .filter_map(|d| by_name.get(d["name"].as_str().unwrap_or_default()).cloned())
                .collect();
            uses.sort();
            uses.dedup();
            let has_lib = p["targets"].as_array().into_iter().flatten().any(|t| {
                t["kind"]
                    .as_array()
                    .is_some_and(|k| k.iter().any(|k| k == "lib" || k == "cdylib"))
            });
            Crate {
                name: p["name"].as_str().unwrap().to_string(),
                folder: folder(&dir),
                dir,
                uses,
                has_lib,
            }
        })
        .collect();
    crates.sort_by(|a, b| a.folder.cmp(&b.folder));
    crates
}
