//! One module per command: each owns its clap `Args` and an `exec` that does the command
//! with the library's modules and prints the result (a table for people, `--json` for
//! scripts). `main.rs` only dispatches.

pub mod analyze;
pub mod calibrate;
pub mod cluster;
pub mod completions;
pub mod demo;
pub mod deploy;
pub mod exec;
pub mod export;
pub mod forward;
pub mod local;
pub mod model;
pub mod output;
pub mod run;
pub mod set;
pub mod status;
pub mod sweep;

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Result;

use crate::cluster::Cluster;

/// What every command gets besides its own arguments.
pub struct Context {
    /// The cluster file: `--cluster`, else `$THROTTLE_CLUSTER`, else the default.
    pub cluster_path: PathBuf,
}

impl Context {
    pub fn cluster(&self) -> Result<Cluster> {
        Cluster::load(&self.cluster_path)
    }
}

/// How a command ended: success, or an exit code with its message already printed.
pub type Exit = Result<ExitCode>;

/// Parse `a,b,c` into values, naming the flag and why a value is refused in the error.
pub fn parse_list<T>(text: &str, flag: &str) -> Result<Vec<T>>
where
    T: std::str::FromStr,
    T::Err: std::fmt::Display,
{
    text.split(',')
        .map(|s| s.trim())
        .filter(|s| !s.is_empty())
        .map(|s| {
            s.parse::<T>()
                .map_err(|e| anyhow::anyhow!("{flag}: `{s}`: {e} (write a list like 5,10,15)"))
        })
        .collect()
}

/// CTI levels: positive percentages.
pub fn parse_cti(text: &str, flag: &str) -> Result<Vec<f64>> {
    let levels = parse_list::<f64>(text, flag)?;
    if levels.is_empty() || levels.iter().any(|c| !(c.is_finite() && *c > 0.0)) {
        anyhow::bail!("{flag} takes CTI levels, positive percentages, e.g. 5,10,15");
    }
    Ok(levels)
}

/// Check, before any work, that the file `flag` names can be written where it is: its
/// directory exists and the name is no directory (a typo'd directory fails now, not after
/// the analysis).
pub fn check_output_file(flag: &str, path: &std::path::Path) -> Result<()> {
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => std::path::Path::new("."),
    };
    if !dir.is_dir() {
        anyhow::bail!(
            "{flag} {}: the directory {} does not exist (create it first, or name a file in an existing directory)",
            path.display(),
            dir.display()
        );
    }
    // Not followed: a link (planted by another user in a shared directory, or not) is
    // refused, as are a directory, a FIFO and a device: the file is replaced whole.
    if let Ok(m) = std::fs::symlink_metadata(path) {
        if m.is_dir() {
            anyhow::bail!(
                "{flag} {}: that is a directory; name a file",
                path.display()
            );
        }
        if !m.is_file() {
            anyhow::bail!(
                "{flag} {}: that is a symbolic link, a FIFO or a device, not a file: throttle-ctl writes only files, and never through a link; name a file",
                path.display()
            );
        }
    }
    Ok(())
}

/// Write `text` to the file `flag` names, replacing it whole (a new file renamed over
/// it, in a directory nobody else may replace it in: `shared_dir::write_file`); the
/// error names the flag and the file.
pub fn write_output_file(flag: &str, path: &std::path::Path, text: &str) -> Result<()> {
    check_output_file(flag, path)?;
    crate::shared_dir::write_file(path, text.as_bytes())
        .map_err(|e| anyhow::anyhow!("{flag} {}: cannot write it: {e:#}", path.display()))
}

/// Set by Ctrl-C (SIGINT) or SIGTERM; the running job is then killed and the command stops.
pub fn interrupt_flag() -> Result<&'static std::sync::atomic::AtomicBool> {
    static FLAG: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);
    ctrlc::set_handler(|| {
        if FLAG.swap(true, std::sync::atomic::Ordering::SeqCst) {
            // Drops do not run on exit: put the bandwidth back here.
            crate::link_lease::release_before_quit();
            std::process::exit(130);
        }
        crate::note!("\nstopping: killing the running job (Ctrl-C again to quit at once)");
    })
    .map_err(|e| anyhow::anyhow!("cannot install the Ctrl-C handler: {e}"))?;
    Ok(&FLAG)
}
