package connector

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/caduceus-dev/caduceus/contract"
	"github.com/caduceus-dev/caduceus/guard"
	"github.com/caduceus-dev/caduceus/relay/wecom"
)

// WeComApp is one WeCom self-built application in callback mode, by corp id
// (the {corp_id} of /hooks/wecom/{corp_id} and the botId of a gateway's
// hello for platform wecom).
type WeComApp struct {
	Token          string // the callback's Token
	EncodingAESKey string // the callback's 43-character EncodingAESKey
	CorpSecret     string // the application's Secret, for the message API
	AgentID        int64
	Tenant         contract.TenantSlot
	APIBaseURL     string // wecom.DefaultBaseURL when empty
	Guardrails     guard.Config
}

// rawQuery decodes a query without turning '+' into a space: WeCom's
// base64 values (echostr) may arrive with a bare '+'.
func rawQuery(raw string) url.Values {
	q := url.Values{}
	for _, kv := range strings.Split(raw, "&") {
		k, v, _ := strings.Cut(kv, "=")
		k, err1 := url.PathUnescape(k)
		v, err2 := url.PathUnescape(v)
		if err1 == nil && err2 == nil && k != "" {
			q.Add(k, v)
		}
	}
	return q
}

// openWeCom verifies and decrypts one callback value, refusing a stale
// timestamp; it answers the refusal itself.
func (c *Connector) openWeCom(w http.ResponseWriter, r *http.Request, corp string, cr *wecom.Crypt, q url.Values, encrypted string) ([]byte, bool) {
	ts := q.Get("timestamp")
	plain, err := cr.Open(q.Get("msg_signature"), ts, q.Get("nonce"), encrypted)
	if err == nil {
		sec, perr := strconv.ParseInt(ts, 10, 64)
		if perr != nil || absDuration(c.now().Sub(time.Unix(sec, 0))) > wecom.MaxClockSkew {
			err = errors.New("wecom: timestamp outside the five-minute window")
		}
	}
	if err != nil {
		c.log.Warn("relay: wecom callback refused", "corp", corp, "remote", r.RemoteAddr, "err", err)
		http.Error(w, "invalid callback signature", http.StatusForbidden)
		return nil, false
	}
	return plain, true
}

// serveWeComVerify is GET /hooks/wecom/{corp_id}: the echostr handshake.
func (c *Connector) serveWeComVerify(w http.ResponseWriter, r *http.Request) {
	corp, e := c.webhookEdge(w, r, wecom.Platform, "corp_id")
	if e == nil {
		return
	}
	cr := e.client.(*wecomClient).crypt
	q := rawQuery(r.URL.RawQuery)
	plain, ok := c.openWeCom(w, r, corp, cr, q, q.Get("echostr"))
	if !ok {
		return
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	_, _ = w.Write(plain)
}

// serveWeCom is POST /hooks/wecom/{corp_id}: an encrypted message.
func (c *Connector) serveWeCom(w http.ResponseWriter, r *http.Request) {
	corp, e := c.webhookEdge(w, r, wecom.Platform, "corp_id")
	if e == nil {
		return
	}
	body, ok := readBody(w, r, wecom.MaxBodyBytes)
	if !ok {
		return
	}
	env, err := wecom.ParseEnvelope(body)
	if err != nil {
		http.Error(w, "bad callback", http.StatusBadRequest)
		return
	}
	cr := e.client.(*wecomClient).crypt
	plain, ok := c.openWeCom(w, r, corp, cr, rawQuery(r.URL.RawQuery), env.Encrypt)
	if !ok {
		return
	}
	m, err := wecom.ParseMessage(plain)
	if err != nil {
		http.Error(w, "bad message", http.StatusBadRequest)
		return
	}
	ev, err := wecom.Normalize(m)
	if answerUnnormalized(w, err, wecom.ErrIgnored, "bad message") {
		return
	}
	c.acceptDelivery(w, r, wecom.Platform, Inbound{Tenant: c.cfg.WeCom[corp].Tenant, Bot: corp, Event: ev, DedupeID: ev.MessageID}, nil)
}

// wecomClient answers outbound ops through the message API.
type wecomClient struct {
	sendOnly
	crypt *wecom.Crypt
	api   *wecom.Client
}

func (s *wecomClient) send(ctx context.Context, chatID, content, _ string, _ map[string]any) (string, error) {
	return s.api.SendText(ctx, chatID, content)
}
