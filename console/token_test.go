package console

import (
	"strings"
	"testing"
	"time"
)

func TestTokenRoundTripAndSeparation(t *testing.T) {
	secret := []byte("0123456789abcdef0123456789abcdef")
	now := time.Unix(1_800_000_000, 0)
	tok, err := MintLogin(secret, Login{Tenant: "slot-1", KeyID: "k1"}, now, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	login, session := keys(secret)
	c, err := open(login, tokenPrefix, tok, now)
	if err != nil || c.Tenant != "slot-1" || c.KeyID != "k1" || c.AllTenants || c.Nonce == "" {
		t.Fatalf("open = %+v, %v", c, err)
	}
	if _, err := open(login, tokenPrefix, tok, now.Add(time.Minute)); err != errExpired {
		t.Errorf("at expiry: %v, want errExpired", err)
	}
	// A token is never a session: other prefix, other key.
	if _, err := open(session, sessionPrefix, tok, now); err != errMalformed {
		t.Errorf("token opened as a session: %v", err)
	}
	if _, err := open(session, tokenPrefix, tok, now); err != errForged {
		t.Errorf("token checked with the session key: %v, want errForged", err)
	}
	for _, bad := range []Login{{}, {Tenant: "slot-1"}, {KeyID: "k"}, {AllTenants: true, Tenant: "slot-1"}} {
		if _, err := MintLogin(secret, bad, now, time.Minute); err == nil {
			t.Errorf("MintLogin(%+v) succeeded", bad)
		}
	}
	for _, ttl := range []time.Duration{0, -time.Second, MaxTokenTTL + time.Second} {
		if _, err := MintLogin(secret, Login{AllTenants: true}, now, ttl); err == nil {
			t.Errorf("MintLogin with ttl %s succeeded", ttl)
		}
	}
}

// FuzzOpen: a token or cookie value from outside never panics the parser,
// and whatever opens was signed with the key.
func FuzzOpen(f *testing.F) {
	secret := []byte("0123456789abcdef0123456789abcdef")
	now := time.Unix(1_800_000_000, 0)
	tok, _ := MintLogin(secret, Login{AllTenants: true}, now, time.Minute)
	f.Add(tok)
	f.Add("ct1.")
	f.Add("ct1.e30.")
	f.Add("ct1." + strings.Repeat("A", 3000))
	f.Add("cs1.eyJuIjoieCJ9.AAAA")
	login, _ := keys(secret)
	f.Fuzz(func(t *testing.T, s string) {
		c, err := open(login, tokenPrefix, s, now)
		if err == nil {
			if c.Nonce == "" || c.check() != nil || now.Unix() >= c.Expires {
				t.Fatalf("opened an invalid token: %+v", c)
			}
			if s != tok && !strings.HasPrefix(s, tokenPrefix) {
				t.Fatalf("opened %q", s)
			}
		}
	})
}
