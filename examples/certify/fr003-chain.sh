#!/bin/sh
# Field report FR-003's bootstrap, as its pipeline ran it: apply every node's
# config with ';' between the commands, bootstrap, and exit 0 without waiting
# for anything. An apply that fails is not noticed: under half-applied-config
# this script is `silent` (exit 0, a node left in maintenance).
#
#   talchaos certify -- examples/certify/fr003-chain.sh
TALOSCTL=${TALOSCTL:-talosctl}

for nv in $TALCHAOS_NODES; do
	name=${nv%%=*}
	addr=${nv#*=}
	cfg=$(printenv "TALCHAOS_CONFIG_$(echo "$name" | tr '[:lower:]' '[:upper:]')")
	"$TALOSCTL" apply-config --insecure -n "$addr" -e "$addr" -f "$cfg";
done

"$TALOSCTL" --talosconfig "$TALOSCONFIG" -n "$TALCHAOS_BOOTSTRAP_NODE" -e "$TALCHAOS_BOOTSTRAP_NODE" bootstrap;
exit 0
