package store_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/caduceus-dev/caduceus/auth"
	"github.com/caduceus-dev/caduceus/contract"
	"github.com/caduceus-dev/caduceus/store"
	"github.com/caduceus-dev/caduceus/store/storetest"
)

// process is one server process's key service over a shared store.
type process struct {
	keys *auth.Service
	// invalidated is signalled each time the key watcher invalidated the
	// service's cache (after it did).
	invalidated chan struct{}
}

// watched is a key store whose watcher also signals the test after each
// change it reports.
type watched struct {
	auth.Store
	w        auth.Watcher
	signaled chan struct{}
}

func (s watched) WatchKeys(ctx context.Context, changed func()) error {
	return s.w.WatchKeys(ctx, func() {
		changed()
		select {
		case s.signaled <- struct{}{}:
		default:
		}
	})
}

// twoProcesses opens the same store twice (two pools, two key services with
// the production cache TTL, each watching for key changes), as two server
// processes on one database would. The second's clock stands still, so a
// key it cached never expires from its cache: only the watcher can make it
// read the store again.
func twoProcesses(t testing.TB, dsn string) (a, b process) {
	t.Helper()
	open := func(now func() time.Time) process {
		db, err := store.Open(context.Background(), dsn, "")
		if err != nil {
			t.Fatal(err)
		}
		p := process{invalidated: make(chan struct{}, 1)}
		ks := db.Keys()
		p.keys = auth.NewService(watched{Store: ks, w: ks, signaled: p.invalidated}, now, auth.DefaultCacheTTL)
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { p.keys.Watch(ctx); close(done) }()
		t.Cleanup(func() { cancel(); <-done; db.Close() })
		return p
	}
	frozen := time.Now()
	return open(nil), open(func() time.Time { return frozen })
}

// backends are the DSNs the revocation tests run on: a SQLite file and,
// when configured, a fresh Postgres schema.
func backends(t testing.TB) map[string]string {
	m := map[string]string{"sqlite": "sqlite:" + filepath.Join(t.TempDir(), "keys.db")}
	if dsn := os.Getenv(storetest.EnvPostgres); dsn != "" {
		m["postgres"] = storetest.FreshSchema(t, dsn)
	}
	return m
}

// revokeAndWait revokes a key (cached in b) through a and waits until b
// refuses it, reading it again each time b's watcher invalidated b's cache;
// it returns how long that took (for the benchmark).
func revokeAndWait(t testing.TB, a, b process) time.Duration {
	t.Helper()
	ctx := context.Background()
	token, key, err := a.keys.Create(ctx, auth.Spec{Tenant: "slot-1", Scopes: []contract.Scope{contract.ScopeRoute}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.keys.Verify(ctx, token); err != nil { // now cached in b
		t.Fatal(err)
	}
	start := time.Now()
	if err := a.keys.Revoke(ctx, key.ID); err != nil {
		t.Fatal(err)
	}
	timeout := time.After(30 * time.Second)
	for {
		_, err := b.keys.Verify(ctx, token)
		if contract.AsError(err) != nil && contract.AsError(err).Code == "key_revoked" {
			return time.Since(start)
		}
		if err != nil {
			t.Fatalf("verify: %v", err)
		}
		select {
		case <-b.invalidated:
		case <-timeout:
			t.Fatal("the other process never heard of the revocation")
		}
	}
}

// TestRevocationReachesAnotherProcess: a key revoked in one process is
// refused by another through the key watcher, not the cache TTL: the other
// process's clock stands still, so its cached key would be trusted forever
// without the watcher. (How fast it is: BenchmarkRevocationPropagation.)
func TestRevocationReachesAnotherProcess(t *testing.T) {
	for name, dsn := range backends(t) {
		t.Run(name, func(t *testing.T) {
			a, b := twoProcesses(t, dsn)
			for range 3 {
				d := revokeAndWait(t, a, b)
				t.Logf("refused by the other process %s after the revocation", d)
			}
		})
	}
}

// BenchmarkRevocationPropagation reports how long a revocation in one
// process takes to be refused by another (ms/revocation).
func BenchmarkRevocationPropagation(b *testing.B) {
	for name, dsn := range backends(b) {
		b.Run(name, func(bb *testing.B) {
			x, y := twoProcesses(bb, dsn)
			var total time.Duration
			for bb.Loop() {
				total += revokeAndWait(bb, x, y)
			}
			bb.ReportMetric(float64(total.Microseconds())/1000/float64(bb.N), "ms/revocation")
		})
	}
}
