#!/usr/bin/env python3
"""Times kernels on a CUDA GPU through PyTorch at the shapes real models run, for the kernel-time model to be held
against (scripts/gpu-validate.sh runs it; reports/gpu-validation.md reads what it writes).

Each kernel is timed as eager PyTorch launches it (F.linear, scaled_dot_product_attention, conv2d, the elementwise
ops), on random data, captured R times into a CUDA graph and replayed, so what is timed is the GPU's time per call
and not the host's: the median of 5 replays, with the spread. Memory-bound kernels are timed twice: warm (the same
tensors each call, so those under the L2's size stay in it, as where the previous kernel of a model left them) and
cold (rotating over enough copies to pass 4 times the L2). The host's own cost per eager op is measured apart.

Writes into OUT_DIR:
  kernels-bf16.csv, kernels-fp32.csv          measured kernels, warm, in `fleetsim kernels --measured` form
  kernels-bf16-cold.csv, kernels-fp32-cold.csv the memory-bound ones cold
  probe.json                                  the device, the ceilings, every row with its spread, launch costs,
                                              the kernels that fit no class of the CSV (convolutions, upcasts)
Usage: python3 scripts/gpu-kernel-probe.py OUT_DIR
"""
import json
import math
import statistics
import sys
import time
import traceback

import torch
import torch.nn.functional as F

OUT = sys.argv[1] if len(sys.argv) > 1 else "."
dev = torch.device("cuda")
torch.manual_seed(0)
# Plain cuBLAS and SDPA as PyTorch runs them by default (no TF32 for fp32 GEMMs).
torch.backends.cuda.matmul.allow_tf32 = False
torch.backends.cudnn.allow_tf32 = False

props = torch.cuda.get_device_properties(0)
L2 = getattr(props, "L2_cache_size", 50 * 2**20)
report = {
    "device": props.name,
    "sms": props.multi_processor_count,
    "l2_bytes": L2,
    "memory_bytes": props.total_memory,
    "torch": torch.__version__,
    "cuda": torch.version.cuda,
    "cudnn": torch.backends.cudnn.version(),
    "rows": [],
    "extras": [],
    "errors": [],
}


def log(*a):
    print(*a, flush=True)


def rand(*shape, dtype=torch.bfloat16):
    return torch.randn(*shape, device=dev, dtype=torch.float32).to(dtype)


def graph_time_us(fn, sets, target_ms=20.0, trials=5):
    """GPU time per call of fn(*sets[i]) in microseconds: (median, min, max) over `trials` replays of a CUDA graph
    of R calls (R sized to take about target_ms). Falls back to an eager loop timed by events where capture fails."""
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for i in range(3):
            fn(*sets[i % len(sets)])
    torch.cuda.current_stream().wait_stream(side)
    torch.cuda.synchronize()
    start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for i in range(5):
        fn(*sets[i % len(sets)])
    stop.record()
    stop.synchronize()
    rough_ms = start.elapsed_time(stop) / 5
    reps = int(max(len(sets), min(1000, math.ceil(target_ms / max(rough_ms, 1e-4)))))
    reps = max(reps, 3)
    how = "graph"
    try:
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            for i in range(reps):
                fn(*sets[i % len(sets)])
        g.replay()
        torch.cuda.synchronize()
        run = g.replay
    except Exception as e:  # noqa: BLE001 - any capture failure: time eagerly and say so
        how = "eager (capture failed: %s)" % type(e).__name__
        torch.cuda.synchronize()

        def run():
            for i in range(reps):
                fn(*sets[i % len(sets)])

        run()
    times = []
    for _ in range(trials):
        start.record()
        run()
        stop.record()
        stop.synchronize()
        times.append(start.elapsed_time(stop) * 1000.0 / reps)
    return statistics.median(times), min(times), max(times), reps, how


def copies_for_cold(bytes_per_call):
    """Tensor sets to rotate over so that one pass moves more than 4 times the L2."""
    return max(1, min(64, math.ceil(4 * L2 / max(bytes_per_call, 1))))


def measure(name, kernel, dtype, m, n, k, batch, make, fn, bytes_per_call, memory_bound, note=""):
    """make() -> one tuple of arguments; fn(*args) launches the kernel. Records warm and, if memory-bound, cold."""
    try:
        warm = [make()]
        med, lo, hi, reps, how = graph_time_us(fn, warm)
        row = {"name": name, "kernel": kernel, "dtype": dtype, "m": m, "n": n, "k": k, "batch": batch,
               "time_us": med, "min_us": lo, "max_us": hi, "reps": reps, "timed": how, "bytes": bytes_per_call,
               "note": note}
        if memory_bound:
            del warm
            sets = [make() for _ in range(copies_for_cold(bytes_per_call))]
            cmed, clo, chi, _, _ = graph_time_us(fn, sets)
            row.update({"cold_us": cmed, "cold_min_us": clo, "cold_max_us": chi, "cold_sets": len(sets)})
            del sets
        report["rows"].append(row)
        log("%-34s %-10s %5s %9.2f us  [%.2f, %.2f]%s" % (name, kernel, dtype, med, lo, hi,
            ("  cold %.2f us" % row["cold_us"]) if memory_bound else ""))
    except Exception as e:  # noqa: BLE001 - one failed kernel must not lose the others
        report["errors"].append({"name": name, "error": "%s: %s" % (type(e).__name__, e)})
        log("FAILED", name, e)
        traceback.print_exc()
    torch.cuda.empty_cache()


def extra(name, what, fn):
    try:
        value = fn()
        value.update({"name": name, "what": what})
        report["extras"].append(value)
        log("%-34s %s" % (name, {k: v for k, v in value.items() if k not in ("name", "what")}))
    except Exception as e:  # noqa: BLE001
        report["errors"].append({"name": name, "error": "%s: %s" % (type(e).__name__, e)})
        log("FAILED", name, e)
        traceback.print_exc()
    torch.cuda.empty_cache()


ESIZE = {"bf16": 2, "fp32": 4}
TORCH_DTYPE = {"bf16": torch.bfloat16, "fp32": torch.float32}


def gemm(name, m, n, k, dtype="bf16"):
    """Cold as well where the weights dominate (few tokens): a model's next layer reads other weights."""
    t = TORCH_DTYPE[dtype]
    e = ESIZE[dtype]
    measure(name, "gemm", dtype, m, n, k, 1, lambda: (rand(m, k, dtype=t), rand(n, k, dtype=t)),
            lambda x, w: F.linear(x, w), (m * k + n * k + m * n) * e, m <= 256)


def sdpa_choice(q, k, v, causal):
    """The backend SDPA picks for these tensors (torch._fused_sdp_choice, a private function: "unknown" without it)."""
    from torch.nn.attention import SDPBackend
    try:
        return SDPBackend(torch._fused_sdp_choice(q, k, v, None, 0.0, causal)).name
    except Exception as e:  # noqa: BLE001 - its absence is not a failure
        return "unknown (%s)" % type(e).__name__


def attention(name, tokens, heads, head_dim, causal):
    def make():
        return tuple(rand(1, heads, tokens, head_dim) for _ in range(3))

    # The row's kind names the kernels that ran (fleetsim's measured-kernel kinds): cuDNN's or FlashAttention-2's.
    backend = sdpa_choice(*make(), causal)
    kind = "attention" + ("-cudnn" if backend == "CUDNN_ATTENTION" else "") + ("-causal" if causal else "")
    measure(name, kind, "bf16", tokens, tokens, head_dim, heads, make,
            lambda q, k_, v: F.scaled_dot_product_attention(q, k_, v, is_causal=causal),
            4 * heads * tokens * head_dim * 2, False, note="SDPA, the backend PyTorch picks: " + backend)


def elementwise(name, kernel, dtype, m, n, make, fn, bytes_per_call, note=""):
    measure(name, kernel, dtype, m, n, 0, 1, make, fn, bytes_per_call, True, note)


def ceilings():
    def copy():
        n = 2**30 // 2
        a, b = rand(n), rand(n)
        med, lo, hi, _, _ = graph_time_us(lambda x, y: y.copy_(x), [(a, b)], trials=5)
        return {"bytes": 2**31, "time_us": med, "TBps": 2**31 / (med * 1e-6) / 1e12}

    def matmul():
        s = 8192
        a, b = rand(s, s), rand(s, s)
        med, lo, hi, _, _ = graph_time_us(lambda x, y: torch.mm(x, y), [(a, b)], trials=5)
        return {"m": s, "time_us": med, "TFLOPs": 2 * s**3 / (med * 1e-6) / 1e12}

    extra("ceiling.copy", "a 1 GiB device-to-device copy, bytes read plus written", copy)
    extra("ceiling.matmul", "an 8192^3 bf16 torch.mm on random data", matmul)


def gemms():
    # FLUX.1 (hidden 3072, MLP 12288, 24 heads of 128) at 1024x1024: 4096 image tokens, 512 text tokens
    # (black-forest-labs/flux src/flux/modules/layers.py: DoubleStreamBlock, SingleStreamBlock, Modulation).
    for name, m, n, k in [("flux.double.img.qkv", 4096, 9216, 3072), ("flux.double.img.proj", 4096, 3072, 3072),
                          ("flux.double.img.mlp.up", 4096, 12288, 3072), ("flux.double.img.mlp.down", 4096, 3072, 12288),
                          ("flux.double.txt.qkv", 512, 9216, 3072), ("flux.double.txt.mlp.up", 512, 12288, 3072),
                          ("flux.single.linear1", 4608, 21504, 3072), ("flux.single.linear2", 4608, 3072, 15360),
                          ("flux.modulation", 1, 18432, 3072)]:
        gemm(name, m, n, k)
    # Llama 3 70B (hidden 8192, 64 query and 8 key-value heads of 128, FFN 28672) on TP 8: one GPU's share.
    for tokens in (8192, 2048, 256, 32, 1):
        for part, n, k in [("qkv", 1280, 8192), ("o", 8192, 1024), ("gate_up", 7168, 8192), ("down", 8192, 3584)]:
            gemm("llama70b.tp8.%s.t%d" % (part, tokens), tokens, n, k)
    gemm("square.fp32.4096", 4096, 4096, 4096, "fp32")


def attentions():
    for tokens in (4608, 8192, 16384):
        attention("flux.attn.%d" % tokens, tokens, 24, 128, False)
    for tokens in (4096, 8192, 16384):
        attention("llama70b.tp8.attn.causal.%d" % tokens, tokens, 8, 128, True)
    # Which kernel SDPA chose, and each backend forced, at FLUX's 4608 tokens and a causal 8192.
    from torch.nn.attention import SDPBackend, sdpa_kernel
    for tokens, heads, causal in ((4608, 24, False), (8192, 8, True)):
        def backends(tokens=tokens, heads=heads, causal=causal):
            q, k_, v = (rand(1, heads, tokens, 128) for _ in range(3))
            out = {"default": sdpa_choice(q, k_, v, causal)}
            flop = 4 * heads * tokens * tokens * 128 / (2 if causal else 1)
            for b in (SDPBackend.FLASH_ATTENTION, SDPBackend.CUDNN_ATTENTION, SDPBackend.EFFICIENT_ATTENTION):
                try:
                    def call(a, b_, c, b=b):
                        with sdpa_kernel(b):
                            return F.scaled_dot_product_attention(a, b_, c, is_causal=causal)
                    med, _, _, _, how = graph_time_us(call, [(q, k_, v)])
                    out[b.name] = {"time_us": med, "TFLOPs": flop / (med * 1e-6) / 1e12, "timed": how}
                except Exception as e:  # noqa: BLE001 - a backend this build or shape lacks
                    out[b.name] = "unavailable: %s" % (str(e).splitlines()[0][:160] if str(e) else type(e).__name__)
            return out
        extra("sdpa.backends.%d%s" % (tokens, ".causal" if causal else ""), "SDPA's choice and each backend forced, %d heads of 128" % heads, backends)


def sustained():
    """bf16 and tf32 4096^3 GEMMs back to back for about 0.4 s, on constant and on random operands: the rate in
    windows of 16 GEMMs, to see whether it falls as the GPU stays busy (clocks, power)."""
    s = 4096
    for label, dtype, fill in (("bf16.const", torch.bfloat16, 0.5), ("bf16.random", torch.bfloat16, None),
                               ("tf32.const", torch.float32, 0.5), ("tf32.random", torch.float32, None)):
        def run(dtype=dtype, fill=fill, label=label):
            torch.backends.cuda.matmul.allow_tf32 = dtype == torch.float32
            a = torch.full((s, s), fill, device=dev, dtype=dtype) if fill is not None else rand(s, s, dtype=dtype)
            b = torch.full((s, s), fill / 2, device=dev, dtype=dtype) if fill is not None else rand(s, s, dtype=dtype)
            c = torch.empty(s, s, device=dev, dtype=dtype)
            torch.mm(a, b, out=c)
            torch.cuda.synchronize()
            time.sleep(0.3)  # idle first, as a calibration's short samples start
            windows = 60 if dtype == torch.bfloat16 else 24
            events = [torch.cuda.Event(enable_timing=True) for _ in range(windows + 1)]
            events[0].record()
            for w in range(windows):
                for _ in range(16):
                    torch.mm(a, b, out=c)
                events[w + 1].record()
            torch.cuda.synchronize()
            flop = 16 * 2 * s**3
            rates = [flop / (events[w].elapsed_time(events[w + 1]) * 1e-3) / 1e12 for w in range(windows)]
            torch.backends.cuda.matmul.allow_tf32 = False
            return {"window_TFLOPs": [round(r, 1) for r in rates], "first": rates[0], "last": rates[-1],
                    "span_ms": events[0].elapsed_time(events[-1])}
        extra("sustained.gemm4096.%s" % label, "4096^3 GEMMs in windows of 16, back to back", run)


def memory_bound():
    m, h = 4096, 3072  # FLUX's image stream
    elementwise("flux.residual.add", "add", "bf16", m, h, lambda: (rand(m, h), rand(m, h)), lambda a, b: a + b, 3 * m * h * 2)
    elementwise("flux.mlp.gelu_tanh", "activation", "bf16", m, 4 * h, lambda: (rand(m, 4 * h),),
                lambda a: F.gelu(a, approximate="tanh"), 2 * m * 4 * h * 2)
    elementwise("llama.silu", "activation", "bf16", 8192, 3584, lambda: (rand(8192, 3584),), lambda a: F.silu(a), 2 * 8192 * 3584 * 2)
    elementwise("flux.layernorm", "norm", "bf16", m, h, lambda: (rand(m, h),), lambda a: F.layer_norm(a, (h,)), 2 * m * h * 2)
    elementwise("llama.rmsnorm", "norm", "bf16", 8192, 8192, lambda: (rand(8192, 8192), rand(8192)),
                lambda a, w: F.rms_norm(a, (8192,), w), 2 * 8192 * 8192 * 2)
    elementwise("softmax.rows", "softmax", "bf16", 32768, 4096, lambda: (rand(32768, 4096),), lambda a: torch.softmax(a, -1),
                2 * 32768 * 4096 * 2)
    # Broadcast, strided: adaLN's scale over every token, the attention output's transpose made contiguous.
    elementwise("flux.modulate.mul", "broadcast", "bf16", m, h, lambda: (rand(1, m, h), rand(1, 1, h)), lambda a, s: a * s,
                2 * m * h * 2, note="(1, 4096, 3072) times (1, 1, 3072)")
    elementwise("flux.attn_out.transpose", "broadcast", "bf16", m, h, lambda: (rand(1, 24, m, 128),),
                lambda a: a.transpose(1, 2).contiguous(), 2 * m * h * 2, note="(1, 24, 4096, 128) -> (1, 4096, 24, 128)")
    # Norms in fp32, as FLUX's QKNorm and eager RMSNorms upcast.
    elementwise("flux.qknorm.fp32", "norm", "fp32", 24 * m, 128, lambda: (rand(24 * m, 128, dtype=torch.float32), rand(128, dtype=torch.float32)),
                lambda a, w: F.rms_norm(a, (128,), w), 2 * 24 * m * 128 * 4)
    elementwise("flux.layernorm.fp32", "norm", "fp32", m, h, lambda: (rand(m, h, dtype=torch.float32),), lambda a: F.layer_norm(a, (h,)),
                2 * m * h * 4)
    elementwise("residual.add.fp32", "add", "fp32", m, h, lambda: (rand(m, h, dtype=torch.float32), rand(m, h, dtype=torch.float32)),
                lambda a, b: a + b, 3 * m * h * 4)


def others():
    """Kernels the measured-kernel CSV has no class for: reported with their achieved rates."""
    # SDXL's UNet 3x3 convolutions at 1024x1024 (latent 128x128), batch 2 (the guidance pair), as ComfyUI runs
    # them (NCHW) and channels-last; an implicit GEMM of M = batch x H x W, N = C_out, K = 9 C_in.
    for c, side in ((320, 128), (640, 64), (1280, 32)):
        for layout in ("nchw", "nhwc"):
            for dt, tdt in (("fp16", torch.float16), ("bf16", torch.bfloat16)):
                def conv(c=c, side=side, layout=layout, tdt=tdt):
                    x = rand(2, c, side, side, dtype=tdt)
                    w = rand(c, c, 3, 3, dtype=tdt)
                    if layout == "nhwc":
                        x = x.contiguous(memory_format=torch.channels_last)
                        w = w.contiguous(memory_format=torch.channels_last)
                    med, lo, hi, reps, how = graph_time_us(lambda a, b: F.conv2d(a, b, padding=1), [(x, w)])
                    flop = 2 * 2 * side * side * c * 9 * c
                    return {"time_us": med, "min_us": lo, "max_us": hi, "timed": how, "m": 2 * side * side, "n": c, "k": 9 * c,
                            "TFLOPs": flop / (med * 1e-6) / 1e12}
                extra("sdxl.conv3x3.%d@%d.%s.%s" % (c, side, layout, dt), "F.conv2d 3x3 pad 1, batch 2, %d channels at %dx%d" % (c, side, side), conv)
    # HunyuanVideo's VAE decoder (ComfyUI's Decoder with conv3d: widths 512, 512, 256, 128) at 720p: each 3x3x3
    # convolution after a replicate pad of two frames before the first; 17 frames of the lower levels, fewer at full
    # resolution (the whole clip's tensors there pass 30 GB). An implicit GEMM of K = 27 C_in.
    for c, frames, h, w in ((512, 33, 90, 160), (256, 17, 360, 640), (128, 9, 720, 1280)):
        def conv3d(c=c, frames=frames, h=h, w=w):
            x = rand(1, c, frames, h, w)
            wt = rand(c, c, 3, 3, 3)
            try:
                padded = F.pad(x, (1, 1, 1, 1, 2, 0), mode="replicate")
                pmed, plo, phi, _, _ = graph_time_us(lambda a: F.pad(a, (1, 1, 1, 1, 2, 0), mode="replicate"), [(x,)])
            except Exception as e:  # noqa: BLE001 - the convolution is still worth timing
                report["errors"].append({"name": "replicate pad %d" % c, "error": "%s: %s" % (type(e).__name__, e)})
                padded = F.pad(x, (1, 1, 1, 1, 2, 0))
                pmed = None  # JSON null: not measured
            med, lo, hi, reps, how = graph_time_us(lambda a, b: F.conv3d(a, b), [(padded, wt)])
            gmed, glo, ghi, _, _ = graph_time_us(lambda a: F.group_norm(a, 32), [(x,)])
            flop = 2 * frames * h * w * c * 27 * c
            return {"time_us": med, "min_us": lo, "max_us": hi, "timed": how, "m": frames * h * w, "n": c, "k": 27 * c,
                    "TFLOPs": flop / (med * 1e-6) / 1e12, "pad_us": pmed,
                    "pad_TBps": (x.numel() + padded.numel()) * 2 / (pmed * 1e-6) / 1e12 if pmed else None,
                    "groupnorm_us": gmed, "groupnorm_TBps": 2 * x.numel() * 2 / (gmed * 1e-6) / 1e12}
        extra("hunyuan.vae.conv3d.%d.%dx%dx%d" % (c, frames, h, w),
              "F.pad replicate (2 frames before, 1 pixel around) then F.conv3d 3x3x3, bf16, %d channels, %d frames of %dx%d; "
              "F.group_norm (32 groups) of the same input" % (c, frames, h, w), conv3d)
    # GroupNorm as SDXL's ResNet blocks run it (32 groups), bf16, NCHW.
    def groupnorm():
        x = rand(2, 320, 128, 128)
        med, lo, hi, reps, how = graph_time_us(lambda a: F.group_norm(a, 32), [(x,)])
        return {"time_us": med, "min_us": lo, "max_us": hi, "timed": how, "bytes": 2 * x.numel() * 2,
                "TBps": 2 * x.numel() * 2 / (med * 1e-6) / 1e12}
    extra("sdxl.groupnorm.320@128", "F.group_norm, 32 groups, (2, 320, 128, 128) bf16", groupnorm)
    # Upcast bf16 -> fp32 (2 bytes read, 4 written an element), as eager QK norms and rotary embeddings do.
    def upcast():
        x = rand(24 * 4096, 128)
        med, lo, hi, reps, how = graph_time_us(lambda a: a.float(), [(x,)])
        return {"time_us": med, "min_us": lo, "max_us": hi, "timed": how, "bytes": x.numel() * 6,
                "TBps": x.numel() * 6 / (med * 1e-6) / 1e12}
    extra("flux.q.upcast_fp32", "(98304, 128) bf16 .float()", upcast)


def launches():
    """The host's time per eager op, and the GPU's per tiny kernel launched back to back."""
    def host(op, count=20000):
        a = torch.ones(1, device=dev)
        b = torch.ones(1, device=dev)
        out = torch.empty(1, device=dev)
        for _ in range(200):
            op(a, b, out)
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        for _ in range(count):
            op(a, b, out)
        t1 = time.perf_counter()
        torch.cuda.synchronize()
        t2 = time.perf_counter()
        return {"per_op_us": (t1 - t0) / count * 1e6, "per_op_with_sync_us": (t2 - t0) / count * 1e6, "ops": count}

    extra("launch.eager.add_out", "torch.add(a, b, out=o) on 1 element, host time per call (the dispatcher and the launch)",
          lambda: host(lambda a, b, o: torch.add(a, b, out=o)))
    extra("launch.eager.mul_alloc", "a * b on 1 element, allocating its output, host time per call",
          lambda: host(lambda a, b, o: a * b))

    def lin():
        x = rand(1, 64)
        w = rand(64, 64)
        layer = lambda a, b, o: F.linear(x, w)  # noqa: E731
        return host(layer)
    extra("launch.eager.linear", "F.linear on a 1 x 64 input, host time per call", lin)

    def graph_burst():
        a = torch.ones(1, device=dev)
        med, lo, hi, reps, how = graph_time_us(lambda x: x.add_(1.0), [(a,)], target_ms=5.0)
        return {"per_kernel_us": med, "min_us": lo, "max_us": hi, "timed": how, "reps": reps}
    extra("launch.graph.tiny", "a one-element add_ captured many times in a CUDA graph: GPU time per kernel back to back",
          graph_burst)

    def stream_burst():
        a = torch.ones(1, device=dev)
        for _ in range(100):
            a.add_(1.0)
        torch.cuda.synchronize()
        start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        count = 5000
        start.record()
        for _ in range(count):
            a.add_(1.0)
        stop.record()
        stop.synchronize()
        return {"per_kernel_us": start.elapsed_time(stop) * 1000.0 / count, "ops": count}
    extra("launch.eager.tiny_burst", "5,000 one-element add_ launched eagerly: GPU span per kernel (host-bound)", stream_burst)


t0 = time.time()
for part in (ceilings, gemms, attentions, memory_bound, others, launches, sustained):
    log("==", part.__name__)
    part()
report["seconds"] = time.time() - t0

with open(OUT + "/probe.json", "w") as f:
    json.dump(report, f, indent=1)
for dtype in ("bf16", "fp32"):
    for cold in (False, True):
        rows = [r for r in report["rows"] if r["dtype"] == dtype and (not cold or "cold_us" in r)]
        path = "%s/kernels-%s%s.csv" % (OUT, dtype, "-cold" if cold else "")
        with open(path, "w") as f:
            f.write("name,kernel,m,n,k,batch,time_us\n")
            for r in rows:
                f.write("%s,%s,%d,%d,%d,%d,%.3f\n" % (r["name"], r["kernel"], r["m"], r["n"], r["k"], r["batch"],
                                                      r["cold_us"] if cold else r["time_us"]))
log("probe: %d kernels, %d extras, %d errors in %.0f s" % (len(report["rows"]), len(report["extras"]), len(report["errors"]),
                                                        report["seconds"]))
