package store

import (
	"context"
	"database/sql"

	"github.com/caduceus-dev/caduceus/store/port"
)

// Port returns db as the store's port (port.DB): the statements and batches
// that D1 answers too, here on SQLite or Postgres. A statement runs as
// Exec and Query run it (on SQLite a write joins the group commit, a read
// takes the reader pool); a batch is one transaction (InTx). A unique or
// primary key violation is reported as port.ErrUnique.
func (db *DB) Port() port.DB { return portDB{db} }

type portDB struct{ db *DB }

// BatchesSideBySide implements port.SideBySide: Postgres runs batches side
// by side, SQLite one at a time on its one writer.
func (p portDB) BatchesSideBySide() bool { return p.db.dialect == Postgres }

func (p portDB) Query(ctx context.Context, query string, args ...any) ([]port.Row, error) {
	return PortRows(p.db.Query(ctx, query, args...))
}

// PortRows reads rows whole into the port's rows, each value as the driver
// scans it into an any, and closes them; err is the query's.
func PortRows(rows *sql.Rows, err error) ([]port.Row, error) {
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	cols, err := rows.Columns()
	if err != nil {
		return nil, err
	}
	var out []port.Row
	ptrs := make([]any, len(cols))
	for rows.Next() {
		r := make(port.Row, len(cols))
		for i := range r {
			ptrs[i] = &r[i]
		}
		if err := rows.Scan(ptrs...); err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return out, rows.Err()
}

func (p portDB) Exec(ctx context.Context, query string, args ...any) (int64, error) {
	n, err := RowsAffected(p.db.Exec(ctx, query, args...))
	return n, portError(err)
}

func (p portDB) Batch(ctx context.Context, stmts []port.Statement) error {
	return portError(p.db.InTx(ctx, func(tx *Tx) error {
		for _, st := range stmts {
			if _, err := tx.Exec(ctx, st.SQL, st.Args...); err != nil {
				return err
			}
		}
		return nil
	}))
}

// portError marks a unique violation as port.ErrUnique.
func portError(err error) error {
	if IsUniqueViolation(err) {
		return port.UniqueError(err)
	}
	return err
}
