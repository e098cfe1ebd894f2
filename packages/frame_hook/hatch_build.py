"""Hatch build hook: compiles the C extension ``ember_frame_hook._C`` when a wheel is built.

setuptools does the compiling (it knows each platform's compiler and flags); hatchling
does the packaging. Needs only a C compiler and the Python headers.
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path
from typing import Any

from hatchling.builders.hooks.plugin.interface import BuildHookInterface

EXTENSION = "ember_frame_hook._C"


class CExtensionBuildHook(BuildHookInterface):
    PLUGIN_NAME = "custom"

    def initialize(self, version: str, build_data: dict[str, Any]) -> None:
        if self.target_name != "wheel":
            return
        self._workdir = Path(tempfile.mkdtemp(prefix="ember-frame-hook-build-"))
        built = self._compile(self._workdir)
        if version == "editable":
            # Editable installs import from src/: put the extension there.
            shutil.copy2(built, Path(self.root, "src", "ember_frame_hook", built.name))
        else:
            build_data["force_include"][str(built)] = f"ember_frame_hook/{built.name}"
        build_data["pure_python"] = False
        build_data["infer_tag"] = True

    def finalize(self, version: str, build_data: dict[str, Any], artifact_path: str) -> None:
        workdir = getattr(self, "_workdir", None)
        if workdir is not None:
            shutil.rmtree(workdir, ignore_errors=True)

    def _compile(self, workdir: Path) -> Path:
        from setuptools import Distribution, Extension

        root = Path(self.root)
        sources = sorted(str(p.relative_to(root)) for p in (root / "csrc").glob("*.c"))
        extension = Extension(
            EXTENSION,
            sources=sources,
            # the public plug-in header (include/ember_frame_hook.h) ships in the wheel
            include_dirs=[str(root / "csrc"), str(root / "src" / "ember_frame_hook" / "include")],
            extra_compile_args=[
                "-O2",
                "-std=c11",
                "-Wall",
                "-Wno-unused-parameter",
                "-Wno-missing-field-initializers",
            ],
        )
        dist = Distribution({"name": "ember-frame-hook", "ext_modules": [extension]})
        dist.script_name = "hatch_build.py"
        command = dist.get_command_obj("build_ext")
        command.build_lib = str(workdir / "lib")
        command.build_temp = str(workdir / "temp")
        command.ensure_finalized()
        command.run()
        return Path(command.get_ext_fullpath(EXTENSION))
