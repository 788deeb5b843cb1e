#!/usr/bin/env bash
# build-guest.sh OUTDIR — build (once) the Linux guest the interop suite boots under QEMU:
# Debian's 6.1 kernel, siw.ko built out of tree from Debian's kernel source against the
# matching headers (Debian's kernel has CONFIG_RDMA_SIW unset), and an initramfs with busybox,
# rdma-core's tools (rping, ucmatose, perftest, rdma) and their libraries, and the RDMA and
# virtio-net modules. Everything comes from Debian packages installed with apt-get.
# For the guest's "smb" mode (guest-smb.sh, docs/interop.md): ksmbd.ko and cifs.ko with SMB
# Direct (build-smb-modules.sh), ksmbd-tools with its libraries and glibc's UTF-16 converters,
# and the crypto, netfs and dns_resolver modules SMB3 asks for by name (there is no modprobe).
#
# Writes OUTDIR/vmlinuz, OUTDIR/initrd.gz, OUTDIR/kver; a rerun with the same kernel and the
# same scripts and patches returns at once (OUTDIR/stamp). A copy is kept, keyed the same way,
# in SOFTNDK_INTEROP_CACHE (default /var/cache/softndk-interop, when writable): a fresh
# clone's build on the same machine copies it instead of building. Exit 0 built, 77 cannot be
# built here (with the reason), 1 failed. Every step is bounded by `timeout`.
set -euo pipefail
out=${1:?usage: build-guest.sh OUTDIR}
here=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$out"
out=$(cd "$out" && pwd)
log() { echo "build-guest: $*" >&2; }
skip() { log "SKIP: $*"; exit 77; }

export DEBIAN_FRONTEND=noninteractive
[ "$(id -u)" = 0 ] || command -v qemu-system-x86_64 >/dev/null || skip "not root and no qemu installed"
[ "$(dpkg --print-architecture 2>/dev/null)" = amd64 ] || skip "needs an amd64 Debian host"

# The guest kernel: whatever linux-image-amd64 points at, and its headers.
kpkg=$(apt-cache depends linux-image-amd64 2>/dev/null | awk '/Depends: linux-image-/{print $2; exit}')
if [ -z "$kpkg" ]; then
    timeout 120 apt-get update -qq >/dev/null 2>&1 || true
    kpkg=$(apt-cache depends linux-image-amd64 2>/dev/null | awk '/Depends: linux-image-/{print $2; exit}')
fi
[ -n "$kpkg" ] || skip "apt knows no linux-image-amd64"
kver=${kpkg#linux-image-}
stamp="$kver $(cat "$0" "$here/guest-init.sh" "$here/guest-smb.sh" "$here/siw-test.patch" \
    "$here/build-smb-modules.sh" "$here/ksmbd-test.patch" "$here/cifs-test.patch" | sha256sum | cut -c1-16)"
have() { [ -f "$1/stamp" ] && [ "$(cat "$1/stamp")" = "$stamp" ] && [ -f "$1/initrd.gz" ] && [ -f "$1/vmlinuz" ]; }
if have "$out"; then
    log "cached guest for $kver in $out"
    exit 0
fi
cache_root=${SOFTNDK_INTEROP_CACHE:-/var/cache/softndk-interop}
cache="$cache_root/guest-${stamp// /-}"
if have "$cache"; then
    cp "$cache/vmlinuz" "$cache/initrd.gz" "$cache/kver" "$out/"
    echo "$stamp" >"$out/stamp"
    log "guest for $kver copied from $cache"
    exit 0
fi

pkgs=(qemu-system-x86 busybox-static rdma-core ibverbs-providers ibverbs-utils rdmacm-utils perftest iproute2
      cpio kmod xz-utils zstd gzip make gcc binutils patch "linux-headers-$kver" linux-source-6.1
      libglib2.0-0 libnl-3-200 libnl-genl-3-200)
missing=()
for p in "${pkgs[@]}"; do
    dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
    [ "$(id -u)" = 0 ] || skip "missing packages and not root: ${missing[*]}"
    log "apt-get install ${missing[*]}"
    timeout 120 apt-get update -qq >/dev/null 2>&1 || true
    # bounded: a machine that cannot fetch them in time skips the suite rather than fail CI
    timeout 240 apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null ||
        skip "apt-get install ${missing[*]} failed or took over 240 s"
fi

work="$out/work"
rm -rf "$work"
mkdir -p "$work"

# The kernel image package, unpacked (not installed: the host's boot setup is not touched).
log "kernel $kver"
(cd "$work" && timeout 300 apt-get download -qq "$kpkg" >/dev/null) || { log "apt-get download $kpkg failed"; exit 1; }
timeout 300 dpkg-deb -x "$work"/"$kpkg"_*.deb "$work/kimg"
cp "$work/kimg/boot/vmlinuz-$kver" "$out/vmlinuz.new"
mods="$work/kimg/lib/modules/$kver"
[ -f "$mods/modules.dep" ] || timeout 120 depmod -b "$work/kimg" "$kver"

# siw.ko out of tree, from the source Debian built this kernel from.
log "siw.ko from linux-source-6.1"
src=/usr/src/linux-source-6.1.tar.xz
[ -f "$src" ] || { log "$src missing"; exit 1; }
timeout 300 tar -xJf "$src" -C "$work" --wildcards '*/drivers/infiniband/sw/siw/*'
siwdir=$(echo "$work"/linux-source-*/drivers/infiniband/sw/siw)
[ -f "$siwdir/siw_main.c" ] || { log "siw sources not found in $src"; exit 1; }
build_siw() { # DIR
    timeout 300 make -s -C "/usr/src/linux-headers-$kver" M="$1" CONFIG_RDMA_SIW=m modules \
        >"$work/siw-build.log" 2>&1 || { tail -20 "$work/siw-build.log" >&2; log "siw build failed"; exit 1; }
}
# A second build with the suite's test-only patch (siw-test.patch): siw's compile-time CRC,
# peer-to-peer and MPA revision settings as module parameters, and its accept path processing
# bytes that arrived before its upcalls were installed (the accept race, docs/interop.md).
patched="$work/siw-patched"
cp -r "$siwdir" "$patched"
timeout 60 patch -s -p1 -d "$patched" <"$here/siw-test.patch" || { log "siw-test.patch does not apply"; exit 1; }
build_siw "$siwdir"
build_siw "$patched"

# ksmbd.ko and cifs.ko with SMB Direct (cached on their own: they take minutes)
rc=0
timeout 900 bash "$here/build-smb-modules.sh" "$kver" "$out/smb-modules" || rc=$?
[ $rc = 77 ] && skip "the SMB modules cannot be built here"
[ $rc = 0 ] || { log "build-smb-modules.sh failed ($rc)"; exit 1; }

# The initramfs.
root="$work/root"
mkdir -p "$root"/{bin,sbin,lib,lib64,etc,proc,sys,dev,tmp,run,mods,usr/lib,usr/bin}
cp /bin/busybox "$root/bin/busybox"
cp "$here/guest-init.sh" "$root/init"
cp "$here/guest-smb.sh" "$root/smb.sh"
chmod +x "$root/init" "$root/smb.sh"

# Binaries and the libraries ldd finds for them (plus the verbs providers they dlopen).
bins=(/usr/bin/rping /usr/bin/ucmatose /usr/bin/rdma /usr/bin/ib_send_bw /usr/bin/ib_write_bw
      /usr/bin/ib_read_bw /usr/bin/ib_send_lat /usr/bin/ib_write_lat /usr/bin/ib_read_lat
      /usr/bin/ibv_devices /usr/bin/ibv_devinfo)
multiarch=$(dpkg-architecture -qDEB_HOST_MULTIARCH 2>/dev/null || echo x86_64-linux-gnu)
provdir="/usr/lib/$multiarch/libibverbs"
libs=("$provdir"/libsiw-rdmav*.so)
copy_with_path() { mkdir -p "$root$(dirname "$1")"; cp -L "$1" "$root$1"; }
for b in "${bins[@]}"; do
    [ -x "$b" ] || { log "missing $b"; exit 1; }
    copy_with_path "$b"
done
# ksmbd-tools, unpacked (not installed: Debian's samba, which the host's tests use, conflicts
# with it); one binary that acts by the name it is called by, so it goes in under each name
kt="$work/ksmbd-tools"
(cd "$work" && timeout 300 apt-get download -qq ksmbd-tools >/dev/null) ||
    { log "apt-get download ksmbd-tools failed"; exit 1; }
timeout 120 dpkg-deb -x "$work"/ksmbd-tools_*.deb "$kt"
[ -x "$kt/usr/libexec/ksmbd.tools" ] || { log "ksmbd-tools has no usr/libexec/ksmbd.tools"; exit 1; }
for n in mountd adduser addshare control; do
    mkdir -p "$root/usr/sbin"
    cp "$kt/usr/libexec/ksmbd.tools" "$root/usr/sbin/ksmbd.$n"
done
for f in "${bins[@]}" "${libs[@]}" "$kt/usr/libexec/ksmbd.tools"; do
    [ "$f" = "$kt/usr/libexec/ksmbd.tools" ] || copy_with_path "$f"
    ldd "$f" | awk '/=> \//{print $3} /^\t\/[^ ]+ \(/{print $1}' | while read -r l; do
        [ -e "$root$l" ] || copy_with_path "$l"
    done
done
# pthread_cancel/pthread_exit (rping's exit) dlopen libgcc_s
copy_with_path "$(ldconfig -p | awk '/libgcc_s.so.1 .*x86-64/{print $NF; exit}')"
mkdir -p "$root/etc/libibverbs.d"
cp /etc/libibverbs.d/siw.driver "$root/etc/libibverbs.d/"
# the dynamic loader under its ABI path
[ -e "$root/lib64/ld-linux-x86-64.so.2" ] || cp -L /lib64/ld-linux-x86-64.so.2 "$root/lib64/"
# ksmbd.mountd converts names to and from UTF-16 with iconv: glibc's gconv modules for it
gconv="/usr/lib/$multiarch/gconv"
for f in gconv-modules UTF-16.so UTF-32.so UNICODE.so; do
    [ -f "$gconv/$f" ] || { log "missing $gconv/$f"; exit 1; }
    copy_with_path "$gconv/$f"
done
# the users ksmbd maps sessions to (smbtest owns what the client writes)
printf 'root:x:0:0:root:/:/bin/sh\nsmbtest:x:1000:1000:smbtest:/:/bin/false\n' >"$root/etc/passwd"
printf 'root:x:0:\nsmbtest:x:1000:\n' >"$root/etc/group"

# Modules: the ones named, with their dependencies from modules.dep, in load order.
want=(virtio_pci virtio_net ib_core ib_uverbs iw_cm rdma_cm rdma_ucm)
order=()
add_mod() { # name-or-path
    local rel
    rel=$(awk -F: -v m="$1" '{n=$1; sub(/.*\//,"",n); sub(/\.ko(\.[a-z]+)?$/,"",n); gsub("-","_",n)
                                if (n==m) {print $1; exit}}' "$mods/modules.dep")
    [ -n "$rel" ] || { log "module $1 not in $kver"; exit 1; }
    local deps
    deps=$(awk -F: -v r="$rel" '$1==r {print $2; exit}' "$mods/modules.dep")
    for d in $deps; do
        local dn=${d##*/}
        dn=${dn%%.ko*}
        add_mod "${dn//-/_}"
    done
    for o in "${order[@]}"; do [ "$o" = "$rel" ] && return 0; done
    order+=("$rel")
}
for m in "${want[@]}"; do add_mod "$m"; done
# the crc32c cipher before libcrc32c, whose init asks the crypto API for it (no modprobe here)
if grep -qE '/crc32c[-_]generic\.ko' "$mods/modules.dep"; then add_mod crc32c_generic; fi
# siw needs what its own modinfo says, from the guest's tree
for d in $(modinfo -F depends "$siwdir/siw.ko" | tr , ' '); do add_mod "${d//-/_}"; done
nbase=${#order[@]}
# the smb mode's (mods/smb-order, loaded by guest-smb.sh only): the algorithms SMB3 signing,
# encryption and NTLM ask the crypto API for by name, then what ksmbd.ko and cifs.ko link to
for m in cmac sha512_generic ecb ccm gcm ctr gf128mul ghash_generic libdes des_generic seqiv \
    cifs_arc4 cifs_md4 netfs fscache dns_resolver; do
    add_mod "$m"
done
for ko in ksmbd cifs; do
    for d in $(modinfo -F depends "$out/smb-modules/$ko.ko" | tr , ' '); do add_mod "${d//-/_}"; done
done
i=0
: >"$root/mods/order"
: >"$root/mods/smb-order"
for rel in "${order[@]}"; do
    name=$(printf '%02d-%s' $i "$(basename "$rel")")
    case $rel in
    *.xz) xz -dc "$mods/$rel" >"$root/mods/${name%.xz}"; name=${name%.xz} ;;
    *.zst) zstd -qdc "$mods/$rel" >"$root/mods/${name%.zst}"; name=${name%.zst} ;;
    *.gz) gzip -dc "$mods/$rel" >"$root/mods/${name%.gz}"; name=${name%.gz} ;;
    *) cp "$mods/$rel" "$root/mods/$name" ;;
    esac
    if [ $i -lt $nbase ]; then echo "$name" >>"$root/mods/order"; else echo "$name" >>"$root/mods/smb-order"; fi
    i=$((i + 1))
done
cp "$out/smb-modules/ksmbd.ko" "$out/smb-modules/cifs.ko" "$root/mods/"
cp "$siwdir/siw.ko" "$root/mods/siw-stock.ko"
cp "$patched/siw.ko" "$root/mods/siw-patched.ko"
log "modules: $(tr '\n' ' ' <"$root/mods/order"); smb mode: $(tr '\n' ' ' <"$root/mods/smb-order")"

(cd "$root" && find . | cpio -o -H newc --quiet | gzip -1) >"$out/initrd.gz.new"
mv "$out/initrd.gz.new" "$out/initrd.gz"
mv "$out/vmlinuz.new" "$out/vmlinuz"
echo "$kver" >"$out/kver"
echo "$stamp" >"$out/stamp"
rm -rf "$work"
if mkdir -p "$cache_root" 2>/dev/null && [ -w "$cache_root" ]; then
    tmp=$(mktemp -d "$cache_root/.guest.XXXXXX")
    cp "$out/vmlinuz" "$out/initrd.gz" "$out/kver" "$out/stamp" "$tmp/"
    rm -rf "$cache"
    mv "$tmp" "$cache" || rm -rf "$tmp"
    chmod 755 "$cache"
    log "cached in $cache"
fi
log "guest for $kver ready in $out ($(du -h "$out/initrd.gz" | cut -f1) initrd)"
