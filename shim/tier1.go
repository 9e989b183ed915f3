package shim

import (
	"math/bits"
	"regexp"
	"regexp/syntax"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/caduceus-dev/caduceus/internal/swar"
)

// compiled is a provision ready to evaluate.
type compiled struct {
	p       Provision
	builtin bool
	anyKW   []int // keyword ids
	allKW   []int
	noneKW  []int
	kwText  []string // keyword id -> text, for reasons
	regex   []*regexp.Regexp
	reLit   []int // per regex: id of a lowered literal every match contains (-1: none)
	hasT1   bool
	active  bool
	hasT2   bool
	hasT3   bool

	// simple: active, tier 1 only, mode any, no keyword.all or .none; such
	// a rule fires only when one of its own triggers does, so evaluate
	// visits it only when the request holds a candidate for one of them
	simple bool
	quiet  bool // simple with no match clause: applies to every request
	idx    int  // position in ruleset.rules

	noAdmit bool // Config.AdmitOnly rejects it: admitted without a call
}

// keyword is one entry of the ruleset's keyword index: the words after the
// first (for phrases) and the keyword id.
type keyword struct {
	id   int
	rest []string
}

// ruleset is a tenant's provisions compiled for evaluation: ordered by
// priority (high first) then id, with one keyword index for all of them so
// a request's words are looked up once, not once per provision.
type ruleset struct {
	rules []*compiled
	index map[string][]keyword
	words []string // keyword id -> its text

	// regex literals, found in one pass over the text: a bitset of their
	// first two bytes, then the literals that start with those two bytes
	lits     []string
	litIDs   map[string]int
	first2   [1 << 16 / 64]uint64
	byFirst2 map[uint16][]int
	first3   [1 << 16 / 64]uint64 // a hash of their first three bytes
	pairs    [1 << 16 / 64]uint64 // their byte pairs at offsets 0 and 1

	// the candidate index (see candidates): rules to visit on every
	// request, and the simple rules each trigger signal can wake
	always    []uint64 // bitset over rules
	kwOwner   []int    // keyword id -> rule index
	litRules  [][]int  // regex literal id -> simple rules needing it
	pathRules []int    // simple rules with path triggers
	toolRules []int    // simple rules with tool triggers
	quiet     int      // quiet rules: always evaluated, rarely visited
	quietFree int      // quiet rules that need no admission call
	maybeWord [1 << 16 / 64]uint64
	firstByte [256]bool // the first bytes of the indexed words, in either ASCII case

	// the rules evaluate visits even when no signal woke them (see its
	// counted), as bitsets: the rules that are not quiet (no admission
	// hook), and those or the rules the hook sees (with one)
	unquiet, unquietAdmit []uint64
}

func (rs *ruleset) literal(lit string) int {
	if lit == "" {
		return -1
	}
	if id, ok := rs.litIDs[lit]; ok {
		return id
	}
	if rs.litIDs == nil {
		rs.litIDs, rs.byFirst2 = map[string]int{}, map[uint16][]int{}
	}
	id := len(rs.lits)
	rs.lits = append(rs.lits, lit)
	rs.litIDs[lit] = id
	k := uint16(lit[0])<<8 | uint16(lit[1])
	rs.first2[k/64] |= 1 << (k % 64)
	rs.byFirst2[k] = append(rs.byFirst2[k], id)
	k3 := key3(lit[0], lit[1], lit[2]) // requiredLiteral: 3 bytes or more
	rs.first3[k3/64] |= 1 << (k3 % 64)
	k1 := uint16(lit[1])<<8 | uint16(lit[2])
	rs.pairs[k/64] |= 1 << (k % 64)
	rs.pairs[k1/64] |= 1 << (k1 % 64)
	return id
}

func key3(a, b, c byte) uint16 { return uint16(a)<<8 ^ uint16(b)<<4 ^ uint16(c) ^ uint16(c)<<12 }

// literalHits marks which regex literals occur in the folded text t.
func (rs *ruleset) literalHits(t string) []bool {
	hits := make([]bool, len(rs.lits))
	for i := 0; i+1 < len(t); i++ {
		k := uint16(t[i])<<8 | uint16(t[i+1])
		if rs.first2[k/64]&(1<<(k%64)) == 0 {
			continue
		}
		for _, id := range rs.byFirst2[k] {
			if !hits[id] && strings.HasPrefix(t[i:], rs.lits[id]) {
				hits[id] = true
			}
		}
	}
	return hits
}

func compile(tenant, builtin []Provision) *ruleset {
	rs := &ruleset{index: map[string][]keyword{}}
	seen := map[string]bool{}
	add := func(p Provision, isBuiltin bool) {
		c := &compiled{p: p, builtin: isBuiltin, active: p.Status == StatusActive || p.Status == ""}
		t := p.Triggers
		if t.Keyword != nil {
			c.anyKW = rs.keywords(t.Keyword.Any)
			c.allKW = rs.keywords(t.Keyword.All)
			c.noneKW = rs.keywords(t.Keyword.None)
		}
		for _, r := range t.Regex {
			if re, err := regexp.Compile(r.Pattern); err == nil {
				c.regex = append(c.regex, re)
				c.reLit = append(c.reLit, rs.literal(requiredLiteral(r.Pattern)))
			}
		}
		c.hasT1 = len(c.anyKW)+len(c.allKW) > 0 || len(c.regex) > 0 || len(t.Path) > 0 || len(t.Tool) > 0
		c.hasT2 = t.Semantic != nil && len(t.Semantic.Examples) > 0
		c.hasT3 = t.Micromodel != nil
		c.simple = c.active && !c.hasT2 && !c.hasT3 && t.Mode != "all" && len(c.allKW) == 0 && len(c.noneKW) == 0
		rs.rules = append(rs.rules, c)
	}
	for _, p := range tenant {
		seen[p.ID] = true
		add(p, false)
	}
	for _, p := range builtin {
		if !seen[p.ID] {
			p.SystemBuiltin = true
			add(p, true)
		}
	}
	slices.SortStableFunc(rs.rules, func(a, b *compiled) int {
		if a.p.Priority != b.p.Priority {
			return b.p.Priority - a.p.Priority
		}
		return strings.Compare(a.p.ID, b.p.ID)
	})
	rs.index1()
	return rs
}

// index1 builds the candidate index over the sorted rules.
func (rs *ruleset) index1() {
	rs.always = make([]uint64, (len(rs.rules)+63)/64)
	rs.unquiet = make([]uint64, len(rs.always))
	rs.unquietAdmit = make([]uint64, len(rs.always))
	rs.kwOwner = make([]int, len(rs.words))
	rs.litRules = make([][]int, len(rs.lits))
	for i, c := range rs.rules {
		c.idx = i
		for _, ids := range [][]int{c.anyKW, c.allKW, c.noneKW} {
			for _, id := range ids {
				rs.kwOwner[id] = i
			}
		}
		switch {
		case !c.active:
			// never applies: never visited
		case !c.simple || c.p.Match != nil:
			rs.always[i/64] |= 1 << (i % 64)
		default:
			c.quiet = true
			rs.quiet++
			for _, lit := range c.reLit {
				if lit < 0 {
					rs.always[i/64] |= 1 << (i % 64) // a regex with no literal to wait for
				} else {
					rs.litRules[lit] = append(rs.litRules[lit], i)
				}
			}
			if len(c.p.Triggers.Path) > 0 {
				rs.pathRules = append(rs.pathRules, i)
			}
			if len(c.p.Triggers.Tool) > 0 {
				rs.toolRules = append(rs.toolRules, i)
			}
		}
	}
	rs.markUnquiet()
	for w := range rs.index {
		k := wordKey(w)
		rs.maybeWord[k/64] |= 1 << (k % 64)
		rs.firstByte[w[0]] = true
		if c := w[0]; 'a' <= c && c <= 'z' {
			rs.firstByte[c-'a'+'A'] = true
		}
	}
}

// admitOnly marks the rules the admission hook need not see (only
// rejects them; nil: it sees every rule).
func (rs *ruleset) admitOnly(only func(Provision) bool) {
	if only == nil {
		return
	}
	for _, c := range rs.rules {
		c.noAdmit = !only(c.p)
		if c.quiet && c.noAdmit {
			rs.quietFree++
		}
	}
	rs.markUnquiet()
}

// markUnquiet sets the unquiet and unquietAdmit bitsets from the rules.
func (rs *ruleset) markUnquiet() {
	clear(rs.unquiet)
	clear(rs.unquietAdmit)
	for i, c := range rs.rules {
		if !c.quiet {
			rs.unquiet[i/64] |= 1 << (i % 64)
		}
		if !c.quiet || !c.noAdmit {
			rs.unquietAdmit[i/64] |= 1 << (i % 64)
		}
	}
}

// wordKey hashes a word's length and end bytes into the maybeWord filter.
func wordKey(w string) uint16 {
	return uint16(w[0])<<8 ^ uint16(w[len(w)-1]) ^ uint16(len(w))<<4
}

// candidates returns the rules evaluate visits for s, as a bitset: every
// rule that is not simple (or has a match clause), and the simple rules a
// signal of s can wake — a keyword present, a regex literal present,
// tools called, paths named. A simple rule left out cannot fire on s.
func (rs *ruleset) candidates(s *signals) []uint64 {
	visit := slices.Clone(rs.always)
	set := func(i int) { visit[i/64] |= 1 << (i % 64) }
	for _, id := range s.hitIDs {
		set(rs.kwOwner[id])
	}
	if len(rs.lits) > 0 {
		in := s.text
		if len(in) > maxRegexInput {
			in = in[:maxRegexInput]
		}
		s.folded(in)
		for id, hit := range s.lits {
			if hit {
				for _, i := range rs.litRules[id] {
					set(i)
				}
			}
		}
	}
	if len(rs.toolRules) > 0 && len(s.tools) > 0 {
		for _, i := range rs.toolRules {
			set(i)
		}
	}
	if len(rs.pathRules) > 0 && len(s.paths()) > 0 {
		for _, i := range rs.pathRules {
			set(i)
		}
	}
	return visit
}

func (rs *ruleset) keywords(ks []string) []int {
	var ids []int
	for _, k := range ks {
		toks := tokens(strings.ToLower(k))
		if len(toks) == 0 {
			continue
		}
		id := len(rs.words)
		rs.words = append(rs.words, k)
		rs.index[toks[0]] = append(rs.index[toks[0]], keyword{id: id, rest: toks[1:]})
		ids = append(ids, id)
	}
	return ids
}

// wordByte marks the ASCII bytes that belong to words.
var wordByte = func() (t [utf8.RuneSelf]bool) {
	for c := 0; c < utf8.RuneSelf; c++ {
		t[c] = c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_'
	}
	return t
}()

// tokens splits lowered text into words: runs of letters, digits and "_".
func tokens(s string) []string {
	out := make([]string, 0, len(s)/6)
	for i := 0; ; {
		a, b := nextToken(s, i)
		if a < 0 {
			return out
		}
		out = append(out, s[a:b])
		i = b
	}
}

// signals is what tier 1 reads from one request, computed once.
type signals struct {
	text   string   // last user text, bounded
	lower  string   // text lowered (tokens and the regex prefilter read it)
	hits   []bool   // keyword id -> present
	hitIDs []int    // the keyword ids present, as found
	tools  []string // tools called in the conversation
	paths  func() []string
	fold   string // folded regex input of non-ASCII text, computed on first use
	done   bool
	ascii  bool   // text is ASCII (known when a keyword scan ran)
	lits   []bool // regex literal id -> present in the folded regex input
	rs     *ruleset
}

// folded computes, once, which regex literals occur in the regex input
// in folded (lowered, with the long s folded to s, as RE2's case folding
// does). ASCII input is lowered byte by byte as it is scanned.
func (s *signals) folded(in string) {
	if s.done {
		return
	}
	s.done = true
	if s.ascii || isASCII(in) {
		s.lits = s.rs.literalHitsASCII(in)
		return
	}
	s.fold = foldString(in)
	s.lits = s.rs.literalHits(s.fold)
}

// lowerTable maps each byte to its ASCII lower case.
var lowerTable = func() (t [256]byte) {
	for i := range t {
		t[i] = lowerASCII(byte(i))
	}
	return t
}()

// literalHitsASCII is literalHits(strings.ToLower(t)) for ASCII t, without
// the lowered copy. It reads the byte pairs at even offsets only: a
// literal (3 bytes or more) at offset p shows its first pair at p when p
// is even and its second at p+1 when p is odd, so a pair in rs.pairs at i
// is where a literal may start at i or i-1, and only there are the
// literals compared.
func (rs *ruleset) literalHitsASCII(t string) []bool {
	hits := make([]bool, len(rs.lits))
	for i := 0; i+1 < len(t); i += 2 {
		if k := uint16(lowerTable[t[i]])<<8 | uint16(lowerTable[t[i+1]]); rs.pairs[k/64]&(1<<(k%64)) == 0 {
			continue
		}
		if i > 0 {
			rs.literalsAt(hits, t, i-1)
		}
		rs.literalsAt(hits, t, i)
	}
	return hits
}

// literalsAt marks the literals that ASCII t, lowered, holds at offset p.
func (rs *ruleset) literalsAt(hits []bool, t string, p int) {
	if p+2 >= len(t) {
		return
	}
	a, b, c := lowerTable[t[p]], lowerTable[t[p+1]], lowerTable[t[p+2]]
	if k3 := key3(a, b, c); rs.first3[k3/64]&(1<<(k3%64)) == 0 {
		return
	}
	at := t[p:]
	for _, id := range rs.byFirst2[uint16(a)<<8|uint16(b)] {
		if !hits[id] && hasLowerPrefix(at, rs.lits[id]) {
			hits[id] = true
		}
	}
}

// hasLowerPrefix reports whether ASCII t lowered starts with lit.
func hasLowerPrefix(t, lit string) bool {
	if len(t) < len(lit) {
		return false
	}
	for i := 0; i < len(lit); i++ {
		if lowerTable[t[i]] != lit[i] {
			return false
		}
	}
	return true
}

func isASCII(s string) bool {
	i := 0
	for ; i+32 <= len(s); i += 32 {
		if (load64(s[i:])|load64(s[i+8:])|load64(s[i+16:])|load64(s[i+24:]))&swar.Highs != 0 {
			return false
		}
	}
	for ; i < len(s); i++ {
		if s[i] >= 0x80 {
			return false
		}
	}
	return true
}

func foldString(in string) string {
	return strings.Map(func(r rune) rune {
		if r == 'ſ' {
			return 's'
		}
		return unicode.ToLower(r)
	}, in)
}

// requiredLiteral returns a lowered literal (3 bytes or more) that every
// match of pattern contains, or "" when there is none to rely on: the
// longest literal among the top-level concatenation of the pattern.
func requiredLiteral(pattern string) string {
	re, err := syntax.Parse(pattern, syntax.Perl)
	if err != nil {
		return ""
	}
	re = re.Simplify()
	for re.Op == syntax.OpCapture && len(re.Sub) == 1 {
		re = re.Sub[0]
	}
	best := ""
	consider := func(r *syntax.Regexp) {
		if r.Op != syntax.OpLiteral {
			return
		}
		if lit := foldString(string(r.Rune)); len(lit) > len(best) {
			best = lit
		}
	}
	switch re.Op {
	case syntax.OpLiteral:
		consider(re)
	case syntax.OpConcat:
		for _, sub := range re.Sub {
			for sub.Op == syntax.OpCapture && len(sub.Sub) == 1 {
				sub = sub.Sub[0]
			}
			consider(sub)
		}
	}
	if len(best) < 3 {
		return ""
	}
	return best
}

func (rs *ruleset) signals(text string, tools []string, paths func() []string) *signals {
	if len(text) > maxTriggerText {
		text = text[:maxTriggerText]
	}
	s := &signals{text: text, hits: make([]bool, len(rs.words)), tools: tools, paths: paths, rs: rs}
	if len(rs.index) == 0 {
		return s
	}
	if isASCII(text) {
		s.ascii = true // and so is any prefix of it
		rs.asciiHits(s, text)
		return s
	}
	s.lower = strings.ToLower(text)
	rs.lowerHits(s, s.lower)
	return s
}

// lowerHits marks the keywords present in lowered text.
func (rs *ruleset) lowerHits(s *signals, lower string) {
	for i := 0; ; {
		st, en := nextToken(lower, i)
		if st < 0 {
			break
		}
		i = en
		t := lower[st:en]
		if k := wordKey(t); rs.maybeWord[k/64]&(1<<(k%64)) == 0 {
			continue
		}
		if ks, ok := rs.index[t]; ok {
			s.mark(ks, lower, en, nextToken, equalWord)
		}
	}
}

// mark records the keywords of ks whose further words follow in text after
// offset at: next finds each word's bounds and equal compares it with the
// keyword's (lowered) word.
func (s *signals) mark(ks []keyword, text string, at int, next func(string, int) (int, int), equal func(word, lowered string) bool) {
keywords:
	for _, k := range ks {
		if s.hits[k.id] {
			continue
		}
		end := at
		for _, w := range k.rest {
			ws, we := next(text, end)
			if ws < 0 || !equal(text[ws:we], w) {
				continue keywords
			}
			end = we
		}
		s.hits[k.id] = true
		s.hitIDs = append(s.hitIDs, k.id)
	}
}

// equalWord compares a word of lowered text with a keyword's word.
func equalWord(word, lowered string) bool { return word == lowered }

// wordByte256 is wordByte over every byte value (ASCII text only).
var wordByte256 = func() (t [256]bool) {
	copy(t[:], wordByte[:])
	return t
}()

// asciiHits is signals' keyword scan for ASCII text: the words are found
// in text itself and lowered one by one (only those the filters let
// through), which reads the same words as tokens(ToLower(text)). The words
// are found 64 bytes at a time, from a mask of the word bytes (a word byte
// after a non-word byte starts a word, the next non-word byte ends it), so
// the loop runs once per word, and only the words whose first byte starts
// a keyword are read further.
func (rs *ruleset) asciiHits(s *signals, text string) {
	var in uint64 // 1 when the byte before the chunk is a word byte
	for off := 0; off < len(text); off += 64 {
		w := wordMask(text[off:min(off+64, len(text))])
		starts := w &^ (w<<1 | in)
		in = w >> 63
		for starts != 0 {
			b := bits.TrailingZeros64(starts)
			starts &= starts - 1
			st := off + b
			if !rs.firstByte[text[st]] {
				continue
			}
			// the mask has no bit past the text's end: a word ends in the
			// chunk unless it runs to the chunk's last byte
			en := off + 64
			if rest := ^w >> b; rest != 0 {
				en = st + bits.TrailingZeros64(rest)
			} else {
				for en < len(text) && wordByte256[text[en]] {
					en++
				}
			}
			if k := uint16(lowerTable[text[st]])<<8 ^ uint16(lowerTable[text[en-1]]) ^ uint16(en-st)<<4; rs.maybeWord[k/64]&(1<<(k%64)) != 0 {
				rs.asciiWord(s, text, st, en)
			}
		}
	}
}

// asciiWord looks up the word text[st:en] of ASCII text in the keyword
// index and marks what it finds.
func (rs *ruleset) asciiWord(s *signals, text string, st, en int) {
	var buf [64]byte
	var ks []keyword
	var ok bool
	if w := text[st:en]; len(w) <= len(buf) {
		for j := 0; j < len(w); j++ {
			buf[j] = lowerASCII(w[j])
		}
		ks, ok = rs.index[string(buf[:len(w)])]
	} else {
		ks, ok = rs.index[strings.ToLower(w)]
	}
	if ok {
		s.mark(ks, text, en, nextASCIIToken, asciiEqualLower)
	}
}

// wordMask returns the word bytes (wordByte) of ASCII c, at most 64
// bytes long, as a mask: bit i for c[i]. Eight bytes at a time, the high
// bit of each is set when the byte is a letter (lowered by |0x20), a
// digit or '_' (no byte below 0x80 carries into the next when the bounds
// are added), and the eight high bits are gathered into eight mask bits.
func wordMask(c string) uint64 {
	var m uint64
	i := 0
	for ; i+8 <= len(c); i += 8 {
		x := load64(c[i:])
		l := x | 0x20*swar.Ones
		f := (l+(0x80-'a')*swar.Ones)&^(l+(0x7f-'z')*swar.Ones) |
			(x+(0x80-'0')*swar.Ones)&^(x+(0x7f-'9')*swar.Ones) |
			(x+(0x80-'_')*swar.Ones)&^(x+(0x7f-'_')*swar.Ones)
		// byte j's high bit lands on bit 56+j
		m |= (f & swar.Highs >> 7) * 0x0102040810204080 >> 56 << i
	}
	for ; i < len(c); i++ {
		if wordByte256[c[i]] {
			m |= 1 << i
		}
	}
	return m
}

// load64 reads the first 8 bytes of s, little-endian (one load).
func load64(s string) uint64 {
	_ = s[7]
	return uint64(s[0]) | uint64(s[1])<<8 | uint64(s[2])<<16 | uint64(s[3])<<24 |
		uint64(s[4])<<32 | uint64(s[5])<<40 | uint64(s[6])<<48 | uint64(s[7])<<56
}

// nextASCIIToken is nextToken for ASCII text.
func nextASCIIToken(text string, i int) (int, int) {
	for i < len(text) && !wordByte256[text[i]] {
		i++
	}
	st := i
	for i < len(text) && wordByte256[text[i]] {
		i++
	}
	if st == i {
		return -1, -1
	}
	return st, i
}

// asciiEqualLower reports whether ASCII t lowered equals w.
func asciiEqualLower(t, w string) bool {
	if len(t) != len(w) {
		return false
	}
	for i := 0; i < len(t); i++ {
		if lowerASCII(t[i]) != w[i] {
			return false
		}
	}
	return true
}

func lowerASCII(c byte) byte {
	if 'A' <= c && c <= 'Z' {
		return c + 'a' - 'A'
	}
	return c
}

// nextToken returns the bounds of the first word of s at or after i (as
// tokens splits it), or -1, -1 when there is none.
func nextToken(s string, i int) (int, int) {
	start := -1
	for i < len(s) {
		c := s[i]
		var word bool
		size := 1
		if c < utf8.RuneSelf {
			word = wordByte[c]
		} else {
			r, n := utf8.DecodeRuneInString(s[i:])
			size = n
			word = unicode.IsLetter(r) || unicode.IsDigit(r)
		}
		if word {
			if start < 0 {
				start = i
			}
		} else if start >= 0 {
			return start, i
		}
		i += size
	}
	if start >= 0 {
		return start, len(s)
	}
	return -1, -1
}

// vetoed reports whether a keyword.none word is present.
func (c *compiled) vetoed(s *signals) bool {
	for _, id := range c.noneKW {
		if s.hits[id] {
			return true
		}
	}
	return false
}

// tier1 reports whether the deterministic triggers hit, and which one.
func (c *compiled) tier1(s *signals, words []string) (bool, string) {
	if len(c.allKW) > 0 {
		all := true
		for _, id := range c.allKW {
			if !s.hits[id] {
				all = false
				break
			}
		}
		if all && len(c.anyKW) == 0 {
			return true, "keyword:" + words[c.allKW[0]]
		}
		if all {
			for _, id := range c.anyKW {
				if s.hits[id] {
					return true, "keyword:" + words[id]
				}
			}
		}
	} else {
		for _, id := range c.anyKW {
			if s.hits[id] {
				return true, "keyword:" + words[id]
			}
		}
	}
	if len(c.regex) > 0 {
		in := s.text
		if len(in) > maxRegexInput {
			in = in[:maxRegexInput]
		}
		for i, re := range c.regex {
			if lit := c.reLit[i]; lit >= 0 {
				s.folded(in)
				if !s.lits[lit] {
					continue // the pattern needs a literal the text lacks
				}
			}
			if re.MatchString(in) {
				return true, "regex:" + re.String()
			}
		}
	}
	for _, g := range c.p.Triggers.Path {
		for _, p := range s.paths() {
			if globMatch(g, p) {
				return true, "path:" + p
			}
		}
	}
	for _, t := range c.p.Triggers.Tool {
		for _, u := range s.tools {
			if strings.EqualFold(t, u) {
				return true, "tool:" + u
			}
		}
	}
	return false, ""
}
