package connector

import (
	"context"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/caduceus-dev/caduceus/contract"
	"github.com/caduceus-dev/caduceus/relay"
	"github.com/caduceus-dev/caduceus/relay/slack"
	"github.com/caduceus-dev/caduceus/relay/telegram"
	"github.com/caduceus-dev/caduceus/relay/twilio"
	"github.com/caduceus-dev/caduceus/relay/whatsapp"
)

// RehostTimeout bounds the downloads of one inbound event's attachments
// (all of them together): the webhook that carried the event waits for
// them, and Twilio gives up on a webhook after 15 s.
const RehostTimeout = 10 * time.Second

// SlackRehostTimeout is RehostTimeout for Slack, which wants its answer
// within 3 s.
const SlackRehostTimeout = 2 * time.Second

// attachment is one inbound attachment whose URL needs the platform's
// credentials. request builds the authenticated GET of its bytes (it may
// call the platform first, e.g. Telegram's getFile).
type attachment struct {
	request              func(ctx context.Context) (*http.Request, error)
	kind, mime, filename string
	ref                  string // names it in logs; never a credential
	// fallback, when set, is listed instead of a copy that could not be
	// made (a public link that still works, e.g. Discord's CDN).
	fallback *relay.Media
}

// mediaURL is where the tenant's gateways read stored media id: the
// configured public URL of the connector plus /relay/media/{id}, or the
// path alone when none is configured.
func (c *Connector) mediaURL(id string) string {
	return strings.TrimRight(c.cfg.PublicURL, "/") + "/relay/media/" + id
}

func (c *Connector) httpClient() *http.Client {
	if c.cfg.HTTPClient != nil {
		return c.cfg.HTTPClient
	}
	return http.DefaultClient
}

// rehost downloads each attachment (at most MaxMediaBytes each, all within
// RehostTimeout) into the media store under tenant and lists it in the
// event's media_urls and media as mediaURL(id). An attachment that cannot
// be downloaded or stored is dropped with a warning naming the platform,
// the message and the reason; the event itself is always delivered.
func (c *Connector) rehost(ctx context.Context, tenant contract.TenantSlot, ev *relay.MessageEvent, atts []attachment) {
	c.rehostWithin(ctx, RehostTimeout, tenant, ev, atts)
}

// rehostWithin is rehost with budget instead of RehostTimeout.
func (c *Connector) rehostWithin(ctx context.Context, budget time.Duration, tenant contract.TenantSlot, ev *relay.MessageEvent, atts []attachment) {
	if len(atts) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), budget)
	defer cancel()
	for _, a := range atts {
		data, mimeType, err := c.download(ctx, a)
		if err == nil {
			if a.mime != "" { // what the platform said of the file beats its file server's header
				mimeType = a.mime
			}
			if mimeType == "" {
				mimeType = "application/octet-stream"
			}
			now := c.now()
			id := contract.NewID("rmed")
			if !c.media.put(id, &mediaItem{tenant: tenant, data: data, mime: mimeType, filename: a.filename, expires: now.Add(c.cfg.MediaTTL)}, now) {
				err = fmt.Errorf("media store is full")
			} else {
				u := c.mediaURL(id)
				ev.MediaURLs = append(ev.MediaURLs, u)
				ev.Media = append(ev.Media, relay.Media{URL: u, Mime: mimeType, Kind: a.kind, Size: int64(len(data)), Filename: a.filename})
				c.log.Info("relay: inbound media re-hosted", "platform", ev.Source.Platform, "message", ev.MessageID, "id", id, "bytes", len(data))
				continue
			}
		}
		if a.fallback != nil {
			ev.MediaURLs = append(ev.MediaURLs, a.fallback.URL)
			ev.Media = append(ev.Media, *a.fallback)
			c.log.Warn("relay: inbound media not re-hosted; listed with its platform URL",
				"platform", ev.Source.Platform, "message", ev.MessageID, "attachment", a.ref, "err", err)
			continue
		}
		c.log.Warn("relay: inbound media not re-hosted; attachment dropped, message delivered without it",
			"platform", ev.Source.Platform, "message", ev.MessageID, "attachment", a.ref, "err", err)
	}
	if ev.MediaURLs == nil {
		ev.MediaURLs = []string{}
	}
}

// download fetches one attachment's bytes and content type.
func (c *Connector) download(ctx context.Context, a attachment) ([]byte, string, error) {
	req, err := a.request(ctx)
	if err != nil {
		return nil, "", err
	}
	resp, err := c.httpClient().Do(req)
	if err != nil {
		// *url.Error names the URL, which may hold a credential (Telegram's
		// file URL holds the bot token): keep only the cause.
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return nil, "", fmt.Errorf("download: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		return nil, "", fmt.Errorf("download: HTTP %d", resp.StatusCode)
	}
	if resp.ContentLength > MaxMediaBytes {
		return nil, "", fmt.Errorf("download: %d bytes is more than %d", resp.ContentLength, MaxMediaBytes)
	}
	data, err := io.ReadAll(io.LimitReader(resp.Body, MaxMediaBytes+1))
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return nil, "", fmt.Errorf("download: %w", err)
	}
	if len(data) > MaxMediaBytes {
		return nil, "", fmt.Errorf("download: more than %d bytes", MaxMediaBytes)
	}
	if len(data) == 0 {
		return nil, "", fmt.Errorf("download: empty body")
	}
	mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	return data, mt, nil
}

// telegramAttachments are a message's files, fetched with getFile and the
// bot token.
func telegramAttachments(api *telegram.Client, files []telegram.File) []attachment {
	var out []attachment
	for _, f := range files {
		out = append(out, attachment{kind: f.Kind, mime: f.Mime, filename: f.Filename, ref: "file_id " + f.FileID,
			request: func(ctx context.Context) (*http.Request, error) {
				path, err := api.GetFile(ctx, f.FileID)
				if err != nil {
					return nil, err
				}
				return api.FileRequest(ctx, path)
			}})
	}
	return out
}

// twilioAttachments are a message's MediaUrl0..9, fetched with the
// account's basic auth. The credentials only go to the account's API host
// (api.twilio.com, or the configured api_base_url): a media URL elsewhere
// is dropped.
func twilioAttachments(sid string, a TwilioAccount, in twilio.Inbound) []attachment {
	base := a.APIBaseURL
	if base == "" {
		base = twilio.DefaultBaseURL
	}
	apiHost := ""
	if u, err := url.Parse(base); err == nil {
		apiHost = u.Host
	}
	var out []attachment
	for i, raw := range in.MediaURLs {
		mt := ""
		if i < len(in.MediaTypes) {
			mt = in.MediaTypes[i]
		}
		out = append(out, attachment{kind: relay.MediaKind(mt), mime: mt, ref: "MediaUrl" + strconv.Itoa(i),
			request: func(ctx context.Context) (*http.Request, error) {
				u, err := url.Parse(raw)
				if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host != apiHost {
					return nil, fmt.Errorf("media URL is not on the account's API host %s", apiHost)
				}
				req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
				if err != nil {
					return nil, fmt.Errorf("bad media URL")
				}
				req.SetBasicAuth(sid, a.AuthToken)
				return req, nil
			}})
	}
	return out
}

// whatsappAttachments is a WhatsApp Cloud message's media: GET
// /{media-id} with the access token for its URL, then that URL with the
// same bearer.
func whatsappAttachments(api *whatsapp.Client, in whatsapp.Inbound) []attachment {
	return []attachment{{kind: in.MediaKind, mime: in.MediaMime, filename: in.MediaFilename, ref: "media id " + in.MediaID,
		request: func(ctx context.Context) (*http.Request, error) {
			info, err := api.Media(ctx, in.MediaID)
			if err != nil {
				return nil, err
			}
			return api.MediaRequest(ctx, info.URL)
		}}}
}

// slackAttachments are a message's files, fetched from url_private with
// the bot token as bearer. The token only goes to Slack's hosts
// (*.slack.com, or the configured api_base_url's host); a file elsewhere is
// dropped.
func slackAttachments(a SlackApp, files []slack.File) []attachment {
	apiHost := ""
	if a.APIBaseURL != "" {
		if u, err := url.Parse(a.APIBaseURL); err == nil {
			apiHost = u.Host
		}
	}
	var out []attachment
	for _, f := range files {
		raw := f.URLPrivateDownload
		if raw == "" {
			raw = f.URLPrivate
		}
		out = append(out, attachment{kind: relay.MediaKind(f.Mimetype), mime: f.Mimetype, filename: f.Name, ref: "file " + f.ID,
			request: func(ctx context.Context) (*http.Request, error) {
				u, err := url.Parse(raw)
				if raw == "" || err != nil {
					return nil, fmt.Errorf("file has no url_private")
				}
				slackHost := u.Scheme == "https" && (u.Host == "slack.com" || strings.HasSuffix(u.Host, ".slack.com"))
				if !slackHost && (apiHost == "" || u.Host != apiHost) {
					return nil, fmt.Errorf("file URL is not on a Slack host")
				}
				req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
				if err != nil {
					return nil, fmt.Errorf("bad file URL")
				}
				req.Header.Set("Authorization", "Bearer "+a.BotToken)
				return req, nil
			}})
	}
	return out
}

// discordCDNHosts serve Discord's attachments (public, expiring links).
var discordCDNHosts = []string{"cdn.discordapp.com", "media.discordapp.net"}

// discordAttachments are a Gateway message's attachments on Discord's CDN
// (or on the configured API base's host, for tests and proxies), to be
// copied into the media store: CDN links expire, the copy is the tenant's
// for MediaTTL. A copy that cannot be made keeps its CDN link. An
// attachment on any other host is left out here and listed as it came: the
// connector never fetches a URL a message merely names.
func discordAttachments(ev *relay.MessageEvent, apiBase string) (atts []attachment, rest []relay.Media) {
	allowed := slices.Clone(discordCDNHosts)
	if u, err := url.Parse(apiBase); err == nil && u.Hostname() != "" {
		allowed = append(allowed, u.Hostname())
	}
	for _, m := range ev.Media {
		u, err := url.Parse(m.URL)
		if err != nil || (u.Scheme != "https" && u.Scheme != "http") || !slices.Contains(allowed, u.Hostname()) {
			rest = append(rest, m)
			continue
		}
		link, fallback := m.URL, m
		atts = append(atts, attachment{
			request: func(ctx context.Context) (*http.Request, error) {
				return http.NewRequestWithContext(ctx, http.MethodGet, link, nil)
			},
			kind: m.Kind, mime: m.Mime, filename: m.Filename, ref: "discord attachment " + m.Filename, fallback: &fallback,
		})
	}
	return atts, rest
}
