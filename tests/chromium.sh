# shellcheck shell=bash
# What the headless-Chromium tests share (sourced): a private folder `tmp`
# and an EXIT trap that kills every process group in `pgids` (`start` runs a
# command in a group of its own) and removes the folder; Debian's
# `chromium`, installed with apt-get when missing (as root), and `browse`,
# which runs it in its own process group with a timeout and the flags that
# keep it off the network.
# It also gives `page`, the checks every page gets, which count failures in
# `fail` (set 0 here) through `not_ok`.

tmp="$(mktemp -d)"
pgids=()
cleanup() {
  for g in "${pgids[@]}"; do kill -KILL -- "-$g" 2>/dev/null || true; done
  rm -rf "$tmp"
}
trap cleanup EXIT

# start COMMAND...: COMMAND in the background, in a process group of its own.
start() {
  setsid "$@" &
  pgids+=("$!")
}

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

# shellcheck disable=SC2034 # the caller reads fail
fail=0
# shellcheck disable=SC2034
not_ok() { echo "not ok: $*" >&2; fail=1; }

# page NAME URL: a screenshot ($tmp/NAME.png) and the DOM ($tmp/NAME.dom)
# of one page: no console or CSP errors, no user string turned into an
# element, nothing from another origin.
page() {
  local name=$1 url=$2
  browse --window-size=1200,2400 --screenshot="$tmp/$name.png" "$url" \
    >/dev/null 2>"$tmp/$name.log" || not_ok "chromium failed on $name"
  if [ ! -s "$tmp/$name.png" ] || [ "$(head -c 4 "$tmp/$name.png" | tail -c 3)" != PNG ]; then
    not_ok "no screenshot of $name"
  fi
  if grep -E 'CONSOLE|Uncaught|Refused to|Content Security Policy' "$tmp/$name.log" >&2; then
    not_ok "console errors on $name"
  fi
  browse --dump-dom "$url" >"$tmp/$name.dom" 2>>"$tmp/$name.log" || not_ok "dump-dom $name"
  if grep -qiE '<script|<img|<iframe' "$tmp/$name.dom"; then
    not_ok "a user string became an element on $name"
  fi
  # Nothing from another origin: no absolute address in any attribute.
  if grep -qiE '(src|href|action)="(https?:)?//' "$tmp/$name.dom"; then
    not_ok "$name links to another origin"
  fi
}
