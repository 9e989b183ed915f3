package whatsapp

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
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
	base := c.BaseURL
	if base == "" {
		base = DefaultBaseURL
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, strings.TrimRight(base, "/")+"/"+url.PathEscape(c.PhoneNumberID)+"/messages", bytes.NewReader(b))
	if err != nil {
		return "", fmt.Errorf("whatsapp: messages: %w", err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+c.AccessToken)
	hc := c.HTTP
	if hc == nil {
		hc = http.DefaultClient
	}
	resp, err := hc.Do(req)
	if err != nil {
		return "", fmt.Errorf("whatsapp: messages: %w", err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
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
	if resp.StatusCode/100 != 2 || len(r.Messages) == 0 || r.Messages[0].ID == "" {
		e := &APIError{Status: resp.StatusCode}
		if r.Error != nil {
			e.Code, e.Message = r.Error.Code, r.Error.Message
		}
		return "", e
	}
	return r.Messages[0].ID, nil
}
