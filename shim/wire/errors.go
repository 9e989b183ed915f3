package wire

import (
	"net/http"
	"strconv"
)

// ErrorBody is the error envelope of protocol p, the shape each official SDK
// parses into its API error type: OpenAI's {"error":{message,type,param,code}}
// for chat completions and responses, Anthropic's
// {"type":"error","error":{type,message}} for messages.
func ErrorBody(p Protocol, status int, code, message string) []byte {
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
	switch {
	case status == 401:
		return "authentication_error"
	case status == 403:
		return "permission_error"
	case status == 404:
		return "not_found_error"
	case status == 409:
		return "conflict_error"
	case status == 429:
		return "rate_limit_error"
	case status >= 500:
		return "server_error"
	default:
		return "invalid_request_error"
	}
}

func anthropicErrorType(status int) string {
	switch {
	case status == 401:
		return "authentication_error"
	case status == 403:
		return "permission_error"
	case status == 404:
		return "not_found_error"
	case status == 413:
		return "request_too_large"
	case status == 429:
		return "rate_limit_error"
	case status == 529:
		// Only for an overloaded provider: the SDKs retry it, and a
		// refusal of ours (offline, no upstream) must not look like one.
		return "overloaded_error"
	case status >= 500:
		return "api_error"
	default:
		return "invalid_request_error"
	}
}
