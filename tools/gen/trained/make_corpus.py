#!/usr/bin/python3
"""Builds the training corpus of aerie's small trained models from English text installed by Debian
packages, all of it public domain:

  source   package (licence of the package)        text
  austen   r-cran-janeaustenr (MIT)                Jane Austen's six novels (1811-1818), public domain
  jargon   jargon-text (public domain)             The Jargon File 4.4.7 (1975-2003), public domain
  devil    dict-devil (public domain)              Ambrose Bierce, The Devil's Dictionary (1911)
  kjv      bible-kjv-text + bible-kjv (GPL-2+ code) The King James Bible (1611), public domain; only the
                                                   narrative and wisdom books listed in KJV_BOOKS

Each source is cleaned to plain text documents (a chapter, or a run of dictionary entries of a few KB):
hard-wrapped lines are joined into one line per paragraph, paragraphs are separated by a blank line,
markup is removed (_italics_, {cross references}, tables, lists of contents). Each document is assigned
by a hash of its name to one split: train (94%), validation (3%), or prompt (3%). The prompt documents
give the held-out prompt set: the opening words (a whole number of words, about PROMPT_CHARS characters)
of paragraphs picked by hash, a fixed number per source. Validation and prompt documents are never
trained on (neither the tokenizer nor the model sees them).

Output (--out, default /tmp/trained/corpus):
  train.jsonl, validation.jsonl   one {"source", "name", "text"} per line
  prompts.json                    [{"source", "name", "text"}] (the held-out prompts)
  stats.json                      sizes per source and split, package versions
With --test-data DIR it also writes DIR/prompts.json and DIR/validation_sample.json (the first validation
documents of each source, up to SAMPLE_CHARS characters per source), small enough to commit.

Needs the packages above (tools/setup.sh installs them with AERIE_SETUP_REFERENCE=1) and Rscript, which
r-cran-janeaustenr depends on, to read the novels out of the R package.

  /usr/bin/python3 tools/gen/trained/make_corpus.py [--out DIR] [--test-data tests/data/trained]
"""
import argparse
import gzip
import hashlib
import json
import os
import re
import subprocess
import sys

AUSTEN_BOOKS = ["sensesensibility", "prideprejudice", "mansfieldpark", "emma", "northangerabbey", "persuasion"]
JARGON_FILE = "/usr/share/doc/jargon-text/jargon.txt.gz"
DEVIL_DICT, DEVIL_INDEX = "/usr/share/dictd/devil.dict.dz", "/usr/share/dictd/devil.index"
# Books of the KJV kept (about 1.5 MB of its 4.3 MB), as `bible` names them; the range reaches the end.
KJV_BOOKS = ["Gen", "Exo", "Ruth", "Esth", "Job", "Ps", "Prov", "Eccl", "Matt", "Mark", "Luke", "John", "Acts"]
PACKAGES = ["r-cran-janeaustenr", "jargon-text", "dict-devil", "bible-kjv-text", "bible-kjv"]

DOC_CHARS = 2000  # dictionary-like sources are grouped into documents of at least this many characters
SPLITS = [("validation", 0.03), ("prompt", 0.03)]  # the rest is train
PROMPTS_PER_SOURCE = {"austen": 32, "jargon": 14, "devil": 8, "kjv": 10}  # 64 in all
PROMPT_CHARS = 200  # about 40-50 tokens of English
SAMPLE_CHARS = 12000


# ---- cleaning helpers --------------------------------------------------------------------------------------
def paragraphs(lines):
    """Blank-line separated blocks of lines."""
    block = []
    for line in lines:
        if line.strip():
            block.append(line.rstrip())
        elif block:
            yield block
            block = []
    if block:
        yield block


def join_block(block, keep_indented_lines=True):
    """One paragraph: lines joined by single spaces. A block whose lines are indented unevenly (verse,
    code, examples) keeps its line breaks, each line stripped."""
    indents = {len(line) - len(line.lstrip(" ")) for line in block}
    if keep_indented_lines and len(indents) > 1 and len(block) > 1:
        return "\n".join(re.sub(r"\s+", " ", line.strip()) for line in block)
    return re.sub(r"\s+", " ", " ".join(line.strip() for line in block)).strip()


def stable_unit(key):
    """A number in [0, 1) fixed by `key` (split assignment and prompt picking)."""
    return int.from_bytes(hashlib.sha256(key.encode("utf-8")).digest()[:8], "big") / 2.0 ** 64


def group(source, units, min_chars=DOC_CHARS):
    """Consecutive text units (entries) -> documents of at least min_chars, named source:first-unit-index."""
    docs, current, first = [], [], 0
    for i, unit in enumerate(units):
        if not current:
            first = i
        current.append(unit)
        if sum(len(u) for u in current) >= min_chars:
            docs.append({"source": source, "name": f"{source}:{first:05d}", "text": "\n\n".join(current)})
            current = []
    if current:
        docs.append({"source": source, "name": f"{source}:{first:05d}", "text": "\n\n".join(current)})
    return docs


# ---- sources ---------------------------------------------------------------------------------------------------
def austen_documents():
    """One document per chapter (and the front matter of Northanger Abbey), without the headings."""
    script = ("library(janeaustenr); for (b in c(%s)) { cat('\\x01', b, '\\n', sep=''); writeLines(enc2utf8(get(b))) }"
              % ",".join(f"'{b}'" for b in AUSTEN_BOOKS))
    out = subprocess.run(["Rscript", "-e", script], check=True, capture_output=True).stdout.decode("utf-8")
    docs = []
    for part in out.split("\x01")[1:]:
        book, _, body = part.partition("\n")
        chapters, current = [], None
        for block in paragraphs(body.split("\n")):
            text = join_block(block, keep_indented_lines=False)
            if re.fullmatch(r"(CHAPTER|Chapter) [0-9IVXLC]+\.?", text):
                current = []
                chapters.append(current)
                continue
            # Titles, "VOLUME II", "THE END", "(1814)", "By Jane Austen" and the like.
            if text.upper() == text or re.fullmatch(r"(\(\d{4}\)|[Bb]y( Jane Austen( \(\d{4}\))?)?|Jane Austen.*)", text):
                continue
            if current is None:  # front matter before the first chapter
                current = []
                chapters.append(current)
            current.append(text.replace("_", ""))
        for i, chapter in enumerate(chapters):
            if chapter:
                docs.append({"source": "austen", "name": f"austen:{book}:{i:03d}", "text": "\n\n".join(chapter)})
    return docs


def jargon_documents():
    """The Jargon File from its welcome page on: introduction, lexicon entries, appendices."""
    with gzip.open(JARGON_FILE, "rt", encoding="utf-8") as f:
        lines = f.read().split("\n")
    start = next(i for i, line in enumerate(lines) if line.strip() == "Welcome to the Jargon File"
                 and line.startswith(" " * 10))
    blocks = [b for b in paragraphs(lines[start + 1:]) if not re.search(r"[\u2500-\u257f]", "".join(b))]
    # A list of contents is a run of one-line blocks without sentence punctuation; headings stand alone.
    short = [len(b) == 1 and len(b[0].strip()) < 60 and not re.search(r"[.?!;:)\u201d\"]$", b[0].strip())
             for b in blocks]
    units, entry = [], []
    for i, block in enumerate(blocks):
        if short[i] and sum(short[max(0, i - 2):i + 3]) >= 3:
            continue
        text = re.sub(r"\{([^{}]*)\}", r"\1", join_block(block))
        if text.startswith(":") and entry:  # a lexicon entry begins: ":term: n."
            units.append("\n\n".join(entry))
            entry = []
        entry.append(re.sub(r"^:([^:]+):", r"\1:", text))
    units.append("\n\n".join(entry))
    return group("jargon", units)


def devil_documents():
    """The dictionary's preface and entries in file order; verse keeps its lines."""
    digits = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"  # dictd's offset digits

    def number(text):
        n = 0
        for ch in text:
            n = n * 64 + digits.index(ch)
        return n

    with gzip.open(DEVIL_DICT, "rb") as f:
        data = f.read()
    spans, info = set(), None
    with open(DEVIL_INDEX, encoding="utf-8") as f:
        for line in f:
            word, offset, length = line.rstrip("\n").split("\t")
            span = (number(offset), number(length))
            if word == "00databaseinfo":
                info = span
            elif not word.startswith("00database"):
                spans.add(span)
    units = []
    # The preface is stored in the database's info entry, after the edition's title page.
    info_text = data[info[0]:info[0] + info[1]].decode("utf-8")
    preface = info_text[info_text.index("PREFACE") + len("PREFACE"):]
    units.append("\n\n".join(join_block(b) for b in paragraphs(preface.split("\n"))))
    for offset, length in sorted(spans):
        text = data[offset:offset + length].decode("utf-8")
        blocks = [join_block(b) for b in paragraphs(text.split("\n"))]
        units.append(re.sub(r"\{([^{}]*)\}", r"\1", "\n\n".join(b for b in blocks if b)))
    return group("devil", units)


def kjv_documents():
    """One document per chapter, one verse per line, references removed."""
    docs = []
    for book in KJV_BOOKS:
        out = subprocess.run(["bible", "-f", f"{book}1:1-150:176"], check=True, capture_output=True).stdout
        chapters = {}
        for line in out.decode("utf-8").split("\n"):
            m = re.match(r"(\w+?)(\d+):(\d+) (.*)", line)
            if m:
                chapters.setdefault(int(m.group(2)), []).append(m.group(4).strip())
        for number, verses in sorted(chapters.items()):
            docs.append({"source": "kjv", "name": f"kjv:{book}:{number:03d}", "text": "\n".join(verses)})
    return docs


# ---- splits and prompts ----------------------------------------------------------------------------------------
def split_of(doc):
    u, edge = stable_unit("split:" + doc["name"]), 0.0
    for name, share in SPLITS:
        edge += share
        if u < edge:
            return name
    return "train"


def prompt_of(paragraph):
    """The paragraph's opening words, about PROMPT_CHARS characters (line breaks kept, as trained on), or
    None when the paragraph is too short to go on well past them."""
    if len(paragraph) < PROMPT_CHARS + 40 or not re.match(r"[A-Za-z\"\u201c']", paragraph):
        return None
    cut = max(paragraph.rfind(" ", 0, PROMPT_CHARS), paragraph.rfind("\n", 0, PROMPT_CHARS))
    return paragraph[:cut]


def pick_prompts(prompt_docs):
    prompts = []
    for source, count in PROMPTS_PER_SOURCE.items():
        candidates = []
        for doc in prompt_docs:
            if doc["source"] != source:
                continue
            for k, para in enumerate(doc["text"].split("\n\n")):
                text = prompt_of(para)
                if text:
                    name = f"{doc['name']}:p{k}"
                    candidates.append((stable_unit("prompt:" + name), name, text))
        candidates.sort()
        if len(candidates) < count:
            raise SystemExit(f"{source}: only {len(candidates)} prompt candidates, need {count}")
        prompts += [{"source": source, "name": name, "text": text} for _, name, text in sorted(candidates[:count], key=lambda c: c[1])]
    return prompts


def package_versions():
    out = subprocess.run(["dpkg-query", "-W", "-f", "${Package} ${Version}\\n", *PACKAGES],
                         capture_output=True, text=True).stdout
    return dict(line.split(" ", 1) for line in out.strip().split("\n") if line)


def write_jsonl(path, docs):
    with open(path, "w", encoding="utf-8") as f:
        for doc in docs:
            f.write(json.dumps(doc, ensure_ascii=False) + "\n")


def write_json(path, value):
    with open(path, "w", encoding="utf-8") as f:
        json.dump(value, f, ensure_ascii=False, indent=1)
        f.write("\n")


def main(argv):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", default="/tmp/trained/corpus")
    p.add_argument("--test-data", help="also write prompts.json and validation_sample.json here")
    args = p.parse_args(argv)

    docs = austen_documents() + jargon_documents() + devil_documents() + kjv_documents()
    by_split = {"train": [], "validation": [], "prompt": []}
    for doc in docs:
        by_split[split_of(doc)].append(doc)
    prompts = pick_prompts(by_split["prompt"])

    os.makedirs(args.out, exist_ok=True)
    write_jsonl(os.path.join(args.out, "train.jsonl"), by_split["train"])
    write_jsonl(os.path.join(args.out, "validation.jsonl"), by_split["validation"])
    write_json(os.path.join(args.out, "prompts.json"), prompts)
    stats = {"packages": package_versions(), "sources": {}}
    for split, split_docs in by_split.items():
        for doc in split_docs:
            s = stats["sources"].setdefault(doc["source"], {})
            entry = s.setdefault(split, {"documents": 0, "characters": 0})
            entry["documents"] += 1
            entry["characters"] += len(doc["text"])
    write_json(os.path.join(args.out, "stats.json"), stats)
    if args.test_data:
        os.makedirs(args.test_data, exist_ok=True)
        write_json(os.path.join(args.test_data, "prompts.json"), prompts)
        sample = []
        for source in PROMPTS_PER_SOURCE:
            used = 0
            for doc in by_split["validation"]:
                if doc["source"] == source and used < SAMPLE_CHARS:
                    text = doc["text"][:SAMPLE_CHARS - used]
                    sample.append({"source": source, "name": doc["name"], "text": text})
                    used += len(text)
        write_json(os.path.join(args.test_data, "validation_sample.json"), sample)
    for source, s in stats["sources"].items():
        print(source, " ".join(f"{k}: {v['documents']} docs {v['characters'] / 1e6:.2f} MB" for k, v in s.items()))
    print(f"{len(prompts)} prompts -> {args.out}")


if __name__ == "__main__":
    main(sys.argv[1:])
