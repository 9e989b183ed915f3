package shim_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/caduceus-dev/caduceus/shim"
	"github.com/caduceus-dev/caduceus/shim/wire"
)

// jsRead is one line of testdata/jssdk/read.mjs: how one read pattern of
// an official JavaScript SDK ended.
type jsRead struct {
	Pattern     string  `json:"pattern"`
	Outcome     string  `json:"outcome"` // completed, api_error, error
	Events      int     `json:"events"`
	Status      int     `json:"status"`
	Body        string  `json:"body"`
	ShouldRetry *string `json:"should_retry"`
	Receipt     *string `json:"receipt"`
	Message     string  `json:"message"`
	Text        string  `json:"text"` // the answer's text, as the pattern read it
}

// readWithJSSDKs runs read.mjs against e with key: the official OpenAI and
// Anthropic JavaScript SDKs (testdata/jssdk's lockfile, installed with npm
// ci when node_modules is missing; Node 20 and npm must be on the PATH),
// each read pattern once, and returns the lines by pattern.
func readWithJSSDKs(t *testing.T, e *env, key string) map[string]jsRead {
	t.Helper()
	dir, err := filepath.Abs(filepath.Join("testdata", "jssdk"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "openai")); err != nil {
		cmd := exec.Command("npm", "ci", "--no-audit", "--no-fund")
		cmd.Dir = dir
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("npm ci in shim/testdata/jssdk (Node 20 and npm are needed): %v\n%s", err, out)
		}
	}
	cmd := exec.CommandContext(t.Context(), "node", "read.mjs")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "CADUCEUS_URL="+e.srv.URL, "CADUCEUS_KEY="+key,
		"MODEL_CHAT="+modelOf[wire.ChatCompletions], "MODEL_RESPONSES="+modelOf[wire.Responses], "MODEL_MESSAGES="+modelOf[wire.Messages])
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("node read.mjs: %v\n%s", err, stderr.String())
	}
	reads := map[string]jsRead{}
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		var r jsRead
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatalf("read.mjs printed %q: %v", sc.Text(), err)
		}
		reads[r.Pattern] = r
	}
	return reads
}

// TestWithheldThroughTheJSSDKs: an answer whose receipt and audit record
// cannot be stored reaches no reader of the official JavaScript SDKs as a
// finished answer, in any of their read patterns: create() rejects with
// the SDK's APIError for 503 receipt_not_recorded (and, the upstream
// having run, the SDK does not retry it: one upstream call per read);
// for await over a stream, finalChatCompletion(), finalResponse() and
// finalMessage() reject when the stream is cut before its last event.
func TestWithheldThroughTheJSSDKs(t *testing.T) {
	turns := &failingTurns{}
	e := newEnv(t, func(c *shim.Config) { c.Turns = turns })
	reads := readWithJSSDKs(t, e, "key-a")

	whole := []string{"openai/chat/create", "openai/responses/create", "anthropic/messages/create"}
	streamed := []string{"openai/chat/for-await", "openai/chat/finalChatCompletion", "openai/responses/for-await",
		"openai/responses/finalResponse", "anthropic/messages/for-await", "anthropic/messages/finalMessage"}
	if len(reads) != len(whole)+len(streamed) {
		t.Fatalf("read.mjs reported %d patterns, want %d: %+v", len(reads), len(whole)+len(streamed), reads)
	}
	for _, p := range whole {
		r := reads[p]
		if r.Outcome != "api_error" || r.Status != 503 || !strings.Contains(r.Body+r.Message, shim.CodeReceiptNotRecorded) {
			t.Errorf("%s: %+v, want the SDK's API error for 503 %s", p, r, shim.CodeReceiptNotRecorded)
		}
		if r.Receipt != nil {
			t.Errorf("%s: the withheld answer names receipt %s", p, *r.Receipt)
		}
		if r.ShouldRetry == nil || *r.ShouldRetry != "false" {
			t.Errorf("%s: x-should-retry %v, want false (the upstream ran)", p, r.ShouldRetry)
		}
		if strings.Contains(r.Body+r.Message, upstreamText) {
			t.Errorf("%s: the withheld answer leaked into the error: %+v", p, r)
		}
	}
	for _, p := range streamed {
		if r := reads[p]; r.Outcome != "error" {
			t.Errorf("%s: %+v, want an error thrown while reading the cut stream", p, r)
		}
	}
	n := len(whole) + len(streamed)
	if got := turns.calls.Load(); got != int64(n) {
		t.Errorf("RecordTurn called %d times for %d reads: an SDK retried", got, n)
	}
	if got := e.up.calls(); got != n {
		t.Errorf("upstream called %d times for %d reads: an SDK retried", got, n)
	}
}
