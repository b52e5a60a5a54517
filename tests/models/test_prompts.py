"""Prompts (model.prompt, view prompts, include_prompt), the [MASK] and prompt_last poolers, PromptBERT's
template denoising, SNCSE's inputs, loss and negation — checked by hand on the real uncased BERT tokenizer
of all-MiniLM-L6-v2 (../shared/models) and against explicit float64 loops."""

from __future__ import annotations

import functools
import json
import random
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
from conftest import minilm_path

from cl_bench.augment.negation import Negation, negate
from cl_bench.config import yaml_spec
from cl_bench.losses.sncse import sncse_loss
from cl_bench.losses.specs import SNCSESpec
from cl_bench.methods.base import MethodContext, tokenize_groups
from cl_bench.models.encoder import build_encoder
from cl_bench.models.poolers import last_token_index
from cl_bench.models.prompts import (
    PromptLayout,
    prompt_pool_mask,
    prompt_token_index,
    template_mask_states,
    tokenize_with_prompts,
    with_period,
)

MINILM = minilm_path()  # fails (never skips) with the way to point at it when ../shared is missing
TEMPLATE = 'This sentence of "[X]" means [MASK].'


@pytest.fixture(scope="module")
def tokenizer():
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(str(MINILM))


@pytest.fixture(scope="module")
def minilm():
    torch.manual_seed(0)
    return build_encoder(str(MINILM), pooler="mask", dropout=0.0, prompt=TEMPLATE)


# ----- token ids and positions ---------------------------------------------------------------------
def test_template_ids_and_mask_position_by_hand(tokenizer) -> None:
    layout = PromptLayout.build(tokenizer, TEMPLATE)
    features = tokenize_with_prompts(tokenizer, ["A man plays guitar", "hi"], [layout, layout], 32)
    tokens = tokenizer.convert_ids_to_tokens(features["input_ids"][0])
    assert tokens == ["[CLS]", "this", "sentence", "of", '"', "a", "man", "plays", "guitar", '"', "means", "[MASK]",
                      ".", "[SEP]"]
    assert tokenizer.convert_ids_to_tokens(features["input_ids"][1]) == [
        "[CLS]", "this", "sentence", "of", '"', "hi", '"', "means", "[MASK]", ".", "[SEP]", "[PAD]", "[PAD]", "[PAD]"]
    # [MASK] is token 11 of row 0 and 8 of row 1; the last prompt token (before [SEP]) 12 and 9
    mask = features["attention_mask"]
    assert prompt_token_index(mask, features["prompt_layout"], "mask").tolist() == [11, 8]
    assert prompt_token_index(mask, features["prompt_layout"], "prompt_last").tolist() == [12, 9]
    assert features["prompt_layout"].tolist() == [[5, 4, 4, 11, 12, 0], [5, 1, 4, 8, 9, 0]]
    assert layout.length == 10  # PromptBERT's template_len: [CLS] + 4 + 4 + [SEP]


def test_ids_equal_the_official_construction(tokenizer) -> None:
    """Prompt-BERT train.py builds bs+sentence+es from run.sh's template notation; evaluation.py tokenizes
    the filled-in string with a '.' appended. Both equal cl-bench's ids (the latter with prompt_period)."""
    from cl_bench.methods.promptbert.modeling import OFFICIAL_TEMPLATES

    ours = ('This sentence of "[X]" means [MASK].', 'This sentence : "[X]" means [MASK].')
    sentences = ["A man is playing a guitar", "Two dogs run, don't they?", "it's 3.5 km away"]
    for official, template in zip(OFFICIAL_TEMPLATES, ours, strict=True):
        # train.py l.617-629 and l.676-683 (read, reimplemented here as the reference)
        text = official.replace("*mask*", tokenizer.mask_token).replace("*sep+*", "").replace("*cls*", "")
        bs, es = (part.replace("_", " ") for part in text.replace("*sent_0*", " ").split(" "))
        bs_ids, es_ids = tokenizer.encode(bs)[:-1], tokenizer.encode(es)[1:]
        layout = PromptLayout.build(tokenizer, template)
        got = tokenize_with_prompts(tokenizer, sentences, [layout] * 3, 32, pad=False)["input_ids"]
        for sentence, ids in zip(sentences, got, strict=True):
            assert ids == bs_ids + tokenizer.encode(sentence, add_special_tokens=False)[:32] + es_ids
        # evaluation.py l.195-205: the string template with *sent 0* replaced, '.' appended
        filled = official.replace("*mask*", tokenizer.mask_token).replace("_", " ").replace("*sep+*", "").replace("*cls*", "")
        for sentence in sentences:
            expected = tokenizer(filled.replace("*sent 0*", with_period(sentence, "promptbert", False)).strip())["input_ids"]
            mine = tokenize_with_prompts(tokenizer, [with_period(sentence, "promptbert", False)], [layout], 512, pad=False)
            assert mine["input_ids"][0] == expected


def test_left_padding_tokenizer_gets_the_offsets(tokenizer) -> None:
    import copy

    left = copy.deepcopy(tokenizer)
    left.padding_side = "left"
    layout = PromptLayout.build(left, TEMPLATE)
    features = tokenize_with_prompts(left, ["A man plays guitar", "hi"], [layout, layout], 32)
    assert features["input_ids"][1, :3].tolist() == [0, 0, 0] and features["prompt_layout"][:, 5].tolist() == [0, 3]
    index = prompt_token_index(features["attention_mask"], features["prompt_layout"], "mask")
    assert [features["input_ids"][r, i].item() for r, i in enumerate(index)] == [left.mask_token_id] * 2


def test_period_rules() -> None:
    assert with_period("a dog", "promptbert", training=False) == "a dog."
    assert with_period("a dog", "promptbert", training=True) == "a dog"  # its training adds none
    assert with_period('he said "hi"', "promptbert", training=False) == 'he said "hi"'
    assert with_period("a dog;", "promptbert", training=False) == "a dog;."
    assert with_period("a dog", "sncse", training=True) == "a dog ."
    assert with_period("a dog;", "sncse", training=False) == "a dog;"  # any string.punctuation ends it
    assert with_period("a dog", "none", training=False) == "a dog"
    assert with_period('is it "ok"?', "prompteol", training=False) == "is it 'ok'."
    assert with_period("a dog", "prompteol", training=False) == "a dog."
    assert with_period("a dog", "prompteol", training=True) == "a dog"


def test_index_and_pool_mask_on_left_padded_rows() -> None:
    # row 0: 2 pads then [CLS] p p s s s q q [SEP]; row 1: no padding, [CLS] p p s q q [SEP] + 2 more sentence tokens
    mask = torch.tensor([[0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 1], [1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1]])
    layout = torch.tensor([[3, 3, 2, 6, 7, 2], [3, 6, 2, 9, 9, 0]])  # lead, n, suffix, mask rank, last rank, left pads
    assert prompt_token_index(mask, layout, "mask").tolist() == [8, 9]
    assert prompt_token_index(mask, layout, "prompt_last").tolist() == [9, 9]
    assert prompt_pool_mask(mask, layout).tolist() == [
        [0, 0, 0, 0, 0, 1, 1, 1, 0, 0, 1],  # the sentence and [SEP]
        [0, 0, 0, 1, 1, 1, 1, 1, 1, 0, 0],  # rank 9 and 10 are the suffix (no tail in this hand layout)
    ]
    # a token cutoff later zeroes attention inside the sentence: the pooled positions do not move
    cut = mask.clone()
    cut[:, 5] = 0
    assert prompt_token_index(cut, layout, "mask").tolist() == [8, 9]


def test_last_token_index_right_and_left_padding() -> None:
    right = torch.tensor([[1, 1, 1, 0], [1, 1, 1, 1], [1, 0, 0, 0]])
    left = torch.tensor([[0, 1, 1, 1], [1, 1, 1, 1], [0, 0, 0, 1]])
    assert last_token_index(right).tolist() == [2, 3, 0]
    assert last_token_index(left).tolist() == [3, 3, 3]
    assert last_token_index(right).dtype == torch.long


# ----- encoder: mask pooler, include_prompt, view prompts --------------------------------------------
def test_mask_pooler_reads_the_mask_state(minilm) -> None:
    sentences = ["A man plays guitar", "hi"]
    features = minilm.tokenize(sentences)
    minilm.eval()
    with torch.no_grad():
        hidden = minilm.backbone(input_ids=features["input_ids"], attention_mask=features["attention_mask"],
                                 token_type_ids=features["token_type_ids"]).last_hidden_state
        pooled = minilm(features)
    assert torch.allclose(pooled[0], hidden[0, 11]) and torch.allclose(pooled[1], hidden[1, 8])
    # evaluation encodes the same inputs (no period rule here): encode() equals the batch forward
    assert torch.allclose(torch.from_numpy(minilm.encode(sentences)), pooled, atol=1e-5)


def test_include_prompt_false_equals_sentence_transformers() -> None:
    """E5-style prefix + mean pooling without the prompt's tokens, as sentence-transformers computes it."""
    sentence_transformers = pytest.importorskip("sentence_transformers")
    sentences = ["A man is playing a guitar.", "A dog runs in the park", "hello"]
    model = sentence_transformers.SentenceTransformer(str(MINILM), device="cpu")
    model[1].include_prompt = False
    reference = model.encode(sentences, prompt="query: ", normalize_embeddings=False, convert_to_tensor=True)
    ours = build_encoder(str(MINILM), pooler="avg", prompt="query: ", include_prompt=False)
    # the model's sentence-transformers pipeline ends in Normalize: compare unit vectors
    assert torch.allclose(F.normalize(torch.from_numpy(ours.encode(sentences)), dim=1), reference.cpu(), atol=1e-5)
    model[1].include_prompt = True
    with_prompt = model.encode(sentences, prompt="query: ", normalize_embeddings=False, convert_to_tensor=True)
    ours.include_prompt = True
    assert torch.allclose(F.normalize(torch.from_numpy(ours.encode(sentences)), dim=1), with_prompt.cpu(), atol=1e-5)
    assert not torch.allclose(reference, with_prompt, atol=1e-3)


def test_view_prompts_wrap_each_group(tokenizer) -> None:
    encoder = build_encoder(str(MINILM), pooler="avg", view_prompts=["query: ", "passage: "])
    views = tokenize_groups(encoder, (["a dog"], ["a cat"], ["a cow"]))
    rows = [tokenizer.decode(ids, skip_special_tokens=True) for ids in views.features["input_ids"]]
    assert rows == ["query : a dog", "passage : a cat", "passage : a cow"]  # the last prompt repeats


# ----- PromptBERT's template denoising -------------------------------------------------------------
def test_template_denoising_by_hand(minilm, tokenizer) -> None:
    """The template alone, its suffix positions shifted by the sentence length k, read at [MASK]."""
    minilm.eval()
    layout = minilm.prompt_layout(TEMPLATE)
    ids = [101, *tokenizer.encode('this sentence of "', add_special_tokens=False),
           *tokenizer.encode('" means [MASK].', add_special_tokens=False), 102]
    assert ids == list(layout.assemble([])[0])
    assert ids.index(tokenizer.mask_token_id) == 7
    with torch.no_grad():
        delta = template_mask_states(minilm.backbone, layout, torch.tensor([4, 1]))
        for row, k in enumerate((4, 1)):
            positions = torch.tensor([[0, 1, 2, 3, 4, 5 + k, 6 + k, 7 + k, 8 + k, 9 + k]])
            state = minilm.backbone(input_ids=torch.tensor([ids]), position_ids=positions).last_hidden_state[0, 7]
            assert torch.allclose(delta[row], state, atol=1e-5)
        assert not torch.allclose(delta[0], delta[1])


def test_promptbert_subtracts_each_rows_template_state(tokenizer) -> None:
    from cl_bench.losses.infonce import info_nce
    from cl_bench.methods.promptbert.modeling import PromptBERT

    torch.manual_seed(0)
    encoder = build_encoder(str(MINILM), pooler="cls", dropout=0.0)
    method = PromptBERT(MethodContext(encoder=encoder, loss=info_nce, max_length=32), yaml_spec("method", "promptbert"))
    method.eval()
    sentences = ["A man plays guitar", "hi"]
    views = method.prepare(sentences, random.Random(0))
    features = views.features
    with torch.no_grad():
        states = method.mask_states(features)
        denoised = method.denoised(states, features["prompt_layout"], 2, 2)
        for row, (view, k) in enumerate([(0, 4), (0, 1), (1, 4), (1, 1)]):
            layout = encoder.prompt_layout(method.encoder.view_prompt(view))
            delta = template_mask_states(encoder.backbone, layout, torch.tensor([k]))[0]
            assert torch.allclose(denoised[row], states[row] - delta, atol=1e-5)
    first, second = (tokenizer.decode(ids, skip_special_tokens=False).split(" [PAD]")[0] for ids in features["input_ids"][1::2])
    assert first == '[CLS] this sentence of " hi " means [MASK]. [SEP]'
    assert second == '[CLS] this sentence : " hi " means [MASK]. [SEP]'
    assert method.encoder.pooler == "mask" and method.encoder.mlp is None


# ----- SNCSE --------------------------------------------------------------------------------------
def _sncse_loop(z1, z2, z3, tau, alpha, beta, weight) -> torch.Tensor:
    """The paper's formula with explicit loops in float64."""
    n = z1.shape[0]

    def cos(a, b):
        return (a @ b) / (a.norm() * b.norm())

    nce = 0.0
    for i in range(n):
        logits = torch.stack([cos(z1[i], z2[j]) / tau for j in range(n)])
        nce = nce - (logits[i] - torch.logsumexp(logits, 0))
    bml = 0.0
    for i in range(n):
        d = cos(z1[i], z3[i]) - cos(z1[i], z2[i])
        bml = bml + torch.relu(d + alpha) + torch.relu(-d - beta)
    return nce / n + weight * bml / n


@pytest.mark.parametrize("n", [2, 3, 8])
@pytest.mark.parametrize("weight", [1e-3, 1.0])
def test_sncse_loss_value_and_gradients_against_a_float64_loop(n: int, weight: float) -> None:
    torch.manual_seed(n)
    z = [torch.randn(n, 5, dtype=torch.float64, requires_grad=True) for _ in range(3)]
    ours = sncse_loss(*z, tau=0.05, alpha=0.1, beta=0.3, bml_weight=weight)
    grads = torch.autograd.grad(ours, z)
    reference = _sncse_loop(*z, 0.05, 0.1, 0.3, weight)
    expected = torch.autograd.grad(reference, z)
    assert torch.allclose(ours, reference, atol=1e-10)
    for got, want in zip(grads, expected, strict=True):
        assert torch.allclose(got, want, atol=1e-10)


def test_sncse_margin_edges() -> None:
    z1 = torch.tensor([[1.0, 0.0], [0.0, 1.0]], dtype=torch.float64)
    # identical views and the soft negative at cos 0.8 below: d = 0.8 - 1 = -0.2 lies in [-0.3, -0.1]: no BML
    inside = torch.tensor([[0.8, 0.6], [0.6, 0.8]], dtype=torch.float64)
    keys = {"tau": 0.05, "alpha": 0.1, "beta": 0.3}
    loss = sncse_loss(z1, z1, inside, bml_weight=1.0, **keys) - sncse_loss(z1, z1, inside, bml_weight=0.0, **keys)
    assert loss.abs().item() < 1e-12
    # the soft negative equals the anchor: d = 0, BML = relu(0.1) = 0.1 per row
    same = sncse_loss(z1, z1, z1, bml_weight=1.0, **keys) - sncse_loss(z1, z1, z1, bml_weight=0.0, **keys)
    assert abs(same.item() - 0.1) < 1e-12
    with pytest.raises(ValueError, match="loss.beta"):  # the spec's rule across its keys
        SNCSESpec(name="sncse", alpha=0.3, beta=0.1).check()


def test_negation_rules_by_hand() -> None:
    assert negate("A man is playing a guitar.") == "A man is not playing a guitar ."
    assert negate("She did not come") == "She did come"
    assert negate("They can swim") == "They can not swim"
    assert negate("The dog runs") == "Not The dog runs"  # no parser: the official would give "does not run"
    assert negate("We have been there") == "We have not been there"


def test_negation_file_and_fallback(tmp_path: Path) -> None:
    path = tmp_path / "neg.txt"
    path.write_text(json.dumps(["The dog runs .", "The dog does not run ."]) + "\n")
    negation = Negation(yaml_spec("augmentation", "negation", source="file", file=str(path)))
    assert negation.augment_text(["The dog runs .", "A cat"], random.Random(0)) == [
        "The dog does not run .", "Not A cat"]
    with pytest.raises(ValueError, match="^augmentation.file:"):
        yaml_spec("augmentation", "negation", source="file", file=str(tmp_path / "missing.txt"))


def test_sncse_inputs_as_train_sncse_builds_them(tokenizer) -> None:
    """train_SNCSE.py l.505-534: ' .' appended, each input cut to max_seq_length with its template."""
    from cl_bench.methods.sncse.modeling import SNCSE

    encoder = build_encoder(str(MINILM), pooler="cls", dropout=0.0, max_length=16)
    method = SNCSE(MethodContext(encoder=encoder, loss=functools.partial(sncse_loss, tau=0.05, alpha=0.1, beta=0.3, bml_weight=0.001), augmentation=Negation(yaml_spec("augmentation", "negation")), max_length=16),
                   yaml_spec("method", "sncse"))
    long = "one two three four five six seven eight nine ten"
    views = method.prepare(["A man is playing", long], random.Random(0))
    rows = [tokenizer.convert_ids_to_tokens([i for i in ids if i != 0]) for ids in views.features["input_ids"]]
    assert rows[0] == ["[CLS]", "this", "sentence", ":", '"', "a", "man", "is", "playing", ".", '"', "means", "[MASK]",
                       ".", "[SEP]"]
    assert rows[2] == ["[CLS]", "this", "sentence", "of", '"', "a", "man", "is", "playing", ".", '"', "means",
                       "[MASK]", ".", "[SEP]"]
    assert rows[4][5:10] == ["a", "man", "is", "not", "playing"]
    # the long sentence: 16 - 8 template tokens - 2 special = 6 of its tokens
    assert rows[1][5:11] == ["one", "two", "three", "four", "five", "six"] and len(rows[1]) == 16
    method.train()
    terms = method.training_step(["A man is playing", long])
    assert torch.isfinite(terms["loss"])


def test_promptbert_trainer_dev_embedding_is_denoised_without_period() -> None:
    """method.dev_embedding=trainer: the dev embedding Prompt-BERT's trainer selected on (its sentemb_forward with
    the training arguments: the template's own [MASK] state subtracted, no "." appended); the test embedding
    keeps evaluation.py's protocol (raw state, "." appended)."""
    from cl_bench.losses.infonce import info_nce
    from cl_bench.methods.promptbert.modeling import PromptBERT

    torch.manual_seed(0)
    encoder = build_encoder(str(MINILM), pooler="cls", dropout=0.0)
    method = PromptBERT(MethodContext(encoder=encoder, loss=info_nce, max_length=32),
                        yaml_spec("method", "promptbert", dev_embedding="trainer"))
    method.eval()
    sentences = ["A man plays guitar", "hi there"]
    selection, test = method.selection_encoder(), method.eval_encoder()
    assert selection.backbone is test.backbone and test.prompt_period == "promptbert"
    with torch.no_grad():
        got = torch.as_tensor(selection.encode(sentences, batch_size=2))
        features = {k: v for k, v in test.tokenize(sentences, max_length=None).items()}  # no period: training rule
        states = method.mask_states(features)
        lengths = features["prompt_layout"][:, 1]
        delta = template_mask_states(test.backbone, test.prompt_layout(test.prompt), lengths)
        torch.testing.assert_close(got, states - delta, atol=1e-5, rtol=0)
        tested = torch.as_tensor(test.encode(sentences, batch_size=2))
        assert not torch.allclose(tested, got, atol=1e-3)
    default = PromptBERT(MethodContext(encoder=build_encoder(str(MINILM), pooler="cls"), loss=info_nce, max_length=32),
                         yaml_spec("method", "promptbert"))
    assert default.selection_encoder().prompt_period == "promptbert"
