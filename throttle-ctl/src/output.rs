//! Writing for people and scripts: text and JSON on standard output, which a closed pipe
//! (`throttle-ctl export | head`) ends quietly instead of with an error.

use std::fmt::Display;
use std::io::Write;

use anyhow::Result;

/// The width of the terminal standard output goes to, in columns; `None` when it goes to
/// no terminal (a pipe, a file): a table there keeps its full width
/// ([`throttle_analysis::table::Table::render_in`]).
pub fn terminal_width() -> Option<u16> {
    let mut size = nix::libc::winsize {
        ws_row: 0,
        ws_col: 0,
        ws_xpixel: 0,
        ws_ypixel: 0,
    };
    // SAFETY: TIOCGWINSZ writes one `winsize` through the pointer, which points at a live,
    // writable one for the call's duration; descriptor 1 is only asked, never changed.
    let rc = unsafe { nix::libc::ioctl(1, nix::libc::TIOCGWINSZ, &mut size) };
    (rc == 0 && size.ws_col > 0).then_some(size.ws_col)
}

/// The error a write to a closed standard output turns into; `main` exits 0 on it.
#[derive(Debug)]
pub struct ClosedOutput;

impl std::fmt::Display for ClosedOutput {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("standard output was closed")
    }
}

impl std::error::Error for ClosedOutput {}

/// Turn an I/O error on standard output into [`ClosedOutput`] when the reader went away.
pub fn stdout_error(e: std::io::Error) -> anyhow::Error {
    if e.kind() == std::io::ErrorKind::BrokenPipe {
        ClosedOutput.into()
    } else {
        anyhow::Error::new(e).context("writing to standard output")
    }
}

/// Whether `e` (or what caused it) is [`ClosedOutput`] or a broken pipe.
pub fn is_closed_output(e: &anyhow::Error) -> bool {
    e.chain().any(|c| {
        c.is::<ClosedOutput>()
            || c.downcast_ref::<std::io::Error>()
                .is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe)
            || c.downcast_ref::<csv::Error>().is_some_and(|ce| {
                matches!(ce.kind(), csv::ErrorKind::Io(io) if io.kind() == std::io::ErrorKind::BrokenPipe)
            })
    })
}

/// Whether the reader of descriptor `fd` went away (a pipe whose reading end was closed:
/// `throttle-ctl sweep ... | head -3` after `head` exits), asked without writing.
pub fn reader_gone(fd: std::os::fd::BorrowedFd<'_>) -> bool {
    use nix::poll::{poll, PollFd, PollFlags, PollTimeout};
    let mut fds = [PollFd::new(fd, PollFlags::empty())];
    matches!(poll(&mut fds, PollTimeout::ZERO), Ok(n) if n > 0)
        && fds[0]
            .revents()
            .is_some_and(|r| r.intersects(PollFlags::POLLERR | PollFlags::POLLHUP))
}

/// Whether standard output or standard error lost its reader.
pub fn an_output_is_gone() -> bool {
    use std::os::fd::AsFd;
    reader_gone(std::io::stdout().as_fd()) || reader_gone(std::io::stderr().as_fd())
}

/// Print `text` to standard output.
pub fn print(text: impl Display) -> Result<()> {
    let mut out = std::io::stdout().lock();
    write!(out, "{text}")
        .and_then(|_| out.flush())
        .map_err(stdout_error)
}

/// Print `value` as pretty JSON, one document, to standard output.
pub fn print_json(value: &impl serde::Serialize) -> Result<()> {
    print(format!("{}\n", serde_json::to_string_pretty(value)?))
}

/// `eprintln!` that never panics: progress, warnings and errors go to standard error, and
/// a closed one (`throttle-ctl sweep spec.toml 2>&1 | head`) must not end the process
/// with its nodes left at a throttled bandwidth (a sweep stops as on Ctrl-C instead:
/// [`crate::progress`]).
/// On a terminal, a long line is wrapped at words to [`throttle_analysis::table::LINE`] characters;
/// piped (a log, a test, grep) every line stays whole.
#[macro_export]
macro_rules! note {
    ($($arg:tt)*) => {{
        $crate::output::note_line(&format!($($arg)*));
    }};
}

/// Write `text` and a newline to standard error, wrapped on a terminal ([`note!`]).
pub fn note_line(text: &str) {
    use std::io::IsTerminal;
    let mut err = std::io::stderr().lock();
    let _ = if err.is_terminal() {
        let wrapped: Vec<String> = text
            .split('\n')
            .map(|l| throttle_analysis::table::wrap(l, "  "))
            .collect();
        writeln!(err, "{}", wrapped.join("\n"))
    } else {
        writeln!(err, "{text}")
    };
}
