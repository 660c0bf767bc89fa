#!/bin/bash
# In the cgroup v2 guest: runs CMD as a caller in a delegated cgroup that it
# shares with nothing but its own leaf, as hangar(1) (HANGAR_LOCAL_CGROUP)
# tells a systemd user to set it up: the caller moves to main/, the
# sandboxes go below sandboxes/, which holds no process.
#
#   delegated.sh CMD [ARG...]
set -euo pipefail
cg=/sys/fs/cgroup/test.scope
mkdir "$cg"
echo "+memory +pids +cpu" >"$cg/../cgroup.subtree_control"
mkdir "$cg/main" "$cg/sandboxes"
echo $$ >"$cg/main/cgroup.procs"
echo "+memory +pids +cpu" >"$cg/cgroup.subtree_control"
# Delegated as systemd's Delegate=yes does, to the test user too, whom the
# tests become for their unprivileged caller.
chown -R user: "$cg"
echo "delegated: the caller is in $(cut -d: -f3 /proc/self/cgroup), sandboxes go below $cg/sandboxes"
HANGAR_LOCAL_CGROUP=$cg/sandboxes exec "$@"
