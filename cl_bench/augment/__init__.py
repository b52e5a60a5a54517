"""View generators: text-level augmentations (seeded) and embedding-level cutoffs.

One module per family, one class per ``augmentation=`` option (``conf/augmentation/``):
:mod:`~cl_bench.augment.base` (none, dropout), :mod:`~cl_bench.augment.words` (crop,
word_deletion, delete_one_word), :mod:`~cl_bench.augment.eda` (eda_synonym, eda_insert, eda_swap,
eda_delete; WordNet via :mod:`~cl_bench.augment.lexicon`), :mod:`~cl_bench.augment.synonym` (synonym,
nlpaug's rule), :mod:`~cl_bench.augment.mlm_replace`
(mlm_replace), :mod:`~cl_bench.augment.cutoff` (token_cutoff, feature_cutoff, span_cutoff) and
:mod:`~cl_bench.augment.back_translation` (back_translation, also used by CERT).
"""
