#!/usr/bin/env bash
# Makes the upgrade fixture: a SQLite data directory written by an old
# release of caduceus (TestUpgradeFromOldRelease opens it with today's
# binary). Run from the repository root, once, with the old binary built
# from its commit:
#
#   git worktree add /tmp/old ea292f4
#   (cd /tmp/old && CGO_ENABLED=0 go build -o /tmp/caduceus-ea292f4 ./cmd/caduceus)
#   cmd/caduceus/testdata/upgrade/make-fixture.sh /tmp/caduceus-ea292f4 ea292f4
#
# It writes cmd/caduceus/testdata/upgrade/RELEASE/caduceus.db (vacuumed, no
# write-ahead log) and facts.json (what the test expects to find); and, from
# a Postgres schema the same release wrote (PG, default the local test
# database), postgres.sql (pg_dump, plain SQL, of schema caduceus_RELEASE)
# and postgres-facts.json.
set -euo pipefail
old=$1 release=$2
pg=${PG:-postgres://postgres@127.0.0.1:5432/test?sslmode=disable}
out=cmd/caduceus/testdata/upgrade/$release
tmp=$(mktemp -d)
pid=
trap 'kill $pid 2>/dev/null || true; rm -rf "$tmp"' EXIT
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
mkdir -p "$out"

# populate STORE_ARGS...: the same keys, strategies, decision and reads on
# either store; writes $tmp/facts (admin key, route key, decision id).
populate() {
  "$old" serve "$@" --addr "127.0.0.1:$port" --gates trader >"$tmp/serve.out" 2>"$tmp/serve.err" &
  pid=$!
  for _ in $(seq 1 200); do curl -sf "http://127.0.0.1:$port/healthz" >/dev/null && break; sleep 0.05; done
  admin=$(grep -m1 '^cad_' "$tmp/serve.out")
  route=$("$old" keys create "$@" --tenant slot-2 --scopes route | grep -m1 '^cad_')
  "$old" trader import cmd/caduceus/testdata/strategies.yaml "$@" --tenant slot-1 >/dev/null
  h=(-sf -H "Authorization: Bearer $admin" -H 'Content-Type: application/json')
  curl "${h[@]}" -X POST "http://127.0.0.1:$port/v1/trader/decisions" --data @cmd/caduceus/testdata/decision.json >"$tmp/decision.json"
  curl "${h[@]}" "http://127.0.0.1:$port/v1/admin/keys" >/dev/null
  curl "${h[@]}" "http://127.0.0.1:$port/v1/trader/strategies" >/dev/null
  curl -sf -H "Authorization: Bearer $route" "http://127.0.0.1:$port/v1/trader/strategies" >/dev/null || true
  kill -TERM $pid; wait $pid || true
  "$old" audit verify "$@"
}
facts() { # facts FILE RECORDS
  python3 - "$1" "$release" "$admin" "$route" "$2" "$tmp/decision.json" <<'PY'
import json, sys
path, release, admin, route, records, decision = sys.argv[1:]
json.dump({"release": release, "admin_key": admin, "route_key": route, "audit_records": int(records),
           "decision_id": json.load(open(decision))["decision_id"]}, open(path, "w"), indent=2)
PY
}

# Postgres: a schema of its own, dumped as plain SQL, then dropped.
schema=caduceus_$release
psql "$pg" -qc "DROP SCHEMA IF EXISTS $schema CASCADE; CREATE SCHEMA $schema"
populate --store "$pg&search_path=$schema"
records=$(psql "$pg" -Atc "SELECT COUNT(*) FROM $schema.audit_records")
pg_dump --format=plain --no-owner --no-privileges --schema="$schema" --file="$out/postgres.sql" "$pg"
psql "$pg" -qc "DROP SCHEMA $schema CASCADE"
facts "$out/postgres-facts.json" "$records"

data=$tmp/data
populate --data "$data"
records=$(python3 - "$data/caduceus.db" <<'PY'
import sqlite3, sys
db = sqlite3.connect(sys.argv[1])
print(db.execute("select count(*) from audit_records").fetchone()[0])
db.execute("vacuum")
db.close()
PY
)
cp "$data/caduceus.db" "$out/caduceus.db"
facts "$out/facts.json" "$records"
cat "$out/facts.json" "$out/postgres-facts.json"; ls -l "$out"
