//go:build !js

package gateway

import (
	"net/http"

	"github.com/caduceus-dev/caduceus/internal/h1"
)

// Transport is the transport the shim forwards with when it is given no
// client: an idle pool of maxIdlePerHost connections per upstream (0: 256,
// enough for the concurrency one process serves, so connections are reused
// rather than dialled anew under load; Go's default keeps 2), HTTP/2 where
// the upstream offers it, and bounds on the phases that have a natural one —
// dial 10s, TLS handshake 10s — but none on the wait for the answer: a
// provider may think for minutes before its first byte, and a stream lasts
// as long as the answer. The gateway bounds that wait where a plan allows a
// failover (attempt_timeout) or a route asks (timeout); otherwise the
// caller's hang-up cancels it.
//
// A plain-HTTP upstream reached without a proxy (a local model server, a
// sidecar) is spoken to by internal/h1, which runs the exchange on the
// request's own goroutine; https and proxied upstreams by net/http's
// Transport. (Under js/wasm, where net/http's Transport is the Fetch API,
// it is that alone: transport_js.go.)
func Transport(maxIdlePerHost int) http.RoundTripper {
	if maxIdlePerHost <= 0 {
		maxIdlePerHost = 256
	}
	return &h1.Transport{Fallback: netTransport(maxIdlePerHost), Proxy: http.ProxyFromEnvironment, MaxIdlePerHost: maxIdlePerHost}
}
