#!/usr/bin/env bash
# Start the kafkajs worker (npm packages installed by install.sh when needed) with a Redis of its own
# that belongs to the work directory (shared by every worker of the run, started by the first):
#   start.sh PYTHON WORKDIR ARGS...      (PYTHON finds Redis a free port; the worker's arguments
#                                          follow)
# Redis runs in this process group: a kill of the worker kills it too, and its append-only file
# keeps every key it acknowledged for the next start.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
python=$1 workdir=$2
shift 2
"$here/install.sh"
redis=$(PYTHON="$python" "$here/../../../../examples/targets/shared/redis-for-workdir" "$workdir/redis")
exec node "$here/consumer.js" --redis "$redis" "$@"
