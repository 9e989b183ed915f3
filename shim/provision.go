package shim

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"sync"

	"github.com/caduceus-dev/caduceus/contract"
)

// Status of a provision.
type Status string

// Provision statuses. Only active provisions fire; candidate is what issue
// 6's insights propose.
const (
	StatusActive      Status = "active"
	StatusDisabled    Status = "disabled"
	StatusCandidate   Status = "candidate"
	StatusQuarantined Status = "quarantined"
)

// Action is what a fired provision does.
type Action string

// Actions.
const (
	ActionShim            Action = "shim"             // add bounded context to the request
	ActionRespondDirectly Action = "respond_directly" // answer without an upstream call
)

// Placement says where shimmed context goes. The one placement is the
// DESIGN §7 default: a system (chat) or developer (responses) message before
// the last user message, or a text block at the start of the last user
// message (messages).
const PlacementBeforeLastUser = "before_last_user"

// defaultMaxChars bounds a provision's rendered context when it sets none.
const defaultMaxChars = 4000

// The versions of shim.provision.schema.json and shim.context.schema.json
// the server writes provisions and context entries under (seed 002
// $defs/contract_version, 1.x.y): a new minor version adds optional fields,
// a new patch version only clarifies.
//
//   - 1.0.0 (2026-12): records carry contract_version and take tags.
const (
	ProvisionContractVersion = "1.0.0"
	ContextContractVersion   = "1.0.0"
)

// Provision is a caller-scoped rule (DESIGN §7). Version is the server's
// CAS counter; writes send the version they read. ContractVersion is the
// server's too: every decode sets it to ProvisionContractVersion (absent on
// rows written before it was carried).
type Provision struct {
	ContractVersion     string      `json:"contract_version,omitempty"`
	ID                  string      `json:"id"`
	Status              Status      `json:"status,omitempty"`
	Priority            int         `json:"priority,omitempty"`
	Tags                []string    `json:"tags,omitempty"` // HUX tags (seed 002 $defs/tags)
	Match               *Match      `json:"match,omitempty"`
	Triggers            Triggers    `json:"triggers"`
	Action              Action      `json:"action"`
	ContextRefs         []string    `json:"context_refs,omitempty"`
	Placement           string      `json:"placement,omitempty"`
	OncePerConversation bool        `json:"once_per_conversation,omitempty"`
	MaxChars            int         `json:"max_chars,omitempty"`
	Response            *Response   `json:"response,omitempty"`
	FabricGovernance    *Governance `json:"fabric_governance,omitempty"`
	SystemBuiltin       bool        `json:"system_builtin,omitempty"`
	Version             int64       `json:"version,omitempty"`
	UpdatedAt           string      `json:"updated_at,omitempty"`
}

// Match narrows where a provision applies; an empty list matches everything.
type Match struct {
	Protocols []string `json:"protocols,omitempty"` // chat_completions, responses, messages
	Models    []string `json:"models,omitempty"`    // globs: "gpt-*", "claude-*"
	Harnesses []string `json:"harnesses,omitempty"` // the caller key's harness
}

// Triggers are the three tiers. Mode "any" (default) fires on any tier's
// hit, and a tier 1 or 2 hit skips tier 3; mode "all" needs every
// configured tier to hit. A keyword in keyword.none vetoes the provision.
type Triggers struct {
	Mode       string      `json:"mode,omitempty"`
	Keyword    *Keywords   `json:"keyword,omitempty"`
	Regex      []Regex     `json:"regex,omitempty"`
	Path       []string    `json:"path,omitempty"`
	Tool       []string    `json:"tool,omitempty"`
	Semantic   *Semantic   `json:"semantic,omitempty"`
	Micromodel *Micromodel `json:"micromodel,omitempty"`
}

// Keywords are matched case-insensitively on whole words of the last user
// message; a multi-word keyword matches those words in sequence.
type Keywords struct {
	Any  []string `json:"any,omitempty"`
	All  []string `json:"all,omitempty"`
	None []string `json:"none,omitempty"`
}

// Input bounds of the triggers: how much of the last user message tier 1
// and the Local embedder read.
const (
	maxTriggerText = 64 << 10 // bytes of the last user message that triggers read
	maxRegexInput  = 4 << 10  // bytes of it that regex triggers read
)

// Regex is an RE2 pattern matched against the first maxRegexInput bytes of
// the last user message.
type Regex struct {
	Pattern string `json:"pattern"`
}

// Semantic is tier 2: cosine similarity of the last user message to any
// example at or above Threshold.
type Semantic struct {
	Examples  []string `json:"examples"`
	Threshold float64  `json:"threshold,omitempty"`
}

// defaultThreshold is the semantic threshold when a provision sets none.
const defaultThreshold = 0.75

// Micromodel is tier 3: a classifier model asked Question about the last
// user message; it fires on {apply: true, confidence >= MinConfidence}.
type Micromodel struct {
	Model         string  `json:"model"`
	Question      string  `json:"question"`
	MinConfidence float64 `json:"min_confidence,omitempty"`
}

// Response is the answer of a respond_directly provision.
type Response struct {
	Text       string `json:"text"`
	StopReason string `json:"stop_reason,omitempty"` // end_turn (default), max_tokens, stop_sequence
}

// Governance is the fabric_governance lens tag; Governor.Lens enforces it
// (seed 003 H12).
type Governance struct {
	Status          string   `json:"status,omitempty"`
	VisibilityScope string   `json:"visibility_scope,omitempty"`
	Cohort          string   `json:"cohort,omitempty"`
	Harness         []string `json:"harness,omitempty"`
}

// ContextEntry is an atomic noun, verb, detail or uri a provision shims by
// ref. ContractVersion is set by every decode (ContextContractVersion).
type ContextEntry struct {
	ContractVersion string   `json:"contract_version,omitempty"`
	Ref             string   `json:"ref"`
	Kind            string   `json:"kind"` // noun, verb, detail, uri
	Title           string   `json:"title,omitempty"`
	Tags            []string `json:"tags,omitempty"` // HUX tags (seed 002 $defs/tags)
	Body            string   `json:"body"`
	Version         int64    `json:"version,omitempty"`
	SHA256          string   `json:"sha256,omitempty"` // of Body, set by the server
	MaxChars        int      `json:"max_chars,omitempty"`
	Status          string   `json:"status,omitempty"` // active (default), disabled
	SystemBuiltin   bool     `json:"system_builtin,omitempty"`
	UpdatedAt       string   `json:"updated_at,omitempty"`
}

// The schemas compile on first use, not at start: compiling them is most of
// the shim package's start-up (907 ms of an edge isolate's first request
// under Node's Wasm, GODEBUG=inittrace=1), and an isolate that decodes no
// provision never needs them.
var (
	provisionSchema = sync.OnceValue(func() *contract.Schema { return contract.MustSchema("shim.provision.schema.json") })
	contextSchema   = sync.OnceValue(func() *contract.Schema { return contract.MustSchema("shim.context.schema.json") })
)

// DecodeProvision validates b against shim.provision.schema.json and the
// rules a schema cannot say (RE2 patterns compile, globs are well formed, a
// shim names context, a direct answer has text, a micromodel trigger names
// no contributor-tier model: seed 003 H03), and fills defaults. It returns
// an invalid *contract.Error naming the field otherwise (code
// contributor_model_refused for a contributor-tier model).
func DecodeProvision(b []byte) (Provision, error) {
	p, err := decodeValid[Provision](b, provisionSchema(), "provision")
	if err != nil {
		return Provision{}, err
	}
	if err := p.check(); err != nil {
		return Provision{}, err
	}
	p.Defaults()
	p.ContractVersion = ProvisionContractVersion
	return p, nil
}

// Defaults fills what the schema defaults: status active, placement
// before_last_user, trigger mode any.
func (p *Provision) Defaults() {
	if p.Status == "" {
		p.Status = StatusActive
	}
	if p.Placement == "" {
		p.Placement = PlacementBeforeLastUser
	}
	if p.Triggers.Mode == "" {
		p.Triggers.Mode = "any"
	}
}

func (p *Provision) check() error {
	for i, r := range p.Triggers.Regex {
		if _, err := regexp.Compile(r.Pattern); err != nil {
			return contract.FieldError(fmt.Sprintf("/triggers/regex/%d/pattern", i), "bad_regex",
				"field triggers.regex.%d.pattern: not an RE2 pattern: %v", i, err)
		}
	}
	for i, g := range p.Triggers.Path {
		if err := checkGlob(g); err != nil {
			return contract.FieldError(fmt.Sprintf("/triggers/path/%d", i), "bad_glob", "field triggers.path.%d: %v", i, err)
		}
	}
	if p.Match != nil {
		for i, g := range p.Match.Models {
			if err := checkGlob(g); err != nil {
				return contract.FieldError(fmt.Sprintf("/match/models/%d", i), "bad_glob", "field match.models.%d: %v", i, err)
			}
		}
	}
	t := p.Triggers
	if t.Micromodel != nil && IsContributorModel(t.Micromodel.Model) {
		return contract.FieldError("/triggers/micromodel/model", CodeContributorRefused,
			"field triggers.micromodel.model: %q is a contributor-tier model and refused", t.Micromodel.Model)
	}
	if t.Keyword == nil && len(t.Regex) == 0 && len(t.Path) == 0 && len(t.Tool) == 0 && t.Semantic == nil && t.Micromodel == nil {
		return contract.FieldError("/triggers", "no_trigger", "field triggers: at least one trigger is required")
	}
	if t.Keyword != nil && len(t.Keyword.Any) == 0 && len(t.Keyword.All) == 0 && len(t.Keyword.None) == 0 {
		return contract.FieldError("/triggers/keyword", "no_trigger", "field triggers.keyword: name at least one keyword")
	}
	switch p.Action {
	case ActionShim:
		if len(p.ContextRefs) == 0 {
			return contract.FieldError("/context_refs", "missing_field", "field context_refs: a shim provision needs at least one context ref")
		}
	case ActionRespondDirectly:
		if p.Response == nil || strings.TrimSpace(p.Response.Text) == "" {
			return contract.FieldError("/response/text", "missing_field", "field response.text: a respond_directly provision needs response text")
		}
	}
	return nil
}

// DecodeContextEntry validates b against shim.context.schema.json and fills
// defaults and the body's sha256. It returns an invalid *contract.Error
// naming the field otherwise.
func DecodeContextEntry(b []byte) (ContextEntry, error) {
	e, err := decodeValid[ContextEntry](b, contextSchema(), "context entry")
	if err != nil {
		return ContextEntry{}, err
	}
	if e.Status == "" {
		e.Status = "active"
	}
	e.SHA256 = contract.SHA256([]byte(e.Body))
	e.ContractVersion = ContextContractVersion
	return e, nil
}

// decodeValid decodes b as a T after the input rule and schema have
// accepted it; noun names a T in the refusal of a value schema allows but
// T cannot hold.
func decodeValid[T any](b []byte, schema *contract.Schema, noun string) (T, error) {
	var v T
	if err := contract.CheckJSON(b); err != nil {
		return v, err
	}
	if err := schema.ValidateJSON(b); err != nil {
		return v, err
	}
	if err := json.Unmarshal(b, &v); err != nil {
		return v, contract.Invalidf("bad_json", "shim: %s: %v", noun, err)
	}
	return v, nil
}

// CodeContributorRefused is the code of every refusal of a contributor-tier
// model (IsContributorModel): a proxied request naming one (403), a
// provision, embedder or classifier that names one (invalid field).
const CodeContributorRefused = "contributor_model_refused"

// IsContributorModel reports whether a model id names a contributor-tier
// model (it contains "contributor" in any case). Such models are refused.
func IsContributorModel(model string) bool {
	return strings.Contains(strings.ToLower(model), "contributor")
}
