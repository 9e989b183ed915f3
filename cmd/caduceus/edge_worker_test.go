package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/caduceus-dev/caduceus/internal/nodetest"

	"github.com/anthropics/anthropic-sdk-go/v2"
	aoption "github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/caduceus-dev/caduceus/shim/wire"
)

// The admin tokens the Worker under test adopts: slot-1's and slot-3's.
const (
	edgeAdminKey  = "cad_0123456789abcdef_abcdefghijklmnopqrstuvwxyz234567abcdefghijklmnopqrst"
	edgeAdminKey3 = "cad_fedcba9876543210_abcdefghijklmnopqrstuvwxyz234567abcdefghijklmnopqrst"
	// edgeSecret is the X-Edge-Auth both sides require (CADUCEUS_EDGE_SECRET).
	edgeSecret = "edge-secret-0123456789abcdef"
)

// buildWorker builds the Worker (`make edge` does the same) into a
// directory of its own beside deploy/cloudflare's sources and returns it:
// worker.mjs, miniflare.mjs, dist/ and node_modules (npm ci in
// deploy/cloudflare when it has none; Node and npm must be on the PATH).
func buildWorker(t testing.TB) string {
	t.Helper()
	return buildWorkerOf(t, "./deploy/cloudflare")
}

// buildWorkerOf is buildWorker with the Go program pkg as the Worker's
// (./deploy/cloudflare/floor for the floor), built with the go build flags
// given (-tags=caduceus_floor_mcp for the floor with the MCP SDK).
func buildWorkerOf(t testing.TB, pkg string, flags ...string) string {
	t.Helper()
	src, err := filepath.Abs("../../deploy/cloudflare")
	if err != nil {
		t.Fatal(err)
	}
	if err := nodetest.NPMCI(src); err != nil {
		t.Fatalf("the Worker's test runs it under miniflare: %v", err)
	}
	dir := t.TempDir()
	args := append([]string{"build", "-trimpath", "-ldflags=-s -w"}, flags...)
	build := exec.Command("go", append(args, "-o", filepath.Join(dir, "dist", "caduceus.wasm"), pkg)...)
	build.Dir = filepath.Dir(filepath.Dir(src))
	build.Env = append(os.Environ(), "GOOS=js", "GOARCH=wasm")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building the Worker: %v\n%s", err, out)
	}
	copyInto(t, filepath.Join(runtime.GOROOT(), "lib", "wasm", "wasm_exec.js"), filepath.Join(dir, "dist", "wasm_exec.js"))
	for _, f := range []string{"worker.mjs", "start.mjs", "miniflare.mjs", "package.json"} {
		copyInto(t, filepath.Join(src, f), filepath.Join(dir, f))
	}
	if err := os.Symlink(filepath.Join(src, "node_modules"), filepath.Join(dir, "node_modules")); err != nil {
		t.Fatal(err)
	}
	return dir
}

func copyInto(t testing.TB, from, to string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(to), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := copyFile(from, to); err != nil {
		t.Fatal(err)
	}
}

var workerListenRE = regexp.MustCompile(`listening on (http://\S+)`)

// workerProc is the Worker running under miniflare: its URL and the
// process (node) that runs it.
type workerProc struct {
	url string
	cmd *exec.Cmd
}

// startWorker runs the Worker in dir under miniflare (workerd, with D1)
// with env as its bindings; it is stopped when the test ends.
func startWorker(t testing.TB, dir string, env ...string) workerProc {
	t.Helper()
	migrations, err := filepath.Abs("../../edge/migrations")
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("node", "miniflare.mjs", "0")
	cmd.Dir = dir
	cmd.Env = append(append(os.Environ(), "CADUCEUS_D1_MIGRATIONS="+migrations), env...)
	stderr := &syncBuffer{}
	cmd.Stderr = stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("node miniflare.mjs: %v", err)
	}
	t.Cleanup(func() {
		cmd.Process.Signal(os.Interrupt)
		done := make(chan struct{})
		go func() { cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			cmd.Process.Kill()
		}
	})
	found := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if m := workerListenRE.FindStringSubmatch(sc.Text()); m != nil {
				found <- m[1]
			}
		}
	}()
	select {
	case u := <-found:
		return workerProc{url: u, cmd: cmd}
	case <-time.After(60 * time.Second):
		t.Fatalf("the Worker did not start under miniflare: %s", stderr.String())
	}
	return workerProc{}
}

// edgeUpstream is the LLM provider both sides forward to, and the tier 3
// classifier both ask: it records the body of the last request and
// answers one chat completion (for the classifier's model, a verdict that
// applies).
type edgeUpstream struct {
	url  string // where it listens
	mu   sync.Mutex
	last string
}

func (u *edgeUpstream) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	b, _ := io.ReadAll(r.Body)
	u.mu.Lock()
	u.last = r.Method + " " + r.URL.Path + " " + r.Header.Get("Authorization") + "\n" + string(b)
	u.mu.Unlock()
	if r.URL.Path == "/bundle.json" { // a provision source for POST /v1/sync
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"provisions":[{"id":"PROV-SYNCED","version":3,"triggers":{"keyword":{"any":["tessera"]}},"action":"respond_directly","response":{"text":"synced from the source"},"fabric_governance":{"status":"verified","visibility_scope":"public"}},{"id":"PROV-UNGOVERNED","version":1,"triggers":{"keyword":{"any":["x"]}},"action":"respond_directly","response":{"text":"x"}}]}`)
		return
	}
	if bytes.Contains(b, []byte(`"model":"tiny-classifier"`)) {
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"choices":[{"index":0,"message":{"role":"assistant","content":"{\"apply\":true,\"confidence\":0.9}"}}]}`)
		return
	}
	if bytes.Contains(b, []byte("cut me off")) { // one chunk, then the connection drops
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, "data: {\"id\":\"chatcmpl-1\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"gpt-4o-mini\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"half an \"},\"finish_reason\":null}]}\n\n")
		w.(http.Flusher).Flush()
		if conn, _, err := http.NewResponseController(w).Hijack(); err == nil {
			conn.Close()
		}
		return
	}
	if bytes.Contains(b, []byte(`"stream":true`)) {
		w.Header().Set("Content-Type", "text/event-stream")
		for _, part := range []string{"from ", "upstream"} {
			fmt.Fprintf(w, "data: {\"id\":\"chatcmpl-1\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"gpt-4o-mini\",\"choices\":[{\"index\":0,\"delta\":{\"content\":%q},\"finish_reason\":null}]}\n\n", part)
			w.(http.Flusher).Flush()
		}
		io.WriteString(w, "data: [DONE]\n\n")
		return
	}
	w.Header().Set("Content-Type", "application/json")
	io.WriteString(w, `{"id":"chatcmpl-1","object":"chat.completion","created":1,"model":"gpt-4o-mini","choices":[{"index":0,"message":{"role":"assistant","content":"from upstream"},"finish_reason":"stop"}]}`)
}

func (u *edgeUpstream) take() string {
	u.mu.Lock()
	defer u.mu.Unlock()
	s := u.last
	u.last = ""
	return s
}

// exchange is one request of the parity scenario and what came back, with
// ids, keys and times replaced by placeholders (normalize).
type exchange struct {
	name, status, contentType, etag, body, upstream string
}

var normalizers = []struct {
	re   *regexp.Regexp
	with string
}{
	{regexp.MustCompile(`cad_[0-9a-f]{16}_[a-z2-7]{52}`), "<token>"},
	{regexp.MustCompile(`usr_[0-9a-f]{64}`), "<subject>"},
	{regexp.MustCompile(`[0-9A-HJKMNP-TV-Z]{26}`), "<ulid>"},
	{regexp.MustCompile(`\b[0-9a-f]{16}\b`), "<key id>"},
	{regexp.MustCompile(`\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z`), "<time>"},
	{regexp.MustCompile(`(\\?")(created|created_at)(\\?"):\d+`), `$1$2$3:<unix>`}, // in JSON, or in JSON in a string
	{regexp.MustCompile(`sha256:[0-9a-f]{64}`), "<hash>"},
	{regexp.MustCompile(`conv_[0-9a-f]{32}`), "<conversation>"},
	{regexp.MustCompile(`"overhead_us":\d+`), `"overhead_us":<n>`},
}

func normalize(s string) string {
	for _, n := range normalizers {
		s = n.re.ReplaceAllString(s, n.with)
	}
	return s
}

// edgeScenario runs the parity scenario against base (admin and admin3 are
// its admin keys of slot-1 and slot-3) and returns every exchange. Both
// sides forward to up.
func edgeScenario(t *testing.T, base, admin, admin3 string, up *edgeUpstream) []exchange {
	t.Helper()
	var out []exchange
	send := func(name, method, path, key, body string, hdr ...string) (exchange, []byte, http.Header) {
		t.Helper()
		req, _ := http.NewRequestWithContext(t.Context(), method, base+path, strings.NewReader(body))
		if body != "" {
			req.Header.Set("Content-Type", "application/json")
		}
		req.Header.Set("X-Edge-Auth", edgeSecret)
		if key != "" {
			req.Header.Set("Authorization", "Bearer "+key)
			req.Header.Set("X-Caduceus-Harness", "claude-code")
		}
		for i := 0; i+1 < len(hdr); i += 2 {
			req.Header.Set(hdr[i], hdr[i+1])
		}
		// A connection that carried a cut stream is not reused: serve cuts
		// it; workerd resets it after an aborted body (a pooled client saw
		// ECONNRESET on its next request over it).
		req.Close = strings.Contains(name, "cut")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		x := exchange{name: name, status: resp.Status, contentType: resp.Header.Get("Content-Type"), etag: resp.Header.Get("ETag"),
			body: normalize(string(b)), upstream: normalize(up.take())}
		out = append(out, x)
		return x, b, resp.Header
	}
	newKey := func(name, admin, spec string) string {
		_, b, _ := send(name, "POST", "/v1/admin/keys", admin, spec)
		var k struct{ Key string }
		if err := json.Unmarshal(b, &k); err != nil || k.Key == "" {
			t.Fatalf("%s: %s", name, b)
		}
		return k.Key
	}
	key := newKey("key of slot-1", admin, `{"tenant":"slot-1","scopes":["route","configure"],"harness":"claude-code"}`)
	send("key of another tenant", "POST", "/v1/admin/keys", admin, `{"tenant":"slot-3","scopes":["route"]}`)
	other := newKey("key of slot-3", admin3, `{"tenant":"slot-3","scopes":["route","configure"],"harness":"claude-code"}`)

	// Provisions and context, with If-Match.
	send("create direct answer", "POST", "/v1/provisions", key, `{"id":"PROV-REFUNDS","triggers":{"keyword":{"any":["refund"]}},"action":"respond_directly","response":{"text":"Refunds take 14 days.","stop_reason":"end_turn"}}`)
	send("create shim", "POST", "/v1/provisions", key, `{"id":"PROV-DEPLOY","triggers":{"keyword":{"any":["deploy"]}},"action":"shim","context_refs":["verb:deploy"]}`)
	send("create context", "POST", "/v1/context", key, `{"ref":"verb:deploy","kind":"verb","title":"Deploying","body":"Deploy with make deploy-staging first."}`)
	send("create again", "POST", "/v1/provisions", key, `{"id":"PROV-REFUNDS","triggers":{"keyword":{"any":["x"]}},"action":"respond_directly","response":{"text":"x"}}`)
	_, _, h := send("get", "GET", "/v1/provisions/PROV-REFUNDS", key, "")
	send("update with a stale If-Match", "PUT", "/v1/provisions/PROV-REFUNDS", key, `{"id":"PROV-REFUNDS","triggers":{"keyword":{"any":["refund"]}},"action":"respond_directly","response":{"text":"stale"}}`, "If-Match", `"7"`)
	send("update with If-Match", "PUT", "/v1/provisions/PROV-REFUNDS", key, `{"id":"PROV-REFUNDS","triggers":{"keyword":{"any":["refund","refunds"]}},"action":"respond_directly","response":{"text":"Refunds take 14 days.","stop_reason":"end_turn"}}`, "If-Match", h.Get("ETag"))
	send("delete with a stale If-Match", "DELETE", "/v1/provisions/PROV-REFUNDS", key, "", "If-Match", h.Get("ETag"))
	send("bad provision", "POST", "/v1/provisions", key, `{"id":"PROV-BAD","action":"respond_directly"}`)
	send("list", "GET", "/v1/provisions", key, "")
	// system_builtin rows: an admin key's to write, no one else's.
	builtin := `{"id":"PROV-GREETING","system_builtin":true,"triggers":{"keyword":{"any":["hello"]}},"action":"respond_directly","response":{"text":"Hello from the builtins."}}`
	send("builtin by a configure key", "POST", "/v1/provisions", key, builtin)
	operator := newKey("admin key with a harness", admin, `{"tenant":"slot-1","scopes":["admin","configure","route"],"harness":"claude-code"}`)
	send("builtin by an admin key", "POST", "/v1/provisions", operator, builtin)

	// A direct answer in each protocol, whole and streamed.
	for _, stream := range []string{"false", "true"} {
		send("chat completions, stream "+stream, "POST", "/v1/chat/completions", key, `{"model":"gpt-4o-mini","stream":`+stream+`,"messages":[{"role":"user","content":"how do I get a refund?"}]}`)
		send("responses, stream "+stream, "POST", "/v1/responses", key, `{"model":"gpt-4o-mini","stream":`+stream+`,"input":"how do I get a refund?"}`)
		send("messages, stream "+stream, "POST", "/v1/messages", key, `{"model":"claude-sonnet-4","max_tokens":64,"stream":`+stream+`,"messages":[{"role":"user","content":"refund please"}]}`)
	}
	// A context shim forwarded upstream, and a contributor model refused.
	send("shimmed and forwarded", "POST", "/v1/chat/completions", key, `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"please deploy the payments service"}]}`)
	send("shimmed and forwarded, streamed", "POST", "/v1/chat/completions", key, `{"model":"gpt-4o-mini","stream":true,"messages":[{"role":"user","content":"please deploy the payments service"}]}`)
	// Entity memory and rule outcomes: a follow-up turn in the same
	// conversation naming a file and an error after the shimmed one.
	send("follow-up with an error", "POST", "/v1/chat/completions", key, `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"please deploy the payments service"},{"role":"assistant","content":"from upstream"},{"role":"user","content":"deploy failed in src/payments/handler.go with TypeError: amount is undefined"}]}`)
	send("memory", "GET", "/v1/memory", key, "")
	send("outcomes", "GET", "/v1/outcomes", key, "")
	send("insights", "GET", "/v1/insights", key, "")
	// The upstream cuts a forwarded stream after its first chunk.
	send("cut by the upstream", "POST", "/v1/chat/completions", key, `{"model":"gpt-4o-mini","stream":true,"messages":[{"role":"user","content":"deploy, and cut me off"}]}`)
	send("contributor model", "POST", "/v1/chat/completions", key, `{"model":"acme-Contributor-7b","messages":[{"role":"user","content":"hello"}]}`)
	send("bad key", "POST", "/v1/messages", "cad_ffffffffffffffff_abcdefghijklmnopqrstuvwxyz234567abcdefghijklmnopqrst", `{"model":"claude-sonnet-4","max_tokens":8,"messages":[{"role":"user","content":"hi"}]}`)

	// Tier 3: a micromodel trigger asks the classifier, which says it
	// applies; then the provision is deleted with its ETag.
	send("create micromodel provision", "POST", "/v1/provisions", key, `{"id":"PROV-BILLING","triggers":{"micromodel":{"model":"tiny-classifier","question":"Is the user asking about billing?","min_confidence":0.7}},"action":"respond_directly","response":{"text":"classifier fired"}}`)
	send("classifier fires", "POST", "/v1/chat/completions", key, `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"why was my card charged twice"}]}`)
	send("delete with If-Match", "DELETE", "/v1/provisions/PROV-BILLING", key, "", "If-Match", `"1"`)
	// Governed provisions synced from an allowed source (one refused for
	// want of governance), then answering; a source outside the allowlist
	// is refused.
	send("sync", "POST", "/v1/sync", key, `{"source":"`+up.url+`/bundle.json"}`)
	send("synced provision answers", "POST", "/v1/chat/completions", key, `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"what does tessera say?"}]}`)
	send("sync outside the allowlist", "POST", "/v1/sync", key, `{"source":"http://169.254.169.254/latest"}`)
	// Without the edge secret nothing gets through, in the route's own envelope.
	send("without the edge secret", "POST", "/v1/messages", key, `{"model":"claude-sonnet-4","max_tokens":8,"messages":[{"role":"user","content":"refund"}]}`, "X-Edge-Auth", "not-the-secret")
	send("management without the edge secret", "GET", "/v1/provisions", key, "", "X-Edge-Auth", "")
	// A browser navigation is refused even with a key.
	send("browser navigation", "GET", "/v1/provisions", key, "", "Sec-Fetch-Mode", "navigate", "Accept", "text/html")
	// Another tenant's key sees nothing of slot-1's.
	send("other tenant lists", "GET", "/v1/provisions", other, "")
	send("other tenant gets", "GET", "/v1/provisions/PROV-REFUNDS", other, "")
	send("other tenant's turn", "POST", "/v1/chat/completions", other, `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"how do I get a refund?"}]}`)
	send("receipts", "GET", "/v1/receipts?limit=3", key, "")

	// The public preview, the stateless MCP endpoint and discovery.
	send("preview", "POST", "/api/preview", "", `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hello, refund please"}]}`)
	send("mcp tools/list", "POST", "/mcp", key, `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`, "Accept", "application/json, text/event-stream")
	send("mcp tools/call", "POST", "/mcp", key, `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"shim_preview","arguments":{"protocol":"chat","request":{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hello, refund please"}]}}}}`, "Accept", "application/json, text/event-stream")
	send("mcp discovery", "GET", "/.well-known/mcp.json", "", "")
	return out
}

// TestEdgeWorkerParity (seed 003 edge): the Worker — the Go
// shim core compiled to Wasm, under miniflare's workerd with D1 — and
// `caduceus serve` answer the same scenario the same, apart from ids,
// keys and times: provision CRUD with If-Match, a direct answer in each
// protocol whole and streamed, a context shim forwarded to the same fake
// upstream (which receives the same request), refusals, tenant isolation,
// the public preview, /mcp and discovery. The two route tables differ only
// by what the edge does not serve.
func TestEdgeWorkerParity(t *testing.T) {
	dir := buildWorker(t)
	up := &edgeUpstream{}
	upstream := httptest.NewServer(up)
	defer upstream.Close()
	env := map[string]string{"CADUCEUS_OPENAI_API_KEY": "sk-upstream-secret", "CADUCEUS_EDGE_SECRET": edgeSecret}
	up.url = upstream.URL
	cfg := writeConfig(t, t.TempDir(), "shim:\n  classifier_url: "+upstream.URL+"/v1\n  sync_allow: [\""+upstream.URL+"/bundle\"]\n")
	in := startEnv(t, func(k string) string { return env[k] }, "--config", cfg, "--gates", "shim", "--upstream", "openai="+upstream.URL+"/v1")
	worker := startWorker(t, dir, "CADUCEUS_ADMIN_KEY="+edgeAdminKey+",slot-3="+edgeAdminKey3, "CADUCEUS_OPENAI_URL="+upstream.URL+"/v1", "CADUCEUS_OPENAI_API_KEY=sk-upstream-secret", "CADUCEUS_EDGE_SECRET="+edgeSecret,
		"CADUCEUS_CLASSIFIER_URL="+upstream.URL+"/v1", "CADUCEUS_SYNC_ALLOW="+upstream.URL+"/bundle").url

	_, admin3, _ := cli(t, "keys", "create", "--data", in.data, "--tenant", "slot-3", "--scopes", "admin,route,configure")
	server := edgeScenario(t, in.url, in.adminKey, strings.TrimSpace(admin3), up)
	edge := edgeScenario(t, worker, edgeAdminKey, edgeAdminKey3, up)
	if len(server) != len(edge) {
		t.Fatalf("%d exchanges on the server, %d at the edge", len(server), len(edge))
	}
	for i, s := range server {
		e := edge[i]
		if s.name == "cut by the upstream" {
			// Where serve cuts the connection, the Worker (whose aborted
			// Response reaches the client as a clean end) first sends the
			// wire's error event (TestEdgeCutStreamRaises).
			e.body = strings.Replace(e.body, "data: "+string(wire.ErrorBody(wire.ChatCompletions, 502, "upstream_incomplete", "the upstream broke off the stream"))+"\n\n", "", 1)
		}
		if e != s {
			t.Errorf("%s differs:\nserver: %s %s etag=%q\n%s\nupstream: %s\nedge:   %s %s etag=%q\n%s\nupstream: %s",
				s.name, s.status, s.contentType, s.etag, s.body, s.upstream, e.status, e.contentType, e.etag, e.body, e.upstream)
		}
	}
	// What both answered is what the scenario asks for: the direct answer
	// in every protocol and stream mode, the forwarded turn shimmed with
	// the upstream's key, the other tenant refused its turn.
	for _, x := range edge {
		switch {
		case strings.Contains(x.name, ", stream ") && !strings.Contains(x.body, "Refunds take 14 days."):
			t.Errorf("%s: no direct answer: %s", x.name, x.body)
		case strings.HasPrefix(x.name, "shimmed and forwarded") && (!strings.Contains(x.upstream, "make deploy-staging") || !strings.Contains(x.upstream, "Bearer sk-upstream-secret")):
			t.Errorf("the edge forwarded: %s", x.upstream)
		case x.name == "shimmed and forwarded, streamed" && !strings.Contains(x.body, `"content":"upstream"`):
			t.Errorf("the edge streamed: %s", x.body)
		case strings.HasSuffix(x.name, "without the edge secret") && !strings.HasPrefix(x.status, "401") && !strings.HasPrefix(x.status, "403"):
			t.Errorf("%s: %s %s", x.name, x.status, x.body)
		case x.name == "cut by the upstream" && (!strings.Contains(x.body, "half an ") || strings.Contains(x.body, "[DONE]") || !strings.Contains(x.body, `"code":"upstream_incomplete"`)):
			t.Errorf("a stream the upstream cut reads as whole at the edge: %s", x.body)
		case x.name == "synced provision answers" && !strings.Contains(x.body, "synced from the source"):
			t.Errorf("a synced provision at the edge: %s", x.body)
		case x.name == "classifier fires" && !strings.Contains(x.body, "classifier fired"):
			t.Errorf("tier 3 at the edge: %s", x.body)
		case x.name == "delete with If-Match" && !strings.HasPrefix(x.status, "204"):
			t.Errorf("delete with If-Match at the edge: %s %s", x.status, x.body)
		case x.name == "other tenant gets" && !strings.HasPrefix(x.status, "404"):
			t.Errorf("another tenant's key read a provision: %s %s", x.status, x.body)
		}
	}

	// The official SDKs against the Worker, each reading a stream its own
	// way: OpenAI's accumulator over a forwarded stream, Anthropic's over a
	// direct answer.
	oc := openai.NewClient(option.WithBaseURL(worker+"/v1/"), option.WithAPIKey(edgeAdminKey), option.WithMaxRetries(0),
		option.WithHeader("X-Edge-Auth", edgeSecret))
	stream := oc.Chat.Completions.NewStreaming(t.Context(), openai.ChatCompletionNewParams{Model: "gpt-4o-mini",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("please deploy the payments service")}})
	acc := openai.ChatCompletionAccumulator{}
	for stream.Next() {
		acc.AddChunk(stream.Current())
	}
	if err := stream.Err(); err != nil || len(acc.Choices) != 1 || acc.Choices[0].Message.Content != "from upstream" {
		t.Errorf("OpenAI SDK streaming through the Worker: %v %+v", err, acc.Choices)
	}
	ac := anthropic.NewClient(aoption.WithBaseURL(worker), aoption.WithAPIKey(edgeAdminKey), aoption.WithMaxRetries(0),
		aoption.WithHeader("X-Edge-Auth", edgeSecret))
	mstream := ac.Messages.NewStreaming(t.Context(), anthropic.MessageNewParams{Model: "claude-sonnet-4", MaxTokens: 64,
		Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("refund please"))}})
	msg := anthropic.Message{}
	for mstream.Next() {
		if err := msg.Accumulate(mstream.Current()); err != nil {
			t.Fatalf("accumulate: %v", err)
		}
	}
	if err := mstream.Err(); err != nil || len(msg.Content) != 1 || msg.Content[0].Text != "Refunds take 14 days." || msg.StopReason != "end_turn" {
		t.Errorf("Anthropic SDK streaming through the Worker: %v %+v", err, msg)
	}

	// Turns racing in the Worker (isolates interleave at every D1 await)
	// each land once, with their receipts, on one unforked chain: seqs
	// 1..n, each record's prev_hash the hash of the one before.
	receipts := func() int {
		var l struct{ Receipts []json.RawMessage }
		if err := json.Unmarshal(edgeCall(t, worker, edgeAdminKey, "/v1/receipts?limit=200", ""), &l); err != nil {
			t.Fatal(err)
		}
		return len(l.Receipts)
	}
	before := receipts()
	var wg sync.WaitGroup
	for range 16 {
		wg.Go(func() {
			req, _ := http.NewRequest("POST", worker+"/v1/chat/completions", strings.NewReader(`{"model":"gpt-4o-mini","messages":[{"role":"user","content":"how do I get a refund?"}]}`))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Authorization", "Bearer "+edgeAdminKey)
			req.Header.Set("X-Edge-Auth", edgeSecret)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Errorf("concurrent turn: %v", err)
				return
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != 200 {
				t.Errorf("concurrent turn: %s %s", resp.Status, body)
			}
		})
	}
	wg.Wait()
	if n := receipts() - before; n != 16 {
		t.Errorf("16 concurrent turns left %d receipts", n)
	}
	type link struct {
		Seq      int64
		Hash     string
		PrevHash string `json:"prev_hash"`
	}
	var tail struct{ Records []link }
	if err := json.Unmarshal(edgeCall(t, worker, edgeAdminKey, "/v1/audit?limit=500", ""), &tail); err != nil || len(tail.Records) < 16 {
		t.Fatalf("audit tail at the edge: %d records, %v", len(tail.Records), err)
	}
	slices.SortFunc(tail.Records, func(a, b link) int { return int(a.Seq - b.Seq) })
	for i, r := range tail.Records {
		if r.Seq != int64(i+1) || i > 0 && r.PrevHash != tail.Records[i-1].Hash {
			t.Fatalf("slot-1's chain at the edge breaks at record %d (seq %d)", i, r.Seq)
		}
	}

	// Discovery: the edge's route table is the server's minus what the edge
	// does not serve.
	paths := func(base string) map[string]bool {
		var doc struct{ Paths map[string]map[string]any }
		if err := json.Unmarshal(edgeCall(t, base, "", "/openapi.json", ""), &doc); err != nil {
			t.Fatal(err)
		}
		out := map[string]bool{}
		for p, ops := range doc.Paths {
			for m := range ops {
				out[strings.ToUpper(m)+" "+p] = true
			}
		}
		return out
	}
	sp, ep := paths(in.url), paths(worker)
	var onlyServer, onlyEdge []string
	for p := range sp {
		if !ep[p] {
			onlyServer = append(onlyServer, p)
		}
	}
	for p := range ep {
		if !sp[p] {
			onlyEdge = append(onlyEdge, p)
		}
	}
	slices.Sort(onlyServer)
	if len(onlyEdge) > 0 || fmt.Sprint(onlyServer) != fmt.Sprint(edgeLeavesOut) {
		t.Errorf("route tables: only on the server %v (want %v), only at the edge %v", onlyServer, edgeLeavesOut, onlyEdge)
	}
	home := string(edgeCall(t, worker, "", "/", ""))
	if !strings.Contains(home, "<svg") || !strings.Contains(home, "shim") {
		t.Errorf("GET / at the edge: %s", home)
	}
}

// edgeLeavesOut are the routes serve has and the Worker does not
// (docs/edge.md): the console, the conversation trails and /metrics.
var edgeLeavesOut = []string{"GET /console", "GET /console/", "GET /metrics", "GET /v1/trail/conversations", "GET /v1/trail/conversations/{id}",
	"POST /console/logout"}
