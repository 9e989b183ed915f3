package ledger_test

import (
	"bytes"
	"testing"
	"time"

	"github.com/caduceus-dev/caduceus/shim/ledger"
	"github.com/caduceus-dev/caduceus/shim/upstream"
	"github.com/caduceus-dev/caduceus/store"
	"github.com/caduceus-dev/caduceus/store/storetest"
)

// TestCacheServesFreshAnswersWhole: a kept answer is served, with its
// stream's final event when it has one and none when it has none, until
// its expiry (exclusive), under its scope and key only; a second put
// replaces it; the stale sweep deletes what expired.
func TestCacheServesFreshAnswersWhole(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		ctx := t.Context()
		now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
		db.Now = func() time.Time { return now }
		sp := ledger.Of(db)
		whole := upstream.CachedAnswer{Receipt: "rct_1", Status: 200, ContentType: "application/json", Body: []byte(`{"ok":true}`)}
		stream := upstream.CachedAnswer{Receipt: "rct_2", Status: 200, ContentType: "text/event-stream", Body: []byte("data: a\n\n"), Final: []byte("data: [DONE]\n\n")}
		expires := now.Add(time.Minute)
		must(t, sp.CachePut(ctx, "slot-1", "k-whole", whole, expires))
		must(t, sp.CachePut(ctx, "slot-1", "k-stream", stream, expires))
		for key, want := range map[string]upstream.CachedAnswer{"k-whole": whole, "k-stream": stream} {
			got, found, err := sp.CacheGet(ctx, "slot-1", key, expires.Add(-time.Microsecond))
			if err != nil || !found || got.Receipt != want.Receipt || got.Status != want.Status || got.ContentType != want.ContentType ||
				!bytes.Equal(got.Body, want.Body) || !bytes.Equal(got.Final, want.Final) || (got.Final == nil) != (want.Final == nil) {
				t.Errorf("%s: %+v, %v, %v; want %+v", key, got, found, err, want)
			}
			if _, found, err := sp.CacheGet(ctx, "slot-1", key, expires); found || err != nil {
				t.Errorf("%s served at its expiry: %v", key, err)
			}
		}
		if _, found, _ := sp.CacheGet(ctx, "slot-2", "k-whole", now); found {
			t.Error("an answer was served to another scope")
		}
		replaced := whole
		replaced.Receipt, replaced.Body = "rct_3", []byte(`{"ok":false}`)
		must(t, sp.CachePut(ctx, "slot-1", "k-whole", replaced, expires.Add(time.Hour)))
		if got, found, err := sp.CacheGet(ctx, "slot-1", "k-whole", expires); err != nil || !found || got.Receipt != "rct_3" || string(got.Body) != `{"ok":false}` {
			t.Errorf("after a second put: %+v, %v, %v", got, found, err)
		}
		now = expires
		if _, err := sp.ReleaseStale(ctx, now.Add(-time.Hour)); err != nil {
			t.Fatal(err)
		}
		if _, found, _ := sp.CacheGet(ctx, "slot-1", "k-stream", now.Add(-time.Hour)); found {
			t.Error("the stale sweep kept an expired answer")
		}
		if _, found, _ := sp.CacheGet(ctx, "slot-1", "k-whole", now); !found {
			t.Error("the stale sweep deleted a fresh answer")
		}
	})
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
