package upstream

import (
	"fmt"
	"math"
	"math/bits"
	"strconv"
	"strings"
)

// Microdollars is an amount of money in millionths of a US dollar. Amounts
// are exact integers: no float is ever involved in spend.
type Microdollars int64

// MaxMicrodollars bounds every configured amount (a billion dollars): far
// above any real budget, far below int64 overflow in the cost arithmetic.
const MaxMicrodollars Microdollars = 1_000_000_000 * 1_000_000

// ParseDollars parses a non-negative decimal amount of dollars with at most
// six decimals ("2", "2.5", "0.000125") into microdollars. Anything else —
// a sign, an exponent, a seventh decimal, more than MaxMicrodollars — is an
// error naming s.
func ParseDollars(s string) (Microdollars, error) {
	whole, frac, dot := strings.Cut(s, ".")
	if whole == "" && (!dot || frac == "") || len(frac) > 6 || dot && frac == "" {
		return 0, fmt.Errorf("upstream: %q is not an amount of dollars (digits, at most six decimals)", s)
	}
	for _, part := range []string{whole, frac} {
		for i := 0; i < len(part); i++ {
			if part[i] < '0' || part[i] > '9' {
				return 0, fmt.Errorf("upstream: %q is not an amount of dollars (digits, at most six decimals)", s)
			}
		}
	}
	if len(whole) > 10 {
		return 0, fmt.Errorf("upstream: %q is more than %s dollars", s, MaxMicrodollars)
	}
	var w, f int64
	if whole != "" {
		w, _ = strconv.ParseInt(whole, 10, 64)
	}
	if frac != "" {
		f, _ = strconv.ParseInt(frac+strings.Repeat("0", 6-len(frac)), 10, 64)
	}
	m := Microdollars(w*1_000_000 + f)
	if m > MaxMicrodollars {
		return 0, fmt.Errorf("upstream: %q is more than %s dollars", s, MaxMicrodollars)
	}
	return m, nil
}

// String formats m as dollars with six decimals ("2.500000").
func (m Microdollars) String() string {
	sign := ""
	if m < 0 {
		sign, m = "-", -m
	}
	return fmt.Sprintf("%s%d.%06d", sign, m/1_000_000, m%1_000_000)
}

// UnmarshalText reads dollars (ParseDollars), so configuration writes
// "2.50" and the program holds 2500000.
func (m *Microdollars) UnmarshalText(b []byte) error {
	v, err := ParseDollars(string(b))
	if err != nil {
		return err
	}
	*m = v
	return nil
}

// UnmarshalJSON reads dollars written as a JSON number or string (2.5 or
// "2.5"), never as a count of microdollars.
func (m *Microdollars) UnmarshalJSON(b []byte) error {
	s := string(b)
	if len(s) >= 2 && s[0] == '"' && s[len(s)-1] == '"' {
		s = s[1 : len(s)-1]
	}
	return m.UnmarshalText([]byte(s))
}

// MarshalText writes dollars.
func (m Microdollars) MarshalText() ([]byte, error) { return []byte(m.String()), nil }

// Price is a model identity's price, each in dollars per million tokens.
type Price struct {
	Input       Microdollars `json:"input" yaml:"input"`
	CachedInput Microdollars `json:"cached_input" yaml:"cached_input"`
	Output      Microdollars `json:"output" yaml:"output"`
	// MaxOutputTokens is what an attempt reserves for output when the
	// request does not bound it (max_tokens, max_completion_tokens,
	// max_output_tokens); the model's own output limit is the honest value.
	// A price without an output rate (a local model's, an embedding
	// model's) may leave it 0: there is nothing to bound.
	MaxOutputTokens int64 `json:"max_output_tokens" yaml:"max_output_tokens"`
	// CacheWrite is the price of input tokens written to the provider's
	// prompt cache (Anthropic's cache_creation_input_tokens); 0: Input's.
	CacheWrite Microdollars `json:"cache_write,omitempty" yaml:"cache_write"`
	// Reasoning is the price of reasoning tokens where the provider
	// reports them apart (OpenAI's reasoning_tokens, part of the output);
	// 0: Output's.
	Reasoning Microdollars `json:"reasoning,omitempty" yaml:"reasoning"`
	// PerRequest is a fee per answered attempt, in dollars (not per
	// million tokens).
	PerRequest Microdollars `json:"per_request,omitempty" yaml:"per_request"`
}

// Free reports whether p costs nothing at all (a local model's price).
func (p Price) Free() bool {
	return p.Input == 0 && p.CachedInput == 0 && p.Output == 0 && p.CacheWrite == 0 && p.Reasoning == 0 && p.PerRequest == 0
}

// cacheWrite and reasoning are the rates of those tokens (their own, else
// Input's and Output's).
func (p Price) cacheWrite() Microdollars {
	if p.CacheWrite > 0 {
		return p.CacheWrite
	}
	return p.Input
}

func (p Price) reasoning() Microdollars {
	if p.Reasoning > 0 {
		return p.Reasoning
	}
	return p.Output
}

// MaxTokens bounds every token count the arithmetic sees (a billion).
const MaxTokens = 1_000_000_000

func (p Price) validate() error {
	for _, v := range []Microdollars{p.Input, p.CachedInput, p.Output, p.CacheWrite, p.Reasoning, p.PerRequest} {
		if v < 0 || v > MaxMicrodollars {
			return fmt.Errorf("a price is negative or above %s", MaxMicrodollars)
		}
	}
	if p.MaxOutputTokens == 0 && p.Output == 0 && p.Reasoning == 0 {
		return nil
	}
	if p.MaxOutputTokens <= 0 || p.MaxOutputTokens > MaxTokens {
		return fmt.Errorf("max_output_tokens %d: want 1 to %d (what an unbounded request reserves for output)", p.MaxOutputTokens, MaxTokens)
	}
	return nil
}

// Usage is what an attempt consumed, in tokens. Input excludes CachedInput:
// OpenAI's prompt_tokens include cached_tokens, so the shim subtracts them;
// Anthropic reports input_tokens without cache reads, and its cache writes
// (cache_creation_input_tokens) count as Input.
type Usage struct {
	Input       int64
	CachedInput int64
	Output      int64 // every output token, reasoning included
	// CacheWrite are input tokens written to the provider's prompt cache
	// (Anthropic's cache_creation_input_tokens), not counted in Input.
	CacheWrite int64
	// Reasoning are the output tokens the provider reports as reasoning
	// (OpenAI's reasoning_tokens): part of Output, priced apart.
	Reasoning int64
}

// Cost is the exact cost of u at price p: the sum of tokens × price per
// million for the three kinds, divided by a million once and rounded up to
// the next whole microdollar (a fraction of a microdollar is charged as one,
// so the ledger never undercounts). Negative counts count as zero and counts
// are clamped at MaxTokens.
func (p Price) Cost(u Usage) Microdollars {
	reasoning := min(clampTokens(u.Reasoning), clampTokens(u.Output))
	c := ceilDiv(mulAdd(
		clampTokens(u.Input), int64(p.Input),
		clampTokens(u.CachedInput), int64(p.CachedInput),
		clampTokens(u.CacheWrite), int64(p.cacheWrite()),
		clampTokens(u.Output)-reasoning, int64(p.Output),
		reasoning, int64(p.reasoning())), 1_000_000)
	if c > MaxMicrodollars-p.PerRequest {
		return MaxMicrodollars
	}
	return c + p.PerRequest
}

// MaxCost is what an attempt reserves before the call: its request body
// bytes as the bound on input tokens (a token is at least one byte of text
// in the tokenizers these providers use, and JSON adds bytes, never
// tokens), at the full input price, plus maxOutput tokens (the request's
// bound, or p.MaxOutputTokens when it has none) at the output price,
// rounded up as Cost.
func (p Price) MaxCost(requestBytes, maxOutput int64) Microdollars {
	if maxOutput <= 0 {
		maxOutput = p.MaxOutputTokens
	}
	// The bound is priced at the dearer rate of each: the input could all
	// be cache writes, the output all reasoning.
	bound := p
	bound.Input = max(p.Input, p.cacheWrite())
	bound.Output = max(p.Output, p.reasoning())
	return bound.Cost(Usage{Input: requestBytes, Output: maxOutput})
}

func clampTokens(n int64) int64 { return max(0, min(n, MaxTokens)) }

// mulAdd is the sum of the products of its operands taken in pairs
// (a*b + c*d + ...), all non-negative and bounded by MaxTokens and
// MaxMicrodollars: each product is below 2^110, so the sum is computed in
// 128 bits and saturates at MaxInt64 (never reached by real prices).
func mulAdd(pairs ...int64) uint64 {
	var hi, lo uint64
	for i := 0; i+1 < len(pairs); i += 2 {
		h, l := bits.Mul64(uint64(pairs[i]), uint64(pairs[i+1]))
		var carry uint64
		lo, carry = bits.Add64(lo, l, 0)
		hi += h + carry
	}
	if hi != 0 || lo > math.MaxInt64 {
		return math.MaxInt64
	}
	return lo
}

func ceilDiv(n uint64, d uint64) Microdollars {
	return Microdollars((n + d - 1) / d)
}

// Limit is a budget: at most Day in each UTC day and Month in each UTC
// month (0: no bound), and rate limits: at most RPM requests and TPM
// tokens (input and output, as the answers report them) in each UTC
// minute (0: no bound).
type Limit struct {
	Day   Microdollars `json:"day" yaml:"day"`
	Month Microdollars `json:"month" yaml:"month"`
	RPM   int64        `json:"rpm,omitempty" yaml:"rpm"`
	TPM   int64        `json:"tpm,omitempty" yaml:"tpm"`
}

// Budgets bound spend per key and per tenant. A key named in Keys uses that
// limit, any other key uses Key; likewise for tenants.
type Budgets struct {
	Key     Limit            `json:"key" yaml:"key"`
	Keys    map[string]Limit `json:"keys" yaml:"keys"`
	Tenant  Limit            `json:"tenant" yaml:"tenant"`
	Tenants map[string]Limit `json:"tenants" yaml:"tenants"`
}

func (b Budgets) validate() error {
	check := func(at string, l Limit) error {
		if l.Day < 0 || l.Month < 0 || l.Day > MaxMicrodollars || l.Month > MaxMicrodollars {
			return fmt.Errorf("upstream: budgets.%s: a limit is negative or above %s", at, MaxMicrodollars)
		}
		if l.RPM < 0 || l.TPM < 0 || l.RPM > MaxTokens || l.TPM > MaxTokens {
			return fmt.Errorf("upstream: budgets.%s: rpm and tpm are 0 (no bound) to %d", at, MaxTokens)
		}
		return nil
	}
	if err := check("key", b.Key); err != nil {
		return err
	}
	if err := check("tenant", b.Tenant); err != nil {
		return err
	}
	for k, l := range b.Keys {
		if err := check("keys."+k, l); err != nil {
			return err
		}
	}
	for t, l := range b.Tenants {
		if err := check("tenants."+t, l); err != nil {
			return err
		}
	}
	return nil
}

// For returns the limits that bind a key of a tenant.
func (b Budgets) For(tenant, keyID string) (key, ten Limit) {
	key, ok := b.Keys[keyID]
	if !ok {
		key = b.Key
	}
	ten, ok = b.Tenants[tenant]
	if !ok {
		ten = b.Tenant
	}
	return key, ten
}
