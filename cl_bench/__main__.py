"""``python -m cl_bench`` (and ``torchrun ... -m cl_bench``): the ``cl-bench`` command."""

from cl_bench.cli import main

if __name__ == "__main__":
    main()
