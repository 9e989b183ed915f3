package wire

// HasField reports whether the top-level object of body has a member
// named key (body must be valid JSON, as every body the shim parses is).
func HasField(body []byte, key string) bool {
	ms, err := objectMembers(body, span{0, len(body)})
	if err != nil {
		return false
	}
	_, ok := find(ms, key)
	return ok
}
