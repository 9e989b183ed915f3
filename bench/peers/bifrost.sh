#!/bin/sh
# bifrost.sh runs Bifrost's HTTP gateway (github.com/maximhq/bifrost, its
# transports/bifrost-http) as a `caduceus bench --peer`, from a binary built
# beforehand: this repository holds none of Bifrost's code and no way of
# building it.
#
#   BIFROST_BIN     the bifrost-http binary to run (required)
#   BIFROST_SCHEMA  optional: Bifrost's transports/config.schema.json from
#                   the same source, to validate the config below against
#
# It writes Bifrost's config.json into a temporary directory (its -app-dir
# and working directory, removed when it ends) and runs the gateway there on
# 127.0.0.1:$CADUCEUS_BENCH_PORT, as lean as it runs:
#
#   - one provider, openai, whose base URL is the bench's fake upstream
#     ($CADUCEUS_BENCH_UPSTREAM, which must be on 127.0.0.1), with a dummy
#     key;
#   - no config store and no logs store (no database at all), request
#     logging off (client.enable_logging false, content logging off), no
#     optional plugin (otel, semantic cache, maxim, litellmcompat). Bifrost
#     always loads its telemetry plugin (Prometheus counters, in memory);
#     its governance plugin needs a config store or a governance section,
#     and with neither it is not loaded (Bifrost logs an error saying so),
#     nor is the auth middleware: like the bare proxy, no key is checked;
#   - the pricing datasheet's URL pointed at the fake upstream, whose answer
#     is no datasheet: Bifrost then runs without a model catalog (no cost
#     per request) instead of fetching getbifrost.ai's;
#   - config.schema.json in the working directory: BIFROST_SCHEMA's, or the
#     empty schema, which accepts any config; without one Bifrost fetches
#     its schema from getbifrost.ai at start.
#
# Nothing it is configured with reaches past loopback. Bifrost's own
# /v1/chat/completions takes models as provider/model, so the bench sends
# it the same request with that model (--peer-model). From this repository:
#
#   BIFROST_BIN=/path/to/bifrost-http caduceus bench \
#     --peer bifrost=bench/peers/bifrost.sh \
#     --peer-model bifrost=openai/gpt-4o-mini
#
# The gateway logs at level warn into the bench's peer log.
set -eu

bin=${BIFROST_BIN:-}
port=${CADUCEUS_BENCH_PORT:?set by caduceus bench: the port to listen on}
upstream=${CADUCEUS_BENCH_UPSTREAM:?set by caduceus bench: the fake upstream base URL}

if [ -z "$bin" ]; then
	echo "bifrost.sh: BIFROST_BIN is not set: set it to a bifrost-http binary (Bifrost's transports/bifrost-http, built from its source)" >&2
	exit 1
fi
if [ ! -f "$bin" ] || [ ! -x "$bin" ]; then
	echo "bifrost.sh: BIFROST_BIN=$bin is not an executable file" >&2
	exit 1
fi
if [ -n "${BIFROST_SCHEMA:-}" ] && [ ! -f "$BIFROST_SCHEMA" ]; then
	echo "bifrost.sh: BIFROST_SCHEMA=$BIFROST_SCHEMA is not a file" >&2
	exit 1
fi
# Loopback only, and nothing in the URL that would need quoting in JSON.
if ! expr "$upstream" : 'http://127\.0\.0\.1:[0-9][0-9]*$' >/dev/null; then
	echo "bifrost.sh: CADUCEUS_BENCH_UPSTREAM=$upstream: want http://127.0.0.1:PORT" >&2
	exit 1
fi
if ! expr "$port" : '[0-9][0-9]*$' >/dev/null; then
	echo "bifrost.sh: CADUCEUS_BENCH_PORT=$port: want a port number" >&2
	exit 1
fi

dir=$(mktemp -d "${TMPDIR:-/tmp}/caduceus-bench-bifrost.XXXXXX")
pid=
cleanup() {
	if [ -n "$pid" ]; then
		kill -TERM "$pid" 2>/dev/null || true
		wait "$pid" 2>/dev/null || true
	fi
	rm -rf "$dir"
}
trap cleanup EXIT
trap 'exit 143' TERM
trap 'exit 130' INT

if [ -n "${BIFROST_SCHEMA:-}" ]; then
	cp "$BIFROST_SCHEMA" "$dir/config.schema.json"
else
	echo '{}' >"$dir/config.schema.json"
fi
cat >"$dir/config.json" <<EOF
{
  "\$schema": "https://www.getbifrost.ai/schema",
  "client": {
    "enable_logging": false,
    "disable_content_logging": true,
    "enforce_auth_on_inference": false,
    "allow_direct_keys": false
  },
  "config_store": { "enabled": false },
  "logs_store": { "enabled": false },
  "framework": { "pricing": { "pricing_url": "$upstream/not-a-pricing-datasheet" } },
  "providers": {
    "openai": {
      "keys": [{ "name": "bench", "value": "sk-bench-not-a-key", "models": [], "weight": 1 }],
      "network_config": { "base_url": "$upstream" }
    }
  },
  "plugins": []
}
EOF

cd "$dir"
"$bin" -app-dir "$dir" -host 127.0.0.1 -port "$port" -log-level warn &
pid=$!
wait "$pid"
