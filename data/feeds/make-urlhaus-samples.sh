#!/bin/sh
# Rebuilds the two samples derived from the abuse.ch URLhaus filter (curbengh/urlhaus-filter, CC0) that Debian ships
# in webext-ublock-origin-firefox (1.67.0+dfsg-1~deb12u1: list "Updated: 2025-10-25T00:10:18Z").
#   apt-get install webext-ublock-origin-firefox && sh data/feeds/make-urlhaus-samples.sh
# Writes, next to this script:
#   urlhaus-filter-online-subset.txt  lines 1-6 (header), 7-206 (IPs + 1 host), 2407-2506 (100 hosts),
#                                     2915-2964 (50 URL rules with paths), 6258 (the one `||host^$all` rule)
#   urlhaus-filter-hosts.txt          the hosts of lines 2407-2446 as `0.0.0.0 host`, lines 2447-2449 as one
#                                     multi-name `127.0.0.1` line, under a standard localhost header
set -eu
src=$(dpkg -L webext-ublock-origin-firefox | grep '/urlhaus-filter-online.txt$' | head -n 1)
out=$(dirname "$0")
sed -n '1,6p;7,206p;2407,2506p;2915,2964p;6258p' "$src" > "$out/urlhaus-filter-online-subset.txt"
{
  echo '# hosts-format sample derived from the abuse.ch URLhaus filter (urlhaus-filter-online.txt, CC0),'
  echo '# list "Updated: 2025-10-25T00:10:18Z"; see README.md. Host names are the original entries, unchanged.'
  echo '127.0.0.1 localhost'
  echo '::1 localhost ip6-localhost ip6-loopback'
  echo '255.255.255.255 broadcasthost'
  echo '0.0.0.0 0.0.0.0'
  echo '#'
  sed -n '2407,2446p' "$src" | sed 's/^/0.0.0.0 /'
  printf '127.0.0.1 %s\n' "$(sed -n '2447,2449p' "$src" | tr '\n' ' ' | sed 's/ $//')"
} > "$out/urlhaus-filter-hosts.txt"
