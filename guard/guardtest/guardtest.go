// Package guardtest holds the values the guardrails' tests plant in
// requests, answers and chat messages, and look for in everything that
// must never hold them (stored records, logs, spans, metrics). Each is
// made of parts so that the repository itself holds no scannable secret;
// none is real.
package guardtest

import (
	"strings"

	"github.com/caduceus-dev/caduceus/guard"
)

// Planted is one planted value and the kind a detector must find it as.
type Planted struct {
	Kind  guard.Kind
	Value string
}

// Values are one of each: an AWS access key id, a GitHub token, an RSA
// private key block, an e-mail address, a phone number and a card number
// (the six), plus an IBAN, a US SSN, a public IP address and a
// connection string's password.
var Values = []Planted{
	{guard.Secret, "AKIA" + "QYLPMN5HHHFPZAM2"},
	{guard.Secret, "ghp_" + "8kVq2RZtX7mN4pLs9BwY3cJd6HfGa1Ue0TiO"},
	{guard.PrivateKey, PrivateKey},
	{guard.Email, "dana.whitfield" + "@" + "northwind-traders.com"},
	{guard.Phone, "+1 415 555 " + "2671"},
	{guard.Card, "4539 1488 " + "0343 6467"},
	{guard.IBAN, "GB82 WEST " + "1234 5698 7654 32"},
	{guard.SSN, "536-90-" + "4398"},
	{guard.IP, "81.2.69." + "160"},
}

// Six are the six: AWS key, GitHub token, private key, e-mail,
// phone, card.
var Six = Values[:6:6]

// PrivateKey is a private key block (random bytes, not a key).
var PrivateKey = "-----BEGIN RSA " + "PRIVATE KEY-----\n" + strings.Join([]string{
	"RWp8QRRNVgUSewIdSM4e9E/avqYJ5p8RIkXL5bwnNv7ZwrdtE5xoJLMO7AgsUkBb",
	"xrn2URhpFgXAVFHIY7Lg776HqYneobuez7OkQZepD37oX+k1WSegyQQ/f7afbEs1",
	"amLVYSSVdI0Wj2IP4YOc5wef24uooYXFSVFNKy4Cn0cMZvHeGgCf6pO2XJ5HdHAz",
	"VEX4PqWghPSpOX4HJv0FmPhD2HoYLJw2yBDkFxCxIfpky5opFaqyqcG1ctvZ5mOm",
	"1UdhxGbiYCm1huIHElKXpNX4sWo7Ul1w4pM30PTwZOyFibUArmmXCN7Zo9vqd6bO",
	"lqoOO+iTOuU5DwwVn8lekadI0FDxc82G1rFhlw23xGf+qHa+5mCQC2I+1WEPFVz0",
	"skQU1o0lY1M4AmhTviKrEZedxr5om5TMGdioiaoioMDMPvwVuQL5IadPR6TdzquN",
	"oPgln5C9V2aTxuxDYTkENR8YiQvXfQydaY1WVHDpoMWAQ0VF3gPPauVcIHuISDy8",
	"GMjtK6ibdIfE3dnBd/QbFOaTgeNrWTHwhVbe9+7tJGkewf3ZhX6iJ7G9aTBkLd5B",
	"n6UFWgka1jyX576lf4a1cVgiXQtXuEuS8jDgKItNCkntec/8o4T2iMHImyxWlJ9J",
	"bBks1ynHG9evZGC8/ObqR0jVGi3V7dlqXsDDJPCfcrJxYZ6C2MO0uvxhJH4YRx5E",
	"8BdMRBLAJuMF3oguot5I8QTuCRWwugBvPcJymGkv7vnu94CAnUdbfqSsDk0w5dNr",
	"dfx+iNUcp5kr5HfJ2ldZsvNfMVdlsTDt",
}, "\n") + "\n-----END RSA " + "PRIVATE KEY-----"

// Prompt is a prompt holding every value of vs, one a line.
func Prompt(vs []Planted) string {
	var b strings.Builder
	b.WriteString("Here is what I found in the .env file and the customer record:\n")
	for _, v := range vs {
		b.WriteString(string(v.Kind) + ": " + v.Value + "\n")
	}
	b.WriteString("Please summarise it.")
	return b.String()
}

// Leaks lists the planted values (or, for the key block, its body's first
// line: the markers alone are not secret) that b holds.
func Leaks(b []byte, vs []Planted) []string {
	var out []string
	for _, v := range vs {
		needle := v.Value
		if v.Kind == guard.PrivateKey {
			needle = strings.Split(v.Value, "\n")[1]
		}
		if strings.Contains(string(b), needle) {
			out = append(out, string(v.Kind))
		}
	}
	return out
}
