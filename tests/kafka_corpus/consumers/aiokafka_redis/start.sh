#!/usr/bin/env bash
# Start the aiokafka worker in its own virtual environment, with a Redis of its own that belongs to
# the work directory (shared by every worker of the run, started by the first):
#   start.sh PYTHON WORKDIR ARGS...      (PYTHON builds the environment and finds Redis a port)
# Redis runs in this process group: a kill of the worker kills it too, and its append-only file
# keeps every key it acknowledged for the next start.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
python=$1 workdir=$2
shift 2
"$here/../../../../examples/targets/shared/ensure-venv" "$here" "$python"
redis=$(PYTHON="$python" "$here/../../../../examples/targets/shared/redis-for-workdir" "$workdir/redis")
exec "$here/.venv/bin/python" "$here/consumer.py" --redis "$redis" "$@"
