package store

import (
	"strings"
	"testing"
)

func TestParseSQLite(t *testing.T) {
	for _, c := range []struct {
		dsn  string
		want sqliteOptions
	}{
		{"", sqliteOptions{}},
		{"sqlite:", sqliteOptions{}},
		{"sqlite:/srv/c.db", sqliteOptions{path: "/srv/c.db"}},
		{"file:/srv/c.db", sqliteOptions{path: "/srv/c.db"}},
		{"sqlite:/srv/c.db?synchronous=full", sqliteOptions{path: "/srv/c.db", full: true}},
		{"sqlite:/srv/c.db?synchronous=FULL", sqliteOptions{path: "/srv/c.db", full: true}},
		{"sqlite:/srv/c.db?synchronous=normal", sqliteOptions{path: "/srv/c.db"}},
		{"sqlite:?synchronous=full", sqliteOptions{full: true}},
		{"sqlite:/srv/c.db?synchronous=full&synchronous=normal", sqliteOptions{path: "/srv/c.db"}},
		// A '?' with no parameter after it belongs to the path.
		{"sqlite:/srv/what?/c.db", sqliteOptions{path: "/srv/what?/c.db"}},
		{"sqlite:/srv/what?/c.db?synchronous=full", sqliteOptions{path: "/srv/what?/c.db", full: true}},
	} {
		got, err := parseSQLite(c.dsn)
		if err != nil || got != c.want {
			t.Errorf("parseSQLite(%q) = %+v, %v; want %+v", c.dsn, got, err, c.want)
		}
	}
	for _, c := range []struct{ dsn, names string }{
		{"sqlite:/srv/c.db?synchronous=off", `"off"`},
		{"sqlite:/srv/c.db?synchronous=", `""`},
		{"sqlite:/srv/c.db?sync=full", `"sync"`},
		{"sqlite:/srv/c.db?synchronous=full&mode=ro", `"mode"`},
		{"sqlite:/srv/c.db?_journal_mode=DELETE", `"_journal_mode"`},
	} {
		_, err := parseSQLite(c.dsn)
		if err == nil || !strings.Contains(err.Error(), c.names) {
			t.Errorf("parseSQLite(%q): error %v, want one naming %s", c.dsn, err, c.names)
		}
	}
}

// FuzzParseSQLite: any store name parses or is refused without a panic; a
// name it accepts says what SQLiteName writes back, and a name with no
// parameter keeps its whole path.
func FuzzParseSQLite(f *testing.F) {
	for _, s := range []string{"", "sqlite:", "sqlite:/a/b.db", "file:x.db?synchronous=full", "sqlite:a?b", "sqlite:a?b=c&synchronous=full", "sqlite:?synchronous=NORMAL&"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, dsn string) {
		if prefix, path, params := SplitSQLiteName(dsn); prefix+path+params != dsn {
			t.Fatalf("%q splits into %q %q %q", dsn, prefix, path, params)
		}
		o, err := parseSQLite(dsn)
		if err != nil {
			return
		}
		back := SQLiteName(o.path, o.full)
		if again, err := parseSQLite(back); err != nil || again != o {
			t.Fatalf("%q parsed as %+v, but %q parses as %+v, %v", dsn, o, back, again, err)
		}
		if rest := "sqlite:" + o.path; !strings.Contains(o.path, "=") && !strings.HasSuffix(dsn, "=") {
			if p, _ := parseSQLite(rest); p.path != o.path {
				t.Fatalf("%q: path %q reads back as %q", dsn, o.path, p.path)
			}
		}
	})
}
