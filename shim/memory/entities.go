package memory

import (
	"slices"
	"strings"

	"github.com/caduceus-dev/caduceus/internal/lazyre"
	"github.com/caduceus-dev/caduceus/shim"
	"github.com/caduceus-dev/caduceus/shim/wire"
)

// Entity kinds tracked by the deterministic memory (seed 003, H13).
const (
	KindFilePath       = "file_path"
	KindCodeSymbol     = "code_symbol"
	KindTesseraURI     = "tessera_uri"
	KindStatuteCard    = "statute_card_id"
	KindErrorSignature = "error_signature"
)

// entityKinds lists the five kinds in a fixed order.
var entityKinds = []string{KindFilePath, KindCodeSymbol, KindTesseraURI, KindStatuteCard, KindErrorSignature}

// Extraction bounds: input past maxEntityInput bytes is ignored, at most
// maxEntitiesPerKind distinct values are kept per kind, and a value is at
// most maxEntityValue bytes.
const (
	maxEntityInput     = 256 << 10
	maxEntitiesPerKind = 64
	maxEntityValue     = 300
)

// codeExts are the file extensions a file_path entity may end in.
var codeExts = map[string]bool{}

func init() {
	for _, e := range strings.Fields("go py pyi js mjs cjs ts tsx jsx rs java kt rb c h cc cpp hpp cs swift php sql md json yaml yml toml txt sh html css proto lock mod sum cfg ini xml tf vue scala ex exs lua dart zig") {
		codeExts[e] = true
	}
}

// tokenByte reports whether c can be part of a path or symbol token.
func tokenByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' ||
		c == '_' || c == '.' || c == '/' || c == '~' || c == '@' || c == '+' || c == '-' || c == ':'
}

func identStart(c byte) bool { return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c == '_' }

func identByte(c byte) bool { return identStart(c) || c >= '0' && c <= '9' }

// uriEnd reports whether c ends a tessera URI.
func uriEnd(c byte) bool {
	return c <= ' ' || c >= 0x7f || c == '"' || c == '\'' || c == '<' || c == '>' || c == '`' || c == ')' || c == ']' || c == '}' || c == '|' || c == '\\'
}

// extractEntities returns the distinct entities of text, ordered by kind
// (entityKinds order) then first appearance. It is deterministic, makes no
// call and never panics; input past maxEntityInput bytes is ignored.
//
// The rules, in one pass over tokens (runs of letters, digits and
// _./~@+-:): file_path is a token ending in a source-file extension (a
// trailing ":line" is dropped); code_symbol is an identifier, possibly
// qualified with . or ::, that is called (followed by "("), `backticked`,
// qualified with ::, dotted with an upper-case segment (pkg.Func,
// Type.Method), or the name a definition gives (definedName: `func Name`,
// `def name`, `class Name`); statute_card_id is SC-<ID> or STATUTE-<ID> (upper-case
// segments) or statute:<id>; tessera_uri is tessera:// up to white space,
// a quote or a closing bracket; error_signature comes from errorSignatures.
func extractEntities(text string) []shim.EntityRef {
	if len(text) > maxEntityInput {
		text = text[:maxEntityInput]
	}
	x := extractor{seen: map[shim.EntityRef]bool{}}
	for i := 0; i < len(text); {
		if !tokenByte(text[i]) {
			i++
			continue
		}
		j := i
		for j < len(text) && tokenByte(text[j]) {
			j++
		}
		if j-i >= 10 && strings.HasPrefix(text[i:j], "tessera://") {
			k := j
			for k < len(text) && !uriEnd(text[k]) {
				k++
			}
			x.add(KindTesseraURI, strings.TrimRight(text[i:k], ".,;:!?"))
			i = k
			continue
		}
		before, after := byte(0), byte(0)
		if i > 0 {
			before = text[i-1]
		}
		if j < len(text) {
			after = text[j]
		}
		if name := definedName(text[i:j], text[j:]); name != "" {
			x.add(KindCodeSymbol, name)
		}
		x.token(text[i:j], before, after)
		i = j
	}
	for _, s := range errorSignatures(text) {
		x.add(KindErrorSignature, s)
	}
	slices.SortStableFunc(x.out, func(a, b shim.EntityRef) int { return kindRank(a.Kind) - kindRank(b.Kind) })
	return x.out
}

type extractor struct {
	out  []shim.EntityRef
	seen map[shim.EntityRef]bool
	n    [5]int
}

func (x *extractor) add(kind, v string) {
	k := kindRank(kind)
	if v == "" || len(v) > maxEntityValue || x.n[k] >= maxEntitiesPerKind {
		return
	}
	e := shim.EntityRef{Kind: kind, Value: v}
	if !x.seen[e] {
		x.seen[e] = true
		x.n[k]++
		x.out = append(x.out, e)
	}
}

func (x *extractor) token(tok string, before, after byte) {
	for len(tok) > 0 && (tok[len(tok)-1] == '.' || tok[len(tok)-1] == ':' || tok[len(tok)-1] == '-') {
		tok = tok[:len(tok)-1]
	}
	if len(tok) < 3 {
		return
	}
	if strings.HasPrefix(tok, "SC-") || strings.HasPrefix(tok, "STATUTE-") {
		if _, id, _ := strings.Cut(tok, "-"); statuteID(id) {
			x.add(KindStatuteCard, tok)
		}
		return
	}
	if strings.HasPrefix(tok, "statute:") && len(tok) > len("statute:") {
		x.add(KindStatuteCard, tok)
		return
	}
	if p := filePath(tok); p != "" {
		x.add(KindFilePath, p)
		return
	}
	if !identStart(tok[0]) {
		return
	}
	sym, qualified, upper := symbol(tok)
	if len(sym) < 3 {
		return
	}
	switch {
	case after == '(' && len(sym) == len(tok) && !commonCall[strings.ToLower(sym)]:
	case before == '`' && after == '`' && len(sym) == len(tok):
	case qualified && (strings.Contains(sym, "::") || upper):
	default:
		return
	}
	x.add(KindCodeSymbol, sym)
}

// definedName returns the name that keyword defines when keyword is func,
// def or class and rest (the text after it) starts with white space and a
// name: Go's `func Name` and `func (r *T) Name`, Python's `def name`, and
// `class Name` (upper-case first, so the English "first class citizen"
// names nothing). Names shorter than three bytes are dropped, as elsewhere.
func definedName(keyword, rest string) string {
	if keyword != "func" && keyword != "def" && keyword != "class" {
		return ""
	}
	i := 0
	for i < len(rest) && (rest[i] == ' ' || rest[i] == '\t') {
		i++
	}
	if i == 0 {
		return ""
	}
	if keyword == "func" && i < len(rest) && rest[i] == '(' { // a method's receiver
		end := strings.IndexByte(rest[i:min(len(rest), i+100)], ')')
		if end < 0 {
			return ""
		}
		i += end + 1
		for i < len(rest) && (rest[i] == ' ' || rest[i] == '\t') {
			i++
		}
	}
	j := i
	for j < len(rest) && identByte(rest[j]) {
		j++
	}
	if j-i < 3 || !identStart(rest[i]) || keyword == "class" && !(rest[i] >= 'A' && rest[i] <= 'Z') {
		return ""
	}
	return rest[i:j]
}

// statuteID: upper-case alphanumeric segments joined by single - or .
func statuteID(id string) bool {
	if id == "" {
		return false
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		sep := c == '-' || c == '.'
		if sep && (i == 0 || id[i-1] == '-' || id[i-1] == '.') {
			return false
		}
		if !sep && !(c >= 'A' && c <= 'Z' || c >= '0' && c <= '9') {
			return false
		}
	}
	return true
}

// filePath returns tok as a path when it ends in a known extension (after
// dropping a ":line[:col]" suffix), else "".
func filePath(tok string) string {
	if strings.Contains(tok, "://") {
		return ""
	}
	for {
		i := strings.LastIndexByte(tok, ':')
		if i < 0 || !allDigits(tok[i+1:]) {
			break
		}
		tok = tok[:i]
	}
	if strings.IndexByte(tok, ':') > 1 { // only a drive letter carries a colon
		return ""
	}
	dot := strings.LastIndexByte(tok, '.')
	slash := strings.LastIndexByte(tok, '/')
	if dot <= slash+1 || !codeExts[tok[dot+1:]] {
		return ""
	}
	return tok
}

func allDigits(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// symbol returns the leading qualified identifier of tok (segments joined
// by . or ::), whether it has more than one segment, and whether a
// segment of a qualified name starts upper-case.
func symbol(tok string) (sym string, qualified, upper bool) {
	i, seg := 0, 0
	for i < len(tok) && identStart(tok[i]) {
		s := i
		for i < len(tok) && identByte(tok[i]) {
			i++
		}
		if tok[s] >= 'A' && tok[s] <= 'Z' {
			upper = true
		}
		seg++
		sym = tok[:i]
		switch {
		case strings.HasPrefix(tok[i:], "::"):
			i += 2
		case i < len(tok) && tok[i] == '.':
			i++
		default:
			return sym, seg > 1, upper && seg > 1
		}
	}
	return sym, seg > 1, upper && seg > 1
}

// commonCall are words that look like calls in prose ("see (below)" is not
// matched, but "e.g(" style typos and these are dropped).
var commonCall = map[string]bool{"and": true, "the": true, "for": true, "see": true, "with": true, "not": true, "this": true, "that": true}

func kindRank(k string) int { return slices.Index(entityKinds, k) }

var (
	normPathRE = lazyre.New(`(?:[A-Za-z]:)?(?:~|\.{1,2})?(?:/[A-Za-z0-9_@.+-]+)+/?|(?:[A-Za-z0-9_@.+-]+/)+[A-Za-z0-9_@.+-]+`)
	normHexRE  = lazyre.New(`\b0x[0-9A-Fa-f]+\b|\b[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}\b|\b[0-9a-fA-F]{12,}\b|\b[a-z]{2,5}_[0-9A-Za-z]{10,}\b`)
	normNumRE  = lazyre.New(`\d+(?:\.\d+)?`)
	normQuoted = lazyre.New(`'[^'\n]{0,200}'|"[^"\n]{0,200}"`)
	spaceRE    = lazyre.New(`\s+`)
)

// errorSignatures returns the normalized errors of text: the exception
// type plus its message, with paths replaced by <path>, ids and hex by
// <id>, quoted strings by <str> and numbers by <n>, cut at 200 bytes. An
// error is a line that reads as one (errorLine), or, inside a line, a
// `code span` that reads as one, or a typed error (proseErrors: a name
// ending in Error, Exception, ...) after a log prefix or in a sentence.
// Python "Traceback" headers and Go "goroutine" lines are skipped (the
// error line that follows is what identifies the error).
func errorSignatures(text string) []string {
	if len(text) > maxEntityInput {
		text = text[:maxEntityInput]
	}
	var out []string
	var done map[string]bool // raw lines already normalized (stack traces repeat)
	for len(text) > 0 && len(out) < maxEntitiesPerKind {
		line := text
		if i := strings.IndexByte(text, '\n'); i >= 0 {
			line, text = text[:i], text[i+1:]
		} else {
			text = ""
		}
		line = strings.TrimSpace(line)
		if done[line] {
			continue
		}
		if done == nil {
			done = map[string]bool{}
		}
		done[line] = true
		errs := []string{line}
		if !errorLine(line) {
			errs = proseErrors(line)
		}
		for _, e := range errs {
			if s := normalizeError(e); s != "" && !slices.Contains(out, s) && len(out) < maxEntitiesPerKind {
				out = append(out, s)
			}
		}
	}
	return out
}

// errorSuffixes end the type name of an error.
var errorSuffixes = []string{"Error", "Exception", "Exit", "Interrupt", "Warning"}

// proseErrors returns the errors inside a line that does not start with
// one: each `code span` that reads as an error line, and each typed error
// ("TypeError: ...", "java.io.IOException: ...") or Go panic ("... fails
// with panic: runtime error: ...") not in a code span, its message running
// to the end of the sentence (". ") or of the line, or to the closing
// parenthesis of a parenthesized panic. A bare "Error:" or "error:" inside
// a sentence is prose, not an error, and so is a negated panic ("Don't
// panic: ...").
func proseErrors(line string) []string {
	var out []string
	// Code spans first; their bytes are then blanked for the typed scan.
	if strings.IndexByte(line, ':') < 0 {
		return nil
	}
	scan := line
	if strings.IndexByte(line, '`') < 0 {
		return typedErrors(scan, out)
	}
	rest := []byte(line)
	for i := 0; i < len(line); {
		open := strings.IndexByte(line[i:], '`')
		if open < 0 {
			break
		}
		open += i
		end := strings.IndexByte(line[open+1:], '`')
		if end < 0 {
			break
		}
		end += open + 1
		if span := strings.TrimSpace(line[open+1 : end]); errorLine(span) {
			out = append(out, span)
		}
		for k := open; k <= end; k++ {
			rest[k] = '`'
		}
		i = end + 1
	}
	return typedErrors(string(rest), out)
}

// typedErrors appends the typed errors of scan (see proseErrors) to out.
func typedErrors(scan string, out []string) []string {
	for i := 0; i < len(scan); i++ {
		if scan[i] != ':' || i+1 < len(scan) && scan[i+1] != ' ' {
			continue
		}
		start := i
		for start > 0 && (identByte(scan[start-1]) || scan[start-1] == '.' || scan[start-1] == '$') {
			start--
		}
		head := scan[start:i]
		panicked := head == "panic" && goPanic(scan[:start])
		if head == "" || !identStart(head[0]) || !typedError(head) && !panicked {
			continue
		}
		msg := scan[i+1:]
		if k := strings.Index(msg, ". "); k >= 0 {
			msg = msg[:k]
		}
		if panicked && strings.HasSuffix(scan[:start], "(") {
			if k := strings.IndexByte(msg, ')'); k >= 0 {
				msg = msg[:k]
			}
		}
		msg = strings.TrimRight(msg, ". ")
		if strings.Contains(msg, "`") { // ran into a blanked code span
			msg = msg[:strings.IndexByte(msg, '`')]
		}
		out = append(out, head+":"+msg)
		i += len(msg)
	}
	return out
}

// negations are the words that make a following "panic:" prose.
var negations = []string{"don't", "dont", "do not", "not", "never", "no", "won't", "doesn't", "didn't", "shouldn't"}

// goPanic reports whether a "panic:" after before is a Go panic named in
// prose: it starts the text or follows a space or an opening parenthesis,
// and no negation comes right before it ("Don't panic: ...").
func goPanic(before string) bool {
	if before == "" {
		return true
	}
	if c := before[len(before)-1]; c != ' ' && c != '(' && c != '\t' {
		return false
	}
	prev := strings.ToLower(strings.TrimRight(before, " (\t"))
	prev = strings.ReplaceAll(prev, "\u2019", "'") // a typographic apostrophe
	for _, n := range negations {
		if strings.HasSuffix(prev, n) && (len(prev) == len(n) || !identByte(prev[len(prev)-len(n)-1])) {
			return false
		}
	}
	return true
}

// typedError reports whether head names an error type: a (possibly
// qualified) name ending in one of errorSuffixes, longer than the suffix.
func typedError(head string) bool {
	for _, suf := range errorSuffixes {
		if len(head) > len(suf) && strings.HasSuffix(head, suf) {
			return true
		}
	}
	return false
}

// errorLine reports whether line reads "<Type>: message" with Type a
// (possibly qualified) name ending in Error, Exception, Exit, Interrupt or
// Warning, or "panic:", "fatal error:", "error:", "error[E0308]:", or
// starts with "FAIL".
func errorLine(line string) bool {
	if strings.HasPrefix(line, "FAIL") {
		return len(line) == 4 || line[4] == ' ' || line[4] == '\t' || line[4] == ':'
	}
	head, _, ok := strings.Cut(line, ":")
	if !ok || head == "" || len(head) > 200 {
		return false
	}
	switch {
	case head == "panic" || head == "fatal error" || head == "error" || head == "Error":
		return true
	case strings.HasPrefix(head, "error[") && strings.HasSuffix(head, "]"):
		return true
	}
	for i := 0; i < len(head); i++ {
		if c := head[i]; !identByte(c) && c != '.' && c != '$' {
			return false
		}
	}
	for _, suf := range errorSuffixes {
		if strings.HasSuffix(head, suf) {
			return true
		}
	}
	return false
}

// normalizeError normalizes one error line (see errorSignatures).
func normalizeError(line string) string {
	typ, msg, ok := strings.Cut(line, ":")
	if !ok {
		typ, msg = line, ""
	}
	typ = strings.TrimSpace(typ)
	msg = normQuoted().ReplaceAllString(msg, "<str>")
	msg = normPathRE().ReplaceAllString(msg, "<path>")
	msg = normHexRE().ReplaceAllString(msg, "<id>")
	msg = normNumRE().ReplaceAllString(msg, "<n>")
	msg = strings.TrimSpace(spaceRE().ReplaceAllString(msg, " "))
	typ = normNumRE().ReplaceAllString(typ, "<n>")
	s := typ
	if msg != "" {
		s += ": " + msg
	}
	if len(s) > 200 {
		s = s[:200]
		for len(s) > 0 && s[len(s)-1]&0xC0 == 0x80 {
			s = s[:len(s)-1]
		}
		if len(s) > 0 && s[len(s)-1] >= 0x80 {
			s = s[:len(s)-1]
		}
	}
	return s
}

// turnText is the text a turn adds to its conversation: every message
// after the last assistant message (the new user text and tool results),
// plus the system text on a first turn. Earlier turns were seen when they
// were sent, so memory and retry attribution read only this.
func turnText(req *wire.Request) string {
	start := 0
	for i := len(req.Messages) - 1; i >= 0; i-- {
		if req.Messages[i].Role == "assistant" {
			start = i + 1
			break
		}
	}
	var b strings.Builder
	if start == 0 {
		b.WriteString(req.System)
	}
	for _, m := range req.Messages[start:] {
		b.WriteByte('\n')
		b.WriteString(m.Text)
	}
	return b.String()
}

// turnEntities extracts the entities of a turn: those of turnText plus
// the file paths named in tool arguments.
func turnEntities(req *wire.Request) []shim.EntityRef {
	es := extractEntities(turnText(req))
	for _, p := range req.Paths {
		e := shim.EntityRef{Kind: KindFilePath, Value: p}
		if p != "" && len(p) <= maxEntityValue && !slices.Contains(es, e) {
			es = append(es, e)
		}
	}
	slices.SortStableFunc(es, func(a, b shim.EntityRef) int { return kindRank(a.Kind) - kindRank(b.Kind) })
	return es
}
