// OpenAI's official npm client (`openai`) against `deferkv serve` on 127.0.0.1: a compressed
// context made with POST /v1/contexts (not an OpenAI endpoint: plain fetch), then chat
// completions that name it through the client as an extra body field (`kv_context`), read
// `usage.prompt_tokens_details.cached_tokens`, and extend it turn by turn
// (`kv_context_extend`: the response's `kv_context`). Exits 1 on any mismatch.
//
//   NODE_PATH=DIR/node_modules node scripts/openai_npm_contexts.cjs PORT
//
// where DIR holds `npm install openai` (the package is not vendored: the repository takes
// dependencies from Debian only). docs/serving.md, "Compressed contexts".
const OpenAI = require("openai").default ?? require("openai");

const port = process.argv[2];
if (!port) {
  console.error("usage: node scripts/openai_npm_contexts.cjs PORT");
  process.exit(2);
}
const base = `http://127.0.0.1:${port}`;
let failures = 0;
function check(ok, what) {
  console.log(`${ok ? "ok  " : "FAIL"} ${what}`);
  if (!ok) failures++;
}

(async () => {
  const client = new OpenAI({ baseURL: `${base}/v1`, apiKey: "unused" });
  const model = (await client.models.list()).data[0].id;
  const document = "Lily had a red ball. She played with it in the park every day. One day a big brown dog came to " +
                   "the park. The dog wagged its long tail and ran after the ball.";
  const made = await (await fetch(`${base}/v1/contexts`, {
    method: "POST",
    headers: { "Content-Type": "application/json" },
    body: JSON.stringify({ messages: [{ role: "user", content: document }], kv_press: "snapkv", kv_budget: 40 }),
  })).json();
  check(typeof made.id === "string" && made.id.startsWith("ctx-"), `context made: ${made.id}`);

  let context = made.id;
  let cached = made.prompt_tokens;
  for (const question of ["What color was the ball?", "Who came to the park?"]) {
    const chat = await client.chat.completions.create({
      model,
      messages: [{ role: "user", content: question }],
      max_tokens: 8,
      temperature: 0,
      kv_context: context,        // extra body fields: the client sends them as they are
      kv_context_extend: true,
    });
    const details = chat.usage?.prompt_tokens_details;
    check(details?.cached_tokens === cached,
          `cached_tokens ${details?.cached_tokens} = the context's ${cached} tokens (${JSON.stringify(question)})`);
    check(typeof chat.choices[0].message.content === "string", `answer ${JSON.stringify(chat.choices[0].message.content)}`);
    check(typeof chat.kv_context === "string" && chat.kv_context !== context, `extended context ${chat.kv_context}`);
    const grown = await (await fetch(`${base}/v1/contexts/${chat.kv_context}`)).json();
    check(grown.prompt_tokens > cached, `it holds the turn: ${grown.prompt_tokens} tokens > ${cached}`);
    context = chat.kv_context;
    cached = grown.prompt_tokens;
  }
  try {
    await client.chat.completions.create({ model, messages: [{ role: "user", content: "hi" }], kv_context: "ctx-none" });
    check(false, "an unknown context is refused");
  } catch (e) {
    check(e.status === 404 && e.code === "context_not_found", `an unknown context: ${e.status} ${e.code}`);
  }
  process.exit(failures === 0 ? 0 : 1);
})().catch((e) => {
  console.error(e);
  process.exit(1);
});
