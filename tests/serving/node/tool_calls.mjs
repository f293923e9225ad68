// The official openai Node client with tools against rtrl serve: a call answered whole, one
// streamed, then the agent's next call with the first call's tool_calls and their result sent
// back; printed as one JSON object for tests/serving/test_tool_calls.py to check against
// OpenAI's published schemas. Usage: RTRL_URL=http://host:port/v1 RTRL_KEY=... node tool_calls.mjs
import OpenAI from "openai";

const client = new OpenAI({ baseURL: process.env.RTRL_URL, apiKey: process.env.RTRL_KEY, maxRetries: 0 });
const tools = JSON.parse(process.env.RTRL_TOOLS);
const ask = [{ role: "user", content: "Fix the failing test." }];
const out = {};

const first = await client.chat.completions.create({ model: "default", messages: ask, tools }).withResponse();
out.whole = first.data;
out.whole_interaction = first.response.headers.get("x-rtrl-interaction-id");

const streamed = [];
for await (const chunk of await client.chat.completions.create({ model: "default", messages: ask, tools, stream: true })) {
  streamed.push(chunk);
}
out.stream = streamed;

const message = out.whole.choices[0].message;
const history = [
  ...ask,
  { role: "assistant", content: message.content, tool_calls: message.tool_calls },
  ...message.tool_calls.map((call) => ({ role: "tool", tool_call_id: call.id, content: "def f(): ..." })),
];
const next = await client.chat.completions.create({ model: "default", messages: history, tools }).withResponse();
out.next = next.data;
out.next_interaction = next.response.headers.get("x-rtrl-interaction-id");
console.log(JSON.stringify(out));
