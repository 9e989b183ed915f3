package main

import (
	"bytes"
	"cmp"
	"compress/gzip"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// edgeBundleBudget is the most the Worker's bundle may weigh gzipped
// (Cloudflare measures the compressed upload): today's weight with a
// little room, so a dependency that slips into the edge build fails here.
// docs/edge.md has today's figure and the floor.
const edgeBundleBudget = 4_630_000

// edgeKeepsOut are package paths (prefixes) the edge build must not link:
// the Prometheus client and OpenTelemetry, API included (serve's /metrics
// and traces; the Worker serves neither and installs no tracer); the
// guardrails' detectors (guard/detect: gitleaks' rules, libphonenumber's
// metadata) and answer filter (shim/guardrail; the Worker offers no
// guardrails, docs/guardrails.md); text/template, whose calls of reflect's
// Method by name make the linker keep every exported method of every type
// it cannot rule out; and YAML (provision bundles are applied beside the
// store, never at the edge).
var edgeKeepsOut = []string{
	"github.com/prometheus/",
	"google.golang.org/protobuf",
	"go.opentelemetry.io/",
	"github.com/zricethezav/gitleaks",
	"github.com/nyaruka/phonenumbers",
	"github.com/caduceus-dev/caduceus/guard/detect",
	"github.com/caduceus-dev/caduceus/shim/guardrail",
	"text/template",
	"html/template",
	"go.yaml.in/yaml/",
}

// TestEdgeBundle builds the Worker as `make edge` does and checks its
// weight: gzipped within edgeBundleBudget, and none of edgeKeepsOut
// linked. With -v it prints the code each module (each package of ours)
// contributes, the table docs/edge.md shows:
//
//	go test -v -run TestEdgeBundle ./cmd/caduceus
func TestEdgeBundle(t *testing.T) {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	list := exec.Command("go", "list", "-deps", "-f", "{{.ImportPath}}|{{with .Module}}{{.Path}}{{end}}", "./deploy/cloudflare")
	list.Dir, list.Env = root, append(os.Environ(), "GOOS=js", "GOARCH=wasm")
	out, err := list.Output()
	if err != nil {
		t.Fatalf("go list the edge's packages: %v", err)
	}
	modOf := map[string]string{}
	for line := range strings.SplitSeq(strings.TrimSpace(string(out)), "\n") {
		pkg, mod, _ := strings.Cut(line, "|")
		modOf[pkg] = mod
		for _, bad := range edgeKeepsOut {
			if strings.HasPrefix(pkg, bad) {
				t.Errorf("the edge build links %s (%s is kept out of it)", pkg, bad)
			}
		}
	}

	dir := t.TempDir()
	// build builds pkg (the Worker, when args name none) into dir/name.
	build := func(name string, args ...string) []byte {
		pkg := "./deploy/cloudflare"
		if n := len(args); n > 0 && strings.HasPrefix(args[n-1], "./") {
			pkg, args = args[n-1], args[:n-1]
		}
		args = append([]string{"build", "-trimpath"}, args...)
		cmd := exec.Command("go", append(args, "-o", filepath.Join(dir, name), pkg)...)
		cmd.Dir, cmd.Env = root, append(os.Environ(), "GOOS=js", "GOARCH=wasm")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("building the Worker: %v\n%s", err, out)
		}
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	shipped := build("caduceus.wasm", "-ldflags=-s -w") // as make edge builds it
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	zw.Write(shipped)
	zw.Close()
	t.Logf("caduceus.wasm: %d bytes, %d gzipped (budget %d)", len(shipped), gz.Len(), edgeBundleBudget)
	if gz.Len() > edgeBundleBudget {
		t.Errorf("the Worker weighs %d bytes gzipped, over its budget of %d", gz.Len(), edgeBundleBudget)
	}

	floor := build("floor.wasm", "-ldflags=-s -w", "./deploy/cloudflare/floor")
	var fgz bytes.Buffer
	zw = gzip.NewWriter(&fgz)
	zw.Write(floor)
	zw.Close()
	t.Logf("the floor (deploy/cloudflare/floor: the standard library packages the edge uses): %d bytes, %d gzipped", len(floor), fgz.Len())
	floorMCP := build("floor-mcp.wasm", "-ldflags=-s -w", "-tags=caduceus_floor_mcp", "./deploy/cloudflare/floor")
	fgz.Reset()
	zw = gzip.NewWriter(&fgz)
	zw.Write(floorMCP)
	zw.Close()
	t.Logf("the floor with the MCP SDK (-tags caduceus_floor_mcp): %d bytes, %d gzipped", len(floorMCP), fgz.Len())

	named := build("named.wasm") // the same with its name section, to attribute code
	m, err := readWasm(named)
	if err != nil {
		t.Fatalf("reading the Worker's wasm: %v", err)
	}
	mangled := map[string]string{}
	for pkg := range modOf {
		mangled[mangle(pkg)] = pkg
	}
	code, total := map[string]int{}, 0
	for i, size := range m.code {
		code[owner(m.names[m.imported+i], mangled, modOf)] += size
		total += size
	}
	if code["(unattributed)"] > total/5 {
		t.Errorf("%d of %d code bytes have no package: the name mangling has changed", code["(unattributed)"], total)
	}
	rows := slices.SortedFunc(func(yield func(string) bool) {
		for k := range code {
			if !yield(k) {
				return
			}
		}
	}, func(a, b string) int { return cmp.Or(cmp.Compare(code[b], code[a]), strings.Compare(a, b)) })
	t.Logf("code %d bytes, data %d bytes; code by module (ours by package):", total, m.data)
	for _, k := range rows {
		t.Logf("%10d %5.1f%%  %s", code[k], 100*float64(code[k])/float64(total), k)
	}
}

// owner is the row a function's code counts in: its module, or for this
// module its package, or "Go standard library". Go's linker names a
// function "pkgpath.Name" with every byte of the path but letters, digits,
// '_' and '.' written '_', so the longest package whose mangled path
// prefixes the name owns it.
func owner(fn string, mangled map[string]string, modOf map[string]string) string {
	best := ""
	for m, pkg := range mangled {
		if len(m) > len(mangle(best)) && strings.HasPrefix(fn, m+".") {
			best = pkg
		}
	}
	switch mod := modOf[best]; {
	case best == "":
		return "(unattributed)"
	case mod == edgeModule:
		return best
	case mod == "":
		return "Go standard library"
	default:
		return mod
	}
}

// edgeModule is this module's path.
const edgeModule = "github.com/caduceus-dev/caduceus"

func mangle(path string) string {
	b := []byte(path)
	for i, c := range b {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '.') {
			b[i] = '_'
		}
	}
	return string(b)
}

// wasmModule is what TestEdgeBundle reads of a WebAssembly module: the
// size of each defined function's body, the function names of its name
// section, how many functions it imports (they come first in the index
// space), and the size of its data section.
type wasmModule struct {
	imported int
	code     []int
	names    map[int]string
	data     int
}

var errWasm = errors.New("not a WebAssembly module")

// readWasm reads m from a module's bytes (the binary format's sections:
// import, code, data, and the "name" custom section).
func readWasm(b []byte) (*wasmModule, error) {
	if len(b) < 8 || string(b[:4]) != "\x00asm" {
		return nil, errWasm
	}
	m := &wasmModule{names: map[int]string{}}
	r := &wasmReader{b: b, i: 8}
	for r.i < len(b) {
		id := r.byte()
		size := r.u32()
		if r.err != nil || size > len(b)-r.i {
			return nil, fmt.Errorf("%w: a section runs past the end", errWasm)
		}
		sec := &wasmReader{b: b[:r.i+size], i: r.i}
		r.i += size
		switch id {
		case 0:
			if sec.name() == "name" {
				for sec.i < len(sec.b) && sec.err == nil {
					sub, n := sec.byte(), sec.u32()
					end := sec.i + n
					if sec.err != nil || n > len(sec.b)-sec.i {
						return nil, fmt.Errorf("%w: the name section runs past its end", errWasm)
					}
					if sub == 1 {
						for range sec.u32() {
							idx := sec.u32()
							m.names[idx] = sec.name()
							if sec.err != nil {
								break
							}
						}
					}
					sec.i = end
				}
			}
		case 2:
			for range sec.u32() {
				sec.name()
				sec.name()
				switch sec.byte() {
				case 0: // function
					m.imported++
					sec.u32()
				case 1: // table
					sec.byte()
					sec.limits()
				case 2: // memory
					sec.limits()
				case 3: // global
					sec.byte()
					sec.byte()
				default:
					return nil, fmt.Errorf("%w: an import of an unknown kind", errWasm)
				}
				if sec.err != nil {
					break
				}
			}
		case 10:
			for range sec.u32() {
				n := sec.u32()
				if sec.err != nil || n > len(sec.b)-sec.i {
					return nil, fmt.Errorf("%w: a function body runs past the code section", errWasm)
				}
				m.code = append(m.code, n)
				sec.i += n
			}
		case 11:
			m.data += size
		}
		if sec.err != nil {
			return nil, sec.err
		}
	}
	return m, nil
}

// wasmReader reads the binary format's integers (unsigned LEB128) and
// names; the first error sticks.
type wasmReader struct {
	b   []byte
	i   int
	err error
}

func (r *wasmReader) byte() byte {
	if r.err != nil || r.i >= len(r.b) {
		r.err = cmp.Or(r.err, fmt.Errorf("%w: it ends early", errWasm))
		return 0
	}
	r.i++
	return r.b[r.i-1]
}

func (r *wasmReader) u32() int {
	v := 0
	for shift := 0; shift < 35; shift += 7 {
		c := r.byte()
		v |= int(c&0x7f) << shift
		if c < 0x80 {
			return v
		}
	}
	r.err = cmp.Or(r.err, fmt.Errorf("%w: an integer longer than 5 bytes", errWasm))
	return 0
}

func (r *wasmReader) name() string {
	n := r.u32()
	if r.err != nil || n > len(r.b)-r.i {
		r.err = cmp.Or(r.err, fmt.Errorf("%w: a name runs past its section", errWasm))
		return ""
	}
	r.i += n
	return string(r.b[r.i-n : r.i])
}

func (r *wasmReader) limits() {
	if r.byte()&1 != 0 {
		r.u32()
	}
	r.u32()
}

// FuzzReadWasm: readWasm never panics or loops on any bytes, and what it
// reads of a module stays within the module.
func FuzzReadWasm(f *testing.F) {
	f.Add([]byte("\x00asm\x01\x00\x00\x00"))
	f.Add([]byte("\x00asm\x01\x00\x00\x00\x0a\x04\x01\x02\x00\x0b"))
	f.Add([]byte("\x00asm\x01\x00\x00\x00\x00\x0c\x04name\x01\x05\x01\x00\x02ab"))
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := readWasm(b)
		if err != nil {
			return
		}
		sum := m.data
		for _, n := range m.code {
			sum += n
		}
		if sum > len(b) {
			t.Errorf("read %d bytes of code and data from %d", sum, len(b))
		}
	})
}
