package relay

import (
	"encoding/base64"
	"errors"
	"strings"
	"testing"
	"time"
)

func TestToken(t *testing.T) {
	secret := []byte("s3cret")
	secrets := func(id string) [][]byte {
		switch id {
		case "gw-1", "gw:colon":
			return [][]byte{[]byte("old"), secret}
		}
		return nil
	}
	now := time.Unix(1_800_000_000, 0)
	// Known vector: the gateway's make_token formula computed independently
	// (python3: base64.urlsafe_b64encode(f"{signed}:{hmac.new(b"s3cret", signed, sha256).hexdigest()}").rstrip("=")).
	tok := MintTokenExp(secret, "gw-1", 1_800_000_300)
	raw, _ := base64.RawURLEncoding.DecodeString(tok)
	if want := "Z3ctMToxODAwMDAwMzAwOjU4ZjhjYmYwOTk5ODRiNDBmYTRlNzM3NmIzNzlhMjEyNGMwZjk2NmExMGExM2FmZTEyMmYxNzY1NzgzMjYzZGI"; tok != want {
		t.Fatalf("token %q, want the gateway's %q", tok, want)
	}
	if strings.ContainsAny(tok, "=+/") {
		t.Errorf("token %q is not unpadded base64url", tok)
	}
	if id, err := VerifyToken(tok, secrets, now); err != nil || id != "gw-1" {
		t.Fatalf("VerifyToken = %q, %v", id, err)
	}
	if id, err := VerifyToken(MintTokenExp(secret, "gw:colon", 0), secrets, now); err != nil || id != "gw:colon" {
		t.Fatalf("id with colon, never expiring: %q, %v", id, err)
	}
	if id, err := TokenGateway(tok); err != nil || id != "gw-1" {
		t.Errorf("TokenGateway = %q, %v", id, err)
	}
	tampered := base64.RawURLEncoding.EncodeToString([]byte(strings.Replace(string(raw), "1800000300", "1900000300", 1)))
	for name, tc := range map[string]struct {
		tok  string
		want error
	}{
		"expired":        {tok, ErrTokenExpired},
		"wrong secret":   {MintTokenExp([]byte("nope"), "gw-1", 0), ErrTokenSignature},
		"unknown id":     {MintTokenExp(secret, "gw-9", 0), ErrTokenUnknown},
		"tampered exp":   {tampered, ErrTokenSignature},
		"not base64":     {"***", ErrTokenMalformed},
		"no colons":      {base64.RawURLEncoding.EncodeToString([]byte("abc")), ErrTokenMalformed},
		"bad exp":        {base64.RawURLEncoding.EncodeToString([]byte("gw-1:soon:ab")), ErrTokenMalformed},
		"empty":          {"", ErrTokenMalformed},
		"expired forged": {MintTokenExp([]byte("nope"), "gw-1", 1), ErrTokenSignature},
	} {
		at := now
		if name == "expired" {
			at = time.Unix(1_800_000_300, 0)
		}
		if _, err := VerifyToken(tc.tok, secrets, at); !errors.Is(err, tc.want) {
			t.Errorf("%s: err = %v, want %v", name, err, tc.want)
		}
	}
	// MintToken with a ttl expires; without one it does not.
	if _, err := VerifyToken(MintToken(secret, "gw-1", time.Minute), secrets, time.Now().Add(2*time.Minute)); !errors.Is(err, ErrTokenExpired) {
		t.Errorf("ttl token after expiry: %v", err)
	}
	if _, err := VerifyToken(MintToken(secret, "gw-1", 0), secrets, time.Now().Add(100*365*24*time.Hour)); err != nil {
		t.Errorf("ttl 0 token: %v", err)
	}
}
