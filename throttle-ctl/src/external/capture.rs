//! An external command's stdout and stderr, read to their end by a thread each: the last
//! lines kept for the report, and the last number the time regex captured.

use std::io::{BufRead, BufReader, Read};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use super::TimeRegex;

/// Lines of output kept for the report and the failure reason.
const TAIL_LINES: usize = 20;
/// Longest line looked at (a longer one is taken in pieces of this size).
const MAX_LINE: u64 = 64 * 1024;

/// The command's stdout and stderr, read to the end by a thread each: the last
/// [`TAIL_LINES`] lines kept, and the last number the time regex captured.
pub(super) struct Capture {
    readers: Vec<std::thread::JoinHandle<()>>,
    tail: Arc<Mutex<std::collections::VecDeque<String>>>,
    captured: Arc<Mutex<Option<Result<f64, String>>>>,
}

impl Capture {
    pub(super) fn start(
        child: &mut std::process::Child,
        time_regex: Option<&TimeRegex>,
    ) -> Capture {
        let tail = Arc::new(Mutex::new(std::collections::VecDeque::new()));
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
            let (tail, captured, re) = (tail.clone(), captured.clone(), time_regex.cloned());
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
                    let mut t = tail.lock().unwrap_or_else(|e| e.into_inner());
                    t.push_back(l);
                    if t.len() > TAIL_LINES {
                        t.pop_front();
                    }
                }
            })
        })
        .collect();
        Capture {
            readers,
            tail,
            captured,
        }
    }

    /// The last lines and the captured number, once the readers ended (or after 2 s: a
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
        let output = self
            .tail
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .iter()
            .cloned()
            .collect();
        let captured = self
            .captured
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone();
        (output, captured)
    }
}
