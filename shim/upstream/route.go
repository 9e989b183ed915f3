package upstream

import (
	"fmt"
	"net/url"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/caduceus-dev/caduceus/contract"
)

// A route: one credential at one base URL, of a kind whose provider
// (shim/provider) registers what the kind takes.

// Kind is the wire an upstream speaks.
type Kind string

// Kinds of upstream.
const (
	KindOpenAI    Kind = "openai"    // chat completions and responses
	KindAnthropic Kind = "anthropic" // messages
)

// KindSpec is what a route kind adds to the configuration: its provider
// class (HUX, seed 002) and a check of its own route settings.
type KindSpec struct {
	Class contract.Provider
	// Settings are the kind's own route settings it takes (api_version,
	// deployments, project, ...); a route of the kind naming another is
	// refused. Check refuses one whose values are wrong, naming it; nil:
	// none to check. BaseOptional: the kind has a default base_url.
	Settings     []string
	Check        func(name string, r Route) error
	BaseOptional bool
}

var (
	kindsMu sync.RWMutex
	kinds   = map[Kind]KindSpec{
		KindOpenAI:    {Class: contract.ProviderCodex},
		KindAnthropic: {Class: contract.ProviderClaude},
	}
)

// RegisterKind lets a route name kind: each provider of the gateway
// (shim/provider) registers its own (the two above are known without).
func RegisterKind(k Kind, spec KindSpec) {
	kindsMu.Lock()
	defer kindsMu.Unlock()
	kinds[k] = spec
}

// knownKind is k's spec, if registered; names lists every kind.
func knownKind(k Kind) (spec KindSpec, ok bool, names string) {
	kindsMu.RLock()
	defer kindsMu.RUnlock()
	all := make([]string, 0, len(kinds))
	for n := range kinds {
		all = append(all, string(n))
	}
	sort.Strings(all)
	spec, ok = kinds[k]
	return spec, ok, strings.Join(all, ", ")
}

// Route is one credential at one base URL, serving some model identities.
type Route struct {
	// Provider is the identity namespace of the models it serves ("openai",
	// "anthropic", "azure", ...); empty: the kind.
	Provider string `json:"provider,omitempty" yaml:"provider"`
	Kind     Kind   `json:"kind" yaml:"kind"`
	// BaseURL with or without a trailing /v1.
	BaseURL string `json:"base_url" yaml:"base_url"`
	// KeyEnv names the environment variable holding the API key; keys are
	// never written in configuration.
	KeyEnv string   `json:"key_env,omitempty" yaml:"key_env"`
	Models []string `json:"models" yaml:"models"`
	// Timeout bounds the wait for an attempt's response headers on this
	// route when no further step may take over ("300s"; empty: as long as
	// the client waits). Past it the attempt failed uncertainly.
	Timeout string `json:"timeout,omitempty" yaml:"timeout"`
	// APIVersion is an azure route's api-version ("": the provider's
	// default); Deployments name the deployment serving each model (a
	// model not listed is served by the deployment of its own name).
	APIVersion  string            `json:"api_version,omitempty" yaml:"api_version"`
	Deployments map[string]string `json:"deployments,omitempty" yaml:"deployments"`
	// Entra is an azure route's Microsoft Entra ID application, whose
	// token goes instead of an api-key.
	Entra *Entra `json:"entra,omitempty" yaml:"entra"`
	// Project, Location and CredentialsFile are a vertex route's: the
	// Google Cloud project and location, and the service-account key
	// (JSON) its OAuth token is fetched with.
	Project         string `json:"project,omitempty" yaml:"project"`
	Location        string `json:"location,omitempty" yaml:"location"`
	CredentialsFile string `json:"credentials_file,omitempty" yaml:"credentials_file"`
	// Region is a bedrock route's AWS region.
	Region string `json:"region,omitempty" yaml:"region"`
}

// Entra is a Microsoft Entra ID application (a service principal) whose
// client-credentials token authorizes an azure route: its tenant, its
// client id, the environment variable holding its secret, and the
// authority (empty: https://login.microsoftonline.com; another cloud's,
// or a test's).
type Entra struct {
	TenantID        string `json:"tenant_id" yaml:"tenant_id"`
	ClientID        string `json:"client_id" yaml:"client_id"`
	ClientSecretEnv string `json:"client_secret_env" yaml:"client_secret_env"`
	Authority       string `json:"authority,omitempty" yaml:"authority"`
}

// kindSettings names the settings of r that belong to one kind or another
// (api_version, deployments, project, ...), as the configuration spells
// them.
func (r Route) kindSettings() []string {
	var out []string
	for _, s := range []struct {
		name string
		set  bool
	}{{"api_version", r.APIVersion != ""}, {"deployments", len(r.Deployments) > 0}, {"entra", r.Entra != nil}, {"project", r.Project != ""},
		{"location", r.Location != ""}, {"credentials_file", r.CredentialsFile != ""}, {"region", r.Region != ""}} {
		if s.set {
			out = append(out, s.name)
		}
	}
	return out
}

// Wait is the route's Timeout (0: none, or not a valid one: Validate
// refuses those).
func (r Route) Wait() time.Duration {
	if r.Timeout == "" {
		return 0
	}
	d, err := time.ParseDuration(r.Timeout)
	if err != nil || d <= 0 {
		return 0
	}
	return d
}

// Serves reports whether the route serves model: one of its models, or a
// pattern of them ("gpt-4.1*" serves "gpt-4.1-2025-04-14"; a pattern a plan
// names is served by the same pattern or a wider one).
func (r Route) Serves(model string) bool {
	for _, m := range r.Models {
		if contract.MatchModel(m, model) || (strings.HasSuffix(model, "*") && contract.MatchModel(m, strings.TrimSuffix(model, "*"))) {
			return true
		}
	}
	return false
}

// ProviderOf is a route's identity namespace.
func (r Route) ProviderOf() string {
	if r.Provider != "" {
		return r.Provider
	}
	return string(r.Kind)
}

// KindClass is the provider class of a route kind: claude for anthropic,
// codex for openai, what its provider registered for another.
func KindClass(k Kind) contract.Provider {
	spec, _, _ := knownKind(k)
	return spec.Class
}

func (r Route) validate(name string) error {
	if !validName(name) {
		return fmt.Errorf("upstream: routes: name %q must be lowercase letters, digits, '-' or '_'", name)
	}
	spec, ok, names := knownKind(r.Kind)
	switch {
	case r.Kind == "":
		return fmt.Errorf("upstream: routes.%s.kind is required (one of %s)", name, names)
	case !ok:
		return fmt.Errorf("upstream: routes.%s.kind %q: want one of %s", name, r.Kind, names)
	}
	for _, s := range r.kindSettings() {
		if !slices.Contains(spec.Settings, s) {
			return fmt.Errorf("upstream: routes.%s.%s is not a setting of a route of kind %s", name, s, r.Kind)
		}
	}
	if spec.Check != nil {
		if err := spec.Check(name, r); err != nil {
			return err
		}
	}
	if r.Provider != "" && !validName(r.Provider) {
		return fmt.Errorf("upstream: routes.%s.provider %q must be lowercase letters, digits, '-' or '_'", name, r.Provider)
	}
	if u, err := url.Parse(r.BaseURL); (r.BaseURL != "" || !spec.BaseOptional) && (err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "") {
		return fmt.Errorf("upstream: routes.%s.base_url %q: want an http(s) URL", name, r.BaseURL)
	}
	if r.KeyEnv != "" && !validEnv(r.KeyEnv) {
		return fmt.Errorf("upstream: routes.%s.key_env %q: want an environment variable name", name, r.KeyEnv)
	}
	if len(r.Models) == 0 {
		return fmt.Errorf("upstream: routes.%s.models: a route serves at least one model", name)
	}
	if r.Timeout != "" {
		if d, err := time.ParseDuration(r.Timeout); err != nil || d <= 0 {
			return fmt.Errorf("upstream: routes.%s.timeout %q: want a positive duration such as 300s", name, r.Timeout)
		}
	}
	seen := map[string]bool{}
	for i, m := range r.Models {
		if m == "" || strings.ContainsFunc(m, func(r rune) bool { return r <= ' ' || r == 0x7f }) {
			return fmt.Errorf("upstream: routes.%s.models[%d] %q: want a model name", name, i, m)
		}
		if j := strings.IndexByte(m, '*'); j >= 0 && j != len(m)-1 {
			return fmt.Errorf("upstream: routes.%s.models[%d] %q: a pattern has one '*', at its end (gpt-4.1*)", name, i, m)
		}
		if contributor(m) {
			return fmt.Errorf("upstream: routes.%s.models[%d] %q: contributor-tier models are refused", name, i, m)
		}
		if seen[m] {
			return fmt.Errorf("upstream: routes.%s.models[%d]: %q is listed twice", name, i, m)
		}
		seen[m] = true
	}
	return nil
}

func validEnv(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('A' <= c && c <= 'Z' || 'a' <= c && c <= 'z' || c == '_' || i > 0 && '0' <= c && c <= '9') {
			return false
		}
	}
	return s != ""
}
