package store

// Statement is SQL built a clause at a time, with its arguments in order:
// a read whose filters apply only when given.
type Statement struct {
	SQL  string
	Args []any
}

// Add appends clause and the arguments of its placeholders.
func (s *Statement) Add(clause string, args ...any) {
	s.SQL += clause
	s.Args = append(s.Args, args...)
}

// AndEq appends " AND column = ?" for value, or nothing when value is
// empty (no filter on column).
func (s *Statement) AndEq(column, value string) {
	if value != "" {
		s.Add(" AND "+column+" = ?", value)
	}
}
