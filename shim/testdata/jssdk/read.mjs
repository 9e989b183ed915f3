// Reads one answer from Caduceus in each read pattern of the official
// OpenAI and Anthropic JavaScript SDKs, as their users write them, and
// prints one JSON line per pattern: how the read ended (completed, an
// api_error with its status, or an error thrown while reading), and what
// the error carried. The clients keep their default retries, so the line
// shows what the SDK does with x-should-retry as well.
//
// Environment: CADUCEUS_URL (the server's base URL), CADUCEUS_KEY, and
// the models MODEL_CHAT, MODEL_RESPONSES, MODEL_MESSAGES; PROMPT, the user's
// message (default "hello"). A completed read's line holds the text it
// read.
import OpenAI from "openai";
import Anthropic from "@anthropic-ai/sdk";

const base = process.env.CADUCEUS_URL;
const key = process.env.CADUCEUS_KEY;
const prompt = process.env.PROMPT ?? "hello";
const openai = new OpenAI({ baseURL: base + "/v1", apiKey: key });
const anthropic = new Anthropic({ baseURL: base, apiKey: key });
const chat = { model: process.env.MODEL_CHAT, messages: [{ role: "user", content: prompt }] };
const resp = { model: process.env.MODEL_RESPONSES, input: prompt };
const msgs = { model: process.env.MODEL_MESSAGES, max_tokens: 64, messages: [{ role: "user", content: prompt }] };

function header(h, name) {
  if (!h) return null;
  if (typeof h.get === "function") return h.get(name);
  return h[name] ?? null;
}

// drain reads a stream to its end, keeping the text its deltas carry.
async function drain(stream) {
  let events = 0;
  let text = "";
  for await (const ev of stream) {
    events++;
    text += ev?.choices?.[0]?.delta?.content ?? "";
    if (ev?.type === "response.output_text.delta") text += ev.delta;
    if (ev?.type === "content_block_delta" && ev.delta?.type === "text_delta") text += ev.delta.text;
  }
  return [events, text];
}

// Each pattern returns [events, the answer's text as the pattern reads it].
const chatText = (c) => [1, c.choices[0]?.message?.content ?? ""];
const msgText = (m) => [1, m.content.map((b) => b.text ?? "").join("")];
const patterns = {
  "openai/chat/create": async () => chatText(await openai.chat.completions.create(chat)),
  "openai/chat/for-await": async () => drain(await openai.chat.completions.create({ ...chat, stream: true })),
  "openai/chat/finalChatCompletion": async () => chatText(await openai.chat.completions.stream(chat).finalChatCompletion()),
  "openai/responses/create": async () => [1, (await openai.responses.create(resp)).output_text],
  "openai/responses/for-await": async () => drain(await openai.responses.create({ ...resp, stream: true })),
  "openai/responses/finalResponse": async () => [1, (await openai.responses.stream(resp).finalResponse()).output_text],
  "anthropic/messages/create": async () => msgText(await anthropic.messages.create(msgs)),
  "anthropic/messages/for-await": async () => drain(await anthropic.messages.create({ ...msgs, stream: true })),
  "anthropic/messages/finalMessage": async () => msgText(await anthropic.messages.stream(msgs).finalMessage()),
};

for (const [name, read] of Object.entries(patterns)) {
  const r = { pattern: name };
  try {
    [r.events, r.text] = await read();
    r.outcome = "completed";
  } catch (e) {
    r.outcome = typeof e?.status === "number" ? "api_error" : "error";
    r.status = e?.status ?? 0;
    r.body = JSON.stringify(e?.error ?? null);
    r.should_retry = header(e?.headers, "x-should-retry");
    r.receipt = header(e?.headers, "x-caduceus-receipt");
    r.message = String(e?.message ?? e).slice(0, 300);
  }
  console.log(JSON.stringify(r));
}
