#!/usr/bin/env bash
# Checks the C++ files changed against a git base (default HEAD~1; the working tree is what is checked)
# against .clang-format, without rewriting anything. Exits 1 and prints the changes clang-format wants when
# there are any; exits 0 with a message when clang-format is not installed (apt-get install clang-format).
#
#   tools/format_check.sh [--whole-files] [BASE] [-- PATH...]
#
# By default only the lines the change touched are checked (clang-format-diff), because the tree as a whole
# still differs from .clang-format in hand-wrapped lines (see the header of .clang-format), so a whole-file
# check would fail on lines nobody touched. --whole-files runs `clang-format --dry-run` over every changed
# file instead. PATHs limit the check to those files or folders (default: src/, tests/, bench/).
set -euo pipefail
cd "$(dirname "$0")/.."

whole=0
base=HEAD~1
paths=(src tests bench)
while [[ $# -gt 0 ]]; do
  case "$1" in
    --whole-files) whole=1; shift ;;
    --) shift; paths=("$@"); break ;;
    -h|--help) sed -n '2,11p' "$0"; exit 0 ;;
    *) base="$1"; shift ;;
  esac
done

formatter="$(command -v clang-format || true)"
if [[ -z "$formatter" ]]; then
  echo "format_check.sh: clang-format is not installed; skipping the format check"
  exit 0
fi
git rev-parse --verify --quiet "$base^{commit}" >/dev/null || { echo "format_check.sh: unknown git base '$base'" >&2; exit 2; }

# Changed (not deleted) C++ sources between the base and the working tree.
mapfile -t files < <(git diff --name-only --diff-filter=d "$base" -- "${paths[@]}" | grep -E '\.(cpp|cc|h|hpp)$' || true)
if [[ ${#files[@]} -eq 0 ]]; then
  echo "format_check.sh: no C++ files changed against $base"
  exit 0
fi

if [[ $whole -eq 1 ]]; then
  if clang-format --dry-run --Werror "${files[@]}"; then
    echo "format_check.sh: ${#files[@]} file(s) follow .clang-format"
    exit 0
  fi
  echo "format_check.sh: the files above differ from .clang-format (clang-format -i FILE rewrites one)" >&2
  exit 1
fi

diff_tool="$(command -v clang-format-diff || command -v clang-format-diff-14 || true)"
if [[ -z "$diff_tool" ]]; then
  echo "format_check.sh: clang-format-diff is not installed (it comes with clang-format); skipping"
  exit 0
fi
changes="$(git diff -U0 --no-color "$base" -- "${files[@]}" | "$diff_tool" -p1 -binary "$formatter")"
if [[ -z "$changes" ]]; then
  echo "format_check.sh: the changed lines of ${#files[@]} file(s) follow .clang-format"
  exit 0
fi
printf '%s\n' "$changes"
echo "format_check.sh: the changed lines above differ from .clang-format (git clang-format $base rewrites them)" >&2
exit 1
