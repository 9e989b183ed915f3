package gateway

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"strings"

	"github.com/caduceus-dev/caduceus/contract"
	"github.com/caduceus-dev/caduceus/shim/upstream"
	"github.com/caduceus-dev/caduceus/shim/wire"
)

// HeaderCache says an answer came from the plan's cache ("hit").
const HeaderCache = "X-Caduceus-Cache"

// cacheKey is a request's key in a cache: the sha256 of its wire and its
// canonical body, so key order and white space do not matter.
func cacheKey(p wire.Protocol, body []byte) (string, bool) {
	canon, err := contract.CanonicalJSON(body)
	if err != nil {
		return "", false
	}
	h := sha256.New()
	h.Write([]byte(p))
	h.Write([]byte{0})
	h.Write(canon)
	return hex.EncodeToString(h.Sum(nil)), true
}

// fromCache answers f from its plan's cache when the answer is there and
// fresh (and the client did not send Cache-Control: no-cache): the same
// status, content type and bytes — a stream as the same events, its last
// held for the caller as any stream's is — and reports true. Otherwise it
// notes the key, for the answer to come, and reports false.
func (g *Gateway) fromCache(ctx context.Context, w Writer, f *forwarding) bool {
	c := f.plan.Cache
	if c == nil || g.cfg.Cache == nil || f.open {
		return false
	}
	key, ok := cacheKey(f.req.Protocol, f.body.Raw)
	if !ok {
		return false
	}
	f.cacheKey, f.capture = key, c.Bound()
	if strings.Contains(strings.ToLower(f.req.Header.Get("Cache-Control")), "no-cache") {
		return false // bypassed, but the fresh answer is kept
	}
	a, found, err := g.cfg.Cache.CacheGet(ctx, f.scope(), key, g.cfg.Now())
	if err != nil {
		g.cfg.Logger.Warn("gateway: cache not read", "err", err)
		return false
	}
	if !found {
		return false
	}
	hdr := http.Header{"Content-Type": {a.ContentType}, HeaderCache: {"hit"}}
	if a.Final == nil {
		writeAnswer(w, hdr, a.Status, a.Body)
	} else {
		writeHeader(w, hdr, a.Status)
		if w.Hash != nil {
			w.Hash.Write(a.Body)
			w.Hash.Write(a.Final)
		}
		_, _ = w.Write(a.Body)
		if fl, ok := w.ResponseWriter.(http.Flusher); ok {
			fl.Flush()
		}
		f.res.Final = a.Final
	}
	f.res.CacheHit, f.res.Route, f.res.Status = a.Receipt, "cache", a.Status
	return true
}

// keep puts an answered attempt's answer in the plan's cache.
func (g *Gateway) keep(ctx context.Context, f *forwarding, out outcome) {
	ttl, _ := f.plan.Cache.Fresh() // checked by Validate
	a := upstream.CachedAnswer{Receipt: f.req.ID, Status: out.status, ContentType: out.contentType, Body: out.captured, Final: out.final}
	if err := g.cfg.Cache.CachePut(context.WithoutCancel(ctx), f.scope(), f.cacheKey, a, g.cfg.Now().Add(ttl)); err != nil {
		g.cfg.Logger.Warn("gateway: answer not cached", "err", err)
	}
}

// scope is whose cache the request uses.
func (f *forwarding) scope() string {
	if f.req.Scope != "" {
		return f.req.Scope
	}
	return string(f.req.Caller.Identity.TenantSlot)
}
