"""python -m ncclwatch run -- torchrun ... (or sql EXPORT QUERY): the same as the `ncclwatch` command."""
import sys

from ._cli import main

sys.exit(main())
