//go:build js

package gateway

import "net/http"

// Transport is net/http's Transport (the Fetch API under js/wasm), as
// transport.go configures it beside internal/h1 elsewhere.
func Transport(maxIdlePerHost int) http.RoundTripper {
	if maxIdlePerHost <= 0 {
		maxIdlePerHost = 256
	}
	return netTransport(maxIdlePerHost)
}
