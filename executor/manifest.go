package executor

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"strings"
	"sync"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/caduceus-dev/caduceus/broker"
	"github.com/caduceus-dev/caduceus/contract"
)

// Manifest is a strategist's SKILL.md front matter: the only source of truth
// for its mode, account, limits and compatibility.
type Manifest struct {
	Name         string     `yaml:"name" json:"name"`
	DoNotPromote bool       `yaml:"do_not_promote" json:"do_not_promote"`
	Strategist   Strategist `yaml:"strategist" json:"strategist"`
}

// Strategist is the manifest's strategist block.
type Strategist struct {
	Mode                   string          `yaml:"mode" json:"mode"`
	AssetClass             string          `yaml:"asset_class" json:"asset_class,omitempty"`
	AccountLock            *string         `yaml:"account_lock" json:"account_lock"`
	TimeWindow             string          `yaml:"time_window" json:"time_window,omitempty"`
	Allowlist              []string        `yaml:"allowlist" json:"allowlist"`
	MaxPositionPct         float64         `yaml:"max_position_pct" json:"max_position_pct"`
	MaxConcurrentPositions int             `yaml:"max_concurrent_positions" json:"max_concurrent_positions"`
	CapabilityRequires     []string        `yaml:"capability_requires" json:"capability_requires,omitempty"`
	Assumes                map[string]bool `yaml:"assumes" json:"assumes,omitempty"`
	ProfileCompatibility   []string        `yaml:"profile_compatibility" json:"profile_compatibility"`

	window *timeWindow
}

// ManifestDir is where strategist manifests live under the skills root.
const ManifestDir = "skills/investing/strategists"

// ManifestPath returns the manifest's path relative to the skills root.
func ManifestPath(strategy string) string { return ManifestDir + "/" + strategy + "/SKILL.md" }

// SafeStrategyName reports whether a strategy name may be joined into a
// path: not empty, no "/", no "..", no backslash, no NUL.
func SafeStrategyName(s string) bool {
	return s != "" && !strings.Contains(s, "/") && !strings.Contains(s, "..") &&
		!strings.ContainsAny(s, "\\\x00") && s != "."
}

// errManifestMissing and errPathInvalid distinguish the two pre-flight
// aborts a manifest read can produce.
var (
	errManifestMissing = errors.New("executor: manifest missing")
	errPathInvalid     = errors.New("executor: manifest path invalid")
)

// ReadManifest reads a strategist's SKILL.md from below root, refusing any
// path that leaves root, through ".." or through a symbolic link. It returns
// the file's bytes.
func ReadManifest(root, strategy string) ([]byte, error) {
	if !SafeStrategyName(strategy) {
		return nil, errPathInvalid
	}
	r, err := os.OpenRoot(root)
	if err != nil {
		// The operator's to fix, not an internal failure: say what is missing.
		return nil, &contract.Error{Kind: contract.KindNotFound, Code: "skills_root_missing", Field: "skills",
			Message: fmt.Sprintf("executor: the skills root %q is not a readable directory (serve --skills DIR, executor.skills)", root)}
	}
	defer r.Close()
	b, err := r.ReadFile(ManifestPath(strategy))
	switch {
	case err == nil:
		return b, nil
	case errors.Is(err, fs.ErrNotExist):
		return nil, errManifestMissing
	case strings.Contains(err.Error(), "path escapes from parent"):
		return nil, errPathInvalid
	default:
		var pe *fs.PathError
		if errors.As(err, &pe) && errors.Is(pe.Err, fs.ErrInvalid) {
			return nil, errPathInvalid
		}
		return nil, fmt.Errorf("executor: read manifest: %w", err)
	}
}

// ParseManifest extracts and decodes the YAML front matter of a SKILL.md.
// It returns an invalid *contract.Error naming what is wrong.
func ParseManifest(b []byte) (*Manifest, error) {
	fm, err := frontMatter(b)
	if err != nil {
		return nil, err
	}
	var m Manifest
	if err := yaml.Unmarshal(fm, &m); err != nil {
		return nil, contract.Invalidf("bad_manifest", "executor: manifest front matter: %v", err)
	}
	s := &m.Strategist
	switch {
	case m.Name == "":
		return nil, contract.FieldError("name", "bad_manifest", "executor: manifest has no name")
	case s.Mode != ModeLive && s.Mode != ModeReview:
		return nil, contract.FieldError("strategist.mode", "bad_manifest", "executor: manifest strategist.mode %q is not live or review", s.Mode)
	case !finite(s.MaxPositionPct) || s.MaxPositionPct < 0 || s.MaxPositionPct > 100:
		return nil, contract.FieldError("strategist.max_position_pct", "bad_manifest", "executor: manifest strategist.max_position_pct must be in [0, 100]")
	case s.MaxConcurrentPositions < 0:
		return nil, contract.FieldError("strategist.max_concurrent_positions", "bad_manifest", "executor: manifest strategist.max_concurrent_positions must be >= 0")
	case s.AccountLock != nil && *s.AccountLock == "":
		return nil, contract.FieldError("strategist.account_lock", "bad_manifest", "executor: manifest strategist.account_lock is empty (use null)")
	}
	if s.TimeWindow != "" {
		w, err := parseTimeWindow(s.TimeWindow)
		if err != nil {
			return nil, contract.FieldError("strategist.time_window", "bad_manifest", "executor: manifest strategist.time_window: %v", err)
		}
		s.window = w
	}
	return &m, nil
}

func frontMatter(b []byte) ([]byte, error) {
	b = bytes.TrimPrefix(b, []byte("\xef\xbb\xbf"))
	b = bytes.ReplaceAll(b, []byte("\r\n"), []byte("\n"))
	rest, ok := bytes.CutPrefix(b, []byte("---\n"))
	if !ok {
		return nil, contract.Invalidf("bad_manifest", "executor: manifest does not start with a --- front matter line")
	}
	if bytes.HasPrefix(rest, []byte("---\n")) || bytes.Equal(rest, []byte("---")) {
		return nil, contract.Invalidf("bad_manifest", "executor: manifest front matter is empty")
	}
	end := bytes.Index(rest, []byte("\n---\n"))
	if end < 0 {
		if bytes.HasSuffix(rest, []byte("\n---")) {
			end = len(rest) - 4
		} else {
			return nil, contract.Invalidf("bad_manifest", "executor: manifest front matter has no closing --- line")
		}
	}
	return rest[:end+1], nil
}

// timeWindow is "HH:MM-HH:MM Zone", e.g. "09:30-16:00 America/New_York".
type timeWindow struct {
	from, to int // minutes after midnight
	loc      *time.Location
}

func parseTimeWindow(s string) (*timeWindow, error) {
	span, zone, ok := strings.Cut(strings.TrimSpace(s), " ")
	if !ok {
		zone = "America/New_York"
	}
	a, b, ok := strings.Cut(span, "-")
	if !ok {
		return nil, fmt.Errorf("%q is not HH:MM-HH:MM Zone", s)
	}
	from, err1 := clock(a)
	to, err2 := clock(b)
	if err := errors.Join(err1, err2); err != nil {
		return nil, fmt.Errorf("%q: %v", s, err)
	}
	loc := broker.NewYork
	if zone = strings.TrimSpace(zone); zone != "America/New_York" {
		if loc, err1 = time.LoadLocation(zone); err1 != nil || path.IsAbs(zone) {
			return nil, fmt.Errorf("%q: unknown time zone %q", s, zone)
		}
	}
	return &timeWindow{from: from, to: to, loc: loc}, nil
}

func clock(s string) (int, error) {
	t, err := time.Parse("15:04", strings.TrimSpace(s))
	if err != nil {
		return 0, fmt.Errorf("%q is not HH:MM", s)
	}
	return t.Hour()*60 + t.Minute(), nil
}

// contains reports whether t falls in the window (from inclusive, to
// exclusive; a window whose end is before its start wraps past midnight).
func (w *timeWindow) contains(t time.Time) bool {
	lt := t.In(w.loc)
	m := lt.Hour()*60 + lt.Minute()
	if w.from <= w.to {
		return m >= w.from && m < w.to
	}
	return m >= w.from || m < w.to
}

// manifestCache keeps parsed manifests by the sha256 of their bytes. The
// file is still read on every tick (it is the authoritative source); only
// the parse of bytes already seen is skipped. Parsed manifests are never
// modified after parsing, so sharing them is safe.
type manifestCache struct {
	mu sync.Mutex
	m  map[string]*Manifest
}

const manifestCacheMax = 256

func (c *manifestCache) parse(sum string, b []byte) (*Manifest, error) {
	c.mu.Lock()
	m, ok := c.m[sum]
	c.mu.Unlock()
	if ok {
		return m, nil
	}
	m, err := ParseManifest(b)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	if c.m == nil || len(c.m) >= manifestCacheMax {
		c.m = map[string]*Manifest{}
	}
	c.m[sum] = m
	c.mu.Unlock()
	return m, nil
}
