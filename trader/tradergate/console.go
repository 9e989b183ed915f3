package tradergate

import (
	"cmp"
	"context"
	_ "embed"
	"slices"

	"github.com/caduceus-dev/caduceus/contract"
	"github.com/caduceus-dev/caduceus/gate"
	"github.com/caduceus-dev/caduceus/trader"
)

//go:embed console_decisions.html
var decisionsTemplate string

// attempt is a decision attempt with its tenant, as the page lists it.
type attempt struct {
	trader.Attempt
	Tenant contract.TenantSlot
}

// DecisionsPage is the console's decisions page over svc: the most recent
// decision attempts of the tenants the session sees.
func DecisionsPage(svc *trader.Service) gate.Page {
	return gate.Page{Name: "decisions", Title: "Decisions", Template: decisionsTemplate, Rows: []string{"attempt"},
		Load: func(ctx context.Context, v gate.View) (any, error) {
			ts, err := v.Tenants()
			if err != nil {
				return nil, err
			}
			var all []attempt
			for _, t := range ts {
				as, err := svc.History(ctx, t, "", gate.ListLimit)
				if err != nil {
					return nil, err
				}
				for _, a := range as {
					all = append(all, attempt{a, t})
				}
			}
			slices.SortFunc(all, func(a, b attempt) int { return cmp.Compare(b.ID, a.ID) })
			return all[:min(len(all), gate.ListLimit)], nil
		}}
}

// Pages implements gate.Paged.
func (g *Gate) Pages() []gate.Page { return []gate.Page{DecisionsPage(g.svc)} }
