#!/bin/sh
# Installs a Debian package when its command is missing (as root, or through sudo -n), or says what will not work.
# usage: tools/system_package.sh COMMAND PACKAGE WHAT-IT-IS-FOR WHAT-HAPPENS-WITHOUT-IT
command -v "$1" >/dev/null 2>&1 && exit 0
if [ "$(id -u)" = 0 ]; then SUDO=""
elif command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then SUDO="sudo -n"
else SUDO="none"; fi
if [ "$SUDO" != none ] && command -v apt-get >/dev/null 2>&1; then
  echo "==> installing $2: $3 (apt-get)"
  $SUDO env DEBIAN_FRONTEND=noninteractive timeout 900 apt-get update -q \
    && $SUDO env DEBIAN_FRONTEND=noninteractive timeout 900 apt-get install -y -q "$2" \
    || echo "==> $2 could not be installed: $4 (apt-get install $2)"
else
  echo "==> no $2 (and no root, sudo or apt-get to install it): $4 (apt-get install $2)"
fi
exit 0
