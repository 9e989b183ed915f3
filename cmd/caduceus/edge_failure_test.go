package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/caduceus-dev/caduceus/internal/nodetest"
)

// flakyUpstream is the OpenAI and Anthropic provider of the failure-path
// tests, on all three wires. A prompt holding "cut" gets a stream that
// breaks after its first event (the connection is closed without the
// stream's end); one holding "hold" gets its headers and no body until its caller leaves
// (then held receives how long it was held), or until release closes; any
// other prompt gets a whole answer, or a stream that, after its first
// event, goes on with a delta every 20 ms until its caller leaves (then
// streamHeld receives how long it went on).
type flakyUpstream struct {
	arrived    chan string        // the path of each held whole request as it arrives
	held       chan time.Duration // how long each held whole request waited for its caller to leave
	streamHeld chan time.Duration // the same for held streams
	release    chan struct{}      // closed at the end of the test: every held answer ends
}

func newFlakyUpstream(t *testing.T) (*flakyUpstream, string) {
	u := &flakyUpstream{arrived: make(chan string, 64), held: make(chan time.Duration, 64), streamHeld: make(chan time.Duration, 64), release: make(chan struct{})}
	srv := httptest.NewServer(u)
	t.Cleanup(func() { close(u.release); srv.Close() })
	return u, srv.URL
}

func (u *flakyUpstream) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	b, _ := io.ReadAll(r.Body)
	var req struct {
		Model  string `json:"model"`
		Stream bool   `json:"stream"`
	}
	json.Unmarshal(b, &req)
	messages := strings.HasSuffix(r.URL.Path, "/v1/messages")
	responses := strings.HasSuffix(r.URL.Path, "/responses")
	if bytes.Contains(b, []byte("hold")) {
		// The headers go out at once, the body never: the caller's Fetch
		// has its response, and only closing the body ends the call.
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusOK)
		w.(http.Flusher).Flush()
		u.arrived <- r.URL.Path
		start := time.Now()
		select {
		case <-r.Context().Done():
			u.held <- time.Since(start)
		case <-u.release:
		}
		return
	}
	if !req.Stream {
		w.Header().Set("Content-Type", "application/json")
		switch {
		case messages:
			fmt.Fprintf(w, `{"id":"msg_1","type":"message","role":"assistant","model":%q,"content":[{"type":"text","text":"whole"}],"stop_reason":"end_turn","stop_sequence":null,"usage":{"input_tokens":3,"output_tokens":1}}`, req.Model)
		case responses:
			fmt.Fprintf(w, `{"id":"resp_1","object":"response","created_at":1,"status":"completed","model":%q,"output":[{"type":"message","id":"msg_1","status":"completed","role":"assistant","content":[{"type":"output_text","text":"whole","annotations":[]}]}],"usage":{"input_tokens":3,"output_tokens":1,"total_tokens":4}}`, req.Model)
		default:
			fmt.Fprintf(w, `{"id":"chatcmpl-1","object":"chat.completion","created":1,"model":%q,"choices":[{"index":0,"message":{"role":"assistant","content":"whole"},"finish_reason":"stop"}],"usage":{"prompt_tokens":3,"completion_tokens":1,"total_tokens":4}}`, req.Model)
		}
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	switch {
	case messages:
		fmt.Fprintf(w, "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_1\",\"type\":\"message\",\"role\":\"assistant\",\"model\":%q,\"content\":[],\"stop_reason\":null,\"stop_sequence\":null,\"usage\":{\"input_tokens\":3,\"output_tokens\":1}}}\n\n", req.Model)
		io.WriteString(w, "event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n")
		io.WriteString(w, "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"half an \"}}\n\n")
	case responses:
		fmt.Fprintf(w, "event: response.created\ndata: {\"type\":\"response.created\",\"sequence_number\":0,\"response\":{\"id\":\"resp_1\",\"object\":\"response\",\"created_at\":1,\"status\":\"in_progress\",\"model\":%q,\"output\":[]}}\n\n", req.Model)
		io.WriteString(w, "event: response.output_text.delta\ndata: {\"type\":\"response.output_text.delta\",\"sequence_number\":1,\"item_id\":\"msg_1\",\"output_index\":0,\"content_index\":0,\"delta\":\"half an \"}\n\n")
	default:
		fmt.Fprintf(w, "data: {\"id\":\"chatcmpl-1\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":%q,\"choices\":[{\"index\":0,\"delta\":{\"content\":\"half an \"},\"finish_reason\":null}]}\n\n", req.Model)
	}
	w.(http.Flusher).Flush()
	if bytes.Contains(b, []byte("cut")) {
		if conn, _, err := http.NewResponseController(w).Hijack(); err == nil {
			conn.Close()
		}
		return
	}
	start := time.Now()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-r.Context().Done():
			u.streamHeld <- time.Since(start)
			return
		case <-u.release:
			return
		case <-tick.C:
		}
		switch {
		case messages:
			io.WriteString(w, "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"and on \"}}\n\n")
		case responses:
			io.WriteString(w, "event: response.output_text.delta\ndata: {\"type\":\"response.output_text.delta\",\"sequence_number\":2,\"item_id\":\"msg_1\",\"output_index\":0,\"content_index\":0,\"delta\":\"and on \"}\n\n")
		default:
			fmt.Fprintf(w, "data: {\"id\":\"chatcmpl-1\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":%q,\"choices\":[{\"index\":0,\"delta\":{\"content\":\"and on \"},\"finish_reason\":null}]}\n\n", req.Model)
		}
		w.(http.Flusher).Flush()
	}
}

// jssdkDir is shim/testdata/jssdk with its node_modules (npm ci there when
// missing): the official OpenAI and Anthropic JavaScript SDKs.
func jssdkDir(t *testing.T) string {
	t.Helper()
	dir, err := filepath.Abs("../../shim/testdata/jssdk")
	if err != nil {
		t.Fatal(err)
	}
	if err := nodetest.NPMCI(dir); err != nil {
		t.Fatal(err)
	}
	return dir
}

// sdkEnv is the environment read.mjs and leave.mjs read.
func sdkEnv(base, key, prompt string) []string {
	return append(os.Environ(), "CADUCEUS_URL="+base, "CADUCEUS_KEY="+key, "PROMPT="+prompt,
		"MODEL_CHAT=gpt-4o-mini", "MODEL_RESPONSES=gpt-4o-mini", "MODEL_MESSAGES=claude-sonnet-4")
}

// readAllPatterns runs read.mjs (every read pattern of both SDKs, once)
// against base and returns each pattern's line.
func readAllPatterns(t *testing.T, base, key, prompt string) map[string]map[string]any {
	t.Helper()
	cmd := exec.CommandContext(t.Context(), "node", "read.mjs")
	cmd.Dir = jssdkDir(t)
	cmd.Env = sdkEnv(base, key, prompt)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("node read.mjs: %v\n%s", err, stderr.String())
	}
	reads := map[string]map[string]any{}
	for line := range strings.SplitSeq(strings.TrimSpace(string(out)), "\n") {
		var r map[string]any
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			t.Fatalf("read.mjs printed %q: %v", line, err)
		}
		reads[r["pattern"].(string)] = r
	}
	return reads
}

// receipts lists the receipts of key's tenant at base, newest first.
func receipts(t *testing.T, base, key string) []map[string]any {
	t.Helper()
	var l struct{ Receipts []map[string]any }
	if err := json.Unmarshal(edgeCall(t, base, key, "/v1/receipts?limit=200", ""), &l); err != nil {
		t.Fatal(err)
	}
	return l.Receipts
}

// awaitReceipts waits until base holds n receipts of key's tenant (a turn
// is recorded after its client left, so the test waits for the record to
// appear) and returns them, newest first.
func awaitReceipts(t *testing.T, base, key string, n int) []map[string]any {
	t.Helper()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	deadline := time.After(30 * time.Second)
	for {
		rs := receipts(t, base, key)
		if len(rs) >= n {
			return rs
		}
		select {
		case <-tick.C:
		case <-deadline:
			t.Fatalf("%s holds %d receipts, want %d", base, len(rs), n)
		}
	}
}

// outcome is what a receipt says of how its turn ended.
func outcome(rc map[string]any) string {
	s := fmt.Sprintf("%v/%v", rc["protocol"], rc["decision"])
	if f, ok := rc["refusal"].(map[string]any); ok {
		s += " refusal=" + fmt.Sprint(f["code"])
	}
	if rc["broken"] == true {
		s += " broken"
	}
	if st, ok := rc["upstream_status"]; ok {
		s += fmt.Sprintf(" upstream=%v", st)
	}
	return s
}

// edgeAndServe starts the Worker (under miniflare, with D1) and `caduceus
// serve --gates shim`, both forwarding to the same upstream (OpenAI and
// Anthropic wires), and returns each one's base URL and admin key.
func edgeAndServe(t *testing.T, upstream string) (sides [2][2]string) {
	t.Helper()
	dir := buildWorker(t)
	worker := startWorker(t, dir, "CADUCEUS_ADMIN_KEY="+edgeAdminKey, "CADUCEUS_OPENAI_URL="+upstream+"/v1", "CADUCEUS_OPENAI_API_KEY=sk-up",
		"CADUCEUS_ANTHROPIC_URL="+upstream, "CADUCEUS_ANTHROPIC_API_KEY=sk-ant-up").url
	env := map[string]string{"CADUCEUS_OPENAI_API_KEY": "sk-up", "CADUCEUS_ANTHROPIC_API_KEY": "sk-ant-up"}
	in := startEnv(t, func(k string) string { return env[k] }, "--gates", "shim", "--upstream", "openai="+upstream+"/v1", "--upstream", "anthropic="+upstream)
	return [2][2]string{{"serve", in.url + "|" + in.adminKey}, {"edge", worker + "|" + edgeAdminKey}}
}

func side(s [2]string) (name, base, key string) {
	base, key, _ = strings.Cut(s[1], "|")
	return s[0], base, key
}

// streamPatterns are read.mjs's patterns that read a stream.
var streamPatterns = []string{
	"openai/chat/for-await", "openai/chat/finalChatCompletion", "openai/responses/for-await",
	"openai/responses/finalResponse", "anthropic/messages/for-await", "anthropic/messages/finalMessage",
}

// TestEdgeCutStreamRaises: a stream the upstream breaks off raises in every
// stream read pattern of the official JavaScript SDKs, at the Worker as at
// serve, on all three wires, and both receipts say broken. (workerd hands
// an aborted Response body to its client as a clean end, so the Worker
// ends the stream with the wire's own error event before aborting it.)
// Whole answers read whole.
func TestEdgeCutStreamRaises(t *testing.T) {
	_, upstream := newFlakyUpstream(t)
	for _, s := range edgeAndServe(t, upstream) {
		name, base, key := side(s)
		before := len(receipts(t, base, key))
		reads := readAllPatterns(t, base, key, "cut me off")
		for _, p := range streamPatterns {
			if r := reads[p]; r == nil || r["outcome"] == "completed" {
				t.Errorf("%s: %s read a stream the upstream cut as whole: %v", name, p, r)
			}
		}
		for _, p := range []string{"openai/chat/create", "openai/responses/create", "anthropic/messages/create"} {
			if r := reads[p]; r == nil || r["outcome"] != "completed" {
				t.Errorf("%s: %s did not read a whole answer: %v", name, p, r)
			}
		}
		// A client can see its stream cut before the turn's receipt is
		// committed: wait for one receipt a read.
		broken := 0
		for _, rc := range awaitReceipts(t, base, key, before+len(reads)) {
			if rc["stream"] == true && rc["broken"] == true && rc["decision"] == "forward" {
				broken++
			}
		}
		if broken != len(streamPatterns) {
			t.Errorf("%s: %d receipts of broken streams, want %d", name, broken, len(streamPatterns))
		}
	}
}

// leaveStream runs leave.mjs (wire, stream) against base: the official
// SDK reads the first event of a streamed answer with `for await`, then
// breaks, which aborts its request (its connection is closed).
func leaveStream(t *testing.T, base, key, wire, prompt string) map[string]any {
	t.Helper()
	cmd := exec.CommandContext(t.Context(), "node", "leave.mjs", wire, "stream")
	cmd.Dir = jssdkDir(t)
	cmd.Env = sdkEnv(base, key, prompt)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	var r map[string]any
	if err != nil || json.Unmarshal(out, &r) != nil {
		t.Fatalf("node leave.mjs %s stream: %v %s\n%s", wire, err, out, stderr.String())
	}
	return r
}

// leaveWhole sends a whole request of wire to base and, once the upstream
// has it, resets the connection (SO_LINGER 0): a client that gives up on
// its answer. workerd reports a reset to the Worker (request.signal); a
// connection closed cleanly it reports only when it next writes, which a
// whole answer does at its end (docs/edge.md).
func leaveWhole(t *testing.T, up *flakyUpstream, base, key, wire string) {
	t.Helper()
	path, body := "/v1/chat/completions", `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hold it"}]}`
	switch wire {
	case "responses":
		path, body = "/v1/responses", `{"model":"gpt-4o-mini","input":"hold it"}`
	case "messages":
		path, body = "/v1/messages", `{"model":"claude-sonnet-4","max_tokens":64,"messages":[{"role":"user","content":"hold it"}]}`
	}
	conn, err := net.Dial("tcp", strings.TrimPrefix(base, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(conn, "POST %s HTTP/1.1\r\nHost: caduceus\r\nAuthorization: Bearer %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", path, key, len(body), body)
	select {
	case <-up.arrived:
	case <-time.After(30 * time.Second):
		t.Fatalf("%s: the upstream got no request", wire)
	}
	conn.(*net.TCPConn).SetLinger(0)
	conn.Close()
}

// TestEdgeClientLeaves: a client that aborts a stream after its first event
// and one that leaves a whole request while the upstream works leave, at
// the Worker as at serve, a receipt and an audit record each (the Worker
// keeps the request alive with waitUntil until the turn is recorded), and
// their receipts say the same on both sides. A whole request the client
// left closes the upstream call (the Fetch request's signal cancels the
// Go request's context) and its receipt says canceled.
func TestEdgeClientLeaves(t *testing.T) {
	up, upstream := newFlakyUpstream(t)
	got := map[string][]string{}
	var mu sync.Mutex
	for _, s := range edgeAndServe(t, upstream) {
		name, base, key := side(s)
		before := len(receipts(t, base, key))
		audit := func() int {
			var l struct{ Records []json.RawMessage }
			if err := json.Unmarshal(edgeCall(t, base, key, "/v1/audit?limit=500", ""), &l); err != nil {
				t.Fatal(err)
			}
			n := 0
			for _, r := range l.Records {
				if bytes.Contains(r, []byte(`"shim.proxy"`)) {
					n++
				}
			}
			return n
		}
		audited := audit()
		turns := 0
		for _, wire := range []string{"chat", "responses", "messages"} {
			r := leaveStream(t, base, key, wire, "tell me a long story")
			if r["events"] != 1.0 {
				t.Errorf("%s: %s stream: read %v events before leaving, want 1", name, wire, r["events"])
			}
			turns++
			rs := awaitReceipts(t, base, key, before+turns)
			mu.Lock()
			got[name] = append(got[name], "stream "+outcome(rs[0]))
			mu.Unlock()

			leaveWhole(t, up, base, key, wire)
			select {
			case d := <-up.held:
				t.Logf("%s: %s whole: the upstream call closed %v after the client left", name, wire, d.Round(time.Millisecond))
			case <-time.After(8 * time.Second):
				t.Errorf("%s: %s whole: the upstream call was not closed when the client left", name, wire)
			}
			turns++
			rs = awaitReceipts(t, base, key, before+turns)
			mu.Lock()
			got[name] = append(got[name], "whole "+outcome(rs[0]))
			mu.Unlock()
		}
		// The streams' upstream calls closed as their clients left.
		for range 3 {
			select {
			case d := <-up.streamHeld:
				t.Logf("%s: a stream's upstream call closed %v after the client left", name, d.Round(time.Millisecond))
			case <-time.After(8 * time.Second):
				t.Errorf("%s: a stream's upstream call was not closed when its client left", name)
			}
		}
		if n := audit() - audited; n != turns {
			t.Errorf("%s: %d shim.proxy audit records for %d turns the clients left", name, n, turns)
		}
	}
	if fmt.Sprint(got["edge"]) != fmt.Sprint(got["serve"]) {
		t.Errorf("receipts of the turns clients left:\nserve: %q\nedge:  %q", got["serve"], got["edge"])
	}
	for _, o := range got["edge"] {
		if strings.HasPrefix(o, "whole ") && !strings.Contains(o, "canceled") {
			t.Errorf("a whole request the client left: %s, want canceled", o)
		}
	}
	t.Logf("receipts: %q", got["edge"])
}

// TestEdgeRestartOnOneD1: the Worker's runner applies the migrations as
// wrangler does (tracked in d1_migrations), so a restart on the same D1
// directory, and a second runner beside the first, start and serve what
// the first stored.
func TestEdgeRestartOnOneD1(t *testing.T) {
	dir := buildWorker(t)
	d1 := "CADUCEUS_D1_DIR=" + t.TempDir()
	key := "CADUCEUS_ADMIN_KEY=" + edgeAdminKey
	first := startWorker(t, dir, d1, key)
	edgeCall(t, first.url, edgeAdminKey, "/v1/admin/keys", `{"tenant":"slot-1","scopes":["route"]}`)
	stopWorker(t, first)

	again := startWorker(t, dir, d1, key)
	beside := startWorker(t, dir, d1, key)
	for _, w := range []workerProc{again, beside} {
		var l struct{ Keys []json.RawMessage }
		if err := json.Unmarshal(edgeCall(t, w.url, edgeAdminKey, "/v1/admin/keys", ""), &l); err != nil || len(l.Keys) != 2 {
			t.Errorf("%s after a restart on the same D1: %d keys (%v), want the admin key and the one made before", w.url, len(l.Keys), err)
		}
	}
}

// stopWorker stops w's runner (SIGINT) and waits for it to exit.
func stopWorker(t *testing.T, w workerProc) {
	t.Helper()
	w.cmd.Process.Signal(os.Interrupt)
	done := make(chan struct{})
	go func() { w.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(15 * time.Second):
		t.Fatal("the Worker's runner did not stop on SIGINT")
	}
}

// TestEdgeMisconfiguredRefuses: a Worker whose CADUCEUS_ADMIN_KEY does not
// parse starts its Go program on the first request like any other and
// answers that request and the next with the error (the Worker throws it:
// miniflare answers with it, Cloudflare logs it), which names the variable
// and what is wrong in it, and never the key.
func TestEdgeMisconfiguredRefuses(t *testing.T) {
	dir := buildWorker(t)
	for _, c := range []struct{ admin, says, secret string }{
		{"tenant-x=" + edgeAdminKey, `caduceus edge: CADUCEUS_ADMIN_KEY: "tenant-x" is not a tenant slot (slot-N)`, edgeAdminKey},
		{"slot-2=cad_0123456789abcdef_tooshort", "caduceus edge: CADUCEUS_ADMIN_KEY: the key of slot-2: ", "tooshort"},
	} {
		w := startWorker(t, dir, "CADUCEUS_ADMIN_KEY="+c.admin)
		for i := range 2 {
			resp, err := http.Get(w.url + "/healthz")
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusInternalServerError || !strings.Contains(string(body), c.says) {
				t.Fatalf("%s, request %d: %d %s, want 500 saying %q", c.admin, i+1, resp.StatusCode, body, c.says)
			}
			if strings.Contains(string(body), c.secret) {
				t.Fatalf("%s, request %d: the answer holds the key: %s", c.admin, i+1, body)
			}
		}
		w.cmd.Process.Signal(os.Interrupt)
		w.cmd.Wait()
	}
}
