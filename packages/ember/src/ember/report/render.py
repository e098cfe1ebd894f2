"""Trace -> one self-contained HTML page. Page skeletons are templates (templates/*.html,
string.Template); the functions here render the repeated pieces (tables, listings, the
stage chart) and escape every text that comes from the trace."""

from __future__ import annotations

import html
import os
from collections import Counter
from importlib import resources
from string import Template

from ember.report.highlight import highlight
from ember.report.load import Frame, Graph, Trace, break_sites
from ember.report.suggest import suggest

# Stages in pipeline order; the chart lists any other name after these.
STAGE_ORDER = ("trace", "backend", "aot", "decompose", "lower", "schedule", "codegen",
               "cpp_build", "triton_build")  # fmt: skip
STAGE_COLOURS = ("#4c6ef5", "#868e96", "#7048e8", "#ae3ec9", "#1098ad", "#0ca678", "#f59f00",
                 "#e8590c", "#c92a2a")  # fmt: skip
OPEN_NODES = 30  # a frame's graphs up to this many nodes are shown unfolded
GRAPH_LABELS = {"torch": "torch-level graph (tracer)", "aot_forward": "forward (aot, prims)",
                "aot_backward": "backward (aot, prims)",
                "aot_inference": "inference (aot, prims)", "prim": "prim graph"}  # fmt: skip


def _template(name: str) -> Template:
    return Template(resources.files("ember.report").joinpath("templates", name).read_text())


def _asset(name: str) -> str:
    return resources.files("ember.report").joinpath("templates", name).read_text()


e = html.escape


def table(header: list[str], rows: list[list[str]], cls: str = "", raw: bool = False) -> str:
    """A table; cells are escaped unless `raw` (callers that pass HTML escape themselves)."""
    head = "".join(f"<th>{e(h)}</th>" for h in header)
    body = "".join(
        "<tr>" + "".join(f"<td>{c if raw else e(str(c))}</td>" for c in row) + "</tr>"
        for row in rows
    )
    return f'<table class="{cls}"><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>'


def render(
    traces: list[Trace], title: str = "Ember compile report", timelines: list[str] | None = None
) -> str:
    """The page; `timelines`: each trace's Chrome-trace file, relative to the page (linked)."""
    links = timelines or [""] * len(traces)
    body = "\n".join(
        _process(t, n, link) for n, (t, link) in enumerate(zip(traces, links, strict=True))
    )
    frames = sum(len(t.frames) for t in traces)
    graphs = sum(sum(1 for g in t.graphs.values() if g.stage == "torch") for t in traces)
    breaks = sum(len(f.breaks) for t in traces for f in t.frames.values())
    recompiles = sum(1 for t in traces for f in t.frames.values() if f.recompile)
    kernels = sum(len(g.kernels) for t in traces for g in t.graphs.values())
    seconds = sum(sum(t.stage_totals().values()) for t in traces)
    counts = [("frames", frames), ("graphs", graphs), ("graph breaks", breaks),
              ("recompiles", recompiles), ("kernels", kernels),
              ("compile seconds", f"{seconds:.2f}")]  # fmt: skip
    process = "; ".join(
        f"pid {t.process.get('pid', '?')}: {' '.join(map(str, t.process.get('argv', [])))} "
        f"(Python {t.process.get('python', '?')}, torch {t.process.get('torch', '?')})"
        for t in traces
    )
    return _template("page.html").substitute(
        title=e(title),
        css=_asset("report.css"),
        js=_asset("report.js"),
        process=e(process),
        counts="".join(
            f'<li id="count-{k.replace(" ", "-")}"><b>{e(str(v))}</b> {e(k)}</li>'
            for k, v in counts
        ),
        sites=_break_sites(traces),
        body=body,
        sources=e(", ".join(str(t.path) for t in traces) or "no trace files"),
    )


def _break_sites(traces: list[Trace]) -> str:
    """Distinct graph-break sites with their counts, most frequent first (the page's top)."""
    sites = break_sites(traces)
    if not sites:
        return ""
    rows = []
    for site in sites:
        file, _, line = site.location.rpartition(":")
        short = f"{os.path.basename(file)}:{line}" if file else site.location
        tip = suggest(site.reason)
        rows.append([f'<code title="{e(site.location)}">{e(short)}</code>', e(site.reason),
                     f'<span class="num">{site.count}</span>',
                     e(tip.title) if tip is not None else "",
                     e(", ".join(f"#{f}" for f in dict.fromkeys(site.frames)))])  # fmt: skip
    total = sum(s.count for s in sites)
    return (f'<section id="break-sites"><h2>Graph-break sites ({len(sites)} sites, '
            f"{total} breaks)</h2>"
            + table(["where", "reason", "count", "hint", "frames"], rows, "break-sites", raw=True)
            + "</section>")  # fmt: skip


def _timeline_link(link: str, pid: str) -> str:
    if not link:
        return ""
    return (f'<p class="timeline">Timeline of every compile (stages, kernel builds): '
            f'<a id="{pid}-timeline" href="{e(link)}" download>{e(link)}</a>; open it in '
            "chrome://tracing or ui.perfetto.dev (Open trace file).</p>")  # fmt: skip


def _process(trace: Trace, n: int, link: str = "") -> str:
    pid = f"p{n}"
    frames = sorted(trace.frames.values(), key=lambda f: f.id)
    return _template("process.html").substitute(
        pid=pid,
        timeline=_timeline_link(link, pid),
        heading=e(f"Process {trace.process.get('pid', '?')} ({trace.path.name})"),
        chart=stage_chart(trace.stage_totals()),
        per_graph=_per_graph(trace),
        tree=compile_tree(trace, pid),
        index=_index(trace, frames, pid),
        frames="\n".join(_frame(trace, f, pid) for f in frames),
        caches=_caches(trace),
        fallbacks=_fallbacks(trace),
        autotune=_autotune(trace, pid),
    )


def compile_tree(trace: Trace, pid: str) -> str:
    """frame (code) -> its compiles (id, recompile reason) -> their graphs -> kernels."""
    items = []
    for frames in trace.compile_groups():
        first = frames[0]
        compiles = "".join(_compile_item(trace, f, pid) for f in frames)
        items.append(
            f'<li class="tree-frame">frame {e(first.compile_id.split("/")[0])}: '
            f"<code>{e(first.code.get('qualname', '?'))}</code> ({e(_where(first))})"
            f"<ul>{compiles}</ul></li>"
        )
    if not items:
        return '<p class="empty">No frames compiled.</p>'
    return f'<ul class="compile-tree" id="{pid}-compile-tree">{"".join(items)}</ul>'


def _compile_item(trace: Trace, frame: Frame, pid: str) -> str:
    why = ""
    if frame.recompile:
        why = f' <span class="why">recompiled: {e(frame.recompile)}</span>'
    elif frame.skipped is not None:
        why = f' <span class="why">ran eagerly: {e(frame.skipped)}</span>'
    graphs = [trace.graphs[g] for g in frame.graphs if g in trace.graphs]
    inner = "".join(_graph_item(trace, g) for g in graphs)
    return (
        f'<li class="tree-compile"><a href="#{pid}-frame-{frame.id}">'
        f"<b>{e(frame.compile_id)}</b></a>{why}" + (f"<ul>{inner}</ul>" if inner else "") + "</li>"
    )


def _graph_item(trace: Trace, graph: Graph) -> str:
    children = sorted((g for g in trace.graphs.values() if g.parent == graph.id),
                      key=lambda g: g.id)  # fmt: skip
    kernels = ", ".join(k.get("name", "?") for k in graph.kernels)
    listed = f' <span class="tree-kernels">kernels: {e(kernels)}</span>' if kernels else ""
    inner = "".join(_graph_item(trace, c) for c in children)
    return (
        f'<li class="tree-graph">graph {graph.id}: '
        f"{e(GRAPH_LABELS.get(graph.stage, graph.stage))}, {len(graph.rows)} nodes{listed}"
        + (f"<ul>{inner}</ul>" if inner else "")
        + "</li>"
    )


def _ordered(names) -> list[str]:
    known = [s for s in STAGE_ORDER if s in names]
    return known + sorted(set(names) - set(known))


def stage_chart(totals: dict[str, float]) -> str:
    """Horizontal bars, one per stage, as inline SVG."""
    names = _ordered(totals)
    if not names:
        return '<p class="empty">No stage times recorded.</p>'
    top = max(totals.values()) or 1.0
    width, bar, label = 420, 18, 110
    rows = []
    for i, name in enumerate(names):
        y = i * (bar + 6)
        w = max(1.0, totals[name] / top * width)
        colour = (
            STAGE_COLOURS[STAGE_ORDER.index(name) % len(STAGE_COLOURS)]
            if name in STAGE_ORDER
            else "#495057"
        )
        rows.append(
            f'<g class="bar" data-stage="{e(name)}"><text x="0" y="{y + 13}">{e(name)}</text>'
            f'<rect x="{label}" y="{y}" width="{w:.1f}" height="{bar}" fill="{colour}">'
            f"<title>{e(name)}: {totals[name]:.3f} s</title></rect>"
            f'<text x="{label + w + 6:.1f}" y="{y + 13}">{totals[name]:.3f} s</text></g>'
        )
    height = len(names) * (bar + 6)
    return (
        f'<svg class="stage-chart" role="img" aria-label="compile time by stage" '
        f'xmlns="http://www.w3.org/2000/svg" width="{label + width + 90}" height="{height}">'
        + "".join(rows)
        + "</svg>"
    )


def _graph_stage_seconds(trace: Trace, graph: Graph) -> dict[str, float]:
    """A torch graph's own stage times (its aot graphs' are recorded under it)."""
    return dict(graph.stages)


def _per_graph(trace: Trace) -> str:
    torch_graphs = [g for g in trace.graphs.values() if g.stage == "torch"]
    if not torch_graphs:
        return '<p class="empty">No graphs compiled.</p>'
    names = _ordered({n for g in torch_graphs for n in g.stages})
    rows = []
    for g in sorted(torch_graphs, key=lambda g: g.id):
        seconds = _graph_stage_seconds(trace, g)
        frame = trace.frames.get(g.frame)
        where = frame.code.get("qualname", "?") if frame is not None else "?"
        rows.append([f"graph {g.id}", where, str(len(g.rows))]
                    + [f"{seconds.get(n, 0.0):.3f}" for n in names]
                    + [f"{sum(seconds.values()):.3f}"])  # fmt: skip
    return table(["graph", "frame", "nodes", *names, "total s"], rows, "per-graph")


def _where(frame: Frame) -> str:
    code = frame.code
    return f"{os.path.basename(code.get('file', '?'))}:{code.get('line', '?')}"


def _index(trace: Trace, frames: list[Frame], pid: str) -> str:
    rows = []
    for n, f in enumerate(frames, 1):
        fid = f"{pid}-frame-{f.id}"
        status = "ran eagerly: " + f.skipped if f.skipped is not None else "compiled"
        search = e(f"{f.code.get('qualname', '')} {f.code.get('file', '')}")
        rows.append(
            f'<tr class="frame-row" data-name="{search}"><td class="num">{n}</td>'
            f"<td>{e(f.compile_id)}</td>"
            f'<td><a href="#{fid}"><code>{e(f.code.get("qualname", "?"))}</code></a></td>'
            f'<td>{e(_where(f))}</td><td class="num">{len(f.graphs)}</td>'
            f'<td class="num">{len(f.breaks)}</td><td class="num">{1 if f.recompile else 0}</td>'
            f'<td class="num">{sum(f.stages.values()) + _frame_graph_seconds(trace, f):.3f}</td>'
            f"<td>{e(status)}</td></tr>"
        )
    head = "".join(f"<th>{h}</th>" for h in ("#", "compile id", "function", "where", "graphs",
                                             "breaks", "recompile", "compile s", "status"))  # fmt: skip
    return (f'<table id="{pid}-frame-index" class="frame-index"><thead><tr>{head}</tr></thead>'
            f"<tbody>{''.join(rows)}</tbody></table>")  # fmt: skip


def _frame_graph_seconds(trace: Trace, frame: Frame) -> float:
    return sum(sum(trace.graphs[g].stages.values()) for g in frame.graphs if g in trace.graphs)


def _frame(trace: Trace, frame: Frame, pid: str) -> str:
    status = ["skipped" if frame.skipped is not None else "compiled"]
    if frame.breaks:
        status.append("has-breaks")
    if frame.recompile:
        status.append("recompiled")
    recompile = (
        f'<div class="recompile"><b>Recompiled</b> because {e(frame.recompile)}</div>'
        if frame.recompile else ""
    )  # fmt: skip
    if frame.skipped is not None:
        recompile += f'<div class="recompile"><b>Ran eagerly:</b> {e(frame.skipped)}</div>'
    return _template("frame.html").substitute(
        fid=f"{pid}-frame-{frame.id}",
        status=" ".join(status),
        search=e(f"{frame.code.get('qualname', '')} {frame.code.get('file', '')}"),
        number=frame.id,
        compile_id=e(frame.compile_id),
        name=e(frame.code.get("qualname", "?")),
        where=e(f"{frame.code.get('file', '?')}:{frame.code.get('line', '?')}"),
        recompile=recompile,
        breaks="".join(_break(b) for b in frame.breaks),
        source=_source(frame),
        graphs=_graphs(trace, frame),
        symbols=_symbols(frame),
        guards=_guards(frame),
        original=highlight(frame.bytecode[0], "text"),
        rewritten=highlight(frame.bytecode[1], "text"),
    )


def _break(brk: dict) -> str:
    stack = brk.get("user_stack") or []
    chain = (
        "<details><summary>user stack</summary><pre>" + e("\n".join(stack)) + "</pre></details>"
        if len(stack) > 1 else ""
    )  # fmt: skip
    tip = suggest(brk.get("reason", ""))
    advice = ""
    if tip is not None:
        example = ""
        if tip.before:
            example = (
                '<div class="side-by-side"><pre class="code">'
                + highlight(tip.before, "python")
                + '</pre><pre class="code">'
                + highlight(tip.after, "python")
                + "</pre></div>"
            )
        advice = (f'<div class="suggestion"><b>{e(tip.title)}.</b> {e(tip.advice)}{example}'
                  "</div>")  # fmt: skip
    return (f'<div class="break"><b>Graph break</b> at <code>{e(brk.get("location", "?"))}</code>:'
            f" {e(brk.get('reason', ''))}{chain}{advice}</div>")  # fmt: skip


def _break_lines(frame: Frame) -> set[int]:
    lines = set()
    for brk in frame.breaks:
        file, _, line = str(brk.get("location", "")).rpartition(":")
        if file == frame.code.get("file") and line.isdigit():
            lines.add(int(line))
    return lines


def _source(frame: Frame) -> str:
    """The frame's lines of its file, graph-break lines marked."""
    lines = frame.file_text.splitlines()
    if not lines:
        return '<span class="empty">(source not available)</span>'
    first = int(frame.code.get("line", 1))
    last = max(int(frame.code.get("last_line", first)), *_break_lines(frame), first)
    marked = _break_lines(frame)
    out = []
    for number in range(first, min(last, len(lines)) + 1):
        cls = "line break-line" if number in marked else "line"
        out.append(f'<span class="{cls}" data-line="{number}"><span class="lineno">{number}</span>'
                   f"{highlight(lines[number - 1], 'python')}</span>")  # fmt: skip
    return "".join(out)


def _graph(trace: Trace, graph: Graph, depth: int = 0) -> str:
    rows = [list(row[:6]) for row in graph.rows]
    header = ["op", "name", "target", "args", "kwargs", "value"]
    computed_by = {n: k["name"] for k in graph.kernels for n in k.get("fused_nodes") or ()}
    if computed_by:  # which kernel computes each node (the fusion, seen from the graph)
        header.append("kernel")
        rows = [[*row, computed_by.get(row[1], "")] for row in rows]
    children = sorted(
        (g for g in trace.graphs.values() if g.parent == graph.id), key=lambda g: g.id
    )
    inputs = f" inputs: {e(', '.join(graph.inputs))}" if graph.inputs else ""
    kernels = "".join(_kernel(k) for k in graph.kernels)
    wrapper = (
        f"<details><summary>wrapper</summary><pre class=\"code\">{highlight(graph.wrapper, 'python')}"
        "</pre></details>"
        if graph.wrapper else ""
    )  # fmt: skip
    return (
        f'<details class="graph" id="{e(str(trace.path.name))}-graph-{graph.id}" '
        f'data-stage="{e(graph.stage)}"{" open" if depth == 0 and len(rows) <= OPEN_NODES else ""}>'
        f"<summary>graph {graph.id}: {e(GRAPH_LABELS.get(graph.stage, graph.stage))}, "
        f"{len(graph.rows)} nodes{inputs}</summary>"
        + table(header, rows, "graph-table")
        + f'<details><summary>code</summary><pre class="code">{highlight(graph.code.strip(chr(10)), "python")}'
        "</pre></details>"
        + (f'<div class="kernels"><h4>Kernels ({len(graph.kernels)})</h4>{kernels}</div>'
           if graph.kernels else "")
        + wrapper
        + _loop_ir(graph)
        + "".join(_graph(trace, c, depth + 1) for c in children)
        + "</details>"
    )  # fmt: skip


# The scheduler's log lines (ember.fusion) by what they decided.
FUSION_KINDS = (("fuse ", "fused"), ("no fusion", "not fused"), ("dead code", "removed"),
                ("buffer reuse", "reuse"), ("in place", "in place"),
                ("not in place", "not in place"))  # fmt: skip


def fusion_kind(line: str) -> str:
    return next((kind for prefix, kind in FUSION_KINDS if line.startswith(prefix)), "")


def _loop_ir(graph: Graph) -> str:
    """A prim graph's loop IR, kernel groups and fusion decisions (fused, refused: why)."""
    if not (graph.loop_ir or graph.kernel_groups or graph.fusion):
        return ""
    rows = [[fusion_kind(line), line] for line in graph.fusion]
    fused = sum(1 for row in rows if row[0] == "fused")
    refused = sum(1 for row in rows if row[0] == "not fused")
    return (
        f'<details class="loop-ir"><summary>Loop IR</summary><pre class="code">'
        f"{e(graph.loop_ir)}</pre></details>"
        f'<details class="kernel-groups"><summary>Kernel groups</summary><pre class="code">'
        f"{e(graph.kernel_groups)}</pre></details>"
        f'<details class="fusion"><summary>Fusion decisions ({fused} fused, {refused} not '
        f"fused)</summary>" + table(["decision", "detail"], rows, "fusion-decisions") + "</details>"
    )


def _kernel(kernel: dict) -> str:
    fused = ", ".join(kernel.get("fused_nodes") or []) or "—"
    extern = f" (extern: {e(kernel['extern'])})" if kernel.get("extern") else ""
    code = kernel.get("code") or ""
    listing = (
        f'<pre class="code">{highlight(code, kernel.get("language", ""))}</pre>' if code else ""
    )
    return (f'<div class="kernel" data-kernel="{e(kernel.get("name", ""))}"><b>{e(kernel.get("name", "?"))}</b>'
            f'{extern} <span class="fused">fuses: {e(fused)}</span>{listing}</div>')  # fmt: skip


def _graphs(trace: Trace, frame: Frame) -> str:
    graphs = [trace.graphs[g] for g in frame.graphs if g in trace.graphs]
    if not graphs:
        return ""
    return "<h4>Graphs</h4>" + "".join(_graph(trace, g) for g in graphs)


def _symbols(frame: Frame) -> str:
    """The frame's dynamic sizes: each symbol, where it was read, its value, the guards on it."""
    if not frame.symbols:
        return ""
    rows = []
    for sym in frame.symbols:
        name = str(sym.get("symbol", "?"))
        guards = "<br>".join(
            f"<code>{e(str(g.get('text', '')))}</code>" for g in frame.symbol_guards(name)
        )
        sources = "<br>".join(f"<code>{e(s)}</code>" for s in sym.get("sources") or [])
        rows.append([f"<b>{e(name)}</b>", sources, e(str(sym.get("value", ""))),
                     e(str(sym.get("range", ""))), guards])  # fmt: skip
    return (f'<div class="symbols"><h4>Dynamic sizes ({len(rows)} symbols)</h4>'
            + table(["symbol", "read from", "example value", "range", "guards on it"], rows,
                    "symbols", raw=True)
            + "</div>")  # fmt: skip


def _guards(frame: Frame) -> str:
    if not frame.guards and not frame.shape_guards:
        return ""
    rows = [[g.get("kind", ""), g.get("text", ""), g.get("where", "")] for g in frame.guards]
    rows += [["SHAPE", f"{g.get('code', '')}  ({g.get('text', '')})", g.get("where", "")]
             for g in frame.shape_guards]  # fmt: skip
    return (f"<details class=\"guards\"><summary>Guards ({len(rows)})</summary>"
            + table(["kind", "guard", "added at"], rows, "guards")
            + f'<details><summary>guard function</summary><pre class="code">'
            f"{highlight(frame.guard_source, 'python')}</pre></details></details>")  # fmt: skip


def _caches(trace: Trace) -> str:
    counts: Counter = Counter()
    for c in trace.caches:
        level = c.get("level", "?")
        if "result" in c:
            counts[(level, c["result"])] += 1
        else:
            counts[(level, "hits")] += c.get("hits", 0)
            counts[(level, "misses")] += c.get("misses", 0)
    if not counts:
        return '<p class="empty">No cache lookups recorded.</p>'
    levels = sorted({lvl for lvl, _ in counts})
    rows = [[lvl, str(counts[(lvl, "hits")]), str(counts[(lvl, "misses")]),
             str(counts[(lvl, "bypasses")])] for lvl in levels]  # fmt: skip
    return table(["cache", "hits", "misses", "bypasses"], rows, "caches")


def _fallbacks(trace: Trace) -> str:
    if not trace.fallbacks:
        return '<p class="empty">No fallbacks: every graph was compiled.</p>'
    rows = [[f.get("kind", ""), f.get("op", "") or (f.get("code") or {}).get("qualname", ""),
             str(f.get("count", 1)), f.get("reason", "")] for f in trace.fallbacks]  # fmt: skip
    return table(["kind", "op / frame", "count", "reason"], rows, "fallbacks")


def _autotune(trace: Trace, pid: str) -> str:
    """backend="autotune": per graph, each candidate's median time, the kept one and why."""
    if not trace.autotune:
        return ""
    rows = []
    for d in trace.autotune:
        timings = d.get("timings_ms") or {}
        runs = d.get("runs") or {}
        times = "<br>".join(
            f"{'<b>' if n == d.get('choice') else ''}{e(n)} {ms:.3f} ms "
            f"({runs.get(n, 0)} rounds){'</b>' if n == d.get('choice') else ''}"
            for n, ms in sorted(timings.items(), key=lambda item: item[1])
        )
        dropped = {**(d.get("failures") or {}), **(d.get("raced_out") or {})}
        why = [f"{k}: {v}" for k, v in (d.get("evidence") or {}).items()]
        why += [f"{k} dropped: {v}" for k, v in dropped.items()]
        frame = d.get("frame")
        where = f'<a href="#{pid}-frame-{frame}">frame {frame}</a>' if frame is not None else ""
        rows.append([
            where, f"<code>{e(str(d.get('graph', '')))}</code>",
            "fwd+bwd" if d.get("training") else "forward", times or "(not timed)",
            f"<b>{e(str(d.get('choice', '')))}</b> ({e(str(d.get('source', '')))})",
            "<br>".join(e(w) for w in why),
        ])  # fmt: skip
    return '<h3>Backend choices (backend="autotune")</h3>' + table(
        ["frame", "graph", "timed", "candidates (median per call)", "kept", "evidence"],
        rows, "autotune", raw=True,
    )  # fmt: skip
