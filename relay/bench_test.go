package relay

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/caduceus-dev/caduceus/contract/contracttest"
)

// BenchmarkFrameCodec measures encoding and decoding the frames the relay
// exchanges on every message (golden frames of testdata/frames) with the
// hand-written codec ("hand": encode.go, decode.go) and with the
// encoding/json codec it replaced ("encoding_json": reference_test.go):
//
//	inbound       a typical inbound MessageEvent frame (inbound.json)
//	inbound_ack   the gateway's acknowledgement (inbound_ack.json)
//	outbound_send an outbound send without metadata (outbound_send.json
//	              without its metadata: the appenders' path)
//	outbound_send_metadata  outbound_send.json as it is: metadata makes
//	              both encoders encoding/json, and the one-pass decoder
//	              declines every outbound frame to encoding/json
//	outbound_result the connector's answer to a send (outbound_result.json)
//
// The hand-written encoder appends to a reused buffer, as the connector
// appends every frame to its connection's queue.
func BenchmarkFrameCodec(b *testing.B) {
	frames := []struct{ name, file string }{
		{"inbound", "inbound.json"},
		{"inbound_ack", "inbound_ack.json"},
		{"outbound_send", "outbound_send.json"},
		{"outbound_send_metadata", "outbound_send.json"},
		{"outbound_result", "outbound_result.json"},
	}
	for _, fr := range frames {
		raw, err := os.ReadFile(filepath.Join("testdata/frames", fr.file))
		if err != nil {
			b.Fatal(err)
		}
		line := bytes.TrimSuffix(raw, []byte("\n"))
		f, err := ParseFrame(line)
		if err != nil {
			b.Fatal(err)
		}
		if fr.name == "outbound_send" {
			a := *f.Action
			a.Metadata = nil
			f.Action = &a
			if line, err = f.MarshalJSON(); err != nil {
				b.Fatal(err)
			}
		}
		b.Run("encode/"+fr.name+"/hand", func(b *testing.B) {
			var buf []byte
			contracttest.Loop(b, func() { buf, _ = AppendFrame(buf[:0], f) })
		})
		b.Run("encode/"+fr.name+"/encoding_json", func(b *testing.B) {
			contracttest.Loop(b, func() { _, _ = refFrameJSON(f) })
		})
		b.Run("decode/"+fr.name+"/hand", func(b *testing.B) {
			contracttest.Loop(b, func() { _, _ = ParseFrame(line) })
		})
		b.Run("decode/"+fr.name+"/encoding_json", func(b *testing.B) {
			contracttest.Loop(b, func() { _, _ = refParseFrame(line) })
		})
	}
}
