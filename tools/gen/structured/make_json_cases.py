#!/usr/bin/env python3
"""Writes tests/data/sample/json_cases.json: byte strings labelled valid/invalid JSON documents, for the
JSON matcher test (tests/grammar/json_matcher_test.cpp). Python's json module is the reference; the file is
committed so the test needs no Python.

    python3 tools/gen/structured/make_json_cases.py [--out tests/data/sample/json_cases.json] [--seed 1]

`valid` is what the matcher must answer: Python's verdict (strict json.loads of the strictly decoded UTF-8,
NaN/Infinity refused) plus aerie's documented output policy (src/grammar/json_grammar.h), which is stricter
in five ways: no lone surrogate escapes, no whitespace before or after the top-level value, at most 16
whitespace bytes in a row, at most 62 levels of nesting. `python_json` keeps Python's own verdict. Hand-written
invalid cases also carry `refused_at`: the offset of the first byte the matcher must refuse (the length of
the text when every byte is a viable prefix but the document is incomplete).
"""
import argparse
import json
import random

MAX_WHITESPACE = 16
MAX_NESTING = 62


def reject_constant(name):
    raise ValueError("non-finite constant " + name)


def python_json_valid(data: bytes) -> bool:
    try:
        text = data.decode("utf-8")  # strict: no overlongs, no encoded surrogates
        json.loads(text, parse_constant=reject_constant)
        return True
    except (UnicodeDecodeError, ValueError):
        return False


def has_lone_surrogate(value) -> bool:
    if isinstance(value, str):
        try:
            value.encode("utf-8")
            return False
        except UnicodeEncodeError:
            return True
    if isinstance(value, list):
        return any(has_lone_surrogate(v) for v in value)
    if isinstance(value, dict):
        return any(has_lone_surrogate(k) or has_lone_surrogate(v) for k, v in value.items())
    return False


def layout_limits(text: str):
    """Longest whitespace run and deepest nesting outside strings."""
    longest = run = depth = deepest = 0
    in_string = escaped = False
    for c in text:
        if in_string:
            if escaped:
                escaped = False
            elif c == "\\":
                escaped = True
            elif c == '"':
                in_string = False
            continue
        if c in " \t\n\r":
            run += 1
            longest = max(longest, run)
            continue
        run = 0
        if c == '"':
            in_string = True
        elif c in "[{":
            depth += 1
            deepest = max(deepest, depth)
        elif c in "]}":
            depth -= 1
    return longest, deepest


def aerie_valid(data: bytes) -> bool:
    if not python_json_valid(data):
        return False
    text = data.decode("utf-8")
    if text != text.strip(" \t\n\r"):
        return False
    if has_lone_surrogate(json.loads(text)):
        return False
    longest, deepest = layout_limits(text)
    return longest <= MAX_WHITESPACE and deepest <= MAX_NESTING


# (text, refused_at or None) for invalid ones; None as the second item for valid ones.
HAND_CASES = [
    ('{"a":1 , "b":[true,false,null]}', None),
    ('[1.5e3, -0.0, 0e0, 1E+2, 1e-2, -12.75E-0, 0.000]', None),
    ('"\\ud83d\\ude00 \\u00e9 \\/ \\" \\\\ \\b\\f\\n\\r\\t"', None),
    ('"\u00e9\u20ac\U0001F600\u07ff\uffff\U0010ffff"', None),
    ('{"nested": {"deep": [[[]], {}]}}', None),
    ('""', None),
    ('0', None),
    ('-0', None),
    ('123456789012345678901234567890', None),
    ('true', None),
    ('null', None),
    ('{}', None),
    ('[]', None),
    ('[\n  1,\n  2\n]', None),
    ('{"a":{"a":{"a":{"a":1}}}}', None),
    ('{"a":1,"a":2}', None),
    ('[' * 60 + ']' * 60, None),
    ('[1,]', 3),
    ('{"a":1,}', 7),
    ('01', 1),
    ('-01', 2),
    ('1.', 2),
    ('1.e5', 2),
    ('.5', 0),
    ('+1', 0),
    ('1e', 2),
    ('1e+', 3),
    ('--1', 1),
    ('-', 1),
    ('0x10', 1),
    ('1_000', 1),
    ('[1 2]', 3),
    ('{"a" 1}', 5),
    ('{a:1}', 1),
    ('{"a":}', 5),
    ('{,}', 1),
    ('[,1]', 1),
    ('{"a":1}}', 7),
    ('[]]', 2),
    ('{"a":1 "b":2}', 7),
    ('[1,2', 4),
    ('', 0),
    ('tru', 3),
    ('trux', 3),
    ('nul', 3),
    ('True', 0),
    ('NaN', 0),
    ('Infinity', 0),
    ('-Infinity', 1),
    ("'a'", 0),
    ('\ufeff{}', 0),
    ('"\\x"', 2),
    ('"\\u12G4"', 5),
    ('"\\U0041"', 2),
    ('"abc', 4),
    ('"a\x01b"', 2),
    ('"tab\there"', 4),
    ('"line\nbreak"', 5),
    ('"\x7f"', None),
    # Lone surrogate escapes (Python accepts them; aerie refuses: they cannot become UTF-8).
    ('"\\ud800"', 7),
    ('"\\udc00"', 4),
    ('"\\ud800\\u0041"', 9),
    ('"\\ud800x"', 7),
    # Whitespace around the document and long whitespace runs (Python accepts; aerie's bound).
    ('1 ', 1),
    ('{} ', 2),
    (' 1', 0),
    ('\n{}', 0),
    ('[' + ' ' * 17 + ']', 17),
    ('[' + ' ' * 16 + ']', None),
    # Nesting beyond the stack (Python accepts).
    ('[' * 100 + ']' * 100, 63),
]

# Invalid UTF-8 inside strings (bytes, refused_at).
BYTE_CASES = [
    (b'"\xff"', 1),
    (b'"\xc0\x80"', 1),
    (b'"\xc1\xbf"', 1),
    (b'"\x80"', 1),
    (b'"\xe0\x80\x80"', 2),
    (b'"\xed\xa0\x80"', 2),
    (b'"\xf0\x80\x80\x80"', 2),
    (b'"\xf4\x90\x80\x80"', 2),
    (b'"\xf5\x80\x80\x80"', 1),
    (b'"\xc3"', 2),
    (b'"\xe2\x82"', 3),
    (b'"\xe2\x82\xac"', None),
    (b'"\xf0\x9f\x98\x80"', None),
    (b'"\xed\x9f\xbf"', None),
    (b'{"\xc3\xa9":1}', None),
    (b'{"\xc3":1}', 3),
]


def random_string(rng: random.Random) -> str:
    pool = "abcxyz ABC019_-.,:;{}[]\"\\/\t\n\u00e9\u00df\u20ac\u4e2d\U0001F600\u0001\u001f\u2028"
    return "".join(rng.choice(pool) for _ in range(rng.randint(0, 8)))


def random_number(rng: random.Random):
    kind = rng.randint(0, 3)
    if kind == 0:
        return rng.randint(-5, 5)
    if kind == 1:
        return rng.randint(-10**20, 10**20)
    if kind == 2:
        return round(rng.uniform(-1000, 1000), rng.randint(0, 6))
    return rng.choice([1e-7, 6.02e23, -2.5e-300, 0.0, -0.0, 1e300])


def random_value(rng: random.Random, depth: int):
    choice = rng.randint(0, 9 if depth < 5 else 5)
    if choice <= 1:
        return random_string(rng)
    if choice <= 3:
        return random_number(rng)
    if choice == 4:
        return rng.choice([True, False, None])
    if choice == 5:
        return random_string(rng)
    if choice <= 7:
        return [random_value(rng, depth + 1) for _ in range(rng.randint(0, 4))]
    return {random_string(rng): random_value(rng, depth + 1) for _ in range(rng.randint(0, 4))}


def random_document(rng: random.Random) -> bytes:
    value = random_value(rng, 0)
    indent = rng.choice([None, None, 0, 1, 2, 4, "\t"])
    separators = rng.choice([(",", ":"), (", ", ": "), (" , ", " : "), (",\n", ":\t")])
    text = json.dumps(value, ensure_ascii=rng.random() < 0.5, indent=indent,
                      separators=None if indent is not None else separators)
    if rng.random() < 0.2:
        text = rng.choice([" ", "\n", "\r\n\t"]) + text
    return text.encode("utf-8")


def mutate(rng: random.Random, data: bytes) -> bytes:
    interesting = b'{}[],:"\\ \t\n0123456789-+.eEtrufalsn\x00\x1f\x7f\x80\xc3\xe2\xed\xf0\xff'
    i = rng.randint(0, len(data))
    kind = rng.randint(0, 3)
    if kind == 0 and i < len(data):
        return data[:i] + data[i + 1:]
    if kind == 1:
        return data[:i] + bytes([rng.choice(interesting)]) + data[i:]
    if kind == 2 and i < len(data):
        return data[:i] + bytes([rng.choice(interesting)]) + data[i + 1:]
    return data[:i]


def entry(data: bytes, note: str, refused_at=None):
    item = {}
    try:
        item["text"] = data.decode("utf-8")
    except UnicodeDecodeError:
        item["hex"] = data.hex()
    item["valid"] = aerie_valid(data)
    item["python_json"] = python_json_valid(data)
    if refused_at is not None:
        item["refused_at"] = refused_at
    item["note"] = note
    return item


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", default="tests/data/sample/json_cases.json")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--random", type=int, default=300, help="random documents (each also mutated twice)")
    args = parser.parse_args()

    cases = []
    for text, refused_at in HAND_CASES:
        cases.append(entry(text.encode("utf-8"), "hand", refused_at))
    for data, refused_at in BYTE_CASES:
        cases.append(entry(data, "hand, bytes", refused_at))
    for c in cases:  # the hand labels agree with the reference
        assert c["valid"] == ("refused_at" not in c), c
    rng = random.Random(args.seed)
    for _ in range(args.random):
        document = random_document(rng)
        cases.append(entry(document, "random"))
        assert cases[-1]["python_json"], document  # valid JSON; aerie's layout policy may refuse it
        for _ in range(2):
            cases.append(entry(mutate(rng, document), "random, mutated"))
    with open(args.out, "w", encoding="utf-8") as f:
        json.dump({"generator": "tools/gen/structured/make_json_cases.py --seed %d --random %d" % (args.seed, args.random),
                   "cases": cases}, f, ensure_ascii=False, indent=0)
        f.write("\n")
    n_valid = sum(c["valid"] for c in cases)
    print("%s: %d cases, %d valid" % (args.out, len(cases), n_valid))


if __name__ == "__main__":
    main()
