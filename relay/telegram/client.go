package telegram

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"mime"
	"mime/multipart"
	"net/http"
	"net/textproto"
	"strconv"
	"strings"

	"github.com/caduceus-dev/caduceus/relay"
)

// DefaultBaseURL is the Bot API root.
const DefaultBaseURL = "https://api.telegram.org"

// Client calls the Bot API for one bot.
type Client struct {
	BaseURL string       // DefaultBaseURL when empty
	Token   string       // the bot token; part of every request path, never of an error
	HTTP    *http.Client // http.DefaultClient when nil
}

// APIError is an answer with ok=false.
type APIError struct {
	Method      string
	Code        int
	Description string
}

func (e *APIError) Error() string {
	return fmt.Sprintf("telegram: %s: %d %s", e.Method, e.Code, e.Description)
}

// SendOptions are the optional parts of sendMessage.
type SendOptions struct {
	ThreadID  string // forum topic (message_thread_id)
	ReplyTo   string // message id to reply to
	ParseMode string // "MarkdownV2", "HTML" or "" for plain text
	// Keyboard, when set, is an inline keyboard (rows of buttons).
	Keyboard [][]InlineButton
}

// InlineButton is one inline keyboard button with its callback data.
type InlineButton struct {
	Text         string `json:"text"`
	CallbackData string `json:"callback_data"`
}

// SendMessage sends text to chatID and returns the new message id.
func (c *Client) SendMessage(ctx context.Context, chatID, text string, o SendOptions) (string, error) {
	p := map[string]any{"chat_id": chatID, "text": text}
	if o.ThreadID != "" && o.ThreadID != GeneralTopic {
		n, err := strconv.ParseInt(o.ThreadID, 10, 64)
		if err != nil {
			return "", fmt.Errorf("telegram: sendMessage: thread id %q is not an integer", o.ThreadID)
		}
		p["message_thread_id"] = n
	}
	if o.ReplyTo != "" {
		n, err := strconv.ParseInt(o.ReplyTo, 10, 64)
		if err != nil {
			return "", fmt.Errorf("telegram: sendMessage: reply_to %q is not an integer", o.ReplyTo)
		}
		p["reply_parameters"] = map[string]any{"message_id": n, "allow_sending_without_reply": true}
	}
	if o.ParseMode != "" {
		p["parse_mode"] = o.ParseMode
	}
	if len(o.Keyboard) > 0 {
		p["reply_markup"] = map[string]any{"inline_keyboard": o.Keyboard}
	}
	var m struct {
		MessageID ID `json:"message_id"`
	}
	err := c.call(ctx, "sendMessage", p, &m)
	return string(m.MessageID), err
}

// EditMessageText replaces a message's text.
func (c *Client) EditMessageText(ctx context.Context, chatID, messageID, text, parseMode string) error {
	n, err := strconv.ParseInt(messageID, 10, 64)
	if err != nil {
		return fmt.Errorf("telegram: editMessageText: message id %q is not an integer", messageID)
	}
	p := map[string]any{"chat_id": chatID, "message_id": n, "text": text}
	if parseMode != "" {
		p["parse_mode"] = parseMode
	}
	return c.call(ctx, "editMessageText", p, nil)
}

// SendChatAction shows an action ("typing") in chatID (and topic threadID).
func (c *Client) SendChatAction(ctx context.Context, chatID, threadID, action string) error {
	p := map[string]any{"chat_id": chatID, "action": action}
	if threadID != "" && threadID != GeneralTopic {
		if n, err := strconv.ParseInt(threadID, 10, 64); err == nil {
			p["message_thread_id"] = n
		}
	}
	return c.call(ctx, "sendChatAction", p, nil)
}

// ChatInfo is what get_chat_info answers.
type ChatInfo struct {
	Name string
	Type string // dm, group, forum, channel
}

// GetChat returns a chat's name and relay chat type.
func (c *Client) GetChat(ctx context.Context, chatID string) (ChatInfo, error) {
	var ch Chat
	if err := c.call(ctx, "getChat", map[string]any{"chat_id": chatID}, &ch); err != nil {
		return ChatInfo{}, err
	}
	info := ChatInfo{Name: ch.Title, Type: "group"}
	switch {
	case ch.Type == "private":
		info.Type, info.Name = "dm", fullName(ch.FirstName, ch.LastName, ch.Username)
	case ch.Type == "channel":
		info.Type = "channel"
	case ch.IsForum:
		info.Type = "forum"
	}
	return info, nil
}

func (c *Client) call(ctx context.Context, method string, params, out any) error {
	b, err := json.Marshal(params)
	if err != nil {
		return fmt.Errorf("telegram: %s: %w", method, err)
	}
	return c.post(ctx, method, "application/json", b, out)
}

// post sends one Bot API request body of contentType and reads the answer
// into out.
func (c *Client) post(ctx context.Context, method, contentType string, b []byte, out any) error {
	base := cmp.Or(c.BaseURL, DefaultBaseURL)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+"/bot"+c.Token+"/"+method, bytes.NewReader(b))
	if err != nil {
		return fmt.Errorf("telegram: %s: bad request", method)
	}
	req.Header.Set("Content-Type", contentType)
	status, data, err := relay.CallPlatform(c.HTTP, req) // its errors never quote the URL, which holds the bot token
	if err != nil {
		return fmt.Errorf("telegram: %s: %w", method, err)
	}
	var env struct {
		OK          bool            `json:"ok"`
		Result      json.RawMessage `json:"result"`
		ErrorCode   int             `json:"error_code"`
		Description string          `json:"description"`
	}
	if err := json.Unmarshal(data, &env); err != nil {
		return &APIError{Method: method, Code: status, Description: "answer is not JSON"}
	}
	if !env.OK {
		code := env.ErrorCode
		if code == 0 {
			code = status
		}
		return &APIError{Method: method, Code: code, Description: env.Description}
	}
	if out != nil && len(env.Result) > 0 {
		if err := json.Unmarshal(env.Result, out); err != nil {
			return fmt.Errorf("telegram: %s: result: %w", method, err)
		}
	}
	return nil
}

// SetMessageReaction sets the bot's reaction on a message to emoji, or
// clears it (remove).
func (c *Client) SetMessageReaction(ctx context.Context, chatID, messageID, emoji string, remove bool) error {
	n, err := strconv.ParseInt(messageID, 10, 64)
	if err != nil {
		return fmt.Errorf("telegram: setMessageReaction: message id %q is not an integer", messageID)
	}
	reaction := []any{}
	if !remove {
		reaction = append(reaction, map[string]any{"type": "emoji", "emoji": emoji})
	}
	return c.call(ctx, "setMessageReaction", map[string]any{"chat_id": chatID, "message_id": n, "reaction": reaction}, nil)
}

// DeleteMessage deletes a message.
func (c *Client) DeleteMessage(ctx context.Context, chatID, messageID string) error {
	n, err := strconv.ParseInt(messageID, 10, 64)
	if err != nil {
		return fmt.Errorf("telegram: deleteMessage: message id %q is not an integer", messageID)
	}
	return c.call(ctx, "deleteMessage", map[string]any{"chat_id": chatID, "message_id": n}, nil)
}

// GetFile resolves a file_id to its file_path (getFile).
func (c *Client) GetFile(ctx context.Context, fileID string) (string, error) {
	var f struct {
		FilePath string `json:"file_path"`
	}
	if err := c.call(ctx, "getFile", map[string]any{"file_id": fileID}, &f); err != nil {
		return "", err
	}
	if f.FilePath == "" {
		return "", fmt.Errorf("telegram: getFile: no file_path (the file may be too large for the Bot API)")
	}
	return f.FilePath, nil
}

// FileRequest is the GET of a file's bytes by its file_path
// ({base}/file/bot{token}/{path}). Its URL holds the bot token: never log
// it or an error naming it.
func (c *Client) FileRequest(ctx context.Context, filePath string) (*http.Request, error) {
	base := cmp.Or(c.BaseURL, DefaultBaseURL)
	if strings.Contains(filePath, "..") || strings.HasPrefix(filePath, "/") {
		return nil, fmt.Errorf("telegram: file path %q is not a relative path", filePath)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/file/bot"+c.Token+"/"+filePath, nil)
	if err != nil {
		return nil, fmt.Errorf("telegram: file: bad request")
	}
	return req, nil
}

// AnswerCallbackQuery acknowledges a button press.
func (c *Client) AnswerCallbackQuery(ctx context.Context, id string) error {
	return c.call(ctx, "answerCallbackQuery", map[string]any{"callback_query_id": id}, nil)
}

// CreateForumTopic creates a topic in a forum supergroup and returns its
// message_thread_id.
func (c *Client) CreateForumTopic(ctx context.Context, chatID, name string) (string, error) {
	var t struct {
		MessageThreadID ID `json:"message_thread_id"`
	}
	err := c.call(ctx, "createForumTopic", map[string]any{"chat_id": chatID, "name": name}, &t)
	return string(t.MessageThreadID), err
}

// EditForumTopic renames a forum topic.
func (c *Client) EditForumTopic(ctx context.Context, chatID, threadID, name string) error {
	n, err := strconv.ParseInt(threadID, 10, 64)
	if err != nil {
		return fmt.Errorf("telegram: editForumTopic: thread id %q is not an integer", threadID)
	}
	return c.call(ctx, "editForumTopic", map[string]any{"chat_id": chatID, "message_thread_id": n, "name": name}, nil)
}

// MediaFile is what SendMedia sends: the bytes (uploaded as multipart) or
// a URL Telegram fetches itself.
type MediaFile struct {
	URL      string
	Data     []byte
	Filename string
	Mime     string
}

// MaxCaption is the longest caption (in UTF-16 units) Telegram takes.
const MaxCaption = 1024

// mediaMethods maps relay media kinds to Bot API methods and their file
// field; any other kind is sent as a document.
var mediaMethods = map[string][2]string{
	"image": {"sendPhoto", "photo"},
	"video": {"sendVideo", "video"},
	"voice": {"sendVoice", "voice"},
	"audio": {"sendAudio", "audio"},
}

// SendMedia sends one file to chatID with caption (sendPhoto, sendVideo,
// sendVoice, sendAudio or sendDocument by kind) and returns the new
// message id. ParseMode applies to the caption.
func (c *Client) SendMedia(ctx context.Context, chatID, kind, caption string, f MediaFile, o SendOptions) (string, error) {
	mf, ok := mediaMethods[kind]
	if !ok {
		mf = [2]string{"sendDocument", "document"}
	}
	method, field := mf[0], mf[1]
	p := map[string]any{"chat_id": chatID}
	if caption != "" {
		p["caption"] = caption
		if o.ParseMode != "" {
			p["parse_mode"] = o.ParseMode
		}
	}
	if o.ThreadID != "" && o.ThreadID != GeneralTopic {
		n, err := strconv.ParseInt(o.ThreadID, 10, 64)
		if err != nil {
			return "", fmt.Errorf("telegram: %s: thread id %q is not an integer", method, o.ThreadID)
		}
		p["message_thread_id"] = n
	}
	if o.ReplyTo != "" {
		n, err := strconv.ParseInt(o.ReplyTo, 10, 64)
		if err != nil {
			return "", fmt.Errorf("telegram: %s: reply_to %q is not an integer", method, o.ReplyTo)
		}
		p["reply_parameters"] = map[string]any{"message_id": n, "allow_sending_without_reply": true}
	}
	var m struct {
		MessageID ID `json:"message_id"`
	}
	if f.Data == nil {
		if f.URL == "" {
			return "", fmt.Errorf("telegram: %s: no file", method)
		}
		p[field] = f.URL
		err := c.call(ctx, method, p, &m)
		return string(m.MessageID), err
	}
	var buf bytes.Buffer
	w := multipart.NewWriter(&buf)
	for k, v := range p {
		s, isString := v.(string)
		if !isString {
			b, _ := json.Marshal(v)
			s = string(b)
		}
		_ = w.WriteField(k, s)
	}
	name := f.Filename
	if name == "" {
		name = "file"
	}
	h := textproto.MIMEHeader{}
	h.Set("Content-Disposition", mime.FormatMediaType("form-data", map[string]string{"name": field, "filename": name}))
	ct := f.Mime
	if ct == "" {
		ct = "application/octet-stream"
	}
	h.Set("Content-Type", ct)
	fw, _ := w.CreatePart(h)
	_, _ = fw.Write(f.Data)
	if err := w.Close(); err != nil {
		return "", fmt.Errorf("telegram: %s: %w", method, err)
	}
	err := c.post(ctx, method, w.FormDataContentType(), buf.Bytes(), &m)
	return string(m.MessageID), err
}
