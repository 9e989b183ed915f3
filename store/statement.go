package store

// statement is SQL built a clause at a time, with its arguments in order:
// a read whose filters apply only when given.
type statement struct {
	sql  string
	args []any
}

// add appends clause and the arguments of its placeholders.
func (s *statement) add(clause string, args ...any) {
	s.sql += clause
	s.args = append(s.args, args...)
}

// andEq appends " AND column = ?" for value, or nothing when value is
// empty (no filter on column).
func (s *statement) andEq(column, value string) {
	if value != "" {
		s.add(" AND "+column+" = ?", value)
	}
}
