package ledger

import (
	"context"
	"fmt"
	"time"

	"github.com/caduceus-dev/caduceus/shim/upstream"
	"github.com/caduceus-dev/caduceus/store"
)

var _ upstream.Rates = (*Ledger)(nil)

// Admit implements upstream.Rates: in one transaction of its own, each
// window's row is incremented (made at 1 request when the minute has
// none) and its counts read back; a window that the request passes rolls
// the transaction back, so a refused request counts nowhere. On Postgres
// the row stays locked until the commit, so processes admitting at once
// take turns and never admit past a limit. Windows of minutes older than
// an hour are swept by the stale sweep (ReleaseStale).
func (s *Ledger) Admit(ctx context.Context, ws []upstream.RateWindow) ([]upstream.RateWindow, *upstream.RateWindow, error) {
	out := make([]upstream.RateWindow, len(ws))
	var refused *upstream.RateWindow
	err := s.db.InSeparateTx(ctx, func(tx *store.Tx) error {
		copy(out, ws)
		refused = nil
		for i := range out {
			w := &out[i]
			if err := tx.QueryRow(ctx, `INSERT INTO shim_rates (scope, minute, requests, tokens) VALUES (?, ?, 1, 0)
				ON CONFLICT (scope, minute) DO UPDATE SET requests = shim_rates.requests + 1 RETURNING requests, tokens`,
				w.Scope, w.Minute).Scan(&w.Requests, &w.Tokens); err != nil {
				return fmt.Errorf("store: rate window: %w", err)
			}
			if (w.RPM > 0 && w.Requests > w.RPM) || (w.TPM > 0 && w.Tokens >= w.TPM) {
				r := *w
				r.Requests-- // as it stood: this request is not counted
				refused = &r
				return upstream.ErrRateLimited
			}
		}
		return nil
	})
	if refused != nil {
		return nil, refused, upstream.ErrRateLimited
	}
	if err != nil {
		return nil, nil, err
	}
	return out, nil, nil
}

// Used implements upstream.Rates.
func (s *Ledger) Used(ctx context.Context, ws []upstream.RateWindow, tokens int64) error {
	if tokens <= 0 || len(ws) == 0 {
		return nil
	}
	return s.db.InSeparateTx(ctx, func(tx *store.Tx) error {
		for _, w := range ws {
			if _, err := tx.Exec(ctx, `UPDATE shim_rates SET tokens = tokens + ? WHERE scope = ? AND minute = ?`, tokens, w.Scope, w.Minute); err != nil {
				return fmt.Errorf("store: rate tokens: %w", err)
			}
		}
		return nil
	})
}

// sweepRates deletes the windows of minutes before cutoff.
func (s *Ledger) sweepRates(ctx context.Context, cutoff time.Time) error {
	_, err := s.db.Exec(ctx, `DELETE FROM shim_rates WHERE minute < ?`, cutoff.Unix()/60)
	return err
}
