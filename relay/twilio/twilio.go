// Package twilio is the Twilio edge of the relay connector: the Messaging
// webhook for SMS and WhatsApp (X-Twilio-Signature verification over the
// configured public URL and the raw form body), normalization into relay
// MessageEvents on platform sms or whatsapp, and a Messages API client for
// replies.
//
// The verifier and the client are written by hand against Twilio's
// published scheme (https://www.twilio.com/docs/usage/security#validating-requests):
// one HMAC-SHA1 and one REST call, where twilio/twilio-go would bring its
// whole generated API surface.
package twilio

import (
	"crypto/hmac"
	"crypto/sha1"
	"encoding/base64"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/caduceus-dev/caduceus/relay"
)

// Platforms of the relay this edge produces.
const (
	PlatformSMS      = "sms"
	PlatformWhatsApp = "whatsapp"
)

// SignatureHeader carries the request's signature.
const SignatureHeader = "X-Twilio-Signature"

// MaxBodyBytes bounds a webhook body.
const MaxBodyBytes = 256 << 10

// WhatsAppPrefix marks a WhatsApp address in Twilio's From and To.
const WhatsAppPrefix = "whatsapp:"

// Sign returns the X-Twilio-Signature of a form POST to fullURL:
// base64(HMAC-SHA1(authToken, fullURL + every parameter name followed by
// its value, names sorted, each name's distinct values sorted)).
func Sign(authToken, fullURL string, form url.Values) string {
	m := hmac.New(sha1.New, []byte(authToken))
	m.Write([]byte(fullURL))
	names := make([]string, 0, len(form))
	for k := range form {
		names = append(names, k)
	}
	slices.Sort(names)
	for _, k := range names {
		vals := slices.Clone(form[k])
		slices.Sort(vals)
		vals = slices.Compact(vals)
		for _, v := range vals {
			m.Write([]byte(k))
			m.Write([]byte(v))
		}
	}
	return base64.StdEncoding.EncodeToString(m.Sum(nil))
}

// ErrForged is a request whose signature does not verify.
var ErrForged = errors.New("twilio: request signature does not verify")

// Verify parses the raw form body and checks signature against the public
// URL Twilio was given (publicURL, exactly as configured in the console),
// also trying it with the scheme's default port added or removed, as
// Twilio's own libraries do. An empty auth token refuses everything.
func Verify(authToken, publicURL, signature string, body []byte) (url.Values, error) {
	form, err := url.ParseQuery(string(body))
	if err != nil {
		return nil, fmt.Errorf("twilio: body is not a form: %w", err)
	}
	got, err := base64.StdEncoding.DecodeString(signature)
	if authToken == "" || err != nil || len(got) != sha1.Size {
		return nil, ErrForged
	}
	for _, u := range urlVariants(publicURL) {
		want, _ := base64.StdEncoding.DecodeString(Sign(authToken, u, form))
		if hmac.Equal(got, want) {
			return form, nil
		}
	}
	return nil, ErrForged
}

// urlVariants is u, and u with its scheme's default port toggled.
func urlVariants(u string) []string {
	p, err := url.Parse(u)
	if err != nil || p.Host == "" {
		return []string{u}
	}
	def := map[string]string{"https": "443", "http": "80"}[p.Scheme]
	if def == "" {
		return []string{u}
	}
	q := *p
	if p.Port() == "" {
		q.Host = p.Host + ":" + def
	} else if p.Port() == def {
		q.Host = p.Hostname()
	} else {
		return []string{u}
	}
	return []string{u, q.String()}
}

// NormalizeWhatsApp is the gateway's WhatsApp identifier normalization
// (HERMES-RELAY §3.5), relay.NormalizeWhatsApp: trim surrounding
// whitespace, remove the first '+' (wherever it is), cut at the first ':',
// then at the first '@'. It refuses
// an empty result and one with a character outside A–Z a–z 0–9 @ . + -,
// which the gateway's key builder would raise on.
func NormalizeWhatsApp(id string) (string, error) {
	s := relay.NormalizeWhatsApp(id)
	if s == "" {
		return "", fmt.Errorf("twilio: whatsapp id %q is empty once normalized", id)
	}
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '@' || r == '.' || r == '+' || r == '-') {
			return "", fmt.Errorf("twilio: whatsapp id %q has a character the gateway cannot key (%q)", id, r)
		}
	}
	return s, nil
}

// Inbound is a normalized incoming message.
type Inbound struct {
	Event      relay.MessageEvent
	AccountSID string
	To         string // the Twilio number it was sent to
	// MediaURLs are Twilio's media URLs; fetching them needs the account's
	// credentials, so they stay at the edge (not in the event).
	MediaURLs []string
	// MediaTypes are the content types Twilio gives for MediaURLs (same
	// positions; "" when not given).
	MediaTypes []string
}

// ErrIgnored is a webhook that is not an incoming message (a status
// callback).
var ErrIgnored = errors.New("twilio: request carries no incoming message")

// Normalize turns an incoming-message webhook into an Inbound: platform
// whatsapp when From carries the whatsapp: prefix, else sms; always a dm
// whose chat_id and user_id are the sender — verbatim for SMS, the
// normalized number for WhatsApp (HERMES-RELAY §3.5 and §8.8), so the
// gateway never sees an id it cannot key; user_name the WhatsApp profile
// name; message_id the MessageSid. A message with media gets the first
// item's type.
func Normalize(form url.Values) (Inbound, error) {
	sid := form.Get("MessageSid")
	if sid == "" {
		sid = form.Get("SmsSid")
	}
	status := form.Get("MessageStatus")
	if status == "" {
		status = form.Get("SmsStatus")
	}
	if status != "" && status != "received" {
		return Inbound{}, ErrIgnored // a status callback (queued, sent, delivered, read, failed…)
	}
	from := form.Get("From")
	if sid == "" || from == "" {
		return Inbound{}, fmt.Errorf("twilio: message without MessageSid or From")
	}
	// The input rule of every route: text is valid UTF-8 without NUL (an id
	// that is not could neither be keyed by the gateway nor stored).
	for k, vs := range form {
		for _, v := range append(vs, k) {
			if !utf8.ValidString(v) || strings.IndexByte(v, 0) >= 0 {
				return Inbound{}, fmt.Errorf("twilio: form field %q is not valid UTF-8 text", strings.ToValidUTF8(k, "\ufffd"))
			}
		}
	}
	src := relay.SessionSource{Platform: PlatformSMS, ChatType: relay.ChatDM, ChatID: from, UserID: from, MessageID: sid}
	if rest, ok := strings.CutPrefix(from, WhatsAppPrefix); ok {
		id, err := NormalizeWhatsApp(rest)
		if err != nil {
			return Inbound{}, err
		}
		src.Platform, src.ChatID, src.UserID = PlatformWhatsApp, id, id
		src.UserName = form.Get("ProfileName")
	}
	in := Inbound{AccountSID: form.Get("AccountSid"), To: form.Get("To")}
	n, _ := strconv.Atoi(form.Get("NumMedia"))
	typ := relay.MessageText
	for i := range min(n, 10) {
		if u := form.Get("MediaUrl" + strconv.Itoa(i)); u != "" {
			in.MediaURLs = append(in.MediaURLs, u)
			in.MediaTypes = append(in.MediaTypes, form.Get("MediaContentType"+strconv.Itoa(i)))
		}
		if i == 0 {
			// Audio on SMS and WhatsApp is a voice note.
			if typ = relay.MediaMessageType(form.Get("MediaContentType0")); typ == relay.MessageAudio {
				typ = relay.MessageVoice
			}
		}
	}
	if form.Get("Latitude") != "" && form.Get("Longitude") != "" {
		typ = relay.MessageLocation
	}
	body := form.Get("Body")
	if body == "" && typ == relay.MessageText {
		return Inbound{}, ErrIgnored
	}
	in.Event = relay.MessageEvent{Text: body, MessageType: typ, Source: src, MessageID: sid, MediaURLs: []string{}}
	return in, nil
}

// EmptyTwiML is the webhook's answer: no reply from Twilio itself (the
// gateway's reply goes through the Messages API).
const EmptyTwiML = `<?xml version="1.0" encoding="UTF-8"?><Response></Response>`

// MaxMessageLength is the most characters a Message Body may hold (1600,
// for SMS and WhatsApp alike).
const MaxMessageLength = 1600

// SupportedOps are the outbound ops the connector answers for Twilio:
// sending only (SMS and WhatsApp messages cannot be edited, and neither
// shows typing through Twilio).
var SupportedOps = []string{"send"}

// Descriptor is the descriptor for platform (sms or whatsapp).
func Descriptor(platform string) relay.CapabilityDescriptor {
	d := relay.CapabilityDescriptor{
		ContractVersion:  relay.ContractVersion,
		Platform:         PlatformSMS,
		Label:            "SMS",
		MaxMessageLength: MaxMessageLength,
		MarkdownDialect:  "plain",
		LenUnit:          relay.LenChars,
		Emoji:            "\U0001f4f1",
		PlatformHint:     "You are replying by SMS. Plain text only; keep it short.",
		SupportedOps:     slices.Clone(SupportedOps),
	}
	if platform == PlatformWhatsApp {
		d.Platform, d.Label, d.MarkdownDialect = PlatformWhatsApp, "WhatsApp", "whatsapp"
		d.Emoji = "\U0001f4de"
		d.PlatformHint = "You are on WhatsApp. WhatsApp formatting works (*bold*, _italic_, ~strike~, ```code```)."
	}
	return d
}
