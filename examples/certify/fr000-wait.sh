#!/bin/sh
# The same bootstrap with field report FR-000's second loop: stop at the
# first failed apply, retry the bootstrap while the node is not ready for it,
# then wait until every control plane is a voting etcd member, and fail
# (exit 1) when that does not happen in time. Under half-applied-config it
# is `loud`; on the happy path it `survived`.
#
#   talchaos certify -- examples/certify/fr000-wait.sh
#
# WAIT is in real seconds; the simulated cluster runs 60 times faster than
# a real one, so 15 s here is a quarter of an hour of Talos time, and a
# scenario's window is 20 to 30 Talos minutes (20 to 30 s).
set -u
TALOSCTL=${TALOSCTL:-talosctl}
WAIT=${WAIT:-15}

for nv in $TALCHAOS_NODES; do
	name=${nv%%=*}
	addr=${nv#*=}
	cfg=$(printenv "TALCHAOS_CONFIG_$(echo "$name" | tr '[:lower:]' '[:upper:]')")
	timeout 10 "$TALOSCTL" apply-config --insecure -n "$addr" -e "$addr" -f "$cfg" || exit 1
done

# Every call bounded: talosctl waits as long as a node does not answer (a
# powered-off node, a lost quorum), and a wait loop without a bound on its
# calls is `hung` there.
tc() { timeout 5 "$TALOSCTL" --talosconfig "$TALOSCONFIG" -e "$TALCHAOS_BOOTSTRAP_NODE" -n "$TALCHAOS_BOOTSTRAP_NODE" "$@"; }

deadline=$(( $(date +%s) + WAIT ))

until tc bootstrap 2>/dev/null; do
	[ "$(date +%s)" -lt "$deadline" ] || { echo "bootstrap did not succeed in ${WAIT}s" >&2; exit 1; }
	sleep 1
done

want=$(echo $TALCHAOS_CONTROLPLANES | wc -w)

while :; do
	# talosctl etcd members: ID HOSTNAME PEER URLS CLIENT URLS LEARNER
	voters=$(tc etcd members 2>/dev/null | awk 'NR > 1 && $NF == "false"' | wc -l)
	[ "$voters" -eq "$want" ] && exit 0
	[ "$(date +%s)" -lt "$deadline" ] || { echo "$voters of $want control planes are voters after ${WAIT}s" >&2; exit 1; }
	sleep 1
done
