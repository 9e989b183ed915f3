package detect

import (
	"net/netip"
	"regexp"
	"strings"

	"github.com/nyaruka/phonenumbers"

	"github.com/caduceus-dev/caduceus/guard"
)

// The candidates below are cheap patterns; each is then checked the way
// its kind is defined (a checksum, a registry, a parser), so a pattern
// alone never makes a finding.
var (
	emailRe = regexp.MustCompile(`[A-Za-z0-9][A-Za-z0-9._%+-]{0,63}@[A-Za-z0-9](?:[A-Za-z0-9-]{0,62}[A-Za-z0-9])?(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]{0,62}[A-Za-z0-9])?)*\.[A-Za-z]{2,24}`)
	// cardRe: 13 to 19 digits, optionally grouped by single spaces or dashes.
	cardRe = regexp.MustCompile(`\d(?:[ -]?\d){12,18}`)
	ibanRe = regexp.MustCompile(`[A-Z]{2}\d{2}(?: ?[A-Z0-9]){11,30}`)
	ssnRe  = regexp.MustCompile(`\d{3}-\d{2}-\d{4}`)
	ipv4Re = regexp.MustCompile(`\d{1,3}\.\d{1,3}\.\d{1,3}\.\d{1,3}`)
	ipv6Re = regexp.MustCompile(`(?i)[0-9a-f]{0,4}(?::[0-9a-f]{0,4}){2,7}`)
	// phoneRe: a number as people write one — an international prefix,
	// or digit groups separated by spaces, dots, dashes or parentheses.
	phoneRe = regexp.MustCompile(`(?:\+\d{1,3}[ .-]?)?(?:\(\d{1,4}\)[ .-]?)?\d{1,4}(?:[ .-]\d{2,8}){1,4}|\+\d{8,15}`)
)

// set is a byte class.
type set [256]bool

func class(chars string, digits, hex bool) *set {
	var c set
	for i := 0; i < len(chars); i++ {
		c[chars[i]] = true
	}
	for b := '0'; b <= '9' && digits; b++ {
		c[b] = true
	}
	for b := 'a'; b <= 'f' && hex; b++ {
		c[b], c[b-32] = true, true
	}
	return &c
}

var (
	cardChars  = class(" -", true, false)
	phoneChars = class(" -.()+", true, false)
	ipv4Chars  = class(".", true, false)
	ipv6Chars  = class(":.", true, true)
	ibanChars  = class(" ABCDEFGHIJKLMNOPQRSTUVWXYZ", true, false)
)

// matches calls f with each match of re inside the maximal runs of text
// made of c's bytes that hold at least need digits (and must, when not
// 0): the patterns run only where a value could be, not from every
// position of a long prose text.
func matches(text string, c *set, need int, must byte, re *regexp.Regexp, f func(s, e int)) {
	for i := 0; i < len(text); {
		if !c[text[i]] {
			i++
			continue
		}
		j, digits, has := i, 0, must == 0
		for j < len(text) && c[text[j]] {
			if isDigit(text[j]) {
				digits++
			}
			has = has || text[j] == must
			j++
		}
		if digits >= need && has {
			for _, m := range re.FindAllStringIndex(text[i:j], -1) {
				f(i+m[0], i+m[1])
			}
		}
		i = j
	}
}

// pii appends the personal data of the kinds in want.
func pii(text string, want guard.Set, region string, fs []guard.Finding) []guard.Finding {
	if want.Has(guard.Email) && strings.IndexByte(text, '@') >= 0 {
		fs = emails(text, fs)
	}
	if !hasDigit(text) {
		return fs
	}
	if want.Has(guard.Card) {
		fs = cards(text, fs)
	}
	if want.Has(guard.IBAN) {
		fs = ibans(text, fs)
	}
	if want.Has(guard.SSN) && strings.IndexByte(text, '-') >= 0 {
		fs = ssns(text, fs)
	}
	if want.Has(guard.IP) {
		fs = ips(text, fs)
	}
	if want.Has(guard.Phone) {
		fs = phones(text, region, fs)
	}
	return fs
}

func hasDigit(s string) bool {
	return strings.ContainsAny(s, "0123456789")
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

func isAlnum(c byte) bool {
	return isDigit(c) || (c|0x20 >= 'a' && c|0x20 <= 'z')
}

// bounded reports whether text[s:e] stands alone: no letter or digit (nor
// extra the caller names) right before or after it.
func bounded(text string, s, e int, extra string) bool {
	if s > 0 && (isAlnum(text[s-1]) || strings.IndexByte(extra, text[s-1]) >= 0) {
		return false
	}
	if e < len(text) && (isAlnum(text[e]) || strings.IndexByte(extra, text[e]) >= 0) {
		return false
	}
	return true
}

// emails: an address with a dotted domain and an alphabetic top-level
// domain. git@host:path (an SSH remote) is not one.
func emails(text string, fs []guard.Finding) []guard.Finding {
	for _, m := range emailCandidates(text) {
		s, e := m[0], m[1]
		if s > 0 && (isAlnum(text[s-1]) || strings.IndexByte("._%+-", text[s-1]) >= 0) {
			continue
		}
		if e < len(text) && text[e] == ':' && e+1 < len(text) && text[e+1] != ' ' && text[e+1] != '\n' {
			continue // an SSH remote, git@github.com:org/repo
		}
		fs = append(fs, guard.Finding{Kind: guard.Email, Rule: "email", Start: s, End: e})
	}
	return fs
}

// emailCandidates are the matches of emailRe around each '@': from the
// local part's first byte to the domain's last.
func emailCandidates(text string) [][2]int {
	var out [][2]int
	for at := strings.IndexByte(text, '@'); at >= 0; {
		s := at
		for s > 0 && at-s < 64 && (isAlnum(text[s-1]) || strings.IndexByte("._%+-", text[s-1]) >= 0) {
			s--
		}
		e := at + 1
		for e < len(text) && e-at < 255 && (isAlnum(text[e]) || text[e] == '.' || text[e] == '-') {
			e++
		}
		if m := emailRe.FindStringIndex(text[s:e]); m != nil {
			out = append(out, [2]int{s + m[0], s + m[1]})
		}
		next := strings.IndexByte(text[at+1:], '@')
		if next < 0 {
			break
		}
		at += 1 + next
	}
	return out
}

// testCards are the issuers' published test numbers (Stripe, Adyen,
// Braintree and the card schemes' own): they are in code and docs, they
// belong to no one, and they are not reported.
var testCards = map[string]bool{
	"4242424242424242": true, "4000056655665556": true, "4111111111111111": true, "4012888888881881": true,
	"4222222222222": true, "5555555555554444": true, "5200828282828210": true, "5105105105105100": true,
	"2223003122003222": true, "378282246310005": true, "371449635398431": true, "378734493671000": true,
	"6011111111111117": true, "6011000990139424": true, "3056930009020004": true, "36227206271667": true,
	"30569309025904": true, "38520000023237": true, "3566002020360505": true, "3530111333300000": true,
	"6200000000000005": true, "4000000000000002": true, "4000000000009995": true, "4000000000000077": true,
	"4000002500003155": true, "4000000000003220": true, "5454545454545454": true, "4444333322221111": true,
	"4988438843884305": true, "4166676667666746": true, "4646464646464644": true, "4000000000000010": true,
	"4000000000000119": true, "4000000000000127": true, "4000000000000069": true, "4000000000000101": true,
}

// cards: 13 to 19 digits (one kind of separator at most) of a known
// issuer's range whose Luhn check holds, not a published test number.
func cards(text string, fs []guard.Finding) []guard.Finding {
	matches(text, cardChars, 13, 0, cardRe, func(s, e int) {
		if !bounded(text, s, e, ".-_/:") {
			return
		}
		raw := text[s:e]
		if strings.Contains(raw, " ") && strings.Contains(raw, "-") {
			return
		}
		digits := strings.NewReplacer(" ", "", "-", "").Replace(raw)
		if !issuer(digits) || !luhn(digits) || testCards[digits] {
			return
		}
		fs = append(fs, guard.Finding{Kind: guard.Card, Rule: "card-luhn", Start: s, End: e})
	})
	return fs
}

// issuer reports whether a card number's length and prefix are of a
// scheme: Visa, Mastercard, American Express, Discover, JCB, Diners,
// UnionPay, Maestro.
func issuer(d string) bool {
	n := len(d)
	p2 := atoi(d[:2])
	p3 := atoi(d[:3])
	p4 := atoi(d[:4])
	p6 := atoi(d[:6])
	switch {
	case d[0] == '4':
		return n == 13 || n == 16 || n == 19
	case p2 >= 51 && p2 <= 55, p4 >= 2221 && p4 <= 2720:
		return n == 16
	case p2 == 34 || p2 == 37:
		return n == 15
	case p4 == 6011, p2 == 65, p3 >= 644 && p3 <= 649, p6 >= 622126 && p6 <= 622925:
		return n >= 16 && n <= 19
	case p4 >= 3528 && p4 <= 3589:
		return n >= 16 && n <= 19
	case p2 == 36 || p2 == 38 || p2 == 39 || (p3 >= 300 && p3 <= 305) || p2 == 30:
		return n >= 14 && n <= 19
	case p2 == 62:
		return n >= 16 && n <= 19
	case p2 == 50 || (p2 >= 56 && p2 <= 69):
		return n >= 12 && n <= 19
	}
	return false
}

func atoi(s string) int {
	n := 0
	for i := 0; i < len(s); i++ {
		n = n*10 + int(s[i]-'0')
	}
	return n
}

// luhn reports whether the digits pass the Luhn check.
func luhn(d string) bool {
	sum, double := 0, false
	for i := len(d) - 1; i >= 0; i-- {
		v := int(d[i] - '0')
		if double {
			if v *= 2; v > 9 {
				v -= 9
			}
		}
		sum += v
		double = !double
	}
	return sum%10 == 0
}

// ibanLengths is each IBAN country's length (the SWIFT registry).
var ibanLengths = map[string]int{
	"AD": 24, "AE": 23, "AL": 28, "AT": 20, "AZ": 28, "BA": 20, "BE": 16, "BG": 22, "BH": 22, "BR": 29,
	"BY": 28, "CH": 21, "CR": 22, "CY": 28, "CZ": 24, "DE": 22, "DK": 18, "DO": 28, "EE": 20, "EG": 29,
	"ES": 24, "FI": 18, "FO": 18, "FR": 27, "GB": 22, "GE": 22, "GI": 23, "GL": 18, "GR": 27, "GT": 28,
	"HR": 21, "HU": 28, "IE": 22, "IL": 23, "IQ": 23, "IS": 26, "IT": 27, "JO": 30, "KW": 30, "KZ": 20,
	"LB": 28, "LC": 32, "LI": 21, "LT": 20, "LU": 20, "LV": 21, "MC": 27, "MD": 24, "ME": 22, "MK": 19,
	"MR": 27, "MT": 31, "MU": 30, "NL": 18, "NO": 15, "PK": 24, "PL": 28, "PS": 29, "PT": 25, "QA": 29,
	"RO": 24, "RS": 22, "SA": 24, "SC": 31, "SE": 24, "SI": 19, "SK": 24, "SM": 27, "ST": 25, "SV": 28,
	"TL": 23, "TN": 24, "TR": 26, "UA": 29, "VA": 22, "VG": 24, "XK": 20,
}

// ibans: a country's IBAN length and its mod-97 checksum (ISO 13616).
func ibans(text string, fs []guard.Finding) []guard.Finding {
	matches(text, ibanChars, 8, 0, ibanRe, func(s, e int) {
		if s > 0 && isAlnum(text[s-1]) {
			return
		}
		raw := text[s:e]
		compact := strings.ReplaceAll(raw, " ", "")
		want, ok := ibanLengths[compact[:2]]
		if !ok || len(compact) < want {
			return
		}
		// The pattern may run on into the next word: keep the country's length.
		compact = compact[:want]
		end := s
		for n := 0; n < want; end++ {
			if text[end] != ' ' {
				n++
			}
		}
		if end < len(text) && isAlnum(text[end]) {
			return
		}
		if !mod97(compact) {
			return
		}
		fs = append(fs, guard.Finding{Kind: guard.IBAN, Rule: "iban-mod97", Start: s, End: end})
	})
	return fs
}

func mod97(iban string) bool {
	r := iban[4:] + iban[:4]
	rem := 0
	for i := 0; i < len(r); i++ {
		c := r[i]
		switch {
		case isDigit(c):
			rem = (rem*10 + int(c-'0')) % 97
		case c >= 'A' && c <= 'Z':
			v := int(c-'A') + 10
			rem = (rem*100 + v) % 97
		default:
			return false
		}
	}
	return rem == 1
}

// ssns: AAA-GG-SSSS with an area the SSA issues (not 000, 666 or 900-999),
// a group and a serial not all zeros, and not the numbers the SSA lists as
// never valid (078-05-1120, 219-09-9999, 123-45-6789).
func ssns(text string, fs []guard.Finding) []guard.Finding {
	for _, m := range ssnRe.FindAllStringIndex(text, -1) {
		s, e := m[0], m[1]
		if !bounded(text, s, e, "-.") {
			continue
		}
		v := text[s:e]
		area, group, serial := atoi(v[:3]), atoi(v[4:6]), atoi(v[7:])
		if area == 0 || area == 666 || area >= 900 || group == 0 || serial == 0 {
			continue
		}
		switch v {
		case "078-05-1120", "219-09-9999", "123-45-6789":
			continue
		}
		fs = append(fs, guard.Finding{Kind: guard.SSN, Rule: "us-ssn", Start: s, End: e})
	}
	return fs
}

// ips: public addresses (v4 and v6): loopback, private, link-local,
// multicast, unspecified and documentation addresses identify no one, and
// a dotted quad after a "v" or inside a longer dotted number is a version.
func ips(text string, fs []guard.Finding) []guard.Finding {
	if strings.IndexByte(text, '.') >= 0 {
		matches(text, ipv4Chars, 4, '.', ipv4Re, func(s, e int) {
			if !bounded(text, s, e, "") || (s > 0 && (text[s-1] == '.' || text[s-1] == '-')) ||
				(e+1 < len(text) && text[e] == '.' && isDigit(text[e+1])) {
				return
			}
			if s > 0 && (text[s-1]|0x20) == 'v' {
				return
			}
			a, err := netip.ParseAddr(text[s:e])
			if err != nil || !public(a) {
				return
			}
			fs = append(fs, guard.Finding{Kind: guard.IP, Rule: "ipv4", Start: s, End: e})
		})
	}
	if strings.Count(text, ":") >= 2 {
		matches(text, ipv6Chars, 0, ':', ipv6Re, func(s, e int) {
			v := text[s:e]
			if !strings.Contains(v, "::") && strings.Count(v, ":") != 7 {
				return
			}
			if s > 0 && (isAlnum(text[s-1]) || text[s-1] == ':') || e < len(text) && (isAlnum(text[e]) || text[e] == ':') {
				return
			}
			a, err := netip.ParseAddr(v)
			if err != nil || !a.Is6() || !public(a) {
				return
			}
			fs = append(fs, guard.Finding{Kind: guard.IP, Rule: "ipv6", Start: s, End: e})
		})
	}
	return fs
}

var docNets = []netip.Prefix{
	netip.MustParsePrefix("192.0.2.0/24"), netip.MustParsePrefix("198.51.100.0/24"),
	netip.MustParsePrefix("203.0.113.0/24"), netip.MustParsePrefix("2001:db8::/32"),
	netip.MustParsePrefix("100.64.0.0/10"), netip.MustParsePrefix("0.0.0.0/8"),
	netip.MustParsePrefix("240.0.0.0/4"),
}

func public(a netip.Addr) bool {
	if !a.IsGlobalUnicast() || a.IsPrivate() {
		return false
	}
	for _, p := range docNets {
		if p.Contains(a) {
			return false
		}
	}
	return true
}

// phones: a number written as people write one (a + prefix, or digit
// groups with separators: a bare run of digits is an id or a timestamp),
// 7 to 15 digits, that libphonenumber parses and holds valid — with a
// country code, or in the Detector's region.
func phones(text string, region string, fs []guard.Finding) []guard.Finding {
	matches(text, phoneChars, 7, 0, phoneRe, func(s, e int) {
		if !bounded(text, s, e, ".-_/:") || (s > 0 && text[s-1] == '+') {
			return
		}
		raw := text[s:e]
		n := 0
		for i := 0; i < len(raw); i++ {
			if isDigit(raw[i]) {
				n++
			}
		}
		if n < 7 || n > 15 {
			return
		}
		if raw[0] != '+' && !strings.ContainsAny(raw, " .-()") {
			return
		}
		if looksLikeDate(raw) {
			return
		}
		num, err := phonenumbers.Parse(raw, region)
		if err != nil || !phonenumbers.IsValidNumber(num) {
			return
		}
		fs = append(fs, guard.Finding{Kind: guard.Phone, Rule: "phone", Start: s, End: e})
	})
	return fs
}

// dateRe is a date or a time, which digit groups often are.
var dateRe = regexp.MustCompile(`^(?:\d{4}[-./]\d{1,2}[-./]\d{1,2}|\d{1,2}[-./]\d{1,2}[-./]\d{2,4})`)

func looksLikeDate(s string) bool { return dateRe.MatchString(s) }
