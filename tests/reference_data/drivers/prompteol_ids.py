"""Run kongds/scaling_sentemb's own prompt construction (evaluation.py's batcher; ft_llm.py's
generate_sentemb_prompt and train()'s tokenize) on saved tokenizers; print JSON of the token ids.
The functions are taken from the official files by name (ast) and executed unchanged."""
import ast
import hashlib
import json
import sys
import types

import torch
import transformers

SENTENCES = ["A man is playing a guitar.", "Two dogs run, don't they?", 'She said "hi" twice',
             "the dog runs fast", "music, food and trees", "A jockey rides a horse."]
TEMPLATE = 'This_sentence_:_"*sent_0*"_means_in_one_word:"'  # README's / train_llm.sh TEMPLATE


def function(path, name, parent=None):
    tree = ast.parse(open(path).read())
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef) and node.name == name:
            return ast.get_source_segment(open(path).read(), node)
    raise KeyError(name)


def load(tok_dir):
    """The project's test tokenizer rebuilt from its vocab.json/merges.txt (tokenizers 0.19 cannot read
    tokenizers 0.22's tokenizer.json), with the same pre-tokenizer, decoder and <s> post-processor."""
    from tokenizers import ByteLevelBPETokenizer, SentencePieceBPETokenizer, processors
    if "byte_level" in tok_dir:
        wrapper = ByteLevelBPETokenizer.from_file(f"{tok_dir}/vocab.json", f"{tok_dir}/merges.txt", add_prefix_space=False)
    else:
        wrapper = SentencePieceBPETokenizer.from_file(f"{tok_dir}/vocab.json", f"{tok_dir}/merges.txt", unk_token="<unk>")
    tok = wrapper._tokenizer
    bos = tok.token_to_id("<s>")
    tok.post_processor = processors.TemplateProcessing(single="<s> $A", pair="<s> $A <s> $B", special_tokens=[("<s>", bos)])
    return transformers.PreTrainedTokenizerFast(tokenizer_object=tok, bos_token="<s>", eos_token="</s>", unk_token="<unk>")


def run(tok_dir, cutoff_len):
    tokenizer = load(tok_dir)
    tokenizer.pad_token_id = 0  # evaluation.py l.143-144
    tokenizer.padding_side = "left"
    captured = {}

    class Model:
        def __call__(self, output_hidden_states, return_dict, **batch):
            captured.update(batch)
            return types.SimpleNamespace(hidden_states=[torch.zeros(batch["input_ids"].shape + (1,))])

    args = types.SimpleNamespace(mask_embedding_sentence=True, mask_embedding_sentence_template=TEMPLATE, avg=False)
    scope = {"torch": torch, "tokenizer": tokenizer, "args": args, "model": Model(), "device": "cpu"}
    exec(function("evaluation.py", "batcher"), scope)
    scope["batcher"](None, [s.split(" ") for s in SENTENCES])
    evaluation = []
    for ids, mask in zip(captured["input_ids"].tolist(), captured["attention_mask"].tolist(), strict=True):
        evaluation.append([i for i, m in zip(ids, mask, strict=True) if m])  # the left padding dropped
    # training: ft_llm.py generate_sentemb_prompt + train()'s tokenize(full_prompt, False)
    src = function("ft_llm.py", "tokenize")
    scope2 = {"tokenizer": tokenizer, "cutoff_len": cutoff_len}
    exec(function("ft_llm.py", "generate_sentemb_prompt"), scope2)
    exec(src, scope2)
    training = []
    for s in SENTENCES:
        prompt = scope2["generate_sentemb_prompt"]({"input": s}, tokenizer, cutoff_len, TEMPLATE, prefix="input")
        training.append(scope2["tokenize"](prompt, False)["input_ids"])
    vocab = hashlib.sha256(json.dumps(sorted(tokenizer.get_vocab().items())).encode()).hexdigest()
    return {"vocab_sha256": vocab, "evaluation_ids": evaluation, "training_ids": training}


if __name__ == "__main__":
    out = {"sentences": SENTENCES, "template": TEMPLATE, "cutoff_len": int(sys.argv[3]),
           "transformers": transformers.__version__}
    for kind, path in zip(("byte_level_bpe", "sentencepiece"), sys.argv[1:3], strict=True):
        out[kind] = run(path, int(sys.argv[3]))
    print(json.dumps(out))
