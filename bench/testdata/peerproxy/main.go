// Command peerproxy is the bench tests' peer: a reverse proxy in a process
// of its own, listening on 127.0.0.1:$CADUCEUS_BENCH_PORT and forwarding to
// $CADUCEUS_BENCH_UPSTREAM.
//
// PEERPROXY_SPIN=N hashes N times on every request before forwarding it (a
// fixed amount of CPU, however busy the machine); PEERPROXY_PIDFILE has it
// write its pid there; PEERPROXY_IGNORE_TERM=1 has it ignore SIGTERM;
// PEERPROXY_REQUIRE="Name: value" has it answer 401 to a request without
// that header; PEERPROXY_REQUIRE_MODEL=MODEL has it answer 400 to a request
// whose JSON body's "model" is not MODEL.
// PEERPROXY_CALIBRATE=N only hashes N times and exits, for a test to read
// what hashing costs this binary.
package main

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
)

func main() {
	if s := os.Getenv("PEERPROXY_CALIBRATE"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil {
			fail("PEERPROXY_CALIBRATE: %v", err)
		}
		fmt.Printf("%x\n", hash(n))
		return
	}
	up, err := url.Parse(os.Getenv("CADUCEUS_BENCH_UPSTREAM"))
	if err != nil || up.Host == "" {
		fail("CADUCEUS_BENCH_UPSTREAM %q: want a base URL", os.Getenv("CADUCEUS_BENCH_UPSTREAM"))
	}
	port := os.Getenv("CADUCEUS_BENCH_PORT")
	if _, err := strconv.Atoi(port); err != nil {
		fail("CADUCEUS_BENCH_PORT %q: want a port", port)
	}
	spin := 0
	if s := os.Getenv("PEERPROXY_SPIN"); s != "" {
		if spin, err = strconv.Atoi(s); err != nil {
			fail("PEERPROXY_SPIN: %v", err)
		}
	}
	if f := os.Getenv("PEERPROXY_PIDFILE"); f != "" {
		if err := os.WriteFile(f, []byte(strconv.Itoa(os.Getpid())), 0o600); err != nil {
			fail("%v", err)
		}
	}
	if os.Getenv("PEERPROXY_IGNORE_TERM") == "1" {
		signal.Ignore(syscall.SIGTERM)
	}
	var reqKey, reqValue string
	if s := os.Getenv("PEERPROXY_REQUIRE"); s != "" {
		k, v, ok := strings.Cut(s, ":")
		if !ok || strings.TrimSpace(k) == "" {
			fail("PEERPROXY_REQUIRE %q: want Name: value", s)
		}
		reqKey, reqValue = strings.TrimSpace(k), strings.TrimSpace(v)
	}
	wantModel := os.Getenv("PEERPROXY_REQUIRE_MODEL")
	rp := &httputil.ReverseProxy{Rewrite: func(pr *httputil.ProxyRequest) { pr.SetURL(up) }}
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if reqKey != "" && r.Header.Get(reqKey) != reqValue {
			http.Error(w, fmt.Sprintf("peerproxy: want %s: %s, got %q", reqKey, reqValue, r.Header.Values(reqKey)), http.StatusUnauthorized)
			return
		}
		if wantModel != "" {
			body, err := io.ReadAll(r.Body)
			var req struct{ Model string }
			if err == nil {
				err = json.Unmarshal(body, &req)
			}
			if err != nil || req.Model != wantModel {
				http.Error(w, fmt.Sprintf("peerproxy: want model %q, got %q (%v)", wantModel, req.Model, err), http.StatusBadRequest)
				return
			}
			r.Body = io.NopCloser(bytes.NewReader(body))
		}
		sum := hash(spin)
		w.Header().Set("X-Peerproxy-Spin", fmt.Sprintf("%x", sum[:2]))
		rp.ServeHTTP(w, r)
	})
	fail("%v", http.ListenAndServe("127.0.0.1:"+port, h))
}

// hash hashes n times.
func hash(n int) [32]byte {
	sum := sha256.Sum256(nil)
	for range n {
		sum = sha256.Sum256(sum[:])
	}
	return sum
}

func fail(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "peerproxy: "+format+"\n", args...)
	os.Exit(1)
}
