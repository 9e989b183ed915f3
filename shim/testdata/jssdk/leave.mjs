// Leaves one answer early, the way users of the official OpenAI and
// Anthropic JavaScript SDKs do, and prints one JSON line saying how:
//
//   node leave.mjs WIRE stream   reads the first event of a streamed answer
//                                with `for await`, then breaks (the SDK
//                                aborts its request)
//   node leave.mjs WIRE whole    starts a whole request with an AbortSignal
//                                and aborts it when a line arrives on stdin
//
// WIRE is chat, responses or messages. Environment as read.mjs:
// CADUCEUS_URL, CADUCEUS_KEY, MODEL_CHAT, MODEL_RESPONSES, MODEL_MESSAGES;
// PROMPT (default "hello").
import OpenAI from "openai";
import Anthropic from "@anthropic-ai/sdk";
import { createInterface } from "node:readline";

const [wire, how] = process.argv.slice(2);
const base = process.env.CADUCEUS_URL;
const key = process.env.CADUCEUS_KEY;
const prompt = process.env.PROMPT ?? "hello";
const openai = new OpenAI({ baseURL: base + "/v1", apiKey: key, maxRetries: 0 });
const anthropic = new Anthropic({ baseURL: base, apiKey: key, maxRetries: 0 });
const requests = {
  chat: (extra, opts) => openai.chat.completions.create({ model: process.env.MODEL_CHAT, messages: [{ role: "user", content: prompt }], ...extra }, opts),
  responses: (extra, opts) => openai.responses.create({ model: process.env.MODEL_RESPONSES, input: prompt, ...extra }, opts),
  messages: (extra, opts) => anthropic.messages.create({ model: process.env.MODEL_MESSAGES, max_tokens: 64, messages: [{ role: "user", content: prompt }], ...extra }, opts),
};
const create = requests[wire];
if (!create || !["stream", "whole"].includes(how)) {
  console.error("usage: node leave.mjs chat|responses|messages stream|whole");
  process.exit(2);
}

const r = { wire, how };
if (how === "stream") {
  r.events = 0;
  for await (const _ of await create({ stream: true })) {
    r.events++;
    break; // the SDK aborts the request
  }
} else {
  const ac = new AbortController();
  const lines = createInterface({ input: process.stdin });
  lines.once("line", () => ac.abort());
  try {
    await create({}, { signal: ac.signal });
    r.outcome = "completed";
  } catch (e) {
    r.outcome = e?.constructor?.name ?? "error";
  }
  lines.close();
}
console.log(JSON.stringify(r));
