package shim_test

import (
	"strings"
	"testing"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/responses"
	"github.com/openai/openai-go/v3/shared"

	"github.com/caduceus-dev/caduceus/contract"
	"github.com/caduceus-dev/caduceus/shim"
	"github.com/caduceus-dev/caduceus/shim/wire"
)

// TestRouteRecordsReasoningEffort: the reasoning effort a request asks for
// (chat completions' reasoning_effort, Responses' reasoning.effort,
// Anthropic's output_config.effort), sent by the official SDKs, is the
// effort of the HUX route (seed 002 $defs/route) on the receipt and on the
// audit record's provenance. A value the HUX enum does not have (minimal,
// max) is not recorded; the receipts validate against their schema.
func TestRouteRecordsReasoningEffort(t *testing.T) {
	e := newEnv(t, nil)
	ctx := t.Context()
	oc, ac := openaiClient(e, "key-a", nil), anthropicClient(e, "key-a", nil)
	msg := []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hello")}
	amsg := []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("hello"))}
	for _, c := range []struct {
		name string
		send func() error
		want contract.Effort
	}{
		{"chat high", func() error {
			_, err := oc.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{Model: "gpt-5", Messages: msg, ReasoningEffort: shared.ReasoningEffortHigh})
			return err
		}, contract.EffortHigh},
		{"chat minimal", func() error {
			_, err := oc.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{Model: "gpt-5", Messages: msg, ReasoningEffort: shared.ReasoningEffortMinimal})
			return err
		}, ""},
		{"responses low", func() error {
			_, err := oc.Responses.New(ctx, responses.ResponseNewParams{Model: "gpt-5", Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("hello")},
				Reasoning: shared.ReasoningParam{Effort: shared.ReasoningEffortLow}})
			return err
		}, contract.EffortLow},
		{"responses none", func() error {
			_, err := oc.Responses.New(ctx, responses.ResponseNewParams{Model: "gpt-5", Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("hello")}})
			return err
		}, ""},
		{"messages xhigh", func() error {
			_, err := ac.Messages.New(ctx, anthropic.MessageNewParams{Model: "claude-sonnet-4-5", MaxTokens: 256, Messages: amsg,
				OutputConfig: anthropic.OutputConfigParam{Effort: anthropic.OutputConfigEffortXhigh}})
			return err
		}, contract.EffortXHigh},
		{"messages max", func() error {
			_, err := ac.Messages.New(ctx, anthropic.MessageNewParams{Model: "claude-sonnet-4-5", MaxTokens: 256, Messages: amsg,
				OutputConfig: anthropic.OutputConfigParam{Effort: anthropic.OutputConfigEffortMax}})
			return err
		}, ""},
	} {
		if err := c.send(); err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		r := e.receipts(t, "key-a")[0] // newest first; validated against the schema
		if r.Route == nil || r.Route.Effort != c.want {
			t.Errorf("%s: receipt route %+v, want effort %q", c.name, r.Route, c.want)
		}
		recs := e.audit.Records("slot-1")
		last := recs[len(recs)-1]
		if last.Provenance == nil || last.Provenance.Route == nil || last.Provenance.Route.Effort != c.want {
			t.Errorf("%s: audit provenance %+v, want effort %q", c.name, last.Provenance, c.want)
		} else if err := last.Provenance.Validate(); err != nil {
			t.Errorf("%s: provenance does not validate: %v", c.name, err)
		}
	}
}

// TestReceiptsCarryTheContractVersion: every receipt the shim writes, a
// refusal's too, carries contract_version (seed 002 $defs/contract_version),
// the version of shim.receipt.schema.json it was written under.
func TestReceiptsCarryTheContractVersion(t *testing.T) {
	e := newEnv(t, nil)
	if _, err := call(t, e, "key-a", wire.ChatCompletions, false, "gpt-4o", "hello", nil); err != nil {
		t.Fatal(err)
	}
	if resp, _ := e.post(t, "key-a", "/v1/messages", `{"model":"x-contributor","messages":[]}`, nil); resp.StatusCode != 403 {
		t.Fatalf("contributor: %d", resp.StatusCode)
	}
	rs := e.receipts(t, "key-a")
	if len(rs) != 2 {
		t.Fatalf("%d receipts", len(rs))
	}
	for _, r := range rs {
		if r.ContractVersion != shim.ReceiptContractVersion || !contract.ValidContractVersion(r.ContractVersion) {
			t.Errorf("receipt %s (%s): contract_version %q, want %q", r.ID, r.Decision, r.ContractVersion, shim.ReceiptContractVersion)
		}
	}
}

// TestProvisionAndContextTags: provisions and context entries take HUX
// tags (seed 002 $defs/tags: at most 32, unique, lower-case, 1-40 of
// a-z 0-9 -); a bad list is refused naming /tags and stores nothing.
func TestProvisionAndContextTags(t *testing.T) {
	e := newEnv(t, nil)
	c := callers["key-a"]
	p := e.provision(t, "key-a", `{"id":"T1","tags":["billing","team-7"],"triggers":{"keyword":{"any":["refund"]}},"action":"respond_directly","response":{"text":"7 days"}}`)
	if got, err := e.svc.GetProvision(t.Context(), c, "T1"); err != nil || strings.Join(got.Tags, ",") != "billing,team-7" || p.Version != 1 {
		t.Fatalf("tags not kept: %+v %v", got, err)
	}
	ce := e.context(t, "key-a", `{"ref":"verb:deploy","kind":"verb","body":"make deploy","tags":["ops"]}`)
	if strings.Join(ce.Tags, ",") != "ops" {
		t.Fatalf("context tags not kept: %+v", ce)
	}
	many := make([]string, 33)
	for i := range many {
		many[i] = `"t` + string(rune('a'+i%26)) + strings.Repeat("x", i/26) + `"`
	}
	for _, bad := range []string{`["Billing"]`, `["billing","billing"]`, `["-x"]`, `[""]`, `[` + strings.Join(many, ",") + `]`, `"billing"`} {
		_, err := e.svc.CreateProvision(t.Context(), c, c.Harness, []byte(`{"id":"T2","tags":`+bad+`,"triggers":{"keyword":{"any":["x"]}},"action":"respond_directly","response":{"text":"x"}}`))
		if ce := contract.AsError(err); err == nil || ce.Kind != contract.KindInvalid || !strings.HasPrefix(ce.Field, "/tags") {
			t.Errorf("provision tags %s: %v (field %q), want invalid on /tags", bad, err, contract.AsError(err).Field)
		}
		_, err = e.svc.CreateContext(t.Context(), c, c.Harness, []byte(`{"ref":"verb:x","kind":"verb","body":"x","tags":`+bad+`}`))
		if ce := contract.AsError(err); err == nil || ce.Kind != contract.KindInvalid || !strings.HasPrefix(ce.Field, "/tags") {
			t.Errorf("context tags %s: %v (field %q), want invalid on /tags", bad, err, contract.AsError(err).Field)
		}
	}
	if _, err := e.svc.GetProvision(t.Context(), c, "T2"); contract.KindOf(err) != contract.KindNotFound {
		t.Errorf("a refused provision was stored: %v", err)
	}
}

// TestDocumentsCarryTheContractVersion: every provision and context entry
// written (create, update, bundle apply) carries contract_version, the
// version of its schema the server wrote it under, whatever the client sent;
// a contract_version that is not 1.x.y is refused naming the field.
func TestDocumentsCarryTheContractVersion(t *testing.T) {
	e := newEnv(t, nil)
	c := callers["key-a"]
	ctx := t.Context()
	p := e.provision(t, "key-a", `{"id":"V1","contract_version":"1.9.0","triggers":{"keyword":{"any":["x"]}},"action":"respond_directly","response":{"text":"x"}}`)
	ce := e.context(t, "key-a", `{"ref":"verb:v","kind":"verb","body":"b"}`)
	p2, err := e.svc.UpdateProvision(ctx, c, c.Harness, "V1", p.Version, []byte(`{"id":"V1","triggers":{"keyword":{"any":["y"]}},"action":"respond_directly","response":{"text":"y"}}`))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.svc.Apply(ctx, c, c.Harness, []byte(`{"provisions":[{"id":"V2","triggers":{"keyword":{"any":["z"]}},"action":"respond_directly","response":{"text":"z"}}]}`)); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"V1", "V2"} {
		got, err := e.svc.GetProvision(ctx, c, id)
		if err != nil || got.ContractVersion != shim.ProvisionContractVersion {
			t.Errorf("provision %s: contract_version %q (%v), want %q", id, got.ContractVersion, err, shim.ProvisionContractVersion)
		}
	}
	if p.ContractVersion != shim.ProvisionContractVersion || p2.ContractVersion != shim.ProvisionContractVersion {
		t.Errorf("written provisions answer contract_version %q, %q", p.ContractVersion, p2.ContractVersion)
	}
	if got, err := e.svc.GetContext(ctx, c, "verb:v"); err != nil || got.ContractVersion != shim.ContextContractVersion || ce.ContractVersion != shim.ContextContractVersion {
		t.Errorf("context entry: contract_version %q / %q (%v), want %q", got.ContractVersion, ce.ContractVersion, err, shim.ContextContractVersion)
	}
	_, err = e.svc.CreateProvision(ctx, c, c.Harness, []byte(`{"id":"V3","contract_version":"2.0","triggers":{"keyword":{"any":["x"]}},"action":"respond_directly","response":{"text":"x"}}`))
	if ce := contract.AsError(err); err == nil || ce.Kind != contract.KindInvalid || ce.Field != "/contract_version" {
		t.Errorf("contract_version 2.0: %v (field %q), want invalid on /contract_version", err, contract.AsError(err).Field)
	}
}
