#!/usr/bin/env python3
"""Random ECMAScript patterns from aerie's supported subset (src/grammar/regex.h) and random texts, with
the verdict of Python's `re` as the reference: tests/data/regex/random_cases.json.

Each pattern is generated as a tree and written twice: in ECMAScript syntax (what aerie compiles) and as
an equivalent Python pattern (ECMAScript's `.`, \\d, \\w, \\s and $ spelled out, since Python's differ:
its `.` excludes only \\n, its \\s is not ECMAScript's set, and its $ also matches before a final \\n).
Texts are drawn from the pattern's own characters plus a few hard ones (multi-byte UTF-8, an astral
character, line terminators), half of them generated from the pattern so that matches are common.

    python3 tools/gen/regex/make_cases.py > tests/data/regex/random_cases.json
"""
import json
import random
import re
import sys

SPACE = [(0x09, 0x0D), (0x20, 0x20), (0xA0, 0xA0), (0x1680, 0x1680), (0x2000, 0x200A), (0x2028, 0x2029),
         (0x202F, 0x202F), (0x205F, 0x205F), (0x3000, 0x3000), (0xFEFF, 0xFEFF)]
DIGIT = [(0x30, 0x39)]
WORD = [(0x30, 0x39), (0x41, 0x5A), (0x5F, 0x5F), (0x61, 0x7A)]
LINE = [(0x0A, 0x0A), (0x0D, 0x0D), (0x2028, 0x2029)]
EXTRA = ['a', 'b', 'Z', '0', '9', '_', ' ', '\n', '\r', '\t', '-', '.', '\u00e9', '\u2028', '\u3000',
         '\u4e2d', '\U0001F600', '{', '}', '"', '\\']
LITERALS = "abcxyz019 -_.:/@é中😀\"\\{}[]()*+?|^$\t\n"


def py_char(c):
    return '\\U%08x' % ord(c)


def py_ranges(ranges, negate=False):
    body = ''.join(py_char(chr(lo)) if lo == hi else py_char(chr(lo)) + '-' + py_char(chr(hi)) for lo, hi in ranges)
    return '[' + ('^' if negate else '') + body + ']'


SPELLING = random.Random(5)  # how each character is written (escape or not): seeded, so the output is stable


def es_char(c, in_class=False):
    cp = ord(c)
    if cp < 0x20 or cp == 0x7F:
        return SPELLING.choice(['\\x%02x' % cp, '\\u%04x' % cp] + (['\\n'] if c == '\n' else []) + (['\\t'] if c == '\t' else []))
    special = '\\]^-[' if in_class else '^$\\.*+?()[]{}|/'
    if c in special:
        return '\\' + c
    if cp > 0xFFFF:
        return SPELLING.choice([c, '\\u{%x}' % cp, '\\u%04x\\u%04x' % (0xD800 + ((cp - 0x10000) >> 10), 0xDC00 + ((cp - 0x10000) & 0x3FF))])
    if cp > 0x7F and SPELLING.random() < 0.5:
        return '\\u%04x' % cp
    return c


class Gen:
    def __init__(self, rng):
        self.r = rng
        self.chars = set()

    def atom(self, depth):
        r = self.r
        k = r.random()
        if k < 0.35:
            c = r.choice(LITERALS)
            self.chars.add(c)
            return es_char(c), re.escape(c)
        if k < 0.45:
            return '.', py_ranges(LINE, negate=True)
        if k < 0.6:
            name, ranges = r.choice([('d', DIGIT), ('w', WORD), ('s', SPACE)])
            if r.random() < 0.5:
                return '\\' + name, py_ranges(ranges)
            return '\\' + name.upper(), py_ranges(ranges, negate=True)
        if k < 0.78:
            return self.char_class()
        if depth > 1:
            c = r.choice(LITERALS)
            self.chars.add(c)
            return es_char(c), re.escape(c)
        es, py = self.disjunction(depth + 1)
        kind = r.choice(['(', '(?:', '(?<g%d>' % r.randint(0, 99)])
        if kind.startswith('(?<'):
            return kind + es + ')', '(?:' + py + ')'
        return kind + es + ')', '(?:' + py + ')'

    def char_class(self):
        r = self.r
        negate = r.random() < 0.3
        es_items, py_items = [], []
        for _ in range(r.randint(1, 4)):
            k = r.random()
            if k < 0.2:
                name, ranges = r.choice([('d', DIGIT), ('w', WORD), ('s', SPACE)])
                es_items.append('\\' + name)
                py_items.append(py_ranges(ranges)[1:-1])
            elif k < 0.6:
                c = r.choice(LITERALS)
                self.chars.add(c)
                es_items.append(es_char(c, True))
                py_items.append(py_char(c))
            else:
                a, b = sorted([r.choice(LITERALS), r.choice(LITERALS)], key=ord)
                self.chars.update([a, b, chr((ord(a) + ord(b)) // 2)])
                es_items.append(es_char(a, True) + '-' + es_char(b, True))
                py_items.append(py_char(a) + '-' + py_char(b))
        hat = '^' if negate else ''
        return '[' + hat + ''.join(es_items) + ']', '[' + hat + ''.join(py_items) + ']'

    def quantifier(self):
        r = self.r
        k = r.random()
        if k < 0.5:
            return ''
        q = r.choice(['*', '+', '?', '{%d}' % r.randint(0, 3), '{%d,}' % r.randint(0, 2),
                      '{%d,%d}' % (lambda a: (a, a + r.randint(0, 3)))(r.randint(0, 2))])
        if r.random() < 0.2:
            q += '?'
        return q

    def alternative(self, depth):
        es, py = '', ''
        for _ in range(self.r.randint(0, 3)):
            a_es, a_py = self.atom(depth)
            q = self.quantifier()
            es += a_es + q
            py += a_py + q
        return es, py

    def disjunction(self, depth):
        parts = [self.alternative(depth) for _ in range(self.r.choice([1, 1, 1, 2, 3]))]
        return '|'.join(p[0] for p in parts), '|'.join(p[1] for p in parts)

    def pattern(self):
        parts = []
        for _ in range(self.r.choice([1, 1, 2])):
            es, py = self.alternative(0)
            if self.r.random() < 0.4:
                es, py = '^' + es, '\\A(?:' + py + ')'
            else:
                py = '(?:' + py + ')'
            if self.r.random() < 0.4:
                es, py = es + '$', py + '\\Z'
            parts.append((es, py))
        return '|'.join(p[0] for p in parts), '|'.join(p[1] for p in parts)


def random_text(rng, alphabet, py_full):
    # Half of the texts are built by rejection from short random strings; to get matches, try the empty
    # string and many short strings and keep a mix.
    n = rng.randint(0, 8)
    return ''.join(rng.choice(alphabet) for _ in range(n))


def main():
    rng = random.Random(41)
    out = []
    while len(out) < 600:
        g = Gen(rng)
        es, py = g.pattern()
        try:
            compiled = re.compile(py)
        except re.error:
            continue
        alphabet = sorted(g.chars | set(rng.sample(EXTRA, 8)))
        for mode in ['search', 'full']:
            test = compiled.search if mode == 'search' else compiled.fullmatch
            positives, negatives = [], []
            for _ in range(400):
                t = random_text(rng, alphabet, compiled)
                (positives if test(t) else negatives).append(t)
                if len(positives) >= 8 and len(negatives) >= 8:
                    break
            cases = [[t, True] for t in positives[:8]] + [[t, False] for t in negatives[:8]]
            out.append({'pattern': es, 'python': py, 'mode': mode, 'cases': cases})
    json.dump(out, sys.stdout, ensure_ascii=False, indent=0)
    sys.stdout.write('\n')


if __name__ == '__main__':
    main()
