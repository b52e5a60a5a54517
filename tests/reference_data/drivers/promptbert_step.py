"""kongds/Prompt-BERT's own code for run.sh "unsup-bert": train.py's ModelArguments (defaults + unsup-bert's args),
its template parsing (main(), the `if model_args.mask_embedding_sentence:` blocks at l.617 and l.778),
prepare_features (l.646), prompt_bert/models.py BertForCL (cl_forward with the delta, sentemb_forward), all taken
from the files by name/line with ast and run unchanged, on all-MiniLM-L6-v2 in float64 without dropout, the MLP set
to fixed values. Prints JSON: one training step's loss and gradients, and the trainer's dev embedding."""
import ast
import json
import sys
import textwrap
import types
from dataclasses import dataclass, field
from typing import Optional, Union

import torch
import transformers
from transformers import AutoTokenizer, BertConfig, BertModel

sys.path.insert(0, ".")
from prompt_bert.models import BertForCL

MODEL = sys.argv[1]
SENTENCES = ["A man is playing a guitar", "hi", "Two dogs run in the park, don't they?"]
DEV_SENTENCES = ["A man is playing a guitar", "hi there", "The cat sits on the mat."]
source = open("train.py").read()
tree = ast.parse(source)


def segment(node):
    return textwrap.dedent(ast.get_source_segment(source, node))


main = next(n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "main")
model_arguments = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "ModelArguments")
scope = {"dataclass": dataclass, "field": field, "Optional": Optional, "Union": Union, "List": list,
         "MODEL_TYPES": (), "MODEL_CONFIG_CLASSES": []}
exec("@dataclass\n" + segment(model_arguments), scope)
model_args = scope["ModelArguments"](
    model_name_or_path="bert-base-uncased", temp=0.5, mlp_only_train=True,  # temp: 0.05 in run.sh; 0.5 keeps the loss and gradients away from 0
    mask_embedding_sentence=True,
    mask_embedding_sentence_template='*cls*_This_sentence_of_"*sent_0*"_means*mask*.*sep+*',
    mask_embedding_sentence_different_template='*cls*_This_sentence_:_"*sent_0*"_means*mask*.*sep+*',
    mask_embedding_sentence_delta=True)
data_args = types.SimpleNamespace(max_seq_length=32)
tokenizer = AutoTokenizer.from_pretrained(MODEL)
blocks = [n for n in main.body if isinstance(n, ast.If) and ast.get_source_segment(source, n.test) == "model_args.mask_embedding_sentence"]
assert [b.lineno for b in blocks] == [617, 778], [b.lineno for b in blocks]
prepare = next(n for n in main.body if isinstance(n, ast.FunctionDef) and n.name == "prepare_features")

config = BertConfig.from_pretrained(MODEL, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
model = BertForCL(config, model_args=model_args)
missing, unexpected = model.bert.load_state_dict(BertModel.from_pretrained(MODEL, config=config).state_dict(), strict=False)
assert not unexpected and not [k for k in missing if "position_ids" not in k], (missing, unexpected)
model = model.double()
generator = torch.Generator().manual_seed(0)  # the MLP: fixed float64 values, set the same in cl-bench's test
hidden = config.hidden_size
with torch.no_grad():
    model.mlp.dense.weight.copy_(torch.randn(hidden, hidden, generator=generator, dtype=torch.float64) * 0.02)
    model.mlp.dense.bias.copy_(torch.randn(hidden, generator=generator, dtype=torch.float64) * 0.02)

run = {"model_args": model_args, "tokenizer": tokenizer, "model": model, "data_args": data_args,
       "sent0_cname": "text", "sent1_cname": "text", "sent2_cname": None, "torch": torch}
exec(segment(blocks[0]), run)
exec(segment(blocks[1]), run)
exec(segment(prepare), run)
features = run["prepare_features"]({"text": list(SENTENCES)})
batch = {k: torch.tensor(v) for k, v in features.items()}  # (bs, 2, len): every row already padded to the longest
model.train()
out = model(**batch)
out.loss.backward()
named = dict(model.named_parameters())
grads = {n: (p.grad if p.grad is not None else torch.zeros_like(p)) for n, p in named.items()}
result = {"transformers": transformers.__version__, "torch": torch.__version__, "sentences": SENTENCES,
          "input_ids": batch["input_ids"].tolist(), "loss": out.loss.item(),
          "grad_sum": {n: g.sum().item() for n, g in grads.items()},
          "grad_sq": {n: g.square().sum().item() for n, g in grads.items()},
          "grad_full": {"mlp.dense.weight": grads["mlp.dense.weight"].tolist()}}
# the trainer's dev embedding: prompt_bert/trainers.py evaluate()'s batcher -> sentemb_forward
model.eval()
dev = tokenizer.batch_encode_plus(DEV_SENTENCES, return_tensors="pt", padding=True)
with torch.no_grad():
    result["dev_sentences"] = DEV_SENTENCES
    result["dev_embedding"] = model(**dev, output_hidden_states=True, return_dict=True, sent_emb=True).pooler_output.tolist()
print(json.dumps(result))
