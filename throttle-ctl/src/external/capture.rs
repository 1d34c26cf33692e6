//! An external command's stdout and stderr, read to their end by a thread each: the
//! output kept (all of it up to [`MAX_KEPT`] bytes, then its last lines) for the store and
//! the terminal, and the last number the time regex captured.

use std::io::{BufRead, BufReader, Read};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use super::TimeRegex;

/// Bytes of output kept whole (Graph500's per-search times, IMB's tables); past them (or
/// past [`MAX_KEPT_LINES`]), only the last lines, after a line saying what was left out.
pub const MAX_KEPT: usize = 1 << 20;
/// Lines kept whole at most (a million one-character lines would cost far more memory
/// than their bytes).
const MAX_KEPT_LINES: usize = 200_000;
/// Lines, and bytes, kept after the output passed what is kept whole.
const TAIL_LINES: usize = 200;
const TAIL_BYTES: usize = 256 << 10;
/// Longest line looked at (a longer one is taken in pieces of this size).
const MAX_LINE: u64 = 64 * 1024;

/// The lines kept so far, in the order they arrived from either pipe.
#[derive(Default)]
struct Kept {
    head: Vec<String>,
    head_bytes: usize,
    /// Lines that came after the head was full: the last [`TAIL_LINES`] of them, at most
    /// [`TAIL_BYTES`].
    tail: std::collections::VecDeque<String>,
    tail_bytes: usize,
    /// Lines (and their bytes) that came after the head was full and left the tail.
    dropped: (usize, usize),
}

impl Kept {
    fn push(&mut self, line: String) {
        if self.tail.is_empty()
            && self.head_bytes + line.len() < MAX_KEPT
            && self.head.len() < MAX_KEPT_LINES
        {
            self.head_bytes += line.len() + 1;
            self.head.push(line);
            return;
        }
        self.tail_bytes += line.len() + 1;
        self.tail.push_back(line);
        while self.tail.len() > TAIL_LINES || self.tail_bytes > TAIL_BYTES {
            let Some(l) = self.tail.pop_front() else {
                break;
            };
            self.tail_bytes -= l.len() + 1;
            self.dropped.0 += 1;
            self.dropped.1 += l.len() + 1;
        }
    }

    fn lines(self) -> Vec<String> {
        let mut all = self.head;
        if self.dropped.0 > 0 {
            all.push(format!(
                "[throttle: {} line(s), {} bytes, of output left out here: {} MiB ({MAX_KEPT_LINES} lines) are kept whole, then the last {TAIL_LINES} lines ({} KiB)]",
                self.dropped.0,
                self.dropped.1,
                MAX_KEPT >> 20,
                TAIL_BYTES >> 10
            ));
        }
        all.extend(self.tail);
        all
    }
}

/// The command's stdout and stderr, read to the end by a thread each: its lines kept (see
/// [`Kept`]), and the last number the time regex captured.
pub(super) struct Capture {
    readers: Vec<std::thread::JoinHandle<()>>,
    kept: Arc<Mutex<Kept>>,
    captured: Arc<Mutex<Option<Result<f64, String>>>>,
}

impl Capture {
    pub(super) fn start(
        child: &mut std::process::Child,
        time_regex: Option<&TimeRegex>,
    ) -> Capture {
        let kept = Arc::new(Mutex::new(Kept::default()));
        let captured: Arc<Mutex<Option<Result<f64, String>>>> = Arc::new(Mutex::new(None));
        let readers = [
            child
                .stdout
                .take()
                .map(|s| Box::new(s) as Box<dyn std::io::Read + Send>),
            child
                .stderr
                .take()
                .map(|s| Box::new(s) as Box<dyn std::io::Read + Send>),
        ]
        .into_iter()
        .flatten()
        .map(|pipe| {
            let (kept, captured, re) = (kept.clone(), captured.clone(), time_regex.cloned());
            std::thread::spawn(move || {
                // Read to the end whatever comes (bytes that are not UTF-8, endless
                // lines): stopping early would make the command's next write fail.
                let mut reader = BufReader::new(pipe);
                let mut buf = Vec::new();
                loop {
                    buf.clear();
                    match (&mut reader).take(MAX_LINE).read_until(b'\n', &mut buf) {
                        Ok(0) => break,
                        Ok(_) => {}
                        Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                        Err(_) => break,
                    }
                    let l = String::from_utf8_lossy(&buf).trim_end().to_string();
                    if let Some(re) = &re {
                        if let Some(v) = re.seconds(&l) {
                            *captured.lock().unwrap_or_else(|e| e.into_inner()) = Some(v);
                        }
                    }
                    kept.lock().unwrap_or_else(|e| e.into_inner()).push(l);
                }
            })
        })
        .collect();
        Capture {
            readers,
            kept,
            captured,
        }
    }

    /// The lines kept and the captured number, once the readers ended (or after 2 s: a
    /// daemon that left the group with setsid may hold the pipe).
    pub(super) fn finish(self) -> (Vec<String>, Option<Result<f64, String>>) {
        let waited = Instant::now();
        for r in self.readers {
            while !r.is_finished() && waited.elapsed() < Duration::from_secs(2) {
                std::thread::sleep(Duration::from_millis(10));
            }
            if r.is_finished() {
                let _ = r.join();
            }
        }
        let output =
            std::mem::take(&mut *self.kept.lock().unwrap_or_else(|e| e.into_inner())).lines();
        let captured = self
            .captured
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone();
        (output, captured)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn output_is_kept_whole_up_to_the_cap_then_its_last_lines() {
        let mut k = Kept::default();
        for i in 0..1000 {
            k.push(format!("line {i}"));
        }
        let lines = k.lines();
        assert_eq!(lines.len(), 1000);
        assert_eq!(
            (lines[0].as_str(), lines[999].as_str()),
            ("line 0", "line 999")
        );

        let mut k = Kept::default();
        let long = "x".repeat(1023);
        let n = 2 * MAX_KEPT / 1024;
        for i in 0..n {
            k.push(format!("{i:06} {long}"));
        }
        let lines = k.lines();
        let marker = lines
            .iter()
            .position(|l| l.starts_with("[throttle: "))
            .unwrap();
        // The head: the first lines, in order, as many as fit in the cap.
        for (i, l) in lines[..marker].iter().enumerate() {
            assert!(l.starts_with(&format!("{i:06} ")));
        }
        let head_bytes = marker * 1031;
        assert!(
            head_bytes <= MAX_KEPT && head_bytes + 1031 > MAX_KEPT,
            "{marker}"
        );
        // Then the last lines, and the marker counts the ones between.
        assert_eq!(lines.len() - marker - 1, TAIL_LINES);
        assert!(lines[lines.len() - 1].starts_with(&format!("{:06} ", n - 1)));
        assert!(
            lines[marker].starts_with(&format!("[throttle: {} line(s)", n - marker - TAIL_LINES))
        );

        // Many short lines: the head stops at its line count, the tail keeps its last.
        let mut k = Kept::default();
        for i in 0..MAX_KEPT_LINES + 1003 {
            k.push((i % 10).to_string());
        }
        let lines = k.lines();
        assert_eq!(lines.len(), MAX_KEPT_LINES + 1 + TAIL_LINES);
        assert!(lines[MAX_KEPT_LINES].starts_with("[throttle: 803 line(s)"));
        assert_eq!(lines.last().unwrap(), "2");

        // Long lines past the cap: the tail stops at its bytes.
        let mut k = Kept::default();
        let huge = "y".repeat(60 << 10);
        for _ in 0..(MAX_KEPT / huge.len() + 50) {
            k.push(huge.clone());
        }
        let lines = k.lines();
        let marker = lines
            .iter()
            .position(|l| l.starts_with("[throttle: "))
            .unwrap();
        let tail: usize = lines[marker + 1..].iter().map(|l| l.len() + 1).sum();
        assert!(
            tail <= TAIL_BYTES && tail + huge.len() + 1 > TAIL_BYTES,
            "{tail}"
        );
    }
}
