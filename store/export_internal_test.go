package store

// WholePassFailures is how many Postgres group-commit first passes (with
// ExecLater's statements kept) failed and ran again.
func (db *DB) WholePassFailures() int64 {
	if db.batch == nil {
		return 0
	}
	return db.batch.wholeFails.Load()
}
