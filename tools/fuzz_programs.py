"""Program generator of the tracer fuzzer (`fuzz_tracer.py` runs what this writes).

`generate(seed, features)` returns a `Program`: the source of a small module whose `fn(x, y, w,
n, lst, d)` mixes tensor ops, Python control flow, containers, closures, globals, helper calls,
small nn.Modules and graph-break constructs. `fn` is built by `make_fn()`, so it reads closure
cells (`cap_*`) as well as globals (`G_*`); the runner sets both before every call.

Tensors are typed by a *kind*: a tuple of dimension labels ('A', 'B', '1', derived labels
such as 'A[1:]'). Two dims with the same label have the same size whatever sizes the runner
picks, so an expression is only built when its kinds broadcast or its matmul dims agree.
Programs can still raise in eager (an int tensor where a float is needed, an empty list
indexed, a missing dict key): the runner then expects the compiled run to raise the same.

The body of `fn` is a tree of `Node`s so that the minimizer can drop statements.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

Kind = tuple[str, ...]

# every generator feature, by name; the runner can switch any of them off (--exclude)
FEATURES = (
    "pointwise", "reduction", "matmul", "view", "index", "inplace", "inplace_arg",
    "if_const", "if_shape", "if_value", "if_tensor", "for_range", "for_list", "for_dict",
    "for_zip", "while", "list", "dict", "tuple", "comprehension", "arg_mutation",
    "closure", "nonlocal", "lambda", "global_read", "global_write", "helper", "module",
    "module_attr", "print", "item", "tolist", "id", "try", "no_grad", "mask_index", "cat",
    "dtype_cast",
)  # fmt: skip


@dataclass
class Node:
    """A statement: `lines` for a simple one; `clauses` (header, body) for a compound one."""

    lines: list[str] = field(default_factory=list)
    clauses: list[tuple[str, list[Node]]] | None = None

    def render(self, indent: int) -> list[str]:
        pad = "    " * indent
        if self.clauses is None:
            return [pad + line for line in self.lines]
        out: list[str] = []
        for header, body in self.clauses:
            out.append(pad + header)
            rendered = [line for node in body for line in node.render(indent + 1)]
            out.extend(rendered or [pad + "    pass"])
        return out


@dataclass
class Program:
    seed: str
    prelude: str  # module level: imports, globals, helpers, modules
    body: list[Node]  # fn's statements, without its return
    returns: list[str]  # the items of fn's return (a dict of them)

    def source(self) -> str:
        lines = [self.prelude, "", "def make_fn():"]
        lines += [f"    {name} = None" for name in CAPTURED]
        lines.append("")
        lines.append("    def fn(x, y, w, n, lst, d):")
        lines.append("        global G_COUNT, G_LAST")
        for node in self.body:
            lines += node.render(2)
        items = ", ".join(f"{r!r}: {r}" for r in self.returns)
        lines.append(f"        return {{{items}}}")
        lines.append("")
        lines.append("    return fn")
        lines.append("")
        lines.append("")
        lines.append("fn = make_fn()")
        return "\n".join(lines) + "\n"


# closure cells of fn (set by the runner) and module globals read by the program
CAPTURED = ("cap_i", "cap_f", "cap_t", "cap_flag")
GLOBALS_SET = ("G_INT", "G_FLOAT", "G_FLAG", "G_LIST", "G_T", "G_MODE")
GLOBALS_WRITTEN = ("G_COUNT", "G_LAST")

PRELUDE_HEAD = """\
import io

import torch
from torch import nn

OUT = io.StringIO()
G_INT = 1
G_FLOAT = 0.5
G_FLAG = True
G_LIST = [1, 2]
G_T = None
G_MODE = "a"
G_COUNT = 0
G_LAST = None


class Scale(nn.Module):
    def __init__(self):
        super().__init__()
        self.w = nn.Parameter(torch.tensor(0.75))
        self.scale = 1.0
        self.flag = True
        self.count = 0

    def forward(self, z):
        if self.flag:
            return z * self.w + self.scale
        return z - self.scale


MOD0 = Scale()
SEQ = nn.Sequential(nn.ReLU(), nn.Tanh())
"""

# argument and captured tensors with their kinds (the runner builds them to match)
ARG_KINDS: dict[str, Kind] = {"x": ("A", "B"), "y": ("A", "B"), "w": ("B",)}
CAPTURED_KINDS: dict[str, Kind] = {"cap_t": ("B",), "G_T": ("B",)}
DICT_VALUE_KIND: Kind = ("B",)


def broadcast(k1: Kind, k2: Kind) -> Kind | None:
    out = []
    for i in range(1, max(len(k1), len(k2)) + 1):
        a = k1[-i] if i <= len(k1) else "1"
        b = k2[-i] if i <= len(k2) else "1"
        if a == b or b == "1":
            out.append(a)
        elif a == "1":
            out.append(b)
        else:
            return None
    return tuple(reversed(out))


class Generator:
    def __init__(self, seed: str, features: frozenset[str]) -> None:
        self.rng = random.Random(seed)
        self.seed = seed
        self.features = features
        self.tensors: dict[str, Kind] = dict(ARG_KINDS)
        self.ints: list[str] = ["n"]
        self.floats: list[str] = []
        self.tlists: dict[str, Kind] = {}
        self.tdicts: dict[str, Kind] = {}
        self.counter = 0
        self.helpers: list[tuple[str, int]] = []  # (name, arity)
        self.prelude_parts: list[str] = []
        self.local_funcs: list[str] = []  # closures over one tensor arg, same kind out
        self.bumpers: list[str] = []
        self.looping = False  # no appends inside loops: a loop over the list would not end
        if self.on("global_read"):
            self.tensors["G_T"] = CAPTURED_KINDS["G_T"]
            self.ints.append("G_INT")
            self.floats.append("G_FLOAT")
        if self.on("closure"):
            self.tensors["cap_t"] = CAPTURED_KINDS["cap_t"]
            self.ints.append("cap_i")
            self.floats.append("cap_f")

    def on(self, feature: str) -> bool:
        return feature in self.features

    def fresh(self, prefix: str) -> str:
        self.counter += 1
        return f"{prefix}{self.counter}"

    def chance(self, p: float) -> bool:
        return self.rng.random() < p

    # expressions -----------------------------------------------------------------------
    def pick_tensor(self, kinds_ok=None) -> tuple[str, Kind] | None:
        names = [n for n, k in self.tensors.items() if kinds_ok is None or kinds_ok(k)]
        if not names:
            return None
        name = self.rng.choice(sorted(names))
        return name, self.tensors[name]

    def number(self) -> str:
        choices = [str(self.rng.choice([2, 3, -1])), repr(self.rng.choice([0.5, 1.5, -0.25]))]
        choices += self.ints + self.floats
        if self.on("tolist") or self.on("list"):
            choices.append("len(lst)")
        return self.rng.choice(choices)

    def tensor_expr(self, depth: int = 0) -> tuple[str, Kind]:
        name, kind = self.pick_tensor()
        if depth >= 2 or self.chance(0.25):
            return name, kind
        makers = [self.unary]
        if self.on("pointwise"):
            makers += [self.binary, self.scalar_mix]
        if self.on("reduction"):
            makers.append(self.reduction)
        if self.on("matmul"):
            makers.append(self.matmul)
        if self.on("view"):
            makers.append(self.view)
        if self.on("index"):
            makers.append(self.index)
        if self.on("cat"):
            makers.append(self.cat)
        if self.on("dtype_cast"):
            makers.append(self.cast)
        if self.on("helper") and self.helpers:
            makers.append(self.helper_call)
        if self.on("module"):
            makers.append(self.module_call)
        if self.local_funcs:
            makers.append(self.local_call)
        for _ in range(4):
            made = self.rng.choice(makers)(depth)
            if made is not None:
                return made
        return name, kind

    def unary(self, depth):
        e, k = self.tensor_expr(depth + 1)
        form = self.rng.choice(
            [
                "torch.sin({})", "({}).relu()", "torch.tanh({})", "({}) * 2", "({}) + 1.5",
                "-({})", "({}).abs()", "torch.clamp({}, -1.0, 1.0)", "torch.sigmoid({})",
                "torch.exp(({}).clamp(max=3.0))", "({}).clone()", "({}).detach()",
                "torch.softmax({}, dim=-1)" if k else "torch.cos({})",
            ]
        )  # fmt: skip
        return form.format(e), k

    def binary(self, depth):
        a, ka = self.tensor_expr(depth + 1)
        for _ in range(4):
            b, kb = self.tensor_expr(depth + 1)
            out = broadcast(ka, kb)
            if out is not None:
                op = self.rng.choice(["+", "-", "*"])
                if self.chance(0.2):
                    return f"torch.maximum({a}, {b})", out
                if self.chance(0.15):
                    return f"torch.where(({a}) > 0, {a}, {b})", out
                return f"({a}) {op} ({b})", out
        return None

    def scalar_mix(self, depth):
        e, k = self.tensor_expr(depth + 1)
        op = self.rng.choice(["+", "*", "-"])
        return f"({e}) {op} {self.number()}", k

    def reduction(self, depth):
        e, k = self.tensor_expr(depth + 1)
        if not k or self.chance(0.2):
            fn = self.rng.choice(["sum", "mean", "amax"])
            return f"({e}).{fn}()", ()
        dim = self.rng.randrange(len(k))
        fn = self.rng.choice(["sum", "mean", "amax", "amin", "prod"])
        if self.chance(0.3):
            return f"({e}).{fn}({dim}, keepdim=True)", (*k[:dim], "1", *k[dim + 1 :])
        return f"({e}).{fn}({dim})", k[:dim] + k[dim + 1 :]

    def matmul(self, depth):
        pairs = [
            (a, ka, b, kb)
            for a, ka in self.tensors.items()
            for b, kb in self.tensors.items()
            if len(ka) == 2 and len(kb) in (1, 2) and ka[1] == kb[0]
        ]
        transposed = [(a, ka, b, kb) for a, ka, b, kb in pairs]
        for a, ka in self.tensors.items():
            for b, kb in self.tensors.items():
                if len(ka) == 2 and len(kb) == 2 and ka[1] == kb[1]:
                    transposed.append((a, ka, f"{b}.t()", (kb[1], kb[0])))
        if not transposed:
            return None
        a, ka, b, kb = self.rng.choice(sorted(transposed))
        out = (ka[0], *kb[1:])
        if self.chance(0.3) and len(kb) == 2:
            return f"torch.matmul({a}, {b})", out
        return f"({a}) @ ({b})", out

    def view(self, depth):
        e, k = self.tensor_expr(depth + 1)
        if len(k) == 2:
            form = self.rng.choice(["t", "T", "permute", "reshape", "flatten", "unsqueeze"])
        elif k:
            form = self.rng.choice(["reshape", "unsqueeze", "unsqueeze_end"])
        else:
            form = "unsqueeze"
        if form in ("t", "T"):
            return (f"({e}).t()" if form == "t" else f"({e}).T"), (k[1], k[0])
        if form == "permute":
            return f"({e}).permute(1, 0)", (k[1], k[0])
        if form in ("reshape", "flatten"):
            label = "*".join(k) if len(k) > 1 else k[0]
            return (f"({e}).reshape(-1)" if form == "reshape" else f"({e}).flatten()"), (label,)
        if form == "unsqueeze_end":
            return f"({e}).unsqueeze(-1)", (*k, "1")
        return f"({e}).unsqueeze(0)", ("1", *k)

    def index(self, depth):
        e, k = self.tensor_expr(depth + 1)
        if not k:
            return None
        form = self.rng.choice(["first", "slice", "col", "head", "neg"])
        if form == "first":
            return f"({e})[0]", k[1:]
        if form == "neg":
            return f"({e})[-1]", k[1:]
        if form == "slice":
            return f"({e})[1:]", (f"{k[0]}[1:]", *k[1:])
        if form == "col" and len(k) == 2:
            return f"({e})[:, 0]", k[:1]
        return f"({e})[..., :2]", (*k[:-1], f"{k[-1]}[:2]")

    def cat(self, depth):
        a, ka = self.tensor_expr(depth + 1)
        same = [n for n, k in self.tensors.items() if k == ka]
        if not ka or not same:
            return None
        b = self.rng.choice(sorted(same))
        if self.chance(0.5):
            return f"torch.stack([{a}, {b}])", ("2", *ka)
        return f"torch.cat([{a}, {b}], dim=0)", (f"{ka[0]}+{ka[0]}", *ka[1:])

    def cast(self, depth):
        e, k = self.tensor_expr(depth + 1)
        form = self.rng.choice(["({}).double()", "({}).float()", "({}).to(torch.float64)"])
        return form.format(e), k

    def helper_call(self, depth):
        name, arity = self.rng.choice(self.helpers)
        a, ka = self.tensor_expr(depth + 1)
        if arity == 1:
            return f"{name}({a})", ka
        same = [n for n, k in self.tensors.items() if broadcast(ka, k) == ka]
        if not same:
            return None
        return f"{name}({a}, {self.rng.choice(sorted(same))})", ka

    def module_call(self, depth):
        e, k = self.tensor_expr(depth + 1)
        return f"{self.rng.choice(['MOD0', 'SEQ'])}({e})", k

    def local_call(self, depth):
        fname = self.rng.choice(self.local_funcs)
        e, k = self.tensor_expr(depth + 1)
        return f"{fname}({e})", k

    def int_expr(self) -> str:
        forms = [f"{self.rng.choice(self.ints)} + {self.rng.randint(1, 3)}"]
        forms.append(f"{self.rng.choice(self.ints)} * 2")
        t, k = self.pick_tensor()
        forms.append(f"{t}.dim()")
        if k:
            forms.append(f"{t}.shape[0]")
            forms.append(f"{t}.size(-1)")
        forms.append(f"{t}.numel()")
        if self.on("list") or self.on("arg_mutation"):
            forms.append("len(lst)")
        if self.on("global_read"):
            forms.append("len(G_LIST)")
        return self.rng.choice(forms)

    # statements --------------------------------------------------------------------------
    def same_kind_expr(self, kind: Kind, depth: int = 0) -> str:
        """An expression whose kind is `kind` (made from the variables of that kind)."""
        for _ in range(6):
            e, k = self.tensor_expr(depth)
            if broadcast(kind, k) == kind:
                return e
        names = [n for n, k in self.tensors.items() if k == kind]
        return self.rng.choice(sorted(names)) if names else "1.0"

    def update(self) -> Node | None:
        """A statement that keeps every variable's kind: safe in any branch or loop body."""
        makers = [self.update_tensor, self.update_tensor]
        if self.on("inplace"):
            makers.append(self.inplace)
        if self.on("list") and self.tlists:
            makers.append(self.list_update)
        if self.on("dict") and self.tdicts:
            makers.append(self.dict_update)
        if self.on("print"):
            makers.append(self.print_stmt)
        if self.on("global_write"):
            makers.append(self.global_write)
        if self.on("arg_mutation"):
            makers.append(self.arg_mutation)
        if self.on("module_attr"):
            makers.append(self.module_attr)
        if self.bumpers:
            makers.append(lambda: Node([f"{self.rng.choice(self.bumpers)}(1)"]))
        locals_int = [i for i in self.ints if i.startswith("i")]
        if locals_int:
            makers.append(lambda: Node([f"{self.rng.choice(locals_int)} += 1"]))
        return self.rng.choice(makers)()

    def local_tensors(self, kinds_ok=None) -> list[str]:
        return sorted(
            n
            for n, k in self.tensors.items()
            if n.startswith("t") and (kinds_ok is None or kinds_ok(k))
        )

    def update_tensor(self) -> Node | None:
        names = self.local_tensors()
        if not names:
            return None
        name = self.rng.choice(names)
        kind = self.tensors[name]
        e = self.same_kind_expr(kind, 1)
        op = self.rng.choice(["+", "*", "-"])
        return Node([f"{name} = {name} {op} ({e})"])

    def inplace(self) -> Node | None:
        pool = self.local_tensors()
        if self.on("inplace_arg"):
            pool += ["x", "y", "w"]
        if not pool:
            return None
        name = self.rng.choice(pool)
        kind = self.tensors[name]
        form = self.rng.randrange(6)
        if form == 0:
            return Node([f"{name}.add_({self.same_kind_expr(kind, 1)})"])
        if form == 1:
            return Node([f"{name}.mul_({self.rng.choice(['2', '0.5', '-1.0'])})"])
        if form == 2:
            return Node([f"{name}.clamp_(min=-2.0)"])
        if form == 3 and kind:
            return Node([f"{name}[0] = {self.rng.choice(['0.0', '1.5'])}"])
        if form == 4 and kind:
            return Node([f"{name}[0].mul_(3)"])
        return Node([f"{name} += {self.same_kind_expr(kind, 1)}"])

    def list_update(self) -> Node | None:
        name = self.rng.choice(sorted(self.tlists))
        kind = self.tlists[name]
        form = self.rng.randrange(4)
        if form in (0, 2) and self.looping:
            form = 3
        if form == 0:
            return Node([f"{name}.append({self.same_kind_expr(kind, 1)})"])
        if form == 1 and self.on("comprehension"):
            return Node([f"{name} = [v * 2 for v in {name}]"])
        if form == 2:
            return Node([f"{name}.insert(0, {self.same_kind_expr(kind, 1)})"])
        return Node([f"{name}[-1] = {name}[-1] + 1"])

    def dict_update(self) -> Node | None:
        name = self.rng.choice(sorted(self.tdicts))
        kind = self.tdicts[name]
        key = self.rng.choice(["'a'", "'b'", "'c'"])
        form = self.rng.randrange(3)
        if form == 0:
            return Node([f"{name}[{key}] = {self.same_kind_expr(kind, 1)}"])
        if form == 1:
            return Node([f"{name}.pop({key}, None)"])
        if self.on("comprehension"):
            return Node([f"{name} = {{k: v * 0.5 for k, v in {name}.items()}}"])
        return Node([f"{name}.update({{{key}: {self.same_kind_expr(kind, 1)}}})"])

    def print_stmt(self) -> Node:
        t, _k = self.pick_tensor()
        parts = [repr(self.fresh("p")), f"{t}.shape", self.rng.choice(self.ints)]
        if self.tlists:
            parts.append(f"len({self.rng.choice(sorted(self.tlists))})")
        return Node([f"print({', '.join(parts)}, file=OUT)"])

    def global_write(self) -> Node:
        if self.chance(0.5):
            return Node([f"G_COUNT = G_COUNT + {self.rng.choice(self.ints)}"])
        t, _ = self.pick_tensor()
        return Node([f"G_LAST = {t}"])

    def arg_mutation(self) -> Node:
        form = self.rng.randrange(5)
        if form in (0, 3) and self.looping:
            form = 1
        if form == 0:
            return Node([f"lst.append({self.rng.choice(self.ints)})"])
        if form == 1:
            return Node(["lst[0] = lst[0] + 1"])
        if form == 2:
            other = self.rng.choice(["w", "d['q']"])
            return Node([f"d['p'] = d['p'] * 2 + {other}"])
        if form == 3 and self.on("global_read"):
            return Node(["G_LIST.append(len(lst))"])
        return Node(["d.pop('q', None)"])

    def module_attr(self) -> Node:
        if self.chance(0.5):
            return Node(["MOD0.count = MOD0.count + 1"])
        return Node([f"MOD0.flag = {self.rng.choice(['not MOD0.flag', 'n > 1'])}"])

    def id_stmt(self) -> Node:
        t, _ = self.pick_tensor()
        name = self.new_int()
        return Node([f"{name} = 1 + (id({t}) > 0)"])

    def new_int(self) -> str:
        name = self.fresh("i")
        self.ints.append(name)
        return name

    def top_statement(self) -> Node | None:
        """Statements that may introduce new variables (only at fn's top level)."""
        makers = [self.new_tensor, self.new_tensor, self.new_tensor, self.update]
        makers.append(self.new_int_stmt)
        table = {
            "list": self.new_list, "dict": self.new_dict, "tuple": self.new_tuple,
            "item": self.item_stmt, "tolist": self.tolist_stmt, "closure": self.closure_def,
            "nonlocal": self.nonlocal_def, "lambda": self.lambda_def, "mask_index": self.mask,
            "if_const": self.if_const, "if_shape": self.if_shape, "if_value": self.if_value,
            "if_tensor": self.if_tensor, "for_range": self.for_range, "for_list": self.for_list,
            "for_dict": self.for_dict, "for_zip": self.for_zip, "while": self.while_loop,
            "try": self.try_block, "no_grad": self.no_grad, "id": self.id_stmt,
        }  # fmt: skip
        makers += [maker for feature, maker in table.items() if self.on(feature)]
        return self.rng.choice(makers)()

    def new_tensor(self) -> Node:
        e, k = self.tensor_expr()
        name = self.fresh("t")
        self.tensors[name] = k
        return Node([f"{name} = {e}"])

    def new_int_stmt(self) -> Node:
        e = self.int_expr()
        return Node([f"{self.new_int()} = {e}"])

    def new_list(self) -> Node:
        e, k = self.tensor_expr(1)
        others = [n for n, kk in self.tensors.items() if kk == k]
        name = self.fresh("L")
        self.tlists[name] = k
        extra = self.rng.randint(0, 2) if others else 0
        items = [e] + [self.rng.choice(sorted(others)) for _ in range(extra)]
        node = Node([f"{name} = [{', '.join(items)}]"])
        if self.on("comprehension") and self.chance(0.4):
            node.lines.append(f"{name} = [v + 1 for v in {name} if v.dim() >= 0]")
        return node

    def new_dict(self) -> Node:
        e, k = self.tensor_expr(1)
        name = self.fresh("D")
        self.tdicts[name] = k
        return Node([f"{name} = {{'a': {e}, 'b': ({e}) * 2}}"])

    def new_tuple(self) -> Node:
        t, k = self.pick_tensor()
        name = self.fresh("t")
        self.tensors[name] = k
        tup = self.fresh("T")
        return Node(
            [
                f"{tup} = ({t}, {self.rng.choice(self.ints)}, ({t} + 1, 'k'))",
                f"{name} = {tup}[2][0] * {tup}[1]",
            ]
        )

    def item_stmt(self) -> Node:
        t, _ = self.pick_tensor()
        name = self.fresh("f")
        self.floats.append(name)
        return Node([f"{name} = {t}.float().mean().item()"])

    def tolist_stmt(self) -> Node:
        t, _ = self.pick_tensor()
        name = self.new_int()
        return Node([f"{name} = len({t}.tolist()) if {t}.dim() else 1"])

    def mask(self) -> Node:
        t, _ = self.pick_tensor(lambda k: len(k) >= 1)
        name = self.fresh("t")
        self.tensors[name] = (f"mask{self.counter}",)
        return Node([f"{name} = {t}[{t} > 0]"])

    def closure_def(self) -> Node:
        captured, ck = self.pick_tensor()
        fname = self.fresh("inner")
        body = [Node([f"return z * 2 + {self.rng.choice(self.ints)}"])]
        if broadcast(ck, ()) is not None and self.chance(0.5):
            body = [
                Node([f"return z * ({captured}).float().mean() + {self.rng.choice(self.ints)}"])
            ]
        self.local_funcs.append(fname)
        return Node(clauses=[(f"def {fname}(z):", body)])

    def nonlocal_def(self) -> Node:
        var = self.fresh("i")
        fname = self.fresh("bump")
        node = Node(
            clauses=[
                (f"def {fname}(k):", [Node([f"nonlocal {var}", f"{var} += k", f"return {var}"])])
            ]
        )
        self.ints.append(var)
        self.bumpers.append(fname)
        return Node(clauses=None, lines=[f"{var} = 0", *node.render(0)])

    def lambda_def(self) -> Node:
        fname = self.fresh("lam")
        self.local_funcs.append(fname)
        return Node([f"{fname} = lambda z: z * {self.number()} + {self.number()}"])

    def block(self, size: int = 2) -> list[Node]:
        nodes = [self.update() for _ in range(self.rng.randint(1, size))]
        return [n for n in nodes if n is not None]

    def if_chain(self, conditions: list[str]) -> Node:
        clauses = [(f"if {conditions[0]}:", self.block())]
        clauses += [(f"elif {c}:", self.block()) for c in conditions[1:]]
        if self.chance(0.6):
            clauses.append(("else:", self.block()))
        return Node(clauses=clauses)

    def if_const(self) -> Node:
        return self.if_chain([self.rng.choice(["True", "0", "1 > 2", "'a' in 'abc'", "None"])])

    def if_shape(self) -> Node:
        t, k = self.pick_tensor()
        conds = [f"{t}.dim() == {len(k)}", f"{t}.numel() > 6", f"{t}.dtype == torch.float64"]
        if k:
            conds += [f"{t}.shape[0] > 2", f"{t}.size(-1) == 3"]
        return self.if_chain(self.rng.sample(conds, self.rng.randint(1, 2)))

    def if_value(self) -> Node:
        conds = [
            f"{self.rng.choice(self.ints)} > 2", "len(lst) > 1", "'q' in d", "isinstance(n, int)",
        ]  # fmt: skip
        if self.on("global_read"):
            conds += ["G_FLAG", "G_MODE == 'b'", "isinstance(G_INT, float)", "G_LIST"]
        if self.on("closure"):
            conds += ["cap_flag", "cap_i % 2 == 1", "cap_t is not None and cap_f > 1"]
        return self.if_chain(self.rng.sample(conds, self.rng.randint(1, 3)))

    def if_tensor(self) -> Node:
        t, _ = self.pick_tensor()
        return self.if_chain([f"({t}).sum() > 0"])

    def loop(self, header: str) -> Node:
        self.looping = True
        try:
            return Node(clauses=[(header, self.block())])
        finally:
            self.looping = False

    def for_range(self) -> Node:
        bound = self.rng.choice(["3", "n", "len(lst)", "2"])
        var = self.new_int()
        node = self.loop(f"for {var} in range({bound}):")
        self.ints.remove(var)  # unbound when the loop does not run
        return node

    def for_list(self) -> Node:
        if self.tlists and self.chance(0.5):
            name = self.rng.choice(sorted(self.tlists))
            var = self.fresh("t")
            self.tensors[var] = self.tlists[name]
            node = self.loop(f"for {var} in {name}:")
            del self.tensors[var]  # only defined if the loop ran
            return node
        var = self.new_int()
        node = self.loop(f"for {var} in lst:")
        self.ints.remove(var)
        return node

    def for_dict(self) -> Node:
        var = self.fresh("t")
        self.tensors[var] = DICT_VALUE_KIND
        key = self.fresh("k")
        node = self.loop(f"for {key}, {var} in d.items():")
        del self.tensors[var]
        return node

    def for_zip(self) -> Node:
        a, b = self.fresh("i"), self.fresh("i")
        self.ints += [a, b]
        other = "G_LIST" if self.on("global_read") else "range(4)"
        header = self.rng.choice(
            [f"for {a}, {b} in zip(lst, {other}):", f"for {a}, {b} in enumerate(lst):"]
        )
        node = self.loop(header)
        self.ints.remove(a)
        self.ints.remove(b)
        return node

    def while_loop(self) -> Node:
        var = self.new_int()
        self.looping = True
        body = self.block()
        self.looping = False
        body.append(Node([f"{var} += 1"]))
        return Node(lines=[f"{var} = 0", *Node(clauses=[(f"while {var} < n:", body)]).render(0)])

    def try_block(self) -> Node:
        risky = self.rng.choice(
            ["lst[3]", "d['q']", "G_LIST[2]" if self.on("global_read") else "lst[2]"]
        )
        var = self.new_int()
        body = [*self.block(1), Node([f"{var} = {risky} * 0 + 1"]), *self.block(1)]
        if self.chance(0.3):
            body.append(Node(clauses=[("if n > 3:", [Node(["raise ValueError('big n')"])])]))
        clauses = [
            ("try:", body),
            ("except (IndexError, KeyError, ValueError):", [Node([f"{var} = -1"]), *self.block(1)]),
        ]
        if self.chance(0.5):
            clauses.append(("finally:", self.block(1)))
        return Node(lines=[f"{var} = 0", *Node(clauses=clauses).render(0)])

    def no_grad(self) -> Node:
        ctx = self.rng.choice(["torch.no_grad()", "torch.enable_grad()"])
        return Node(clauses=[(f"with {ctx}:", self.block())])

    # module level -------------------------------------------------------------------------
    def helper_def(self, index: int) -> str:
        arity = self.rng.choice([1, 2])
        name = f"helper{index}"
        args = "a" if arity == 1 else "a, b"
        extra = "b" if arity == 2 else "a"
        scale = "G_FLOAT" if self.on("global_read") else "0.5"
        lines = [f"def {name}({args}):", f"    out = torch.tanh(a) * {scale} + {extra}"]
        if self.on("if_value") and self.on("global_read"):
            lines += ["    if G_MODE == 'b':", "        out = out * 2"]
        if self.on("print") and self.chance(0.3):
            lines.append(f"    print('{name}', a.shape, file=OUT)")
        lines.append("    return out")
        self.helpers.append((name, arity))
        return "\n".join(lines)


def generate(seed: str, features: frozenset[str] = frozenset(FEATURES)) -> Program:
    gen = Generator(seed, features)
    prelude = [PRELUDE_HEAD]
    if gen.on("helper"):
        prelude += ["", *(gen.helper_def(i) + "\n" for i in range(gen.rng.randint(1, 2)))]
    body: list[Node] = []
    for _ in range(gen.rng.randint(3, 9)):
        node = gen.top_statement()
        if node is not None:
            body.append(node)
    locals_t = [n for n in gen.tensors if n.startswith("t")] or ["x"]
    returns = gen.rng.sample(locals_t, min(len(locals_t), gen.rng.randint(1, 3)))
    returns += gen.rng.sample(sorted(gen.tlists), min(len(gen.tlists), 1))
    returns += gen.rng.sample(sorted(gen.tdicts), min(len(gen.tdicts), 1))
    ints = [i for i in gen.ints if i.startswith("i")]
    returns += gen.rng.sample(ints, min(len(ints), 1))
    returns += gen.rng.sample(gen.floats, min(len(gen.floats), 1))
    return Program(seed, "\n".join(prelude), body, returns)
