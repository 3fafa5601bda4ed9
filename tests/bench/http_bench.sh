#!/bin/sh
# http_bench.sh BUILD [--duration D] [--connections "16 64"] [--modes "pinned unpinned"]
#                     [--quick]
#
# rnnd's HTTP front end under load, with nginx as the reference (DESIGN.md §9).
# Stdout is a markdown report (machine, date, versions, command, one table);
# progress and every raw wrk output go to stderr.
#
# It starts BUILD/daemon/rnnd (--listen=127.0.0.1:PORT --model_repository
# config/models --log_level=warning, on a free port) and an nginx that answers
# `location /health { return 200; }` from its own prefix in a temporary
# directory (its own nginx.conf, pid file, error log and temp paths; nothing
# under /etc/nginx or /var is read or written, and only 127.0.0.1 is used).
# Then, for each mode and each connection count, wrk -t1 -cC -dD --latency runs
# against:
#   nginx  GET  /health                          (the reference)
#   rnnd   GET  /v2/health/ready
#   rnnd   POST /v2/models/digits_lstm/infer     one image  (shape [1, 8, 8])
#   rnnd   POST /v2/models/digits_lstm/infer     8 images   (shape [8, 8, 8])
# The bodies are the first 1 and 8 images of config/models/digits_lstm/
# test_set.json, asking for the `scores` output only; wrk POSTs them through a
# Lua script (wrk.method, wrk.body, Content-Type: application/json).
#
# The machine may be shared: before each measured run the script waits (60 s at
# most) until it is quiet (under 0.15 CPU busy), and it measures a run again
# (3 tries at most) when other processes used more than 0.2 CPU during it;
# the table shows that load per row.
#
# Modes (the machine this was written for has 2 CPUs):
#   pinned    both servers started under `taskset -c 0`, wrk under `taskset -c 1`
#   unpinned  nobody pinned; wrk and the server share both CPUs
# Each server is started fresh for each mode, and each target gets a 2 s wrk
# warm-up before its measured runs.
#
# Before any load, every rnnd infer body is sent 20 times with curl: each
# answer must be 200, with scores of shape [B, 10] whose row 0 has its argmax
# at the first image's label; the same check runs once more after the load.
# The script stops (exit 1) when a check fails, so errors are never
# benchmarked, and exits 1 after the report when rnnd gave non-2xx answers or
# socket errors under load (the report then ends with the raw wrk output and
# the tail of rnnd's stderr).
#
# Columns: requests/s and the p50 / p99 latency come from wrk; seq/s is
# requests/s x images per request; "server CPU/req" is the server process's
# user + system CPU time (all threads, /proc/PID/stat) during the run divided
# by the requests wrk completed; "vs nginx" is the health row's requests/s
# over nginx's at the same mode and connection count.  When
# BUILD/tests/bench/rnnd-engine-bench exists, the time of the engine alone on
# the same shapes (batch 1 and 8, 8 steps, one thread) is printed below the
# table.
#
# Needs wrk, nginx (nginx-light will do), curl, python3 and taskset; as root
# it installs the missing Debian packages with apt-get, like `make deps`,
# otherwise it prints the apt-get command and exits.  All processes it starts
# are stopped on exit; the temporary directory is removed unless
# RNND_BENCH_KEEP=1.
set -eu

usage() {
  echo "usage: sh tests/bench/http_bench.sh BUILD [--duration D] [--connections \"16 64\"]" >&2
  echo "                                          [--modes \"pinned unpinned\"] [--quick]" >&2
  exit 2
}

[ $# -ge 1 ] || usage
case $1 in -*) usage ;; esac
build=$1
shift
cmdline="sh tests/bench/http_bench.sh $build${*:+ $*}"
duration=10s
conns="16 64"
modes="pinned unpinned"
warmup=2s
precheck_n=20
while [ $# -gt 0 ]; do
  case $1 in
    --duration) [ $# -ge 2 ] || usage; duration=$2; shift 2 ;;
    --connections) [ $# -ge 2 ] || usage; conns=$2; shift 2 ;;
    --modes) [ $# -ge 2 ] || usage; modes=$2; shift 2 ;;
    --quick) duration=3s; warmup=1s; precheck_n=5; shift ;;
    *) usage ;;
  esac
done
for m in $modes; do
  case $m in pinned | unpinned) ;; *) echo "http_bench.sh: unknown mode $m" >&2; exit 2 ;; esac
done

root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"
case $build in /*) ;; *) build=$root/$build ;; esac

log() { echo "http_bench.sh: $*" >&2; }

# --- Tools --------------------------------------------------------------------
missing=""
command -v wrk >/dev/null 2>&1 || missing="$missing wrk"
command -v nginx >/dev/null 2>&1 || [ -x /usr/sbin/nginx ] || missing="$missing nginx-light"
command -v curl >/dev/null 2>&1 || missing="$missing curl"
command -v python3 >/dev/null 2>&1 || missing="$missing python3"
command -v taskset >/dev/null 2>&1 || missing="$missing util-linux"
if [ -n "$missing" ]; then
  if [ "$(id -u)" = 0 ]; then
    log "installing:$missing"
    # shellcheck disable=SC2086 # one word per package
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $missing >/dev/null
  else
    echo "http_bench.sh needs these Debian packages; run:" >&2
    echo "  sudo apt-get install -y$missing" >&2
    exit 1
  fi
fi
nginx=$(command -v nginx 2>/dev/null || echo /usr/sbin/nginx)

# --- Build ----------------------------------------------------------------------
if [ ! -f "$build/build.ninja" ]; then
  log "meson setup $build -Dbuildtype=release"
  meson setup "$build" -Dbuildtype=release >&2
fi
ninja -C "$build" daemon/rnnd >&2
rnnd=$build/daemon/rnnd
engine_bench=$build/tests/bench/rnnd-engine-bench
ninja -C "$build" tests/bench/rnnd-engine-bench >&2 2>/dev/null || true
buildtype=$(meson introspect "$build" --buildoptions 2>/dev/null |
  python3 -c 'import json, sys; print(next(o["value"] for o in json.load(sys.stdin) if o["name"] == "buildtype"))' \
  2>/dev/null || echo unknown)
[ "$buildtype" = release ] || log "warning: $build is a '$buildtype' build, not release"

# --- Temporary directory and clean-up -------------------------------------------
tmp=$(mktemp -d "${TMPDIR:-/tmp}/rnnd-http-bench.XXXXXX")
pids=""
# shellcheck disable=SC2317 # called by the trap
cleanup() {
  for p in $pids; do
    kill "$p" 2>/dev/null || true
  done
  for p in $pids; do
    wait "$p" 2>/dev/null || true
  done
  pids=""
  if [ "${RNND_BENCH_KEEP:-0}" = 1 ]; then
    log "kept $tmp"
  else
    rm -rf "$tmp"
  fi
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM HUP

# Stops one process started here and forgets it.
stop() {
  kill "$1" 2>/dev/null || true
  wait "$1" 2>/dev/null || true
  rest=""
  for p in $pids; do [ "$p" = "$1" ] || rest="$rest $p"; done
  pids=$rest
}

free_port() {
  python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# Waits until URL answers 200 (10 s at most) while process PID lives.
wait_ready() {
  i=0
  while [ $i -lt 100 ]; do
    kill -0 "$2" 2>/dev/null || return 1
    code=$(curl -s -o /dev/null -w '%{http_code}' "$1" 2>/dev/null || true)
    [ "$code" = 200 ] && return 0
    sleep 0.1
    i=$((i + 1))
  done
  return 1
}

# --- Request bodies, wrk scripts, checker ------------------------------------------
python3 - "$root/config/models/digits_lstm/test_set.json" "$tmp" <<'EOF'
import json, sys
d = json.load(open(sys.argv[1]))
out = sys.argv[2]
with open(out + "/label0", "w") as f:
    f.write("%d\n" % d["y"][0])
for b in (1, 8):
    data = [v for img in d["x"][:b] for row in img for v in row]
    body = json.dumps({"inputs": [{"name": "input", "datatype": "FP32", "shape": [b, 8, 8],
                                   "data": data}],
                       "outputs": [{"name": "scores"}]}, separators=(",", ":"))
    assert "]==]" not in body
    with open("%s/infer%d.json" % (out, b), "w") as f:
        f.write(body)
    with open("%s/infer%d.lua" % (out, b), "w") as f:
        f.write('wrk.method = "POST"\n'
                'wrk.body = [==[%s]==]\n'
                'wrk.headers["Content-Type"] = "application/json"\n' % body)
EOF
label0=$(cat "$tmp/label0")

cat >"$tmp/check.py" <<'EOF'
# check.py B LABEL FILE...: each FILE is "<http code>\n<body>"; every one must be
# 200 with scores [B, 10] whose row 0 has its argmax at LABEL.
import json, sys
b, label = int(sys.argv[1]), int(sys.argv[2])
for path in sys.argv[3:]:
    code, _, body = open(path).read().partition("\n")
    if code != "200":
        sys.exit("%s: HTTP %s: %s" % (path, code, body[:300]))
    out = {o["name"]: o for o in json.loads(body)["outputs"]}
    s = out["scores"]
    if s["shape"] != [b, 10] or len(s["data"]) != b * 10:
        sys.exit("%s: scores shape %s" % (path, s["shape"]))
    row = s["data"][:10]
    if row.index(max(row)) != label:
        sys.exit("%s: argmax %d, want %d (%s)" % (path, row.index(max(row)), label, row))
EOF

# Sends infer body B N times with curl and checks every answer.
check_infer() {
  i=0
  files=""
  while [ $i -lt "$3" ]; do
    f=$tmp/answer.$2.$i
    curl -s -o "$f.body" -w '%{http_code}' -H 'Content-Type: application/json' \
      --data-binary "@$tmp/infer$2.json" "$1/v2/models/digits_lstm/infer" >"$f" || true
    { echo; cat "$f.body"; } >>"$f"
    files="$files $f"
    i=$((i + 1))
  done
  # shellcheck disable=SC2086
  python3 "$tmp/check.py" "$2" "$label0" $files
}

# --- nginx config ---------------------------------------------------------------------
ngx=$tmp/nginx
mkdir -p "$ngx/logs"
write_nginx_conf() {
  cat >"$ngx/nginx.conf" <<EOF
# Written by tests/bench/http_bench.sh: the reference static 200.
daemon off;
master_process off;
worker_processes 1;
pid $ngx/nginx.pid;
error_log $ngx/logs/error.log warn;
events { worker_connections 1024; }
http {
    access_log off;
    default_type text/plain;
    keepalive_requests 1000000000;
    client_body_temp_path $ngx/body;
    proxy_temp_path $ngx/proxy;
    fastcgi_temp_path $ngx/fastcgi;
    uwsgi_temp_path $ngx/uwsgi;
    scgi_temp_path $ngx/scgi;
    server {
        listen 127.0.0.1:$1;
        location /health { return 200; }
    }
}
EOF
}

# --- wrk runs ----------------------------------------------------------------------
cat >"$tmp/measure.py" <<'EOF'
# measure.py SPID OUT CMD...: waits (60 s at most) until the machine is quiet
# (under 0.15 of a CPU busy over 0.5 s; the servers are idle then), runs CMD
# with stdout and stderr to OUT, and prints the wall seconds of the run, the
# CPU seconds that the whole machine, process SPID and CMD used during it, and
# the seconds spent waiting for quiet.
import os, resource, subprocess, sys, time
hz = os.sysconf("SC_CLK_TCK")
def busy():
    with open("/proc/stat") as f:
        v = [int(x) for x in f.readline().split()[1:]]
    return (sum(v) - v[3] - v[4]) / hz
def proc(pid):
    try:
        with open("/proc/%s/stat" % pid) as f:
            v = f.read().rpartition(")")[2].split()
        return (int(v[11]) + int(v[12])) / hz
    except OSError:
        return 0.0
t = time.monotonic()
while time.monotonic() - t < 60:
    b0 = busy()
    time.sleep(0.5)
    if busy() - b0 < 0.15 * 0.5:
        break
waited = time.monotonic() - t
b0, s0, t0 = busy(), proc(sys.argv[1]), time.monotonic()
with open(sys.argv[2], "w") as out:
    subprocess.run(sys.argv[3:], stdout=out, stderr=subprocess.STDOUT, check=False)
t1, s1, b1 = time.monotonic(), proc(sys.argv[1]), busy()
r = resource.getrusage(resource.RUSAGE_CHILDREN)
print("%.3f %.2f %.2f %.2f %.1f" % (t1 - t0, b1 - b0, s1 - s0, r.ru_utime + r.ru_stime, waited))
EOF

results=$tmp/results
: >"$results"
problems=$tmp/problems
: >"$problems"

# run_wrk MODE TARGET IMAGES PID URL [LUA]: a warm-up, then one measured wrk run
# per connection count; appends one line per run to $results (tab-separated:
# mode, target, connections, images per request, requests/s, p50 ms, p99 ms,
# non-2xx, socket errors, their detail, server CPU us per request, wrk CPUs,
# other processes' CPUs, seconds waited for a quiet machine).
# shellcheck disable=SC2086 # $wrkcmd and $script are split on purpose
run_wrk() {
  mode=$1 target=$2 images=$3 spid=$4 url=$5 script=""
  [ -n "${6:-}" ] && script="-s $6"
  wrkcmd="wrk -t1"
  [ "$mode" = pinned ] && wrkcmd="taskset -c 1 wrk -t1"
  log "$mode $target: warm-up $warmup"
  $wrkcmd -c64 -d"$warmup" $script "$url" >/dev/null 2>&1 || true
  for c in $conns; do
    out=$tmp/wrk.$mode.$target.$c
    try=1
    while :; do
      python3 "$tmp/measure.py" "$spid" "$out" $wrkcmd -c"$c" -d"$duration" --latency $script \
        "$url" >"$out.cpu"
      read -r wall busy scpu wcpu waited <"$out.cpu"
      busy_other=$(awk -v w="$wall" -v b="$busy" -v s="$scpu" -v k="$wcpu" \
        'BEGIN { o = (b - s - k) / w; print (o > 0.2) ? 1 : 0 }')
      if [ "$busy_other" = 0 ] || [ $try -ge 3 ]; then break; fi
      log "$mode $target -c$c: other processes used more than 0.2 CPU; measuring again"
      try=$((try + 1))
    done
    {
      echo "--- $mode $target: $wrkcmd -c$c -d$duration --latency${script:+ $script} $url"
      cat "$out"
      echo "(wall $wall s; CPU s: machine $busy, server $scpu, wrk $wcpu; waited $waited s for quiet)"
    } >&2
    awk -v mode="$mode" -v target="$target" -v c="$c" -v images="$images" -v wall="$wall" \
      -v busy="$busy" -v scpu="$scpu" -v wcpu="$wcpu" -v waited="$waited" '
      function ms(v) {
        if (v ~ /us$/) return substr(v, 1, length(v) - 2) / 1000
        if (v ~ /ms$/) return substr(v, 1, length(v) - 2) + 0
        if (v ~ /m$/) return substr(v, 1, length(v) - 1) * 60000
        if (v ~ /s$/) return substr(v, 1, length(v) - 1) * 1000
        return -1
      }
      $1 == "50%" { p50 = ms($2) }
      $1 == "99%" { p99 = ms($2) }
      $2 == "requests" && $3 == "in" { n = $1 }
      /^Requests\/sec:/ { rps = $2 }
      /Non-2xx or 3xx responses:/ { bad = $NF }
      /Socket errors:/ { gsub(",", ""); sock = $4 + $6 + $8 + $10
                         sockd = "connect " $4 ", read " $6 ", write " $8 ", timeout " $10 }
      END {
        if (rps == "") { rps = -1; n = 0 }
        if (p50 == "") p50 = -1
        if (p99 == "") p99 = -1
        if (sockd == "") sockd = "-"
        cpu = n > 0 ? scpu / n * 1e6 : -1
        other = (busy - scpu - wcpu) / wall
        if (other < 0) other = 0
        printf("%s\t%s\t%s\t%s\t%s\t%s\t%s\t%d\t%d\t%s\t%s\t%s\t%s\t%s\n", mode, target, c,
          images, rps, p50, p99, bad, sock, sockd, cpu, wcpu / wall, other, waited)
      }' "$out" >>"$results"
    tail -n 1 "$results" | {
      IFS=$(printf '\t') read -r _ _ _ _ rps _ _ bad sock _ _ _ _ _
      if [ "$target" != nginx-health ] && { [ "$rps" = -1 ] || [ "$bad" != 0 ] || [ "$sock" != 0 ]; }; then
        { echo "#### $mode $target -c$c"; echo '```'; cat "$out"; echo '```'; } >>"$problems"
      fi
    }
  done
}

# --- Machine and versions ------------------------------------------------------------
cpu_model=$(awk -F': *' '/^model name/ { print $2; exit }' /proc/cpuinfo 2>/dev/null || true)
ncpu=$(getconf _NPROCESSORS_ONLN)
# The commit of the tree BUILD was configured from, which need not be this one.
src=$(python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["directories"]["source"])' \
  "$build/meson-info/meson-info.json" 2>/dev/null || echo "$root")
commit=$(git -C "$src" rev-parse --short HEAD 2>/dev/null || echo unknown)
wrk_version=$(wrk -v 2>&1 | awk 'NR == 1 { print $1, $2 }' || true)
nginx_version=$("$nginx" -v 2>&1 | sed 's/^nginx version: //')
if [ "$ncpu" -lt 2 ]; then
  log "only $ncpu CPU: the pinned mode needs 2, running unpinned only"
  modes=unpinned
fi

# --- Engine alone (for reading the infer rows) ---------------------------------------
engine_line=""
if [ -x "$engine_bench" ]; then
  for b in 1 8; do
    t=$(OPENBLAS_NUM_THREADS=1 "$engine_bench" --model config/models/digits_lstm --batch $b \
      --steps 8 --threads 1 --seconds 1 --json 2>/dev/null |
      python3 -c 'import json, sys; print("%.1f" % (json.load(sys.stdin)["median_s"] * 1e6))' \
      2>/dev/null || echo "?")
    engine_line="$engine_line${engine_line:+, }batch $b: $t µs"
  done
fi

# --- The runs ---------------------------------------------------------------------
for mode in $modes; do
  pin=""
  [ "$mode" = pinned ] && pin="taskset -c 0"

  port=$(free_port)
  log "$mode: starting ${pin:+$pin }$rnnd --listen=127.0.0.1:$port"
  $pin "$rnnd" --listen="127.0.0.1:$port" --model_repository config/models \
    --log_level=warning 2>>"$tmp/rnnd.stderr" &
  rpid=$!
  pids="$pids $rpid"
  base=http://127.0.0.1:$port
  if ! wait_ready "$base/v2/health/ready" "$rpid"; then
    log "rnnd did not become ready; its stderr:"
    cat "$tmp/rnnd.stderr" >&2
    exit 1
  fi

  port2=$(free_port)
  write_nginx_conf "$port2"
  log "$mode: starting ${pin:+$pin }$nginx -p $ngx/ -c $ngx/nginx.conf (127.0.0.1:$port2)"
  $pin "$nginx" -p "$ngx/" -c "$ngx/nginx.conf" -e "$ngx/logs/error.log" 2>>"$ngx/logs/stderr" &
  npid=$!
  pids="$pids $npid"
  if ! wait_ready "http://127.0.0.1:$port2/health" "$npid"; then
    log "nginx did not start; its logs:"
    cat "$ngx/logs/"* >&2
    exit 1
  fi

  for b in 1 8; do
    if ! check_infer "$base" $b "$precheck_n"; then
      log "rnnd's answer to the $b-image infer body is wrong (above); not benchmarking"
      exit 1
    fi
  done
  log "$mode: $precheck_n infer answers per body checked (200, argmax $label0)"

  run_wrk "$mode" nginx-health 0 "$npid" "http://127.0.0.1:$port2/health"
  run_wrk "$mode" rnnd-health 0 "$rpid" "$base/v2/health/ready"
  run_wrk "$mode" rnnd-infer-1 1 "$rpid" "$base/v2/models/digits_lstm/infer" "$tmp/infer1.lua"
  run_wrk "$mode" rnnd-infer-8 8 "$rpid" "$base/v2/models/digits_lstm/infer" "$tmp/infer8.lua"

  for b in 1 8; do
    if ! check_infer "$base" $b 1; then
      echo "#### $mode: wrong infer answer after the load (batch $b)" >>"$problems"
    fi
  done
  stop "$npid"
  stop "$rpid"
done

# --- Report ---------------------------------------------------------------------
body1=$(wc -c <"$tmp/infer1.json")
body8=$(wc -c <"$tmp/infer8.json")
echo "## HTTP front end vs nginx"
echo
echo "- **Machine**: ${cpu_model:-unknown CPU}, $ncpu logical CPUs; Linux $(uname -r)"
echo "- **Date**: $(date '+%Y-%m-%d %H:%M %Z')"
echo "- **rnnd**: $commit ($buildtype build, $build)"
echo "- **Load generator / reference**: $wrk_version; nginx $nginx_version"
echo "- **Command**: \`$cmdline\`"
echo "- **wrk**: \`wrk -t1 -cC -d$duration --latency\`, C in {$(echo "$conns" | sed 's/ /, /g')};" \
  "bodies: 1 image $body1 B, 8 images $body8 B (scores only)"
echo "- **Pinning**: pinned = servers under \`taskset -c 0\`, wrk under \`taskset -c 1\`;" \
  "unpinned = no affinity set"
echo "- **Columns**: seq/s = requests/s x images per request; server CPU/req = the server's" \
  "user + system CPU time over the run / requests completed; wrk CPUs and other load =" \
  "CPUs used by wrk and by every other process on the machine, averaged over the run;" \
  "vs nginx = requests/s over nginx's at the same mode and connections"
echo
echo "| mode | target | conns | requests/s | seq/s | p50 (ms) | p99 (ms) | non-2xx | socket errors | server CPU/req (µs) | wrk CPUs | other load | vs nginx |"
echo "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | --- | ---: | ---: | ---: | ---: |"
awk -F '\t' '
  function commas(x,   s, r) {
    s = sprintf("%d", x + 0.5); r = ""
    while (length(s) > 3) { r = "," substr(s, length(s) - 2) r; s = substr(s, 1, length(s) - 3) }
    return s r
  }
  function lat(v) { return v < 0 ? "?" : sprintf(v < 10 ? "%.3f" : "%.1f", v) }
  { row[NR] = $0; if ($2 == "nginx-health") ref[$1 " " $3] = $5 }
  END {
    name["nginx-health"] = "nginx GET /health"
    name["rnnd-health"] = "rnnd GET /v2/health/ready"
    name["rnnd-infer-1"] = "rnnd POST infer, 1 image"
    name["rnnd-infer-8"] = "rnnd POST infer, 8 images"
    for (i = 1; i <= NR; i++) {
      split(row[i], f, "\t")
      ratio = "—"
      if (f[2] == "nginx-health") ratio = "1.00x"
      else if (f[2] == "rnnd-health" && ref[f[1] " " f[3]] > 0)
        ratio = sprintf("%.2fx", f[5] / ref[f[1] " " f[3]])
      rps = f[5] < 0 ? "?" : commas(f[5])
      seqs = f[4] > 0 ? commas(f[5] * f[4]) : "—"
      sock = f[9] == 0 ? "0" : f[10]
      cpu = f[11] < 0 ? "?" : sprintf("%.1f", f[11])
      printf("| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %.2f | %.2f | %s |\n", f[1],
        name[f[2]], f[3], rps, seqs, lat(f[6]), lat(f[7]), f[8], sock, cpu, f[12], f[13], ratio)
    }
  }' "$results"
echo
[ -n "$engine_line" ] &&
  echo "Engine alone (rnnd-engine-bench, digits_lstm, 8 steps, 1 thread, median per batch): $engine_line."

if [ -s "$problems" ]; then
  echo
  echo "### Problems"
  echo
  cat "$problems"
  echo
  echo "rnnd stderr (last 40 lines):"
  echo '```'
  tail -n 40 "$tmp/rnnd.stderr"
  echo '```'
  exit 1
fi
exit 0
