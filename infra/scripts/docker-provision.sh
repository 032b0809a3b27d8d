#!/usr/bin/env bash
# docker-provision.sh makes Docker usable for `sam local` on this machine
# and builds the image SAM runs the functions in, without any image
# registry (none is reachable here):
#
#   provision IMAGE RUNDIR   install what is missing (root on Debian-like
#                            systems only), register qemu for arm64, start a
#                            dockerd of our own when none answers (its pid in
#                            RUNDIR/dockerd.pid, its log in RUNDIR/dockerd.log),
#                            and build IMAGE; prints "started" or "running"
#   stop RUNDIR              stop the dockerd that provision started, if any
#
# Exit status 3 means Docker cannot be had here (not Linux, not root, no
# apt-get): the caller says so and fails, it does not skip.
set -euo pipefail

die_unavailable() {
	echo "sam-local: Docker is not available: $*" >&2
	echo "sam-local: it needs Linux with a running Docker daemon, or root on a Debian-like system to install one (docker.io, qemu-user-static)." >&2
	exit 3
}

# wait_docker waits up to $1 seconds for the daemon to answer.
wait_docker() {
	local i
	for ((i = 0; i < $1 * 5; i++)); do
		docker info >/dev/null 2>&1 && return 0
		sleep 0.2
	done
	return 1
}

apt_updated=
# apt_install installs packages quietly; its full output goes to
# RUNDIR/apt.log and is shown only when it fails.
apt_install() {
	echo "sam-local: installing $* (log: $rundir/apt.log)" >&2
	if [[ -z $apt_updated ]]; then
		apt-get update >>"$rundir/apt.log" 2>&1 || { tail -n 20 "$rundir/apt.log" >&2; return 1; }
		apt_updated=1
	fi
	DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "$@" >>"$rundir/apt.log" 2>&1 ||
		{ tail -n 20 "$rundir/apt.log" >&2; return 1; }
}

provision() {
	local image=$1
	mkdir -p "$2"
	# Absolute: some steps run in subshells that cd elsewhere.
	rundir=$(cd "$2" && pwd)
	[[ $(uname -s) == Linux ]] || die_unavailable "this is $(uname -s), and sam local's --docker-network host needs Linux"
	local daemon=running
	if ! docker info >/dev/null 2>&1; then
		[[ $(id -u) == 0 ]] || die_unavailable "no Docker daemon answers and this is not root, so none can be installed or started"
		command -v apt-get >/dev/null || die_unavailable "no Docker daemon answers and there is no apt-get to install one"
		# docker.io brings containerd and runc; the CLI may already be
		# elsewhere on PATH, but dockerd is what is missing.
		command -v dockerd >/dev/null || apt_install docker.io
		# No systemd runs here: start the daemon ourselves and stop it after.
		# overlay2 works on this kernel; the default bridge network is kept
		# (sam local uses the host's network, see the checks).
		dockerd >"$rundir/dockerd.log" 2>&1 &
		echo $! >"$rundir/dockerd.pid"
		# Whatever fails from here on, the daemon we started goes too.
		trap 'stop "$rundir"' EXIT
		if ! wait_docker 60; then
			tail -n 30 "$rundir/dockerd.log" >&2 || true
			stop "$rundir"
			die_unavailable "dockerd did not start within 60 s (log above)"
		fi
		daemon=started
	fi
	register_arm64
	build_image "$image" "$rundir"
	trap - EXIT
	echo "$daemon"
}

# register_arm64 lets the kernel run arm64 binaries through qemu, as the
# functions are built for Lambda's arm64. Nothing to do on an arm64 host.
register_arm64() {
	[[ $(uname -m) == aarch64 ]] && return 0
	local bm=/proc/sys/fs/binfmt_misc
	[[ -e $bm/qemu-aarch64 ]] && return 0
	[[ $(id -u) == 0 ]] || die_unavailable "arm64 binaries cannot run here: qemu-aarch64 is not registered in $bm and this is not root"
	[[ -e /usr/lib/binfmt.d/qemu-aarch64.conf ]] || apt_install qemu-user-static
	# Containers and VMs often come without binfmt_misc mounted, and
	# without systemd-binfmt or binfmt-support to register the file.
	[[ -e $bm/register ]] || mount -t binfmt_misc binfmt_misc "$bm"
	# The Debian file carries the F flag: the kernel opens the interpreter
	# now, so it also works inside containers that lack it.
	cat /usr/lib/binfmt.d/qemu-aarch64.conf >"$bm/register"
}

# build_image builds a minimal arm64 "Lambda base image": a static busybox
# and nothing else. sam local adds its own emulator (bundled with SAM CLI)
# on top with a Dockerfile whose RUN step needs sh, mv and chmod, and mounts
# the function's bootstrap at /var/task; a provided.al2023 function needs no
# more from the image.
build_image() {
	local image=$1 rundir=$2
	docker image inspect "$image" >/dev/null 2>&1 && return 0
	local root="$rundir/rootfs" deb
	rm -rf "$root" "$rundir/deb"
	mkdir -p "$root/bin" "$root/tmp" "$root/var/task" "$rundir/deb"
	if [[ $(uname -m) == aarch64 ]]; then
		deb=busybox-static
	else
		dpkg --print-foreign-architectures | grep -qx arm64 || { dpkg --add-architecture arm64; apt_updated=; }
		deb=busybox-static:arm64
	fi
	# Downloaded and unpacked, not installed: an arm64 busybox must not
	# replace the host's /bin/busybox.
	# _apt cannot write to a root-only folder; apt then downloads as root
	# and says so, which is fine here.
	if [[ -z $apt_updated ]] && ! (cd "$rundir/deb" && apt-get download -qq "$deb" >>"$rundir/apt.log" 2>&1); then
		apt-get update >>"$rundir/apt.log" 2>&1
		apt_updated=1
	fi
	ls "$rundir"/deb/*.deb >/dev/null 2>&1 || (cd "$rundir/deb" && apt-get download -qq "$deb" >>"$rundir/apt.log" 2>&1) ||
		{ tail -n 20 "$rundir/apt.log" >&2; return 1; }
	dpkg-deb -x "$rundir"/deb/*.deb "$rundir/deb/x"
	cp "$rundir/deb/x/bin/busybox" "$root/bin/busybox"
	local cmd
	for cmd in sh mv chmod cp ls cat mkdir rm; do ln -s busybox "$root/bin/$cmd"; done
	chmod 1777 "$root/tmp"
	# FROM scratch pulls nothing. --platform labels the image arm64: SAM
	# builds on it for linux/arm64, and the legacy builder would try to
	# pull a base image labelled with another platform. (docker import
	# --platform is ignored by the 20.10 daemon and labels it amd64.)
	printf 'FROM scratch\nCOPY rootfs/ /\nENV PATH=/usr/local/bin:/usr/bin:/bin\nWORKDIR /var/task\n' >"$rundir/Dockerfile"
	DOCKER_BUILDKIT=0 docker build -q --platform linux/arm64 -t "$image" -f "$rundir/Dockerfile" "$rundir" >/dev/null 2>"$rundir/build.log" ||
		{ cat "$rundir/build.log" >&2; return 1; }
	rm -rf "$root" "$rundir/deb" "$rundir/Dockerfile"
}

stop() {
	local rundir=$1 pid
	[[ -f $rundir/dockerd.pid ]] || return 0
	pid=$(cat "$rundir/dockerd.pid")
	rm -f "$rundir/dockerd.pid"
	kill "$pid" 2>/dev/null || return 0
	# dockerd stops its containers first; bound the wait, then insist.
	local i
	for ((i = 0; i < 150; i++)); do
		kill -0 "$pid" 2>/dev/null || return 0
		sleep 0.2
	done
	kill -9 "$pid" 2>/dev/null || true
}

case "${1:-}" in
provision) provision "$2" "$3" ;;
stop) stop "$2" ;;
*)
	echo "usage: $0 provision IMAGE RUNDIR | stop RUNDIR" >&2
	exit 2
	;;
esac
