// Package ledger is the shim gateway's ledger over the store (Ledger): spend
// reservations, settlements and budgets served from leases, rate-limit
// holds and windows, the answer cache, and the spend journal that writes a
// turn's deferred settlements after the commit that answers it.
//
// The journal's entries, which every forwarded turn's receipt row carries
// in its ledger column, are encoded by hand (encodeLedger, journal.go) and
// decoded with encoding/json: BenchmarkEncodeLedger (2 shared cores, CPU
// time per op, median of six runs) puts one settled attempt at 0.79 µs,
// 256 B and 1 alloc against json.Marshal's 1.5 µs, 280 B and 2 allocs
// (1.9×); TestEncodeLedgerReadsAsEncodingJSON and FuzzEncodeLedger hold
// it to what encoding/json reads back. Reproduce with
// go test -run '^$' -bench EncodeLedger -benchmem -count 6 ./shim/ledger/
package ledger
