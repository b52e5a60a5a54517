"""LLM2Vec 0.2.3's bidirectional Mistral (llm2vec.models.bidirectional_mistral.MistralBiModel, transformers
4.44.2) on the tiny sliding-window Mistral saved by cl-bench's tests/tiny_decoders.py; prints JSON of the
float64 last hidden states for fixed inputs (eager and SDPA attention)."""
import hashlib
import json
import sys

import llm2vec
import torch
import transformers
from llm2vec.models.bidirectional_mistral import MistralBiModel
from safetensors.torch import load_file
from transformers import MistralConfig

model_dir = sys.argv[1]
saved = json.load(open(f"{model_dir}/config.json"))
state = load_file(f"{model_dir}/model.safetensors")
weights_sha = hashlib.sha256(b"".join(state[k].double().numpy().tobytes() for k in sorted(state))).hexdigest()
INPUT_IDS = [[1, 40, 41, 42, 43, 44, 45, 46], [1, 50, 51, 52, 53, 2, 2, 2]]
ATTENTION_MASK = [[1] * 8, [1, 1, 1, 1, 1, 0, 0, 0]]
out = {"llm2vec": llm2vec.__version__ if hasattr(llm2vec, "__version__") else "0.2.3",
       "transformers": transformers.__version__, "torch": torch.__version__, "weights_sha256": weights_sha,
       "sliding_window": saved["sliding_window"], "input_ids": INPUT_IDS, "attention_mask": ATTENTION_MASK}
for attn in ("eager", "sdpa"):
    config = MistralConfig(vocab_size=saved["vocab_size"], hidden_size=saved["hidden_size"],
                           intermediate_size=saved["intermediate_size"], num_hidden_layers=saved["num_hidden_layers"],
                           num_attention_heads=saved["num_attention_heads"], num_key_value_heads=saved["num_key_value_heads"],
                           max_position_embeddings=saved["max_position_embeddings"], rms_norm_eps=saved["rms_norm_eps"],
                           rope_theta=saved["rope_parameters"]["rope_theta"], sliding_window=saved["sliding_window"],
                           attn_implementation=attn)
    model = MistralBiModel(config)
    missing, unexpected = model.load_state_dict(state, strict=True), None
    model = model.double().eval()
    with torch.no_grad():
        hidden = model(input_ids=torch.tensor(INPUT_IDS), attention_mask=torch.tensor(ATTENTION_MASK)).last_hidden_state
    out[f"last_hidden_state_{attn}"] = hidden.tolist()
print(json.dumps(out))
