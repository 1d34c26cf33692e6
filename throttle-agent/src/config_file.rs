//! The agent's configuration file: TOML whose keys are the command-line flags without
//! their dashes (`control = "10.0.0.1:7600"`, `allow_program = ["/opt/app"]`), as slurmd
//! and node exporters are configured.
//!
//! Precedence: a flag on the command line, then the flag's environment variable (the few
//! a scheduler sets: `THROTTLE_NODE`, ...), then the file, then the default. The file is
//! turned into flags placed before the command line's, so clap checks every value the
//! same way and reports it the same way; a key that is not a flag is refused with the
//! list of keys. `--print-config` prints the effective values as such a file.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use clap::parser::ValueSource;
use clap::{ArgMatches, Command};

/// Flags that are not configuration (they act, or they name the file itself).
const NOT_KEYS: [&str; 4] = ["config", "print_config", "help", "version"];

/// The arguments that are settings (a long flag, not an action).
fn settings(cmd: &Command) -> impl Iterator<Item = &clap::Arg> {
    cmd.get_arguments()
        .filter(|a| !NOT_KEYS.contains(&a.get_id().as_str()) && a.get_long().is_some())
}

/// A setting's key: its flag without the dashes, `-` as `_` (`--allow-program`:
/// `allow_program`).
fn key_of(a: &clap::Arg) -> String {
    a.get_long().unwrap_or_default().replace('-', "_")
}

/// The value of `--config` in `argv`, if any.
pub fn config_path(argv: &[OsString]) -> Option<PathBuf> {
    let mut it = argv.iter();
    while let Some(a) = it.next() {
        let s = a.to_string_lossy();
        if s == "--config" {
            return it.next().map(PathBuf::from);
        }
        if let Some(v) = s.strip_prefix("--config=") {
            return Some(PathBuf::from(v));
        }
    }
    None
}

/// The flags a config file stands for, for `cmd` (keys checked against its arguments;
/// keys whose environment variable is set are left to the environment).
pub fn flags_from(cmd: &Command, path: &Path, text: &str) -> Result<Vec<OsString>, String> {
    let table: toml::Table = text
        .parse()
        .map_err(|e| format!("{}: not a TOML file: {e}", path.display()))?;
    let keys: Vec<String> = settings(cmd).map(key_of).collect();
    let mut out = Vec::new();
    for (key, value) in &table {
        let Some(arg) = settings(cmd).find(|a| key_of(a) == *key) else {
            return Err(format!(
                "{}: `{key}` is not a setting; the keys are: {}",
                path.display(),
                keys.join(", ")
            ));
        };
        if arg
            .get_env()
            .is_some_and(|var| std::env::var_os(var).is_some_and(|v| !v.is_empty()))
        {
            continue;
        }
        let flag = format!("--{}", arg.get_long().unwrap_or_default());
        let takes_value = arg.get_action().takes_values();
        let scalar = |v: &toml::Value| -> Result<String, String> {
            match v {
                toml::Value::String(s) => Ok(s.clone()),
                toml::Value::Integer(i) => Ok(i.to_string()),
                toml::Value::Float(f) => Ok(f.to_string()),
                toml::Value::Boolean(b) => Ok(b.to_string()),
                other => Err(format!(
                    "{}: `{key}` must be a string or a number, not {}",
                    path.display(),
                    other.type_str()
                )),
            }
        };
        match value {
            toml::Value::Boolean(b) if !takes_value => {
                if *b {
                    out.push(OsString::from(&flag));
                }
            }
            _ if !takes_value => {
                return Err(format!(
                    "{}: `{key}` is a switch: write {key} = true or false",
                    path.display()
                ))
            }
            toml::Value::Array(items) => {
                for item in items {
                    out.push(OsString::from(format!("{flag}={}", scalar(item)?)));
                }
            }
            // `--flag=value`: a value that starts with `-` stays a value.
            v => out.push(OsString::from(format!("{flag}={}", scalar(v)?))),
        }
    }
    Ok(out)
}

/// `argv` with the config file's flags inserted after the program name (the command
/// line's own flags come later and win).
pub fn expand(cmd: &Command, argv: Vec<OsString>) -> Result<Vec<OsString>, String> {
    let Some(path) = config_path(&argv) else {
        return Ok(argv);
    };
    let text = std::fs::read_to_string(&path)
        .map_err(|e| format!("cannot read the config file {}: {e}", path.display()))?;
    let flags = flags_from(cmd, &path, &text)?;
    let mut out = Vec::with_capacity(argv.len() + flags.len());
    let mut it = argv.into_iter();
    out.extend(it.next());
    out.extend(flags);
    out.extend(it);
    Ok(out)
}

/// The effective settings as a config file (`--print-config`): every setting with a
/// value, where it came from in a comment.
pub fn print(cmd: &Command, m: &ArgMatches) -> String {
    let mut out = String::from("# throttle-agent: effective settings (a valid --config file)\n");
    for a in settings(cmd) {
        let id = a.get_id().as_str();
        let key = key_of(a);
        // A default is printed as a comment: written back as a setting it would be an
        // explicit flag (and some flags require others).
        let hash = if m.value_source(id) == Some(ValueSource::DefaultValue) {
            "# "
        } else {
            ""
        };
        let source = match m.value_source(id) {
            Some(ValueSource::CommandLine) => "command line or config file",
            Some(ValueSource::EnvVariable) => "environment",
            Some(ValueSource::DefaultValue) => "default",
            _ => continue,
        };
        let takes_value = a.get_action().takes_values();
        if !takes_value {
            let on = m.get_flag(id);
            out.push_str(&format!("{hash}{key} = {on}  # {source}\n"));
            continue;
        }
        let Some(raw) = m.get_raw(id) else { continue };
        let values: Vec<String> = raw.map(|v| toml_value(&v.to_string_lossy())).collect();
        let multiple =
            a.get_action().takes_values() && matches!(a.get_action(), clap::ArgAction::Append);
        let text = if multiple {
            format!("[{}]", values.join(", "))
        } else {
            values.join(", ")
        };
        out.push_str(&format!("{hash}{key} = {text}  # {source}\n"));
    }
    out
}

/// A value as TOML: a number stays a number, anything else is a quoted string.
fn toml_value(v: &str) -> String {
    if v.parse::<i64>().is_ok() || (v.parse::<f64>().is_ok_and(f64::is_finite) && v.contains('.')) {
        v.to_string()
    } else {
        toml::Value::String(v.to_string()).to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::{Arg, ArgAction};

    fn cmd() -> Command {
        Command::new("agent")
            .args_override_self(true)
            .arg(Arg::new("node").long("node").env("TEST_CONFIG_NODE_VAR"))
            .arg(Arg::new("pct").long("pct").default_value("100"))
            .arg(Arg::new("peers").long("peer").action(ArgAction::Append))
            .arg(
                Arg::new("splice_off")
                    .long("no-splice")
                    .action(ArgAction::SetTrue),
            )
            .arg(Arg::new("config").long("config"))
            .arg(
                Arg::new("print_config")
                    .long("print-config")
                    .action(ArgAction::SetTrue),
            )
    }

    fn args(v: &[&str]) -> Vec<OsString> {
        v.iter().map(OsString::from).collect()
    }

    #[test]
    fn the_file_becomes_flags_that_the_command_line_overrides() {
        let dir = std::env::temp_dir().join(format!("throttle-config-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let f = dir.join("agent.toml");
        std::fs::write(&f, "node = \"n3\"\npct = 40\npeer = [\"a=1.2.3.4:1\", \"b=1.2.3.5:1\"]\nno_splice = true\n").unwrap();
        let argv = args(&["agent", "--config", f.to_str().unwrap(), "--pct", "20"]);
        let m = cmd()
            .try_get_matches_from(expand(&cmd(), argv).unwrap())
            .unwrap();
        assert_eq!(m.get_one::<String>("node").unwrap(), "n3");
        assert_eq!(m.get_one::<String>("pct").unwrap(), "20");
        assert_eq!(m.get_many::<String>("peers").unwrap().count(), 2);
        assert!(m.get_flag("splice_off"));
        let printed = print(&cmd(), &m);
        assert!(printed.contains("pct = 20"), "{printed}");
        assert!(
            printed.contains("peer = [\"a=1.2.3.4:1\", \"b=1.2.3.5:1\"]"),
            "{printed}"
        );
        assert!(printed.contains("no_splice = true"), "{printed}");
        // What --print-config prints is itself a config file meaning the same.
        let g = dir.join("printed.toml");
        std::fs::write(&g, &printed).unwrap();
        let m2 = cmd()
            .try_get_matches_from(
                expand(&cmd(), args(&["agent", "--config", g.to_str().unwrap()])).unwrap(),
            )
            .unwrap();
        assert_eq!(m2.get_one::<String>("pct").unwrap(), "20");
        assert_eq!(m2.get_one::<String>("node").unwrap(), "n3");
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn unknown_keys_and_wrong_types_are_refused_with_the_keys() {
        let p = Path::new("a.toml");
        let e = flags_from(&cmd(), p, "colour = \"red\"\n").unwrap_err();
        assert!(
            e.contains("`colour` is not a setting") && e.contains("node, pct, peer, no_splice"),
            "{e}"
        );
        let e = flags_from(&cmd(), p, "config = \"x\"\n").unwrap_err();
        assert!(e.contains("not a setting"), "{e}");
        let e = flags_from(&cmd(), p, "no_splice = \"yes\"\n").unwrap_err();
        assert!(e.contains("switch"), "{e}");
        let e = flags_from(&cmd(), p, "pct = {a = 1}\n").unwrap_err();
        assert!(e.contains("string or a number"), "{e}");
        let e = flags_from(&cmd(), p, "pct = \n").unwrap_err();
        assert!(e.contains("not a TOML file"), "{e}");
    }
}
