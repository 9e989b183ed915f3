// Package edge is Caduceus at the edge: the shim gate served by the same
// server and shim packages as `caduceus serve`, on the store's port
// (store/port) that a Cloudflare Worker answers with D1 (deploy/cloudflare)
// and the tests answer with SQLite. It holds no rule of its own: triggers,
// shimming, direct answers, receipts, CAS versions, tenant isolation and
// the public routes are the shim's and the server's; the shim's stores are
// shim/shimstore's, written on the port for all three databases.
package edge

import (
	"context"
	"time"

	"github.com/caduceus-dev/caduceus/store/port"
)

// DB, Statement and Row are the store's port (store/port).
type (
	DB        = port.DB
	Statement = port.Statement
	Row       = port.Row
)

func micros(t time.Time) int64 { return port.Micros(t) }

func fromMicros(us int64) time.Time { return port.FromMicros(us) }

func one(ctx context.Context, db DB, query string, args ...any) (Row, bool, error) {
	return port.One(ctx, db, query, args...)
}
