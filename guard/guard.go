// Package guard is the guardrails' vocabulary and their redaction: the
// kinds of secret and personal data a detector finds, the action a policy
// takes on each (redact, block, flag, off), the typed placeholders that
// replace a redacted value, and the record of what was found — kind, rule,
// action and count, never a value.
//
// The detectors themselves are in guard/detect (gitleaks' rule set, a
// libphonenumber port, checksums); this package names only the Scanner
// they implement, so what imports it (the shim, the relay) links none of
// their weight until the binary wires one in. The edge (js/wasm) wires
// none: its build keeps the detectors' dependencies out (docs/guardrails.md).
package guard

import (
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/caduceus-dev/caduceus/contract"
)

// Kind is a class of finding; the policy names an action per kind.
type Kind string

// Kinds. Secret is every secret rule (gitleaks' rule set: cloud and
// provider keys, tokens, high-entropy assignments; connection strings
// with a password) but private key blocks, which are PrivateKey.
const (
	Secret     Kind = "secret"
	PrivateKey Kind = "private_key"
	Email      Kind = "email"
	Phone      Kind = "phone"
	Card       Kind = "card"
	IBAN       Kind = "iban"
	SSN        Kind = "ssn"
	IP         Kind = "ip"
)

// Kinds lists every kind, in the order records and docs list them.
var Kinds = []Kind{Secret, PrivateKey, Email, Phone, Card, IBAN, SSN, IP}

// Personal reports whether k is personal data (the rest are secrets).
func (k Kind) Personal() bool {
	switch k {
	case Email, Phone, Card, IBAN, SSN, IP:
		return true
	}
	return false
}

// Action is what a policy does with a finding of a kind.
type Action string

// Actions.
const (
	// Off: the kind is not looked for.
	Off Action = "off"
	// Flag: the value passes and the finding is recorded.
	Flag Action = "flag"
	// Redact: the value is replaced by a typed placeholder
	// ([REDACTED:email:1]) before it leaves.
	Redact Action = "redact"
	// Block: a request holding the kind is refused (guardrail_blocked);
	// in an answer, which cannot be refused once it is under way, the
	// value is redacted.
	Block Action = "block"
)

// Direction is which way the text was going.
type Direction string

// Directions.
const (
	Request Direction = "request" // a client's request to the provider (shim)
	Answer  Direction = "answer"  // from the provider to the client
	Inbound Direction = "inbound" // a chat platform's message on its way to the agent (relay)
)

// Finding is one detected value: its kind, the rule that found it and its
// byte span [Start, End) in the scanned text.
type Finding struct {
	Kind  Kind
	Rule  string
	Start int
	End   int
}

// Scanner finds values of the kinds in want in text, sorted by Start and
// not overlapping. guard/detect implements it.
type Scanner interface {
	Scan(text string, want Set) []Finding
}

// Set is a set of kinds, as a bit set.
type Set uint16

func bit(k Kind) Set {
	if i := slices.Index(Kinds, k); i >= 0 {
		return 1 << i
	}
	return 0
}

// Has reports whether k is in s.
func (s Set) Has(k Kind) bool { return s&bit(k) != 0 }

// Policy is an action per kind; a kind it does not name is Off. The zero
// Policy looks for nothing.
type Policy map[Kind]Action

// Action is p's action for k (Off when p does not name it).
func (p Policy) Action(k Kind) Action {
	if a, ok := p[k]; ok {
		return a
	}
	return Off
}

// Want is the set of kinds p looks for (every kind not Off).
func (p Policy) Want() Set {
	var s Set
	for k, a := range p {
		if a != Off && a != "" {
			s |= bit(k)
		}
	}
	return s
}

// Active reports whether p looks for anything: a policy that does not
// scans nothing.
func (p Policy) Active() bool { return p.Want() != 0 }

// Config is the guardrails section of a config file (shim.guardrails, a
// relay platform's guardrails): an action per kind, "default" for the
// kinds not named, and per-plan overrides (shim only) merged over it.
//
//	guardrails:
//	  default: flag
//	  secret: redact
//	  private_key: block
//	  plans:
//	    strict: {email: block, phone: block}
type Config struct {
	Actions map[string]Action  `yaml:",inline" json:"-"`
	Plans   map[string]Actions `yaml:"plans,omitempty" json:"plans,omitempty"`
}

// Actions is an action per kind name ("default" for the rest).
type Actions map[string]Action

// Validate checks every kind and action named, at where (the config path,
// "shim.guardrails"); plans lists the plans an override may name (nil:
// overrides are not allowed there).
func (c Config) Validate(where string, plans []string) error {
	if err := Actions(c.Actions).validate(where); err != nil {
		return err
	}
	if len(c.Plans) > 0 && plans == nil {
		return fmt.Errorf("%s.plans: per-plan overrides are not allowed here", where)
	}
	for _, name := range sortedKeys(c.Plans) {
		if !slices.Contains(plans, name) {
			return fmt.Errorf("%s.plans: %q is not a plan (shim.plans names %s)", where, name, orNone(plans))
		}
		if err := c.Plans[name].validate(where + ".plans." + name); err != nil {
			return err
		}
	}
	return nil
}

func orNone(xs []string) string {
	if len(xs) == 0 {
		return "none"
	}
	return strings.Join(xs, ", ")
}

func (a Actions) validate(where string) error {
	for _, k := range sortedKeys(a) {
		if k != "default" && !slices.Contains(Kinds, Kind(k)) {
			return fmt.Errorf("%s: unknown kind %q: want default or one of %s", where, k, kindNames())
		}
		switch a[k] {
		case Off, Flag, Redact, Block:
		default:
			return fmt.Errorf("%s.%s: unknown action %q: want redact, block, flag or off", where, k, a[k])
		}
	}
	return nil
}

func kindNames() string {
	names := make([]string, len(Kinds))
	for i, k := range Kinds {
		names[i] = string(k)
	}
	return strings.Join(names, ", ")
}

func sortedKeys[V any](m map[string]V) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}

// Policy is the policy of plan ("" or a plan without an override: the
// section's own): default first, then each kind named, then the plan's
// default and kinds.
func (c Config) Policy(plan string) Policy {
	p := Policy{}
	apply := func(a Actions) {
		if d, ok := a["default"]; ok {
			for _, k := range Kinds {
				p[k] = d
			}
		}
		for name, act := range a {
			if name != "default" {
				p[Kind(name)] = act
			}
		}
	}
	apply(c.Actions)
	if o, ok := c.Plans[plan]; ok && plan != "" {
		apply(o)
	}
	return p
}

// Active reports whether any policy of c looks for anything.
func (c Config) Active() bool {
	if c.Policy("").Active() {
		return true
	}
	for name := range c.Plans {
		if c.Policy(name).Active() {
			return true
		}
	}
	return false
}

// Record is one line of a record's guardrails list: how many values of a
// kind a rule found going one way, and what was done. It never holds a
// value.
type Record struct {
	Direction Direction `json:"direction"`
	Kind      Kind      `json:"kind"`
	Rule      string    `json:"rule"`
	Action    Action    `json:"action"`
	Count     int       `json:"count"`
}

// Sensitivity is the HUX sensitivity of a record whose guardrails list is
// recs: restricted when a secret or private key was found, personal when
// personal data was, "" when nothing was.
func Sensitivity(recs []Record) contract.Sensitivity {
	s := contract.Sensitivity("")
	for _, r := range recs {
		if !r.Kind.Personal() {
			return contract.SensitivityRestricted
		}
		s = contract.SensitivityPersonal
	}
	return s
}

// Redactor applies a policy to the text of one request (or one answer,
// or one inbound message): it scans, replaces what the policy redacts with
// placeholders — the same value the same placeholder, numbered per kind in
// the order first seen — and tallies what it found. It is not safe for
// concurrent use.
type Redactor struct {
	scan   Scanner
	policy Policy
	want   Set
	// dir is the direction recorded; answers record block as redact.
	dir   Direction
	seen  map[string]string // value -> placeholder
	next  map[Kind]int
	tally map[tallyKey]int
	// Blocked lists the kinds a Block action found, in the order found.
	Blocked []Kind
}

type tallyKey struct {
	kind   Kind
	rule   string
	action Action
}

// NewRedactor returns a Redactor of policy over scan for text going dir.
func NewRedactor(scan Scanner, policy Policy, dir Direction) *Redactor {
	return &Redactor{scan: scan, policy: policy, want: policy.Want(), dir: dir,
		seen: map[string]string{}, next: map[Kind]int{}, tally: map[tallyKey]int{}}
}

// Scanner is r's scanner.
func (r *Redactor) Scanner() Scanner { return r.scan }

// Direction is the direction r records.
func (r *Redactor) Direction() Direction { return r.dir }

// Share makes r number placeholders with o's: the same value gets the same
// placeholder in a request and in its answer.
func (r *Redactor) Share(o *Redactor) {
	r.seen, r.next = o.seen, o.next
}

// Redact returns text with every finding the policy redacts replaced, and
// whether anything was (text itself when nothing was). Findings under
// Flag are tallied and kept; under Block they are tallied, added to
// Blocked and, in an answer, redacted.
func (r *Redactor) Redact(text string) (string, bool) {
	if r.want == 0 || text == "" {
		return text, false
	}
	fs := r.scan.Scan(text, r.want)
	if len(fs) == 0 {
		return text, false
	}
	out := r.apply(text, fs)
	return out, out != text
}

func (r *Redactor) count(f Finding, act Action) {
	if act == Block {
		if !slices.Contains(r.Blocked, f.Kind) {
			r.Blocked = append(r.Blocked, f.Kind)
		}
		if r.dir == Answer {
			act = Redact // an answer under way cannot be refused
		}
	}
	r.tally[tallyKey{f.Kind, f.Rule, act}]++
}

func (r *Redactor) placeholder(k Kind, value string) string {
	key := string(k) + "\x00" + value
	if p, ok := r.seen[key]; ok {
		return p
	}
	r.next[k]++
	p := Placeholder(k, r.next[k])
	r.seen[key] = p
	return p
}

// Placeholder is the n-th placeholder of kind k: [REDACTED:k:n].
func Placeholder(k Kind, n int) string {
	return "[REDACTED:" + string(k) + ":" + strconv.Itoa(n) + "]"
}

// Records is what r found, sorted by kind (Kinds' order), rule and action.
func (r *Redactor) Records() []Record {
	if len(r.tally) == 0 {
		return nil
	}
	out := make([]Record, 0, len(r.tally))
	for k, n := range r.tally {
		out = append(out, Record{Direction: r.dir, Kind: k.kind, Rule: k.rule, Action: k.action, Count: n})
	}
	SortRecords(out)
	return out
}

// SortRecords sorts recs by direction, kind (Kinds' order), rule and
// action.
func SortRecords(recs []Record) {
	slices.SortFunc(recs, func(a, b Record) int {
		if c := strings.Compare(string(a.Direction), string(b.Direction)); c != 0 {
			return -c // request before answer
		}
		if c := slices.Index(Kinds, a.Kind) - slices.Index(Kinds, b.Kind); c != 0 {
			return c
		}
		if c := strings.Compare(a.Rule, b.Rule); c != 0 {
			return c
		}
		return strings.Compare(string(a.Action), string(b.Action))
	})
}

// BlockedMessage is the message of a guardrail_blocked refusal: the kinds
// found, never a value.
func BlockedMessage(kinds []Kind) string {
	names := make([]string, len(kinds))
	for i, k := range kinds {
		names[i] = string(k)
	}
	return "guardrails: the request holds " + strings.Join(names, ", ") + ", which this key's policy blocks"
}

// CodeBlocked is the error code of a request a guardrail blocked.
const CodeBlocked = "guardrail_blocked"
