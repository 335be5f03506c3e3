#!/usr/bin/env bash
# Golden outputs: every shipped scenario simulated with --out, and the SHA-256 of its summary (stdout) and of
# every file it writes, compared with tests/golden/outputs.sha256. A refactor of the core keeps these byte-identical;
# a change that moves results on purpose regenerates them (--update) and says why in its commit.
#   golden_test.sh FLEETSIM SOURCE_DIR [--update]
set -euo pipefail
bin=$1
root=$(cd "$2" && pwd)
golden=$root/tests/golden/outputs.sha256
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

actual=$work/outputs.sha256
for scenario in "$root"/scenarios/*.json; do
  name=$(basename "$scenario" .json)
  out=$work/$name
  # The summary names the run directory and run.json the scenario's absolute path: both hashed as relative paths.
  "$bin" simulate "$scenario" --out "$out" -q | sed "s|$work/||g" >"$out.stdout"
  sed "s|$root/||g" "$out/run.json" >"$out/run.json.relative" && mv "$out/run.json.relative" "$out/run.json"
  (cd "$work" && sha256sum "$name.stdout" && find "$name" -type f | LC_ALL=C sort | xargs sha256sum) >>"$actual"
  rm -rf "$out" "$out.stdout"  # some runs write hundreds of MB: keep one at a time
done

if [[ ${3:-} == --update ]]; then
  mkdir -p "$(dirname "$golden")"
  cp "$actual" "$golden"
  echo "golden: wrote $(wc -l <"$golden") hashes to tests/golden/outputs.sha256"
  exit 0
fi
if ! diff -u "$golden" "$actual"; then
  echo "golden: outputs differ from tests/golden/outputs.sha256 (lines above: - expected, + actual)." >&2
  echo "If the change is meant, regenerate with: bash tests/golden_test.sh build/fleetsim . --update" >&2
  exit 1
fi
echo "golden: $(wc -l <"$golden") outputs byte-identical"
