"""Training methods. Each method is one module here plus one YAML in ``conf/method/``.

The YAML's ``_target_`` names the method class; its other keys are the class's keyword arguments.
"""
