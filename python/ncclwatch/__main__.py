"""python -m ncclwatch run -- torchrun ...: the same as the `ncclwatch` command."""
import sys

from ._cli import main

sys.exit(main())
