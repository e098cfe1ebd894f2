"""Reductions through the Triton target: every reduction type in each kernel kind
(persistent row in registers, looped row, split into partials + a finishing kernel),
epilogues, Welford and the canonical softmax / layernorm graphs."""

import pytest
import torch

from ember_primops import prims


def _kinds(compiled):
    return [k.kind for k in compiled.kernels]


def test_softmax_is_one_persistent_kernel(check):
    from canonical_graphs import GOLDEN

    fn, inputs = GOLDEN["softmax"]
    compiled = check(fn, *inputs())
    assert compiled.kernel_count == 1 and _kinds(compiled) == ["persistent"]
    # the row is in registers: exp(x - max) is kept there for the division, not stored
    # to a scratch buffer and reloaded (that doubled the kernel's memory traffic)
    assert compiled.triton_source.count("tl.store(") == 1
    assert "debug_barrier" not in compiled.triton_source.split("def k0_red_")[1]


def test_row_values_read_at_another_index_are_still_stored(check):
    def f(a):
        e = prims.exp(a)
        flipped = prims.rev(e, [1])  # read at another index than written
        total = prims.sum(e, [1])
        return (prims.div(flipped, prims.broadcast_in_dim(total, [4, 8], [0])),)

    check(f, torch.randn(4, 8), atol=1e-6, rtol=1e-5)


def _shared_sum(a, b, c):
    # t reads three whole buffers and has two readers: stored as a full-row node of the
    # reductions' kernel (MAX_SHARED_FULL_READS)
    t = prims.add(prims.add(a, b), c)
    return (prims.sum(t, [1]), prims.sum(prims.mul(t, t), [1]))


@pytest.mark.parametrize(("shape", "kinds"), [((3, 5000), ["looped"]),
                                              ((2, 300000), ["partial", "finish"])])  # fmt: skip
def test_row_values_read_in_their_own_loop_pass_are_not_stored(check, shape, kinds):
    """A looped or split row's internal value read only in the pass that computes it stays
    in that pass: only the two sums are stored (the max-pool backward's window terms were
    stored and never read, 1.6 GB a training step of ESE-VoVNet)."""
    torch.manual_seed(0)
    inputs = [torch.randn(*shape) for _ in range(3)]
    compiled = check(_shared_sum, *inputs, atol=1e-2, rtol=1e-4)
    assert _kinds(compiled) == kinds
    stores = compiled.triton_source.count("tl.store(")
    assert stores == (2 if kinds == ["looped"] else 4)  # the split: partials, then results


def test_row_values_read_in_a_later_loop_pass_are_stored(check):
    def f(a, b, c):
        t = prims.add(prims.add(a, b), c)
        total = prims.sum(prims.mul(t, t), [1])
        return (prims.div(t, prims.broadcast_in_dim(total, [3, 5000], [0])), total)

    torch.manual_seed(0)
    inputs = [torch.randn(3, 5000) for _ in range(3)]
    compiled = check(f, *inputs, atol=1e-5, rtol=1e-4)
    assert _kinds(compiled) == ["looped"]


def test_layer_norm_is_one_kernel(check):
    from canonical_graphs import layer_norm

    x, w, b = torch.randn(16, 48), torch.randn(48), torch.randn(48)
    compiled = check(layer_norm(16, 48), x, w, b, atol=1e-5, rtol=1e-5)
    assert compiled.kernel_count == 1


def test_reduction_epilogue_is_one_kernel(check):
    from canonical_graphs import GOLDEN

    fn, inputs = GOLDEN["reduction_epilogue"]
    assert check(fn, *inputs()).kernel_count == 1


@pytest.mark.parametrize("dims", [[1], [0, 2], [0, 1, 2]])
def test_sum_prod_amax_amin(check, dims):
    x = torch.randn(3, 4, 5)

    def f(a):
        return (prims.sum(a, dims), prims.prod(a, dims), prims.amax(a, dims), prims.amin(a, dims))

    check(f, x, atol=1e-5, rtol=1e-5)


def _every_kind(a, b):
    vm = prims.var_mean(a, [1], 1.0)
    return (
        prims.sum(a, [1]),
        prims.amax(a, [1]),
        prims.amin(a, [1]),
        prims.argmax(a, 1),
        prims.argmin(a, 1),
        vm[0],
        vm[1],
        prims.any(prims.gt(a, prims.abs(a)), [1]),
        prims.sum(b, [1]),
        prims.xor_sum(b, [1]),
    )


@pytest.mark.parametrize(("shape", "kind"), [((6, 50), "persistent"), ((3, 5000), "looped")])
def test_every_reduction_kind(check, shape, kind):
    x = torch.randn(*shape)
    x[1, 7] = x[1, 33] = 9.0  # ties resolve to the first occurrence
    x[2, 3] = float("nan")  # NaN wins max/argmax
    b = torch.randint(-1000, 1000, shape)
    compiled = check(_every_kind, x, b, atol=1e-5, rtol=1e-4)
    assert set(_kinds(compiled)) == {kind}


def test_arg_reductions_ties_and_nan(check):
    x = torch.randn(6, 7)
    x[2, 3] = x[2, 5] = 9.0
    x[4, 1] = x[4, 6] = float("nan")
    check(lambda a: (prims.argmax(a, 1), prims.argmin(a, 1), prims.argmax(a, 0)), x)


def test_boolean_and_integer_reductions(check):
    x = (torch.rand(4, 6) > 0.3).to(torch.float32)
    i = torch.randint(-1000, 1000, (4, 7))

    def f(a, b):
        return (
            prims.any(a, [1]),
            prims.all(a, [1]),
            prims.all(prims.gt(a, a), [0, 1]),
            prims.sum(b, [1]),
            prims.amax(b, [0]),
            prims.xor_sum(b, [1]),
            prims.argmin(b, 1),
        )

    check(f, x, i)


def test_very_long_rows_split_into_partials(check):
    shape = (1, 70000)
    x = torch.randn(*shape)
    x[0, 12345] = 50.0

    def f(a):
        vm = prims.var_mean(a, [1], 1.0)
        return (
            prims.sum(a, [1]),
            prims.argmax(a, 1),
            vm[0],
            vm[1],
            prims.rsqrt(prims.add(prims.sum(prims.mul(a, a), [1]), vm[1])),
        )

    compiled = check(f, x, atol=1e-4, rtol=1e-4)
    assert _kinds(compiled) == ["partial", "finish"] and compiled.kernel_count == 2
    assert "_ws0" in compiled.wrapper_source


@pytest.mark.parametrize("reciprocal", [True, False])
@pytest.mark.parametrize("shape", [(5, 5001), (3, 70001)])
def test_welford_loops_divide_once_a_pass(check, shape, reciprocal, monkeypatch):
    # a looped row (5001) and a split one (70001), both with a masked tail: each lane's
    # count in pass j is j+1, so the mean's update may multiply by one reciprocal a pass
    from ember_codegen.triton import reduction_emit

    monkeypatch.setattr(reduction_emit, "WELFORD_RECIPROCAL_A_PASS", reciprocal)
    torch.manual_seed(0)
    x = torch.randn(*shape) * 3.0 + 100.0  # a large mean: the update's rounding shows

    def f(a):
        vm = prims.var_mean(a, [1], 1.0)
        return vm[0], vm[1]

    compiled = check(f, x, atol=1e-3, rtol=1e-5)
    assert {"looped", "partial"} & set(_kinds(compiled)), _kinds(compiled)
    code = "\n".join(k.code for k in compiled.kernels)
    once = "acc0_rw = 1.0 / (roffset // RBLOCK + 1.0)"
    assert ("acc0_d / " not in code and once in code) if reciprocal else once not in code


def test_split_sum_of_a_long_tensor_to_a_scalar(check):
    x = torch.rand(300000) + 1.0
    compiled = check(lambda a: (prims.sum(a, [0]),), x)
    assert _kinds(compiled) == ["partial", "finish"]


def test_softmax_over_long_rows_loops(check):
    from canonical_graphs import softmax

    compiled = check(softmax(2, 6000), torch.randn(2, 6000))
    assert _kinds(compiled) == ["looped"]


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_reduced_precision_reductions(check, dtype):
    x = torch.randn(8, 64).to(dtype)

    def f(a):
        up = prims.convert_element_type(a, torch.float32)
        return (
            prims.sum(a, [1]),
            prims.amax(a, [1]),
            prims.argmax(a, 1),
            prims.convert_element_type(prims.sum(up, [1]), dtype),
        )

    check(f, x)


def _unsynced_reloads(source: str) -> list[str]:
    """Loads of a pointer this kernel stored to with no block barrier in between (a race on
    the GPU: the elements may have been written by other threads)."""
    import re

    problems, stored = [], set()
    for line in source.splitlines():
        if line.startswith("def "):
            stored = set()
        if "tl.debug_barrier()" in line:
            stored = set()
        for pointer in re.findall(r"tl\.load\((ptr_\w+)", line):
            if pointer in stored:
                problems.append(line.strip())
        stored.update(re.findall(r"tl\.store\((ptr_\w+)", line))
    return problems


@pytest.mark.parametrize("graph", ["softmax", "reduction_epilogue", "pointwise_chain"])
def test_reloads_of_stored_buffers_wait_for_a_barrier(check, graph):
    from canonical_graphs import GOLDEN

    fn, inputs = GOLDEN[graph]
    compiled = check(fn, *inputs())
    assert _unsynced_reloads(compiled.triton_source) == []


def test_unsynced_reload_detector_catches_a_race():
    source = "def k(ptr_a):\n    tl.store(ptr_a + x, v, m)\n    y = tl.load(ptr_a + x, m)\n"
    assert _unsynced_reloads(source) == ["y = tl.load(ptr_a + x, m)"]
    synced = source.replace("    y =", "    tl.debug_barrier()\n    y =")
    assert _unsynced_reloads(synced) == []


@pytest.mark.parametrize("channels", [24, 96])
def test_channels_last_statistics_split_into_row_tiles(check, channels):
    """Batch-norm statistics of NHWC data reduce each channel at stride C: a split whose
    programs take neighbouring channels over a chunk of rows (coalesced loads), every
    reduction kind of a split, the partials laid out part-major."""
    x = torch.randn(4, channels, 16, 16).to(memory_format=torch.channels_last)
    x[1, 5, 3, 7] = 50.0

    def f(a):
        vm = prims.var_mean(a, [0, 2, 3], 0.0)
        return prims.sum(a, [0, 2, 3]), prims.amax(a, [0, 2, 3]), vm[0], vm[1]

    compiled = check(f, x, atol=1e-4, rtol=1e-4)
    assert _kinds(compiled) == ["partial", "finish"]
    partial = compiled.kernels[0]
    assert partial.config.XBLOCK > 1 and partial.config.NSPLIT > 1
    assert partial.xnumel == channels * partial.config.NSPLIT


def test_column_reduction_with_per_row_operands_splits(check):
    """A layer norm's weight gradient over channels-last rows: the kept dimension is
    contiguous, and the per-row mean and rstd move with the row alone (broadcast over the
    kept dimension). They must not hide the column shape: one program per channel walking
    every row at stride C was 10x slower than a split on the GPU."""
    rows, channels = 4096, 96
    grad, x = torch.randn(rows, channels), torch.randn(rows, channels)
    mean, rstd = torch.randn(rows), torch.rand(rows) + 0.5

    def f(g, a, m, r):
        normed = prims.mul(prims.sub(a, prims.broadcast_in_dim(m, [rows, channels], [0])),
                           prims.broadcast_in_dim(r, [rows, channels], [0]))  # fmt: skip
        return prims.sum(prims.mul(g, normed), [0]), prims.sum(g, [0])

    compiled = check(f, grad, x, mean, rstd, atol=1e-3, rtol=1e-4)
    assert _kinds(compiled) == ["partial", "finish"]
    assert compiled.kernels[0].config.XBLOCK > 1


def test_few_long_rows_split_to_fill_the_gpu(check):
    """Sixteen rows of 32768 (NCHW per-channel statistics): one program per row would
    leave most of the GPU idle; each row is split into parts, about 1024 programs in all."""
    x = torch.randn(2, 16, 128, 128)
    x[1, 3, 5, 7] = 40.0
    compiled = check(lambda a: (prims.sum(a, [0, 2, 3]), prims.amax(a, [0, 2, 3])), x,
                     atol=1e-3, rtol=1e-4)  # fmt: skip
    assert _kinds(compiled) == ["partial", "finish"]
    assert compiled.kernels[0].config.NSPLIT > 1


def test_contiguous_statistics_are_not_column_splits(check):
    from ember_codegen.triton.heuristics import default_config, split_candidates

    x = torch.randn(4, 24, 16, 16)  # NCHW: each channel's rows are contiguous runs
    compiled = check(lambda a: (prims.sum(a, [0, 2, 3]),), x, atol=1e-4, rtol=1e-4)
    assert _kinds(compiled) == ["persistent"]  # whole rows in registers, as before
    column = default_config("split", 24, 1024, column=True)
    candidates = split_candidates(column)  # autotune keeps the workspace's tiling
    assert len(candidates) >= 2 and candidates[0] == column
    assert {(c.XBLOCK, c.NSPLIT, c.CHUNK) for c in candidates} == {
        (column.XBLOCK, column.NSPLIT, column.CHUNK)
    }


def test_column_rows_loop_over_tiles_along_the_kept_dimension(check):
    """Column rows (their elements C apart, neighbouring outputs neighbours in memory) never
    take a persistent row-major tile, which loads them across the grain: a pooling window
    over channels-last data, a squeeze-excite mean over H x W (short rows), or a mean over
    28 x 28 written beside the feature map it reads (longer rows, too short to split)."""
    window = torch.randn(9, 4096)  # nine window offsets of 4096 outputs
    window[4, 17] = 30.0
    maps = torch.randn(4, 32, 7, 7).to(memory_format=torch.channels_last)
    larger = torch.randn(2, 32, 28, 28).to(memory_format=torch.channels_last)

    def f(w, a, b):
        relu = prims.abs(b)
        return (prims.amax(w, [0]), prims.argmax(w, 0), prims.sum(a, [2, 3]),
                prims.var_mean(a, [2, 3], 0.0)[0], relu, prims.sum(relu, [2, 3]))  # fmt: skip

    compiled = check(f, window, maps, larger, atol=1e-4, rtol=1e-4)
    configs = [k.config for k in compiled.kernels]
    assert set(_kinds(compiled)) == {"looped"}
    assert all(c.XBLOCK > 1 for c in configs), configs
    # the 9-long window is unrolled (its loads issued together), the 49- and 784-long rows loop
    unrolled = [k for k in compiled.kernels if "tl.static_range(0, 9, RBLOCK)" in k.code]
    assert unrolled and all(
        "range(0, 9," not in k.code for k in compiled.kernels if k not in unrolled
    )
    assert any("for roffset in range(0, 784, RBLOCK)" in k.code for k in compiled.kernels)


def test_column_windows_over_many_points_loop_element_by_element():
    """Many output points (a 3x3 max-pool window over a [128, 64, 56, 56] map): each program
    takes 512 neighbouring points and loops over the window one offset at a time, every load
    one contiguous run; few output points (a squeeze-excite mean of 256 x 208 channels over
    14 x 14) would leave most of the GPU idle that way (104 programs) and take tiles."""
    from ember_codegen.triton.heuristics import choose_kind, default_config

    pool = default_config("looped", 128 * 64 * 56 * 56, 9, column=True)
    assert (pool.XBLOCK, pool.RBLOCK) == (512, 1)
    excite = default_config("looped", 256 * 208, 196, column=True)
    assert excite.RBLOCK > 1 and 256 * 208 // excite.XBLOCK >= 512
    assert choose_kind(256 * 104, 784, split_ok=True, column=True) == "looped"
    assert choose_kind(256 * 104, 784, split_ok=True, column=False) == "persistent"
    # few columns over long rows (XCiT's query norms over 784 tokens, 16 x 768 columns):
    # narrower tiles, so that the GPU gets enough programs; longer rows per step instead
    norms = default_config("looped", 16 * 768, 784, column=True)
    assert norms.XBLOCK == 16 and 16 * 768 // norms.XBLOCK >= 512
    assert norms.XBLOCK * norms.RBLOCK == excite.XBLOCK * excite.RBLOCK


def test_short_contiguous_rows_stay_in_registers(check):
    """Rows whose elements are neighbours (a layer norm over 16 channels) keep the
    persistent tile: its loads are already contiguous."""
    x = torch.randn(4096, 16)
    compiled = check(lambda a: (prims.sum(a, [1]),), x, atol=1e-4, rtol=1e-4)
    assert _kinds(compiled) == ["persistent"]


def test_a_persistent_rows_later_passes_reuse_its_loads(check):
    """Softmax's max, sum and division are three passes over a row held in registers; the
    later passes take the first one's loads (and what it computed from them) instead of
    emitting them again."""
    from canonical_graphs import GOLDEN

    fn, inputs = GOLDEN["softmax"]
    compiled = check(fn, *inputs())
    kernel = compiled.triton_source.split("def k0_red_")[1]
    assert kernel.count("tl.load(") == 1
    assert kernel.count("tl.exp(") == 1


def test_a_store_ends_the_reuse_of_earlier_loads():
    """Past a store, a load is emitted again: the stored buffer may share storage with
    one loaded before it."""
    from ember_codegen.code_writer import CodeWriter
    from ember_codegen.triton.ops_handler import TritonOpsHandler

    class Kernel:
        count = 0

        def new_tmp(self):
            self.count += 1
            return f"tmp{self.count}"

        def buffer_dtype(self, name):
            return torch.float32

        def local_value(self, name):
            return None

        def keep_local(self, name, value):
            return False

        def barrier_before_load(self, name):
            return False

        def in_bounds(self, name, index):
            return False

        def load_expr(self, name, index, masks):
            return f"tl.load(ptr_{name} + {index}, rxmask, other=0)"

        def store_stmt(self, name, index, value):
            return f"tl.store(ptr_{name} + {index}, {value}, rxmask)"

    import sympy

    out = CodeWriter(1)
    handler = TritonOpsHandler(Kernel(), out)
    i = sympy.Symbol("x")
    first = handler.load("buf0", i)
    assert handler.load("buf0", i).expr == first.expr  # shared before any store
    handler.loads_end_at_stores = True
    handler.store("buf1", i, first)
    assert handler.load("buf0", i).expr != first.expr


def test_a_column_row_passed_over_twice_is_held_in_registers(check):
    """A softmax over keys whose heads are innermost in memory (ConViT's positional scores,
    ``proj(x).permute(0, 3, 1, 2)``) passes over each row twice (max, then exp and sum): a
    persistent tile along the heads loads it once; a one-pass column mean still loops."""
    from ember_codegen.triton.heuristics import choose_kind

    scores = torch.randn(2, 5, 12, 16)  # [batch, queries, keys, heads]

    def f(x):
        rows = prims.permute(x, [0, 3, 1, 2])  # [batch, heads, queries, keys]
        top = prims.broadcast_in_dim(prims.amax(rows, [3]), [2, 16, 5, 12], [0, 1, 2])
        e = prims.exp(prims.sub(rows, top))
        total = prims.broadcast_in_dim(prims.sum(e, [3]), [2, 16, 5, 12], [0, 1, 2])
        return (prims.div(e, total),)

    compiled = check(f, scores, atol=1e-6, rtol=1e-5)
    reductions = [k for k in compiled.kernels if k.kind != "pointwise"]
    assert [k.kind for k in reductions] == ["persistent"]
    assert reductions[0].code.count("tl.load(") == 1
    assert choose_kind(64 * 196 * 16, 196, split_ok=True, column=True, passes=1) == "looped"
