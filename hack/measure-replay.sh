#!/bin/bash
# For each built-in scenario: one run (seed 1), then N replays of its report;
# prints how many replays gave the original verdict, and how many also the
# same diagnosis codes and nodes.
N=${N:-5}
TC=${TC:-$(pwd)/bin/talchaos}
mkdir -p "${OUT:-/tmp/talchaos-replay}" && cd "${OUT:-/tmp/talchaos-replay}"
verdict() { python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['verdict'])" "$1"; }
diags() { python3 -c "
import json,sys; r=json.load(open(sys.argv[1]))
print(' '.join(sorted(set(d['code']+'@'+(d.get('node') or '') for d in r.get('diagnoses') or []))))" "$1"; }
one() {
  s=$1
  $TC run $s --report-dir orig-$s >/dev/null 2>&1
  v=$(verdict orig-$s/report.json); d=$(diags orig-$s/report.json)
  sv=0; sd=0
  for i in $(seq 1 $N); do
    $TC replay orig-$s --report-dir rep-$s-$i >/dev/null 2>&1
    gv=$(verdict rep-$s-$i/report.json); gd=$(diags rep-$s-$i/report.json)
    [ "$gv" == "$v" ] && sv=$((sv+1))
    [ "$gv" == "$v" ] && [ "$gd" == "$d" ] && sd=$((sd+1))
    [ "$gv" != "$v" ] && echo "$s replay $i verdict $gv vs $v" >> diffs.txt
    [ "$gd" != "$d" ] && echo "$s replay $i diagnoses [$gd] vs [$d]" >> diffs.txt
    rm -rf rep-$s-$i
  done
  echo "$s verdict $sv/$N, diagnoses too $sd/$N (original: $v; $d)"
}
export -f one verdict diags; export N TC
if [ -n "$LIST" ]; then printf '%s\n' $LIST; else $TC list | tail -n +2 | awk '{print $1}'; fi | xargs -P ${P:-2} -I{} bash -c 'one {}'
