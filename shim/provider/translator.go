package provider

import (
	"github.com/caduceus-dev/caduceus/shim/translate"
	"github.com/caduceus-dev/caduceus/shim/wire"
)

// translator carries a chat completions client to a messages upstream and
// a messages client to a chat completions upstream (shim/translate).
type translator struct{ client, up wire.Protocol }

func (t translator) Upstream() wire.Protocol { return t.up }

func (t translator) Request(body []byte, model string, maxTokens int64) ([]byte, error) {
	return translate.Request(t.client, body, translate.Options{Model: model, MaxTokens: maxTokens})
}

func (t translator) Answer(body []byte, created int64) ([]byte, error) {
	return translate.Answer(t.client, body, created)
}

func (t translator) ErrorAnswer(status int, body []byte) []byte {
	return translate.ErrorAnswer(t.client, status, body)
}

func (t translator) Stream(includeUsage bool, created int64) Stream {
	return translate.NewStream(t.client, includeUsage, created)
}
