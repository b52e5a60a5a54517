"""caskcsg/sentemb ESimCSE's own BertForCL (esimcse/models.py: cl_init, cl_forward with the momentum update
and the queue term) driven by its own CLTrainer.compute_loss (esimcse/trainers.py, taken by name with ast and
run unchanged on a stand-in trainer), for 3 SGD steps in float64 on a tiny BERT; prints JSON of each step's
loss, gradients (per tensor: sum and sum of squares; the MLP weight in full) and the queue (pre_z1, normalised)."""
import ast
import json
import sys
import types

import torch
import torch.nn.functional as F
import transformers
from safetensors.torch import load_file
from transformers import BertConfig

sys.path.insert(0, ".")
import models  # the official esimcse/models.py (transformers.file_utils etc. exist in 4.44.2)

start = load_file(sys.argv[1])  # bert.*, mlp.*, momentum_model.* and the inputs, as saved by make_start.py
cfg = json.loads(open(sys.argv[2]).read())
config = BertConfig(**cfg["bert_config"])
model_args = types.SimpleNamespace(pooler_type="cls", temp=0.05, momentum=cfg["momentum"], do_mlm=False,
                                   neg_size=cfg["neg_size"], mlp_only_train=True, hard_negative_weight=0.0)
model = models.BertForCL(config, model_args=model_args)
state = {k: v for k, v in start.items() if not k.startswith("inputs.")}
missing, unexpected = model.load_state_dict(state, strict=False)
assert not unexpected and all("position_ids" in k for k in missing), (missing, unexpected)
model = model.double()

source = open("trainers.py").read()
node = next(n for n in ast.walk(ast.parse(source)) if isinstance(n, ast.FunctionDef) and n.name == "compute_loss")
import textwrap  # noqa: E402

scope = {"torch": torch}
exec(textwrap.dedent(ast.get_source_segment(source, node)), scope)
trainer = types.SimpleNamespace(model_args=model_args, pre_z1=None, args=types.SimpleNamespace(past_index=-1), label_smoother=None)
optimizer = torch.optim.SGD([p for p in model.parameters() if p.requires_grad], lr=cfg["lr"])
names = [n for n, p in model.named_parameters() if p.requires_grad]
steps = []
for step in range(3):
    inputs = {"input_ids": start[f"inputs.{step}.input_ids"], "attention_mask": start[f"inputs.{step}.attention_mask"],
              "token_type_ids": torch.zeros_like(start[f"inputs.{step}.input_ids"])}
    optimizer.zero_grad()
    loss = scope["compute_loss"](trainer, model, inputs)
    loss.backward()
    grads = {n: (p.grad if p.grad is not None else torch.zeros_like(p)) for n, p in model.named_parameters() if p.requires_grad}
    steps.append({
        "loss": loss.item(),
        "grad_sum": {n: grads[n].sum().item() for n in names},
        "grad_sq": {n: grads[n].square().sum().item() for n in names},
        "grad_full": {n: grads[n].tolist() for n in ("mlp.dense.weight",)},
        "queue_after": F.normalize(trainer.pre_z1, dim=1).tolist(),
    })
    optimizer.step()
print(json.dumps({"transformers": transformers.__version__, "torch": torch.__version__, "start_sha256": cfg["start_sha256"],
                  "steps": steps}))
