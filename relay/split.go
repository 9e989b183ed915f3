package relay

import (
	"strconv"
	"strings"
	"unicode/utf8"
)

// Len measures s in unit: code points for chars, UTF-16 code units for
// utf16 (a character outside the Basic Multilingual Plane counts 2).
func Len(s string, unit LenUnit) int {
	if unit != LenUTF16 {
		return utf8.RuneCountInString(s)
	}
	n := 0
	for _, r := range s {
		n += runeUnits(r, unit)
	}
	return n
}

func runeUnits(r rune, unit LenUnit) int {
	if unit == LenUTF16 && r >= 0x10000 {
		return 2
	}
	return 1
}

func runesLen(rs []rune, unit LenUnit) int {
	if unit != LenUTF16 {
		return len(rs)
	}
	n := 0
	for _, r := range rs {
		n += runeUnits(r, unit)
	}
	return n
}

const fence = "```"

// Split cuts text into chunks of at most limit units (RELAY.md §4): each cut
// prefers the last newline past half the budget, else the last space, else a
// hard cut (never inside a character); a cut never falls inside inline code;
// a code fence open at the end of a chunk is closed there and reopened, with
// its language, at the start of the next; and when there is more than one
// chunk each gets " (i/N)", with room kept for it. A limit of 0 or less
// means 4096. Text that fits is returned as the one chunk, unchanged.
func Split(text string, limit int, unit LenUnit) []string {
	if limit <= 0 {
		limit = DefaultMaxMessageLength
	}
	if Len(text, unit) <= limit {
		return []string{text}
	}
	for digits := 1; ; digits++ {
		suffix := len(" (/)") + 2*digits
		chunks := splitBudget(text, limit-suffix, unit)
		if len(chunks) < pow10(digits) || digits >= 6 {
			n := strconv.Itoa(len(chunks))
			for i := range chunks {
				chunks[i] += " (" + strconv.Itoa(i+1) + "/" + n + ")"
			}
			return chunks
		}
	}
}

func pow10(n int) int {
	p := 1
	for range n {
		p *= 10
	}
	return p
}

// splitBudget cuts text into chunks of at most budget units (closing fences
// included), without numbering.
func splitBudget(text string, budget int, unit LenUnit) []string {
	rs := []rune(text)
	var out []string
	pos := 0
	open, lang := false, ""
	for pos < len(rs) {
		prefix := ""
		if open {
			prefix = fence + lang + "\n"
		}
		avail := budget - Len(prefix, unit)
		if runesLen(rs[pos:], unit) <= avail {
			out = append(out, prefix+string(rs[pos:]))
			break
		}
		avail -= len("\n" + fence) // room to close a fence
		end := advance(rs, pos, avail, unit)
		if end <= pos {
			end = pos + 1 // a budget too small for anything: one character per chunk
		}
		cut, next := chooseCut(rs, pos, end, open)
		chunk := rs[pos:cut]
		var b strings.Builder
		b.WriteString(prefix)
		b.WriteString(string(chunk))
		open, lang = fenceState(open, lang, chunk)
		if open {
			if len(chunk) > 0 && chunk[len(chunk)-1] != '\n' {
				b.WriteByte('\n')
			}
			b.WriteString(fence)
		}
		out = append(out, b.String())
		pos = next
	}
	return out
}

// advance returns the largest end such that rs[pos:end] fits in avail units.
func advance(rs []rune, pos, avail int, unit LenUnit) int {
	used := 0
	i := pos
	for i < len(rs) {
		u := runeUnits(rs[i], unit)
		if used+u > avail {
			break
		}
		used += u
		i++
	}
	return i
}

// chooseCut picks where the chunk rs[pos:end] ends (cut) and where the next
// one starts (next): the last newline past half the window, else the last
// space, else end; moved back before an inline code span it would split.
func chooseCut(rs []rune, pos, end int, inFence bool) (cut, next int) {
	half := pos + (end-pos)/2
	cut, next = end, end
	found := false
	for i := end - 1; i > half; i-- {
		if rs[i] == '\n' {
			cut, next, found = i, i+1, true
			break
		}
	}
	if !found {
		for i := end - 1; i > pos; i-- {
			if rs[i] == ' ' {
				cut, next = i, i+1
				break
			}
		}
	}
	if end < len(rs) && !fenceOpenAt(rs, pos, cut, inFence) {
		if start, ok := inlineCodeStart(rs, pos, cut); ok && start > pos {
			cut, next = start, start
		}
	}
	return cut, next
}

// fenceOpenAt reports whether position cut lies inside a code block, given
// whether one was open at pos.
func fenceOpenAt(rs []rune, pos, cut int, open bool) bool {
	o, _ := fenceState(open, "", rs[pos:cut])
	return o
}

// inlineCodeStart reports whether cut falls inside an inline code span of
// its line (an odd number of backticks since the line's start) and where the
// span's opening backtick is.
func inlineCodeStart(rs []rune, pos, cut int) (int, bool) {
	lineStart := pos
	for i := cut - 1; i >= pos; i-- {
		if rs[i] == '\n' {
			lineStart = i + 1
			break
		}
	}
	line := rs[lineStart:cut]
	if strings.HasPrefix(strings.TrimLeft(string(line), " \t"), fence) {
		return 0, false
	}
	count, last := 0, -1
	for i, r := range line {
		if r == '`' {
			count++
			last = lineStart + i
		}
	}
	if count%2 == 1 {
		return last, true
	}
	return 0, false
}

// fenceState walks the lines of chunk and returns whether a code fence is
// open at its end, and that fence's language.
func fenceState(open bool, lang string, chunk []rune) (bool, string) {
	s := string(chunk)
	for len(s) > 0 {
		line := s
		if i := strings.IndexByte(s, '\n'); i >= 0 {
			line, s = s[:i], s[i+1:]
		} else {
			s = ""
		}
		t := strings.TrimLeft(line, " \t")
		if !strings.HasPrefix(t, fence) {
			continue
		}
		if open {
			open, lang = false, ""
		} else {
			open, lang = true, strings.TrimSpace(strings.TrimLeft(t, "`"))
		}
	}
	return open, lang
}

// Truncate cuts text to at most limit units (a streaming draft's visible
// head), never inside a character.
func Truncate(text string, limit int, unit LenUnit) string {
	n := 0
	for i, r := range text {
		n += runeUnits(r, unit)
		if n > limit {
			return text[:i]
		}
	}
	return text
}
