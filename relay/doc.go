// Package relay is the relay ↔ connector contract (seed 004, RELAY.md, and
// HERMES-RELAY.md, which wins where they differ — docs/relay.md): the
// CapabilityDescriptor handed to a gateway at handshake, the MessageEvent and
// SessionSource it receives, the newline-delimited frames both ends exchange
// over the WebSocket, the gateway's session-key rules, message splitting, the
// HMAC upgrade tokens, and the Store the connector persists through.
//
// The connector (the platform edge) lives in relay/connector, the platform
// edges in relay/discord and relay/telegram, and the Go client a gateway
// embeds in relay/gateway. This package holds no platform crypto and no I/O
// beyond io.Reader/io.Writer.
//
// Frames, events and sources are encoded by hand-written appenders
// (encode.go) that produce the bytes encoding/json produced, and the hot
// frames (inbound, inbound_ack) are decoded in one pass (decode.go), which
// declines anything unusual to encoding/json. encode_test.go and
// decode_test.go hold the reflective codec they replaced and prove the two
// equal (differential tests and fuzz targets).
//
// They are hand-written because they are several times faster on the
// frames of every message. BenchmarkFrameCodec (2 shared cores, CPU time
// per op, median of six runs): appending an inbound MessageEvent frame to
// a connection's queue takes 0.49 µs and 0 allocs against encoding/json's
// 22 µs and 38 (46×), an outbound_result 0.16 µs and 0 against 1.7 µs and
// 3 (10×); decoding the inbound frame takes 3.4 µs and 2 allocs against
// 36 µs and 75 (11×), an inbound_ack 0.44 µs and 1 against 4.1 µs and 10
// (9×). Frames the decoder declines (outbound, hello) and outbound actions
// with metadata cost what encoding/json costs. Reproduce with
// go test -run '^$' -bench FrameCodec -benchmem -count 6 ./relay/
package relay

// ContractVersion is the relay contract version carried in every
// CapabilityDescriptor. Within a version the contract only grows (new
// optional fields, new ops); a breaking change bumps it and both ends change
// in lockstep.
//
// History:
//   - 1 (2026-11-29): seed 004 as first implemented here — descriptor, event,
//     session source, frames hello/descriptor/outbound/outbound_result/
//     inbound/inbound_ack/interrupt/interrupt_inbound, ops send/edit/typing/
//     follow_up/get_chat_info, HMAC upgrade tokens with close code 4401.
//   - 1, grown (2026-11-30): the current Hermes gateway's wire
//     (HERMES-RELAY.md) — several hellos per socket with command_manifest,
//     going_idle/going_idle_ack, supported_ops, scope_id and the newer
//     source and event fields, ops react/delete/draft, egress_declined
//     refusals, the current build_session_key.
const ContractVersion = 1
