package twilio

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"github.com/caduceus-dev/caduceus/relay"
)

// DefaultBaseURL is the REST API root.
const DefaultBaseURL = "https://api.twilio.com"

// Client sends messages for one account.
type Client struct {
	BaseURL    string // DefaultBaseURL when empty
	AccountSID string
	AuthToken  string       // basic-auth password; never in an error
	HTTP       *http.Client // http.DefaultClient when nil
}

// APIError is an error answer of the REST API.
type APIError struct {
	Status  int
	Code    int    // Twilio's error code, e.g. 21211
	Message string // Twilio's message
}

func (e *APIError) Error() string {
	return fmt.Sprintf("twilio: messages: HTTP %d: %d %s", e.Status, e.Code, e.Message)
}

// Message is what to send: To and Body, and either From (a number, or
// "whatsapp:+…") or MessagingServiceSID.
type Message struct {
	To, From, MessagingServiceSID, Body string
}

// Send creates a message and returns its sid.
func (c *Client) Send(ctx context.Context, m Message) (string, error) {
	form := url.Values{"To": {m.To}, "Body": {m.Body}}
	switch {
	case m.MessagingServiceSID != "":
		form.Set("MessagingServiceSid", m.MessagingServiceSID)
	case m.From != "":
		form.Set("From", m.From)
	default:
		return "", fmt.Errorf("twilio: messages: no From number or messaging service configured")
	}
	base := cmp.Or(c.BaseURL, DefaultBaseURL)
	u := strings.TrimRight(base, "/") + "/2010-04-01/Accounts/" + url.PathEscape(c.AccountSID) + "/Messages.json"
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u, strings.NewReader(form.Encode()))
	if err != nil {
		return "", fmt.Errorf("twilio: messages: %w", err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.SetBasicAuth(c.AccountSID, c.AuthToken)
	status, raw, err := relay.CallPlatform(c.HTTP, req)
	if err != nil {
		return "", fmt.Errorf("twilio: messages: %w", err)
	}
	var r struct {
		SID     string `json:"sid"`
		Code    int    `json:"code"`
		Message string `json:"message"`
	}
	_ = json.Unmarshal(raw, &r)
	if status/100 != 2 || r.SID == "" {
		return "", &APIError{Status: status, Code: r.Code, Message: r.Message}
	}
	return r.SID, nil
}
