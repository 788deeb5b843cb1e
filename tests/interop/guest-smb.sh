#!/bin/busybox sh
# /smb.sh of the interop guest, the "smb" mode (sndk.mode=smb on the kernel command line;
# guest-init.sh runs it once eth0 and siw0 are up): Linux's in-kernel SMB3 server, ksmbd, with
# SMB Direct over siw0, for an SMB Direct client on the host (tests/interop/run-smb.sh).
#
# It loads the SMB modules (mods/smb-order, then ksmbd.ko and cifs.ko, both with SMB Direct),
# makes the share "share" (/srv/share, a tmpfs) writable by the user smbtest (password
# softndk-test), starts ksmbd.mountd, which makes ksmbd listen on TCP 445 and, siw being an
# iWARP device, on SMB Direct's iWARP port 5445; writes guest-written.bin (3 MiB + 5 bytes of
# random) into the share and prints its sha256; prints "SNDK-SMB READY"; then waits (at most
# sndk.smbwait= seconds, default 600; 0: no wait) for a file DONE in the share, which the
# host's client writes last, or for a connection to its port 7174 (the host's way when its
# client failed); prints the sha256 and size of every file in the share ("SNDK-SHA HASH SIZE
# NAME") and the kernel's ksmbd/cifs/siw complaints, and returns (init powers off).
#
# sndk.smbself=1: first (before READY) a self-test that needs no client on the host: the
# guest's own cifs.ko mounts the share over SMB Direct (siw0, to its own address 10.0.2.15)
# and copies a file each way, checked by sha256 ("SNDK-SMB selftest PASS|FAIL"). With
# sndk.smbwait=0 that is the whole run.
say() { echo "SNDK-SMB $*"; }
arg() { tr ' ' '\n' </proc/cmdline | sed -n "s/^sndk\.$1=//p"; }
share=/srv/share
rc=0

for m in $(cat /mods/smb-order) ksmbd.ko cifs.ko; do
    insmod "/mods/$m" 2>/tmp/insmod.err || { say "insmod $m failed: $(cat /tmp/insmod.err)"; rc=1; }
done
[ -d /sys/module/ksmbd ] && [ -d /sys/module/cifs ] || { say "FAIL: ksmbd or cifs did not load"; exit 1; }

mkdir -p /srv /etc/ksmbd /var /mnt/smb
[ -e /var/run ] || ln -s /run /var/run
mb=$(arg smbshare_mb) # the share's size in MiB (default 640, of the guest's memory)
# the share is a folder inside the tmpfs, not its root: ksmbd 6.1 lists only "." and ".." in a
# share that is the root of a tmpfs mount (Samba's smbclient sees the same), files it holds
# or not
mount -t tmpfs -o "size=${mb:-640}m" tmpfs /srv || { say "FAIL: tmpfs on /srv"; exit 1; }
mkdir -p "$share"
chmod 0777 "$share"
cat >/etc/ksmbd/ksmbd.conf <<'EOF'
[global]
	netbios name = SNDKGUEST
	server signing = auto
[share]
	path = /srv/share
	read only = no
	browseable = yes
	valid users = smbtest
EOF
ksmbd.adduser -a smbtest -p softndk-test >/tmp/adduser.out 2>&1 ||
    { say "FAIL: ksmbd.adduser: $(cat /tmp/adduser.out)"; exit 1; }
# ksmbd listens for SMB Direct on the RDMA devices that exist now: siw0 is up already
ksmbd.mountd >/tmp/mountd.out 2>&1 || { say "FAIL: ksmbd.mountd: $(cat /tmp/mountd.out)"; exit 1; }
listening() { # PORT-HEX: a TCP listener (state 0A) on that port, IPv4 or IPv6
    cat /proc/net/tcp /proc/net/tcp6 2>/dev/null |
        awk -v p=":$1" '$4 == "0A" && substr($2, length($2) - 4) == p { f = 1 } END { exit !f }'
}
n=0
until listening 01BD && listening 1545; do
    n=$((n + 1))
    if [ $n -gt 300 ]; then
        say "FAIL: ksmbd does not listen on 445 and 5445 after 30 s; ksmbd.mountd: $(cat /tmp/mountd.out)"
        cat /proc/net/tcp /proc/net/tcp6 | sed 's/^/SNDK-SMB tcp: /'
        dmesg | tail -n 20
        exit 1
    fi
    sleep 0.1
done
say "ksmbd $(cat /sys/module/ksmbd/version 2>/dev/null) listening on 445 and 5445 (SMB Direct, iWARP)"

head -c 3145733 /dev/urandom >"$share/guest-written.bin"
chmod 0644 "$share/guest-written.bin"
say "written $(sha256sum "$share/guest-written.bin" | cut -d' ' -f1) 3145733 guest-written.bin"

if [ "$(arg smbself)" = 1 ]; then
    # cifs.ko over SMB Direct to this guest's own ksmbd (siw0 connects to its own address)
    st=PASS
    if mount -t cifs //10.0.2.15/share /mnt/smb \
        -o rdma,vers=3.0.2,ip=10.0.2.15,username=smbtest,password=softndk-test,cache=none,uid=0,gid=0 \
        2>/tmp/mount.err; then
        head -c 2097155 /dev/urandom >/tmp/self-put.bin
        # dd, not cp: busybox cp's sendfile from a cifs cache=none file trips a 6.1 warning
        # (iov_iter_pipe) in the splice path, which is not what this tests
        dd if=/tmp/self-put.bin of=/mnt/smb/self-put.bin bs=1M 2>/dev/null || st=FAIL
        dd if=/mnt/smb/guest-written.bin of=/tmp/self-get.bin bs=1M 2>/dev/null || st=FAIL
        p0=$(sha256sum </tmp/self-put.bin | cut -d' ' -f1)
        p1=$(sha256sum <"$share/self-put.bin" | cut -d' ' -f1)
        g0=$(sha256sum <"$share/guest-written.bin" | cut -d' ' -f1)
        g1=$(sha256sum </tmp/self-get.bin | cut -d' ' -f1)
        [ "$p0" = "$p1" ] || st=FAIL
        [ "$g0" = "$g1" ] || st=FAIL
        say "selftest put 2097155 B: sent $p0, in the share $p1"
        say "selftest get 3145733 B: in the share $g0, received $g1"
        # the client's own account: the session runs over SMB Direct
        grep -q 'SMBDirect' /proc/fs/cifs/DebugData || st=FAIL
        say "selftest cifs: $(grep -m1 -o 'SMBDirect[^,]*' /proc/fs/cifs/DebugData) $(grep -m1 -o 'Dialect 0x[0-9a-f]*' /proc/fs/cifs/DebugData)"
        grep -A12 'SMBDirect' /proc/fs/cifs/DebugData | sed 's/^/SNDK-SMB selftest debugdata: /' | head -n 14
        umount /mnt/smb || st=FAIL
        rm -f "$share/self-put.bin"
    else
        st=FAIL
        say "selftest mount failed: $(cat /tmp/mount.err)"
    fi
    say "selftest $st"
    [ $st = PASS ] || rc=1
fi

# the host's other way to say it is done, whatever its client managed: a connection to 7174
(nc -l -p 7174 </dev/null >/dev/null 2>&1; : >/tmp/host-done) &
say READY
wait_s=$(arg smbwait)
n=0
while [ "${wait_s:-600}" != 0 ] && [ ! -e "$share/DONE" ] && [ ! -e /tmp/host-done ]; do
    n=$((n + 1))
    [ $n -le "${wait_s:-600}" ] || { say "no DONE in the share after ${wait_s:-600} s"; rc=1; break; }
    sleep 1
done
if [ -e "$share/DONE" ]; then say "DONE in the share"; elif [ -e /tmp/host-done ]; then say "the host connected to 7174: done"; fi
sleep 1 # the client's last close
# No kernel message may cut into the listing: on a loaded host the last connection's printk
# came in the middle of a line now and then, and the host then missed that file's line. The
# kernel's log follows the listing anyway (dmesg below).
dmesg -n 1 2>/dev/null || true
(cd "$share" && find . -type f | sort | while read -r f; do
    echo "SNDK-SHA $(sha256sum <"$f" | cut -d' ' -f1) $(wc -c <"$f") ${f#./}"
done)
# the kernel's account: its warnings and oopses (with their traces), ksmbd's and cifs's
# complaints; sndk.smbdmesg=1: all of it
if [ "$(arg smbdmesg)" = 1 ]; then
    dmesg
else
    dmesg | grep -E -A30 'WARNING:|BUG:|Oops|general protection' | head -n 80
    dmesg | grep -iE 'ksmbd|cifs|smb|siw' | grep -iE 'err|fail|warn|bug|oops|invalid|refus|disconnect' |
        grep -v 'module verification' | tail -n 40
fi | sed 's/^/SNDK-SMB dmesg: /'
exit $rc
