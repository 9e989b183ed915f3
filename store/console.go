package store

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	"github.com/caduceus-dev/caduceus/contract"
)

// Console is the operator console's state: its signing secret and the
// ledger of redeemed login tokens.
type Console struct{ db *DB }

// Console returns the store's console state.
func (db *DB) Console() *Console { return &Console{db: db} }

// Secret returns the console's 32-byte signing secret, creating it on first
// use. Every process on the database reads the same one: the first writer
// wins (INSERT ... ON CONFLICT DO NOTHING) and everyone reads it back.
func (c *Console) Secret(ctx context.Context) ([]byte, error) {
	var s string
	err := c.db.QueryRow(ctx, `SELECT secret FROM console_secret WHERE id = 1`).Scan(&s)
	if errors.Is(err, sql.ErrNoRows) {
		var b [32]byte
		rand.Read(b[:])
		if _, err := c.db.Exec(ctx, `INSERT INTO console_secret (id, secret, created_at) VALUES (1, ?, ?) ON CONFLICT (id) DO NOTHING`,
			hex.EncodeToString(b[:]), Micros(c.db.Now())); err != nil {
			return nil, fmt.Errorf("store: console secret: %w", err)
		}
		err = c.db.QueryRow(ctx, `SELECT secret FROM console_secret WHERE id = 1`).Scan(&s)
	}
	if err != nil {
		return nil, fmt.Errorf("store: console secret: %w", err)
	}
	b, err := hex.DecodeString(s)
	if err != nil || len(b) != 32 {
		return nil, fmt.Errorf("store: console secret: stored secret is not 32 hex-encoded bytes")
	}
	return b, nil
}

// RedeemLogin records the use of a login token's nonce and reports whether
// this was its first use. One INSERT keyed by the nonce: of two processes
// redeeming one token at once, exactly one gets true. Nonces of tokens
// that have expired are deleted on the way (their tokens are refused on
// their expiry anyway).
func (c *Console) RedeemLogin(ctx context.Context, nonce string, tenant contract.TenantSlot, expires time.Time) (bool, error) {
	now := c.db.Now()
	if _, err := c.db.Exec(ctx, `DELETE FROM console_logins WHERE expires_at < ?`, Micros(now)); err != nil {
		return false, fmt.Errorf("store: console login: %w", err)
	}
	_, err := c.db.Exec(ctx, `INSERT INTO console_logins (nonce, tenant, used_at, expires_at) VALUES (?, ?, ?, ?)`,
		nonce, string(tenant), Micros(now), Micros(expires))
	if IsUniqueViolation(err) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("store: console login: %w", err)
	}
	return true, nil
}
