"""Tricky functions shared by the behaviour and transformation tests."""

from __future__ import annotations

import asyncio


def loops(n):
    out = []
    for i in range(n):
        if i % 3 == 0:
            continue
        if i > 20:
            break
        j = 0
        while True:
            j += 1
            if j > i:
                break
            if j % 2:
                continue
            out.append((i, j))
    else:
        out.append("no break")
    k = n
    while k > 0:
        k -= 3
    else:
        out.append(("while-else", k))
    return out


def exceptions(x):
    log = []
    r = None
    try:
        try:
            if x == 0:
                raise ValueError("zero")
            r = 10 // (x - 1)
        except ValueError as e:
            log.append(str(e))
            r = -1
        except ZeroDivisionError:
            log.append("div")
            raise
        else:
            log.append("else")
        finally:
            log.append("finally")
        if x < 0:
            raise KeyError(x)
    except KeyError as e:
        log.append(("key", e.args))
        try:
            raise
        except KeyError:
            log.append("reraised")
    except ZeroDivisionError as e:
        log.append(type(e).__name__)
        raise RuntimeError("chained") from e
    return r, log


def finally_return(x):
    for i in range(3):
        try:
            if x == i:
                return ("returned", i)
            if x == -i:
                continue
        finally:
            if x == 10:
                break  # noqa: B012 (intended: break out of finally)
    return "end"


class Recorder:
    def __init__(self, log, name, suppress=False):
        self.log, self.name, self.suppress = log, name, suppress

    def __enter__(self):
        self.log.append(("enter", self.name))
        return self.name

    def __exit__(self, kind, value, tb):
        self.log.append(("exit", self.name, kind and kind.__name__))
        return self.suppress


def withs(flag):
    log = []
    with Recorder(log, "a") as a, Recorder(log, "b", suppress=True) as b:
        with Recorder(log, "c"):
            log.append((a, b))
            if flag == 1:
                raise RuntimeError("inner")
        if flag == 2:
            return log
    with Recorder(log, "d"):
        if flag == 3:
            raise ValueError("escapes")
    return log


def sub_gen(n):
    for i in range(n):
        got = yield ("sub", i)
        if got == "stop":
            return "stopped"
    return "sub done"


def gen(n):
    total = yield "start"
    for i in range(n):
        try:
            got = yield i
        except ValueError as e:
            got = ("caught", e.args)
        total = (total, got)
    result = yield from sub_gen(2)
    yield (total, result)
    return "end"


def drive(gen_func, *args):
    g = gen_func(*args)
    out = [next(g)]
    try:
        out.append(g.send("a"))
        out.append(g.throw(ValueError("boom")))
        while True:
            out.append(g.send("x"))
    except StopIteration as stop:
        out.append(("return", stop.value))
    return out


async def async_child(x):
    await asyncio.sleep(0)
    if x < 0:
        raise ValueError(x)
    return x * 2


class AsyncRecorder:
    def __init__(self, log):
        self.log = log

    async def __aenter__(self):
        self.log.append("aenter")
        return self

    async def __aexit__(self, *exc):
        self.log.append(("aexit", exc[0] and exc[0].__name__))
        return True


async def async_ticker(n):
    for i in range(n):
        await asyncio.sleep(0)
        yield i


async def async_main(x):
    log = []
    async with AsyncRecorder(log):
        log.append(await async_child(x))
    async for i in async_ticker(3):
        log.append(i)
    log.append([i async for i in async_ticker(2)])
    try:
        await async_child(-x)
    except ValueError as e:
        log.append(("caught", e.args))
    return log


def comprehensions(xs):
    squares = [x * x for x in xs if x % 2]
    table = {x: [y for y in range(x)] for x in xs}
    uniq = {x % 3 for x in xs}
    lazy = sum(x for x in xs)
    x = "outer"  # 3.12 inlines comprehensions and must restore this binding
    funcs = [lambda: x for x in xs]  # noqa: B023 (all capture the comprehension's cell)
    nested = [[i * j for j in range(i)] for i in range(4)]
    return squares, table, uniq, lazy, x, [f() for f in funcs], nested


def closures(a, b=10):
    def add(c):
        nonlocal b
        b += c
        return a + b

    first = add(1)
    a = 100  # a is an argument and a cell
    counter = 0

    def bump():
        nonlocal counter
        counter += 1
        return counter

    bump()
    bump()
    del bump
    return first, add(2), counter, (lambda: a * 2)()


def make_counter(start):
    count = start

    def step(k=1):
        nonlocal count
        count += k
        return count

    return step


def callee(a, b=2, *args, c, d=4, **kwargs):
    return a, b, args, c, d, sorted(kwargs.items())


def calls(x):
    args = (1, 2, 3)
    kw = {"c": 5, "z": 6}
    return [
        callee(x, c=1),
        callee(x, 2, 3, c=4, e=5),
        callee(*args, **kw),
        callee(x, *args, d=9, **kw),
        f"{x:>5}|{x!r}|{x}",
        f"{x!r:>6}{x + 1}{x!s}",
        max(args, key=lambda v: -v),
    ]


class Base:
    def who(self, tag):
        return ("base", tag)


class Child(Base):
    def who(self, tag):
        return ("child", super().who(tag), super().who(tag + 1), super().__class__)


class Point:
    __match_args__ = ("x", "y")

    def __init__(self, x, y):
        self.x, self.y = x, y


def matcher(value):
    match value:
        case 0 | 1 as small:
            return ("small", small)
        case [first, *rest] if first == "cmd":
            return ("cmd", rest)
        case (a, b, c):
            return ("triple", a + b + c)
        case {"kind": "pt", "at": Point(x=0, y=y)}:
            return ("on axis", y)
        case {"kind": kind, **others}:
            return ("mapping", kind, sorted(others))
        case Point(x, y) if x == y:
            return ("diagonal", x)
        case Point(x=x):
            return ("point", x)
        case str() as s:
            return ("str", s)
        case _:
            return "other"
