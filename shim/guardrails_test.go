package shim_test

import (
	"encoding/json"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/openai/openai-go/v3"

	"github.com/caduceus-dev/caduceus/guard"
	"github.com/caduceus-dev/caduceus/guard/detect"
	"github.com/caduceus-dev/caduceus/guard/guardtest"
	"github.com/caduceus-dev/caduceus/shim"
	"github.com/caduceus-dev/caduceus/shim/ledger"
	"github.com/caduceus-dev/caduceus/shim/shimsql"
	gwconf "github.com/caduceus-dev/caduceus/shim/upstream"
	"github.com/caduceus-dev/caduceus/shim/wire"
	"github.com/caduceus-dev/caduceus/store"
)

// guardrails sets a policy of every kind at act.
func guardrails(act guard.Action) func(*shim.Config) {
	return func(c *shim.Config) {
		c.Guardrails = &guard.Config{Actions: guard.Actions{"default": act}}
		c.Scanner = detect.MustDefault()
	}
}

func streamName(stream bool) string {
	if stream {
		return "/stream"
	}
	return ""
}

// TestGuardrailsRedactRequestsThroughTheSDKs: under redact, a request
// holding an AWS key, a GitHub token, a private key block, an e-mail, a
// phone number and a card number reaches the fake upstream with none of
// them — placeholders in their place, the same value the same one — on
// every wire, whole and streamed, through the official SDKs; the receipt
// lists what was found and never a value.
func TestGuardrailsRedactRequestsThroughTheSDKs(t *testing.T) {
	e, _ := newGatewayEnv(t, gwconf.Budgets{}, guardrails(guard.Redact))
	prompt := guardtest.Prompt(guardtest.Six) + "\nAgain: " + guardtest.Six[3].Value
	for _, p := range wire.Protocols {
		for _, stream := range []bool{false, true} {
			t.Run(string(p)+streamName(stream), func(t *testing.T) {
				res, err := call(t, e, "key-granted", p, stream, modelOf[p], prompt, nil)
				if err != nil || res.text != upstreamText {
					t.Fatalf("answer %q, %v", res.text, err)
				}
				got := e.up.last(t).Body
				if leaks := guardtest.Leaks(got, guardtest.Six); len(leaks) > 0 {
					t.Fatalf("the upstream saw %v:\n%s", leaks, got)
				}
				for _, k := range []string{"secret:1", "secret:2", "private_key:1", "email:1", "phone:1", "card:1"} {
					if !strings.Contains(string(got), "[REDACTED:"+k+"]") {
						t.Errorf("no placeholder %s in %s", k, got)
					}
				}
				if strings.Contains(string(got), "email:2") {
					t.Errorf("the same e-mail got a second placeholder: %s", got)
				}
				rc := e.receipts(t, "key-granted")[0]
				kinds := map[guard.Kind]int{}
				for _, r := range rc.Guardrails {
					if r.Direction != guard.Request || r.Action != guard.Redact {
						t.Errorf("record %+v", r)
					}
					kinds[r.Kind] += r.Count
				}
				if kinds[guard.Secret] != 2 || kinds[guard.PrivateKey] != 1 || kinds[guard.Email] != 2 || kinds[guard.Phone] != 1 || kinds[guard.Card] != 1 {
					t.Errorf("receipt guardrails %+v", rc.Guardrails)
				}
				if rc.Sensitivity != "restricted" || rc.Redaction == nil || rc.Redaction.Level != "partial" {
					t.Errorf("receipt sensitivity %q redaction %+v", rc.Sensitivity, rc.Redaction)
				}
				b, _ := json.Marshal(rc)
				if leaks := guardtest.Leaks(b, guardtest.Six); len(leaks) > 0 {
					t.Errorf("the receipt holds %v", leaks)
				}
			})
		}
	}
}

// TestGuardrailsBlockBeforeAnyReservation: under block, the client gets
// 400 guardrail_blocked in its own envelope, naming the kinds and no
// value, with no upstream call and nothing reserved.
func TestGuardrailsBlockBeforeAnyReservation(t *testing.T) {
	e, db := newGatewayEnv(t, gwconf.Budgets{}, guardrails(guard.Block))
	prompt := guardtest.Prompt(guardtest.Six)
	for _, p := range wire.Protocols {
		for _, stream := range []bool{false, true} {
			t.Run(string(p)+streamName(stream), func(t *testing.T) {
				before := e.up.calls()
				_, err := call(t, e, "key-granted", p, stream, modelOf[p], prompt, nil)
				status, retry, _ := sdkError(err)
				msg := ""
				var oe *openai.Error
				var ae *anthropic.Error
				switch {
				case errors.As(err, &oe):
					msg = oe.Message
					if oe.Code != shim.CodeGuardrailBlocked {
						t.Errorf("code %q", oe.Code)
					}
				case errors.As(err, &ae):
					msg = ae.RawJSON()
					if !strings.Contains(msg, `"type":"invalid_request_error"`) {
						t.Errorf("anthropic envelope %s", msg)
					}
				}
				if status != 400 || retry != "false" || !strings.Contains(msg, "guardrail_blocked") {
					t.Fatalf("status %d retry %q message %q (%v)", status, retry, msg, err)
				}
				for _, k := range []string{"secret", "private_key", "email", "phone", "card"} {
					if !strings.Contains(msg, k) {
						t.Errorf("message %q does not name %s", msg, k)
					}
				}
				if leaks := guardtest.Leaks([]byte(msg), guardtest.Six); len(leaks) > 0 {
					t.Errorf("the refusal holds %v", leaks)
				}
				if e.up.calls() != before {
					t.Fatalf("the upstream was called")
				}
				rc := e.receipts(t, "key-granted")[0]
				if rc.Decision != shim.DecisionRefused || rc.Spend != nil || rc.Refusal.Code != shim.CodeGuardrailBlocked {
					t.Fatalf("receipt %+v", rc)
				}
			})
		}
	}
	rows, err := ledger.Of(db).Spend(t.Context(), "slot-1", "kg", time.Time{})
	if err != nil || len(rows) != 0 {
		t.Fatalf("spend rows %+v, %v: something was reserved", rows, err)
	}
}

// TestGuardrailsFlagPasses: under flag the request goes as it came and the
// receipt records the finding.
func TestGuardrailsFlagPasses(t *testing.T) {
	e, _ := newGatewayEnv(t, gwconf.Budgets{}, guardrails(guard.Flag))
	prompt := guardtest.Prompt(guardtest.Six[3:4])
	if _, err := call(t, e, "key-granted", wire.ChatCompletions, false, "gpt-4o", prompt, nil); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(e.up.last(t).Body), guardtest.Six[3].Value) {
		t.Fatal("flag changed the request")
	}
	rc := e.receipts(t, "key-granted")[0]
	if len(rc.Guardrails) != 1 || rc.Guardrails[0].Action != guard.Flag || rc.Guardrails[0].Kind != guard.Email ||
		rc.Redaction == nil || rc.Redaction.Level != "none" || rc.Sensitivity != "personal" {
		t.Fatalf("receipt %+v %+v %q", rc.Guardrails, rc.Redaction, rc.Sensitivity)
	}
}

// TestGuardrailsOffByDefault: without a policy nothing is scanned or
// recorded, and a per-plan override applies to its plan's tenants only.
func TestGuardrailsOffByDefault(t *testing.T) {
	e, _ := newGatewayEnv(t, gwconf.Budgets{}, func(c *shim.Config) {
		c.Guardrails = &guard.Config{Actions: guard.Actions{"email": guard.Off}, Plans: map[string]guard.Actions{"main": {"email": guard.Redact}}}
		c.Scanner = detect.MustDefault()
	})
	prompt := guardtest.Prompt(guardtest.Six[3:4])
	if _, err := call(t, e, "key-granted", wire.ChatCompletions, false, "gpt-4o", prompt, nil); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(e.up.last(t).Body), guardtest.Six[3].Value) {
		t.Fatal("the plan's override did not apply")
	}
	plain := newEnv(t, nil)
	if _, err := call(t, plain, "key-a", wire.ChatCompletions, false, "gpt-4o", prompt, nil); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(plain.up.last(t).Body), guardtest.Six[3].Value) {
		t.Fatal("no policy, yet the request changed")
	}
	if rc := plain.receipts(t, "key-a")[0]; rc.Guardrails != nil || rc.Sensitivity != "" || rc.Redaction != nil {
		t.Fatalf("receipt without a policy: %+v", rc)
	}
}

// TestGuardrailsEveryPartOfARequest: system prompts, tool results, tool
// call arguments and Responses input items are redacted, on each wire;
// the body's other members are kept.
func TestGuardrailsEveryPartOfARequest(t *testing.T) {
	e, _ := newGatewayEnv(t, gwconf.Budgets{}, guardrails(guard.Redact))
	key, mail, card := guardtest.Six[0].Value, guardtest.Six[3].Value, guardtest.Six[5].Value
	args, _ := json.Marshal(`{"path":".env","aws":"` + key + `"}`)
	bodies := map[string]string{
		"/v1/chat/completions": `{"model":"gpt-4o","temperature":0.2,"messages":[{"role":"system","content":"Contact ` + mail + `"},` +
			`{"role":"user","content":[{"type":"text","text":"read it"}]},` +
			`{"role":"assistant","content":null,"tool_calls":[{"id":"call_1","type":"function","function":{"name":"read","arguments":` + string(args) + `}}]},` +
			`{"role":"tool","tool_call_id":"call_1","content":"card ` + card + `"}]}`,
		"/v1/responses": `{"model":"gpt-5","instructions":"Contact ` + mail + `","input":[{"role":"user","content":[{"type":"input_text","text":"read it"}]},` +
			`{"type":"function_call","call_id":"call_1","name":"read","arguments":` + string(args) + `},` +
			`{"type":"function_call_output","call_id":"call_1","output":"card ` + card + `"}]}`,
		"/v1/messages": `{"model":"claude-sonnet-4-5","max_tokens":64,"system":[{"type":"text","text":"Contact ` + mail + `"}],"messages":[` +
			`{"role":"user","content":"read it"},` +
			`{"role":"assistant","content":[{"type":"tool_use","id":"toolu_1","name":"read","input":{"path":".env","aws":"` + key + `"}}]},` +
			`{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_1","content":"card ` + card + `"}]}]}`,
	}
	for path, body := range bodies {
		t.Run(path, func(t *testing.T) {
			resp, b := e.post(t, "key-granted", path, body, nil)
			if resp.StatusCode != 200 {
				t.Fatalf("%d %s", resp.StatusCode, b)
			}
			got := e.up.last(t).Body
			for _, v := range []string{key, mail, card} {
				if strings.Contains(string(got), v) {
					t.Errorf("the upstream saw %q", v)
				}
			}
			var doc map[string]any
			if err := json.Unmarshal(got, &doc); err != nil {
				t.Fatalf("forwarded body is not JSON: %v\n%s", err, got)
			}
			for _, want := range []string{"[REDACTED:secret:1]", "[REDACTED:email:1]", "[REDACTED:card:1]", `"call_1"`, `"read"`} {
				if want == `"call_1"` && path == "/v1/messages" {
					want = `"toolu_1"`
				}
				if !strings.Contains(string(got), want) {
					t.Errorf("forwarded body lacks %s:\n%s", want, got)
				}
			}
		})
	}
}

// secretAnswer is a fake upstream answer whose text holds the AWS key
// split across two SSE events (streamed) or whole.
func secretAnswer(t *testing.T, secret string, cut int) func(w http.ResponseWriter, r *http.Request, body []byte) {
	return func(w http.ResponseWriter, r *http.Request, body []byte) {
		p, model, stream := asked(r, body)
		text := "The key is " + secret + " and nothing else."
		if !stream {
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write(wire.DirectJSON(p, wire.Direct{ID: "up1", Model: model, Text: text, Created: 1}))
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		for _, ev := range splitEvents(t, p, model, []string{"The key is " + secret[:cut], secret[cut:] + " and nothing else."}) {
			_, _ = w.Write(ev)
			w.(http.Flusher).Flush()
		}
	}
}

// splitEvents is a direct answer's stream in protocol p whose text comes
// in the given pieces, one delta event each.
func splitEvents(t *testing.T, p wire.Protocol, model string, pieces []string) [][]byte {
	const mark = "QQMARKQQ"
	full := strings.Join(pieces, "")
	fullJSON, _ := json.Marshal(full)
	var out [][]byte
	for _, ev := range wire.DirectEvents(p, wire.Direct{ID: "up1", Model: model, Text: mark, Created: 1}) {
		s := string(ev)
		if !strings.Contains(s, mark) {
			out = append(out, ev)
			continue
		}
		delta := strings.HasPrefix(s, "data: ") || strings.HasPrefix(s, "event: response.output_text.delta") || strings.HasPrefix(s, "event: content_block_delta")
		if !delta {
			out = append(out, []byte(strings.ReplaceAll(s, mark, string(fullJSON[1:len(fullJSON)-1]))))
			continue
		}
		for _, piece := range pieces {
			pj, _ := json.Marshal(piece)
			out = append(out, []byte(strings.ReplaceAll(s, mark, string(pj[1:len(pj)-1]))))
		}
	}
	if len(out) < 4 {
		t.Fatalf("split stream: %q", out)
	}
	return out
}

// TestGuardrailsRedactAnswers: an upstream that writes an AWS key — whole,
// or streamed with the key split across two SSE events — never shows it
// to the client, on every wire through the official SDKs; the client's
// text holds the placeholder, the stream stays one its SDK reads to the
// end, and the receipt counts the finding once, as an answer's.
func TestGuardrailsRedactAnswers(t *testing.T) {
	secret := guardtest.Six[0].Value
	for _, cut := range []int{1, 8, len(secret) - 1} {
		e, _ := newGatewayEnv(t, gwconf.Budgets{}, guardrails(guard.Redact))
		e.up.respond = secretAnswer(t, secret, cut)
		for _, p := range wire.Protocols {
			for _, stream := range []bool{false, true} {
				t.Run(string(p)+streamName(stream), func(t *testing.T) {
					res, err := call(t, e, "key-granted", p, stream, modelOf[p], "what is the key?", nil)
					if err != nil {
						t.Fatal(err)
					}
					if strings.Contains(res.text, secret) || strings.Contains(res.text, secret[:12]) {
						t.Fatalf("the client saw the key: %q", res.text)
					}
					if res.text != "The key is [REDACTED:secret:1] and nothing else." {
						t.Fatalf("answer %q", res.text)
					}
					rc := e.receipts(t, "key-granted")[0]
					if len(rc.Guardrails) != 1 || rc.Guardrails[0] != (guard.Record{Direction: guard.Answer, Kind: guard.Secret, Rule: "aws-access-token", Action: guard.Redact, Count: 1}) {
						t.Fatalf("receipt guardrails %+v", rc.Guardrails)
					}
				})
			}
		}
	}
}

// TestGuardrailsLeaveNoValueInTheStore: a turn whose request and answer
// hold every planted value, under flag (the values pass) and redact,
// leaves none of them in the SQLite file: receipt, audit record, memory.
func TestGuardrailsLeaveNoValueInTheStore(t *testing.T) {
	for _, act := range []guard.Action{guard.Flag, guard.Redact, guard.Block} {
		t.Run(string(act), func(t *testing.T) {
			path := t.TempDir() + "/leak.db"
			db, err := store.Open(t.Context(), "sqlite:"+path, "")
			if err != nil {
				t.Fatal(err)
			}
			e := newStoredEnv(t, db, guardrails(act))
			e.up.respond = secretAnswer(t, guardtest.Values[0].Value, 6)
			for _, p := range wire.Protocols {
				for _, stream := range []bool{false, true} {
					_, err := call(t, e, "key-a", p, stream, modelOf[p], guardtest.Prompt(guardtest.Values), nil)
					if (err != nil) != (act == guard.Block) {
						t.Fatalf("%s: %v", p, err)
					}
				}
			}
			if n := len(e.receipts(t, "key-a")); n != 6 {
				t.Fatalf("%d receipts", n)
			}
			db.Close()
			files, _ := filepathGlob(path + "*")
			for _, f := range files {
				if leaks := guardtest.Leaks(readFile(t, f), guardtest.Values); len(leaks) > 0 {
					t.Errorf("%s holds %v", f, leaks)
				}
			}
		})
	}
}

// newStoredEnv is newEnv whose receipts and audit records go to db (one
// transaction per turn, as serve writes them).
func newStoredEnv(t *testing.T, db *store.DB, tweak func(*shim.Config)) *env {
	e := newEnv(t, func(c *shim.Config) {
		c.Store, c.Audit, c.Turns = shimsql.New(db), db.Audit(), shimsql.New(db)
		tweak(c)
	})
	return e
}

func filepathGlob(pattern string) ([]string, error) { return filepath.Glob(pattern) }

func readFile(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestGuardrailsThroughTheJSSDKs: every read pattern of the official
// JavaScript SDKs (create, for await over a stream, the stream helpers'
// final*()) reads an answer whose AWS key the upstream split across two
// SSE events as the placeholder, never the key, to a completed end.
func TestGuardrailsThroughTheJSSDKs(t *testing.T) {
	secret := guardtest.Six[0].Value
	e := newEnv(t, guardrails(guard.Redact))
	e.up.respond = secretAnswer(t, secret, 9)
	reads := readWithJSSDKs(t, e, "key-a")
	if len(reads) != 9 {
		t.Fatalf("read.mjs reported %d patterns: %+v", len(reads), reads)
	}
	for p, r := range reads {
		if r.Outcome != "completed" || r.Text != "The key is [REDACTED:secret:1] and nothing else." {
			t.Errorf("%s: %+v", p, r)
		}
		if strings.Contains(r.Text+r.Message+r.Body, secret) {
			t.Errorf("%s read the key", p)
		}
	}
}
