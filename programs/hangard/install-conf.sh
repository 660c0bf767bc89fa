#!/bin/sh
# install-conf.sh EXAMPLE DIR: installs hangard's example configuration as
# DIR/hangard.conf (under $DESTDIR) unless a file is there already. meson's
# own install rules overwrite, and once installed the file is the
# administrator's: installing hangard again must not undo their edits.
# Packages stage into an empty DESTDIR, so they always get the file and the
# package manager's conffile rules take over from there. 0640: the file may
# hold HANGAR_SECRET_KEY or a HANGAR_STORE URL with a password.
set -eu
src=$1
dir=${DESTDIR:+${DESTDIR%/}/${2#/}}
dir=${dir:-$2}
if [ -e "$dir/hangard.conf" ] || [ -L "$dir/hangard.conf" ]; then
	echo "hangard: keeping $dir/hangard.conf (the example is programs/hangard/hangard.conf.in)"
	exit 0
fi
mkdir -p "$dir"
install -m 0640 "$src" "$dir/hangard.conf"
