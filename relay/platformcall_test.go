package relay

import (
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func TestCallPlatformKeepsTheURLOutOfTransportErrors(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // nothing listens there now: the dial is refused
	const token = "123456:SECRET-bot-token"
	req, _ := http.NewRequest(http.MethodPost, "http://"+addr+"/bot"+token+"/sendMessage?access_token="+token, nil)
	_, _, err = CallPlatform(nil, req)
	if err == nil {
		t.Fatal("a refused connection returned no error")
	}
	if strings.Contains(err.Error(), token) || strings.Contains(err.Error(), "/bot") {
		t.Fatalf("the error quotes the URL: %v", err)
	}
}

func TestCallPlatformBoundsTheAnswer(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusTeapot)
		w.Write([]byte(strings.Repeat("x", MaxPlatformAnswer+1000)))
	}))
	defer srv.Close()
	req, _ := http.NewRequest(http.MethodGet, srv.URL, nil)
	status, body, err := CallPlatform(srv.Client(), req)
	if err != nil {
		t.Fatal(err)
	}
	if status != http.StatusTeapot || len(body) != MaxPlatformAnswer {
		t.Fatalf("status %d, %d bytes; want 418 and %d", status, len(body), MaxPlatformAnswer)
	}
}
