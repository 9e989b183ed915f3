// Package registry is where gates register themselves as modules of the
// program (package gate is the shape of a gate; this is how the program
// finds and builds them). It stands apart from package gate because it
// knows the store: the edge, which links gate but has its own database,
// links no registry.
package registry

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"

	"github.com/caduceus-dev/caduceus/contract"
	"github.com/caduceus-dev/caduceus/gate"
	"github.com/caduceus-dev/caduceus/store"
)

// Module is a gate as the program links it. A gate's module package
// registers one in its init (Register), and the program, which imports
// that package for its side effect alone, finds it there: its config
// section, the settings the environment and serve's flags layer over that
// section, the checks serve runs before it opens the store, and the
// builder of the gate itself. serve, reload, the demo and the bench build
// their gates through one function (Build); nothing outside the module
// package names what its section holds.
type Module struct {
	// Name is the gate's name as --gates spells it.
	Name string
	// Order places the gate among the others: serve builds, routes and
	// starts gates in ascending Order.
	Order int
	// Section is the key of the gate's section in the config file ("":
	// the gate has none), and New returns a pointer to its zero value,
	// which the program decodes the section into, strictly (an unknown
	// key is refused).
	Section string
	New     func() any
	// Paths resolves the file paths of a section read from a config file,
	// each against the file's directory (rel): a config works from any
	// working directory. Paths given by flags or the environment resolve
	// from the working directory.
	Paths func(section any, rel func(string) string)
	// Settings are the section's settings that the environment and serve's
	// flags may set, layered over the file's: file < environment < flags.
	Settings []Setting
	// Check validates the layered section before the store is opened, so
	// a bad configuration changes nothing; its error names the setting.
	Check func(h Host, section any) error
	// Configured reports whether serve answers the gate's routes at all
	// (nil: always): the relay without a gateway or a platform is not
	// served, nor the executor nobody configured.
	Configured func(h Host, section any) bool
	// Unserved is the startup log's line for the gate enabled but not
	// configured.
	Unserved string
	// Unconfigured, when set, is the gate served when Configured says no
	// (the executor's answers what to configure); nil: nothing is served.
	Unconfigured func() gate.Gate
	// Build builds the gate on h.
	Build func(ctx context.Context, h Host, section any) (gate.Gate, error)
	// Describe states what the gate serves in serve's startup log and
	// after a reload (nil: its name in the list of gates says it all).
	Describe func(h Host, section any)
}

// Setting is one setting of a section that the environment or a flag of
// serve may set. Set receives the flag's values (one for a string or a
// bool, every value given for a list), or the environment variable's value
// (a list split at commas), and stores them into the section, refusing a
// value it cannot take.
type Setting struct {
	Flag  string // serve's flag ("": none)
	Env   string // the environment variable ("": none)
	Kind  Kind
	Usage string
	Set   func(section any, values []string) error
}

// Kind is the type of a Setting's flag.
type Kind int

const (
	String  Kind = iota // --flag VALUE
	Bool                // --flag, --flag=false
	Strings             // --flag VALUE, repeatable
)

// Host is what the program hands a module to build its gate on.
type Host struct {
	DB     *store.DB
	Log    *slog.Logger
	Getenv func(string) string
	// Data is the data directory.
	Data string
	// NATS is the URL of the NATS server the processes share ("": none).
	NATS string
	// Chosen reports whether the operator named the gates (--gates,
	// CADUCEUS_GATES, gates in the file) rather than taking the default.
	Chosen bool
}

var (
	modMu   sync.Mutex
	modules = map[string]Module{}
)

// Register adds m to the modules the program links. It panics on a
// module without a name or a builder, or one registered twice: both are
// programming errors found at start.
func Register(m Module) {
	modMu.Lock()
	defer modMu.Unlock()
	if m.Name == "" || m.Build == nil {
		panic("gate: Register: a module needs a Name and a Build")
	}
	if (m.Section == "") != (m.New == nil) {
		panic("gate: Register " + m.Name + ": Section and New go together")
	}
	if _, dup := modules[m.Name]; dup {
		panic("gate: Register: module " + m.Name + " registered twice")
	}
	modules[m.Name] = m
}

// Modules are the registered modules in Order.
func Modules() []Module {
	modMu.Lock()
	defer modMu.Unlock()
	out := make([]Module, 0, len(modules))
	for _, m := range modules {
		out = append(out, m)
	}
	slices.SortFunc(out, func(a, b Module) int { return cmp.Or(cmp.Compare(a.Order, b.Order), strings.Compare(a.Name, b.Name)) })
	return out
}

// Names are the registered modules' names, in Order.
func Names() []string {
	var out []string
	for _, m := range Modules() {
		out = append(out, m.Name)
	}
	return out
}

// Lookup is the module registered as name.
func Lookup(name string) (Module, bool) {
	modMu.Lock()
	defer modMu.Unlock()
	m, ok := modules[name]
	return m, ok
}

// Sections are the decoded config sections, by module name. Section is
// the one of m: the decoded one, or m's zero section.
type Sections map[string]any

// Of is the section of the module named name (nil for a module without
// one, or none registered under that name).
func (s Sections) Of(name string) any {
	if v, ok := s[name]; ok {
		return v
	}
	if m, ok := Lookup(name); ok && m.New != nil {
		v := m.New()
		s[name] = v
		return v
	}
	return nil
}

// Served reports whether serve answers the gate named name on h: it is
// enabled and configured.
func Served(h Host, sections Sections, enabled []string, name string) bool {
	m, ok := Lookup(name)
	if !ok || !slices.Contains(enabled, name) {
		return false
	}
	return m.Configured == nil || m.Configured(h, sections.Of(name))
}

// CheckAll checks the enabled gates' names and sections before the store
// opens.
func CheckAll(h Host, sections Sections, enabled []string) error {
	for _, name := range enabled {
		if _, ok := Lookup(name); !ok {
			return fmt.Errorf("unknown gate %q (want %v)", name, Names())
		}
	}
	for _, m := range Modules() {
		if m.Check == nil || !Served(h, sections, enabled, m.Name) {
			continue
		}
		if err := m.Check(h, sections.Of(m.Name)); err != nil {
			return err
		}
	}
	return nil
}

// Build builds the enabled gates that are configured, in Order. closeAll
// releases what they hold (Closer), in the reverse order; call it once the
// server has stopped. A gate that fails to build closes the ones built
// before it.
func Build(ctx context.Context, h Host, sections Sections, enabled []string) (gs []gate.Gate, closeAll func(), err error) {
	closeAll = func() {
		for i := len(gs) - 1; i >= 0; i-- {
			if c, ok := gs[i].(Closer); ok {
				c.Close()
			}
		}
	}
	for _, m := range Modules() {
		if !slices.Contains(enabled, m.Name) {
			continue
		}
		build := m.Build
		if !Served(h, sections, enabled, m.Name) {
			if m.Unconfigured == nil {
				continue
			}
			build = func(context.Context, Host, any) (gate.Gate, error) { return m.Unconfigured(), nil }
		}
		g, err := build(ctx, h, sections.Of(m.Name))
		if err != nil {
			closeAll()
			return nil, func() {}, err
		}
		gs = append(gs, g)
	}
	return gs, closeAll, nil
}

// Closer is a gate that holds something to release once the server has
// stopped (the relay's sockets and NATS connection).
type Closer interface {
	Close()
}

// SocketCloser is a gate that serves long-lived connections the HTTP
// server does not wait for (WebSockets): CloseSockets closes them at a
// shutdown or when a reload retires the gate, and their peers reconnect.
type SocketCloser interface {
	CloseSockets()
}

// InvalidError is a configuration a module refuses: serve exits 2 with
// its message, having changed nothing.
type InvalidError struct{ Err error }

func (e *InvalidError) Error() string { return e.Err.Error() }
func (e *InvalidError) Unwrap() error { return e.Err }

// Invalidf is an InvalidError of the message.
func Invalidf(format string, args ...any) error {
	return &InvalidError{fmt.Errorf(format, args...)}
}

// UserMessage is err as an operator reads it: a refusal's own message
// (with its field when the message does not name it), else the error.
func UserMessage(err error) string {
	if e, ok := errors.AsType[*contract.Error](err); ok && e.Kind != contract.KindInternal {
		if e.Field != "" && !strings.Contains(e.Message, e.Field) {
			return e.Field + ": " + e.Message
		}
		return e.Message
	}
	return err.Error()
}

// DescribeAll states what each enabled gate serves on h, or why it is
// not served.
func DescribeAll(h Host, sections Sections, enabled []string) {
	for _, m := range Modules() {
		switch {
		case !slices.Contains(enabled, m.Name):
		case !Served(h, sections, enabled, m.Name):
			if m.Unserved != "" {
				h.Log.Info(m.Unserved)
			}
		case m.Describe != nil:
			m.Describe(h, sections.Of(m.Name))
		}
	}
}

// ServedNames are the names of the gates served on h, in Order.
func ServedNames(h Host, sections Sections, enabled []string) []string {
	var out []string
	for _, m := range Modules() {
		if Served(h, sections, enabled, m.Name) {
			out = append(out, m.Name)
		}
	}
	return out
}
