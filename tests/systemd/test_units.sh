#!/bin/sh
# test_units.sh SERVICE SOCKET [TEMPLATE TEMPLATE_SOCKET]: `systemd-analyze
# verify` on the units as built, and `systemd-analyze security --offline=yes`
# on the service, whose overall exposure must be at most 2.0; with the
# template pair (rnnd@.service, rnnd@.socket), the same for instance rnnd@1,
# which must listen on 127.0.0.1:8110, then 127.0.0.1:8111 for gRPC, and want
# its own socket; no instance 1..9 may take a port of rnnd.socket's or of
# another instance.  ExecStart is pointed at $RNND_BIN,
# since verify checks that the binary exists.  Exit 77 without
# systemd-analyze.
set -u
service=$1 socket=$2 template=${3:-} template_socket=${4:-}
command -v systemd-analyze >/dev/null 2>&1 || { echo "SKIP: no systemd-analyze"; exit 77; }
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT
sed "s|^ExecStart=[^ ]*|ExecStart=$RNND_BIN|" "$service" > "$tmp/rnnd.service"
cp "$socket" "$tmp/rnnd.socket"
rc=0
if [ -n "$template" ]; then
  sed "s|^ExecStart=[^ ]*|ExecStart=$RNND_BIN|" "$template" > "$tmp/rnnd@.service"
  cp "$template_socket" "$tmp/rnnd@.socket"
  if ! out=$(cd "$tmp" && systemd-analyze verify --man=no rnnd@1.service rnnd@1.socket 2>&1) ||
     [ -n "$out" ]; then
    echo "FAIL: systemd-analyze verify rnnd@1:"; echo "$out"; rc=1
  else
    echo "ok: systemd-analyze verify rnnd@1.service rnnd@1.socket"
  fi
  [ "$(grep '^ListenStream=' "$tmp/rnnd@.socket")" = "$(printf 'ListenStream=127.0.0.1:81%%i0\nListenStream=127.0.0.1:81%%i1')" ] ||
    { echo "FAIL: rnnd@.socket does not listen on 81%i0, then 81%i1 (gRPC)"; rc=1; }
  # Instances 1..9 and rnnd.socket: every address once.
  all=$(sed -n 's/^ListenStream=//p' "$tmp/rnnd.socket"
        for i in 1 2 3 4 5 6 7 8 9; do sed -n "s/^ListenStream=//; T; s/%i/$i/g; p" "$tmp/rnnd@.socket"; done)
  dup=$(printf '%s\n' "$all" | sort | uniq -d)
  [ -z "$dup" ] && [ "$(printf '%s\n' "$all" | wc -l)" -eq 20 ] ||
    { echo "FAIL: rnnd@N.socket and rnnd.socket share addresses: $dup"; rc=1; }
  grep -qx 'Wants=rnnd@%i.socket' "$tmp/rnnd@.service" ||
    { echo "FAIL: rnnd@.service does not want its own socket"; rc=1; }
  cmp -s "$(sed '/^#/d;/^Description=/d;/^After=/d;/^Wants=/d' "$tmp/rnnd.service" > "$tmp/a"; echo "$tmp/a")" \
         "$(sed '/^#/d;/^Description=/d;/^After=/d;/^Wants=/d' "$tmp/rnnd@.service" > "$tmp/b"; echo "$tmp/b")" ||
    { echo "FAIL: rnnd@.service is not hardened as rnnd.service"; rc=1; }
fi

if ! out=$(cd "$tmp" && systemd-analyze verify --man=no rnnd.service rnnd.socket 2>&1) || [ -n "$out" ]; then
  echo "FAIL: systemd-analyze verify:"; echo "$out"; rc=1
else
  echo "ok: systemd-analyze verify rnnd.service rnnd.socket"
fi

# The settings the issue asks for must be there (verify alone accepts their absence).
for want in 'Type=notify' 'WatchdogSec=' 'ExecReload=/bin/kill -HUP $MAINPID' 'DevicePolicy=closed' \
            'DeviceAllow=/dev/nvidiactl rw' 'DeviceAllow=/dev/nvidia-uvm rw' 'DynamicUser=yes' \
            'StateDirectory=rnnd' 'CacheDirectory=rnnd' 'Environment=CUDA_CACHE_PATH=/var/cache/rnnd'; do
  grep -qF -- "$want" "$tmp/rnnd.service" || { echo "FAIL: rnnd.service lacks $want"; rc=1; }
done
# Two sockets, HTTP then gRPC, as rnnd.conf's listen and grpc_listen (sd_listen_fds order).
conf=$RNND_SRC/config/rnnd.conf
want=$(printf 'ListenStream=%s\nListenStream=%s' "$(sed -n 's/^listen = //p' "$conf")" \
       "$(sed -n 's/^grpc_listen = //p' "$conf")")
[ "$(grep '^ListenStream=' "$tmp/rnnd.socket")" = "$want" ] ||
  { echo "FAIL: rnnd.socket does not listen on rnnd.conf's listen, then grpc_listen"; rc=1; }
if grep -q '^PrivateDevices=yes' "$tmp/rnnd.service"; then
  echo "FAIL: PrivateDevices=yes hides the GPU"; rc=1
fi

units=rnnd.service
[ -n "$template" ] && units="$units rnnd@1.service"
for unit in $units; do
  out=$(cd "$tmp" && systemd-analyze security --offline=yes --no-pager "$unit" 2>&1)
  level=$(printf '%s\n' "$out" | sed -n "s/.*Overall exposure level for $unit: \([0-9.]*\).*/\1/p")
  if [ -z "$level" ]; then
    echo "FAIL: $unit: no exposure level in:"; echo "$out"; rc=1
  elif awk "BEGIN { exit !($level <= 2.0) }"; then
    echo "ok: $unit: exposure $level <= 2.0"
  else
    echo "FAIL: $unit: exposure $level > 2.0"; printf '%s\n' "$out" | grep '✗'; rc=1
  fi
done
exit $rc
