package relay

import (
	"errors"
	"io"
	"net/http"
	"net/url"
)

// MaxPlatformAnswer bounds how much of a platform API's answer is read.
const MaxPlatformAnswer = 1 << 20

// CallPlatform sends req with hc (http.DefaultClient when nil) and reads at
// most MaxPlatformAnswer bytes of the answer. A transport error comes back
// without the *url.Error around it: that wrapper quotes the request URL,
// which on several platforms (Telegram's /bot<token>/, WeCom's
// access_token query) holds the credential, and errors end up in logs.
// The caller judges the status and the body; every platform has its own
// envelope.
func CallPlatform(hc *http.Client, req *http.Request) (status int, body []byte, err error) {
	if hc == nil {
		hc = http.DefaultClient
	}
	resp, err := hc.Do(req)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return 0, nil, err
	}
	defer resp.Body.Close()
	body, err = io.ReadAll(io.LimitReader(resp.Body, MaxPlatformAnswer))
	return resp.StatusCode, body, err
}
