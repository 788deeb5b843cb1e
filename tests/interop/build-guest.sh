#!/usr/bin/env bash
# build-guest.sh OUTDIR — build (once) the Linux guest the interop suite boots under QEMU:
# Debian's 6.1 kernel, siw.ko built out of tree from Debian's kernel source against the
# matching headers (Debian's kernel has CONFIG_RDMA_SIW unset), and an initramfs with busybox,
# rdma-core's tools (rping, ucmatose, perftest, rdma) and their libraries, and the RDMA and
# virtio-net modules. Everything comes from Debian packages installed with apt-get.
#
# Writes OUTDIR/vmlinuz, OUTDIR/initrd.gz, OUTDIR/kver; a rerun with the same kernel and the
# same script returns at once (OUTDIR/stamp). Exit 0 built, 77 cannot be built here (with the
# reason), 1 failed. Every step is bounded by `timeout`.
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
stamp="$kver $(cat "$0" "$here/guest-init.sh" "$here/siw-test.patch" | sha256sum | cut -c1-16)"
if [ -f "$out/stamp" ] && [ "$(cat "$out/stamp")" = "$stamp" ] && [ -f "$out/initrd.gz" ] &&
   [ -f "$out/vmlinuz" ]; then
    log "cached guest for $kver in $out"
    exit 0
fi

pkgs=(qemu-system-x86 busybox-static rdma-core ibverbs-providers ibverbs-utils rdmacm-utils perftest iproute2
      cpio kmod xz-utils zstd gzip make gcc patch "linux-headers-$kver" linux-source-6.1)
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

# The initramfs.
root="$work/root"
mkdir -p "$root"/{bin,sbin,lib,lib64,etc,proc,sys,dev,tmp,run,mods,usr/lib,usr/bin}
cp /bin/busybox "$root/bin/busybox"
cp "$here/guest-init.sh" "$root/init"
chmod +x "$root/init"

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
for f in "${bins[@]}" "${libs[@]}"; do
    copy_with_path "$f"
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
i=0
: >"$root/mods/order"
for rel in "${order[@]}"; do
    name=$(printf '%02d-%s' $i "$(basename "$rel")")
    case $rel in
    *.xz) xz -dc "$mods/$rel" >"$root/mods/${name%.xz}"; name=${name%.xz} ;;
    *.zst) zstd -qdc "$mods/$rel" >"$root/mods/${name%.zst}"; name=${name%.zst} ;;
    *.gz) gzip -dc "$mods/$rel" >"$root/mods/${name%.gz}"; name=${name%.gz} ;;
    *) cp "$mods/$rel" "$root/mods/$name" ;;
    esac
    echo "$name" >>"$root/mods/order"
    i=$((i + 1))
done
cp "$siwdir/siw.ko" "$root/mods/siw-stock.ko"
cp "$patched/siw.ko" "$root/mods/siw-patched.ko"
log "modules: $(tr '\n' ' ' <"$root/mods/order")"

(cd "$root" && find . | cpio -o -H newc --quiet | gzip -1) >"$out/initrd.gz.new"
mv "$out/initrd.gz.new" "$out/initrd.gz"
mv "$out/vmlinuz.new" "$out/vmlinuz"
echo "$kver" >"$out/kver"
echo "$stamp" >"$out/stamp"
rm -rf "$work"
log "guest for $kver ready in $out ($(du -h "$out/initrd.gz" | cut -f1) initrd)"
