// The official openai Node client against rtrl serve: every kind of answer, printed as one JSON
// object for tests/serving/test_openai_schema.py to check against OpenAI's published schemas.
// Usage: RTRL_URL=http://host:port/v1 RTRL_KEY=... node answers.mjs
import OpenAI from "openai";

const client = new OpenAI({ baseURL: process.env.RTRL_URL, apiKey: process.env.RTRL_KEY, maxRetries: 0 });
const ask = [{ role: "user", content: "Write `mean(xs)` in Python." }];
const out = {};

async function chunks(stream) {
  const all = [];
  for await (const chunk of stream) all.push(chunk);
  return all;
}

async function refused(call) {
  try {
    await call();
    return null;
  } catch (err) {
    return { status: err.status, code: err.code, param: err.param, type: err.type, body: err.error };
  }
}

out.chat = await client.chat.completions.create({
  model: "default", messages: ask, max_tokens: 6, logprobs: true, top_logprobs: 3,
});
out.chat_stream = await chunks(await client.chat.completions.create({
  model: "default", messages: ask, max_tokens: 6, logprobs: true, top_logprobs: 2, stream: true,
  stream_options: { include_usage: true },
}));
out.completion = await client.completions.create({
  model: "default", prompt: "def mean(xs):", max_tokens: 6, logprobs: 4,
});
out.completion_stream = await chunks(await client.completions.create({
  model: "default", prompt: "def mean(xs):", max_tokens: 6, stream: true,
}));
const models = await client.models.list();
out.models = { object: "list", data: models.data };
out.unknown_model = await refused(() => client.chat.completions.create({ model: "no-such-model", messages: ask }));
out.bad_request = await refused(() => client.chat.completions.create({
  model: "default", messages: ask, logprobs: true, top_logprobs: 21,
}));
process.stdout.write(JSON.stringify(out));
