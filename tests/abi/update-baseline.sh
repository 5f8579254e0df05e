#!/bin/sh
# SPDX-License-Identifier: MIT
# update-baseline.sh BUILDDIR - regenerates tests/abi/baseline/*.abi from
# BUILDDIR's shared libraries (a gcc build), after a release or a
# deliberate compatible change (docs/abi.md).
set -eu
b=${1:?usage: update-baseline.sh BUILDDIR}
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
gen() { abidw --headers-dir "$repo/$3" --no-show-locs --no-corpus-path \
            --out-file "$here/baseline/$1.abi" "$b/$2"; echo "baseline: $1"; }
gen aioloop libaioloop.so include/aioloop
gen aioloop-glib libaioloop-glib.so include/aioloop
gen aioloop-ev libaioloop-ev.so include/aioloop
gen aioloop-vhost libaioloop-vhost.so integrations/vhost/include/aioloop
gen aioloop-vmm libaioloop-vmm.so integrations/vmm/include/aioloop
