#!/usr/bin/env bash
# Start the django-idempotency-key example on 127.0.0.1:PORT (gunicorn, one process, eight
# threads), installing it first if needed, with a Redis server of its own under WORKDIR.  The
# harness runs this from the target file's [start].
#
#   start.sh --port PORT --workdir WORKDIR [--python PYTHON]
#            [--store-port PORT --store-via HOST:PORT]
#
# With --store-port, Redis listens on that port and the app reaches it through
# --store-via (the harness's proxy, whose faults then cut the app from its store).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
port="" workdir="" python="python3" store_port="" store_via=""
while (($#)); do
  case "$1" in
    --port) port=$2; shift 2 ;;
    --workdir) workdir=$2; shift 2 ;;
    --python) python=$2; shift 2 ;;
    --store-port) store_port=$2; shift 2 ;;
    --store-via) store_via=$2; shift 2 ;;
    *) echo "usage: $0 --port PORT --workdir WORKDIR [--python PYTHON]" \
         "[--store-port PORT --store-via HOST:PORT]" >&2; exit 2 ;;
  esac
done
[[ -n "$port" && -n "$workdir" ]] || { echo "usage: $0 --port PORT --workdir WORKDIR" >&2; exit 2; }

"$here/install.sh" --python "$python"
[[ -z "$store_port" || -n "$store_via" ]] || { echo "--store-port needs --store-via" >&2; exit 2; }
REDIS_URL=$(PYTHON="$python" "$here/../shared/redis-for-workdir" "$workdir/redis" ${store_port:+"$store_port"})
[[ -z "$store_via" ]] || REDIS_URL="redis://$store_via"
export REDIS_URL DJANGO_SETTINGS_MODULE=charges_site.settings
exec "$here/.venv/bin/gunicorn" --chdir "$here" --bind "127.0.0.1:$port" \
  --workers 1 --threads 8 --graceful-timeout 2 charges_site.wsgi:application
