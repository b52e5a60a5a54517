"""The pooler names (:mod:`cl_bench.models.poolers` pools), apart from the poolers' torch code so that
config validation checks ``pooler=`` before torch is imported."""

POOLERS: tuple[str, ...] = ("cls", "cls_before_pooler", "avg", "avg_top2", "avg_first_last", "mask", "prompt_last", "last_token")
#: poolers that read one token of the prompt (the input must be built with a prompt)
PROMPT_POOLERS: tuple[str, ...] = ("mask", "prompt_last")
#: poolers that average token states (``model.include_prompt=false`` drops the prompt's tokens from them)
AVERAGING_POOLERS: tuple[str, ...] = ("avg", "avg_top2", "avg_first_last")
