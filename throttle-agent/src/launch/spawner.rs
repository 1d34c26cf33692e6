//! Starting ranks that die with the agent, and only then.
//!
//! A rank must not outlive its agent, so every rank is started with `PR_SET_PDEATHSIG`
//! (SIGKILL). That signal fires when the *thread* that forked the child exits, not the
//! process. Launches run on tokio's blocking pool, whose threads exit after 10 s idle:
//! a rank forked from one of them was SIGKILLed about 10 s into its job. So every rank is
//! forked from one thread that lives as long as the agent process, and nothing else.
//!
//! The child also checks, after setting the signal, that its parent is still the agent:
//! an agent that died between the fork and the `prctl` would otherwise leave it running.

use std::sync::mpsc;
use std::sync::OnceLock;

use tokio::process::{Child, Command};

type Reply = mpsc::SyncSender<std::io::Result<Child>>;

/// The one thread ranks are forked from.
struct Spawner {
    requests: mpsc::Sender<(Command, tokio::runtime::Handle, Reply)>,
}

static SPAWNER: OnceLock<std::io::Result<Spawner>> = OnceLock::new();

fn spawner() -> std::io::Result<&'static Spawner> {
    SPAWNER
        .get_or_init(|| {
            let (requests, queue) = mpsc::channel::<(Command, tokio::runtime::Handle, Reply)>();
            std::thread::Builder::new()
                .name("rank-spawner".into())
                .spawn(move || {
                    // Lives until the process ends: no sender is ever dropped (the
                    // static holds it), so `recv` never fails. It must not die of a
                    // panic either: every rank forked here would be killed with it.
                    while let Ok((mut cmd, runtime, reply)) = queue.recv() {
                        let spawned =
                            std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                                // tokio registers the child with the runtime's process
                                // driver.
                                let _inside = runtime.enter();
                                cmd.spawn()
                            }))
                            .unwrap_or_else(|_| {
                                Err(std::io::Error::other("starting the rank panicked"))
                            });
                        let _ = reply.send(spawned);
                    }
                })
                .map(|_| Spawner { requests })
        })
        .as_ref()
        .map_err(|e| std::io::Error::new(e.kind(), format!("the rank spawner thread: {e}")))
}

/// Start `cmd` as a child that is SIGKILLed when the agent process dies (and not
/// before). Must be called inside a tokio runtime (the child is watched by it); blocks
/// until the child is forked.
pub fn spawn_tied_to_agent(mut cmd: Command) -> std::io::Result<Child> {
    let runtime = tokio::runtime::Handle::try_current()
        .map_err(|e| std::io::Error::other(format!("no runtime to watch the rank: {e}")))?;
    let agent = nix::unistd::getpid();
    // SAFETY: prctl, getppid, sched_setscheduler and setpriority are plain system calls
    // (async-signal-safe); errors are built from raw codes, so nothing allocates between
    // fork and exec.
    unsafe {
        cmd.pre_exec(move || {
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            if libc::getppid() != agent.as_raw() {
                // The agent died before the signal was armed.
                return Err(std::io::Error::from_raw_os_error(libc::ESRCH));
            }
            // Ranks run as any process would, not at the agent's priority.
            crate::launch::affinity::normal_priority_in_child()
        });
    }
    let (reply, answer) = mpsc::sync_channel(1);
    spawner()?
        .requests
        .send((cmd, runtime, reply))
        .map_err(|_| std::io::Error::other("the rank spawner thread is gone"))?;
    answer
        .recv()
        .map_err(|_| std::io::Error::other("the rank spawner thread is gone"))?
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    /// The bug this module exists for: a rank started from a thread that then exits
    /// must keep running.
    #[test]
    fn a_rank_outlives_the_thread_that_asked_for_it() {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .unwrap();
        let handle = rt.handle().clone();
        let mut child = std::thread::spawn(move || {
            let _inside = handle.enter();
            let mut cmd = Command::new("sleep");
            cmd.arg("30").kill_on_drop(true);
            spawn_tied_to_agent(cmd).unwrap()
        })
        .join()
        .unwrap();
        // The asking thread is gone; PDEATHSIG would have fired by now.
        std::thread::sleep(Duration::from_millis(300));
        let _inside = rt.enter();
        assert!(
            child.try_wait().unwrap().is_none(),
            "the rank died with the thread that launched it: {:?}",
            child.try_wait()
        );
        let _ = child.start_kill();
    }

    #[test]
    fn outside_a_runtime_it_is_an_error_not_a_panic() {
        let e = spawn_tied_to_agent(Command::new("true")).unwrap_err();
        assert!(e.to_string().contains("runtime"), "{e}");
    }

    /// A launch on a runtime that is shutting down (the agent stopping) is an error for
    /// that launch only: the spawner thread stays, and the next launch works.
    #[test]
    fn a_failed_start_leaves_the_spawner_working() {
        let gone = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let handle = gone.handle().clone();
        drop(gone);
        {
            let _inside = handle.enter();
            let e = spawn_tied_to_agent(Command::new("true")).unwrap_err();
            assert!(e.to_string().contains("shut"), "{e}");
        }
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let _inside = rt.enter();
        let mut child = spawn_tied_to_agent(Command::new("true")).unwrap();
        assert!(rt.block_on(child.wait()).unwrap().success());
    }
}
