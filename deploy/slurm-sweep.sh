#!/usr/bin/env bash
# A throttle sweep inside a Slurm allocation: one agent per node, the cluster file from
# the job's node list, then the sweep and its analysis.
#
#   salloc -N 8 --exclusive bash deploy/slurm-sweep.sh experiments/bfs-sweep.toml 10Gbit
#   sbatch -N 8 --exclusive deploy/slurm-sweep.sh experiments/bfs-sweep.toml 10Gbit
#
# Needs throttle-ctl, throttle-agent and the workloads on every node (a shared file
# system, or BIN pointing at them), and the nodes' addresses resolvable here. Results go
# to ./throttle-slurm-$SLURM_JOB_ID/.
set -euo pipefail

SPEC=$(realpath -- "${1:?usage: slurm-sweep.sh SPEC.toml CAPACITY (e.g. 10Gbit)}")
CAPACITY=${2:?usage: slurm-sweep.sh SPEC.toml CAPACITY (e.g. 10Gbit)}
BIN=$(cd "${BIN:-$(dirname "$(command -v throttle-ctl)")}" && pwd)
: "${SLURM_JOB_ID:?not inside a Slurm allocation (run it with salloc or sbatch)}"
OUT=${OUT:-$PWD/throttle-slurm-$SLURM_JOB_ID}
mkdir -p "$OUT"
cd "$OUT"

# The cluster file and a fresh token (on the shared file system, mode 600).
"$BIN/throttle-ctl" --cluster cluster.toml cluster init --slurm --capacity "$CAPACITY" \
  --socket-dir "/tmp/throttle-$SLURM_JOB_ID" --force --json > init.json

# One agent per node, each with its own line of the cluster file; srun keeps them in the
# allocation and kills them when this script ends.
cat > agent.sh <<'AGENT'
#!/usr/bin/env bash
set -euo pipefail
# The node's name as SLURM_JOB_NODELIST has it (the cluster file's), not its hostname.
node=${SLURMD_NODENAME:-$(hostname -s)}
line=$(python3 -c 'import json,sys
d = json.load(open(sys.argv[1]))
m = [a["args"][1:] for a in d["agents"] if a["node"] == sys.argv[2]]
sys.exit("no node %s in the cluster file" % sys.argv[2]) if not m else print(" ".join(m[0]))' init.json "$node")
install -d -m 700 "/tmp/throttle-$SLURM_JOB_ID"
install -m 600 throttle-token "/tmp/throttle-$SLURM_JOB_ID/token"
# shellcheck disable=SC2086
exec "$BIN/throttle-agent" ${line//TOKEN_FILE//tmp/throttle-$SLURM_JOB_ID/token}
AGENT
chmod +x agent.sh
# The whole node for the agent and the ranks it launches (a step gets one CPU otherwise).
BIN=$BIN srun --ntasks-per-node=1 --cpus-per-task="${SLURM_CPUS_ON_NODE:-1}" --mem=0 \
  --cpu-bind=none --kill-on-bad-exit=1 ./agent.sh > agents.log 2>&1 &
AGENTS=$!
trap 'kill $AGENTS 2>/dev/null || true' EXIT

# Wait until every agent answers.
for _ in $(seq 60); do
  if "$BIN/throttle-ctl" --cluster cluster.toml status > /dev/null 2>&1; then break; fi
  sleep 1
done
"$BIN/throttle-ctl" --cluster cluster.toml status

"$BIN/throttle-ctl" --cluster cluster.toml sweep "$SPEC" --db results.db --plain
"$BIN/throttle-ctl" analyze --db results.db --backtest --report report | tee analysis.txt
echo "results in $OUT"
