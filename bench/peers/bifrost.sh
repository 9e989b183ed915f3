#!/bin/sh
# bifrost.sh runs Bifrost (github.com/maximhq/bifrost, transports/bifrost-http)
# as a `caduceus bench --peer`: it listens on 127.0.0.1:$CADUCEUS_BENCH_PORT
# and forwards chat completions for gpt-4o-mini, as provider "openai", to the
# bench's fake upstream at $CADUCEUS_BENCH_UPSTREAM.
#
#   BIFROST_BIN      the bifrost-http binary (default /tmp/peers/bifrost-http)
#   BIFROST_LOGGING  on (default): request logging into a SQLite logs store,
#                    log level info, as a default install has it;
#                    off: no request logging, no logs store, log level warn
#
# Its app directory (config.json, and logs.db with logging on) is a fresh
# temporary directory, removed when Bifrost ends.
set -eu

bin=${BIFROST_BIN:-/tmp/peers/bifrost-http}
upstream=${CADUCEUS_BENCH_UPSTREAM:?set by caduceus bench: the fake upstream base URL}
port=${CADUCEUS_BENCH_PORT:?set by caduceus bench: the port to listen on}
logging=${BIFROST_LOGGING:-on}

if [ ! -x "$bin" ]; then
	echo "bifrost.sh: no executable Bifrost at $bin (set BIFROST_BIN; docs/performance.md says how to build it)" >&2
	exit 1
fi
case $upstream in
*[\"\\]* | "") echo "bifrost.sh: CADUCEUS_BENCH_UPSTREAM $upstream: want a plain base URL" >&2; exit 1 ;;
esac
case $logging in
on) enable_logging=true level=info
	logs_store='{"enabled": true, "type": "sqlite", "config": {"path": "./logs.db"}}' ;;
off) enable_logging=false level=warn
	logs_store='{"enabled": false}' ;;
*) echo "bifrost.sh: BIFROST_LOGGING $logging: want on or off" >&2; exit 1 ;;
esac

dir=$(mktemp -d "${TMPDIR:-/tmp}/caduceus-bench-bifrost-XXXXXX")
cat >"$dir/config.json" <<JSON
{
  "client": {
    "enable_logging": $enable_logging,
    "drop_excess_requests": false
  },
  "providers": {
    "openai": {
      "keys": [
        {"name": "bench", "value": "sk-bench-not-a-key", "models": ["gpt-4o-mini"], "weight": 1.0}
      ],
      "network_config": {
        "base_url": "$upstream",
        "default_request_timeout_in_seconds": 30,
        "max_retries": 0
      }
    }
  },
  "config_store": {"enabled": false},
  "logs_store": $logs_store
}
JSON

# Bifrost runs as this shell's child so the app directory can be removed
# when it ends; the bench signals the whole process group.
"$bin" -app-dir "$dir" -host 127.0.0.1 -port "$port" -log-level "$level" -log-style json &
pid=$!
trap 'kill -TERM "$pid" 2>/dev/null || true' TERM INT
status=0
wait "$pid" || status=$?
# A signal interrupts the first wait; wait again for Bifrost to finish.
wait "$pid" 2>/dev/null || true
rm -rf "$dir"
exit "$status"
