"""ESimCSE: the official word-repetition rules, the two views as the official ``prepare_features`` builds them,
a queue that starts empty and holds the last ``neg_size`` momentum keys (checked against a hand-kept list over
three steps), keys passed to the loss as extra negatives, and a momentum encoder that gets no gradient."""

from __future__ import annotations

import functools
import random

import torch
import torch.nn.functional as F

from cl_bench.augment.word_repetition import WordRepetition, repeat_tokens, repeat_words
from cl_bench.config import yaml_spec
from cl_bench.losses.infonce import info_nce
from cl_bench.methods.base import MethodContext
from cl_bench.methods.esimcse.modeling import ESimCSE
from cl_bench.models.encoder import build_encoder

SENTENCES = ["a man plays the guitar in the park", "the dog runs in the street", "two children read a book",
             "a woman eats food at the table", "the cat sits on the chair", "people walk in the park"]


def test_word_rule_repeats_words_in_place_never_the_last() -> None:
    words = "a b c d e f g h i j k l m n o p".split()
    seen_counts = set()
    for seed in range(200):
        out = repeat_words(" ".join(words), 0.32, random.Random(seed)).split(" ")
        # reading left to right, every original word appears once or twice in a row
        i, repeated = 0, []
        for word in words:
            assert out[i] == word
            if i + 1 < len(out) and out[i + 1] == word:
                repeated.append(word)
                i += 1
            i += 1
        assert i == len(out) and "p" not in repeated
        seen_counts.add(len(repeated))
    assert seen_counts == set(range(5))  # randrange(min(10, 16, max(2, int(0.32 * 16)))) = randrange(5)
    assert repeat_words("hello", 0.32, random.Random(0)) == "hello"  # one word: randrange(1) = 0


def test_bpe_rule_doubles_tokens_never_cls_or_sep() -> None:
    ids = [101, *range(1000, 1020), 102]  # [CLS] 20 tokens [SEP]: L = 22, int(0.32 * 22) = 7
    counts = set()
    for seed in range(300):
        out = repeat_tokens(ids, 0.32, random.Random(seed))
        assert out[0] == 101 and out[1] != 101 and out[-1] == 102 and out[-2] != 102
        assert sorted(set(out)) == sorted(set(ids))
        counts.add(len(out) - len(ids))
        assert all(out.count(t) in (1, 2) for t in ids)
    assert counts == set(range(7))  # randrange(min(10, 7))
    assert repeat_tokens([101, 7, 102], 0.32, random.Random(0)) == [101, 7, 102]  # int(0.96) = 0: unchanged


def _method(tiny_bert, neg_size: int = 6, momentum: float = 0.9, dup_type: str = "bpe",
            momentum_start: str = "pretrained") -> ESimCSE:
    encoder = build_encoder(str(tiny_bert), pooler="cls", dropout=0.1, mlp_only_train=True, max_length=16)
    augmentation = WordRepetition(yaml_spec("augmentation", "word_repetition", dup_rate=0.32, dup_type=dup_type))
    augmentation.setup(encoder, str(tiny_bert))
    context = MethodContext(encoder=encoder, loss=functools.partial(info_nce, tau=0.05, hard_negative_alpha=1.0), augmentation=augmentation,
                            model_name_or_path=str(tiny_bert), seed=3)
    return ESimCSE(context, yaml_spec("method", "esimcse", momentum=momentum, neg_size=neg_size,
                                          momentum_start=momentum_start))


def test_views_are_the_sentence_and_its_token_repetition(tiny_bert) -> None:
    method = _method(tiny_bert)
    views = method.prepare(SENTENCES, random.Random(5))
    tokenizer = method.encoder.tokenizer
    plain = tokenizer(SENTENCES, truncation=True, max_length=16)["input_ids"]
    expected = plain + method.augmentation.repeat_token_ids(plain, random.Random(5))
    assert views.size == len(SENTENCES)
    for row, want in zip(views.features["input_ids"].tolist(), expected, strict=True):
        assert row[: len(want)] == want and set(row[len(want):]) <= {tokenizer.pad_token_id}
    mask = views.features["attention_mask"]
    assert mask.sum(1).tolist() == [len(r) for r in expected]
    assert any(len(expected[i + 6]) > len(expected[i]) for i in range(6))  # something was repeated


def test_queue_holds_the_last_keys_and_feeds_the_loss(tiny_bert) -> None:
    torch.manual_seed(0)
    method = _method(tiny_bert, neg_size=6)
    method.train()
    seen: list[torch.Tensor | None] = []
    loss_fn = method.loss_fn

    def spy(z1, z2, hard_negatives=None, **kw):
        seen.append(None if hard_negatives is None else hard_negatives.detach().clone())
        return loss_fn(z1, z2, hard_negatives, **kw)

    method.loss_fn = spy
    optimizer = torch.optim.SGD([p for p in method.parameters() if p.requires_grad], lr=0.1)
    hand: list[torch.Tensor] = []
    for step in range(3):
        batch = SENTENCES[step:step + 4]
        terms = method.training_step(batch)
        optimizer.zero_grad()
        terms["loss"].backward()
        assert all(p.grad is None for p in method.key_backbone.parameters())  # momentum encoder: no gradient
        assert all(not p.requires_grad for p in method.key_backbone.parameters())
        optimizer.step()
        hand.extend(F.normalize(method.pending_keys, dim=1))  # what this step's momentum encoder produced
        method.on_after_step()
    assert seen[0] is None  # the queue starts empty: the first step has in-batch negatives only
    torch.testing.assert_close(seen[1], torch.stack(hand[:4]))
    torch.testing.assert_close(seen[2], torch.stack(hand[:8][-6:]))  # 8 keys so far, the last 6 kept
    torch.testing.assert_close(method.queued_keys(), torch.stack(hand[-6:]))  # after the third step


def test_momentum_update_and_keys_without_dropout(tiny_bert) -> None:
    torch.manual_seed(0)
    method = _method(tiny_bert, momentum=0.9)
    method.train()
    assert not method.key_backbone.training and method.encoder.training
    features = method.to_device(method.encoder.tokenize(SENTENCES))
    torch.testing.assert_close(method.momentum_keys(features), method.momentum_keys(features))  # dropout off
    before = [p.detach().clone() for p in method.key_backbone.parameters()]
    with torch.no_grad():
        for p in method.encoder.backbone.parameters():
            p.add_(0.5)
    method.on_after_step()
    for old, new, online in zip(before, method.key_backbone.parameters(), method.encoder.backbone.parameters(), strict=True):
        torch.testing.assert_close(new, 0.9 * old + 0.1 * online.detach())


def test_no_queue_is_simcse_with_repetition(tiny_bert) -> None:
    method = _method(tiny_bert, neg_size=0)
    assert method.key_backbone is None and not hasattr(method, "queue")
    terms = method.training_step(SENTENCES)
    assert torch.isfinite(terms["loss"])


def test_random_momentum_start_is_redrawn_then_moved_once(tiny_bert) -> None:
    """method.momentum_start=random: the official run's momentum encoder, re-drawn by BERT's own initialisation
    (normal(0, 0.02) weights, zero biases, unit LayerNorms), then moved once toward the backbone, as the
    official cl_forward does before its first keys."""
    torch.manual_seed(0)
    method = _method(tiny_bert, momentum=0.9, momentum_start="random")
    online = dict(method.encoder.backbone.named_parameters())
    for name, param in method.key_backbone.named_parameters():
        drawn = (param - 0.1 * online[name].detach()) / 0.9  # undo the one update
        if name.endswith("LayerNorm.weight"):
            torch.testing.assert_close(drawn, torch.ones_like(drawn))
        elif name.endswith("bias"):
            torch.testing.assert_close(drawn, torch.zeros_like(drawn))
        else:
            assert abs(drawn.std().item() - 0.02) < 0.006 and not torch.allclose(param, online[name]), name
    assert _method(tiny_bert).key_backbone.state_dict().keys() == method.key_backbone.state_dict().keys()


def test_momentum_start_is_checked() -> None:
    import pytest

    with pytest.raises(ValueError, match=r"^method.momentum_start: Invalid value 'warm', expected one of \[pretrained, random\]$"):
        yaml_spec("method", "esimcse", momentum_start="warm")


def test_fp16_cuda_precision_is_fp16_on_cuda_only() -> None:
    """train.precision=fp16_cuda (the official --fp16 runs' presets): fp16 on CUDA, fp32 on a CPU."""
    from cl_bench.train.precision import autocast_dtype

    assert autocast_dtype("fp16_cuda", torch.device("cpu")) is None
    assert autocast_dtype("fp16_cuda", torch.device("cuda")) is torch.float16
