package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/caduceus-dev/caduceus/contract"
)

// Revise is the HUX revision primitive: one conditional UPDATE that applies
// set only if the row matched by where is still at revision expected, and
// bumps the revision. The check and the write are one statement, so there is
// no read-then-write race between processes.
//
// set is a SQL SET list without the revision ("name = ?, status = ?"); where
// selects one row and must include the tenant ("tenant = ? AND id = ?").
// Arguments are setArgs then whereArgs. It returns the new revision, a
// not_found Error when no row matches where, and a conflict Error (code
// stale_revision) when the row is at another revision; in both cases nothing
// changed.
func Revise(ctx context.Context, q Querier, table, set string, setArgs []any, where string, whereArgs []any, expected contract.Revision) (contract.Revision, error) {
	query := "UPDATE " + table + " SET " + set + ", revision = revision + 1 WHERE " + where + " AND revision = ? RETURNING revision"
	args := make([]any, 0, len(setArgs)+len(whereArgs)+1)
	args = append(append(append(args, setArgs...), whereArgs...), int64(expected))
	var rev int64
	err := q.QueryRow(ctx, query, args...).Scan(&rev)
	if err == nil {
		return contract.Revision(rev), nil
	}
	if !errors.Is(err, sql.ErrNoRows) {
		return 0, fmt.Errorf("store: revise %s: %w", table, err)
	}
	var current int64
	err = q.QueryRow(ctx, "SELECT revision FROM "+table+" WHERE "+where, whereArgs...).Scan(&current)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, contract.NotFoundf("not_found", "%s: no such record", table)
	}
	if err != nil {
		return 0, fmt.Errorf("store: revise %s: %w", table, err)
	}
	return 0, &contract.Error{Kind: contract.KindConflict, Code: "stale_revision",
		Message: fmt.Sprintf("revision %d is stale: the record is at revision %d", expected, current)}
}
