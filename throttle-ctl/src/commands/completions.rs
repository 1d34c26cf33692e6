//! `throttle-ctl completions SHELL` and `throttle-ctl man DIR`: shell completions and man
//! pages, generated from the same definitions as `--help`, so they never drift.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args as ClapArgs, CommandFactory};
use clap_complete::Shell;

use super::{Context, Exit};
use crate::output;

#[derive(ClapArgs, Debug)]
#[command(
    after_help = "Examples:\n  throttle-ctl completions bash > /etc/bash_completion.d/throttle-ctl\n  throttle-ctl completions zsh > ~/.zfunc/_throttle-ctl"
)]
pub struct CompletionsArgs {
    /// bash, zsh, fish, elvish or powershell.
    shell: Shell,
}

#[derive(ClapArgs, Debug)]
#[command(
    after_help = "Example:\n  throttle-ctl man /usr/local/share/man/man1 && man throttle-ctl"
)]
pub struct ManArgs {
    /// Directory for the pages (throttle-ctl.1, throttle-ctl-run.1, ...).
    dir: PathBuf,
}

impl CompletionsArgs {
    pub fn exec<C: CommandFactory>(self, _ctx: &Context) -> Exit {
        let mut cmd = C::command();
        let mut out = Vec::new();
        clap_complete::generate(self.shell, &mut cmd, "throttle-ctl", &mut out);
        output::print(String::from_utf8_lossy(&out))?;
        Ok(ExitCode::SUCCESS)
    }
}

impl ManArgs {
    pub fn exec<C: CommandFactory>(self, _ctx: &Context) -> Exit {
        // A directory of this user's alone (no planted link in it or in its place is
        // followed), written through its descriptor.
        let dir = crate::shared_dir::out_dir(&self.dir)?;
        let cmd = C::command();
        clap_mangen::generate_to(cmd, dir.fd_path())?;
        crate::note!("man pages written to {}", self.dir.display());
        Ok(ExitCode::SUCCESS)
    }
}
