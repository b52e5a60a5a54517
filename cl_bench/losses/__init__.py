"""Objectives as pure tensor functions (no model, no config, no state).

Each ``loss=`` option is one function here; its spec (:mod:`cl_bench.losses.specs`) declares its kind: the call a
method makes to it. A method's spec declares the kinds it calls (``MethodSpec.loss_kinds``), so an option that a method
cannot call is rejected before any model loads, and a method's own objective (SG-OPT's variants,
CERT's queue InfoNCE, IS-BERT's JSD estimator, QuickThoughts' neighbour classifier) is a ``loss=``
option like the others.

Kinds (the positional arguments; hyperparameters are keyword-only):

* ``pair``: ``loss(anchors, positives, hard_negatives=None, *, labels=None, ...)`` — two views
  (row i of each is the same item); most losses. All go through :mod:`cl_bench.losses.similarity`.
* ``guided_pair``: ``loss(anchors, positives, hard_negatives=None, *, guide, ...)`` — a pair loss that also takes a
  frozen guide encoder's embeddings of the same columns (GISTEmbed, ``loss=gist``; ``method=simcse_sup``).
* ``two_view``: ``loss(z1, z2, *, ...)`` — two views' projections, no negatives (Barlow Twins).
* ``predict_target``: ``loss(predictions_1, predictions_2, targets_1, targets_2)`` — online
  predictions against momentum-target projections of the other view (BYOL).
* ``swapped_prediction``: ``loss(scores_1, scores_2, *, ...)`` — two views' prototype scores (SwAV).
* ``memory_bank``: ``loss(features, positives, noise, *, num_data, partition, ...)`` — features
  against their own bank entries and sampled noise entries (instance discrimination, Wu et al.).
* ``classifier``: ``loss(logits, labels)`` — a method's classifier head over sentence pairs (SBERT NLI).
* ``scored_pair``: ``loss(u, v, scores)`` — pairs with gold similarity scores (SBERT STS-B regression).
* ``triplet``: ``loss(anchors, positives, negatives, *, ...)`` — given triplets (SBERT's triplet objective).
"""
