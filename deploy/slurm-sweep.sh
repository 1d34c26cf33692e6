#!/usr/bin/env bash
# A throttle sweep inside a Slurm allocation: one agent per node, the cluster file from
# the job's node list, then the sweep and its analysis.
#
#   salloc -N 8 --exclusive bash deploy/slurm-sweep.sh experiments/bfs-sweep.toml 10Gbit
#   sbatch -N 8 --exclusive deploy/slurm-sweep.sh experiments/bfs-sweep.toml 10Gbit
#
# Needs throttle-ctl, throttle-agent and the workloads on every node (a shared file
# system, or BIN pointing at them). The agents listen at the address Slurm reaches each
# node at (scontrol's NodeAddr, else the node's name resolved). Results go to
# ./throttle-slurm-$SLURM_JOB_ID/ (OUT=... to choose).
#
# How programs' connections between nodes reach the agents (INTERCEPT=...):
#   kernel   the agents redirect every TCP connection to the other nodes (needs the job
#            to run as root: the agents install nftables rules);
#   preload  the agents serve the preload library (no root); the sweep's [command] must
#            say intercept = "preload" so that mpirun and the ranks it starts load it;
#   none     only throttle's own workloads (bfs, pmm, mw) are shaped.
# Default: kernel as root, preload otherwise.
set -euo pipefail

# Where the job's time goes: a line as each phase ends, in seconds since the script began.
T0=$(date +%s.%N)
say() {
  echo "slurm-sweep: $(awk -v a="$T0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.2f", b - a }') s: $*"
}

SPEC=$(realpath -- "${1:?usage: slurm-sweep.sh SPEC.toml CAPACITY (e.g. 10Gbit)}")
CAPACITY=${2:?usage: slurm-sweep.sh SPEC.toml CAPACITY (e.g. 10Gbit)}
BIN=$(cd "${BIN:-$(dirname "$(command -v throttle-ctl)")}" && pwd)
: "${SLURM_JOB_ID:?not inside a Slurm allocation (run it with salloc or sbatch)}"
OUT=${OUT:-$PWD/throttle-slurm-$SLURM_JOB_ID}
mkdir -p "$OUT"
cd "$OUT"

# The cluster file and a fresh token (on the shared file system, mode 600).
"$BIN/throttle-ctl" --cluster cluster.toml cluster init --slurm --capacity "$CAPACITY" \
  --socket-dir "/tmp/throttle-$SLURM_JOB_ID" --force > init.txt
say "job $SLURM_JOB_ID on $SLURM_JOB_NODELIST: cluster file written"
case "${INTERCEPT:-auto}" in
  auto) if [ "$(id -u)" = 0 ]; then INTERCEPT=kernel; else INTERCEPT=preload; fi ;;
  kernel|preload|none) ;;
  *) echo "INTERCEPT must be kernel, preload or none, not $INTERCEPT" >&2; exit 2 ;;
esac
case "$INTERCEPT" in
  kernel) AGENT_FLAGS=--intercept ;;
  preload) AGENT_FLAGS=--preload ;;
  none) AGENT_FLAGS= ;;
esac
export BIN AGENT_FLAGS
# Every step of the job overlaps the others (srun --overlap, srun reads SLURM_OVERLAP),
# the steps the sweep's programs start included (mpirun's srun of its daemons): the runs
# take turns, and a run's step need not wait until the previous run's step has released
# the CPUs. Without it, a run started while the previous step was still ending (its
# slurmstepd retrying the exit message to the srun mpirun had already ended: 2.3 s)
# waited for slurmctld to wake its srun, and where that wake-up does not reach srun, for
# srun's own retry: 60 to 310 s (MAX(60, SlurmctldTimeout) plus up to 9 s).
export SLURM_OVERLAP=1

# One agent per node, each with its own line of the cluster file; srun keeps them in the
# allocation and kills them when this script ends.
cat > agent.sh <<'AGENT'
#!/usr/bin/env bash
set -euo pipefail
# The node's name as SLURM_JOB_NODELIST has it (the cluster file's), not its hostname;
# its line of init.txt ("  NODE: throttle-agent --node NODE ..."), without the program.
node=${SLURMD_NODENAME:-$(hostname -s)}
line=$(awk -v n="$node:" '$1 == n { $1 = ""; $2 = ""; print }' init.txt)
if [ -z "$line" ]; then echo "no node $node in init.txt" >&2; exit 1; fi
# The sockets' directory on this node; the token is read where cluster init wrote it
# (this directory, mode 600, on the file system the job's nodes share).
mkdir -p -m 700 "/tmp/throttle-$SLURM_JOB_ID"
# shellcheck disable=SC2086
exec "$BIN/throttle-agent" ${line//TOKEN_FILE/$PWD/throttle-token} $AGENT_FLAGS
AGENT
chmod +x agent.sh
# One agent per node, in a step that overlaps the others (--overlap): the steps the
# sweep's programs start (mpirun's orted, srun) get the allocation's CPUs as well, and
# the agent may run on all of them (--cpu-bind=none).
srun --overlap --ntasks-per-node=1 --mem=0 --cpu-bind=none --kill-on-bad-exit=1 \
  ./agent.sh > agents.log 2>&1 &
AGENTS=$!
# At the end, however it comes: stop the agents (they remove their rules and sockets),
# then the sockets' directory on every node.
# (SIGTERM to the agents' step, the job's first: killing srun would SIGKILL them.)
# The agents' srun ends once every agent has; scancel is not waited for: its request to
# another node's slurmd may cross the agents (the kernel redirect takes every TCP
# connection to the other nodes), and an agent it stops can drop the reply, which scancel
# then awaits for MessageTimeout (10 s) although every agent got the signal.
cleanup() {
  scancel --signal=TERM "$SLURM_JOB_ID.0" 2>/dev/null &
  local signal=$!
  for _ in $(seq 100); do kill -0 "$AGENTS" 2>/dev/null || break; sleep 0.1; done
  kill "$AGENTS" "$signal" 2>/dev/null || true
  wait "$AGENTS" 2>/dev/null || true
  wait "$signal" 2>/dev/null || true
  say "agents stopped"
  srun --overlap --ntasks-per-node=1 rm -rf "/tmp/throttle-$SLURM_JOB_ID" || true
  say "socket directories removed; done"
}
trap cleanup EXIT

# Wait until every agent answers (60 s at most).
for _ in $(seq 300); do
  if "$BIN/throttle-ctl" --cluster cluster.toml status > /dev/null 2>&1; then break; fi
  sleep 0.2
done
"$BIN/throttle-ctl" --cluster cluster.toml status
say "every agent answers"

"$BIN/throttle-ctl" --cluster cluster.toml sweep "$SPEC" --db results.db --plain
say "sweep done"
"$BIN/throttle-ctl" analyze --db results.db --backtest --report report | tee analysis.txt
say "analysis done"
echo "results in $OUT"
