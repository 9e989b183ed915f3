//go:build js && wasm

// Command floor is the edge's floor: a Worker built from only the standard
// library packages the edge itself uses (an HTTP handler and client, JSON,
// regexp, hashing and signatures, structured logs) behind the edge's own
// Fetch bridge, answering GET /readyz. Its weight and its cold start are
// what any Go program serving the edge's requests pays before the edge's
// own code and dependencies (docs/edge.md; TestEdgeBundle and
// BenchmarkEdgeWorkerColdStart build it beside the Worker). It is never
// deployed. Built with -tags caduceus_floor_mcp it also serves POST /mcp
// with the MCP SDK (mcp.go).
package main

import (
	"bytes"
	"crypto/ed25519"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base32"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"regexp"
	"strconv"
	"syscall/js"
	"time"

	"github.com/caduceus-dev/caduceus/deploy/cloudflare/fetch"
)

// routes are the routes the floor adds in files of their own (mcp.go).
var routes []func(*http.ServeMux)

func main() {
	log := slog.New(slog.NewJSONHandler(os.Stderr, nil))
	mux := http.NewServeMux()
	probe := func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(`{"status":"ready"}`))
	}
	mux.HandleFunc("GET /readyz", probe)
	mux.HandleFunc("GET /healthz", probe)
	// One route that uses each package the way the edge does, so the
	// linker keeps what the edge keeps of them.
	mux.HandleFunc("POST /v1/{name}", func(w http.ResponseWriter, r *http.Request) {
		var v map[string]any
		if err := json.NewDecoder(r.Body).Decode(&v); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		re, err := regexp.Compile(r.URL.Query().Get("re"))
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		sum := sha256.Sum256([]byte(r.PathValue("name")))
		mac := hmac.New(sha256.New, sum[:])
		pub, _, _ := ed25519.GenerateKey(nil)
		if u, err := url.Parse(r.URL.Query().Get("upstream")); err == nil {
			if resp, err := http.DefaultClient.Do(&http.Request{Method: http.MethodGet, URL: u, Header: http.Header{}}); err == nil {
				resp.Body.Close()
			}
		}
		var buf bytes.Buffer
		fmt.Fprintf(&buf, "<p>%v</p>", v)
		log.Info("floor", "re", re.String(), "mac", hex.EncodeToString(mac.Sum(nil)), "key", base32.StdEncoding.EncodeToString(pub),
			"at", time.Now(), "page", strconv.Itoa(buf.Len()))
		json.NewEncoder(w).Encode(v)
	})
	for _, add := range routes {
		add(mux)
	}
	js.Global().Set("caduceusServe", js.FuncOf(func(_ js.Value, args []js.Value) any {
		return fetch.NewPromise(func(resolve func(js.Value), reject func(error)) { fetch.Handle(mux, args[0], resolve, reject) })
	}))
	select {}
}
