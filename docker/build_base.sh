#!/bin/sh
# Build the isrlab base root filesystem from a Debian mirror and pack it as a tarball
# for `docker import`.
#
# Why not FROM python:3.11-slim: the Docker engines isrlab runs on may reach no
# registry at all, only a Debian package mirror. debootstrap needs nothing else.
#
# usage: build_base.sh SUITE MIRROR INCLUDE OUT_TAR
#   e.g. build_base.sh bookworm http://<mirror>/debian python3,iptables,iproute2 base.tar
#
# harness/backends/docker_image.py runs this (as root) and hashes this file together with the
# arguments into the base image tag, so editing this script rebuilds the base image.
# Lines starting with "==> step:" name the stage; on failure the caller reports the
# last one.
set -eu

if [ $# -ne 4 ]; then
    echo "usage: $0 SUITE MIRROR INCLUDE OUT_TAR" >&2
    exit 2
fi
suite=$1
mirror=$2
include=$3
out=$4

work=$(mktemp -d "${TMPDIR:-/var/tmp}/isrlab-rootfs.XXXXXX")
rootfs="$work/rootfs"

unmount_all() {
    # debootstrap mounts proc/sys inside the target and may leave them mounted when it
    # fails half-way; deleting the tree through a live /proc or /sys mount would be bad.
    grep -o " $rootfs/[^ ]*" /proc/mounts 2>/dev/null | sort -r | while read -r m; do
        umount -l "$m" 2>/dev/null || true
    done
}

cleanup() {
    unmount_all
    if grep -q " $rootfs/" /proc/mounts 2>/dev/null; then
        echo "W: mounts remain under $rootfs; not deleting it" >&2
    else
        rm -rf "$work"
    fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

echo "==> step: debootstrap ($suite from $mirror, include $include)"
if ! debootstrap --variant=minbase --include="$include" "$suite" "$rootfs" "$mirror"; then
    # debootstrap only prints "I:/W:/E:" lines; dpkg's own complaints are in its log.
    if [ -f "$rootfs/debootstrap/debootstrap.log" ]; then
        tail -n 15 "$rootfs/debootstrap/debootstrap.log"
    fi
    exit 1
fi

echo "==> step: check (python3, iptables, ip inside the rootfs)"
# Inside a chroot: the rootfs has absolute symlinks (/etc/alternatives) that would
# resolve against the host from outside.
chroot "$rootfs" /bin/sh -c 'python3 --version && command -v iptables && command -v ip' \
    || { echo "E: python3, iptables or ip missing from the rootfs" >&2; exit 1; }

echo "==> step: trim (apt caches, docs, locales)"
# None of this is needed at run time; it halves the tarball and the import.
unmount_all
rm -rf "$rootfs"/var/cache/apt/archives/*.deb "$rootfs"/var/lib/apt/lists/* \
    "$rootfs"/usr/share/doc/* "$rootfs"/usr/share/man/* "$rootfs"/usr/share/info/* \
    "$rootfs"/usr/share/locale/* "$rootfs"/debootstrap
# Docker bind-mounts its own resolv.conf/hosts/hostname; a host copy would only leak.
: > "$rootfs/etc/resolv.conf"

echo "==> step: tar ($out)"
tar -C "$rootfs" --numeric-owner -cf "$out" .
echo "I: rootfs tarball $(du -h "$out" | cut -f1)"
