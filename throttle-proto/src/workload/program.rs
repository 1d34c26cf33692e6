//! A program of the user's: one the agents launch (`--workload program`), or a command
//! line run on the controller's host (`--cmd`, such as `mpirun ...`).

use serde::{Deserialize, Serialize};

use super::OptionsError;

/// A program on the agents' allow-list and its arguments, launched on every node.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProgramOptions {
    /// The executable's name, as the agents' allow-list names it.
    pub name: String,
    #[serde(default)]
    pub args: Vec<String>,
}

impl ProgramOptions {
    pub fn check(&self) -> Result<(), OptionsError> {
        if self.name.trim().is_empty() {
            return Err(OptionsError::new("program needs the name of an executable"));
        }
        Ok(())
    }
}

/// A command template of the user's, run on the controller's host for the chosen nodes
/// (placeholders `{nodes}`, `{procs}`, `{ranks_per_node}`, `{bw}`, `{hostfile}`), and how
/// its completion time is read. The controller parses the template and the regexes.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CommandOptions {
    /// The command line (`/bin/sh -c`).
    pub run: String,
    /// The regex whose one group captures the completion time in seconds.
    #[serde(default)]
    pub time_regex: Option<String>,
    /// A rate the program prints (larger is faster); its inverse is stored as the time.
    #[serde(default)]
    pub rate_regex: Option<String>,
    /// `"preload"`: load the preload library into what the command starts through
    /// `throttle-ctl exec`; `"kernel"` or none: the cluster's own way.
    #[serde(default)]
    pub intercept: Option<String>,
}

impl CommandOptions {
    pub fn check(&self) -> Result<(), OptionsError> {
        if self.run.trim().is_empty() {
            return Err(OptionsError::new("command needs a command line to run"));
        }
        if self.time_regex.is_some() && self.rate_regex.is_some() {
            return Err(OptionsError::new(
                "command takes time_regex or rate_regex, not both",
            ));
        }
        match self.intercept.as_deref() {
            None | Some("kernel") | Some("preload") => Ok(()),
            Some(other) => Err(OptionsError(format!(
                "unknown interception mode `{other}`: use kernel or preload"
            ))),
        }
    }
}
