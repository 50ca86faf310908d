"""Measure real CUDA training steps of transformers' BERT classes (a GPU machine only; never run by CI).

The script that produced tests/fixtures/gpu/h200-steps.json (NVIDIA H200, torch 2.11, transformers 5.17), kept as
it ran. Usage, with the project installed with the `verify` extra on a machine with a CUDA GPU:

    PYTHONPATH=. python tests/gpu/measure_steps_cuda.py OUTDIR      # CASESET=odd for the odd sequence lengths

It writes OUTDIR/cuda_detail.json: per case `phases` (memory_allocated at each phase: the fixture's
`memory_allocated`), `layer0_saved` rows [module, shape, dtype, bytes], `saved_by_component`; per fit `true_max`
and `first_oom` (the fixture's `largest_batch_that_ran`, `first_batch_out_of_memory`). The predictions it records
come from `bert-tui compute` as installed.
"""
import gc, json, os, statistics, subprocess, sys, time, traceback
import torch

OUT = sys.argv[1] if len(sys.argv) > 1 else "."
DEV = "cuda" if torch.cuda.is_available() else "cpu"
from tui.core.compute import Workload
from tui.core.config import BertConfig
from tui import measure as M

B, L = "bert-base-uncased", "bert-large-uncased"
SC, MLM = "sequence-classification", "mlm"
# name, model, head, b, s, precision, attention, extra CLI flags
CASES = [
    ("b-sc-8x512-fp32-eager", B, SC, 8, 512, "fp32", "eager", []),
    ("b-sc-8x512-fp32-sdpa", B, SC, 8, 512, "fp32", "sdpa", []),
    ("b-sc-8x512-ampbf16-eager", B, SC, 8, 512, "amp-bf16", "eager", []),
    ("b-sc-8x512-ampbf16-sdpa", B, SC, 8, 512, "amp-bf16", "sdpa", []),
    ("b-sc-8x512-ampbf16-sdpa-pad", B, SC, 8, 512, "amp-bf16", "sdpa", ["--padding-mask"]),
    ("b-sc-8x512-ampbf16-eager-pad", B, SC, 8, 512, "amp-bf16", "eager", ["--padding-mask"]),
    ("b-sc-8x512-ampfp16-eager-pad", B, SC, 8, 512, "amp-fp16", "eager", ["--padding-mask"]),
    ("b-sc-8x512-bf16-eager", B, SC, 8, 512, "bf16", "eager", []),
    ("b-sc-8x512-bf16-sdpa", B, SC, 8, 512, "bf16", "sdpa", []),
    ("b-sc-8x512-fp16-sdpa-pad", B, SC, 8, 512, "fp16", "sdpa", ["--padding-mask"]),
    ("b-sc-8x512-ampbf16-eager-ckpt", B, SC, 8, 512, "amp-bf16", "eager", ["--checkpointing"]),
    ("b-sc-8x512-ampbf16-sdpa-ckpt", B, SC, 8, 512, "amp-bf16", "sdpa", ["--checkpointing"]),
    ("b-mlm-32x128-ampbf16-sdpa", B, MLM, 32, 128, "amp-bf16", "sdpa", []),
    ("b-mlm-32x128-ampfp16-eager-pad", B, MLM, 32, 128, "amp-fp16", "eager", ["--padding-mask"]),
    ("b-pre-32x128-ampbf16-sdpa", B, "pretraining", 32, 128, "amp-bf16", "sdpa", []),
    ("b-clm-8x512-ampbf16-eager", B, "causal-lm", 8, 512, "amp-bf16", "eager", []),
    ("b-clm-8x512-ampbf16-sdpa", B, "causal-lm", 8, 512, "amp-bf16", "sdpa", []),
    ("b-tok-16x256-fp32-sdpa", B, "token-classification", 16, 256, "fp32", "sdpa", ["--num-labels", "9"]),
    ("b-qa-16x384-fp16-eager-sgdm", B, "question-answering", 16, 384, "fp16", "eager", ["--optimizer", "sgd-momentum"]),
    ("b-mc-4x128-ampbf16-sdpa", B, "multiple-choice", 4, 128, "amp-bf16", "sdpa", []),
    ("b-none-64x512-bf16-sdpa-inf", B, "none", 64, 512, "bf16", "sdpa", ["--mode", "inference"]),
    ("b-sc-64x128-fp32-eager-inf", B, SC, 64, 128, "fp32", "eager", ["--mode", "inference"]),
    ("b-sc-32x128-fp32-eager-sgd", B, SC, 32, 128, "fp32", "eager", ["--optimizer", "sgd"]),
    ("l-sc-16x512-ampbf16-eager", L, SC, 16, 512, "amp-bf16", "eager", []),
    ("l-sc-16x512-ampbf16-sdpa", L, SC, 16, 512, "amp-bf16", "sdpa", []),
    ("l-mlm-32x128-ampbf16-sdpa", L, MLM, 32, 128, "amp-bf16", "sdpa", []),
    ("l-sc-16x512-ampbf16-sdpa-ckpt", L, SC, 16, 512, "amp-bf16", "sdpa", ["--checkpointing"]),
]
FITS = [  # name, model, head, s, precision, attention, extra, cap GiB
    ("l-sc-512-ampbf16-eager-24", L, SC, 512, "amp-bf16", "eager", [], 24),
    ("l-sc-512-ampbf16-sdpa-24", L, SC, 512, "amp-bf16", "sdpa", [], 24),
    ("l-sc-512-ampbf16-sdpa-80", L, SC, 512, "amp-bf16", "sdpa", [], 80),
    ("b-sc-128-fp32-eager-16", B, SC, 128, "fp32", "eager", [], 16),
    ("b-sc-128-fp32-sdpa-16", B, SC, 128, "fp32", "sdpa", [], 16),
    ("b-sc-512-ampbf16-sdpa-ckpt-16", B, SC, 512, "amp-bf16", "sdpa", ["--checkpointing"], 16),
    ("b-sc-512-ampbf16-eager-24", B, SC, 512, "amp-bf16", "eager", [], 24),
    ("l-sc-128-ampbf16-sdpa-16", L, SC, 128, "amp-bf16", "sdpa", [], 16),
]

ODD_CASES = [
    ("b-sc-8x77-ampbf16-sdpa", B, SC, 8, 77, "amp-bf16", "sdpa", []),
    ("b-sc-8x77-fp32-sdpa", B, SC, 8, 77, "fp32", "sdpa", []),
    ("b-sc-8x77-ampbf16-sdpa-pad", B, SC, 8, 77, "amp-bf16", "sdpa", ["--padding-mask"]),
    ("b-sc-8x77-ampbf16-eager", B, SC, 8, 77, "amp-bf16", "eager", []),
    ("b-tok-12x200-ampfp16-sdpa", B, "token-classification", 12, 200, "amp-fp16", "sdpa", ["--num-labels", "9"]),
    ("b-mlm-24x200-ampbf16-sdpa-pad", B, MLM, 24, 200, "amp-bf16", "sdpa", ["--padding-mask"]),
    ("b-mlm-64x128-fp32-eager-inf", B, MLM, 64, 128, "fp32", "eager", ["--mode", "inference"]),
    ("l-mlm-16x200-ampbf16-sdpa-ckpt", L, MLM, 16, 200, "amp-bf16", "sdpa", ["--checkpointing"]),
]
ODD_FITS = [
]
if os.environ.get("CASESET") == "odd":
    CASES, FITS = ODD_CASES, ODD_FITS


def cli(model, head, b, s, prec, attn, extra, gpu_memory=None):
    cmd = [sys.executable, "-m", "tui", "compute", model, "--head", head, "--batch", str(b), "--seq", str(s),
           "--precision", prec, "--attention", attn, "--device", "cuda", "--format", "json", *extra]
    if gpu_memory:
        cmd += ["--gpu-memory", gpu_memory]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode:
        raise RuntimeError(f"cli failed: {r.stderr.strip()}")
    return json.loads(r.stdout)


def objects(pred):
    return BertConfig(**pred["config"]), Workload(**{k: v for k, v in pred["workload"].items() if k != "gpu_memory"})


def make_opt(model, wl):
    ps = list(model.parameters())
    if wl.optimizer == "adamw":
        return torch.optim.AdamW(ps, lr=1e-4)
    return torch.optim.SGD(ps, lr=1e-4, momentum=0.9 if wl.optimizer == "sgd-momentum" else 0)


def alloc():
    return torch.cuda.memory_allocated() if DEV == "cuda" else 0


def peak():
    return torch.cuda.max_memory_allocated() if DEV == "cuda" else 0


def reset():
    if DEV == "cuda":
        torch.cuda.synchronize(); torch.cuda.reset_peak_memory_stats()


def clean():
    gc.collect()
    if DEV == "cuda":
        torch.cuda.empty_cache()
    return alloc()


def phases(cfg, wl, timing=False):
    """memory_allocated / peak per phase of the 3rd step (states exist, grads freed by zero_grad)."""
    model = M.build_model(cfg, wl, DEV)
    batch = M.inputs(cfg, wl, DEV)
    opt = make_opt(model, wl) if wl.mode == "train" else None
    def fwd():
        if wl.mode == "train":
            with M._autocast(wl, DEV):
                return model(**batch)
        with torch.no_grad(), M._autocast(wl, DEV):
            return model(**batch)
    for _ in range(2):
        out = fwd()
        if opt:
            M.loss_of(out).backward(); opt.step(); opt.zero_grad(set_to_none=True)
        del out
    r = {}
    reset(); r["start"] = alloc()
    out = fwd(); loss = M.loss_of(out) if opt else None
    reset() if False else None
    if DEV == "cuda": torch.cuda.synchronize()
    r["after_forward"] = alloc(); r["peak_forward"] = peak()
    if opt:
        del out
        r["after_forward_outputs_dropped"] = alloc()
        reset(); loss.backward(); del loss
        if DEV == "cuda": torch.cuda.synchronize()
        r["after_backward"] = alloc(); r["peak_backward"] = peak()
        reset(); opt.step()
        if DEV == "cuda": torch.cuda.synchronize()
        r["peak_optimizer"] = peak(); opt.zero_grad(set_to_none=True); r["end"] = alloc()
    r["reserved"] = torch.cuda.max_memory_reserved() if DEV == "cuda" else 0
    if DEV == "cuda" and timing:
        times = []
        for _ in range(5):
            a, z = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            a.record(); out = fwd()
            if opt:
                M.loss_of(out).backward(); opt.step(); opt.zero_grad(set_to_none=True)
            del out
            z.record(); torch.cuda.synchronize(); times.append(a.elapsed_time(z) / 1000)
        r["step_seconds_median"] = statistics.median(times)
    del model, opt
    if DEV == "cuda": torch.cuda.empty_cache()
    return r


def layer0_saved(cfg, wl):
    """Every storage layer 0 saves for backward: module, shape, dtype, bytes (first sight only)."""
    model = M.build_model(cfg, wl, DEV)
    batch = M.inputs(cfg, wl, DEV)
    fixed = {t.untyped_storage().data_ptr() for t in [*model.parameters(), *model.buffers()]}
    seen, alive, rows = set(), [], []
    global BY_COMPONENT
    BY_COMPONENT = {}
    with M._module_stack(model) as stack:
        def pack(t):
            st = t.untyped_storage()
            if st.data_ptr() not in fixed and st.data_ptr() not in seen:
                seen.add(st.data_ptr()); alive.append(t)
                mod = stack[-1]
                comp = M.component_of(mod, cfg.body)
                BY_COMPONENT[comp] = BY_COMPONENT.get(comp, 0) + st.nbytes()
                if ".layer.0." in mod + "." or mod.endswith(".layer.0"):
                    rows.append([mod.split("layer.0")[-1].lstrip(".") or "layer", list(t.shape), str(t.dtype)[6:], st.nbytes()])
            return t
        with torch.enable_grad(), torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t), M._autocast(wl, DEV):
            out = model(**batch)
    M.loss_of(out).backward()  # frees the graph: a saved output held by its own node is a cycle gc cannot see
    del model, alive, out
    clean()
    return rows


def fits(cfg, wl, cap, batch):
    if DEV != "cuda":
        return True
    torch.cuda.empty_cache()
    torch.cuda.set_per_process_memory_fraction(cap / torch.cuda.get_device_properties(0).total_memory)
    try:
        phases(cfg, Workload(**{**wl.as_dict(), "batch": batch}))
        return True
    except torch.cuda.OutOfMemoryError:
        return False
    finally:
        clean(); torch.cuda.set_per_process_memory_fraction(1.0)


def main():
    os.makedirs(OUT, exist_ok=True)
    meta = {"torch": torch.__version__}
    import transformers
    meta["transformers"] = transformers.__version__
    cases, fitrows = CASES, FITS
    if DEV == "cuda":
        meta["device"] = torch.cuda.get_device_name(0)
        meta["total_memory"] = torch.cuda.get_device_properties(0).total_memory
        if hasattr(torch.backends.cuda, "flash_sdp_enabled"):
            meta["sdp"] = dict(flash=torch.backends.cuda.flash_sdp_enabled(), mem_efficient=torch.backends.cuda.mem_efficient_sdp_enabled(),
                               math=torch.backends.cuda.math_sdp_enabled(), cudnn=getattr(torch.backends.cuda, "cudnn_sdp_enabled", lambda: None)())
    else:
        cases = [(n, m, h, 2, 16, p, a, e) for n, m, h, b, s, p, a, e in CASES[:4]]
        fitrows = []
    if os.environ.get("ONLY_FITS"):
        cases = []
    print(meta, flush=True)
    res = dict(meta=meta, cases=[], fits=[])
    t_all = time.time()
    for name, model, head, b, s, prec, attn, extra in cases:
        t0 = time.time()
        try:
            pred = cli(model, head, b, s, prec, attn, extra)
            cfg, wl = objects(pred)
            leftover = clean()
            ph = phases(cfg, wl, timing=True)
            ph["leftover_before"] = leftover
            rows = layer0_saved(cfg, wl) if wl.mode == "train" else []
            res["cases"].append(dict(case=name, argv=[model, "--head", head, "--batch", b, "--seq", s, "--precision", prec,
                                                      "--attention", attn, "--device", "cuda", *extra],
                                     predicted=pred["memory_bytes"], predicted_layer=pred["activations_one_layer"],
                                     phases=ph, layer0_saved=rows, saved_by_component=dict(BY_COMPONENT) if rows else {},
                                     predicted_by_component=pred["activations_by_component"]))
            pk = max(v for k, v in ph.items() if k.startswith("peak"))
            print(f"{name:34s} pred total {pred['memory_bytes']['total']/2**30:6.2f} GiB  real peak {pk/2**30:6.2f} "
                  f"(fwd {ph['peak_forward']/2**30:.2f} bwd {ph.get('peak_backward',0)/2**30:.2f} opt {ph.get('peak_optimizer',0)/2**30:.2f}) "
                  f"left {ph['leftover_before']} step {ph.get('step_seconds_median', 0)*1e3:.1f} ms layer0 saved {sum(r[3] for r in rows):,} vs pred {sum(pred['activations_one_layer'].values()):,} [{time.time()-t0:.1f}s]", flush=True)
        except Exception as e:
            traceback.print_exc(); res["cases"].append(dict(case=name, error=repr(e)))
        json.dump(res, open(os.path.join(OUT, "cuda_detail.json"), "w"), indent=1)
    for name, model, head, s, prec, attn, extra, cap_gib in fitrows:
        t0 = time.time()
        if time.time() - t_all > 300:
            print("time up, skipping", name); continue
        try:
            pred = cli(model, head, 1, s, prec, attn, extra, gpu_memory=f"{cap_gib}GiB")
            print("leftover before fit", clean(), flush=True)
            asked = [f for f in pred["fits"] if f.get("asked")]
            nmax = asked[0]["max_batch"]
            cfg, wl = objects(pred)
            cap = cap_gib * 2**30
            lo, hi = 0, None
            probe = max(1, nmax)
            while hi is None and time.time() - t0 < 35:  # find an upper bound
                if fits(cfg, wl, cap, probe):
                    lo = probe; probe = int(probe * 1.5) + 1
                else:
                    hi = probe
            while hi is not None and hi - lo > 1 and time.time() - t0 < 35:
                mid = (lo + hi) // 2
                if fits(cfg, wl, cap, mid): lo = mid
                else: hi = mid
            res["fits"].append(dict(case=name, argv=[model, "--head", head, "--batch", 1, "--seq", s, "--precision", prec,
                                                     "--attention", attn, "--device", "cuda", "--gpu-memory", f"{cap_gib}GiB", *extra],
                                    predicted_max=nmax, true_max=lo, first_oom=hi))
            print(f"FIT {name:30s} predicted {nmax:5d}  true max {lo} (first OOM {hi}) [{time.time()-t0:.0f}s]", flush=True)
        except Exception as e:
            traceback.print_exc(); res["fits"].append(dict(case=name, error=repr(e)))
        json.dump(res, open(os.path.join(OUT, "cuda_detail.json"), "w"), indent=1)


if __name__ == "__main__":
    main()
