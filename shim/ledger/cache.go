package ledger

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/caduceus-dev/caduceus/shim/upstream"
	"github.com/caduceus-dev/caduceus/store"
)

var _ upstream.Cache = (*Ledger)(nil)

// CacheGet implements upstream.Cache.
func (s *Ledger) CacheGet(ctx context.Context, scope, key string, now time.Time) (upstream.CachedAnswer, bool, error) {
	var a upstream.CachedAnswer
	var body string
	var final sql.NullString
	err := s.db.QueryRow(ctx, `SELECT receipt, status, content_type, body, final FROM shim_cache WHERE scope = ? AND key = ? AND expires_at > ?`,
		scope, key, store.Micros(now)).Scan(&a.Receipt, &a.Status, &a.ContentType, &body, &final)
	if errors.Is(err, sql.ErrNoRows) {
		return a, false, nil
	}
	if err != nil {
		return a, false, fmt.Errorf("store: cache: %w", err)
	}
	a.Body = []byte(body)
	if final.Valid {
		a.Final = []byte(final.String)
	}
	return a, true, nil
}

// CachePut implements upstream.Cache: one upsert.
func (s *Ledger) CachePut(ctx context.Context, scope, key string, a upstream.CachedAnswer, expires time.Time) error {
	var final sql.NullString
	if a.Final != nil {
		final = sql.NullString{String: string(a.Final), Valid: true}
	}
	_, err := s.db.Exec(ctx, `INSERT INTO shim_cache (scope, key, receipt, status, content_type, body, final, expires_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)
		ON CONFLICT (scope, key) DO UPDATE SET receipt = excluded.receipt, status = excluded.status, content_type = excluded.content_type,
		body = excluded.body, final = excluded.final, expires_at = excluded.expires_at`,
		scope, key, a.Receipt, a.Status, a.ContentType, string(a.Body), final, store.Micros(expires))
	if err != nil {
		return fmt.Errorf("store: cache put: %w", err)
	}
	return nil
}

// sweepCache deletes the answers expired before now.
func (s *Ledger) sweepCache(ctx context.Context, now time.Time) error {
	_, err := s.db.Exec(ctx, `DELETE FROM shim_cache WHERE expires_at <= ?`, store.Micros(now))
	return err
}
