#!/usr/bin/env bash
# Start the express-idempotency example on 127.0.0.1:PORT, installing it first if needed, with a
# Redis server of its own under WORKDIR.  The harness runs this from the target file's [start].
#
#   start.sh --port PORT --workdir WORKDIR [--python PYTHON]
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
port="" workdir="" python="python3"
while (($#)); do
  case "$1" in
    --port) port=$2; shift 2 ;;
    --workdir) workdir=$2; shift 2 ;;
    --python) python=$2; shift 2 ;;
    *) echo "usage: $0 --port PORT --workdir WORKDIR [--python PYTHON]" >&2; exit 2 ;;
  esac
done
[[ -n "$port" && -n "$workdir" ]] || { echo "usage: $0 --port PORT --workdir WORKDIR" >&2; exit 2; }

"$here/install.sh"
REDIS_URL=$(PYTHON="$python" "$here/../shared/redis-for-workdir" "$workdir/redis")
export REDIS_URL PORT="$port" NODE_ENV=production
exec node "$here/app.js"
