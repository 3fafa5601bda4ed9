#!/bin/sh
# check-layering.sh: enforce the include rules of STYLE.md §1 that the
# per-folder static libraries cannot (system headers are always visible).
#   jansson.h only in proto/; uv.h and microhttpd.h only in daemon/;
#   CUDA and cuDNN headers only in engine/cudnn/ (and never in its headers
#   other than .c files); nothing includes daemon/; proto/ includes nothing of
#   engine/ or daemon/; clients/ includes proto/ only (not engine/), and
#   curl/curl.h appears only in clients/.
set -u
root=${1:-.}
cd "$root" || exit 2
bad=0
fail() { echo "layering: $*"; bad=1; }

src=$(git ls-files '*.c' '*.h' 2>/dev/null || find . -name '*.[ch]' | sed 's|^\./||')
for f in $src; do
  case "$f" in tests/*) continue ;; esac
  inc=$(grep -E '^[[:space:]]*#[[:space:]]*include' "$f")
  echo "$inc" | grep -q 'jansson\.h' && case "$f" in proto/*) ;; *) fail "$f includes jansson.h (proto/ only)" ;; esac
  echo "$inc" | grep -Eq '[<"](uv|microhttpd)\.h' && case "$f" in daemon/*) ;; *) fail "$f includes uv.h or microhttpd.h (daemon/ only)" ;; esac
  if echo "$inc" | grep -Eq '[<"](cuda[a-z_]*|cudnn[a-z_]*|cublas[a-z_v2]*)\.h>'; then
    case "$f" in engine/cudnn/*.c|engine/cudnn/*-int.h) ;; *) fail "$f includes a CUDA/cuDNN header (engine/cudnn/*.c only)" ;; esac
  fi
  case "$f" in daemon/*) ;; *) echo "$inc" | grep -q '"daemon/' && fail "$f includes daemon/" ;; esac
  echo "$inc" | grep -q '<curl/' && case "$f" in clients/*) ;; *) fail "$f includes a libcurl header (clients/ only)" ;; esac
  case "$f" in clients/*)
    echo "$inc" | grep -Eq '"(engine/|\.\./)' && fail "$f includes engine/ or a parent folder (clients/ -> proto/ only)"
    for h in $(echo "$inc" | sed -n 's/^[[:space:]]*#[[:space:]]*include[[:space:]]*"\([^"]*\)".*/\1/p'); do
      [ -f "clients/$h" ] || [ -f "proto/$h" ] || [ "$h" = rnnd-config.h ] ||
        fail "$f includes \"$h\", which is not in clients/ or proto/"
    done ;;
  esac
done
exit $bad
