package trader

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"slices"
	"strings"
	"time"

	"github.com/caduceus-dev/caduceus/audit"
	"github.com/caduceus-dev/caduceus/contract"
)

// Options configure a Service. The zero value is usable.
type Options struct {
	// Runtime reconciles strategies after a change; StoreRuntime when nil.
	Runtime Runtime
	// RiskModes is the configured set of risk modes; DefaultRiskModes when
	// empty. The first is the risk mode of a strategy imported without one.
	RiskModes []string
	// Now is the clock; time.Now when nil.
	Now func() time.Time
	// Logger receives internal failure detail (never sent to callers);
	// slog.Default() when nil.
	Logger *slog.Logger
	// MaxTries bounds how often Apply re-runs a decision whose transaction
	// lost to a concurrent writer (ErrConflict); 100 when zero.
	MaxTries int
}

// Service is the trader gate: Apply is the one write entry point of the
// contract; the rest manages and reads strategies, concerns and attempts.
// It is safe for concurrent use.
type Service struct {
	store    Store
	rt       Runtime
	risk     []string
	now      func() time.Time
	log      *slog.Logger
	maxTries int
}

// New returns a Service over st. It returns an invalid *contract.Error when a
// configured risk mode is not a lowercase name or appears twice.
func New(st Store, o Options) (*Service, error) {
	if st == nil {
		return nil, errors.New("trader: nil store")
	}
	s := &Service{store: st, rt: o.Runtime, risk: slices.Clone(o.RiskModes), now: o.Now, log: o.Logger, maxTries: o.MaxTries}
	if len(s.risk) == 0 {
		s.risk = slices.Clone(DefaultRiskModes)
	}
	for i, m := range s.risk {
		if !riskRE.MatchString(m) {
			return nil, contract.Invalidf("bad_risk_mode", "trader: risk mode %q is not a lowercase name of at most 32 characters", m)
		}
		if slices.Contains(s.risk[:i], m) {
			return nil, contract.Invalidf("bad_risk_mode", "trader: risk mode %q is configured twice", m)
		}
	}
	if s.now == nil {
		s.now = time.Now
	}
	if s.rt == nil {
		s.rt = StoreRuntime{Now: s.now}
	}
	if s.log == nil {
		s.log = slog.Default()
	}
	if s.maxTries <= 0 {
		s.maxTries = 100
	}
	return s, nil
}

// RiskModes returns the configured risk modes.
func (s *Service) RiskModes() []string { return slices.Clone(s.risk) }

func (s *Service) knownRiskMode(m string) bool { return slices.Contains(s.risk, m) }

// authorize checks that the caller has a usable identity and scope.
func authorize(c contract.Caller, scope contract.Scope) error {
	id := c.Identity
	if !contract.ValidTenantSlot(string(id.TenantSlot)) || !contract.ValidUserRef(id.Subject) || id.Surface == "" || id.Trust == "" {
		return contract.Denyf("no_identity", "trader: the caller has no resolved identity")
	}
	return c.RequireScope("trader: this call", scope)
}

// checkTenant refuses a malformed tenant slot.
func checkTenant(t contract.TenantSlot) error {
	if !contract.ValidTenantSlot(string(t)) {
		return contract.Invalidf("bad_tenant", "trader: tenant %q is not a tenant slot", clip(string(t), 40))
	}
	return nil
}

// entry builds the audit entry of one trader write.
func (s *Service) entry(c contract.Caller, action, resource string, outcome contract.Outcome, reason string, at time.Time, actor contract.ActorType, payload any) audit.Entry {
	ts := contract.Timestamp(at)
	return audit.Entry{
		Outcome: contract.AuditOutcome{
			At: ts, Identity: c.Identity, Action: action,
			// Both may quote what the caller sent; the record needs UTF-8.
			Resource: clip(strings.ToValidUTF8(resource, "\uFFFD"), 190), Outcome: outcome, Reason: clip(strings.ToValidUTF8(reason, "\uFFFD"), 190),
		},
		Provenance: c.Provenance(actor, ts),
		Payload:    payload,
	}
}

// inTx runs fn in a transaction, re-running it while it loses to concurrent
// writers (ErrConflict), at most maxTries times.
func (s *Service) inTx(ctx context.Context, tenant contract.TenantSlot, fn func(Tx) error) error {
	for try := 1; ; try++ {
		err := s.store.InTx(ctx, tenant, fn)
		if err == nil || !errors.Is(err, ErrConflict) || try >= s.maxTries {
			return err
		}
		backoff(try)
	}
}

// backoff sleeps a little, growing with the try and jittered, so that
// writers that collided do not collide again in lockstep.
func backoff(try int) {
	d := time.Duration(min(try, 20)) * 200 * time.Microsecond
	time.Sleep(d/2 + rand.N(d))
}

// internal logs err and returns the internal error callers see.
func (s *Service) internal(op string, err error) error {
	s.log.Error("trader: "+op, "err", err)
	return contract.Internal(fmt.Errorf("trader: %s: %w", op, err))
}
