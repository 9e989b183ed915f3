package connector_test

import (
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/caduceus-dev/caduceus/relay/connector"
	"github.com/caduceus-dev/caduceus/relay/wecom"
)

const (
	wecomCorp   = "ww0000000000000001"
	wecomToken  = "wecom-callback-token"
	wecomAESKey = "jWmYm7qr5nMoAUwZRjGtBxmz3KA1tkAj3ykkR6q2B2C"
)

func withWeCom(api *rawAPI) func(*connector.Config) {
	return func(c *connector.Config) {
		c.WeCom = map[string]connector.WeComApp{wecomCorp: {Token: wecomToken, EncodingAESKey: wecomAESKey,
			CorpSecret: "wecom-corp-secret", AgentID: 1000002, Tenant: slot1, APIBaseURL: api.srv.URL}}
	}
}

func wecomText(from, msgID, text string) []byte {
	return []byte(fmt.Sprintf(`<xml><ToUserName><![CDATA[%s]]></ToUserName><FromUserName><![CDATA[%s]]></FromUserName><CreateTime>1700000000</CreateTime>`+
		`<MsgType><![CDATA[text]]></MsgType><Content><![CDATA[%s]]></Content><MsgId>%s</MsgId><AgentID>1000002</AgentID></xml>`, wecomCorp, from, text, msgID))
}

// postWeCom seals plain with cr at ts and posts it.
func (e *env) postWeCom(cr *wecom.Crypt, plain []byte, ts time.Time) int {
	e.t.Helper()
	stamp := strconv.FormatInt(ts.Unix(), 10)
	enc, sig := cr.Seal(plain, stamp, "nonce1", nil)
	body := fmt.Sprintf(`<xml><ToUserName><![CDATA[%s]]></ToUserName><Encrypt><![CDATA[%s]]></Encrypt><AgentID><![CDATA[1000002]]></AgentID></xml>`, wecomCorp, enc)
	u := e.srv.URL + "/hooks/wecom/" + wecomCorp + "?msg_signature=" + sig + "&timestamp=" + stamp + "&nonce=nonce1"
	resp, err := http.Post(u, "text/xml", strings.NewReader(body))
	if err != nil {
		e.t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

func TestWeComCallback(t *testing.T) {
	api := newRawAPI(t, func(r *http.Request, body string, n int) (int, string) {
		if strings.HasSuffix(r.URL.Path, "/gettoken") {
			return 200, `{"errcode":0,"errmsg":"ok","access_token":"ACCESS1","expires_in":7200}`
		}
		return 200, fmt.Sprintf(`{"errcode":0,"errmsg":"ok","msgid":"MSG%d"}`, n)
	})
	e := newEnv(t, withWeCom(api))
	now := e.clock.Now()
	cr, _ := wecom.NewCrypt(wecomToken, wecomAESKey, wecomCorp)

	// The echostr handshake, with a bare '+' in the base64 as WeCom may send it.
	var echo, sig string
	stamp := strconv.FormatInt(now.Unix(), 10)
	for i := 0; !strings.Contains(echo, "+"); i++ {
		echo, sig = cr.Seal([]byte("echo-"+strconv.Itoa(i)), stamp, "n1", nil)
	}
	get := func(q string) (int, string) {
		resp, err := http.Get(e.srv.URL + "/hooks/wecom/" + wecomCorp + "?" + q)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, body := get("msg_signature=" + sig + "&timestamp=" + stamp + "&nonce=n1&echostr=" + echo); code != 200 || !strings.HasPrefix(body, "echo-") {
		t.Errorf("handshake (bare +): %d %q", code, body)
	}
	if code, body := get("msg_signature=" + sig + "&timestamp=" + stamp + "&nonce=n1&echostr=" + url.QueryEscape(echo)); code != 200 || !strings.HasPrefix(body, "echo-") {
		t.Errorf("handshake (escaped): %d %q", code, body)
	}
	if code, _ := get("msg_signature=" + strings.Repeat("0", 40) + "&timestamp=" + stamp + "&nonce=n1&echostr=" + url.QueryEscape(echo)); code != 403 {
		t.Errorf("forged handshake: %d", code)
	}

	msg := wecomText("zhangsan", "7000000000000000001", "你好")
	if code := e.postWeCom(cr, msg, now); code != 200 {
		t.Fatalf("callback: %d", code)
	}
	forger, _ := wecom.NewCrypt("guessed-token", wecomAESKey, wecomCorp)
	if code := e.postWeCom(forger, wecomText("zhangsan", "7000000000000000002", "forged"), now); code != 403 {
		t.Errorf("forged: %d", code)
	}
	otherCorp, _ := wecom.NewCrypt(wecomToken, wecomAESKey, "wwsomeoneelse")
	if code := e.postWeCom(otherCorp, wecomText("zhangsan", "7000000000000000003", "other corp"), now); code != 403 {
		t.Errorf("another corp id inside: %d", code)
	}
	if code := e.postWeCom(cr, wecomText("zhangsan", "7000000000000000004", "stale"), now.Add(-6*time.Minute)); code != 403 {
		t.Errorf("stale: %d", code)
	}
	if code := e.postWeCom(cr, msg, now); code != 200 {
		t.Errorf("replay: %d", code)
	}
	g := e.gateway("gw-a", secretA, wecom.Platform, wecomCorp)
	if d, ok := g.Descriptor(); !ok || d.MaxMessageLength != 680 || d.Platform != "wecom" {
		t.Errorf("descriptor %+v", d)
	}
	in := g.next(t)
	if in.Event.Text != "你好" || in.SessionKey != "agent:main:wecom:dm:zhangsan" {
		t.Errorf("event %+v key %q", in.Event, in.SessionKey)
	}
	g.none(t, "forged, foreign, stale and replayed callbacks")

	if r := g.Send(t.Context(), "zhangsan", "您好", "", nil); !r.Success || r.MessageID == "" {
		t.Errorf("send: %+v", r)
	}
	calls := api.Calls()
	if len(calls) != 2 || calls[0] != "GET /cgi-bin/gettoken?corpid="+wecomCorp+"&corpsecret=wecom-corp-secret  " ||
		calls[1] != `POST /cgi-bin/message/send?access_token=ACCESS1  {"agentid":1000002,"msgtype":"text","text":{"content":"您好"},"touser":"zhangsan"}` {
		t.Errorf("message API saw:\n%s", api.seen())
	}
	if strings.Contains(e.logs.String(), "wecom-corp-secret") || strings.Contains(e.auditBodies(slot1), "ACCESS1") {
		t.Error("a WeCom secret leaked")
	}
}

func TestWeComConfig(t *testing.T) {
	e := newEnv(t)
	_, err := connector.New(connector.Config{Store: e.store, Audit: e.audit,
		WeCom: map[string]connector.WeComApp{"ww1": {Token: "t", EncodingAESKey: "short", Tenant: slot1}}})
	if err == nil || !strings.Contains(err.Error(), "EncodingAESKey") {
		t.Errorf("short key: %v", err)
	}
}
