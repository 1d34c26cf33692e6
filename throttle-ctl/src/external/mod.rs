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
//!
//! [`template`]: the command template and the time regex a user writes; [`capture`]: the
//! output read to its end; [`reap`]: what the command leaves behind, found and killed.

mod capture;
pub mod guard;
mod reap;
pub(crate) mod template;

use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context, Result};
use throttle_proto::result::WorkloadResult;
use throttle_proto::Pct;

pub use template::{CommandTemplate, TimeRegex, PLACEHOLDERS};

use crate::cluster::{Cluster, Node};
use capture::Capture;
use reap::{children, kill_descendants};

/// The name of a run's directory (its hostfile) in the temporary directory, before 12
/// hex digits.
const RUN_DIR_PREFIX: &str = "throttle-run-";

/// How an external command ended.
pub struct Ended {
    pub ok: bool,
    pub interrupted: bool,
    pub reason: Option<String>,
    /// Wall time from start to exit (or kill).
    pub wall_seconds: f64,
    /// What the time regex captured (last match), when one was given and matched.
    pub result: Option<WorkloadResult>,
    /// The output, stdout and stderr lines as they came (whole up to a cap, then its last
    /// lines: `capture::MAX_KEPT`).
    pub output: Vec<String>,
}

/// Connections the nodes' agents intercepted or paced in the kernel so far (summed), or
/// `None` when none of them intercepts (or one cannot be asked).
fn intercepted_outgoing(cluster: &Cluster, nodes: &[Node]) -> Option<u64> {
    let mut sum = None;
    for n in nodes {
        let status = crate::cluster::agent_client::AgentClient::new(cluster, n)
            .status()
            .ok()?;
        if let Some(i) = status.intercepted {
            *sum.get_or_insert(0) += i.outgoing;
        }
        // Kernel-paced links: the connections the agents paced without carrying them.
        if let Some(k) = status.kernel_pacing {
            *sum.get_or_insert(0) += k.registered;
        }
    }
    sum
}

/// An error when a node of the run intercepts but does not capture connections to another
/// node of the run: that traffic would pass unshaped.
fn check_members(cluster: &Cluster, nodes: &[Node]) -> Result<()> {
    let statuses: Vec<_> = nodes
        .iter()
        .filter_map(|n| {
            let status = crate::cluster::agent_client::AgentClient::new(cluster, n)
                .status()
                .ok()?;
            Some((n.name.to_string(), status.intercepted?))
        })
        .collect();
    let names: Vec<&str> = nodes.iter().map(|n| n.name.as_str()).collect();
    uncaptured(&names, &statuses)
}

/// Which connections between the run's nodes (`names`) the intercepting nodes' statuses
/// say are not captured: to a node where no agent proved the cluster token yet, or to an
/// address outside the blocks the agent may intercept (`--intercept-within`).
fn uncaptured(
    names: &[&str],
    statuses: &[(String, throttle_proto::status::InterceptedStatus)],
) -> Result<()> {
    let pairs =
        |of: fn(&throttle_proto::status::InterceptedStatus) -> &[throttle_proto::name::Name]| {
            let mut found = Vec::new();
            for (node, i) in statuses {
                for other in of(i) {
                    if names.contains(&other.as_str()) {
                        found.push(format!("{node} -> {other}"));
                    }
                }
            }
            found
        };
    let outside = pairs(|i| &i.outside);
    if !outside.is_empty() {
        bail!(
            "connections {} would not be intercepted: those nodes' addresses lie outside the blocks the agents may intercept (start the agents with `--intercept-within` naming the cluster's subnet)",
            outside.join(", ")
        );
    }
    let missing = pairs(|i| &i.not_proven);
    if !missing.is_empty() {
        bail!(
            "connections {} would not be intercepted: no agent has proven the cluster token at those nodes' addresses yet (is their agent up? `throttle-ctl status` shows it); the agents ask again every few seconds",
            missing.join(", ")
        );
    }
    Ok(())
}

/// Why a command's traffic between the first `nodes` nodes of `cluster` cannot be shaped,
/// where that is known before it runs: on a loopback cluster whose agents do not serve
/// the preload library (a cluster file written before they did) every node is this host,
/// the command's processes talk over loopback, and no agent is between them.
pub fn unshaped(cluster: &Cluster, nodes: usize) -> Option<String> {
    let used: Vec<&Node> = cluster.file.nodes.iter().take(nodes).collect();
    let loopback = used.len() > 1
        && cluster.file.namespaces.is_none()
        && used
            .iter()
            .all(|n| n.netns.is_none() && n.data.ip().is_loopback() && n.preload.is_none());
    loopback.then(|| {
        format!(
            "this loopback cluster's {} agents do not serve the preload library (its cluster file is older than that), so a command's processes talk to each other over loopback and nothing between them is shaped (its time is the unthrottled one). Start it again (`throttle-ctl local down`, `local up`) and launch the processes as nodes with `throttle-ctl exec` (mpirun: `--mca plm_rsh_agent \"throttle-ctl exec\"`)",
            used.len()
        )
    })
}

/// Every node's agent serves the preload library, or an error that says which do not.
fn check_preload_served(cluster: &Cluster, nodes: &[Node]) -> Result<()> {
    let mut missing = Vec::new();
    for n in nodes {
        let status = crate::cluster::agent_client::AgentClient::new(cluster, n)
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

impl RunDir {
    /// A new directory, readable by this user only, in the temporary directory.
    fn create() -> Result<RunDir> {
        let mut b = [0u8; 6];
        let _ = getrandom::getrandom(&mut b);
        let hex: String = b.iter().map(|x| format!("{x:02x}")).collect();
        let d = std::env::temp_dir().join(format!("{RUN_DIR_PREFIX}{hex}"));
        use std::os::unix::fs::DirBuilderExt;
        std::fs::DirBuilder::new()
            .mode(0o700)
            .create(&d)
            .with_context(|| format!("cannot create {}", d.display()))?;
        Ok(RunDir(d))
    }
}

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
    let dir = RunDir::create()?;
    let hostfile = dir.0.join("hostfile");
    let hosts: String = nodes.iter().map(|n| host_line(n, ranks_per_node)).collect();
    std::fs::write(&hostfile, hosts)?;
    let line = template.render(nodes.len(), ranks_per_node, &hostfile, bw);
    if preload.is_some() {
        for p in crate::intercept::static_programs(&line) {
            crate::note!(
                "warning: {} is statically linked: the preload library cannot reach it, its connections are not throttled",
                p.display()
            );
        }
    }
    check_members(cluster, nodes)?;
    let intercepted_before = intercepted_outgoing(cluster, nodes);
    // Orphans of the command (daemons, processes in their own groups) become children of
    // this process, not of init, so that they can be found and killed afterwards; and if
    // this process is killed outright, the guard kills them (it is spared here).
    let _ = nix::sys::prctl::set_child_subreaper(true);
    let mut guard = guard::Guard::start(&dir.0)?;
    let spared = children();
    let mut child = spawn(cluster, &line, preload.as_deref(), &guard)?;
    let start = Instant::now();
    guard.group(child.id());
    let pgid = nix::unistd::Pid::from_raw(child.id() as i32);
    let capture = Capture::start(&mut child, time_regex);
    let kill = || {
        let _ = nix::sys::signal::killpg(pgid, nix::sys::signal::Signal::SIGKILL);
        kill_descendants(&spared);
    };
    let exit = wait(&mut child, cancel, (start, time_limit), &kill)?;
    // What the command left behind (background children, daemons that called setsid,
    // processes in their own groups such as mpirun's): all are our descendants, since
    // this process is their subreaper.
    kill_descendants(&spared);
    let (output, captured) = capture.finish();
    // Only of a command that ran to a successful end: a failed one has its own error,
    // which must come first and alone (a warning about interception before "exited with
    // status 132" sent a user looking in the wrong place).
    warn_if_not_intercepted(
        cluster,
        nodes,
        intercepted_before,
        exit.killed_why.is_none() && exit.status.is_some_and(|s| s.success()),
    );
    ended(exit, &line, time_regex, output, captured)
}

/// Start `/bin/sh -c line` in its own process group, its output piped, with the cluster
/// file and the guard's marker in its environment (and the preload library's, with
/// `preload`).
fn spawn(
    cluster: &Cluster,
    line: &str,
    preload: Option<&std::path::Path>,
    guard: &guard::Guard,
) -> Result<std::process::Child> {
    let cluster_path = std::path::absolute(&cluster.path).unwrap_or(cluster.path.clone());
    let mut command = Command::new("/bin/sh");
    if let Some(lib) = preload {
        command
            .env(crate::intercept::ENV, "preload")
            .env(crate::intercept::LIB_ENV, lib);
    }
    command
        .arg("-c")
        .arg(line)
        .env("THROTTLE_CLUSTER", &cluster_path)
        .env(guard::MARKER_ENV, guard.marker())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .spawn()
        .with_context(|| format!("cannot start /bin/sh -c {line:?}"))
}

/// How the command's wait ended.
struct Exit {
    /// Its exit status (none where it could not be had after a kill).
    status: Option<std::process::ExitStatus>,
    /// Why it was killed, where it was.
    killed_why: Option<String>,
    /// Wall time from start to exit (or kill).
    wall_seconds: f64,
}

/// Wait for `child` (started at `start`), killing it with `kill` when `cancel` becomes
/// true or past `time_limit`.
fn wait(
    child: &mut std::process::Child,
    cancel: &AtomicBool,
    (start, time_limit): (Instant, Duration),
    kill: &dyn Fn(),
) -> Result<Exit> {
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
    Ok(Exit {
        status,
        killed_why,
        wall_seconds: start.elapsed().as_secs_f64(),
    })
}

/// Warn when a command that ran to a successful end (`ran`) between several nodes had none
/// of its connections intercepted (`before`: the agents' count before it started).
fn warn_if_not_intercepted(cluster: &Cluster, nodes: &[Node], before: Option<u64>, ran: bool) {
    if let (Some(before), Some(after)) = (before, intercepted_outgoing(cluster, nodes)) {
        if nodes.len() > 1 && after == before && ran {
            crate::note!(
                "warning: no connection of this command between nodes went through the agents or was paced by them (intercepted or paced: 0 on {} nodes): its time is not throttled. \
                 A statically linked program, raw system calls or io_uring escape the preload library; a command that does not start its processes with `throttle-ctl exec` (or LD_PRELOAD) on namespace hosts or a loopback cluster, or whose processes do not talk over TCP, is not intercepted either",
                nodes.len()
            );
        }
    }
}

/// `why`, with the last lines of the command's output.
fn with_tail(why: String, output: &[String]) -> String {
    let said = telling_lines(output);
    if said.is_empty() {
        why
    } else {
        format!("{why}; its output says: {}", said.join(" | "))
    }
}

/// Words of a line that says what went wrong (mpirun's `Executable: ./prog`, a shell's
/// `not found`, a library's `error`).
const TELLING: &[&str] = &[
    "error",
    "not found",
    "no such",
    "executable:",
    "cannot",
    "can't",
    "unable",
    "denied",
    "failed",
    "abort",
    "refused",
    "invalid",
    "usage",
    "killed",
    "segmentation",
];

/// The lines of `output` a failure is told by: those with a [`TELLING`] word (the first
/// three), then the last ones, five in all at most, in their order; rules of dashes and
/// blank lines are no lines, a line printed again (by every rank) is one, and Open MPI's
/// words around a program's own (see [`launcher_words`]) are left out.
pub fn telling_lines(output: &[String]) -> Vec<&str> {
    let mut seen = std::collections::HashSet::new();
    let lines: Vec<(usize, &str)> = launcher_words(output)
        .into_iter()
        .filter(|(_, l)| l.chars().any(char::is_alphanumeric))
        .filter(|(_, l)| seen.insert(*l))
        .collect();
    let mut chosen: Vec<usize> = lines
        .iter()
        .filter(|(_, l)| {
            let l = l.to_lowercase();
            TELLING.iter().any(|w| l.contains(w))
        })
        .take(3)
        .map(|(i, _)| *i)
        .collect();
    for (i, _) in lines.iter().rev() {
        if chosen.len() >= 5 {
            break;
        }
        if !chosen.contains(i) {
            chosen.push(*i);
        }
    }
    chosen.sort_unstable();
    chosen
        .into_iter()
        .filter_map(|i| lines.iter().find(|l| l.0 == i).map(|l| l.1))
        .collect()
}

/// `output`'s lines, trimmed and numbered, without what Open MPI says around a program
/// that called `MPI_Abort`: of its notice (a block between rules of dashes) only its first
/// line (`MPI_ABORT was invoked on rank 1 ...`), and neither its help aggregation (`1
/// more process has sent help message ...`, `Set MCA parameter
/// "orte_base_help_aggregate" ...`) nor the error its printing of help logs
/// (`ORTE_ERROR_LOG: ... show_help.c`). Those filled the five lines a failure is told by,
/// and the program's own reason (`Number of processes 3 is not a power of two`) was not
/// among them.
fn launcher_words(output: &[String]) -> Vec<(usize, &str)> {
    let rule = |l: &str| l.len() >= 10 && l.chars().all(|c| c == '-');
    // Open MPI 4.1's notice is 6 lines: one without its closing rule skips no more.
    const NOTICE_LINES: usize = 8;
    let mut out = Vec::new();
    let mut in_abort = 0;
    let mut lines = output.iter().map(|l| l.trim()).enumerate().peekable();
    while let Some((i, l)) = lines.next() {
        // Inside the notice: skipped up to its closing rule, or its first
        // NOTICE_LINES lines.
        if in_abort > 0 {
            in_abort -= 1;
            if rule(l) {
                in_abort = 0;
                continue;
            }
            if in_abort > 0 {
                continue;
            }
        }
        if rule(l) {
            if let Some(&(j, next)) = lines.peek() {
                if next.starts_with("MPI_ABORT was invoked") {
                    lines.next();
                    out.push((j, next));
                    in_abort = NOTICE_LINES;
                    continue;
                }
            }
        }
        let chatter = l.contains("has sent help message")
            || l.contains("have sent help message")
            || l.contains("orte_base_help_aggregate")
            || l.contains("prte_base_help_aggregate")
            || (l.contains("ORTE_ERROR_LOG") && l.contains("show_help"));
        if !chatter {
            out.push((i, l));
        }
    }
    out
}

/// How the command `line` ended, from its exit, its `output` and what `time_regex`
/// `captured`: a failure when it was killed, exited non-zero, or its own time is missing.
fn ended(
    exit: Exit,
    line: &str,
    time_regex: Option<&TimeRegex>,
    output: Vec<String>,
    captured: Option<Result<f64, String>>,
) -> Result<Ended> {
    let Exit {
        status,
        killed_why,
        wall_seconds,
    } = exit;
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
        return Ok(fail(with_tail(why, &output), interrupted));
    }
    let status = status.ok_or_else(|| anyhow!("lost the command's exit status"))?;
    if !status.success() {
        let why = match status.code() {
            Some(127) => format!("the command exited with status 127 (command not found?): {line}"),
            Some(c) => format!("the command exited with status {c}"),
            None => format!("the command was killed ({status})"),
        };
        return Ok(fail(with_tail(why, &output), false));
    }
    Ok(match own_result(time_regex, captured) {
        Ok(result) => Ended {
            ok: true,
            interrupted: false,
            reason: None,
            wall_seconds,
            result,
            output,
        },
        Err(why) => fail(with_tail(why, &output), false),
    })
}

/// The command's own result from what `time_regex` captured: none without a regex, an
/// error when it matched nothing or its number is not one.
fn own_result(
    time_regex: Option<&TimeRegex>,
    captured: Option<Result<f64, String>>,
) -> Result<Option<WorkloadResult>, String> {
    Ok(match (time_regex, captured) {
        (None, _) => None,
        (Some(re), None) => {
            return Err(format!(
                "{} `{}` matched no line of the output",
                re.flag(),
                re.as_str()
            ))
        }
        (Some(_), Some(Err(e))) => return Err(e),
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
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use throttle_proto::name::Name;
    use throttle_proto::status::InterceptedStatus;

    /// Issue 44, item 8: mpirun's message for a program that does not exist ends with a
    /// rule and "while attempting to start process rank 0"; the line that names the
    /// program is among the lines a failure is told by.
    #[test]
    fn the_line_that_names_the_missing_program_is_told() {
        let output: Vec<String> = [
            "--------------------------------------------------------------------------",
            "prterun was unable to launch the specified application as it could not",
            "access or execute an executable:",
            "",
            "Executable: ./bfss",
            "Node: n1",
            "",
            "while attempting to start process rank 0.",
            "--------------------------------------------------------------------------",
            "1 total process failed to start",
        ]
        .map(String::from)
        .to_vec();
        let told = telling_lines(&output);
        assert!(told.contains(&"Executable: ./bfss"), "{told:?}");
        assert!(
            told.len() <= 5 && !told.iter().any(|l| l.starts_with("---")),
            "{told:?}"
        );
        assert_eq!(told.last(), Some(&"1 total process failed to start"));
        let why = with_tail("the command exited with status 1".into(), &output);
        assert!(why.contains("Executable: ./bfss"), "{why}");
    }

    /// Issue 54: a program that calls `MPI_Abort` after saying why (on every rank), as
    /// Open MPI 4.1 prints it: the program's reason is told, once, and mpirun's notice by
    /// its first line only.
    #[test]
    fn a_programs_own_reason_is_told_before_mpiruns_abort_notice() {
        let output: Vec<String> = [
            "Number of processes 3 is not a power of two",
            "Number of processes 3 is not a power of two",
            "Number of processes 3 is not a power of two",
            "[vm:10181] [[19259,0],0] ORTE_ERROR_LOG: Data unpack would read past end of buffer in file ../../../orte/util/show_help.c at line 513",
            "--------------------------------------------------------------------------",
            "MPI_ABORT was invoked on rank 1 in communicator MPI_COMM_WORLD",
            "with errorcode 1.",
            "",
            "NOTE: invoking MPI_ABORT causes Open MPI to kill all MPI processes.",
            "You may or may not see output from other processes, depending on",
            "exactly when Open MPI kills them.",
            "--------------------------------------------------------------------------",
            "[vm:10181] 1 more process has sent help message help-mpi-api.txt / mpi-abort",
            "[vm:10181] Set MCA parameter \"orte_base_help_aggregate\" to 0 to see all help / error messages",
        ]
        .map(String::from)
        .to_vec();
        let told = telling_lines(&output);
        assert_eq!(
            told,
            [
                "Number of processes 3 is not a power of two",
                "MPI_ABORT was invoked on rank 1 in communicator MPI_COMM_WORLD"
            ],
            "{told:?}"
        );
        // A notice without its closing rule hides no more than its own length.
        let cut: Vec<String> = output[..7]
            .iter()
            .cloned()
            .chain((0..12).map(|i| format!("rank line {i}")))
            .collect();
        let told = telling_lines(&cut);
        assert!(told.contains(&"rank line 11"), "{told:?}");
    }

    fn status(not_proven: &[&str], outside: &[&str]) -> InterceptedStatus {
        let names = |l: &[&str]| l.iter().map(|n| Name::parse("node", n).unwrap()).collect();
        InterceptedStatus {
            outgoing: 0,
            incoming: 0,
            failed: 0,
            kernel: true,
            preload_port: None,
            not_proven: names(not_proven),
            outside: names(outside),
        }
    }

    /// Issue 35, finding 5: a node outside the blocks an agent may intercept is never
    /// captured; a run between them would pass unshaped, so it is refused and says why.
    #[test]
    fn a_run_to_a_node_that_is_not_captured_is_refused() {
        let run = ["n0", "n1"];
        assert!(uncaptured(&run, &[("n0".into(), status(&[], &[]))]).is_ok());
        // Nodes outside the run do not matter.
        assert!(uncaptured(&run, &[("n0".into(), status(&["n5"], &["n6"]))]).is_ok());
        let e = uncaptured(&run, &[("n0".into(), status(&[], &["n1"]))]).unwrap_err();
        assert!(
            e.to_string().contains("n0 -> n1") && e.to_string().contains("--intercept-within"),
            "{e}"
        );
        let e = uncaptured(&run, &[("n1".into(), status(&["n0"], &[]))]).unwrap_err();
        assert!(
            e.to_string().contains("n1 -> n0") && e.to_string().contains("proven"),
            "{e}"
        );
    }
}
