package caduceus_test

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/scanner"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// seedIDs are the ids docs/seeds.md must have a row for: every numbered
// rule, invariant, claim, phase and section of the five seeds.
var seedIDs = func() []string {
	var ids []string
	add := func(format string, from, to int) {
		for i := from; i <= to; i++ {
			ids = append(ids, fmt.Sprintf(format, i))
		}
	}
	// Seed 000: design rules, validation rules, safety gates.
	add("000-R%d", 1, 6)
	add("000-V%d", 1, 7)
	add("000-G%d", 1, 5)
	// Seed 001: hard rules, run contexts, phases 1.0-1.6, 2.0-2.7, 3.1-3.5, 4, 4.1, 5.
	add("001-H%d", 1, 6)
	add("001-C%d", 1, 3)
	add("001-1.%d", 0, 6)
	add("001-2.%d", 0, 7)
	add("001-3.%d", 1, 5)
	ids = append(ids, "001-4", "001-4.1", "001-5")
	// Seed 002: every $def of common.schema.json.
	for _, d := range []string{"id", "user_ref", "timestamp", "sha256", "surface", "provider", "effort",
		"sensitivity", "redaction", "actor", "route", "build", "provenance", "evidence_ref", "tags",
		"tenant_slot", "trust", "identity", "revision", "idempotency_key", "contract_version", "audit_outcome"} {
		ids = append(ids, "002-"+d)
	}
	// Seed 003: invariants H01-H19 (the seed has no H15, which has a row
	// saying so), claims, import rules.
	add("H%02d", 1, 19)
	add("HC%d", 1, 5)
	ids = append(ids, "003-ring0-pure-contracts", "003-ring1-core-never-imports-doors", "003-package-never-imports-dev-roots")
	// Seed 004: handshake steps and sections 2-7.
	add("004-§1.%d", 1, 4)
	add("004-§%d", 2, 7)
	return ids
}()

var (
	// A reference: `path` optionally followed by (Name, Name/subtest, ...).
	seedRefRE  = regexp.MustCompile("`([^`]+)`(?: \\(([^)]*)\\))?")
	seedPathRE = regexp.MustCompile(`^[A-Za-z0-9_./-]+\.(go|json|yaml|md)$`)
)

// TestSeedsDocReferencesExist keeps docs/seeds.md from rotting: every seed id
// has exactly one row; every file a row names exists; every function, type
// or test named after a Go file is declared in that file (a subtest's
// segments must be string literals somewhere in the code or testdata file
// names); every row names a test file or says why there is none.
func TestSeedsDocReferencesExist(t *testing.T) {
	doc, err := os.ReadFile("docs/seeds.md")
	if err != nil {
		t.Fatal(err)
	}
	decls := map[string]map[string]bool{}
	declared := func(path string) map[string]bool {
		if d, ok := decls[path]; ok {
			return d
		}
		d, err := goDecls(path)
		if err != nil {
			t.Errorf("%s: %v", path, err)
		}
		decls[path] = d
		return d
	}
	subtests := subtestNames(t)

	rows := map[string]int{}
	for n, line := range strings.Split(string(doc), "\n") {
		n++
		cells := strings.Split(strings.Trim(strings.TrimSpace(line), "|"), "|")
		if !strings.HasPrefix(line, "| ") || len(cells) != 4 {
			continue
		}
		for i := range cells {
			cells[i] = strings.TrimSpace(cells[i])
		}
		id, impl, test := cells[0], cells[2], cells[3]
		if id == "id" || strings.HasPrefix(id, "---") || id == "seed" {
			continue
		}
		rows[id]++
		implRefs, testRefs := 0, 0
		for col, cell := range []string{impl, test} {
			for _, m := range seedRefRE.FindAllStringSubmatch(cell, -1) {
				path, names := m[1], m[2]
				if !seedPathRE.MatchString(path) {
					continue
				}
				if _, err := os.Stat(path); err != nil {
					t.Errorf("line %d (%s): %s does not exist", n, id, path)
					continue
				}
				if col == 0 {
					implRefs++
				} else if strings.HasSuffix(path, "_test.go") {
					testRefs++
				}
				if names == "" {
					continue
				}
				for name := range strings.SplitSeq(names, ",") {
					name = strings.TrimSpace(name)
					top, sub, _ := strings.Cut(name, "/")
					if strings.HasSuffix(path, ".go") {
						if !declared(path)[top] {
							t.Errorf("line %d (%s): %s declares no %s", n, id, path, top)
						}
					} else if b, _ := os.ReadFile(path); !strings.Contains(string(b), `"`+name+`"`) {
						t.Errorf("line %d (%s): %s has no %q", n, id, path, name)
					}
					for seg := range strings.SplitSeq(sub, "/") {
						if sub != "" && !subtests[seg] && !subtests[strings.ReplaceAll(seg, "_", " ")] {
							t.Errorf("line %d (%s): no subtest %q of %s (no such string literal or testdata file)", n, id, seg, top)
						}
					}
				}
			}
		}
		if implRefs == 0 && !strings.Contains(impl, "Not built") && !strings.Contains(impl, "not enforced") && !strings.Contains(impl, "nothing to build") {
			t.Errorf("line %d (%s): no implementation named and no reason why", n, id)
		}
		if testRefs == 0 && !strings.HasPrefix(test, "no test") {
			t.Errorf("line %d (%s): no test named and the row does not start with \"no test\"", n, id)
		}
	}
	for _, id := range seedIDs {
		switch rows[id] {
		case 0:
			t.Errorf("docs/seeds.md has no row for %s", id)
		case 1:
		default:
			t.Errorf("docs/seeds.md has %d rows for %s", rows[id], id)
		}
	}
}

// goDecls returns the top-level names path declares: functions, methods as
// Type.Method, types, constants and variables.
func goDecls(path string) (map[string]bool, error) {
	f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.SkipObjectResolution)
	if err != nil {
		return nil, err
	}
	names := map[string]bool{}
	for _, d := range f.Decls {
		switch d := d.(type) {
		case *ast.FuncDecl:
			name := d.Name.Name
			if d.Recv != nil && len(d.Recv.List) == 1 {
				typ := d.Recv.List[0].Type
				if s, ok := typ.(*ast.StarExpr); ok {
					typ = s.X
				}
				switch x := typ.(type) {
				case *ast.IndexExpr:
					typ = x.X
				case *ast.IndexListExpr:
					typ = x.X
				}
				if id, ok := typ.(*ast.Ident); ok {
					name = id.Name + "." + name
				}
			}
			names[name] = true
		case *ast.GenDecl:
			for _, s := range d.Specs {
				switch s := s.(type) {
				case *ast.TypeSpec:
					names[s.Name.Name] = true
				case *ast.ValueSpec:
					for _, n := range s.Names {
						names[n.Name] = true
					}
				}
			}
		}
	}
	return names, nil
}

// subtestNames returns every string literal of the module's Go files and the
// base name (without extension) of every file under a testdata directory:
// the names a subtest can have.
func subtestNames(t *testing.T) map[string]bool {
	t.Helper()
	names := map[string]bool{}
	err := filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if path != "." && (strings.HasPrefix(d.Name(), ".") || d.Name() == "node_modules" || d.Name() == "dist") { // hidden, npm's, build output
				return filepath.SkipDir
			}
			return nil
		}
		if strings.Contains(filepath.ToSlash(path), "/testdata/") || strings.HasPrefix(path, "testdata/") {
			names[strings.TrimSuffix(d.Name(), filepath.Ext(d.Name()))] = true
			return nil
		}
		if !strings.HasSuffix(path, ".go") {
			return nil
		}
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		var s scanner.Scanner
		fset := token.NewFileSet()
		s.Init(fset.AddFile(path, -1, len(src)), src, nil, 0)
		for {
			_, tok, lit := s.Scan()
			if tok == token.EOF {
				break
			}
			if tok == token.STRING {
				if v, err := strconv.Unquote(lit); err == nil {
					names[v] = true
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return names
}

// issueRefRE finds references to the project's issue tracker by number.
var issueRefRE = regexp.MustCompile(`(?i)\bissues? #?[0-9]+`)

// TestNoIssueNumbersInCommentsOrDocs: a comment or a document says what it
// means, never the word issue followed by a tracker number (the tracker is
// not part of the code and its numbers mean nothing to a reader).
func TestNoIssueNumbersInCommentsOrDocs(t *testing.T) {
	err := filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if path != "." && (strings.HasPrefix(d.Name(), ".") || d.Name() == "node_modules" || d.Name() == "dist") { // hidden, npm's, build output
				return filepath.SkipDir
			}
			return nil
		}
		switch {
		case strings.HasSuffix(path, ".go"):
			fset := token.NewFileSet()
			f, err := parser.ParseFile(fset, path, nil, parser.ParseComments|parser.SkipObjectResolution)
			if err != nil {
				return err
			}
			for _, g := range f.Comments {
				for _, c := range g.List {
					if m := issueRefRE.FindString(c.Text); m != "" {
						t.Errorf("%s: comment names %q; say what it means", fset.Position(c.Pos()), m)
					}
				}
			}
		case strings.HasSuffix(path, ".md"):
			b, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			for i, line := range strings.Split(string(b), "\n") {
				if m := issueRefRE.FindString(line); m != "" {
					t.Errorf("%s:%d: names %q; say what it means", path, i+1, m)
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// testNameRE finds a test or fuzz function's name anywhere in a line.
var testNameRE = regexp.MustCompile(`\b(?:Test|Fuzz)[A-Z][A-Za-z0-9_]*\b`)

// TestSeedsDocTestNamesExist: every test named anywhere on docs/seeds.md,
// in a row after its file or bare in the prose ("TestScenariosInMemory"),
// is a function some Go file of the module declares (a *_test.go file, or
// a test helper package's exported suite such as shimtest.TestScenarios).
// TestSeedsDocReferencesExist checks the names a row gives after a file
// against that file; this one also catches the bare ones.
func TestSeedsDocTestNamesExist(t *testing.T) {
	doc, err := os.ReadFile("docs/seeds.md")
	if err != nil {
		t.Fatal(err)
	}
	declared := map[string]bool{}
	err = filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if path != "." && (strings.HasPrefix(d.Name(), ".") || d.Name() == "node_modules" || d.Name() == "testdata") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") {
			return nil
		}
		names, err := goDecls(path)
		if err != nil {
			return err
		}
		for n := range names {
			declared[n] = true
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	named := 0
	for n, line := range strings.Split(string(doc), "\n") {
		for _, name := range testNameRE.FindAllString(line, -1) {
			if name == "TestName" {
				continue // the page's placeholder in "how to read a row"
			}
			named++
			if !declared[name] {
				t.Errorf("docs/seeds.md:%d names %s, which no Go file declares", n+1, name)
			}
		}
	}
	if named < 100 {
		t.Fatalf("only %d test names found on docs/seeds.md", named)
	}
}
