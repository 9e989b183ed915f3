// Package upstream is the shim's LLM gateway vocabulary (seed 003 H17):
// routes to upstream providers, plans that order routes per model, the
// exact provider/model grants a caller needs, the price table and the
// reservation arithmetic in integer microdollars, the ledger and hold ports
// the store implements, and the failover rule.
//
// A model identity is provider/model ("openai/gpt-4.1"): the model as one
// provider serves it. A route is one credential at one base URL serving some
// identities; a plan reaches each identity through exactly one route, and an
// identity held after a rate or quota limit is held on every route.
//
// The package does no I/O: the shim drives it, the store implements Ledger
// and Holds, and cmd/caduceus loads the configuration.
package upstream

import (
	"errors"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/caduceus-dev/caduceus/contract"
)

// Failover says when a plan may move a request to its next step.
type Failover string

// Failover policies.
const (
	// FailoverNone: the first step's answer, or its failure, is the answer.
	FailoverNone Failover = "none"
	// FailoverDefinite: move on after a failure that certainly did not run
	// the request (connection refused, a 5xx or 429 before any byte).
	FailoverDefinite Failover = "definite"
	// FailoverUncertain: also after a failure that may have run it (a
	// timeout after the request was sent, a broken stream before the first
	// byte reached the client) — and then only to a model the caller holds
	// its own grant for.
	FailoverUncertain Failover = "uncertain"
)

// Step is one attempt of a plan: a route, and the model to ask it for
// (empty: the model the client asked for); or, with Balance instead, a
// group of routes the gateway chooses among per request, each its own
// model identity.
type Step struct {
	Route string `json:"route,omitempty" yaml:"route"`
	Model string `json:"model,omitempty" yaml:"model"`
	// Balance makes the step a balanced group: per request the gateway
	// picks one member by weight among those the caller is granted, not
	// held and healthy, and after a failure the plan lets it move on from,
	// tries the group's other members (heaviest first) before the next
	// step.
	Balance []Member `json:"balance,omitempty" yaml:"balance"`
	// Translate lets the step serve a client of the other wire: an OpenAI
	// chat completions client on an Anthropic route, an Anthropic messages
	// client on an OpenAI route, each turn translated (shim/translate). A
	// step without it serves its own wire only.
	Translate bool `json:"translate,omitempty" yaml:"translate"`
}

// Member is one route of a balanced step: the route, the model to ask it
// for (empty: the model the client asked for) and its weight (0: 1).
type Member struct {
	Route  string `json:"route" yaml:"route"`
	Model  string `json:"model,omitempty" yaml:"model"`
	Weight int    `json:"weight,omitempty" yaml:"weight"`
}

// Balance bounds: a balanced step has MinBalance to MaxBalance members,
// each of weight 1 to MaxWeight.
const (
	MinBalance = 2
	MaxBalance = 16
	MaxWeight  = 1000
)

// W is the member's weight (1 when unset).
func (m Member) W() int {
	if m.Weight <= 0 {
		return 1
	}
	return m.Weight
}

// Members are the routes the step may use: its Balance, or its own route
// (weight 1).
func (st Step) Members() []Member {
	if len(st.Balance) > 0 {
		return st.Balance
	}
	return []Member{{Route: st.Route, Model: st.Model}}
}

// Balanced reports whether the step is a balanced group.
func (st Step) Balanced() bool { return len(st.Balance) > 0 }

// HealthConfig is when the gateway takes a route of a balanced step for
// unhealthy (route_health): after Failures failures in a row (a refused
// connection, a 5xx before any byte, no headers in time, its credential
// refused), for Cooldown; then one request tries it again.
type HealthConfig struct {
	// Failures in a row that make a route unhealthy (1 to 100; default 3).
	Failures int `json:"failures,omitempty" yaml:"failures"`
	// Cooldown is how long it stays unhealthy (1s to 1h; default 30s).
	Cooldown string `json:"cooldown,omitempty" yaml:"cooldown"`
	// Latency, when set, makes an answer whose headers took longer a
	// failure of the run (the client still gets the answer): 100ms to
	// 10m; empty: latency does not count.
	Latency string `json:"latency,omitempty" yaml:"latency"`
}

// Slow is the time to headers past which an answer counts as a failure of
// its route's run; 0: none.
func (h HealthConfig) Slow() (time.Duration, error) {
	if h.Latency == "" {
		return 0, nil
	}
	d, err := time.ParseDuration(h.Latency)
	if err != nil || d < 100*time.Millisecond || d > 10*time.Minute {
		return 0, fmt.Errorf("upstream: route_health.latency %q: want a duration from 100ms to 10m, e.g. 5s", h.Latency)
	}
	return d, nil
}

// Threshold is the failures in a row that make a route unhealthy.
func (h HealthConfig) Threshold() int {
	if h.Failures <= 0 {
		return 3
	}
	return h.Failures
}

// Rest is the cool-down of an unhealthy route.
func (h HealthConfig) Rest() (time.Duration, error) {
	if h.Cooldown == "" {
		return 30 * time.Second, nil
	}
	d, err := time.ParseDuration(h.Cooldown)
	if err != nil || d < time.Second || d > time.Hour {
		return 0, fmt.Errorf("upstream: route_health.cooldown %q: want a duration from 1s to 1h, e.g. 30s", h.Cooldown)
	}
	return d, nil
}

func (h HealthConfig) validate() error {
	if h.Failures < 0 || h.Failures > 100 {
		return fmt.Errorf("upstream: route_health.failures %d: want 1 to 100 (0: 3)", h.Failures)
	}
	if _, err := h.Rest(); err != nil {
		return err
	}
	_, err := h.Slow()
	return err
}

// Plan orders routes per requested model.
type Plan struct {
	Failover Failover `json:"failover" yaml:"failover"`
	// Retries is how often a step is tried again after a definite failure
	// (connection refused, 502, 503, 504 before any byte) before the plan
	// moves on (0 to 5; default 0).
	Retries int `json:"retries,omitempty" yaml:"retries"`
	// RetryBackoff is the wait before the first retry ("100ms"), doubled
	// for each next one, each jittered by ±50% (default 100ms).
	RetryBackoff string `json:"retry_backoff,omitempty" yaml:"retry_backoff"`
	// Cache, when set, answers a request equal to an earlier one (same
	// wire, same canonical body, same tenant, or key under key isolation)
	// from the earlier answer while it is fresh: nothing is called,
	// reserved or charged.
	Cache *CacheConfig `json:"cache,omitempty" yaml:"cache"`
	// Models maps the model a client asks for to its ordered steps.
	Models map[string][]Step `json:"models" yaml:"models"`
	// Open marks the ungoverned plan of shim.upstreams (Open): any model
	// goes to the route of its wire, with no grant, no price, no
	// reservation and no hold — the pass-through, through the one
	// forwarder. It is made by Open, never read from a file.
	Open bool `json:"-" yaml:"-"`
}

// Steps are the plan's steps for model: its own, else those of the
// longest pattern of the plan that model matches ("gpt-4.1*" routes
// "gpt-4.1-2025-04-14"). The model of each step's identity is the one asked
// for, so a dated snapshot is served, held and charged as itself.
func (p Plan) Steps(model string) []Step {
	if st, ok := p.Models[model]; ok {
		return st
	}
	var best string
	for k := range p.Models {
		if strings.HasSuffix(k, "*") && contract.MatchModel(k, model) && len(k) > len(best) {
			best = k
		}
	}
	if best == "" {
		return nil
	}
	return p.Models[best]
}

// PriceOf is the price of model identity id: its own, else that of the
// longest pattern of prices it matches ("openai/gpt-4.1*").
func (c Config) PriceOf(id string) (Price, bool) {
	if p, ok := c.Prices[id]; ok {
		return p, true
	}
	var best string
	for k := range c.Prices {
		if strings.HasSuffix(k, "*") && (contract.MatchModel(k, id) || (strings.HasSuffix(id, "*") && contract.MatchModel(k, strings.TrimSuffix(id, "*")))) && len(k) > len(best) {
			best = k
		}
	}
	if best == "" {
		return Price{}, false
	}
	return c.Prices[best], true
}

// CacheConfig is a plan's response cache.
type CacheConfig struct {
	// TTL is how long an answer is served from the cache (1s to 24h).
	TTL string `json:"ttl" yaml:"ttl"`
	// MaxBytes bounds an answer kept (default 1 MiB; larger ones are not
	// kept).
	MaxBytes int `json:"max_bytes,omitempty" yaml:"max_bytes"`
}

// Fresh is the cache's TTL.
func (c CacheConfig) Fresh() (time.Duration, error) {
	d, err := time.ParseDuration(c.TTL)
	if err != nil || d < time.Second || d > 24*time.Hour {
		return 0, fmt.Errorf("upstream: cache ttl %q: want a duration from 1s to 24h, e.g. 10m", c.TTL)
	}
	return d, nil
}

// Bound is the largest answer the cache keeps.
func (c CacheConfig) Bound() int {
	if c.MaxBytes <= 0 {
		return 1 << 20
	}
	return c.MaxBytes
}

// MaxRetries bounds a plan's retries of one step.
const MaxRetries = 5

// Backoff is the plan's RetryBackoff (100ms when unset).
func (p Plan) Backoff() (time.Duration, error) {
	if p.RetryBackoff == "" {
		return 100 * time.Millisecond, nil
	}
	d, err := time.ParseDuration(p.RetryBackoff)
	if err != nil || d < time.Millisecond || d > 10*time.Second {
		return 0, fmt.Errorf("upstream: retry_backoff %q", p.RetryBackoff)
	}
	return d, nil
}

// Retryable reports whether a definite failure with status (0: not
// reached) is one a plan's retries try again on the same step: the
// upstream refused the connection or answered 502, 503 or 504 before any
// byte of an answer. A 429 is held, not retried; a 401/403 or a 4xx is the
// request's or the route's, not the moment's.
func Retryable(failure Failure, status int) bool {
	if failure != Definite {
		return false
	}
	switch status {
	case 0, http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout:
		return true
	}
	return false
}

// Open is the configuration of the ungoverned pass-through (shim.upstreams):
// a route per provider named by its kind ("openai" for chat completions,
// responses and embeddings; "anthropic" for messages) at the given base
// URL, and one Open plan.
func Open(baseURLs map[string]string) Config {
	c := Config{Routes: map[string]Route{}, Plans: map[string]Plan{"upstreams": {Failover: FailoverNone, Open: true}}}
	for _, k := range []Kind{KindOpenAI, KindAnthropic} {
		if u := baseURLs[string(k)]; u != "" {
			c.Routes[string(k)] = Route{Kind: k, BaseURL: u}
		}
	}
	return c
}

// OpenRoute is the route of an Open plan that serves kind: the route named
// by it. ok is false when none is configured.
func (c Config) OpenRoute(kind Kind) (string, bool) {
	r, ok := c.Routes[string(kind)]
	return string(kind), ok && r.Kind == kind
}

// Config is the gateway's configuration.
type Config struct {
	Routes map[string]Route `json:"routes" yaml:"routes"`
	Plans  map[string]Plan  `json:"plans" yaml:"plans"`
	// DefaultPlan serves tenants not named in TenantPlans ("" with one
	// plan: that plan).
	DefaultPlan string            `json:"default_plan,omitempty" yaml:"default_plan"`
	TenantPlans map[string]string `json:"tenant_plans,omitempty" yaml:"tenant_plans"`
	// Prices by model identity.
	Prices  map[string]Price `json:"prices" yaml:"prices"`
	Budgets Budgets          `json:"budgets" yaml:"budgets"`
	// RouteHealth is when a route of a balanced step is skipped as
	// unhealthy.
	RouteHealth HealthConfig `json:"route_health,omitzero" yaml:"route_health"`
}

// Parse decodes a JSON configuration (unknown fields refused) and validates
// it.
func Parse(b []byte) (Config, error) {
	var c Config
	switch err := contract.DecodeStrict(b, &c); {
	case errors.Is(err, contract.ErrTrailingData):
		return Config{}, fmt.Errorf("upstream: trailing data after the configuration")
	case err != nil:
		return Config{}, fmt.Errorf("upstream: %v", err)
	}
	if err := c.Validate(); err != nil {
		return Config{}, err
	}
	return c, nil
}

// Identity is provider/model.
func Identity(provider, model string) string { return provider + "/" + model }

// SplitIdentity is contract.SplitIdentity, its error prefixed "upstream: ".
func SplitIdentity(s string) (provider, model string, err error) {
	provider, model, err = contract.SplitIdentity(s)
	if err != nil {
		return "", "", fmt.Errorf("upstream: %w", err)
	}
	return provider, model, nil
}

// ParseGrants parses a comma-separated list of provider/model pairs
// ("openai/gpt-4.1,anthropic/claude-sonnet-4-5"), sorted and without
// duplicates. Contributor-tier models are refused.
func ParseGrants(s string) ([]string, error) {
	var parts []string
	for part := range strings.SplitSeq(s, ",") {
		if part = strings.TrimSpace(part); part != "" {
			parts = append(parts, part)
		}
	}
	return CheckGrants(parts)
}

// CheckGrants is contract.CheckGrants, its error prefixed "upstream: ".
func CheckGrants(grants []string) ([]string, error) {
	out, err := contract.CheckGrants(grants)
	if err != nil {
		return nil, fmt.Errorf("upstream: %w", err)
	}
	return out, nil
}

// CheckGrant is contract.CheckGrant, its error prefixed "upstream: ".
func CheckGrant(g string) error {
	if err := contract.CheckGrant(g); err != nil {
		return fmt.Errorf("upstream: %w", err)
	}
	return nil
}

func contributor(model string) bool { return strings.Contains(strings.ToLower(model), "contributor") }

func validName(s string) bool { return contract.ValidName(s) }

// ProviderClass is the HUX provider class (seed 002 $defs/provider) of
// model (a model identity, "openai/gpt-4.1") served by route: local when
// its price is zero (how a configuration declares a local model: Ollama,
// vLLM), else claude for a route of kind anthropic and codex for one of
// kind openai; "" for a route this configuration does not know.
func (c Config) ProviderClass(route, model string) contract.Provider {
	r, ok := c.Routes[route]
	if !ok {
		return ""
	}
	if p, ok := c.PriceOf(model); ok && p.Free() {
		return contract.ProviderLocal
	}
	return KindClass(r.Kind)
}

// Validate checks the configuration and returns an error naming the first
// bad entry (entries are visited in name order, so the answer is stable).
func (c Config) Validate() error {
	for _, name := range slices.Sorted(maps.Keys(c.Routes)) {
		if err := c.Routes[name].validate(name); err != nil {
			return err
		}
	}
	for _, name := range slices.Sorted(maps.Keys(c.Plans)) {
		if err := c.validatePlan(name, c.Plans[name]); err != nil {
			return err
		}
	}
	if c.DefaultPlan != "" {
		if _, ok := c.Plans[c.DefaultPlan]; !ok {
			return fmt.Errorf("upstream: default_plan %q names no plan", c.DefaultPlan)
		}
	} else if len(c.Plans) > 1 {
		return fmt.Errorf("upstream: default_plan is required with more than one plan")
	}
	for _, t := range slices.Sorted(maps.Keys(c.TenantPlans)) {
		if !contract.ValidTenantSlot(t) {
			return fmt.Errorf("upstream: tenant_plans: %q is not a tenant slot", t)
		}
		if _, ok := c.Plans[c.TenantPlans[t]]; !ok {
			return fmt.Errorf("upstream: tenant_plans.%s: %q names no plan", t, c.TenantPlans[t])
		}
	}
	for _, id := range slices.Sorted(maps.Keys(c.Prices)) {
		if _, model, err := SplitIdentity(id); err != nil {
			return fmt.Errorf("upstream: prices: %v", err)
		} else if contributor(model) {
			return fmt.Errorf("upstream: prices.%s: contributor-tier models are refused", id)
		}
		if err := c.Prices[id].validate(); err != nil {
			return fmt.Errorf("upstream: prices.%s: %v", id, err)
		}
	}
	// Every identity a plan reaches has a price: an attempt that cannot be
	// reserved cannot be made.
	for _, name := range slices.Sorted(maps.Keys(c.Plans)) {
		p := c.Plans[name]
		for _, m := range slices.Sorted(maps.Keys(p.Models)) {
			for i, st := range p.Models[m] {
				for j, mb := range st.Members() {
					id := c.MemberIdentity(mb, m)
					if _, ok := c.PriceOf(id); !ok {
						return fmt.Errorf("upstream: %s: %s has no price in prices", stepAt(name, m, i, j, st), id)
					}
				}
			}
		}
	}
	if err := c.RouteHealth.validate(); err != nil {
		return err
	}
	return c.Budgets.validate()
}

// stepAt names member j of step i of model m in plan name, as an error
// does: plans.main.models.gpt-4.1[0], or ...[0].balance[1] for a member
// of a balanced step.
func stepAt(name, m string, i, j int, st Step) string {
	at := fmt.Sprintf("plans.%s.models.%s[%d]", name, m, i)
	if st.Balanced() {
		at += fmt.Sprintf(".balance[%d]", j)
	}
	return at
}

// StepIdentity is the model identity a step reaches when a client asked
// for model (a balanced step's: its first member's).
func (c Config) StepIdentity(st Step, model string) string {
	return c.MemberIdentity(st.Members()[0], model)
}

// MemberIdentity is the model identity a member of a step reaches when a
// client asked for model.
func (c Config) MemberIdentity(m Member, model string) string {
	if m.Model != "" {
		model = m.Model
	}
	return Identity(c.Routes[m.Route].ProviderOf(), model)
}

func (c Config) validatePlan(name string, p Plan) error {
	if !validName(name) {
		return fmt.Errorf("upstream: plans: name %q must be lowercase letters, digits, '-' or '_'", name)
	}
	switch p.Failover {
	case FailoverNone, FailoverDefinite, FailoverUncertain:
	case "":
		return fmt.Errorf("upstream: plans.%s.failover is required (none, definite or uncertain)", name)
	default:
		return fmt.Errorf("upstream: plans.%s.failover %q: want none, definite or uncertain", name, p.Failover)
	}
	if len(p.Models) == 0 {
		return fmt.Errorf("upstream: plans.%s.models: a plan routes at least one model", name)
	}
	if p.Retries < 0 || p.Retries > MaxRetries {
		return fmt.Errorf("upstream: plans.%s.retries %d: want 0 to %d", name, p.Retries, MaxRetries)
	}
	if _, err := p.Backoff(); err != nil {
		return fmt.Errorf("upstream: plans.%s.retry_backoff %q: want a duration from 1ms to 10s, e.g. 100ms", name, p.RetryBackoff)
	}
	if p.Cache != nil {
		if _, err := p.Cache.Fresh(); err != nil {
			return fmt.Errorf("upstream: plans.%s.cache.ttl %q: want a duration from 1s to 24h, e.g. 10m", name, p.Cache.TTL)
		}
		if p.Cache.MaxBytes < 0 || p.Cache.MaxBytes > 64<<20 {
			return fmt.Errorf("upstream: plans.%s.cache.max_bytes %d: want 0 (1 MiB) to 67108864", name, p.Cache.MaxBytes)
		}
	}
	// One route per model identity in a plan: a second credential for the
	// same upstream model would let a request escape that model's limits.
	routeOf := map[string]string{} // identity -> route
	for _, m := range slices.Sorted(maps.Keys(p.Models)) {
		if m == "" || contributor(m) {
			return fmt.Errorf("upstream: plans.%s.models: %q is not a model a client may ask for", name, m)
		}
		steps := p.Models[m]
		if len(steps) == 0 {
			return fmt.Errorf("upstream: plans.%s.models.%s: no steps", name, m)
		}
		// kind is the model's wire: its first untranslated step's. A
		// translated step may speak the other; a balance speaks one.
		var kind, stepKind Kind
		for i, st := range steps {
			if err := st.validateShape(fmt.Sprintf("plans.%s.models.%s[%d]", name, m, i)); err != nil {
				return err
			}
			for j, mb := range st.Members() {
				at := stepAt(name, m, i, j, st)
				r, ok := c.Routes[mb.Route]
				if !ok {
					return fmt.Errorf("upstream: %s: route %q is not in routes", at, mb.Route)
				}
				model := m
				if mb.Model != "" {
					model = mb.Model
				}
				if contributor(model) {
					return fmt.Errorf("upstream: %s: contributor-tier model %q is refused", at, model)
				}
				if !r.Serves(model) {
					return fmt.Errorf("upstream: %s: route %q does not serve %q (its models: %s)", at, mb.Route, model, strings.Join(r.Models, ", "))
				}
				if j == 0 {
					stepKind = r.Kind
				} else if r.Kind != stepKind {
					return fmt.Errorf("upstream: %s: route %q speaks %s but the balance's first member speaks %s; the members of a balance speak one wire", at, mb.Route, r.Kind, stepKind)
				}
				switch {
				case st.Translate:
				case kind == "":
					kind = r.Kind
				case r.Kind != kind:
					return fmt.Errorf("upstream: %s: route %q speaks %s but the model's first step speaks %s; a step serves the other wire only with translate: true", at, mb.Route, r.Kind, kind)
				}
				id := Identity(r.ProviderOf(), model)
				if prev, ok := routeOf[id]; ok && prev != mb.Route {
					return fmt.Errorf("upstream: %s: %s is already reached through route %q; a model identity is reachable through one route per plan", at, id, prev)
				}
				routeOf[id] = mb.Route
			}
		}
	}
	return nil
}

// validateShape checks a step's own fields (at names it): a route, or a
// balance of MinBalance to MaxBalance distinct routes of weight 1 to
// MaxWeight, never both.
func (st Step) validateShape(at string) error {
	if st.Balance == nil {
		if st.Route == "" {
			return fmt.Errorf("upstream: %s: a step names a route, or a balance of routes", at)
		}
		return nil
	}
	if st.Route != "" || st.Model != "" {
		return fmt.Errorf("upstream: %s: a step has a route or a balance, not both (give each member of the balance its own model)", at)
	}
	if n := len(st.Balance); n < MinBalance || n > MaxBalance {
		return fmt.Errorf("upstream: %s.balance: %d members; a balance has %d to %d", at, n, MinBalance, MaxBalance)
	}
	seen := map[string]bool{}
	for j, mb := range st.Balance {
		if mb.Route == "" {
			return fmt.Errorf("upstream: %s.balance[%d].route is required", at, j)
		}
		if mb.Weight < 0 || mb.Weight > MaxWeight {
			return fmt.Errorf("upstream: %s.balance[%d].weight %d: want 1 to %d (0: 1)", at, j, mb.Weight, MaxWeight)
		}
		if seen[mb.Route] {
			return fmt.Errorf("upstream: %s.balance[%d]: route %q is already a member of this balance", at, j, mb.Route)
		}
		seen[mb.Route] = true
	}
	return nil
}

// PlanFor returns the plan serving tenant, or false when none does.
func (c Config) PlanFor(tenant contract.TenantSlot) (string, Plan, bool) {
	name := c.TenantPlans[string(tenant)]
	if name == "" {
		name = c.DefaultPlan
	}
	if name == "" && len(c.Plans) == 1 {
		for n := range c.Plans {
			name = n
		}
	}
	p, ok := c.Plans[name]
	return name, p, ok
}

// Enabled reports whether any route is configured.
func (c Config) Enabled() bool { return len(c.Routes) > 0 }
