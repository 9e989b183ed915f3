package contract

// Hand-written matchers for the patterns every audit record is checked
// against (its timestamp, action, tenant slot, subject, conversation id and
// image digest): each is its regexp in patterns.go, written out, at a
// fraction of the regexp engine's cost. FuzzMatchersAgreeWithPatterns
// proves each equal to its regexp.

func digits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

func lowerHex(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// matchTimestamp is timestampRE:
// ^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}(\.[0-9]{1,6})?Z$
func matchTimestamp(s string) bool {
	const layout = "0000-00-00T00:00:00"
	if len(s) < len(layout)+1 || s[len(s)-1] != 'Z' {
		return false
	}
	for i := 0; i < len(layout); i++ {
		if layout[i] == '0' {
			if s[i] < '0' || s[i] > '9' {
				return false
			}
		} else if s[i] != layout[i] {
			return false
		}
	}
	frac := s[len(layout) : len(s)-1]
	if frac == "" {
		return true
	}
	return frac[0] == '.' && len(frac) >= 2 && len(frac) <= 7 && digits(frac[1:])
}

// matchAction is actionRE: ^[a-z_]+\.[a-z_]+$
func matchAction(s string) bool {
	dot := -1
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '.':
			if dot >= 0 {
				return false
			}
			dot = i
		case c != '_' && (c < 'a' || c > 'z'):
			return false
		}
	}
	return dot > 0 && dot < len(s)-1
}

// matchTenantSlot is tenantSlotRE: ^slot-[0-9]{1,3}$
func matchTenantSlot(s string) bool {
	return len(s) >= 6 && len(s) <= 8 && s[:5] == "slot-" && digits(s[5:])
}

// matchUserRef is userRefRE: ^usr_[0-9a-f]{16,64}$
func matchUserRef(s string) bool {
	return len(s) >= 4+16 && len(s) <= 4+64 && s[:4] == "usr_" && lowerHex(s[4:])
}

// matchSHA256 is sha256RE: ^sha256:[0-9a-f]{64}$
func matchSHA256(s string) bool {
	return len(s) == 7+64 && s[:7] == "sha256:" && lowerHex(s[7:])
}

// matchID is idRE: ^[a-z]{2,6}_[A-Za-z0-9._-]{4,80}$. The prefix has no
// '_', so the first '_' is where it ends.
func matchID(s string) bool {
	i := 0
	for i < len(s) && s[i] >= 'a' && s[i] <= 'z' {
		i++
	}
	if i < 2 || i > 6 || i == len(s) || s[i] != '_' {
		return false
	}
	rest := s[i+1:]
	if len(rest) < 4 || len(rest) > 80 {
		return false
	}
	for j := 0; j < len(rest); j++ {
		c := rest[j]
		if (c < 'a' || c > 'z') && (c < 'A' || c > 'Z') && (c < '0' || c > '9') && c != '.' && c != '_' && c != '-' {
			return false
		}
	}
	return true
}
