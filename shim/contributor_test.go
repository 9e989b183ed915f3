package shim_test

import (
	"strings"
	"testing"

	"github.com/caduceus-dev/caduceus/contract"
	"github.com/caduceus-dev/caduceus/shim"
	"github.com/caduceus-dev/caduceus/shim/wire"
)

// contributorProv is mmProv with a contributor-tier classifier model.
var contributorProv = strings.Replace(mmProv, "tiny-classifier", "org/Contributor-3b", 1)

// TestProvisionWritesRefuseContributorModels: seed 003 H03 refuses
// contributor-tier models in micromodel trigger classifiers, so every write
// path (create, update, bundle apply) refuses such a provision as invalid
// input naming the field, with code contributor_model_refused, and stores
// nothing.
func TestProvisionWritesRefuseContributorModels(t *testing.T) {
	e := newEnv(t, nil)
	c := callers["key-a"]
	isRefusal := func(what string, err error) {
		t.Helper()
		wantErr(t, err, contract.KindInvalid, shim.CodeContributorRefused)
		if f := contract.AsError(err).Field; f != "/triggers/micromodel/model" {
			t.Errorf("%s: field %q, want /triggers/micromodel/model", what, f)
		}
	}
	_, err := e.svc.CreateProvision(t.Context(), c, c.Harness, []byte(contributorProv))
	isRefusal("create", err)
	if _, err := e.svc.GetProvision(t.Context(), c, "MM"); contract.KindOf(err) != contract.KindNotFound {
		t.Fatalf("a refused create stored the provision: %v", err)
	}

	p := e.provision(t, "key-a", mmProv)
	_, err = e.svc.UpdateProvision(t.Context(), c, c.Harness, "MM", p.Version, []byte(contributorProv))
	isRefusal("update", err)
	got, err := e.svc.GetProvision(t.Context(), c, "MM")
	if err != nil || got.Version != p.Version || got.Triggers.Micromodel.Model != "tiny-classifier" {
		t.Fatalf("a refused update changed the provision: %+v %v", got, err)
	}

	rep, err := e.svc.Apply(t.Context(), c, c.Harness, []byte(`{"provisions":[`+strings.Replace(contributorProv, `"MM"`, `"MM2"`, 1)+`]}`))
	if err != nil || len(rep.Items) != 1 || rep.Items[0].Result != "failed" || rep.Items[0].Code != shim.CodeContributorRefused {
		t.Fatalf("bundle apply: %+v %v", rep, err)
	}
	if _, err := e.svc.GetProvision(t.Context(), c, "MM2"); contract.KindOf(err) != contract.KindNotFound {
		t.Fatalf("a refused bundle item was stored: %v", err)
	}
}

// TestContributorMicromodelRefusedBeforeOfflineFallback: a stored provision
// naming a contributor-tier classifier (written before the write rule, or
// straight into the store) is refused at evaluation before anything else is
// decided for it: offline (dry-run) it is reported
// micromodel_contributor_refused, not micromodel_offline, and online the
// classifier is never asked.
func TestContributorMicromodelRefusedBeforeOfflineFallback(t *testing.T) {
	content := `{"apply":true,"confidence":0.95}`
	cls := classifierServer(t, &content, 0)
	e := newEnv(t, func(c *shim.Config) { c.Classifier = &shim.ChatClassifier{BaseURL: cls.URL} })
	storeContributorProv(t, e)
	body := []byte(`{"model":"gpt-4o","messages":[{"role":"user","content":"a billing question"}]}`)
	res, err := e.svc.DryRun(t.Context(), callers["key-a"], wire.ChatCompletions, body)
	if err != nil || len(res.Fired) != 0 || len(res.Skipped) != 1 ||
		res.Skipped[0].ID != "MM" || res.Skipped[0].Reason != "micromodel_contributor_refused" {
		t.Fatalf("offline evaluation: %+v %v", res, err)
	}
	if r, err := call(t, e, "key-a", wire.ChatCompletions, false, "gpt-4o", "billing", nil); err != nil || r.text != upstreamText || cls.calls() != 0 {
		t.Fatalf("online: %q %v, classifier asked %d times", r.text, err, cls.calls())
	}
	if r := e.receipts(t, "key-a")[0]; len(r.Skipped) != 1 || r.Skipped[0].Reason != "micromodel_contributor_refused" {
		t.Fatalf("online skip: %+v", r.Skipped)
	}
}

// storeContributorProv puts mmProv with a contributor-tier classifier into
// key-a's tenant straight through the store, as no write path takes it.
func storeContributorProv(t *testing.T, e *env) {
	t.Helper()
	p, err := shim.DecodeProvision([]byte(mmProv))
	if err != nil {
		t.Fatal(err)
	}
	p.Triggers.Micromodel.Model = "org/Contributor-3b"
	if _, err := e.store.CreateProvision(t.Context(), callers["key-a"].Identity.TenantSlot, p); err != nil {
		t.Fatal(err)
	}
}
