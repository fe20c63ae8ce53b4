#!/usr/bin/env python3
"""The doc test: every command in README.md and docs/*.md runs, or at least parses (docs/testing.md).

  check_docs.py --aerie BUILD/aerie --source REPO --work DIR [--only FILE.md] [--no-run]

1. Every fenced ```sh block runs in bash (set -euo pipefail) in a scratch folder linking the source tree's
   build/, models/, tools/ and tests/, with aerie on PATH and the variables MODEL, DRAFT, DEEPSEEK, GGUF, TEXT
   and PORT naming small checkpoints the suite already has. It must exit 0 within its time limit.
2. A block whose first line is `# not run in CI: <reason>` is parsed instead: each `aerie <command> ...` in it
   must pass `aerie <command> <its arguments> --help` (every flag exists, every value is in range), each
   repository script it runs must exist, and the --flags given to a Python script must appear in its source.
3. Outside the sh blocks: `aerie <word>` in code must name a command; in a section headed `aerie <command>`,
   and in a code span that starts with `[aerie] <command> --`, every --flag must be that command's; any other
   --flag must belong to some aerie command, to a script under tools/, or to FOREIGN_FLAGS below.
4. Every relative link names a file that exists (and a heading of it, for an #anchor); docs/commands.md has a
   section for every command `aerie --help` lists; the README names `bash tools/test.sh`.
Exits 1 naming every failure with its file and line.
"""
import argparse
import os
import re
import shlex
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

# Flags of programs outside this repository that the docs name, and whose they are.
FOREIGN_FLAGS = {
    "--kl-divergence": "llama-perplexity",
    "--kl-divergence-base": "llama-perplexity",
    "--allow-run-as-root": "mpirun",
    "--oversubscribe": "mpirun",
    "--mca": "mpirun",
    "--preset": "cmake / ctest (and tools/gen/make_checkpoint.py)",
    "--build": "cmake",
    "--output-on-failure": "ctest",
    "--iters": "build/aerie-bench-comm",
}
NOT_RUN = re.compile(r"^#\s*not run in CI:\s*(\S.*)$")
FLAG = re.compile(r"(?<![\w-])--[a-z0-9][a-z0-9-]*")
BLOCK_TIMEOUT_S = 240


def help_flags(text):
    """The flags a --help text declares: the first option of each line that starts with one."""
    flags = set()
    for line in text.splitlines():
        m = re.match(r"\s+(?:-\w,\s*)?(--[a-z0-9][a-z0-9-]*)", line)
        if m:
            flags.add(m.group(1))
    return flags


class Aerie:
    def __init__(self, binary, env):
        self.binary = binary
        self.env = env
        out = subprocess.run([binary, "--help"], capture_output=True, text=True, env=env, timeout=60).stdout
        self.commands = []
        in_commands = False
        for line in out.splitlines():
            if line.startswith("commands:"):
                in_commands = True
            elif in_commands and (m := re.match(r"  ([a-z][a-z0-9-]*)\s", line)):
                self.commands.append(m.group(1))
        self.flags = {}
        for command in self.commands:
            text = subprocess.run([binary, command, "--help"], capture_output=True, text=True, env=env,
                                  timeout=60).stdout
            self.flags[command] = help_flags(text)
        self.all_flags = set().union(*self.flags.values()) if self.flags else set()

    def parses(self, args):
        """None when `aerie ARGS --help` exits 0, else its error."""
        r = subprocess.run([self.binary] + args + ["--help"], capture_output=True, text=True, env=self.env,
                           timeout=60)
        return None if r.returncode == 0 else (r.stderr.strip() or r.stdout.strip() or f"exit {r.returncode}")


class Block:
    def __init__(self, path, line, lang, lines, section):
        self.path, self.line, self.lang, self.lines, self.section = path, line, lang, lines, section

    @property
    def text(self):
        return "\n".join(self.lines) + "\n"

    def not_run_reason(self):
        first = next((l for l in self.lines if l.strip()), "")
        m = NOT_RUN.match(first.strip())
        return m.group(1) if m else None


def parse_markdown(path):
    """(fenced blocks, prose lines): prose as (line number, text, section heading)."""
    blocks, prose = [], []
    section = ""
    fence = None
    for number, line in enumerate(path.read_text().splitlines(), 1):
        if fence is None:
            m = re.match(r"^(```+)\s*([\w-]*)", line)
            if m:
                fence = Block(path, number, m.group(2), [], section)
                fence_marker = m.group(1)
                continue
            if h := re.match(r"^#{1,6}\s+(.*)", line):
                section = h.group(1)
            prose.append((number, line, section))
        elif line.startswith(fence_marker):
            blocks.append(fence)
            fence = None
        else:
            fence.lines.append(line)
    if fence is not None:
        raise SystemExit(f"{path}:{fence.line}: unclosed code fence")
    return blocks, prose


def section_command(section, aerie):
    m = re.search(r"\baerie ([a-z][a-z0-9-]*)", section)
    return m.group(1) if m and m.group(1) in aerie.commands else None


def script_flags(source):
    """Every --flag written in a script under tools/ (argparse and shell alike)."""
    flags = set()
    for path in (source / "tools").rglob("*"):
        if path.suffix in (".py", ".sh") and path.is_file():
            flags.update(FLAG.findall(path.read_text(errors="replace")))
    return flags


def check_flag_text(where, text, command, aerie, other_flags, errors):
    """--flags and `aerie <word>` in one stretch of prose or a non-shell block."""
    for m in re.finditer(r"(?<![\w/-])aerie\s+([a-z][a-z0-9-]*)", text):
        if m.group(1) not in aerie.commands and m.group(1) not in ("is", "looks", "rotates", "runs", "on"):
            errors.append(f"{where}: 'aerie {m.group(1)}' is not an aerie command ({', '.join(aerie.commands)})")
    for flag in FLAG.findall(text):
        if flag in FOREIGN_FLAGS:
            continue
        if command is not None:
            if flag not in aerie.flags[command]:
                errors.append(f"{where}: {flag} is not an option of 'aerie {command}'")
        elif flag not in aerie.all_flags and flag not in other_flags:
            errors.append(f"{where}: {flag} is not an option of any aerie command or tools/ script")


def check_prose(path, prose, aerie, other_flags, errors):
    for number, line, section in prose:
        command = section_command(section, aerie)
        where = f"{path}:{number}"
        spans = re.findall(r"`([^`]+)`", line)
        for span in spans:
            # A span that is a command line is held to that command's options.
            m = re.match(r"(?:(?:build/)?aerie\s+)?([a-z][a-z0-9-]*)\s+--", span)
            span_command = m.group(1) if m and m.group(1) in aerie.commands else None
            check_flag_text(where, span, span_command or command, aerie, other_flags, errors)
        rest = re.sub(r"`[^`]+`", "", line)
        for flag in FLAG.findall(rest):
            if flag in FOREIGN_FLAGS:
                continue
            known = aerie.flags[command] if command else aerie.all_flags | other_flags
            if flag not in known:
                errors.append(f"{where}: {flag} is not an option of {('aerie ' + command) if command else 'aerie'}")


def split_commands(text):
    """Shell command lines of a block, continuations joined, comments dropped."""
    joined = re.sub(r"\\\n", " ", text)
    commands = []
    for line in joined.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        lexer = shlex.shlex(line, posix=True, punctuation_chars=";&|<>")
        lexer.whitespace_split = True
        lexer.commenters = "#"
        try:
            tokens = list(lexer)
        except ValueError as e:
            commands.append(("error", str(e)))
            continue
        segment = []
        for token in tokens + [";"]:
            if token and set(token) <= set(";&|<>"):
                if segment:
                    commands.append(("ok", segment))
                segment = []
            else:
                segment.append(token)
    return commands


def parse_check(block, aerie, source, env, errors):
    """The checks of a block that is not run."""
    where = f"{block.path}:{block.line}"
    for status, tokens in split_commands(block.text):
        if status == "error":
            errors.append(f"{where}: shell syntax: {tokens}")
            continue
        tokens = [re.sub(r"\$\{?(\w+)\}?", lambda m: env.get(m.group(1), m.group(0)), t) for t in tokens]
        while tokens and re.match(r"^[A-Z_][A-Z0-9_]*=", tokens[0]):
            tokens = tokens[1:]
        if not tokens or tokens[0] == "!":
            continue  # nothing, or a command shown failing
        aerie_at = next((i for i, t in enumerate(tokens) if t == "aerie" or t.endswith("/aerie")), None)
        if aerie_at is not None:
            args = tokens[aerie_at + 1:]
            if not args or args[0] not in aerie.commands:
                errors.append(f"{where}: 'aerie {args[0] if args else ''}' is not an aerie command")
                continue
            if problem := aerie.parses(args):
                errors.append(f"{where}: 'aerie {' '.join(args)}' does not parse: {problem}")
            continue
        program = tokens[0]
        if program in ("python3", "/usr/bin/python3", "bash") and len(tokens) > 1:
            script = tokens[1]
            if script in ("-m", "-c"):
                continue  # a module (python3 -m pytest ...) or inline code: no script file to hold flags to
            if script.startswith("../"):
                continue  # outside the repository (../shared): nothing to hold it to
            path = source / script
            if not path.is_file():
                errors.append(f"{where}: {script} does not exist")
                continue
            text = path.read_text(errors="replace")
            for flag in (t.split("=")[0] for t in tokens[2:] if FLAG.fullmatch(t.split("=")[0])):
                if f'"{flag}"' not in text and f"'{flag}'" not in text and flag not in text:
                    errors.append(f"{where}: {script} has no option {flag}")


def slug(heading):
    """GitHub's anchor of a heading."""
    text = re.sub(r"[`*_\[\]()]", "", heading.strip().lower())
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def check_links(path, source, errors):
    """Every relative link names a file that exists, and a heading of it when it has an #anchor."""
    text = path.read_text()
    for number, line in enumerate(text.splitlines(), 1):
        for target in re.findall(r"\]\(([^)\s]+)\)", line):
            if re.match(r"[a-z]+://", target):
                continue
            file, _, anchor = target.partition("#")
            linked = (path.parent / file).resolve() if file else path
            where = f"{path.relative_to(source)}:{number}"
            if not linked.exists():
                errors.append(f"{where}: link to {target}: no such file")
            elif anchor and linked.suffix == ".md":
                headings = re.findall(r"^#{1,6}\s+(.*)$", linked.read_text(), re.M)
                if anchor not in {slug(h) for h in headings}:
                    errors.append(f"{where}: link to {target}: no such heading")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def prepare(work, source, build, env):
    """The scratch folder and the variables the blocks use."""
    work.mkdir(parents=True, exist_ok=True)
    for name, target in (("build", build), ("models", source / "models"), ("tools", source / "tools"),
                         ("tests", source / "tests")):
        link = work / name
        if link.is_symlink() or link.exists():
            link.unlink()
        link.symlink_to(target)
    text = work / "held_out.txt"
    import json
    samples = json.loads((source / "tests/data/trained/validation_sample.json").read_text())
    text.write_text("\n\n".join(s["text"] for s in samples[:8]))
    env.update({
        "MODEL": str(source / "models/aerie-tiny-llama"),
        "DRAFT": str(source / "models/aerie-tiny-llama-eagle3"),
        "DEEPSEEK": str(source / "models/aerie-tiny-deepseek"),
        "GGUF": str(source / "tests/data/gguf/llama_q8_0.gguf"),
        "TEXT": str(text),
        "PORT": str(free_port()),
        "PATH": f"{build}:{env['PATH']}",
    })


def run_block(block, work, env):
    """None when the block exits 0 in time, else what went wrong."""
    script = "set -euo pipefail\n" + block.text
    folder = work / f"{block.path.stem}.{block.line}"
    folder.mkdir(exist_ok=True)
    for name in ("build", "models", "tools", "tests"):
        if not (folder / name).exists():
            (folder / name).symlink_to((work / name).resolve())
    env = dict(env, PORT=str(free_port()))
    proc = subprocess.Popen(["bash", "-c", script], cwd=folder, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, start_new_session=True)
    try:
        out, _ = proc.communicate(timeout=BLOCK_TIMEOUT_S)
        problem = None if proc.returncode == 0 else f"exit {proc.returncode}"
    except subprocess.TimeoutExpired:
        problem = f"over {BLOCK_TIMEOUT_S} s"
        os.killpg(proc.pid, signal.SIGKILL)
        out, _ = proc.communicate()
    try:
        os.killpg(proc.pid, signal.SIGKILL)  # a server the block left behind
    except ProcessLookupError:
        pass
    return problem, out


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--aerie", required=True, type=Path)
    parser.add_argument("--source", required=True, type=Path)
    parser.add_argument("--work", required=True, type=Path)
    parser.add_argument("--only", help="one file (README.md or docs/NAME.md)")
    parser.add_argument("--no-run", action="store_true", help="parse every block, run none")
    args = parser.parse_args()
    source = args.source.resolve()
    build = args.aerie.resolve().parent
    env = dict(os.environ)
    env["PATH"] = "/usr/bin:" + env.get("PATH", "")  # Debian's python3 (numpy) before any other
    prepare(args.work.resolve(), source, build, env)
    aerie = Aerie(str(args.aerie.resolve()), env)
    errors = []
    if not aerie.commands:
        errors.append("aerie --help lists no commands")
    other_flags = script_flags(source)

    pages = [source / "README.md"] + sorted((source / "docs").glob("*.md"))
    if args.only:
        pages = [source / args.only]
    if "bash tools/test.sh" not in (source / "README.md").read_text():
        errors.append("README.md: does not name the test command `bash tools/test.sh`")
    commands_md = (source / "docs/commands.md").read_text()
    for command in aerie.commands:
        if not re.search(rf"^#+ aerie {re.escape(command)}\s*$", commands_md, re.M):
            errors.append(f"docs/commands.md: no section '## aerie {command}'")

    ran = parsed = 0
    start = time.monotonic()
    for page in pages:
        rel = page.relative_to(source)
        blocks, prose = parse_markdown(page)
        check_links(page, source, errors)
        check_prose(rel, prose, aerie, other_flags, errors)
        for block in blocks:
            where = f"{rel}:{block.line}"
            if block.lang != "sh":
                command = section_command(block.section, aerie)
                for offset, line in enumerate(block.lines, 1):
                    check_flag_text(f"{rel}:{block.line + offset}", line, command, aerie, other_flags, errors)
                continue
            block.path = rel
            if block.not_run_reason() is not None or args.no_run:
                parse_check(block, aerie, source, env, errors)
                parsed += 1
                continue
            t0 = time.monotonic()
            problem, out = run_block(block, args.work.resolve(), env)
            ran += 1
            print(f"{where}: {'ok' if problem is None else 'FAILED'} ({time.monotonic() - t0:.1f} s)", flush=True)
            if problem is not None:
                errors.append(f"{where}: the block failed ({problem}); its output:\n{out[-4000:]}")
    print(f"{ran} blocks run, {parsed} parsed only, {time.monotonic() - start:.0f} s")
    for e in errors:
        print("error:", e)
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
