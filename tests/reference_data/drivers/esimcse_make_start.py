"""cl-bench's side: save the start weights and inputs for run_reference.py (run in cl-bench's environment)."""
import json
import sys
from pathlib import Path

import torch
from safetensors.torch import save_file

sys.path[:0] = ["/work/wt/i40enc/tests"]
import esimcse_reference_setup as setup  # noqa: E402 - from the path set just above

start = sys.argv[1]
method, state = setup.build(Path(f"/tmp/ref_esimcse/models_{start}"), start)
tensors = {k: v for k, v in state.items() if "position_ids" not in k}
for step, (first, second) in enumerate(setup.BATCHES):
    tensors[f"inputs.{step}.input_ids"] = torch.tensor([[a, b] for a, b in zip(first, second, strict=True)])
    tensors[f"inputs.{step}.attention_mask"] = torch.tensor([[a, b] for a, b in zip(setup.attention(first), setup.attention(second), strict=True)])
save_file(tensors, f"/tmp/ref_esimcse/start_{start}.safetensors")
config = json.loads(Path(f"/tmp/ref_esimcse/models_{start}/online/config.json").read_text())
bert_config = {k: config[k] for k in ("vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads",
                                       "intermediate_size", "max_position_embeddings")}
bert_config |= {"hidden_dropout_prob": 0.0, "attention_probs_dropout_prob": 0.0}
json.dump({"bert_config": bert_config, "momentum": setup.MOMENTUM, "neg_size": setup.NEG_SIZE, "lr": setup.LR,
           "start_sha256": setup.state_sha256(state)}, open(f"/tmp/ref_esimcse/setup_{start}.json", "w"))
print("saved", setup.state_sha256(state))
