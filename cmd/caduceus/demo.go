package main

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"
	"go.yaml.in/yaml/v3"

	"github.com/caduceus-dev/caduceus/examples"
	"github.com/caduceus-dev/caduceus/relay/connector"
	"github.com/caduceus-dev/caduceus/relay/gateway"
)

// demoEnv holds the example secrets examples/caduceus.yaml reads through
// env:NAME. The demo hands them to its own server only; nothing else of
// the process environment reaches it (it is offline and self-contained).
var demoEnv = map[string]string{
	"CADUCEUS_EXAMPLE_GATEWAY_SECRET":  "example-gateway-secret-change-me-0123456789",
	"CADUCEUS_EXAMPLE_TELEGRAM_TOKEN":  "123456:example-telegram-token",
	"CADUCEUS_EXAMPLE_TELEGRAM_SECRET": "example-webhook-secret",
	"CADUCEUS_EXAMPLE_DISCORD_TOKEN":   "example-discord-bot-token",
}

// demoDiscordKey is the private half of the example Discord application's
// public key in examples/caduceus.yaml.
func demoDiscordKey() ed25519.PrivateKey {
	seed := sha256.Sum256([]byte("caduceus example discord application"))
	return ed25519.NewKeyFromSeed(seed[:])
}

func (a *app) demoCmd() *cobra.Command {
	var keep bool
	cmd := &cobra.Command{
		Use:   "demo",
		Short: "Walk through every gate on a temporary, offline Caduceus loaded with the examples",
		Long: `Start an offline, self-contained Caduceus on a temporary data directory with
the files of examples/ loaded (they are built into the binary, so this works
from any directory), then walk through each gate with real HTTP requests:
keys, trader decisions, shim provisions and answers, an executor tick on the
paper broker, a relay webhook reaching a connected gateway, and the audit
records all of it made. Nothing leaves the machine: Telegram and Discord are a
local fake, and the shim calls no LLM provider. The temporary directory is
removed at the end unless --keep is given.`,
		Example: `  caduceus demo
  caduceus demo --keep    # then: caduceus audit tail --data <the printed directory>`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return a.demo(cmd.Context(), keep) },
	}
	cmd.Flags().BoolVar(&keep, "keep", false, "keep the temporary data directory to inspect it afterwards")
	return cmd
}

// demoRun is one run of the demo: the server it started and what it printed.
type demoRun struct {
	cli     func(ctx context.Context, args []string, getenv func(string) string, stdin io.Reader, stdout, stderr io.Writer) int
	out     io.Writer
	url     string
	admin   string
	dir     string // the temporary directory: examples/ and data/
	data    string
	step    int
	client  *http.Client
	fake    *fakePlatform
	records int // audit records seen so far (to print only the new ones)
}

const demoSteps = 7

func (d *demoRun) stepf(format string, args ...any) {
	d.step++
	fmt.Fprintf(d.out, "\n[%d/%d] %s\n", d.step, demoSteps, fmt.Sprintf(format, args...))
}

func (d *demoRun) sayf(format string, args ...any) {
	fmt.Fprintf(d.out, "      %s\n", fmt.Sprintf(format, args...))
}

func (a *app) demo(ctx context.Context, keep bool) (err error) {
	dir, err := os.MkdirTemp("", "caduceus-demo-")
	if err != nil {
		return err
	}
	if !keep {
		defer os.RemoveAll(dir)
	}
	d := &demoRun{cli: a.cli, out: a.stdout, dir: dir, data: filepath.Join(dir, "data"), client: &http.Client{Timeout: 30 * time.Second}, fake: &fakePlatform{}}
	fmt.Fprintf(d.out, "Caduceus demo: an offline Caduceus on a temporary data directory, loaded with examples/.\n")
	fmt.Fprintf(d.out, "Every step below is a real HTTP request to it; the audit records each one made follow.\n")
	if err := fs.WalkDir(examples.FS, ".", func(p string, e fs.DirEntry, err error) error {
		if err != nil || e.IsDir() {
			return err
		}
		b, err := examples.FS.ReadFile(p)
		if err != nil {
			return err
		}
		dst := filepath.Join(dir, "examples", filepath.FromSlash(p))
		if err := os.MkdirAll(filepath.Dir(dst), 0o700); err != nil {
			return err
		}
		return os.WriteFile(dst, b, 0o600)
	}); err != nil {
		return fmt.Errorf("demo: writing the examples: %w", err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	platform := &http.Server{Handler: d.fake, ReadHeaderTimeout: 10 * time.Second}
	go platform.Serve(ln)
	defer platform.Close()

	stop, err := d.start(ctx, a, "http://"+ln.Addr().String())
	if err != nil {
		return err
	}
	defer stop()
	for _, step := range []func(context.Context) error{d.keys, d.trader, d.shim, d.executor, d.relay, d.audit} {
		if err := step(ctx); err != nil {
			return fmt.Errorf("demo step %d: %w", d.step, err)
		}
	}
	fmt.Fprintf(d.out, "\nDone: every gate answered, and every request left a record on slot-1's hash chain.\n")
	if keep {
		fmt.Fprintf(d.out, "The data directory is kept: %s\n  caduceus audit tail --data %s -n 50\n", d.data, d.data)
	}
	fmt.Fprint(d.out, `
What to try next (README.md walks through it, docs/ has the reference):
  go run ./cmd/caduceus serve --config examples/caduceus.yaml     # the same setup, on ./.caduceus
  go run ./cmd/caduceus shim provisions apply examples/shim/bundle.yaml --harness claude-code
  go run ./cmd/caduceus shim dry-run --protocol chat examples/shim/chat-release.json
  go run ./cmd/caduceus exec --payload examples/executor/payload.json --skills examples/executor --scenario examples/executor/paper.yaml
  go run ./cmd/caduceus audit verify
  docs/api.md lists every route; docs/configuration.md every setting; docs/design.md the rules behind them.
`)
	return nil
}

// start runs `serve` in this process with examples/caduceus.yaml, on a free
// port, the fake platform as Telegram and Discord, and waits until it
// answers, showing progress.
func (d *demoRun) start(ctx context.Context, parent *app, platformURL string) (stop func(), err error) {
	cfg, err := readConfigFile(filepath.Join(d.dir, "examples", "caduceus.yaml"))
	if err != nil {
		return nil, err
	}
	cfg.Addr, cfg.Data, cfg.Store, cfg.NATS = "127.0.0.1:0", d.data, "", ""
	relay := cfg.sections.Of("relay").(*connector.FileConfig)
	relay.TelegramBaseURL = platformURL
	relay.DiscordBaseURL = platformURL + "/api/v10"
	stdout, stderr := &lockedBuffer{}, &lockedBuffer{}
	srv := &app{env: env{getenv: func(k string) string { return demoEnv[k] }, stdin: strings.NewReader(""), stdout: stdout, stderr: stderr}, cfg: cfg}
	srv.log = slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))

	d.stepf("Start: caduceus serve --config examples/caduceus.yaml (SQLite in %s, offline)", d.data)
	sctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- srv.serve(sctx) }()
	stop = func() {
		cancel()
		select {
		case <-done:
		case <-time.After(15 * time.Second):
		}
	}
	fmt.Fprint(d.out, "      creating the store and starting the gates ")
	began := time.Now()
	tick := time.NewTicker(250 * time.Millisecond)
	defer tick.Stop()
	for d.url == "" {
		if m := demoListenRE.FindStringSubmatch(stderr.String()); m != nil {
			d.url = m[1]
			break
		}
		select {
		case err := <-done:
			fmt.Fprintln(d.out)
			cancel()
			return nil, fmt.Errorf("serve stopped: %v\n%s", err, stderr.String())
		case <-tick.C:
			fmt.Fprint(d.out, ".")
		case <-time.After(60 * time.Second):
			fmt.Fprintln(d.out)
			stop()
			return nil, fmt.Errorf("serve did not start within a minute:\n%s", stderr.String())
		}
	}
	fmt.Fprintf(d.out, " ready in %s\n", time.Since(began).Round(time.Millisecond))
	if m := demoKeyRE.FindStringSubmatch(stdout.String()); m != nil {
		d.admin = m[1]
	}
	if d.admin == "" {
		stop()
		return nil, fmt.Errorf("serve printed no admin key:\n%s", stdout.String())
	}
	d.sayf("listening on %s; gates served: trader, executor, shim, relay", d.url)
	d.sayf("first start: no admin key existed, so serve created one for slot-1 with every scope")
	d.sayf("and printed it once: %s…", d.admin[:20])
	return stop, nil
}

var (
	demoListenRE = regexp.MustCompile(`listening on (http://\S+)`)
	demoKeyRE    = regexp.MustCompile(`(?m)^(cad_[0-9a-f]{16}_[a-z2-7]{52})$`)
)

// call makes one HTTP request, prints it and its answer, and decodes the
// JSON answer into out (when not nil). want is the status the demo expects.
func (d *demoRun) call(ctx context.Context, method, path, key string, body []byte, hdr map[string]string, want int, out any) error {
	req, err := http.NewRequestWithContext(ctx, method, d.url+path, bytes.NewReader(body))
	if err != nil {
		return err
	}
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := d.client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	d.sayf("%s %s -> %d", method, path, resp.StatusCode)
	if resp.StatusCode != want {
		return fmt.Errorf("%s %s: got %d, want %d: %s", method, path, resp.StatusCode, want, b)
	}
	if out != nil {
		if err := json.Unmarshal(b, out); err != nil {
			return fmt.Errorf("%s %s: %w: %s", method, path, err, b)
		}
	}
	return nil
}

func (d *demoRun) example(name string) ([]byte, error) {
	return examples.FS.ReadFile(name)
}

// exampleYAML decodes the YAML example name into v.
func (d *demoRun) exampleYAML(name string, v any) error {
	raw, err := d.example(name)
	if err != nil {
		return err
	}
	return yaml.Unmarshal(raw, v)
}

// sendEach sends each item as the JSON body of a call (method, key, hdr,
// want as for call) to path, followed by the item's idField unless that is
// "".
func (d *demoRun) sendEach(ctx context.Context, method, path, idField, key string, items []map[string]any, hdr map[string]string, want int) error {
	for _, item := range items {
		to := path
		if idField != "" {
			to += fmt.Sprint(item[idField])
		}
		b, _ := json.Marshal(item)
		if err := d.call(ctx, method, to, key, b, hdr, want, nil); err != nil {
			return err
		}
	}
	return nil
}

// newKey creates a key through POST /v1/admin/keys with the admin key.
func (d *demoRun) newKey(ctx context.Context, spec map[string]any) (string, error) {
	b, _ := json.Marshal(spec)
	var got struct {
		Key string `json:"key"`
	}
	if err := d.call(ctx, "POST", "/v1/admin/keys", d.admin, b, nil, http.StatusCreated, &got); err != nil {
		return "", err
	}
	return got.Key, nil
}

var demoKeys struct{ shim, operator, cron string }

func (d *demoRun) keys(ctx context.Context) error {
	d.stepf("Keys: one per job, each with a tenant, scopes and (for shim writes) a harness")
	var err error
	if demoKeys.operator, err = d.newKey(ctx, map[string]any{"scopes": []string{"route", "operate"}}); err != nil {
		return err
	}
	d.sayf("operator key: scopes route,operate (trader decisions)")
	if demoKeys.shim, err = d.newKey(ctx, map[string]any{"scopes": []string{"route", "configure"}, "harness": "claude-code"}); err != nil {
		return err
	}
	d.sayf("shim key: scopes route,configure, bound to harness claude-code")
	if demoKeys.cron, err = d.newKey(ctx, map[string]any{"scopes": []string{"operate"}, "context": "cron", "harness": "autotrader"}); err != nil {
		return err
	}
	d.sayf("executor key: scope operate, run context cron, harness autotrader (cron may place orders)")
	return d.showAudit(ctx)
}

func (d *demoRun) trader(ctx context.Context) error {
	d.stepf("Trader: import strategies, then the agent switches strategy through one audited write")
	var file struct {
		Concerns   []map[string]any `yaml:"concerns"`
		Strategies []map[string]any `yaml:"strategies"`
	}
	if err := d.exampleYAML("trader/strategies.yaml", &file); err != nil {
		return err
	}
	d.sayf("loading examples/trader/strategies.yaml (what `caduceus trader import` does, over HTTP):")
	if err := d.sendEach(ctx, "PUT", "/v1/trader/concerns/", "concern_id", demoKeys.shim, file.Concerns, nil, http.StatusOK); err != nil {
		return err
	}
	if err := d.sendEach(ctx, "PUT", "/v1/trader/strategies/", "id", demoKeys.shim, file.Strategies, nil, http.StatusOK); err != nil {
		return err
	}
	decision, err := d.example("trader/switch.json")
	if err != nil {
		return err
	}
	var resp map[string]any
	d.sayf("examples/trader/switch.json: switch qndd8o9ppop6:xrpusd from trend to mean-revert")
	if err := d.call(ctx, "POST", "/v1/trader/decisions", demoKeys.operator, decision, nil, http.StatusOK, &resp); err != nil {
		return err
	}
	d.sayf("status %v: %v -> %v, applied at %v", resp["status"], resp["from_strategy_id"], resp["to_strategy_id"], resp["applied_at"])
	d.sayf("the same decision again is a replay, not a second switch:")
	var again map[string]any
	if err := d.call(ctx, "POST", "/v1/trader/decisions", demoKeys.operator, decision, nil, http.StatusOK, &again); err != nil {
		return err
	}
	if again["applied_at"] != resp["applied_at"] || again["replayed"] != true {
		return fmt.Errorf("the replay applied again, or does not say replayed: %v", again)
	}
	d.sayf("the first answer again (status %v, applied at %v) plus replayed: %v; the audit record says replay", again["status"], again["applied_at"], again["replayed"])
	return d.showAudit(ctx)
}

func (d *demoRun) shim(ctx context.Context) error {
	d.stepf("Shim: provisions answer directly, shim context in, or let the request go on")
	prov, err := d.example("shim/warranty-provision.json")
	if err != nil {
		return err
	}
	d.sayf("writing a provision with the admin key: it has no harness, so the shim refuses")
	var problem map[string]any
	if err := d.call(ctx, "POST", "/v1/provisions", d.admin, prov, nil, http.StatusForbidden, &problem); err != nil {
		return err
	}
	d.sayf("refused: %v (writes need a key bound to a harness and X-Caduceus-Harness naming it)", problem["code"])
	harness := map[string]string{"X-Caduceus-Harness": "claude-code"}
	var bundle struct {
		Context    []map[string]any `yaml:"context"`
		Provisions []map[string]any `yaml:"provisions"`
	}
	if err := d.exampleYAML("shim/bundle.yaml", &bundle); err != nil {
		return err
	}
	d.sayf("examples/shim/bundle.yaml with the shim key (what `caduceus shim provisions apply` does):")
	if err := d.sendEach(ctx, "POST", "/v1/context", "", demoKeys.shim, bundle.Context, harness, http.StatusCreated); err != nil {
		return err
	}
	if err := d.sendEach(ctx, "POST", "/v1/provisions", "", demoKeys.shim, bundle.Provisions, harness, http.StatusCreated); err != nil {
		return err
	}
	if err := d.call(ctx, "POST", "/v1/provisions", demoKeys.shim, prov, harness, http.StatusCreated, nil); err != nil {
		return err
	}

	ask, err := d.example("shim/chat-refund.json")
	if err != nil {
		return err
	}
	d.sayf("an OpenAI chat completion asking about refunds (examples/shim/chat-refund.json):")
	var chat struct {
		Choices []struct {
			Message struct {
				Content string `json:"content"`
			} `json:"message"`
		} `json:"choices"`
	}
	if err := d.call(ctx, "POST", "/v1/chat/completions", demoKeys.shim, ask, nil, http.StatusOK, &chat); err != nil {
		return err
	}
	if len(chat.Choices) == 0 {
		return errors.New("the direct answer has no choices")
	}
	d.sayf("answered by PROV-REFUNDS, no provider called: %q", chat.Choices[0].Message.Content)

	release, err := d.example("shim/chat-release.json")
	if err != nil {
		return err
	}
	d.sayf("dry-run of %q (shares no word with the trigger's example):", "push the release out to production")
	var dry map[string]any
	if err := d.call(ctx, "POST", "/v1/dry-run?protocol=chat", demoKeys.shim, release, nil, http.StatusOK, &dry); err != nil {
		return err
	}
	d.sayf("decision: %s", firedSummary(dry))

	deploy, err := d.example("shim/messages-deploy.json")
	if err != nil {
		return err
	}
	d.sayf("an Anthropic message about deploying: shimmed, but offline, so it may not go upstream:")
	var refusal map[string]any
	if err := d.call(ctx, "POST", "/v1/messages", demoKeys.shim, deploy, nil, http.StatusServiceUnavailable, &refusal); err != nil {
		return err
	}
	if e, ok := refusal["error"].(map[string]any); ok {
		d.sayf("refused in Anthropic's own error shape: %v", e["message"])
	}
	var receipts struct {
		Receipts []map[string]any `json:"receipts"`
	}
	if err := d.call(ctx, "GET", "/v1/receipts", demoKeys.shim, nil, nil, http.StatusOK, &receipts); err != nil {
		return err
	}
	d.sayf("%d receipts: one per LLM request, whatever its outcome", len(receipts.Receipts))
	return d.showAudit(ctx)
}

// firedSummary names the provisions a dry-run fired, with their reasons.
func firedSummary(dry map[string]any) string {
	b, _ := json.Marshal(dry)
	var v struct {
		Fired []struct {
			ID     string `json:"id"`
			Reason string `json:"reason"`
		} `json:"fired"`
		Decision string `json:"decision"`
	}
	if json.Unmarshal(b, &v) == nil && len(v.Fired) > 0 {
		var parts []string
		for _, f := range v.Fired {
			parts = append(parts, f.ID+" ("+f.Reason+")")
		}
		return v.Decision + " with context from " + strings.Join(parts, ", ")
	}
	if len(b) > 300 {
		b = append(b[:300], "…"...)
	}
	return string(b)
}

func (d *demoRun) executor(ctx context.Context) error {
	d.stepf("Executor: a strategist's intents pass every check before the paper broker places them")
	tick, err := d.example("executor/tick.json")
	if err != nil {
		return err
	}
	d.sayf("examples/executor/tick.json: momentum buys 1 SPY (manifest examples/executor/skills/investing/strategists/momentum/SKILL.md)")
	var env struct {
		Context string  `json:"context"`
		Aborted *string `json:"aborted"`
		Actions []struct {
			Symbol string `json:"symbol"`
			Side   string `json:"side"`
			Status string `json:"status"`
			Reason string `json:"reason"`
		} `json:"actions"`
	}
	if err := d.call(ctx, "POST", "/v1/executor/ticks", demoKeys.cron, tick, nil, http.StatusOK, &env); err != nil {
		return err
	}
	if env.Aborted != nil {
		return fmt.Errorf("the tick aborted: %s", *env.Aborted)
	}
	for _, a := range env.Actions {
		d.sayf("context %s: %s %s %s", env.Context, a.Symbol, a.Side, strings.TrimSpace(a.Status+" "+a.Reason))
	}
	return d.showAudit(ctx)
}

func (d *demoRun) relay(ctx context.Context) error {
	d.stepf("Relay: a Telegram webhook reaches the agent's gateway; its reply reaches Telegram")
	events := make(chan gateway.Inbound, 4)
	gw, err := gateway.New(gateway.Config{URL: d.url, GatewayID: "gw-example", Secret: []byte(demoEnv["CADUCEUS_EXAMPLE_GATEWAY_SECRET"]),
		Platform: "telegram", BotID: "examplebot", Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		OnEvent: func(_ context.Context, in gateway.Inbound) error { events <- in; return nil }})
	if err != nil {
		return err
	}
	gctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go gw.Run(gctx)
	defer gw.Close()
	wctx, wcancel := context.WithTimeout(gctx, 15*time.Second)
	defer wcancel()
	if err := gw.WaitConnected(wctx); err != nil {
		return fmt.Errorf("the gateway did not connect: %w", err)
	}
	d.sayf("gateway gw-example connected to GET /relay with an HMAC token (caduceus relay token --gateway gw-example)")
	update, err := d.example("relay/telegram-update.json")
	if err != nil {
		return err
	}
	d.sayf("Telegram posts examples/relay/telegram-update.json, first with a wrong secret token:")
	if err := d.call(ctx, "POST", "/hooks/telegram/examplebot", "", update, map[string]string{"X-Telegram-Bot-Api-Secret-Token": "wrong"}, http.StatusUnauthorized, nil); err != nil {
		return err
	}
	d.sayf("then with the right one:")
	if err := d.call(ctx, "POST", "/hooks/telegram/examplebot", "", update, map[string]string{"X-Telegram-Bot-Api-Secret-Token": demoEnv["CADUCEUS_EXAMPLE_TELEGRAM_SECRET"]}, http.StatusOK, nil); err != nil {
		return err
	}
	select {
	case in := <-events:
		d.sayf("the gateway got %q from chat %s, session key %s", in.Event.Text, in.Event.Source.ChatID, in.SessionKey)
		res := gw.Send(ctx, in.Event.Source.ChatID, "hello Ada, this is the agent", "", nil)
		if !res.Success {
			return fmt.Errorf("the reply failed: %+v", res)
		}
	case <-time.After(15 * time.Second):
		return errors.New("no event reached the gateway")
	}
	d.sayf("its reply went out as %s", d.fake.last())
	d.sayf("Discord: a signed interaction PING to /hooks/discord/123456789012345678")
	ping := []byte(`{"type":1,"id":"1","application_id":"123456789012345678","token":"t","version":1}`)
	ts := strconv.FormatInt(time.Now().Unix(), 10)
	sig := ed25519.Sign(demoDiscordKey(), append([]byte(ts), ping...))
	var pong map[string]any
	if err := d.call(ctx, "POST", "/hooks/discord/123456789012345678", "", ping,
		map[string]string{"X-Signature-Ed25519": hex.EncodeToString(sig), "X-Signature-Timestamp": ts}, http.StatusOK, &pong); err != nil {
		return err
	}
	d.sayf("answered PONG (type %v): the signature was checked against the configured public key", pong["type"])
	return d.showAudit(ctx)
}

func (d *demoRun) audit(ctx context.Context) error {
	d.stepf("Audit: verify slot-1's hash chain")
	var out, errb bytes.Buffer
	code := d.cli(ctx, []string{"audit", "verify", "--data", d.data}, func(string) string { return "" }, strings.NewReader(""), &out, &errb)
	d.sayf("$ caduceus audit verify --data %s", d.data)
	d.sayf("%s", strings.TrimSpace(out.String()+errb.String()))
	if code != 0 {
		return fmt.Errorf("audit verify exited %d", code)
	}
	return nil
}

// showAudit prints the audit records made since the last call, oldest first.
func (d *demoRun) showAudit(ctx context.Context) error {
	var got struct {
		Records []struct {
			Seq     int64 `json:"seq"`
			Outcome struct {
				Action   string `json:"action"`
				Outcome  string `json:"outcome"`
				Resource string `json:"resource"`
				Reason   string `json:"reason"`
			} `json:"outcome"`
		} `json:"records"`
	}
	req, _ := http.NewRequestWithContext(ctx, "GET", d.url+"/v1/audit?limit=1000", nil)
	req.Header.Set("Authorization", "Bearer "+d.admin)
	resp, err := d.client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if err := json.NewDecoder(resp.Body).Decode(&got); err != nil {
		return fmt.Errorf("GET /v1/audit: %w", err)
	}
	fmt.Fprintf(d.out, "      new audit records (GET /v1/audit, the demo's own reads left out):\n")
	for i := len(got.Records) - 1; i >= 0; i-- {
		r := got.Records[i]
		if r.Seq <= int64(d.records) {
			continue
		}
		d.records = int(r.Seq)
		if r.Outcome.Action == "audit.read" {
			continue // the demo's own reads of the trail
		}
		line := fmt.Sprintf("        #%-3d %-28s %-8s %s", r.Seq, r.Outcome.Action, r.Outcome.Outcome, r.Outcome.Resource)
		if r.Outcome.Reason != "" {
			line += "  (" + r.Outcome.Reason + ")"
		}
		fmt.Fprintln(d.out, strings.TrimRight(line, " "))
	}
	return nil
}

// fakePlatform stands in for the Telegram Bot API and Discord's REST API:
// it records each call and answers success.
type fakePlatform struct {
	mu    sync.Mutex
	calls []string
}

func (f *fakePlatform) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	b, _ := io.ReadAll(io.LimitReader(r.Body, 1<<16))
	f.mu.Lock()
	f.calls = append(f.calls, r.Method+" "+redactBotToken(r.URL.Path)+" "+string(b))
	f.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	if strings.HasPrefix(r.URL.Path, "/api/") {
		io.WriteString(w, `{"id":"900","channel_id":"1"}`)
		return
	}
	io.WriteString(w, `{"ok":true,"result":{"message_id":501,"date":1767225600,"chat":{"id":-1001234,"type":"group"}}}`)
}

func (f *fakePlatform) last() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.calls) == 0 {
		return "(nothing)"
	}
	return f.calls[len(f.calls)-1]
}

// redactBotToken hides the bot token in a Bot API path (/bot<token>/method).
func redactBotToken(p string) string {
	if rest, ok := strings.CutPrefix(p, "/bot"); ok {
		if _, method, ok := strings.Cut(rest, "/"); ok {
			return "/bot<token>/" + method
		}
	}
	return p
}

// lockedBuffer is a bytes.Buffer safe for a server goroutine and a reader.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
