#!/usr/bin/env bash
# Build one Kubernetes 1.20 server binary (kube-apiserver by default; kube-controller-manager,
# kube-scheduler) from Debian's `kubernetes` source package (no Docker, no registry serves
# server binaries here) and install etcd. Binaries are cached under ~/.cache/rackwise/ keyed by
# name and version, so only the first run pays the ~11 minute build; the others reuse the
# unpacked, partly built source and take a minute or two more. Prints the binary's path.
set -euo pipefail
COMPONENT="${1:-kube-apiserver}"
case "$COMPONENT" in
  kube-apiserver|kube-controller-manager|kube-scheduler) ;;
  *) echo "build-kube.sh: unknown component '$COMPONENT'" >&2; exit 2 ;;
esac
CACHE="${RACKWISE_CACHE:-$HOME/.cache/rackwise}"
BIN="$CACHE/$COMPONENT-1.20"
if [ -x "$BIN" ] && command -v etcd >/dev/null; then
  echo "$BIN"; exit 0
fi
SUDO=""; [ "$(id -u)" = 0 ] || SUDO="sudo"
export DEBIAN_FRONTEND=noninteractive
if ! command -v go >/dev/null || ! command -v etcd >/dev/null || ! command -v rsync >/dev/null \
   || [ ! -d /usr/share/gocode/src/github.com/modern-go/reflect2 ]; then
  $SUDO apt-get update -qq >&2
  $SUDO apt-get install -y -qq golang-go etcd-server rsync jq golang-github-modern-go-reflect2-dev >&2
fi
[ -x "$BIN" ] && { echo "$BIN"; exit 0; }
# Source packages come from the machine's own apt sources: where no deb-src entry exists, one is
# derived from the first (non-security) deb entry, in whichever format the machine uses.
if ! grep -rqsE '^(deb-src |Types:.*deb-src)' /etc/apt/sources.list /etc/apt/sources.list.d/; then
  derived=$(python3 "$(dirname "$0")/deb-src.py") || { echo "no apt source to derive deb-src from" >&2; exit 1; }
  case "$derived" in
    Types:*) target=/etc/apt/sources.list.d/rackwise-src.sources ;;
    *) target=/etc/apt/sources.list.d/rackwise-src.list ;;
  esac
  printf '%s\n' "$derived" | $SUDO tee "$target" >/dev/null
  $SUDO apt-get update -qq >&2
fi
WORK="$CACHE/build"
mkdir -p "$WORK" && cd "$WORK"
ls kubernetes_*.orig.tar.gz >/dev/null 2>&1 || apt-get source --download-only kubernetes >&2
if [ ! -d src ]; then
  mkdir -p src.tmp && tar -xzf kubernetes_*.orig.tar.gz -C src.tmp --strip-components=1 && mv src.tmp src
fi
cd src
# The vendored reflect2 1.0.1 crashes under Go >= 1.18 (SIGSEGV in mapiterinit on the first
# custom-resource write); Debian's 1.0.2 does not.
if [ ! -f vendor/github.com/modern-go/reflect2/.rackwise ]; then
  rm -rf vendor/github.com/modern-go/reflect2
  cp -r /usr/share/gocode/src/github.com/modern-go/reflect2 vendor/github.com/modern-go/reflect2
  touch vendor/github.com/modern-go/reflect2/.rackwise
fi
make WHAT="cmd/$COMPONENT" >&2
mkdir -p "$CACHE"
cp "_output/bin/$COMPONENT" "$BIN.tmp" && mv "$BIN.tmp" "$BIN"
echo "$BIN"
