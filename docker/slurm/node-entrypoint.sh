#!/bin/bash
# slurm-node controller|node: PID 1 of a rehearsal Slurm cluster container.
# Starts MUNGE with the cluster's key (generated per cluster on the host, mounted read-only at
# /run/cluster/munge.key: munged wants its own copy, owned by munge, mode 0400), then runs the Slurm
# daemon in the foreground: slurmctld on the controller, slurmd on a node. slurm.conf and gres.conf
# are rendered by the driver and mounted at /etc/slurm.
set -euo pipefail
install -d -o munge -g munge -m 0700 /etc/munge /var/lib/munge /var/log/munge
install -d -o munge -g munge -m 0755 /run/munge
install -o munge -g munge -m 0400 /run/cluster/munge.key /etc/munge/munge.key
runuser -u munge -- /usr/sbin/munged
install -d -m 0755 /var/spool/slurmctld /var/spool/slurmd /var/log/slurm
# Slurm 22.05's gres/gpu counts only GPUs it finds as device files (a count-only gpu reports 0 and
# the node is drained): a node gets REHEARSAL_GPUS stand-in character devices named as gres.conf
# says. Nothing opens them; no process of the job sees a GPU.
if [ "${1:-node}" = node ]; then
  for ((i = 0; i < ${REHEARSAL_GPUS:-8}; i++)); do
    [ -e "/dev/slurm-gpu$i" ] || mknod -m 0600 "/dev/slurm-gpu$i" c 195 "$i"
  done
fi
case "${1:-node}" in
  controller) exec /usr/sbin/slurmctld -D -i ;;
  node)       exec /usr/sbin/slurmd -D ;;
  *) echo "usage: slurm-node controller|node" >&2; exit 2 ;;
esac
