"""A sandbox with network on is handed out only once its network is up and
its routes restricted. The jail brings the network up while bubblewrap
starts envd, and the library waits for both ("ready" from envd, "network"
from the jail, on the ready pipe). Here the network helper is made slow on
purpose, by a wrapper that delays slirp4netns by two seconds before it
starts: were the library to hand the sandbox out on envd's word alone,
the first command would run before the sandbox had any route, every time."""

import os
import stat


def executable(path, text):
    path.write_text(text)
    path.chmod(path.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return path


def test_first_command_sees_the_restricted_network(hangar, tmp_path):
    os.chmod(tmp_path, 0o755)
    slirp = executable(
        tmp_path / "slow-slirp4netns",
        '#!/bin/sh\n# A late network helper (fault injection), not a wait for anything.\n'
        '/bin/sleep 2\nexec /usr/bin/slirp4netns "$@"\n',
    )
    jail = executable(
        tmp_path / "hangar-jail",
        f'#!/bin/sh\nHANGAR_JAIL_SLIRP4NETNS={slirp} exec {os.environ["HANGAR_JAIL_PATH"]} "$@"\n',
    )
    r = hangar.ok(
        "run", "--", "ip", "-4", "route", env={"HANGAR_JAIL_PATH": str(jail), "HANGAR_LOCAL_NETWORK": "on"}
    )
    routes = r.stdout.decode()
    assert "default via 10.0.2.2 dev tap0" in routes, routes
    assert "blackhole 10.0.0.0/8" in routes, routes
    assert "blackhole 169.254.0.0/16" in routes, routes
