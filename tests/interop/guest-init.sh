#!/bin/busybox sh
# /init of the interop guest (tests/interop/build-guest.sh puts it there): mount, load the RDMA
# modules, bring up eth0 on QEMU's user-mode network (10.0.2.15, host = 10.0.2.2), add siw0
# on it, then run the scenario script the host passed as base64 in sndk.run= on the kernel
# command line (or, with sndk.mode=smb, the SMB server of guest-smb.sh), print
# "SNDK-EXIT <status>" and power off. Meanwhile it watches its network ("SNDK-NET lost").
/bin/busybox --install -s /bin
export PATH=/bin:/sbin:/usr/bin:/usr/sbin
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev 2>/dev/null || mount -t tmpfs tmpfs /dev
mount -t tmpfs tmpfs /tmp
say() { echo "SNDK-GUEST $*"; }
for m in $(cat /mods/order); do
    insmod /mods/$m 2>/tmp/insmod.err || say "insmod $m failed: $(cat /tmp/insmod.err)"
done
# siw: sndk.siw=stock (Debian's source as is) or patched (siw-test.patch), with the module
# parameters of sndk.siwopt=name=value,... (patched only)
siw=$(tr ' ' '\n' </proc/cmdline | sed -n 's/^sndk.siw=//p')
siwopt=$(tr ' ' '\n' </proc/cmdline | sed -n 's/^sndk.siwopt=//p' | tr , ' ')
insmod /mods/siw-${siw:-stock}.ko $siwopt 2>/tmp/insmod.err || say "insmod siw-${siw:-stock} $siwopt failed: $(cat /tmp/insmod.err)"
say "siw ${siw:-stock} $siwopt"
ip link set lo up
ip link set eth0 up
ip addr add 10.0.2.15/24 dev eth0
# no default route: the guest reaches the host (10.0.2.2, on link) and nothing else
rdma link add siw0 type siw netdev eth0 || say "rdma link add failed"
say "up: $(rdma link show 2>&1 | tr '\n' ' ')"
# The network watch: under TCG, eth0 has been seen to stop transmitting for good in the middle
# of a large transfer (docs/interop.md, "A guest that loses its network"), and everything the
# guest runs afterwards fails for a reason that is not the test's. Every 5 s one ping of QEMU's
# gateway, 10.0.2.2 (QEMU's user-mode network answers it itself), given 3 s; after three
# unanswered in a row (some 20 s: a slow answer from a loaded host is no loss) the watch prints
# "SNDK-NET lost" once, with eth0's transmit count, for the host's runner.
tx() { cat /sys/class/net/eth0/statistics/tx_packets; }
(
    misses=0
    while sleep 5; do
        if ping -c 1 -W 3 10.0.2.2 >/dev/null 2>&1; then misses=0; continue; fi
        misses=$((misses + 1))
        [ $misses = 3 ] && echo "SNDK-NET lost: 10.0.2.2 does not answer (eth0 tx_packets $(tx))"
    done
) &
# sndk.losenet=N: eth0 goes down N s from here (the runners' check of what they do when the
# watch says so: SOFTNDK_INTEROP_LOSE_NETWORK=1)
losenet=$(tr ' ' '\n' </proc/cmdline | sed -n 's/^sndk.losenet=//p')
[ -n "$losenet" ] && (sleep "$losenet"; ip link set eth0 down; say "sndk.losenet: eth0 down") &
run=$(tr ' ' '\n' </proc/cmdline | sed -n 's/^sndk.run=//p')
mode=$(tr ' ' '\n' </proc/cmdline | sed -n 's/^sndk.mode=//p')
if [ "$mode" = smb ]; then
    # sndk.mode=smb: ksmbd with SMB Direct for a client on the host (/smb.sh, guest-smb.sh)
    sh /smb.sh
    rc=$?
elif [ -n "$run" ]; then
    echo "$run" | base64 -d >/tmp/run.sh
    sh /tmp/run.sh
    rc=$?
else
    say "no sndk.run= on the command line"
    rc=2
fi
echo "SNDK-EXIT $rc"
sync
poweroff -f
