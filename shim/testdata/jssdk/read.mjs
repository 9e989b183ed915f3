// Reads one answer from Caduceus in each read pattern of the official
// OpenAI and Anthropic JavaScript SDKs, as their users write them, and
// prints one JSON line per pattern: how the read ended (completed, with
// the answer's text, an api_error with its status, or an error thrown
// while reading), and what the error carried. The clients keep their
// default retries, so the line shows what the SDK does with x-should-retry
// as well.
//
// Environment: CADUCEUS_URL (the server's base URL), CADUCEUS_KEY, and
// the models MODEL_CHAT, MODEL_RESPONSES, MODEL_MESSAGES; PROMPT, the user's
// message (default "hello").
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

// drain reads a stream to its end: how many events, and the text their
// deltas carry (text of picks each event's).
async function drain(stream, textOf) {
  let events = 0;
  let text = "";
  for await (const ev of stream) {
    events++;
    text += textOf(ev) ?? "";
  }
  return { events, text };
}

const chatText = (c) => c.choices[0]?.message?.content ?? "";
const chatDelta = (c) => c.choices?.[0]?.delta?.content;
const respDelta = (e) => (e.type === "response.output_text.delta" ? e.delta : "");
const msgText = (m) => m.content.filter((b) => b.type === "text").map((b) => b.text).join("");
const msgDelta = (e) => (e.type === "content_block_delta" && e.delta.type === "text_delta" ? e.delta.text : "");
const one = (text) => ({ events: 1, text });

const patterns = {
  "openai/chat/create": async () => one(chatText(await openai.chat.completions.create(chat))),
  "openai/chat/for-await": async () => drain(await openai.chat.completions.create({ ...chat, stream: true }), chatDelta),
  "openai/chat/finalChatCompletion": async () => one(chatText(await openai.chat.completions.stream(chat).finalChatCompletion())),
  "openai/responses/create": async () => one((await openai.responses.create(resp)).output_text),
  "openai/responses/for-await": async () => drain(await openai.responses.create({ ...resp, stream: true }), respDelta),
  "openai/responses/finalResponse": async () => one((await openai.responses.stream(resp).finalResponse()).output_text),
  "anthropic/messages/create": async () => one(msgText(await anthropic.messages.create(msgs))),
  "anthropic/messages/for-await": async () => drain(await anthropic.messages.create({ ...msgs, stream: true }), msgDelta),
  "anthropic/messages/finalMessage": async () => one(msgText(await anthropic.messages.stream(msgs).finalMessage())),
};

for (const [name, read] of Object.entries(patterns)) {
  const r = { pattern: name };
  try {
    const { events, text } = await read();
    r.events = events;
    r.text = text;
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
