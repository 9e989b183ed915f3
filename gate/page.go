package gate

import (
	"context"

	"github.com/caduceus-dev/caduceus/contract"
)

// Page is a console page a gate hands the operator console (package
// console): GET /console/<Name>,
// a tab titled Title between Conversations and Keys. The console knows no
// gate; each gate that has something to show renders its page through
// this (shimgate's receipts, tradergate's decisions, executorgate's ticks,
// relaygate's relay).
type Page struct {
	// Name is the page's path under /console/ and its tab's name.
	Name  string
	Title string
	// Template is the page's html/template text: it defines "content",
	// which the layout places; the console's template functions (when,
	// short, tone, convURL, recURL, ...) are at hand.
	Template string
	// Rows are the detail keys of audit payloads whose values are ids of
	// this page's rows ("receipt_id"): the console links them to the row
	// (/console/<Name>#<id>).
	Rows []string
	// Load reads the page's data for the session v.
	Load func(ctx context.Context, v View) (any, error)
}

// View is what a session sees, as a Page's Load reads for it.
type View struct {
	// Tenant is the one tenant to read: the session's, or an all-tenants
	// session's filter; "" for every tenant.
	Tenant contract.TenantSlot
	// Tenants lists the tenants the session sees (one, or every tenant
	// with audit records or keys).
	Tenants func() ([]contract.TenantSlot, error)
	// Sees reports whether the session may see tenant t's records.
	Sees func(t contract.TenantSlot) bool
}

// ListLimit bounds every list page: the console shows what is recent.
const ListLimit = 100
