// Regenerates tests/data/tokenizer/{corpus.json,<model>_expected.json}: the tokenizer test corpus and the
// ids that independent JavaScript implementations give for it.
//
//   tools/gen/tokenizer/fetch_tokenizers.sh --reference      # files + reference packages under .cache/
//   node tools/gen/tokenizer/make_expected.mjs
//
// The reference is @huggingface/transformers (which mirrors Hugging Face tokenizers' Rust behaviour);
// @lenml/tokenizers is run as a second opinion and any disagreement is printed. The 1 MiB case is not
// stored: corpus.json holds its generator (xorshift64 picking cases), the expected file its id count and
// FNV-1a 64 hash, and the C++ test rebuilds the same text.
import fs from 'node:fs';
import path from 'node:path';
import { createRequire } from 'node:module';
import { fileURLToPath } from 'node:url';

const repo = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../..');
const files = process.env.AERIE_TOKENIZER_DIR || path.join(repo, '.cache/tokenizers');
const require = createRequire(path.join(repo, '.cache/npm-tokenizers/package.json'));
const { AutoTokenizer, env } = require('@huggingface/transformers');
const lenml = require('@lenml/tokenizers');
const out_dir = path.join(repo, 'tests/data/tokenizer');

// ---- corpus ---------------------------------------------------------------------------------------------
const cases = [
  ['empty', ''],
  ['space', ' '],
  ['newline', '\n'],
  ['whitespace_mix', '   \n\n  \t \r\n\t\t  x  \n '],
  ['prose', 'The quick brown fox jumps over the lazy dog. It was the best of times, it was the worst of times; ' +
    'it was the age of wisdom, it was the age of foolishness.\n\nA second paragraph follows, with "quotes", ' +
    '(parentheses) and an em\u2014dash. Mr. Smith paid $3.50 for 2 apples at 10:45am.'],
  ['contractions', "I'm sure you're right: it's what we've said, they'll go, he'd stay, don't and can't. " +
    "IT'S LOUD, WE'RE HERE, I'M, YOU'VE, SHE'LL, HE'D, DON'T. 's 't 're 've 'm 'll 'd ''s rock'n'roll"],
  ['code', 'def fib(n):\n\tif n < 2:\n\t\treturn n\n\treturn fib(n - 1) + fib(n - 2)\n\n\nclass Foo:\n' +
    '    """Doc string."""\n    def __init__(self, x: int = 0) -> None:\n        self.x = x  # comment\n' +
    '\n        \n\t \t\nint main() { for (int i = 0; i < 10; ++i) { printf("%d\\n", i); } return 0; }\n' +
    'if (a && b || !c) { x->y[3] += *p++; } // end\n<div class="a">&amp;</div>\n'],
  ['long_spaces', 'a' + ' '.repeat(40) + 'b' + ' '.repeat(1000) + '\n' + '\t'.repeat(17) + 'c' + ' \n'.repeat(30)],
  ['numbers', Array.from({ length: 25 }, (_, i) => '1234567890'.repeat(3).slice(0, i + 1)).join(' ') +
    ' 0 00 007 3.14159 -42 +1e-10 1,000,000 12:30 2024-01-31 0x1F 1_000 \u0661\u0662\u0663 \u00bd \u2163'],
  ['digits_glued', 'abc123def4567ghi89012345jkl 99bottles 3rd 21st v1.2.3 x86_64 192.168.0.1'],
  ['punctuation', '!!! ??? ... !?!? --- ___ *** ### @@@ $$$ %%% ^^^ &&& ((( ))) [[[ ]]] {{{ }}} <<< >>> ||| ' +
    '\\\\ // ;; :: ,, .. "\'" `` ~~ == ++ -> => :: ... \u2026 \u00ab\u00bb \u201c\u201d \u2018\u2019 \u00bf\u00a1 ' +
    '.\n!\n?\r\n;;\n\n'],
  ['chinese', '\u4eca\u5929\u5929\u6c14\u5f88\u597d\uff0c\u6211\u4eec\u53bb\u516c\u56ed\u6563\u6b65\u5427\u3002' +
    '\u4eba\u5de5\u667a\u80fd\u662f\u8ba1\u7b97\u673a\u79d1\u5b66\u7684\u4e00\u4e2a\u5206\u652f\u3002 ' +
    '\u4e2d\u6587\u548cEnglish\u6df7\u5408123\u6570\u5b57'],
  ['cjk_long_run', '\u5b66\u800c\u65f6\u4e60\u4e4b\u4e0d\u4ea6\u8bf4\u4e4e\u6709\u670b\u81ea\u8fdc\u65b9\u6765'.repeat(25)],
  ['japanese', '\u3053\u3093\u306b\u3061\u306f\u4e16\u754c\u3002\u30ab\u30bf\u30ab\u30ca\u3068\u3072\u3089\u304c\u306a' +
    '\u3001\u6f22\u5b57\u3002\u6771\u4eac\u30bf\u30ef\u30fc\u306f333\u30e1\u30fc\u30c8\u30eb\u3067\u3059\u3002\uff8a\uff9d\uff76\uff78'],
  ['korean', '\uc548\ub155\ud558\uc138\uc694, \uc138\uacc4! \ud55c\uad6d\uc5b4 \ud14c\uc2a4\ud2b8\uc785\ub2c8\ub2e4.'],
  ['arabic', '\u0645\u0631\u062d\u0628\u0627 \u0628\u0627\u0644\u0639\u0627\u0644\u0645! \u0647\u0630\u0627 ' +
    '\u0627\u062e\u062a\u0628\u0627\u0631\u064c \u0644\u0644\u063a\u0629\u0650 \u0627\u0644\u0639\u0631\u0628\u064a\u0629\u0650 ' +
    '\u0661\u0662\u0663\u0664 \u05e9\u05dc\u05d5\u05dd \u05e2\u05d5\u05dc\u05dd'],
  ['indic_thai', '\u0928\u092e\u0938\u094d\u0924\u0947 \u0926\u0941\u0928\u093f\u092f\u093e \u0939\u093f\u0928\u094d\u0926\u0940 ' +
    '\u0e2a\u0e27\u0e31\u0e2a\u0e14\u0e35\u0e04\u0e23\u0e31\u0e1a \u0e20\u0e32\u0e29\u0e32\u0e44\u0e17\u0e22'],
  ['cyrillic_greek', '\u041f\u0440\u0438\u0432\u0435\u0442, \u043c\u0438\u0440! \u0395\u03bb\u03bb\u03b7\u03bd\u03b9\u03ba\u03ac ' +
    '\u03ba\u03b5\u03af\u03bc\u03b5\u03bd\u03bf. Stra\u00dfe \u00e9l\u00e8ve na\u00efve \u0130stanbul \u0131\u015f\u0131k'],
  ['emoji', '\ud83d\ude00 \ud83d\udc4d\ud83c\udfff \ud83d\udc69\ud83c\udffd\u200d\ud83d\udcbb ' +
    '\ud83d\udc68\u200d\ud83d\udc69\u200d\ud83d\udc67\u200d\ud83d\udc66 \ud83c\udff3\ufe0f\u200d\ud83c\udf08 ' +
    '\ud83c\uddef\ud83c\uddf5\ud83c\uddfa\ud83c\uddf8 \u2764\ufe0f\u200d\ud83d\udd25 \ud83e\uddd1\ud83c\udffb\u200d\ud83e\udd1d\u200d\ud83e\uddd1\ud83c\udfff' +
    'text\ud83d\ude80rocket \u263a\ufe0e \u0031\ufe0f\u20e3'],
  ['combining', 'e\u0301 a\u0308 n\u0303 cafe\u0301 Z\u0324\u0354\u0367\u0311\u0313a\u0308\u0356\u032d\u0308\u0307' +
    'l\u036e\u0312\u036bg\u030c\u0317\u035ao\u0319\u0314\u036e\u0307\u0350\u0307 \u1100\u1161\u11a8 \u0915\u094d\u0937 \u0301alone'],
  ['unicode_spaces', 'a\u00a0b\u3000c\u2009d\u202fe\u2003f \u00a0 g\u2028h\u2029i'],
  ['special_llama', '<|begin_of_text|>Hello<|eot_id|><|start_header_id|>user<|end_header_id|>\n\nHi!<|eot_id|>' +
    ' <|begin_of_text|> <|reserved_special_token_5|><|begin_of_tex <|eot_id|x'],
  ['special_deepseek', '<\uff5cbegin\u2581of\u2581sentence\uff5c>You are helpful.<\uff5cUser\uff5c>Hi<\uff5cAssistant\uff5c>' +
    'Hello<\uff5cend\u2581of\u2581sentence\uff5c> <|EOT|> <\uff5cfim\u2581hole\uff5c> <\uff5cUser'],
  ['markup', '# Title\n\n* item one\n* item **two**\n\n```json\n{"key": [1, 2.5, "x\\"y"], "nested": {"a": null}}\n```\n' +
    'See https://example.com/path?q=1&r=two#frag or mail a.b+c@example.org. <a href="/x">link</a>'],
  ['mixed_scripts', 'English \u4e2d\u6587 \u0627\u0644\u0639\u0631\u0628\u064a\u0629 \ud83d\ude03 \u0420\u0443\u0441\u0441\u043a\u0438\u0439 ' +
    '\u65e5\u672c\u8a9e 123 \ud55c\uad6d\uc5b4 \u0928\u092e\u0938\u094d\u0924\u0947! x\u00b2+y\u00b2=z\u00b2 \u221e\u2260\u2211'],
];

// The 1 MiB case: xorshift64 (13, 7, 17) from `seed` picks case index x % n_cases, appended until the text
// reaches `min_bytes` UTF-8 bytes.
const mixed = { seed: '0x9e3779b97f4a7c15', min_bytes: 1 << 20 };
function build_mixed() {
  let x = BigInt(mixed.seed);
  const mask = (1n << 64n) - 1n;
  const parts = [];
  let bytes = 0;
  while (bytes < mixed.min_bytes) {
    x ^= (x << 13n) & mask;
    x ^= x >> 7n;
    x ^= (x << 17n) & mask;
    const text = cases[Number(x % BigInt(cases.length))][1];
    parts.push(text);
    bytes += Buffer.byteLength(text, 'utf8');
  }
  return parts.join('');
}

function fnv1a64(ids) {
  let h = 0xcbf29ce484222325n;
  const prime = 0x100000001b3n, mask = (1n << 64n) - 1n;
  for (const id of ids) {
    for (let k = 0; k < 4; ++k) {
      h ^= BigInt((id >>> (8 * k)) & 0xff);
      h = (h * prime) & mask;
    }
  }
  return '0x' + h.toString(16).padStart(16, '0');
}

// ---- reference runs -------------------------------------------------------------------------------------
env.allowRemoteModels = false;
env.localModelPath = files + '/';
fs.mkdirSync(out_dir, { recursive: true });
fs.writeFileSync(path.join(out_dir, 'corpus.json'),
  JSON.stringify({ cases: cases.map(([name, text]) => ({ name, text })), mixed }, null, 1) + '\n');
const mixed_text = build_mixed();

for (const model of ['llama3_1', 'deepseek_v3']) {
  const reference = await AutoTokenizer.from_pretrained(model);
  const second = lenml.TokenizerLoader.fromPreTrained({
    tokenizerJSON: JSON.parse(fs.readFileSync(path.join(files, model, 'tokenizer.json'))),
    tokenizerConfig: JSON.parse(fs.readFileSync(path.join(files, model, 'tokenizer_config.json'))),
  });
  const encode = (tok, text) => Array.from(tok.encode(text, { add_special_tokens: false }));
  const expected = { model, reference: '@huggingface/transformers 4.3.2', cases: [] };
  for (const [name, text] of cases) {
    const ids = encode(reference, text);
    const other = encode(second, text);
    if (JSON.stringify(ids) !== JSON.stringify(other)) console.log(`${model}/${name}: @lenml/tokenizers differs`);
    expected.cases.push({ name, ids });
  }
  const mixed_ids = encode(reference, mixed_text);
  if (fnv1a64(encode(second, mixed_text)) !== fnv1a64(mixed_ids)) console.log(`${model}/mixed: @lenml/tokenizers differs`);
  expected.mixed = { n_ids: mixed_ids.length, fnv1a64: fnv1a64(mixed_ids), n_bytes: Buffer.byteLength(mixed_text) };
  expected.with_special_tokens = { text: 'Hello world', ids: Array.from(reference.encode('Hello world')) };
  fs.writeFileSync(path.join(out_dir, `${model}_expected.json`),
    JSON.stringify(expected).replace(/\{"name"/g, '\n{"name"') + '\n');
  console.log(model, 'mixed', expected.mixed, 'bos', expected.with_special_tokens.ids);
}
