"""``python -m cl_bench`` (and ``torchrun ... -m cl_bench``): the ``cl-bench`` command."""

from cl_bench.commands.cli import main

if __name__ == "__main__":
    main()
