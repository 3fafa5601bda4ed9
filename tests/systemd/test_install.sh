#!/bin/sh
# test_install.sh BUILD: `meson install --destdir` into a temporary tree (no
# root) and checks what lands there: the binary, the units, the sysusers and
# tmpfiles snippets, the config, the man pages (rnnd.conf(5) naming every
# setting of `rnnd --help`) and the demo models, and that they agree: the
# unit's --config is the installed config, whose model_repository is where
# the demo models are, which tmpfiles makes and sysusers' home holds; under
# the default prefix these are the README's /etc/rnnd/rnnd.conf and
# /var/lib/rnnd/models.  Then the same for a second prefix (/usr/local, or /usr
# when BUILD has another), configured afresh without tests (not in a
# sanitizer build: once is enough).
set -u
build=$1
src=${RNND_SRC:-$(cd "$(dirname "$0")/../.." && pwd)}
rc=0
fail() { echo "FAIL: $*"; rc=1; }

option() {
  meson introspect --buildoptions "$1" | python3 -c \
    'import json,sys; print([o["value"] for o in json.load(sys.stdin) if o["name"]==sys.argv[1]][0])' "$2"
}

# check_tree BUILD: installs BUILD into a temporary tree and checks it.
check_tree() {
  b=$1
  dest=$(mktemp -d) || exit 1
  prefix=$(option "$b" prefix)
  if ! meson install -C "$b" --no-rebuild --quiet --destdir "$dest" >"$dest.log" 2>&1; then
    fail "meson install ($prefix)"; cat "$dest.log"; rm -rf "$dest" "$dest.log"; return
  fi
  rm -f "$dest.log"
  root=$dest$prefix
  for f in bin/rnnd lib/systemd/system/rnnd.service lib/systemd/system/rnnd.socket \
           lib/systemd/system/rnnd@.service lib/systemd/system/rnnd@.socket \
           lib/sysusers.d/rnnd.conf lib/tmpfiles.d/rnnd.conf share/man/man8/rnnd.8 \
           share/man/man5/rnnd.conf.5; do
    [ -e "$root/$f" ] || fail "not installed: $prefix/$f"
  done
  # The unit's config, that config's repository, the demo models: one set of paths.
  unit=$root/lib/systemd/system/rnnd.service
  conf=$(sed -n "s|^ExecStart=$prefix/bin/rnnd --config \([^ ]*\)\$|\1|p" "$unit")
  [ -n "$conf" ] || fail "ExecStart does not run $prefix/bin/rnnd --config FILE: $(grep ^ExecStart= "$unit")"
  repo=$(sed -n 's/^model_repository = //p' "$dest$conf" 2>/dev/null)
  [ -f "$dest$conf" ] || fail "the unit's config $conf is not installed"
  case $repo in
  /*) ;;
  *) fail "the installed $conf serves '$repo', not an absolute path" ;;
  esac
  want=$(cd "$src/config/models" && find . -name config.json | sort)
  got=$(cd "$dest$repo" 2>/dev/null && find . -name config.json | sort)
  [ -n "$want" ] && [ "$want" = "$got" ] ||
    fail "the demo models are not all in $repo, the repository $conf serves: $got"
  [ -f "$dest$repo/digits_gru/1/model.safetensors" ] || fail "$repo/digits_gru/1/model.safetensors missing"
  # Only what serving needs: no training scripts, test sets, READMEs or symlinks.
  extra=$(cd "$dest$repo" 2>/dev/null && find . \( -name '*.py' -o -name README.md -o \
    -name test_set.json -o -type l \) -print | sort | tr '\n' ' ')
  [ -z "$extra" ] || fail "$repo holds files serving does not need: $extra"
  [ -x "$root/bin/rnnd-load" ] || fail "not installed: $prefix/bin/rnnd-load"
  tmpfiles=$root/lib/tmpfiles.d/rnnd.conf
  for line in "d ${conf%/*} " "z ${conf%/*}/token " "d $repo "; do
    grep -q "^$line" "$tmpfiles" || fail "tmpfiles has no '$line...' line"
  done
  grep -q "^u rnnd - \"rnnd model server\" ${repo%/*}\$" "$root/lib/sysusers.d/rnnd.conf" ||
    fail "sysusers' home is not ${repo%/*}"
  # A new user's first look: --help names the installed config, not another prefix's.
  "$root/bin/rnnd" --help | grep -qx "                  $conf" ||
    fail "rnnd --help does not name the installed config $conf"
  man5=$root/share/man/man5/rnnd.conf.5
  for p in "$conf" "$repo"; do
    # roff writes a path's - as \- (a prefix such as /opt/my-rnnd).
    r=$(printf '%s' "$p" | sed 's/-/\\\\-/g')
    grep -q "^\.I $r\$" "$root/share/man/man8/rnnd.8" || fail "rnnd(8) FILES does not name $p"
    grep -q "^\.I $r\$" "$man5" || fail "rnnd.conf(5) does not name $p"
  done
  # Under another prefix no page names the default one's paths.
  if [ "$prefix" != /usr ]; then
    for page in "$root/share/man/man8/rnnd.8" "$man5"; do
      ! grep -n -e '\(^\|[ (]\)/etc/rnnd' -e '\(^\|[ (]\)/var/lib/rnnd' "$page" ||
        fail "$page names /usr's paths under prefix $prefix"
    done
  fi
  # rnnd(8)'s SIGHUP list is the settings --dump-config marks Fixed, no more, no fewer.
  want=$("$root/bin/rnnd" --dump-config |
    awk '/^# Fixed:/ { f = 1 } /^[a-z_]+ = / { if (f) print $1; f = 0 }' | sort)
  got=$(sed -n '/^\.B SIGHUP/,/^\.TP/p' "$root/share/man/man8/rnnd.8" | sed 's/\\-/-/g' |
    tr -c 'a-z_\n' ' ' | tr ' ' '\n' | grep -x -F "$("$root/bin/rnnd" --help |
    sed -n 's/^  --\([a-z_]*\)=.*/\1/p')" | sort -u)
  [ -n "$want" ] && [ "$want" = "$got" ] ||
    { fail "rnnd(8)'s SIGHUP list differs from the Fixed settings:"; echo "want: $want" | tr '\n' ' ';
      echo; echo "got: $got" | tr '\n' ' '; echo; }
  if [ -n "$conf" ] && [ -f "$dest$conf" ]; then
    "$root/bin/rnnd" --config "$dest$conf" --dump-config | cmp -s - "$dest$conf" ||
      fail "the installed rnnd.conf is not what rnnd --dump-config prints for it"
  fi
  # What the README promises holds for the default prefix.
  if [ "$prefix" = /usr ]; then
    [ "$conf" = /etc/rnnd/rnnd.conf ] && [ "$repo" = /var/lib/rnnd/models ] ||
      fail "under /usr the config is $conf serving $repo, not /etc/rnnd/rnnd.conf and /var/lib/rnnd/models"
    for p in "$conf" "$repo"; do
      grep -q "$p" "$src/README.md" || fail "README.md does not name $p"
    done
  fi

  # rnnd.conf(5) names every setting --help lists, and nothing else.
  want=$("$root/bin/rnnd" --help | sed -n 's/^  --\([a-z_]*\)=.*/\1/p' | sort)
  got=$(sed -n '/^\.SH OPTIONS/,/^\.SH FILES/{/^\.B /s/^\.B //p}' "$man5" | sed 's/\\-/-/g' | sort)
  [ -n "$want" ] && [ "$want" = "$got" ] ||
    { fail "rnnd.conf(5) settings differ from --help:"; echo "want: $want" | tr '\n' ' '; echo;
      echo "got: $got" | tr '\n' ' '; echo; }
  if command -v man >/dev/null 2>&1; then
    for page in "$root/share/man/man8/rnnd.8" "$man5"; do
      warn=$(LC_ALL=C.UTF-8 MANROFFSEQ='' MANWIDTH=80 man --warnings -l "$page" 2>&1 >/dev/null)
      [ -z "$warn" ] || fail "roff warnings in $page: $warn"
    done
  fi
  echo "checked: install tree under $prefix: $conf serving $repo"
  rm -rf "$dest"
}

check_tree "$build"
sanitized=${RNND_SANITIZED:-none}
if [ "$sanitized" = none ] || [ -z "$sanitized" ]; then
  other=/usr/local
  [ "$(option "$build" prefix)" = /usr ] || other=/usr
  second=$(mktemp -d) || exit 1
  if meson setup "$second" "$src" --prefix="$other" -Dtests=false -Dcuda=disabled >"$second.log" 2>&1 &&
     ninja -C "$second" >>"$second.log" 2>&1; then
    check_tree "$second"
  else
    fail "meson setup --prefix=$other"; tail -20 "$second.log"
  fi
  rm -rf "$second" "$second.log"
fi
[ $rc -eq 0 ] && echo "ok: install trees"
exit $rc
