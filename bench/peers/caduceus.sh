#!/bin/sh
# caduceus.sh runs a Caduceus binary of any build ($CADUCEUS_PEER_BIN) as a
# `caduceus bench --peer`: `serve` with the shim gate alone, on SQLite in a
# data directory of its own, governed as the bench's own governed target is
# (the fake upstream as route openai serving gpt-4o-mini, priced, one plan,
# a key budget), and a route key made for it, granted the model, which it
# hands the bench in $CADUCEUS_BENCH_HEADERS. Two builds compare in one run:
#
#   go build -o /tmp/caduceus-new ./cmd/caduceus
#   git worktree add /tmp/old REV && (cd /tmp/old && go build -o /tmp/caduceus-old ./cmd/caduceus)
#   /tmp/caduceus-new bench \
#     --peer 'old=CADUCEUS_PEER_BIN=/tmp/caduceus-old bench/peers/caduceus.sh' \
#     --peer 'new=CADUCEUS_PEER_BIN=/tmp/caduceus-new bench/peers/caduceus.sh'
set -eu

bin=${CADUCEUS_PEER_BIN:?set CADUCEUS_PEER_BIN to the caduceus binary to run}
port=${CADUCEUS_BENCH_PORT:?set by caduceus bench: the port to listen on}
upstream=${CADUCEUS_BENCH_UPSTREAM:?set by caduceus bench: the fake upstream}
headers=${CADUCEUS_BENCH_HEADERS:?set by caduceus bench: where to write the key}
if [ ! -x "$bin" ]; then
	echo "caduceus.sh: CADUCEUS_PEER_BIN=$bin is not an executable file" >&2
	exit 1
fi

dir=$(mktemp -d "${TMPDIR:-/tmp}/caduceus-bench-peer.XXXXXX")
trap 'rm -rf "$dir"' EXIT INT TERM
cat > "$dir/caduceus.yaml" <<YAML
shim:
  routes:
    openai: {kind: openai, base_url: "$upstream/v1", models: [gpt-4o-mini]}
  plans:
    main: {failover: none, models: {gpt-4o-mini: [{route: openai}]}}
  prices:
    openai/gpt-4o-mini: {input: 0.15, output: 0.60, max_output_tokens: 16384}
  budgets:
    key: {day: 1000}
YAML
key=$("$bin" keys create --data "$dir/data" --tenant slot-1 --scopes route --models openai/gpt-4o-mini | grep -o 'cad_[A-Za-z0-9_]*' | head -n 1)
if [ -z "$key" ]; then
	echo "caduceus.sh: $bin keys create printed no key" >&2
	exit 1
fi
printf 'Authorization: Bearer %s\n' "$key" > "$headers.tmp"
mv "$headers.tmp" "$headers"
"$bin" serve --data "$dir/data" --config "$dir/caduceus.yaml" --gates shim --addr "127.0.0.1:$port" --log-level warn &
child=$!
trap 'kill -TERM "$child" 2>/dev/null; wait "$child"; rm -rf "$dir"' EXIT INT TERM
wait "$child"
