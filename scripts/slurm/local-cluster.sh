#!/usr/bin/env bash
# A one-node Slurm cluster on this machine, for the tests: Debian's slurm-wlm (22.05) and munge,
# started directly (no systemd, no cgroups), with every file in DIR.
#   scripts/slurm/local-cluster.sh start DIR   prints the SLURM_CONF to use; exit 3 if the
#                                             daemons cannot start here (the reason on stderr)
#   scripts/slurm/local-cluster.sh stop DIR    stops only the daemons `start` recorded in DIR
set -euo pipefail
action=$1
dir=$(cd "$2" && pwd)
conf="$dir/slurm.conf"
cannot() { echo "slurm: $*" >&2; exit 3; }

if [ "$action" = stop ]; then
  stopped=()
  for pidfile in "$dir"/*.pid; do
    [ -f "$pidfile" ] || continue
    pid=$(cat "$pidfile")
    # Only a process this script started: its pid recorded here and its command line ours.
    if [ -n "$pid" ] && grep -q -e slurm -e munged "/proc/$pid/cmdline" 2>/dev/null; then
      kill "$pid" 2>/dev/null && stopped+=("$pid")
    fi
  done
  # Wait (up to 10 s) for them to exit: slurmctld saves its state into DIR as it stops, and a
  # caller that removes DIR as soon as this returns would otherwise find it written again.
  for _ in $(seq 100); do
    alive=0
    for pid in "${stopped[@]}"; do
      # A zombie (where nothing reaps the daemons) has exited.
      state=$(sed 's/.*) //' "/proc/$pid/stat" 2>/dev/null | cut -d' ' -f1) || true
      [ -n "$state" ] && [ "$state" != Z ] && alive=1
    done
    [ "$alive" = 0 ] && break
    sleep 0.1
  done
  exit 0
fi

for tool in munged slurmctld slurmd sbatch; do
  command -v "$tool" >/dev/null || cannot "$tool is not installed (apt-get install slurm-wlm munge)"
done
mkdir -p "$dir/state" "$dir/spool" "$dir/log" "$dir/munge"
host=$(hostname -s)

# munge: its own socket and pid in DIR, the system key.
key=/etc/munge/munge.key
[ -r "$key" ] || cannot "no readable $key"
munged --force --socket="$dir/munge/munge.socket" --pid-file="$dir/munge.pid" --key-file="$key" \
  --log-file="$dir/log/munged.log" --seed-file="$dir/munge/seed" 2>"$dir/log/munged.err" \
  || cannot "munged did not start: $(cat "$dir/log/munged.err")"

node=$(slurmd -C | head -n 1)
cat > "$conf" <<CONF
ClusterName=lynxtest
SlurmctldHost=$host
SlurmUser=root
AuthType=auth/munge
AuthInfo=socket=$dir/munge/munge.socket
CredType=cred/munge
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
MpiDefault=none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
ReturnToService=2
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool
SlurmctldPidFile=$dir/slurmctld.pid
SlurmdPidFile=$dir/slurmd.pid
SlurmctldLogFile=$dir/log/slurmctld.log
SlurmdLogFile=$dir/log/slurmd.log
SlurmctldPort=16817
SlurmdPort=16818
JobCompType=jobcomp/none
JobAcctGatherType=jobacct_gather/none
$node
PartitionName=lynx Nodes=ALL Default=YES MaxTime=INFINITE State=UP
CONF
export SLURM_CONF="$conf"
slurmctld -f "$conf" 2>"$dir/log/slurmctld.err" || cannot "slurmctld did not start: $(cat "$dir/log/slurmctld.err")"
slurmd -f "$conf" 2>"$dir/log/slurmd.err" || cannot "slurmd did not start: $(cat "$dir/log/slurmd.err")"
for _ in $(seq 1 100); do
  if sinfo -h -o '%T' 2>/dev/null | grep -q -e idle -e mixed -e allocated; then
    echo "$conf"
    exit 0
  fi
  sleep 0.1
done
cannot "the node did not come up: $(sinfo 2>&1 | tail -n 2); $(tail -n 3 "$dir/log/slurmctld.log" 2>/dev/null)"
