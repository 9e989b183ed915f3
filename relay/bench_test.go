package relay

import (
	"bytes"
	"os"
	"testing"
)

// BenchmarkFrameCodec measures encoding and decoding one inbound frame (the
// golden inbound_buffered.json) with the hand-written codec ("fast") and
// with the reflective one it replaced ("reflect").
func BenchmarkFrameCodec(b *testing.B) {
	raw, err := os.ReadFile("testdata/frames/inbound_buffered.json")
	if err != nil {
		b.Fatal(err)
	}
	line := bytes.TrimSuffix(raw, []byte("\n"))
	f, err := ParseFrame(line)
	if err != nil {
		b.Fatal(err)
	}
	b.Run("encode/fast", func(b *testing.B) {
		b.ReportAllocs()
		var buf []byte
		for b.Loop() {
			buf, _ = AppendFrame(buf[:0], f)
		}
	})
	b.Run("encode/reflect", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			_, _ = refFrameJSON(f)
		}
	})
	b.Run("decode/fast", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			_, _ = ParseFrame(line)
		}
	})
	b.Run("decode/reflect", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			_, _ = refParseFrame(line)
		}
	})
}
