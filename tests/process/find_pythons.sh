#!/bin/sh
# find_pythons.sh MINOR...: the real path of one CPython 3.MINOR interpreter
# per minor version found here (on PATH, under pyenv, or in /usr/bin),
# joined by ':', for the tests of Python call sites. Shims are resolved by
# asking the interpreter itself.
found=""
for minor in "$@"; do
  candidates="python3.$minor /usr/bin/python3.$minor /usr/local/bin/python3.$minor"
  if command -v pyenv >/dev/null 2>&1; then
    root=$(pyenv root 2>/dev/null)
    candidates="$candidates $(ls -d "$root"/versions/3."$minor".*/bin/python3."$minor" 2>/dev/null)"
  fi
  for c in $candidates; do
    exe=$("$c" -c 'import sys; print(sys.executable)' 2>/dev/null) || continue
    [ -n "$exe" ] || continue
    found="${found:+$found:}$exe"
    break
  done
done
printf '%s' "$found"
