package whatsapp

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"github.com/caduceus-dev/caduceus/relay"
)

// DefaultBaseURL is the Graph API root, with its version.
const DefaultBaseURL = "https://graph.facebook.com/v21.0"

// Client sends messages from one business phone number.
type Client struct {
	BaseURL       string // DefaultBaseURL when empty
	PhoneNumberID string
	AccessToken   string       // sent as a bearer, never in an error
	HTTP          *http.Client // http.DefaultClient when nil
}

// APIError is a Graph API error answer.
type APIError struct {
	Status  int
	Code    int
	Message string
}

func (e *APIError) Error() string {
	return fmt.Sprintf("whatsapp: messages: HTTP %d: %d %s", e.Status, e.Code, e.Message)
}

// SendText sends a text message to the wa_id to (quoting replyTo when set)
// and returns its wamid.
func (c *Client) SendText(ctx context.Context, to, text, replyTo string) (string, error) {
	body := map[string]any{"messaging_product": "whatsapp", "recipient_type": "individual", "to": to,
		"type": "text", "text": map[string]any{"preview_url": false, "body": text}}
	if replyTo != "" {
		body["context"] = map[string]string{"message_id": replyTo}
	}
	b, err := json.Marshal(body)
	if err != nil {
		return "", fmt.Errorf("whatsapp: messages: %w", err)
	}
	base := cmp.Or(c.BaseURL, DefaultBaseURL)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, strings.TrimRight(base, "/")+"/"+url.PathEscape(c.PhoneNumberID)+"/messages", bytes.NewReader(b))
	if err != nil {
		return "", fmt.Errorf("whatsapp: messages: %w", err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+c.AccessToken)
	status, raw, err := relay.CallPlatform(c.HTTP, req)
	if err != nil {
		return "", fmt.Errorf("whatsapp: messages: %w", err)
	}
	var r struct {
		Messages []struct {
			ID string `json:"id"`
		} `json:"messages"`
		Error *struct {
			Message string `json:"message"`
			Code    int    `json:"code"`
		} `json:"error"`
	}
	_ = json.Unmarshal(raw, &r)
	if status/100 != 2 || len(r.Messages) == 0 || r.Messages[0].ID == "" {
		e := &APIError{Status: status}
		if r.Error != nil {
			e.Code, e.Message = r.Error.Code, r.Error.Message
		}
		return "", e
	}
	return r.Messages[0].ID, nil
}

// MediaInfo is what GET /{media-id} answers: a short-lived download URL
// (which needs the same bearer) and the file's type and size.
type MediaInfo struct {
	URL      string `json:"url"`
	MimeType string `json:"mime_type"`
	FileSize int64  `json:"file_size"`
}

// Media looks an incoming media id up (GET {base}/{media-id}).
func (c *Client) Media(ctx context.Context, mediaID string) (MediaInfo, error) {
	base := cmp.Or(c.BaseURL, DefaultBaseURL)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimRight(base, "/")+"/"+url.PathEscape(mediaID), nil)
	if err != nil {
		return MediaInfo{}, fmt.Errorf("whatsapp: media: bad request")
	}
	req.Header.Set("Authorization", "Bearer "+c.AccessToken)
	status, raw, err := relay.CallPlatform(c.HTTP, req)
	if err != nil {
		return MediaInfo{}, fmt.Errorf("whatsapp: media: %w", err)
	}
	if status/100 != 2 {
		return MediaInfo{}, fmt.Errorf("whatsapp: media: HTTP %d", status)
	}
	var m MediaInfo
	if err := json.Unmarshal(raw, &m); err != nil || m.URL == "" {
		return MediaInfo{}, fmt.Errorf("whatsapp: media: answer has no url")
	}
	u, err := url.Parse(m.URL)
	if err != nil || u.Scheme != "https" && u.Scheme != "http" || u.Host == "" {
		return MediaInfo{}, fmt.Errorf("whatsapp: media: answer url is not an http(s) URL")
	}
	return m, nil
}

// MediaRequest is the GET of a media URL from Media, with the bearer.
func (c *Client) MediaRequest(ctx context.Context, mediaURL string) (*http.Request, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, mediaURL, nil)
	if err != nil {
		return nil, fmt.Errorf("whatsapp: media: bad url")
	}
	req.Header.Set("Authorization", "Bearer "+c.AccessToken)
	return req, nil
}
