package contract

import (
	"fmt"
	"strings"
	"testing"
)

// TestCheckJSONStringStops checks that the string scan stops at the byte
// that ends or breaks a string wherever it falls in an 8-byte run: the
// refusal names its offset.
func TestCheckJSONStringStops(t *testing.T) {
	for n := range 40 {
		plain := strings.Repeat("ab-", n)[:n]
		for _, c := range []byte{0x01, 0x1f, 0} {
			doc := `{"k":"` + plain + string(c) + `"}`
			at := len(`{"k":"`) + len(plain)
			err := CheckJSON([]byte(doc))
			if err == nil || !strings.Contains(err.Error(), fmt.Sprint("offset ", at)) {
				t.Fatalf("%q: %v, want a refusal at offset %d", doc, err, at)
			}
		}
		if err := CheckJSON([]byte(`{"k":"` + plain + `\"\\é"}`)); err != nil {
			t.Fatalf("%q: %v", plain, err)
		}
	}
}
