package relaytest

import (
	"bytes"

	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/caduceus-dev/caduceus/contract"
	"github.com/caduceus-dev/caduceus/relay"
)

// TestStore runs the relay.Store conformance suite. open returns a fresh,
// empty store for each subtest. A SQL implementation runs it on every
// dialect it supports.
func TestStore(t *testing.T, open func(t *testing.T) relay.Store) {
	t.Run("capability", func(t *testing.T) { testCapability(t, open(t)) })
	t.Run("seen", func(t *testing.T) { testSeen(t, open(t)) })
	t.Run("seen_concurrent", func(t *testing.T) { testSeenConcurrent(t, open(t)) })
	t.Run("buffer", func(t *testing.T) { testBuffer(t, open(t)) })
	t.Run("buffer_limit", func(t *testing.T) { testBufferLimit(t, open(t)) })
	t.Run("lease_concurrent", func(t *testing.T) { testLeaseConcurrent(t, open(t)) })
	t.Run("chats", func(t *testing.T) { testChats(t, open(t)) })
}

const (
	tenantA contract.TenantSlot = "slot-1"
	tenantB contract.TenantSlot = "slot-2"
)

var base = time.Date(2026, 11, 29, 20, 0, 0, 0, time.UTC)

func testCapability(t *testing.T, s relay.Store) {
	ctx := t.Context()
	c := relay.Capability{Tenant: tenantA, SessionKey: "agent:main:discord:group:1:2", Kind: relay.KindDiscordInteractionToken,
		Bot: "app1", Secret: "tok-1", ExpiresAt: base.Add(15 * time.Minute)}
	must(t, s.PutCapability(ctx, c))

	got, ok, err := s.Capability(ctx, tenantA, c.SessionKey, c.Kind, base)
	must(t, err)
	if !ok || got.Secret != "tok-1" || got.Bot != "app1" || got.Tenant != tenantA || got.SessionKey != c.SessionKey || got.Kind != c.Kind {
		t.Fatalf("Capability = %+v, %v; want the stored one", got, ok)
	}
	if !got.ExpiresAt.Equal(c.ExpiresAt) {
		t.Errorf("ExpiresAt = %v, want %v", got.ExpiresAt, c.ExpiresAt)
	}
	for _, tc := range []struct {
		name      string
		tenant    contract.TenantSlot
		key, kind string
		now       time.Time
	}{
		{"other tenant", tenantB, c.SessionKey, c.Kind, base},
		{"other session", tenantA, "agent:main:discord:group:1:3", c.Kind, base},
		{"other kind", tenantA, c.SessionKey, "slack.response_url", base},
		{"at expiry", tenantA, c.SessionKey, c.Kind, c.ExpiresAt},
		{"after expiry", tenantA, c.SessionKey, c.Kind, c.ExpiresAt.Add(time.Second)},
	} {
		if got, ok, err := s.Capability(ctx, tc.tenant, tc.key, tc.kind, tc.now); err != nil || ok {
			t.Errorf("%s: Capability = %+v, %v, %v; want none", tc.name, got, ok, err)
		}
	}

	// Replacing keeps one capability per (tenant, key, kind).
	c2 := c
	c2.Secret, c2.ExpiresAt = "tok-2", base.Add(20*time.Minute)
	must(t, s.PutCapability(ctx, c2))
	got, ok, err = s.Capability(ctx, tenantA, c.SessionKey, c.Kind, base.Add(16*time.Minute))
	must(t, err)
	if !ok || got.Secret != "tok-2" {
		t.Fatalf("after replace: %+v, %v; want tok-2", got, ok)
	}
	// Another tenant's capability under the same key is separate.
	cb := c
	cb.Tenant, cb.Secret = tenantB, "tok-b"
	must(t, s.PutCapability(ctx, cb))
	got, _, _ = s.Capability(ctx, tenantA, c.SessionKey, c.Kind, base)
	if got.Secret != "tok-2" {
		t.Fatalf("tenant B's put changed tenant A's capability: %+v", got)
	}

	// Prune drops expired capabilities only.
	must(t, s.Prune(ctx, base.Add(16*time.Minute), base))
	if _, ok, _ := s.Capability(ctx, tenantB, c.SessionKey, c.Kind, base); ok {
		t.Error("Prune kept tenant B's expired capability")
	}
	if _, ok, _ := s.Capability(ctx, tenantA, c.SessionKey, c.Kind, base.Add(16*time.Minute)); !ok {
		t.Error("Prune dropped tenant A's live capability")
	}
}

func testSeen(t *testing.T, s relay.Store) {
	ctx := t.Context()
	first, err := s.MarkSeen(ctx, tenantA, "discord:1:m1", base)
	must(t, err)
	if !first {
		t.Fatal("first MarkSeen = false")
	}
	if first, _ := s.MarkSeen(ctx, tenantA, "discord:1:m1", base.Add(time.Second)); first {
		t.Fatal("second MarkSeen = true")
	}
	if first, _ := s.MarkSeen(ctx, tenantB, "discord:1:m1", base); !first {
		t.Fatal("MarkSeen in another tenant = false")
	}
	if first, _ := s.MarkSeen(ctx, tenantA, "discord:1:m2", base.Add(time.Hour)); !first {
		t.Fatal("MarkSeen of another key = false")
	}
	must(t, s.Prune(ctx, base, base.Add(time.Minute)))
	if first, _ := s.MarkSeen(ctx, tenantA, "discord:1:m1", base.Add(2*time.Hour)); !first {
		t.Error("a pruned key is still seen")
	}
	if first, _ := s.MarkSeen(ctx, tenantA, "discord:1:m2", base.Add(2*time.Hour)); first {
		t.Error("Prune dropped a key recorded after seenBefore")
	}
}

func testSeenConcurrent(t *testing.T, s relay.Store) {
	ctx := t.Context()
	var wg sync.WaitGroup
	var firsts atomic.Int32
	for range 8 {
		wg.Go(func() {
			first, err := s.MarkSeen(ctx, tenantA, "telegram:5:77", base)
			if err != nil {
				t.Error(err)
			}
			if first {
				firsts.Add(1)
			}
		})
	}
	wg.Wait()
	if n := firsts.Load(); n != 1 {
		t.Fatalf("%d concurrent MarkSeen calls were first, want exactly 1", n)
	}
}

func buffered(tenant contract.TenantSlot, n int, platform, bot string) relay.Buffered {
	return relay.Buffered{
		ID:     fmt.Sprintf("rbuf_%026d", n),
		Tenant: tenant, Platform: platform, Bot: bot,
		SessionKey: fmt.Sprintf("agent:main:%s:dm:%d", platform, n),
		Event:      []byte(fmt.Sprintf(`{"text":"event %d","message_type":"text"}`, n)),
		CreatedAt:  base.Add(time.Duration(n) * time.Millisecond),
	}
}

func testBuffer(t *testing.T, s relay.Store) {
	ctx := t.Context()
	// Insert out of order: Pending returns oldest (lowest id) first.
	for _, n := range []int{3, 1, 2} {
		ok, err := s.Enqueue(ctx, buffered(tenantA, n, "discord", "app1"), 0)
		must(t, err)
		if !ok {
			t.Fatalf("Enqueue %d refused with no limit", n)
		}
	}
	// An event already buffered (a platform's redelivery) is not buffered
	// again, and is no error.
	if ok, err := s.Enqueue(ctx, buffered(tenantA, 1, "discord", "app1"), 0); ok || err != nil {
		t.Fatalf("Enqueue of an event already buffered = %v, %v; want false, nil", ok, err)
	}
	mustEnqueue(t, s, buffered(tenantA, 4, "telegram", "bot1"), 0)
	mustEnqueue(t, s, buffered(tenantA, 5, "discord", "app2"), 0)
	mustEnqueue(t, s, buffered(tenantB, 6, "discord", "app1"), 0)

	got, err := s.Pending(ctx, tenantA, "discord", "app1", base, 0)
	must(t, err)
	if ids := idsOf(got); fmt.Sprint(ids) != fmt.Sprint([]string{buffered(tenantA, 1, "", "").ID, buffered(tenantA, 2, "", "").ID, buffered(tenantA, 3, "", "").ID}) {
		t.Fatalf("Pending ids = %v, want 1, 2, 3", ids)
	}
	want := buffered(tenantA, 1, "discord", "app1")
	g := got[0]
	if g.Tenant != tenantA || g.Platform != "discord" || g.Bot != "app1" || g.SessionKey != want.SessionKey ||
		!bytes.Equal(g.Event, want.Event) || !g.CreatedAt.Equal(want.CreatedAt) {
		t.Fatalf("Pending[0] = %+v, want %+v", g, want)
	}
	if got, _ := s.Pending(ctx, tenantA, "discord", "app1", base, 2); len(got) != 2 {
		t.Fatalf("Pending limit 2 gave %d", len(got))
	}
	if got, _ := s.Pending(ctx, tenantB, "discord", "app1", base, 0); len(got) != 1 || got[0].ID != buffered(tenantB, 6, "", "").ID {
		t.Fatalf("tenant B Pending = %v", idsOf(got))
	}

	// A lease hides an event until it runs out; another owner cannot take it meanwhile.
	id1 := want.ID
	ok, err := s.Lease(ctx, tenantA, id1, "conn-1", base, base.Add(time.Minute))
	must(t, err)
	if !ok {
		t.Fatal("Lease of a free event failed")
	}
	if got, _ := s.Pending(ctx, tenantA, "discord", "app1", base.Add(time.Second), 0); len(got) != 2 {
		t.Fatalf("leased event still pending: %v", idsOf(got))
	}
	if ok, _ := s.Lease(ctx, tenantA, id1, "conn-2", base.Add(time.Second), base.Add(2*time.Minute)); ok {
		t.Fatal("a second owner leased an event under a running lease")
	}
	if ok, _ := s.Lease(ctx, tenantB, id1, "conn-3", base.Add(2*time.Minute), base.Add(3*time.Minute)); ok {
		t.Fatal("tenant B leased tenant A's event")
	}
	if got, _ := s.Pending(ctx, tenantA, "discord", "app1", base.Add(time.Minute), 0); len(got) != 3 {
		t.Fatalf("expired lease: pending %v, want 3", idsOf(got))
	}
	if ok, _ := s.Lease(ctx, tenantA, id1, "conn-2", base.Add(time.Minute), base.Add(2*time.Minute)); !ok {
		t.Fatal("Lease after expiry failed")
	}
	// Releasing conn-2's leases makes the event pending again at once.
	must(t, s.ReleaseLeases(ctx, tenantA, "conn-2"))
	if got, _ := s.Pending(ctx, tenantA, "discord", "app1", base.Add(time.Minute+time.Second), 0); len(got) != 3 {
		t.Fatalf("after ReleaseLeases: pending %v, want 3", idsOf(got))
	}

	// Ack removes, once, and only in its tenant.
	if ok, _ := s.Ack(ctx, tenantB, id1); ok {
		t.Fatal("tenant B acknowledged tenant A's event")
	}
	if ok, err := s.Ack(ctx, tenantA, id1); err != nil || !ok {
		t.Fatalf("Ack = %v, %v", ok, err)
	}
	if ok, _ := s.Ack(ctx, tenantA, id1); ok {
		t.Fatal("second Ack = true")
	}
	if ok, _ := s.Lease(ctx, tenantA, id1, "conn-1", base.Add(time.Hour), base.Add(2*time.Hour)); ok {
		t.Fatal("Lease of an acknowledged event succeeded")
	}
	if got, _ := s.Pending(ctx, tenantA, "discord", "app1", base.Add(time.Hour), 0); len(got) != 2 {
		t.Fatalf("after Ack: pending %v, want 2", idsOf(got))
	}
}

func testBufferLimit(t *testing.T, s relay.Store) {
	ctx := t.Context()
	for n := 1; n <= 3; n++ {
		mustEnqueue(t, s, buffered(tenantA, n, "discord", "app1"), 3)
	}
	ok, err := s.Enqueue(ctx, buffered(tenantA, 4, "telegram", "bot"), 3)
	must(t, err)
	if ok {
		t.Fatal("Enqueue over the tenant's limit succeeded")
	}
	if got, _ := s.Pending(ctx, tenantA, "telegram", "bot", base, 0); len(got) != 0 {
		t.Fatalf("refused event was stored: %v", idsOf(got))
	}
	// The bound is per tenant.
	mustEnqueue(t, s, buffered(tenantB, 5, "discord", "app1"), 3)
	// Acknowledging frees room.
	if ok, _ := s.Ack(ctx, tenantA, buffered(tenantA, 1, "", "").ID); !ok {
		t.Fatal("Ack failed")
	}
	mustEnqueue(t, s, buffered(tenantA, 4, "telegram", "bot"), 3)
}

func testLeaseConcurrent(t *testing.T, s relay.Store) {
	ctx := t.Context()
	b := buffered(tenantA, 1, "discord", "app1")
	mustEnqueue(t, s, b, 0)
	var wg sync.WaitGroup
	var wins atomic.Int32
	for i := range 8 {
		wg.Go(func() {
			ok, err := s.Lease(ctx, tenantA, b.ID, fmt.Sprintf("conn-%d", i), base, base.Add(time.Minute))
			if err != nil {
				t.Error(err)
			}
			if ok {
				wins.Add(1)
			}
		})
	}
	wg.Wait()
	if n := wins.Load(); n != 1 {
		t.Fatalf("%d concurrent leases won, want exactly 1", n)
	}
}

func testChats(t *testing.T, s relay.Store) {
	ctx := t.Context()
	must(t, s.BindChat(ctx, tenantA, "discord", "333", base))
	must(t, s.BindChat(ctx, tenantA, "discord", "333", base.Add(time.Second)))
	for _, tc := range []struct {
		tenant           contract.TenantSlot
		platform, chatID string
		want             bool
	}{
		{tenantA, "discord", "333", true},
		{tenantB, "discord", "333", false},
		{tenantA, "telegram", "333", false},
		{tenantA, "discord", "334", false},
	} {
		got, err := s.ChatBound(ctx, tc.tenant, tc.platform, tc.chatID)
		must(t, err)
		if got != tc.want {
			t.Errorf("ChatBound(%s, %s, %s) = %v, want %v", tc.tenant, tc.platform, tc.chatID, got, tc.want)
		}
	}
}

func idsOf(bs []relay.Buffered) []string {
	var ids []string
	for _, b := range bs {
		ids = append(ids, b.ID)
	}
	return ids
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func mustEnqueue(t *testing.T, s relay.Store, b relay.Buffered, limit int) {
	t.Helper()
	ok, err := s.Enqueue(t.Context(), b, limit)
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
	if !ok {
		t.Fatal("refused")
	}
}
