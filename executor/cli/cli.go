// Package cli is what `caduceus exec` calls: it turns the command's parsed
// flags into one executor tick against the paper or the Robinhood broker and
// returns the envelope. It is the only place that picks a broker
// implementation; the executor itself sees the broker.Broker port only.
package cli

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"os"
	"sync"
	"time"

	"github.com/caduceus-dev/caduceus/audit"
	"github.com/caduceus-dev/caduceus/broker"
	"github.com/caduceus-dev/caduceus/broker/paper"
	"github.com/caduceus-dev/caduceus/broker/robinhood"
	"github.com/caduceus-dev/caduceus/contract"
	"github.com/caduceus-dev/caduceus/executor"
)

// Options are the flags of `caduceus exec` plus what the command wires in.
type Options struct {
	PayloadFile  string // --payload FILE ("-" is not special; the command may read stdin into Payload)
	Payload      []byte // used instead of PayloadFile when not nil
	SkillsDir    string // --skills DIR
	Broker       string // --broker: "paper" (default) or "robinhood"
	ScenarioFile string // --scenario FILE (paper)
	MCPURL       string // --mcp-url URL (robinhood)
	MCPToken     string // bearer token for the Robinhood MCP server (from the environment, never a flag)
	Message      string // --message TEXT: the latest user message
	Now          string // --now RFC3339: the tick's clock (else the scenario's now, else the wall clock)
	Context      string // --context: may only make the detected context stricter
	// IdempotencyKey (--idempotency-key) makes the tick run at most once
	// per tenant and key: a repeat prints the stored envelope (a replay).
	IdempotencyKey string

	Env   func(string) string // the process environment (os.Getenv)
	IsTTY bool                // whether stdin is a terminal

	Store      executor.Store    // required: the executor's state (and the paper broker's)
	Audit      audit.Log         // required
	Identity   contract.Identity // zero means LocalIdentity
	Provenance *contract.Provenance
	HTTPClient *http.Client // for the MCP client; nil means a default client
}

// LocalIdentity is the identity of a local `caduceus exec` run when the
// command supplies none.
var LocalIdentity = contract.Identity{
	TenantSlot: "slot-0",
	Subject:    "usr_" + hex.EncodeToString(func() []byte { s := sha256.Sum256([]byte("caduceus-cli")); return s[:16] }()),
	Surface:    contract.SurfaceWorker,
	Trust:      contract.TrustWorker,
}

// Exec runs one tick. It returns an invalid *contract.Error (exit 2) when a
// file or flag is not valid at all: unreadable payload, scenario or skills
// directory, a malformed payload or scenario, a bad --now, --context or
// --broker, a missing --mcp-url. Any envelope, aborted or not, comes back
// with a nil error (exit 0). Other errors (the store, the audit log, an MCP
// connection that cannot be made) are internal or carry the broker's status.
func Exec(ctx context.Context, o Options) (executor.Envelope, error) {
	if o.Store == nil || o.Audit == nil {
		return executor.Envelope{}, contract.Internal(errors.New("cli: Store and Audit are required"))
	}
	payload := o.Payload
	if payload == nil {
		if o.PayloadFile == "" {
			return executor.Envelope{}, contract.FieldError("--payload", "missing_flag", "cli: --payload FILE is required")
		}
		b, err := os.ReadFile(o.PayloadFile)
		if err != nil {
			return executor.Envelope{}, contract.FieldError("--payload", "bad_file", "cli: cannot read payload file: %v", err)
		}
		payload = b
	}
	if o.SkillsDir == "" {
		return executor.Envelope{}, contract.FieldError("--skills", "missing_flag", "cli: --skills DIR is required")
	}
	if st, err := os.Stat(o.SkillsDir); err != nil || !st.IsDir() {
		return executor.Envelope{}, contract.FieldError("--skills", "bad_file", "cli: skills directory %q is not a readable directory", o.SkillsDir)
	}
	rc, rcSource, err := executor.DetectContextSource(o.Env, o.IsTTY, o.Context)
	if err != nil {
		ce := contract.AsError(err)
		ce.Field = "--context"
		return executor.Envelope{}, ce
	}
	var now time.Time
	if o.Now != "" {
		if now, err = time.Parse(time.RFC3339, o.Now); err != nil {
			return executor.Envelope{}, contract.FieldError("--now", "bad_value", "cli: --now %q is not RFC 3339", o.Now)
		}
	}
	id := o.Identity
	if id == (contract.Identity{}) {
		id = LocalIdentity
	}
	// Validate the payload before any broker is opened or dialed.
	if _, err := executor.ParsePayload(payload); err != nil {
		return executor.Envelope{}, err
	}

	var b broker.Broker
	switch o.Broker {
	case "", "paper":
		sim, fixed, err := openPaper(ctx, o, id.TenantSlot, now)
		if err != nil {
			return executor.Envelope{}, err
		}
		if now.IsZero() {
			now = fixed
		}
		b = sim
	case "robinhood":
		if o.MCPURL == "" {
			return executor.Envelope{}, contract.FieldError("--mcp-url", "missing_flag", "cli: --broker robinhood needs --mcp-url URL")
		}
		c, err := robinhood.Dial(ctx, o.MCPURL, o.MCPToken, o.HTTPClient)
		if err != nil {
			return executor.Envelope{}, err
		}
		defer c.Close()
		b = c
	default:
		return executor.Envelope{}, contract.FieldError("--broker", "bad_value", "cli: --broker %q is not paper or robinhood", o.Broker)
	}
	ex := &executor.Executor{Broker: b, Store: o.Store, Audit: o.Audit, Skills: o.SkillsDir}
	return ex.Tick(ctx, executor.TickRequest{
		Payload:        payload,
		Identity:       id,
		Provenance:     o.Provenance,
		Context:        rc,
		ContextSource:  rcSource,
		Profile:        executor.DetectProfile(o.Env),
		ProfileAccount: getenv(o.Env, "HERMES_PROFILE_ACCOUNT"),
		Message:        o.Message,
		Now:            now,
		IdempotencyKey: o.IdempotencyKey,
	})
}

func getenv(env func(string) string, k string) string {
	if env == nil {
		return ""
	}
	return env(k)
}

// openPaper loads the scenario and opens the simulator whose state the
// store keeps under a name derived from the scenario's bytes: re-running
// the same scenario continues its simulated account (orders, fills,
// consumed faults); a changed scenario starts fresh. It returns the
// scenario's fixed now, if any.
func openPaper(ctx context.Context, o Options, tenant contract.TenantSlot, now time.Time) (*paper.Sim, time.Time, error) {
	if o.ScenarioFile == "" {
		return nil, time.Time{}, contract.FieldError("--scenario", "missing_flag", "cli: --broker paper needs --scenario FILE")
	}
	raw, err := os.ReadFile(o.ScenarioFile)
	if err != nil {
		code := "bad_file"
		if errors.Is(err, fs.ErrNotExist) {
			code = "missing_file"
		}
		return nil, time.Time{}, contract.FieldError("--scenario", code, "cli: cannot read scenario file: %v", err)
	}
	sc, err := paper.ParseScenario(raw)
	if err != nil {
		return nil, time.Time{}, contract.FieldError("--scenario", "bad_scenario", "%v", err)
	}
	fixed, _, _ := sc.NowTime()
	clock := now
	if clock.IsZero() {
		clock = fixed
	}
	var clk func() time.Time
	if !clock.IsZero() {
		clk = func() time.Time { return clock }
		sc.Now = "" // --now wins over the scenario's now
	}
	sum := sha256.Sum256(raw)
	p := StorePersister{Store: o.Store, Tenant: tenant, Name: "paper/" + hex.EncodeToString(sum[:8])}
	sim, err := paper.Open(ctx, p, sc, clk)
	if err != nil {
		return nil, time.Time{}, err
	}
	return sim, fixed, nil
}

// StorePersister keeps a paper simulator's state in the executor's Store.
type StorePersister struct {
	Store  executor.Store
	Tenant contract.TenantSlot
	Name   string
}

// Load implements paper.Persister.
func (p StorePersister) Load(ctx context.Context) ([]byte, int64, error) {
	b, v, err := p.Store.BrokerState(ctx, p.Tenant, p.Name)
	if err != nil {
		return nil, 0, fmt.Errorf("cli: load %s: %w", p.Name, err)
	}
	return b, v, nil
}

// Save implements paper.Persister: a compare-and-swap on the version.
func (p StorePersister) Save(ctx context.Context, state []byte, version int64) (int64, bool, error) {
	return p.Store.SaveBrokerState(ctx, p.Tenant, p.Name, state, version)
}

// PaperBrokers returns an executor.Executor.Brokers function for a server:
// each tenant gets its own paper account, built from the scenario the first
// time and kept in store (under the same name Exec uses, so `caduceus exec`
// and the server share a tenant's paper account). The scenario's fixed now
// is ignored: a server runs on the wall clock. Simulators are kept per
// tenant in this process; every call they make is a compare-and-swap
// transaction on the stored state, so processes sharing one database share
// the account without losing or doubling a fill.
func PaperBrokers(store executor.Store, scenario []byte) (func(context.Context, contract.TenantSlot) (broker.Broker, error), error) {
	sc, err := paper.ParseScenario(scenario)
	if err != nil {
		return nil, contract.FieldError("scenario", "bad_scenario", "%v", err)
	}
	sum := sha256.Sum256(scenario)
	name := "paper/" + hex.EncodeToString(sum[:8])
	var mu sync.Mutex
	sims := map[contract.TenantSlot]*paper.Sim{}
	return func(ctx context.Context, t contract.TenantSlot) (broker.Broker, error) {
		mu.Lock()
		defer mu.Unlock()
		if s, ok := sims[t]; ok {
			return s, nil
		}
		fresh := *sc
		fresh.Now = "" // a server runs on the wall clock
		s, err := paper.Open(ctx, StorePersister{Store: store, Tenant: t, Name: name}, &fresh, nil)
		if err != nil {
			return nil, err
		}
		sims[t] = s
		return s, nil
	}, nil
}
