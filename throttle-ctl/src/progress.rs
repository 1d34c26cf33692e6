//! A sweep's progress: a bar with an ETA that updates in place when standard error is a
//! terminal, one line per run when it is not (a log file, CI), so long sweeps never look
//! stuck and logs stay readable. At the end it names the sizes whose runs kept the CPUs
//! busy (CPU-bound, measured).

use std::io::{IsTerminal, Write};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use indicatif::{ProgressBar, ProgressStyle};

use crate::job::Outcome;
use crate::run_status::RunStatus;
use crate::sweep::search::Bracket;
use crate::sweep::until::Next;
use crate::sweep::SweepEvent;

pub struct SweepProgress {
    /// On a terminal: the bar, made when the first run starts (before, it has no length
    /// and would show `0/0 runs`).
    bar: Option<ProgressBar>,
    terminal: bool,
    /// Where lines go without a bar: standard error (a buffer in the tests).
    out: Box<dyn Write + Send>,
    /// Per node count, how busy the CPUs were during each run (a share): the sizes whose
    /// runs kept them busy are named at the end, as CPU-bound.
    cpu: std::collections::BTreeMap<usize, Vec<f64>>,
    /// Set when an output lost its reader (`| head`): the sweep then stops as on Ctrl-C.
    stop: Option<&'static AtomicBool>,
    /// An output lost its reader.
    closed: bool,
    /// A flagged run's likely cause was printed with what helps: later lines leave it out.
    advised: bool,
}

/// `1h02m`, `3m05s`, `12s`.
pub fn eta_text(secs: f64) -> String {
    let s = secs.max(0.0).round() as u64;
    if s >= 3600 {
        format!("{}h{:02}m", s / 3600, s % 3600 / 60)
    } else if s >= 60 {
        format!("{}m{:02}s", s / 60, s % 60)
    } else {
        format!("{s}s")
    }
}

impl SweepProgress {
    /// A bar on a terminal, lines otherwise (or always lines with `plain`).
    pub fn new(plain: bool) -> SweepProgress {
        SweepProgress::to(
            !plain && std::io::stderr().is_terminal(),
            Box::new(std::io::stderr()),
        )
    }

    fn to(terminal: bool, out: Box<dyn Write + Send>) -> SweepProgress {
        SweepProgress {
            bar: None,
            terminal,
            out,
            cpu: std::collections::BTreeMap::new(),
            advised: false,
            stop: None,
            closed: false,
        }
    }

    /// Stop the sweep (set `flag`, its Ctrl-C flag) when standard output or error loses its
    /// reader, as other tools stop on a closed pipe: the bandwidth is put back and what is
    /// stored kept, where a sweep that went on unseen would run until killed.
    pub fn stop_on_closed_output(mut self, flag: &'static AtomicBool) -> SweepProgress {
        self.stop = Some(flag);
        self
    }

    /// Whether an output lost its reader (and the sweep was told to stop).
    pub fn output_closed(&self) -> bool {
        self.closed
    }

    /// Note that an output is gone, and stop the sweep.
    fn closing(&mut self) {
        if let Some(flag) = self.stop {
            self.closed = true;
            flag.store(true, Ordering::SeqCst);
        }
    }

    /// The bar, made for `todo` runs the first time (on a terminal only).
    fn bar_for(&mut self, todo: usize) -> Option<&ProgressBar> {
        if self.bar.is_none() && self.terminal {
            let b = ProgressBar::new(todo as u64);
            b.set_style(
                ProgressStyle::with_template(
                    "{spinner} [{bar:30}] {pos}/{len} runs  {elapsed} elapsed, ETA {eta}  {msg}",
                )
                .unwrap_or_else(|_| ProgressStyle::default_bar())
                .progress_chars("=> "),
            );
            b.enable_steady_tick(Duration::from_millis(200));
            self.bar = Some(b);
        }
        self.bar.as_ref()
    }

    fn line(&mut self, text: &str) {
        match &self.bar {
            Some(b) => b.println(text),
            // A closed standard error (`2>&1 | head`) stops the sweep as on Ctrl-C (with
            // `stop_on_closed_output`): the bandwidth is put back, the runs stored kept.
            None => {
                if writeln!(self.out, "{text}")
                    .is_err_and(|e| e.kind() == std::io::ErrorKind::BrokenPipe)
                {
                    self.closing();
                }
            }
        }
    }

    pub fn event(&mut self, e: SweepEvent<'_>) {
        match e {
            SweepEvent::LeftoversRemoved(n) => self.line(&format!(
                "removed {n} job(s) an earlier run of this sweep left on the agents (their ranks are killed)"
            )),
            SweepEvent::Resuming { stored, total } => self.line(&format!(
                "resuming: {stored} of {total} points already stored"
            )),
            SweepEvent::Starting { index, todo, point } => {
                if self.stop.is_some() && crate::output::an_output_is_gone() {
                    self.closing();
                }
                if let Some(b) = self.bar_for(todo) {
                    b.set_length(todo as u64);
                    b.set_position(index as u64);
                    b.set_message(format!(
                        "nodes={} {} rep={}",
                        point.nodes,
                        point.setting(),
                        point.repeat
                    ));
                }
            }
            SweepEvent::Finished {
                index,
                todo,
                point,
                outcome,
                eta_s,
                retry,
            } => {
                let head = format!(
                    "[{}/{todo}] nodes={} {} rep={}",
                    index + 1,
                    point.nodes,
                    point.setting(),
                    point.repeat
                );
                self.finished(&head, outcome, (index, eta_s), retry)
            }
            SweepEvent::GaveUp {
                point,
                attempts,
                why,
            } => self.line(&format!(
                "nodes={} {} rep={}: gave up after {attempts} failed or flagged attempt(s){}",
                point.nodes,
                point.setting(),
                point.repeat,
                match why {
                    Some(why) => format!("; the last: {why}"),
                    None => " (by an earlier run of this sweep; --retry-given-up runs it again)".into(),
                }
            )),
            SweepEvent::WarmingUp { nodes } => {
                if self.bar.is_none() {
                    self.line(&format!("warm-up run on {nodes} node(s), not stored"))
                }
            }
            SweepEvent::Cpu { point, busy } => self.cpu.entry(point.nodes).or_default().push(busy),
            SweepEvent::MoreRepeats { round, points } => self.line(&format!(
                "repeats=auto, round {round}: {points} point(s) not yet within the precision asked get another run"
            )),
            SweepEvent::SizeGivenUp {
                nodes,
                points,
                flagged,
                starved,
                capacity,
            } => self.line(&given_up_text(nodes, points, flagged, starved, capacity)),
            SweepEvent::Searching {
                round,
                steps,
                points,
            } => self.line(&format!(
                "demand search, round {round}: {steps} new bandwidth step(s) where the CTI levels are crossed ({points} runs)"
            )),
            SweepEvent::Searched {
                nodes,
                levels,
                brackets,
                spent,
                max_steps,
                width,
            } => self.line(&format!(
                "demand search at {nodes} node(s): steps around each level are apart by {}{}",
                brackets_text(levels, &brackets),
                search_budget_text(&brackets, spent, max_steps, width)
            )),
            SweepEvent::Until {
                round,
                next,
                spent,
                budget,
            } => self.line(&format!(
                "[until] round {round} ({spent} of {budget} runs spent): {}",
                until_text(next)
            )),
        }
    }

    /// A run ended (`head` names it; `index` of the runs, with the ETA of the rest): the
    /// bar moves on a success, a line says a failure or a flag and whether it is retried.
    fn finished(
        &mut self,
        head: &str,
        outcome: &Outcome,
        (index, eta_s): (usize, f64),
        retry: bool,
    ) {
        let then = if retry { "retrying" } else { "no retries left" };
        if let (RunStatus::Ok, Some(flag)) = (outcome.status, outcome.flag()) {
            let flag = self.without_advice_said(&flag);
            self.line(&format!(
                "{head}: {} but FLAGGED: {flag}; stored, left out of the analysis; {then}",
                times_text(outcome)
            ));
        } else if outcome.status == RunStatus::Ok {
            match &self.bar {
                Some(b) => b.set_position(index as u64 + 1),
                None => self.line(&format!(
                    "{head}: {} | ETA {}",
                    times_text(outcome),
                    eta_text(eta_s)
                )),
            }
        } else {
            let job = if outcome.job.is_empty() {
                String::new()
            } else {
                format!(" as job {}", outcome.job)
            };
            self.line(&format!(
                "{head}: FAILED ({}), stored{job}; {then}",
                outcome.reason.as_deref().unwrap_or("unknown"),
            ));
        }
    }

    /// `flag` as a flagged run's line says it: the likely cause's advice (what helps, in
    /// parentheses at its end) the first time only; 47 flagged runs printed 500-600
    /// characters each (issue 54).
    fn without_advice_said(&mut self, flag: &str) -> String {
        const CAUSE: &str = "likely cause: ";
        let Some(at) = flag.find(CAUSE) else {
            return flag.to_string();
        };
        let cause = &flag[at..];
        let Some(open) = cause.rfind(" (").filter(|_| cause.ends_with(')')) else {
            return flag.to_string();
        };
        if !self.advised {
            self.advised = true;
            return flag.to_string();
        }
        format!("{}{} (what helps: as above)", &flag[..at], &cause[..open])
    }

    pub fn finish(&mut self) {
        if let Some(b) = self.bar.take() {
            b.finish_and_clear();
        }
        if let Some(w) = crate::load::cpu_bound(&self.cpu) {
            self.line(&format!("warning: {w}"));
        }
    }
}

/// Why a node count was given up, and the remedy that fits its cause: for failures, the
/// reasons; for runs flagged because the agents were starved of CPU, what gives them
/// their cores back; for runs flagged otherwise (the agents could not carry the rate), a
/// lower capacity.
fn given_up_text(
    nodes: usize,
    points: u32,
    flagged: bool,
    starved: bool,
    capacity: Option<throttle_proto::rate::Rate>,
) -> String {
    let head = format!(
        "giving up on {nodes} node(s): its first {points} points failed or were flagged every time and none was good; its other points are not run"
    );
    let again = "Then run the same command with --retry-given-up";
    if !flagged {
        return format!(
            "{head}. The reasons are above; `throttle-ctl output JOB` prints a run's whole output"
        );
    }
    if starved {
        return format!(
            "{head}. Every attempt was flagged, most because an agent waited for a CPU: the ranks took the agents' cores. Remedies: agents on cores of their own (`throttle-ctl local up --pin`: the ranks `throttle-ctl exec` starts run on the others); agents before the ranks (root, or `setcap cap_sys_nice+ep` on throttle-agent, for `--agent-priority realtime`); ranks that do not busy-poll (a program's own MPI_Test loop; Open MPI's polling is off under `throttle-ctl exec` unless --mca mpi_yield_when_idle 0 turns it on); fewer nodes. A lower capacity does not give the agents their cores back. {again}"
        );
    }
    let lower = capacity
        .map(|c| {
            format!(
                " (e.g. `throttle-ctl local up --capacity {}`, a tenth of today's {c})",
                throttle_proto::rate::format_flag(c.bytes_per_sec() / 10.0)
            )
        })
        .unwrap_or_default();
    format!(
        "{head}. Every attempt was flagged, and no agent waited long for a CPU: the agents could not carry the links' rate on this machine. Remedies: a lower link capacity{lower}, `throttle-ctl calibrate` suggests one; fewer nodes. {again}"
    )
}

/// How far apart the demand search's steps around each level are, in words.
fn brackets_text(levels: &[f64], brackets: &[Bracket]) -> String {
    let each: Vec<String> = levels
        .iter()
        .zip(brackets)
        .map(|(l, b)| match b {
            Bracket::Width(w) => format!("{l}%: {w:.1}"),
            Bracket::Above(s) => format!("{l}%: above the highest step, {s}"),
            Bracket::Below(s) => format!("{l}%: under the lowest step, {s}"),
            Bracket::Unknown => format!("{l}%: no good runs to tell"),
        })
        .collect();
    each.join(", ")
}

/// That the demand search's budget is spent while a level is still wider than `width`
/// (`spent` of `max_steps` steps), in words; empty otherwise.
fn search_budget_text(brackets: &[Bracket], spent: usize, max_steps: usize, width: f64) -> String {
    let open = brackets
        .iter()
        .any(|b| !matches!(b, Bracket::Width(w) if *w <= width));
    if open && spent >= max_steps {
        format!(
            "; its budget is spent ({spent} steps beyond `bandwidths` are stored, counting any from earlier sweeps of this series): raise [search] max_steps to go on"
        )
    } else {
        String::new()
    }
}

/// What a round of `[until]` does next, or why it stops, in words.
fn until_text(next: &Next) -> String {
    match next {
        Next::Reached { width } => format!(
            "done: the answer is {width:.1} pp wide at its widest, within the width asked"
        ),
        Next::Size { nodes } => {
            format!("measuring {nodes} node(s), which narrows the answer most")
        }
        Next::Repeats { points } => format!(
            "one more repeat of {} point(s) (each size's baseline and the steps around each demand)",
            points.len()
        ),
        Next::Stuck { why, .. } => format!("stopping: {why}"),
    }
}

/// A run's times, each named as `analyze --time` names it: the workload's own (`kernel`)
/// when it reported one, and the job's wall time (`job`, rank 0's start to exit), which
/// includes start-up.
fn times_text(outcome: &Outcome) -> String {
    let result = outcome.result.as_ref();
    // A command measured by its rate: the rate as it printed it, not its inverse.
    if let Some(rate) = result.and_then(|r| r.metric("rate")) {
        return format!(
            "rate {}, job {:.3} s",
            throttle_analysis::table::number(rate),
            outcome.seconds
        );
    }
    match result.and_then(|r| r.seconds) {
        Some(k) => format!("kernel {k:.4} s, job {:.3} s", outcome.seconds),
        None => format!("job {:.3} s", outcome.seconds),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sweep::SweepPoint;
    use std::sync::{Arc, Mutex};
    use throttle_proto::Pct;

    /// Lines written, shared with the test.
    #[derive(Clone, Default)]
    struct Lines(Arc<Mutex<Vec<u8>>>);

    impl Write for Lines {
        fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(b);
            Ok(b.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    impl Lines {
        fn text(&self) -> String {
            String::from_utf8(self.0.lock().unwrap().clone()).unwrap()
        }
    }

    fn point(repeat: u32) -> SweepPoint {
        SweepPoint::new("s", 2, 1, Pct::new(50.0).unwrap(), repeat)
    }

    /// One run, two times (the workload's and the job's): both named, never a bare
    /// `1.301 s` beside an analysis of 0.4846 (issue 37).
    #[test]
    fn a_runs_times_are_named() {
        let mut o = Outcome {
            job: "j".into(),
            workload: "bfs".into(),
            nodes: 2,
            ranks_per_node: 1,
            procs: 2,
            bw_pct: Pct::new(50.0).unwrap(),
            capacity_bytes_per_sec: 125e6,
            latency_us: 0,
            status: RunStatus::Ok,
            reason: None,
            seconds: 1.301,
            result: None,
            output: Vec::new(),
            fidelity: None,
        };
        assert_eq!(times_text(&o), "job 1.301 s");
        o.result = Some(throttle_proto::result::WorkloadResult {
            seconds: Some(0.4846),
            ..Default::default()
        });
        assert_eq!(times_text(&o), "kernel 0.4846 s, job 1.301 s");
        // Issue 44, item 3: a command measured by its rate shows the rate, not
        // "kernel 0.0000 s" (its inverse).
        o.result = Some(throttle_proto::result::WorkloadResult {
            seconds: Some(1.0 / 54_499_000.0),
            metrics: [("rate".to_string(), 54_499_000.0)].into(),
            ..Default::default()
        });
        assert_eq!(times_text(&o), "rate 5.4499e7, job 1.301 s");
    }

    /// Issue 44, item 2: a node count whose attempts were all flagged names the
    /// remedies that fit the cause (starved agents: their cores; else a lower capacity),
    /// and the flag that runs its points again.
    #[test]
    fn a_size_given_up_on_flags_names_the_remedy() {
        let cap = throttle_proto::rate::Rate::parse("1Gbit").unwrap();
        let t = given_up_text(4, 3, true, false, Some(cap));
        assert!(t.contains("local up --capacity 100Mbit"), "{t}");
        assert!(
            t.contains("calibrate") && t.contains("--retry-given-up"),
            "{t}"
        );
        // Starved agents: their cores back, not a lower capacity.
        let t = given_up_text(4, 3, true, true, Some(cap));
        assert!(
            t.contains("local up --pin") && !t.contains("--capacity 100Mbit"),
            "{t}"
        );
        let t = given_up_text(4, 3, false, false, Some(cap));
        assert!(
            !t.contains("--capacity") && t.contains("throttle-ctl output"),
            "{t}"
        );
    }

    /// Issue 54: a sweep's flagged runs say what helps once; later lines name their
    /// cause without it.
    #[test]
    fn a_flagged_runs_advice_is_said_once() {
        let mut p = SweepProgress::to(false, Box::new(Lines::default()));
        let flag = "n0 egress carried 80.0% of its setting while backlogged; likely cause: the agent of n0 waited 300 ms (30% of the run) for a CPU: starved by other processes (more ranks and agents than cores, or ranks that busy-poll: Open MPI --mca mpi_yield_when_idle 1)";
        assert_eq!(p.without_advice_said(flag), flag);
        let later = p.without_advice_said(flag);
        assert_eq!(
            later,
            "n0 egress carried 80.0% of its setting while backlogged; likely cause: the agent of n0 waited 300 ms (30% of the run) for a CPU: starved by other processes (what helps: as above)"
        );
        assert!(later.len() < flag.len() - 60, "{later}");
        // A cause without advice, and a flag without a cause, stay whole.
        let plain = "x; likely cause: no agent waited for a CPU meanwhile: an agent was stopped (SIGSTOP?) or the machine paused";
        assert_eq!(p.without_advice_said(plain), plain);
        assert_eq!(p.without_advice_said("x late"), "x late");
    }

    #[test]
    fn the_bar_is_made_when_the_first_run_starts_with_its_length() {
        let mut p = SweepProgress::to(true, Box::new(Lines::default()));
        assert!(p.bar.is_none(), "a bar before any run would show 0/0 runs");
        p.event(SweepEvent::Starting {
            index: 0,
            todo: 12,
            point: &point(0),
        });
        let bar = p.bar.as_ref().unwrap();
        assert_eq!((bar.length(), bar.position()), (Some(12), 0));
        p.finish();
    }

    #[test]
    fn the_sizes_whose_runs_used_the_cores_are_named_at_the_end() {
        let lines = Lines::default();
        let mut p = SweepProgress::to(false, Box::new(lines.clone()));
        for (r, busy) in [0.9, 0.85, 0.2].into_iter().enumerate() {
            p.event(SweepEvent::Cpu {
                point: &point(r as u32),
                busy,
            });
        }
        p.finish();
        let text = lines.text();
        assert!(
            text.contains("warning: the runs at 2 node(s) (85%)") && text.contains("CPU-bound"),
            "{text}"
        );
    }

    #[test]
    fn a_broken_pipe_stops_the_sweep() {
        static STOP: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);
        struct Closed;
        impl Write for Closed {
            fn write(&mut self, _: &[u8]) -> std::io::Result<usize> {
                Err(std::io::ErrorKind::BrokenPipe.into())
            }
            fn flush(&mut self) -> std::io::Result<()> {
                Ok(())
            }
        }
        let mut p = SweepProgress::to(false, Box::new(Closed)).stop_on_closed_output(&STOP);
        p.event(SweepEvent::LeftoversRemoved(1));
        assert!(p.output_closed() && STOP.load(Ordering::SeqCst));
    }
}
