package shim

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/caduceus-dev/caduceus/contract"
	"github.com/caduceus-dev/caduceus/shim/wire"
)

// markerOpen is how every shim begins; once_per_conversation scans for it.
const markerOpen = `<caduceus-shim provision="`

// Marker is the opening line of provision id's shim at version v.
func Marker(id string, v int64) string {
	return fmt.Sprintf(`%s%s" version="%d">`, markerOpen, id, v)
}

// hasMarker reports whether text already carries a shim of provision id.
func hasMarker(text, id string) bool {
	return strings.Contains(text, markerOpen+id+`"`)
}

// plan is what the actions decided for one request.
type plan struct {
	direct  *compiled // the provision that answers, if any
	shim    string    // the text to inject ("" for none)
	Shimmed []Shimmed
	Missing []string
	Skipped []Skipped
	marks   []*compiled // once_per_conversation provisions to mark on forward
}

// act turns fired provisions into a plan: the highest-priority
// respond_directly wins when the last turn is user text; otherwise every
// fired shim that is not already in the conversation renders its context.
// commit marks the ledger (the proxy); without it the ledger is only read.
func (s *Service) act(ctx context.Context, tenant contract.TenantSlot, req *wire.Request, conv string, ev *evaluation, commit bool) (plan, error) {
	var pl plan
	var format *outputFormat
	formatRead := false
	for _, c := range ev.fired {
		if c.p.Action != ActionRespondDirectly {
			continue
		}
		if !req.LastTurnIsUserText() {
			pl.Skipped = append(pl.Skipped, Skipped{c.p.ID, c.p.Version, "last_turn_not_user_text"})
			continue
		}
		if !formatRead {
			format, formatRead = requestedFormat(req), true
		}
		if !fitsFormat(format, c.p.Response.Text) {
			// The request asks for structured output this text is not.
			pl.Skipped = append(pl.Skipped, Skipped{c.p.ID, c.p.Version, skipFormatMismatch})
			continue
		}
		if pl.direct == nil {
			pl.direct = c
		} else {
			pl.Skipped = append(pl.Skipped, Skipped{c.p.ID, c.p.Version, "outranked"})
		}
	}
	if pl.direct != nil {
		for _, c := range ev.fired {
			if c.p.Action == ActionShim {
				pl.Skipped = append(pl.Skipped, Skipped{c.p.ID, c.p.Version, "answered_directly"})
			}
		}
		return pl, nil
	}
	var b strings.Builder
	all := ""
	for _, c := range ev.fired {
		if c.p.Action != ActionShim {
			continue
		}
		if c.p.OncePerConversation {
			if all == "" {
				all = req.AllText()
			}
			if hasMarker(all, c.p.ID) {
				pl.Skipped = append(pl.Skipped, Skipped{c.p.ID, c.p.Version, "once_per_conversation:marker"})
				continue
			}
			var seen bool
			var err error
			if commit {
				var first bool
				first, err = s.store.MarkShimmed(ctx, tenant, conv, c.p.ID, c.p.Version, s.now())
				seen = !first
			} else {
				seen, err = s.store.Shimmed(ctx, tenant, conv, c.p.ID)
			}
			if err != nil {
				return plan{}, err
			}
			if seen {
				pl.Skipped = append(pl.Skipped, Skipped{c.p.ID, c.p.Version, "once_per_conversation:ledger"})
				continue
			}
		}
		text, shimmed, missing, err := s.render(ctx, tenant, c)
		if err != nil {
			return plan{}, err
		}
		pl.Shimmed = append(pl.Shimmed, shimmed...)
		pl.Missing = append(pl.Missing, missing...)
		if text == "" {
			pl.Skipped = append(pl.Skipped, Skipped{c.p.ID, c.p.Version, "no_context"})
			continue
		}
		if b.Len() > 0 {
			b.WriteString("\n\n")
		}
		b.WriteString(text)
	}
	pl.shim = b.String()
	return pl, nil
}

// render is provision c's context: each ref's entry (the tenant's, else the
// builtin), bounded by the entry's and the provision's max_chars (in
// characters), wrapped in the provision's marker.
func (s *Service) render(ctx context.Context, tenant contract.TenantSlot, c *compiled) (string, []Shimmed, []string, error) {
	budget := c.p.MaxChars
	if budget <= 0 {
		budget = defaultMaxChars
	}
	var shimmed []Shimmed
	var missing []string
	var body strings.Builder
	for _, ref := range c.p.ContextRefs {
		e, err := s.contextEntry(ctx, tenant, ref)
		if c.builtin && err == nil && !e.SystemBuiltin {
			// a builtin provision reads builtin context only, never a tenant's
			e, err = s.store.GetContext(ctx, s.cfg.BuiltinTenant, ref)
		}
		if err != nil {
			if isNotFound(err) {
				missing = append(missing, ref)
				continue
			}
			return "", nil, nil, err
		}
		if e.Status == "disabled" {
			missing = append(missing, ref)
			continue
		}
		text := e.Body
		limit := budget
		if e.MaxChars > 0 && e.MaxChars < limit {
			limit = e.MaxChars
		}
		truncated := false
		if n := utf8.RuneCountInString(text); n > limit {
			text = truncateRunes(text, limit)
			truncated = true
		}
		sum := e.SHA256
		if sum == "" {
			h := sha256.Sum256([]byte(e.Body))
			sum = "sha256:" + hex.EncodeToString(h[:])
		}
		chars := utf8.RuneCountInString(text)
		shimmed = append(shimmed, Shimmed{Provision: c.p.ID, Ref: ref, Version: e.Version, SHA256: sum, Chars: chars, Truncated: truncated})
		if chars == 0 {
			continue
		}
		budget -= chars
		title := e.Title
		if title == "" {
			title = ref
		}
		fmt.Fprintf(&body, "## %s [%s]\n%s\n", title, ref, text)
	}
	if body.Len() == 0 {
		return "", shimmed, missing, nil
	}
	return Marker(c.p.ID, c.p.Version) + "\n" + body.String() + "</caduceus-shim>", shimmed, missing, nil
}
