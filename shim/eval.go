package shim

import (
	"context"
	"fmt"
	"math/bits"
	"slices"
	"strconv"
	"time"

	"github.com/caduceus-dev/caduceus/contract"
	"github.com/caduceus-dev/caduceus/shim/wire"
)

// evalMode says which providers an evaluation may call.
type evalMode int

const (
	modeLive    evalMode = iota // the proxy: configured embedder and classifier
	modeOffline                 // offline, dry-run, preview: no provider call
)

// evaluation is the outcome of running the triggers over one request.
type evaluation struct {
	Evaluated int
	Fired     []Fired
	Skipped   []Skipped
	fired     []*compiled // parallel to Fired
}

func (c *compiled) applies(caller contract.Caller, req *wire.Request) bool {
	if !c.active {
		return false
	}
	m := c.p.Match
	if m == nil {
		return true
	}
	if len(m.Protocols) > 0 && !slices.Contains(m.Protocols, string(req.Protocol)) {
		return false
	}
	if len(m.Models) > 0 && !slices.ContainsFunc(m.Models, func(g string) bool { return globMatch(g, req.Model) }) {
		return false
	}
	if len(m.Harnesses) > 0 && !slices.Contains(m.Harnesses, caller.Harness) {
		return false
	}
	return true
}

// evaluate runs every applicable provision's triggers in priority order.
// Tier 1 is pure; tiers 2 and 3 share the per-request Budget.
func (s *Service) evaluate(ctx context.Context, rs *ruleset, caller contract.Caller, req *wire.Request, mode evalMode) evaluation {
	r := s.newEvalRun(ctx, rs, caller, req, mode)
	defer r.stop()
	visit := r.candidates()
	// A rule that no signal woke and that is counted without a visit is
	// skipped: only the others (woken, or in unquiet) are read, in order.
	unquiet := rs.unquiet
	if r.admit != nil {
		unquiet = rs.unquietAdmit
	}
	for wi, word := range visit {
		r.visitWord(wi, word|unquiet[wi], visit[wi])
	}
	return r.ev
}

// visitWord runs evaluate over the rules of the bitset word wi that
// rules marks, in order; visit is the word of the rules woken.
func (r *evalRun) visitWord(wi int, rules, visit uint64) {
	s, rs, caller, req := r.s, r.rs, r.caller, r.req
	for rules != 0 {
		b := bits.TrailingZeros64(rules)
		rules &= rules - 1
		i := wi*64 + b
		if i >= len(rs.rules) {
			return // past the last rule (a full scan sets every bit)
		}
		c := rs.rules[i]
		woken := visit&(1<<b) != 0
		counted := !s.fullScan && c.quiet && (r.admit == nil || c.noAdmit)
		if !woken && counted {
			continue
		}
		if !c.applies(caller, req) || !r.admitted(c) {
			continue
		}
		if !counted {
			r.ev.Evaluated++
		}
		if !woken {
			continue
		}
		if c.vetoed(r.sig) {
			r.skip(c, "keyword_none")
			continue
		}
		fired, skip := r.fire(c)
		if skip != "" {
			r.skip(c, skip)
			continue
		}
		if fired.Tier == 0 {
			continue
		}
		fired.ID, fired.Version, fired.Action, fired.Builtin = c.p.ID, c.p.Version, c.p.Action, c.builtin
		r.ev.Fired = append(r.ev.Fired, fired)
		r.ev.fired = append(r.ev.fired, c)
	}
}

// evalRun is one evaluation: the request's tier-1 signals, the admission
// hook, the per-request budget of tiers 2 and 3 (its timer made only when
// a rule reaches one of them), and the query embedding (made at most once).
type evalRun struct {
	s        *Service
	ctx      context.Context
	rs       *ruleset
	caller   contract.Caller
	mode     evalMode
	req      *wire.Request
	text     string
	sig      *signals
	admit    func(ctx context.Context, caller contract.Caller, p Provision) (bool, string)
	embedder Embedder

	deadline time.Time
	budgetCx context.Context
	cancel   context.CancelFunc

	query    []float32
	queryErr string

	ev evaluation
}

func (s *Service) newEvalRun(ctx context.Context, rs *ruleset, caller contract.Caller, req *wire.Request, mode evalMode) evalRun {
	text := req.LastUserText()
	r := evalRun{s: s, ctx: ctx, rs: rs, caller: caller, req: req, mode: mode, text: text,
		sig:   rs.signals(text, req.Used, req.AllPaths),
		admit: s.cfg.Admit, embedder: s.embedder,
		// the budget bounds tiers 2 and 3 from the start of the evaluation
		deadline: time.Now().Add(s.cfg.Budget),
	}
	// offline evaluation never calls a remote embedder (seed 003, H16)
	if mode == modeOffline && r.embedder.Remote() {
		r.embedder = Local{}
	}
	return r
}

func (r *evalRun) stop() {
	if r.cancel != nil {
		r.cancel()
	}
}

// budget is the context tiers 2 and 3 run under.
func (r *evalRun) budget() context.Context {
	if r.budgetCx == nil {
		r.budgetCx, r.cancel = context.WithDeadline(r.ctx, r.deadline)
	}
	return r.budgetCx
}

func (r *evalRun) skip(c *compiled, reason string) {
	r.ev.Skipped = append(r.ev.Skipped, Skipped{c.p.ID, c.p.Version, reason})
}

// candidates says which rules run their triggers: a simple rule no signal
// woke cannot fire. A quiet rule (simple, no match clause) that needs no
// admission call is not even visited unless woken: it is counted as
// evaluated up front. Every other rule is still offered to the admission
// hook, whose refusals the receipt lists.
func (r *evalRun) candidates() []uint64 {
	visit := r.rs.candidates(r.sig)
	switch {
	case r.s.fullScan:
		for i := range visit {
			visit[i] = ^uint64(0)
		}
	case r.admit == nil:
		r.ev.Evaluated = r.rs.quiet
	default:
		r.ev.Evaluated = r.rs.quietFree
	}
	return visit
}

// admitted asks the admission hook (the governance lens, seed 003 H12)
// about c, and records a refusal as skipped.
func (r *evalRun) admitted(c *compiled) bool {
	if r.admit == nil || c.noAdmit {
		return true
	}
	ok, why := r.admit(r.ctx, r.caller, c.p)
	if !ok {
		r.skip(c, "not_admitted:"+why)
	}
	return ok
}

// fire runs c's trigger tiers in order and says what fired (Tier 0: nothing)
// or why c was skipped. A provision whose micromodel names a
// contributor-tier model is refused first, before any tier and before the
// offline fallback (seed 003, H03; such a provision can only be a row
// written before the write rule or straight into the store). In mode any
// the first tier that hits fires and the later tiers are not run (seed 003,
// H06); in mode all every configured tier must hit.
func (r *evalRun) fire(c *compiled) (fired Fired, skip string) {
	if c.hasT3 && IsContributorModel(c.p.Triggers.Micromodel.Model) {
		return Fired{}, "micromodel_contributor_refused"
	}
	all := c.p.Triggers.Mode == "all"
	why1 := ""
	if c.hasT1 {
		hit, why := c.tier1(r.sig, r.rs.words)
		if hit && !all {
			return Fired{Tier: 1, Reason: why}, ""
		}
		if !hit && all {
			return Fired{}, ""
		}
		why1 = why
	}
	if c.hasT2 {
		if fired, skip, done := r.semantic(c, all); done {
			return fired, skip
		}
	}
	if c.hasT3 {
		return r.micromodel(c)
	}
	if !all {
		return Fired{}, ""
	}
	// every configured tier hit; report the first
	if !c.hasT1 {
		return Fired{Tier: 2, Reason: "semantic"}, ""
	}
	return Fired{Tier: 1, Reason: why1}, ""
}

// semantic is tier 2 (seed 003, H05): the best cosine of the request's
// last user text against c's examples, compared with the threshold. done
// is false when the next tier decides (a hit in mode all, a miss in mode
// any).
func (r *evalRun) semantic(c *compiled, all bool) (fired Fired, skip string, done bool) {
	if r.budget().Err() != nil {
		return Fired{}, "budget_exhausted", true
	}
	if r.query == nil && r.queryErr == "" {
		vs, err := r.embedder.Embed(r.budget(), []string{r.text})
		if err != nil || len(vs) != 1 {
			r.queryErr = fmt.Sprint("embedder_error: ", err)
		} else {
			r.query = vs[0]
		}
	}
	if r.queryErr != "" {
		return Fired{}, r.queryErr, true
	}
	score, err := r.s.similarity(r.budget(), r.embedder, r.query, c.p.Triggers.Semantic.Examples)
	if err != nil {
		return Fired{}, "embedder_error", true
	}
	th := c.p.Triggers.Semantic.Threshold
	if th == 0 {
		th = defaultThreshold
	}
	hit := score >= th
	switch {
	case !hit && all:
		return Fired{}, "", true
	case hit && !all:
		conf := score
		return Fired{Tier: 2, Reason: "semantic:" + strconv.FormatFloat(score, 'f', 3, 64), Confidence: &conf}, "", true
	}
	return Fired{}, "", false
}

// micromodel is tier 3: a classifier's typed verdict (seed 003, H16),
// never offline, within the budget (fire has refused a contributor-tier
// model already: H03). Its answer is final for c.
func (r *evalRun) micromodel(c *compiled) (fired Fired, skip string) {
	mm := c.p.Triggers.Micromodel
	switch {
	case r.mode == modeOffline:
		return Fired{}, "micromodel_offline"
	case r.s.cfg.Classifier == nil:
		return Fired{}, "micromodel_not_configured"
	case r.budget().Err() != nil:
		return Fired{}, "budget_exhausted"
	}
	v, err := r.s.cfg.Classifier.Classify(r.budget(), mm.Model, mm.Question, r.text)
	if err != nil {
		switch {
		case r.budget().Err() != nil:
			return Fired{}, "budget_exhausted"
		case isMalformed(err):
			return Fired{}, "micromodel_malformed"
		}
		return Fired{}, "micromodel_error"
	}
	if !v.Apply || v.Confidence < mm.MinConfidence {
		return Fired{}, ""
	}
	conf := v.Confidence
	return Fired{Tier: 3, Reason: "micromodel:" + strconv.FormatFloat(conf, 'f', 3, 64), Confidence: &conf}, ""
}

// Governed is the Config.AdmitOnly of Governor.Admit: the provisions that
// carry fabric_governance, the only ones that lens may refuse.
func Governed(p Provision) bool { return p.FabricGovernance != nil }

func isMalformed(err error) bool {
	for e := err; e != nil; {
		if e == ErrMalformedVerdict {
			return true
		}
		u, ok := e.(interface{ Unwrap() error })
		if !ok {
			return false
		}
		e = u.Unwrap()
	}
	return false
}

// similarity is the best cosine of query against examples, embedding the
// examples once per embedder and caching them.
func (s *Service) similarity(ctx context.Context, e Embedder, query []float32, examples []string) (float64, error) {
	var missing []string
	vecs := make([][]float32, len(examples))
	for i, ex := range examples {
		if v, ok := s.examples.Load(e.Name() + "\x00" + ex); ok {
			vecs[i] = v.([]float32)
		} else {
			missing = append(missing, ex)
		}
	}
	if len(missing) > 0 {
		vs, err := e.Embed(ctx, missing)
		if err != nil {
			return 0, err
		}
		if len(vs) != len(missing) {
			return 0, fmt.Errorf("shim: embedder returned %d vectors for %d texts", len(vs), len(missing))
		}
		for i, ex := range missing {
			s.examples.Store(e.Name()+"\x00"+ex, vs[i])
		}
		for i, ex := range examples {
			if vecs[i] == nil {
				v, _ := s.examples.Load(e.Name() + "\x00" + ex)
				vecs[i], _ = v.([]float32)
			}
		}
	}
	best := 0.0
	for _, v := range vecs {
		if c := cosine(query, v); c > best {
			best = c
		}
	}
	return best, nil
}
