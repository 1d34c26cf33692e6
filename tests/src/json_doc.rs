//! Checks that a command's `--json` output names only fields `docs/json.md` documents in
//! that command's section (after the conventions every output shares), and that every
//! interval has the one shape the document gives.

/// The section of docs/json.md headed with `command`'s `--json`, after the conventions.
fn section(command: &str) -> String {
    let doc =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/json.md")).unwrap();
    let head = format!("## `throttle-ctl {command} --json`");
    let from = doc
        .find(&head)
        .unwrap_or_else(|| panic!("docs/json.md has no section {head}"));
    let common = &doc[..doc.find("\n## ").unwrap()];
    let rest = &doc[from + head.len()..];
    format!(
        "{common}{}",
        &rest[..rest.find("\n## ").unwrap_or(rest.len())]
    )
}

/// Keys of `v` not named (as `` `key` ``, or `` `key[]` `` for an array) in the section;
/// with `deep`, of every object inside it too, except the free-form ones (`metrics`,
/// `detail`, `fidelity`).
fn undocumented(v: &serde_json::Value, section: &str, deep: bool, out: &mut Vec<String>) {
    match v {
        serde_json::Value::Object(m) => {
            if let (Some(_), Some(_), Some(c)) = (m.get("low"), m.get("high"), m.get("covers")) {
                assert_eq!(
                    m.len(),
                    3,
                    "an interval with more than low, high, covers: {v}"
                );
                let c = c.as_str().unwrap();
                assert!(
                    section.contains(&format!("`\"{c}\"`")),
                    "covers {c:?} not described"
                );
            }
            for (k, x) in m {
                let named =
                    section.contains(&format!("`{k}`")) || section.contains(&format!("`{k}[]`"));
                if !named && !out.contains(k) {
                    out.push(k.clone());
                }
                if deep && !["metrics", "detail", "fidelity"].contains(&k.as_str()) {
                    undocumented(x, section, deep, out);
                }
            }
        }
        serde_json::Value::Array(a) => {
            for x in a {
                undocumented(x, section, deep, out);
            }
        }
        _ => {}
    }
}

/// Fails unless every field `v` (the output of `throttle-ctl COMMAND --json`) prints is
/// named in the command's section: at every depth with `deep`, else the top level (of
/// the value, or of each object of an array).
pub fn check(command: &str, v: &serde_json::Value, deep: bool) {
    let mut missing = Vec::new();
    undocumented(v, &section(command), deep, &mut missing);
    assert!(
        missing.is_empty(),
        "`{command} --json` prints fields docs/json.md does not name: {missing:?}"
    );
}
