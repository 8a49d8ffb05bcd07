#!/bin/busybox sh
# The guest's init (in the initramfs guest.sh builds): load the modules, mount the host's root
# read-only under a tmpfs overlay, run the host's net.sh then cmd.sh in it, power off.
/bin/busybox --install -s /bin
mount -t proc proc /proc
mount -t sysfs sys /sys
mount -t devtmpfs dev /dev
for m in $(cat /modules.order); do
    insmod "/lib/modules/$m" 2>/dev/null || echo "guest-init: insmod $m failed" >/dev/console
done
share=$(sed -n 's/.*rpma_share=\([^ ]*\).*/\1/p' /proc/cmdline)
fail() {
    echo "guest-init: $*" >/dev/console
    poweroff -f
}
mount -t 9p -o trans=virtio,version=9p2000.L,ro,msize=262144,cache=loose hostroot /lower ||
    fail "cannot mount the host's root"
mount -t tmpfs -o size=75% upper /upper
mkdir -p /upper/data /upper/work
mount -t overlay -o lowerdir=/lower,upperdir=/upper/data,workdir=/upper/work overlay /newroot ||
    fail "cannot mount the overlay"
r=/newroot
mount -t proc proc $r/proc
mount -t sysfs sys $r/sys
mount -t devtmpfs dev $r/dev
mkdir -p $r/dev/pts $r/dev/shm
mount -t devpts devpts $r/dev/pts
mount -t tmpfs shm $r/dev/shm
# no tmpfs over /tmp: a checkout or build folder there must stay visible (writes go to the overlay)
mount -t tmpfs run $r/run
mkdir -p "$r$share"
mount -t 9p -o trans=virtio,version=9p2000.L,msize=262144 share "$r$share" || fail "cannot mount the share"
chroot $r /bin/sh -c ". '$share/net.sh' && exec sh '$share/cmd.sh'" >"$r$share/out" 2>&1
echo $? >"$r$share/rc"
sync
poweroff -f
