#!/usr/bin/env python3
"""Make tiny gpt-oss fixtures whose expected outputs come from Hugging Face transformers.

For each tiny configuration this writes tests/fixtures/models/<name>/ with
  config.json                      real gpt-oss HF root format (spec section 1.1), tiny sizes
  model.safetensors                real root HF tensor layout (spec section 2.1): BF16 dense
   (or model-0000x-of-00002.safetensors + model.safetensors.index.json)
                                   tensors, MXFP4 experts as U8 *_blocks/*_scales, BF16 biases
  reference.safetensors            prompt_ids I32 [T], prompt_logits F32 [T,V],
                                   greedy_ids I32 [N], greedy_logits F32 [N,V]
                                   (row i = logits from which greedy_ids[i] was chosen;
                                    row 0 = last prompt position),
                                   prompt_hidden F32 [L+1,T,D]: the prompt's residual stream,
                                   row 0 the embedding, row l+1 decoder layer l's output
                                   before the final norm (row L too; HF's output_hidden_states
                                   may end with the normed state instead, so the rows are taken
                                   with forward hooks), so a failure points at a layer

The expected outputs come from transformers' GptOssForCausalLM, built from the config without
quantization_config, in float32, eager attention, TF32 off, with exactly the weights of the
checkpoint (BF16 -> F32, MXFP4 decoded with transformers' own convert_moe_packed_tensors).

Checks made by this script (it exits non-zero if one fails):
  * transformers' MXFP4 decoder == the spec section 3 decoder, bit for bit;
  * every parameter of the loaded HF model == the decoded checkpoint, bit for bit;
  * HF's YaRN inv_freq / attention scaling == spec section 4.4 formula;
  * each HF MoE block == the spec MoE formula (float64) on random inputs;
  * greedy decode with the HF KV cache == a full recompute (max rel diff < 1e-4);
  * the whole HF forward == an independent float64 forward written from the spec, and so is
    prompt_hidden row by row (max rel diff < 1e-4);
  * prompt_hidden's rows 0..L-1 == HF's output_hidden_states bit for bit, and the final norm and
    lm_head on row L give prompt_logits (so row L is taken before the final norm);
  * the sliding-window semantics HF applied (measured from attention weights);
  * greedy decisions have a clear margin (top1 - top2), so a 1e-4 error cannot flip them.
Also tries transformers' own MXFP4 loader (from_pretrained with Mxfp4Config(dequantize=True))
on the written folder and reports how it compares (informational).

Needs torch, transformers (5.x), safetensors. Run on the GPU machine:
  python3 tools/make_fixtures.py --out tests/fixtures/models --tar $OUT/fixtures.tar
"""

import argparse
import json
import math
import os
import platform
import sys
import tarfile
import traceback

import torch

torch.backends.cuda.matmul.allow_tf32 = False
torch.backends.cudnn.allow_tf32 = False
try:
    torch.set_float32_matmul_precision("highest")
except Exception:
    pass

import safetensors
import transformers
from safetensors.torch import save_file, load_file

LOG_LINES = []
FAILURES = []


def log(*a):
    s = " ".join(str(x) for x in a)
    print(s, flush=True)
    LOG_LINES.append(s)


def check(ok, what):
    log(("  [ok]   " if ok else "  [FAIL] ") + what)
    if not ok:
        FAILURES.append(what)
    return ok


def rel(a, b):
    a = a.double()
    b = b.double()
    den = b.abs().max().item()
    return (a - b).abs().max().item() / (den if den > 0 else 1.0)


# --------------------------------------------------------------------------------------------
# configurations
# --------------------------------------------------------------------------------------------

CONFIGS = [
    dict(name="tiny", hidden=64, inter=64, heads=4, kv=2, head_dim=16, layers=2, experts=4,
         topk=2, vocab=320, window=8, prompt=12, gen=10, sharded=False, seed=1001),
    dict(name="tiny-odd", hidden=96, inter=160, heads=6, kv=3, head_dim=24, layers=3, experts=5,
         topk=3, vocab=333, window=8, prompt=20, gen=12, sharded=False, seed=2002),
    dict(name="tiny-sharded", hidden=64, inter=64, heads=4, kv=2, head_dim=16, layers=4, experts=4,
         topk=2, vocab=320, window=6, prompt=24, gen=10, sharded=True, seed=3003),
    # head_dim 64 and 8 q heads per kv head like the released models (what the CUDA attention
    # kernels are built for), hidden and expert widths that are not powers of two.
    dict(name="tiny-gqa8", hidden=160, inter=96, heads=16, kv=2, head_dim=64, layers=2, experts=6,
         topk=4, vocab=400, window=8, prompt=20, gen=10, sharded=False, seed=4004),
]


def hf_config_dict(c):
    L = c["layers"]
    return {
        "architectures": ["GptOssForCausalLM"],
        "model_type": "gpt_oss",
        "attention_bias": True,
        "attention_dropout": 0.0,
        "eos_token_id": c["vocab"] - 1,
        "pad_token_id": c["vocab"] - 2,
        "experts_per_token": c["topk"],
        "head_dim": c["head_dim"],
        "hidden_act": "silu",
        "hidden_size": c["hidden"],
        "initial_context_length": 4096,
        "initializer_range": 0.02,
        "intermediate_size": c["inter"],
        "layer_types": ["sliding_attention" if i % 2 == 0 else "full_attention" for i in range(L)],
        "max_position_embeddings": 131072,
        "num_attention_heads": c["heads"],
        "num_experts_per_tok": c["topk"],
        "num_hidden_layers": L,
        "num_key_value_heads": c["kv"],
        "num_local_experts": c["experts"],
        "output_router_logits": False,
        "quantization_config": {
            "modules_to_not_convert": [
                "model.layers.*.self_attn",
                "model.layers.*.mlp.router",
                "model.embed_tokens",
                "lm_head",
            ],
            "quant_method": "mxfp4",
        },
        "rms_norm_eps": 1e-05,
        "rope_scaling": {
            "beta_fast": 32.0,
            "beta_slow": 1.0,
            "factor": 32.0,
            "original_max_position_embeddings": 4096,
            "rope_type": "yarn",
            "truncate": False,
        },
        "rope_theta": 150000,
        "router_aux_loss_coef": 0.9,
        "sliding_window": c["window"],
        "swiglu_limit": 7.0,
        "tie_word_embeddings": False,
        "transformers_version": transformers.__version__,
        "use_cache": True,
        "vocab_size": c["vocab"],
    }


# --------------------------------------------------------------------------------------------
# random checkpoint in the real root HF layout
# --------------------------------------------------------------------------------------------

def make_checkpoint(c):
    g = torch.Generator().manual_seed(c["seed"])
    D, F, H, KV, hd = c["hidden"], c["inter"], c["heads"], c["kv"], c["head_dim"]
    E, V, L = c["experts"], c["vocab"], c["layers"]
    assert D % 32 == 0 and F % 32 == 0

    def n(shape, std):
        return (torch.randn(*shape, generator=g) * std).to(torch.bfloat16)

    def gain(shape):
        return (1.0 + 0.1 * (2 * torch.rand(*shape, generator=g) - 1)).to(torch.bfloat16)

    def u8(shape, lo, hi):  # inclusive lo, exclusive hi
        return torch.randint(lo, hi, shape, generator=g, dtype=torch.int64).to(torch.uint8)

    t = {}
    t["model.embed_tokens.weight"] = n((V, D), 0.1)
    for l in range(L):
        p = f"model.layers.{l}."
        t[p + "input_layernorm.weight"] = gain((D,))
        t[p + "self_attn.q_proj.weight"] = n((H * hd, D), 0.08)
        t[p + "self_attn.q_proj.bias"] = n((H * hd,), 0.1)
        t[p + "self_attn.k_proj.weight"] = n((KV * hd, D), 0.08)
        t[p + "self_attn.k_proj.bias"] = n((KV * hd,), 0.1)
        t[p + "self_attn.v_proj.weight"] = n((KV * hd, D), 0.08)
        t[p + "self_attn.v_proj.bias"] = n((KV * hd,), 0.1)
        t[p + "self_attn.o_proj.weight"] = n((D, H * hd), 0.08)
        t[p + "self_attn.o_proj.bias"] = n((D,), 0.05)
        t[p + "self_attn.sinks"] = n((H,), 1.0)
        t[p + "post_attention_layernorm.weight"] = gain((D,))
        t[p + "mlp.router.weight"] = n((E, D), 0.1)
        t[p + "mlp.router.bias"] = n((E,), 0.1)
        t[p + "mlp.experts.gate_up_proj_blocks"] = u8((E, 2 * F, D // 32, 16), 0, 256)
        t[p + "mlp.experts.gate_up_proj_scales"] = u8((E, 2 * F, D // 32), 127 - 5, 127 - 1)
        t[p + "mlp.experts.gate_up_proj_bias"] = n((E, 2 * F), 0.1)
        t[p + "mlp.experts.down_proj_blocks"] = u8((E, D, F // 32, 16), 0, 256)
        t[p + "mlp.experts.down_proj_scales"] = u8((E, D, F // 32), 127 - 5, 127 - 1)
        t[p + "mlp.experts.down_proj_bias"] = n((E, D), 0.1)
    t["model.norm.weight"] = gain((D,))
    t["lm_head.weight"] = n((V, D), 0.1)
    return {k: v.contiguous() for k, v in t.items()}


def write_checkpoint(folder, tensors, sharded):
    meta = {"format": "pt"}
    if not sharded:
        save_file(tensors, os.path.join(folder, "model.safetensors"), metadata=meta)
        return
    names = list(tensors.keys())
    L = 1 + max(int(k.split(".")[2]) for k in names if k.startswith("model.layers."))
    half = L // 2
    first, second = {}, {}
    for k, v in tensors.items():
        if k == "model.embed_tokens.weight" or (k.startswith("model.layers.") and int(k.split(".")[2]) < half):
            first[k] = v
        else:
            second[k] = v
    f1, f2 = "model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors"
    save_file(first, os.path.join(folder, f1), metadata=meta)
    save_file(second, os.path.join(folder, f2), metadata=meta)
    total = sum(v.numel() * v.element_size() for v in tensors.values())
    wm = {k: (f1 if k in first else f2) for k in sorted(tensors.keys())}
    with open(os.path.join(folder, "model.safetensors.index.json"), "w") as f:
        json.dump({"metadata": {"total_size": total}, "weight_map": wm}, f, indent=2)
        f.write("\n")


def read_checkpoint(folder):
    idx = os.path.join(folder, "model.safetensors.index.json")
    if os.path.exists(idx):
        with open(idx) as f:
            wm = json.load(f)["weight_map"]
        out = {}
        for fn in sorted(set(wm.values())):
            out.update(load_file(os.path.join(folder, fn)))
        assert set(out) == set(wm)
        return out
    return load_file(os.path.join(folder, "model.safetensors"))


# --------------------------------------------------------------------------------------------
# MXFP4 decode
# --------------------------------------------------------------------------------------------

FP4 = [0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0, -0.0, -0.5, -1.0, -1.5, -2.0, -3.0, -4.0, -6.0]


def spec_decode(blocks, scales):
    """Spec section 3: [..., N, G, 16] u8 + [..., N, G] u8 -> [..., N, G*32] float32 (out x in)."""
    lut = torch.tensor(FP4, dtype=torch.float64)
    lo = lut[(blocks & 0x0F).long()]
    hi = lut[(blocks >> 4).long()]
    vals = torch.stack([lo, hi], dim=-1).reshape(*blocks.shape[:-1], 32)  # elem 2b = lo, 2b+1 = hi
    vals = vals * torch.pow(2.0, scales.double() - 127.0).unsqueeze(-1)
    return vals.reshape(*blocks.shape[:-2], blocks.shape[-2] * 32).float()


HF_DECODER = None


def hf_decode(blocks, scales):
    """transformers' decoder; returns [E, N_out, K] float32 (un-transposed) or None."""
    global HF_DECODER
    if HF_DECODER is None:
        try:
            from transformers.integrations.mxfp4 import convert_moe_packed_tensors
            HF_DECODER = convert_moe_packed_tensors
        except Exception as e:  # pragma: no cover
            log("transformers.integrations.mxfp4.convert_moe_packed_tensors not importable:", e)
            HF_DECODER = False
    if HF_DECODER is False:
        return None
    try:
        out = HF_DECODER(blocks.clone(), scales.clone(), dtype=torch.bfloat16)
    except TypeError:
        out = HF_DECODER(blocks.clone(), scales.clone())
    out = out.float().cpu()
    E, N, G = scales.shape
    if tuple(out.shape) == (E, G * 32, N) and N != G * 32:
        out = out.transpose(1, 2).contiguous()
    elif tuple(out.shape) == (E, N, G * 32) and N != G * 32:
        pass
    elif N == G * 32:
        # square: HF's function ends with transpose(1, 2) (seen in every version read)
        out = out.transpose(1, 2).contiguous()
    else:
        raise RuntimeError(f"unexpected decoder output shape {tuple(out.shape)}")
    return out


# --------------------------------------------------------------------------------------------
# spec reference (float64), independent of HF
# --------------------------------------------------------------------------------------------

def yarn_inv_freq(cfg):
    d = cfg["head_dim"]
    rs = cfg["rope_scaling"]
    theta, s, L0 = float(cfg["rope_theta"]), rs["factor"], rs["original_max_position_embeddings"]
    beta, alpha = rs["beta_fast"], rs["beta_slow"]
    i = torch.arange(0, d // 2, dtype=torch.float64)
    freq = theta ** (2 * i / d)
    low = (d / 2) * math.log(L0 / (beta * 2 * math.pi)) / math.log(theta)
    high = (d / 2) * math.log(L0 / (alpha * 2 * math.pi)) / math.log(theta)
    ramp = ((i - low) / (high - low)).clamp(0, 1)
    m = 1 - ramp
    inv = (1 / (s * freq)) * (1 - m) + (1 / freq) * m
    conc = 0.1 * math.log(s) + 1.0
    return inv, conc


def spec_moe(x, w, p, cfg):
    """x [T, D] float64. w: float64 tensors by checkpoint name (experts decoded, out x in)."""
    k = cfg["num_experts_per_tok"]
    lim = cfg["swiglu_limit"]
    r = x @ w[p + "mlp.router.weight"].T + w[p + "mlp.router.bias"]
    vals, idx = torch.topk(r, k, dim=-1, sorted=True)
    rw = torch.softmax(vals, dim=-1)
    W1, b1 = w[p + "mlp.experts.gate_up_proj"], w[p + "mlp.experts.gate_up_proj_bias"]
    W2, b2 = w[p + "mlp.experts.down_proj"], w[p + "mlp.experts.down_proj_bias"]
    out = torch.zeros_like(x)
    for t in range(x.shape[0]):
        for j in range(k):
            e = idx[t, j].item()
            h = W1[e] @ x[t] + b1[e]
            gate, up = h[0::2], h[1::2]
            gate = gate.clamp(max=lim)
            up = up.clamp(min=-lim, max=lim)
            glu = gate * torch.sigmoid(1.702 * gate)
            y = (up + 1) * glu
            out[t] += rw[t, j] * (W2[e] @ y + b2[e])
    return out


def spec_forward(ids, w, cfg, hidden=None):
    """Whole model in float64 from the spec. ids: list of ints. Returns logits [T, V]; appends the
    residual stream [T, D] to `hidden` (if a list) after the embedding and after each layer."""
    eps = cfg["rms_norm_eps"]
    H, KV, hd = cfg["num_attention_heads"], cfg["num_key_value_heads"], cfg["head_dim"]
    W = cfg["sliding_window"]

    def rms(x, g):
        return x * torch.rsqrt((x * x).mean(-1, keepdim=True) + eps) * g

    inv, conc = yarn_inv_freq(cfg)
    T = len(ids)
    pos = torch.arange(T, dtype=torch.float64)
    ang = pos[:, None] * inv[None, :]
    cos, sin = torch.cos(ang) * conc, torch.sin(ang) * conc  # [T, hd/2]

    def rope(x):  # [T, heads, hd]
        x1, x2 = x[..., : hd // 2], x[..., hd // 2:]
        c, s = cos[:, None, :], sin[:, None, :]
        return torch.cat([x1 * c - x2 * s, x2 * c + x1 * s], dim=-1)

    x = w["model.embed_tokens.weight"][torch.tensor(ids)]
    if hidden is not None:
        hidden.append(x)
    i_idx = torch.arange(T)[:, None]
    j_idx = torch.arange(T)[None, :]
    for l in range(cfg["num_hidden_layers"]):
        p = f"model.layers.{l}."
        t = rms(x, w[p + "input_layernorm.weight"])
        q = (t @ w[p + "self_attn.q_proj.weight"].T + w[p + "self_attn.q_proj.bias"]).view(T, H, hd)
        k = (t @ w[p + "self_attn.k_proj.weight"].T + w[p + "self_attn.k_proj.bias"]).view(T, KV, hd)
        v = (t @ w[p + "self_attn.v_proj.weight"].T + w[p + "self_attn.v_proj.bias"]).view(T, KV, hd)
        q, k = rope(q), rope(k)
        vis = j_idx <= i_idx
        if cfg["layer_types"][l] == "sliding_attention":
            vis = vis & (j_idx > i_idx - W)
        sinks = w[p + "self_attn.sinks"]
        o = torch.zeros(T, H, hd, dtype=torch.float64)
        for h in range(H):
            g = h // (H // KV)
            lg = (q[:, h, :] @ k[:, g, :].T) * (hd ** -0.5)
            lg = lg.masked_fill(~vis, float("-inf"))
            full = torch.cat([lg, sinks[h].expand(T, 1)], dim=-1)
            pr = torch.softmax(full, dim=-1)[:, :T]
            o[:, h, :] = pr @ v[:, g, :]
        x = x + o.reshape(T, H * hd) @ w[p + "self_attn.o_proj.weight"].T + w[p + "self_attn.o_proj.bias"]
        t = rms(x, w[p + "post_attention_layernorm.weight"])
        x = x + spec_moe(t, w, p, cfg)
        if hidden is not None:
            hidden.append(x)
    h = rms(x, w["model.norm.weight"])
    return h @ w["lm_head.weight"].T


# --------------------------------------------------------------------------------------------
# HF model
# --------------------------------------------------------------------------------------------

def build_hf_model(cfg_dict, explicit_rope=False):
    from transformers import GptOssConfig, GptOssForCausalLM
    d = dict(cfg_dict)
    d.pop("quantization_config", None)
    if explicit_rope:
        rp = dict(d["rope_scaling"])
        rp["rope_theta"] = float(d["rope_theta"])
        d["rope_parameters"] = rp
    config = GptOssConfig.from_dict(d)
    try:
        model = GptOssForCausalLM._from_config(config, attn_implementation="eager", dtype=torch.float32)
    except TypeError:
        model = GptOssForCausalLM._from_config(config, attn_implementation="eager", torch_dtype=torch.float32)
    model = model.float().eval()
    return model


def hf_state_from_checkpoint(ck, hf_sd_shapes, cfg):
    """Map checkpoint tensors to the dense HF state dict (float32)."""
    E, D, F = cfg["num_local_experts"], cfg["hidden_size"], cfg["intermediate_size"]
    sd = {}
    spec_dense = {}
    for k, v in ck.items():
        if k.endswith("_blocks"):
            base = k[: -len("_blocks")]
            blocks, scales = v, ck[base + "_scales"]
            ref = spec_decode(blocks, scales)  # [E, N_out, K]
            hfd = hf_decode(blocks, scales)
            if hfd is not None:
                check(torch.equal(hfd, ref), f"transformers' MXFP4 decoder == spec decoder for {base}")
                dec = hfd
            else:
                dec = ref
            spec_dense[base] = dec
            if base not in hf_sd_shapes:
                raise RuntimeError(f"HF model has no parameter {base}; it has "
                                   f"{[k for k in hf_sd_shapes if '.layers.0.mlp' in k]}")
            want = tuple(hf_sd_shapes[base])
            if tuple(dec.shape) == want and tuple(dec.transpose(1, 2).shape) != want:
                sd[base] = dec.contiguous()
            elif tuple(dec.transpose(1, 2).shape) == want:
                sd[base] = dec.transpose(1, 2).contiguous()  # HF dense layout [E, in, out]
            else:
                raise RuntimeError(f"{base}: HF wants {want}, decoded {tuple(dec.shape)}")
        elif k.endswith("_scales"):
            continue
        else:
            sd[k] = v.float()
    return sd, spec_dense


def logits_of(model, ids, device):
    with torch.no_grad():
        out = model(input_ids=torch.tensor([ids], device=device), use_cache=False)
    return out.logits[0].float().cpu()


def prompt_residuals(model, ids, device):
    """The residual stream of a no-cache forward over ids, caught with forward hooks: the embedding
    output, then each decoder layer's output (before the final norm) -> [L+1, T, D] float32. Also
    returns HF's own output_hidden_states (a list of [T, D], or None) and the logits of that call."""
    caught = []

    def keep(module, args, out):
        caught.append((out[0] if isinstance(out, tuple) else out)[0].detach().float().cpu())

    hooks = [model.model.embed_tokens.register_forward_hook(keep)]
    hooks += [layer.register_forward_hook(keep) for layer in model.model.layers]
    try:
        with torch.no_grad():
            out = model(input_ids=torch.tensor([ids], device=device), use_cache=False, output_hidden_states=True)
    finally:
        for h in hooks:
            h.remove()
    hs = getattr(out, "hidden_states", None)
    hf = [h[0].float().cpu() for h in hs] if hs is not None else None
    return torch.stack(caught), hf, out.logits[0].float().cpu()


def check_residuals(name, model, res, hf, res_logits, prompt_logits, device):
    """res [L+1, T, D] from prompt_residuals. Checks that its last row is the pre-norm output (the
    final norm and lm_head on it give the logits) and says which one HF's output_hidden_states ends
    with. Returns that in words."""
    r_logits = rel(res_logits, prompt_logits)
    check(r_logits < 1e-6, f"{name}: logits of the hooked call vs prompt_logits rel diff {r_logits:.2e} "
                           f"(bit for bit: {torch.equal(res_logits, prompt_logits)})")
    with torch.no_grad():
        normed = model.model.norm(res[-1][None].to(device))
        relogits = model.lm_head(normed)[0].float().cpu()
        normed = normed[0].float().cpu()
    r_head = rel(relogits, prompt_logits)
    check(r_head < 1e-6, f"{name}: lm_head(final norm(prompt_hidden[L])) vs prompt_logits rel diff {r_head:.2e}")
    L = res.shape[0] - 1
    if hf is None or len(hf) != L + 1:
        check(False, f"{name}: output_hidden_states gave {None if hf is None else len(hf)} states, want {L + 1}")
        return "not returned"
    same = [torch.equal(hf[j], res[j]) for j in range(L + 1)]
    check(all(same[:L]), f"{name}: HF output_hidden_states[0..L-1] == hooked embedding and layer outputs, "
                         f"bit for bit ({same[:L]})")
    r_normed = rel(hf[L], normed)
    log(f"  HF output_hidden_states[L]: == last layer output {same[L]}; vs final norm of it rel diff {r_normed:.2e}")
    if same[L]:
        return "the last layer's output (before the final norm), like ours"
    check(r_normed < 1e-6, f"{name}: HF output_hidden_states[L] is the last layer's output or its final norm")
    return "the final norm's output (so prompt_hidden[L] is taken with a hook instead)"


def greedy_cached(model, prompt, n, device, probe=False):
    rows, toks, decode_keys = [], [], []
    with torch.no_grad():
        out = model(input_ids=torch.tensor([prompt], device=device), use_cache=True)
        past = out.past_key_values
        row = out.logits[0, -1].float().cpu()
        prefill_logits = out.logits[0].float().cpu()
        for i in range(n):
            rows.append(row)
            tok = int(torch.argmax(row).item())
            toks.append(tok)
            if i == n - 1:
                break
            kw = {"output_attentions": True} if probe else {}
            out = model(input_ids=torch.tensor([[tok]], device=device), past_key_values=past,
                        use_cache=True, **kw)
            att = getattr(out, "attentions", None) if probe else None
            if att is not None and len(att) >= 2:
                a0, a1 = att[0][0, :, -1, :], att[1][0, :, -1, :]
                decode_keys.append((len(prompt) + i, a0.shape[-1], int((a0[0] != 0).sum().item()),
                                    a1.shape[-1], int((a1[0] != 0).sum().item())))
            past = out.past_key_values
            row = out.logits[0, -1].float().cpu()
    return toks, torch.stack(rows), prefill_logits, decode_keys


def window_probe(model, ids, device, W):
    """Count the keys each query row attends to on layer 0 (sliding) and 1 (full)."""
    with torch.no_grad():
        out = model(input_ids=torch.tensor([ids], device=device), use_cache=False, output_attentions=True)
    att = out.attentions
    if att is None or len(att) < 2 or att[0] is None:
        return None
    T = len(ids)
    c0 = [(att[0][0, 0, i, :] != 0).sum().item() for i in range(T)]
    c1 = [(att[1][0, 0, i, :] != 0).sum().item() for i in range(T)]
    first0 = [int(torch.nonzero(att[0][0, 0, i, :] != 0)[0].item()) for i in range(T)]
    sliding_ok = all(c0[i] == min(i + 1, W) and first0[i] == max(0, i - W + 1) for i in range(T))
    full_ok = all(c1[i] == i + 1 for i in range(T))
    return dict(counts_sliding=c0, counts_full=c1, first_key_sliding=first0,
                sliding_ok=sliding_ok, full_ok=full_ok)


# --------------------------------------------------------------------------------------------

def make_one(c, out_root, devices, summary):
    name = c["name"]
    log(f"\n=== {name} ===")
    folder = os.path.join(out_root, name)
    os.makedirs(folder, exist_ok=True)
    for fn in os.listdir(folder):
        os.remove(os.path.join(folder, fn))
    cfg = hf_config_dict(c)
    with open(os.path.join(folder, "config.json"), "w") as f:
        json.dump(cfg, f, indent=2, sort_keys=True)
        f.write("\n")
    write_checkpoint(folder, make_checkpoint(c), c["sharded"])
    ck = read_checkpoint(folder)  # read back what was written
    for k, v in ck.items():
        want = torch.uint8 if (k.endswith("_blocks") or k.endswith("_scales")) else torch.bfloat16
        if v.dtype != want:
            check(False, f"{k} dtype {v.dtype} (want {want})")

    # HF model, rope check (rebuild with explicit rope_parameters if the legacy keys were not honoured)
    inv_ref, conc_ref = yarn_inv_freq(cfg)
    model = None
    for explicit in (False, True):
        m = build_hf_model(cfg, explicit_rope=explicit)
        rot = m.model.rotary_emb
        inv = rot.inv_freq.double().cpu()
        sc = float(getattr(rot, "attention_scaling", float("nan")))
        r_inv = rel(inv, inv_ref)
        ok = r_inv < 1e-6 and abs(sc - conc_ref) < 1e-6
        log(f"  rope (explicit rope_parameters={explicit}): inv_freq rel diff {r_inv:.3e}, "
            f"attention_scaling {sc!r} (spec {conc_ref!r})")
        if ok:
            model = m
            break
    check(model is not None, f"{name}: HF YaRN inv_freq/attention scaling match spec section 4.4")
    if model is None:
        model = m
    log(f"  HF config: layer_types={getattr(model.config, 'layer_types', None)} "
        f"sliding_window={model.config.sliding_window} attn={model.config._attn_implementation} "
        f"rope_parameters={getattr(model.config, 'rope_parameters', None)}")

    hf_shapes = {k: tuple(v.shape) for k, v in model.state_dict().items()}
    log("  HF layer-0 MLP params:", {k: v for k, v in hf_shapes.items() if k.startswith("model.layers.0.mlp")})
    log("  HF experts module:", type(model.model.layers[0].mlp.experts).__name__,
        "| experts impl:", getattr(model.config, "_experts_implementation", None),
        "| modeling file:", sys.modules[type(model).__module__].__file__)
    sd, spec_dense = hf_state_from_checkpoint(ck, hf_shapes, cfg)
    missing = sorted(set(hf_shapes) - set(sd))
    unexpected = sorted(set(sd) - set(hf_shapes))
    check(not missing and not unexpected, f"{name}: state dict keys match (missing {missing}, unexpected {unexpected})")
    model.load_state_dict(sd, strict=True)
    eq = all(torch.equal(p.detach().cpu(), sd[n]) and p.dtype == torch.float32 for n, p in model.named_parameters())
    check(eq, f"{name}: every HF parameter (float32) == decoded checkpoint, bit for bit "
              f"({len(list(model.named_parameters()))} params)")

    # float64 copy of the checkpoint (experts decoded, out x in) for the spec reference
    w64 = {}
    for k, v in ck.items():
        if k.endswith("_blocks") or k.endswith("_scales"):
            continue
        w64[k] = v.double()
    for base, dec in spec_dense.items():
        w64[base] = dec.double()

    # MoE block vs spec formula
    g = torch.Generator().manual_seed(c["seed"] + 7)
    for l in range(cfg["num_hidden_layers"]):
        x = torch.randn(5, cfg["hidden_size"], generator=g)
        with torch.no_grad():
            y = model.model.layers[l].mlp(x[None].clone())
        if isinstance(y, tuple):
            y = y[0]
        y = y[0].double()
        ref = spec_moe(x.double(), w64, f"model.layers.{l}.", cfg)
        r = rel(y, ref)
        check(r < 1e-5, f"{name}: layer {l} HF MoE vs spec formula rel diff {r:.2e}")

    dev = devices[0]
    model = model.to(dev)
    T, N, V = c["prompt"], c["gen"], c["vocab"]

    # choose a prompt whose greedy decisions are not near-ties
    chosen = None
    for attempt in range(40):
        pg = torch.Generator().manual_seed(c["seed"] * 100 + attempt)
        prompt = torch.randint(0, V - 2, (T,), generator=pg).tolist()
        toks, glog, prefill, dkeys = greedy_cached(model, prompt, N, dev)
        top2 = torch.topk(glog, 2, dim=-1).values
        margin = ((top2[:, 0] - top2[:, 1]) / glog.abs().max()).min().item()
        if margin > 2e-3:
            chosen = (prompt, toks, glog, prefill, dkeys, margin, attempt)
            break
    if chosen is None:
        check(False, f"{name}: no prompt with a greedy margin > 2e-3 found")
        chosen = (prompt, toks, glog, prefill, dkeys, margin, attempt)
    prompt, toks, glog, prefill, dkeys, margin, attempt = chosen
    log(f"  prompt (attempt {attempt}) = {prompt}")
    log(f"  greedy = {toks}")
    log(f"  min greedy margin (top1-top2)/max|logit| = {margin:.4e}; max|logit| = {glog.abs().max().item():.4f}")

    prompt_logits = logits_of(model, prompt, dev)
    prompt_hidden, hf_hidden, hooked_logits = prompt_residuals(model, prompt, dev)
    L = cfg["num_hidden_layers"]
    check(tuple(prompt_hidden.shape) == (L + 1, T, c["hidden"]),
          f"{name}: prompt_hidden shape {tuple(prompt_hidden.shape)} == (L+1, T, D)")
    hf_last = check_residuals(name, model, prompt_hidden, hf_hidden, hooked_logits, prompt_logits, dev)
    full = logits_of(model, prompt + toks[:-1], dev)
    r_prefill = rel(prefill, prompt_logits)
    r_row0 = rel(glog[0], prompt_logits[-1])
    r_cache = rel(glog, full[T - 1:])
    r_prompt_full = rel(full[:T], prompt_logits)
    check(r_prefill < 1e-4, f"{name}: cached prefill vs no-cache prompt logits rel diff {r_prefill:.2e}")
    check(r_row0 < 1e-4, f"{name}: greedy_logits[0] vs prompt_logits[-1] rel diff {r_row0:.2e}")
    check(r_cache < 1e-4, f"{name}: KV-cache greedy logits vs full recompute rel diff {r_cache:.2e}")
    check(r_prompt_full < 1e-4, f"{name}: prompt logits inside the longer recompute rel diff {r_prompt_full:.2e}")
    check(torch.argmax(full[T - 1:], -1).tolist() == toks, f"{name}: recompute argmax == greedy ids")

    # the window HF applied
    wp = window_probe(model, prompt + toks[:-1], dev, c["window"])
    if wp is None:
        log("  window probe: attentions not returned")
    else:
        log(f"  window probe layer0 (sliding) keys per query row: {wp['counts_sliding']}")
        log(f"  window probe layer0 first visible key per row:    {wp['first_key_sliding']}")
        log(f"  window probe layer1 (full) keys per query row:    {wp['counts_full']}")
        check(wp["sliding_ok"], f"{name}: sliding layer: query i sees keys max(0,i-{c['window']}+1)..i "
                                f"({c['window']} keys incl. self)")
        check(wp["full_ok"], f"{name}: full layer: query i sees keys 0..i")
    try:
        ptoks, plog, _, dkeys = greedy_cached(model, prompt, N, dev, probe=True)
        check(ptoks == toks and rel(plog, glog) < 1e-6, f"{name}: cached decode with output_attentions agrees")
    except Exception as e:
        log("  cached decode probe with output_attentions failed:", repr(e))
        dkeys = []
    if dkeys:
        log("  cached decode steps (pos, layer0 #keys in cache view, layer0 #nonzero, layer1 #keys, layer1 #nonzero):")
        log("   ", dkeys)

    # independent float64 spec forward
    sp = spec_forward(prompt + toks[:-1], w64, cfg)
    r_spec = rel(full, sp)
    check(r_spec < 1e-4, f"{name}: HF fp32 forward vs independent float64 spec forward rel diff {r_spec:.2e}")
    # the per-layer residual stream against the spec forward's
    spec_hidden = []
    spec_forward(prompt, w64, cfg, hidden=spec_hidden)
    r_layers = [rel(prompt_hidden[j], spec_hidden[j]) for j in range(L + 1)]
    check(max(r_layers) < 1e-4, f"{name}: prompt_hidden vs float64 spec residual stream rel diff per boundary "
                                f"(embedding, layer 0, ...) {', '.join(f'{r:.1e}' for r in r_layers)}")
    # what a wrong window would have given (shows the fixture is sensitive to it)
    cfg_w = dict(cfg, sliding_window=c["window"] + 1)
    r_w = rel(spec_forward(prompt + toks[:-1], w64, cfg_w), full)
    log(f"  (spec forward with window {c['window'] + 1} instead differs by rel {r_w:.2e})")

    # cross-device check
    for d2 in devices[1:]:
        m2 = model.to(d2)
        r_dev = rel(logits_of(m2, prompt + toks[:-1], d2), full)
        log(f"  {dev} vs {d2} full logits rel diff {r_dev:.2e}")
        model = m2.to(dev)

    ref = {
        "prompt_ids": torch.tensor(prompt, dtype=torch.int32),
        "prompt_logits": prompt_logits.float().contiguous(),
        "greedy_ids": torch.tensor(toks, dtype=torch.int32),
        "greedy_logits": glog.float().contiguous(),
        "prompt_hidden": prompt_hidden.float().contiguous(),
    }
    save_file(ref, os.path.join(folder, "reference.safetensors"),
              metadata={"source": f"transformers {transformers.__version__} GptOssForCausalLM fp32 eager",
                        "device": str(dev)})

    # transformers' own MXFP4 loading path (informational)
    try:
        from transformers import GptOssForCausalLM, Mxfp4Config
        m3 = GptOssForCausalLM.from_pretrained(folder, quantization_config=Mxfp4Config(dequantize=True),
                                               dtype=torch.float32, attn_implementation="eager")
        m3 = m3.eval()
        sd3 = m3.state_dict()
        diffs = []
        for k, v in sd.items():
            if k not in sd3:
                diffs.append(f"{k} missing")
                continue
            a = sd3[k].detach().float().cpu()
            if a.shape != v.shape:
                diffs.append(f"{k} shape {tuple(a.shape)} vs {tuple(v.shape)}")
            elif not torch.equal(a, v):
                diffs.append(f"{k} maxdiff {(a - v).abs().max().item():.3e}")
        dts = sorted({str(v.dtype) for v in sd3.values()})
        low = sorted({k.split(".")[-1] for k, v in sd3.items() if v.dtype != torch.float32})
        d3 = next(m3.parameters()).device
        r3 = rel(logits_of(m3, prompt + toks[:-1], d3), full)
        m3 = m3.float()
        r3f = rel(logits_of(m3, prompt + toks[:-1], d3), full)
        log(f"  from_pretrained(MXFP4 folder, Mxfp4Config(dequantize=True), dtype=float32): param dtypes {dts} "
            f"(not float32: {low}), {len(diffs)} param value differences {diffs[:6]}, logits rel diff vs "
            f"fixture as loaded {r3:.2e}, after .float() {r3f:.2e}")
        summary.setdefault("mxfp4_load", []).append(
            f"{name}: {'all parameter values identical to ours' if not diffs else str(len(diffs)) + ' params differ'}"
            f" (dtypes as loaded {dts}, not float32: {low}); logits rel diff vs fixture {r3:.1e} as loaded,"
            f" {r3f:.1e} after `.float()`")
        del m3
    except Exception as e:
        log("  from_pretrained with Mxfp4Config(dequantize=True) failed:", repr(e))
        log("   ", traceback.format_exc().strip().splitlines()[-1])
        summary.setdefault("mxfp4_load", []).append(f"{name}: failed ({type(e).__name__}: {e})"[:300])

    files = {fn: os.path.getsize(os.path.join(folder, fn)) for fn in sorted(os.listdir(folder))}
    summary[name] = dict(files=files, T=T, N=N, r_cache=r_cache, r_spec=r_spec, r_prefill=r_prefill,
                         margin=margin, window=c["window"], wp=wp, cfg=c, dkeys=dkeys, r_layers=r_layers,
                         hf_last=hf_last)
    log("  files:", files)


def write_readme(out_root, summary, devices, command):
    L = []
    L.append("# gpt-oss test fixtures (expected outputs from Hugging Face transformers)")
    L.append("")
    L.append("Generated by `tools/make_fixtures.py` (do not edit by hand). Each folder is a tiny gpt-oss")
    L.append("model in the real root Hugging Face format plus the outputs of transformers' own")
    L.append("`GptOssForCausalLM` on it — an oracle independent of mxserve's code.")
    L.append("")
    L.append("## How they were made")
    L.append("")
    L.append(f"- command: `{command}`")
    L.append(f"- transformers {transformers.__version__}, torch {torch.__version__}, safetensors "
             f"{safetensors.__version__}, Python {platform.python_version()}")
    gpu = torch.cuda.get_device_name(0) if torch.cuda.is_available() else "none"
    L.append(f"- reference run on: {devices[0]} (GPU present: {gpu}); cross-checked on {', '.join(map(str, devices[1:])) or 'nothing else'}")
    L.append("- model: `GptOssForCausalLM` built from config.json minus `quantization_config`, float32,")
    L.append("  `attn_implementation=\"eager\"`, TF32 off; weights = the checkpoint exactly: BF16 tensors")
    L.append("  widened to F32, MXFP4 experts decoded with `transformers.integrations.mxfp4.convert_moe_packed_tensors`")
    L.append("  (HF dense layout: `gate_up_proj` [E, D, 2F] = decoded rows transposed, gate/up interleaved;")
    L.append("  `down_proj` [E, F, D]).")
    L.append("- greedy continuation: one token at a time with HF's KV cache (`past_key_values`), no EOS")
    L.append("  stop. The prompt is random ids in [0, V-2); the script re-draws it until every greedy")
    L.append("  choice has top1-top2 > 2e-3·max|logit|, so an engine within 1e-4 must pick the same ids.")
    L.append("")
    L.append("## Files per folder")
    L.append("")
    L.append("- `config.json` — gpt-oss root config keys (spec §1.1), tiny sizes; eos = V-1, pad = V-2.")
    L.append("- `model.safetensors` or `model-0000{1,2}-of-00002.safetensors` + `model.safetensors.index.json`")
    L.append("  — spec §2.1 names; BF16 for all non-expert tensors (norms, sinks too); experts U8")
    L.append("  `*_blocks` [E, N, K/32, 16], `*_scales` [E, N, K/32] (E8M0 bytes 122..125), BF16 `*_bias`.")
    L.append("- `reference.safetensors` — `prompt_ids` I32 [T], `prompt_logits` F32 [T, V] (every prompt")
    L.append("  position, no cache), `greedy_ids` I32 [N], `greedy_logits` F32 [N, V]: row 0 = logits at the")
    L.append("  last prompt position, row i = logits from which `greedy_ids[i]` was chosen; `prompt_hidden`")
    L.append("  F32 [L+1, T, D], the residual stream of the prompt (same no-cache call): row 0 the embedding,")
    L.append("  row l+1 the output of decoder layer l, **before the final norm** (row L too), so a wrong layer")
    L.append("  shows as the first row that differs. Caught with forward hooks on `embed_tokens` and each")
    L.append("  decoder layer; HF's `output_hidden_states` equals rows 0..L-1 bit for bit, and its last entry")
    hl = next((s["hf_last"] for s in summary.values() if isinstance(s, dict) and "hf_last" in s), "not measured")
    L.append(f"  is {hl}.")
    L.append("")
    L.append("| fixture | D | F | heads/kv | head_dim | layers | experts/top-k | V | window | T | N | files (bytes) |")
    L.append("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for name, s in summary.items():
        if not isinstance(s, dict) or "cfg" not in s:
            continue
        c = s["cfg"]
        files = ", ".join(f"{k} {v}" for k, v in s["files"].items())
        L.append(f"| {name} | {c['hidden']} | {c['inter']} | {c['heads']}/{c['kv']} | {c['head_dim']} | "
                 f"{c['layers']} | {c['experts']}/{c['topk']} | {c['vocab']} | {c['window']} | {s['T']} | "
                 f"{s['N']} | {files} |")
    L.append("")
    L.append("## Verified by the script when these were made")
    L.append("")
    for name, s in summary.items():
        if not isinstance(s, dict) or "cfg" not in s:
            continue
        L.append(f"- {name}: KV-cache vs full recompute rel diff {s['r_cache']:.1e}; HF vs independent")
        L.append(f"  float64 spec forward rel diff {s['r_spec']:.1e}; min greedy margin {s['margin']:.1e};")
        L.append(f"  prompt_hidden vs the spec forward's residual stream, per row: "
                 f"{', '.join(f'{r:.1e}' for r in s['r_layers'])}.")
    L.append("- transformers' MXFP4 decoder equals the spec §3 decoder bit for bit; every parameter of the")
    L.append("  HF model equals the decoded checkpoint bit for bit; HF's YaRN inv_freq and attention")
    L.append("  scaling equal the spec §4.4 formula; each HF MoE block equals the spec formula (float64).")
    for line in summary.get("mxfp4_load", []):
        L.append(f"- transformers' own loader, `from_pretrained(folder, quantization_config=Mxfp4Config(dequantize=True), dtype=float32)`: {line}")
    L.append("")
    L.append("## Sliding-window semantics HF applied")
    L.append("")
    wins = [(n, s) for n, s in summary.items() if isinstance(s, dict) and s.get("wp")]
    if wins and all(s["wp"]["sliding_ok"] and s["wp"]["full_ok"] for n, s in wins):
        L.append("Measured from the eager attention weights (`output_attentions=True`) of layer 0")
        L.append("(`sliding_attention`) and layer 1 (`full_attention`): with `sliding_window = W`, query")
        L.append("position i attends to keys max(0, i-W+1) … i, i.e. **W keys including itself** (HF mask")
        L.append("`kv_idx > q_idx - W` and `kv_idx <= q_idx`); full layers see 0 … i. The sink logit is")
        L.append("extra and not counted. Even layers (0, 2, …) are sliding, odd layers full.")
        for n, s in wins:
            wp = s["wp"]
            L.append(f"- {n} (W = {s['window']}): sliding {'as above' if wp['sliding_ok'] else 'DIFFERENT'}, "
                     f"keys per row {wp['counts_sliding']}")
            if s.get("dkeys"):
                d0 = s["dkeys"]
                L.append(f"  cached decode (pos, layer-0 keys in cache view, layer-0 keys with weight > 0,"
                         f" layer-1 keys, layer-1 > 0): {d0[0]} … {d0[-1]}")
    elif wins:
        L.append("HF's window did NOT match `max(0, i-W+1) … i`; measured keys per query row (layer 0, 1):")
        for n, s in wins:
            L.append(f"- {n} (W = {s['window']}): sliding {s['wp']['counts_sliding']}, first key "
                     f"{s['wp']['first_key_sliding']}; full {s['wp']['counts_full']}")
    else:
        L.append("Attention weights were not returned; see the log.")
    L.append("")
    with open(os.path.join(out_root, "README.md"), "w") as f:
        f.write("\n".join(L))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default="tests/fixtures/models")
    ap.add_argument("--tar", default=None, help="also write a tar of the output folder here")
    ap.add_argument("--log", default=None, help="also write the log here")
    ap.add_argument("--device", default="cpu", help="device of the reference run (cpu or cuda)")
    ap.add_argument("--only", default=None, help="comma-separated fixture names")
    args = ap.parse_args()

    log(f"python {platform.python_version()}, torch {torch.__version__}, transformers {transformers.__version__}, "
        f"safetensors {safetensors.__version__}")
    log(f"cuda available: {torch.cuda.is_available()}"
        + (f" ({torch.cuda.get_device_name(0)})" if torch.cuda.is_available() else ""))
    devices = [torch.device(args.device)]
    other = "cuda" if args.device == "cpu" else "cpu"
    if other == "cpu" or torch.cuda.is_available():
        devices.append(torch.device(other))

    os.makedirs(args.out, exist_ok=True)
    summary = {}
    for c in CONFIGS:
        if args.only and c["name"] not in args.only.split(","):
            continue
        try:
            make_one(c, args.out, devices, summary)
        except Exception:
            log(traceback.format_exc())
            FAILURES.append(f"{c['name']}: exception")

    command = "python3 " + " ".join([os.path.relpath(sys.argv[0])] + ["--out", "tests/fixtures/models"]
                                     + (["--device", args.device] if args.device != "cpu" else []))
    write_readme(args.out, summary, devices, command)
    log("\nFAILURES:" if FAILURES else "\nall checks passed")
    for f in FAILURES:
        log("  ", f)
    if args.log:
        with open(args.log, "w") as f:
            f.write("\n".join(LOG_LINES) + "\n")
    if args.tar:
        with tarfile.open(args.tar, "w") as tf:
            tf.add(args.out, arcname="models")
    sys.exit(1 if FAILURES else 0)


if __name__ == "__main__":
    main()
