package wecom

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/caduceus-dev/caduceus/relay"
)

// DefaultBaseURL is the server API root.
const DefaultBaseURL = "https://qyapi.weixin.qq.com"

// Client sends an application's messages. It fetches the access token
// with the corp secret and keeps it until shortly before it expires (or
// until WeCom says it is no longer valid).
type Client struct {
	BaseURL    string // DefaultBaseURL when empty
	CorpID     string
	CorpSecret string // the application's secret; never in an error
	AgentID    int64
	HTTP       *http.Client     // http.DefaultClient when nil
	Now        func() time.Time // time.Now when nil

	mu      sync.Mutex
	token   string
	expires time.Time
}

// APIError is an answer with a non-zero errcode.
type APIError struct {
	Method  string
	Code    int
	Message string
}

func (e *APIError) Error() string {
	return fmt.Sprintf("wecom: %s: errcode %d: %s", e.Method, e.Code, e.Message)
}

// Token errcodes: invalid access_token, access_token expired.
const (
	errInvalidToken = 40014
	errExpiredToken = 42001
)

// SendText sends content to the user userID as one text message, or as
// several when it is longer than MaxContentBytes, and returns the last
// message id.
func (c *Client) SendText(ctx context.Context, userID, content string) (string, error) {
	var last string
	for _, part := range splitBytes(content, MaxContentBytes) {
		body := map[string]any{"touser": userID, "msgtype": "text", "agentid": c.AgentID, "text": map[string]string{"content": part}}
		var r struct {
			MsgID string `json:"msgid"`
		}
		if err := c.withToken(ctx, func(token string) error {
			return c.call(ctx, "message/send", url.Values{"access_token": {token}}, body, &r)
		}); err != nil {
			return "", err
		}
		last = r.MsgID
	}
	return last, nil
}

// splitBytes cuts s into pieces of at most n bytes, on rune boundaries.
func splitBytes(s string, n int) []string {
	var out []string
	for len(s) > n {
		cut := n
		for cut > 0 && !utf8.RuneStart(s[cut]) {
			cut--
		}
		out = append(out, s[:cut])
		s = s[cut:]
	}
	return append(out, s)
}

// withToken runs f with the access token, fetching a fresh one once when
// WeCom says the cached one is invalid or expired.
func (c *Client) withToken(ctx context.Context, f func(string) error) error {
	token, err := c.accessToken(ctx, false)
	if err != nil {
		return err
	}
	err = f(token)
	if e, ok := err.(*APIError); ok && (e.Code == errInvalidToken || e.Code == errExpiredToken) {
		if token, err = c.accessToken(ctx, true); err != nil {
			return err
		}
		err = f(token)
	}
	return err
}

func (c *Client) accessToken(ctx context.Context, refresh bool) (string, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := time.Now
	if c.Now != nil {
		now = c.Now
	}
	if !refresh && c.token != "" && now().Before(c.expires) {
		return c.token, nil
	}
	var r struct {
		AccessToken string `json:"access_token"`
		ExpiresIn   int64  `json:"expires_in"`
	}
	if err := c.call(ctx, "gettoken", url.Values{"corpid": {c.CorpID}, "corpsecret": {c.CorpSecret}}, nil, &r); err != nil {
		return "", err
	}
	if r.AccessToken == "" {
		return "", fmt.Errorf("wecom: gettoken: no access_token in the answer")
	}
	// Renew five minutes early (tokens live 7200 s).
	c.token, c.expires = r.AccessToken, now().Add(time.Duration(r.ExpiresIn)*time.Second-5*time.Minute)
	return c.token, nil
}

// call GETs (body nil) or POSTs JSON to /cgi-bin/{method} and decodes the
// answer into out when errcode is 0.
func (c *Client) call(ctx context.Context, method string, q url.Values, body any, out any) error {
	base := cmp.Or(c.BaseURL, DefaultBaseURL)
	u := strings.TrimRight(base, "/") + "/cgi-bin/" + method + "?" + q.Encode()
	verb, rd := http.MethodGet, io.Reader(nil)
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return fmt.Errorf("wecom: %s: %w", method, err)
		}
		verb, rd = http.MethodPost, bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, verb, u, rd)
	if err != nil {
		return fmt.Errorf("wecom: %s: cannot build the request", method)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	status, raw, err := relay.CallPlatform(c.HTTP, req) // its errors never quote the URL, which holds the secret or the token
	if err != nil {
		return fmt.Errorf("wecom: %s: %w", method, err)
	}
	var env struct {
		ErrCode int    `json:"errcode"`
		ErrMsg  string `json:"errmsg"`
	}
	if err := json.Unmarshal(raw, &env); err != nil || status != http.StatusOK {
		return &APIError{Method: method, Code: -status, Message: "unreadable answer"}
	}
	if env.ErrCode != 0 {
		return &APIError{Method: method, Code: env.ErrCode, Message: env.ErrMsg}
	}
	if out != nil {
		if err := json.Unmarshal(raw, out); err != nil {
			return fmt.Errorf("wecom: %s: answer: %w", method, err)
		}
	}
	return nil
}
