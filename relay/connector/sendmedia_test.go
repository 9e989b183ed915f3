package connector_test

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/caduceus-dev/caduceus/relay"
)

// uploadMedia POSTs data to /relay/media as gateway id and returns its id.
func (e *env) uploadMedia(t *testing.T, id string, secret, data []byte, mimeType, name string) string {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, e.srv.URL+"/relay/media", bytes.NewReader(data))
	req.Header.Set("Authorization", "Bearer "+hermesToken(id, secret, time.Now().Add(300*time.Second).Unix()))
	req.Header.Set("Content-Type", mimeType)
	if name != "" {
		req.Header.Set("X-Media-Filename", name)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var up struct{ ID string }
	if err := json.NewDecoder(resp.Body).Decode(&up); err != nil || up.ID == "" {
		t.Fatalf("upload: %d %v", resp.StatusCode, err)
	}
	return up.ID
}

func sendMediaAction(chat, kind, source, caption, replyTo, filename string, meta map[string]any) relay.Action {
	return relay.Action{Op: relay.OpSendMedia, ChatID: chat, MediaKind: kind, SourceURL: source, Content: caption,
		ReplyTo: replyTo, Filename: filename, Metadata: meta}
}

// send_media on Discord: a stored file is uploaded as multipart
// (payload_json + files[0]) to the channel's messages; a public URL is
// posted after the caption; another tenant's media id is refused.
func TestSendMediaDiscord(t *testing.T) {
	e := newEnv(t)
	g := e.gateway("gw-a", secretA, "discord", discordApp)
	if d, _ := g.Descriptor(); !d.Supports(relay.OpSendMedia) {
		t.Fatalf("discord does not advertise send_media: %v", d.SupportedOps)
	}
	if code, _ := e.postDiscord(interaction("1200000000000000100", "111", "333", "556", "itok", "hi"), nil); code != 200 {
		t.Fatal(code)
	}
	g.next(t)
	png := append([]byte("\x89PNG\r\n\x1a\n"), bytes.Repeat([]byte{5}, 300)...)
	id := e.uploadMedia(t, "gw-a", secretA, png, "image/png", "")
	ctx := t.Context()
	r := g.CallAs(ctx, "discord", discordApp, sendMediaAction("333", "image", "https://relay.example.com/relay/media/"+id, "the chart", "901", "", nil))
	if !r.Success || r.MessageID == "" {
		t.Fatalf("send_media: %+v", r)
	}
	calls := e.discord.Calls()
	last := calls[len(calls)-1]
	var payload map[string]any
	_ = json.Unmarshal([]byte(last.Body["payload_json"].(string)), &payload)
	ref, _ := payload["message_reference"].(map[string]any)
	if last.Method != "POST" || last.Path != "/channels/333/messages" || last.Auth != "Bot discord-bot-token" ||
		last.Body["_file_field"] != "files[0]" || last.Body["_file_name"] != "media.png" || last.Body["_file_type"] != "image/png" ||
		last.Body["_file_data"] != string(png) || payload["content"] != "the chart" || ref["message_id"] != "901" {
		t.Errorf("upload call %+v payload %v", last, payload)
	}

	// A public URL is not fetched: it is posted, Discord previews it.
	r = g.CallAs(ctx, "discord", discordApp, sendMediaAction("333", "image", "https://cdn.example.com/a.png", "look", "", "", nil))
	calls = e.discord.Calls()
	if last = calls[len(calls)-1]; !r.Success || last.Body["content"] != "look\nhttps://cdn.example.com/a.png" {
		t.Errorf("public URL: %+v %+v", r, last)
	}

	// Another tenant's upload, an unknown id, a bad URL, a bad kind, an
	// unbound chat: refused, nothing sent.
	other := e.uploadMedia(t, "gw-b", secretB, png, "image/png", "x.png")
	before := len(e.discord.Calls())
	for name, a := range map[string]relay.Action{
		"other tenant": sendMediaAction("333", "image", e.srv.URL+"/relay/media/"+other, "", "", "", nil),
		"unknown id":   sendMediaAction("333", "image", "/relay/media/rmed_nope", "", "", "", nil),
		"no source":    sendMediaAction("333", "image", "", "", "", "", nil),
		"file scheme":  sendMediaAction("333", "image", "file:///etc/passwd", "", "", "", nil),
		"bad kind":     sendMediaAction("333", "hologram", "/relay/media/"+id, "", "", "", nil),
		"bad filename": sendMediaAction("333", "document", "/relay/media/"+id, "", "", "../x", nil),
		"unbound chat": sendMediaAction("999", "image", "/relay/media/"+id, "", "", "", nil),
	} {
		if r := g.CallAs(ctx, "discord", discordApp, a); r.Success {
			t.Errorf("%s: %+v", name, r)
		}
	}
	if after := len(e.discord.Calls()); after != before {
		t.Errorf("refused send_media reached Discord: %d calls", after-before)
	}
}

// send_media on Telegram: by kind to sendPhoto/sendDocument/…, a stored
// file as multipart with caption, topic and reply; a public URL passed to
// Telegram as a URL; a caption over 1,024 goes as a message after the file.
func TestSendMediaTelegram(t *testing.T) {
	e := newEnv(t)
	g := e.gateway("gw-a", secretA, "telegram", telegramBot)
	if d, _ := g.Descriptor(); !d.Supports(relay.OpSendMedia) {
		t.Fatalf("telegram does not advertise send_media: %v", d.SupportedOps)
	}
	pdf := []byte("%PDF-1.4 a report")
	id := e.uploadMedia(t, "gw-a", secretA, pdf, "application/pdf", "report.pdf")
	ctx := t.Context()
	r := g.CallAs(ctx, "telegram", telegramBot, sendMediaAction(forumChat, "document", "/relay/media/"+id, "the report", "70", "", map[string]any{"thread_id": "42"}))
	if !r.Success || r.MessageID == "" {
		t.Fatalf("send_media: %+v", r)
	}
	calls := e.telegram.Calls()
	last := calls[len(calls)-1]
	if !strings.HasSuffix(last.Path, "/sendDocument") || last.Body["chat_id"] != forumChat || last.Body["caption"] != "the report" ||
		last.Body["message_thread_id"] != "42" || !strings.Contains(last.Body["reply_parameters"].(string), `"message_id":70`) ||
		last.Body["_file_field"] != "document" || last.Body["_file_name"] != "report.pdf" || last.Body["_file_data"] != string(pdf) {
		t.Errorf("sendDocument call %+v", last)
	}

	// A public image URL: sendPhoto by URL (Telegram fetches it).
	r = g.CallAs(ctx, "telegram", telegramBot, sendMediaAction(forumChat, "image", "https://cdn.example.com/a.jpg", "look", "", "", nil))
	calls = e.telegram.Calls()
	if last = calls[len(calls)-1]; !r.Success || !strings.HasSuffix(last.Path, "/sendPhoto") || last.Body["photo"] != "https://cdn.example.com/a.jpg" || last.Body["caption"] != "look" {
		t.Errorf("sendPhoto by URL: %+v %+v", r, last)
	}

	// A long caption: the file without it, then the text as a message.
	long := strings.Repeat("word ", 300)
	r = g.CallAs(ctx, "telegram", telegramBot, sendMediaAction(forumChat, "voice", "/relay/media/"+id, long, "", "", nil))
	calls = e.telegram.Calls()
	if len(calls) < 2 {
		t.Fatal("no calls")
	}
	media, text := calls[len(calls)-2], calls[len(calls)-1]
	if !r.Success || !strings.HasSuffix(media.Path, "/sendVoice") || media.Body["caption"] != nil ||
		!strings.HasSuffix(text.Path, "/sendMessage") || text.Body["text"] != strings.TrimSpace(long) && text.Body["text"] != long {
		t.Errorf("long caption: %+v\n%+v\n%+v", r, media, text)
	}
}

// send_media is advertised only where it is implemented.
func TestSendMediaNotAdvertisedElsewhere(t *testing.T) {
	for _, d := range []relay.CapabilityDescriptor{relay.DiscordDescriptor(), relay.TelegramDescriptor()} {
		if !d.Supports(relay.OpSendMedia) {
			t.Errorf("%s does not advertise send_media", d.Platform)
		}
	}
	api := newRawAPI(t, func(*http.Request, string, int) (int, string) { return 201, `{"sid":"SM1"}` })
	e := newEnv(t, withTwilio(api))
	g := e.gateway("gw-a", secretA, "sms", twilioSID)
	if d, _ := g.Descriptor(); d.Supports(relay.OpSendMedia) {
		t.Errorf("sms advertises send_media: %v", d.SupportedOps)
	}
	if r := g.CallAs(t.Context(), "sms", twilioSID, sendMediaAction("+15551230001", "image", "https://cdn.example.com/a.jpg", "", "", "", nil)); r.Success ||
		!strings.Contains(r.Error, "unsupported op") {
		t.Errorf("send_media on sms: %+v", r)
	}
}
