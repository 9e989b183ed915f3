package registry

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/caduceus-dev/caduceus/gate"
	"github.com/caduceus-dev/caduceus/server"
)

// testGate is a gate that records its Close into closed.
type testGate struct {
	name   string
	closed *[]string
}

func (g testGate) Name() string           { return g.name }
func (g testGate) Routes() []server.Route { return nil }
func (g testGate) Tools() []server.Tool   { return nil }
func (g testGate) Jobs() []gate.Job       { return nil }
func (g testGate) Close()                 { *g.closed = append(*g.closed, g.name) }

type testSection struct{ On bool }

// register registers the modules of a test: a (order 2), b (order 1,
// configured when its section says On, else served as its Unconfigured
// gate) and c (order 3, failing to build when fail is set).
func register(t *testing.T, closed *[]string, fail *bool) {
	t.Helper()
	build := func(name string) func(context.Context, Host, any) (gate.Gate, error) {
		return func(context.Context, Host, any) (gate.Gate, error) { return testGate{name, closed}, nil }
	}
	Register(Module{Name: "t-a", Order: 1002, Build: build("t-a")})
	Register(Module{Name: "t-b", Order: 1001, Section: "t-b", New: func() any { return &testSection{} },
		Configured:   func(_ Host, s any) bool { return s.(*testSection).On },
		Unconfigured: func() gate.Gate { return testGate{"t-b (unconfigured)", closed} },
		Check: func(_ Host, s any) error {
			if !s.(*testSection).On {
				return Invalidf("t-b.on: must be true")
			}
			return nil
		},
		Build: build("t-b")})
	Register(Module{Name: "t-c", Order: 1003, Build: func(ctx context.Context, h Host, s any) (gate.Gate, error) {
		if *fail {
			return nil, errors.New("t-c: cannot build")
		}
		return build("t-c")(ctx, h, s)
	}})
}

func names(gs []gate.Gate) []string {
	var out []string
	for _, g := range gs {
		out = append(out, g.Name())
	}
	return out
}

func TestBuildInOrderAndCloseInReverse(t *testing.T) {
	var closed []string
	fail := false
	register(t, &closed, &fail)
	enabled := []string{"t-c", "t-a", "t-b"}
	secs := Sections{}
	secs.Of("t-b").(*testSection).On = true
	gs, closeAll, err := Build(context.Background(), Host{}, secs, enabled)
	if err != nil {
		t.Fatal(err)
	}
	if got := names(gs); !slices.Equal(got, []string{"t-b", "t-a", "t-c"}) {
		t.Fatalf("built %v, want the modules' order t-b, t-a, t-c", got)
	}
	closeAll()
	if !slices.Equal(closed, []string{"t-c", "t-a", "t-b"}) {
		t.Fatalf("closed %v, want the reverse of the build", closed)
	}

	// Unconfigured: its stand-in is served, and CheckAll skips it; a
	// gate not enabled is not built.
	closed = nil
	gs, closeAll, err = Build(context.Background(), Host{}, Sections{}, []string{"t-b", "t-a"})
	if err != nil {
		t.Fatal(err)
	}
	defer closeAll()
	if got := names(gs); !slices.Equal(got, []string{"t-b (unconfigured)", "t-a"}) {
		t.Fatalf("built %v", got)
	}
	if got := ServedNames(Host{}, Sections{}, []string{"t-b", "t-a"}); !slices.Equal(got, []string{"t-a"}) {
		t.Fatalf("served %v, want t-a alone", got)
	}

	// A failed build closes what was built before it, and answers why.
	closed, fail = nil, true
	if _, _, err := Build(context.Background(), Host{}, secs, enabled); err == nil || !strings.Contains(err.Error(), "t-c: cannot build") {
		t.Fatalf("err %v", err)
	}
	if !slices.Equal(closed, []string{"t-a", "t-b"}) {
		t.Fatalf("after a failed build, closed %v, want t-a, t-b", closed)
	}

	// CheckAll: an unknown gate is named; a configured section is checked.
	if err := CheckAll(Host{}, Sections{}, []string{"t-a", "t-nope"}); err == nil || !strings.Contains(err.Error(), `unknown gate "t-nope"`) {
		t.Fatalf("unknown gate: %v", err)
	}
	bad := Sections{}
	if err := CheckAll(Host{}, bad, []string{"t-b"}); err != nil {
		t.Fatalf("an unconfigured gate was checked: %v", err)
	}
	if _, ok := Lookup("t-b"); !ok {
		t.Fatal("t-b not found")
	}
}

func TestRegisterRefusesMistakes(t *testing.T) {
	for name, m := range map[string]Module{
		"no build":            {Name: "t-x"},
		"section without new": {Name: "t-y", Section: "t-y", Build: func(context.Context, Host, any) (gate.Gate, error) { return nil, nil }},
	} {
		t.Run(name, func(t *testing.T) {
			defer func() {
				if recover() == nil {
					t.Fatal("Register took it")
				}
			}()
			Register(m)
		})
	}
	Register(Module{Name: "t-dup", Build: func(context.Context, Host, any) (gate.Gate, error) { return nil, nil }})
	defer func() {
		if recover() == nil {
			t.Fatal("a second t-dup was taken")
		}
	}()
	Register(Module{Name: "t-dup", Build: func(context.Context, Host, any) (gate.Gate, error) { return nil, nil }})
}
