package guard_test

import (
	"strings"
	"testing"

	"github.com/caduceus-dev/caduceus/guard"
	"github.com/caduceus-dev/caduceus/guard/detect"
	"github.com/caduceus-dev/caduceus/guard/guardtest"
)

// FuzzStream: however a text holding a planted value is split into
// writes, the stream never lets out a value that redacting the whole text
// removes.
func FuzzStream(f *testing.F) {
	f.Add("the key is ", " and more", uint8(0), []byte{3, 9, 1})
	f.Add("", "", uint8(2), []byte{1, 1, 1, 1, 1, 1, 1, 1})
	f.Add("mail: <", ">\n", uint8(3), []byte{200, 7})
	f.Add("x", "y", uint8(5), []byte{0, 0, 250})
	d := detect.MustDefault()
	f.Fuzz(func(t *testing.T, before, after string, which uint8, cuts []byte) {
		before, after = before[:min(len(before), 300)], after[:min(len(after), 300)]
		v := guardtest.Values[int(which)%len(guardtest.Values)].Value
		text := before + v + after
		whole, _ := guard.NewRedactor(d, all(guard.Redact), guard.Answer).Redact(text)
		if strings.Contains(whole, v) {
			return // the value does not stand as one here (e.g. inside a longer token)
		}
		s := guard.NewStream(guard.NewRedactor(d, all(guard.Redact), guard.Answer), 0)
		var out strings.Builder
		i := 0
		for _, c := range cuts {
			n := min(int(c)%64+1, len(text)-i)
			out.WriteString(s.Write(text[i : i+n]))
			i += n
			if i == len(text) {
				break
			}
		}
		out.WriteString(s.Write(text[i:]))
		out.WriteString(s.Flush())
		if strings.Contains(out.String(), v) {
			t.Fatalf("the stream let out %q:\n%q", v, out.String())
		}
	})
}
