"""Training methods. Each built-in method is one folder here, ``<name>/``: ``configuration.py`` (its spec: keys,
types, rules; torch-free), ``modeling.py`` (its ``nn.Module``, the YAML's ``_target_``) and an ``__init__.py`` that
imports nothing; its YAML is ``conf/method/<name>.yaml``. ``base.py``, ``prompt_base.py`` and ``specs.py`` (the rules
several specs share) are the shared modules.
"""
