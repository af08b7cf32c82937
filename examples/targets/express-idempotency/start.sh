#!/usr/bin/env bash
# Start the express-idempotency example on 127.0.0.1:PORT, installing it first if needed, with a
# Redis server of its own under WORKDIR.  The harness runs this from the target file's [start].
# Options: ../shared/start-options.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
source "$here/../shared/start-options"

"$here/install.sh"
REDIS_URL=$(example_redis_url)
export REDIS_URL PORT="$port" NODE_ENV=production
exec node "$here/app.js"
