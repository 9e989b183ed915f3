package caduceus_test

import (
	"os/exec"
	"strings"
	"testing"
)

const module = "github.com/caduceus-dev/caduceus"

// TestDomainPackagesStayInTheMiddle keeps the house's arrows pointing down:
// a domain package (trader, executor, shim, relay and their sub-packages)
// never imports the store, the server, the console, auth, the command, another domain, a
// broker implementation, or a database driver.
func TestDomainPackagesStayInTheMiddle(t *testing.T) {
	out, err := exec.Command("go", "list", "-f", `{{.ImportPath}}|{{join .Deps " "}}`, "./...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	domains := []string{"trader", "executor", "shim", "relay"}
	forbiddenAlways := []string{module + "/store", module + "/server", module + "/console", module + "/auth", module + "/cmd", "database/sql", "modernc.org/sqlite", "github.com/jackc/pgx"}
	checked := 0
	for line := range strings.SplitSeq(strings.TrimSpace(string(out)), "\n") {
		pkg, deps, _ := strings.Cut(line, "|")
		rel := strings.TrimPrefix(strings.TrimPrefix(pkg, module), "/")
		domain := strings.Split(rel, "/")[0]
		isDomain := false
		for _, d := range domains {
			if domain == d {
				isDomain = true
			}
		}
		// Test helpers (tradertest, ...) may use what tests need.
		if !isDomain || strings.HasSuffix(rel, "test") {
			continue
		}
		checked++
		for dep := range strings.FieldsSeq(deps) {
			// A domain sees the broker port only; picking an implementation
			// is wiring (cmd/caduceus).
			if strings.HasPrefix(dep, module+"/broker/") {
				t.Errorf("%s imports a broker implementation: %s", rel, dep)
			}
			for _, f := range forbiddenAlways {
				if dep == f || strings.HasPrefix(dep, f+"/") {
					t.Errorf("%s imports %s", rel, dep)
				}
			}
			for _, other := range domains {
				if other != domain && (dep == module+"/"+other || strings.HasPrefix(dep, module+"/"+other+"/")) {
					t.Errorf("%s imports another domain: %s", rel, dep)
				}
			}
		}
	}
	if checked == 0 {
		t.Fatal("no domain package found")
	}
}
