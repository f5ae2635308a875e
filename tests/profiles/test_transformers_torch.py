"""Analytic transformer profiles against plain-torch references counted by FlopCounterMode."""

from __future__ import annotations

import pytest

from inferplan.profiles.transformers import decoder_lm, vit

torch = pytest.importorskip("torch")
nn = torch.nn


class Attention(nn.Module):
    def __init__(self, d, heads, kv_heads, bias, cached=False):
        super().__init__()
        self.heads, self.kv_heads, self.cached = heads, kv_heads, cached
        size = d // heads
        self.q = nn.Linear(d, d, bias=bias)
        self.k = nn.Linear(d, kv_heads * size, bias=bias)
        self.v = nn.Linear(d, kv_heads * size, bias=bias)
        self.o = nn.Linear(d, d, bias=bias)

    def forward(self, x, k_cache=None, v_cache=None):
        size = x.shape[-1] // self.heads
        q = self.q(x).unflatten(-1, (self.heads, size)).transpose(1, 2)
        k = self.k(x).unflatten(-1, (self.kv_heads, size)).transpose(1, 2)
        v = self.v(x).unflatten(-1, (self.kv_heads, size)).transpose(1, 2)
        if self.cached:
            k, v = torch.cat([k_cache, k], dim=2), torch.cat([v_cache, v], dim=2)
        repeat = self.heads // self.kv_heads
        k, v = k.repeat_interleave(repeat, dim=1), v.repeat_interleave(repeat, dim=1)
        a = torch.softmax(q @ k.transpose(-1, -2), dim=-1) @ v
        return self.o(a.transpose(1, 2).flatten(2))


class DecoderLayer(nn.Module):
    def __init__(self, d, heads, kv_heads, ffn, cached=False):
        super().__init__()
        self.n1, self.n2 = nn.RMSNorm(d), nn.RMSNorm(d)
        self.attn = Attention(d, heads, kv_heads, bias=False, cached=cached)
        self.up, self.gate = nn.Linear(d, ffn, bias=False), nn.Linear(d, ffn, bias=False)
        self.down = nn.Linear(ffn, d, bias=False)

    def forward(self, x, k_cache=None, v_cache=None):
        x = x + self.attn(self.n1(x), k_cache, v_cache)
        h = self.n2(x)
        return x + self.down(torch.nn.functional.silu(self.gate(h)) * self.up(h))


class Decoder(nn.Module):
    def __init__(self, layers, d, heads, kv_heads, ffn, vocab):
        super().__init__()
        self.embed = nn.Embedding(vocab, d)
        self.layers = nn.ModuleList(DecoderLayer(d, heads, kv_heads, ffn) for _ in range(layers))
        self.norm, self.head = nn.RMSNorm(d), nn.Linear(d, vocab, bias=False)

    def forward(self, ids):
        x = self.embed(ids)
        for layer in self.layers:
            x = layer(x)
        return self.head(self.norm(x)[:, -1])


class ViT(nn.Module):
    def __init__(self, image, patch, d, layers, heads, mlp, classes):
        super().__init__()
        self.embed = PatchEmbed(image, patch, d)
        self.layers = nn.ModuleList(EncoderLayer(d, heads, mlp) for _ in range(layers))
        self.norm, self.head = nn.LayerNorm(d), nn.Linear(d, classes)

    def forward(self, image):
        x = self.embed(image)
        for layer in self.layers:
            x = layer(x)
        return self.head(self.norm(x)[:, 0])


class PatchEmbed(nn.Module):
    def __init__(self, image, patch, d):
        super().__init__()
        self.conv = nn.Conv2d(3, d, patch, stride=patch)
        self.cls = nn.Parameter(torch.zeros(1, 1, d))
        self.pos = nn.Parameter(torch.zeros(1, (image // patch) ** 2 + 1, d))

    def forward(self, image):
        x = self.conv(image).flatten(2).transpose(1, 2)
        return torch.cat([self.cls.expand(x.shape[0], -1, -1), x], dim=1) + self.pos


class EncoderLayer(nn.Module):
    def __init__(self, d, heads, mlp):
        super().__init__()
        self.n1, self.n2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.attn = Attention(d, heads, heads, bias=True)
        self.fc1, self.fc2 = nn.Linear(d, mlp), nn.Linear(mlp, d)

    def forward(self, x):
        x = x + self.attn(self.n1(x))
        return x + self.fc2(torch.nn.functional.gelu(self.fc1(self.n2(x))))


def _profile(model, shapes, **kw):
    from inferplan.profiles.cuts import parse_block_spec
    from inferplan.profiles.from_torch import profile_module

    if "blocks" in kw:
        kw["blocks"] = parse_block_spec(kw["blocks"])
    return profile_module(model, shapes, **kw).profile


@pytest.mark.parametrize(("batch", "kv_heads"), [(1, 4), (3, 2)])
def test_decoder_prefill_matches_a_torch_reference(batch, kv_heads):
    with torch.device("meta"):
        model = Decoder(3, 32, 4, kv_heads, 48, 50)
    got = _profile(model, [(batch, 10)], input_dtypes=["int32"],
                   blocks="embed+layers.0,layers.1,layers.2,norm+head")  # fmt: skip
    want = decoder_lm(layers=3, hidden=32, heads=4, kv_heads=kv_heads, ffn_hidden=48,
                      gated_mlp=True, vocab_size=50, seq_len=10, batch=batch,
                      bytes_per_element=4)  # fmt: skip
    assert got.flops == want.flops
    assert got.activation_bits == want.activation_bits
    assert got.params == want.params


def test_decode_step_matches_a_cached_torch_layer():
    with torch.device("meta"):
        layer = DecoderLayer(32, 4, 2, 48, cached=True)
    cache = (2, 2, 20, 8)  # batch, kv heads, cached tokens, head size
    got = _profile(layer, [(2, 1, 32), cache, cache])
    want = decoder_lm(layers=1, hidden=32, heads=4, kv_heads=2, ffn_hidden=48, gated_mlp=True,
                      seq_len=20, batch=2, phase="decode")  # fmt: skip
    assert got.total_flops == want.flops[0]


def test_vit_matches_a_torch_reference():
    with torch.device("meta"):
        model = ViT(32, 8, 48, 2, 4, 96, 10)
    got = _profile(model, [(2, 3, 32, 32)], blocks="embed,layers.0,layers.1,norm+head")
    want = vit(image_size=32, patch_size=8, hidden=48, layers=2, heads=4, mlp_dim=96,
               num_classes=10, batch=2)  # fmt: skip
    assert got.flops == want.flops
    assert got.activation_bits == want.activation_bits
    assert got.params == want.params
