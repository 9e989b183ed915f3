package shim

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
)

// Verdict is a tier-3 classifier's answer.
type Verdict struct {
	Apply      bool    `json:"apply"`
	Confidence float64 `json:"confidence"`
}

// Classifier is tier 3: asks model question about text. Any reply that is
// not exactly {apply: bool, confidence: finite number in [0,1]} is an error,
// and an error never fires a provision.
type Classifier interface {
	Classify(ctx context.Context, model, question, text string) (Verdict, error)
}

// ErrMalformedVerdict is returned for a classifier reply of the wrong shape.
var ErrMalformedVerdict = errors.New("shim: malformed classifier verdict")

// parseVerdict reads a classifier reply strictly: one JSON object with
// exactly the members apply (a boolean) and confidence (a finite number in
// [0,1]). Anything else, including code fences, is ErrMalformedVerdict.
func parseVerdict(b []byte) (Verdict, error) {
	var m map[string]json.RawMessage
	dec := json.NewDecoder(bytes.NewReader(bytes.TrimSpace(b)))
	if err := dec.Decode(&m); err != nil || dec.More() || m == nil {
		return Verdict{}, fmt.Errorf("%w: not a JSON object", ErrMalformedVerdict)
	}
	if len(m) != 2 {
		return Verdict{}, fmt.Errorf("%w: want exactly apply and confidence", ErrMalformedVerdict)
	}
	var v Verdict
	var apply *bool
	if err := json.Unmarshal(m["apply"], &apply); err != nil || apply == nil {
		return Verdict{}, fmt.Errorf("%w: apply must be a boolean", ErrMalformedVerdict)
	}
	var conf *float64
	if err := json.Unmarshal(m["confidence"], &conf); err != nil || conf == nil {
		return Verdict{}, fmt.Errorf("%w: confidence must be a number", ErrMalformedVerdict)
	}
	if math.IsNaN(*conf) || math.IsInf(*conf, 0) || *conf < 0 || *conf > 1 {
		return Verdict{}, fmt.Errorf("%w: confidence must be in [0,1]", ErrMalformedVerdict)
	}
	v.Apply, v.Confidence = *apply, *conf
	return v, nil
}

// ChatClassifier asks an OpenAI-compatible POST {BaseURL}/v1/chat/completions
// endpoint and parses the first choice's content with parseVerdict.
type ChatClassifier struct {
	BaseURL string
	APIKey  string
	Client  *http.Client // nil: http.DefaultClient
}

// classifierInput bounds the text sent to the classifier (its tail is kept).
const classifierInput = 4 << 10

const classifierSystem = `You are a binary classifier. Answer only with a JSON object {"apply": true|false, "confidence": number between 0 and 1}. No other text.`

// Classify implements Classifier. A contributor-tier model is refused before any call.
func (c *ChatClassifier) Classify(ctx context.Context, model, question, text string) (Verdict, error) {
	if IsContributorModel(model) {
		return Verdict{}, fmt.Errorf("shim: classifier model %q is contributor-tier and refused", model)
	}
	if len(text) > classifierInput {
		text = text[len(text)-classifierInput:]
	}
	body, _ := json.Marshal(map[string]any{
		"model":           model,
		"temperature":     0,
		"response_format": map[string]string{"type": "json_object"},
		"messages": []map[string]string{
			{"role": "system", "content": classifierSystem},
			{"role": "user", "content": "Question: " + question + "\n\nMessage:\n" + text},
		},
	})
	var out struct {
		Choices []struct {
			Message struct {
				Content *string `json:"content"`
			} `json:"message"`
		} `json:"choices"`
	}
	if err := postJSON(ctx, c.Client, endpoint(c.BaseURL, "/v1/chat/completions"), c.APIKey, body, &out); err != nil {
		return Verdict{}, fmt.Errorf("shim: classifier: %w", err)
	}
	if len(out.Choices) == 0 || out.Choices[0].Message.Content == nil {
		return Verdict{}, fmt.Errorf("%w: no content", ErrMalformedVerdict)
	}
	return parseVerdict([]byte(*out.Choices[0].Message.Content))
}
