//go:build js && wasm

// Command cloudflare is Caduceus at the edge as a Cloudflare Worker: the
// edge package (the server and the shim gate) compiled to WebAssembly,
// reached from worker.mjs, which only hands each request over and answers
// with what comes back. D1 answers the edge's SQL (d1.go); upstream calls
// go out through the Worker's fetch (Go's net/http does that on js/wasm).
// Build with `make edge`; docs/edge.md says how to deploy it.
package main

import (
	"cmp"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"strings"
	"syscall/js"
	"unicode"

	"github.com/caduceus-dev/caduceus/deploy/cloudflare/fetch"
	"github.com/caduceus-dev/caduceus/edge"
	"github.com/caduceus-dev/caduceus/shim"
)

// around is what the Worker serves in front of the edge: nothing but the
// edge, unless a benchmark build (bench.go) puts its own route there.
var around = func(h http.Handler) http.Handler { return h }

// version is stamped by `make edge` (-ldflags -X main.version=...).
var version = "dev"

func main() {
	env := js.Global().Get("caduceusEnv")
	str := func(name string) string {
		if v := env.Get(name); v.Type() == js.TypeString {
			return v.String()
		}
		return ""
	}
	upstreams := map[string]shim.Upstream{}
	for _, p := range []struct{ name, url, key string }{
		{"openai", "CADUCEUS_OPENAI_URL", "CADUCEUS_OPENAI_API_KEY"},
		{"anthropic", "CADUCEUS_ANTHROPIC_URL", "CADUCEUS_ANTHROPIC_API_KEY"},
	} {
		if u := str(p.url); u != "" {
			upstreams[p.name] = shim.Upstream{BaseURL: strings.TrimRight(u, "/"), APIKey: str(p.key)}
		}
	}
	log := slog.New(slog.NewJSONHandler(os.Stderr, nil))
	var classifier shim.Classifier
	if u := str("CADUCEUS_CLASSIFIER_URL"); u != "" {
		classifier = &shim.ChatClassifier{BaseURL: strings.TrimRight(u, "/"), APIKey: str("CADUCEUS_CLASSIFIER_API_KEY")}
	}
	var embedder shim.Embedder
	if u := str("CADUCEUS_EMBEDDINGS_URL"); u != "" {
		embedder = &shim.OpenAIEmbedder{BaseURL: strings.TrimRight(u, "/"), Model: str("CADUCEUS_EMBEDDINGS_MODEL"), APIKey: str("CADUCEUS_EMBEDDINGS_API_KEY")}
	}
	admins, err := edge.ParseAdminKeys(str("CADUCEUS_ADMIN_KEY"))
	var h http.Handler
	if err == nil {
		var e *edge.Edge
		if e, err = edge.New(edge.Config{DB: d1{env.Get("DB")}, AdminKeys: admins, EdgeSecret: cmp.Or(str("CADUCEUS_EDGE_SECRET"), str("HERMA_EDGE_SECRET")),
			Upstreams: upstreams, Offline: str("CADUCEUS_OFFLINE") == "true", Classifier: classifier, Embedder: embedder,
			SyncAllow: strings.FieldsFunc(str("CADUCEUS_SYNC_ALLOW"), func(r rune) bool { return r == ',' || unicode.IsSpace(r) }),
			Transport: fetch.Transport{}, Version: version, Logger: log}); err == nil {
			h = around(e)
		}
	}
	// caduceusServe(request, ctx) answers with a Promise of the Response
	// and hands ctx.waitUntil a Promise that settles when the handler has
	// returned: a stream the client aborts, or a request it leaves, is still
	// recorded after the Response is gone.
	serve := js.FuncOf(func(_ js.Value, args []js.Value) any {
		done, finished := fetch.Deferred()
		if len(args) > 1 && args[1].Type() == js.TypeObject && args[1].Get("waitUntil").Type() == js.TypeFunction {
			args[1].Call("waitUntil", done)
		}
		return fetch.NewPromise(func(resolve func(js.Value), reject func(error)) {
			defer finished()
			if err != nil {
				reject(fmt.Errorf("caduceus edge: %w", err))
				return
			}
			fetch.Handle(h, args[0], resolve, reject)
		})
	})
	js.Global().Set("caduceusServe", serve)
	select {} // serve until the isolate goes
}
