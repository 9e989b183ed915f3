//go:build !js

// (js/wasm has no processes to run Node in: the JavaScript SDKs are read
// from native tests only, and shimtest's stores build for js/wasm, where
// edge/runtimebench runs the shim.)

package shimtest

import (
	"bufio"
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/caduceus-dev/caduceus/internal/nodetest"
)

// JSRead is one line of shim/testdata/jssdk/read.mjs: how one read
// pattern of an official JavaScript SDK ended, and the text it read.
type JSRead struct {
	Pattern     string  `json:"pattern"`
	Outcome     string  `json:"outcome"` // completed, api_error, error
	Events      int     `json:"events"`
	Text        string  `json:"text"` // the answer's text, when completed
	Status      int     `json:"status"`
	Body        string  `json:"body"`
	ShouldRetry *string `json:"should_retry"`
	Receipt     *string `json:"receipt"`
	Message     string  `json:"message"`
}

// ReadWithJSSDKs runs shim/testdata/jssdk/read.mjs against the Caduceus
// at url with key: the official OpenAI and Anthropic JavaScript SDKs (its
// lockfile's, installed with npm ci when node_modules is missing; Node 20
// and npm must be on the PATH), each read pattern once, asking chat
// completions for chat, the Responses API for responses and messages for
// messages; it returns the lines by pattern.
func ReadWithJSSDKs(t testing.TB, url, key, chat, responses, messages string) map[string]JSRead {
	t.Helper()
	_, here, _, _ := runtime.Caller(0)
	dir := filepath.Join(filepath.Dir(here), "..", "testdata", "jssdk")
	if err := nodetest.NPMCI(dir); err != nil {
		t.Fatal(err)
	}
	cmd := exec.CommandContext(t.Context(), "node", "read.mjs")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "CADUCEUS_URL="+url, "CADUCEUS_KEY="+key,
		"MODEL_CHAT="+chat, "MODEL_RESPONSES="+responses, "MODEL_MESSAGES="+messages)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("node read.mjs: %v\n%s", err, stderr.String())
	}
	reads := map[string]JSRead{}
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		var r JSRead
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatalf("read.mjs printed %q: %v", sc.Text(), err)
		}
		reads[r.Pattern] = r
	}
	return reads
}
