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
