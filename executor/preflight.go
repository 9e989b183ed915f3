package executor

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/caduceus-dev/caduceus/broker"
	"github.com/caduceus-dev/caduceus/contract"
)

// preflight runs phase 1 (1.0-1.6), one function per step in the seed's
// order, and gathers the quotes and positions phase 2 needs. It returns an
// abort reason, or "" to go on; an error only when the executor's own store
// fails or the skills root is unusable.
func (t *tick) preflight(ctx context.Context) (string, error) {
	steps := []func(context.Context) (string, error){
		func(context.Context) (string, error) { return t.manifestGate() }, // 1.0
		t.lockAccount,      // 1.1
		t.livePortfolio,    // 1.2
		t.capabilityGate,   // 1.3
		t.profileGate,      // 1.4
		t.timeWindowGate,   // 1.5
		t.dailyLossBreaker, // 1.6
		t.readAnomalies,    // the day's anomalies, for phase 2
		t.readMarketData,   // quotes and positions, for phase 2
	}
	for _, step := range steps {
		if r, err := step(ctx); r != "" || err != nil {
			return r, err
		}
	}
	return "", nil
}

// lockAccount is 1.1, the account lock: the manifest's account_lock, else
// the profile's account, else the broker's default account; it must exist
// and allow agentic trading. It also sets the envelope's mode (the
// manifest's, read by 1.0).
func (t *tick) lockAccount(ctx context.Context) (string, error) {
	s := &t.m.Strategist
	t.env.Mode = s.Mode
	accts, err := retry(func() ([]broker.Account, error) { return t.b.accounts(ctx) })
	if err != nil {
		t.note("get_accounts failed: %v", err)
		return AbortBrokerUnavailable, nil
	}
	want := t.req.ProfileAccount
	if s.AccountLock != nil {
		want = *s.AccountLock
	}
	if b := t.req.BoundAccount; b != "" && want != b {
		t.env.AccountNumber = want
		t.note("the calling key is bound to account %s; the manifest's account_lock names %s", b, want)
		return AbortAccountLockFailed, nil
	}
	i := slices.IndexFunc(accts, func(a broker.Account) bool {
		return (want != "" && a.AccountNumber == want) || (want == "" && a.IsDefault)
	})
	if i < 0 {
		if want != "" {
			t.env.AccountNumber = want
			t.note("account %s not found among %d accounts", want, len(accts))
		} else {
			t.note("no default account among %d accounts", len(accts))
		}
		return AbortAccountLockFailed, nil
	}
	t.acct = accts[i]
	t.env.AccountNumber = t.acct.AccountNumber
	if !t.acct.AgenticAllowed {
		t.note("account %s does not allow agentic trading", t.acct.AccountNumber)
		return AbortAccountLockFailed, nil
	}
	return "", nil
}

// livePortfolio is 1.2: the live portfolio, one retry on 5xx, then
// broker_unavailable.
func (t *tick) livePortfolio(ctx context.Context) (string, error) {
	port, err := retry(func() (broker.Portfolio, error) { return t.b.portfolio(ctx, t.acct.AccountNumber) })
	if err != nil {
		t.note("get_portfolio failed: %v", err)
		return AbortBrokerUnavailable, nil
	}
	t.port = port
	t.env.AccountValue, t.env.BuyingPower = port.TotalValue, port.BuyingPower
	return "", nil
}

// capabilityGate is 1.3: the account meets every capability the manifest
// requires (an unknown capability cannot be verified: gated).
func (t *tick) capabilityGate(context.Context) (string, error) {
	level := t.acct.OptionLevel
	for _, c := range t.m.Strategist.CapabilityRequires {
		ok := false
		switch c {
		case "option_level_2":
			ok = level == "option_level_2" || level == "option_level_3"
		case "option_level_3":
			ok = level == "option_level_3"
		}
		if !ok {
			t.note("capability %q not met by account %s (option_level %q)", c, t.acct.AccountNumber, level)
			return AbortCapabilityGated, nil
		}
	}
	return "", nil
}

// profileGate is 1.4, profile compatibility.
func (t *tick) profileGate(context.Context) (string, error) {
	s := &t.m.Strategist
	if !slices.Contains(s.ProfileCompatibility, t.req.Profile) {
		t.note("profile %q is not in profile_compatibility %v", t.req.Profile, s.ProfileCompatibility)
		return AbortProfileCompatibility, nil
	}
	return "", nil
}

// timeWindowGate is 1.5, the time window, for ticks that would place.
func (t *tick) timeWindowGate(context.Context) (string, error) {
	s := &t.m.Strategist
	if s.window != nil && !s.window.contains(t.now) && t.willPlace() {
		t.note("now %s is outside time_window %q", t.now.In(broker.NewYork).Format("15:04 MST"), s.TimeWindow)
		return AbortOutsideTimeWindow, nil
	}
	return "", nil
}

// dailyLossBreaker is 1.6: the day's realized loss against the day-start
// value (captured once a day) trips the breaker at DailyLossLimit; without
// a day-start value any loss trips it (fail closed). A tripped breaker is
// no abort: phase 2 blocks new risk.
func (t *tick) dailyLossBreaker(ctx context.Context) (string, error) {
	acct := t.acct.AccountNumber
	pnl, err := retry(func() (broker.PnL, error) { return t.b.pnl(ctx, acct, "day") })
	if err != nil {
		t.note("get_realized_pnl failed: %v", err)
		return AbortBrokerUnavailable, nil
	}
	start, err := t.e.Store.CaptureDayStart(ctx, t.tenant(), acct, t.day, t.port.TotalValue)
	if err != nil {
		return "", fmt.Errorf("executor: day start: %w", err)
	}
	switch {
	case start > 0:
		if pnl.TotalRealizedGain/start <= DailyLossLimit {
			t.env.CircuitBreakerTripped = true
		}
	case pnl.TotalRealizedGain < 0:
		t.env.CircuitBreakerTripped = true // no base to measure against: fail closed
	}
	if t.env.CircuitBreakerTripped {
		t.note("daily loss breaker: realized %.2f on day-start value %.2f (%s)", pnl.TotalRealizedGain, start, t.day)
	}
	return "", nil
}

// readAnomalies reads the account's anomalies of the day (phase 2 skips
// their symbols).
func (t *tick) readAnomalies(ctx context.Context) (string, error) {
	var err error
	if t.anomalies, err = t.e.Store.Anomalies(ctx, t.tenant(), t.acct.AccountNumber, t.day); err != nil {
		return "", fmt.Errorf("executor: anomalies: %w", err)
	}
	return "", nil
}

// readMarketData reads what phase 2 prices against: quotes for every equity
// order symbol (none usable is data_anomaly) and the account's positions.
func (t *tick) readMarketData(ctx context.Context) (string, error) {
	var syms []string
	for _, in := range t.p.Intents {
		if in.Side != SideCancel && in.AssetClass == AssetEquity && !slices.Contains(syms, in.Symbol) {
			syms = append(syms, in.Symbol)
		}
	}
	if len(syms) == 0 {
		return "", nil
	}
	qs, err := retry(func() ([]broker.Quote, error) { return t.b.quotes(ctx, syms) })
	if err != nil {
		t.note("get_equity_quotes failed: %v", err)
		return AbortBrokerUnavailable, nil
	}
	t.quotes = make(map[string]broker.Quote, len(qs))
	for _, q := range qs {
		if q.LastTradePrice > 0 && slices.Contains(syms, q.Symbol) {
			t.quotes[q.Symbol] = q
		}
	}
	if len(t.quotes) == 0 {
		t.note("no quote for any of %v", syms)
		return AbortDataAnomaly, nil
	}
	ps, err := retry(func() ([]broker.Position, error) { return t.b.positions(ctx, t.acct.AccountNumber) })
	if err != nil {
		t.note("get_equity_positions failed: %v", err)
		return AbortBrokerUnavailable, nil
	}
	t.positions = make(map[string]broker.Position, len(ps))
	for _, p := range ps {
		if p.Quantity > 0 {
			t.positions[p.Symbol] = p
		}
	}
	return "", nil
}

// manifestGate is phase 1.0.
func (t *tick) manifestGate() (string, error) {
	name := t.p.Strategy
	if !SafeStrategyName(name) {
		t.note("strategy name %q is not a safe path element", name)
		return AbortManifestPathInvalid, nil
	}
	b, err := ReadManifest(t.e.Skills, name)
	switch {
	case errors.Is(err, errPathInvalid):
		t.note("manifest path for %q leaves the skills root", name)
		return AbortManifestPathInvalid, nil
	case errors.Is(err, errManifestMissing):
		t.note("no manifest at %s", ManifestPath(name))
		return AbortManifestMissing, nil
	case err != nil:
		return "", err
	}
	t.manifestSHA = contract.SHA256(b)
	m, err := t.e.manifests.parse(t.manifestSHA, b)
	if err != nil {
		t.note("%s", contract.AsError(err).Message)
		return AbortManifestInvalid, nil
	}
	t.m = m
	if m.Name != name {
		t.note("manifest name %q != payload strategy %q", m.Name, name)
		return AbortManifestIdentityMismatch, nil
	}
	if m.DoNotPromote {
		return AbortPromotionBlocked, nil
	}
	if t.p.Mode == ModeLive && m.Strategist.Mode != ModeLive {
		t.note("payload mode live, manifest mode %q", m.Strategist.Mode)
		return AbortModeMismatch, nil
	}
	return "", nil
}

// routes reports whether the routing table lets intent in be placed (or
// cancelled): cron + live always, chat + live only on a matching EXECUTE:
// directive in the latest user message, claude-code never, review never.
func (t *tick) routes(in *Intent) bool {
	if t.m.Strategist.Mode != ModeLive {
		return false
	}
	switch t.req.Context {
	case ContextCron:
		return true
	case ContextChat:
		for _, d := range t.directives {
			if d.Matches(in) {
				return true
			}
		}
	}
	return false
}

// willPlace reports whether any intent would take the placement path.
func (t *tick) willPlace() bool {
	for i := range t.p.Intents {
		if t.routes(&t.p.Intents[i]) {
			return true
		}
	}
	return false
}
