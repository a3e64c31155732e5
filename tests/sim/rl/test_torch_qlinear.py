"""QuantLinear and model conversion: exact GEMM operands in training (forward and backward)
and in rollouts (with Rollout-ResQ), and conversion of a random tiny Qwen2ForCausalLM.

The fake-quantized path multiplies with torch's FP32 GEMM, whose summation order is MKL's
choice and need not be the same for two calls on equal operands in different buffers (a CI
machine once returned results one ulp apart). So the tests record every GEMM the layer
calls and check its operands against the golden model bit for bit, and the layer's outputs
against that same call's result.
"""

import numpy as np
import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

import torch.nn.functional as F                     # noqa: E402
from torch import nn                                 # noqa: E402

from sim.formats import fake_quantize as golden_fq   # noqa: E402
from sim.formats.resq import resq as golden_resq     # noqa: E402
from sim.rl.qlinear import (Precision, QuantLinear, convert_linears, default_gemm,  # noqa: E402
                            gather_stats, set_collect_stats, set_mode)


def fq(t, fmt, axis):
    return torch.from_numpy(golden_fq(t.detach().numpy(), fmt, axis=axis))


@pytest.fixture
def gemms(monkeypatch):
    """Every ``F.linear`` and ``@`` call while the test runs, as ``(a, b, result)`` with
    ``result == a @ b`` (``F.linear``'s weight is given transposed, its bias left out)."""
    calls = []
    linear, matmul = F.linear, torch.Tensor.__matmul__

    def record_linear(x, w, b=None):
        out = linear(x, w)
        calls.append((x.detach(), w.detach().T, out.detach()))
        return out if b is None else out + b

    def record_matmul(a, b):
        out = matmul(a, b)
        calls.append((a.detach(), b.detach(), out.detach()))
        return out

    monkeypatch.setattr(F, "linear", record_linear)
    monkeypatch.setattr(torch.Tensor, "__matmul__", record_matmul)
    return calls


def assert_gemm(call, a, b):
    """The recorded GEMM ``call`` multiplied exactly ``a`` by ``b``; returns its result."""
    got_a, got_b, out = call
    assert torch.equal(got_a, a) and torch.equal(got_b, b)
    return out


@pytest.mark.parametrize("fmt", ["hif4", "mxfp4", "nvfp4"])
def test_training_gemms_quantize_every_operand(fmt, gemms):
    torch.manual_seed(0)
    lin = nn.Linear(96, 40)
    layer = QuantLinear(lin, train=Precision.uniform(fmt))
    x = torch.randn(3, 7, 96, requires_grad=True)
    g = torch.randn(3, 7, 40)
    y = layer(x)
    y.backward(g)
    x2, g2, w = x.detach().reshape(21, 96), g.reshape(21, 40), lin.weight.detach()
    assert len(gemms) == 3                       # forward, then dL/dx and dL/dW
    y2 = assert_gemm(gemms[0], fq(x2, fmt, 1), fq(w, fmt, 1).T)
    assert torch.equal(y.detach().reshape(21, 40), y2 + lin.bias.detach())
    gx = assert_gemm(gemms[1], fq(g2, fmt, 1), fq(w, fmt, 0))
    assert torch.equal(x.grad.reshape(21, 96), gx)
    gw = assert_gemm(gemms[2], fq(g2, fmt, 0).T, fq(x2, fmt, 0))
    assert torch.equal(lin.weight.grad, gw)
    assert torch.equal(lin.bias.grad, g.sum((0, 1)))


@pytest.mark.parametrize("mode", ["2:4", "dense", "channel50", "block32x64"])
def test_rollout_uses_resq_only_in_rollout_mode(mode, gemms):
    torch.manual_seed(1)
    lin = nn.Linear(128, 24, bias=False)
    layer = QuantLinear(lin, train=Precision.uniform("hif4"),
                        rollout=Precision(weight="hif4", act="hif4", resq=mode))
    x = torch.randn(2, 40, 128) * torch.exp2(torch.randint(-6, 6, (2, 40, 128)).float())
    wt = fq(lin.weight, "hif4", 1).T
    set_mode(layer, "rollout")
    corrected = torch.from_numpy(golden_resq(x.numpy(), "hif4", mode).corrected())
    y = layer(x)
    assert torch.equal(y, assert_gemm(gemms[-1], corrected, wt))
    set_mode(layer, "train")
    with torch.no_grad():
        y = layer(x)
    y2 = assert_gemm(gemms[-1], fq(x.reshape(80, 128), "hif4", 1), wt)
    assert torch.equal(y, y2.reshape(2, 40, 24)) and len(gemms) == 2


def test_rollout_weight_cache_follows_updates(gemms):
    lin = nn.Linear(64, 8, bias=False)
    layer = set_mode(QuantLinear(lin, rollout=Precision(weight="mxfp4")), "rollout")
    x = torch.randn(4, 64)
    layer(x)
    with torch.no_grad():
        lin.weight.mul_(3.0)
    y = layer(x)
    assert torch.equal(y, assert_gemm(gemms[-1], x, fq(lin.weight, "mxfp4", 1).T))


def _tiny_qwen2():
    config = transformers.Qwen2Config(
        vocab_size=96, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64)
    torch.manual_seed(2)
    return transformers.Qwen2ForCausalLM(config).eval()


def test_convert_tiny_qwen2_causal_lm(gemms):
    model = _tiny_qwen2()
    ids = torch.randint(0, 96, (2, 12))
    with torch.no_grad():
        reference = model(ids).logits
    names = convert_linears(model, train=Precision.uniform("nvfp4"),
                            rollout=Precision(weight="hif4", act="hif4", resq="2:4"))
    assert len(names) == 2 * 7 + 1 and "lm_head" in names
    assert not any(type(m) is nn.Linear for m in model.modules())
    # unquantized precisions give back the original model exactly
    set_mode(model, "train", train=Precision())
    with torch.no_grad():
        assert torch.equal(model(ids).logits, reference)
    # rollout: the q_proj GEMM sees golden ResQ-corrected activations and HiF4 weights
    set_mode(model, "rollout")
    set_collect_stats(model, True)
    q_proj = model.model.layers[0].self_attn.q_proj
    seen = {}
    hook = q_proj.register_forward_hook(lambda m, inp, out: seen.update(x=inp[0], y=out))
    with torch.no_grad():
        logits = model(ids).logits
    hook.remove()
    assert torch.isfinite(logits).all() and not torch.equal(logits, reference)
    corrected = torch.from_numpy(golden_resq(seen["x"].numpy(), "hif4", "2:4").corrected())
    wt = fq(q_proj.weight, "hif4", 1).T
    (call,) = [c for c in gemms if c[1].shape == wt.shape and torch.equal(c[1], wt)]
    assert torch.equal(seen["y"], assert_gemm(call, corrected, wt) + q_proj.bias)
    stats = gather_stats(model)
    assert set(stats) == {"attn.qkv", "attn.out", "mlp.up", "mlp.down", "lm_head"}
    assert all(s["nonzero"] > 0 for s in stats.values())
    # training in NVFP4: gradients reach every parameter
    set_mode(model, "train", train=Precision.uniform("nvfp4"))
    loss = model(ids, labels=ids).loss
    loss.backward()
    assert all(p.grad is not None and torch.isfinite(p.grad).all()
               for p in model.parameters() if p.requires_grad)


def test_precision_validation():
    with pytest.raises(ValueError, match="format must be one of"):
        Precision(weight="fp4")
    with pytest.raises(ValueError, match="set act too"):
        Precision(weight="hif4", resq="2:4")
    with pytest.raises(ValueError, match="ResQ mode must be one of"):
        Precision(act="hif4", resq="1:2")
    assert Precision.uniform("hif4") == Precision("hif4", "hif4", "hif4")


def test_default_gemm_is_scoped():
    """``default_gemm`` sets the GEMM of layers made inside its block and restores the
    previous default when the block ends, also by an exception; layers keep their own."""
    lin = nn.Linear(64, 2)
    assert QuantLinear(lin).gemm == "fake"
    with default_gemm("trunc"):
        inside = QuantLinear(lin)
        with pytest.raises(RuntimeError), default_gemm("bit-true"):
            assert QuantLinear(lin).gemm == "bit-true"
            raise RuntimeError
        assert QuantLinear(lin).gemm == "trunc"
    assert inside.gemm == "trunc" and QuantLinear(lin).gemm == "fake"
    with pytest.raises(ValueError, match="gemm must be one of"), default_gemm("exact"):
        pass
    assert QuantLinear(lin).gemm == "fake"
