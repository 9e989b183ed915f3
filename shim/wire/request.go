package wire

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"sync/atomic"

	"github.com/caduceus-dev/caduceus/internal/swar"
)

// Message is one turn of a request, reduced to what rules read.
type Message struct {
	Role       string // "system", "developer", "user", "assistant", "tool"
	Text       string // the text parts, joined with newlines
	ToolCalls  []string
	ToolResult bool // the turn carries a tool result rather than user text
}

// Request is what the shim reads from a request body. Raw is the body
// itself; edits go through Inject so unknown fields survive.
type Request struct {
	Protocol Protocol
	Model    string
	Stream   bool
	System   string // system prompt / instructions text, if any
	Messages []Message
	Tools    []string // tool names the request declares
	Used     []string // tool names called in the conversation
	Paths    []string // file paths named in tool arguments
	Raw      []byte

	// What the gateway reads, from the same pass over the body.
	//
	// MaxOut bounds the output tokens: the first positive of
	// max_completion_tokens, max_output_tokens and max_tokens (0: none).
	MaxOut int64
	// HasMaxTokens: the body has a max_tokens member (the Messages API
	// requires one).
	HasMaxTokens bool
	// IncludeUsage: stream_options.include_usage is true.
	IncludeUsage bool
	// Effort is the reasoning effort asked for (chat completions'
	// reasoning_effort, Responses' reasoning.effort, Anthropic's
	// output_config.effort) when the HUX effort enum (seed 002: low,
	// medium, high, xhigh) has it; "" otherwise.
	Effort string

	// top are Raw's top-level members, keys exact, the last of duplicates
	// found first by find (see Body).
	top []member

	textPaths []string
	pathsDone bool
}

// parses counts the scans of a request body: every parse, and every
// reader that scans a body on its own (PeekModel, PeekEffort, HasField,
// AsksStreamUsage, BodyOf). A test reads it through Reads.
var parses atomic.Int64

// Reads is how many times a request body has been scanned in this process
// (Parse, ParseChecked and the peeking readers each count one).
func Reads() int64 { return parses.Load() }

// AllPaths returns Paths plus the path-like tokens of the last user text
// (computed on first use: only path triggers need them).
func (r *Request) AllPaths() []string {
	if !r.pathsDone {
		r.pathsDone = true
		r.textPaths = dedupe(append(append([]string(nil), r.Paths...), pathsInText(r.LastUserText())...))
	}
	return r.textPaths
}

// LastUserText returns the text of the last user turn ("" when there is none).
func (r *Request) LastUserText() string {
	for i := len(r.Messages) - 1; i >= 0; i-- {
		if m := r.Messages[i]; m.Role == "user" && !m.ToolResult {
			return m.Text
		}
	}
	return ""
}

// LastTurnIsUserText reports whether the final turn is a user message with
// text (not a tool result): the only case a direct answer may be given.
func (r *Request) LastTurnIsUserText() bool {
	if len(r.Messages) == 0 {
		return false
	}
	m := r.Messages[len(r.Messages)-1]
	return m.Role == "user" && !m.ToolResult && strings.TrimSpace(m.Text) != ""
}

// AllText returns every message's text joined, for marker scans.
func (r *Request) AllText() string {
	var b strings.Builder
	b.WriteString(r.System)
	for _, m := range r.Messages {
		b.WriteByte('\n')
		b.WriteString(m.Text)
	}
	return b.String()
}

// Parse reads body as a request of protocol p. It returns an error naming
// what is wrong when the body is not JSON, is not an object, or has a field
// of the wrong type; it never panics on any input.
func Parse(p Protocol, body []byte) (*Request, error) { return parse(p, body, false) }

// ParseChecked is Parse of a body that contract.CheckJSON has accepted
// (one JSON value, valid UTF-8, no control byte in a string, at most
// contract.MaxJSONDepth deep), with the same result: the chat completions
// fast path skips its own validation pass, and a string with no escape is
// read as it stands (valid UTF-8 decodes to itself).
func ParseChecked(p Protocol, body []byte) (*Request, error) { return parse(p, body, true) }

func parse(p Protocol, body []byte, checked bool) (*Request, error) {
	parses.Add(1)
	if b := bytes.TrimLeft(body, " \t\r\n"); len(b) == 0 || b[0] != '{' {
		if !json.Valid(body) {
			return nil, fmt.Errorf("wire: request body is not valid JSON")
		}
		return nil, fmt.Errorf("wire: request body must be a JSON object")
	}
	// The one scan of the body's top level: the chat completions fast path
	// decodes from it, the gateway's members are read from it, and every
	// later edit (Body) splices by its positions. On a body that is not
	// JSON it may fail or mislead; the decoding below then refuses it.
	top, topErr := objectMembers(body, span{0, len(body)})
	var (
		r   *Request
		err error
	)
	switch p {
	case ChatCompletions:
		r, err = parseChat(body, top, topErr == nil && (checked || validJSON(body)), checked)
	case Responses:
		r, err = parseResponses(body, checked)
	case Messages:
		r, err = parseMessages(body, checked)
	case Embeddings:
		r, err = parseEmbeddings(body)
	default:
		return nil, fmt.Errorf("wire: unknown protocol %q", p)
	}
	if err != nil {
		return nil, err
	}
	r.Protocol = p
	r.Raw = body
	if r.Model == "" {
		return nil, fmt.Errorf("wire: field model is required")
	}
	if topErr != nil {
		return nil, fmt.Errorf("wire: request body is not valid JSON")
	}
	r.top = top
	if err := r.readMembers(); err != nil {
		return nil, err
	}
	r.Paths = dedupe(r.Paths)
	r.Used = dedupe(r.Used)
	return r, nil
}

// readMembers reads, from the top-level members, what the gateway needs:
// the token bounds, include_usage and the effort. Keys match exactly, as
// the providers read them; a member of the wrong type is refused, naming
// it.
func (r *Request) readMembers() error {
	body := r.Raw
	for _, k := range [...]string{"max_completion_tokens", "max_output_tokens", "max_tokens"} {
		v, ok := find(r.top, k)
		if !ok {
			continue
		}
		r.HasMaxTokens = r.HasMaxTokens || k == "max_tokens"
		var n *int64
		if json.Unmarshal(body[v.Start:v.End], &n) != nil {
			return fmt.Errorf("wire: field %s: expected an integer", k)
		}
		if n != nil && *n > 0 && r.MaxOut == 0 {
			r.MaxOut = *n
		}
	}
	if v, ok := find(r.top, "stream_options"); ok {
		var so *struct {
			IncludeUsage bool `json:"include_usage"`
		}
		if json.Unmarshal(body[v.Start:v.End], &so) != nil {
			return fmt.Errorf("wire: field stream_options: expected an object with a boolean include_usage")
		}
		r.IncludeUsage = so != nil && so.IncludeUsage
	}
	r.Effort = effortOf(r.Protocol, body, r.top)
	return nil
}

// PeekModel returns the model field of a request body without a full parse
// ("" when absent or not a string). It lets refusals come before anything else.
func PeekModel(body []byte) string {
	parses.Add(1)
	ms, err := objectMembers(body, span{0, len(body)})
	if err != nil {
		return ""
	}
	v, ok := find(ms, "model")
	if !ok {
		return ""
	}
	s, _ := fastString(body, v) // "" when not a string
	return s
}

// PeekEffort returns the reasoning effort a request asks for, without a
// full parse: chat completions' reasoning_effort, Responses'
// reasoning.effort, Anthropic's output_config.effort. It returns "" when
// the request names none or names one the HUX effort enum (seed 002: low,
// medium, high, xhigh) does not have, such as minimal, none or max.
func PeekEffort(p Protocol, body []byte) string {
	parses.Add(1)
	ms, err := objectMembers(body, span{0, len(body)})
	if err != nil {
		return ""
	}
	return effortOf(p, body, ms)
}

// effortOf is PeekEffort of a body whose top-level members are top.
func effortOf(p Protocol, body []byte, top []member) string {
	var path []string
	switch p {
	case ChatCompletions:
		path = []string{"reasoning_effort"}
	case Responses:
		path = []string{"reasoning", "effort"}
	case Messages:
		path = []string{"output_config", "effort"}
	default:
		return ""
	}
	v, ok := find(top, path[0])
	if !ok {
		return ""
	}
	for _, key := range path[1:] {
		ms, err := objectMembers(body, v)
		if err != nil {
			return ""
		}
		if v, ok = find(ms, key); !ok {
			return ""
		}
	}
	s, _ := fastString(body, v)
	switch s {
	case "low", "medium", "high", "xhigh":
		return s
	}
	return ""
}

func typeErr(field string, err error) error {
	if _, ok := err.(*json.SyntaxError); ok {
		return fmt.Errorf("wire: request body is not valid JSON: %v", err)
	}
	if te, ok := err.(*json.UnmarshalTypeError); ok {
		f := te.Field
		if f == "" {
			f = field
		}
		return fmt.Errorf("wire: field %s: expected %s, got JSON %s", f, jsonKind(te.Type), te.Value)
	}
	return fmt.Errorf("wire: %s: %v", field, err)
}

// jsonKind names a Go type by the JSON it decodes from ("an array", "a
// string"), so no Go type name reaches a client.
func jsonKind(t reflect.Type) string {
	if t == nil {
		return "a value"
	}
	switch t.Kind() {
	case reflect.Slice, reflect.Array:
		return "an array"
	case reflect.Map, reflect.Struct:
		return "an object"
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "a boolean"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64, reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.Pointer:
		return jsonKind(t.Elem())
	}
	return "a value"
}

// fieldName names a content field in an error: name, or name[i].content
// when i >= 0. It is formatted only when there is an error to name.
type fieldName struct {
	name string
	i    int
}

func (f fieldName) String() string {
	if f.i < 0 {
		return f.name
	}
	return fmt.Sprintf("%s[%d].content", f.name, f.i)
}

// contentText reads a content value that is a string or an array of parts
// with a "text" member. It reports whether any part is a tool result.
// checked says the body passed contract.CheckJSON (see ParseChecked).
func contentText(raw json.RawMessage, f fieldName, checked bool) (text string, toolResult bool, calls []string, paths []string, err error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return "", false, nil, nil, nil
	}
	if raw[0] == '"' {
		if checked {
			if s, ok := unescapedString(raw); ok {
				return s, false, nil, nil, nil
			}
		}
		if s, ok := plainString(raw); ok {
			return s, false, nil, nil, nil
		}
		if err := json.Unmarshal(raw, &text); err != nil {
			return "", false, nil, nil, typeErr(f.String(), err)
		}
		return text, false, nil, nil, nil
	}
	if raw[0] != '[' {
		return "", false, nil, nil, fmt.Errorf("wire: field %s must be a string or an array of parts", f)
	}
	var parts []struct {
		Type  string          `json:"type"`
		Text  *string         `json:"text"`
		Name  string          `json:"name"`
		Input json.RawMessage `json:"input"`
	}
	if err := json.Unmarshal(raw, &parts); err != nil {
		return "", false, nil, nil, typeErr(f.String(), err)
	}
	var b strings.Builder
	for _, p := range parts {
		switch p.Type {
		case "tool_result", "function_call_output", "tool_call_output":
			toolResult = true
		case "tool_use", "server_tool_use":
			if p.Name != "" {
				calls = append(calls, p.Name)
			}
			paths = append(paths, pathsInArgs(p.Input)...)
		}
		if p.Text != nil && (p.Type == "" || strings.HasSuffix(p.Type, "text")) {
			if b.Len() > 0 {
				b.WriteByte('\n')
			}
			b.WriteString(*p.Text)
		}
	}
	return b.String(), toolResult, calls, paths, nil
}

// plainString returns the value of a JSON string that has no escapes and
// only printable ASCII or valid UTF-8 (the common case) without a second
// decoding pass; ok is false when the slow path is needed.
func plainString(raw []byte) (string, bool) {
	if len(raw) < 2 || raw[0] != '"' || raw[len(raw)-1] != '"' {
		return "", false
	}
	body := raw[1 : len(raw)-1]
	i := 0
	for ; i+8 <= len(body); i += 8 {
		x := binary.LittleEndian.Uint64(body[i:])
		if x&swar.Highs != 0 || swar.Special(x) {
			return "", false
		}
	}
	for _, c := range body[i:] {
		if c == '\\' || c == '"' || c < 0x20 || c >= 0x80 {
			return "", false
		}
	}
	return string(body), true
}

// unescapedString returns the value of a JSON string, from a body that
// contract.CheckJSON accepted, that has no escape: its bytes as they stand
// (no control byte, valid UTF-8, which encoding/json decodes to itself).
func unescapedString(raw []byte) (string, bool) {
	if len(raw) < 2 || raw[0] != '"' || raw[len(raw)-1] != '"' || bytes.IndexByte(raw[1:len(raw)-1], '\\') >= 0 {
		return "", false
	}
	return string(raw[1 : len(raw)-1]), true
}

// chatIn is what parseChat decodes from a chat completions body.
type chatIn struct {
	Model    string          `json:"model"`
	Stream   bool            `json:"stream"`
	Messages []chatInMessage `json:"messages"`
	Tools    []struct {
		Function struct {
			Name string `json:"name"`
		} `json:"function"`
	} `json:"tools"`
}

type chatInMessage struct {
	Role      string          `json:"role"`
	Content   json.RawMessage `json:"content"`
	ToolCalls []struct {
		Function struct {
			Name      string `json:"name"`
			Arguments string `json:"arguments"`
		} `json:"function"`
	} `json:"tool_calls"`
}

// parseChat decodes a chat completions body. fast: top are its top-level
// members and it is valid JSON, so the fast path may decode from them;
// checked: it passed contract.CheckJSON (ParseChecked).
func parseChat(body []byte, top []member, fast, checked bool) (*Request, error) {
	var in chatIn
	if !fast || !chatFromMembers(body, top, &in) {
		in = chatIn{}
		if err := json.Unmarshal(body, &in); err != nil {
			return nil, typeErr("body", err)
		}
	}
	if in.Messages == nil {
		return nil, fmt.Errorf("wire: field messages is required")
	}
	r := &Request{Model: in.Model, Stream: in.Stream}
	for i, m := range in.Messages {
		text, tr, calls, paths, err := contentText(m.Content, fieldName{"messages", i}, checked)
		if err != nil {
			return nil, err
		}
		msg := Message{Role: m.Role, Text: text, ToolResult: tr || m.Role == "tool", ToolCalls: calls}
		for _, tc := range m.ToolCalls {
			msg.ToolCalls = append(msg.ToolCalls, tc.Function.Name)
			paths = append(paths, pathsInArgs(json.RawMessage(tc.Function.Arguments))...)
		}
		r.Used = append(r.Used, msg.ToolCalls...)
		r.Paths = append(r.Paths, paths...)
		if m.Role == "system" || m.Role == "developer" {
			r.System = joinText(r.System, text)
		}
		r.Messages = append(r.Messages, msg)
	}
	for _, t := range in.Tools {
		if t.Function.Name != "" {
			r.Tools = append(r.Tools, t.Function.Name)
		}
	}
	return r, nil
}

func parseResponses(body []byte, checked bool) (*Request, error) {
	var in struct {
		Model        string          `json:"model"`
		Stream       bool            `json:"stream"`
		Instructions *string         `json:"instructions"`
		Input        json.RawMessage `json:"input"`
		Tools        []struct {
			Type string `json:"type"`
			Name string `json:"name"`
		} `json:"tools"`
	}
	if err := json.Unmarshal(body, &in); err != nil {
		return nil, typeErr("body", err)
	}
	r := &Request{Model: in.Model, Stream: in.Stream}
	if in.Instructions != nil {
		r.System = *in.Instructions
	}
	for _, t := range in.Tools {
		name := t.Name
		if name == "" {
			name = t.Type
		}
		if name != "" {
			r.Tools = append(r.Tools, name)
		}
	}
	input := bytes.TrimSpace(in.Input)
	switch {
	case len(input) == 0 || string(input) == "null":
		return nil, fmt.Errorf("wire: field input is required")
	case input[0] == '"':
		var s string
		if err := json.Unmarshal(input, &s); err != nil {
			return nil, typeErr("input", err)
		}
		r.Messages = []Message{{Role: "user", Text: s}}
		return r, nil
	case input[0] != '[':
		return nil, fmt.Errorf("wire: field input must be a string or an array of items")
	}
	var items []struct {
		Type      string          `json:"type"`
		Role      string          `json:"role"`
		Content   json.RawMessage `json:"content"`
		Name      string          `json:"name"`
		Arguments string          `json:"arguments"`
	}
	if err := json.Unmarshal(input, &items); err != nil {
		return nil, typeErr("input", err)
	}
	for i, it := range items {
		switch {
		case it.Type == "function_call" || it.Type == "custom_tool_call":
			r.Used = append(r.Used, it.Name)
			r.Paths = append(r.Paths, pathsInArgs(json.RawMessage(it.Arguments))...)
			r.Messages = append(r.Messages, Message{Role: "assistant", ToolCalls: []string{it.Name}})
		case strings.HasSuffix(it.Type, "_output"):
			r.Messages = append(r.Messages, Message{Role: "user", ToolResult: true})
		case it.Type == "" || it.Type == "message":
			text, tr, calls, paths, err := contentText(it.Content, fieldName{"input", i}, checked)
			if err != nil {
				return nil, err
			}
			r.Paths = append(r.Paths, paths...)
			if it.Role == "system" || it.Role == "developer" {
				r.System = joinText(r.System, text)
			}
			r.Messages = append(r.Messages, Message{Role: it.Role, Text: text, ToolResult: tr, ToolCalls: calls})
		default: // reasoning, web search calls, ...: not a user turn
			r.Messages = append(r.Messages, Message{Role: "assistant"})
		}
	}
	return r, nil
}

func parseMessages(body []byte, checked bool) (*Request, error) {
	var in struct {
		Model    string          `json:"model"`
		Stream   bool            `json:"stream"`
		System   json.RawMessage `json:"system"`
		Messages []struct {
			Role    string          `json:"role"`
			Content json.RawMessage `json:"content"`
		} `json:"messages"`
		Tools []struct {
			Name string `json:"name"`
			Type string `json:"type"`
		} `json:"tools"`
	}
	if err := json.Unmarshal(body, &in); err != nil {
		return nil, typeErr("body", err)
	}
	if in.Messages == nil {
		return nil, fmt.Errorf("wire: field messages is required")
	}
	r := &Request{Model: in.Model, Stream: in.Stream}
	sys, _, _, _, err := contentText(in.System, fieldName{"system", -1}, checked)
	if err != nil {
		return nil, err
	}
	r.System = sys
	for i, m := range in.Messages {
		text, tr, calls, paths, err := contentText(m.Content, fieldName{"messages", i}, checked)
		if err != nil {
			return nil, err
		}
		r.Used = append(r.Used, calls...)
		r.Paths = append(r.Paths, paths...)
		// A user turn that carries text blocks beside its tool_result
		// blocks is user text to the triggers too (Anthropic's clients
		// send both in one message).
		r.Messages = append(r.Messages, Message{Role: m.Role, Text: text, ToolResult: tr && strings.TrimSpace(text) == "", ToolCalls: calls})
	}
	for _, t := range in.Tools {
		if t.Name != "" {
			r.Tools = append(r.Tools, t.Name)
		}
	}
	return r, nil
}

func joinText(a, b string) string {
	if a == "" {
		return b
	}
	if b == "" {
		return a
	}
	return a + "\n" + b
}

// pathKeys are argument names whose string values are file paths.
var pathKeys = map[string]bool{
	"path": true, "file_path": true, "filePath": true, "filepath": true, "file": true,
	"filename": true, "notebook_path": true, "target_file": true, "paths": true, "files": true,
}

// pathsInArgs reads a tool call's arguments (a JSON object, possibly given as
// a JSON-encoded string) and returns the values of path-like keys.
func pathsInArgs(raw json.RawMessage) []string {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || raw[0] != '{' {
		return nil
	}
	var args map[string]json.RawMessage
	if json.Unmarshal(raw, &args) != nil {
		return nil
	}
	var out []string
	for k, v := range args {
		if !pathKeys[k] {
			continue
		}
		var s string
		if json.Unmarshal(v, &s) == nil && s != "" {
			out = append(out, s)
			continue
		}
		var ss []string
		if json.Unmarshal(v, &ss) == nil {
			out = append(out, ss...)
		}
	}
	return out
}

// maxPathScan bounds how much prose is scanned for paths.
const maxPathScan = 16 << 10

// pathsInText finds path-like tokens in prose: a token (split at spaces,
// quotes, brackets and commas) with a slash, or a name with a short
// extension ("main.go").
func pathsInText(s string) []string {
	if len(s) > maxPathScan {
		s = s[:maxPathScan]
	}
	var out []string
	// A path has a slash or a dot: visit only the tokens that hold one.
	// the next '/' and '.' at or after i, found with IndexByte (much
	// faster than IndexAny) and kept until passed; -1: none left
	slash, dot := -2, -2
	next := func(i int, at *int, c byte) int {
		if *at != -1 && *at < i {
			if k := strings.IndexByte(s[i:], c); k < 0 {
				*at = -1
			} else {
				*at = i + k
			}
		}
		return *at
	}
	for i := 0; i < len(s); {
		j := next(i, &slash, '/')
		if d := next(i, &dot, '.'); j < 0 || d >= 0 && d < j {
			j = d
		}
		if j < 0 {
			break
		}
		if s[j] == '.' && (j+1 == len(s) || pathBreak(s[j+1])) {
			// a sentence's full stop: the token ends at this dot, and has
			// no '/' or earlier '.' (j is the first at or after i), so once
			// the dot is trimmed it cannot look like a path
			i = j + 1
			continue
		}
		start, end := j, j
		for start > 0 && !pathBreak(s[start-1]) {
			start--
		}
		for end < len(s) && !pathBreak(s[end]) {
			end++
		}
		tok := s[start:end]
		for len(tok) > 0 && strings.IndexByte(".:;!?", tok[len(tok)-1]) >= 0 {
			tok = tok[:len(tok)-1]
		}
		if looksLikePath(tok) {
			out = append(out, tok)
			if len(out) == 64 {
				return out
			}
		}
		i = end + 1
	}
	return out
}

func pathBreak(c byte) bool {
	switch c {
	case ' ', '\t', '\n', '\r', '"', '\'', '`', '(', ')', '[', ']', '{', '}', '<', '>', ',', '|':
		return true
	}
	return false
}

func looksLikePath(t string) bool {
	if len(t) < 3 || len(t) > 512 || strings.Contains(t, "://") {
		return false
	}
	if strings.IndexByte(t, '/') >= 0 {
		return true
	}
	dot := strings.LastIndexByte(t, '.')
	if dot <= 0 || len(t)-dot-1 < 1 || len(t)-dot-1 > 8 {
		return false
	}
	ext := t[dot+1:]
	if ext[0] < 'a' || ext[0] > 'z' {
		return false
	}
	for i := 0; i < len(ext); i++ {
		c := ext[i]
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c >= 'A' && c <= 'Z') {
			return false
		}
	}
	return true
}

func dedupe(xs []string) []string {
	if len(xs) < 2 {
		return xs
	}
	seen := make(map[string]bool, len(xs))
	out := xs[:0]
	for _, x := range xs {
		if !seen[x] {
			seen[x] = true
			out = append(out, x)
		}
	}
	return out
}

// parseEmbeddings reads what the gateway needs of an embeddings request:
// its model (the input is forwarded as it came, never read as messages).
func parseEmbeddings(body []byte) (*Request, error) {
	var in struct {
		Model string          `json:"model"`
		Input json.RawMessage `json:"input"`
	}
	if err := json.Unmarshal(body, &in); err != nil {
		return nil, fmt.Errorf("wire: embeddings request: %v", err)
	}
	if len(in.Input) == 0 || string(in.Input) == "null" {
		return nil, fmt.Errorf("wire: field input is required")
	}
	return &Request{Model: in.Model}, nil
}
