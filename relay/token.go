package relay

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"strconv"
	"strings"
	"time"
)

// CloseUnauthorized is the WebSocket close code for a bad, unknown, expired
// or revoked upgrade token. The reason is "expired" for a stale token and
// "unauthorized" otherwise; a gateway treats a 4401 that is not "expired" as
// terminal.
const CloseUnauthorized = 4401

// Close reasons sent with CloseUnauthorized.
const (
	CloseReasonExpired      = "expired"
	CloseReasonUnauthorized = "unauthorized"
)

// Token errors returned by VerifyToken.
var (
	ErrTokenMalformed = errors.New("relay: token is malformed")
	ErrTokenUnknown   = errors.New("relay: token names an unknown gateway")
	ErrTokenSignature = errors.New("relay: token signature does not match")
	ErrTokenExpired   = errors.New("relay: token expired")
)

// MintToken returns an upgrade bearer token for gatewayID that expires ttl
// from now (ttl <= 0: never): base64url_nopad("<id>:<exp>:<hex hmac>") with
// the HMAC-SHA256 of "<id>:<exp>" under secret.
func MintToken(secret []byte, gatewayID string, ttl time.Duration) string {
	var exp int64
	if ttl > 0 {
		exp = time.Now().Add(ttl).Unix()
	}
	return MintTokenExp(secret, gatewayID, exp)
}

// MintTokenExp is MintToken with an explicit unix expiry (0 = never).
func MintTokenExp(secret []byte, gatewayID string, exp int64) string {
	signed := gatewayID + ":" + strconv.FormatInt(exp, 10)
	raw := signed + ":" + sign(secret, signed)
	return base64.RawURLEncoding.EncodeToString([]byte(raw))
}

func sign(secret []byte, payload string) string {
	m := hmac.New(sha256.New, secret)
	m.Write([]byte(payload))
	return hex.EncodeToString(m.Sum(nil))
}

// TokenGateway returns the gateway id a token claims, without verifying it
// (so a verifier can pick that gateway's secrets).
func TokenGateway(token string) (string, error) {
	id, _, _, err := splitToken(token)
	return id, err
}

func splitToken(token string) (id string, exp int64, sig string, err error) {
	token = strings.TrimRight(strings.TrimSpace(token), "=")
	raw, err := base64.RawURLEncoding.DecodeString(token)
	if err != nil {
		return "", 0, "", ErrTokenMalformed
	}
	s := string(raw)
	i := strings.LastIndexByte(s, ':')
	if i < 0 {
		return "", 0, "", ErrTokenMalformed
	}
	sig = s[i+1:]
	j := strings.LastIndexByte(s[:i], ':')
	if j <= 0 {
		return "", 0, "", ErrTokenMalformed
	}
	exp, perr := strconv.ParseInt(s[j+1:i], 10, 64)
	if perr != nil || exp < 0 {
		return "", 0, "", ErrTokenMalformed
	}
	return s[:j], exp, sig, nil
}

// VerifyToken checks token against the secrets that secrets returns for its
// gateway id (several during a rotation; none for an unknown gateway) at
// time now. It returns the gateway id, or ErrTokenMalformed,
// ErrTokenUnknown, ErrTokenSignature or ErrTokenExpired. The signature is
// compared in constant time and checked before the expiry, so "expired" is
// only ever said to a holder of a once-valid token.
func VerifyToken(token string, secrets func(gatewayID string) [][]byte, now time.Time) (string, error) {
	id, exp, sig, err := splitToken(token)
	if err != nil {
		return "", err
	}
	keys := secrets(id)
	if len(keys) == 0 {
		return "", ErrTokenUnknown
	}
	signed := id + ":" + strconv.FormatInt(exp, 10)
	ok := false
	for _, k := range keys {
		if hmac.Equal([]byte(sign(k, signed)), []byte(strings.ToLower(sig))) {
			ok = true
		}
	}
	if !ok {
		return "", ErrTokenSignature
	}
	if exp != 0 && now.Unix() >= exp {
		return "", ErrTokenExpired
	}
	return id, nil
}
