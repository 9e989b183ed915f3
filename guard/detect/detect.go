// Package detect is the guardrails' detectors (a guard.Scanner): secrets
// with gitleaks' default rule set (github.com/zricethezav/gitleaks/v8,
// its config package's embedded gitleaks.toml: cloud and provider keys,
// tokens, private key blocks, high-entropy assignments, each with its
// keywords, entropy floor and allowlists) plus connection strings that
// carry a password, and personal data: e-mail addresses, phone numbers
// (validated by github.com/nyaruka/phonenumbers, a libphonenumber port),
// payment card numbers (Luhn-checked, known issuer prefixes), IBANs
// (mod-97 checksum), US SSNs (dashed, valid areas) and public IP
// addresses (v4 and v6).
//
// Only gitleaks' config package is linked (not its detect package, which
// scans git history and archives): Detector runs the rules itself as
// gitleaks' detector does — keyword prefilter, regex, secret group,
// entropy, rule and global allowlists. The edge's js/wasm build never
// imports this package (docs/guardrails.md).
package detect

import (
	"fmt"
	"math"
	"regexp"
	"slices"
	"strings"
	"sync"

	ahocorasick "github.com/BobuSumisu/aho-corasick"
	"github.com/spf13/viper"
	glconfig "github.com/zricethezav/gitleaks/v8/config"

	"github.com/caduceus-dev/caduceus/guard"
)

// Detector finds secrets and personal data. It is safe for concurrent use.
type Detector struct {
	rules    []rule
	always   []int // rules without keywords: run on every text, whole
	keywords *ahocorasick.Trie
	byWord   map[string][]int // keyword -> rules
	global   []*glconfig.Allowlist
	// Region is the default region of phone numbers written without a
	// country code (libphonenumber's; "US").
	Region string
}

// rule is one gitleaks rule, as the Detector runs it.
type rule struct {
	id      string
	kind    guard.Kind
	re      *regexp.Regexp
	group   int
	entropy float64
	allow   []*glconfig.Allowlist
}

var (
	defaultOnce sync.Once
	defaultDet  *Detector
	defaultErr  error
)

// Default is the Detector of gitleaks' default rule set, built once on
// first use (compiling the rules takes tens of milliseconds; a process
// whose policy looks for nothing never pays it).
func Default() (*Detector, error) {
	defaultOnce.Do(func() { defaultDet, defaultErr = New(glconfig.DefaultConfig) })
	return defaultDet, defaultErr
}

// MustDefault is Default, panicking when gitleaks' embedded rule set does
// not load (a broken build).
func MustDefault() *Detector {
	d, err := Default()
	if err != nil {
		panic(err)
	}
	return d
}

// New returns a Detector of a gitleaks TOML rule set.
func New(toml string) (*Detector, error) {
	v := viper.New()
	v.SetConfigType("toml")
	if err := v.ReadConfig(strings.NewReader(toml)); err != nil {
		return nil, fmt.Errorf("detect: read gitleaks rules: %w", err)
	}
	var vc glconfig.ViperConfig
	if err := v.Unmarshal(&vc); err != nil {
		return nil, fmt.Errorf("detect: decode gitleaks rules: %w", err)
	}
	cfg, err := vc.Translate()
	if err != nil {
		return nil, fmt.Errorf("detect: gitleaks rules: %w", err)
	}
	d := &Detector{global: cfg.Allowlists, byWord: map[string][]int{}, Region: "US"}
	ids := slices.Sorted(func(yield func(string) bool) {
		for id := range cfg.Rules {
			if !yield(id) {
				return
			}
		}
	})
	var words []string
	for _, id := range ids {
		r := cfg.Rules[id]
		// Path rules need a file name; composite rules need their
		// companions; SkipReport rules only feed composites.
		if r.Regex == nil || r.Path != nil || r.SkipReport || len(r.RequiredRules) > 0 {
			continue
		}
		kind := guard.Secret
		if id == "private-key" {
			kind = guard.PrivateKey
		}
		i := len(d.rules)
		d.rules = append(d.rules, rule{id: id, kind: kind, re: r.Regex, group: r.SecretGroup, entropy: r.Entropy, allow: r.Allowlists})
		if len(r.Keywords) == 0 {
			d.always = append(d.always, i)
			continue
		}
		for _, k := range r.Keywords {
			k = strings.ToLower(k)
			if _, ok := d.byWord[k]; !ok {
				words = append(words, k)
			}
			d.byWord[k] = append(d.byWord[k], i)
		}
	}
	d.keywords = ahocorasick.NewTrieBuilder().AddStrings(words).Build()
	return d, nil
}

// Rules is how many secret rules d runs.
func (d *Detector) Rules() int { return len(d.rules) }

// Scan finds the values of the kinds in want in text (guard.Scanner):
// sorted by start, overlaps resolved to the earlier (then the longer).
func (d *Detector) Scan(text string, want guard.Set) []guard.Finding {
	var fs []guard.Finding
	if want.Has(guard.Secret) || want.Has(guard.PrivateKey) {
		fs = d.secrets(text, want, fs)
		if want.Has(guard.Secret) {
			fs = connStrings(text, fs)
		}
	}
	fs = pii(text, want, d.Region, fs)
	if len(fs) < 2 {
		return fs
	}
	slices.SortFunc(fs, func(a, b guard.Finding) int {
		if a.Start != b.Start {
			return a.Start - b.Start
		}
		if a.End != b.End {
			return b.End - a.End
		}
		return rank[a.Kind] - rank[b.Kind]
	})
	out := fs[:1]
	for _, f := range fs[1:] {
		if f.Start >= out[len(out)-1].End {
			out = append(out, f)
		}
	}
	return out
}

// rank orders findings of one span: the most specific check wins (a card
// number that is also a dialable number is a card).
var rank = map[guard.Kind]int{guard.PrivateKey: 0, guard.Secret: 1, guard.Card: 2, guard.IBAN: 3, guard.SSN: 4,
	guard.Email: 5, guard.IP: 6, guard.Phone: 7}

// secrets runs the gitleaks rules whose keywords text holds.
// keyWindow is how far from a keyword a rule looks for its secret, each
// side: gitleaks' rules match within a few hundred bytes of their keyword
// (the generic one's longest reach is about 250).
const keyWindow = 1024

func (d *Detector) secrets(text string, want guard.Set, fs []guard.Finding) []guard.Finding {
	lower := strings.ToLower(text)
	// A rule runs where its keywords stand: on the text around each of
	// them (keyWindow bytes each side), not on the whole text, so a prompt
	// of prose ("… points." holds the vault token rule's "s.") costs a
	// look near each hit rather than a pass over all of it. When lowering
	// changed the text's length (some non-ASCII letters), positions in
	// lower are not positions in text: such a rule runs on the whole text,
	// as a private key block's does.
	hits := map[int][][2]int{} // rule -> windows, in order
	whole := map[int]bool{}
	for _, i := range d.always {
		whole[i] = true
	}
	aligned := len(lower) == len(text)
	for _, m := range d.keywords.MatchString(lower) {
		for _, i := range d.byWord[string(m.Match())] {
			// A private key block runs for kilobytes past its keyword:
			// its rule looks at the whole text.
			if !aligned || d.rules[i].kind == guard.PrivateKey {
				whole[i] = true
				continue
			}
			at := int(m.Pos())
			w := [2]int{max(0, at-keyWindow), min(len(text), at+len(m.Match())+keyWindow)}
			if ws := hits[i]; len(ws) > 0 && ws[len(ws)-1][1] >= w[0] {
				ws[len(ws)-1][1] = max(ws[len(ws)-1][1], w[1]) // overlapping: one window
			} else {
				hits[i] = append(ws, w)
			}
		}
	}
	order := make([]int, 0, len(hits)+len(whole))
	for i := range hits {
		order = append(order, i)
	}
	for i := range whole {
		if _, ok := hits[i]; !ok {
			order = append(order, i)
		}
	}
	slices.Sort(order)
	for _, i := range order {
		r := &d.rules[i]
		if !want.Has(r.kind) {
			continue
		}
		windows := hits[i]
		if whole[i] {
			windows = [][2]int{{0, len(text)}}
		}
		for _, w := range windows {
			for _, m := range r.re.FindAllStringSubmatchIndex(text[w[0]:w[1]], -1) {
				// A match touching a cut edge may be a cut token, or an
				// edge taken for a boundary: the window holds every match
				// near its keyword whole, so it is not one of those.
				if (m[0] == 0 && w[0] > 0) || (m[1] == w[1]-w[0] && w[1] < len(text)) {
					continue
				}
				for k := range m {
					if m[k] >= 0 {
						m[k] += w[0]
					}
				}
				if f, ok := d.finding(text, r, m); ok {
					fs = append(fs, f)
				}
			}
		}
	}
	return fs
}

// finding is the secret of one match of r (its secret group, else its
// first non-empty group, else the match), unless its entropy is too low or
// an allowlist lets it pass.
func (d *Detector) finding(text string, r *rule, m []int) (guard.Finding, bool) {
	start, end := m[0], m[1]
	match := strings.Trim(text[start:end], "\n")
	groups := len(m) / 2
	switch {
	case r.group > 0 && r.group < groups && m[2*r.group] >= 0:
		start, end = m[2*r.group], m[2*r.group+1]
	case r.group == 0:
		for g := 1; g < groups; g++ {
			if m[2*g] >= 0 && m[2*g+1] > m[2*g] {
				start, end = m[2*g], m[2*g+1]
				break
			}
		}
	}
	secret := text[start:end]
	if strings.TrimSpace(secret) == "" {
		return guard.Finding{}, false
	}
	if r.entropy > 0 && entropy(secret) <= r.entropy {
		return guard.Finding{}, false
	}
	line := lineOf(text, m[0], m[1])
	if allowed(d.global, secret, match, line) || allowed(r.allow, secret, match, line) {
		return guard.Finding{}, false
	}
	return guard.Finding{Kind: r.kind, Rule: r.id, Start: start, End: end}, true
}

// allowed applies gitleaks allowlists as its detector does; an allowlist
// that needs a commit or a path (which a prompt has not) never matches
// under AND.
func allowed(lists []*glconfig.Allowlist, secret, match, line string) bool {
	for _, a := range lists {
		target := secret
		switch a.RegexTarget {
		case "match":
			target = match
		case "line":
			target = line
		}
		regex := len(a.Regexes) > 0 && a.RegexAllowed(target)
		stop := false
		if len(a.StopWords) > 0 {
			stop, _ = a.ContainsStopWord(secret)
		}
		if a.MatchCondition == glconfig.AllowlistMatchAnd {
			if len(a.Commits) > 0 || len(a.Paths) > 0 {
				continue
			}
			ok := len(a.Regexes) > 0 || len(a.StopWords) > 0
			if len(a.Regexes) > 0 {
				ok = ok && regex
			}
			if len(a.StopWords) > 0 {
				ok = ok && stop
			}
			if ok {
				return true
			}
			continue
		}
		if regex || stop {
			return true
		}
	}
	return false
}

func lineOf(text string, start, end int) string {
	ls := strings.LastIndexByte(text[:start], '\n') + 1
	le := strings.IndexByte(text[end:], '\n')
	if le < 0 {
		return text[ls:]
	}
	return text[ls : end+le]
}

// entropy is the Shannon entropy of s in bits per character, as gitleaks
// computes it.
func entropy(s string) float64 {
	if s == "" {
		return 0
	}
	counts := map[rune]int{}
	for _, c := range s {
		counts[c]++
	}
	var e float64
	inv := 1 / float64(len(s))
	for _, n := range counts {
		f := float64(n) * inv
		e -= f * math.Log2(f)
	}
	return e
}

// connString is a URL with a password in its userinfo
// (postgres://app:s3cret@db:5432/x): gitleaks has no rule for it.
var connString = regexp.MustCompile(`(?i)\b[a-z][a-z0-9+.-]{1,20}://([^\s:/?#@'"` + "`" + `]{1,128}):([^\s/?#@'"` + "`" + `]{1,256})@[a-z0-9.\[\]-]+`)

// connStrings finds connection strings with a password: the userinfo
// (user and password) is the finding, unless the password is a
// placeholder (${VAR}, <password>, ***, $PGPASSWORD, {{...}}, password).
func connStrings(text string, fs []guard.Finding) []guard.Finding {
	if !strings.Contains(text, "://") {
		return fs
	}
	for _, m := range connString.FindAllStringSubmatchIndex(text, -1) {
		pw := text[m[4]:m[5]]
		if placeholderPassword(pw) {
			continue
		}
		fs = append(fs, guard.Finding{Kind: guard.Secret, Rule: "connection-string", Start: m[2], End: m[5]})
	}
	return fs
}

func placeholderPassword(pw string) bool {
	l := strings.ToLower(pw)
	switch {
	case strings.HasPrefix(pw, "$"), strings.HasPrefix(pw, "%"), strings.HasPrefix(pw, "<") && strings.HasSuffix(pw, ">"),
		strings.HasPrefix(pw, "{{"), strings.HasPrefix(pw, "{"), strings.Trim(pw, "*x.") == "":
		return true
	}
	switch l {
	case "password", "pass", "passwd", "pwd", "secret", "changeme", "example", "redacted", "xxx":
		return true
	}
	return strings.HasPrefix(l, "[redacted")
}
