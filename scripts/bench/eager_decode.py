"""Decode-step timing of a Llama-style model in PyTorch eager, for comparison with lynx.

The same architecture and measurement as lynx's decode cells: weights Normal(0, 0.02), a
preallocated KV cache holding `ctx` random tokens, one untimed step, then timed greedy decode
steps (each ends when its tokens are on the host) until at least `min_steps` steps and
`min_s` seconds, at most `max_steps`. Written as a PyTorch user would write it (Hugging Face's Llama in miniature):
nn.Module-free functions over tensors, torch.inference_mode, scaled_dot_product_attention with
enable_gqa. Prints one JSON line per cell.
"""

import json
import statistics
import sys
import time

import torch
import torch.nn.functional as F


def build(shape, device, dtype):
    torch.manual_seed(0)
    h, v, ffn = shape["hidden_size"], shape["vocab_size"], shape["intermediate_size"]
    heads, kv_heads = shape["num_heads"], shape["num_kv_heads"]
    hd = h // heads
    w = lambda *s: (torch.randn(*s, device=device) * 0.02).to(dtype)
    layers = [
        dict(
            attn_norm=torch.ones(h, device=device, dtype=dtype),
            # q, k and v as one projection, and gate and up as one, as lynx merges them.
            wqkv=torch.cat((w(heads * hd, h), w(kv_heads * hd, h), w(kv_heads * hd, h))), wo=w(h, heads * hd),
            mlp_norm=torch.ones(h, device=device, dtype=dtype),
            gate_up=torch.cat((w(ffn, h), w(ffn, h))), down=w(h, ffn),
        )
        for _ in range(shape["num_layers"])
    ]
    inv_freq = 1.0 / (shape["rope_theta"] ** (torch.arange(0, hd, 2, device=device, dtype=torch.float32) / hd))
    return dict(embed=w(v, h), layers=layers, norm=torch.ones(h, device=device, dtype=dtype), head=w(v, h),
                inv_freq=inv_freq, heads=heads, kv_heads=kv_heads, hd=hd, ffn=ffn, eps=shape["rms_norm_eps"])


def rope(x, cos, signed_sin):
    """x·cos + rotate_half(x)·sin in three kernels, the sines' first half negated (as lynx's)."""
    x1, x2 = x.chunk(2, dim=-1)
    return (x * cos).addcmul_(torch.cat((x2, x1), dim=-1), signed_sin)


def decode_step(m, tokens, caches, pos):
    b = tokens.shape[0]
    x = F.embedding(tokens, m["embed"])
    angles = torch.arange(pos, pos + 1, device=x.device, dtype=torch.float32)[:, None] * m["inv_freq"][None, :]
    angles = torch.cat((-angles, angles), dim=-1)
    cos, sin = angles.cos().to(x.dtype), angles.sin().to(x.dtype)
    heads, kv_heads, hd, ffn = m["heads"], m["kv_heads"], m["hd"], m["ffn"]
    for layer, (k_cache, v_cache) in zip(m["layers"], caches):
        h = F.rms_norm(x, (x.shape[-1],), layer["attn_norm"], m["eps"])
        qkv = F.linear(h, layer["wqkv"])
        qk = rope(qkv[..., :(heads + kv_heads) * hd].view(b, 1, heads + kv_heads, hd).transpose(1, 2), cos, sin)
        q, k = qk[:, :heads], qk[:, heads:]
        v = qkv[..., (heads + kv_heads) * hd:].view(b, 1, kv_heads, hd).transpose(1, 2)
        k_cache[:, :, pos:pos + 1].copy_(k)
        v_cache[:, :, pos:pos + 1].copy_(v)
        o = F.scaled_dot_product_attention(q, k_cache[:, :, :pos + 1], v_cache[:, :, :pos + 1], enable_gqa=True)
        x = x + F.linear(o.transpose(1, 2).reshape(b, 1, -1), layer["wo"])
        h = F.rms_norm(x, (x.shape[-1],), layer["mlp_norm"], m["eps"])
        gate_up = F.linear(h, layer["gate_up"])
        x = x + F.linear(F.silu(gate_up[..., :ffn]) * gate_up[..., ffn:], layer["down"])
    x = F.rms_norm(x, (x.shape[-1],), m["norm"], m["eps"])
    logits = F.linear(x, m["head"]).float()
    return logits.argmax(-1)


def measure(m, batch, ctx, limits, device, dtype):
    """lynx's decode cell: cache of ctx + max_steps, one untimed step, cache back to ctx, then
    timed steps until min_steps and min_s (at most max_steps)."""
    capacity = ctx + limits["max_steps"]
    caches = [
        (torch.randn(batch, m["kv_heads"], capacity, m["hd"], device=device, dtype=dtype),
         torch.randn(batch, m["kv_heads"], capacity, m["hd"], device=device, dtype=dtype))
        for _ in m["layers"]
    ]
    tokens = torch.randint(0, m["embed"].shape[0], (batch, 1), device=device)
    tokens = decode_step(m, tokens, caches, ctx)
    tokens.cpu()
    times, pos, start = [], ctx, time.perf_counter()
    while len(times) < limits["max_steps"] and (
        len(times) < limits["min_steps"] or time.perf_counter() - start < limits["min_s"]
    ):
        t0 = time.perf_counter()
        tokens = decode_step(m, tokens, caches, pos)
        tokens.cpu()
        times.append(time.perf_counter() - t0)
        pos += 1
    return statistics.median(times), len(times)


def main():
    spec = json.loads(sys.argv[1])
    device = torch.device(spec.get("device", "cpu"))
    dtype = getattr(torch, spec.get("dtype", "float32"))
    torch.set_num_threads(spec["threads"])
    with torch.inference_mode():
        m = build(spec["shape"], device, dtype)
        for batch in spec["batches"]:
            for ctx in spec["ctxs"]:
                median_s, n = measure(m, batch, ctx, spec["measure"], device, dtype)
                print(json.dumps(dict(batch=batch, ctx=ctx, median_s=median_s, n=n, torch=torch.__version__)), flush=True)


if __name__ == "__main__":
    main()
