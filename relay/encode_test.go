package relay

import (
	"bytes"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/caduceus-dev/caduceus/contract/contracttest"
)

// trickyStrings are the strings whose encoding differs most between
// encoders: escapes, control bytes, HTML characters (not escaped),
// invalid UTF-8, U+2028/U+2029, multi-byte runes.
var trickyStrings = []string{
	"", "x", "hello", `a"b`, `a\b`, "a/b", "<>&", "\b\f\n\r\t", "\x00\x01\x1f\x7f", "é👋",
	"\u2028\u2029", "\xff", "a\xc3", "\xed\xa0\x80", "\xf4\x90\x80\x80", "\ufffd", "-1001234567890",
	"telegram", "dm", "   ", "/stop@bot",
}

// frameFrom builds a frame of type typ whose strings are taken from strs
// (cycled) and whose optional parts are chosen by bits.
func frameFrom(typ string, strs []string, bits uint32) Frame {
	i := 0
	next := func() string {
		s := strs[i%len(strs)]
		i++
		if bits&(1<<(i%32)) != 0 {
			return "" // exercise the empty/omitted cases
		}
		return s
	}
	src := SessionSource{Platform: next(), ChatID: next(), ChatType: next(), ChatName: next(), UserID: next(),
		UserName: next(), ThreadID: next(), ChatTopic: next(), UserIDAlt: next(), ChatIDAlt: next(), GuildID: next(),
		ParentChatID: next(), MessageID: next(), Profile: next(), ProspectiveThreadID: next(),
		AutoThreadCreated: bits&(1<<26) != 0, AutoThreadInitialName: next(), UserDisplayName: next(), UserHandle: next()}
	if bits&(1<<25) != 0 {
		src.ScopeID = next()
	}
	ev := MessageEvent{Text: next(), MessageType: MessageType(next()), Source: src, MessageID: next(), ReplyToMessageID: next()}
	if bits&(1<<24) != 0 {
		ev.ReplyTo = &ReplyContext{Text: next(), Author: next(), IsOwn: bits&(1<<23) != 0}
	}
	if bits&(1<<22) != 0 {
		ev.Media = []Media{{URL: next(), Mime: next(), Kind: next(), Size: int64(bits >> 8), Filename: next(), Caption: next()}, {}}
	}
	if bits&(1<<21) != 0 {
		ev.Context = []ContextMessage{{Text: next(), Source: ContextAuthor{UserName: next(), UserID: next()}}}
	}
	if bits&(1<<20) != 0 {
		ev.PromptResponse = &PromptResponse{PromptID: next(), OptionID: next(), Label: next(), PromptMessageID: next()}
	}
	switch bits % 3 {
	case 1:
		ev.MediaURLs = []string{}
	case 2:
		ev.MediaURLs = []string{next(), next()}
	}
	f := Frame{Type: typ, Platform: next(), BotID: next(), RequestID: next(), SessionKey: next(), ChatID: next(), BufferID: next()}
	switch typ {
	case FrameInbound:
		f.Event = &ev
	case FrameOutbound:
		f.Action = &Action{Op: next(), ChatID: next(), Content: next(), ReplyTo: next(), MessageID: next(),
			SessionKey: next(), Kind: next()}
		if bits&(1<<30) != 0 {
			f.Action.Metadata = map[string]any{next(): next(), "n": 1.5, "l": []any{next(), nil, true}}
		}
	case FrameOutboundResult:
		if bits&(1<<29) == 0 {
			f.Result = &Result{Success: bits&(1<<28) != 0, MessageID: next(), Error: next(), Name: next(), Type: next()}
		}
	case FrameInterrupt:
		if bits&(1<<27) == 0 {
			r := next()
			f.Reason = &r
		}
	case FrameDescriptor:
		d := TelegramDescriptor()
		if bits&1 != 0 {
			d = DiscordDescriptor()
		}
		f.Descriptor = &d
	}
	return f
}

var allFrameTypes = []string{FrameHello, FrameOutbound, FrameInterrupt, FrameInboundAck, FrameDescriptor,
	FrameOutboundResult, FrameInbound, FrameInterruptInbound, "unknown", ""}

// sameEncoding fails t unless the hand-written and reference encoders agree
// on f, its event and its source, byte for byte and on errors.
func sameEncoding(t *testing.T, f Frame) {
	t.Helper()
	want, wantErr := refFrameJSON(f)
	got, gotErr := f.MarshalJSON()
	if (wantErr == nil) != (gotErr == nil) || (wantErr != nil && wantErr.Error() != gotErr.Error()) {
		t.Fatalf("frame %+v: error %v, reference %v", f, gotErr, wantErr)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("frame %+v:\n got %s\nwant %s", f, got, want)
	}
	line, err := AppendFrame([]byte("prefix"), f)
	if wantErr != nil {
		if err == nil || string(line) != "prefix" {
			t.Fatalf("AppendFrame on error: %q, %v", line, err)
		}
	} else if string(line) != "prefix"+string(want)+"\n" {
		t.Fatalf("AppendFrame: %q, want %q", line, want)
	}
	if f.Event != nil {
		want, _ := refEvent(*f.Event).MarshalJSON()
		got, _ := f.Event.MarshalJSON()
		if !bytes.Equal(got, want) {
			t.Fatalf("event:\n got %s\nwant %s", got, want)
		}
		want, _ = refSource(f.Event.Source).MarshalJSON()
		got, _ = f.Event.Source.MarshalJSON()
		if !bytes.Equal(got, want) {
			t.Fatalf("source:\n got %s\nwant %s", got, want)
		}
	}
}

// TestEncodeMatchesReference compares the encoders over generated frames of
// every type built from tricky strings.
func TestEncodeMatchesReference(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for range 5000 {
		strs := make([]string, 1+rng.IntN(8))
		for i := range strs {
			strs[i] = trickyStrings[rng.IntN(len(trickyStrings))]
			if rng.IntN(3) == 0 {
				strs[i] += trickyStrings[rng.IntN(len(trickyStrings))]
			}
		}
		sameEncoding(t, frameFrom(allFrameTypes[rng.IntN(len(allFrameTypes))], strs, rng.Uint32()))
	}
	// Every byte value alone, and every rune class, in every position.
	for c := range 256 {
		s := string([]byte{byte(c)})
		for _, typ := range allFrameTypes {
			sameEncoding(t, frameFrom(typ, []string{s, "a" + s + "b"}, 0))
		}
	}
}

// TestEncodeGoldenFrames checks the reference and the appenders agree on
// every golden frame (TestGoldenFrames checks the bytes themselves).
func TestEncodeGoldenFrames(t *testing.T) {
	files, _ := filepath.Glob("testdata/frames/*.json")
	for _, file := range files {
		raw, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		f, err := ParseFrame(bytes.TrimSuffix(raw, []byte("\n")))
		if err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		sameEncoding(t, f)
	}
}

// FuzzEncode compares the hand-written encoders with the reflective ones
// over frames of every type built from fuzzed strings.
func FuzzEncode(f *testing.F) {
	f.Add(uint8(6), "hello", "telegram", "-100", "\u2028<&>", uint32(0))
	f.Add(uint8(1), "\xff\x00", "a\"b", "", "é", uint32(0x5555))
	f.Add(uint8(2), "", "", "", "", uint32(0xffffffff))
	f.Fuzz(func(t *testing.T, typ uint8, a, b, c, d string, bits uint32) {
		sameEncoding(t, frameFrom(allFrameTypes[int(typ)%len(allFrameTypes)], []string{a, b, c, d}, bits))
	})
}

// TestEncodeCoversEveryField proves the hand-written encoders over frames
// with every field filled, at every depth (the event, its source, the
// action, the result, the descriptor), and with each field left empty in
// turn: a field added to any of them without its appender fails here.
func TestEncodeCoversEveryField(t *testing.T) {
	for _, typ := range allFrameTypes {
		for _, f := range contracttest.Variants[Frame]() {
			f.Type = typ
			sameEncoding(t, f)
		}
	}
}

// TestEventRoundTripKeepsEveryField encodes an event whose every field (and
// every field of its source) is filled, decodes it through both decoders,
// and wants it back whole: the reference encoders list their fields by
// hand too, so this is what catches a field added to the structs but to
// neither codec.
func TestEventRoundTripKeepsEveryField(t *testing.T) {
	ev := contracttest.Variants[MessageEvent]()[0]
	ev.MessageType = MessagePhoto
	ev.Source.GuildID = ev.Source.ScopeID // one value under two names on the wire
	raw, err := ev.MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	var fast, slow MessageEvent
	if err := fast.UnmarshalJSON(raw); err != nil {
		t.Fatal(err)
	}
	if err := slow.unmarshalReflect(raw); err != nil {
		t.Fatal(err)
	}
	for name, got := range map[string]MessageEvent{"decoder": fast, "reflective decoder": slow} {
		if !reflect.DeepEqual(got, ev) {
			t.Errorf("%s lost a field:\n got %+v\nwant %+v\nwire %s", name, got, ev, raw)
		}
	}
}
