import sys

from moverkit.cli import main

sys.exit(main())
