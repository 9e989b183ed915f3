package slack

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

	"github.com/caduceus-dev/caduceus/relay"
)

// DefaultBaseURL is the Web API root.
const DefaultBaseURL = "https://slack.com/api"

// Client calls the Web API with one bot token.
type Client struct {
	BaseURL string       // DefaultBaseURL when empty
	Token   string       // xoxb-… bot token; sent as a bearer, never in an error
	HTTP    *http.Client // http.DefaultClient when nil
}

// APIError is an answer with ok=false (or an HTTP failure).
type APIError struct {
	Method string
	Status int    // HTTP status
	Code   string // Slack's error string, e.g. channel_not_found
}

func (e *APIError) Error() string {
	if e.Code == "" {
		return fmt.Sprintf("slack: %s: HTTP %d", e.Method, e.Status)
	}
	return fmt.Sprintf("slack: %s: %s", e.Method, e.Code)
}

// PostMessage posts text to channel (in the thread threadTS when set) and
// returns the new message's ts.
func (c *Client) PostMessage(ctx context.Context, channel, text, threadTS string) (string, error) {
	p := map[string]any{"channel": channel, "text": text}
	if threadTS != "" {
		p["thread_ts"] = threadTS
	}
	var r struct {
		TS string `json:"ts"`
	}
	err := c.call(ctx, "chat.postMessage", p, nil, &r)
	return r.TS, err
}

// Update replaces the text of the message ts in channel.
func (c *Client) Update(ctx context.Context, channel, ts, text string) error {
	return c.call(ctx, "chat.update", map[string]any{"channel": channel, "ts": ts, "text": text}, nil, nil)
}

// SetStatus sets the typing status of an assistant thread ("" clears it).
func (c *Client) SetStatus(ctx context.Context, channel, threadTS, status string) error {
	return c.call(ctx, "assistant.threads.setStatus",
		map[string]any{"channel_id": channel, "thread_ts": threadTS, "status": status}, nil, nil)
}

// ChatInfo is what conversations.info says about a channel, in the relay's
// terms: type dm for an IM, group otherwise.
type ChatInfo struct {
	Name string
	Type string
}

// ConversationInfo looks a channel up.
func (c *Client) ConversationInfo(ctx context.Context, channel string) (ChatInfo, error) {
	var r struct {
		Channel struct {
			Name string `json:"name"`
			IsIM bool   `json:"is_im"`
			User string `json:"user"`
		} `json:"channel"`
	}
	if err := c.call(ctx, "conversations.info", nil, url.Values{"channel": {channel}}, &r); err != nil {
		return ChatInfo{}, err
	}
	if r.Channel.IsIM {
		return ChatInfo{Name: r.Channel.User, Type: "dm"}, nil
	}
	return ChatInfo{Name: r.Channel.Name, Type: "group"}, nil
}

// call POSTs one method, as JSON (body) or as a form (form), and decodes the
// answer into out when ok.
func (c *Client) call(ctx context.Context, method string, body map[string]any, form url.Values, out any) error {
	base := cmp.Or(c.BaseURL, DefaultBaseURL)
	var rd io.Reader
	ct := "application/json; charset=utf-8"
	if form != nil {
		rd, ct = strings.NewReader(form.Encode()), "application/x-www-form-urlencoded"
	} else {
		b, err := json.Marshal(body)
		if err != nil {
			return fmt.Errorf("slack: %s: %w", method, err)
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, strings.TrimRight(base, "/")+"/"+method, rd)
	if err != nil {
		return fmt.Errorf("slack: %s: %w", method, err)
	}
	req.Header.Set("Content-Type", ct)
	req.Header.Set("Authorization", "Bearer "+c.Token)
	status, raw, err := relay.CallPlatform(c.HTTP, req)
	if err != nil {
		return fmt.Errorf("slack: %s: %w", method, redact(err, c.Token))
	}
	var env struct {
		OK    bool   `json:"ok"`
		Error string `json:"error"`
	}
	if json.Unmarshal(raw, &env) != nil || status != http.StatusOK || !env.OK {
		return &APIError{Method: method, Status: status, Code: env.Error}
	}
	if out != nil {
		if err := json.Unmarshal(raw, out); err != nil {
			return fmt.Errorf("slack: %s: answer: %w", method, err)
		}
	}
	return nil
}

// redact keeps a token out of a transport error's text.
func redact(err error, token string) error {
	if token == "" || !strings.Contains(err.Error(), token) {
		return err
	}
	return fmt.Errorf("%s", strings.ReplaceAll(err.Error(), token, "[token]"))
}
