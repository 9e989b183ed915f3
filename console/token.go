package console

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/caduceus-dev/caduceus/contract"
)

// Login is who a login token (and the session it opens) is for: one
// key's tenant, or every tenant (AllTenants, the operator's own view).
type Login struct {
	Tenant     contract.TenantSlot `json:"t,omitempty"`
	KeyID      string              `json:"k,omitempty"`
	AllTenants bool                `json:"all,omitempty"`
}

func (l Login) check() error {
	switch {
	case l.AllTenants && (l.Tenant != "" || l.KeyID != ""):
		return errors.New("console: an all-tenants login names no tenant or key")
	case !l.AllTenants && (l.Tenant == "" || l.KeyID == ""):
		return errors.New("console: a login names a key and its tenant, or all tenants")
	}
	return nil
}

// Limits of login tokens and sessions.
const (
	DefaultTokenTTL   = 5 * time.Minute
	MaxTokenTTL       = time.Hour
	DefaultSessionTTL = 8 * time.Hour
)

// Token and cookie prefixes: the format version and what the value is, so
// a token can never be presented as a session or the other way round (the
// MACs are keyed apart too).
const (
	tokenPrefix   = "ct1."
	sessionPrefix = "cs1."
)

// claims is what a login token or a session cookie carries, signed.
type claims struct {
	Login
	Nonce   string `json:"n"`
	Expires int64  `json:"exp"` // unix seconds
}

// keys derives the login-token and session MAC keys from the secret.
func keys(secret []byte) (login, session []byte) {
	d := func(label string) []byte {
		m := hmac.New(sha256.New, secret)
		m.Write([]byte(label))
		return m.Sum(nil)
	}
	return d("caduceus console login token v1"), d("caduceus console session v1")
}

func sign(key []byte, prefix string, c claims) (string, error) {
	b, err := json.Marshal(c)
	if err != nil {
		return "", err
	}
	body := prefix + base64.RawURLEncoding.EncodeToString(b)
	m := hmac.New(sha256.New, key)
	m.Write([]byte(body))
	return body + "." + base64.RawURLEncoding.EncodeToString(m.Sum(nil)), nil
}

// Reasons a token or session is refused. Each names what is wrong; none
// says more than that.
var (
	errMalformed = errors.New("the link is malformed")
	errForged    = errors.New("the link's signature does not match this installation")
	errExpired   = errors.New("the link has expired")
)

func open(key []byte, prefix, s string, now time.Time) (claims, error) {
	rest, ok := strings.CutPrefix(s, prefix)
	if !ok || len(s) > 2048 {
		return claims{}, errMalformed
	}
	payload, mac, ok := strings.Cut(rest, ".")
	if !ok {
		return claims{}, errMalformed
	}
	got, err := base64.RawURLEncoding.DecodeString(mac)
	if err != nil {
		return claims{}, errMalformed
	}
	m := hmac.New(sha256.New, key)
	m.Write([]byte(prefix + payload))
	if !hmac.Equal(got, m.Sum(nil)) {
		return claims{}, errForged
	}
	b, err := base64.RawURLEncoding.DecodeString(payload)
	if err != nil {
		return claims{}, errMalformed
	}
	var c claims
	if err := json.Unmarshal(b, &c); err != nil || c.Nonce == "" || c.check() != nil {
		return claims{}, errMalformed
	}
	if now.Unix() >= c.Expires {
		return claims{}, errExpired
	}
	return c, nil
}

func nonce() string {
	var b [16]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// MintLogin makes a one-time login token for l, valid for ttl (at most
// MaxTokenTTL) from now, signed with the installation's console secret
// (store.Console.Secret). The console redeems it once.
func MintLogin(secret []byte, l Login, now time.Time, ttl time.Duration) (string, error) {
	if err := l.check(); err != nil {
		return "", err
	}
	if ttl <= 0 || ttl > MaxTokenTTL {
		return "", fmt.Errorf("console: a login token lives between 1s and %s, not %s", MaxTokenTTL, ttl)
	}
	login, _ := keys(secret)
	return sign(login, tokenPrefix, claims{Login: l, Nonce: nonce(), Expires: now.Add(ttl).Unix()})
}

// LoginURL is the console login URL of token on the server at base
// ("http://127.0.0.1:7600").
func LoginURL(base, token string) string {
	return strings.TrimRight(base, "/") + "/console/login?token=" + url.QueryEscape(token)
}
