package trail

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/caduceus-dev/caduceus/audit"
)

// Event kinds.
const (
	KindInbound   = "inbound_message" // relay: a platform message delivered to (or buffered for) a gateway
	KindOutbound  = "outbound_reply"  // relay: a gateway's action sent out to the platform
	KindInterrupt = "interrupt"       // relay: a stop for the session
	KindLLMTurn   = "llm_turn"        // shim: one proxied LLM request
	KindDecision  = "decision"        // trader: one control decision
	KindTick      = "tick"            // executor: one tick
	KindRequest   = "request"         // any other recorded API request of the conversation
)

// The payloads each gate writes, as far as a trail reads them. They mirror
// relay/connector's delivery, shim.Receipt, trader.Attempt and
// executor.TickRecord; the end-to-end test reads a trail of every one.
type (
	relayPayload struct {
		Direction     string `json:"direction"`
		Platform      string `json:"platform"`
		Bot           string `json:"bot"`
		ChatID        string `json:"chat_id"`
		MessageID     string `json:"message_id"`
		BufferID      string `json:"buffer_id"`
		Op            string `json:"op"`
		Kind          string `json:"kind"`
		Chunks        int    `json:"chunks"`
		ContentSHA256 string `json:"content_sha256"`
		Gateway       string `json:"gateway"`
		Conn          string `json:"conn"`
		Success       bool   `json:"success"`
		Error         string `json:"error"`
	}
	shimFired struct {
		ID      string `json:"id"`
		Version int64  `json:"version"`
		Action  string `json:"action"`
		Tier    int    `json:"tier"`
		Reason  string `json:"reason"`
		Builtin bool   `json:"builtin,omitempty"`
	}
	shimPayload struct {
		ID       string `json:"id"`
		Protocol string `json:"protocol"`
		Model    string `json:"model"`
		Stream   bool   `json:"stream"`
		Decision string `json:"decision"`
		Refusal  *struct {
			Code    string `json:"code"`
			Message string `json:"message"`
		} `json:"refusal"`
		Evaluated int         `json:"evaluated"`
		Fired     []shimFired `json:"fired"`
		Shimmed   []struct {
			Provision string `json:"provision"`
			Ref       string `json:"ref"`
			Chars     int    `json:"chars"`
		} `json:"shimmed"`
		Upstream       string     `json:"upstream"`
		UpstreamStatus int        `json:"upstream_status"`
		OverheadMicros int64      `json:"overhead_us"`
		Spend          *shimSpend `json:"spend"`
	}
	// shimSpend is the gateway's account of an LLM turn (shim.Spend).
	shimSpend struct {
		Plan     string `json:"plan,omitempty"`
		Attempts []struct {
			Route    string `json:"route"`
			Model    string `json:"model"`
			Outcome  string `json:"outcome"`
			Status   int    `json:"status,omitempty"`
			Reserved int64  `json:"reserved_microdollars"`
			Settled  int64  `json:"settled_microdollars"`
		} `json:"attempts"`
		Reserved int64 `json:"reserved_microdollars"`
		Settled  int64 `json:"settled_microdollars"`
	}
	traderIssue struct {
		Code    string `json:"code"`
		Message string `json:"message"`
		Field   string `json:"field,omitempty"`
	}
	traderPayload struct {
		ID         string `json:"id"`
		DecisionID string `json:"decision_id"`
		ConcernID  string `json:"concern_id"`
		Action     string `json:"action"`
		Status     string `json:"status"`
		Replay     bool   `json:"replay"`
		DryRun     bool   `json:"dry_run"`
		Override   bool   `json:"override"`
		Response   struct {
			OK             bool            `json:"ok"`
			Status         string          `json:"status"`
			FromStrategyID string          `json:"from_strategy_id"`
			ToStrategyID   string          `json:"to_strategy_id"`
			RiskMode       string          `json:"risk_mode"`
			Validation     map[string]bool `json:"validation"`
			Warnings       []traderIssue   `json:"warnings"`
			Errors         []traderIssue   `json:"errors"`
			Result         struct {
				ModeChange string `json:"mode_change"`
				Reconciled bool   `json:"reconciled"`
			} `json:"result"`
		} `json:"response"`
	}
	tickAction struct {
		IntentIndex int      `json:"intent_index"`
		Symbol      string   `json:"symbol,omitempty"`
		Side        string   `json:"side"`
		Status      string   `json:"status"`
		Reason      string   `json:"reason,omitempty"`
		OrderID     *string  `json:"order_id"`
		Qty         float64  `json:"qty,omitempty"`
		NotionalUSD float64  `json:"notional_usd,omitempty"`
		OrderState  string   `json:"order_state,omitempty"`
		Notes       []string `json:"notes,omitempty"`
	}
	tickPayload struct {
		TickID   string `json:"tick_id"`
		Strategy string `json:"strategy"`
		Context  string `json:"context"`
		Profile  string `json:"profile"`
		Envelope struct {
			Aborted               *string      `json:"aborted"`
			CircuitBreakerTripped bool         `json:"circuit_breaker_tripped"`
			Actions               []tickAction `json:"actions"`
			Mode                  string       `json:"mode"`
			Notes                 []string     `json:"notes"`
			Replay                bool         `json:"replay"`
		} `json:"envelope"`
	}
)

// describe fills ev's kind, summary and detail from rec's payload, by the
// gate that wrote it.
func describe(ev *Event, rec audit.Record) {
	switch rec.Outcome.Action {
	case "relay.deliver", "relay.buffer", "relay.outbound", "relay.interrupt":
		describeRelay(ev, rec)
	case "shim.proxy":
		describeAs(ev, rec, KindLLMTurn, describeShim)
	case "trader.apply":
		describeAs(ev, rec, KindDecision, describeDecision)
	case "executor.tick":
		describeAs(ev, rec, KindTick, describeTick)
	default:
		ev.Kind = KindRequest
	}
}

// describeAs gives ev its kind and, when rec's payload decodes as a P, the
// summary and detail fill makes of it.
func describeAs[P any](ev *Event, rec audit.Record, kind string, fill func(*Event, *P)) {
	ev.Kind = kind
	var p P
	if decode(rec, &p) {
		fill(ev, &p)
	}
}

func describeRelay(ev *Event, rec audit.Record) {
	var p relayPayload
	decode(rec, &p)
	d := map[string]any{}
	put := func(k, v string) {
		if v != "" {
			d[k] = v
		}
	}
	put("platform", p.Platform)
	put("bot", p.Bot)
	put("chat_id", p.ChatID)
	put("message_id", p.MessageID)
	put("content_sha256", p.ContentSHA256)
	put("gateway", p.Gateway)
	put("conn", p.Conn)
	put("error", p.Error)
	d["success"] = p.Success
	switch rec.Outcome.Action {
	case "relay.deliver":
		ev.Kind = KindInbound
		ev.Summary = fmt.Sprintf("%s message %s in chat %s delivered to gateway connection %s", p.Platform, p.MessageID, p.ChatID, p.Conn)
		if !p.Success && p.Error != "" {
			// Refused before delivery: the platform's guardrails blocked it.
			ev.Summary = fmt.Sprintf("%s message %s in chat %s not delivered: %s", p.Platform, p.MessageID, p.ChatID, p.Error)
		}
	case "relay.buffer":
		ev.Kind = KindInbound
		put("buffer_id", p.BufferID)
		ev.Summary = fmt.Sprintf("%s message %s in chat %s buffered (no gateway connected)", p.Platform, p.MessageID, p.ChatID)
		if !p.Success {
			ev.Summary = fmt.Sprintf("%s message %s in chat %s dropped: %s", p.Platform, p.MessageID, p.ChatID, p.Error)
		}
	case "relay.outbound":
		ev.Kind = KindOutbound
		put("op", p.Op)
		put("kind", p.Kind)
		if p.Chunks != 0 {
			d["chunks"] = p.Chunks
		}
		result := "sent"
		if p.MessageID != "" {
			result = "sent as message " + p.MessageID
		}
		if !p.Success {
			result = "failed: " + p.Error
		}
		ev.Summary = fmt.Sprintf("%s to %s chat %s %s", orDash(p.Op), p.Platform, p.ChatID, result)
	case "relay.interrupt":
		ev.Kind = KindInterrupt
		put("op", p.Op)
		ev.Summary = "interrupt (" + strings.TrimPrefix(p.Op, "interrupt:") + ")"
	}
	ev.Detail = d
}

func describeShim(ev *Event, p *shimPayload) {
	fired := make([]string, 0, len(p.Fired))
	for _, f := range p.Fired {
		fired = append(fired, fmt.Sprintf("%s v%d (%s, tier %d, %s)", f.ID, f.Version, f.Action, f.Tier, f.Reason))
	}
	d := map[string]any{
		"receipt":     p.ID,
		"protocol":    p.Protocol,
		"model":       p.Model,
		"decision":    p.Decision,
		"evaluated":   p.Evaluated,
		"fired":       p.Fired,
		"overhead_us": p.OverheadMicros,
	}
	if p.Fired == nil {
		d["fired"] = []shimFired{}
	}
	if len(p.Shimmed) > 0 {
		d["shimmed"] = p.Shimmed
	}
	if p.Upstream != "" {
		d["upstream"], d["upstream_status"] = p.Upstream, p.UpstreamStatus
	}
	if p.Refusal != nil {
		d["refusal"] = p.Refusal
	}
	if p.Spend != nil {
		d["spend"] = p.Spend
	}
	ev.Detail = d
	s := fmt.Sprintf("%s %s: %s", p.Protocol, p.Model, p.Decision)
	if p.UpstreamStatus != 0 {
		s += fmt.Sprintf(" (upstream %d)", p.UpstreamStatus)
	}
	if len(fired) == 0 {
		s += "; no rule fired"
	} else {
		s += "; fired " + strings.Join(fired, ", ")
	}
	if p.Spend != nil {
		s += fmt.Sprintf("; spent $%.6f", float64(p.Spend.Settled)/1e6)
		if len(p.Spend.Attempts) > 1 {
			s += fmt.Sprintf(" over %d attempts", len(p.Spend.Attempts))
		}
	}
	if p.Refusal != nil {
		s += "; refused " + p.Refusal.Code
	}
	ev.Summary = s
}

func describeDecision(ev *Event, p *traderPayload) {
	r := p.Response
	d := map[string]any{
		"attempt":     p.ID,
		"decision_id": p.DecisionID,
		"concern_id":  p.ConcernID,
		"action":      p.Action,
		"status":      p.Status,
		"dry_run":     p.DryRun,
		"override":    p.Override,
		"validation":  r.Validation,
		"mode_change": r.Result.ModeChange,
	}
	if p.Replay {
		d["replay"] = true
	}
	if len(r.Errors) > 0 {
		d["errors"] = r.Errors
	}
	if len(r.Warnings) > 0 {
		d["warnings"] = r.Warnings
	}
	if r.FromStrategyID != "" || r.ToStrategyID != "" {
		d["from_strategy_id"], d["to_strategy_id"] = r.FromStrategyID, r.ToStrategyID
	}
	ev.Detail = d
	s := fmt.Sprintf("%s %s on %s: %s", orDash(p.Action), p.DecisionID, p.ConcernID, p.Status)
	var failed []string
	for _, k := range sortedKeys(r.Validation) {
		if !r.Validation[k] {
			failed = append(failed, k)
		}
	}
	if len(r.Validation) > 0 {
		if len(failed) == 0 {
			s += "; validation passed"
		} else {
			s += "; validation failed: " + strings.Join(failed, ", ")
		}
	}
	for _, e := range r.Errors {
		s += "; " + e.Code
	}
	ev.Summary = s
}

func describeTick(ev *Event, p *tickPayload) {
	e := p.Envelope
	actions := e.Actions
	if actions == nil {
		actions = []tickAction{}
	}
	d := map[string]any{
		"tick_id":  p.TickID,
		"strategy": p.Strategy,
		"context":  p.Context,
		"profile":  p.Profile,
		"intents":  actions,
	}
	if e.Aborted != nil {
		d["aborted"] = *e.Aborted
	}
	if e.Mode != "" {
		d["mode"] = e.Mode
	}
	if len(e.Notes) > 0 {
		d["notes"] = e.Notes
	}
	if e.Replay {
		d["replay"] = true
	}
	ev.Detail = d
	s := fmt.Sprintf("tick %s of %s (%s)", p.TickID, p.Strategy, p.Context)
	if e.Aborted != nil {
		s += ": aborted " + *e.Aborted
	} else {
		parts := make([]string, 0, len(actions))
		for _, a := range actions {
			part := fmt.Sprintf("#%d %s %s %s", a.IntentIndex, a.Side, orDash(a.Symbol), a.Status)
			if a.Reason != "" {
				part += " (" + a.Reason + ")"
			}
			if a.OrderID != nil {
				part += " order " + *a.OrderID
			}
			parts = append(parts, part)
		}
		if len(parts) == 0 {
			s += ": no intents"
		} else {
			s += ": " + strings.Join(parts, "; ")
		}
	}
	ev.Summary = s
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func sortedKeys(m map[string]bool) []string { return slices.Sorted(maps.Keys(m)) }
