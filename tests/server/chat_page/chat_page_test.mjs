// The chat page of `aerie serve` (src/server/chat_page.html) in headless Chromium:
//  1. live, against the server run_test.sh started: two turns typed and sent; each reply streams in, equals
//     what the API answers for the same conversation at temperature 0, and its stats line shows tokens/s
//     and the draft head's acceptance; a wrong API key shows the server's error;
//  2. rendering, with /v1/chat/completions answered by a fixed SSE stream: the reasoning is shown folded,
//     the tool call as name(arguments), a synthetic acceptance is flagged, and markup in the text stays
//     text (no element is created from model output).
import assert from "node:assert/strict";
import puppeteer from "puppeteer-core";

const base = process.env.AERIE_URL;
const key = process.env.AERIE_API_KEY;

async function api(messages) {
  const res = await fetch(base + "/v1/chat/completions", {
    method: "POST",
    headers: { "Content-Type": "application/json", Authorization: "Bearer " + key },
    body: JSON.stringify({ messages, temperature: 0, max_tokens: 24 }),
  });
  assert.equal(res.status, 200);
  return (await res.json()).choices[0].message.content;
}

// Fills the settings, then for each text: types it, sends with Enter, waits for the reply's stats line.
async function chat(page, apiKey, texts) {
  await page.goto(base + "/", { waitUntil: "load" });
  await page.evaluate((apiKey) => {
    const set = (id, v) => { const e = document.getElementById(id); e.value = v; e.dispatchEvent(new Event("change")); };
    set("api_key", apiKey);
    set("temperature", "0");
    set("max_tokens", "24");
  }, apiKey);
  for (const [i, text] of texts.entries()) {
    await page.type("[data-testid=input]", text);
    await page.keyboard.press("Enter");
    await page.waitForFunction((n) => document.querySelectorAll(".msg.assistant .stats[data-done='1']").length === n,
                               { timeout: 60000 }, i + 1);
  }
  return page.evaluate(() => [...document.querySelectorAll(".msg")].map((m) => ({
    role: m.dataset.role,
    content: m.querySelector(".content").textContent,
    stats: m.querySelector(".stats") ? m.querySelector(".stats").textContent : "",
    reasoningHidden: m.querySelector(".reasoning") ? m.querySelector(".reasoning").hidden : null,
  })));
}

const browser = await puppeteer.launch({
  executablePath: process.env.AERIE_CHROMIUM,
  headless: true,
  args: ["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"],
});
try {
  const page = await browser.newPage();
  const errors = [];
  page.on("pageerror", (e) => errors.push(String(e)));

  // 1. Live.
  const shown = await chat(page, key, ["Tell me a story.", "And then?"]);
  assert.deepEqual(shown.map((m) => m.role), ["user", "assistant", "user", "assistant"]);
  assert.equal(shown[0].content, "Tell me a story.");
  const first = await api([{ role: "user", content: "Tell me a story." }]);
  assert.ok(first.length > 0);
  assert.equal(shown[1].content, first);
  const second = await api([{ role: "user", content: "Tell me a story." }, { role: "assistant", content: first },
                            { role: "user", content: "And then?" }]);
  assert.equal(shown[3].content, second);
  for (const reply of [shown[1], shown[3]]) {
    assert.match(reply.stats, /^24 tokens · [0-9.]+ tokens\/s · first token [0-9]+ ms · acceptance length [0-9.]+ \([0-9]+% of [0-9]+ drafts\) · length$/);
    assert.equal(reply.reasoningHidden, true);
  }
  await page.waitForFunction(() => document.querySelector("[data-testid=model]").textContent === "aerie-chat",
                             { timeout: 10000 });

  const refused = await chat(page, "sk-wrong", ["hi"]);
  assert.match(refused[1].content, /API key/i);

  // 2. Rendering, from a fixed stream.
  const chunk = (delta, extra = {}) => "data: " + JSON.stringify({ choices: [{ index: 0, delta, finish_reason: null }], ...extra }) + "\n\n";
  const body = [
    chunk({ role: "assistant", content: "" }),
    chunk({ reasoning_content: "The user wants " }),
    chunk({ reasoning_content: "the weather." }),
    chunk({ content: "<img src=x onerror=\"window.hacked=1\"> Checking" }),
    chunk({ tool_calls: [{ index: 0, id: "call_1", type: "function", function: { name: "get_weather", arguments: "" } }] }),
    chunk({ tool_calls: [{ index: 0, function: { arguments: "{\"city\":" } }] }),
    chunk({ tool_calls: [{ index: 0, function: { arguments: "\"Paris\"}" } }] }),
    "data: " + JSON.stringify({ choices: [{ index: 0, delta: {}, finish_reason: "tool_calls" }] }) + "\n\n",
    "data: " + JSON.stringify({ choices: [], usage: { prompt_tokens: 5, completion_tokens: 9, total_tokens: 14,
      speculation: { rounds: 3, draft_tokens: 9, accepted_tokens: 6, acceptance_rate: 0.6667,
                     mean_acceptance_length: 3, accepted_per_position: [3, 2, 1], synthetic_acceptance: 0.8 } } }) + "\n\n",
    "data: [DONE]\n\n",
  ].join("");
  await page.setRequestInterception(true);
  page.on("request", (request) => {
    if (request.url().endsWith("/v1/chat/completions"))
      request.respond({ status: 200, contentType: "text/event-stream", body });
    else request.continue();
  });
  await chat(page, key, ["weather?"]);
  const rendered = await page.evaluate(() => {
    const m = document.querySelectorAll(".msg.assistant")[0];
    const r = m.querySelector(".reasoning");
    return {
      reasoningHidden: r.hidden, reasoningOpen: r.open, reasoning: r.querySelector("pre").textContent,
      summary: r.querySelector("summary").textContent, content: m.querySelector(".content").textContent,
      images: m.querySelectorAll("img").length, hacked: window.hacked === 1,
      tools: m.querySelector(".tool-calls").textContent, stats: m.querySelector(".stats").textContent,
    };
  });
  assert.equal(rendered.reasoningHidden, false);
  assert.equal(rendered.reasoningOpen, false);
  assert.equal(rendered.reasoning, "The user wants the weather.");
  assert.equal(rendered.summary, "Reasoning (27 characters)");
  assert.equal(rendered.content, "<img src=x onerror=\"window.hacked=1\"> Checking");
  assert.equal(rendered.images, 0);
  assert.equal(rendered.hacked, false);
  assert.equal(rendered.tools, "get_weather({\"city\":\"Paris\"})");
  assert.match(rendered.stats, /acceptance length 3\.00 \(67% of 9 drafts\) · SYNTHETIC acceptance 0\.8 · tool_calls$/);

  assert.deepEqual(errors, []);
  console.log("chat page: 2 live turns, a refused key, reasoning/tool-call rendering: ok");
} finally {
  await browser.close();
}
