#!/usr/bin/env bash
# build-smb-modules.sh KVER OUTDIR — build (once) the two SMB modules the interop guest's "smb"
# mode needs, out of tree from Debian's linux-source-6.1 against linux-headers-KVER, as
# build-guest.sh builds siw.ko: Debian's kernel has CONFIG_SMB_SERVER=m and CONFIG_CIFS=m but
# neither SMB Direct option (CONFIG_SMB_SERVER_SMBDIRECT, CONFIG_CIFS_SMB_DIRECT), so its
# ksmbd.ko and cifs.ko speak SMB over TCP only.
#
#   OUTDIR/ksmbd.ko  ksmbd (the in-kernel SMB3 server) with SMB Direct, plus ksmbd-test.patch
#   OUTDIR/cifs.ko   the SMB client with SMB Direct, plus cifs-test.patch
#
# The catches, each handled below:
# - ksmbd's vfs.c includes fs/internal.h, which the headers package does not ship: the
#   modules are built in an extract of the source that has it.
# - Both modules have ASN.1 grammars compiled by scripts/asn1_compiler, which the headers
#   package does not ship either: it is built from the same source and the *.asn1.[ch] are
#   generated before make runs (make then has nothing to remake them with, and does not need to).
# - An option given to make only selects objects (transport_rdma.o, smbdirect.o); the C code
#   tests it with #ifdef/IS_ENABLED, so it goes to the compiler too (KCFLAGS=-DCONFIG_...=1).
#
# A rerun with the same kernel, this script and the patches returns at once (OUTDIR/stamp).
# SOFTNDK_INTEROP_CACHE (default /var/cache/softndk-interop, when writable) keeps a copy keyed
# the same way, outside any build directory, that a fresh clone's build copies. Exit 0 built,
# 77 cannot be built here (with the reason), 1 failed. Every step is bounded by `timeout`.
set -euo pipefail
kver=${1:?usage: build-smb-modules.sh KVER OUTDIR}
out=${2:?usage: build-smb-modules.sh KVER OUTDIR}
here=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$out"
out=$(cd "$out" && pwd)
log() { echo "build-smb-modules: $*" >&2; }
skip() { log "SKIP: $*"; exit 77; }

stamp="$kver $(cat "$0" "$here/ksmbd-test.patch" "$here/cifs-test.patch" | sha256sum | cut -c1-16)"
have() { [ -f "$1/stamp" ] && [ "$(cat "$1/stamp")" = "$stamp" ] && [ -f "$1/ksmbd.ko" ] && [ -f "$1/cifs.ko" ]; }
if have "$out"; then
    log "cached ksmbd.ko and cifs.ko for $kver in $out"
    exit 0
fi
cache_root=${SOFTNDK_INTEROP_CACHE:-/var/cache/softndk-interop}
cache="$cache_root/smb-modules-${stamp// /-}"
if have "$cache"; then
    cp "$cache/ksmbd.ko" "$cache/cifs.ko" "$out/"
    echo "$stamp" >"$out/stamp"
    log "ksmbd.ko and cifs.ko for $kver copied from $cache"
    exit 0
fi

hdr=/usr/src/linux-headers-$kver
src=/usr/src/linux-source-6.1.tar.xz
[ -d "$hdr" ] || skip "$hdr missing (linux-headers-$kver)"
[ -f "$src" ] || skip "$src missing (linux-source-6.1)"
command -v gcc >/dev/null || skip "no gcc"

work="$out/work"
rm -rf "$work"
mkdir -p "$work"
log "extracting fs/smb, fs/internal.h and the ASN.1 compiler from $src"
timeout 300 tar -xJf "$src" -C "$work" --wildcards '*/fs/smb/*' '*/fs/internal.h' \
    '*/scripts/asn1_compiler.c' '*/include/linux/asn1.h' '*/include/linux/asn1_ber_bytecode.h' ||
    { log "tar -xJf $src failed"; exit 1; }
tree=$(echo "$work"/linux-source-*)
[ -f "$tree/fs/smb/server/transport_rdma.c" ] && [ -f "$tree/fs/smb/client/smbdirect.c" ] &&
    [ -f "$tree/fs/internal.h" ] || { log "fs/smb sources not found in $src"; exit 1; }

# the ASN.1 compiler, a host program (kernel headers only for the bytecode's enums)
timeout 120 gcc -O2 -I"$tree/include" -o "$work/asn1_compiler" "$tree/scripts/asn1_compiler.c" \
    >"$work/asn1.log" 2>&1 || { cat "$work/asn1.log" >&2; log "asn1_compiler build failed"; exit 1; }
for g in "$tree"/fs/smb/server/*.asn1 "$tree"/fs/smb/client/*.asn1; do
    timeout 60 "$work/asn1_compiler" "$g" "${g%.asn1}.asn1.c" "${g%.asn1}.asn1.h" ||
        { log "asn1_compiler $g failed"; exit 1; }
done

# ksmbd with the suite's test-only patch (ksmbd-test.patch): Debian 12's ksmbd-tools predates
# the share-config response's payload_sz, and smb2_open's error path puts a NULL opinfo.
timeout 60 patch -s -p1 -d "$tree/fs/smb/server" <"$here/ksmbd-test.patch" ||
    { log "ksmbd-test.patch does not apply"; exit 1; }
# cifs with its test-only patch (cifs-test.patch): 6.1's SMB Direct send maps a compound's
# padding (module memory) through virt_to_page, and siw oopses on the page it names.
timeout 60 patch -s -p1 -d "$tree/fs/smb/client" <"$here/cifs-test.patch" ||
    { log "cifs-test.patch does not apply"; exit 1; }

jobs=${SOFTNDK_INTEROP_JOBS:-2}
build() { # NAME DIR CONFIG-OPTIONS...
    local name=$1 dir=$2 kc="" o
    shift 2
    for o in "$@"; do kc+=" -D${o%=*}=1"; done
    log "$name.ko ($*)"
    timeout 600 make -s -j"$jobs" -C "$hdr" M="$dir" "$@" KCFLAGS="$kc" modules \
        >"$work/$name-build.log" 2>&1 || { tail -30 "$work/$name-build.log" >&2; log "$name build failed"; exit 1; }
    [ -f "$dir/$name.ko" ] || { log "$name.ko not built"; exit 1; }
    # without its debug information (about a quarter the size) for the initramfs
    strip --strip-debug -o "$work/$name.ko" "$dir/$name.ko"
}
build ksmbd "$tree/fs/smb/server" CONFIG_SMB_SERVER=m CONFIG_SMB_SERVER_SMBDIRECT=y
build cifs "$tree/fs/smb/client" CONFIG_CIFS=m CONFIG_CIFS_SMB_DIRECT=y
for m in ksmbd cifs; do
    # the SMB Direct code is in: its transport's symbols are in the module
    case $m in ksmbd) sym=ksmbd_rdma_init ;; cifs) sym=smbd_get_connection ;; esac
    nm "$work/$m.ko" 2>/dev/null | grep -c " $sym\$" >/dev/null || { log "$m.ko has no $sym: SMB Direct not built in"; exit 1; }
done
cp "$work/ksmbd.ko" "$work/cifs.ko" "$out/"
echo "$stamp" >"$out/stamp"
if mkdir -p "$cache_root" 2>/dev/null && [ -w "$cache_root" ]; then
    tmp=$(mktemp -d "$cache_root/.smb-modules.XXXXXX")
    cp "$out/ksmbd.ko" "$out/cifs.ko" "$out/stamp" "$tmp/"
    rm -rf "$cache"
    mv "$tmp" "$cache" || rm -rf "$tmp"
    chmod 755 "$cache"
fi
rm -rf "$work"
log "ksmbd.ko and cifs.ko with SMB Direct for $kver in $out"
