#!/bin/sh
# test_install.sh BUILD: `meson install --destdir` into a temporary tree (no
# root) and checks what lands there: the binary, the units, the sysusers and
# tmpfiles snippets, /etc/rnnd/rnnd.conf with the installed repository, the
# man pages (rnnd.conf(5) naming every setting of `rnnd --help`), and the
# demo models under /var/lib/rnnd/models.
set -u
build=$1
dest=$(mktemp -d) || exit 1
trap 'rm -rf "$dest"' EXIT
prefix=$(meson introspect --buildoptions "$build" | python3 -c \
  'import json,sys; print([o["value"] for o in json.load(sys.stdin) if o["name"]=="prefix"][0])')
if ! meson install -C "$build" --no-rebuild --quiet --destdir "$dest" >"$dest.log" 2>&1; then
  echo "FAIL: meson install"; cat "$dest.log"; rm -f "$dest.log"; exit 1
fi
rm -f "$dest.log"
root=$dest$prefix
rc=0
has() { [ -e "$1" ] || { echo "FAIL: not installed: ${1#$dest}"; rc=1; }; }
has "$root/bin/rnnd"
has "$root/lib/systemd/system/rnnd.service"
has "$root/lib/systemd/system/rnnd.socket"
has "$root/lib/systemd/system/rnnd@.service"
has "$root/lib/systemd/system/rnnd@.socket"
has "$root/lib/sysusers.d/rnnd.conf"
has "$root/lib/tmpfiles.d/rnnd.conf"
has "$root/share/man/man8/rnnd.8"
has "$root/share/man/man5/rnnd.conf.5"
conf=$(find "$dest" -path '*/rnnd/rnnd.conf' | head -1)
models=$(find "$dest" -path '*/lib/rnnd/models' -type d | head -1)
[ -n "$conf" ] || { echo "FAIL: no etc/rnnd/rnnd.conf installed"; rc=1; }
[ -n "$models" ] && [ -f "$models/digits_lstm/config.json" ] && [ -f "$models/digits_gru/1/model.safetensors" ] ||
  { echo "FAIL: the demo models are not under var/lib/rnnd/models"; rc=1; }
if [ -n "$conf" ]; then
  grep -qx 'model_repository = /var/lib/rnnd/models' "$conf" ||
    { echo "FAIL: the installed rnnd.conf does not use /var/lib/rnnd/models"; rc=1; }
  "$root/bin/rnnd" --config "$conf" --model_repository=/var/lib/rnnd/models --dump-config | cmp -s - "$conf" ||
    { echo "FAIL: the installed rnnd.conf is not what rnnd --dump-config prints for it"; rc=1; }
fi
grep -q "^ExecStart=$prefix/bin/rnnd --config " "$root/lib/systemd/system/rnnd.service" ||
  { echo "FAIL: ExecStart does not name the installed binary"; rc=1; }

# rnnd.conf(5) names every setting --help lists, and nothing else.
man5=$root/share/man/man5/rnnd.conf.5
want=$("$root/bin/rnnd" --help | sed -n 's/^  --\([a-z_]*\)=.*/\1/p' | sort)
got=$(sed -n '/^\.SH OPTIONS/,/^\.SH FILES/{/^\.B /s/^\.B //p}' "$man5" | sed 's/\\-/-/g' | sort)
[ -n "$want" ] && [ "$want" = "$got" ] ||
  { echo "FAIL: rnnd.conf(5) settings differ from --help:"; echo "want: $want" | tr '\n' ' '; echo;
    echo "got: $got" | tr '\n' ' '; echo; rc=1; }
if command -v man >/dev/null 2>&1; then
  for page in "$root/share/man/man8/rnnd.8" "$man5"; do
    warn=$(LC_ALL=C.UTF-8 MANROFFSEQ='' MANWIDTH=80 man --warnings -l "$page" 2>&1 >/dev/null)
    [ -z "$warn" ] || { echo "FAIL: roff warnings in $page: $warn"; rc=1; }
  done
fi
[ $rc -eq 0 ] && echo "ok: install tree under $prefix"
exit $rc
