# shellcheck shell=bash
# What the headless-Chromium tests share (sourced): Debian's `chromium`,
# installed with apt-get when missing (as root), and `browse`, which runs it
# in its own process group with a timeout and the flags that keep it off the
# network. The caller defines `tmp` (a private folder, holding the profile)
# and `pgids` (the groups its EXIT trap kills).
# shellcheck disable=SC2154 # tmp and pgids are the caller's

if ! command -v chromium >/dev/null 2>&1; then
  if [ "$(id -u)" -ne 0 ]; then
    echo "$0: chromium is missing and this is not root" >&2
    exit 1
  fi
  apt-get update -qq >/dev/null
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null
fi

# browse CHROMIUM-ARGUMENT...: one headless run, at most 90 s.
browse() {
  setsid timeout -k 5 90 chromium --headless --no-sandbox --disable-gpu --disable-quic \
    --disable-background-networking --disable-component-update --disable-sync \
    --user-data-dir="$tmp/profile" --no-first-run --enable-logging=stderr --v=0 \
    "$@" &
  local pid=$!
  pgids+=("$pid")
  wait "$pid"
}
