package shim

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"

	"github.com/caduceus-dev/caduceus/contract"
)

// ApplyItem is the result of applying one provision or context entry.
type ApplyItem struct {
	Kind    string `json:"kind"` // "provision" or "context"
	ID      string `json:"id"`   // provision id or context ref
	Result  string `json:"result"`
	Version int64  `json:"version,omitempty"`
	Error   string `json:"error,omitempty"`
	Code    string `json:"code,omitempty"`
}

// ApplyReport lists what Apply did, item by item.
type ApplyReport struct {
	Items []ApplyItem `json:"items"`
}

// Failed reports how many items were not applied.
func (r ApplyReport) Failed() int {
	n := 0
	for _, it := range r.Items {
		if it.Result == "failed" {
			n++
		}
	}
	return n
}

// Apply creates or updates provisions and context entries from a YAML or
// JSON document (`caduceus shim provisions apply FILE`): one provision, a
// list of provisions, or {provisions: [...], context: [...]}. Context
// entries go first. An item without a version updates whatever version is
// stored (still one CAS write); an item with one updates only that version.
// Each item is authorized and validated like CreateProvision /
// UpdateProvision and reported on its own. The error is invalid only when
// doc is not a document of that shape.
func (s *Service) Apply(ctx context.Context, caller contract.Caller, attested string, doc []byte) (ApplyReport, error) {
	provs, entries, err := decodeBundle(doc)
	if err != nil {
		return ApplyReport{}, err
	}
	rep := ApplyReport{Items: []ApplyItem{}}
	for _, raw := range entries {
		var head struct {
			Ref     string `json:"ref"`
			Version int64  `json:"version"`
		}
		_ = json.Unmarshal(raw, &head)
		rep.Items = append(rep.Items, upsert(ApplyItem{Kind: "context", ID: head.Ref}, head.Version,
			func() (ContextEntry, error) { return s.GetContext(ctx, caller, head.Ref) },
			func() (ContextEntry, error) { return s.CreateContext(ctx, caller, attested, raw) },
			func(v int64) (ContextEntry, error) { return s.UpdateContext(ctx, caller, attested, head.Ref, v, raw) },
			func(e ContextEntry) int64 { return e.Version }))
	}
	for _, raw := range provs {
		var head struct {
			ID      string `json:"id"`
			Version int64  `json:"version"`
		}
		_ = json.Unmarshal(raw, &head)
		rep.Items = append(rep.Items, upsert(ApplyItem{Kind: "provision", ID: head.ID}, head.Version,
			func() (Provision, error) { return s.GetProvision(ctx, caller, head.ID) },
			func() (Provision, error) { return s.CreateProvision(ctx, caller, attested, raw) },
			func(v int64) (Provision, error) { return s.UpdateProvision(ctx, caller, attested, head.ID, v, raw) },
			func(p Provision) int64 { return p.Version }))
	}
	return rep, nil
}

// itemResult is it as its write left it: failed with the error's message
// and code, else at version v.
func itemResult(it ApplyItem, v int64, err error) ApplyItem {
	if err != nil {
		e := contract.AsError(err)
		it.Result, it.Error, it.Code = "failed", e.Message, e.Code
		return it
	}
	it.Version = v
	return it
}

// decodeBundle reads a YAML or JSON document of provisions and context
// entries (see Apply) into one JSON object per item, unvalidated. It
// returns an invalid *contract.Error when the document has another shape.
func decodeBundle(doc []byte) (provisions, entries []json.RawMessage, err error) {
	tree, err := parseBundle(doc)
	if err != nil {
		return nil, nil, err
	}
	b, err := json.Marshal(tree)
	if err != nil {
		return nil, nil, contract.Invalidf("bad_document", "shim: document cannot be JSON: %v", err)
	}
	b = bytes.TrimSpace(b)
	split := func(field string, v json.RawMessage) ([]json.RawMessage, error) {
		if len(v) == 0 || string(v) == "null" {
			return nil, nil
		}
		var items []json.RawMessage
		if err := json.Unmarshal(v, &items); err != nil {
			return nil, contract.FieldError("/"+field, "bad_document", "field %s must be a list", field)
		}
		return items, nil
	}
	switch {
	case len(b) > 0 && b[0] == '[':
		provisions, err = split("(root)", b)
		return provisions, nil, err
	case len(b) > 0 && b[0] == '{':
		var m map[string]json.RawMessage
		_ = json.Unmarshal(b, &m)
		if _, ok := m["id"]; ok {
			return []json.RawMessage{b}, nil, nil
		}
		if _, ok := m["ref"]; ok {
			return nil, []json.RawMessage{b}, nil
		}
		for k := range m {
			if k != "provisions" && k != "context" {
				return nil, nil, contract.FieldError("/"+k, "bad_document", "shim: unknown top-level field %q (want provisions, context)", k)
			}
		}
		if provisions, err = split("provisions", m["provisions"]); err != nil {
			return nil, nil, err
		}
		entries, err = split("context", m["context"])
		return provisions, entries, err
	}
	return nil, nil, contract.Invalidf("bad_document", "shim: %s", fmt.Sprint("a document must be a provision, a list of them, or {provisions, context}"))
}

// upsert applies one bundle item: created when it does not exist, else
// updated at the version the bundle names (or the current one, when the
// bundle names none).
func upsert[T any](it ApplyItem, v int64, get, create func() (T, error), update func(int64) (T, error), version func(T) int64) ApplyItem {
	if v == 0 {
		if cur, err := get(); err == nil {
			v = version(cur)
		}
	}
	var x T
	var err error
	if v == 0 {
		x, err = create()
		it.Result = "created"
	} else {
		x, err = update(v)
		it.Result = "updated"
	}
	return itemResult(it, version(x), err)
}
