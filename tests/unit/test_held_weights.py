"""One minibatch's micro-batches share one cast of the fused weights (`fused_llama.HeldWeights`,
`FusedBackend.minibatch`) and the update gives the same bits as casting per micro-batch: every
parameter's gradient and every weight after the optimizer step, in float32 and in bfloat16, for a
tied and an untied LM head, with biases (Qwen2) and shared prompts."""

import pytest
import torch

from rlvr.models import backends, fused_llama
from rlvr.testing import zoo
from rlvr.training import forward
from rlvr.models.batch import Batch
from rlvr.training.update import Compute, UpdateSpec, update_policy

torch.set_num_threads(1)


def _model(kind: str):
    if kind == "tied_llama":                    # SmolLM2's layout: grouped-query, tied head
        from transformers import LlamaConfig, LlamaForCausalLM

        torch.manual_seed(1)
        return LlamaForCausalLM(LlamaConfig(
            vocab_size=64, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
            num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64,
            tie_word_embeddings=True)).eval()
    model, _ = zoo.build(kind, seed=2)          # untied heads; Qwen2 with q/k/v biases
    return model


def _batch(vocab: int) -> Batch:
    g = torch.Generator().manual_seed(7)
    rows, tp, tc = 12, 6, 9
    prompts = torch.randint(1, vocab, (3, tp), generator=g)
    p_ids = prompts[torch.arange(rows) % 3]            # three groups of four rows
    p_mask = torch.ones(rows, tp, dtype=torch.long)
    p_mask[0::3, :2] = 0                               # one group left-padded
    c_ids = torch.randint(1, vocab, (rows, tc), generator=g)
    c_mask = torch.ones(rows, tc, dtype=torch.long)
    for r in range(rows):
        c_mask[r, 3 + r % 6:] = 0
    adv = torch.randn(rows, generator=g)
    return Batch(p_ids, p_mask, c_ids * c_mask, c_mask, adv, torch.zeros(rows, tc))


def _update(model, batch, autocast: bool, held: bool, monkeypatch):
    if not held:
        monkeypatch.setattr(forward, "minibatch", lambda fwd, parts: forward.contextlib.nullcontext())
    grads = {}

    class Record(torch.optim.AdamW):
        def step(self, closure=None):
            grads.update({n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None})
            return super().step(closure)

    opt = Record(model.parameters(), lr=1e-2)
    # 40 padded tokens per micro-batch: the 12 rows of 15 columns split into several parts
    update_policy(model, opt, batch, UpdateSpec(temperature=1.0), autocast=autocast,
                  compute=Compute(micro_batch_tokens=40))
    monkeypatch.undo()
    return grads, {n: p.detach().clone() for n, p in model.named_parameters()}


@pytest.mark.parametrize("kind", ["tied_llama", "llama", "qwen2"])
@pytest.mark.parametrize("autocast", [False, True])
def test_held_weights_give_the_same_gradients_and_weights(kind, autocast, monkeypatch):
    monkeypatch.setattr(fused_llama, "SHARED_PROMPT_MIN_TOKENS", 0)
    base = _model(kind)
    assert backends.backend_name(base) == "fused"
    batch = _batch(base.config.vocab_size)
    state = {k: v.clone() for k, v in base.state_dict().items()}
    calls = []
    real_minibatch = backends.FusedBackend.minibatch

    def counted(self):
        calls.append(1)
        return real_minibatch(self)

    monkeypatch.setattr(backends.FusedBackend, "minibatch", counted)
    g_held, w_held = _update(base, batch, autocast, held=True, monkeypatch=monkeypatch)
    assert calls, "the update never held its weights: the test would compare a path with itself"
    base.load_state_dict(state)
    monkeypatch.setattr(fused_llama, "SHARED_PROMPT_MIN_TOKENS", 0)
    g_plain, w_plain = _update(base, batch, autocast, held=False, monkeypatch=monkeypatch)
    assert g_held.keys() == g_plain.keys() and len(g_held) == len(list(base.parameters()))
    for name in g_plain:
        assert torch.equal(g_held[name], g_plain[name]), name
        assert torch.equal(w_held[name], w_plain[name]), name
    assert any(not torch.equal(w_plain[n], state[n]) for n in w_plain), "the step changed nothing"


def test_held_weights_cover_tied_and_untied_heads():
    """The parametrisation above sees both kinds of head (else one branch goes untested)."""
    models = [_model(k) for k in ("tied_llama", "llama", "qwen2")]
    tied = [m.lm_head.weight is m.model.embed_tokens.weight for m in models]
    assert True in tied and False in tied, tied
