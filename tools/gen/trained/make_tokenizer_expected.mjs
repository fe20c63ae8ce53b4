// Regenerates tests/data/trained/tokenizer_expected.json: the ids that independent JavaScript tokenizers
// give for the trained tokenizer (models/aerie-tiny-llama) on the committed validation sample and held-out
// prompts (tests/data/trained/{validation_sample,prompts}.json, written by make_corpus.py), plus a few
// edge cases. tests/tokenizer/trained_tokenizer_test.cpp checks aerie's ids against them.
//
//   tools/gen/tokenizer/fetch_tokenizers.sh --reference     # installs the reference packages under .cache/
//   node tools/gen/trained/make_tokenizer_expected.mjs [MODEL_DIR]
//
// The reference is @huggingface/transformers (which mirrors Hugging Face tokenizers' Rust behaviour);
// @lenml/tokenizers runs as a second opinion, and the script fails if the two disagree anywhere.
import fs from 'node:fs';
import path from 'node:path';
import { createRequire } from 'node:module';
import { fileURLToPath } from 'node:url';

const repo = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../..');
const model_dir = path.resolve(process.argv[2] || path.join(repo, 'models/aerie-tiny-llama'));
const data_dir = path.join(repo, 'tests/data/trained');
const require = createRequire(path.join(repo, '.cache/npm-tokenizers/package.json'));
const { AutoTokenizer, env } = require('@huggingface/transformers');
const lenml = require('@lenml/tokenizers');

const read_json = (file) => JSON.parse(fs.readFileSync(file, 'utf8'));
const sample = read_json(path.join(data_dir, 'validation_sample.json'));
const prompts = read_json(path.join(data_dir, 'prompts.json'));
// Edge cases beside the prose: special tokens inside text, digits, whitespace runs, non-English text.
const edge_cases = [
  ['special_tokens', '<|begin_of_text|>Hello, world.<|end_of_text|> <|eot_id|>x<|reserved_special_token_3|>'],
  ['digits_whitespace', 'In 1811, 12345 pounds;  two  spaces,\ttab\n\n\nthree newlines   \n  trailing '],
  ['unicode', 'caf\u00e9 na\u00efve \u201cquoted\u201d \u2014 \u00a3100 \u4eca\u5929 \ud83d\ude00 \u0416\u0443\u043a'],
];

env.allowRemoteModels = false;
env.localModelPath = path.dirname(model_dir) + '/';
const reference = await AutoTokenizer.from_pretrained(path.basename(model_dir));
const second = lenml.TokenizerLoader.fromPreTrained({
  tokenizerJSON: read_json(path.join(model_dir, 'tokenizer.json')),
  tokenizerConfig: read_json(path.join(model_dir, 'tokenizer_config.json')),
});
const encode = (tok, text, special = false) => Array.from(tok.encode(text, { add_special_tokens: special }));

function check(name, text, special = false) {
  const ids = encode(reference, text, special);
  const other = encode(second, text, special);
  if (JSON.stringify(ids) !== JSON.stringify(other)) throw new Error(`${name}: @lenml/tokenizers differs`);
  const decoded = reference.decode(ids);
  if (decoded !== (special ? '<|begin_of_text|>' : '') + text) throw new Error(`${name}: decode differs`);
  return ids;
}

const expected = {
  model: path.relative(repo, model_dir),
  reference: '@huggingface/transformers 4.3.2',
  validation_sample: sample.map((d) => ({ name: d.name, ids: check(d.name, d.text) })),
  // With special tokens: the BOS the post-processor adds, as aerie generate encodes a prompt.
  prompts: prompts.map((p) => ({ name: p.name, ids: check(p.name, p.text, true) })),
  edge_cases: edge_cases.map(([name, text]) => ({ name, text, ids: check(name, text) })),
};
const n_ids = expected.validation_sample.reduce((n, d) => n + d.ids.length, 0);
const lengths = expected.prompts.map((p) => p.ids.length);
fs.writeFileSync(path.join(data_dir, 'tokenizer_expected.json'),
  JSON.stringify(expected).replace(/\{"name"/g, '\n{"name"') + '\n');
console.log(`validation sample: ${n_ids} ids; prompts: ${Math.min(...lengths)}-${Math.max(...lengths)} ids with BOS`);
