package shimgate

import (
	"cmp"
	"context"
	_ "embed"
	"slices"

	"github.com/caduceus-dev/caduceus/contract"
	"github.com/caduceus-dev/caduceus/gate"
	"github.com/caduceus-dev/caduceus/shim"
)

//go:embed console_receipts.html
var receiptsTemplate string

// ReceiptLister lists a tenant's receipts, newest first (shim.Store has
// it).
type ReceiptLister interface {
	ListReceipts(ctx context.Context, tenant contract.TenantSlot, limit int, before string) ([]shim.Receipt, error)
}

// ReceiptsPage is the console's receipts page over r: the most recent
// receipts of the tenants the session sees.
func ReceiptsPage(r ReceiptLister) gate.Page {
	return gate.Page{Name: "receipts", Title: "Receipts", Template: receiptsTemplate, Rows: []string{"receipt", "receipt_id"},
		Load: func(ctx context.Context, v gate.View) (any, error) {
			ts, err := v.Tenants()
			if err != nil {
				return nil, err
			}
			var all []shim.Receipt
			for _, t := range ts {
				rs, err := r.ListReceipts(ctx, t, gate.ListLimit, "")
				if err != nil {
					return nil, err
				}
				all = append(all, rs...)
			}
			slices.SortFunc(all, func(a, b shim.Receipt) int { return cmp.Compare(b.ID, a.ID) })
			return all[:min(len(all), gate.ListLimit)], nil
		}}
}

// Pages implements gate.Paged: the receipts page, when the gate was
// given its store (Config.Receipts).
func (g *Gate) Pages() []gate.Page {
	if g.cfg.Receipts == nil {
		return nil
	}
	return []gate.Page{ReceiptsPage(g.cfg.Receipts)}
}
