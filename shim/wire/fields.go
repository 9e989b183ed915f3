package wire

// HasField reports whether the top-level object of body has a member
// named key (body must be valid JSON, as every body the shim parses is).
func HasField(body []byte, key string) bool {
	parses.Add(1)
	ms, err := objectMembers(body, span{0, len(body)})
	if err != nil {
		return false
	}
	_, ok := find(ms, key)
	return ok
}

// Members returns the raw values of the named members of body's top-level
// object, in the order of keys: nil for one that is absent, the last of
// duplicates (as encoding/json). It reports false when body is not an
// object. Values are scanned, not decoded: a caller decodes only the one it
// needs.
func Members(body []byte, keys ...string) ([][]byte, bool) {
	ms, err := objectMembers(body, span{0, len(body)})
	if err != nil {
		return nil, false
	}
	out := make([][]byte, len(keys))
	for i, k := range keys {
		if s, ok := find(ms, k); ok {
			out[i] = body[s.Start:s.End:s.End]
		}
	}
	return out, true
}
