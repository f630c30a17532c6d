#!/usr/bin/env bash
# Bring up a single-node SLURM cluster on this machine (slurmctld + slurmd on localhost, munge
# for authentication, no accounting database), for tests/test_slurm.py and for trying the
# SLURM profile by hand.  Needs root and Debian's slurm-wlm and munge packages
# (apt-get install slurm-wlm munge; .ci/run does it).
#
#   eval "$(bash tests/cluster/slurm_up.sh)"     # starts the daemons, prints `export SLURM_CONF=...`
#   sinfo; srun hostname
#   bash tests/cluster/slurm_down.sh             # stops exactly the daemons this script started
#
# Everything lives under $HEURESIS_SLURM_DIR (default /tmp/heuresis-slurm): slurm.conf, our own
# munge key and socket, state, spool, logs and pid files.  /etc/slurm/slurm.conf becomes a
# symlink to that slurm.conf (unless a real file is there: then the script refuses), because the
# executor plugin's job step strips SLURM_* variables, SLURM_CONF included, before its `srun`
# inside the job, which then reads the default path.  Idempotent: if the daemons of that folder
# are running and answer, it only prints the export line.  Ports: $HEURESIS_SLURM_PORT (slurmctld,
# default 6817) and the next one (slurmd).
set -euo pipefail

DIR="${HEURESIS_SLURM_DIR:-/tmp/heuresis-slurm}"
PORT="${HEURESIS_SLURM_PORT:-6817}"
CONF="$DIR/slurm.conf"
SOCKET="$DIR/munge/munge.socket.2"

say() { echo "slurm_up: $*" >&2; }
die() { say "$*"; exit 1; }

[ "$(id -u)" = 0 ] || die "needs root (slurmd runs jobs as their user)"
for bin in munged mungekey slurmctld slurmd sinfo sbatch squeue srun scontrol; do
    command -v "$bin" >/dev/null || die "$bin not found: apt-get install slurm-wlm munge"
done

alive() {  # alive PIDFILE: the pid in the file is a running process
    [ -s "$1" ] && kill -0 "$(cat "$1")" 2>/dev/null
}

if alive "$DIR/munge/munged.pid" && alive "$DIR/slurmctld.pid" && alive "$DIR/slurmd.pid" \
    && SLURM_CONF="$CONF" timeout 10 sinfo -h >/dev/null 2>&1; then
    say "already running ($DIR)"
    echo "export SLURM_CONF=$CONF"
    exit 0
fi

mkdir -p "$DIR"/{munge,state,spool,log}
chmod 0700 "$DIR/munge"
chmod 0755 "$DIR"

# --- munge: own key, own socket --------------------------------------------------------------
if ! alive "$DIR/munge/munged.pid"; then
    [ -s "$DIR/munge/munge.key" ] || mungekey --create --keyfile="$DIR/munge/munge.key"
    chmod 0600 "$DIR/munge/munge.key"
    # --force: the state folder may sit under a world-writable /tmp, which munged would refuse.
    munged --force --socket="$SOCKET" --key-file="$DIR/munge/munge.key" \
        --pid-file="$DIR/munge/munged.pid" --log-file="$DIR/munge/munged.log" \
        --seed-file="$DIR/munge/munged.seed" 2>>"$DIR/munge/munged.stderr" \
        || die "munged failed to start: $(tail -5 "$DIR/munge/munged.log" "$DIR/munge/munged.stderr" 2>/dev/null)"
fi

# --- slurm.conf ------------------------------------------------------------------------------
HOST="$(hostname -s)"
CPUS="$(nproc)"
TOTAL_MB="$(free -m | awk '/^Mem:/ {print $2}')"
MEM_MB=$(( TOTAL_MB > 4096 ? TOTAL_MB - 2048 : TOTAL_MB * 3 / 4 ))   # leave the OS a margin
cat > "$CONF" <<EOF
# single-node test cluster written by tests/cluster/slurm_up.sh
ClusterName=heuresis
SlurmctldHost=$HOST
SlurmctldPort=$PORT
SlurmdPort=$((PORT + 1))
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket=$SOCKET
CredType=cred/munge
StateSaveLocation=$DIR/state
SlurmdSpoolDir=$DIR/spool
SlurmctldPidFile=$DIR/slurmctld.pid
SlurmdPidFile=$DIR/slurmd.pid
SlurmctldLogFile=$DIR/log/slurmctld.log
SlurmdLogFile=$DIR/log/slurmd.log
SlurmctldDebug=info
SlurmdDebug=info
MpiDefault=none
SwitchType=switch/none
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
# no accounting database: sacct cannot answer, the executor plugin queries squeue instead, and
# squeue keeps finished jobs for MinJobAge seconds (the plugin wants >= 3x its first poll delay)
AccountingStorageType=accounting_storage/none
JobAcctGatherType=jobacct_gather/none
JobCompType=jobcomp/none
MinJobAge=600
ReturnToService=2
InactiveLimit=0
KillWait=5
OverTimeLimit=0
Waittime=0
NodeName=$HOST CPUs=$CPUS RealMemory=$MEM_MB State=UNKNOWN
PartitionName=debug Nodes=$HOST Default=YES MaxTime=INFINITE State=UP
EOF
export SLURM_CONF="$CONF"
if [ -L /etc/slurm/slurm.conf ] || [ ! -e /etc/slurm/slurm.conf ]; then
    mkdir -p /etc/slurm
    ln -sfn "$CONF" /etc/slurm/slurm.conf
elif [ "$(readlink -f /etc/slurm/slurm.conf)" != "$(readlink -f "$CONF")" ]; then
    die "/etc/slurm/slurm.conf is a real configuration; not replacing it (a test cluster needs its own machine)"
fi

# --- daemons ---------------------------------------------------------------------------------
if ! alive "$DIR/slurmctld.pid"; then
    slurmctld -f "$CONF" -i 2>>"$DIR/log/slurmctld.stderr" \
        || die "slurmctld failed: $(tail -5 "$DIR/log/slurmctld.log" "$DIR/log/slurmctld.stderr" 2>/dev/null)"
fi
if ! alive "$DIR/slurmd.pid"; then
    slurmd -f "$CONF" 2>>"$DIR/log/slurmd.stderr" \
        || die "slurmd failed: $(tail -5 "$DIR/log/slurmd.log" "$DIR/log/slurmd.stderr" 2>/dev/null)"
fi

# wait until the node is idle (slurmd registered with slurmctld)
for _ in $(seq 60); do
    state="$(timeout 10 sinfo -h -N -o '%T' 2>/dev/null | head -1 || true)"
    case "$state" in
        idle*|mixed*|allocated*) break ;;
        down*|drain*) scontrol update nodename="$HOST" state=resume >/dev/null 2>&1 || true ;;
    esac
    sleep 1
done
case "$state" in
    idle*|mixed*|allocated*) ;;
    *) die "node $HOST not ready (state '$state'); see $DIR/log/slurmctld.log and slurmd.log" ;;
esac
say "cluster up: node $HOST, $CPUS CPUs, ${MEM_MB} MB, partition debug ($DIR)"
echo "export SLURM_CONF=$CONF"
