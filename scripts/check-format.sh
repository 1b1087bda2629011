#!/usr/bin/env bash
# Fails, naming each file and line, when a C or C++ source differs from what clang-format
# makes of it under the project's .clang-format (Google style, 100 columns). test.sh runs it
# first, so a change that is not formatted is refused in seconds rather than after the build.
# Fix: scripts/check-format.sh --fix (formats every tracked source in place).
# The version is Debian 12's clang-format 14: another version may format some lines
# differently, which is why CI and this script use the same package.
set -euo pipefail
cd "$(dirname "$0")/.."
mode=(--dry-run -Werror)
[[ ${1:-} == --fix ]] && mode=(-i)
if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
  mapfile -t files < <(git ls-files '*.cc' '*.h' '*.c')
else  # an unpacked source tree without .git
  mapfile -t files < <(find . -path ./build\* -prune -o \( -name '*.cc' -o -name '*.h' -o -name '*.c' \) -print)
fi
clang-format -style=file "${mode[@]}" "${files[@]}"
