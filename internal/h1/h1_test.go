package h1_test

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httptrace"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/caduceus-dev/caduceus/internal/h1"
)

// recorder is a Fallback that records what reached it.
type recorder struct{ got []string }

func (r *recorder) RoundTrip(req *http.Request) (*http.Response, error) {
	r.got = append(r.got, req.URL.String())
	return &http.Response{StatusCode: 299, Body: http.NoBody, Request: req}, nil
}

// server is a net/http server that counts the connections it accepted.
func server(t *testing.T, h http.HandlerFunc) (*httptest.Server, *atomic.Int64) {
	t.Helper()
	var conns atomic.Int64
	s := httptest.NewUnstartedServer(h)
	s.Config.ConnState = func(_ net.Conn, st http.ConnState) {
		if st == http.StateNew {
			conns.Add(1)
		}
	}
	s.Start()
	t.Cleanup(s.Close)
	return s, &conns
}

func client(fb http.RoundTripper) (*http.Client, *h1.Transport) {
	tr := &h1.Transport{Fallback: fb}
	return &http.Client{Transport: tr}, tr
}

func TestKeepAliveReusesOneConnection(t *testing.T) {
	s, conns := server(t, func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		fmt.Fprintf(w, "%s %s %s", r.Method, r.URL.Path, b)
	})
	c, _ := client(&recorder{})
	for i := range 50 {
		resp, err := c.Post(s.URL+"/v1/x", "application/json", strings.NewReader(fmt.Sprint(i)))
		if err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil || string(b) != fmt.Sprintf("POST /v1/x %d", i) {
			t.Fatalf("answer %d: %q %v", i, b, err)
		}
	}
	if n := conns.Load(); n != 1 {
		t.Fatalf("50 requests in turn took %d connections; want 1", n)
	}
}

func TestStreamArrivesAsItIsWritten(t *testing.T) {
	next := make(chan struct{})
	s, _ := server(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		for i := range 3 {
			fmt.Fprintf(w, "data: %d\n\n", i)
			w.(http.Flusher).Flush()
			<-next // the client has read this event
		}
	})
	c, _ := client(&recorder{})
	resp, err := c.Get(s.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	br := bufio.NewReader(resp.Body)
	for i := range 3 {
		line, err := br.ReadString('\n')
		if err != nil || line != fmt.Sprintf("data: %d\n", i) {
			t.Fatalf("event %d: %q %v", i, line, err)
		}
		br.ReadString('\n')
		next <- struct{}{}
	}
	if _, err := io.ReadAll(br); err != nil {
		t.Fatal(err)
	}
}

func TestCancelEndsAStreamAndItsConnection(t *testing.T) {
	gone := make(chan struct{})
	s, _ := server(t, func(w http.ResponseWriter, r *http.Request) {
		w.Write([]byte("data: first\n\n"))
		w.(http.Flusher).Flush()
		<-r.Context().Done() // the client's connection closed
		close(gone)
	})
	c, _ := client(&recorder{})
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, s.URL, strings.NewReader("{}"))
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 64)
	if n, err := resp.Body.Read(buf); err != nil || !strings.HasPrefix(string(buf[:n]), "data: first") {
		t.Fatalf("first read: %q %v", buf[:n], err)
	}
	cancel()
	if _, err := io.ReadAll(resp.Body); !errors.Is(err, context.Canceled) {
		t.Fatalf("reading after the cancel: %v; want context.Canceled", err)
	}
	<-gone
}

func TestServerClosedIdleConnectionIsNotUsed(t *testing.T) {
	s, conns := server(t, func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") })
	c, _ := client(&recorder{})
	get := func() {
		t.Helper()
		resp, err := c.Post(s.URL, "application/json", strings.NewReader("{}"))
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if string(b) != "ok" {
			t.Fatalf("answer %q", b)
		}
	}
	get()
	s.CloseClientConnections() // the idle connection, closed by the server
	get()
	if n := conns.Load(); n != 2 {
		t.Fatalf("%d connections; want 2", n)
	}
}

func TestConnectionCloseAndEarlyCloseAreNotReused(t *testing.T) {
	s, conns := server(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/close" {
			w.Header().Set("Connection", "close")
		}
		io.WriteString(w, strings.Repeat("x", 100<<10))
	})
	c, _ := client(&recorder{})
	for _, path := range []string{"/close", "/", "/"} {
		resp, err := c.Get(s.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		if path == "/close" {
			io.ReadAll(resp.Body)
		} else {
			resp.Body.Read(make([]byte, 10)) // closed unread
		}
		resp.Body.Close()
	}
	if n := conns.Load(); n != 3 {
		t.Fatalf("%d connections; want 3 (none of them reusable)", n)
	}
}

func TestNoBodyAnswersKeepTheConnection(t *testing.T) {
	s, conns := server(t, func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusNoContent) })
	c, _ := client(&recorder{})
	for range 3 {
		resp, err := c.Head(s.URL)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		req, _ := http.NewRequest(http.MethodDelete, s.URL, nil)
		if resp, err = c.Do(req); err != nil || resp.StatusCode != http.StatusNoContent {
			t.Fatalf("%v %v", resp, err)
		}
		resp.Body.Close()
	}
	if n := conns.Load(); n != 1 {
		t.Fatalf("%d connections; want 1", n)
	}
}

func TestChunkedRequestBody(t *testing.T) {
	s, _ := server(t, func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		fmt.Fprintf(w, "%v %s", r.TransferEncoding, b)
	})
	c, _ := client(&recorder{})
	pr, pw := io.Pipe()
	go func() { pw.Write([]byte("hello ")); pw.Write([]byte("world")); pw.Close() }()
	resp, err := c.Post(s.URL, "text/plain", pr)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	if string(b) != "[chunked] hello world" {
		t.Fatalf("%q", b)
	}
}

// rawServer answers every request on a connection with answer, verbatim.
func rawServer(t *testing.T, answer string) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			nc, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer nc.Close()
				br := bufio.NewReader(nc)
				for {
					req, err := http.ReadRequest(br)
					if err != nil {
						return
					}
					io.Copy(io.Discard, req.Body)
					if _, err := io.WriteString(nc, answer); err != nil {
						return
					}
				}
			}()
		}
	}()
	return "http://" + ln.Addr().String()
}

func TestInterimAnswersAreSkipped(t *testing.T) {
	u := rawServer(t, "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 103 Early Hints\r\nLink: </a>\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
	c, _ := client(&recorder{})
	resp, err := c.Post(u, "text/plain", strings.NewReader("x"))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 || string(b) != "ok" {
		t.Fatalf("%d %q", resp.StatusCode, b)
	}
}

func TestWroteRequestIsTraced(t *testing.T) {
	s, _ := server(t, func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") })
	c, _ := client(&recorder{})
	var wrote []error
	ctx := httptrace.WithClientTrace(context.Background(), &httptrace.ClientTrace{
		WroteRequest: func(i httptrace.WroteRequestInfo) { wrote = append(wrote, i.Err) },
	})
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, s.URL, strings.NewReader("{}"))
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if len(wrote) != 1 || wrote[0] != nil {
		t.Fatalf("WroteRequest calls: %v; want one, without error", wrote)
	}
	// A refused dial is no request written.
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	addr := ln.Addr().String()
	ln.Close()
	wrote = nil
	req, _ = http.NewRequestWithContext(ctx, http.MethodPost, "http://"+addr, strings.NewReader("{}"))
	if _, err := c.Do(req); err == nil {
		t.Fatal("a request to a closed port succeeded")
	}
	if len(wrote) != 0 {
		t.Fatalf("WroteRequest called for a request never written: %v", wrote)
	}
}

func TestOtherRequestsGoToFallback(t *testing.T) {
	rec := &recorder{}
	tr := &h1.Transport{Fallback: rec, Proxy: func(r *http.Request) (*url.URL, error) {
		if r.URL.Host == "proxied.example" {
			return url.Parse("http://proxy.example:3128")
		}
		return nil, nil
	}}
	c := &http.Client{Transport: tr}
	for _, u := range []string{"https://api.example/v1", "http://proxied.example/v1"} {
		resp, err := c.Get(u)
		if err != nil || resp.StatusCode != 299 {
			t.Fatalf("%s: %v %v", u, resp, err)
		}
	}
	req, _ := http.NewRequest(http.MethodPost, "http://plain.example/v1", strings.NewReader("{}"))
	req.Header.Set("Expect", "100-continue")
	if resp, err := c.Do(req); err != nil || resp.StatusCode != 299 {
		t.Fatalf("Expect: %v %v", resp, err)
	}
	if len(rec.got) != 3 {
		t.Fatalf("fallback got %v; want the three", rec.got)
	}
}

func TestConcurrentRequestsShareThePool(t *testing.T) {
	s, conns := server(t, func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		w.Write(b)
	})
	c, tr := client(&recorder{})
	tr.MaxIdlePerHost = 4
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 50 {
				want := fmt.Sprintf("%d-%d", g, i)
				resp, err := c.Post(s.URL, "text/plain", strings.NewReader(want))
				if err != nil {
					t.Error(err)
					return
				}
				b, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if string(b) != want {
					t.Errorf("got %q want %q", b, want)
				}
			}
		})
	}
	wg.Wait()
	if n := conns.Load(); n > 8+8 {
		t.Errorf("%d connections for 8 clients", n)
	}
	tr.CloseIdleConnections()
}

// FuzzAnswer: whatever bytes an upstream answers with, the transport
// returns an error or an answer whose body reads to an end; it never
// panics or hangs.
func FuzzAnswer(f *testing.F) {
	f.Add([]byte("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"))
	f.Add([]byte("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nok\r\n0\r\n\r\n"))
	f.Add([]byte("HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 204 No Content\r\n\r\n"))
	f.Add([]byte("HTTP/1.0 200 OK\r\n\r\nuntil close"))
	f.Add([]byte("HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nshort"))
	f.Add([]byte("garbage\r\n\r\n"))
	f.Fuzz(func(t *testing.T, answer []byte) {
		tr := &h1.Transport{Fallback: &recorder{}, Dial: func(ctx context.Context, _, _ string) (net.Conn, error) {
			cl, sv := net.Pipe()
			go func() {
				defer sv.Close()
				req, err := http.ReadRequest(bufio.NewReader(sv))
				if err != nil {
					return
				}
				io.Copy(io.Discard, req.Body)
				sv.Write(answer)
			}()
			return cl, nil
		}}
		req, _ := http.NewRequest(http.MethodPost, "http://upstream.test/v1", bytes.NewReader([]byte("{}")))
		resp, err := tr.RoundTrip(req)
		if err != nil {
			return
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	})
}

func TestReadsAfterTheEndAndAfterClose(t *testing.T) {
	s, _ := server(t, func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") })
	c, _ := client(&recorder{})
	resp, err := c.Get(s.URL)
	if err != nil {
		t.Fatal(err)
	}
	if b, err := io.ReadAll(resp.Body); err != nil || string(b) != "ok" {
		t.Fatalf("%q %v", b, err)
	}
	for range 2 {
		if n, err := resp.Body.Read(make([]byte, 4)); n != 0 || err != io.EOF {
			t.Fatalf("a read after the end: %d %v; want 0, EOF", n, err)
		}
	}
	resp.Body.Close()
	resp, err = c.Get(s.URL)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if _, err := resp.Body.Read(make([]byte, 4)); err == nil || err == io.EOF {
		t.Fatalf("a read after Close: %v; want an error", err)
	}
}
