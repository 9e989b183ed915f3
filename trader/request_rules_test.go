package trader_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/caduceus-dev/caduceus/trader"
)

// issuesOn returns the codes of the issues ParseRequest names field with.
func issuesOn(issues []trader.Issue, field string) []string {
	var codes []string
	for _, is := range issues {
		if is.Field == field {
			codes = append(codes, is.Code)
		}
	}
	return codes
}

// TestConcernIDIsAtMost129Characters: a concern_id of 129 characters (a
// 64-character account, a colon, a 64-character market) passes the format
// check; one of 130 is invalid_field naming concern_id.
func TestConcernIDIsAtMost129Characters(t *testing.T) {
	at := strings.Repeat("a", 64) + ":" + strings.Repeat("m", 64)
	_, issues := trader.ParseRequest(body(map[string]any{"concern_id": at}))
	if codes := issuesOn(issues, "concern_id"); len(codes) != 0 {
		t.Errorf("a concern_id of %d characters: %v", len(at), codes)
	}
	_, issues = trader.ParseRequest(body(map[string]any{"concern_id": at + "m"}))
	if codes := issuesOn(issues, "concern_id"); !slices.Equal(codes, []string{trader.CodeInvalidField}) {
		t.Errorf("a concern_id of %d characters: %v, want invalid_field", len(at)+1, codes)
	}
}

// TestReasonIsAtMostMaxReasonCharacters: the reason is counted in
// characters, not bytes: MaxReasonChars of them (here two bytes each) pass,
// one more is invalid_field naming reason.
func TestReasonIsAtMostMaxReasonCharacters(t *testing.T) {
	at := strings.Repeat("é", trader.MaxReasonChars)
	_, issues := trader.ParseRequest(body(map[string]any{"reason": at}))
	if codes := issuesOn(issues, "reason"); len(codes) != 0 {
		t.Errorf("a reason of %d characters: %v", trader.MaxReasonChars, codes)
	}
	_, issues = trader.ParseRequest(body(map[string]any{"reason": at + "é"}))
	if codes := issuesOn(issues, "reason"); !slices.Equal(codes, []string{trader.CodeInvalidField}) {
		t.Errorf("a reason of %d characters: %v, want invalid_field", trader.MaxReasonChars+1, codes)
	}
}

// TestConfidenceIsANumberWhateverItsFirstDigit: any JSON number is read as
// a number: 0 and 1 are in range, and a number out of [0, 1] is
// confidence_out_of_range whatever digit it starts with (a 9 as well as a 2
// or a minus sign), never wrong_type; a string is wrong_type.
func TestConfidenceIsANumberWhateverItsFirstDigit(t *testing.T) {
	for lit, want := range map[string][]string{
		`0`:     nil,
		`1`:     nil,
		`0.5`:   nil,
		`2`:     {trader.CodeConfidenceOutOfRange},
		`9`:     {trader.CodeConfidenceOutOfRange},
		`90`:    {trader.CodeConfidenceOutOfRange},
		`-0.5`:  {trader.CodeConfidenceOutOfRange},
		`"0.5"`: {trader.CodeWrongType},
	} {
		raw := strings.Replace(string(body(nil)), `"confidence":0.83`, `"confidence":`+lit, 1)
		_, issues := trader.ParseRequest([]byte(raw))
		if codes := issuesOn(issues, "confidence"); !slices.Equal(codes, want) {
			t.Errorf("confidence %s: %v, want %v", lit, codes, want)
		}
	}
}

// TestConfidenceLiteralsAreReadUpToFortyCharactersAndExponentForty: a
// confidence literal of up to 40 characters with an exponent within ±40 is
// read exactly; a longer literal or a larger exponent is refused as out of
// range rather than expanded.
func TestConfidenceLiteralsAreReadUpToFortyCharactersAndExponentForty(t *testing.T) {
	forty := "0." + strings.Repeat("0", 37) + "1" // 40 characters
	for lit, inRange := range map[string]bool{
		forty:       true,
		forty + "1": false, // 41 characters
		`0e40`:      true,
		`0e+40`:     true,
		`0e41`:      false,
		`1e-40`:     true,
		`1e-41`:     false,
	} {
		raw := strings.Replace(string(body(nil)), `"confidence":0.83`, `"confidence":`+lit, 1)
		_, issues := trader.ParseRequest([]byte(raw))
		codes := issuesOn(issues, "confidence")
		if inRange && len(codes) != 0 || !inRange && !slices.Equal(codes, []string{trader.CodeConfidenceOutOfRange}) {
			t.Errorf("confidence %s: %v, want in range %v", lit, codes, inRange)
		}
	}
}
