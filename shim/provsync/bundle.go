package provsync

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/caduceus-dev/caduceus/contract"
	"github.com/caduceus-dev/caduceus/internal/lazyre"
	"github.com/caduceus-dev/caduceus/shim"
)

// syncBundle is what a provision source serves (a file of a directory, an
// HTTP URL, or a handshake answer):
//
//	{"provisions": [{...a provision, with "fabric_governance" and the
//	                 source's "version"; "system_builtin": true for starters}],
//	 "context":    [{...a context entry, with "fabric_governance", the
//	                 source's "version", and either "body" or
//	                 "body_uri": "tessera://blobs/<64 hex sha256>"}]}
//
// "context_entries" is accepted for "context". Records stay raw so one bad
// record is refused on its own without losing the rest.
type syncBundle struct {
	Provisions []json.RawMessage
	Context    []json.RawMessage
}

// maxSyncRecords bounds the records of one bundle.
const maxSyncRecords = 10000

// parseSyncBundle reads a JSON bundle. It returns an invalid
// *contract.Error naming the field when the document is not an object of
// lists of objects; it never panics.
func parseSyncBundle(b []byte) (syncBundle, error) {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(b, &m); err != nil || m == nil {
		return syncBundle{}, contract.Invalidf("bad_bundle", "shim: sync bundle must be a JSON object")
	}
	var out syncBundle
	for k, v := range m {
		var items []json.RawMessage
		if err := json.Unmarshal(v, &items); err != nil && string(v) != "null" {
			return syncBundle{}, contract.FieldError("/"+k, "bad_bundle", "shim: field %s must be a list", k)
		}
		for i, it := range items {
			if t := bytes.TrimSpace(it); len(t) == 0 || t[0] != '{' {
				return syncBundle{}, contract.FieldError(fmt.Sprintf("/%s/%d", k, i), "bad_bundle", "shim: field %s.%d must be an object", k, i)
			}
		}
		switch k {
		case "provisions":
			out.Provisions = append(out.Provisions, items...)
		case "context", "context_entries":
			out.Context = append(out.Context, items...)
		default:
			return syncBundle{}, contract.FieldError("/"+k, "bad_bundle", "shim: unknown bundle field %q (want provisions, context)", k)
		}
	}
	if len(out.Provisions)+len(out.Context) > maxSyncRecords {
		return syncBundle{}, contract.Invalidf("bad_bundle", "shim: a bundle holds at most %d records", maxSyncRecords)
	}
	return out, nil
}

// syncMeta are the fields a synced record carries besides its document.
type syncMeta struct {
	ID               string           `json:"id"`
	Ref              string           `json:"ref"`
	Version          int64            `json:"version"`
	SystemBuiltin    bool             `json:"system_builtin"`
	FabricGovernance *shim.Governance `json:"fabric_governance"`
	BodyURI          string           `json:"body_uri"`
}

var blobURIRE = lazyre.New(`^tessera://blobs/([0-9a-f]{64})$`)

// blobDigest returns the lowercase hex SHA-256 a tessera://blobs/<64 hex>
// URI names, or false when uri is not one.
func blobDigest(uri string) (string, bool) {
	m := blobURIRE().FindStringSubmatch(strings.ToLower(uri))
	if m == nil || !strings.HasPrefix(uri, "tessera://blobs/") {
		return "", false
	}
	return m[1], true
}

// stripFields removes keys from a JSON object (the sync-only fields the
// stored documents' schemas do not allow).
func stripFields(raw json.RawMessage, keys ...string) ([]byte, error) {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil {
		return nil, err
	}
	for _, k := range keys {
		delete(m, k)
	}
	return json.Marshal(m)
}
