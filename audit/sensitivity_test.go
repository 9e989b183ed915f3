package audit_test

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/caduceus-dev/caduceus/audit"
)

// TestSensitivityTableIsDocumented: docs/audit.md's table names every
// entry of audit.Sensitivities with its sensitivity.
func TestSensitivityTableIsDocumented(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "docs", "audit.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, table, ok := strings.Cut(string(b), "<!-- audit-sensitivity-table -->")
	if !ok {
		t.Fatal("docs/audit.md has no audit-sensitivity-table")
	}
	table, _, _ = strings.Cut(table, "\n\n")
	for action, s := range audit.Sensitivities {
		name := "`" + action + "`"
		if strings.HasSuffix(action, ".") {
			name = "`" + action + "*`"
		}
		found := false
		for line := range strings.SplitSeq(table, "\n") {
			if strings.HasPrefix(line, "| "+name) {
				found = true
				if !strings.Contains(line, "| `"+string(s)+"` |") {
					t.Errorf("docs/audit.md: %s is not documented as %s: %s", action, s, line)
				}
			}
		}
		if !found {
			t.Errorf("docs/audit.md's table does not name %s", name)
		}
	}
	if !strings.Contains(table, "| anything else | `"+string(audit.DefaultSensitivity)+"` |") {
		t.Errorf("docs/audit.md does not document the default %s", audit.DefaultSensitivity)
	}
}

// TestEveryActionIsClassified: every audit action the code writes (a
// route's Action, a domain's action constant, the relay's entries) is
// named by the table, exactly or by its noun, and so does not fall to the
// default.
func TestEveryActionIsClassified(t *testing.T) {
	re := regexp.MustCompile(`(?:Action:\s*|[Aa]ction\s*=\s*|Audit[A-Za-z]*\s*=\s*|action:\s*)"([a-z_]+\.[a-z_]+)"`)
	seen := 0
	err := filepath.WalkDir("..", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && strings.HasPrefix(d.Name(), ".") && path != ".." {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for _, m := range re.FindAllStringSubmatch(string(b), -1) {
			seen++
			action := m[1]
			noun, _, _ := strings.Cut(action, ".")
			_, exact := audit.Sensitivities[action]
			_, byNoun := audit.Sensitivities[noun+"."]
			if !exact && !byNoun {
				t.Errorf("%s: action %s is not in audit.Sensitivities (docs/audit.md)", path, action)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if seen < 40 {
		t.Fatalf("only %d actions found in the sources", seen)
	}
}
