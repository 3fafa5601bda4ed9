#!/bin/sh
# check-layering.sh [--cycles BUILD] [ROOT]: enforce the layout of DESIGN.md §1
# where the per-folder static libraries cannot (system headers are always
# visible, and a library may call into another of the same folder freely).
#
# Always:
#   jansson.h only in proto/ and clients/ (the load client reads its spec and
#   model metadata); uv.h and microhttpd.h only in daemon/;
#   CUDA and cuDNN headers only in engine/cudnn/ (and never in its headers
#   other than .c files); nothing includes daemon/; proto/ includes nothing of
#   engine/ or daemon/; clients/ includes proto/ only (not engine/), and
#   curl/curl.h appears only in clients/.
#   No folder includes one above it: each quoted include of daemon/, engine/
#   and proto/ is found where the compiler finds it (the file's own folder,
#   its top folder, proto/, the project root), and the folder that holds it
#   must not be above the includer's in daemon -> engine -> proto.
#
# With --cycles BUILD (BUILD: a meson build folder where the libraries are
# built), also: the files of daemon/ and of engine/ form no cycle.  A node is a
# module, x.c with its public x.h (engine/cpu/cpu.c is engine/cpu/cpu); an
# internal x-int.h is a node of its own, since it may declare what several
# files of its folder define (engine/cpu/cpu-int.h), but its include of its own
# x.h is no edge.  An edge A -> B when a
# file of A includes a header of B, or A's object leaves undefined a global
# symbol that B's object defines.  The calls come from `nm`
# on the objects the compiler made, so they are every call, variable and
# function pointer the linker resolves between files, not a guess from the
# text; a call that stays inside one object is no edge.  tsort(1) finds the
# cycles.  Without CUDA the cuDNN backend's objects are absent and only its
# includes count.
set -u
cycles_build=
if [ "${1:-}" = --cycles ]; then
  cycles_build=$(cd "${2:?--cycles needs a build folder}" && pwd) || exit 2
  shift 2
fi
root=${1:-.}
cd "$root" || exit 2
bad=0
fail() { echo "layering: $*"; bad=1; }

# The layer of a path: daemon 2, engine 1, clients 1, proto 0.
layer() {
  case "$1" in daemon/*) echo 2 ;; engine/*|clients/*) echo 1 ;; proto/*) echo 0 ;; *) echo 0 ;; esac
}
# The path of the header h that file f includes as "h", or nothing.
resolve() {
  d=$(dirname "$1"); top=${1%%/*}
  for c in "$d/$2" "$top/$2" "proto/$2" "$2"; do
    [ -f "$c" ] && { echo "$c"; return; }
  done
}
quoted() { sed -n 's/^[[:space:]]*#[[:space:]]*include[[:space:]]*"\([^"]*\)".*/\1/p' "$1"; }

src=$(git ls-files '*.c' '*.h' 2>/dev/null || find . -name '*.[ch]' | sed 's|^\./||')
for f in $src; do
  case "$f" in tests/*) continue ;; esac
  inc=$(grep -E '^[[:space:]]*#[[:space:]]*include' "$f")
  echo "$inc" | grep -q 'jansson\.h' && case "$f" in proto/*|clients/*) ;; *) fail "$f includes jansson.h (proto/ and clients/ only)" ;; esac
  echo "$inc" | grep -Eq '[<"](uv|microhttpd)\.h' && case "$f" in daemon/*) ;; *) fail "$f includes uv.h or microhttpd.h (daemon/ only)" ;; esac
  if echo "$inc" | grep -Eq '[<"](cuda[a-z_]*|cudnn[a-z_]*|cublas[a-z_v2]*)\.h>'; then
    case "$f" in engine/cudnn/*.c|engine/cudnn/*-int.h) ;; *) fail "$f includes a CUDA/cuDNN header (engine/cudnn/*.c only)" ;; esac
  fi
  case "$f" in daemon/*) ;; *) echo "$inc" | grep -q '"daemon/' && fail "$f includes daemon/" ;; esac
  echo "$inc" | grep -q '<curl/' && case "$f" in clients/*) ;; *) fail "$f includes a libcurl header (clients/ only)" ;; esac
  case "$f" in clients/*)
    echo "$inc" | grep -Eq '"(engine/|\.\./)' && fail "$f includes engine/ or a parent folder (clients/ -> proto/ only)"
    for h in $(quoted "$f"); do
      [ -f "clients/$h" ] || [ -f "proto/$h" ] || [ "$h" = rnnd-config.h ] ||
        fail "$f includes \"$h\", which is not in clients/ or proto/"
    done ;;
  esac
  case "$f" in daemon/*|engine/*|proto/*)
    for h in $(quoted "$f"); do
      p=$(resolve "$f" "$h")
      [ -n "$p" ] && [ "$(layer "$p")" -gt "$(layer "$f")" ] &&
        fail "$f includes $p, a folder above its own (daemon -> engine -> proto)"
    done ;;
  esac
done

# The node of a source path: engine/cpu/cpu.h -> engine/cpu/cpu; x-int.h -> x-int.
node() { echo "${1%.*}"; }

# Edges "A B" among the modules of folder $1 (and its subfolders).
edges() {
  top=$1
  for f in $(git ls-files "$top/*.c" "$top/*.h" "$top/**/*.c" "$top/**/*.h" | sort -u); do
    for h in $(quoted "$f"); do
      p=$(resolve "$f" "$h")
      a=$(node "$f"); b=$(node "$p")
      # x-int.h includes its own x.h: one module's two faces, no edge.
      [ "$a" = "$b-int" ] && continue
      case "$p" in "$top"/*) echo "$a $b" ;; esac
    done
  done
  # Objects: meson names engine/cpu/cpu.c's object cpu_cpu.c.o; nvcc's kernels.o.
  objs=$(find "$cycles_build/$top" -name '*.o' | sort)
  [ -n "$objs" ] || { echo "layering: no objects under $cycles_build/$top (build first)" >&2; return 1; }
  for o in $objs; do
    b=$(basename "$o" .o); b=${b%.c}
    m=""
    for s in $(git ls-files "$top/*.c" "$top/*.cu"); do
      rel=${s#"$top"/}; key=$(echo "${rel%.*}" | tr / _)
      { [ "$key" = "$b" ] || [ "${key##*_}" = "$b" ]; } && { m=$(node "$s"); break; }
    done
    [ -n "$m" ] || continue
    nm -g "$o" 2>/dev/null | awk -v m="$m" '$1 == "U" { print "U", m, $2; next }
                                             NF == 3 { print "D", m, $3 }'
  done | awk '$1 == "D" { def[$3] = $2; next } { use[NR] = $2 " " $3 }
              END { for (i in use) { split(use[i], a, " "); if (a[2] in def) print a[1], def[a[2]] } }'
}

if [ -n "$cycles_build" ]; then
  for top in daemon engine; do
    e=$(edges "$top") || { bad=1; continue; }
    loops=$(echo "$e" | sort -u | awk '$1 != $2' | tsort 2>&1 >/dev/null | sed -n 's/^tsort: \([^:]*\)$/\1/p' | sort -u | tr '\n' ' ')
    [ -z "$loops" ] || fail "$top/ has a cycle among: $loops(edges: include or call; see the header of this script)"
  done
fi
exit $bad
