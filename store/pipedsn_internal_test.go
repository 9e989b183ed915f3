package store

import (
	"net/url"
	"strings"
	"testing"
)

// caduceus_pipeline takes on or off (and their spellings), leaves the DSN
// pgx reads without it and with every other parameter, and refuses any
// other value naming the parameter.
func TestPipelineDSN(t *testing.T) {
	for _, c := range []struct {
		dsn, want string
		on        bool
		err       bool
	}{
		{"postgres://u@h/db?sslmode=disable", "postgres://u@h/db?sslmode=disable", false, false},
		{"postgres://u@h/db?caduceus_pipeline=on&sslmode=disable", "postgres://u@h/db?sslmode=disable", true, false},
		{"postgres://u@h/db?caduceus_pipeline=1", "postgres://u@h/db", true, false},
		{"postgres://u@h/db?caduceus_pipeline=off", "postgres://u@h/db", false, false},
		{"postgres://u@h/db?caduceus_pipeline=yes", "", false, true},
	} {
		got, on, err := pipelineDSN(c.dsn)
		if (err != nil) != c.err || got != c.want || on != c.on {
			t.Errorf("pipelineDSN(%q) = %q %v %v, want %q %v (error: %v)", c.dsn, got, on, err, c.want, c.on, c.err)
		}
		if err != nil && !strings.Contains(err.Error(), PipelineParam) {
			t.Errorf("pipelineDSN(%q): error %v names no %s", c.dsn, err, PipelineParam)
		}
	}
}

// FuzzPipelineDSN: any DSN is kept, stripped of caduceus_pipeline or
// refused, without a panic; what it hands pgx never holds the parameter.
func FuzzPipelineDSN(f *testing.F) {
	for _, s := range []string{"postgres://u@h/db", "postgres://h/db?caduceus_pipeline=on&x=1", "postgresql://h?caduceus_pipeline=", "postgres://%zz", "postgres://h/db?caduceus_pipeline=on&caduceus_pipeline=off"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, dsn string) {
		got, _, err := pipelineDSN(dsn)
		if err != nil || got == dsn {
			return
		}
		u, perr := url.Parse(got)
		if perr != nil || u.Query().Has(PipelineParam) {
			t.Fatalf("%q gave %q (%v), which still holds %s", dsn, got, perr, PipelineParam)
		}
	})
}
