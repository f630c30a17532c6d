#!/usr/bin/env bash
# Stop the single-node SLURM cluster started by slurm_up.sh: exactly the daemons whose pid files
# are in $HEURESIS_SLURM_DIR (default /tmp/heuresis-slurm), nothing found by name.  Idempotent;
# with --purge also removes the folder.
set -uo pipefail

DIR="${HEURESIS_SLURM_DIR:-/tmp/heuresis-slurm}"

stop() {  # stop NAME PIDFILE: TERM, wait up to 15 s, then KILL
    local name="$1" pidfile="$2" pid
    [ -s "$pidfile" ] || return 0
    pid="$(cat "$pidfile")"
    if kill -0 "$pid" 2>/dev/null; then
        kill -TERM "$pid" 2>/dev/null
        for _ in $(seq 30); do kill -0 "$pid" 2>/dev/null || break; sleep 0.5; done
        if kill -0 "$pid" 2>/dev/null; then
            echo "slurm_down: $name ($pid) ignored TERM, killing" >&2
            kill -KILL "$pid" 2>/dev/null
        fi
    fi
    rm -f "$pidfile"
}

if [ -s "$DIR/slurmctld.pid" ] && [ -f "$DIR/slurm.conf" ]; then
    # jobs still queued or running would outlive slurmd's own processes: cancel them first
    SLURM_CONF="$DIR/slurm.conf" timeout 10 scancel --full --user=root >/dev/null 2>&1 || true
fi
stop slurmd "$DIR/slurmd.pid"
stop slurmctld "$DIR/slurmctld.pid"
stop munged "$DIR/munge/munged.pid"
# the /etc/slurm/slurm.conf symlink, if it is ours
if [ -L /etc/slurm/slurm.conf ] && [ "$(readlink /etc/slurm/slurm.conf)" = "$DIR/slurm.conf" ]; then
    rm -f /etc/slurm/slurm.conf
fi
if [ "${1:-}" = "--purge" ]; then
    rm -rf "$DIR"
fi
echo "slurm_down: stopped ($DIR)" >&2
