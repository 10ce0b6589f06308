#!/usr/bin/env bash
# Stop exactly the daemons .ci/slurm-up.sh started, by the PIDs it recorded in
# $CFL_SLURM_STATE/pids (default /tmp/cfl-slurm/pids), newest first, and delete their pid files
# (a stale pid file breaks later apt-get actions). Daemons this script did not start are left
# alone. Safe to call twice; exits 0 when nothing is recorded.
set -uo pipefail

STATE_DIR="${CFL_SLURM_STATE:-/tmp/cfl-slurm}"
PIDS_FILE="$STATE_DIR/pids"
log() { echo "slurm-down: $*"; }

if [[ ! -s "$PIDS_FILE" ]]; then log "nothing recorded in $PIDS_FILE"; exit 0; fi

# Jobs still running on this private test cluster would outlive slurmd (slurmstepd is its own
# process): cancel them while slurmctld is still there.
if grep -q '^slurmctld ' "$PIDS_FILE" && command -v scancel >/dev/null; then
    timeout 10 scancel --full --cluster=ci --user="$(id -un)" >/dev/null 2>&1 || true
    for ((i = 0; i < 30; i++)); do
        [[ -z "$(timeout 5 squeue -h -o %i 2>/dev/null)" ]] && break
        sleep 0.5
    done
fi

# Expected process name (/proc/PID/comm) per recorded daemon: never kill a recycled PID.
comm_of() { case "$1" in munged) echo munged ;; mariadbd) echo mariadbd ;; *) echo "$1" ;; esac; }

stop_one() { # name pid pidfile
    local name=$1 pid=$2 pidfile=$3 comm i
    comm=$(cat "/proc/$pid/comm" 2>/dev/null || true)
    if [[ -z "$comm" ]]; then
        log "$name (pid $pid) already gone"
    elif [[ "$comm" != "$(comm_of "$name")" ]]; then
        log "pid $pid is now '$comm', not $name: left alone"
    else
        kill -TERM "$pid" 2>/dev/null || true
        for ((i = 0; i < 100; i++)); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
        if kill -0 "$pid" 2>/dev/null; then
            log "$name (pid $pid) ignored SIGTERM for 10 s: SIGKILL"
            kill -KILL "$pid" 2>/dev/null || true
        fi
        log "stopped $name (pid $pid)"
    fi
    rm -f "$pidfile"
}

# Reverse start order: slurmd, slurmctld, slurmdbd, mariadbd, munged.
tac "$PIDS_FILE" | while read -r name pid pidfile; do
    [[ -n "${name:-}" && -n "${pid:-}" ]] && stop_one "$name" "$pid" "${pidfile:-/nonexistent}"
done
rm -f "$PIDS_FILE"
log "done"
