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
	if a.SourceURL == "" {
		return relay.Failure("relay: send_media needs source_url"), "invalid"
	}
	u, err := url.Parse(a.SourceURL)
	if err != nil {
		return relay.Failure("relay: send_media: source_url is not a URL"), "invalid"
	}
	var file *mediaItem
	if id, ok := strings.CutPrefix(u.Path, "/relay/media/"); ok && id != "" && !strings.Contains(id, "/") {
		it, ok := c.media.get(k.tenant, id, c.now())
		if !ok {
			return relay.Failure("relay: send_media: media " + id + " is not stored for this tenant (expired, or never uploaded)"), "invalid"
		}
		file = it
	} else if u.Scheme != "https" && u.Scheme != "http" || u.Host == "" {
		return relay.Failure("relay: send_media: source_url must be /relay/media/{id} or an http(s) URL"), "invalid"
	}
	kind := a.MediaKind
	switch kind {
	case "image", "voice", "video", "document", "audio":
	case "":
		kind = "document"
	default:
		return relay.Failure("relay: send_media: media_kind must be image, voice, video or document"), "invalid"
	}
	name := a.Filename
	if file != nil {
		if name == "" {
			name = file.filename
		}
		if name == "" {
			name = "media"
			if exts, _ := mime.ExtensionsByType(file.mime); len(exts) > 0 {
				name += exts[0]
			}
		}
	}
	if strings.ContainsAny(name, "/\\\x00\r\n") || len([]rune(name)) > 255 {
		return relay.Failure("relay: send_media: filename must be a file name of at most 255 characters"), "invalid"
	}

	caption, rest := a.Content, ""
	var id string
	switch e.platform {
	case discord.Platform:
		if file == nil {
			// A public URL: posted after the caption; Discord previews it.
			chunks := relay.Split(strings.TrimSpace(a.Content+"\n"+a.SourceURL), e.desc.MaxMessageLength, e.desc.LenUnit)
			d.Chunks = len(chunks)
			for i, chunk := range chunks {
				replyTo := ""
				if i == 0 {
					replyTo = a.ReplyTo
				}
				mid, err := e.discord.Send(ctx, a.ChatID, chunk, replyTo)
				if err != nil {
					return relay.Failure(failText(err, i, len(chunks))), ""
				}
				if id == "" {
					id = mid
				}
			}
			return relay.Result{Success: true, MessageID: id}, ""
		}
		if relay.Len(caption, e.desc.LenUnit) > discordMaxContent {
			caption, rest = "", a.Content
		}
		id, err = e.discord.SendFile(ctx, a.ChatID, caption, a.ReplyTo, name, file.mime, file.data)
	case telegram.Platform:
		if relay.Len(caption, relay.LenUTF16) > telegram.MaxCaption {
			caption, rest = "", a.Content
		}
		f := telegram.MediaFile{URL: a.SourceURL}
		if file != nil {
			f = telegram.MediaFile{Data: file.data, Filename: name, Mime: file.mime}
		}
		o := telegram.SendOptions{ThreadID: metaString(a.Metadata, "thread_id"), ReplyTo: a.ReplyTo, ParseMode: e.parseMode}
		id, err = e.telegram.SendMedia(ctx, a.ChatID, kind, caption, f, o)
		if cannotParse(err) {
			o.ParseMode = ""
			id, err = e.telegram.SendMedia(ctx, a.ChatID, kind, caption, f, o)
		}
	default:
		return relay.Failure("relay: unsupported op " + a.Op), "unsupported_op"
	}
	if err != nil {
		return relay.Failure(err.Error()), ""
	}
	d.Chunks = 1
	if rest != "" {
		chunks := relay.Split(rest, e.desc.MaxMessageLength, e.desc.LenUnit)
		d.Chunks += len(chunks)
		for i, chunk := range chunks {
			if _, err := e.send(ctx, a.ChatID, chunk, "", a.Metadata); err != nil {
				// The file is out; say so, with the message that carries it.
				return relay.Result{Success: false, MessageID: id, Error: "relay: send_media: file sent (message " + id + "), caption " + failText(err, i, len(chunks))}, ""
			}
		}
	}
	return relay.Result{Success: true, MessageID: id}, ""
}
