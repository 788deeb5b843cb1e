#!/usr/bin/env bash
# run-cifs.sh GUESTDIR NDKSMB — Linux's own SMB Direct client, cifs.ko over siw in the QEMU
# guest of build-guest.sh, mounting a share that `ndksmb serve` (softndk's SMB2 server on its
# SMB Direct Responder) serves on this host (docs/interop.md, "cifs.ko against ndksmb serve").
#
# cifs connects SMB Direct to port 5445 of the server's address and takes no other port, so the
# server listens on 127.0.0.1:5445 (the guest reaches it as 10.0.2.2:5445); a host where 5445 is
# taken skips (77), saying so. The guest (one boot, patched siw, 768 MiB) mounts the share
# twice (vers=3.0.2 and vers=3.1.1, both at once), copies files of 0 B, 1 B, 4095 B, 4096 B,
# 1 MiB + 1, 8 MiB + 7 and 64 MiB in and back out, reads a file the host put there, lists,
# renames and deletes, unmounts in the middle of a 64 MiB copy and mounts again, and prints
# sha256 of everything; this side compares them with the served folder and with what came back,
# checks the guest's kernel log for cifs errors and oopses (not 6.1's generic WARNINGs, such
# as the iov_iter_pipe one busybox cp's splice from a cifs file raises), and decodes the server's capture with tshark:
# softndk's RDMA Writes (READ), RDMA Read Requests (WRITE) and Sends with Invalidate must be
# there. The server's own count of SMB2 commands is printed.
#
# Lines "ROW name: PASS|FAIL detail", last line "interop-cifs: N passed, N failed". Exit 0, 1,
# or 77 (no guest, no qemu, port 5445 taken). Every step bounded.
set -u
guest=${1:?usage: run-cifs.sh GUESTDIR NDKSMB}
N=${2:?usage: run-cifs.sh GUESTDIR NDKSMB}
command -v qemu-system-x86_64 >/dev/null || { echo "SKIP: qemu-system-x86_64 not installed"; exit 77; }
[ -f "$guest/vmlinuz" ] && [ -f "$guest/initrd.gz" ] || { echo "SKIP: no guest in $guest"; exit 77; }
[ -x "$N" ] || { echo "interop-cifs: FAIL: $N is missing"; echo "interop-cifs: 0 passed, 1 failed"; exit 1; }
if (exec 3<>/dev/tcp/127.0.0.1/5445) 2>/dev/null; then
    echo "SKIP: something already listens on 127.0.0.1:5445 (cifs takes no other port)"
    exit 77
fi
work=$(mktemp -d /tmp/softndk-interop-cifs.XXXXXX)
srv=""
qp=""
cleanup() {
    [ -n "$qp" ] && kill "$qp" 2>/dev/null
    [ -n "$srv" ] && kill "$srv" 2>/dev/null
    wait 2>/dev/null
    [ -n "${SOFTNDK_INTEROP_KEEP:-}" ] && echo "kept $work" || rm -rf "$work"
}
trap cleanup EXIT
trap "exit 1" TERM INT
passes=0 fails=0
declare -a table
report() { # NAME OK DETAIL
    local r=FAIL
    [ "$2" = 1 ] && r=PASS passes=$((passes + 1)) || fails=$((fails + 1))
    echo "ROW $1: $r $3"
    table+=("$(printf '  %-26s %-8s %s' "$1" "$r" "$3")")
}
finish() {
    echo
    echo "interop cifs ($SECONDS s):"
    printf '%s\n' "${table[@]}"
    echo "interop-cifs: $passes passed, $fails failed"
    [ $fails = 0 ]
    exit
}

share="$work/share"
mkdir -p "$share"
head -c 3000017 /dev/urandom >"$share/host-written.bin"
hostsha=$(sha256sum <"$share/host-written.bin" | cut -c1-64)
SOFTNDK_PCAP="$work/server.pcap" timeout 600 "$N" serve "$share" --address 127.0.0.1 --port 5445 \
    -U smbtest%softndk-test --ready-file "$work/ready" --json >"$work/serve.json" 2>"$work/serve.err" &
srv=$!
for _ in $(seq 100); do [ -s "$work/ready" ] && break; sleep 0.1; done
if [ ! -s "$work/ready" ]; then
    report server 0 "ndksmb serve did not start: $(tail -n 2 "$work/serve.err" | tr '\n' ' ')"
    finish
fi

# The guest's part, passed as base64 on the kernel command line (keep it short: the command
# line holds 2048 bytes). f SIZE: a file of that size made, copied to the share, copied back.
read -r -d '' script <<'EOF'
for m in $(cat /mods/smb-order) cifs.ko; do insmod /mods/$m; done
mkdir -p /a /b /w
O=rdma,username=smbtest,password=softndk-test,ip=10.0.2.2,cache=strict
mount -t cifs //10.0.2.2/share /a -o $O,vers=3.0.2 || { echo SNDK-C mount-fail 302; exit 1; }
mount -t cifs //10.0.2.2/share /b -o $O,vers=3.1.1 || { echo SNDK-C mount-fail 311; exit 1; }
echo SNDK-C mounted
h() { sha256sum <$1 | cut -c1-64; }
for s in 0 1 4095 4096 1048577 8388615 67108864; do
 head -c $s /dev/urandom >/w/f; cp /w/f /a/f$s; echo SNDK-C put $s $(h /w/f)
 cp /b/f$s /w/g; echo SNDK-C back $s $(h /w/g); rm /w/g
done
echo SNDK-C host $(h /a/host-written.bin)
echo SNDK-C ls $(ls /a | tr '\n' ' ')
head -c 67108864 /dev/urandom >/w/f; (cp /w/f /a/cut.bin &) ; sleep 2
umount -f /a; umount -l /a; echo SNDK-C cut-umount $?
mount -t cifs //10.0.2.2/share /a -o $O,vers=3.1.1 && echo SNDK-C remount ok
head -c 1048577 /dev/urandom >/w/f; cp /w/f /a/after; echo SNDK-C after $(h /w/f) $(h /a/after)
timeout 30 mv /a/f1 /a/f1.moved && echo SNDK-C mv ok
timeout 30 rm /b/f0 && echo SNDK-C rm ok
umount /a; umount /b; echo SNDK-C umount $?
dmesg | grep -E 'BUG:|Oops|CIFS: VFS: .*([Ee]rr|fail)|smbd_[a-z_]+:' | sed 's/^/SNDK-C dmesg /' | head -20
EOF
b64=$(printf '%s\n' "$script" | base64 -w0)
# SOFTNDK_INTEROP_LOSE_NETWORK=1 (the check of the void path below; "always": of a second loss,
# which fails): the first (or every) run's guest takes
# its eth0 down 30 s after it is up, in the middle of its copies
losenet=""
case "${SOFTNDK_INTEROP_LOSE_NETWORK:-}:${SOFTNDK_INTEROP_CIFS_VOIDED:-}" in 1: | always:*) losenet=" sndk.losenet=30" ;; esac
[ ${#b64} -lt 1900 ] || { report guest 0 "the guest script is ${#b64} bytes in base64, over the command line"; finish; }
: >"$work/console"
# patched siw: the client speaks first after the connection (docs/interop.md)
timeout 330 qemu-system-x86_64 -accel tcg -cpu max -m 768 -smp 1 -nodefaults \
    -kernel "$guest/vmlinuz" -initrd "$guest/initrd.gz" \
    -append "console=ttyS0 quiet panic=-1 sndk.siw=patched sndk.run=$b64$losenet" \
    -display none -serial "file:$work/console" -monitor none -no-reboot \
    -netdev "user,id=n0" -device virtio-net-pci,netdev=n0 >"$work/qemu.log" 2>&1 &
qp=$!
for _ in $(seq 3000); do
    grep -qE 'SNDK-EXIT|SNDK-NET lost' "$work/console" 2>/dev/null && break
    kill -0 $qp 2>/dev/null || break
    sleep 0.1
done
con() { tr -d '\r' <"$work/console"; }
# A guest whose network watch (guest-init.sh) says it lost its network can finish none of its
# copies, for a reason that is not softndk's (docs/interop.md, "A guest that loses its
# network"): the run is void and runs once more with a new guest and a new server.
if con | grep -q 'SNDK-NET lost'; then
    then_what="run again with a new guest"
    [ -n "${SOFTNDK_INTEROP_CIFS_VOIDED:-}" ] && then_what="the second time: judged as any failure"
    echo "interop cifs: the guest lost its network ($(con | grep -m1 'SNDK-NET lost')): $then_what"
    con | grep '^SNDK-C' | tail -n 5 | cut -c1-200
    if [ -z "${SOFTNDK_INTEROP_CIFS_VOIDED:-}" ]; then
        trap - EXIT
        cleanup
        exec env SOFTNDK_INTEROP_CIFS_VOIDED=1 bash "$0" "$guest" "$N"
    fi
    kill $qp 2>/dev/null # the second loss: its rows fail as any would
fi
wait $qp 2>/dev/null
qp=""
grep -q 'SNDK-C mounted' <(con) && report mount-twice 1 "vers=3.0.2 and vers=3.1.1 mounted at once, -o rdma" ||
    { report mount-twice 0 "$(con | grep -E 'SNDK-C|CIFS|SNDK-EXIT' | head -n 5 | tr '\n' ' ')"; }
for s in 0 1 4095 4096 1048577 8388615 67108864; do
    put=$(con | sed -n "s/^SNDK-C put $s //p") back=$(con | sed -n "s/^SNDK-C back $s //p")
    here=""
    [ -f "$share/f$s" ] && here=$(sha256sum <"$share/f$s" | cut -c1-64)
    [ $s = 0 ] && [ ! -f "$share/f0" ] && here=$put # deleted by the rm row afterwards
    [ $s = 1 ] && [ ! -f "$share/f1" ] && [ -f "$share/f1.moved" ] && here=$(sha256sum <"$share/f1.moved" | cut -c1-64)
    if [ -n "$put" ] && [ "$put" = "$back" ] && [ "$put" = "$here" ]; then
        report "cp-$s" 1 "$s B copied in (3.0.2 mount) and back out (3.1.1 mount), sha256 equal in the guest and in the served folder"
    else
        report "cp-$s" 0 "sha256 put ${put:-none} back ${back:-none} served ${here:-none}"
    fi
done
[ "$(con | sed -n 's/^SNDK-C host //p')" = "$hostsha" ] && report read-host-file 1 "the guest read the 3 MB file the host put, sha256 equal" ||
    report read-host-file 0 "guest saw $(con | sed -n 's/^SNDK-C host //p'), host wrote $hostsha"
# mv and rm: cifs sends each as a compound (CREATE + SET_INFO + CLOSE), which 6.1's SMB Direct
# send only gets right with cifs-test.patch (its padding kvec; before it, siw oopsed and cifs
# waited for its rename forever)
con | grep -q 'SNDK-C mv ok' && [ -f "$share/f1.moved" ] && [ ! -f "$share/f1" ] && report mv 1 "the rename (a compound) seen in the folder" || report mv 0 "cifs's rename did not complete in 30 s, or the folder does not show it"
con | grep -q 'SNDK-C rm ok' && [ ! -f "$share/f0" ] && report rm 1 "the delete seen in the folder" || report rm 0 "cifs's delete did not complete in 30 s, or the folder still has f0"
con | grep -q '^SNDK-C ls .*host-written.bin' && report ls 1 "$(con | sed -n 's/^SNDK-C ls //p')" || report ls 0 "$(con | grep 'SNDK-C ls')"
after=$(con | sed -n 's/^SNDK-C after //p')
if con | grep -q 'SNDK-C remount ok' && [ -n "$after" ] && [ "${after% *}" = "${after#* }" ] &&
    [ "$(sha256sum <"$share/after" | cut -c1-64)" = "${after% *}" ]; then
    report unmount-mid-copy 1 "unmounted during a 64 MiB copy; mounted again and copied 1 MiB + 1, sha256 equal; the server went on"
else
    report unmount-mid-copy 0 "$(con | grep -E 'SNDK-C (cut|remount|after)' | tr '\n' ' ')"
fi
# cifs 6.1's own teardown race (docs/interop.md, "cifs's teardown race"): smbd_destroy calls
# rdma_disconnect while the transport still reads as connected, so credit work queued by the
# last messages read can post a receive to the QP the client has just disconnected, and both
# smbd_post_recv and smbd_post_send_credits log -ENOTCONN. Those two lines are the client's own
# race only when the server did not end the connection: every connection the server served was
# logged off by the client and then closed from the client's side. Any other kernel-log line,
# or those two with a connection the server ended or never saw end, fails the row.
race='CIFS: VFS: smbd_post_(recv|send_credits):[0-9]+ (ib_)?post_recv failed rc=-107$'
dm_all=$(con | sed -n 's/^SNDK-C dmesg //p')
dm_race=$(printf '%s\n' "$dm_all" | grep -cE "$race")
dm=$(printf '%s\n' "$dm_all" | grep -vE "$race" | grep . | head -n 3 | tr '\n' ' ')
served=$(grep -c ': connection over ' "$work/serve.err")
for _ in $(seq 50); do # a disconnect reaches the server's log a moment after the guest is done
    [ "$(grep -c 'NEGOTIATED => ENDED' "$work/serve.err")" -ge "$served" ] && break
    sleep 0.1
done
by_client=$(grep -c 'NEGOTIATED => ENDED (the client closed the connection)' "$work/serve.err")
logoffs=$(grep -c ' => FREE (LOGOFF)' "$work/serve.err")
if [ -n "$dm" ]; then
    report kernel-log 0 "$dm"
elif [ "$dm_race" = 0 ]; then
    report kernel-log 1 "no cifs error in the guest's kernel log"
elif [ "$served" -gt 0 ] && [ "$by_client" = "$served" ] && [ "$logoffs" -ge "$served" ]; then
    report kernel-log 1 "no cifs error but cifs 6.1's teardown race ($dm_race lines: a receive posted to the QP its own unmount disconnected; all $served connections logged off and closed by the client)"
else
    report kernel-log 0 "cifs's -ENOTCONN receive lines ($dm_race) with $by_client of $served connections closed by the client after $logoffs LOGOFFs: $(printf '%s\n' "$dm_all" | head -n 2 | tr '\n' ' ')"
fi

kill -TERM $srv
wait $srv
st=$?
srv=""
[ $st = 0 ] && report server 1 "ndksmb serve ended cleanly: $(cat "$work/serve.json")" ||
    report server 0 "ndksmb serve exited $st: $(tail -n 3 "$work/serve.err" | tr '\n' ' ')"

if command -v tshark >/dev/null && [ -s "$work/server.pcap" ]; then
    timeout 120 tshark -r "$work/server.pcap" -2 --enable-heuristic iwarp_mpa_tcp \
        --disable-heuristic rpcrdma_iwarp -o tcp.try_heuristic_first:TRUE -Y "iwarp_rdma && tcp.srcport == 5445" \
        -T fields -e iwarp_rdma.opcode -E occurrence=a -E aggregator=' ' 2>"$work/tshark.err" |
        tr ' ' '\n' | sed 's/^0x0*//; s/^$/0/' | sort | uniq -c >"$work/opcodes"
    w=$(awk '$2 == "0" {print $1}' "$work/opcodes") r=$(awk '$2 == "1" {print $1}' "$work/opcodes")
    si=$(awk '$2 == "4" || $2 == "6" {s += $1} END {print s + 0}' "$work/opcodes")
    [ "${w:-0}" -ge 1 ] && [ "${r:-0}" -ge 1 ] && [ "${si:-0}" -ge 1 ] &&
        report pcap-tshark 1 "tshark decoded the server's RDMA Write x$w, RDMA Read Request x$r, Send with Invalidate x$si" ||
        report pcap-tshark 0 "tshark: RDMA Write ${w:-0}, Read Request ${r:-0}, Send with Invalidate $si ($(tail -n 1 "$work/tshark.err"))"
else
    report pcap-tshark 0 "no tshark or no capture"
fi
finish
