package discord

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"mime/multipart"
	"net/http"
	"net/textproto"
	"net/url"

	"github.com/caduceus-dev/caduceus/relay"
)

// DefaultBaseURL is Discord's REST API root.
const DefaultBaseURL = "https://discord.com/api/v10"

// Client calls the Discord REST API for one bot.
type Client struct {
	BaseURL  string       // DefaultBaseURL when empty
	BotToken string       // "Bot <token>" authorization for channel calls
	HTTP     *http.Client // http.DefaultClient when nil
}

// APIError is a non-2xx answer. It never holds the request URL (a
// follow-up URL carries the interaction token).
type APIError struct {
	Op     string
	Status int
	Body   string // at most 300 bytes of the answer
}

func (e *APIError) Error() string {
	return fmt.Sprintf("discord: %s: status %d: %s", e.Op, e.Status, e.Body)
}

// Send posts content to channelID, as a reply to replyTo when set, and
// returns the new message id.
func (c *Client) Send(ctx context.Context, channelID, content, replyTo string) (string, error) {
	return c.createMessage(ctx, "send", channelID, messageBody(content, replyTo))
}

// messageBody is the JSON of a new message: content, which mentions no
// one, and the reference to replyTo when set.
func messageBody(content, replyTo string) map[string]any {
	body := map[string]any{"content": content, "allowed_mentions": map[string]any{"parse": []string{}}}
	if replyTo != "" {
		body["message_reference"] = map[string]any{"message_id": replyTo, "fail_if_not_exists": false}
	}
	return body
}

// createMessage posts a message to channelID (body is JSON, or a
// multipartBody) and returns its id; op names the call in errors.
func (c *Client) createMessage(ctx context.Context, op, channelID string, body any) (string, error) {
	var m struct {
		ID string `json:"id"`
	}
	err := c.do(ctx, op, http.MethodPost, "/channels/"+url.PathEscape(channelID)+"/messages", true, body, &m)
	return m.ID, err
}

// Edit replaces the content of a message.
func (c *Client) Edit(ctx context.Context, channelID, messageID, content string) error {
	return c.do(ctx, "edit", http.MethodPatch, "/channels/"+url.PathEscape(channelID)+"/messages/"+url.PathEscape(messageID), true,
		map[string]any{"content": content}, nil)
}

// Typing shows the typing indicator in channelID.
func (c *Client) Typing(ctx context.Context, channelID string) error {
	return c.do(ctx, "typing", http.MethodPost, "/channels/"+url.PathEscape(channelID)+"/typing", true, nil, nil)
}

// FollowUp posts a follow-up message through an interaction's webhook
// (POST /webhooks/{application}/{token}?wait=true) and returns its id. The
// token is used only in the request path and appears in no error.
func (c *Client) FollowUp(ctx context.Context, applicationID, token, content string) (string, error) {
	var m struct {
		ID string `json:"id"`
	}
	err := c.do(ctx, "follow_up", http.MethodPost, "/webhooks/"+url.PathEscape(applicationID)+"/"+url.PathEscape(token)+"?wait=true", false,
		messageBody(content, ""), &m)
	return m.ID, err
}

// ChatInfo is what get_chat_info answers.
type ChatInfo struct {
	Name string
	Type string // dm, group, thread, channel
}

// Channel returns a channel's name and relay chat type.
func (c *Client) Channel(ctx context.Context, channelID string) (ChatInfo, error) {
	var ch Channel
	if err := c.do(ctx, "get_chat_info", http.MethodGet, "/channels/"+url.PathEscape(channelID), true, nil, &ch); err != nil {
		return ChatInfo{}, err
	}
	info := ChatInfo{Name: ch.Name, Type: "group"}
	switch ch.Type {
	case 1, 3: // DM, GROUP_DM
		info.Type = "dm"
	case 10, 11, 12: // threads
		info.Type = "thread"
	}
	if info.Name == "" {
		info.Name = ch.ID
	}
	return info, nil
}

func (c *Client) do(ctx context.Context, op, method, path string, auth bool, body, out any) error {
	base := cmp.Or(c.BaseURL, DefaultBaseURL)
	var rd io.Reader
	contentType := "application/json"
	if mp, ok := body.(multipartBody); ok {
		rd, contentType = bytes.NewReader(mp.data), mp.contentType
	} else if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return fmt.Errorf("discord: %s: %w", op, err)
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, base+path, rd)
	if err != nil {
		return fmt.Errorf("discord: %s: bad request", op)
	}
	if body != nil {
		req.Header.Set("Content-Type", contentType)
	}
	if auth {
		req.Header.Set("Authorization", "Bot "+c.BotToken)
	}
	req.Header.Set("User-Agent", "DiscordBot (https://caduceus.dev, 1)")
	status, data, err := relay.CallPlatform(c.HTTP, req)
	if err != nil {
		return fmt.Errorf("discord: %s: %w", op, err)
	}
	if status/100 != 2 {
		snip := data
		if len(snip) > 300 {
			snip = snip[:300]
		}
		return &APIError{Op: op, Status: status, Body: string(snip)}
	}
	if out != nil && len(data) > 0 {
		if err := json.Unmarshal(data, out); err != nil {
			return fmt.Errorf("discord: %s: answer: %w", op, err)
		}
	}
	return nil
}

// React adds (or, with remove, removes) the bot's reaction emoji on a
// message. emoji is a Unicode emoji or "name:id" for a custom one.
func (c *Client) React(ctx context.Context, channelID, messageID, emoji string, remove bool) error {
	method := http.MethodPut
	if remove {
		method = http.MethodDelete
	}
	return c.do(ctx, "react", method, "/channels/"+url.PathEscape(channelID)+"/messages/"+url.PathEscape(messageID)+
		"/reactions/"+url.PathEscape(emoji)+"/@me", true, nil, nil)
}

// Delete deletes a message.
func (c *Client) Delete(ctx context.Context, channelID, messageID string) error {
	return c.do(ctx, "delete", http.MethodDelete, "/channels/"+url.PathEscape(channelID)+"/messages/"+url.PathEscape(messageID), true, nil, nil)
}

// Command is one application command as a manifest names it: name,
// description and options (Discord option objects, passed verbatim).
type Command struct {
	Name        string          `json:"name"`
	Description string          `json:"description"`
	Options     json.RawMessage `json:"options,omitempty"`
}

// GlobalCommands lists the application's global commands.
func (c *Client) GlobalCommands(ctx context.Context, applicationID string) ([]Command, error) {
	var out []Command
	err := c.do(ctx, "commands", http.MethodGet, "/applications/"+url.PathEscape(applicationID)+"/commands", true, nil, &out)
	return out, err
}

// PutGlobalCommands replaces the application's global commands with cmds
// (bulk overwrite).
func (c *Client) PutGlobalCommands(ctx context.Context, applicationID string, cmds []Command) error {
	if cmds == nil {
		cmds = []Command{}
	}
	return c.do(ctx, "commands", http.MethodPut, "/applications/"+url.PathEscape(applicationID)+"/commands", true, cmds, nil)
}

// SendPrompt posts content with one button per option (rows of five, at
// most 25), each carrying its callback token as custom_id, and returns the
// message id. style is "primary", "danger", "success" or anything else
// (secondary).
func (c *Client) SendPrompt(ctx context.Context, channelID, content, replyTo string, buttons []Button) (string, error) {
	if len(buttons) == 0 || len(buttons) > 25 {
		return "", fmt.Errorf("discord: prompt: %d buttons (1 to 25)", len(buttons))
	}
	var rows []any
	for i := 0; i < len(buttons); i += 5 {
		var row []any
		for _, b := range buttons[i:min(i+5, len(buttons))] {
			style := 2
			switch b.Style {
			case "primary":
				style = 1
			case "success":
				style = 3
			case "danger":
				style = 4
			}
			row = append(row, map[string]any{"type": 2, "style": style, "label": b.Label, "custom_id": b.CustomID})
		}
		rows = append(rows, map[string]any{"type": 1, "components": row})
	}
	body := messageBody(content, replyTo)
	body["components"] = rows
	return c.createMessage(ctx, "prompt", channelID, body)
}

// Button is one prompt button.
type Button struct {
	Label, CustomID, Style string
}

// GetChannel returns a channel as the API describes it (type, parent, name,
// topic); the message session uses it to tell threads from channels.
func (c *Client) GetChannel(ctx context.Context, channelID string) (Channel, error) {
	var ch Channel
	err := c.do(ctx, "get_channel", http.MethodGet, "/channels/"+url.PathEscape(channelID), true, nil, &ch)
	return ch, err
}

// GatewayBot returns the WebSocket URL of GET /gateway/bot.
func (c *Client) GatewayBot(ctx context.Context) (string, error) {
	var g struct {
		URL string `json:"url"`
	}
	if err := c.do(ctx, "gateway_bot", http.MethodGet, "/gateway/bot", true, nil, &g); err != nil {
		return "", err
	}
	if g.URL == "" {
		return "", errors.New("discord: GET /gateway/bot answered no url")
	}
	return g.URL, nil
}

// CreateThread starts a public thread (not anchored on a message) in
// channelID and returns its id.
func (c *Client) CreateThread(ctx context.Context, channelID, name string) (string, error) {
	var m struct {
		ID string `json:"id"`
	}
	err := c.do(ctx, "thread_create", http.MethodPost, "/channels/"+url.PathEscape(channelID)+"/threads", true,
		map[string]any{"name": name, "type": 11, "auto_archive_duration": 1440}, &m)
	return m.ID, err
}

// RenameChannel renames a channel or thread.
func (c *Client) RenameChannel(ctx context.Context, channelID, name string) error {
	return c.do(ctx, "thread_rename", http.MethodPatch, "/channels/"+url.PathEscape(channelID), true, map[string]any{"name": name}, nil)
}

// multipartBody is a request body already encoded as multipart/form-data.
type multipartBody struct {
	contentType string
	data        []byte
}

// SendFile uploads one file to channelID (multipart: payload_json with
// content, the reply reference and the attachment's filename, and the
// file as files[0]) and returns the new message id.
func (c *Client) SendFile(ctx context.Context, channelID, content, replyTo, filename, mimeType string, data []byte) (string, error) {
	payload := messageBody(content, replyTo)
	payload["attachments"] = []map[string]any{{"id": 0, "filename": filename}}
	pj, err := json.Marshal(payload)
	if err != nil {
		return "", fmt.Errorf("discord: send_media: %w", err)
	}
	var buf bytes.Buffer
	w := multipart.NewWriter(&buf)
	h := textproto.MIMEHeader{}
	h.Set("Content-Disposition", `form-data; name="payload_json"`)
	h.Set("Content-Type", "application/json")
	pw, _ := w.CreatePart(h)
	_, _ = pw.Write(pj)
	h = textproto.MIMEHeader{}
	h.Set("Content-Disposition", mime.FormatMediaType("form-data", map[string]string{"name": "files[0]", "filename": filename}))
	if mimeType == "" {
		mimeType = "application/octet-stream"
	}
	h.Set("Content-Type", mimeType)
	fw, _ := w.CreatePart(h)
	_, _ = fw.Write(data)
	if err := w.Close(); err != nil {
		return "", fmt.Errorf("discord: send_media: %w", err)
	}
	return c.createMessage(ctx, "send_media", channelID, multipartBody{contentType: w.FormDataContentType(), data: buf.Bytes()})
}
