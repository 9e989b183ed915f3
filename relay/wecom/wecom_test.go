package wecom_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/caduceus-dev/caduceus/relay"
	"github.com/caduceus-dev/caduceus/relay/wecom"
)

// The test vectors of Tencent's BizMsgCrypt sample code (the WeCom
// "加解密库" samples, e.g. C# Sample.cs and the PHP/Python samples, and the
// developer documentation's "加解密方案说明" page): Token QDG6eK, this
// EncodingAESKey, corp id wx5823bf96d3bd56c7; a VerifyURL handshake and a
// DecryptMsg callback, each with the msg_signature Tencent computed.
const (
	vecToken  = "QDG6eK"
	vecAESKey = "jWmYm7qr5nMoAUwZRjGtBxmz3KA1tkAj3ykkR6q2B2C"
	vecCorpID = "wx5823bf96d3bd56c7"

	vecVerifySig   = "5c45ff5e21c57e6ad56bac8758b79b1d9ac89fd3"
	vecVerifyTS    = "1409659589"
	vecVerifyNonce = "263014780"
	vecVerifyEcho  = "P9nAzCzyDtyTWESHep1vC5X9xho/qYX3Zpb4yKa9SKld1DsH3Iyt3tP3zNdtp+4RPcs8TgAE7OaBO+FZXvnaqQ=="

	vecMsgSig     = "477715d11cdb4164915debcba66cb864d751f3e6"
	vecMsgTS      = "1409659813"
	vecMsgNonce   = "1372623149"
	vecMsgEncrypt = "RypEvHKD8QQKFhvQ6QleEB4J58tiPdvo+rtK1I9qca6aM/wvqnLSV5zEPeusUiX5L5X/0lWfrf0QADHHhGd3QczcdCUpj911L3vg3W/sYYvuJTs3TUUkSUXxaccAS0qhxchrRYt66wiSpGLYL42aM6A8dTT+6k4aSknmPj48kzJs8qLjvd4Xgpue06DOdnLxAUHzM6+kDZ+HMZfJYuR+LtwGc2hgf5gsijff0ekUNXZiqATP7PF5mZxZ3Izoun1s4zG4LUMnvw2r+KqCKIw+3IQH03v+BCA9nMELNqbSf6tiWSrXJB3LAVGUcallcrw8V2t9EL4EhzJWrQUax5wLVMNS0+rUPA3k22Ncx4XXZS9o0MBH27Bo6BpNelZpS+/uh9KsNlY6bHCmJU9p8g7m3fVKn28H3KDYA5Pl/T8Z1ptDAVe0lXdQ2YoyyH2uyPIGHBZZIs2pDBS8R07+qN+E7Q=="
)

func vecCrypt(t testing.TB) *wecom.Crypt {
	c, err := wecom.NewCrypt(vecToken, vecAESKey, vecCorpID)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestOfficialVectors(t *testing.T) {
	c := vecCrypt(t)
	if got := c.Signature(vecVerifyTS, vecVerifyNonce, vecVerifyEcho); got != vecVerifySig {
		t.Errorf("VerifyURL signature %s, Tencent's %s", got, vecVerifySig)
	}
	echo, err := c.Open(vecVerifySig, vecVerifyTS, vecVerifyNonce, vecVerifyEcho)
	if err != nil || string(echo) != "1616140317555161061" {
		t.Errorf("VerifyURL echostr: %q %v", echo, err)
	}
	if got := c.Signature(vecMsgTS, vecMsgNonce, vecMsgEncrypt); got != vecMsgSig {
		t.Errorf("DecryptMsg signature %s, Tencent's %s", got, vecMsgSig)
	}
	plain, err := c.Open(vecMsgSig, vecMsgTS, vecMsgNonce, vecMsgEncrypt)
	if err != nil {
		t.Fatal(err)
	}
	m, err := wecom.ParseMessage(plain)
	if err != nil || m.ToUserName != vecCorpID || m.FromUserName != "mycreate" || m.MsgType != "text" || m.Content != "hello" ||
		m.MsgID != "4561255354251345929" || m.AgentID != "218" || m.CreateTime != 1409659813 {
		t.Fatalf("decrypted message %+v %v\n%s", m, err, plain)
	}
}

func TestOpenRefuses(t *testing.T) {
	c := vecCrypt(t)
	other, _ := wecom.NewCrypt(vecToken, vecAESKey, "wwanothercorp")
	wrongKey, _ := wecom.NewCrypt(vecToken, "abcdefghijklmnopqrstuvwxyz0123456789ABCDEFG", vecCorpID)
	flip := []byte(vecMsgEncrypt)
	flip[10] ^= 1
	cases := []struct {
		name string
		c    *wecom.Crypt
		sig  string
		ts   string
		enc  string
		want error
	}{
		{"forged signature", c, strings.Repeat("0", 40), vecMsgTS, vecMsgEncrypt, wecom.ErrForged},
		{"timestamp changed", c, vecMsgSig, "1409659814", vecMsgEncrypt, wecom.ErrForged},
		{"ciphertext changed", c, vecMsgSig, vecMsgTS, string(flip), wecom.ErrForged},
		{"another corp id", other, vecMsgSig, vecMsgTS, vecMsgEncrypt, wecom.ErrCorpID},
		{"another AES key", wrongKey, vecMsgSig, vecMsgTS, vecMsgEncrypt, wecom.ErrCiphertext},
	}
	for _, k := range cases {
		// A wrong key yields garbage: bad padding, or (rarely) a wrong corp id.
		if _, err := k.c.Open(k.sig, k.ts, vecMsgNonce, k.enc); !errors.Is(err, k.want) && !(k.want == wecom.ErrCiphertext && errors.Is(err, wecom.ErrCorpID)) {
			t.Errorf("%s: %v, want %v", k.name, err, k.want)
		}
	}
	// A well-signed ciphertext that is not base64 or not whole blocks.
	for _, enc := range []string{"not base64!", "QUJD"} {
		if _, err := c.Open(c.Signature("1", "2", enc), "1", "2", enc); !errors.Is(err, wecom.ErrCiphertext) {
			t.Errorf("Open(%q) = %v", enc, err)
		}
	}
	for _, bad := range []struct{ token, key, corp string }{{"", vecAESKey, vecCorpID}, {vecToken, vecAESKey[:42], vecCorpID}, {vecToken, vecAESKey[:42] + "!", vecCorpID}, {vecToken, vecAESKey, ""}} {
		if _, err := wecom.NewCrypt(bad.token, bad.key, bad.corp); err == nil {
			t.Errorf("NewCrypt(%q, %q, %q) accepted", bad.token, bad.key, bad.corp)
		}
	}
}

func TestSealOpens(t *testing.T) {
	c := vecCrypt(t)
	for _, msg := range []string{"", "x", strings.Repeat("长", 100), "1616140317555161061"} {
		enc, sig := c.Seal([]byte(msg), "1", "2", nil)
		got, err := c.Open(sig, "1", "2", enc)
		if err != nil || string(got) != msg {
			t.Errorf("round trip of %q: %q %v", msg, got, err)
		}
	}
	// The padding is to 32 bytes: 16 + 4 + 19 + 18 = 57 -> 64 bytes.
	enc, _ := c.Seal([]byte("1616140317555161061"), "1", "2", nil)
	if len(enc) != 88 {
		t.Errorf("ciphertext of 57 plaintext bytes is %d base64 chars, want 88 (64 bytes)", len(enc))
	}
}

func TestNormalize(t *testing.T) {
	cases := []struct {
		xml  string
		typ  relay.MessageType
		text string
	}{
		{`<xml><ToUserName><![CDATA[ww1]]></ToUserName><FromUserName><![CDATA[zhangsan]]></FromUserName><CreateTime>1700000000</CreateTime><MsgType><![CDATA[text]]></MsgType><Content><![CDATA[你好]]></Content><MsgId>7000000000000000001</MsgId><AgentID>1000002</AgentID></xml>`, relay.MessageText, "你好"},
		{`<xml><FromUserName>zhangsan</FromUserName><MsgType>image</MsgType><PicUrl>http://p</PicUrl><MediaId>M1</MediaId><MsgId>2</MsgId></xml>`, relay.MessagePhoto, ""},
		{`<xml><FromUserName>zhangsan</FromUserName><MsgType>voice</MsgType><MediaId>M2</MediaId><MsgId>3</MsgId></xml>`, relay.MessageVoice, ""},
		{`<xml><FromUserName>zhangsan</FromUserName><MsgType>location</MsgType><Location_X>23.1</Location_X><Location_Y>113.3</Location_Y><Label>广州</Label><MsgId>4</MsgId></xml>`, relay.MessageLocation, "23.1,113.3 广州"},
	}
	for _, c := range cases {
		m, err := wecom.ParseMessage([]byte(c.xml))
		if err != nil {
			t.Fatal(err)
		}
		ev, err := wecom.Normalize(m)
		if err != nil || ev.MessageType != c.typ || ev.Text != c.text || ev.Source.ChatID != "zhangsan" || ev.Source.ChatType != "dm" || ev.MessageID == "" {
			t.Errorf("%s -> %+v %v", c.xml, ev, err)
		}
		if key, _ := relay.SessionKey(ev.Source, relay.DefaultSessionKeyOptions()); key != "agent:main:wecom:dm:zhangsan" {
			t.Errorf("key %q", key)
		}
	}
	ev, _ := wecom.ParseMessage([]byte(`<xml><FromUserName>zhangsan</FromUserName><MsgType>event</MsgType><Event>enter_agent</Event></xml>`))
	if _, err := wecom.Normalize(ev); !errors.Is(err, wecom.ErrIgnored) {
		t.Errorf("event: %v", err)
	}
	noID, _ := wecom.ParseMessage([]byte(`<xml><FromUserName>zhangsan</FromUserName><MsgType>text</MsgType><Content>x</Content></xml>`))
	if _, err := wecom.Normalize(noID); err == nil || errors.Is(err, wecom.ErrIgnored) {
		t.Errorf("no MsgId: %v", err)
	}
	if _, err := wecom.ParseEnvelope([]byte(`<xml><ToUserName>x</ToUserName></xml>`)); err == nil {
		t.Error("an envelope without Encrypt")
	}
}

func TestClient(t *testing.T) {
	var mu sync.Mutex
	var calls []string
	tokens := 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		defer mu.Unlock()
		calls = append(calls, r.Method+" "+r.URL.Path+"?"+r.URL.RawQuery+" "+string(b))
		switch r.URL.Path {
		case "/cgi-bin/gettoken":
			tokens++
			fmt.Fprintf(w, `{"errcode":0,"errmsg":"ok","access_token":"TOKEN%d","expires_in":7200}`, tokens)
		case "/cgi-bin/message/send":
			if r.URL.Query().Get("access_token") == "TOKEN1" && strings.Contains(string(b), "after expiry") {
				io.WriteString(w, `{"errcode":42001,"errmsg":"access_token expired"}`)
				return
			}
			if strings.Contains(string(b), `"touser":"nobody"`) {
				io.WriteString(w, `{"errcode":81013,"errmsg":"user & party & tag all invalid"}`)
				return
			}
			fmt.Fprintf(w, `{"errcode":0,"errmsg":"ok","msgid":"MSG%d"}`, len(calls))
		}
	}))
	defer srv.Close()
	c := &wecom.Client{BaseURL: srv.URL, CorpID: "ww1", CorpSecret: "corp-secret", AgentID: 1000002}
	ctx := t.Context()
	if id, err := c.SendText(ctx, "zhangsan", "你好"); err != nil || id == "" {
		t.Fatalf("send: %q %v", id, err)
	}
	if _, err := c.SendText(ctx, "zhangsan", "second, same token"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.SendText(ctx, "zhangsan", "after expiry"); err != nil {
		t.Fatal(err)
	}
	_, err := c.SendText(ctx, "nobody", "x")
	var apiErr *wecom.APIError
	if !errors.As(err, &apiErr) || apiErr.Code != 81013 || strings.Contains(err.Error(), "corp-secret") || strings.Contains(err.Error(), "TOKEN") {
		t.Errorf("error answer: %v", err)
	}
	// 2048 bytes at most per message: 700 three-byte characters are two.
	before := len(calls)
	if _, err := c.SendText(ctx, "zhangsan", strings.Repeat("长", 700)); err != nil {
		t.Fatal(err)
	}
	if len(calls)-before != 2 {
		t.Errorf("a 2100-byte text went as %d messages", len(calls)-before)
	}
	want := []string{
		"GET /cgi-bin/gettoken?corpid=ww1&corpsecret=corp-secret ",
		`POST /cgi-bin/message/send?access_token=TOKEN1 {"agentid":1000002,"msgtype":"text","text":{"content":"你好"},"touser":"zhangsan"}`,
		`POST /cgi-bin/message/send?access_token=TOKEN1 {"agentid":1000002,"msgtype":"text","text":{"content":"second, same token"},"touser":"zhangsan"}`,
		`POST /cgi-bin/message/send?access_token=TOKEN1 {"agentid":1000002,"msgtype":"text","text":{"content":"after expiry"},"touser":"zhangsan"}`,
		"GET /cgi-bin/gettoken?corpid=ww1&corpsecret=corp-secret ",
		`POST /cgi-bin/message/send?access_token=TOKEN2 {"agentid":1000002,"msgtype":"text","text":{"content":"after expiry"},"touser":"zhangsan"}`,
	}
	for i, w := range want {
		if calls[i] != w {
			t.Errorf("call %d:\n got %s\nwant %s", i, calls[i], w)
		}
	}
}

func TestDescriptor(t *testing.T) {
	b, _ := json.Marshal(wecom.Descriptor())
	for _, k := range []string{`"platform":"wecom"`, `"max_message_length":680`, `"len_unit":"chars"`, `"markdown_dialect":"plain"`, `"supported_ops":["send"]`} {
		if !strings.Contains(string(b), k) {
			t.Errorf("%s lacks %s", b, k)
		}
	}
	if 3*wecom.MaxMessageLength > wecom.MaxContentBytes {
		t.Error("the advertised length does not fit 2048 bytes of CJK text")
	}
}

func FuzzOpen(f *testing.F) {
	f.Add(vecMsgEncrypt, []byte(`<xml><FromUserName>a</FromUserName><MsgType>text</MsgType><Content>x</Content><MsgId>1</MsgId></xml>`))
	f.Add(vecVerifyEcho, []byte("1616140317555161061"))
	f.Fuzz(func(t *testing.T, enc string, plain []byte) {
		c := vecCrypt(t)
		// Arbitrary ciphertexts, correctly signed: Open must never panic,
		// and what it returns must have named the corp id.
		_, _ = c.Open(c.Signature("1", "2", enc), "1", "2", enc)
		// Arbitrary plaintexts round-trip, and parse or fail cleanly.
		sealed, sig := c.Seal(plain, "1", "2", nil)
		got, err := c.Open(sig, "1", "2", sealed)
		if err != nil || string(got) != string(plain) {
			t.Fatalf("round trip: %q %v", got, err)
		}
		if m, err := wecom.ParseMessage(got); err == nil {
			if ev, err := wecom.Normalize(m); err == nil {
				if _, err := relay.SessionKey(ev.Source, relay.DefaultSessionKeyOptions()); err != nil || ev.Source.ChatID == "" {
					t.Fatalf("unkeyable %+v", ev.Source)
				}
			}
		}
	})
}
