package connector

import (
	"context"
	"mime"
	"net/url"
	"strings"

	"github.com/caduceus-dev/caduceus/relay"
	"github.com/caduceus-dev/caduceus/relay/discord"
	"github.com/caduceus-dev/caduceus/relay/telegram"
)

// discordMaxContent is the longest message content Discord takes.
const discordMaxContent = 2000

// sendMedia answers send_media {chat_id, media_kind, source_url, content,
// reply_to, metadata, filename} on Discord and Telegram. A source_url whose
// path is /relay/media/{id} is read from the media store under the
// connection's tenant (whatever its host: the gateway names the connector
// by the URL it dialled) and uploaded; any other http(s) URL is public and
// is handed to the platform as a URL (Telegram fetches it; on Discord it is
// posted after the caption and Discord previews it), never fetched by the
// connector. A caption over the platform's caption limit goes as text
// messages after the file. The result's message_id is the file's message.
func (c *Connector) sendMedia(ctx context.Context, k *conn, e *edge, a *relay.Action, d *delivery) (relay.Result, string) {
	m, bad := c.mediaOf(k, a)
	if bad != "" {
		return relay.Failure(bad), "invalid"
	}
	var id, rest string
	var err error
	switch e.platform {
	case discord.Platform:
		if m.file == nil {
			return sendLinkDiscord(ctx, e, a, d)
		}
		id, rest, err = sendFileDiscord(ctx, e, a, m)
	case telegram.Platform:
		id, rest, err = sendMediaTelegram(ctx, e, a, m)
	default:
		return relay.Failure("relay: unsupported op " + a.Op), "unsupported_op"
	}
	if err != nil {
		return relay.Failure(err.Error()), ""
	}
	d.Chunks = 1
	if rest == "" {
		return relay.Result{Success: true, MessageID: id}, ""
	}
	chunks := relay.Split(rest, e.desc.MaxMessageLength, e.desc.LenUnit)
	d.Chunks += len(chunks)
	if _, _, failed := sendChunks(ctx, e, a, chunks, ""); failed != "" {
		// The file is out; say so, with the message that carries it.
		return relay.Result{Success: false, MessageID: id, Error: "relay: send_media: file sent (message " + id + "), caption " + failed}, ""
	}
	return relay.Result{Success: true, MessageID: id}, ""
}

// media is what a send_media sends: a stored file (nil for a public URL),
// its kind and its file name.
type media struct {
	file *mediaItem
	kind string
	name string
}

// mediaOf resolves a send_media's source_url (a stored file of the
// connection's tenant, or a public http(s) URL), media_kind (default
// document) and file name (the upload's, else "media" with the type's
// extension). bad, when set, is the refusal: what is wrong with the action.
func (c *Connector) mediaOf(k *conn, a *relay.Action) (m media, bad string) {
	if a.SourceURL == "" {
		return m, "relay: send_media needs source_url"
	}
	u, err := url.Parse(a.SourceURL)
	if err != nil {
		return m, "relay: send_media: source_url is not a URL"
	}
	if id, ok := strings.CutPrefix(u.Path, "/relay/media/"); ok && id != "" && !strings.Contains(id, "/") {
		it, ok := c.media.get(k.tenant, id, c.now())
		if !ok {
			return m, "relay: send_media: media " + id + " is not stored for this tenant (expired, or never uploaded)"
		}
		m.file = it
	} else if u.Scheme != "https" && u.Scheme != "http" || u.Host == "" {
		return m, "relay: send_media: source_url must be /relay/media/{id} or an http(s) URL"
	}
	switch m.kind = a.MediaKind; m.kind {
	case "image", "voice", "video", "document", "audio":
	case "":
		m.kind = "document"
	default:
		return m, "relay: send_media: media_kind must be image, voice, video or document"
	}
	m.name = a.Filename
	if m.file != nil && m.name == "" {
		m.name = m.file.filename
		if m.name == "" {
			m.name = "media"
			if exts, _ := mime.ExtensionsByType(m.file.mime); len(exts) > 0 {
				m.name += exts[0]
			}
		}
	}
	if strings.ContainsAny(m.name, "/\\\x00\r\n") || len([]rune(m.name)) > 255 {
		return m, "relay: send_media: filename must be a file name of at most 255 characters"
	}
	return m, ""
}

// sendLinkDiscord posts a public URL after the caption (split to the
// limit); Discord previews it. The result names the first message.
func sendLinkDiscord(ctx context.Context, e *edge, a *relay.Action, d *delivery) (relay.Result, string) {
	chunks := relay.Split(strings.TrimSpace(a.Content+"\n"+a.SourceURL), e.desc.MaxMessageLength, e.desc.LenUnit)
	d.Chunks = len(chunks)
	first, _, failed := sendChunks(ctx, e, a, chunks, a.ReplyTo)
	if failed != "" {
		return relay.Failure(failed), ""
	}
	return relay.Result{Success: true, MessageID: first}, ""
}

// sendFileDiscord uploads a stored file with the caption as its content;
// a caption over Discord's content limit is returned as rest, to go as
// text after the file.
func sendFileDiscord(ctx context.Context, e *edge, a *relay.Action, m media) (id, rest string, err error) {
	caption := a.Content
	if relay.Len(caption, e.desc.LenUnit) > discordMaxContent {
		caption, rest = "", a.Content
	}
	id, err = e.discord.SendFile(ctx, a.ChatID, caption, a.ReplyTo, m.name, m.file.mime, m.file.data)
	return id, rest, err
}

// sendMediaTelegram sends a stored file's bytes or a public URL (Telegram
// fetches it) as the media kind's method, with the caption (over
// Telegram's caption limit: returned as rest) in the bot's parse mode, and
// again without it when Telegram cannot parse the markup.
func sendMediaTelegram(ctx context.Context, e *edge, a *relay.Action, m media) (id, rest string, err error) {
	caption := a.Content
	if relay.Len(caption, relay.LenUTF16) > telegram.MaxCaption {
		caption, rest = "", a.Content
	}
	f := telegram.MediaFile{URL: a.SourceURL}
	if m.file != nil {
		f = telegram.MediaFile{Data: m.file.data, Filename: m.name, Mime: m.file.mime}
	}
	o := telegram.SendOptions{ThreadID: metaString(a.Metadata, "thread_id"), ReplyTo: a.ReplyTo, ParseMode: e.parseMode}
	id, err = e.telegram.SendMedia(ctx, a.ChatID, m.kind, caption, f, o)
	if cannotParse(err) {
		o.ParseMode = ""
		id, err = e.telegram.SendMedia(ctx, a.ChatID, m.kind, caption, f, o)
	}
	return id, rest, err
}
