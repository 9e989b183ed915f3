package caduceus_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strings"
	"testing"
)

// Limits on the shape of production code (tests and test helpers aside).
const (
	maxParams = 8 // parameters of one function, the receiver aside
	// A function may be long or branchy, not both: complexity over
	// maxComplexity and more than maxLines lines.
	maxComplexity = 30
	maxLines      = 80
	maxShimFile   = 800 // lines of one production file under shim/
)

// complexity is a function's cyclomatic complexity as gocyclo counts it:
// one, plus one per if, for, range, case, select case and && or ||.
func complexity(fn ast.Node) int {
	c := 1
	ast.Inspect(fn, func(n ast.Node) bool {
		switch x := n.(type) {
		case *ast.IfStmt, *ast.ForStmt, *ast.RangeStmt:
			c++
		case *ast.CaseClause:
			if x.List != nil {
				c++
			}
		case *ast.CommClause:
			if x.Comm != nil {
				c++
			}
		case *ast.BinaryExpr:
			if x.Op == token.LAND || x.Op == token.LOR {
				c++
			}
		}
		return true
	})
	return c
}

// productionFiles calls fn with every production Go file of the module:
// no _test.go file, nothing under testdata or node_modules, no test
// helper package (isTestHelper).
func productionFiles(t *testing.T, fn func(path string, f *ast.File, fset *token.FileSet)) {
	t.Helper()
	fset := token.NewFileSet()
	err := filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if path != "." && (strings.HasPrefix(d.Name(), ".") || d.Name() == "node_modules" || isTestHelper(filepath.ToSlash(path))) {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, 0)
		if err != nil {
			return err
		}
		fn(filepath.ToSlash(path), f, fset)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestFunctionShapes: no production function takes more than maxParams
// parameters (a value of its own carries more), and none is both longer
// than maxLines lines and more complex than maxComplexity.
func TestFunctionShapes(t *testing.T) {
	n := 0
	productionFiles(t, func(path string, f *ast.File, fset *token.FileSet) {
		for _, d := range f.Decls {
			fd, ok := d.(*ast.FuncDecl)
			if !ok || fd.Body == nil {
				continue
			}
			n++
			params := 0
			for _, p := range fd.Type.Params.List {
				params += max(len(p.Names), 1)
			}
			lines := fset.Position(fd.End()).Line - fset.Position(fd.Pos()).Line + 1
			at := fset.Position(fd.Pos())
			if params > maxParams {
				t.Errorf("%s:%d %s takes %d parameters (at most %d)", path, at.Line, fd.Name.Name, params, maxParams)
			}
			if c := complexity(fd); c > maxComplexity && lines > maxLines {
				t.Errorf("%s:%d %s has complexity %d over %d lines (at most %d, or at most %d lines)", path, at.Line, fd.Name.Name, c, lines, maxComplexity, maxLines)
			}
		}
	})
	if n < 1000 {
		t.Fatalf("only %d functions found: the walk missed the tree", n)
	}
}

// TestShimFilesStaySmall: no production file under shim/ is over
// maxShimFile lines.
func TestShimFilesStaySmall(t *testing.T) {
	productionFiles(t, func(path string, f *ast.File, fset *token.FileSet) {
		if !strings.HasPrefix(path, "shim/") {
			return
		}
		if n := fset.File(f.Pos()).LineCount(); n > maxShimFile {
			t.Errorf("%s has %d lines (at most %d): split it by what its parts do", path, n, maxShimFile)
		}
	})
}
