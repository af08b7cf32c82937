#!/usr/bin/env bash
# Start one Celery worker of the example on the broker the harness gives it, installing the
# example first if needed.  The harness runs this from the target file's [start]; it kills the
# process group (this script execs the worker, so the group is the worker's).
#
#   start.sh --broker AMQP_URL --queue NAME --workdir DIR --mode no-dedup|dedup [--python PYTHON]
#
# One process, the solo pool: the task runs in the process that holds the broker connection,
# so a SIGKILL between the task's commit and its ack is a worker killed between work and ack.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
broker="" queue="" workdir="" mode="" python=python3
usage="usage: start.sh --broker AMQP_URL --queue NAME --workdir DIR --mode no-dedup|dedup [--python PYTHON]"
while (($#)); do
  case "$1" in
    --broker) broker=$2; shift 2 ;;
    --queue) queue=$2; shift 2 ;;
    --workdir) workdir=$2; shift 2 ;;
    --mode) mode=$2; shift 2 ;;
    --python) python=$2; shift 2 ;;
    *) echo "$usage" >&2; exit 2 ;;
  esac
done
[[ -n "$broker" && -n "$queue" && -n "$workdir" && -n "$mode" ]] || { echo "$usage" >&2; exit 2; }
[[ "$mode" == no-dedup || "$mode" == dedup ]] || { echo "--mode must be no-dedup or dedup, not '$mode'" >&2; exit 2; }

"$here/install.sh" --python "$python"
mkdir -p "$workdir"
export CELERY_BROKER_URL="$broker" CHARGES_QUEUE="$queue" CHARGES_MODE="$mode" \
  CHARGES_LEDGER="$workdir/ledger.sqlite3"
cd "$here"
exec "$here/.venv/bin/celery" -A charges worker --pool solo --queues "$queue" \
  --hostname "charges-$$@%h" --without-gossip --without-mingle --without-heartbeat \
  --loglevel info
