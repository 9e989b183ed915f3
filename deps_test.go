package caduceus_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

const module = "github.com/caduceus-dev/caduceus"

// gates are the gate packages; each one's sub-packages belong to it.
var gates = []string{"trader", "executor", "shim", "relay"}

// adapters are the packages that hold a gate's SQL over the store core:
// they import the core and their own gate, never another gate.
var adapters = map[string]string{
	"trader/tradersql":     "trader",
	"executor/executorsql": "executor",
	"shim/shimsql":         "shim",
	"shim/shimstore":       "shim",
	"relay/relaysql":       "relay",
	"shim/ledger":          "shim",
}

// modules put a gate on the server (package gate): its routes, tools and
// jobs. They import the server and the store core, and their own gate.
var modules = map[string]string{
	"trader/tradergate":     "trader",
	"executor/executorgate": "executor",
	"shim/shimgate":         "shim",
	"shim/shimserve":        "shim",
	"relay/relaygate":       "relay",
}

// registering are the module packages that register their gate with the
// program (gate/registry), one each: the program links a gate by
// importing this package alone.
var registering = map[string]string{
	"trader/tradergate":     "trader",
	"executor/executorgate": "executor",
	"shim/shimserve":        "shim",
	"relay/relaygate":       "relay",
}

// core are the packages under every gate: they import no gate.
var core = []string{"contract", "audit", "auth", "store", "store/storetest", "trail", "console", "internal/swar", "internal/telemetry", "internal/keyowner", "internal/natstest", "gate", "gate/registry", "guard", "guard/detect"}

// gateOf is the gate rel belongs to ("" for none): its own tree, or the
// gate an adapter serves.
func gateOf(rel string) string {
	if g, ok := adapters[rel]; ok {
		return g
	}
	if g, ok := modules[rel]; ok {
		return g
	}
	top, _, _ := strings.Cut(rel, "/")
	if slices.Contains(gates, top) {
		return top
	}
	return ""
}

// imports lists every package of the module with its transitive
// dependencies (tests excluded).
func imports(t *testing.T) map[string][]string {
	t.Helper()
	out, err := exec.Command("go", "list", "-f", `{{.ImportPath}}|{{join .Deps " "}}`, "./...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	deps := map[string][]string{}
	for line := range strings.SplitSeq(strings.TrimSpace(string(out)), "\n") {
		pkg, ds, _ := strings.Cut(line, "|")
		rel := strings.TrimPrefix(strings.TrimPrefix(pkg, module), "/")
		for d := range strings.FieldsSeq(ds) {
			if strings.HasPrefix(d, module+"/") {
				deps[rel] = append(deps[rel], strings.TrimPrefix(d, module+"/"))
			} else {
				deps[rel] = append(deps[rel], d)
			}
		}
		if _, ok := deps[rel]; !ok {
			deps[rel] = nil
		}
	}
	return deps
}

// TestCoreKnowsNoGate: the core (contract, audit, auth, the store core,
// the trail) imports no gate package and no gate's adapter.
func TestCoreKnowsNoGate(t *testing.T) {
	deps := imports(t)
	for _, c := range core {
		ds, ok := deps[c]
		if !ok {
			t.Fatalf("core package %s not found", c)
		}
		for _, d := range ds {
			if gateOf(d) != "" {
				t.Errorf("core package %s imports %s (gate %s)", c, d, gateOf(d))
			}
		}
	}
}

// TestNoGateImportsAnother: no package of a gate (its tree or its
// adapters) imports another gate's.
func TestNoGateImportsAnother(t *testing.T) {
	checked := 0
	for pkg, ds := range imports(t) {
		g := gateOf(pkg)
		if g == "" || strings.HasSuffix(pkg, "test") {
			continue
		}
		checked++
		for _, d := range ds {
			if o := gateOf(d); o != "" && o != g {
				t.Errorf("%s (gate %s) imports %s (gate %s)", pkg, g, d, o)
			}
		}
	}
	if checked == 0 {
		t.Fatal("no gate package found")
	}
}

// TestDomainPackagesStayInTheMiddle keeps the house's arrows pointing down:
// a gate's domain package (trader, executor, shim, relay and their
// sub-packages, but for the adapters and modules) never imports the store, the server,
// the console, auth, the command, a broker implementation, or a database
// driver. Test helpers (tradertest, ...) may use what tests need.
func TestDomainPackagesStayInTheMiddle(t *testing.T) {
	forbidden := []string{"store", "server", "console", "auth", "cmd", "database/sql", "modernc.org/sqlite", "github.com/jackc/pgx"}
	checked := 0
	for pkg, ds := range imports(t) {
		_, adapter := adapters[pkg]
		_, module := modules[pkg]
		if adapter || module || gateOf(pkg) == "" || strings.HasSuffix(pkg, "test") {
			continue
		}
		checked++
		for _, d := range ds {
			// A domain sees the broker port only; picking an
			// implementation is wiring (cmd/caduceus).
			if strings.HasPrefix(d, "broker/") {
				t.Errorf("%s imports a broker implementation: %s", pkg, d)
			}
			for _, f := range forbidden {
				if d == f || strings.HasPrefix(d, f+"/") {
					t.Errorf("%s imports %s", pkg, d)
				}
			}
		}
	}
	if checked == 0 {
		t.Fatal("no domain package found")
	}
}

// TestEdgeCarriesOnlyTheShim: the edge (the Worker's composition, built
// for js/wasm) serves the shim gate alone, so it imports no other gate, no
// store core and no database driver: D1 is its only store, reached through
// the store's port (store/port), which has no driver behind it.
func TestEdgeCarriesOnlyTheShim(t *testing.T) {
	ds, ok := imports(t)["edge"]
	if !ok {
		t.Fatal("package edge not found")
	}
	for _, d := range ds {
		if g := gateOf(d); g != "" && g != "shim" {
			t.Errorf("edge imports %s (gate %s)", d, g)
		}
		for _, f := range []string{"store", "cmd", "console", "modernc.org/sqlite", "github.com/jackc/pgx"} {
			if d != "store/port" && (d == f || strings.HasPrefix(d, f+"/")) {
				t.Errorf("edge imports %s", d)
			}
		}
	}
}

// isTestHelper reports whether rel, a package of the module, is test code:
// a path element ending in "test" (executor/executortest, store/storetest,
// internal/natstest, ...) or named testdata.
func isTestHelper(rel string) bool {
	for el := range strings.SplitSeq(rel, "/") {
		if strings.HasSuffix(el, "test") || el == "testdata" {
			return true
		}
	}
	return false
}

// devRoot says why dep, a dependency of a runtime package, is test, build or
// deployment code (seed 003 package-never-imports-dev-roots), or "" when it
// is not: a test helper of the module (own: dep is one of the module's
// packages), the module's deploy/ or scripts/ trees, or the standard
// library's testing packages. bench is not one: it is the binary's own
// `caduceus bench` command, runtime code that drives a running server, and
// it obeys this rule itself.
func devRoot(dep string, own bool) string {
	switch {
	case !own && (dep == "testing" || strings.HasPrefix(dep, "testing/") || dep == "net/http/httptest"):
		return "the standard library's test support"
	case !own:
		return "" // the standard library's or another module's package
	case strings.HasPrefix(dep, "deploy/") || dep == "deploy":
		return "deployment code"
	case strings.HasPrefix(dep, "scripts/") || dep == "scripts":
		return "build scripts"
	case isTestHelper(dep):
		return "a test helper"
	}
	return ""
}

// TestRuntimeImportsNoDevRoots: the binary (cmd/caduceus) and every other
// runtime package of the module, that is every package but the test
// helpers, depend (transitively, test files excluded) on no test helper,
// no deploy/ or scripts/ package and not on the testing packages (seed
// 003: "Runtime package code never imports test, build, or deployment
// folders").
func TestRuntimeImportsNoDevRoots(t *testing.T) {
	deps := imports(t)
	if _, ok := deps["cmd/caduceus"]; !ok {
		t.Fatal("the binary's package cmd/caduceus not found")
	}
	checked := 0
	for pkg, ds := range deps {
		if isTestHelper(pkg) {
			continue // test code itself
		}
		checked++
		for _, d := range ds {
			_, own := deps[d]
			if why := devRoot(d, own); why != "" {
				t.Errorf("runtime package %s imports %s (%s)", orRoot(pkg), d, why)
			}
		}
	}
	if checked < 20 {
		t.Fatalf("only %d runtime packages checked", checked)
	}
}

func orRoot(rel string) string {
	if rel == "" {
		return module
	}
	return rel
}

// TestEachGateRegistersItself: each gate has one package that registers it
// with the program (registry.Register, once, in an init), and the program
// (cmd/caduceus) names no gate's builder: it imports the registering
// packages and builds what registered (registry.Build). Adding a gate is
// its own packages and one import line.
func TestEachGateRegistersItself(t *testing.T) {
	for pkg, g := range registering {
		files, err := filepath.Glob(filepath.Join(filepath.FromSlash(pkg), "*.go"))
		if err != nil {
			t.Fatal(err)
		}
		calls := 0
		for _, f := range files {
			if strings.HasSuffix(f, "_test.go") {
				continue
			}
			b, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			calls += strings.Count(string(b), "registry.Register(")
			if strings.Contains(string(b), "registry.Register(") && !strings.Contains(string(b), `Name: "`+g+`"`) {
				t.Errorf("%s registers a module not named %q", f, g)
			}
		}
		if calls != 1 {
			t.Errorf("%s calls registry.Register %d times, want once", pkg, calls)
		}
	}
	cmd, err := filepath.Glob(filepath.Join("cmd", "caduceus", "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	builders := []string{"tradergate.New(", "executorgate.New(", "executorgate.NotConfigured(", "shimgate.New(", "relaygate.New(", "connector.New("}
	for _, f := range cmd {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, bl := range builders {
			if strings.Contains(string(b), bl) {
				t.Errorf("%s builds a gate itself (%s): the gate's module builds it", f, bl)
			}
		}
	}
}
