package main

// The configuration: what serve and every command read, as types and
// pure functions (the layering of file, environment and flags is layer.go).

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"time"

	"github.com/caduceus-dev/caduceus/gate/registry"
	"github.com/caduceus-dev/caduceus/store"
	"go.yaml.in/yaml/v3"
)

// config is what every command reads: file, then environment, then flags.
type config struct {
	Addr     string   `yaml:"addr"`
	Data     string   `yaml:"data"`
	Store    string   `yaml:"store"`
	Gates    []string `yaml:"gates"`
	LogLevel string   `yaml:"log_level"`
	// LogFormat is text (slog's key=value lines, the default) or json.
	LogFormat string `yaml:"log_format"`
	// Sections are the gates' sections as the file holds them (a key
	// that is not a setting of the core), and sections their values:
	// each decoded strictly into its module's type (gate/registry), then
	// layered under the environment and flags.
	Sections map[string]yaml.Node `yaml:",inline"`
	sections registry.Sections
	// NATS routes relay session ownership across connector processes.
	NATS string `yaml:"nats"`
	// Audit checkpoints written by serve (see docs/audit.md).
	Audit auditConfig `yaml:"audit"`
	// MCPAllowedOrigins are the browser origins /mcp accepts.
	MCPAllowedOrigins []string `yaml:"mcp_allowed_origins"`
}

// readConfigFile reads a YAML config file. Unknown keys are refused, and
// relative paths in it (data, store sqlite:PATH, executor.skills,
// executor.scenario) resolve from the file's own directory, so a config
// works from any working directory. Paths given by flags or the
// environment resolve from the working directory as usual.
func readConfigFile(file string) (config, error) {
	var cfg config
	b, err := os.ReadFile(file)
	if err != nil {
		return cfg, &exitError{2, fmt.Errorf("config: %w", err)}
	}
	dec := yaml.NewDecoder(strings.NewReader(string(b)))
	dec.KnownFields(true)
	if err := dec.Decode(&cfg); err != nil && !errors.Is(err, io.EOF) {
		return cfg, &exitError{2, fmt.Errorf("config %s: %w", file, err)}
	}
	dir := filepath.Dir(file)
	rel := func(p string) string {
		if p == "" || filepath.IsAbs(p) {
			return p
		}
		return filepath.Join(dir, p)
	}
	cfg.Data = rel(cfg.Data)
	if err := cfg.decodeSections(b, rel); err != nil {
		return cfg, &exitError{2, fmt.Errorf("config %s: %w", file, err)}
	}
	if prefix, path, params := store.SplitSQLiteName(cfg.Store); prefix != "" {
		cfg.Store = prefix + rel(path) + params
	}
	return cfg, nil
}

// decodeSections decodes each gate's section of the file b into its
// module's type, strictly (an unknown key is refused with its line in the
// file), and resolves its paths with rel. A top-level key no module claims
// is refused, naming the sections there are.
func (c *config) decodeSections(b []byte, rel func(string) string) error {
	c.sections = registry.Sections{}
	var mods []registry.Module
	var known []string
	for _, m := range registry.Modules() {
		if m.Section != "" {
			mods = append(mods, m)
			known = append(known, m.Section)
		}
	}
	for _, key := range slices.Sorted(maps.Keys(c.Sections)) {
		if !slices.Contains(known, key) {
			return fmt.Errorf("unknown setting %q (the sections of gates are %s; docs/configuration.md lists every setting)", key, strings.Join(known, ", "))
		}
	}
	// One struct of every section, each field its module's type, and the
	// core's settings left to an inline map: decoded strictly, so a
	// section's unknown key is refused where the file has it.
	fields := []reflect.StructField{{Name: "Core", Type: reflect.TypeFor[map[string]yaml.Node](), Tag: `yaml:",inline"`}}
	for i, m := range mods {
		fields = append(fields, reflect.StructField{Name: fmt.Sprintf("S%d", i), Type: reflect.TypeOf(m.New()), Tag: reflect.StructTag(`yaml:"` + m.Section + `"`)})
	}
	all := reflect.New(reflect.StructOf(fields))
	for i, m := range mods {
		all.Elem().Field(i + 1).Set(reflect.ValueOf(m.New()))
	}
	dec := yaml.NewDecoder(bytes.NewReader(b))
	dec.KnownFields(true)
	if err := dec.Decode(all.Interface()); err != nil && !errors.Is(err, io.EOF) {
		return err
	}
	for i, m := range mods {
		v := all.Elem().Field(i + 1).Interface()
		if m.Paths != nil {
			m.Paths(v, rel)
		}
		c.sections[m.Name] = v
	}
	return nil
}

func splitList(s string) []string {
	var out []string
	for p := range strings.SplitSeq(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// auditConfig is the audit section of the config: where serve anchors the
// chains outside the database.
type auditConfig struct {
	CheckpointFile     string `yaml:"checkpoint_file"`     // write a checkpoint here on every interval
	CheckpointURL      string `yaml:"checkpoint_url"`      // POST a checkpoint here on every interval
	CheckpointInterval string `yaml:"checkpoint_interval"` // e.g. 5m (default 5m when a target is set)
}

// DefaultCheckpointInterval is how often serve writes a checkpoint when a
// target is configured without an interval.
const DefaultCheckpointInterval = 5 * time.Minute
