package shim

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/caduceus-dev/caduceus/audit"
	"github.com/caduceus-dev/caduceus/contract"
	"github.com/caduceus-dev/caduceus/shim/wire"
)

// entryStore serves one context entry and nothing else: enough for the
// engine benchmark, which never writes.
type entryStore struct {
	Store // nil: any other method panics
	e     ContextEntry
}

func (s entryStore) GetContext(_ context.Context, _ contract.TenantSlot, ref string) (ContextEntry, error) {
	if ref == s.e.Ref {
		return s.e, nil
	}
	return ContextEntry{}, contract.NotFoundf(CodeNotFound, "no %s", ref)
}

func (s entryStore) MarkShimmed(context.Context, contract.TenantSlot, string, string, int64, time.Time) (bool, error) {
	return true, nil
}

// BenchmarkEngine1000 is the rule engine alone on an 8 KB chat request:
// parse, tier-1 evaluation of 1,000 compiled provisions (the mix of
// BenchmarkTier1Inject1000), rendering the one that fires, and injecting
// it — no HTTP, no hashing, no audit.
func BenchmarkEngine1000(b *testing.B) {
	var provs []Provision
	for i := range 1000 {
		tr := Triggers{Mode: "any", Keyword: &Keywords{Any: []string{fmt.Sprintf("kw%dalpha", i), fmt.Sprintf("term %d beta", i)}}}
		switch {
		case i == 500:
			tr = Triggers{Mode: "any", Keyword: &Keywords{Any: []string{"deploy"}}}
		case i%100 == 7:
			tr = Triggers{Mode: "any", Regex: []Regex{{Pattern: fmt.Sprintf(`(?i)\bERR%04d\b`, i)}}}
		case i%50 == 3:
			tr = Triggers{Mode: "any", Path: []string{fmt.Sprintf("svc%d/**", i)}}
		case i%50 == 4:
			tr = Triggers{Mode: "any", Tool: []string{fmt.Sprintf("Tool%d", i)}}
		}
		provs = append(provs, Provision{ID: fmt.Sprintf("P%04d", i), Status: StatusActive, Priority: i % 10, Version: 1,
			Triggers: tr, Action: ActionShim, ContextRefs: []string{"verb:deploy"}})
	}
	body := Sample8K()
	s := New(Config{Store: entryStore{e: ContextEntry{Ref: "verb:deploy", Kind: "verb", Body: "Run make deploy.", Version: 1, Status: "active"}}, Audit: nopLog{}})
	rs := compile(provs, nil)
	caller := contract.Caller{Identity: contract.Identity{TenantSlot: "slot-1"}, Scopes: []contract.Scope{contract.ScopeRoute}}
	ctx := b.Context()
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		req, err := wire.Parse(wire.ChatCompletions, body)
		if err != nil {
			b.Fatal(err)
		}
		ev := s.evaluate(ctx, rs, caller, req, modeLive)
		pl, err := s.act(ctx, "slot-1", req, "conv_x", &ev, true)
		if err != nil || len(ev.Fired) != 1 || pl.shim == "" {
			b.Fatalf("fired %+v, err %v", ev.Fired, err)
		}
		if _, err := wire.Inject(wire.ChatCompletions, body, pl.shim); err != nil {
			b.Fatal(err)
		}
	}
}

// Sample8K is the 8 KB chat request of the benchmarks.
func Sample8K() []byte {
	var words strings.Builder
	for i := 0; words.Len() < 7600; i++ {
		fmt.Fprintf(&words, "line %d of the build log shows the service compiled and tests passed. ", i)
	}
	text := words.String() + " now please deploy it"
	return []byte(fmt.Sprintf(`{"model":"gpt-4o","temperature":0.2,"messages":[{"role":"system","content":"You are a careful engineer."},{"role":"user","content":%q}]}`, text))
}

type nopLog struct{}

func (nopLog) Append(context.Context, audit.Entry) (audit.Record, error) { return audit.Record{}, nil }
