package wire

import "encoding/json"

// ConversationNames returns the strings a request body offers as the name
// of its conversation, in order of precedence: on the OpenAI protocols
// metadata.conversation, metadata.session_key, then user; on the Anthropic
// protocol metadata.user_id. Absent fields and fields that are not strings
// are left out. It scans the top level of the body (no full decode).
func ConversationNames(p Protocol, body []byte) []string {
	ms, err := objectMembers(body, span{0, len(body)})
	if err != nil {
		return nil
	}
	var out []string
	str := func(s span) {
		if body[s.Start] != '"' {
			return
		}
		var v string
		if json.Unmarshal(body[s.Start:s.End], &v) == nil {
			out = append(out, v)
		}
	}
	var meta []member
	if s, ok := find(ms, "metadata"); ok && body[s.Start] == '{' {
		meta, _ = objectMembers(body, s)
	}
	keys := []string{"conversation", "session_key"}
	if p == Messages {
		keys = []string{"user_id"}
	}
	for _, k := range keys {
		if s, ok := find(meta, k); ok {
			str(s)
		}
	}
	if p != Messages {
		if s, ok := find(ms, "user"); ok {
			str(s)
		}
	}
	return out
}
