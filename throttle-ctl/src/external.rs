//! External commands as runs: a user's own launcher (`mpirun ...`, a script) started on
//! this host for a chosen set of nodes at one bandwidth (`run --cmd`, sweep workload
//! `command`).
//!
//! The controller writes a hostfile for the nodes (`{hostfile}`, Open MPI's format: one
//! `ADDRESS slots=R` line per node), fills the command template's placeholders, and runs
//! it with `/bin/sh -c` in its own process group, with `THROTTLE_CLUSTER` set so that
//! `throttle-ctl exec` (mpirun's launch agent) finds the cluster. The completion time is
//! the command's wall time, or the number a `--time-regex` captures from its output (the
//! program's own timer). A non-zero exit, a regex that matches nothing, or the time limit
//! (the whole process group is killed) make a failed run whose reason carries the output's
//! last lines.

use std::io::{BufRead, BufReader, Read};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context, Result};
use throttle_proto::result::WorkloadResult;
use throttle_proto::Pct;

use crate::cluster::{Cluster, Node};

/// The placeholders a command template may use.
pub const PLACEHOLDERS: &[&str] = &["nodes", "procs", "ranks_per_node", "hostfile", "bw"];

/// Lines of output kept for the report and the failure reason.
const TAIL_LINES: usize = 20;
/// Longest line looked at (a longer one is taken in pieces of this size).
const MAX_LINE: u64 = 64 * 1024;

/// A checked command template. A placeholder is `{name}` with `name` one of
/// [`PLACEHOLDERS`]; any other `{word}` of lowercase letters and `_` is refused as a likely
/// typo; everything else with braces (awk programs, `${VAR}`, `{a,b}`) is the shell's.
#[derive(Clone, Debug, PartialEq)]
pub struct CommandTemplate(String);

/// The placeholders of `text`: (byte range of `{name}`, name).
fn placeholders(text: &str) -> Vec<(std::ops::Range<usize>, &str)> {
    let b = text.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'{' && (i == 0 || b[i - 1] != b'$') {
            let word_end = b[i + 1..]
                .iter()
                .position(|c| !(c.is_ascii_lowercase() || *c == b'_'))
                .map(|k| i + 1 + k);
            if let Some(e) = word_end {
                if e > i + 1 && b[e] == b'}' {
                    out.push((i..e + 1, &text[i + 1..e]));
                    i = e + 1;
                    continue;
                }
            }
        }
        i += 1;
    }
    out
}

impl CommandTemplate {
    pub fn parse(text: &str) -> Result<CommandTemplate> {
        if text.trim().is_empty() {
            bail!("the command is empty");
        }
        for (_, name) in placeholders(text) {
            if !PLACEHOLDERS.contains(&name) {
                bail!(
                    "unknown placeholder `{{{name}}}` in the command: use {}",
                    PLACEHOLDERS
                        .iter()
                        .map(|p| format!("{{{p}}}"))
                        .collect::<Vec<_>>()
                        .join(", ")
                );
            }
        }
        Ok(CommandTemplate(text.to_string()))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The command line for one run.
    pub fn render(&self, nodes: usize, ranks_per_node: usize, hostfile: &Path, bw: Pct) -> String {
        let value = |name: &str| match name {
            "nodes" => nodes.to_string(),
            "procs" => (nodes * ranks_per_node).to_string(),
            "ranks_per_node" => ranks_per_node.to_string(),
            "hostfile" => hostfile.display().to_string(),
            _ => match bw.percent() {
                Some(p) => format!("{p}"),
                None => "unlimited".to_string(),
            },
        };
        let mut out = String::new();
        let mut last = 0;
        for (range, name) in placeholders(&self.0) {
            out.push_str(&self.0[last..range.start]);
            out.push_str(&value(name));
            last = range.end;
        }
        out.push_str(&self.0[last..]);
        out
    }
}

/// A regex with one capture group: the completion time in seconds (`--time-regex`), or a
/// rate the program reports, such as Graph500's `harmonic_mean_TEPS` (`--rate-regex`),
/// whose inverse is stored as the time: CTI = T(bw)/T(100%) - 1 = R(100%)/R(bw) - 1.
#[derive(Clone, Debug)]
pub struct TimeRegex {
    re: regex::Regex,
    rate: bool,
}

impl PartialEq for TimeRegex {
    fn eq(&self, other: &TimeRegex) -> bool {
        self.as_str() == other.as_str() && self.rate == other.rate
    }
}

impl TimeRegex {
    /// A regex whose group captures seconds.
    pub fn parse(text: &str) -> Result<TimeRegex> {
        Self::new(text, false)
    }

    /// A regex whose group captures a rate (work per second, larger is faster).
    pub fn parse_rate(text: &str) -> Result<TimeRegex> {
        Self::new(text, true)
    }

    fn new(text: &str, rate: bool) -> Result<TimeRegex> {
        let flag = if rate { "--rate-regex" } else { "--time-regex" };
        let re = regex::Regex::new(text)
            .map_err(|e| anyhow!("{flag} `{text}` is not a regular expression: {e}"))?;
        if re.captures_len() != 2 {
            bail!("{flag} `{text}` must have exactly one capture group, around the number: e.g. 'time: ([0-9.]+) s'");
        }
        Ok(TimeRegex { re, rate })
    }

    fn flag(&self) -> &'static str {
        if self.rate {
            "--rate-regex"
        } else {
            "--time-regex"
        }
    }

    pub fn as_str(&self) -> &str {
        self.re.as_str()
    }

    pub fn is_rate(&self) -> bool {
        self.rate
    }

    /// The number captured from `line`, when it matches: seconds, or a rate.
    fn seconds(&self, line: &str) -> Option<Result<f64, String>> {
        let c = self.re.captures(line)?;
        let text = c.get(1).map(|m| m.as_str()).unwrap_or("");
        let flag = self.flag();
        Some(match text.trim().parse::<f64>() {
            Ok(v) if v.is_finite() && v >= 0.0 && !self.rate => Ok(v),
            Ok(v) if v.is_finite() && v > 0.0 && self.rate => Ok(v),
            _ if self.rate => Err(format!(
                "{flag} captured `{text}`, which is not a positive rate"
            )),
            _ => Err(format!(
                "{flag} captured `{text}`, which is not a number of seconds"
            )),
        })
    }
}

/// How an external command ended.
pub struct Ended {
    pub ok: bool,
    pub interrupted: bool,
    pub reason: Option<String>,
    /// Wall time from start to exit (or kill).
    pub wall_seconds: f64,
    /// What the time regex captured (last match), when one was given and matched.
    pub result: Option<WorkloadResult>,
    /// The output's last lines.
    pub output: Vec<String>,
}

/// Connections the nodes' agents intercepted so far (summed), or `None` when none of
/// them intercepts (or one cannot be asked).
fn intercepted_outgoing(cluster: &Cluster, nodes: &[Node]) -> Option<u64> {
    let mut sum = None;
    for n in nodes {
        let status = crate::agent_client::AgentClient::new(cluster, n)
            .status()
            .ok()?;
        if let Some(i) = status.intercepted {
            *sum.get_or_insert(0) += i.outgoing;
        }
    }
    sum
}

/// Every node's agent serves the preload library, or an error that says which do not.
fn check_preload_served(cluster: &Cluster, nodes: &[Node]) -> Result<()> {
    let mut missing = Vec::new();
    for n in nodes {
        let status = crate::agent_client::AgentClient::new(cluster, n)
            .status()
            .with_context(|| {
                format!(
                    "cannot ask node `{}` whether it serves the preload library",
                    n.name
                )
            })?;
        if status.intercepted.and_then(|i| i.preload_port).is_none() {
            missing.push(n.name.to_string());
        }
    }
    if !missing.is_empty() {
        bail!(
            "--intercept preload: the agents of {} do not serve the preload library: start them with --preload (namespace hosts: `throttle-ctl local up --netns --intercept preload`)",
            missing.join(", ")
        );
    }
    Ok(())
}

/// The hostfile line of one node: its own address (namespace hosts) or its agent's.
fn host_line(node: &Node, ranks_per_node: usize) -> String {
    let addr = node.address.unwrap_or_else(|| node.data.ip());
    format!("{addr} slots={ranks_per_node}\n")
}

/// A private directory for one run's hostfile, removed when dropped.
struct RunDir(PathBuf);

impl Drop for RunDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// One run of a command: what, for how many ranks per node, at which bandwidth, how long.
pub struct Invocation<'a> {
    pub template: &'a CommandTemplate,
    pub time_regex: Option<&'a TimeRegex>,
    pub ranks_per_node: usize,
    pub bw: Pct,
    pub time_limit: Duration,
    pub intercept: Option<crate::intercept::Mode>,
}

/// Run the command for `nodes` (already shaped) and wait for it, killing its process
/// group at the time limit or when `cancel` becomes true.
pub fn run(
    cluster: &Cluster,
    nodes: &[Node],
    inv: &Invocation,
    cancel: &AtomicBool,
) -> Result<Ended> {
    let Invocation {
        template,
        time_regex,
        ranks_per_node,
        bw,
        time_limit,
        intercept,
    } = *inv;
    let preload = match intercept {
        Some(crate::intercept::Mode::Preload) => {
            check_preload_served(cluster, nodes)?;
            Some(crate::intercept::library()?)
        }
        _ => None,
    };
    let dir = {
        let mut b = [0u8; 6];
        let _ = getrandom::getrandom(&mut b);
        let hex: String = b.iter().map(|x| format!("{x:02x}")).collect();
        let d = std::env::temp_dir().join(format!("throttle-run-{hex}"));
        use std::os::unix::fs::DirBuilderExt;
        std::fs::DirBuilder::new()
            .mode(0o700)
            .create(&d)
            .with_context(|| format!("cannot create {}", d.display()))?;
        RunDir(d)
    };
    let hostfile = dir.0.join("hostfile");
    let hosts: String = nodes.iter().map(|n| host_line(n, ranks_per_node)).collect();
    std::fs::write(&hostfile, hosts)?;
    let line = template.render(nodes.len(), ranks_per_node, &hostfile, bw);
    if preload.is_some() {
        for p in crate::intercept::static_programs(&line) {
            eprintln!(
                "warning: {} is statically linked: the preload library cannot reach it, its connections are not throttled",
                p.display()
            );
        }
    }
    let intercepted_before = intercepted_outgoing(cluster, nodes);
    // Orphans of the command (daemons, processes in their own groups) become children of
    // this process, not of init, so that they can be found and killed afterwards.
    let _ = nix::sys::prctl::set_child_subreaper(true);
    let spared = children();
    let cluster_path = std::path::absolute(&cluster.path).unwrap_or(cluster.path.clone());
    let mut command = Command::new("/bin/sh");
    if let Some(lib) = &preload {
        command
            .env(crate::intercept::ENV, "preload")
            .env(crate::intercept::LIB_ENV, lib);
    }
    let mut child = command
        .arg("-c")
        .arg(&line)
        .env("THROTTLE_CLUSTER", &cluster_path)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .spawn()
        .with_context(|| format!("cannot start /bin/sh -c {line:?}"))?;
    let start = Instant::now();
    let pgid = nix::unistd::Pid::from_raw(child.id() as i32);
    let tail = Arc::new(Mutex::new(std::collections::VecDeque::new()));
    let captured: Arc<Mutex<Option<Result<f64, String>>>> = Arc::new(Mutex::new(None));
    let readers: Vec<_> = [
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
            // Read to the end whatever comes (bytes that are not UTF-8, endless lines):
            // stopping early would make the command's next write fail.
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
    let kill = || {
        let _ = nix::sys::signal::killpg(pgid, nix::sys::signal::Signal::SIGKILL);
        kill_descendants(&spared);
    };
    let (status, killed_why) = loop {
        if let Some(s) = child.try_wait()? {
            break (Some(s), None);
        }
        if cancel.load(Ordering::SeqCst) {
            kill();
            break (
                child.wait().ok(),
                Some("interrupted by the user".to_string()),
            );
        }
        if start.elapsed() > time_limit {
            kill();
            break (
                child.wait().ok(),
                Some(format!(
                    "the command ran past the time limit of {:.0} s; its process group was killed",
                    time_limit.as_secs_f64()
                )),
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let wall_seconds = start.elapsed().as_secs_f64();
    // What the command left behind (background children, daemons that called setsid,
    // processes in their own groups such as mpirun's): all are our descendants, since
    // this process is their subreaper.
    kill_descendants(&spared);
    let waited = Instant::now();
    for r in readers {
        // A daemon that left the group (setsid) may hold the pipe: stop waiting after 2 s.
        while !r.is_finished() && waited.elapsed() < Duration::from_secs(2) {
            std::thread::sleep(Duration::from_millis(10));
        }
        if r.is_finished() {
            let _ = r.join();
        }
    }
    let output: Vec<String> = tail
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .iter()
        .cloned()
        .collect();
    let with_tail = |why: String| {
        let last: Vec<&str> = output
            .iter()
            .rev()
            .take(5)
            .rev()
            .map(String::as_str)
            .collect();
        if last.is_empty() {
            why
        } else {
            format!("{why}; output ends: {}", last.join(" | "))
        }
    };
    let captured = captured.lock().unwrap_or_else(|e| e.into_inner()).clone();
    if let (Some(before), Some(after)) = (intercepted_before, intercepted_outgoing(cluster, nodes))
    {
        if nodes.len() > 1 && after == before && killed_why.is_none() {
            eprintln!(
                "warning: no connection of this command between nodes went through the agents (intercepted: 0 on {} nodes): its time is not throttled. \
                 A statically linked program, raw system calls or io_uring escape the preload library; a command that does not start its processes with `throttle-ctl exec` (or LD_PRELOAD) on namespace hosts, or whose processes do not talk over TCP, is not intercepted either",
                nodes.len()
            );
        }
    }
    let fail = |reason: String, interrupted: bool| Ended {
        ok: false,
        interrupted,
        reason: Some(reason),
        wall_seconds,
        result: None,
        output: output.clone(),
    };
    if let Some(why) = killed_why {
        let interrupted = why.starts_with("interrupted");
        return Ok(fail(with_tail(why), interrupted));
    }
    let status = status.ok_or_else(|| anyhow!("lost the command's exit status"))?;
    if !status.success() {
        let why = match status.code() {
            Some(127) => format!("the command exited with status 127 (command not found?): {line}"),
            Some(c) => format!("the command exited with status {c}"),
            None => format!("the command was killed ({status})"),
        };
        return Ok(fail(with_tail(why), false));
    }
    let result = match (time_regex, captured) {
        (None, _) => None,
        (Some(re), None) => {
            return Ok(fail(
                with_tail(format!(
                    "{} `{}` matched no line of the output",
                    re.flag(),
                    re.as_str()
                )),
                false,
            ))
        }
        (Some(_), Some(Err(e))) => return Ok(fail(with_tail(e), false)),
        (Some(re), Some(Ok(v))) if re.is_rate() => Some(WorkloadResult {
            workload: "command".into(),
            seconds: Some(1.0 / v),
            metrics: [("rate".to_string(), v)].into_iter().collect(),
            ..WorkloadResult::default()
        }),
        (Some(_), Some(Ok(seconds))) => Some(WorkloadResult {
            workload: "command".into(),
            seconds: Some(seconds),
            ..WorkloadResult::default()
        }),
    };
    Ok(Ended {
        ok: true,
        interrupted: false,
        reason: None,
        wall_seconds,
        result,
        output,
    })
}

/// Every process's parent (from /proc/PID/stat: "pid (comm) state ppid ...").
fn process_parents() -> std::collections::HashMap<i32, i32> {
    let mut parent = std::collections::HashMap::new();
    if let Ok(dir) = std::fs::read_dir("/proc") {
        for e in dir.flatten() {
            let Some(pid) = e.file_name().to_str().and_then(|s| s.parse::<i32>().ok()) else {
                continue;
            };
            let Ok(stat) = std::fs::read_to_string(e.path().join("stat")) else {
                continue;
            };
            // comm may hold spaces and parentheses: the fields follow the last `)`.
            let Some(after) = stat.rfind(')').map(|i| &stat[i + 1..]) else {
                continue;
            };
            if let Some(ppid) = after.split_whitespace().nth(1).and_then(|p| p.parse().ok()) {
                parent.insert(pid, ppid);
            }
        }
    }
    parent
}

/// This process's children now.
fn children() -> std::collections::HashSet<i32> {
    let me = std::process::id() as i32;
    process_parents()
        .into_iter()
        .filter(|(_, pp)| *pp == me)
        .map(|(p, _)| p)
        .collect()
}

/// Kill every process descended from this one, and reap those that became ours. With
/// this process a child subreaper (set in [`run`]), orphans of the command stay
/// descendants, whatever process group or session they moved to.
/// `spared`: processes (and their descendants) that are not the command's, e.g. agents a
/// `demo` started before.
fn kill_descendants(spared: &std::collections::HashSet<i32>) {
    let me = std::process::id() as i32;
    for _ in 0..3 {
        let parent = process_parents();
        let descends = |mut p: i32| {
            for _ in 0..64 {
                if spared.contains(&p) {
                    return false;
                }
                match parent.get(&p) {
                    Some(&pp) if pp == me => return true,
                    Some(&pp) if pp > 1 => p = pp,
                    _ => return false,
                }
            }
            false
        };
        let victims: Vec<i32> = parent.keys().copied().filter(|p| descends(*p)).collect();
        if victims.is_empty() {
            return;
        }
        for p in &victims {
            let _ = nix::sys::signal::kill(
                nix::unistd::Pid::from_raw(*p),
                nix::sys::signal::Signal::SIGKILL,
            );
        }
        std::thread::sleep(Duration::from_millis(20));
        for p in &victims {
            let _ = nix::sys::wait::waitpid(
                nix::unistd::Pid::from_raw(*p),
                Some(nix::sys::wait::WaitPidFlag::WNOHANG),
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn templates_know_their_placeholders() {
        let t =
            CommandTemplate::parse("mpirun -np {procs} --hostfile {hostfile} ./a {bw}").unwrap();
        let line = t.render(4, 2, Path::new("/tmp/h"), Pct::parse("30").unwrap());
        assert_eq!(line, "mpirun -np 8 --hostfile /tmp/h ./a 30");
        let line = t.render(1, 1, Path::new("/tmp/h"), Pct::parse("unlimited").unwrap());
        assert!(line.ends_with("./a unlimited"));
        let e = CommandTemplate::parse("run {nodez}")
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("unknown placeholder `{nodez}`") && e.contains("{hostfile}"),
            "{e}"
        );
        assert!(CommandTemplate::parse("  ").is_err());
        // The shell's braces stay the shell's.
        let t = CommandTemplate::parse("awk '{ print $1 }' ${HOME} {a,b} {procs}").unwrap();
        let line = t.render(2, 1, Path::new("/h"), Pct::parse("10").unwrap());
        assert_eq!(line, "awk '{ print $1 }' ${HOME} {a,b} 2");
    }

    #[test]
    fn the_time_regex_needs_one_group_and_a_number() {
        assert!(TimeRegex::parse("took [0-9.]+ s").is_err());
        assert!(TimeRegex::parse("(a)(b)").is_err());
        assert!(TimeRegex::parse("(").is_err());
        let re = TimeRegex::parse(r"time: ([0-9.e+-]+) s").unwrap();
        assert_eq!(re.seconds("time: 1.5 s"), Some(Ok(1.5)));
        assert_eq!(re.seconds("nothing"), None);
        assert!(matches!(re.seconds("time: - s"), Some(Err(_))));
        let rate = TimeRegex::parse_rate(r"harmonic_mean_TEPS: +([0-9.e+]+)").unwrap();
        assert_eq!(rate.seconds("harmonic_mean_TEPS:   2.5e8"), Some(Ok(2.5e8)));
        assert!(matches!(
            rate.seconds("harmonic_mean_TEPS: 0"),
            Some(Err(_))
        ));
        assert!(TimeRegex::parse_rate("(")
            .unwrap_err()
            .to_string()
            .contains("--rate-regex"));
    }
}
