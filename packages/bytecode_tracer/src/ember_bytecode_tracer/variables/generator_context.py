"""`with cm(...):` over a @contextlib.contextmanager function, traced through its generator.

Calling the decorated function builds a `contextlib._GeneratorContextManager(func, args,
kwds)`; the trace records the function and its arguments instead. Entering it starts the
generator in the trace and runs it to its first yield (the yielded value is what `as`
binds); leaving the block normally resumes it, and it must return then, as contextlib
requires. Leaving with an exception raised at trace time is a graph break (`__exit__` would
throw the exception into the generator).

If the generator's yield sits inside its own try/finally, the code after the yield is traced
on exit like the rest: a plain `finally:` re-raises, so an error the compiled graph raises
at run time propagates as in eager (past the effects of the finally, as past every effect
of a frame whose graph raises; the runner puts back grad mode, autocast, saved-tensor hooks
and RNG state, as for a try/finally in the frame itself). A try/except around the yield may
catch that error, which the compiled code cannot: no graph ops in such a block. Used as a
decorator, each call of the decorated function enters a fresh context.
"""

from __future__ import annotations

import contextlib
import inspect
from typing import TYPE_CHECKING, Any

from ember_bytecode_tracer.exc import Unsupported
from ember_bytecode_tracer.saved_hooks import disabled_message
from ember_bytecode_tracer.variables.base import VariableTracker
from ember_bytecode_tracer.variables.constant import ConstantVariable
from ember_bytecode_tracer.variables.contexts import (
    ContextDecoratedFunction,
    ContextExitVariable,
    decorated_function,
)
from ember_bytecode_tracer.variables.dicts import ConstDictVariable
from ember_bytecode_tracer.variables.functions import (
    NestedUserFunctionVariable,
    UserFunctionVariable,
    bind_code_arguments,
)
from ember_bytecode_tracer.variables.hooks_context import rebuilt_exit
from ember_bytecode_tracer.variables.objects import TypeVariable, constructor

if TYPE_CHECKING:
    from ember_bytecode_tracer.variables.base import Translator


class GeneratorContextVariable(VariableTracker):
    def __init__(
        self,
        func: VariableTracker,
        args: list[VariableTracker],
        kwargs: dict[str, VariableTracker],
    ) -> None:
        super().__init__()
        self.func = func
        self.args = args
        self.kwargs = kwargs
        self.generator: Any = None  # the translator's TracedGenerator, once entered
        self.body_start: tuple[int, ...] | None = None
        self.hooks_before: str | None = None  # saved-tensor hooks' state where entered

    @classmethod
    def from_constructor_args(
        cls, tx, args: list[VariableTracker], kwargs: dict[str, VariableTracker]
    ) -> GeneratorContextVariable:
        if kwargs or len(args) != 3:
            raise Unsupported("contextlib._GeneratorContextManager built with unusual arguments")
        func, call_args, call_kwargs = args
        if not isinstance(func, UserFunctionVariable | NestedUserFunctionVariable):
            raise Unsupported(f"@contextmanager over {func}, which is not a Python function")
        if not isinstance(call_kwargs, ConstDictVariable):
            raise Unsupported("@contextmanager called with keyword arguments not known")
        keywords = {str(k): v for k, v in call_kwargs.items.items()}
        return cls(func, list(call_args.unpack(tx)), keywords)

    def python_type(self) -> type:
        return contextlib._GeneratorContextManager

    def _start(self, tx: Translator) -> Any:
        func = self.func
        if isinstance(func, UserFunctionVariable):
            return tx.start_generator(func.fn, func.source, self.args, self.kwargs)
        if not func.code.co_flags & inspect.CO_GENERATOR:
            raise Unsupported(f"@contextmanager over {func.qualname}, not a generator function")
        bound = bind_code_arguments(
            func.code, func.defaults, func.kwdefaults, self.args, self.kwargs
        )
        closure_vars = dict(zip(func.code.co_freevars, func.closure, strict=True))
        return tx.start_code_generator(func.code, func.f_globals, bound, closure_vars)

    def enter(self, tx: Translator) -> VariableTracker:
        if self.generator is not None:
            raise Unsupported("entering a @contextmanager object twice")
        self.hooks_before = disabled_message()
        self.generator = self._start(tx)
        yielded, value = self.generator.send(tx, ConstantVariable(None))
        if not yielded:
            raise Unsupported("@contextmanager generator didn't yield (RuntimeError in eager)")
        self.body_start = tx.output.effects_snapshot()
        return value

    def exit_handler(self) -> VariableTracker:
        return ContextExitVariable(self)

    def rebuilt_exit(self) -> Any:
        """The block's __exit__ at a graph break inside it, where it can be rebuilt."""
        exit_fn = rebuilt_exit(self.func, self.args, self.hooks_before)
        if self.kwargs or exit_fn is None:
            raise Unsupported(f"the __exit__ of {self!r} after a graph break")
        return exit_fn

    def exit(self, tx: Translator) -> None:
        generator = self.generator
        if generator is None:
            raise Unsupported("leaving a @contextmanager object that was not entered")
        body_end = tx.output.effects_snapshot()
        paused_at = generator.tx.instructions[generator.tx.ip - 1]
        protected = generator.tx.handler_may_catch(paused_at)
        yielded, _ = generator.send(tx, ConstantVariable(None))
        if yielded:
            raise Unsupported("@contextmanager generator didn't stop (RuntimeError in eager)")
        if protected and body_end[0] != self.body_start[0]:
            raise Unsupported(
                "graph ops inside `with` over a @contextmanager whose yield is in a try/except: "
                "an error raised by the graph at run time would skip that handler"
            )

    def call_function(self, tx, args, kwargs):
        # A @contextmanager object used as a decorator: each call of the function runs in
        # a fresh context from the same generator function and arguments.
        fn = decorated_function(args, kwargs, f"call of {self!r}")
        func, call_args, call_kwargs = self.func, self.args, self.kwargs
        return ContextDecoratedFunction(
            lambda: GeneratorContextVariable(func, call_args, call_kwargs), fn
        )

    def __repr__(self) -> str:
        name = getattr(self.func, "qualname", None) or self.func.fn.__qualname__
        return f"GeneratorContextVariable({name})"


@constructor("generator_context")
def _construct_generator_context(
    tx: Translator, kind: TypeVariable, args, kwargs
) -> VariableTracker | None:
    if kind.cls is contextlib._GeneratorContextManager:
        return GeneratorContextVariable.from_constructor_args(tx, args, kwargs)
    return None
