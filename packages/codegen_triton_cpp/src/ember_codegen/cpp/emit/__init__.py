"""C++ emission: loop-IR kernel groups -> one C++ source per graph + a Python wrapper.

Entry point: ``compiled.compile_cpp`` (``compile_graph(..., target="cpp")``); the target's
capability record is ``target.CPP_TARGET``. This package imports none of its modules, so that
each may import its siblings without a cycle through here."""
