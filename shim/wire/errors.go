package wire

import (
	"net/http"
	"strconv"
	"strings"
)

// ErrorBody is the error envelope of protocol p, the shape each official SDK
// parses into its API error type: OpenAI's {"error":{message,type,param,code}}
// for chat completions and responses, Anthropic's
// {"type":"error","error":{type,message}} for messages.
//
// The message starts with the code ("budget_exceeded: ..."), on both
// protocols, so every refusal reads alike in an SDK's error (Anthropic's
// envelope has no field for the code); a message that already starts with
// it is kept.
func ErrorBody(p Protocol, status int, code, message string) []byte {
	if code != "" && !strings.HasPrefix(message, code+": ") {
		message = code + ": " + message
	}
	if p == Messages {
		return mustJSON(struct {
			Type  string `json:"type"`
			Error struct {
				Type    string `json:"type"`
				Message string `json:"message"`
			} `json:"error"`
		}{Type: "error", Error: struct {
			Type    string `json:"type"`
			Message string `json:"message"`
		}{anthropicErrorType(status), message}})
	}
	return mustJSON(struct {
		Error struct {
			Message string  `json:"message"`
			Type    string  `json:"type"`
			Param   *string `json:"param"`
			Code    string  `json:"code"`
		} `json:"error"`
	}{Error: struct {
		Message string  `json:"message"`
		Type    string  `json:"type"`
		Param   *string `json:"param"`
		Code    string  `json:"code"`
	}{message, openAIErrorType(status), nil, code}})
}

// RequestIDHeader is the header a protocol's official SDK reads its
// requestID from: Anthropic's request-id, OpenAI's x-request-id.
func RequestIDHeader(p Protocol) string {
	if p == Messages {
		return "Request-Id"
	}
	return "X-Request-Id"
}

// WriteError writes an error envelope of protocol p with the given status.
func WriteError(w http.ResponseWriter, p Protocol, status int, code, message string) {
	body := ErrorBody(p, status, code, message)
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(status)
	_, _ = w.Write(body)
}

func openAIErrorType(status int) string {
	return errorType(status, openAIErrorTypes, "server_error")
}

func anthropicErrorType(status int) string {
	return errorType(status, anthropicErrorTypes, "api_error")
}

// errorType is the envelope's type name for status: the protocol's own
// name for it, else the name both protocols give it, else serverError for a
// 5xx and invalid_request_error for anything else.
func errorType(status int, own map[int]string, serverError string) string {
	if t, ok := own[status]; ok {
		return t
	}
	if t, ok := sharedErrorTypes[status]; ok {
		return t
	}
	if status >= 500 {
		return serverError
	}
	return "invalid_request_error"
}

// sharedErrorTypes are the statuses OpenAI and Anthropic name alike.
var sharedErrorTypes = map[int]string{
	401: "authentication_error",
	403: "permission_error",
	404: "not_found_error",
	429: "rate_limit_error",
}

var openAIErrorTypes = map[int]string{
	409: "conflict_error",
}

var anthropicErrorTypes = map[int]string{
	413: "request_too_large",
	// Only for an overloaded provider: the SDKs retry it, and a refusal of
	// ours (offline, no upstream) must not look like one.
	529: "overloaded_error",
}

// StreamError is the event that ends a stream of protocol p in error, the
// way each provider ends a stream that failed after it began: Anthropic's
// `event: error` with the messages error envelope, OpenAI's
// `data: {"error": …}` on chat completions and on responses (the official
// SDKs raise their API error on a data line holding "error"). status picks
// the error type as ErrorBody does.
func StreamError(p Protocol, status int, code, message string) []byte {
	if p == Messages {
		return Event("error", ErrorBody(p, status, code, message))
	}
	return Event("", ErrorBody(p, status, code, message))
}
