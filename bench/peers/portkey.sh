#!/bin/sh
# portkey.sh runs Portkey's open-source AI gateway (npm @portkey-ai/gateway
# 1.15.2, github.com/Portkey-AI/gateway) as a `caduceus bench --peer`: its
# Node server, headless (no web UI), on port $CADUCEUS_BENCH_PORT.
#
#   PORTKEY_DIR  where the package is installed (default /tmp/peers/portkey);
#                `npm install` fetches it there when that version is missing
#
# Portkey takes its route from each request's headers, so the bench sends
# them (--peer-header; the bench replaces $CADUCEUS_BENCH_UPSTREAM with the
# fake upstream's base URL). From this repository:
#
#   caduceus bench --peer portkey=bench/peers/portkey.sh \
#     --peer-header 'portkey=x-portkey-provider: openai' \
#     --peer-header 'portkey=x-portkey-custom-host: $CADUCEUS_BENCH_UPSTREAM/v1' \
#     --peer-header 'portkey=Authorization: Bearer sk-bench-not-a-key'
#
# Provider openai appends /chat/completions to the custom host, so the fake
# upstream gets POST /v1/chat/completions with that Authorization. The
# gateway listens on every interface: it has no option for the address.
set -eu

version=1.15.2
dir=${PORTKEY_DIR:-/tmp/peers/portkey}
port=${CADUCEUS_BENCH_PORT:?set by caduceus bench: the port to listen on}
pkg=$dir/node_modules/@portkey-ai/gateway

for tool in node npm; do
	if ! command -v "$tool" >/dev/null 2>&1; then
		echo "portkey.sh: no $tool on PATH (Portkey's gateway is a Node package)" >&2
		exit 1
	fi
done

if ! grep -q "\"version\": \"$version\"" "$pkg/package.json" 2>/dev/null; then
	echo "portkey.sh: installing @portkey-ai/gateway@$version into $dir"
	mkdir -p "$dir"
	# --ignore-scripts: the package's only install script is patch-package,
	# and the package ships no patches.
	npm install --prefix "$dir" --no-audit --no-fund --ignore-scripts "@portkey-ai/gateway@$version"
fi

# exec: the server is the process group's leader, which the bench signals.
exec node "$pkg/build/start-server.js" --port="$port" --headless
