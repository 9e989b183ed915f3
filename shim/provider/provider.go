// Package provider is the gateway's seam to its upstreams: one Provider per
// route kind (upstream.Kind) says how a call is made to it and how what
// comes back is read. The gateway's pipeline (shim/gateway) knows no kind:
// it asks the route's Provider for the upstream request with its
// credential, for a reader of the answer's events, for a meter of its
// usage, for what a failed status means, and for the translation that
// carries a client of another wire to it.
//
// A kind registers itself (Register, from an init func of its own file):
// openai.go (chat completions, Responses, embeddings) and anthropic.go
// (messages) today. Adding a kind touches no file of the pipeline.
package provider

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"sort"
	"strings"
	"sync"

	"github.com/caduceus-dev/caduceus/contract"
	"github.com/caduceus-dev/caduceus/shim/upstream"
	"github.com/caduceus-dev/caduceus/shim/wire"
)

// Provider is one upstream kind.
type Provider interface {
	// Kind is the route kind it serves.
	Kind() upstream.Kind
	// Class is the HUX provider class of what it serves (seed 002).
	Class() contract.Provider
	// Speaks reports whether it takes a client of wire p asking for model
	// as the client sent it (no translation); model "" asks of any model.
	Speaks(p wire.Protocol, model string) bool
	// Translator carries a client of wire client asking for model to this
	// provider's wire and its answers back; nil when no translation exists.
	Translator(client wire.Protocol, model string) Translator
	// Request is the HTTP request of one call: the URL (the route's base
	// and path, the upstream wire's), the route's credential and what the
	// provider's API requires of every request. The caller adds the
	// client's headers it passes on before sending.
	Request(ctx context.Context, c Call) (*http.Request, error)
	// Foreign reports whether client header k (canonical) belongs to
	// another provider's API: it is not passed on a translated call.
	Foreign(k string) bool
	// Events reads a streamed answer event by event; false when the
	// answer (its header h) is a whole one, not a stream.
	Events(h http.Header, body io.Reader) (Events, bool)
	// Meter reads the usage of one answer in the upstream wire up.
	Meter(up wire.Protocol) Meter
	// Failure reports whether status is a failure and, if so, whether it
	// is definite (the upstream did not run the request: another route
	// may take it) or uncertain.
	Failure(status int) (upstream.Failure, bool)
}

// Call is one upstream call.
type Call struct {
	Route  upstream.Route
	Key    string // the route's credential ("": none)
	Method string // "": POST
	// Model is the model the call asks for ("": none, a retrieval);
	// Stream, whether the client asked for a stream.
	Model  string
	Stream bool
	// Path is the upstream wire's path (/v1/chat/completions) or another
	// of the API's (a token count, a retrieval); RawQuery is the client's.
	Path     string
	RawQuery string
	Body     []byte // nil: none
}

// Events is a streamed answer read event by event.
type Events interface {
	// Next is the next event; io.EOF after the last. An event marked
	// Incomplete was cut off.
	Next() (wire.SSE, error)
}

// Meter collects what an answer reports of its usage.
type Meter interface {
	// Observe reads one JSON document (a whole answer or one event's
	// data) and reports whether it is a chat stream's usage-only chunk.
	Observe(data []byte) (usageOnly bool)
	// Delta counts the bytes of generated text one event carries.
	Delta(data []byte)
	// Usage is what was reported: seen, some usage came; final, the
	// whole of it (not only a stream's opening count).
	Usage() (u upstream.Usage, seen, final bool)
	// Estimate is the usage of an answer cut short before its usage came
	// (requestBytes: the size of the request sent).
	Estimate(requestBytes int) upstream.Usage
}

// Translator carries a client's turn to a provider of another wire.
type Translator interface {
	// Upstream is the wire the translated request is sent in.
	Upstream() wire.Protocol
	// Request is the client's body in the upstream's wire, asking for
	// model ("": the client's), with maxTokens as the output bound when
	// the client gave none and the upstream requires one.
	Request(body []byte, model string, maxTokens int64) ([]byte, error)
	// Answer is a whole 2xx answer in the client's wire.
	Answer(body []byte, created int64) ([]byte, error)
	// ErrorAnswer is an upstream error answer in the client's envelope.
	ErrorAnswer(status int, body []byte) []byte
	// Stream translates one streamed answer event by event.
	Stream(includeUsage bool, created int64) Stream
}

// Stream is one streamed answer's translation.
type Stream interface {
	// Event is the client's events for one upstream event.
	Event(ev wire.SSE) []wire.SSE
	// End is what ends the client's stream when the upstream's ended
	// cleanly without its terminal event.
	End() []wire.SSE
}

var (
	mu        sync.RWMutex
	providers = map[upstream.Kind]Provider{}
)

// Register makes p the provider of its kind; a second of one kind panics
// (a wiring bug).
func Register(p Provider) {
	mu.Lock()
	defer mu.Unlock()
	if _, dup := providers[p.Kind()]; dup {
		panic(fmt.Sprintf("provider: kind %q registered twice", p.Kind()))
	}
	providers[p.Kind()] = p
	spec := upstream.KindSpec{Class: p.Class()}
	if c, ok := p.(RouteChecker); ok {
		spec.Settings, spec.Check, spec.BaseOptional = c.Settings(), c.CheckRoute, c.DefaultBase()
	}
	upstream.RegisterKind(p.Kind(), spec)
}

// CredentialRefused is a Request's failure when the route's credential was
// refused before any call: the token endpoint of an Entra ID application
// or a service account answered that the secret or key is not valid. The
// gateway treats it as an upstream's 401: the route is unhealthy.
type CredentialRefused struct {
	Status int    // the token endpoint's status
	Body   []byte // its answer
	Err    error
}

func (e *CredentialRefused) Error() string { return e.Err.Error() }

func (e *CredentialRefused) Unwrap() error { return e.Err }

// CredentialSource is a provider whose routes take their credential from
// elsewhere than key_env (a service-account key file, the AWS
// environment): Credential says where, or why it is missing, for serve's
// startup log.
type CredentialSource interface {
	Credential(r upstream.Route, getenv func(string) string) (from string, err error)
}

// RouteChecker is a provider with route settings of its own to check
// (upstream.Config.Validate calls it for each route of its kind).
type RouteChecker interface {
	// Settings are the kind's own route settings (api_version, ...).
	Settings() []string
	CheckRoute(name string, r upstream.Route) error
	// DefaultBase reports whether the kind has a base_url of its own.
	DefaultBase() bool
}

// For is the provider of kind; nil when none is registered.
func For(kind upstream.Kind) Provider {
	mu.RLock()
	defer mu.RUnlock()
	return providers[kind]
}

// Kinds are the registered kinds, sorted.
func Kinds() []upstream.Kind {
	mu.RLock()
	defer mu.RUnlock()
	out := make([]upstream.Kind, 0, len(providers))
	for k := range providers {
		out = append(out, k)
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}

// Native are the kinds whose providers speak client wire p, sorted.
func Native(p wire.Protocol) []upstream.Kind {
	var out []upstream.Kind
	for _, k := range Kinds() {
		if For(k).Speaks(p, "") {
			out = append(out, k)
		}
	}
	return out
}

// Endpoint is base joined with path, base's trailing /v1 (the providers'
// documented base URLs carry it) not doubled.
func Endpoint(base, path string) string {
	base = strings.TrimRight(base, "/")
	return strings.TrimSuffix(base, "/v1") + path
}

// newRequest is the request of c with its URL and body; method "" is POST.
func newRequest(ctx context.Context, c Call, path string) (*http.Request, error) {
	url := Endpoint(c.Route.BaseURL, path)
	if c.RawQuery != "" {
		url += "?" + c.RawQuery
	}
	method := c.Method
	if method == "" {
		method = http.MethodPost
	}
	var rd io.Reader
	if c.Body != nil {
		rd = bytesReader(c.Body)
	}
	r, err := http.NewRequestWithContext(ctx, method, url, rd)
	if err != nil {
		return nil, err
	}
	if c.Body != nil {
		r.Header.Set("Content-Type", "application/json")
	}
	return r, nil
}
