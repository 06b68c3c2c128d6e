"""The example script end to end (small sizes), TP1 and TP4 head splits, bf16 and fp8 caches."""

import contextlib
import io

import pytest
import torch

import minimax_m3_attention_layer as ex


@pytest.mark.parametrize("tp,kv", [(4, "bf16"), (1, "fp8")])
def test_example_main(device, tp, kv):
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        y = ex.main(["--device", str(device), "--tp", str(tp), "--kv-dtype", kv, "--hidden", "256",
                     "--prefill-len", "260", "--mtp", "3", "--steps", "2", "--batch", "2"])
    assert y.shape == (6, 256) and torch.isfinite(y.float()).all()
    assert "prefill:" in buf.getvalue() and "decode step 1" in buf.getvalue()
