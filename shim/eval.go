package shim

import (
	"context"
	"fmt"
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
	var ev evaluation
	text := req.LastUserText()
	sig := rs.signals(text, req.Used, req.AllPaths)
	// the budget bounds tiers 2 and 3 from the start of the evaluation; its
	// timer is made only when a rule reaches one of them
	deadline := time.Now().Add(s.cfg.Budget)
	var budget context.Context
	cancel := context.CancelFunc(func() {})
	defer func() { cancel() }()
	getBudget := func() context.Context {
		if budget == nil {
			budget, cancel = context.WithDeadline(ctx, deadline)
		}
		return budget
	}
	var query []float32
	queryErr := ""
	embedder := s.embedder
	if mode == modeOffline && embedder.Remote() {
		embedder = Local{}
	}
	// Only the candidate rules run their triggers: a simple rule no signal
	// woke cannot fire. A quiet rule (simple, no match clause) that needs
	// no admission call is not even visited unless woken: it is counted as
	// evaluated up front. Every other rule is still offered to the
	// admission hook, whose refusals the receipt lists.
	admit := s.cfg.Admit
	visit := rs.candidates(sig)
	if s.fullScan {
		for i := range visit {
			visit[i] = ^uint64(0)
		}
	} else if admit == nil {
		ev.Evaluated = rs.quiet
	} else {
		ev.Evaluated = rs.quietFree
	}
	for i, c := range rs.rules {
		woken := visit[i/64]&(1<<(i%64)) != 0
		counted := !s.fullScan && c.quiet && (admit == nil || c.noAdmit)
		if !woken && counted {
			continue
		}
		if !c.applies(caller, req) {
			continue
		}
		if admit != nil && !c.noAdmit {
			if ok, why := admit(ctx, caller, c.p); !ok {
				ev.Skipped = append(ev.Skipped, Skipped{c.p.ID, c.p.Version, "not_admitted:" + why})
				continue
			}
		}
		if !counted {
			ev.Evaluated++
		}
		if !woken {
			continue
		}
		if c.vetoed(sig) {
			ev.Skipped = append(ev.Skipped, Skipped{c.p.ID, c.p.Version, "keyword_none"})
			continue
		}
		all := c.p.Triggers.Mode == "all"
		var fired *Fired
		hit1, why1 := false, ""
		if c.hasT1 {
			hit1, why1 = c.tier1(sig, rs.words)
			if hit1 && !all {
				fired = &Fired{Tier: 1, Reason: why1}
			}
			if !hit1 && all {
				continue
			}
		}
		if fired == nil && c.hasT2 {
			if getBudget().Err() != nil {
				ev.Skipped = append(ev.Skipped, Skipped{c.p.ID, c.p.Version, "budget_exhausted"})
				continue
			}
			if query == nil && queryErr == "" {
				vs, err := embedder.Embed(getBudget(), []string{text})
				if err != nil || len(vs) != 1 {
					queryErr = fmt.Sprint("embedder_error: ", err)
				} else {
					query = vs[0]
				}
			}
			if queryErr != "" {
				ev.Skipped = append(ev.Skipped, Skipped{c.p.ID, c.p.Version, queryErr})
				continue
			}
			score, err := s.similarity(getBudget(), embedder, query, c.p.Triggers.Semantic.Examples)
			if err != nil {
				ev.Skipped = append(ev.Skipped, Skipped{c.p.ID, c.p.Version, "embedder_error"})
				continue
			}
			th := c.p.Triggers.Semantic.Threshold
			if th == 0 {
				th = defaultThreshold
			}
			hit := score >= th
			if !hit && all {
				continue
			}
			if hit && !all {
				conf := score
				fired = &Fired{Tier: 2, Reason: "semantic:" + strconv.FormatFloat(score, 'f', 3, 64), Confidence: &conf}
			}
		}
		if fired == nil && c.hasT3 {
			mm := c.p.Triggers.Micromodel
			switch {
			case mode == modeOffline:
				ev.Skipped = append(ev.Skipped, Skipped{c.p.ID, c.p.Version, "micromodel_offline"})
				continue
			case isContributorModel(mm.Model):
				ev.Skipped = append(ev.Skipped, Skipped{c.p.ID, c.p.Version, "micromodel_contributor_refused"})
				continue
			case s.cfg.Classifier == nil:
				ev.Skipped = append(ev.Skipped, Skipped{c.p.ID, c.p.Version, "micromodel_not_configured"})
				continue
			case getBudget().Err() != nil:
				ev.Skipped = append(ev.Skipped, Skipped{c.p.ID, c.p.Version, "budget_exhausted"})
				continue
			}
			v, err := s.cfg.Classifier.Classify(getBudget(), mm.Model, mm.Question, text)
			if err != nil {
				reason := "micromodel_error"
				if getBudget().Err() != nil {
					reason = "budget_exhausted"
				} else if isMalformed(err) {
					reason = "micromodel_malformed"
				}
				ev.Skipped = append(ev.Skipped, Skipped{c.p.ID, c.p.Version, reason})
				continue
			}
			if !v.Apply || v.Confidence < mm.MinConfidence {
				continue
			}
			conf := v.Confidence
			fired = &Fired{Tier: 3, Reason: "micromodel:" + strconv.FormatFloat(conf, 'f', 3, 64), Confidence: &conf}
		}
		if fired == nil && all {
			// every configured tier hit; report the first
			fired = &Fired{Tier: 1, Reason: why1}
			if !c.hasT1 {
				fired = &Fired{Tier: 2, Reason: "semantic"}
			}
		}
		if fired == nil {
			continue
		}
		fired.ID, fired.Version, fired.Action, fired.Builtin = c.p.ID, c.p.Version, c.p.Action, c.builtin
		ev.Fired = append(ev.Fired, *fired)
		ev.fired = append(ev.fired, c)
	}
	return ev
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
