package shim

import (
	"fmt"
	"path"
	"strings"
)

// checkGlob reports whether pattern is a well-formed glob: path.Match
// segments separated by "/", where a whole segment "**" matches any number
// of segments (at most three of them, which bounds matching time).
func checkGlob(pattern string) error {
	if pattern == "" {
		return fmt.Errorf("empty glob")
	}
	stars := 0
	for _, seg := range strings.Split(pattern, "/") {
		if seg == "**" {
			if stars++; stars > 3 {
				return fmt.Errorf("bad glob %q: at most three ** segments", pattern)
			}
			continue
		}
		if _, err := path.Match(seg, ""); err != nil {
			return fmt.Errorf("bad glob %q: %v", pattern, err)
		}
	}
	return nil
}

// globMatch matches name against pattern (see checkGlob). A pattern without
// a slash also matches the last element of name, as in .gitignore.
func globMatch(pattern, name string) bool {
	name = strings.TrimPrefix(name, "./")
	if !strings.Contains(pattern, "/") {
		if i := strings.LastIndexByte(name, '/'); i >= 0 {
			if ok, _ := path.Match(pattern, name[i+1:]); ok {
				return true
			}
		}
	}
	return matchSegs(strings.Split(pattern, "/"), strings.Split(name, "/"))
}

func matchSegs(p, n []string) bool {
	for len(p) > 0 {
		if p[0] == "**" {
			if len(p) == 1 {
				return true
			}
			for i := 0; i <= len(n); i++ {
				if matchSegs(p[1:], n[i:]) {
					return true
				}
			}
			return false
		}
		if len(n) == 0 {
			return false
		}
		if ok, _ := path.Match(p[0], n[0]); !ok {
			return false
		}
		p, n = p[1:], n[1:]
	}
	return len(n) == 0
}
