package provsync

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"

	"github.com/caduceus-dev/caduceus/contract"
)

// HandshakeRequest is what Caduceus sends in POST /handshake to a remote
// provision server: who is asking and the largest max_chars it will honour.
type HandshakeRequest struct {
	Client   string              `json:"client"` // "caduceus"
	Tenant   contract.TenantSlot `json:"tenant"`
	Harness  string              `json:"harness"`
	MaxChars int                 `json:"max_chars"`
}

// handshakeSource is a remote provision server (source
// "handshake+http(s)://host"): POST /handshake with a HandshakeRequest
// answers a syncBundle ({"provisions": [...], "context": [...]}), whose
// records go through the same lens, blob checks, max_chars clamp and CAS
// as any sync; blobs are GET /blobs/<hex>.
type handshakeSource struct {
	y       *Syncer
	base    *url.URL
	tenant  contract.TenantSlot
	harness string
}

func (h *handshakeSource) bundle(ctx context.Context) (syncBundle, error) {
	body, _ := json.Marshal(HandshakeRequest{Client: "caduceus", Tenant: h.tenant, Harness: h.harness, MaxChars: h.y.cfg.MaxChars})
	b, err := h.y.fetch(ctx, http.MethodPost, h.base.JoinPath("handshake").String(), body)
	if err != nil {
		return syncBundle{}, unavailable("%v", err)
	}
	return parseSyncBundle(b)
}

func (h *handshakeSource) blob(ctx context.Context, digest string) ([]byte, error) {
	return h.y.fetch(ctx, http.MethodGet, h.base.JoinPath("blobs", digest).String(), nil)
}
